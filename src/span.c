/* The span allocator of a partition: runs of pages, kept in size bins, with
 * coalescing of neighbours on free and delayed decommit of dirty spans.
 *
 * A free span is described by its head descriptor (kind FREE: length,
 * flags, when it was freed) and, when longer than one page, its last one
 * (kind FREE_TAIL: distance back to the head); so the span left of a freed
 * one is found in O(1), as is the one to its right (its head follows our
 * end). Every other descriptor inside a free span is zero. All of it is
 * guarded by the partition's lock. */
#include <string.h>

#include "internal.h"

/* Bins by page count: exact for 1..8 pages, then four per doubling. */
static inline unsigned bin_of(size_t pages) {
  if (pages <= 8) return (unsigned)pages - 1;
  unsigned top = 63u - (unsigned)__builtin_clzll(pages);
  return 8u + (top - 3u) * 4u + (unsigned)((pages >> (top - 2u)) & 3u);
}

static inline tess_page_t *first_page(tess_partition_t *p) {
  return &p->region->pages[p->first_page];
}
static inline tess_page_t *end_page(tess_partition_t *p) { return &p->region->pages[p->end_page]; }

static inline void clear_desc(tess_page_t *d) {
  /* owner apart, atomically: a remote free reads it again once its block
   * is pushed (heap.c, tessi_heap_free_remote), by when the slab may be
   * gone */
  _Static_assert(offsetof(tess_page_t, owner) + sizeof d->owner == offsetof(tess_page_t, next),
                 "owner lies between remote and next");
  memset(d, 0, offsetof(tess_page_t, owner));
  atomic_store_explicit(&d->owner, NULL, memory_order_relaxed);
  d->next = d->prev = NULL;
}

/* The kind of a page next to a span: a deferred free (below) may change it
 * without the lock. */
static inline uint8_t kind_of(const tess_page_t *d) {
  return __atomic_load_n(&d->kind, __ATOMIC_RELAXED);
}

/* Published for tessi_span_alloc's peek without the lock. */
static void publish_bins_used(tess_partition_t *p) {
  uint32_t used = 0;
  for (unsigned w = TESS_SPAN_BINS / 64; w-- > 0;) {
    if (p->nonempty[w] != 0) {
      used = w * 64u + 64u - (unsigned)__builtin_clzll(p->nonempty[w]);
      break;
    }
  }
  atomic_store_explicit(&p->bins_used, used, memory_order_relaxed);
}

static void bin_push(tess_partition_t *p, tess_page_t *d) {
  unsigned b = bin_of(d->u.span.pages);
  d->prev = NULL;
  d->next = p->bins[b];
  if (d->next != NULL) d->next->prev = d;
  p->bins[b] = d;
  p->nonempty[b >> 6] |= (uint64_t)1 << (b & 63);
  if (b >= atomic_load_explicit(&p->bins_used, memory_order_relaxed)) {
    atomic_store_explicit(&p->bins_used, b + 1, memory_order_relaxed);
  }
}

static void bin_remove(tess_partition_t *p, tess_page_t *d) {
  unsigned b = bin_of(d->u.span.pages);
  if (d->prev != NULL)
    d->prev->next = d->next;
  else
    p->bins[b] = d->next;
  if (d->next != NULL) d->next->prev = d->prev;
  if (p->bins[b] == NULL) {
    p->nonempty[b >> 6] &= ~((uint64_t)1 << (b & 63));
    if (b + 1 == atomic_load_explicit(&p->bins_used, memory_order_relaxed)) publish_bins_used(p);
  }
  d->next = d->prev = NULL;
}

/* `dirty`: how many of its pages may be resident, at most all (a bound kept
 * through merges and splits). Merged as a flag ("dirty") alone,
 * a small free next to a decommitted span, or to a partition's untouched
 * end, made all of it dirty: the statistics' committed bytes read 32 GiB
 * with 1 MiB resident, and every later small free there had the whole
 * range decommitted again (a review). */
static void write_free_span(tess_page_t *head, size_t pages, uint16_t flags, uint32_t freed_at,
                            size_t dirty) {
  dirty = TESS_MIN(dirty, pages);
  head->kind = TESS_PAGE_FREE;
  head->flags = flags;
  head->span_dirty = dirty;
  head->head_delta = 0;
  head->u.span.pages = (uint32_t)pages;
  head->u.span.freed_at_ms = freed_at;
  if (pages > 1) {
    tess_page_t *tail = head + pages - 1;
    tail->kind = TESS_PAGE_FREE_TAIL;
    tail->flags = 0;
    tail->head_delta = 0;
    tail->u.span.pages = (uint32_t)(pages - 1);
  }
}

/* Merged flags: zero only if both were (dirty is counted: write_free_span). */
static inline uint16_t merge_flags(uint16_t a, uint16_t b) {
  return (uint16_t)((a & b) & TESS_SPAN_ZERO);
}

/* The time of a span merged of pieces a and b: the newer dirty piece's, by
 * age at `now` (read under the lock: no piece is newer). A piece with no
 * dirty pages adds no time (never freed, as a partition's untouched end,
 * time 0, or decommitted since). The 32-bit clock passes 2^31 ms after
 * 24.8 days, and a signed compare of the times took 0, or a piece freed 25
 * days before, for the newer: the span looked due 24 days ahead, and so
 * did its partition's next round (test_options clock-wrap). */
static inline uint32_t merged_time(uint32_t now, uint32_t a, size_t a_dirty, uint32_t b,
                                   size_t b_dirty) {
  if (a_dirty == 0) return b_dirty != 0 ? b : a;
  if (b_dirty == 0) return a;
  return (uint32_t)(now - a) <= (uint32_t)(now - b) ? a : b;
}

/* Whether a purge set for `due` is due at `now`. No due time is set more
 * than the delay ahead, so one that reads further ahead was set 2^31 ms
 * ago or more (a process idle for 25 days) and is overdue. */
