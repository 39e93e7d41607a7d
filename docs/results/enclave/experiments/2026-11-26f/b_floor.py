#!/usr/bin/env python3
"""How low B's footprint per live byte could go with tessalloc's blocks
(seventeenth session): at each sample of a main-job run (docs/results/
enclave/b_tessalloc_HOST.csv and its _stats.jsonl), the allocator's live
block bytes (large blocks in whole pages, small ones at their class size)
over the live requested bytes, and the floor: those blocks packed with no
free space at all, plus a 64-byte descriptor per 4 KiB page (1/64). The
samples with the most live bytes first, as the target's peaks are.

    b_floor.py [RESULTS_DIR]
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/enclave")
    for host in ("pooled", "new-thread"):
        rows = list(csv.DictReader(open(results / f"b_tessalloc_{host}.csv")))
        stats = {int(j["time_ms"]): j
                 for j in map(json.loads, open(results / f"b_tessalloc_{host}_stats.jsonl"))}
        samples = []
        for row in rows:
            line = stats.get(round(float(row["t_s"]) * 1000))
            if line is None:
                continue
            live = float(row["live_bytes"])
            blocks = line["live_bytes"] / live
            samples.append((live, float(row["footprint_bytes"]) / live, blocks, blocks * 65 / 64))
        samples.sort(reverse=True)
        print(f"{host}: {len(samples)} samples; the 6 with the most live bytes:")
        for live, ratio, blocks, floor in samples[:6]:
            print(f"  live {live / 2**20:6.2f} MiB: footprint/live {ratio:.3f},"
                  f" blocks/live {blocks:.3f}, floor {floor:.3f}")
        n = len(samples)
        print(f"  means over the run: blocks/live {sum(s[2] for s in samples) / n:.3f},"
              f" floor {sum(s[3] for s in samples) / n:.3f}")


if __name__ == "__main__":
    main()
