#!/bin/bash
# expb.sh REPS DUR lib... : B runs, both hosts; prints "B lib host ecalls/s footprint/live nulls"
reps=$1; dur=$2; shift 2
B=build/bench/enclave/enclave_bench
for r in $(seq $reps); do for host in pooled new-thread; do for lib in "$@"; do
  out=$($B --allocator $lib --workload b --duration $dur --host $host 2>&1 | grep '^result')
  echo "B $(basename $lib .so) $host $(echo "$out" | grep -oE 'ecalls_per_s=[0-9.]+|peak_live_bytes=[0-9]+|peak_footprint_bytes=[0-9]+| nulls=[0-9]+' | tr '\n' ' ')"
done; done; done
