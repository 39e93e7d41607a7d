#!/usr/bin/env python3
"""Workload B with several builds of the enclave plugin, interleaved, read
the ways run_enclave.py judges: the fine peaks (footprint ÷ live bytes,
read every 2 ms), the mean footprint ÷ live over the run's samples, the
touched pages ÷ peak live bytes, allocation calls per second (all
threads, and the workers alone), and the workers' calls per second of
their own CPU time.

    b_compare.py HOST SECONDS ROUNDS LIB.so [LIB.so ...]

Extra enclave_bench options (such as --workers 1 --others 0) go in the
environment variable B_ARGS.

Each round runs every build once (the order reversed every other round,
seed = round number); prints each run, then per build the medians.
"""
from __future__ import annotations

import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parents[5] / "build/bench/enclave/enclave_bench"
FIELDS = ("peak", "over_time", "touched", "calls", "workers", "per_cpu", "nulls")


def one_run(lib: str, host: str, seconds: str, seed: int) -> dict[str, float]:
    """The judged figures of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        series = Path(tmp) / "b.csv"
        out = subprocess.run([str(BENCH), "--allocator", lib, "--workload", "b", "--host", host,
                              "--duration", seconds, "--seed", str(seed), "--csv", str(series),
                              *os.environ.get("B_ARGS", "").split()],
                             capture_output=True, text=True, check=True).stdout
        with series.open(newline="") as fh:
            rows = list(csv.DictReader(fh))[2:-1]  # less start-up and teardown
    line = next(x for x in out.splitlines() if x.startswith("result "))
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    elapsed = float(kv["elapsed_ms"]) / 1000
    live = sum(float(r["live_bytes"]) for r in rows)
    footprint = sum(float(r["footprint_bytes"]) for r in rows)
    return {"peak": int(kv["fine_peak_footprint_bytes"]) / int(kv["fine_peak_live_bytes"]),
            "over_time": footprint / live,
            "touched": int(kv["touched_bytes"]) / int(kv["peak_live_bytes"]),
            "calls": int(kv["mallocs"]) / elapsed,
            "workers": int(kv["worker_mallocs"]) / elapsed,
            "per_cpu": int(kv["worker_mallocs"]) / float(kv["worker_cpu_s"]),
            "nulls": int(kv["nulls"])}


def show(lib: str, run: dict[str, float]) -> str:
    """One line of figures."""
    return (f"{lib} peak {run['peak']:.3f} over time {run['over_time']:.3f} "
            f"touched {run['touched']:.3f} calls/s {run['calls']:.0f} "
            f"workers {run['workers']:.0f} per CPU-s {run['per_cpu']:.0f} "
            f"nulls {run['nulls']:.0f}")


def main() -> None:
    host, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    libs = sys.argv[4:]
    runs: dict[str, list[dict[str, float]]] = {lib: [] for lib in libs}
    for r in range(rounds):
        for lib in libs if r % 2 == 0 else libs[::-1]:
            runs[lib].append(one_run(lib, host, seconds, r + 1))
            print(show(lib, runs[lib][-1]), flush=True)
    for lib, got in runs.items():
        print("== " + show(lib, {f: statistics.median(x[f] for x in got) for f in FIELDS}))


if __name__ == "__main__":
    main()
