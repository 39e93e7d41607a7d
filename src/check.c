/* Introspection: walking every span of every region, to check the heap's
 * invariants (tess_heap_check) or to visit its live blocks
 * (tess_heap_visit). Both hold each partition's lock while they walk it
 * and expect the rest of the program to be quiescent: slab free lists
 * belong to their owners and are read without locks. No allocation, no
 * libc beyond memset: this file is in libtessalloc-oe.a. */
#include "internal.h"
#include "tessalloc.h"

#include <string.h>

/* Sizes visited are usable sizes: less the requested-size tag in a
 * TESS_STATS_REQUESTED build (requested.c). */
#if TESS_STATS_REQUESTED
#define VISIT_TAG sizeof(size_t)
#else
#define VISIT_TAG 0
#endif

/* One bit per block of the slab being looked at: set = free (on a list).
 * Static, not on the stack (8 KiB), so the walk holds walk_lock. */
static tess_lock_t walk_lock;
/* The calling thread is in a tess_heap_visit callback: it holds walk_lock
 * and a region's partition locks, which a read of the statistics or a
 * check would wait for forever. */
__thread bool tessi_in_visit;
static uint64_t free_bits[(UINT16_MAX + 1) / 64];

typedef struct walk_s {
  const char *error; /* the first broken invariant */
  char message[160];
  uint64_t slabs[TESS_CLASSES];       /* slabs in service, by class */
  uint64_t live_blocks[TESS_CLASSES]; /* carved and on no list */
  int (*visit)(void *, size_t, void *);
  void *arg;
  int visit_result;
} walk_t;

static size_t append(char *out, size_t n, size_t cap, const char *text) {
  for (; *text != '\0' && n + 1 < cap; text++) out[n++] = *text;
  out[n] = '\0';
  return n;
}

/* "what at 0x<where>" (or "what: <where>-byte blocks" for a class) into
 * w->message; only the first failure is kept. */
static void fail(walk_t *w, const char *what, uintptr_t where, bool is_class) {
  if (w->error != NULL) return;
  char number[24];
  size_t i = sizeof number - 1;
  number[i] = '\0';
  do {
    number[--i] = "0123456789abcdef"[where % (is_class ? 10 : 16)];
    where /= is_class ? 10 : 16;
  } while (where != 0);
  size_t n = append(w->message, 0, sizeof w->message, what);
  n = append(w->message, n, sizeof w->message, is_class ? ": class of " : " at 0x");
  n = append(w->message, n, sizeof w->message, &number[i]);
  if (is_class) append(w->message, n, sizeof w->message, "-byte blocks");
  w->error = w->message;
}

/* Marks block a of the slab at start in free_bits; false (and w->error)
 * when it is outside the slab, not a block start, beyond the carved
 * blocks, or already marked (a cycle, or a block on two lists). */
static bool mark_block(walk_t *w, uintptr_t start, const tess_class_info_t *info, uint32_t capacity,
                       uintptr_t a, const char *which) {
  uint64_t index = (a - start) / info->block_size;
  if (a < start || (a - start) % info->block_size != 0 || index >= capacity ||
      (free_bits[index >> 6] & ((uint64_t)1 << (index & 63)))) {
    fail(w, which, a, false);
    return false;
  }
  free_bits[index >> 6] |= (uint64_t)1 << (index & 63);
  return true;
}

/* Marks every block of a list (at most capacity links are followed). */
static bool mark_list(walk_t *w, uintptr_t start, const tess_class_info_t *info, uint32_t capacity,
                      tess_block_t *list, uint32_t *count, const char *which) {
  for (tess_block_t *b = list; b != NULL; b = b->next) {
    if (!mark_block(w, start, info, capacity, (uintptr_t)b, which)) return false;
    (*count)++;
  }
  return true;
}

static bool is_current(const tess_page_t *d) {
  tess_heap_t *owner = tessi_owner_heap(d);
  return owner != NULL && owner->current[d->size_class] == d;
}

