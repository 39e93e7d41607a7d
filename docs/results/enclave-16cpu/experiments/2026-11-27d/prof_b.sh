#!/usr/bin/env bash
# B pooled on 16 CPUs under prof.c (experiments/prof.c, built here into build-kit/libprof.so:
# cc -O2 -shared -fPIC -o build-kit/libprof.so prof.c -ldl -lrt), tessalloc at HEAD and
# snmalloc, 8 s each, a sample per thread per ms of wall time; gzipped to $OUT. Carrying
# build-kit (kit_loose.sh). Symbolize here: prof.py FILE --root build-kit.
set -u
K=build-kit
for lib in libtess_head libfixed_snmalloc; do
  PROF_US=1000 PROF_OUT=/tmp/$lib.prof LD_PRELOAD=$K/libprof.so timeout 30 $K/enclave_bench \
    --allocator $K/$lib.so --workload b --duration 8 | grep -o 'mallocs=[0-9]*\|elapsed_ms=[0-9.]*'
  gzip -c /tmp/$lib.prof > "$OUT/$lib.prof.gz"
done
