#!/usr/bin/env bash
# mkvar.sh NAME 'EDIT COMMAND' : a build of the enclave plugin one edit
# away from the repository's HEAD. Clones HEAD into /tmp/var_NAME, runs the
# edit there (a sed or python one-liner), builds the plugin (Release) and
# copies it to /tmp/libs/NAME.so.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../../../.." && pwd)"
name=$1
shift
rm -rf "/tmp/var_$name"
git clone -q "$repo" "/tmp/var_$name"
cd "/tmp/var_$name"
eval "$@"
git diff --stat
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target fixed_tessalloc >/dev/null
mkdir -p /tmp/libs
cp build/bench/enclave/libfixed_tessalloc.so "/tmp/libs/$name.so"
echo "built /tmp/libs/$name.so"
