/* Regions and partitions: laying the page descriptors over a range of
 * memory, finding the region of an address, and choosing where pages come
 * from. The span allocator inside a partition is span.c. */
#include "internal.h"

#include <string.h>

_Atomic(uintptr_t) tessi_primary_base;
_Atomic(size_t) tessi_primary_size;
tess_page_t *tessi_primary_pages;
size_t tessi_primary_desc_bytes;
tess_region_t *tessi_primary;

/* Regions are only ever added (at the tail), never removed: readers walk
 * the list without a lock. */
static tess_region_t *_Atomic region_list;
static tess_lock_t region_lock;
/* Taken to open a partition of a fixed region (after meta.lock, before any
 * partition lock). */
static tess_lock_t open_lock;

/* Heap structs and other never-freed metadata, bump-allocated from META
 * spans. */
static struct {
  tess_lock_t lock;
  uintptr_t cursor, end;
} meta;

/* Pages of the first metadata chunk when it lies where the primary
 * region's pages start (it does, made with the first heap): never free,
 * so no block starts below them. */
static _Atomic(size_t) meta_first_pages;

tess_region_t *tessi_region_first(void) {
  return atomic_load_explicit(&region_list, memory_order_acquire);
}

tess_region_t *tessi_region_of(uintptr_t a) {
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    if (a - r->base < tessi_region_extent(r)) return r;
  }
  return NULL;
}

tess_region_t *tessi_region_of_desc(const tess_page_t *d) {
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    if ((uintptr_t)d - (uintptr_t)r->pages < r->page_count * sizeof(tess_page_t)) return r;
  }
  return NULL;
}

tess_partition_t *tessi_partition_of(tess_region_t *r, const tess_page_t *d) {
  uint32_t index = (uint32_t)(d - r->pages);
  uint32_t first = r->partitions[0].first_page;
  uint32_t each = r->partitions[0].end_page - first;
  uint32_t i = index < first ? 0 : (index - first) / each;
  if (i >= r->partition_count) i = r->partition_count - 1;
  return &r->partitions[i];
}

static void link_region(tess_region_t *r) {
  tessi_lock(&region_lock);
  tess_region_t *head = atomic_load_explicit(&region_list, memory_order_relaxed);
  if (head == NULL) {
    atomic_store_explicit(&region_list, r, memory_order_release);
  } else {
    while (tessi_region_next(head) != NULL) head = tessi_region_next(head);
    atomic_store_explicit(&head->next_region, r, memory_order_release);
  }
  tessi_unlock(&region_lock);
}

/* Partitions for a region: TESS_PARTITIONS, else one per CPU (8 where the
 * platform cannot count them), but none smaller than 16 MiB: a smaller one
 * would fragment more than it saves in locking. A fixed region gets 16,
 * none smaller than 2 MiB: an enclave runs more threads than it has CPUs,
 * and a partition lock whose holder lost its CPU makes the others spin
 * (workload B: 3-19 % more calls per second at the same footprint). The
 * descriptors of the partitions opened first are laid at init, so in a
 * 32 MiB region 2 MiB partitions lay 256 KiB of them where 4 MiB ones
 * laid 512 (OE's sample: 1 thread peaks at 0.75 MiB instead of 0.99). */
static unsigned default_partitions(size_t size, bool is_fixed, size_t least) {
  unsigned n = tessi_options.partitions;
  size_t smallest = TESS_MAX((size_t)(is_fixed ? 2 : 16) << 20, least);
  bool chosen = n != 0;
  if (n == 0) n = is_fixed ? TESS_MAX_PARTITIONS : tessi_plat_cpu_count();
  if (n == 0) n = 8;
  while (n > 1 && size / n < smallest) n--;
  n = TESS_MIN(n, (unsigned)TESS_MAX_PARTITIONS);
  /* a large fixed region: partitions of at most TESS_FIXED_PARTITION_MAX,
   * so that opening one lays at most 1 MiB of descriptors (types.h) */
  if (is_fixed && !chosen && size / n > TESS_FIXED_PARTITION_MAX) {
    size_t more = (size + TESS_FIXED_PARTITION_MAX - 1) / TESS_FIXED_PARTITION_MAX;
    n = (unsigned)TESS_MIN(more, (size_t)TESS_FIXED_MAX_PARTITIONS);
  }
  return n;
}

/* How many partitions of `each` pages a fixed region opens at init: the
 * first TESS_FIXED_OPEN_PARTITIONS, fewer where those would cover more
 * than TESS_FIXED_OPEN_BYTES (at least one). */
