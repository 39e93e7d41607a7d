#!/usr/bin/env bash
# Installs a built tree into a scratch prefix, then builds and runs a
# consumer three ways: find_package(tessalloc) with the shared and the
# static library, and pkg-config. Usage: run_install_test.sh BUILD_DIR
set -euo pipefail
build=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir="$(dirname "$(find "$work/prefix" -name 'libtessalloc.so' | head -n 1)")"
[[ -f "$libdir/pkgconfig/tessalloc.pc" ]] || { echo "no tessalloc.pc installed" >&2; exit 1; }
[[ -f "$work/prefix/include/tessalloc.h" ]] || { echo "no header installed" >&2; exit 1; }

echo "== find_package"
cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/consumer/consumer_shared"
"$work/consumer/consumer_static"

echo "== pkg-config"
command -v pkg-config >/dev/null || { echo "pkg-config missing: apt-get install pkgconf" >&2; exit 1; }
flags="$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tessalloc)"
# shellcheck disable=SC2086  # the flags are words
cc "$here/consumer/main.c" $flags -o "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
