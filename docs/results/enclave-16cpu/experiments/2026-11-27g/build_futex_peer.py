#!/usr/bin/env python3
"""Two more builds of the snmalloc peer, for comparing waiting on a lock:

- libfixed_snmalloc_futex.so: as the peer was built until the thirtieth
  session (SNMALLOC_USE_WAIT_ON_ADDRESS=1: a queued waiter of the
  combining lock sleeps on a futex after 100 pauses), byte for byte;
- libfixed_snmalloc_ttas.so: the combining lock's `with` replaced by a
  test-and-test-and-set spin lock (in a copy of snmalloc's source under
  BUILD_DIR/snmalloc-ttas), the kind of lock snmalloc 0.6.2, the version
  Open Enclave ships, has in its backend.

    build_futex_peer.py BUILD_DIR

Reads BUILD_DIR/enclave-peers/libfixed_snmalloc.so.cmd (written by
scripts/fetch_fixed_peers.sh BUILD_DIR: the spinning peer) and writes both
into BUILD_DIR.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SPIN = "-DSNMALLOC_USE_WAIT_ON_ADDRESS=0"
# In `with` (ds/combininglock.h), before its fast path: every caller takes
# the flag itself, spinning on a plain load while it is held.
TTAS_AFTER = """    PreventFork pf;
    snmalloc::UNUSED(pf);
"""
TTAS_LOCK = """    while (lock.flag.exchange(true, stl::memory_order_acquire))
    {
      while (lock.flag.load(stl::memory_order_relaxed))
        Aal::pause();
    }
    f();
    lock.release();
    return;
"""


def compile_variant(cmd: list[str], output: Path, source: Path | None = None) -> None:
    """cmd with its output (and, given source, its snmalloc include) replaced."""
    cmd = list(cmd)
    cmd[cmd.index("-o") + 1] = str(output)
    if source is not None:
        cmd = [f"-I{source}" if a.startswith("-I") and a.endswith("upstream/src") else a
               for a in cmd]
    subprocess.run(cmd, check=True)
    print(f"wrote {output}")


def main() -> None:
    build = Path(sys.argv[1]).resolve()
    cmd = [a for a in (build / "enclave-peers/libfixed_snmalloc.so.cmd").read_text().split("\n")
           if a]
    if SPIN not in cmd:
        sys.exit(f"{SPIN} not in the peer's command: built before the thirtieth session?")
    futex = list(cmd)
    futex[futex.index(SPIN)] = "-DSNMALLOC_USE_WAIT_ON_ADDRESS=1"
    compile_variant(futex, build / "libfixed_snmalloc_futex.so")

    upstream = next(Path(a[2:]) for a in cmd if a.startswith("-I") and a.endswith("upstream/src"))
    copy = build / "snmalloc-ttas"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(upstream, copy)
    lock_h = copy / "snmalloc/ds/combininglock.h"
    text = lock_h.read_text()
    if text.count(TTAS_AFTER) != 1:
        sys.exit(f"{lock_h}: not the snmalloc 0.7.6 `with` this script patches")
    lock_h.write_text(text.replace(TTAS_AFTER, TTAS_AFTER + TTAS_LOCK))
    compile_variant(cmd, build / "libfixed_snmalloc_ttas.so", copy)


if __name__ == "__main__":
    main()
