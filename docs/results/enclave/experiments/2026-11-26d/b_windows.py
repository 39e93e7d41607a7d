#!/usr/bin/env python3
"""A long workload-B run cut into windows: per window, the mean footprint
over the mean live requested bytes, and the ratio of the window's peaks;
then the whole run's ratio of the peaks. Shows whether the footprint per
live byte drifts as the run goes on.

    b_windows.py B_CSV [WINDOWS]      (enclave_bench --csv; default 6)
"""
from __future__ import annotations

import csv
import sys

MIB = 1 << 20


def main() -> None:
    path = sys.argv[1]
    windows = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))[2:-1]  # less start-up and teardown
    t = [float(r["t_s"]) for r in rows]
    live = [float(r["live_bytes"]) for r in rows]
    footprint = [float(r["footprint_bytes"]) for r in rows]
    size = len(rows) // windows
    print("| seconds | mean footprint ÷ live | peak footprint MiB | peak live MiB | peaks |")
    print("|---|---:|---:|---:|---:|")
    for w in range(windows):
        a, b = w * size, len(rows) if w == windows - 1 else (w + 1) * size
        lv, fp = live[a:b], footprint[a:b]
        print(f"| {t[a]:.0f}–{t[b - 1]:.0f} | {sum(fp) / sum(lv):.3f} | {max(fp) / MIB:.2f} "
              f"| {max(lv) / MIB:.2f} | {max(fp) / max(lv):.3f} |")
    print(f"| all | {sum(footprint) / sum(live):.3f} | {max(footprint) / MIB:.2f} "
          f"| {max(live) / MIB:.2f} | {max(footprint) / max(live):.3f} |")


if __name__ == "__main__":
    main()
