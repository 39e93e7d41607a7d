/* The public API: the malloc family on top of heaps (slab sizes), large
 * spans and huge mappings. The two fast paths live here:
 *   malloc: pop the current slab's free list (sizes <= 1 KiB);
 *   free:   primary-region lookup, block check, push on the owner's list.
 * Everything else goes through the slow paths below them. */
#include "internal.h"
#include "tessalloc.h"

#include <errno.h>
#include <string.h>

#define TESS_VERSION_TEXT "tessalloc 0.1.0"

#if TESS_STATS_REQUESTED
/* Built to count requested bytes: the entry points below become the inner
 * (static) core_* ones, and requested.c defines the public names over
 * them. */
static void *core_malloc(size_t size);
static void *core_calloc(size_t count, size_t size);
static void core_free(void *p);
static void *core_realloc(void *p, size_t size);
static void *core_aligned_alloc(size_t alignment, size_t size);
static int core_posix_memalign(void **out, size_t alignment, size_t size);
static void *core_memalign(size_t alignment, size_t size);
static void *core_valloc(size_t size);
static void *core_pvalloc(size_t size);
static size_t core_usable_size(const void *p);
#define tess_malloc core_malloc
#define tess_calloc core_calloc
#define tess_free core_free
#define tess_realloc core_realloc
#define tess_aligned_alloc core_aligned_alloc
#define tess_posix_memalign core_posix_memalign
#define tess_memalign core_memalign
#define tess_valloc core_valloc
#define tess_pvalloc core_pvalloc
#define tess_usable_size core_usable_size
#endif

/* ----------------------------------------------------------- classifying */

typedef enum { BLOCK_INVALID, BLOCK_SLAB, BLOCK_LARGE, BLOCK_HUGE } block_kind_t;

typedef struct block_info_s {
  block_kind_t kind;
  tess_region_t *region;
  tess_page_t *page; /* slab or large head */
  size_t usable;
  const char *why; /* for BLOCK_INVALID */
} block_info_t;

/* Whether the block at in_slab of slab d was ever carved (handed out):
 * the count is the owner's, stored with relaxed atomics, and a block
 * another thread holds was carved before it got it; an emptied slab,
 * cached by its heap, has none. */
static inline bool slab_carved(const tess_page_t *d, uint64_t in_slab) {
  return in_slab < (uint64_t)__atomic_load_n(&d->capacity, __ATOMIC_RELAXED) *
                       tessi_classes[d->size_class].block_size;
}

/* What p is, checked from the outside in: inside a region? on a live
 * slab or large head? at a block boundary? Nothing is written until the
 * answer is known, so a bad pointer cannot corrupt the heap. */
static block_info_t classify(const void *p) {
  block_info_t info = {BLOCK_INVALID, NULL, NULL, 0, "not allocated by tessalloc"};
  uintptr_t a = (uintptr_t)p;
  tess_region_t *r =
      a - atomic_load_explicit(&tessi_primary_base, memory_order_relaxed) < tessi_primary_extent()
          ? tessi_primary
          : tessi_region_of(a);
  if (r != NULL) {
    tess_page_t *page = &r->pages[(a - r->base) >> TESS_PAGE_SHIFT];
    tess_page_t *d = tessi_page_head(page);
    info.why = "not an allocated block";
    if (d->kind == TESS_PAGE_SLAB) {
      const tess_class_info_t *cls = &tessi_classes[d->size_class];
      uint64_t in_slab = tessi_offset_in_span(a - r->base, page);
      if (!tessi_is_block_start(in_slab, d->u.div_magic) || !slab_carved(d, in_slab)) {
        info.why = "not the start of a block";
        return info;
      }
      info = (block_info_t){BLOCK_SLAB, r, d, cls->block_size, NULL};
    } else if (d->kind == TESS_PAGE_LARGE && d == page && (a & (TESS_PAGE_SIZE - 1)) == 0 &&
               !(d->flags & TESS_LARGE_CACHED)) {
      info = (block_info_t){BLOCK_LARGE, r, d, (size_t)d->u.span.pages << TESS_PAGE_SHIFT, NULL};
    }
    return info;
  }
  size_t usable = a != 0 ? tessi_huge_usable(p) : 0;
  if (usable != 0) info = (block_info_t){BLOCK_HUGE, NULL, NULL, usable, NULL};
  return info;
}

