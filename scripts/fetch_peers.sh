#!/usr/bin/env bash
# Install (if missing) and list the process-wide peer allocators the
# benchmarks compare tessalloc with: glibc; jemalloc, mimalloc 2, tcmalloc,
# tbbmalloc and scudo (Debian packages); mimalloc 3 (PyPI cmeel-mimalloc,
# pip --target .cache/peers/mimalloc3); snmalloc and snmalloc-checks (built
# from the source of the crates.io crate snmalloc-sys). Idempotent; writes
# .cache/peers/peers.json and prints name, kind, version, library. All the
# logic is in tessbench/peers.py; extra arguments are passed to it
# (--no-install, --only NAMES, --strict, --json FILE, --cache DIR).
# `tessbench peers --install` does this and builds the fixed-heap peers too.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Prefer the benchmark venv (it has pip); else the system python3.
python="${TESSBENCH_PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$repo/.cache/venv/bin/python" ]]; then
    python="$repo/.cache/venv/bin/python"
  else
    python="$(command -v python3)" || { echo "fetch_peers.sh: python3 not found" >&2; exit 1; }
  fi
fi
cd "$repo"
exec "$python" -m tessbench.peers --cache "$repo/.cache/peers" "$@"
