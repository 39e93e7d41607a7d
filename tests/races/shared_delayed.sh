#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook in tessi_heap_free_remote's NOTIFY branch, between taking a
# full slab's NOTIFY and the push onto its owner's delayed list, in a
# scratch directory, and runs shared_delayed.c against it, which holds a
# free to the shared heap there while the call that used it ends. Prints
# ok, or FAIL (before 2026-11-27's fix, e.g. REV d86cf68). ctest runs it
# (race_shared_delayed).
#   tests/races/shared_delayed.sh [REV]
set -e
cd "$(dirname "$0")/../.."
. tests/races/hooked.sh
hooked_build "$1"
hook_around "heap_delayed_push(owner, b);" 1
hooked_run tests/races/shared_delayed.c
