#!/bin/bash
# For the next session with a 16-CPU device: the footprint count of the
# eleventh session (span.c: per-partition counts, a global bound written
# once per several span operations) against the single atomic count it
# replaced. Not run yet: this session had no device.
#
# The kit (build-dev/ is ignored by git; pass it in `carry`):
#   git worktree add /tmp/head 60bec84 && cmake -S /tmp/head -B /tmp/head/build \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/head/build --target fixed_tessalloc
#   mkdir -p build-dev && cp /tmp/head/build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_head.so
#   cmake --build build --target fixed_tessalloc enclave_bench
#   cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_new.so
#   cp build/bench/enclave/enclave_bench build-dev/
#   cp build/enclave-peers/libfixed_snmalloc.so build-dev/   (scripts/fetch_fixed_peers.sh build)
# Run: bash docs/results/enclave-16cpu/experiments/2026-11-26b/dev-next.sh
#   (about 6 minutes; everything lands in one tarball, as the device
#   returns only a few files per call)
set -u
K=build-dev; B=$K/enclave_bench
V="libtess_head libtess_new libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
mkdir -p $OUT/r
nproc > $OUT/r/machine.txt; lscpu >> $OUT/r/machine.txt 2>/dev/null
for r in 1 2 3 4 5 6 7; do for t in 1 4 7 10 12 15 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $OUT/r/a.txt 2>&1
for r in 1 2 3; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $OUT/r/a.txt 2>&1
for r in 1 2 3; do for lib in $V; do
  echo "Bpooled $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 8 --host pooled | field 'ecalls_per_s|worker_ecalls|elapsed_ms|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done; done > $OUT/r/b.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
echo done
