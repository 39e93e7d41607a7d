#!/bin/bash
# Sixteenth session's second device call: fewer trips to the partitions
# for heaps whose trips find them busy (widened heaps; on 16 CPUs every
# heap of workload A widens: dev7.sh). Builds, each HEAD plus:
#   libtess_final   nothing
#   libtess_s3w     a widened heap takes a kept span up to 3 pages longer
#                   than asked (TESS_SPAN_SLACK + h->span_wide in
#                   tessi_heap_span_take_longer), not 2
#   libtess_s3w75   that, and the widened budget 15/16 of 8 heaps' worth
#                   (the same footprint as HEAD in the local emulation)
#   libtess_s3wbw8  s3w, and TESS_BORROW_WINDOW 8 (fewer slabs, the same
#                   footprint as HEAD in the local emulation)
# Local emulation of the device (every heap in use from the start, so
# widened, 16 calls at once, callgrind): trips to the partitions 20.3k
# (final), 8.3k (s3w), 15.3k (s3w75), 8.3k (s3wbw8); peak footprint
# 4.79, 4.88, 4.71, 4.79 MiB.
# Built on the 2-core machine with sed over HEAD's tree as above; carry
# build-dev. Run: bash docs/results/enclave-16cpu/experiments/2026-11-26e/dev8.sh
# (stops starting runs at 200 s).
set -u
cd "$(dirname "$0")/../../../../.."
K=build-dev; B=$K/enclave_bench; T0=$(date +%s)
V="libtess_final libtess_s3w libtess_s3w75 libtess_s3wbw8 libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
for r in 1 2 3 4 5 6 7 8 9; do for t in 1 8 12 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $R/a.txt 2>&1
for r in 1 2 3 4 5; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
for lib in libtess_final libtess_s3w libtess_s3w75 libtess_s3wbw8; do
  timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head \
    --stats-jsonl $R/midpoint_$lib.jsonl > /dev/null 2>&1
done
for r in 1 2 3; do for lib in $V; do
  echo "Along $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --num-allocations 3000000 --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
echo "A done at $(( $(date +%s) - T0 )) s"; pack
for r in 1 2 3 4; do for host in pooled new-thread; do for lib in libtess_final libtess_s3w75 libtess_s3wbw8; do
  [ $(( $(date +%s) - T0 )) -gt 200 ] && break 3
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
  pack
done; done; done > $R/b.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
