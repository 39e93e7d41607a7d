#!/usr/bin/env bash
# The twenty-first session's loose-spans kit (experiments/2026-11-27/dev10.sh kit), made
# again at this session's HEAD without git worktrees: build-kit/ holds enclave_bench,
# snmalloc's plugin, HEAD's (libtess_head.so, from build-dev) and HEAD with
# docs/results/enclave/experiments/2026-11-27/loose_spans.patch applied in a clone
# (libtess_loose.so). On the device, carrying build-kit: bash <this script> (about 4 minutes).
# B: 3 interleaved rounds of 8 s per build and host; A: 8, 12 and 16 threads (5 rounds),
# every call at once (5 rounds). Lines in $OUT/kit.txt.
set -u
K=build-kit
libs="libtess_head libtess_loose libfixed_snmalloc"
bf='mallocs|worker_mallocs|elapsed_ms|worker_cpu_s|fine_peak_footprint_bytes|fine_peak_live_bytes'
bf+='|nulls|status'
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
T0=$(date +%s)
for r in 1 2 3; do for host in pooled new-thread; do for lib in $libs; do
  echo "B $host $lib $(timeout 30 $K/enclave_bench --allocator $K/$lib.so --workload b \
    --duration 8 --host $host | field "$bf")"
done; done; done > "$OUT/kit.txt" 2>&1
echo "B done at $(($(date +%s) - T0)) s"
for r in 1 2 3 4 5; do for t in 8 12 16; do for lib in $libs; do
  echo "A $lib $t $(timeout 20 $K/enclave_bench --allocator $K/$lib.so --workload a --threads $t \
    --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done >> "$OUT/kit.txt" 2>&1
for r in 1 2 3 4 5; do for lib in $libs; do
  echo "Aonce $lib $(timeout 20 $K/enclave_bench --allocator $K/$lib.so --workload a --threads 16 \
    --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> "$OUT/kit.txt" 2>&1
echo "done at $(($(date +%s) - T0)) s"
