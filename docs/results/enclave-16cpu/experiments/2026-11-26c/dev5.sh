#!/bin/bash
# Fourteenth session's second device call: is A's gap at 16 threads the
# machine or the eleventh to thirteenth sessions' changes? Interleaved A of
# 60bec84 (head), 053a789 (fullest), HEAD (new) and snmalloc, then prof.c
# profiles of a long A at 16 threads and of B pooled (build-dev/ as in
# ../2026-11-26b/dev-next.sh, with libprof.so built from ../prof.c).
# As run (the second try: the first, 5,000,000 allocations and a sample
# every 200 us, made a tarball too large to come back).
set -u
K=build-dev; B=$K/enclave_bench; T0=$(date +%s)
V="libtess_head libtess_fullest libtess_new libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
R=$OUT/r; mkdir -p $R
for r in 1 2 3 4 5 6 7 8 9; do for t in 1 8 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $R/a.txt 2>&1
for r in 1 2 3; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $R/a.txt 2>&1
echo "A done at $(( $(date +%s) - T0 )) s"
for lib in libtess_new libtess_head libfixed_snmalloc; do
  PROF_US=1000 PROF_OUT=$R/a16_$lib.prof LD_PRELOAD=$K/libprof.so timeout 60 $B --allocator $K/$lib.so --workload a --threads 16 --num-allocations 3000000 --verify head > $R/a16_$lib.txt 2>&1
  echo "A16long $lib $(field 'elapsed_ms|footprint_peak|status' < $R/a16_$lib.txt)"
done
PROF_US=1000 PROF_OUT=$R/b_pooled_new.prof LD_PRELOAD=$K/libprof.so timeout 40 $B --allocator $K/libtess_new.so --workload b --duration 5 --host pooled > $R/b_pooled_new.txt 2>&1
echo "B new $(field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|status' < $R/b_pooled_new.txt)"
echo "all done at $(( $(date +%s) - T0 )) s"
cd $R && xz -9 *.prof; tar -C $OUT -cf $OUT/results.tar r && ls -la $R $OUT && rm -rf $R