static inline bool is_due(uint32_t now, uint32_t due) {
  return (int32_t)(now - due) >= 0 || due - now > tessi_options.decommit_delay_ms;
}

/* The footprint: pages handed out of all partitions, plus the meta pages.
 * Each partition counts its own (used_pages, written under its lock and
 * read without it), and the footprint is their sum. The peak should be
 * exact (tess_footprint's, and workload A's target; see peak_raise for the
 * one case where it is not), yet one atomic
 * add per span operation on one global line was the hottest instruction
 * in workload B on 16 CPUs (8.1 % of samples; a build without it ran B 12-
 * 17 % and A at 16 threads 5 % faster). So a partition prepays: it counts
 * slack_pages more than it uses in a global bound (bound = meta + every
 * partition's used + slack pages, less the deferred ones, which are free:
 * deferred_push), and only a growth that finds the bound
 * above the peak may have passed it. Away from the peak a partition
 * prepays FOOTPRINT_SLACK pages more than it needs and gives back only
 * what exceeds twice that, so the bound is written once per several span
 * operations, and a growth within its slack reads lines that seldom
 * change. Near the peak (the bound within twice the slack of every
 * partition laid) partitions prepay exactly and give back at once, as
 * one count did before; the bound is then the footprint, and the peak
 * rises to the bound less the slack that partitions still hold, which is
 * none once each has run near the peak.
 * The bound is written after the partition's lock is released (as the one
 * count was), and whether it is near the peak is what the partition's
 * last look at it found, so that its line's traffic does not lengthen the
 * lock's hold. A growth stores its slack under the lock, then adds to the bound,
 * or loads it, sequentially consistent, and peak_raise loads the slacks
 * after the bound: of two growths at once the later finds the other's
 * pages, so a peak they reach together is seen.
 * Workload B on 2 CPUs, 10 s: 8 % of its 28.5 M span operations wrote the
 * bound, 1.2 % of its growths were near the peak (a slack of 8 pages: 18
 * % wrote it; 32: 8 %, with 6 % near). OE's sample stays near its peak:
 * about every operation writes the bound there, as before. */
#define FOOTPRINT_SLACK 16

static _Alignas(64) _Atomic(size_t) bound_pages;
static _Alignas(64) _Atomic(size_t) meta_pages;
static _Atomic(size_t) near_pages;             /* 2 * FOOTPRINT_SLACK per partition laid */
_Alignas(64) _Atomic(size_t) tessi_peak_pages; /* its own line: read on slow paths */
/* The most pages the partitions held in use at once (the footprint less
 * the meta pages): oe_allocator_mallinfo's peak. Meta pages only grow, so
 * each new high of it is a new high of the footprint, which peak_raise
 * sees. Written only there, beside tessi_peak_pages. */
_Atomic(size_t) tessi_peak_partition_pages;

/* What a span operation did to the footprint, for footprint_apply once
 * the partition's lock is released. */
typedef struct footprint_change_s {
  ptrdiff_t bound; /* pages to add to the bound */
  bool grew;
} footprint_change_t;

/* The partitions' pages in use less those deferred (or, slack, held
 * beyond those in the bound), over every open partition of every region.
 * (A drain lowers used_pages before the deferred count: read between the
 * two, a partition may count fewer pages than it has for a moment.) */
static size_t partitions_sum(bool slack) {
  size_t pages = 0, deferred = 0;
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    unsigned open = tessi_open_partitions(r);
    for (unsigned i = 0; i < open; i++) {
      tess_partition_t *p = &r->partitions[i];
      pages += atomic_load(slack ? &p->slack_pages : &p->used_pages);
      if (!slack) deferred += atomic_load(&p->deferred_pages);
    }
  }
  return pages > deferred ? pages - deferred : 0;
}

static inline bool near_peak(size_t bound) {
  return bound + atomic_load_explicit(&near_pages, memory_order_relaxed) >
         atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed);
}

/* Every page of every region linked: more than any footprint (0 while
 * the first region's meta pages are counted, before it is linked). */
static size_t regions_pages(void) {
  size_t pages = 0;
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    pages += r->size >> TESS_PAGE_SHIFT;
  }
  return pages;
}

/* A growth found the bound above the peak. The bound may still hold the
 * pages of a free whose partition has let them go but that has not yet
 * taken them off the bound (after its unlock): a peak raised meanwhile
 * counts them, though never beyond the regions' pages. */
