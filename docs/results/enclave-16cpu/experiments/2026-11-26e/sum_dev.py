#!/usr/bin/env python3
"""Medians of a device call's runs: sum_dev.py dev8_a.txt [dev8_b.txt]

A lines ("A LIB THREADS k=v...", "Aonce LIB k=v...", "Along LIB k=v..."):
median ms and the range of peak footprints. B lines ("Bpooled LIB k=v..."):
median calls per second and each run's peak footprint / peak live bytes.
"""
from __future__ import annotations

import collections
import statistics
import sys

MIB = 2 ** 20


def fields(words: list[str]) -> dict[str, str]:
    return dict(w.split("=", 1) for w in words if "=" in w)


def main() -> None:
    runs_a: dict[tuple[str, int, str], list[tuple[float, int]]] = collections.defaultdict(list)
    runs_b: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
    for path in sys.argv[1:]:
        for line in open(path):
            words = line.split()
            if len(words) < 2:
                continue
            kv = fields(words)
            if words[0].startswith("A") and "elapsed_ms" in kv:
                threads = int(words[2]) if words[0] == "A" else 16
                runs_a[(words[0], threads, words[1])].append(
                    (float(kv["elapsed_ms"]), int(kv["footprint_peak"])))
            elif words[0].startswith("B") and "ecalls_per_s" in kv:
                runs_b[(words[0], words[1])].append(
                    (float(kv["ecalls_per_s"]),
                     int(kv["peak_footprint_bytes"]) / int(kv["peak_live_bytes"])))
    for (kind, threads, lib), v in sorted(runs_a.items()):
        print(f"{kind:6s} {threads:3d} {lib:18s} ms {statistics.median(t for t, _ in v):8.2f}"
              f"  peak MiB {min(f for _, f in v) / MIB:.2f}-{max(f for _, f in v) / MIB:.2f}"
              f"  ({len(v)} runs)")
    for (kind, lib), v in sorted(runs_b.items()):
        print(f"{kind:12s} {lib:18s} calls/s {statistics.median(c for c, _ in v):9.0f}"
              f"  peaks {' '.join(f'{r:.3f}' for _, r in v)}")


if __name__ == "__main__":
    main()
