#!/bin/bash
# first device call: profiles of B pooled and of A at 16 threads, tessalloc (head) and snmalloc
K=build-dev; B=$K/enclave_bench
{ nproc; lscpu | head -20; uname -a; } > $OUT/machine.txt 2>&1
for lib in libtess_head libfixed_snmalloc; do
  PROF_OUT=$OUT/b_pooled_$lib.prof LD_PRELOAD=$K/libprof.so timeout 40 $B --allocator $K/$lib.so --workload b --duration 8 --host pooled > $OUT/b_pooled_$lib.txt 2>&1
  echo "B $lib $(tr ' ' '\n' < $OUT/b_pooled_$lib.txt | grep -E '^(ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|status)=' | tr '\n' ' ')"
done
for lib in libtess_head libfixed_snmalloc; do
  PROF_OUT=$OUT/a16_$lib.prof LD_PRELOAD=$K/libprof.so timeout 60 $B --allocator $K/$lib.so --workload a --threads 16 --num-allocations 3000000 --verify head > $OUT/a16_$lib.txt 2>&1
  echo "A16long $lib $(tr ' ' '\n' < $OUT/a16_$lib.txt | grep -E '^(elapsed_ms|footprint_peak|status)=' | tr '\n' ' ')"
done
for r in 1 2 3; do for t in 1 8 16; do for lib in libtess_head libfixed_snmalloc; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | tr ' ' '\n' | grep -E '^(elapsed_ms|footprint_peak)=' | tr '\n' ' ')"
done; done; done