/* -------------------------------------------------------------- helpers */

static void *fail_nomem(void) {
  errno = ENOMEM;
  return NULL;
}

static inline bool is_huge(size_t size) {
  return !tessi_primary->is_fixed && size >= tessi_options.huge_threshold;
}

static tess_heap_t *heap_or_acquire(void) {
  tess_heap_t *h = tessi_tls_heap;
  if (TESS_LIKELY(h != &tessi_heap_empty)) return h;
  h = tessi_heap_acquire();
  if (h != NULL && !tessi_tls_exiting) tessi_thread_attach(h);
  return h;
}

/* After an allocation with heap h, which the thread did not hold before
 * (`own`): a thread past its exit destructor gives it back at once. glibc
 * runs destructors four rounds at most, and a heap taken in the last one
 * was never given back: 20,000 threads whose destructors allocated in
 * every round left 20,000 heaps in use. */
static inline void heap_done(tess_heap_t *h, const tess_heap_t *own) {
  if (TESS_UNLIKELY(tessi_tls_exiting) && h != NULL && h != own) tessi_heap_release(h);
}

/* Statistics work after a slow-path allocation: a merge when the
 * footprint reached a new high, a line of the series in fixed mode. */
static void after_slow_alloc(void) {
  tessi_stats_sample_if_grown();
#if !TESS_OE
  if (TESS_UNLIKELY(atomic_load_explicit(&tessi_stats_series_on, memory_order_relaxed))) {
    tessi_stats_series_tick();
  }
#endif
}

/* The large block of span d, now h's, counted (h NULL: a thread that
 * could get no heap, tessi_large_alloc). */
static inline void *counted_large_block(tess_heap_t *h, const tess_page_t *d) {
  size_t bytes = (size_t)d->u.span.pages << TESS_PAGE_SHIFT;
  if (TESS_UNLIKELY(h == NULL)) {
    TESS_STAT_MINE(large_allocs, 1);
    TESS_STAT_MINE(large_bytes_in, bytes);
  } else {
    TESS_STAT_ADD(h->stats.large_allocs, 1);
    TESS_STAT_ADD(h->stats.large_bytes_in, bytes);
  }
  return d->large_block;
}

/* Class cls found no slab (h reclaimed what idle heaps held first): a
 * page span, when the class's slab is longer than the size's own pages
 * (in a fixed region the slabs of 2-3 pages, in OS mode every slab: its
 * run was not free, a shorter one may be; with half of a fixed region
 * free in one-page holes, malloc(3000) answered NULL where malloc(4000)
 * did not). NULL when none. */
