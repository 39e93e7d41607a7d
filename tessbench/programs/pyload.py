"""tessbench's python workload: a fixed CPU-bound, allocation-heavy job.

Run by tessbench with the allocator under test preloaded into python3.
Each round builds dicts, lists and strings, round-trips them through
json, sorts and groups them, and checks the result two independent ways,
so a broken allocator fails (exit 3) instead of looking fast. Prints

    result workload=python threads=1 ops=<rounds> elapsed_s=F ops_per_s=F
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict


def one_round(rng: random.Random, records: int) -> None:
    """One round of work; raises AssertionError when a check fails."""
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 12)))
             for _ in range(records)]
    rows = [{"id": i, "word": w, "tags": [w[:2], w[-2:]], "score": rng.random()}
            for i, w in enumerate(words)]
    text = json.dumps(rows)
    back = json.loads(text)
    if back != rows:
        raise AssertionError("json round trip changed the data")
    by_prefix: dict[str, list[int]] = defaultdict(list)
    for row in back:
        by_prefix[row["word"][:2]].append(row["id"])
    counts = Counter(w[:2] for w in words)
    if {k: len(v) for k, v in by_prefix.items()} != dict(counts):
        raise AssertionError("grouping and counting disagree")
    ordered = sorted(back, key=lambda r: (r["word"], r["id"]))
    if any((a["word"], a["id"]) > (b["word"], b["id"]) for a, b in zip(ordered, ordered[1:])):
        raise AssertionError("sort order broken")
    joined = ",".join(r["word"] for r in ordered)
    if len(joined) != sum(len(w) for w in words) + len(words) - 1:
        raise AssertionError("joined length wrong")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    start = time.perf_counter()
    try:
        for _ in range(args.rounds):
            one_round(rng, args.records)
    except AssertionError as exc:
        print(f"python workload: check failed: {exc}", file=sys.stderr)
        return 3
    elapsed = time.perf_counter() - start
    print(f"result workload=python threads=1 ops={args.rounds} elapsed_s={elapsed:.6f} "
          f"ops_per_s={args.rounds / elapsed:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