static TESS_NOINLINE void peak_raise(size_t bound) {
  size_t slack = partitions_sum(true);
  if (slack >= bound) return; /* (read as others changed theirs) */
  size_t now = bound - slack, most = regions_pages();
  if (most != 0 && now > most) now = most;
  size_t peak = atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&tessi_peak_pages, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  size_t meta = atomic_load(&meta_pages);
  size_t in_use = now > meta ? now - meta : 0;
  size_t most_in_use = atomic_load_explicit(&tessi_peak_partition_pages, memory_order_relaxed);
  while (in_use > most_in_use &&
         !atomic_compare_exchange_weak_explicit(&tessi_peak_partition_pages, &most_in_use, in_use,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* p's free_pages changed; its lock is held. */
static footprint_change_t partition_count(tess_partition_t *p) {
  footprint_change_t change = {0, false};
  size_t used = (size_t)(p->end_page - p->first_page) - p->free_pages;
  size_t was = atomic_load_explicit(&p->used_pages, memory_order_relaxed); /* ours */
  size_t prepaid = was + atomic_load_explicit(&p->slack_pages, memory_order_relaxed);
  if (used == was) return change;
  size_t want = prepaid;
  /* as the partition's last look at the bound found it: the bound's line
   * is written by every span operation near the peak, and a miss on it
   * here would hold the lock longer */
  if (atomic_load_explicit(&p->near_peak, memory_order_relaxed)) {
    want = used;
  } else if (used > prepaid) {
    want = used + FOOTPRINT_SLACK;
  } else if (used < was && prepaid - used > 2 * FOOTPRINT_SLACK) {
    want = used + FOOTPRINT_SLACK;
  }
  change.grew = used > was;
  change.bound = (ptrdiff_t)(want - prepaid);
  atomic_store_explicit(&p->used_pages, used, memory_order_release);
  /* what peak_raise reads: a growth's is ordered before its bound */
  if (change.grew) {
    atomic_store(&p->slack_pages, want - used);
  } else {
    atomic_store_explicit(&p->slack_pages, want - used, memory_order_release);
  }
  return change;
}

/* The bound takes the change of partition p (NULL: of several, or of the
 * meta pages); p's lock is released. */
static void footprint_apply(footprint_change_t change, tess_partition_t *p) {
  size_t bound;
  if (change.bound != 0) {
    bound = atomic_fetch_add(&bound_pages, (size_t)change.bound) + (size_t)change.bound;
  } else if (change.grew) {
    bound = atomic_load(&bound_pages);
  } else {
    return;
  }
  if (p != NULL) atomic_store_explicit(&p->near_peak, near_peak(bound), memory_order_relaxed);
  if (change.grew && bound > atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed)) {
    peak_raise(bound);
  }
}

void tessi_footprint_meta_add(size_t pages) {
  atomic_fetch_add(&meta_pages, pages);
  footprint_apply((footprint_change_t){(ptrdiff_t)pages, true}, NULL);
}

/* Region r's share of the bound: its partitions' pages in use and slack,
 * less the deferred ones (r's locks held). */
static size_t region_bound(const tess_region_t *r) {
  size_t pages = 0;
  for (unsigned i = 0; i < r->partition_count; i++) {
    const tess_partition_t *p = &r->partitions[i];
    pages += atomic_load(&p->used_pages) + atomic_load(&p->slack_pages) -
             atomic_load(&p->deferred_pages);
  }
  return pages;
}

bool tessi_footprint_consistent(void) {
  size_t pages = atomic_load(&meta_pages);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    tessi_partitions_lock(r);
    pages += region_bound(r);
    tessi_partitions_unlock(r);
  }
  size_t footprint = atomic_load(&meta_pages) + partitions_sum(false);
  size_t peak = atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed);
  return pages == atomic_load(&bound_pages) && footprint <= peak && peak <= regions_pages();
}

static _Atomic(size_t) decommitted_pages;

void tessi_span_os_counts(size_t *dirty, size_t *decommitted) {
  size_t pages = 0;
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    for (unsigned i = 0; i < r->partition_count; i++) {
      tess_partition_t *p = &r->partitions[i];
      tessi_lock(&p->lock);
      for (unsigned b = 0; b < TESS_SPAN_BINS; b++) {
        for (tess_page_t *d = p->bins[b]; d != NULL; d = d->next) {
          pages += d->span_dirty;
        }
      }
      tessi_unlock(&p->lock);
    }
  }
  *dirty = pages << TESS_PAGE_SHIFT;
  *decommitted = atomic_load_explicit(&decommitted_pages, memory_order_relaxed) << TESS_PAGE_SHIFT;
}

size_t tessi_footprint(size_t *peak) {
  size_t pages = atomic_load(&meta_pages) + partitions_sum(false);
  if (peak != NULL) {
    *peak = atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed) << TESS_PAGE_SHIFT;
  }
  return pages << TESS_PAGE_SHIFT;
}

/* Earliest time any partition has a purge due (0: none), so slow paths
 * elsewhere can check in one load whether purging is overdue. */
_Atomic(uint32_t) tessi_purge_due_ms;

static _Atomic(int) purge_held; /* fork() is taking the partition locks */

