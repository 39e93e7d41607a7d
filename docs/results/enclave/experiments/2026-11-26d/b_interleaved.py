#!/usr/bin/env python3
"""Workload B with several builds of the enclave plugin, interleaved.

    b_interleaved.py HOST SECONDS ROUNDS LIB.so [LIB.so ...]

Each round runs every build once (the order reversed every other round)
and prints, per run and per build: the mean footprint over the mean live
requested bytes (the samples run_enclave.py's 'over time' ratio takes),
the ratio of the peaks, calls per second and NULLs.
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[5] / "build/bench/enclave/enclave_bench"


def one_run(lib: str, host: str, seconds: str, csv_path: Path) -> tuple[float, float, float, int]:
    out = subprocess.run([str(BENCH), "--allocator", lib, "--workload", "b", "--host", host,
                          "--duration", seconds, "--csv", str(csv_path)],
                         capture_output=True, text=True, check=True).stdout
    with csv_path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    live = [float(r["live_bytes"]) for r in rows]
    footprint = [float(r["footprint_bytes"]) for r in rows]
    found = re.search(r"ecalls_per_s=([\d.]+).*? nulls=(\d+)", out)
    if found is None:
        raise SystemExit(f"no result line from {lib}")
    return (sum(footprint[2:-1]) / sum(live[2:-1]), max(footprint) / max(live),
            float(found.group(1)), int(found.group(2)))


def main() -> None:
    host, seconds, rounds, libs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    results: dict[str, list[tuple[float, float, float, int]]] = {lib: [] for lib in libs}
    csv_path = Path("/tmp/b_interleaved.csv")
    for r in range(rounds):
        for lib in libs if r % 2 == 0 else libs[::-1]:
            mean, peak, calls, nulls = one_run(lib, host, seconds, csv_path)
            results[lib].append((mean, peak, calls, nulls))
            print(f"{lib}: mean {mean:.3f} peak {peak:.3f} calls/s {calls:.0f} nulls {nulls}",
                  flush=True)
    for lib, runs in results.items():
        n = len(runs)
        print(f"== {lib}: mean {sum(x[0] for x in runs) / n:.3f} "
              f"peak {sum(x[1] for x in runs) / n:.3f} (max {max(x[1] for x in runs):.3f}) "
              f"calls/s {sum(x[2] for x in runs) / n:.0f} nulls {sum(x[3] for x in runs)}")


if __name__ == "__main__":
    main()
