#!/bin/bash
# Fourteenth session's device call: the enclave comparison on 16 CPUs as
# run_enclave.py writes it (A, then B), with the allocator at HEAD, then
# interleaved tessalloc/snmalloc runs at A's closest thread counts and of B.
# Built on the 2-core machine; carry build/bench/enclave and build/enclave-peers.
# Everything lands in one tarball, rewritten after each stage.
set -u
cd "$(dirname "$0")/../../../../.."
[ -e /work/main ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
T0=$(date +%s)
PY=
for py in python3 /opt/torch/.venv/bin/python3; do
  if $py -c 'import rich, matplotlib' 2>/dev/null; then PY=$py; break; fi
done
R=$OUT/r; mkdir -p $R
pack() { tar -C $OUT -czf $OUT/results.tgz r; }
{ echo "python: $PY"; nproc; lscpu; uname -a; } > $R/machine.txt 2>&1
$PY bench/enclave/run_enclave.py --build build --workloads a --repeat 5 --out $R/a > $R/a.log 2>&1
tail -22 $R/a.log; echo "A done at $(( $(date +%s) - T0 )) s"; pack
$PY bench/enclave/run_enclave.py --build build --workloads b --duration 20 --out $R/b > $R/b.log 2>&1
tail -12 $R/b.log; echo "B done at $(( $(date +%s) - T0 )) s"; pack
E=build/bench/enclave/enclave_bench
V="build/bench/enclave/libfixed_tessalloc.so build/enclave-peers/libfixed_snmalloc.so"
field() { tr ' ' '\n' | grep -E "^($1)=" | tr '\n' ' '; }
for r in 1 2 3 4 5 6 7; do for t in 4 8 12 14 15 16; do for lib in $V; do
  echo "A $(basename $lib) $t $(timeout 20 $E --allocator $lib --workload a --threads $t --verify head | field 'elapsed_ms|footprint_peak')"
done; done; done > $R/a_interleaved.txt 2>&1
echo "A interleaved done at $(( $(date +%s) - T0 )) s"; pack
for r in 1 2 3; do for host in pooled new-thread; do for lib in $V; do
  [ $(( $(date +%s) - T0 )) -gt 470 ] && break 3
  echo "B$host $(basename $lib) $(timeout 30 $E --allocator $lib --workload b --duration 6 --host $host | field 'ecalls_per_s|worker_ecalls|peak_footprint_bytes|peak_live_bytes|nulls|status')"
done; done; done > $R/b_interleaved.txt 2>&1
echo "all done at $(( $(date +%s) - T0 )) s"; pack; rm -rf $R
