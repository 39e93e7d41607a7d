/* The rest of Open Enclave's pluggable-allocator interface: lifecycle and
 * mallinfo (the malloc family is override_oe.c). Nothing here logs, waits
 * on the OS or leaves the enclave.
 *
 * OE calls oe_allocator_thread_init when an enclave call begins and
 * oe_allocator_thread_cleanup when it ends, after the thread's
 * destructors (which may free). A heap is taken from the pool on the
 * call's first allocation, not at thread_init, so calls that do not
 * allocate hold none; cleanup trims it and hands it back for the next
 * call, on any host thread. Frees after cleanup (OE frees after the last
 * cleanup of its destructor call) are served as frees from a thread
 * without a heap. */
#include "internal.h"
#include "tessalloc.h"
#include "tessalloc_oe.h"

TESS_API void oe_allocator_init(void *heap_start_address, void *heap_end_address) {
  /* a failure leaves tessalloc uninitialized: every allocation then fails,
   * which is all OE could be told anyway */
  (void)tess_init_region(heap_start_address, heap_end_address);
}

TESS_API void oe_allocator_cleanup(void) {}

TESS_API void oe_allocator_thread_init(void) {}

TESS_API void oe_allocator_thread_cleanup(void) { tess_thread_cleanup(); }

/* OE's fields: "number of bytes allocated at the moment" (the blocks
 * live now, at their sizes, as dlmalloc's count is of its chunks in use,
 * so that a call that frees all it allocated leaves it where it was) and
 * "the highest value seen". No count every thread shares follows the live
 * bytes (it would cost each allocation), so the peak is the most the
 * region's pages ever held of blocks and what serves them (slabs, kept
 * spans, heap structs beyond the first chunk): never below the most bytes
 * live at once, and exact as a footprint but for operations in flight, as
 * OE's default dlmalloc reports its peak footprint here. The live bytes' own peak, seen at the
 * statistics' reads and samples only, missed a third of a new high reached
 * in pages already in use (test_oe). Read while other threads free blocks
 * of each other's, the current size is off by the remote frees and their
 * collections made during the read's slab walk, either way
 * (docs/mechanisms/stats.md). */
TESS_API oe_result_t oe_allocator_mallinfo(oe_mallinfo_t *info) {
  if (info == NULL || !atomic_load_explicit(&tessi_ready, memory_order_acquire)) {
    return OE_FAILURE;
  }
  if (tessi_in_visit) return OE_FAILURE; /* the walk's locks are held */
  size_t live = tessi_stats_live_bytes();
  /* what blocks can take: not the header, the page descriptors (1/64 of
   * the region) or the first chunk of heap structs. OE's bigmalloc test
   * allocates 0.99 of this less the current size in one block (it fits
   * while the heaps fit that chunk; at 16 GiB the test also asks for more
   * than 15.9 GiB, which the descriptors do not leave:
   * docs/mechanisms/fixed-heap.md). */
  size_t allocatable = tessi_fixed_allocatable(tessi_primary);
  size_t first_chunk = ((size_t)tessi_primary->page_count << TESS_PAGE_SHIFT) - allocatable;
  size_t in_use = tessi_peak_partition_bytes();
  size_t peak = in_use > first_chunk ? in_use - first_chunk : 0;
  if (peak > allocatable) peak = allocatable;
  info->max_total_heap_size = allocatable;
  info->current_allocated_heap_size = live;
  /* (live itself may be off by frees in flight during the read: the peak
   * is never below it) */
  info->peak_allocated_heap_size = TESS_MAX(peak, live);
  return OE_OK;
}
