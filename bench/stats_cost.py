#!/usr/bin/env python3
"""What the always-on statistics counters cost on the fast path.

Counts instructions per malloc+free pair (bench/pair under callgrind, the
method of core_bench.py) for libtessalloc.so as built (counters on) and for
the same sources configured with -DTESS_COUNTERS=OFF, at 32, 64 and 512
bytes; the issue's target is at most 5 % more. Builds the OFF variant
itself (cmake, in <build>-nocounters) and writes docs/results/stats/.

    stats_cost.py [--build build] [--out docs/results/stats]
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

# the tessbench package (shared helpers) is at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tessbench.benchlib import (REPO_ROOT, BenchError, command_line, common_meta, header_lines,
                      machine_info, write_json_atomic)  # noqa: E402
from core_bench import Allocator, CallgrindResult, measure_pairs

SIZES = (32, 64, 512)
TARGET = 1.05


def build_variant(source: Path, build: Path, counters: bool) -> Path:
    """Build libtessalloc.so and pair; return the library. The counters-on
    build is the caller's (configured as Release if it is not yet); the
    counters-off one is configured here, in a directory of its own."""
    if not counters:
        flags = ["-DCMAKE_BUILD_TYPE=Release", "-DTESS_COUNTERS=OFF", "-DTESS_BUILD_TESTS=OFF"]
    elif not (build / "CMakeCache.txt").is_file():
        flags = ["-DCMAKE_BUILD_TYPE=Release"]
    else:
        flags = []
    if flags:
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *flags], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "--target", "tessalloc", "pair", "-j2"],
                   check=True, stdout=subprocess.DEVNULL)
    return build / "libtessalloc.so"


def table(on: dict[int, CallgrindResult], off: dict[int, CallgrindResult]) -> list[str]:
    """Whole program per pair (the target's measure: bench/pair's loop
    included, as in docs/results/core/) and inside the library alone."""
    lines = ["| size B | Ir/pair off | Ir/pair on | on ÷ off | in library: off | on | on ÷ off "
             "| extra Ir | stable | target: on ÷ off ≤ 1.05 |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for size in SIZES:
        a, b = off[size], on[size]
        ratio = b.per_pair / a.per_pair
        lines.append(f"| {size} | {a.per_pair:.1f} | {b.per_pair:.1f} | {ratio:.3f} "
                     f"| {a.lib_per_pair:.1f} | {b.lib_per_pair:.1f} "
                     f"| {b.lib_per_pair / a.lib_per_pair:.3f} "
                     f"| {b.per_pair - a.per_pair:+.1f} "
                     f"| {'yes' if a.stable and b.stable else 'NO'} "
                     f"| {'PASS' if ratio <= TARGET else 'FAIL'} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", type=Path, default=REPO_ROOT / "build")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "results" / "stats")
    p.add_argument("--pairs", type=int, nargs=2, default=(20000, 120000), metavar=("N1", "N2"))
    args = p.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    command = command_line(argv, "stats_cost.py")
    try:
        on_lib = build_variant(REPO_ROOT, args.build, True)
        off_build = Path(f"{args.build}-nocounters")
        off_lib = build_variant(REPO_ROOT, off_build, False)
        pair = args.build / "bench" / "pair"
        on: dict[int, CallgrindResult] = {}
        off: dict[int, CallgrindResult] = {}
        n1, n2 = args.pairs
        with tempfile.TemporaryDirectory() as tmp:
            for size in SIZES:
                for name, lib, store in (("counters-on", on_lib, on),
                                         ("counters-off", off_lib, off)):
                    alloc = Allocator(name, str(lib), "", "build")
                    store[size] = measure_pairs(pair, alloc, size, n1, n2, 1000, Path(tmp),
                                                600.0)
                    print(f"stats_cost: {name} {size} B: "
                          f"{store[size].lib_per_pair:.1f} Ir/pair", file=sys.stderr)
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"stats_cost: {e}", file=sys.stderr)
        return 1
    finished = datetime.datetime.now(datetime.timezone.utc)
    meta = common_meta(command, started, finished, machine_info(), args.build,
                       args.out)
    lines = header_lines("tessalloc statistics counters: fast-path cost", meta)
    lines += ["", "Instructions per malloc+free pair (callgrind, bench/pair, "
              "(Ir(N2) - Ir(N1)) / (N2 - N1) with N1, N2 = "
              f"{n1}, {n2}): the whole program (the loop's own instructions included, "
              "as in docs/results/core/) and inside libtessalloc.so alone; the default "
              "build (counters on) against one configured with `-DTESS_COUNTERS=OFF` "
              "(same sources, counters compiled out). Instruction counts do not depend on "
              "machine load.", ""]
    lines += table(on, off)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    write_json_atomic({**meta, "results": {
        str(s): {"on": on[s].per_pair, "off": off[s].per_pair,
                 "on_in_library": on[s].lib_per_pair, "off_in_library": off[s].lib_per_pair}
        for s in SIZES}}, args.out / "meta.json")
    print("\n".join(table(on, off)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
