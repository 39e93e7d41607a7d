#!/usr/bin/env bash
# The enclave main job on a lent 16-CPU machine, one workload per device
# call (each call returns its own results): PART=a runs A in full, PART=b
# runs B for B_DUR seconds per allocator and host. Results tarred to $OUT.
# Here: build into build-dev (README of enclave-16cpu/: cmake, the
# enclave_bench and fixed_tessalloc targets, scripts/fetch_fixed_peers.sh
# build-dev), drop build-dev/enclave-peers/cargo-target, copy this script
# to build-dev/. On the device, carrying build-dev:
#   PART=a A_LIMIT=360 bash build-dev/device_run.sh
#   PART=b B_LIMIT=300 B_DUR=24 bash build-dev/device_run.sh
#   PART=snpeer B_LIMIT=300 bash build-dev/device_run.sh
# (DRY=1 runs the part with --quick, for a trial here with OUT set.) A takes
# about 114 s at 6b3ee9d, with 5 runs per point; since 3e295c5 the short runs
# get up to 25 (--fill-seconds), about 80 s more by the runs of 6b3ee9d.
# PART=snpeer (the thirtieth session's): B pooled, 4 interleaved rounds of
# 10 s of tessalloc, the spinning snmalloc peer (build_peers.py since
# a397f05), the futex one and one with a test-and-test-and-set lock
# (build_futex_peer.py build-dev, here first), about 170 s.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ echo "kernel $(uname -r) nproc $(nproc)"; grep -m1 'model name' /proc/cpuinfo; python3 --version; } |
  tee "$OUT/machine.txt"
python3 -c 'import rich, matplotlib' || exit 3
sed -i "s#/work/main/build-dev#$PWD/build-dev#g" build-dev/enclave-peers/peers.json
if [[ ${DRY:-0} == 1 ]]; then quick=(--quick); else quick=(); fi
case "${PART:-}" in
  a)
    timeout "${A_LIMIT:-360}" python3 bench/enclave/run_enclave.py --build build-dev "${quick[@]}" \
      --workloads a --out /tmp/a16 > "$OUT/a.log" 2>&1
    echo "A rc $?"
    tar czf "$OUT/a16.tgz" -C /tmp a16
    tail -5 "$OUT/a.log"
    tail -60 /tmp/a16/a_table.txt 2>/dev/null
    ;;
  b)
    [[ ${DRY:-0} == 1 ]] || quick=(--duration "${B_DUR:-24}")
    timeout "${B_LIMIT:-300}" python3 bench/enclave/run_enclave.py --build build-dev "${quick[@]}" \
      --workloads b --out /tmp/b16 > "$OUT/b.log" 2>&1
    echo "B rc $?"
    tar czf "$OUT/b16.tgz" -C /tmp b16
    tail -30 "$OUT/b.log"
    ;;
  snpeer)
    BENCH=build-dev/bench/enclave/enclave_bench timeout "${B_LIMIT:-300}" python3 \
      docs/results/enclave/experiments/2026-11-27f/b_touched.py pooled 10 4 \
      build-dev/bench/enclave/libfixed_tessalloc.so build-dev/enclave-peers/libfixed_snmalloc.so \
      build-dev/libfixed_snmalloc_futex.so build-dev/libfixed_snmalloc_ttas.so 2>&1 |
      tee "$OUT/snpeer.log"
    ;;
  *) echo "PART=a, PART=b or PART=snpeer" >&2; exit 2 ;;
esac
