/* The dlmalloc peer: the crates.io dlmalloc crate behind one global lock
 * (dlmalloc/src/lib.rs, a Rust staticlib) as a fixed_allocator_t plugin.
 *
 * Build (bench/enclave/peers/build_peers.py does this):
 *   cc -O2 -fPIC -shared -DPEER_VERSION='"0.2.14"' dlmalloc_plugin.c \
 *      libfixed_dlmalloc.a -Wl,--version-script=plugin.map -lpthread -ldl
 */
#include <stddef.h>

#include "../fixed_alloc.h"

#ifndef PEER_VERSION
#define PEER_VERSION "unknown"
#endif

int tdl_init(void *start, void *end);
void *tdl_malloc(size_t size);
void tdl_free(void *ptr);
void *tdl_calloc(size_t count, size_t size);
void *tdl_realloc(void *ptr, size_t size);
size_t tdl_usable_size(void *ptr);
size_t tdl_footprint(void);
size_t tdl_footprint_peak(void);

/* One lock around one heap: nothing to do per thread. */
static void dl_thread_init(void) {}
static void dl_thread_cleanup(void) {}

static const fixed_allocator_t dlmalloc_peer = {
    .name = "dlmalloc",
    .version = PEER_VERSION,
    .init = tdl_init,
    .thread_init = dl_thread_init,
    .thread_cleanup = dl_thread_cleanup,
    .malloc = tdl_malloc,
    .free = tdl_free,
    .calloc = tdl_calloc,
    .realloc = tdl_realloc,
    .usable_size = tdl_usable_size,
    .footprint = tdl_footprint,
    /* the bump pointer's high-water mark (the top is trimmed, as in OE) */
    .footprint_peak = tdl_footprint_peak,
};

__attribute__((visibility("default"))) const fixed_allocator_t *
fixed_allocator(void) {
  return &dlmalloc_peer;
}
