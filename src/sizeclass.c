/* Size classes and slab geometry.
 *
 * Classes: 16..128 in steps of 16, then four per doubling (160, 192, 224,
 * 256, 320, ...) up to 64 KiB: at most 20% internal waste above 128 bytes.
 * Every class size is a multiple of 16, so blocks are 16-byte aligned; a
 * class whose size is a multiple of a power of two A has A-aligned blocks
 * (slabs start on a page). Slab length per class is computed at init from
 * a target, so small fixed heaps can use shorter slabs than OS mode. */
#include "internal.h"

tess_class_info_t tessi_classes[TESS_CLASSES];
size_t tessi_slab_limit = TESS_SLAB_MAX_SIZE;

static uint32_t class_size(unsigned cls) {
  if (cls < TESS_EXACT_CLASSES) return 16u * (cls + 1u);
  unsigned group = (cls - TESS_EXACT_CLASSES) / 4u;
  unsigned step = (cls - TESS_EXACT_CLASSES) % 4u;
  return (128u << group) + (step + 1u) * (32u << group);
}

/* Pages for a slab of `size` blocks: at least `target` bytes and
 * `min_blocks` blocks; then the fewest pages (up to two or a quarter more)
 * that leave at most 1/8 of the slab as an unusable tail, or failing that
 * the fewest with the smallest tail. */
static uint32_t slab_pages_for(uint32_t size, size_t target, uint32_t min_blocks) {
  size_t want = TESS_MAX(target, (size_t)size * min_blocks);
  size_t pages = TESS_MAX((size_t)1, (want + TESS_PAGE_SIZE - 1) / TESS_PAGE_SIZE);
  pages = TESS_MIN(pages, (size_t)TESS_SLAB_MAX_PAGES);
  size_t last = TESS_MIN(pages + TESS_MAX((size_t)2, pages / 4), (size_t)TESS_SLAB_MAX_PAGES);
  size_t best = pages, best_tail = SIZE_MAX;
  for (size_t p = pages; p <= last; p++) {
    size_t bytes = p * TESS_PAGE_SIZE;
    if (bytes / size > UINT16_MAX) break;
    size_t tail = bytes % size;
    if (tail * 8 <= bytes) return (uint32_t)p;
    /* compare tails as fractions of their slabs */
    if (best_tail == SIZE_MAX || tail * (best * TESS_PAGE_SIZE) < best_tail * bytes) {
      best = p;
      best_tail = tail;
    }
  }
  return (uint32_t)best;
}

void tessi_sizeclass_init(size_t slab_target_bytes, uint32_t min_blocks, size_t slab_limit,
                          uint32_t borrow_window) {
  tessi_slab_limit = TESS_MIN(slab_limit, (size_t)TESS_SLAB_MAX_SIZE);
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    tess_class_info_t *info = &tessi_classes[c];
    uint32_t size = class_size(c);
    info->block_size = size;
    info->slab_pages = slab_pages_for(size, slab_target_bytes, min_blocks);
    info->slab_blocks = (uint32_t)(info->slab_pages * TESS_PAGE_SIZE / size);
    /* carve about a page at a time: RSS grows with use, not with slab size */
    info->extend_blocks = TESS_MAX(1u, (uint32_t)(TESS_PAGE_SIZE / size));
    info->div_magic = UINT64_MAX / size + 1;
    /* sizes (size of the class below, size] round up to this class */
    unsigned first = c == 0 ? 0 : class_size(c - 1) / 16 + 1;
    info->first_slot = (uint8_t)(size <= TESS_SMALL_MAX ? first : 0);
    info->slot_count = (uint8_t)(size <= TESS_SMALL_MAX ? size / 16 - first + 1 : 0);
  }
  /* four classes per doubling: the last class up to TESS_SMALL_MAX spans
   * its top eighth, in 16-byte slots */
  _Static_assert(TESS_SMALL_MAX / 8 / 16 <= 8, "point_current (heap.c) stores 8 slots at most");
  /* a block lent to a smaller class is at most borrow_window times the
   * size of the class's own blocks (1: none is lent, and set_current's
   * look at the borrowers of a class finds none to look at) */
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    unsigned top = c, low = c;
    while (top + 1 < TESS_CLASSES && tessi_classes[top + 1].block_size <= tessi_slab_limit &&
           tessi_classes[top + 1].block_size <= borrow_window * tessi_classes[c].block_size) {
      top++;
    }
    while (low > 0 &&
           borrow_window * tessi_classes[low - 1].block_size >= tessi_classes[c].block_size) {
      low--;
    }
    tessi_classes[c].lends_to_top = (uint8_t)top;
    tessi_classes[c].borrows_from_low = (uint8_t)low;
  }
}

int tessi_class_for_aligned(size_t size, size_t align) {
  if (size > tessi_slab_limit || align > TESS_PAGE_SIZE) return -1;
  for (unsigned c = tessi_class_of(size); c < TESS_CLASSES; c++) {
    uint32_t bs = tessi_classes[c].block_size;
    if (bs > tessi_slab_limit) return -1;
    if ((bs & (align - 1)) == 0) return (int)c;
  }
  return -1;
}
