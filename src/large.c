/* Large blocks: above the slab limit, a page span of their own, rounded to
 * pages (not to a power of two), from the heap's span cache or its home
 * partition. Resizing works in place where the neighbouring pages allow. */
#include "internal.h"

#include <string.h>

tess_page_t *tessi_large_alloc(tess_heap_t *h, size_t size, size_t align, bool zero,
                               bool try_cache) {
  size_t pages = (size + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
  size_t align_pages = align > TESS_PAGE_SIZE ? align >> TESS_PAGE_SHIFT : 1;
  if (pages == 0) pages = 1;
  if (pages > UINT32_MAX || align_pages > UINT32_MAX) return NULL;
  tess_page_t *d =
      h != NULL && try_cache && align_pages == 1 ? tessi_heap_span_take(h, pages) : NULL;
  bool is_zero = false;
  if (d == NULL) {
    tess_partition_t *home = h != NULL ? h->home : &tessi_primary->partitions[0];
    if (h != NULL) tessi_heap_span_trip(h);
    tessi_purge_if_due();
    /* a big block takes the lowest run that fits: the spans the heap
     * keeps go back first, to join their free neighbours (kept, one split
     * a 16 MiB region so that it held 14 blocks of 1 MiB, not 15) */
    if (h != NULL && tessi_pages_big(home, pages, align_pages)) tessi_heap_span_drain(h);
    tess_partition_t *from;
    d = tessi_pages_alloc(home, pages, align_pages, TESS_PAGE_LARGE, &is_zero, &from);
    if (d == NULL) {
      tessi_heap_reclaim(h);
      d = tessi_pages_alloc(home, pages, align_pages, TESS_PAGE_LARGE, &is_zero, &from);
    }
    if (d == NULL) return NULL;
  }
  d->large_owner = h; /* (NULL: no heap keeps it when freed) */
  d->large_block = (void *)tessi_page_addr(tessi_region_of_page(d), d);
  if (zero && !is_zero) memset(d->large_block, 0, size);
  return d;
}

void tessi_large_free_other(tess_page_t *d) {
  /* claimed first: two threads freeing one block at once both found it
   * LARGE in free(), and both gave its pages back, which were then handed
   * out twice (a review). The loser finds the head BUSY (or free by now)
   * and reports; free() rejects a BUSY head as it does a deferred one.
   * The owner's free (its span cache, the common case) takes no atomic
   * step: it still slips through when it meets a claim at the very same
   * moment. */
  uint8_t large = TESS_PAGE_LARGE;
  if (!__atomic_compare_exchange_n(&d->kind, &large, (uint8_t)TESS_PAGE_BUSY, false,
                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    tessi_report_invalid("free", (void *)tessi_page_addr(tessi_region_of_page(d), d),
                         "freed twice at once");
  }
  TESS_STAT_MINE(large_frees, 1);
  TESS_STAT_MINE(large_bytes_out, (size_t)d->u.span.pages << TESS_PAGE_SHIFT);
  tessi_pages_free(d, d->u.span.pages);
}

bool tessi_large_resize(tess_region_t *r, tess_page_t *d, size_t size) {
  size_t pages = (size + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
  size_t old = d->u.span.pages;
  if (pages == 0) pages = 1;
  if (pages == old) return true;
  if (pages < old) {
    d->u.span.pages = (uint32_t)pages;
    tessi_pages_free(d + pages, old - pages);
    return true;
  }
  if (pages > UINT32_MAX || !tessi_pages_grow(r, d, old, pages - old)) return false;
  d->u.span.pages = (uint32_t)pages;
  return true;
}
