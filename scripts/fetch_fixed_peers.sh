#!/usr/bin/env bash
# Build the enclave benchmark's fixed-heap peers -- dlmalloc (crates.io crate
# behind one lock), snmalloc (fixed-range config, source from the crates.io
# crate snmalloc-sys) and mimalloc 3 (PyPI cmeel-mimalloc) -- as plugins
# BUILD_DIR/enclave-peers/libfixed_<name>.so (bench/enclave/fixed_alloc.h),
# run plugin_check on each and write BUILD_DIR/enclave-peers/peers.json.
#
#   scripts/fetch_fixed_peers.sh [BUILD_DIR] [--no-install] [--no-check]
#                                [--only NAME ...] [--strict]
#
# BUILD_DIR defaults to build. Idempotent: sources are cached under .cache/
# and only what changed is rebuilt. Installs what is missing (g++, binutils
# from apt; the mimalloc wheel with pip); cargo must be installed. All the
# logic is in bench/enclave/peers/build_peers.py.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo/build"
if [[ $# -gt 0 && "$1" != -* ]]; then
  build_dir="$1"
  shift
fi
# Prefer the benchmark venv (it has pip); else the system python3.
python="${TESSBENCH_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$repo/.cache/venv/bin/python" ]]; then
    python="$repo/.cache/venv/bin/python"
  else
    python="$(command -v python3)" || { echo "fetch_fixed_peers.sh: python3 not found" >&2; exit 1; }
  fi
fi
# cargo is often only in ~/.cargo/bin (rustup's default), not on PATH.
if ! command -v cargo >/dev/null 2>&1 && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  PATH="$HOME/.cargo/bin:$PATH"
fi
exec "$python" "$repo/bench/enclave/peers/build_peers.py" --build-dir "$build_dir" "$@"
