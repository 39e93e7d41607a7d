/* libfixed_tessalloc.so: tessalloc as enclave_bench sees it.
 *
 * Only through the Open Enclave pluggable-allocator entry points of
 * libtessalloc-oe.a (include/tessalloc_oe.h), exactly as an enclave would
 * call them: init = oe_allocator_init over the region, ECALL begin/end =
 * oe_allocator_thread_init / _thread_cleanup, footprint = tess_footprint
 * (pages of the region in use, and their peak, exact but for frees in
 * flight: docs/mechanisms/spans.md; mallinfo's are the
 * bytes of the live blocks). The library is
 * linked in whole; a version script exports fixed_allocator() alone, so
 * none of tessalloc's symbols can reach the harness. */
#include <stddef.h>
#include <stdint.h>

#include "fixed_alloc.h"
#include "tessalloc.h"
#include "tessalloc_oe.h"

#ifndef TESS_PLUGIN_VERSION
#define TESS_PLUGIN_VERSION "?"
#endif

static int plugin_init(void *start, void *end) {
  oe_allocator_init(start, end);
  /* oe_allocator_init returns nothing: a heap that reports no capacity
   * afterwards did not take the region. */
  oe_mallinfo_t info;
  if (oe_allocator_mallinfo(&info) != OE_OK || info.max_total_heap_size == 0) return -1;
  return 0;
}

static void plugin_thread_init(void) { oe_allocator_thread_init(); }
static void plugin_thread_cleanup(void) { oe_allocator_thread_cleanup(); }
static void *plugin_malloc(size_t size) { return oe_allocator_malloc(size); }
static void plugin_free(void *ptr) { oe_allocator_free(ptr); }
static void *plugin_calloc(size_t n, size_t size) { return oe_allocator_calloc(n, size); }
static void *plugin_realloc(void *ptr, size_t size) { return oe_allocator_realloc(ptr, size); }
static size_t plugin_usable_size(void *ptr) { return oe_allocator_malloc_usable_size(ptr); }

static size_t plugin_footprint(void) { return tess_footprint(NULL); }

static size_t plugin_footprint_peak(void) {
  size_t peak;
  (void)tess_footprint(&peak);
  return peak;
}

static const fixed_allocator_t table = {
    .name = "tessalloc",
    .version = TESS_PLUGIN_VERSION,
    .init = plugin_init,
    .thread_init = plugin_thread_init,
    .thread_cleanup = plugin_thread_cleanup,
    .malloc = plugin_malloc,
    .free = plugin_free,
    .calloc = plugin_calloc,
    .realloc = plugin_realloc,
    .usable_size = plugin_usable_size,
    .footprint = plugin_footprint,
    .footprint_peak = plugin_footprint_peak,
    .stats_json = tess_stats_json,
};

__attribute__((visibility("default"))) const fixed_allocator_t *fixed_allocator(void) {
  return &table;
}
