/* Slabs: a span of pages cut into blocks of one size class, with three free
 * lists (mimalloc's sharding):
 *   free        what the owner allocates from (no atomics),
 *   local_free  what the owner freed (no atomics),
 *   remote      what other threads freed (an atomic stack).
 * local_free joins free only once free is empty, so neither list is ever
 * walked for it; remote frees are walked once, to count them back.
 * Blocks are carved lazily, about a page at a time. A full slab leaves its
 * bin ("detached") and sets TESS_REMOTE_NOTIFY in `remote`; the next remote
 * free then hands its block to the owner heap's delayed list instead (see
 * heap.c), so the owner learns that the slab has room again without
 * scanning. */
#include "internal.h"

tess_page_t tessi_page_empty; /* free == NULL: the fast path falls through */

void tessi_slab_format(tess_page_t *d, unsigned cls, tess_heap_t *owner) {
  const tess_class_info_t *info = &tessi_classes[cls];
  d->free = NULL;
  d->local_free = NULL;
  d->state = 0;
  __atomic_store_n(&d->capacity, 0, __ATOMIC_RELAXED); /* read by any thread: alloc.c */
  d->size_class = (uint8_t)cls;
  d->head_delta = 0;
  d->u.div_magic = info->div_magic;
  atomic_store_explicit(&d->remote, 0, memory_order_relaxed);
  atomic_store_explicit(&d->owner, owner, memory_order_relaxed);
  d->next = d->prev = NULL;
  TESS_STAT_ADD(owner->stats.slabs_made[cls], 1);
  /* interior pages are zero (a free span's) but for the way to the head;
   * the head's kind was stamped by the span allocator */
  for (uint32_t i = 1; i < info->slab_pages; i++) {
    d[i].head_delta = (uint16_t)(i * sizeof(tess_page_t));
  }
}

static void slab_extend(tess_page_t *d) {
  const tess_class_info_t *info = &tessi_classes[d->size_class];
  uint32_t count = TESS_MIN(info->extend_blocks, info->slab_blocks - d->capacity);
  if (count == 0) return;
  size_t size = info->block_size;
  char *first = (char *)tessi_page_addr(tessi_region_of_page(d), d) + (size_t)d->capacity * size;
  char *block = first;
  for (uint32_t i = 1; i < count; i++, block += size) {
    ((tess_block_t *)block)->next = (tess_block_t *)(block + size);
  }
  ((tess_block_t *)block)->next = d->free;
  d->free = (tess_block_t *)first;
  __atomic_store_n(&d->capacity, (uint16_t)(d->capacity + count), __ATOMIC_RELAXED);
}

/* Puts the chain first..(its end) in front of d->free; returns its length.
 * A chain longer than the blocks carved has a cycle: a block freed twice
 * by other threads, not next to each other on the stack (two in a row are
 * caught at the push: heap.c); collected, it looped for good (a review). */
static uint32_t prepend_chain(tess_page_t *d, tess_block_t *first) {
  uint32_t count = 1;
  tess_block_t *last = first;
  while (last->next != NULL) {
    last = last->next;
    if (++count > d->capacity) tessi_report_invalid("free", last, "freed twice");
  }
  last->next = d->free;
  d->free = first;
  return count;
}

void tessi_slab_collect_remote_slow(tess_page_t *d) {
  uintptr_t remote = atomic_exchange_explicit(&d->remote, 0, memory_order_acquire);
  tess_block_t *list = (tess_block_t *)(remote & ~TESS_REMOTE_NOTIFY);
  /* remote frees were counted out until now */
  if (list != NULL) {
    uint32_t count = prepend_chain(d, list);
    d->state = (int16_t)(d->state - (int16_t)count);
    TESS_STAT_MINE(pending_out[d->size_class], count);
  }
}

bool tessi_slab_refill_slow(tess_page_t *d) {
  if (d->free != NULL) return true;
  /* local frees move over only once free is empty: no walk */
  d->free = d->local_free;
  d->local_free = NULL;
  tessi_slab_collect_remote(d);
  /* reuse what was freed before touching fresh memory */
  if (d->free == NULL) slab_extend(d);
  return d->free != NULL;
}