static void walk_slab(walk_t *w, tess_region_t *r, tess_page_t *d) {
  const tess_class_info_t *info = &tessi_classes[d->size_class];
  uintptr_t start = tessi_page_addr(r, d);
  /* a fork() child's copy of a slab whose heap another thread was using
   * (heap.c, mark_abandoned): it may be a store behind, or midway
   * through giving its pages back; the heap is never used again */
  tess_heap_t *owner = tessi_owner_heap(d);
  bool abandoned = owner != NULL && owner->abandoned;
  for (uint32_t k = 1; k < info->slab_pages && !abandoned; k++) {
    if (d[k].kind != TESS_PAGE_NONE || d[k].head_delta != k * sizeof(tess_page_t)) {
      fail(w, "page map: slab page without the way to its head", start + k * TESS_PAGE_SIZE, false);
      return;
    }
  }
  if (d->capacity == 0) return; /* empty, cached by a heap: no class, no block */
  if (d->capacity > info->slab_blocks) {
    fail(w, "slab: more blocks carved than fit", start, false);
    return;
  }
  memset(free_bits, 0, ((size_t)(d->capacity + 63) / 64) * sizeof free_bits[0]);
  uint32_t on_lists = 0, pending = 0;
  tess_block_t *remote = (tess_block_t *)(atomic_load_explicit(&d->remote, memory_order_relaxed) &
                                          ~TESS_REMOTE_NOTIFY);
  if (!mark_list(w, start, info, d->capacity, d->free, &on_lists, "free list: bad link") ||
      !mark_list(w, start, info, d->capacity, d->local_free, &on_lists,
                 "local free list: bad link") ||
      !mark_list(w, start, info, d->capacity, remote, &pending, "remote free list: bad link")) {
    return;
  }
  /* blocks freed into this slab through a delayed list: its owner's, or
   * (a free racing with the slab's orphaning) the heap that owned it */
  uintptr_t end = start + ((size_t)info->slab_pages << TESS_PAGE_SHIFT);
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire); h != NULL;
       h = h->next_made) {
    for (tess_block_t *b = atomic_load_explicit(&h->delayed, memory_order_relaxed); b != NULL;
         b = b->next) {
      if ((uintptr_t)b < start || (uintptr_t)b >= end) continue;
      if (!mark_block(w, start, info, d->capacity, (uintptr_t)b, "delayed free list: bad link")) {
        return;
      }
      pending++;
    }
  }
  int32_t out = (int32_t)(d->state & TESS_STATE_COUNT) - (is_current(d) ? 1 : 0);
  /* (abandoned: its count may be a store behind its lists, a pop or a
   * push; the lists link up at every step) */
  if (abandoned) out = (int32_t)(d->capacity - on_lists);
  /* state counts what other threads freed (remote, delayed) as out until
   * the owner collects it */
  if (out < 0 || (uint32_t)out != d->capacity - on_lists) {
    fail(w, "slab: block count does not match its free lists", start, false);
    return;
  }
  w->slabs[d->size_class]++;
  w->live_blocks[d->size_class] += (uint32_t)out - pending;
  if (w->visit == NULL) return;
  for (uint32_t i = 0; i < d->capacity && w->visit_result == 0; i++) {
    if (free_bits[i >> 6] & ((uint64_t)1 << (i & 63))) continue;
    w->visit_result = w->visit((void *)(start + (size_t)i * info->block_size),
                               info->block_size - VISIT_TAG, w->arg);
  }
}

/* Whether p's bins hold `spans` free spans of `pages` pages in all, each
 * a free head of p, linked both ways (its lock held). Without it a free
 * span that no bin held, never to be handed out again, passed the check:
 * the pages counted free were those of the page map. */
static bool bins_hold(const tess_partition_t *p, size_t spans, size_t pages) {
  const tess_page_t *first = &p->region->pages[p->first_page];
  const tess_page_t *end = &p->region->pages[p->end_page];
  size_t seen = 0, seen_pages = 0;
  for (unsigned b = 0; b < TESS_SPAN_BINS; b++) {
    const tess_page_t *prev = NULL;
    for (const tess_page_t *d = p->bins[b]; d != NULL; prev = d, d = d->next) {
      /* (no more than the walk found: a cycle ends here too) */
      if (++seen > spans || d < first || d >= end || d->kind != TESS_PAGE_FREE ||
          d->prev != prev) {
        return false;
      }
      seen_pages += d->u.span.pages;
    }
  }
  return seen == spans && seen_pages == pages;
}

