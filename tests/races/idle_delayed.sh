#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook in tessi_heap_free_remote's NOTIFY branch, between taking a
# full slab's NOTIFY and the push onto its owner's delayed list, in a
# scratch directory, and runs idle_delayed.c against it, which holds a
# free there while the call that owns the slab ends, and pushes once its
# heap sits idle between two others in the pool. Prints ok, or FAIL.
# ctest runs it (race_idle_delayed).
#   tests/races/idle_delayed.sh [REV]
set -e
cd "$(dirname "$0")/../.."
. tests/races/hooked.sh
hooked_build "$1"
hook_around "heap_delayed_push(owner, b);" 1
hooked_run tests/races/idle_delayed.c
