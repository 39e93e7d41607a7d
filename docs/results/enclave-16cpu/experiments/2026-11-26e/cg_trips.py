#!/usr/bin/env python3
"""The span path in a callgrind profile: cg_trips.py CALLGRIND_OUT LIB_NAME

Prints the instructions spent in the object whose name contains LIB_NAME
(the allocator plugin) and the calls of the functions on the way to and
from the partitions (tessi_pages_alloc: a heap's trip for a span;
tessi_pages_free: a span given back; footprint_apply: the bound's update).
"""
from __future__ import annotations

import re
import subprocess
import sys

WANTED = re.compile(r"^(tessi_pages_alloc|tessi_pages_free|footprint_apply)(\.|$)")


def allocator_instructions(profile: str, lib: str) -> int:
    text = subprocess.run(["callgrind_annotate", "--threshold=100", profile],
                          capture_output=True, text=True, check=True).stdout
    total = 0
    for line in text.splitlines():
        words = line.split()
        if lib in line and words and words[0][:1].isdigit():
            total += int(words[0].replace(",", ""))
    return total


def calls(profile: str) -> dict[str, int]:
    """Calls per function, summed over every call site (cfn= / calls= lines)."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    callee = None
    for line in open(profile):
        m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line.strip())
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            callee = m.group(2) if m.group(1) == "cfn" else None
        elif line.startswith("calls=") and callee is not None:
            counts[callee] = counts.get(callee, 0) + int(line.split("=")[1].split()[0])
    return {names.get(k, k): v for k, v in counts.items()}


def main() -> None:
    profile, lib = sys.argv[1], sys.argv[2]
    found = {WANTED.match(n).group(1): c for n, c in calls(profile).items() if WANTED.match(n)}
    print(f"allocator_instructions={allocator_instructions(profile, lib) / 1e6:.1f}M",
          " ".join(f"{name}={found[name]}" for name in sorted(found)))


if __name__ == "__main__":
    main()
