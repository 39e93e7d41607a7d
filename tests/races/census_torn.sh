#!/bin/sh
# A race no stress run meets on its own (a review found it by reading):
# builds the library (the working tree's, or git revision REV's) with a
# test hook in tessi_slab_census just after it reads a span head's kind,
# in a scratch directory, and runs census_torn.c against it, which holds
# an automatic sample (the census without locks) there at a large block
# while the block is freed and its first page becomes a slab's head.
# Prints ok, or FAIL. ctest runs it (race_census_torn).
#   tests/races/census_torn.sh [REV]
set -e
cd "$(dirname "$0")/../.."
. tests/races/hooked.sh
hooked_build "$1"
HOOK_FILE=check.c hook_around "uint8_t kind = RACY_LOAD(d->kind);" -1 "(int)i"
hooked_run tests/races/census_torn.c