/* In a fork() child with abandoned heaps: a span in use whose length a
 * thread of the parent was changing when fork() copied it (a large block
 * resized, its head's length stored before or after the partition took
 * or gave the pages; a slab made, its class not yet stamped) runs on to
 * the next page where a span starts; any other span ends there anyway. */
static size_t to_next_head(const tess_page_t *d, size_t pages, size_t room) {
  while (pages < room && d[pages].kind == TESS_PAGE_NONE) pages++;
  return pages;
}

/* A fork() child's copy of a slab that a thread of the parent was making
 * or giving back (heap.c, slab_new, slab_release): no owner, its class
 * not yet stamped or its pages' way to the head already cleared. */
static bool in_transition(const tess_page_t *d) {
  return atomic_load_explicit(&d->owner, memory_order_relaxed) == NULL;
}

/* Walks the spans of a region's open partitions, in address order, its
 * partitions locked. Free spans lie within one partition; a span in use
 * (a large block, a slab, metadata) may cross partitions
 * (tessi_span_alloc_across). */
static void walk_region(walk_t *w, tess_region_t *r) {
  static size_t free_pages[TESS_FIXED_MAX_PARTITIONS]; /* under walk_lock */
  static size_t free_spans[TESS_FIXED_MAX_PARTITIONS];
  memset(free_pages, 0, r->partition_count * sizeof free_pages[0]);
  memset(free_spans, 0, r->partition_count * sizeof free_spans[0]);
  unsigned open = tessi_open_partitions(r);
  size_t end = r->partitions[open - 1].end_page;
  unsigned at = 0; /* partition of page i */
  for (size_t i = r->partitions[0].first_page;
       i < end && w->error == NULL && w->visit_result == 0;) {
    while (i >= r->partitions[at].end_page) at++;
    tess_partition_t *p = &r->partitions[at];
    tess_page_t *d = &r->pages[i];
    uintptr_t addr = tessi_page_addr(r, d);
    size_t pages;
    switch (d->kind) {
      case TESS_PAGE_SLAB:
        if (d->size_class >= TESS_CLASSES) {
          fail(w, "page map: slab head with a bad size class", addr, false);
          return;
        }
        pages = tessi_classes[d->size_class].slab_pages;
        break;
      case TESS_PAGE_FREE:
      case TESS_PAGE_LARGE:
      case TESS_PAGE_META:
      case TESS_PAGE_BUSY: pages = d->u.span.pages; break;
      default: fail(w, "page map: no span starts here", addr, false); return;
    }
    /* a span in use may cross partitions in a fixed region */
    bool is_free = d->kind == TESS_PAGE_FREE || d->kind == TESS_PAGE_BUSY;
    size_t room = (!is_free && r->is_fixed ? end : p->end_page) - i;
    if (tessi_heaps_abandoned && !is_free) pages = to_next_head(d, pages, room);
    if (pages == 0 || pages > room) {
      fail(w, "page map: span length runs past its partition", addr, false);
      return;
    }
    if (!is_free) {
      /* pages in use lie below the high water of each partition they
       * cross (span.c) */
      unsigned k = at;
      for (; i + pages > r->partitions[k].end_page; k++) {
        if (r->partitions[k].high_water < r->partitions[k].end_page) break;
      }
      if (r->partitions[k].high_water < TESS_MIN(i + pages, (size_t)r->partitions[k].end_page)) {
        fail(w, "partition: a span in use above its high water", addr, false);
        return;
      }
    }
    if (d->kind == TESS_PAGE_FREE) {
      free_pages[at] += pages;
      free_spans[at]++;
      if (pages > 1 &&
          (d[pages - 1].kind != TESS_PAGE_FREE_TAIL || d[pages - 1].u.span.pages != pages - 1)) {
        fail(w, "page map: free span without its tail", addr, false);
        return;
      }
      if (d->span_dirty > pages) {
        fail(w, "page map: free span with a bad count of dirty pages", addr, false);
        return;
      }
    } else if (d->kind == TESS_PAGE_LARGE) {
      for (size_t k = 1; k < pages; k++) {
        if (d[k].kind != TESS_PAGE_NONE || d[k].head_delta != 0) {
          fail(w, "page map: large block page that is not blank", addr + k * TESS_PAGE_SIZE, false);
          return;
        }
      }
      if (w->visit != NULL && !(d->flags & TESS_LARGE_CACHED)) {
        w->visit_result = w->visit((void *)addr, (pages << TESS_PAGE_SHIFT) - VISIT_TAG, w->arg);
      }
    } else if (d->kind == TESS_PAGE_SLAB && !(tessi_heaps_abandoned && in_transition(d))) {
      walk_slab(w, r, d);
    }
    i += pages;
  }
  for (unsigned k = 0; k < open && w->error == NULL && w->visit_result == 0; k++) {
    tess_partition_t *p = &r->partitions[k];
    size_t used = atomic_load_explicit(&p->used_pages, memory_order_relaxed);
    if (free_pages[k] != p->free_pages) {
      fail(w, "partition: free pages do not match its count",
           tessi_page_addr(r, &r->pages[p->first_page]), false);
    } else if (used != p->end_page - p->first_page - p->free_pages) {
      fail(w, "partition: pages in use do not match the footprint's count",
           tessi_page_addr(r, &r->pages[p->first_page]), false);
    } else if (!bins_hold(p, free_spans[k], free_pages[k])) {
      fail(w, "partition: its bins do not hold its free spans",
           tessi_page_addr(r, &r->pages[p->first_page]), false);
    }
  }
}