static TESS_NOINLINE void *slab_fallback(tess_heap_t *h, unsigned cls, size_t size, size_t align,
                                         bool zero) {
  size_t pages = (TESS_MAX(size, (size_t)1) + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
  if (tessi_classes[cls].slab_pages <= pages || align > TESS_PAGE_SIZE) return NULL;
  tess_page_t *d = tessi_large_alloc(h, size, align, zero, true);
  return d != NULL ? counted_large_block(h, d) : NULL;
}

/* A slab-sized request of a thread that can have no heap of its own (in
 * a fixed region: past the cap on heaps, or no room for a struct): a block
 * of the shared heap, under its lock, or of an orphan (heap.c), else a
 * page span, as for a heap whose class found no slab. In a region full of
 * slabs with live blocks, every request of a call that found no room for
 * a heap's struct once answered NULL with nearly all of 1 MiB free in
 * orphans' blocks (a review). */
static TESS_NOINLINE void *heapless_block(unsigned cls, size_t size, size_t align, bool zero) {
  void *p = tessi_heap_shared_malloc(cls, align <= TESS_MIN_ALIGN);
  bool from_slab = p != NULL;
  if (!from_slab) p = slab_fallback(NULL, cls, size, align, zero); /* zeroed if asked */
  if (p == NULL) return fail_nomem();
  after_slow_alloc();
  return zero && from_slab ? memset(p, 0, size) : p;
}

/* Any size, any alignment (power of two): slab, large or huge. */
static TESS_NOINLINE void *alloc_any(size_t size, size_t align, bool zero) {
  tess_heap_t *own = tessi_tls_heap;
  if (size > PTRDIFF_MAX || align > PTRDIFF_MAX || !tessi_ensure_init()) return fail_nomem();
  void *p = NULL;
  if (size <= tessi_slab_limit && align <= TESS_PAGE_SIZE) {
    int cls =
        align <= TESS_MIN_ALIGN ? (int)tessi_class_of(size) : tessi_class_for_aligned(size, align);
    if (cls >= 0) {
      tess_heap_t *h = heap_or_acquire();
      if (h == NULL) return heapless_block((unsigned)cls, size, align, zero);
      p = tessi_heap_malloc_class(h, (unsigned)cls, align <= TESS_MIN_ALIGN);
      bool from_slab = p != NULL;
      if (!from_slab) p = slab_fallback(h, (unsigned)cls, size, align, zero); /* zeroed if asked */
      heap_done(h, own);
      if (p == NULL) return fail_nomem();
      after_slow_alloc();
      return zero && from_slab ? memset(p, 0, size) : p;
    }
  }
  if (is_huge(size + align)) { /* no overflow: both are <= PTRDIFF_MAX */
    p = tessi_huge_alloc(size, align);
    if (p != NULL) {
      TESS_STAT_MINE(huge_allocs, 1);
      TESS_STAT_MINE(huge_bytes_in, tessi_huge_usable(p));
    }
  } else {
    tess_heap_t *h = heap_or_acquire();
    /* the span cache of our own heap was looked at above (align 0) */
    tess_page_t *d = tessi_large_alloc(h, size, align, zero, h != own || align != 0);
    if (d != NULL) p = counted_large_block(h, d);
    heap_done(h, own);
  }
  if (p != NULL) after_slow_alloc();
  return p != NULL ? p : fail_nomem();
}

/* Whether a block of `size` bytes may come from a heap's span cache
 * (pages_of would wrap to 0 within a page of SIZE_MAX). */
static inline bool span_cacheable(size_t size) {
  return size - 1 < (size_t)TESS_SPAN_CACHE_PAGES << TESS_PAGE_SHIFT;
}
static inline size_t pages_of(size_t size) {
  return (size + TESS_PAGE_SIZE - 1) >> TESS_PAGE_SHIFT;
}

/* A large block heap h kept (no lock), or NULL. The empty heap keeps
 * none, and its take writes nothing (heap.c). */
static inline void *kept_span_block(tess_heap_t *h, size_t size) {
  tess_page_t *d = tessi_heap_span_take(h, pages_of(size));
  return d != NULL ? counted_large_block(h, d) : NULL;
}

/* What the fast paths could not serve, for calloc, realloc and the
 * aligned allocations: first a large block the heap kept, else
 * alloc_any. The heap's own copy of the slab limit, not the global one,
 * which init may be writing meanwhile (the empty heap's is 0, and it
 * keeps nothing). */
static void *alloc_slow(size_t size, size_t align, bool zero) {
  tess_heap_t *h = tessi_tls_heap;
  void *p = align == 0 && size > h->slab_limit ? kept_span_block(h, size) : NULL;
  if (p != NULL) return zero ? memset(p, 0, size) : p;
  return alloc_any(size, align, zero);
}

/* malloc_large when h keeps no span of the exact length */
static TESS_NOINLINE void *malloc_large_longer(tess_heap_t *h, size_t size) {
  tess_page_t *d = span_cacheable(size) ? tessi_heap_span_take_longer(h, pages_of(size)) : NULL;
  return d != NULL ? counted_large_block(h, d) : alloc_any(size, 0, false);
}

/* malloc above h's slab limit (all sizes for the empty heap, whose limit
 * is 0): a kept large block of the exact length, three quarters of the
 * requests in OE's sample, with no call, so no stack frame; else
 * malloc_large_longer. */
static TESS_NOINLINE void *malloc_large(tess_heap_t *h, size_t size) {
  tess_page_t *d = span_cacheable(size) ? tessi_heap_span_take_exact(h, pages_of(size)) : NULL;
  if (TESS_UNLIKELY(d == NULL)) return malloc_large_longer(h, size);
  return counted_large_block(h, d);
}

/* ----------------------------------------------------------------- malloc */

/* A block off slab d's free list, or NULL. */
static inline tess_block_t *pop_block(tess_page_t *d) {
  tess_block_t *b = d->free;
  if (TESS_LIKELY(b != NULL)) {
    d->free = b->next;
    d->state++;
  }
  return b;
}

/* Pops a block off the current slab for `size`: direct[] up to 1 KiB, the
 * class's current slab up to the heap's slab limit (the run-time one: 3
 * KiB in fixed mode, where larger sizes are spans, which then skip the
 * class lookup). NULL sends the caller to its slow path, with *dry the
 * slab that ran dry, or NULL for a size above the slab limit.
 * The empty heap's counters are never written: its pages have no block. */
static inline void *pop_current(tess_heap_t *h, size_t size, tess_page_t **dry) {
  tess_page_t *d = NULL;
  tess_block_t *b;
  if (TESS_LIKELY(size <= TESS_SMALL_MAX)) {
    size_t slot = (size + 15) >> 4;
    b = pop_block(d = h->direct[slot]);
    if (TESS_LIKELY(b != NULL)) {
      TESS_STAT_INC_AT(h->stats.slot_allocs, slot);
      return b;
    }
  } else if (size <= h->slab_limit) {
    unsigned cls = tessi_class_of(size);
    b = pop_block(d = h->current[cls]);
    if (TESS_LIKELY(b != NULL)) {
      TESS_STAT_ADD(h->stats.allocs[cls], 1);
      return b;
    }
  }
  *dry = d;
  return NULL;
}

static TESS_NOINLINE void *malloc_refill(tess_heap_t *h, tess_page_t *d, size_t size);
static TESS_NOINLINE void *refill_failed(size_t size);

/* Sizes above the slab limit go straight to malloc_large (no second test
 * of the size there), a slab that ran dry to malloc_refill. */
void *tess_malloc(size_t size) {
  tess_heap_t *h = tessi_tls_heap;
  tess_page_t *dry;
  void *p = pop_current(h, size, &dry);
  if (TESS_LIKELY(p != NULL)) return p;
  return dry != NULL ? malloc_refill(h, dry, size) : malloc_large(h, size);
}

/* The current slab d for the size ran dry: the blocks its owner freed,
 * when the heap lets it take them now (then the fast path pops one, and
 * counts it), else the heap's slow path (alloc_any for the empty heap,
 * whose page has none: a heap is yet to be taken). */
static TESS_NOINLINE void *malloc_refill(tess_heap_t *h, tess_page_t *d, size_t size) {
  if (tessi_heap_refill_local(h, d)) return tess_malloc(size);
  if (h == &tessi_heap_empty) return alloc_any(size, 0, false);
  void *p = tessi_heap_malloc_class(h, tessi_class_of(size), true);
  if (p == NULL) return refill_failed(size);
  after_slow_alloc();
  return p;
}

/* No slab for the size: a page span (slab_fallback), else ENOMEM. Apart,
 * so that malloc_refill keeps nothing across its call to the heap. */
static TESS_NOINLINE void *refill_failed(size_t size) {
  tess_heap_t *h = tessi_tls_heap;
  void *p = slab_fallback(h, tessi_class_of(size), size, 0, false);
  if (p == NULL) return fail_nomem();
  after_slow_alloc();
  return p;
}

void *tess_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return fail_nomem();
  tess_page_t *dry;
  void *p = pop_current(tessi_tls_heap, total, &dry);
  if (TESS_LIKELY(p != NULL)) return memset(p, 0, total);
  return alloc_slow(total, 0, true);
}

