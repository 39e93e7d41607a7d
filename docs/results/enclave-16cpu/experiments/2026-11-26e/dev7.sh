#!/bin/bash
# Sixteenth session's device call (the fourteenth session's kit for the next
# device, 2026-11-26c/dev-next.sh, with the full run added):
# 1. Why A at 16 threads stays 1.1-1.3x snmalloc's time on 16 CPUs. Two
#    builds each differ from HEAD by one setting:
#      libtess_final  HEAD
#      libtess_wide   SPAN_SHARED_BY 8 in src/heap.c: every heap keeps 8
#                     heaps' worth of spans, not only those whose trips found
#                     their partition busy. If it is much faster at 16
#                     threads, heaps do not widen there (the midpoint's
#                     kept_span_bytes says it directly). On 2 CPUs it took
#                     20 % less time at once but 2.15x dlmalloc's footprint.
#      libtess_open8  TESS_FIXED_OPEN_PARTITIONS 8 in src/types.h: 16 heaps
#                     over 8 partition locks instead of 4.
# 2. run_enclave.py with A (--repeat 5) and B (--duration 20) at HEAD, for
#    the record in docs/results/enclave-16cpu/.
# 3. B with the three builds and snmalloc, 6 s per run, while time is left.
# Built on the 2-core machine (build-dev/ is ignored by git; carry it, and
# build/bench/enclave and build/enclave-peers for run_enclave.py):
#   for v in wide:'s/^#define SPAN_SHARED_BY 3$/#define SPAN_SHARED_BY 8/:src/heap.c' \
#            open8:'s/^#define TESS_FIXED_OPEN_PARTITIONS 4$/#define TESS_FIXED_OPEN_PARTITIONS 8/:src/types.h'; do
#     n=${v%%:*}; rest=${v#*:}; git worktree add -f /tmp/$n HEAD
#     sed -i "${rest%:*}" /tmp/$n/${rest##*:}
#     cmake -S /tmp/$n -B /tmp/$n/build -DCMAKE_BUILD_TYPE=Release
#     cmake --build /tmp/$n/build --target fixed_tessalloc
#     mkdir -p build-dev; cp /tmp/$n/build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_$n.so; done
#   cmake --build build; scripts/fetch_fixed_peers.sh build
#   cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_final.so
#   cp build/bench/enclave/enclave_bench build/enclave-peers/libfixed_snmalloc.so build-dev/
# Run: bash docs/results/enclave-16cpu/experiments/2026-11-26e/dev7.sh
#   (about 9 minutes; it stops starting runs at 540 s. Everything lands in
#   one tarball, rewritten after each stage, as the device returns only a
#   few files per call)
set -u
cd "$(dirname "$0")/../../../../.."
[ -e /work/main ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
T0=$(date +%s)
PY=
for py in python3 /opt/torch/.venv/bin/python3 .cache/venv/bin/python3; do
  if $py -c 'import rich, matplotlib' 2>/dev/null; then PY=$py; break; fi
done
[ -n "$PY" ] || echo "no python with rich and matplotlib: run_enclave.py will not run"
K=build-dev; B=$K/enclave_bench
V="libtess_final libtess_wide libtess_open8 libfixed_snmalloc"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
{ echo "python: $PY"; nproc; lscpu; uname -a; } > $R/machine.txt 2>&1
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
echo "A kit done at $(( $(date +%s) - T0 )) s"; pack
$PY bench/enclave/run_enclave.py --build build --workloads a --repeat 5 --out $R/a > $R/a.log 2>&1
tail -22 $R/a.log; echo "A done at $(( $(date +%s) - T0 )) s"; pack
$PY bench/enclave/run_enclave.py --build build --workloads b --duration 20 --out $R/b > $R/b.log 2>&1
tail -12 $R/b.log; echo "B done at $(( $(date +%s) - T0 )) s"; pack
for r in 1 2 3 4; do for host in pooled new-thread; do for lib in $V; do
  [ $(( $(date +%s) - T0 )) -gt 540 ] && break 3
  echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
  pack
done; done; done > $R/b.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
