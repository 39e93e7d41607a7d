#!/bin/bash
# second device call: variants head / new / nocount (diagnosis) / snmalloc
K=build-dev; B=$K/enclave_bench
V="libtess_head libtess_new libtess_nocount libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
for r in 1 2 3 4 5 6 7; do for t in 1 4 8 12 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done 2>&1 | tee $OUT/a.txt | tail -3
for r in 1 2; do for lib in $V; do
  echo "Bpooled $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 8 --host pooled | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done; done 2>&1 | tee $OUT/b.txt
for lib in libtess_new libfixed_snmalloc; do
  echo "Bnew $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 8 --host new-thread | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done 2>&1 | tee -a $OUT/b.txt
PROF_OUT=$OUT/b_new.prof LD_PRELOAD=$K/libprof.so timeout 30 $B --allocator $K/libtess_new.so --workload b --duration 6 --host pooled | field 'ecalls_per_s|worker_ecalls'
PROF_OUT=$OUT/a_new.prof LD_PRELOAD=$K/libprof.so timeout 30 $B --allocator $K/libtess_new.so --workload a --threads 16 --num-allocations 2000000 --verify head | field 'elapsed_ms'
PROF_OUT=$OUT/a_sn.prof LD_PRELOAD=$K/libprof.so timeout 30 $B --allocator $K/libfixed_snmalloc.so --workload a --threads 16 --num-allocations 2000000 --verify head | field 'elapsed_ms'
echo done
