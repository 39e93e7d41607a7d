#!/usr/bin/env bash
# Links libtessalloc-oe.a the way an Open Enclave enclave is linked, with
# stand-ins for OE's objects (this directory's .c files): the plug-in
# archive first, referenced through oe_allocator_malloc alone, then an
# "oecore" archive that calls the lifecycle functions and also holds a
# default allocator defining all twelve. The plug-in must satisfy every
# call, so that the default object is not taken (which would fail with
# duplicate definitions, or link the wrong allocator).
#
#   run_oe_link.sh CC LIBTESSALLOC_OE WORKDIR
set -euo pipefail
cc=$1 lib="$(realpath "$2")" work=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
flags=(-O1 -fno-builtin -ffreestanding -fno-stack-protector -w)
for f in start oecore default_allocator oelibc; do "$cc" "${flags[@]}" -c "$here/$f.c" -o $f.o; done
ar rcs liboecore.a oecore.o default_allocator.o
ar rcs liboelibc.a oelibc.o
# (a plain static link: gold and old compilers know no -static-pie)
link=("$cc" -nostdlib -static -no-pie -Wl,-e,_start)

# control: without the plug-in, the default allocator is taken
"${link[@]}" -o default.elf start.o liboecore.a liboelibc.a
nm default.elf >default.syms
if ! grep -q oe_default_allocator_linked default.syms; then
  echo "FAIL: the stand-in link did not take the default allocator" >&2
  exit 1
fi

# the plug-in: links, and brings every function itself
if ! "${link[@]}" -o plugin.elf start.o "$lib" liboecore.a liboelibc.a 2>link.err; then
  cat link.err >&2
  echo "FAIL: the enclave link with $lib failed" >&2
  exit 1
fi
nm plugin.elf >plugin.syms
if grep -q oe_default_allocator_linked plugin.syms; then
  echo "FAIL: the default allocator was linked beside $lib" >&2
  exit 1
fi
# each one's own and exported (T: public, as OE's declarations are)
for f in init cleanup thread_init thread_cleanup malloc free calloc realloc aligned_alloc \
  posix_memalign malloc_usable_size mallinfo; do
  grep -q " T oe_allocator_$f\$" plugin.syms || {
    echo "FAIL: oe_allocator_$f missing" >&2
    exit 1
  }
done
echo "PASS: $lib links as an enclave's allocator (all 12 functions its own)"
