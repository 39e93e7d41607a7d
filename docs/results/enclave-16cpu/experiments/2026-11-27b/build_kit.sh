#!/bin/bash
# The twenty-fifth session's kit for the next device session (2-core
# machine, from anywhere in the repository): builds build/ and the
# fixed-heap peers (for run_enclave.py) and fills build-dev/ with the
# harness, snmalloc and three builds of the plugin, each one edit away
# from HEAD (docs/results/README.md, the twenty-fifth session, measured
# them on 2 CPUs):
#   libtess_head   HEAD
#   libtess_never  heap.c: GIVE_AWAY_AFTER 1000000 (a call never gives
#                  its slabs away)
#   libtess_m16    init.c, configure_fixed: slabs of at least 16 blocks
#                  (2 pages for the 320-512 B classes)
# Then: run dev11.sh kit, and dev11.sh full, carrying build-dev,
# build/bench/enclave and build/enclave-peers.
set -eu
cd "$(dirname "$0")/../../../../.."
. docs/results/enclave-16cpu/experiments/kit_base.sh
kit_variant never sed -i \
  's/^#define GIVE_AWAY_AFTER 32$/#define GIVE_AWAY_AFTER 1000000/' src/heap.c
kit_variant m16 sed -i \
  's/tessi_sizeclass_init(TESS_PAGE_SIZE, 2,/tessi_sizeclass_init(TESS_PAGE_SIZE, 16,/' src/init.c
ls build-dev
