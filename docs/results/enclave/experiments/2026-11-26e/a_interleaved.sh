#!/bin/bash
# Workload A with several plugins, interleaved (sixteenth session, 2 CPUs):
#   a_interleaved.sh ROUNDS LIB.so [LIB.so ...]
# Each round runs 1, 2, 4, 8, 12 and 16 threads with every plugin in turn,
# then 5 rounds of 16 calls at once (--overlap). Lines in the format of
# docs/results/enclave-16cpu/experiments/2026-11-26e/sum_dev.py, which
# prints the medians.
set -u
bench=$(cd "$(dirname "$0")/../../../../.." && pwd)/build/bench/enclave/enclave_bench
rounds=$1; shift
field() { tr ' ' '\n' | grep -E "^(elapsed_ms|footprint_peak)=" | tr '\n' ' '; }
for r in $(seq "$rounds"); do for t in 1 2 4 8 12 16; do for lib in "$@"; do
  echo "A $(basename "$lib" .so) $t $("$bench" --allocator "$lib" --workload a --threads $t --verify head | field)"
done; done; done
for r in 1 2 3 4 5; do for lib in "$@"; do
  echo "Aonce $(basename "$lib" .so) $("$bench" --allocator "$lib" --workload a --threads 16 --overlap --verify head | field)"
done; done
