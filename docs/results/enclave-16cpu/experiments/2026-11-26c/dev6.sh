#!/bin/bash
# Fourteenth session's last device call, interleaved, each build against
# 791b1da (libtess_new) and snmalloc: libtess_lines (the partition's range
# on a line of its own, the orphan lists' lines apart), libtess_defer
# (that, and spans deferred on a busy partition out of the footprint at
# once), libtess_shards16 (that, and 16 orphan lists per class, not 8).
# A at 1, 8 and 16 threads, at once, and long (3,000,000 allocations per
# thread); then B pooled and with a new thread per call, 6 s each, as many
# rounds as fit in 215 s. The builds (build-dev/, as in dev5.sh):
# libtess_lines is 84cd83f, libtess_defer eb48cd7, libtess_shards16
# eb48cd7 with ORPHAN_SHARDS and TESS_ORPHAN_SHARDS 16 (a 16-bit mask).
set -u
K=build-dev; B=$K/enclave_bench; T0=$(date +%s)
V="libtess_new libtess_lines libtess_defer libtess_shards16 libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
for r in 1 2 3 4 5 6 7 8 9; do for t in 1 8 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $R/a.txt 2>&1
for r in 1 2 3 4 5; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
for r in 1 2 3; do for lib in $V; do
  echo "Along $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --num-allocations 3000000 --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
echo "A done at $(( $(date +%s) - T0 )) s"; pack
for r in 1 2 3 4; do for host in pooled new-thread; do for lib in $V; do
  [ $(( $(date +%s) - T0 )) -gt 215 ] && break 3
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
  pack
done; done; done > $R/b.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
