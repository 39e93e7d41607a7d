#!/usr/bin/env bash
# a_once.sh LIB.so [N] : workload A, 16 threads with every call at once
# (--overlap, --verify sig, as the main job judges), seeds 1..N (15); prints
# the medians and ranges of the peak footprint and the touched pages (MiB).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../../../.." && pwd)"
bench="${BENCH:-$repo/build/bench/enclave/enclave_bench}"
lib=$1 n=${2:-15}
for s in $(seq 1 "$n"); do
  "$bench" --allocator "$lib" --workload a --threads 16 --overlap --verify sig --seed "$s" |
    grep '^result' | grep -o 'footprint_peak=[0-9]*\|touched_bytes=[0-9]*' | cut -d= -f2 |
    tr '\n' ' '
  echo
done | python3 -c '
import statistics, sys
rows = [[int(x) / 2**20 for x in line.split()] for line in sys.stdin if line.strip()]
for name, col in (("footprint", 0), ("touched", 1)):
    v = [r[col] for r in rows]
    print(f"{name} median {statistics.median(v):.3f} MiB [{min(v):.2f}-{max(v):.2f}]", end="  ")
print(f"(n={len(rows)})")
'
