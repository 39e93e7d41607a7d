#!/bin/bash
# How many heaps widen on 2 CPUs (seventeenth session): workload A at 8, 12
# and 16 threads and with every call at once, 3 rounds, each build in turn;
# the statistics after the last call give the trips (all, narrow, busy) and
# the widenings (format 3).
#   a_widenings.sh NAME=LIB.so...
# e.g. head3=build/bench/enclave/libfixed_tessalloc.so, and builds of HEAD
# with WIDE_BUSY_SHARE 32 or 64 in src/heap.c (a worktree, sed, cmake
# --build BUILD --target fixed_tessalloc). a_widenings.txt is its output
# for head3, w32 and w64.
cd "$(dirname "$0")/../../../../.."
B=build/bench/enclave/enclave_bench
J=/tmp/a_widenings.jsonl
trips() { python3 -c "import json; j = [json.loads(l) for l in open('$J')][-1]; \
print('trips', j['span_trips'])"; }
for r in 1 2 3; do for named in "$@"; do
  lib=${named#*=}; name=${named%%=*}
  for t in 8 12 16; do
    out=$($B --allocator "$lib" --workload a --threads $t --verify head --stats-jsonl $J |
          tr ' ' '\n' | grep -E '^elapsed_ms=')
    echo "A $name $t $out $(trips)"
  done
  out=$($B --allocator "$lib" --workload a --threads 16 --overlap --verify head --stats-jsonl $J |
        tr ' ' '\n' | grep -E '^(elapsed_ms|footprint_peak)=' | tr '\n' ' ')
  echo "Aonce $name $out $(trips)"
done; done