static void schedule_purge(tess_partition_t *p, uint32_t due) {
  if (due == 0) due = 1;
  p->next_purge_ms = due;
  uint32_t seen = atomic_load_explicit(&tessi_purge_due_ms, memory_order_relaxed);
  while ((seen == 0 || (int32_t)(due - seen) < 0) &&
         !atomic_compare_exchange_weak_explicit(&tessi_purge_due_ms, &seen, due,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

/* Insert [head, head+pages) as free, merging with free neighbours; returns
 * the merged span's head. The caller has cleared head's descriptor; `now`
 * is the clock read under the lock (merged_time). */
static tess_page_t *coalesce_insert(tess_partition_t *p, tess_page_t *head, size_t pages,
                                    uint16_t flags, uint32_t freed_at, size_t dirty,
                                    uint32_t now) {
  if (head > first_page(p)) {
    tess_page_t *left = head - 1;
    uint8_t left_kind = kind_of(left);
    tess_page_t *left_head = left_kind == TESS_PAGE_FREE_TAIL ? left - left->u.span.pages
                             : left_kind == TESS_PAGE_FREE    ? left
                                                              : NULL;
    if (left_head != NULL && kind_of(left_head) == TESS_PAGE_FREE) {
      bin_remove(p, left_head);
      size_t left_pages = left_head->u.span.pages;
      flags = merge_flags(flags, left_head->flags);
      freed_at =
          merged_time(now, freed_at, dirty, left_head->u.span.freed_at_ms, left_head->span_dirty);
      dirty += left_head->span_dirty;
      if (left != left_head) clear_desc(left);
      head = left_head;
      pages += left_pages;
    }
  }
  tess_page_t *right = head + pages;
  if (right < end_page(p) && kind_of(right) == TESS_PAGE_FREE) {
    bin_remove(p, right);
    size_t right_pages = right->u.span.pages;
    flags = merge_flags(flags, right->flags);
    freed_at = merged_time(now, freed_at, dirty, right->u.span.freed_at_ms, right->span_dirty);
    dirty += right->span_dirty;
    clear_desc(right); /* its tail becomes ours and is rewritten below */
    pages += right_pages;
  }
  if (pages > 1) clear_desc(head + pages - 1);
  write_free_span(head, pages, flags, freed_at, dirty);
  bin_push(p, head);
  return head;
}

/* Deferred frees (fixed regions). A thread that frees a span while its
 * partition's lock is busy does not wait for it: the fixed platform can
 * only spin, and with more threads than CPUs the holder may have lost its
 * CPU (workload B: a fifth of all CPU time went into such spins, on frees
 * of large blocks and slabs). The span's head becomes BUSY with its length
 * (free() then rejects a second free of it, and coalescing passes it by)
 * and goes on the partition's deferred stack, linked through its head's
 * `next`; whoever takes the lock next returns the stack's spans to the
 * bins before anything else, so an allocation that locks the partition
 * finds them. Their pages are free from the push on: the footprint and
 * the bound leave them out (deferred_pages), and the drain then takes
 * them out of used_pages without a change to either. Kinds are
 * read with relaxed atomics (kind_of) where a deferred span's may change
 * outside the lock: a neighbour's coalescing reads it under the lock. */
static void deferred_push(tess_partition_t *p, tess_page_t *head, size_t pages) {
  /* free from here on: out of the footprint (the count, on a line the push
   * writes anyway), then out of the bound, so that the bound is never
   * below the footprint and a peak_raise that reads it before this sees
   * the footprint as it was */
  atomic_fetch_add(&p->deferred_pages, pages);
  atomic_fetch_sub(&bound_pages, pages);
  head->u.span.pages = (uint32_t)pages;
  __atomic_store_n(&head->kind, (uint8_t)TESS_PAGE_BUSY, __ATOMIC_RELAXED);
  tess_page_t *top = atomic_load_explicit(&p->deferred, memory_order_relaxed);
  do {
    head->next = top;
  } while (!atomic_compare_exchange_weak_explicit(&p->deferred, &top, head, memory_order_release,
                                                  memory_order_relaxed));
}

static void deferred_drain_locked(tess_partition_t *p) {
  if (atomic_load_explicit(&p->deferred, memory_order_relaxed) == NULL) return;
  tess_page_t *head = atomic_exchange_explicit(&p->deferred, NULL, memory_order_acquire);
  size_t drained = 0;
  while (head != NULL) {
    tess_page_t *next = head->next;
    size_t pages = head->u.span.pages;
    clear_desc(head);
    coalesce_insert(p, head, pages, 0, 0, pages, 0); /* (no clock in fixed regions) */
    p->free_pages += pages;
    drained += pages;
    head = next;
  }
  /* the pages left the footprint and the bound when they were pushed:
   * out of used_pages too, so that partition_count finds no change; then
   * off the count (the other order would show them in the footprint
   * twice for a moment) */
  atomic_store_explicit(&p->used_pages,
                        atomic_load_explicit(&p->used_pages, memory_order_relaxed) - drained,
                        memory_order_release);
  atomic_fetch_sub(&p->deferred_pages, drained);
}

/* fork: a deferral under way when fork() copies the process would leave
 * its span BUSY in the child for good. While a fork is prepared, frees
 * wait for the lock as they did before deferrals; those already pushing
 * are waited out. Each side writes its flag, then reads the other's (both
 * sequentially consistent), so a free either sees `forking` or is counted
 * in its partition's `pushing` (next to the stack it is about to push on,
 * so a deferral touches one contended line). */
static _Atomic(uint32_t) forking;

static bool deferral_begin(tess_partition_t *p) {
  atomic_fetch_add(&p->pushing, 1);
  if (atomic_load(&forking) == 0) return true;
  atomic_fetch_sub(&p->pushing, 1);
  return false;
}

/* fork(): every partition of every region locked, in order, each once no
 * purge of it is between its unlock and its relock (its spans parked BUSY
 * would stay so in the child, lost, and fail tess_heap_check there); no
 * purge starts from then until tessi_span_fork_done. Then no deferral is
 * left under way (`forking`, above). */
void tessi_span_fork_prepare(void) {
  atomic_store(&purge_held, 1);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    for (unsigned i = 0; i < r->partition_count; i++) {
      tess_partition_t *p = &r->partitions[i];
      tessi_lock(&p->lock);
      while (p->purging != 0) {
        tessi_unlock(&p->lock);
        tessi_plat_yield();
        tessi_lock(&p->lock);
      }
    }
  }
  atomic_store(&forking, 1);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    for (unsigned i = 0; i < r->partition_count; i++) {
      while (atomic_load(&r->partitions[i].pushing) != 0) tessi_plat_yield();
    }
  }
}

void tessi_span_fork_done(bool in_child) {
  if (in_child) {
    /* the child has no thread but this one: a free that counted itself as
     * fork() came (and would have backed off) is gone, and so is a span
     * operation between its unlock and its change to the bound, which is
     * counted again (every lock held) and may be a peak never raised */
    size_t bound = atomic_load(&meta_pages);
    for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
      for (unsigned i = 0; i < r->partition_count; i++) atomic_store(&r->partitions[i].pushing, 0);
      bound += region_bound(r);
    }
    atomic_store(&bound_pages, bound);
    if (bound > atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed)) peak_raise(bound);
  }
  atomic_store(&purge_held, 0);
  atomic_store(&forking, 0);
}

size_t tessi_span_deferred_bytes(void) {
  size_t pages = 0;
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    for (unsigned i = 0; i < tessi_open_partitions(r); i++) {
      pages += atomic_load_explicit(&r->partitions[i].deferred_pages, memory_order_relaxed);
    }
  }
  return pages << TESS_PAGE_SHIFT;
}

void tessi_span_drain_deferred(tess_region_t *r) {
  for (unsigned i = 0; i < r->partition_count; i++) deferred_drain_locked(&r->partitions[i]);
}