/* ------------------------------------------------------------------- free */

static TESS_NOINLINE void free_slow(void *p, const char *op) {
  if (p == NULL) return;
  block_info_t info = classify(p);
  switch (info.kind) {
    case BLOCK_SLAB: tessi_heap_free_block(tessi_tls_heap, info.page, p); return;
    case BLOCK_LARGE: tessi_large_free(info.page); return;
    case BLOCK_HUGE:
      /* gone since classify found it: another thread freed it at once */
      if (!tessi_huge_free(p)) tessi_report_invalid(op, p, "freed twice at once");
      TESS_STAT_MINE(huge_frees, 1);
      TESS_STAT_MINE(huge_bytes_out, info.usable);
      return;
    case BLOCK_INVALID: tessi_report_invalid(op, p, info.why);
  }
}

/* A free the fast path could not finish: another thread's slab (checked
 * here), or anything else (classified from scratch). */
static TESS_NOINLINE void free_other(void *p, tess_page_t *d, uint64_t in_slab) {
  /* the start of a large block (in_slab is the offset in its span);
   * kept by its heap when the owner frees it, else to its partition */
  if (d->kind == TESS_PAGE_LARGE && in_slab == 0 && !(d->flags & TESS_LARGE_CACHED)) {
    tessi_large_free(d);
    return;
  }
  /* another thread's slab, at a block it carved (an emptied slab, cached
   * by its heap, has none: a free into it from another thread went on a
   * dead slab's stack, a review) */
  if (d->kind == TESS_PAGE_SLAB && tessi_is_block_start(in_slab, d->u.div_magic) &&
      atomic_load_explicit(&d->owner, memory_order_relaxed) != tessi_tls_heap &&
      slab_carved(d, in_slab)) {
    tessi_heap_free_remote(d, p);
    return;
  }
  free_slow(p, "free");
}

