#!/usr/bin/env bash
# Workload B in smaller regions: the NULLs each allocator returns when the
# region is only a little larger than what is live (the capacity its
# footprint really costs). Run from the repository root after
# scripts/bench.sh has built the peers:
#   bash docs/results/enclave/experiments/2026-11-26h/capacity.sh [SECONDS] [MIB...]
set -euo pipefail
seconds=${1:-10}
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(26 28 30 32 34 36 40)
bench=build/bench/enclave/enclave_bench
libs=(build/enclave-peers/libfixed_dlmalloc.so build/bench/enclave/libfixed_tessalloc.so
  build/enclave-peers/libfixed_snmalloc.so)
printf '%-10s %4s %9s %12s %12s %13s\n' allocator MiB nulls peak_live_MiB footprint_MiB alloc_calls/s
for mib in "${sizes[@]}"; do
  for lib in "${libs[@]}"; do
    line=$("$bench" --allocator "$lib" --workload b --host pooled --duration "$seconds" \
      --heap-pages $((mib * 256)) 2>/dev/null | grep '^result' || true)
    if [[ -z $line ]]; then # a crash or a failed check without numbers
      printf '%-10s %4s %9s\n' "$(basename "$lib" .so | sed 's/libfixed_//')" "$mib" "no result"
      continue
    fi
    get() { tr ' ' '\n' <<<"$line" | sed -n "s/^$1=//p"; }
    printf '%-10s %4s %9s %12.2f %12.2f %13.0f\n' "$(get allocator)" "$mib" "$(get nulls)" \
      "$(bc -l <<<"$(get peak_live_bytes) / 1048576")" \
      "$(bc -l <<<"$(get footprint_peak) / 1048576")" \
      "$(bc -l <<<"$(get mallocs) * 1000 / $(get elapsed_ms)")"
  done
done
