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
# variant NAME FILE SED-EXPRESSION: HEAD with one edit (which must apply)
variant() {
  local tree=/tmp/kit_$1
  rm -rf "$tree"; git worktree prune
  git worktree add -f "$tree" HEAD > /dev/null
  sed -i "$3" "$tree/$2"
  if git -C "$tree" diff --quiet; then
    echo "build_kit: the edit for $1 did not apply to $2" >&2
    exit 1
  fi
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$tree/build" -j"$(nproc)" --target fixed_tessalloc > /dev/null
  cp "$tree/build/bench/enclave/libfixed_tessalloc.so" "build-dev/libtess_$1.so"
  git worktree remove --force "$tree"
}
variant never src/heap.c 's/^#define GIVE_AWAY_AFTER 32$/#define GIVE_AWAY_AFTER 1000000/'
variant m16 src/init.c \
  's/tessi_sizeclass_init(TESS_PAGE_SIZE, 2,/tessi_sizeclass_init(TESS_PAGE_SIZE, 16,/'
ls build-dev
