#!/bin/bash
# For the next session with a 16-CPU device: the eleventh to thirteenth
# sessions' changes on 16 CPUs, where they were meant to tell. Not run
# yet: those sessions had no device. Builds:
#   libtess_head     60bec84, before the eleventh session
#   libtess_fullest  053a789: the footprint count (span.c: a global bound
#                    written once per several span operations), orphan
#                    tending at one take in 16, the slab slow path's cuts
#   libtess_new      90bca95 or later: heaps also take the orphan with the
#                    most room among those at least a quarter full (B on
#                    2 CPUs: +9-12 % calls per second pooled)
# The kit (build-dev/ is ignored by git; pass it in `carry`):
#   for c in 60bec84:head 053a789:fullest; do git worktree add /tmp/${c#*:} ${c%:*}
#     cmake -S /tmp/${c#*:} -B /tmp/${c#*:}/build -DCMAKE_BUILD_TYPE=Release
#     cmake --build /tmp/${c#*:}/build --target fixed_tessalloc
#     mkdir -p build-dev; cp /tmp/${c#*:}/build/bench/enclave/libfixed_tessalloc.so \
#       build-dev/libtess_${c#*:}.so; done
#   cmake --build build --target fixed_tessalloc enclave_bench
#   cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_new.so
#   cp build/bench/enclave/enclave_bench build-dev/
#   scripts/fetch_fixed_peers.sh build; cp build/enclave-peers/libfixed_snmalloc.so build-dev/
# Run: bash docs/results/enclave-16cpu/experiments/2026-11-26b/dev-next.sh
#   (2m34s on the 2-core machine; everything lands in one tarball,
#   as the device returns only a few files per call)
set -u
K=build-dev; B=$K/enclave_bench
V="libtess_head libtess_fullest libtess_new libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
mkdir -p $OUT/r
nproc > $OUT/r/machine.txt; lscpu >> $OUT/r/machine.txt 2>/dev/null
for r in 1 2 3 4 5 6 7; do for t in 1 4 7 10 12 15 16; do for lib in $V; do
  echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $OUT/r/a.txt 2>&1
for r in 1 2 3; do for lib in $V; do
  echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head | field 'elapsed_ms|footprint_peak')"
done; done >> $OUT/r/a.txt 2>&1
for r in 1 2 3; do for host in pooled new-thread; do for lib in $V; do
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|elapsed_ms|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done; done; done > $OUT/r/b.txt 2>&1
tar -C $OUT -czf $OUT/results.tgz r && rm -rf $OUT/r
echo done
