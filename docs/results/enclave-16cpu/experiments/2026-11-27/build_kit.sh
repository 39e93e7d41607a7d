#!/bin/bash
# The twenty-first session's kit for the next device session (2-core
# machine, from anywhere in the repository): builds build/ and the
# fixed-heap peers (for run_enclave.py) and fills build-dev/ with the
# harness, snmalloc and two builds of the plugin:
#   libtess_head   HEAD
#   libtess_loose  HEAD with docs/results/enclave/experiments/2026-11-27/
#                  loose_spans.patch (freed spans of up to 8 pages kept
#                  loose by length, taken back without the lock;
#                  refreshed in the twenty-fourth session, when it had
#                  stopped applying to span.c)
# Then: run dev10.sh kit, and dev10.sh full, carrying build-dev,
# build/bench/enclave and build/enclave-peers.
set -eu
cd "$(dirname "$0")/../../../../.."
. docs/results/enclave-16cpu/experiments/kit_base.sh
kit_variant loose git apply "$PWD/docs/results/enclave/experiments/2026-11-27/loose_spans.patch"
ls build-dev
