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
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)" > /dev/null
scripts/fetch_fixed_peers.sh build > /dev/null
rm -rf build-dev; mkdir -p build-dev
cp build/bench/enclave/enclave_bench build/enclave-peers/libfixed_snmalloc.so build-dev/
cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_final.so
variant() { # name file sed
  local tree=/tmp/kit_$1
  rm -rf "$tree"; git worktree prune
  git worktree add -f "$tree" HEAD > /dev/null 2>&1
  sed -i "$3" "$tree/$2"
  git -C "$tree" diff --quiet && { echo "build_kit: $1 changed nothing" >&2; exit 1; }
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$tree/build" -j"$(nproc)" --target fixed_tessalloc > /dev/null
  cp "$tree/build/bench/enclave/libfixed_tessalloc.so" "build-dev/libtess_$1.so"
  git worktree remove --force "$tree"
}
variant w32 src/heap.c 's/^#define WIDE_BUSY_SHARE 16$/#define WIDE_BUSY_SHARE 32/'
variant s3 src/internal.h 's/^#define TESS_SPAN_SLACK 2$/#define TESS_SPAN_SLACK 3/'
variant wide src/heap.c 's/^#define SPAN_SHARED_BY 3$/#define SPAN_SHARED_BY 8/'
ls build-dev
