#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook after the owner load in tessi_heap_free_remote's NOTIFY
# branch, in a scratch directory, and runs notify_owner.c against it,
# which holds a remote free there while its slab is orphaned, taken by
# another heap and detached again. Prints ok, or FAIL (before the fix,
# e.g. REV 2edd5b5). ctest runs it (race_notify_owner).
#   tests/races/notify_owner.sh [REV]
set -e
cd "$(dirname "$0")/../.."
. tests/races/hooked.sh
hooked_build "$1"
hook_around "tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_" 1 2
hooked_run tests/races/notify_owner.c
