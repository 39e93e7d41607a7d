#!/bin/bash
# final device call: the enclave comparison on 16 CPUs (A, then B), as run_enclave.py writes it
set -u
cd "$(dirname "$0")/.."
[ -e /work/main ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
PY=
for py in ${PY_FIRST:-} python3 /opt/torch/.venv/bin/python3; do
  if $py -c 'import rich, matplotlib' 2>/dev/null; then PY=$py; break; fi
done
echo "python: $PY; repo: $PWD; /work/main -> $(readlink -f /work/main)"
if [ -z "$PY" ]; then
  echo "no python with rich and matplotlib: plain runs instead"
  for r in 1 2 3 4 5; do for t in 1 2 4 8 12 16; do for lib in build/bench/enclave/libfixed_tessalloc.so build/enclave-peers/libfixed_snmalloc.so; do
    echo "A $lib $t $(build/bench/enclave/enclave_bench --allocator $lib --workload a --threads $t --verify head | tr ' ' '\n' | grep -E '^(elapsed_ms|footprint_peak)=' | tr '\n' ' ')"
  done; done; done | tee "$OUT/a_plain.txt" | tail -4
  exit 3
fi
{ nproc; lscpu; uname -a; } > "$OUT/machine.txt" 2>&1
$PY bench/enclave/run_enclave.py --build build --workloads a --repeat ${REPEAT:-5} --out "$OUT/a" ${EXTRA:-} > "$OUT/a.log" 2>&1
tail -22 "$OUT/a.log"
$PY bench/enclave/run_enclave.py --build build --workloads b --duration ${DUR:-20} --out "$OUT/b" ${EXTRA:-} > "$OUT/b.log" 2>&1
tail -12 "$OUT/b.log"
