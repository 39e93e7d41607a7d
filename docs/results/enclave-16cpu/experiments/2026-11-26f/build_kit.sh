#!/bin/bash
# The seventeenth session's kit for the next device (2-core machine, from
# the repository root): builds build/ and the fixed-heap peers (for
# run_enclave.py) and fills build-dev/ with the harness, snmalloc and four
# builds of the plugin, each HEAD plus one setting:
#   libtess_final  nothing
#   libtess_w32    WIDE_BUSY_SHARE 32 (src/heap.c): a heap widens after 4
#                  busy trips that are 1 in 32 of its trips, not 1 in 16
#   libtess_s3     TESS_SPAN_SLACK 3 (src/internal.h): every heap, not only
#                  a widened one, takes a kept span up to 3 pages longer
#   libtess_wide   SPAN_SHARED_BY 8 (src/heap.c): every heap has the
#                  widened budget from the start (the bound; 2.15x
#                  dlmalloc's footprint at once on 2 CPUs)
# Then: run dev9.sh kit, and dev9.sh full, carrying build-dev,
# build/bench/enclave and build/enclave-peers.
set -eu
cd "$(dirname "$0")/../../../../.."
KIT_HEAD=final
. docs/results/enclave-16cpu/experiments/kit_base.sh
kit_variant w32 sed -i 's/^#define WIDE_BUSY_SHARE 16$/#define WIDE_BUSY_SHARE 32/' src/heap.c
kit_variant s3 sed -i 's/^#define TESS_SPAN_SLACK 2$/#define TESS_SPAN_SLACK 3/' src/internal.h
kit_variant wide sed -i 's/^#define SPAN_SHARED_BY 3$/#define SPAN_SHARED_BY 8/' src/heap.c
ls build-dev
