# Sourced by a session's build_kit.sh, from the repository root: refuses
# sources changed since the commit (every build of a kit is of the
# commit: a change not committed would be in one only), builds build/ and
# the fixed-heap peers (for run_enclave.py), and fills a fresh build-dev/
# with the harness, snmalloc and HEAD's plugin (libtess_$KIT_HEAD.so,
# libtess_head.so by default). kit_variant NAME COMMAND... then adds
# HEAD's plugin with one edit as libtess_NAME.so: COMMAND runs in a
# clone of HEAD in /tmp (the project keeps no worktrees) and must change
# it.
git diff --quiet HEAD -- src include CMakeLists.txt bench ||
  { echo "build_kit: commit or stash the changes to the sources first" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)" > /dev/null
scripts/fetch_fixed_peers.sh build > /dev/null
rm -rf build-dev; mkdir -p build-dev
cp build/bench/enclave/enclave_bench build/enclave-peers/libfixed_snmalloc.so build-dev/
cp build/bench/enclave/libfixed_tessalloc.so "build-dev/libtess_${KIT_HEAD:-head}.so"

kit_variant() {
  local tree=/tmp/kit_$1
  rm -rf "$tree"
  git clone -q . "$tree"
  (cd "$tree" && "${@:2}")
  if git -C "$tree" diff --quiet; then
    echo "build_kit: the edit for $1 changed nothing" >&2
    exit 1
  fi
  cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$tree/build" -j"$(nproc)" --target fixed_tessalloc > /dev/null
  cp "$tree/build/bench/enclave/libfixed_tessalloc.so" "build-dev/libtess_$1.so"
  rm -rf "$tree"
}
