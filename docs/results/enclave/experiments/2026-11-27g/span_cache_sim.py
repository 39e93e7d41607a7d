#!/usr/bin/env python3
"""One heap's span cache in OE's allocation sample (workload A), simulated.

A FIFO of 15 live blocks, each iteration frees the oldest and asks for
rand() % 16384 bytes; requests above fixed mode's slab limit (3072 bytes)
are page spans of 1-4 pages. The cache keeps freed spans up to a budget in
pages and serves a request from a span of its length or up to `slack`
pages longer; a request it cannot serve is a trip to the partition (and
so is a freed span it cannot keep). Prints, per budget and slack, the
trips for allocation and for frees and the mean pages held (live blocks,
as taken, and the cache) for two policies:

  keep-new:      a span over the budget goes back (tessalloc's);
  evict-shorter: shorter kept spans go back to make room for a longer one.

    span_cache_sim.py [ITERATIONS]
"""
from __future__ import annotations

import collections
import random
import sys

SLAB_LIMIT = 3072
CACHE_PAGES = 32


def simulate(evict_shorter: bool, budget: int, slack: int, iterations: int,
             seed: int = 1) -> tuple[int, int, float]:
    """(allocation trips, free trips, mean pages held) of one run."""
    rng = random.Random(seed)
    fifo: collections.deque[int] = collections.deque()
    cache: collections.Counter[int] = collections.Counter()
    cached = trips_alloc = trips_free = held = 0
    for _ in range(iterations):
        if len(fifo) >= 15:
            pages = fifo.popleft()
            if pages and cached + pages <= budget:
                cache[pages] += 1
                cached += pages
            elif pages and evict_shorter:
                for length in range(1, pages):
                    while cache[length] and cached + pages > budget:
                        cache[length] -= 1
                        cached -= length
                        trips_free += 1
                if cached + pages <= budget:
                    cache[pages] += 1
                    cached += pages
                else:
                    trips_free += 1
            elif pages:
                trips_free += 1
        size = rng.randrange(16384)
        taken = 0
        if size > SLAB_LIMIT:
            want = (size + 4095) // 4096
            taken = next((n for n in range(want, min(want + slack, CACHE_PAGES) + 1)
                          if cache[n]), 0)
            if taken:
                cache[taken] -= 1
                cached -= taken
            else:
                trips_alloc += 1
                taken = want
        fifo.append(taken)
        held += sum(fifo) + cached
    return trips_alloc, trips_free, held / iterations


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print("budget slack  keep-new: trips (alloc, free), held  "
          "evict-shorter: trips (alloc, free), held")
    for budget in (12, 16, 24):
        for slack in (0, 1, 2, 3):
            cells = []
            for evict in (False, True):
                alloc, free, held = simulate(evict, budget, slack, iterations)
                cells.append(f"({alloc:6d}, {free:6d}) {held:5.1f}")
            print(f"{budget:6d} {slack:5d}  {cells[0]}  {cells[1]}")


if __name__ == "__main__":
    main()