/* A field that other threads may write as this reads it: read once
 * (volatile), and, in this uninstrumented reader, unseen by
 * ThreadSanitizer (its atomic loads would still be checked against the
 * span allocator's plain writes). */
#define RACY_LOAD(field) (*(const volatile __typeof__(field) *)&(field))

/* The owners change these fields without locks while it reads them: a
 * deliberate, benign race (each figure is one the slab had), so
 * ThreadSanitizer is told not to watch this reader and keeps checking
 * everything else. Without `lock`, spans may also be made and freed as
 * it walks: a head caught mid-change can count one slab's blocks wrong
 * for that read, or skip a few spans, and nobody waits (the statistics'
 * automatic samples: locking every partition once per 1/64 of footprint
 * growth stopped every thread's span work, 113 times in OE's sample at
 * 16 threads). */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize("thread")))
#endif
void tessi_slab_census(tess_slab_census_t *census, bool lock) {
  memset(census, 0, sizeof *census);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    if (lock) {
      tessi_partitions_lock(r);
      tessi_span_drain_deferred(r); /* deferred frees are not blocks */
    }
    size_t end = r->partitions[tessi_open_partitions(r) - 1].end_page;
    for (size_t i = r->partitions[0].first_page; i < end;) {
      tess_page_t *d = &r->pages[i];
      uint8_t kind = RACY_LOAD(d->kind);
      size_t pages = 1;
      if (kind == TESS_PAGE_SLAB) {
        unsigned cls = RACY_LOAD(d->size_class);
        if (cls < TESS_CLASSES) {
          const tess_class_info_t *info = &tessi_classes[cls];
          int32_t n = RACY_LOAD(d->state) & TESS_STATE_COUNT;
          tess_heap_t *owner = *(tess_heap_t *const volatile *)&d->owner; /* not _Atomic */
          unsigned holder = TESS_HOLDER_HEAP;
          if (owner != NULL && tessi_is_orphan_owner(owner)) {
            holder = TESS_HOLDER_ORPHANS;
            census->orphaned[cls]++;
          } else if (owner != NULL && RACY_LOAD(owner->current[cls]) == d) {
            holder = TESS_HOLDER_CURRENT;
            n--;
          }
          pages = info->slab_pages;
          size_t bytes = pages << TESS_PAGE_SHIFT;
          if (n <= 0 && RACY_LOAD(d->capacity) == 0 && holder == TESS_HOLDER_HEAP) {
            census->empty_bytes += bytes; /* in a heap's cache: no class (heap.c) */
          } else {
            uint64_t out = n > 0 ? TESS_MIN((uint64_t)n, (uint64_t)info->slab_blocks) : 0;
            census->out[cls] += out;
            census->free_bytes[holder] += bytes - out * info->block_size;
          }
        }
      } else if (kind == TESS_PAGE_FREE || kind == TESS_PAGE_LARGE || kind == TESS_PAGE_META ||
                 kind == TESS_PAGE_BUSY) {
        /* without `lock`, a head that became a slab's since its kind was
         * read holds the slab's div_magic where the length was: billions
         * of pages, counted as live large bytes that the peak kept
         * (races/census_torn.sh). A length past the region is such a
         * head's: it counts nothing. */
        size_t length = RACY_LOAD(d->u.span.pages);
        if (length == 0 || length > end - i) {
          length = 1;
        } else if (kind == TESS_PAGE_LARGE && (RACY_LOAD(d->flags) & TESS_LARGE_CACHED)) {
          census->kept_bytes += length << TESS_PAGE_SHIFT;
        } else if (kind == TESS_PAGE_LARGE) {
          census->large_blocks++;
          census->large_bytes += length << TESS_PAGE_SHIFT;
        }
        pages = length;
      }
      i += pages;
    }
    if (lock) tessi_partitions_unlock(r);
  }
}

