#!/usr/bin/env bash
# B pooled on a lent 16-CPU machine, 4 interleaved rounds of 10 s: tessalloc,
# the spinning snmalloc peer (build_peers.py since a397f05), the futex one
# and one with a test-and-test-and-set lock (build_futex_peer.py build-dev,
# here first); about 170 s. Copy to build-dev/ and, carrying build-dev, run
#   B_LIMIT=300 bash build-dev/snpeer.sh
# in the repository root. The log goes to $OUT/snpeer.log.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
BENCH=build-dev/bench/enclave/enclave_bench timeout "${B_LIMIT:-300}" python3 \
  docs/results/enclave/experiments/2026-11-27f/b_touched.py pooled 10 4 \
  build-dev/bench/enclave/libfixed_tessalloc.so build-dev/enclave-peers/libfixed_snmalloc.so \
  build-dev/libfixed_snmalloc_futex.so build-dev/libfixed_snmalloc_ttas.so 2>&1 |
  tee "$OUT/snpeer.log"