void tessi_span_drain_all(void) {
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    if (!r->is_fixed) continue; /* (no deferral outside fixed regions) */
    for (unsigned i = 0; i < r->partition_count; i++) {
      tess_partition_t *p = &r->partitions[i];
      if (atomic_load_explicit(&p->deferred, memory_order_relaxed) == NULL) continue;
      tessi_lock(&p->lock);
      deferred_drain_locked(p);
      tessi_unlock(&p->lock);
    }
  }
}

static inline void partition_lock(tess_partition_t *p) {
  tessi_lock(&p->lock);
  deferred_drain_locked(p);
}

static inline bool partition_trylock(tess_partition_t *p) {
  if (!tessi_trylock(&p->lock)) return false;
  deferred_drain_locked(p);
  return true;
}

void tessi_span_init_partition(tess_partition_t *p, bool is_zero) {
  size_t pages = p->end_page - p->first_page;
  write_free_span(first_page(p), pages, is_zero ? TESS_SPAN_ZERO : 0, 0, 0);
  bin_push(p, first_page(p));
  p->free_pages = pages;
  p->high_water = p->first_page;
  atomic_fetch_add_explicit(&near_pages, 2 * FOOTPRINT_SLACK, memory_order_relaxed);
}

/* A free span of p that holds `pages` and ends by page index `limit`:
 * one of the first few of pages' own bin (they may be shorter), else the
 * first of the next non-empty bin that does (all are long enough; its
 * second when the first crosses the limit), else (fixed regions) any of
 * pages' own bin that fits. Every page above the high water is free, so
 * one span at most holds pages on both sides of a limit at the high
 * water. */
static tess_page_t *find_span(tess_partition_t *p, size_t pages, size_t limit) {
  const tess_page_t *base = p->region->pages;
  unsigned b = bin_of(pages);
  unsigned looked = 0;
  tess_page_t *rest = p->bins[b];
  for (; rest != NULL && looked < 16; rest = rest->next, looked++) {
    if (rest->u.span.pages >= pages && (size_t)(rest - base) + pages <= limit) return rest;
  }
  for (unsigned w = (b + 1) >> 6; w < TESS_SPAN_BINS / 64; w++) {
    uint64_t mask = p->nonempty[w];
    if (w == (b + 1) >> 6) mask &= ~(uint64_t)0 << ((b + 1) & 63);
    for (; mask != 0; mask &= mask - 1) {
      tess_page_t *d = p->bins[w * 64 + (unsigned)__builtin_ctzll(mask)];
      if ((size_t)(d - base) + pages <= limit) return d;
      if (d->next != NULL) return d->next; /* d was the one */
    }
  }
  /* nothing longer: in a fixed region, the rest of pages' bin, so that a
   * span that fits is never missed (NULL was answered with one behind 16
   * shorter ones of its bin; a review) */
  if (!p->region->is_fixed) return NULL;
  for (; rest != NULL; rest = rest->next) {
    if (rest->u.span.pages >= pages && (size_t)(rest - base) + pages <= limit) return rest;
  }
  return NULL;
}

/* Pages handed out up to page index `end` of p (p's lock held): the high
 * water rises. Pages above it were never touched: in a fixed region a
 * request takes them only when no open partition has a free span below
 * its high water that fits (region.c), since an enclave that adds pages
 * as they are first used, or the RSS of an emulated heap, pays for every
 * page ever touched, and the free spans below the high water cost
 * nothing more. */
static inline void high_water_raise(tess_partition_t *p, size_t end) {
  if (end > p->high_water) p->high_water = (uint32_t)end;
}

/* Pages from d to the next multiple of align bytes. */
static size_t align_lead(const tess_region_t *r, const tess_page_t *d, size_t align) {
  uintptr_t addr = tessi_page_addr(r, d);
  return (((addr + align - 1) & ~(align - 1)) - addr) >> TESS_PAGE_SHIFT;
}

/* The free span of p at the lowest address that holds `pages` after its
 * lead to `align` bytes (*lead) and ends by page index `limit`, or NULL;
 * p's lock is held. Spans of the bins below pages' bin are all shorter;
 * every span of the bins from it up is looked at: only for big requests,
 * and for an aligned one that no span of the worst-case length serves
 * (with half of a region free in aligned holes of the very size asked,
 * aligned_alloc answered NULL; a review). */
static tess_page_t *lowest_fit(tess_partition_t *p, size_t pages, size_t align, size_t limit,
                               size_t *lead) {
  const tess_page_t *base = p->region->pages;
  tess_page_t *best = NULL;
  for (unsigned b = bin_of(pages); b < TESS_SPAN_BINS; b++) {
    if (!((p->nonempty[b >> 6] >> (b & 63)) & 1)) continue;
    for (tess_page_t *d = p->bins[b]; d != NULL; d = d->next) {
      size_t d_lead = align_lead(p->region, d, align);
      if (d->u.span.pages >= d_lead + pages && (size_t)(d - base) + d_lead + pages <= limit &&
          (best == NULL || d < best)) {
        best = d;
        *lead = d_lead;
      }
    }
  }
  return best;
}