void tess_free(void *p) {
  /* NULL and pointers outside the primary region fail the range test */
  uintptr_t offset =
      (uintptr_t)p - atomic_load_explicit(&tessi_primary_base, memory_order_relaxed);
  if (TESS_UNLIKELY(tessi_beyond_primary(offset))) {
    free_slow(p, "free");
    return;
  }
  tess_page_t *page = &tessi_primary_pages[offset >> TESS_PAGE_SHIFT];
  tess_page_t *d = tessi_page_head(page);
  uint64_t in_slab = tessi_offset_in_span(offset, page);
  /* only a live slab head of ours has our heap as owner (types.h); the
   * slab's state counts the free (no counter of its own: types.h) */
  tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_relaxed);
  if (TESS_LIKELY(owner == tessi_tls_heap && tessi_is_block_start(in_slab, d->u.div_magic))) {
    tess_block_t *b = p;
    b->next = d->local_free;
    d->local_free = b;
    if (TESS_UNLIKELY(tessi_state_drop(&d->state))) tessi_heap_local_free_done(owner, d);
    return;
  }
  free_other(p, d, in_slab);
}

/* ---------------------------------------------------------------- realloc */

/* A large block resized in place to `size`, counted; false when its
 * neighbouring pages do not allow it. */
static bool large_resized(const block_info_t *info, size_t size) {
  if (!tessi_large_resize(info->region, info->page, size)) return false;
  size_t now = (size_t)info->page->u.span.pages << TESS_PAGE_SHIFT;
  if (now > info->usable) TESS_STAT_MINE(large_bytes_in, now - info->usable);
  if (now < info->usable) TESS_STAT_MINE(large_bytes_out, info->usable - now);
  return true;
}

void *tess_realloc(void *p, size_t size) {
  if (p == NULL) return tess_malloc(size);
  block_info_t info = classify(p);
  if (info.kind == BLOCK_INVALID) tessi_report_invalid("realloc", p, info.why);
  if (size == 0) { /* glibc's behaviour: free, answer NULL */
    tess_free(p);
    return NULL;
  }
  if (size > PTRDIFF_MAX) return fail_nomem();
  /* a large block that stays one: resized in place where its pages allow */
  bool stays_large = info.kind == BLOCK_LARGE && size > tessi_slab_limit && !is_huge(size);
  switch (info.kind) {
    case BLOCK_SLAB:
      /* stay unless the block would be more than half empty */
      if (size <= info.usable && (size > info.usable / 2 || info.usable <= 32)) return p;
      break;
    case BLOCK_LARGE:
      if (stays_large && large_resized(&info, size)) return p;
      break;
    case BLOCK_HUGE:
      if (is_huge(size)) {
        void *q = tessi_huge_realloc(p, size);
        if (q != NULL) {
          TESS_STAT_MINE(huge_bytes_out, info.usable);
          TESS_STAT_MINE(huge_bytes_in, tessi_huge_usable(q));
          return q;
        }
      }
      break;
    case BLOCK_INVALID: break;
  }
  int saved_errno = errno;
  void *q = alloc_slow(size, 0, false);
  if (q == NULL) {
    /* before answering NULL the allocation gave back what heaps kept,
     * which may be the pages after the block: 4 MiB grew to 60 in 64 once
     * the spans a heap kept next to it were gone. And a shrink that found
     * no smaller block keeps its own (a large one gives back its pages
     * past the size), as glibc's never fails: a full fixed region
     * answered ENOMEM to realloc(p, 100) of 100 KB. */
    if ((stays_large || size <= info.usable) &&
        (info.kind != BLOCK_LARGE || large_resized(&info, size))) {
      errno = saved_errno;
      return p;
    }
    return NULL; /* errno set; p untouched */
  }
  memcpy(q, p, TESS_MIN(size, info.usable));
  tess_free(p);
  return q;
}

