#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook before and after the owner load in tessi_heap_free_remote's
# NOTIFY branch, in a scratch directory, and runs notify_aba.c against it,
# which holds a remote free at both points while other threads orphan,
# take and detach the slab again. Prints ok, or FAIL (before 2026-11-27's
# fix, e.g. REV 60dc187). ctest runs it (race_notify_aba).
#   tests/races/notify_aba.sh [REV]
set -e
cd "$(dirname "$0")/../.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [ -n "$1" ]; then
  git archive "$1" | tar -x -C "$scratch"
else
  cp -r CMakeLists.txt cmake include src "$scratch"
fi
python3 - "$scratch/src/heap.c" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
load = [line for line in text.splitlines(True)
        if "tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_" in line][0]
assert text.count(load) == 1
text = text.replace(load, "      if (tessi_test_hook) tessi_test_hook(1);\n" + load
                    + "      if (tessi_test_hook) tessi_test_hook(2);\n")
text = text.replace("tess_heap_t tessi_heap_empty = {",
                    "void (*tessi_test_hook)(int);\ntess_heap_t tessi_heap_empty = {", 1)
open(path, "w").write(text)
PY
cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DTESS_BUILD_TESTS=OFF \
  -DTESS_BUILD_BENCH=OFF >/dev/null
cmake --build "$scratch/build" -j2 --target tessalloc-api >/dev/null
cc -O1 -g -std=gnu11 -Iinclude -I"$scratch/src" tests/races/notify_aba.c \
  "$scratch/build/libtessalloc-api.a" -lpthread -o "$scratch/repro"
timeout 20 "$scratch/repro"