/* The caller holds walk_lock. */
static void walk_all(walk_t *w) {
  for (tess_region_t *r = tessi_region_first(); r != NULL && w->error == NULL;
       r = tessi_region_next(r)) {
    tessi_partitions_lock(r);
    tessi_span_drain_deferred(r); /* so free pages match their counts */
    walk_region(w, r);
    tessi_partitions_unlock(r);
  }
}

/* Each heap's count of the classes borrowing a class's current slab
 * (set_current looks at them only when it is not 0) against its
 * borrowings. */
static void check_borrowers(walk_t *w) {
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire);
       h != NULL && w->error == NULL; h = h->next_made) {
    if (h->abandoned) continue; /* (a fork() child's: walk_slab) */
    unsigned count[TESS_CLASSES] = {0};
    for (unsigned c = 0; c < TESS_CLASSES; c++) {
      if (h->borrow[c] != 0) count[h->borrow[c] - 1]++;
    }
    for (unsigned c = 0; c < TESS_CLASSES; c++) {
      if (count[c] != h->borrowers[c]) {
        fail(w, "heap: borrower count differs from the borrowings", tessi_classes[c].block_size,
             true);
        break;
      }
    }
  }
}

void tessi_check_fork(tess_fork_phase_t phase) { tessi_lock_for_fork(&walk_lock, phase); }

const char *tess_heap_check(void) {
  if (!atomic_load_explicit(&tessi_ready, memory_order_acquire)) return NULL;
  if (tessi_in_visit) return "tess_heap_check: called from a tess_heap_visit callback";
  static walk_t w;            /* its message outlives the call */
  static struct tess_stats s; /* ~5 KiB: not on a small thread's stack */
  tessi_lock(&walk_lock);
  memset(&w, 0, sizeof w);
  walk_all(&w);
  check_borrowers(&w);
  if (w.error == NULL && !tessi_footprint_consistent()) {
    w.error =
        "footprint: the bound is not the partitions' pages and slack, or the peak is below "
        "the footprint or above the regions' pages";
  }
  if (w.error == NULL) tessi_stats_merge(&s);
  /* the counters against what the walk found (not in a fork() child
   * with abandoned heaps, whose counters may be a store behind) */
  for (unsigned c = 0; c < TESS_CLASSES && w.error == NULL && !tessi_heaps_abandoned; c++) {
    if (s.classes[c].slabs != w.slabs[c]) {
      fail(&w, "counters: slab count differs from the page map", tessi_classes[c].block_size, true);
    } else if (s.classes[c].live_blocks != w.live_blocks[c]) {
      fail(&w, "counters: live blocks differ from the free lists", tessi_classes[c].block_size,
           true);
    }
  }
  tessi_unlock(&walk_lock);
  return w.error;
}

int tess_heap_visit(int (*visit)(void *ptr, size_t size, void *arg), void *arg) {
  if (visit == NULL || !atomic_load_explicit(&tessi_ready, memory_order_acquire)) return 0;
  if (tessi_in_visit) return -1; /* from a callback: its locks are held */
  walk_t w;
  memset(&w, 0, sizeof w);
  w.visit = visit;
  w.arg = arg;
  tessi_lock(&walk_lock);
  tessi_in_visit = true;
  walk_all(&w);
  /* then the huge blocks (OS mode), which the walk of the regions does not
   * meet: they were left out, so a visit did not see every block */
  if (w.visit_result == 0) w.visit_result = tessi_huge_visit(visit, arg, VISIT_TAG);
  tessi_in_visit = false;
  tessi_unlock(&walk_lock);
  return w.visit_result;
}