tess_page_t *tessi_span_alloc(tess_partition_t *p, size_t pages, size_t align_pages, uint8_t kind,
                              bool *is_zero, bool wait, bool fresh) {
  size_t need = pages + (align_pages > 1 ? align_pages - 1 : 0);
  if (pages > p->end_page - p->first_page) return NULL;
  /* no span of need's bin or above, and none deferred: full for this
   * size (a peek; when waiting, the lock decides: an aligned request that
   * only a shorter span could hold is left to the waiting round) */
  if (!wait && atomic_load_explicit(&p->bins_used, memory_order_relaxed) <= bin_of(need) &&
      atomic_load_explicit(&p->deferred, memory_order_relaxed) == 0) {
    return NULL;
  }
  if (wait) {
    partition_lock(p);
  } else if (!partition_trylock(p)) {
    return NULL;
  }
  size_t limit = fresh ? SIZE_MAX : p->high_water;
  tess_page_t *head = find_span(p, need, limit);
  /* a span shorter than the worst case may hold the aligned pages */
  size_t lead = 0;
  if (head == NULL && align_pages > 1) {
    head = lowest_fit(p, pages, align_pages << TESS_PAGE_SHIFT, limit, &lead);
  } else if (head != NULL && align_pages > 1) {
    lead = align_lead(p->region, head, align_pages << TESS_PAGE_SHIFT);
  }
  if (head == NULL) {
    tessi_unlock(&p->lock);
    return NULL;
  }
  high_water_raise(p, (size_t)(head - p->region->pages) + lead + pages);
  bin_remove(p, head);
  size_t total = head->u.span.pages;
  uint16_t flags = head->flags;
  uint32_t freed_at = head->u.span.freed_at_ms;
  size_t dirty = head->span_dirty; /* where, unknown: each piece keeps as many */
  size_t trail = total - lead - pages;
  if (total > 1) clear_desc(head + total - 1);
  clear_desc(head);
  /* the pieces left over keep the span's state; their outer neighbours
   * are not free (or they would have been merged), so no coalescing */
  if (lead > 0) {
    write_free_span(head, lead, flags, freed_at, dirty);
    bin_push(p, head);
  }
  if (trail > 0) {
    write_free_span(head + lead + pages, trail, flags, freed_at, dirty);
    bin_push(p, head + lead + pages);
  }
  /* stamped under the lock: coalescing in other threads reads the kind
   * of the pages next to theirs */
  head[lead].kind = kind;
  head[lead].u.span.pages = (uint32_t)pages;
  p->free_pages -= pages;
  footprint_change_t change = partition_count(p);
  tessi_unlock(&p->lock);
  footprint_apply(change, p);
  *is_zero = (flags & TESS_SPAN_ZERO) != 0;
  return head + lead;
}

/* ------------------------------------------------------ across partitions */

/* The free span that ends at the last page of p, or NULL. */
static tess_page_t *free_span_at_end(tess_partition_t *p) {
  tess_page_t *last = end_page(p) - 1;
  uint8_t last_kind = kind_of(last);
  if (last_kind == TESS_PAGE_FREE) return last;
  if (last_kind == TESS_PAGE_FREE_TAIL) return last - last->u.span.pages;
  return NULL;
}

/* The free span that starts at the first page of p, or NULL. */
static tess_page_t *free_span_at_start(tess_partition_t *p) {
  tess_page_t *first = first_page(p);
  return kind_of(first) == TESS_PAGE_FREE ? first : NULL;
}

/* Free spans of [start, start+pages) back into the partitions they lie in
 * (their outer neighbours are not free: no coalescing). */
static void give_back_locked(tess_region_t *r, tess_page_t *start, size_t pages, uint16_t flags,
                             size_t dirty) {
  for (unsigned i = 0; i < r->partition_count && pages > 0; i++) {
    tess_partition_t *p = &r->partitions[i];
    if (start >= end_page(p)) continue;
    size_t here = TESS_MIN(pages, (size_t)(end_page(p) - start));
    write_free_span(start, here, flags, 0, dirty);
    bin_push(p, start);
    p->free_pages += here;
    start += here;
    pages -= here;
  }
}

/* Partitions [first, end) of r locked in order (the only order in which
 * code holds more than one), their deferred stacks emptied. */
static void range_lock(tess_region_t *r, unsigned first, unsigned end) {
  for (unsigned i = first; i < end; i++) partition_lock(&r->partitions[i]);
}

static void range_unlock(tess_region_t *r, unsigned first, unsigned end) {
  for (unsigned i = end; i-- > first;) tessi_unlock(&r->partitions[i].lock);
}

/* The footprint changes of several partitions, summed for one apply. */
static inline void change_add(footprint_change_t *sum, footprint_change_t one) {
  sum->bound += one.bound;
  sum->grew |= one.grew;
}

/* Locks the open partitions of fixed region r (the others hold no span:
 * one opened meanwhile is wholly free, and is left out); returns how many
 * they are. In a region of many GiB, 8 of 1024 partitions may be open. */
static unsigned open_lock_all(tess_region_t *r) {
  unsigned open = tessi_open_partitions(r);
  range_lock(r, 0, open);
  return open;
}

static void open_unlock_all(tess_region_t *r, unsigned open) { range_unlock(r, 0, open); }

/* Takes the free spans of [run, run + run_pages) out of their partitions
 * and gives back the `lead` pages before the `pages` wanted and those after
 * them; returns the spans' merged flags. Every lock of r is held. */
static uint16_t run_take_locked(tess_region_t *r, tess_page_t *run, size_t run_pages, size_t lead,
                                size_t pages) {
  uint16_t flags = TESS_SPAN_ZERO;
  size_t dirty = 0;
  for (tess_page_t *d = run; d < run + run_pages;) {
    tess_partition_t *p = tessi_partition_of(r, d);
    size_t span = d->u.span.pages;
    flags = merge_flags(flags, d->flags);
    dirty += d->span_dirty;
    bin_remove(p, d);
    p->free_pages -= span;
    if (span > 1) clear_desc(d + span - 1);
    clear_desc(d);
    d += span;
  }
  /* the partitions the pages taken lie in: their high water */
  for (tess_page_t *d = run + lead, *end = d + pages; d < end;) {
    tess_partition_t *p = tessi_partition_of(r, d);
    tess_page_t *stop = end < end_page(p) ? end : end_page(p);
    high_water_raise(p, (size_t)(stop - r->pages));
    d = stop;
  }
  size_t trail = run_pages - lead - pages;
  if (lead > 0) give_back_locked(r, run, lead, flags, dirty);
  if (trail > 0) give_back_locked(r, run + lead + pages, trail, flags, dirty);
  return flags;
}

