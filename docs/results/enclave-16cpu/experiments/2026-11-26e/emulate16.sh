#!/bin/bash
# The 16-CPU machine's workload A on 2 CPUs (sixteenth session): on 16 CPUs
# every heap of OE's sample widens (8 heaps' worth of span cache, shared)
# and all 16 calls take their heaps at once, so the budget is the same
# from the start. This builds HEAD with shared_budget (src/heap.c) seeing
# 16 heaps in use from the start and every heap widened when taken, plus
# the sed edits given, and runs A with every call at once under callgrind.
# Its midpoint statistics equal the device's to the byte (the threads'
# PRNGs are their own), so the trips it counts are the device's.
#   emulate16.sh NAME [FILE SED]...
# e.g. emulate16.sh slack4 src/internal.h 's/^#define TESS_SPAN_SLACK_WIDE 3$/#define TESS_SPAN_SLACK_WIDE 4/'
# Prints the allocator's instructions, the trips to the partitions
# (tessi_pages_alloc) and the spans given back, the peak footprint, and
# the midpoint's parts in MiB.
set -eu
name=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../../.." && pwd)
tree=/tmp/emulate16_$name
rm -rf "$tree"; git -C "$repo" worktree prune
git -C "$repo" worktree add -f "$tree" HEAD > /dev/null 2>&1
sed -i 's/^  h->span_wide = false;$/  h->span_wide = true;/' "$tree/src/heap.c"
sed -i 's/^static size_t shared_budget(uint32_t in_use, uint32_t shared_by) {$/&\n  in_use = 16;/' \
  "$tree/src/heap.c"
while [ $# -gt 0 ]; do sed -i "$2" "$tree/$1"; shift 2; done
(cd "$tree" && git diff --stat | tail -1)
cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$tree/build" -j2 --target fixed_tessalloc enclave_bench > /dev/null
lib=$tree/build/bench/enclave/libfixed_tessalloc.so
valgrind --tool=callgrind --callgrind-out-file="$tree/callgrind.out" \
  "$tree/build/bench/enclave/enclave_bench" --allocator "$lib" --workload a --threads 16 \
  --overlap --verify head --stats-jsonl "$tree/midpoint.jsonl" > "$tree/run.txt" 2>&1
echo "$name $(python3 "$here/cg_trips.py" "$tree/callgrind.out" libfixed_tessalloc.so)" \
  "$(tr ' ' '\n' < "$tree/run.txt" | grep '^footprint_peak=')"
python3 - "$tree/midpoint.jsonl" <<'EOF'
import json, sys
j = json.loads(open(sys.argv[1]).readline())
mib = 2 ** 20
print(f"  midpoint MiB: footprint {j['footprint'] / mib:.2f}, kept spans"
      f" {j['kept_span_bytes'] / mib:.2f}, large blocks {j['large']['live_bytes'] / mib:.2f},"
      f" slabs {j['slab_bytes'] / mib:.2f}")
EOF
