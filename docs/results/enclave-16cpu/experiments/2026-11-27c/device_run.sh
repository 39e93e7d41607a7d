#!/usr/bin/env bash
# The enclave main job on a lent 16-CPU machine: A (full) and B (shorter), results tarred to $OUT.
# Here: build into build-dev (README of enclave-16cpu/) and copy this script to build-dev/.
# On the device, carrying build-dev: A_LIMIT=240 B_LIMIT=290 B_DUR=24 bash build-dev/device_run.sh
# (DRY=1 runs both parts with --quick, for a trial here with OUT set.)
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ echo "kernel $(uname -r) nproc $(nproc)"; grep -m1 'model name' /proc/cpuinfo; python3 --version; } | tee $OUT/machine.txt
python3 -c 'import rich, matplotlib' || exit 3
sed -i "s#/work/main/build-dev#$PWD/build-dev#g" build-dev/enclave-peers/peers.json
B_DUR=${B_DUR:-25}
if [[ ${DRY:-0} == 1 ]]; then QA="--quick"; QB="--quick"; else QA=""; QB="--duration $B_DUR"; fi
timeout 60 python3 bench/enclave/run_enclave.py --build build-dev --quick --workloads a \
  --out /tmp/dq > $OUT/quick.log 2>&1 || { tail -30 $OUT/quick.log; exit 4; }
timeout ${A_LIMIT:-240} python3 bench/enclave/run_enclave.py --build build-dev $QA --workloads a \
  --out /tmp/a16 > $OUT/a.log 2>&1; echo "A rc $?"
tar czf $OUT/a16.tgz -C /tmp a16
timeout ${B_LIMIT:-310} python3 bench/enclave/run_enclave.py --build build-dev $QB --workloads b \
  --out /tmp/b16 > $OUT/b.log 2>&1; echo "B rc $?"
tar czf $OUT/b16.tgz -C /tmp b16
tail -5 $OUT/a.log; tail -25 $OUT/b.log; cat /tmp/a16/a_table.txt 2>/dev/null | tail -40
