# Sourced by a session's build_kit.sh, from the repository root: refuses
# sources changed since the commit (every build of a kit is of the
# commit: a change not committed would be in one only), builds build/ and
# the fixed-heap peers (for run_enclave.py), and fills a fresh build-dev/
# with the harness, snmalloc and HEAD's plugin (libtess_head.so). The kit
# then adds its own builds.
git diff --quiet HEAD -- src include CMakeLists.txt bench ||
  { echo "build_kit: commit or stash the changes to the sources first" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)" > /dev/null
scripts/fetch_fixed_peers.sh build > /dev/null
rm -rf build-dev; mkdir -p build-dev
cp build/bench/enclave/enclave_bench build/enclave-peers/libfixed_snmalloc.so build-dev/
cp build/bench/enclave/libfixed_tessalloc.so build-dev/libtess_head.so
