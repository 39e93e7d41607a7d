#!/usr/bin/env bash
# The benchmark jobs.
#
#   scripts/bench.sh [enclave] [run_enclave.py options...]   the main job
#   scripts/bench.sh core [core_bench.py options...]
#   scripts/bench.sh stats [stats_cost.py options...]
#   scripts/bench.sh tessbench [tessbench run options...]
#
# enclave (default): tessalloc against dlmalloc (one global lock, as Open
#   Enclave's default), snmalloc (fixed-range configuration) and mimalloc 3,
#   each given one fixed heap: workload A (Open Enclave's pluggable_allocator
#   sample, 1..16 threads: the sample's table and a plot of time vs
#   threads) and workload B (the fragmentation soak: footprint against live
#   bytes over time). Writes docs/results/enclave/.
# core: tessalloc against glibc, jemalloc, mimalloc 2 and 3, tcmalloc,
#   tbbmalloc, scudo, snmalloc and snmalloc-checks as the process's malloc:
#   three allocation mixes and callgrind instructions per malloc+free pair.
#   Writes docs/results/core/.
# stats: what the always-on statistics counters cost: callgrind
#   instructions per malloc+free pair against a build without them (the
#   script configures that one in <build>-nocounters). Writes
#   docs/results/stats/.
# tessbench: every allocator (glibc, jemalloc, mimalloc 2 and 3, tcmalloc,
#   tbbmalloc, scudo, snmalloc, snmalloc-checks, tessalloc; in fixed heaps
#   dlmalloc, snmalloc, mimalloc 3, tessalloc) over every workload of
#   tessbench (tessbench/README.md), then plots and a report. Writes
#   docs/results/tessbench/ unless --out is given.
#
# Installs what is missing: cmake, a C/C++ toolchain, valgrind and
# python3-venv with apt-get -- for tessbench also mbedtls, redis and the
# Debian peers; rich and matplotlib (and for tessbench the
# tessbench package) into a venv at .cache/venv; the peers from their
# registries (apt, PyPI, crates.io) through scripts/fetch_peers.sh and
# scripts/fetch_fixed_peers.sh, or for tessbench `tessbench peers --install`
# (cached under .cache/). Builds the project in Release into build/
# (BUILD_DIR overrides). Works as root on a fresh Debian 12; as another user
# it uses sudo for apt. The crates.io peers need cargo (rustup's, Rust 1.78
# or newer), which it does not install.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${BUILD_DIR:-build}"
venv="$repo/.cache/venv"
job=enclave
if (($#)) && [[ "$1" == enclave || "$1" == core || "$1" == stats || "$1" == tessbench ]]; then
  job=$1
  shift
fi
invocation="${BUILD_DIR:+BUILD_DIR=$(printf %q "$BUILD_DIR") }scripts/bench.sh $job"
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
need=(python3 python3-venv ca-certificates g++ binutils)
[[ $job == core || $job == stats ]] && need+=(valgrind)
# tessbench's workloads and peers from Debian (snmalloc is built from crates.io's source)
[[ $job == tessbench ]] && need+=(libmbedtls-dev redis-server redis-tools libjemalloc2
  libmimalloc2.0 libtcmalloc-minimal4 libtbbmalloc2 libclang-rt-14-dev)
# cargo fetches the crates.io sources (snmalloc-sys, dlmalloc). Not from
# Debian: bookworm's cargo 1.65 reads crates.io's index from GitHub only and
# its Rust 1.63 cannot build the dlmalloc plugin (Rust 1.75 or newer).
if [[ $job == enclave || $job == tessbench ]] && ! command -v cargo >/dev/null &&
  [[ ! -x "$HOME/.cargo/bin/cargo" ]]; then
  say "no cargo: install Rust with rustup (https://rustup.rs) for the snmalloc and dlmalloc" \
    "peers; without it they are reported missing and skipped"
fi
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(gcc libc6-dev)
command -v make >/dev/null || need+=(make)
apt_install "${need[@]}"

say "python venv ($venv)"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import rich, matplotlib' 2>/dev/null; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet rich matplotlib
fi
# tessbench itself (its console script; importing it from the repository
# root would succeed without it)
if [[ $job == tessbench && ! -x "$venv/bin/tessbench" ]]; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet -e "$repo"
fi

say "build ($build, Release)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
if [[ $job == core ]]; then
  cmake --build "$build" -j "$(nproc)" --target tessalloc bench_core pair rusage_run
elif [[ $job == tessbench ]]; then
  cmake --build "$build" -j "$(nproc)"
elif [[ $job == stats ]]; then
  cmake --build "$build" -j "$(nproc)" --target tessalloc pair
else
  cmake --build "$build" -j "$(nproc)" --target enclave_bench fixed_tessalloc
fi

export TESSBENCH_COMMAND="$invocation"
if [[ $job == stats ]]; then
  say "statistics counters: cost"
  exec "$venv/bin/python" bench/stats_cost.py --build "$build" "$@"
fi
if [[ $job == core ]]; then
  say "peer allocators"
  TESSBENCH_PYTHON="$venv/bin/python" scripts/fetch_peers.sh
  say "benchmark"
  exec "$venv/bin/python" bench/core_bench.py --build "$build" "$@"
fi
if [[ $job == tessbench ]]; then
  say "peer allocators (process-wide and fixed-heap)"
  "$venv/bin/tessbench" peers --install --build "$build"
  say "tessbench"
  out=(--out docs/results/tessbench)
  for a in "$@"; do [[ $a == --out || $a == --out=* ]] && out=(); done
  exec "$venv/bin/tessbench" run --build "$build" "${out[@]}" "$@"
fi
say "fixed-heap peer allocators"
TESSBENCH_PYTHON="$venv/bin/python" scripts/fetch_fixed_peers.sh "$build"
say "enclave benchmark"
exec "$venv/bin/python" bench/enclave/run_enclave.py --build "$build" "$@"
