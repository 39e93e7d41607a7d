#!/usr/bin/env python3
"""Workload B with several builds of the enclave plugin, interleaved: the
fine peak footprint and the peak touched pages, each over the fine peak
live bytes, and the workers' allocation calls per second.

    b_touched.py HOST SECONDS ROUNDS LIB.so [LIB.so ...]

Each round runs every build once (the order reversed every other round,
seed = round number); prints each run, then each build's medians. BENCH
overrides the harness (default: build/ of the repository).
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

BENCH = Path(os.environ.get(
    "BENCH", Path(__file__).resolve().parents[5] / "build/bench/enclave/enclave_bench"))


def one_run(lib: str, host: str, seconds: str, seed: int) -> tuple[float, float, float, int]:
    """Peak ratio, touched ratio, the workers' M calls/s and NULLs of one run."""
    out = subprocess.run([str(BENCH), "--allocator", lib, "--workload", "b", "--host", host,
                          "--duration", seconds, "--seed", str(seed)],
                         capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("result "))
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    live = int(kv["fine_peak_live_bytes"])
    elapsed = float(kv["elapsed_ms"]) / 1000
    return (int(kv["fine_peak_footprint_bytes"]) / live, int(kv["peak_touched_bytes"]) / live,
            int(kv["worker_mallocs"]) / elapsed / 1e6, int(kv["nulls"]))


def main() -> None:
    host, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    libs = sys.argv[4:]
    runs: dict[str, list[tuple[float, float, float, int]]] = {lib: [] for lib in libs}
    for r in range(1, rounds + 1):
        for lib in libs if r % 2 else libs[::-1]:
            run = one_run(lib, host, seconds, r)
            runs[lib].append(run)
            print(f"round {r} {lib}: peak {run[0]:.3f} touched {run[1]:.3f} "
                  f"workers {run[2]:.2f} M/s NULLs {run[3]}", flush=True)
    for lib, rows in runs.items():
        peak, touched, workers = (statistics.median(x[i] for x in rows) for i in range(3))
        print(f"{lib}: median peak {peak:.3f} touched {touched:.3f} workers {workers:.2f} M/s")


if __name__ == "__main__":
    main()
