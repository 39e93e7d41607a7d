#!/usr/bin/env python3
"""The snmalloc peer as it was built until the thirtieth session (its
combining lock parks waiters on a futex: SNMALLOC_USE_WAIT_ON_ADDRESS=1),
beside the spinning one that build_peers.py makes now, for comparing the
two on a device.

    build_futex_peer.py BUILD_DIR

Reads BUILD_DIR/enclave-peers/libfixed_snmalloc.so.cmd (written by
scripts/fetch_fixed_peers.sh BUILD_DIR), flips the flag and writes
BUILD_DIR/libfixed_snmalloc_futex.so.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def main() -> None:
    build = Path(sys.argv[1])
    cmd = [a for a in (build / "enclave-peers/libfixed_snmalloc.so.cmd").read_text().split("\n")
           if a]
    spin = "-DSNMALLOC_USE_WAIT_ON_ADDRESS=0"
    if spin not in cmd:
        sys.exit(f"{spin} not in the peer's command: built before the thirtieth session?")
    cmd[cmd.index(spin)] = "-DSNMALLOC_USE_WAIT_ON_ADDRESS=1"
    cmd[cmd.index("-o") + 1] = str(build / "libfixed_snmalloc_futex.so")
    subprocess.run(cmd, check=True)
    print(f"wrote {build / 'libfixed_snmalloc_futex.so'}")


if __name__ == "__main__":
    main()