/* After run_take_locked: the footprint takes what the `open` partitions of
 * r locked by open_lock_all handed out, and their locks go. */
static void run_done(tess_region_t *r, unsigned open) {
  footprint_change_t change = {0, false};
  for (unsigned i = 0; i < open; i++) change_add(&change, partition_count(&r->partitions[i]));
  open_unlock_all(r, open);
  footprint_apply(change, NULL);
}

/* A run of free pages in the open partitions of fixed region r, which may
 * cross their boundaries (the tail span of one partition, whole free
 * partitions, the head span of the next): with `inside`, the lowest run or
 * span that fits (for big requests); without, the lowest run that crosses
 * a boundary (the last resort of a request no partition alone can serve).
 * Holds the lock of every open partition, in order; no other code holds
 * two partition locks but tessi_span_free_across and fork's handlers,
 * which take them in the same order. A block across a boundary stays one
 * span; tessi_span_free_across splits it again when it is freed. */
tess_page_t *tessi_span_alloc_across(tess_region_t *r, size_t pages, size_t align_pages,
                                     uint8_t kind, bool *is_zero, bool inside, size_t *tail) {
  size_t align = (size_t)TESS_MAX(align_pages, (size_t)1) << TESS_PAGE_SHIFT;
  unsigned open = open_lock_all(r);
  tess_page_t *run = NULL, *found = NULL; /* run: free pages up to the end of a partition */
  size_t run_pages = 0, lead = 0;
  for (unsigned i = 0; i < open && found == NULL; i++) {
    tess_partition_t *p = &r->partitions[i];
    tess_page_t *at_start = free_span_at_start(p);
    if (run != NULL && at_start != NULL) {
      run_pages += at_start->u.span.pages; /* the run goes on into p */
      lead = align_lead(r, run, align);
      if (run_pages >= lead + pages) {
        found = run;
        break;
      }
      if (at_start->u.span.pages == p->end_page - p->first_page) continue; /* and past it */
    }
    if (inside && (found = lowest_fit(p, pages, align, SIZE_MAX, &lead)) != NULL) {
      run_pages = found->u.span.pages;
      break;
    }
    run = free_span_at_end(p); /* a run may start at p's end */
    run_pages = run != NULL ? (size_t)(end_page(p) - run) : 0;
    if (run != NULL) {
      lead = align_lead(r, run, align);
      if (run_pages >= lead + pages) found = run;
    }
  }
  if (found == NULL) {
    /* (the run, if any, ends where the open partitions end) */
    *tail = run != NULL ? run_pages : 0;
    open_unlock_all(r, open);
    return NULL;
  }
  uint16_t flags = run_take_locked(r, found, run_pages, lead, pages);
  found[lead].kind = kind;
  found[lead].u.span.pages = (uint32_t)pages;
  run_done(r, open);
  *is_zero = (flags & TESS_SPAN_ZERO) != 0;
  return found + lead;
}

bool tessi_span_grow_across(tess_region_t *r, tess_page_t *head, size_t pages, size_t extra,
                            bool *short_at_limit) {
  tess_page_t *right = head + pages;
  unsigned open = open_lock_all(r);
  tess_page_t *limit = &r->pages[r->partitions[open - 1].end_page];
  size_t run_pages = 0;
  /* free spans from right on, on into the next partition while each ends
   * at its partition's end */
  tess_page_t *d = right;
  while (run_pages < extra && d < limit && kind_of(d) == TESS_PAGE_FREE) {
    tess_partition_t *p = tessi_partition_of(r, d);
    run_pages += d->u.span.pages;
    d += d->u.span.pages;
    if (d != end_page(p)) break;
  }
  bool ok = run_pages >= extra;
  *short_at_limit = !ok && d == limit;
  if (ok) {
    run_take_locked(r, right, run_pages, 0, extra);
    run_done(r, open);
  } else {
    open_unlock_all(r, open);
  }
  return ok;
}

bool tessi_span_grow(tess_partition_t *p, tess_page_t *head, size_t pages, size_t extra) {
  tess_page_t *right = head + pages;
  if (right >= end_page(p) || (size_t)(end_page(p) - right) < extra) return false;
  partition_lock(p);
  bool ok = kind_of(right) == TESS_PAGE_FREE && right->u.span.pages >= extra;
  if (ok) {
    bin_remove(p, right);
    size_t right_pages = right->u.span.pages;
    uint16_t flags = right->flags;
    uint32_t freed_at = right->u.span.freed_at_ms;
    size_t dirty = right->span_dirty;
    if (right_pages > 1) clear_desc(right + right_pages - 1);
    clear_desc(right);
    if (right_pages > extra) {
      write_free_span(right + extra, right_pages - extra, flags, freed_at, dirty);
      bin_push(p, right + extra);
    }
    p->free_pages -= extra;
    high_water_raise(p, (size_t)(right + extra - p->region->pages));
  }
  footprint_change_t change = ok ? partition_count(p) : (footprint_change_t){0, false};
  tessi_unlock(&p->lock);
  footprint_apply(change, p);
  return ok;
}

/* Decommit dirty spans of at least decommit_min bytes that have waited
 * decommit_delay_ms by `now`, read under the lock (so no span is newer,
 * and its age is exact up to 2^32 ms). The madvise calls run without the
 * lock; the spans are parked as BUSY meanwhile so nobody allocates or
 * merges them. */