static unsigned fixed_open_at_init(unsigned partitions, size_t each) {
  unsigned open = TESS_MIN(partitions, (unsigned)TESS_FIXED_OPEN_PARTITIONS);
  while (open > 1 && (open * each) << TESS_PAGE_SHIFT > TESS_FIXED_OPEN_BYTES) open--;
  return open;
}

/* Pages from the region's start through the descriptor of page `page`
 * (exclusive): the header and the descriptors laid so far. */
static size_t meta_pages_through(const tess_region_t *r, size_t page) {
  uintptr_t end = (uintptr_t)(r->pages + page);
  return (end - (uintptr_t)r + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
}

/* Lays partition p's descriptors (zero, unless the memory was) and its one
 * free span. Its lock is held: walkers may lock every partition. */
static void partition_lay(tess_region_t *r, tess_partition_t *p) {
  tessi_lock(&p->lock);
  if (!r->fresh_zero) {
    memset(&r->pages[p->first_page], 0,
           (size_t)(p->end_page - p->first_page) * sizeof(tess_page_t));
  }
  tessi_span_init_partition(p, r->fresh_zero);
  tessi_unlock(&p->lock);
}

/* Lays a region over [start, start+size) (page-aligned): the header and
 * the descriptor array first (the meta pages), then the pages they
 * describe, from `base` on; the meta pages have no descriptors, so a
 * pointer into them is outside the region's range and none need be
 * written for them (1/4096 of the region: 16 MiB in 64 GiB). A fixed
 * region lays only the descriptors of the partitions it opens first
 * (region_open_next lays the others): in a region of 64 MiB, 3/4 of its
 * 1 MiB of descriptors are not written until they are needed. Its
 * partitions are no smaller than least_partition bytes. NULL when it is
 * too small to hold them. */
static tess_region_t *region_init(uintptr_t start, size_t size, bool is_fixed, bool is_zero,
                                  size_t least_partition) {
  size_t total_pages = size >> TESS_PAGE_SHIFT;
  if (total_pages > UINT32_MAX) total_pages = UINT32_MAX;
  unsigned partitions =
      default_partitions(total_pages << TESS_PAGE_SHIFT, is_fixed, least_partition);
  size_t header = offsetof(tess_region_t, partitions) + partitions * sizeof(tess_partition_t);
  header = tessi_align_up(header, sizeof(tess_page_t));
  /* (room for a descriptor per page of the whole region: a few to spare) */
  size_t meta_pages =
      (header + total_pages * sizeof(tess_page_t) + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
  if (total_pages < meta_pages + 4 * partitions) return NULL;
  size_t page_count = total_pages - meta_pages;

  tess_region_t *r = (tess_region_t *)start;
  /* the user's memory holds anything; our own fresh mapping is zero */
  if (!is_zero) memset(r, 0, header);
  r->base = start + (meta_pages << TESS_PAGE_SHIFT);
  r->size = total_pages << TESS_PAGE_SHIFT;
  r->pages = (tess_page_t *)(start + header);
  r->page_count = page_count;
  r->is_fixed = is_fixed;
  r->fresh_zero = is_zero;
  r->partition_count = partitions;
  uint32_t each = (uint32_t)(page_count / partitions);
  unsigned open = is_fixed ? fixed_open_at_init(partitions, each) : partitions;
  r->open_partitions = open;

  for (unsigned i = 0; i < partitions; i++) {
    tess_partition_t *p = &r->partitions[i];
    p->region = r;
    p->first_page = i * each;
    p->end_page = i + 1 == partitions ? (uint32_t)page_count : p->first_page + each;
    if (i < open) partition_lay(r, p);
  }
  /* in a fixed region the header and descriptors take real memory from
   * the heap (those laid so far); in OS mode they are address space,
   * touched in proportion to the pages in use */
  if (is_fixed) {
    tessi_footprint_meta_add(meta_pages_through(r, r->partitions[open - 1].end_page));
  }
  return r;
}

tess_region_t *tessi_region_add_fixed(uintptr_t start, size_t size, bool is_zero) {
  uintptr_t base = tessi_align_up(start, TESS_PAGE_SIZE);
  if (base < start || size < base - start) return NULL;
  size = (size - (base - start)) & ~(TESS_PAGE_SIZE - 1);
  tess_region_t *r = region_init(base, size, true, is_zero, 0);
  if (r != NULL) link_region(r);
  return r;
}

tess_region_t *tessi_region_add_os(size_t want, size_t need) {
  need = tessi_align_up(TESS_MAX(need, (size_t)16 << 20), (size_t)16 << 20);
  want = TESS_MAX(tessi_align_up(want, (size_t)16 << 20), need);
  /* a smaller reservation is better than none (RLIMIT_AS, strict overcommit,
   * valgrind): halve until the OS agrees, but not below what is needed */
  for (;;) {
    void *mem = tessi_plat_reserve(want, TESS_PAGE_SIZE);
    if (mem != NULL) {
      /* a block lies in one partition: each holds what is needed (a
       * request that no region had room for, with its descriptors) */
      tess_region_t *r = region_init((uintptr_t)mem, want, false, true, need);
      if (r == NULL) {
        tessi_plat_release(mem, want);
        return NULL;
      }
      link_region(r);
      return r;
    }
    if (want == need) return NULL;
    want = TESS_MAX(want / 2, need);
  }
}

bool tessi_pages_busy(const tess_partition_t *home) {
  tess_region_t *r = home->region;
  unsigned first = (unsigned)(home - r->partitions);
  if (r->is_fixed) first %= tessi_open_partitions(r);
  return atomic_load_explicit(&r->partitions[first].lock.held, memory_order_relaxed) != 0;
}

tess_partition_t *tessi_partition_for_heap(void) {
  tess_region_t *r = tessi_primary;
  uint32_t n = atomic_fetch_add_explicit(&r->next_partition, 1, memory_order_relaxed);
  return &r->partitions[n % r->partition_count];
}

/* Opens partition `open` of fixed region r, unless another thread did:
 * its descriptors are laid, then it is counted open (a thread that sees
 * the count sees them). Returns how many are open. */
static uint32_t region_open_next(tess_region_t *r, uint32_t open) {
  tessi_lock(&open_lock);
  uint32_t now = atomic_load_explicit(&r->open_partitions, memory_order_relaxed);
  if (now == open && open < r->partition_count) {
    tess_partition_t *p = &r->partitions[open];
    partition_lay(r, p);
    tessi_footprint_meta_add(meta_pages_through(r, p->end_page) -
                             meta_pages_through(r, p->first_page));
    if (r == tessi_primary) {
      atomic_store_explicit(&tessi_primary_size, (size_t)p->end_page << TESS_PAGE_SHIFT,
                            memory_order_release);
    }
    now = open + 1;
    atomic_store_explicit(&r->open_partitions, now, memory_order_release);
  }
  tessi_unlock(&open_lock);
  return now;
}

/* Pages from a fixed region (requests below big_pages, below), from its
 * first partitions: a heap starts at its own among the open ones, passes
 * over busy ones (the fixed platform can only spin) and then waits for
 * them in turn; when none has room, the next partition is opened. First,
 * though, it looks for a free span below a partition's high water (pages
 * touched before) in every open one that is not busy, and only then takes
 * pages never touched. So the pages ever used (what an enclave's EPC or a
 * board's RAM must hold, the RSS of an emulated heap) grow with what is in
 * use, rather than every partition growing its own high-water mark, while
 * heaps still spread over several locks. */
static tess_page_t *alloc_in_fixed(tess_region_t *r, unsigned start, size_t pages,
                                   size_t align_pages, uint8_t kind, bool *is_zero,
                                   tess_partition_t **from) {
  uint32_t open = tessi_open_partitions(r);
  /* more than any partition holds (the last is the largest): only a run
   * across them (the caller) */
  const tess_partition_t *last = &r->partitions[r->partition_count - 1];
  if (pages > last->end_page - last->first_page) return NULL;
  for (;;) {
    /* round 0: below the high water, busy ones passed over; then
     * anywhere, the busy ones waited for in the last round */
    for (unsigned round = 0; round < 3; round++) {
      for (unsigned k = 0; k < open; k++) {
        tess_partition_t *p = &r->partitions[(start + k) % open];
        tess_page_t *d =
            tessi_span_alloc(p, pages, align_pages, kind, is_zero, round == 2, round > 0);
        if (d != NULL) {
          *from = p;
          return d;
        }
      }
    }
    if (open >= r->partition_count) return NULL;
    open = region_open_next(r, open);
  }
}

/* A request of at least this many pages is big in fixed region r: a
 * thirty-second of a partition, and never one a heap's span cache keeps. */
static size_t big_pages(const tess_region_t *r) {
  size_t each = r->partitions[0].end_page - r->partitions[0].first_page;
  return TESS_MAX(each / 32, (size_t)TESS_SPAN_CACHE_PAGES + 1);
}

/* A request fixed region r places as a big block: big, or aligned so
 * far that the lead may take as much (4 KiB aligned to 4 MiB: no
 * partition holds 1024 pages more, and only a run found inside the
 * partitions could serve it). */
static bool is_big(const tess_region_t *r, size_t pages, size_t align_pages) {
  size_t need = pages + (align_pages > 1 ? align_pages - 1 : 0);
  return r->is_fixed && r->partition_count > 1 && need >= big_pages(r);
}

bool tessi_pages_big(const tess_partition_t *home, size_t pages, size_t align_pages) {
  return is_big(home->region, pages, align_pages);
}

/* Pages from page `first` of r to the first one aligned to align_pages. */
static size_t run_lead(const tess_region_t *r, size_t first, size_t align_pages) {
  uintptr_t at = r->base + (first << TESS_PAGE_SHIFT);
  return (tessi_align_up(at, align_pages << TESS_PAGE_SHIFT) - at) >> TESS_PAGE_SHIFT;
}

/* A run of free pages across the partitions of fixed region r
 * (tessi_span_alloc_across), in the open ones, else on into the next,
 * opened one by one. With `inside`, for a big request: the lowest span or
 * run that fits (address-ordered first fit, dlmalloc's kind of placement
 * for big blocks). Placed inside partitions from their starts, blocks of
 * a sizeable fraction of a partition left a tail in every one: 1 MiB
 * blocks filled only 48 MiB of a 64 MiB region (16 partitions of 3.93
 * MiB), 3 MiB blocks 47; packed across the boundaries, they fill it. Big
 * blocks are seldom made, and each holds every partition lock once.
 * Without, the last resort of a request no partition alone can serve. */
static tess_page_t *alloc_across_opening(tess_region_t *r, size_t pages, size_t align_pages,
                                         uint8_t kind, bool *is_zero, tess_partition_t **from,
                                         bool inside) {
  uint32_t open = tessi_open_partitions(r);
  size_t tail;
  tess_page_t *d = tessi_span_alloc_across(r, pages, align_pages, kind, is_zero, inside, &tail);
  /* a run the next partitions could complete holds at most the free pages
   * at the open ones' end and every page not open (fewer than that if
   * others opened some meanwhile), less the alignment's lead from its
   * start: when they are fewer than asked, opening partitions laid their
   * descriptors for nothing (malloc(60 GiB) beside a 5 GiB block in 64
   * GiB: 0.9 GiB of them, for good; aligned_alloc(4 MiB, 41 MiB) beside a
   * 20 MiB block in 64 MiB: 4 partitions, before the lead counted) */
  while (d == NULL && open < r->partition_count &&
         tail + (r->page_count - r->partitions[open].first_page) >=
             pages + run_lead(r, r->partitions[open].first_page - tail, align_pages)) {
    open = region_open_next(r, open);
    d = tessi_span_alloc_across(r, pages, align_pages, kind, is_zero, inside, &tail);
  }
  if (d != NULL) *from = tessi_partition_of(r, d);
  return d;
}

static tess_page_t *alloc_in_region(tess_region_t *r, unsigned start, size_t pages,
                                    size_t align_pages, uint8_t kind, bool *is_zero,
                                    tess_partition_t **from) {
  if (is_big(r, pages, align_pages)) {
    return alloc_across_opening(r, pages, align_pages, kind, is_zero, from, true);
  }
  if (r->is_fixed) return alloc_in_fixed(r, start, pages, align_pages, kind, is_zero, from);
  for (unsigned k = 0; k < r->partition_count; k++) {
    tess_partition_t *p = &r->partitions[(start + k) % r->partition_count];
    tess_page_t *d = tessi_span_alloc(p, pages, align_pages, kind, is_zero, true, true);
    if (d != NULL) {
      *from = p;
      return d;
    }
  }
  return NULL;
}

tess_page_t *tessi_pages_alloc(tess_partition_t *home, size_t pages, size_t align_pages,
                               uint8_t kind, bool *is_zero, tess_partition_t **from) {
  tess_region_t *home_region = home->region;
  /* more pages than a fixed region has after its first page aligned as
   * asked: NULL at once, rather than after opening every partition and
   * laying its descriptors for good (1 GiB of them for malloc(128 GiB) in
   * 64 GiB). The lead is from where the region's free pages start (past
   * its first metadata chunk), not the alignment's worst case: that
   * refused aligned_alloc(2 MiB, 2 MiB) in a region holding the aligned
   * 2 MiB. */
  if (home_region->is_fixed) {
    uintptr_t base = home_region->base, low = base;
    if (home_region == tessi_primary) {
      low += atomic_load_explicit(&meta_first_pages, memory_order_relaxed) << TESS_PAGE_SHIFT;
    }
    size_t lead = (tessi_align_up(low, align_pages << TESS_PAGE_SHIFT) - base) >> TESS_PAGE_SHIFT;
    if (pages > home_region->page_count || lead > home_region->page_count - pages) return NULL;
  }
  unsigned start = (unsigned)(home - home_region->partitions);
  /* OS mode: a region added for this request is linked before its pages
   * are taken, and another thread's search may take them first; then
   * every region is looked at again, and another added */
  for (unsigned tries = 0;; tries++) {
    tess_page_t *d = alloc_in_region(home_region, start, pages, align_pages, kind, is_zero, from);
    if (d != NULL) return d;
    for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
      if (r == home_region) continue;
      d = alloc_in_region(r, 0, pages, align_pages, kind, is_zero, from);
      if (d != NULL) return d;
    }
    if (home_region->is_fixed) {
      /* the region is all there is: a run across its partitions */
      return alloc_across_opening(home_region, pages, align_pages, kind, is_zero, from, false);
    }
    if (tries == 8) return NULL;
    /* OS mode, every region full: add one, at least as large as the
     * request (with room for its descriptors) */
    size_t need = (pages + align_pages) << TESS_PAGE_SHIFT;
    need += need / 32 + ((size_t)1 << 20); /* its descriptors */
    tess_region_t *r = tessi_region_add_os(TESS_MAX(need, tessi_options.reserve / 16), need);
    if (r == NULL) return NULL;
    d = alloc_in_region(r, 0, pages, align_pages, kind, is_zero, from);
    if (d != NULL) return d;
  }
}

void tessi_pages_free(tess_page_t *head, size_t pages) {
  tess_region_t *r = tessi_region_of_page(head);
  tess_partition_t *p = tessi_partition_of(r, head);
  if (pages <= (size_t)(&r->pages[p->end_page] - head)) {
    tessi_span_free(p, head, pages);
    return;
  }
  /* from tessi_span_alloc_across: back piece by piece, all at once */
  tessi_span_free_across(p, head, pages);
}

bool tessi_pages_grow(tess_region_t *r, tess_page_t *head, size_t pages, size_t extra) {
  /* the pages after a block lie in its last page's partition (its
   * head's, unless it crosses a boundary) */
  if (tessi_span_grow(tessi_partition_of(r, head + pages - 1), head, pages, extra)) return true;
  /* a big block grows on into the next partitions, as into dlmalloc's top
   * chunk: placed lowest, it mostly has free pages after it (opened when
   * the run reaches the last open partition's end) */
  if (!r->is_fixed || r->partition_count == 1 || pages + extra < big_pages(r)) return false;
  /* not past the region's last page: opening partitions for a growth that
   * cannot fit laid their descriptors for nothing (realloc to 100 GiB in
   * 64 GiB: 1 GiB of them) */
  if ((size_t)(head - r->pages) + pages + extra > r->page_count) return false;
  for (uint32_t open = tessi_open_partitions(r);;) {
    bool short_at_limit;
    if (tessi_span_grow_across(r, head, pages, extra, &short_at_limit)) return true;
    if (!short_at_limit || open >= r->partition_count) return false;
    open = region_open_next(r, open);
  }
}

/* Metadata is carved in chunks of at least this much (tessi_meta_carve). */
#define META_CHUNK ((size_t)16 << 10)

/* Bytes of fixed region r's first metadata chunk, for structs of `bytes`
 * (bytes aligned to 64): a heap for each partition and one more, or 1/512
 * of the region where that is more, 64 at most, and the shared heap
 * (heap.c); 16 KiB at least (3 structs: up to 3 MiB, 2 heaps and the
 * shared one). */
static size_t first_chunk_bytes(const tess_region_t *r, size_t bytes) {
  size_t heaps = TESS_MAX((size_t)r->partition_count + 1, r->size / 512 / bytes);
  return TESS_MAX(META_CHUNK, (TESS_MIN(heaps, (size_t)64) + 1) * bytes);
}

/* Heaps made beyond the first chunk stay for good (a struct is freed only
 * with a way to know that no free still reads it as a slab's owner), so
 * in a small region they would keep what many calls at once once needed:
 * after 32 calls at once in 1 MiB, the region held 17 % less. Their
 * chunks (META_CHUNK each) may take 1/256 of the region, in whole chunks:
 * counted in structs, one heap took a chunk of 16 KiB, 1 % of 1.5 MiB (a
 * review). The first chunk is taken at init, before any block. Calls past
 * the cap share the shared heap (heap.c). */
size_t tessi_fixed_heaps_allowed(const tess_region_t *r) {
  size_t bytes = tessi_align_up(sizeof(tess_heap_t), 64);
  size_t chunks = r->size / 256 / META_CHUNK;
  return first_chunk_bytes(r, bytes) / bytes - 1 + chunks * (META_CHUNK / bytes);
}

size_t tessi_fixed_allocatable(const tess_region_t *r) {
  size_t chunk = first_chunk_bytes(r, tessi_align_up(sizeof(tess_heap_t), 64));
  size_t chunk_pages = (chunk + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
  size_t pages = r->page_count > chunk_pages ? r->page_count - chunk_pages : 0;
  return pages << TESS_PAGE_SHIFT;
}

void *tessi_meta_alloc(size_t bytes) {
  void *p = tessi_meta_carve(bytes);
  if (p != NULL) memset(p, 0, tessi_align_up(bytes, 64));
  return p;
}

void *tessi_meta_carve(size_t bytes) {
  bytes = tessi_align_up(bytes, 64);
  tessi_lock(&meta.lock);
  if (meta.end - meta.cursor < bytes) {
    size_t want = TESS_MAX(bytes, META_CHUNK);
    /* a fixed region's first chunk holds a heap for each partition and one
     * more, or 1/512 of the region where that is more (64 heaps at most),
     * side by side where the region starts: a chunk carved later, never
     * freed, lies wherever pages are free then; with a 40 MiB block live,
     * 4 threads' heaps split 64 MiB so that 40 MiB was the largest block
     * left once all was free. Workload B's 21 heaps fit in its 128 KiB,
     * and OE's sample's 16 threads in its 91 KiB (they took 6 chunks of
     * 16 KiB before). */
    if (meta.end == 0 && tessi_primary->is_fixed) want = first_chunk_bytes(tessi_primary, bytes);
    size_t pages = (want + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
    tess_partition_t *from;
    bool zero;
    tess_page_t *d =
        tessi_pages_alloc(&tessi_primary->partitions[0], pages, 1, TESS_PAGE_META, &zero, &from);
    size_t least = (bytes + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
    if (d == NULL && least < pages) {
      /* no run of a whole chunk free: the pages this request needs (a
       * heap's two: with half of 1 MiB free in holes of 2 pages, 6 of 8
       * new threads got NULL for any size) */
      pages = least;
      d = tessi_pages_alloc(&tessi_primary->partitions[0], pages, 1, TESS_PAGE_META, &zero, &from);
    }
    if (d == NULL) {
      tessi_unlock(&meta.lock);
      return NULL;
    }
    meta.cursor = tessi_page_addr(from->region, d);
    if (meta.end == 0 && d == &tessi_primary->pages[0]) {
      atomic_store_explicit(&meta_first_pages, pages, memory_order_relaxed);
    }
    meta.end = meta.cursor + (pages << TESS_PAGE_SHIFT);
  }
  void *p = (void *)meta.cursor;
  meta.cursor += bytes;
  tessi_unlock(&meta.lock);
  return p;
}

void tessi_regions_lock_all(void) {
  /* metadata first: a metadata chunk may need a new region (link_region) */
  tessi_lock(&meta.lock);
  tessi_lock(&region_lock);
  tessi_lock(&open_lock);
  tessi_span_fork_prepare(); /* every partition */
}

void tessi_regions_unlock_all(bool in_child) {
  tessi_span_fork_done(in_child);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    if (!in_child) {
      tessi_partitions_unlock(r);
      continue;
    }
    for (unsigned i = 0; i < r->partition_count; i++) tessi_lock_reset(&r->partitions[i].lock);
  }
  if (in_child) {
    tessi_lock_reset(&open_lock);
    tessi_lock_reset(&meta.lock);
    tessi_lock_reset(&region_lock);
  } else {
    tessi_unlock(&open_lock);
    tessi_unlock(&meta.lock);
    tessi_unlock(&region_lock);
  }
}
