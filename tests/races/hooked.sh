# Sourced by the races' scripts (notify_aba.sh, shared_delayed.sh), from
# the repository root. hooked_build REV sets $scratch to a scratch
# directory (removed at exit) holding the library's sources (the working
# tree's, or git revision REV's when REV is not empty); hook_around TEXT
# BEFORE [AFTER] puts calls of tessi_test_hook(BEFORE) before the one line
# of heap.c (of src/$HOOK_FILE when set) holding TEXT (and of
# tessi_test_hook(AFTER) after it), where the race needs a pause (each an
# int expression of the code there); hooked_run PROGRAM.c builds the
# library with the hook's pointer defined and runs PROGRAM.c linked
# against it.
hooked_build() {
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  if [ -n "$1" ]; then
    git archive "$1" | tar -x -C "$scratch"
  else
    cp -r CMakeLists.txt cmake include src "$scratch"
  fi
}

hook_around() {
  python3 - "$scratch/src/${HOOK_FILE:-heap.c}" "$1" "$2" "${3:-0}" <<'PY'
import sys
path, needle, before, after = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
text = open(path).read()
lines = [line for line in text.splitlines(True) if needle in line]
assert len(lines) == 1, f"{needle!r} is on {len(lines)} lines of {path}"
line = lines[0]
indent = line[:len(line) - len(line.lstrip())]
call = indent + "if (tessi_test_hook) tessi_test_hook({});\n"
after = call.format(after) if after != "0" else ""
text = text.replace(line, call.format(before) + line + after)
if not path.endswith("heap.c") and "extern void (*tessi_test_hook)(int);" not in text:
    text = text.replace('#include "internal.h"\n',
                        '#include "internal.h"\nextern void (*tessi_test_hook)(int);\n', 1)
open(path, "w").write(text)
PY
}

hooked_run() {
  python3 - "$scratch/src/heap.c" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
text = text.replace("tess_heap_t tessi_heap_empty = {",
                    "void (*tessi_test_hook)(int);\ntess_heap_t tessi_heap_empty = {", 1)
open(path, "w").write(text)
PY
  cmake -S "$scratch" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DTESS_BUILD_TESTS=OFF \
    -DTESS_BUILD_BENCH=OFF >/dev/null
  cmake --build "$scratch/build" -j2 --target tessalloc-api >/dev/null
  cc -O1 -g -std=gnu11 -Iinclude -I"$scratch/src" "$1" \
    "$scratch/build/libtessalloc-api.a" -lpthread -o "$scratch/repro"
  timeout 20 "$scratch/repro"
}
