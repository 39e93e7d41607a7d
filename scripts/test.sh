#!/usr/bin/env bash
# Builds tessalloc and runs every test: the Release build (unit, stress,
# death, fuzz, preload into real programs, install), then the stress-type
# tests again with the allocator compiled under AddressSanitizer+UBSan and
# under ThreadSanitizer, and the API tests in a build that counts requested
# bytes (-DTESS_STATS_REQUESTED=ON).
#
#   scripts/test.sh            all four builds
#   scripts/test.sh release    one of: release, asan, tsan, requested
#
# Installs what it needs from Debian (as root, or through sudo): a C
# toolchain, cmake, pkg-config, the programs the preload tests run
# (python3, sqlite3, git, coreutils), mbedtls (tessbench's x509 workload)
# and redis (its redis workload, run by the tessbench_broken test); and
# rich, matplotlib and jsonschema from PyPI into .cache/venv for the Python
# tests (enclave runner, statistics schema and viewer, tessbench), with the
# tessbench package itself (pip install -e .).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
builds=("$@")
((${#builds[@]})) || builds=(release asan tsan requested)

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in gcc libc6-dev make cmake pkgconf python3 sqlite3 git coreutils libmbedtls-dev \
  redis-server redis-tools; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q ' installed$' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "== installing ${missing[*]}" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
fi

# The Python tests need rich, matplotlib and jsonschema: the same venv as
# scripts/bench.sh.
venv="$repo/.cache/venv"
if [[ ! -x "$venv/bin/python" ]] ||
  ! "$venv/bin/python" -c 'import rich, matplotlib, jsonschema' 2>/dev/null; then
  dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q ' installed$' ||
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet rich matplotlib jsonschema
fi
if [[ ! -x "$venv/bin/tessbench" ]]; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet -e "$repo"
fi

jobs="$(nproc)"
for build in "${builds[@]}"; do
  case "$build" in
    release) dir=build flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    asan) dir=build-asan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESS_SANITIZE=address) ;;
    tsan) dir=build-tsan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESS_SANITIZE=thread) ;;
    requested) dir=build-requested
      flags=(-DCMAKE_BUILD_TYPE=Release -DTESS_STATS_REQUESTED=ON -DTESS_BUILD_BENCH=OFF) ;;
    *) echo "unknown build '$build' (release, asan, tsan, requested)" >&2; exit 2 ;;
  esac
  echo "== $build build in $dir" >&2
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  filter=()
  [[ $build == requested ]] && filter=(-R '^(test_api|test_invalid|test_stats|test_fuzz|test_fuzz_fixed|test_stress|test_fixed)$')
  (cd "$dir" && ctest -j "$jobs" --output-on-failure "${filter[@]}")
done
echo "== all tests passed (${builds[*]})" >&2
