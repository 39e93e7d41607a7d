#!/usr/bin/env bash
# Install (if missing) and list the peer allocators the benchmarks compare
# tessalloc with: glibc, jemalloc and mimalloc 2 (Debian packages), mimalloc 3
# (PyPI cmeel-mimalloc, pip --target .cache/peers/mimalloc3).
# Idempotent; writes .cache/peers/peers.json and prints name, preload, version.
# All the logic is in tessbench/peers.py; extra arguments are passed to it
# (--no-install, --strict, --json FILE, --cache DIR).
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
