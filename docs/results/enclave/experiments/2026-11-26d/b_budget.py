#!/usr/bin/env python3
"""One workload-B run of a build of tessalloc's plugin, and where its
footprint goes: the means over the run (run_enclave.py's budget) and the
parts at the four samples with the most live bytes.

    b_budget.py LIB.so HOST SECONDS

Run with the project's venv (.cache/venv/bin/python): it imports
bench/enclave/run_enclave.py.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT / "bench/enclave"))
import run_enclave  # noqa: E402


def main() -> None:
    lib, host, seconds = sys.argv[1:4]
    csv_path, jsonl_path = Path("/tmp/b_budget.csv"), Path("/tmp/b_budget.jsonl")
    subprocess.run([str(ROOT / "build/bench/enclave/enclave_bench"), "--allocator", lib,
                    "--workload", "b", "--host", host, "--duration", seconds,
                    "--csv", str(csv_path), "--stats-jsonl", str(jsonl_path)],
                   capture_output=True, check=True)
    series = run_enclave.read_series(csv_path)
    stats = run_enclave.read_stats_series(jsonl_path)
    parts = run_enclave.footprint_budget(series, stats)
    if parts is None:
        raise SystemExit("no statistics line for some sample")
    live = parts["live"]
    peak = max(series["footprint_bytes"]) / max(series["live_bytes"])
    print(" ".join(f"{k} {v / live:.3f}" for k, v in parts.items()),
          f"total {sum(parts.values()) / live:.3f} peaks {peak:.3f}")
    by_ms = {int(line["time_ms"]): line for line in stats if "time_ms" in line}
    samples = []
    for t_s, live_bytes, footprint in zip(series["t_s"], series["live_bytes"],
                                          series["footprint_bytes"]):
        ms = int(round(t_s * 1000.0))
        line = by_ms.get(ms, by_ms.get(ms - 1, by_ms.get(ms + 1)))
        if line is not None:
            samples.append((live_bytes, footprint, line))
    samples.sort(key=lambda s: -s[0])
    for live_bytes, footprint, line in samples[:4]:
        free = line["slab_free"]
        print(f"  live {live_bytes / 2**20:.2f} MiB: footprint {footprint / live_bytes:.3f}, "
              f"rounding {(line['live_bytes'] - live_bytes) / live_bytes:.3f}, "
              f"current {free['current'] / live_bytes:.3f}, held {free['held'] / live_bytes:.3f}, "
              f"orphaned {free['orphaned'] / live_bytes:.3f}, "
              f"pending {free['pending'] / live_bytes:.3f}, "
              f"large blocks {line['large']['live_bytes'] / live_bytes:.3f}")
    live_bytes, _, line = samples[0]
    classes = sorted(line["classes"], key=lambda c: c["live_bytes"] - c["slab_bytes"])
    print("  most free slab bytes at the top sample (class size: free KiB, slabs, live blocks):")
    for c in classes[:8]:
        print(f"    {c['block_size']}: {(c['slab_bytes'] - c['live_bytes']) / 1024:.0f}, "
              f"{c['slabs']}, {c['live_blocks']}")


if __name__ == "__main__":
    main()