/* ------------------------------------------------------------ alignment */

static void *aligned(size_t alignment, size_t size) {
  if (alignment <= TESS_MIN_ALIGN) return tess_malloc(size);
  return alloc_slow(size, alignment, false);
}

void *tess_aligned_alloc(size_t alignment, size_t size) {
  if (!tessi_is_pow2(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return aligned(alignment, size);
}

int tess_posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || !tessi_is_pow2(alignment)) return EINVAL;
  int saved = errno; /* the result is the return value, not errno */
  void *p = aligned(alignment, size);
  errno = saved;
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

void *tess_memalign(size_t alignment, size_t size) {
  /* glibc rounds a non-power-of-two alignment up; above SIZE_MAX / 2 + 1
   * (2^63) none is left to round to: EINVAL, as glibc. Up to it the
   * rounded alignment exists and fails as any other: ENOMEM. */
  if (alignment > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (!tessi_is_pow2(alignment)) {
    size_t pow2 = 1;
    while (pow2 < alignment) pow2 <<= 1;
    alignment = pow2;
  }
  return aligned(alignment, size);
}

void *tess_valloc(size_t size) { return aligned(TESS_PAGE_SIZE, size); }

void *tess_pvalloc(size_t size) {
  size_t rounded = tessi_align_up(size ? size : 1, TESS_PAGE_SIZE);
  if (rounded < size) return fail_nomem();
  return aligned(TESS_PAGE_SIZE, rounded);
}

/* ------------------------------------------------------------ inspection */

/* The usable size of p, which `op` was given: an invalid p is reported as
 * that call's (requested.c reads a block's tag for free and realloc). */
static size_t usable_checked(const void *p, const char *op) {
  block_info_t info = classify(p);
  if (info.kind == BLOCK_INVALID) tessi_report_invalid(op, p, info.why);
  return info.usable;
}

size_t tess_usable_size(const void *p) {
  if (p == NULL) return 0;
  return usable_checked(p, "usable_size");
}

const char *tess_version_string(void) { return TESS_VERSION_TEXT; }

/* Another exported name for a tess_* function, for override.c and
 * override_oe.c: an alias must be defined in its target's translation unit. */
#if defined(__clang__) /* no copy attribute; it does not ask for one */
#define TESS_ALIAS(target) __attribute__((alias(#target), visibility("default"), used))
#else
#define TESS_ALIAS(target) \
  __attribute__((alias(#target), copy(target), visibility("default"), used))
#endif

#if TESS_STATS_REQUESTED
#undef tess_malloc
#undef tess_calloc
#undef tess_free
#undef tess_realloc
#undef tess_aligned_alloc
#undef tess_posix_memalign
#undef tess_memalign
#undef tess_valloc
#undef tess_pvalloc
#undef tess_usable_size
#include "requested.c"
#endif

/* Entry points over the others (the public ones: with requested bytes
 * counted or not). */

void tess_free_sized(void *p, size_t size) {
  (void)size;
  tess_free(p);
}

void tess_free_aligned_sized(void *p, size_t alignment, size_t size) {
  (void)alignment;
  (void)size;
  tess_free(p);
}

void *tess_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return fail_nomem();
  return tess_realloc(p, total);
}

#if TESS_OVERRIDE
#include "override.c"
#endif
#if TESS_OE
#include "override_oe.c"
#endif
