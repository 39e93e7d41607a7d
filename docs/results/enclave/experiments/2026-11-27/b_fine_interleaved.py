#!/usr/bin/env python3
"""Workload B with several builds of the enclave plugin, interleaved, read
as run_enclave.py judges since the twenty-third session: the fine peaks
(footprint and live bytes also read every 2 ms) and the workers'
allocation calls per second, from enclave_bench's result line.

    b_fine_interleaved.py HOST SECONDS ROUNDS LIB.so [LIB.so ...]

Each round runs every build once (the order reversed every other round,
seed = round number); prints each run, then per build the median peak
ratio (with its range) and the medians of all threads' and the workers'
allocation calls per second.
"""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[5] / "build/bench/enclave/enclave_bench"


def one_run(lib: str, host: str, seconds: str, seed: int) -> tuple[float, float, float, int]:
    """Peak ratio, calls/s, the workers' calls/s and NULLs of one run."""
    out = subprocess.run([str(BENCH), "--allocator", lib, "--workload", "b", "--host", host,
                          "--duration", seconds, "--seed", str(seed)],
                         capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("result "))
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    elapsed = float(kv["elapsed_ms"]) / 1000
    return (int(kv["fine_peak_footprint_bytes"]) / int(kv["fine_peak_live_bytes"]),
            int(kv["mallocs"]) / elapsed, int(kv["worker_mallocs"]) / elapsed, int(kv["nulls"]))


def main() -> None:
    host, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    libs = sys.argv[4:]
    runs: dict[str, list[tuple[float, float, float, int]]] = {lib: [] for lib in libs}
    for r in range(rounds):
        for lib in libs if r % 2 == 0 else libs[::-1]:
            runs[lib].append(one_run(lib, host, seconds, r + 1))
            print(lib, "peak %.3f calls/s %.0f workers %.0f nulls %d" % runs[lib][-1], flush=True)
    for lib, got in runs.items():
        peaks = [x[0] for x in got]
        print(f"== {lib} peak med {statistics.median(peaks):.3f} "
              f"({min(peaks):.3f}-{max(peaks):.3f}) "
              f"calls {statistics.median(x[1] for x in got):.0f} "
              f"workers {statistics.median(x[2] for x in got):.0f}")


if __name__ == "__main__":
    main()
