#!/bin/bash
# Fourteenth session's last device call: the partition's range on a line
# of its own and the orphan lists' lines apart (libtess_lines) against
# 791b1da (libtess_new) and snmalloc, interleaved: A at 1, 8 and 16
# threads, at once, and long (3,000,000 allocations per thread); then B
# pooled and with a new thread per call, 7 s each, as many rounds as fit.
set -u
K=build-dev; B=$K/enclave_bench; T0=$(date +%s)
V="libtess_new libtess_lines libfixed_snmalloc"
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
for r in 1 2 3 4 5 6; do for host in pooled new-thread; do for lib in $V; do
  [ $(( $(date +%s) - T0 )) -gt 215 ] && break 3
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 7 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done; done; done > $R/b.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
