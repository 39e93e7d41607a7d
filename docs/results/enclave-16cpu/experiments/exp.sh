#!/bin/bash
# exp.sh REPS "THREADS..." lib... : interleaved A runs; prints "lib threads overlap elapsed peak"
reps=$1; thr=$2; shift 2
B=build/bench/enclave/enclave_bench
for r in $(seq $reps); do
  for t in $thr; do
    for ov in "" "--overlap"; do
      [ -n "$ov" ] && [ $t -ne 16 ] && continue
      for lib in "$@"; do
        out=$($B --allocator $lib --workload a --threads $t --verify head $ov 2>&1 | grep '^result')
        e=$(echo "$out" | sed -E 's/.*elapsed_ms=([0-9.]+).*/\1/'); p=$(echo "$out" | sed -E 's/.*footprint_peak=([0-9]+).*/\1/'); n=$(echo "$out" | sed -E 's/.* nulls=([0-9]+).*/\1/')
        echo "R $(basename $lib .so) $t ${ov:-plain} $e $p $n"
      done
    done
  done
done