static void purge_locked(tess_partition_t *p, uint32_t now) {
  /* none starts while fork() takes the locks: its spans would be BUSY in
   * the child for good (tessi_span_fork_prepare); still due, retried later */
  if (atomic_load_explicit(&purge_held, memory_order_relaxed)) {
    schedule_purge(p, p->next_purge_ms != 0 ? p->next_purge_ms : now);
    return;
  }
  size_t min_pages = TESS_MAX((size_t)1, tessi_options.decommit_min >> TESS_PAGE_SHIFT);
  uint32_t delay = tessi_options.decommit_delay_ms;
  uint32_t next = 0;
  tess_page_t *busy = NULL;
  for (unsigned b = bin_of(min_pages); b < TESS_SPAN_BINS; b++) {
    if ((p->nonempty[b >> 6] & ((uint64_t)1 << (b & 63))) == 0) continue;
    for (tess_page_t *d = p->bins[b], *after; d != NULL; d = after) {
      after = d->next;
      if (d->span_dirty < min_pages) continue;
      /* by age: a signed compare of now and the due time took a span
       * idle for 25 days for one due 24 days ahead */
      uint32_t due = d->u.span.freed_at_ms + delay;
      if (now - d->u.span.freed_at_ms >= delay) {
        bin_remove(p, d);
        d->kind = TESS_PAGE_BUSY;
        d->next = busy;
        busy = d;
      } else if (next == 0 || (int32_t)(due - next) < 0) {
        next = due ? due : 1;
      }
    }
  }
  p->next_purge_ms = 0;
  if (next != 0) schedule_purge(p, next);
  if (busy == NULL) return;
  p->purging++;
  tessi_unlock(&p->lock);
  for (tess_page_t *d = busy; d != NULL; d = d->next) {
    /* a range the OS would not drop (pages locked by mlock/mlockall:
     * EINVAL) keeps its contents: not ZERO, and counted dirty no more,
     * or every round would try it again */
    bool dropped = tessi_plat_decommit((void *)tessi_page_addr(p->region, d),
                                       (size_t)d->u.span.pages << TESS_PAGE_SHIFT);
    d->flags = dropped ? TESS_SPAN_ZERO : 0; /* the parked span's, ours alone; none dirty */
    if (dropped) {
      atomic_fetch_add_explicit(&decommitted_pages, d->span_dirty, memory_order_relaxed);
    }
  }
  tessi_lock(&p->lock);
  p->purging--;
  now = tessi_plat_now_ms(); /* for merged_time: spans freed meanwhile are newer */
  for (tess_page_t *d = busy, *after; d != NULL; d = after) {
    after = d->next;
    size_t pages = d->u.span.pages;
    uint32_t freed_at = d->u.span.freed_at_ms;
    uint16_t flags = d->flags;
    if (pages > 1) clear_desc(d + pages - 1);
    clear_desc(d);
    coalesce_insert(p, d, pages, flags, freed_at, 0, now);
  }
}

/* Frees a span; p's lock is held. */
static footprint_change_t span_free_locked(tess_partition_t *p, tess_page_t *head, size_t pages) {
  uint32_t now = p->region->is_fixed ? 0 : tessi_plat_now_ms();
  clear_desc(head);
  tess_page_t *merged = coalesce_insert(p, head, pages, 0, now, pages, now);
  p->free_pages += pages;
  footprint_change_t change = partition_count(p);
  if (!p->region->is_fixed) {
    size_t dirty_bytes = (size_t)merged->span_dirty << TESS_PAGE_SHIFT;
    if (p->next_purge_ms == 0 && dirty_bytes >= tessi_options.decommit_min) {
      schedule_purge(p, now + tessi_options.decommit_delay_ms);
    }
    if (p->next_purge_ms != 0 && is_due(now, p->next_purge_ms)) {
      purge_locked(p, now);
    }
  }
  return change;
}

void tessi_span_free(tess_partition_t *p, tess_page_t *head, size_t pages) {
  if (!p->region->is_fixed) {
    partition_lock(p);
  } else if (!partition_trylock(p)) {
    if (deferral_begin(p)) {
      deferred_push(p, head, pages);
      atomic_fetch_sub(&p->pushing, 1);
      return;
    }
    partition_lock(p);
  }
  footprint_change_t change = span_free_locked(p, head, pages);
  tessi_unlock(&p->lock);
  footprint_apply(change, p);
}

/* Its pieces freed one partition at a time, with no lock between them,
 * fork() could copy the span half freed: the child kept the pieces not
 * yet freed for good, as pages of no span (a review: tess_heap_check
 * failed in 10-20 % of the children of a thread freeing a 40-page block
 * across a boundary). The locks are taken in order, as
 * tessi_span_alloc_across and fork()'s handlers take them; such frees
 * wait for the locks rather than defer, and are rare. */
void tessi_span_free_across(tess_partition_t *p, tess_page_t *head, size_t pages) {
  tess_region_t *r = p->region;
  unsigned first = (unsigned)(p - r->partitions);
  unsigned last = (unsigned)(tessi_partition_of(r, head + pages - 1) - r->partitions);
  range_lock(r, first, last + 1);
  footprint_change_t change = {0, false};
  for (unsigned i = first; i <= last; i++) {
    tess_partition_t *q = &r->partitions[i];
    size_t here = TESS_MIN(pages, (size_t)(end_page(q) - head));
    change_add(&change, span_free_locked(q, head, here));
    head += here;
    pages -= here;
  }
  range_unlock(r, first, last + 1);
  footprint_apply(change, NULL);
}

void tessi_purge_scheduled(uint32_t due) {
  if (!is_due(tessi_plat_now_ms(), due)) return;
  /* whoever clears it does the round; partitions reschedule what is left */
  if (!atomic_compare_exchange_strong_explicit(&tessi_purge_due_ms, &due, 0, memory_order_relaxed,
                                               memory_order_relaxed)) {
    return;
  }
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    for (unsigned i = 0; i < r->partition_count; i++) {
      tess_partition_t *p = &r->partitions[i];
      tessi_lock(&p->lock);
      if (p->next_purge_ms != 0) {
        uint32_t now = tessi_plat_now_ms(); /* under the lock: purge_locked */
        if (is_due(now, p->next_purge_ms))
          purge_locked(p, now);
        else
          schedule_purge(p, p->next_purge_ms);
      }
      tessi_unlock(&p->lock);
    }
  }
}
