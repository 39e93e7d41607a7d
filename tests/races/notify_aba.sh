#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook before and after the owner load in tessi_heap_free_remote's
# NOTIFY branch, in a scratch directory, and runs notify_aba.c against it,
# which holds a remote free at both points while other threads orphan,
# take and detach the slab again. Prints ok, or FAIL (before 2026-11-27's
# fix, e.g. REV 60dc187). ctest runs it (race_notify_aba).
#   tests/races/notify_aba.sh [REV]
set -e
cd "$(dirname "$0")/../.."
. tests/races/hooked.sh
hooked_build "$1"
hook_around "tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_" 1 2
hooked_run tests/races/notify_aba.c
