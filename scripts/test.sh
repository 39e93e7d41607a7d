#!/usr/bin/env bash
# Builds tessalloc and runs every test: the Release build (unit, stress,
# death, fuzz, preload into real programs, install), then the stress-type
# tests again with the allocator compiled under AddressSanitizer+UBSan and
# under ThreadSanitizer.
#
#   scripts/test.sh            all three builds
#   scripts/test.sh release    one of: release, asan, tsan
#
# Installs what it needs from Debian (as root, or through sudo): a C
# toolchain, cmake, pkg-config, and the programs the preload tests run
# (python3, sqlite3, git, coreutils); and rich and matplotlib from PyPI into
# .cache/venv for the enclave runner's tests.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
builds=("$@")
((${#builds[@]})) || builds=(release asan tsan)

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in gcc libc6-dev make cmake pkgconf python3 sqlite3 git coreutils; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q ' installed$' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "== installing ${missing[*]}" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
fi

# The enclave runner's tests need rich and matplotlib: the same venv as
# scripts/bench.sh (without it they are left out, not failed).
venv="$repo/.cache/venv"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import rich, matplotlib' 2>/dev/null; then
  dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q ' installed$' ||
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet rich matplotlib
fi

jobs="$(nproc)"
for build in "${builds[@]}"; do
  case "$build" in
    release) dir=build flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    asan) dir=build-asan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESS_SANITIZE=address) ;;
    tsan) dir=build-tsan flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESS_SANITIZE=thread) ;;
    *) echo "unknown build '$build' (release, asan, tsan)" >&2; exit 2 ;;
  esac
  echo "== $build build in $dir" >&2
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure)
done
echo "== all tests passed (${builds[*]})" >&2
