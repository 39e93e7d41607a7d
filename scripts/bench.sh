#!/usr/bin/env bash
# The benchmark job: tessalloc vs glibc, jemalloc, mimalloc 2 and mimalloc 3.
#
#   scripts/bench.sh [core_bench.py options...]
#
# 1. installs what is missing: valgrind, python3-venv (and cmake/gcc/make if
#    absent) with apt-get; rich into a venv at .cache/venv; the peer
#    allocators via scripts/fetch_peers.sh (cached under .cache/peers);
# 2. configures and builds the project in Release into build/ (the targets
#    tessalloc, bench_core, pair, rusage_run);
# 3. runs bench/core_bench.py (default: 5 interleaved repetitions of each
#    mix for each allocator, then callgrind instruction counts), which
#    prints the tables and writes docs/results/core/ (summary.md, runs.csv,
#    callgrind.csv, meta.json with this command line).
#
# Arguments are passed to core_bench.py (e.g. --repeat 3, --out DIR,
# --no-callgrind; see python3 bench/core_bench.py --help). BUILD_DIR
# overrides build/. Works as root on a fresh Debian 12; as another user it
# uses sudo for apt-get.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${BUILD_DIR:-build}"
venv="$repo/.cache/venv"
invocation="${BUILD_DIR:+BUILD_DIR=$(printf %q "$BUILD_DIR") }scripts/bench.sh"
if (($#)); then invocation+="$(printf ' %q' "$@")"; fi

say() { printf '\n== %s\n' "$*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() { # apt_install PKG... (only the ones not installed)
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if ((apt_updated == 0)); then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

say "system packages"
need=(valgrind python3 python3-venv ca-certificates)
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
apt_install "${need[@]}"

say "python venv ($venv)"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import rich' 2>/dev/null; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet rich
fi

say "peer allocators"
TESSBENCH_PYTHON="$venv/bin/python" scripts/fetch_peers.sh

say "build ($build, Release)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)" --target tessalloc bench_core pair rusage_run

say "benchmark"
export TESSBENCH_COMMAND="$invocation"
exec "$venv/bin/python" bench/core_bench.py --build "$build" "$@"
