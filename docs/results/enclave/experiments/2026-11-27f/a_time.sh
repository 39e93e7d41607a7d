#!/usr/bin/env bash
# a_time.sh THREADS N LIB.so... : workload A at THREADS threads, N interleaved
# rounds (seed = round), every plugin once per round; prints each plugin's
# median elapsed ms. BENCH overrides the harness (default: build/ of the
# repository).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../../../.." && pwd)"
bench="${BENCH:-$repo/build/bench/enclave/enclave_bench}"
threads=$1 rounds=$2
shift 2
for i in $(seq 1 "$rounds"); do
  for lib in "$@"; do
    ms=$("$bench" --allocator "$lib" --workload a --threads "$threads" --verify head --seed "$i" |
      grep -o 'elapsed_ms=[0-9.]*' | head -1 | cut -d= -f2)
    echo "$lib $ms"
  done
done | python3 -c '
import collections, statistics, sys
times = collections.defaultdict(list)
for line in sys.stdin:
    lib, ms = line.split()
    times[lib].append(float(ms))
for lib, ms in times.items():
    print(f"{statistics.median(ms):7.2f} ms (n={len(ms)})  {lib}")
'
