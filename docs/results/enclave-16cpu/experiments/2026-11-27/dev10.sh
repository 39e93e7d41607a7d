#!/bin/bash
# The twenty-first session's kit for the next device session (built by
# build_kit.sh on the 2-core machine; carry build-dev, build/bench/enclave
# and build/enclave-peers).
#   dev10.sh kit   (about 3 minutes) B on 16 CPUs, HEAD against HEAD with
#                  loose spans and snmalloc, interleaved, 8 s per run,
#                  pooled and new-thread (3 rounds): calls per second
#                  (mallocs / elapsed_ms, to compare the builds; the
#                  summary's divides by the run's set duration) and the
#                  peaks; then A at 8, 12 and
#                  16 threads (7 rounds) and every call at once (5 rounds).
#   dev10.sh full  (about 7 minutes: B has a statistics run per host since
#                  the twenty-third session) run_enclave.py at HEAD, A (--repeat
#                  5) and B (--duration 20), for enclave-16cpu/a and b.
# Everything lands in $OUT/results.tgz, rewritten after each stage.
set -u
mode=${1:?kit or full}
cd "$(dirname "$0")/../../../../.."
[ -e /work/main ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
T0=$(date +%s)
K=build-dev; B=$K/enclave_bench
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
{ nproc; lscpu; uname -a; } > $R/machine.txt 2>&1
if [ "$mode" = kit ]; then
  # (a later kit runs this one with its own builds and fields: KIT_LIBS,
  # KIT_B_FIELDS)
  V=${KIT_LIBS:-"libtess_head libtess_loose libfixed_snmalloc"}
  BF='mallocs|elapsed_ms|ecalls_per_s|peak_footprint_bytes|peak_live_bytes|nulls|status'
  BF=${KIT_B_FIELDS:-$BF}
  for r in 1 2 3; do for host in pooled new-thread; do for lib in $V; do
    echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 8 \
      --host $host | field "$BF")"
  done; done; done > $R/b.txt 2>&1
  echo "B done at $(( $(date +%s) - T0 )) s"; pack
  for r in 1 2 3 4 5 6 7; do for t in 8 12 16; do for lib in $V; do
    echo "A $lib $t $(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t \
      --verify head | field 'elapsed_ms|footprint_peak')"
  done; done; done > $R/a.txt 2>&1
  for r in 1 2 3 4 5; do for lib in $V; do
    echo "Aonce $lib $(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap \
      --verify head | field 'elapsed_ms|footprint_peak')"
  done; done >> $R/a.txt 2>&1
else
  PY=
  for py in python3 /opt/torch/.venv/bin/python3 .cache/venv/bin/python3; do
    if $py -c 'import rich, matplotlib' 2>/dev/null; then PY=$py; break; fi
  done
  [ -n "$PY" ] || { echo "no python with rich and matplotlib: no run_enclave.py"; pack; exit 1; }
  $PY bench/enclave/run_enclave.py --build build --workloads a --repeat 5 --out $R/a > $R/a.log 2>&1
  tail -22 $R/a.log; echo "A done at $(( $(date +%s) - T0 )) s"; pack
  $PY bench/enclave/run_enclave.py --build build --workloads b --duration 20 --out $R/b > $R/b.log 2>&1
  tail -12 $R/b.log
fi
echo "done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
