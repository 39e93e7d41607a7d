#!/bin/bash
# For the next session with a 16-CPU device (not run yet): why A at 16
# threads stays 1.1-1.3x snmalloc's time there (fourteenth session). Two
# questions, each a build differing from HEAD by one setting:
#   libtess_final  HEAD
#   libtess_wide   SPAN_SHARED_BY 8 in src/heap.c: every heap keeps 8
#                  heaps' worth of spans, not only those whose trips found
#                  their partition busy. If it is much faster at 16 threads,
#                  heaps do not widen there (the midpoint's kept_span_bytes
#                  below says it directly). On 2 CPUs it took 20 % less time
#                  at once but 2.15x dlmalloc's footprint.
#   libtess_open8  TESS_FIXED_OPEN_PARTITIONS 8 in src/types.h: 16 heaps
#                  over 8 partition locks instead of 4.
# The kit (build-dev/ is ignored by git; pass it in `carry`):
#   for v in wide:'s/^#define SPAN_SHARED_BY 3$/#define SPAN_SHARED_BY 8/:src/heap.c' \
#            open8:'s/^#define TESS_FIXED_OPEN_PARTITIONS 4$/#define TESS_FIXED_OPEN_PARTITIONS 8/:src/types.h'; do
#     n=${v%%:*}; rest=${v#*:}; git worktree add -f /tmp/$n HEAD
#     sed -i "${rest%:*}" /tmp/$n/${rest##*:}
#     cmake -S /tmp/$n -B /tmp/$n/build -DCMAKE_BUILD_TYPE=Release
#     cmake --build /tmp/$n/build --target fixed_tessalloc
#     mkdir -p build-dev; cp /tmp/$n/build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_$n.so; done
#   cmake --build build --target fixed_tessalloc enclave_bench
#   cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_final.so
#   cp build/bench/enclave/enclave_bench build-dev/
#   scripts/fetch_fixed_peers.sh build; cp build/enclave-peers/libfixed_snmalloc.so build-dev/
# Run: bash docs/results/enclave-16cpu/experiments/2026-11-26c/dev-next.sh
#   (about 4 minutes; everything lands in one tarball, rewritten after
#   each stage, as the device returns only a few files per call)
set -u
K=build-dev; B=$K/enclave_bench; T0=$(date +%s)
V="libtess_final libtess_wide libtess_open8 libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
{ nproc; lscpu; } > $R/machine.txt 2>&1
for r in 1 2 3 4 5 6 7 8 9; do for t in 1 8 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $R/a.txt 2>&1
for r in 1 2 3 4 5; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
# where the footprint at once goes (the time of these runs includes the write)
for lib in libtess_final libtess_wide libtess_open8; do
  timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head \
    --stats-jsonl $R/midpoint_$lib.jsonl > /dev/null 2>&1
done
for r in 1 2 3; do for lib in $V; do
  echo "Along $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --num-allocations 3000000 --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
echo "A done at $(( $(date +%s) - T0 )) s"; pack
for r in 1 2 3 4; do for host in pooled new-thread; do for lib in $V; do
  [ $(( $(date +%s) - T0 )) -gt 200 ] && break 3
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
  pack
done; done; done > $R/b.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
