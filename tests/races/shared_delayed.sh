#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook in tessi_heap_free_remote's NOTIFY branch, between taking a
# full slab's NOTIFY and the push onto its owner's delayed list, in a
# scratch directory, and runs shared_delayed.c against it, which holds a
# free to the shared heap there while the call that used it ends. Prints
# ok, or FAIL (before 2026-11-27's fix). ctest runs it (race_shared_delayed).
#   tests/races/shared_delayed.sh [REV]
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
push = "        heap_delayed_push(owner, b);\n"
assert text.count(push) == 1
text = text.replace(push, "        if (tessi_test_hook) tessi_test_hook(1);\n" + push)
text = text.replace("tess_heap_t tessi_heap_empty = {",
                    "void (*tessi_test_hook)(int);\ntess_heap_t tessi_heap_empty = {", 1)
open(path, "w").write(text)
PY
cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DTESS_BUILD_TESTS=OFF \
  -DTESS_BUILD_BENCH=OFF >/dev/null
cmake --build "$scratch/build" -j2 --target tessalloc-api >/dev/null
cc -O1 -g -std=gnu11 -Iinclude tests/races/shared_delayed.c \
  "$scratch/build/libtessalloc-api.a" -lpthread -o "$scratch/repro"
timeout 20 "$scratch/repro"
