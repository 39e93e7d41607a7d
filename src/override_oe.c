/* Open Enclave's pluggable-allocator names for the malloc family (see
 * include/tessalloc_oe.h). Included at the end of alloc.c in the
 * libtessalloc-oe.a build, for the same reason as override.c: an alias
 * must be defined in its target's translation unit. Lifecycle and
 * mallinfo (oe.c) come into the same object: OE's link names only
 * oe_allocator_malloc (enclave/link.c) and expects the plug-in's object to
 * bring all twelve functions, so a lifecycle function in an object of its
 * own was never taken from the archive, and the linker took OE's default
 * allocator object for it, whose malloc family then clashed with ours
 * (tests/oe_link). */
#include "tessalloc_oe.h"

void *oe_allocator_malloc(size_t size) TESS_ALIAS(tess_malloc);
void oe_allocator_free(void *ptr) TESS_ALIAS(tess_free);
void *oe_allocator_calloc(size_t nmemb, size_t size) TESS_ALIAS(tess_calloc);
void *oe_allocator_realloc(void *ptr, size_t size) TESS_ALIAS(tess_realloc);
void *oe_allocator_aligned_alloc(size_t alignment, size_t size) TESS_ALIAS(tess_aligned_alloc);
int oe_allocator_posix_memalign(void **memptr, size_t alignment, size_t size)
    TESS_ALIAS(tess_posix_memalign);
size_t oe_allocator_malloc_usable_size(void *ptr) TESS_ALIAS(tess_usable_size);

#include "oe.c"
