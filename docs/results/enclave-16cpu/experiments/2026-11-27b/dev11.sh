#!/bin/bash
# The twenty-fifth session's kit for the next device session (built by
# build_kit.sh on the 2-core machine; carry build-dev, build/bench/enclave
# and build/enclave-peers). It is the twenty-first session's dev10.sh with
# this kit's builds, and B's lines carrying the workers' calls and CPU
# seconds and the fine peaks:
#   dev11.sh kit   (about 5 minutes) B on 16 CPUs, HEAD against HEAD that
#                  never gives slabs away, HEAD with 16-block slabs and
#                  snmalloc, interleaved, 8 s per run, pooled and
#                  new-thread (3 rounds); then A at 8, 12 and 16 threads
#                  (7 rounds) and every call at once (5 rounds).
#   dev11.sh full  run_enclave.py at HEAD, as dev10.sh full.
set -u
fields='mallocs|worker_mallocs|elapsed_ms|worker_cpu_s'
fields+='|fine_peak_footprint_bytes|fine_peak_live_bytes|nulls|status'
KIT_LIBS="libtess_head libtess_never libtess_m16 libfixed_snmalloc" KIT_B_FIELDS=$fields \
  exec "$(dirname "$0")/../2026-11-27/dev10.sh" "$@"
