#!/bin/bash
# The seventeenth session's kit for the next device session (built by
# build_kit.sh on the 2-core machine; carry build-dev, build/bench/enclave
# and build/enclave-peers).
#   dev9.sh kit   (about 2 minutes) A on 16 CPUs: why 8-12 threads are
#                 1.05-1.10x snmalloc's time (dev8.sh). The four builds of
#                 build_kit.sh and snmalloc, interleaved: A at 6, 8, 10, 12
#                 and 16 threads (9 rounds), every call at once and 3,000,000
#                 iterations per call (5 and 3 rounds); each tessalloc run
#                 writes its statistics after the last call (stats v3:
#                 span_trips says how many heaps widened and after how many
#                 trips). Then B, 6 s per run, while 180 s are not used up.
#   dev9.sh full  (about 6.5 minutes) run_enclave.py at HEAD, A (--repeat
#                 5) and B (--duration 20), for enclave-16cpu/a and b.
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
trips() { # the "at":"end" line's span_trips, as all/narrow/busy/widenings
  grep '"at":"end"' "$1" | grep -o '"span_trips":{[^}]*}' | tr -dc '0-9,' | tr , /
}
{ nproc; lscpu; uname -a; } > $R/machine.txt 2>&1
if [ "$mode" = kit ]; then
  V="libtess_final libtess_w32 libtess_s3 libtess_wide libfixed_snmalloc"
  for r in 1 2 3 4 5 6 7 8 9; do for t in 6 8 10 12 16; do for lib in $V; do
    s=(); [ "${lib#libtess}" != "$lib" ] && s=(--stats-jsonl $R/s.jsonl)
    out=$(timeout 20 $B --allocator $K/$lib.so --workload a --threads $t --verify head "${s[@]}" \
          | field 'elapsed_ms|footprint_peak')
    echo "A $lib $t $out ${s:+trips=$(trips $R/s.jsonl)}"
  done; done; done > $R/a.txt 2>&1
  for r in 1 2 3 4 5; do for lib in $V; do
    s=(); [ "${lib#libtess}" != "$lib" ] && s=(--stats-jsonl $R/s.jsonl)
    out=$(timeout 20 $B --allocator $K/$lib.so --workload a --threads 16 --overlap --verify head \
          "${s[@]}" | field 'elapsed_ms|footprint_peak')
    echo "Aonce $lib $out ${s:+trips=$(trips $R/s.jsonl)}"
  done; done >> $R/a.txt 2>&1
  for r in 1 2 3; do for lib in $V; do
    echo "Along $lib $(timeout 30 $B --allocator $K/$lib.so --workload a --threads 16 \
      --num-allocations 3000000 --verify head | field 'elapsed_ms|footprint_peak')"
  done; done >> $R/a.txt 2>&1
  rm -f $R/s.jsonl
  echo "A done at $(( $(date +%s) - T0 )) s"; pack
  for r in 1 2 3; do for host in pooled new-thread; do for lib in $V; do
    [ $(( $(date +%s) - T0 )) -gt 180 ] && break 3
    echo "B$host $lib $(timeout 30 $B --allocator $K/$lib.so --workload b --duration 6 \
      --host $host | field 'ecalls_per_s|peak_footprint_bytes|peak_live_bytes|nulls|status')"
  done; done; done > $R/b.txt 2>&1
else
  PY=
  for py in python3 /opt/torch/.venv/bin/python3 .cache/venv/bin/python3; do
    if $py -c 'import rich, matplotlib' 2>/dev/null; then PY=$py; break; fi
  done
  [ -n "$PY" ] || echo "no python with rich and matplotlib: run_enclave.py will not run"
  $PY bench/enclave/run_enclave.py --build build --workloads a --repeat 5 --out $R/a > $R/a.log 2>&1
  tail -22 $R/a.log; echo "A done at $(( $(date +%s) - T0 )) s"; pack
  $PY bench/enclave/run_enclave.py --build build --workloads b --duration 20 --out $R/b > $R/b.log 2>&1
  tail -12 $R/b.log
fi
echo "done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
