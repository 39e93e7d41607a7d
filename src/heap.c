/* Heaps: per-thread bins of slabs, pooled.
 *
 * A thread takes a heap from the pool on its first allocation and gives it
 * back when it exits (or calls tess_thread_cleanup); the next thread takes
 * it warm. So the number of heaps is the peak number of threads alive at
 * once, not the number of threads ever created, and thread churn does not
 * grow memory. In fixed mode a heap gives its slabs away when given back
 * (see orphans below), so an idle heap pins nothing.
 * A thread that exits without giving its heap back (it first allocated in
 * glibc's last destructor round) leaves it to a thread that finds the
 * pool empty (gone threads, below).
 * A heap is used by one thread at a time: everything here except the
 * delayed list, the pool, the orphan lists and a heap's holder word runs
 * without locks or atomics. */
#include "internal.h"

#include <string.h>

/* The heap of a thread that has none: every slab it points at is the empty
 * page, so its fast paths fall through to the slow path, which acquires a
 * real heap. */
tess_heap_t tessi_heap_empty = {
    .direct = {[0 ... TESS_DIRECT_SLOTS - 1] = &tessi_page_empty},
    .current = {[0 ... TESS_CLASSES - 1] = &tessi_page_empty},
};

__thread tess_heap_t *tessi_tls_heap = &tessi_heap_empty;

_Atomic(tess_heap_t *) tessi_heaps_made;
tess_heap_stats_t tessi_stats_shared;

/* What a heap may keep now, in freed large spans (and part of it in empty
 * slabs, below): TESS_HEAP_CACHE, but in a fixed region, when more than
 * SPAN_SHARED_BY heaps are in use, that much times SPAN_SHARED_BY shared
 * among them (at least TESS_SPAN_SMALL each, or the whole budget if it
 * is less: regions under 4 MiB). A kept span that is taken
 * again saves a trip to the partition, but what all heaps keep at once is
 * footprint: in OE's allocation sample with 16 calls at once, keeping a
 * full 256 KiB each peaked at 6.3 MiB, 3 heaps' worth shared at 4.4-4.7.
 * Where the calls really run at once, though, trips cost more than their
 * instructions: on 16 cores, the sample's 16 heaps with 3 heaps' worth
 * (12 pages each, a trip every 4th block) queued on the partition locks
 * and the footprint counter and took about 7x snmalloc's time; 6 heaps'
 * worth 1.9x; 8 about snmalloc's, at 4.9-5.0 MiB. A heap therefore shares
 * SPAN_SHARED_WIDE heaps' worth once its trips find the partition busy
 * (tessi_heap_span_trip): on 2 CPUs 0.1-3 % of the sample's trips, from
 * lock holders that lost their CPU, and with all 16 at once 0-7 heaps
 * widen (3 in most runs), late in their calls; on 16 cores every heap
 * does. Set when a heap is taken or given back; a heap over a budget that
 * shrank sheds the excess at its next miss (span_missed). */
#define SPAN_SHARED_BY 3
#define SPAN_SHARED_WIDE 8
/* A heap widens after WIDE_BUSY_MIN trips that found the partition busy,
 * if that is at least one in WIDE_BUSY_SHARE of its trips in the call. */
#define WIDE_BUSY_MIN 4
#define WIDE_BUSY_SHARE 16
/* Empty slabs a heap may keep: a quarter of the span budget, an eighth in
 * a fixed region (whose slabs are a page or two, so a few cover the
 * classes that come and go; OE's sample, every call at once: 0.1 MiB
 * less, at the same speed), of 3 heaps' worth shared: slabs are
 * formatted again cheaply, without the partition, from what the heap
 * keeps of either kind. */
#define EMPTY_SHARED_BY 3
_Atomic(size_t) tessi_heap_cache_now[2];
size_t tessi_span_budget_low = TESS_SPAN_SMALL;
static _Atomic(uint32_t) heaps_in_use;
static _Atomic(size_t) empty_slab_budget;

/* The cache budget `shared_by` heaps' worth, shared by those in use. */
static size_t shared_budget(uint32_t in_use, uint32_t shared_by) {
  size_t budget = tessi_options.heap_cache;
  if (!tessi_primary->is_fixed || in_use <= shared_by) return budget;
  /* (the floor no more than the budget: 16 live heaps kept half of a 1
   * MiB region at 32 KiB each) */
  return TESS_MAX(budget * shared_by / in_use, TESS_MIN(budget, TESS_SPAN_SMALL));
}

static void heaps_in_use_add(int delta) {
  uint32_t in_use =
      atomic_fetch_add_explicit(&heaps_in_use, (uint32_t)delta, memory_order_relaxed) +
      (uint32_t)delta;
  bool is_fixed = tessi_primary->is_fixed;
  atomic_store_explicit(&tessi_heap_cache_now[0], shared_budget(in_use, SPAN_SHARED_BY),
                        memory_order_relaxed);
  atomic_store_explicit(&tessi_heap_cache_now[1], shared_budget(in_use, SPAN_SHARED_WIDE),
                        memory_order_relaxed);
  atomic_store_explicit(&empty_slab_budget,
                        shared_budget(in_use, EMPTY_SHARED_BY) / (is_fixed ? 8 : 4),
                        memory_order_relaxed);
}

/* ------------------------------------------------------------ bin lists */

static void slab_empty(tess_heap_t *h, tess_page_t *d);

/* Borrowing (fixed mode). A class with no slab of its own that has room
 * may take its blocks from the current slab of a larger class (blocks up
 * to TESS_BORROW_WINDOW times its size), the lender, and keeps borrowing
 * it (its current[] and direct[] point there) while the lender's class
 * holds at most BORROW_LENDER_SLABS slabs: a class used by a few blocks at
 * a time shares a slab instead of pinning one of its own (OE's allocation
 * sample spreads a quarter of its requests over 26 classes), while one in
 * heavy use, or next to one, soon has slabs of its own and pays no
 * rounding. */
#define BORROW_LENDER_SLABS 2

/* current[cls] and its direct[] slots point at d: stored one by one, for
 * the at most 8 slots a class has (four classes per doubling up to 1 KiB;
 * GCC's vectorized loop took 20 instructions to get ready, at every
 * change of a current slab). */
static void point_current(tess_heap_t *h, unsigned cls, tess_page_t *d) {
  h->current[cls] = d;
  const tess_class_info_t *info = &tessi_classes[cls];
  tess_page_t **slot = &h->direct[info->first_slot];
  switch (info->slot_count) {
    case 8: slot[7] = d; /* fall through */
    case 7: slot[6] = d; /* fall through */
    case 6: slot[5] = d; /* fall through */
    case 5: slot[4] = d; /* fall through */
    case 4: slot[3] = d; /* fall through */
    case 3: slot[2] = d; /* fall through */
    case 2: slot[1] = d; /* fall through */
    case 1: slot[0] = d; /* fall through */
    default: break;
  }
}

/* Class cls borrows from class lender - 1 (lender = 0: stops borrowing).
 * What cls's fast path counted while it borrowed is moved to the lender's
 * class when it stops (types.h). */
static void borrow_set(tess_heap_t *h, unsigned cls, unsigned lender) {
  unsigned was = h->borrow[cls];
  uint64_t counted = tessi_fast_allocs(&h->stats, cls);
  if (was != 0) {
    uint64_t moved = counted - h->borrow_base[cls];
    TESS_STAT_ADD(h->stats.lent[cls], moved);
    TESS_STAT_ADD(h->stats.allocs[was - 1], moved);
    h->borrowers[was - 1]--;
  }
  if (lender != 0) h->borrowers[lender - 1]++;
  __atomic_store_n(&h->borrow_base[cls], counted, __ATOMIC_RELAXED);
  __atomic_store_n(&h->borrow[cls], (uint8_t)lender, __ATOMIC_RELAXED);
}

static void borrow_end(tess_heap_t *h, unsigned cls) {
  borrow_set(h, cls, 0);
  point_current(h, cls, &tessi_page_empty);
}

/* set_current when cls borrows, or lends its current slab: cls's
 * borrowing ends (its bin has a slab now, or none), and the classes
 * borrowing cls's slab follow it to the new one (or stop borrowing). */
static TESS_NOINLINE void set_current_borrowing(tess_heap_t *h, unsigned cls, tess_page_t *d) {
  tess_page_t *old = h->current[cls];
  bool old_borrowed = h->borrow[cls] != 0;
  if (d == old && !old_borrowed) return;
  if (old_borrowed) borrow_set(h, cls, 0);
  point_current(h, cls, d);
  if (d != &tessi_page_empty) d->state++;
  bool lends = d != &tessi_page_empty && h->slabs_owned[cls] <= BORROW_LENDER_SLABS;
  for (unsigned c = tessi_classes[cls].borrows_from_low; c < cls && h->borrowers[cls] != 0; c++) {
    if (h->borrow[c] != cls + 1) continue;
    if (lends)
      point_current(h, c, d);
    else
      borrow_end(h, c);
  }
  if (!old_borrowed && old != &tessi_page_empty && --old->state == 0) slab_empty(h, old);
}

/* The bin's first slab becomes current (direct[] and current[] point at
 * it) and takes the state bias that keeps free() off its slow path; the
 * slab it replaces gives its bias back, and may turn out empty. Classes
 * that borrow cls's current slab follow it to the new one (or stop
 * borrowing), before the old one can be released: apart, since few
 * classes borrow (none outside fixed mode), and this runs at every
 * change of a current slab (in workload B, looking at the classes that
 * might borrow each time was a tenth of the slab slow path). */
static void set_current(tess_heap_t *h, unsigned cls) {
  tess_page_t *d = h->bins[cls].first ? h->bins[cls].first : &tessi_page_empty;
  if (TESS_UNLIKELY(h->borrow[cls] != 0 || h->borrowers[cls] != 0)) {
    set_current_borrowing(h, cls, d);
    return;
  }
  tess_page_t *old = h->current[cls];
  if (d == old) return;
  point_current(h, cls, d);
  if (d != &tessi_page_empty) d->state++;
  if (old != &tessi_page_empty && --old->state == 0) slab_empty(h, old);
}

static bool in_bin(tess_heap_t *h, const tess_page_t *d) {
  if (d->state & TESS_STATE_DETACHED) return false; /* in the full list */
  return d->prev != NULL || h->bins[d->size_class].first == d;
}

static void bin_unlink(tess_heap_t *h, tess_page_t *d) {
  tessi_list_unlink(&h->bins[d->size_class], d);
}

static void bin_remove(tess_heap_t *h, tess_page_t *d) {
  bool was_first = h->bins[d->size_class].first == d;
  bin_unlink(h, d);
  if (was_first) set_current(h, d->size_class);
}

static void bin_push_front(tess_heap_t *h, tess_page_t *d) {
  tessi_list_push(&h->bins[d->size_class], d);
  set_current(h, d->size_class);
}

static void bin_push_back(tess_heap_t *h, tess_page_t *d) {
  tess_bin_t *bin = &h->bins[d->size_class];
  tessi_list_append(bin, d);
  if (bin->first == d) set_current(h, d->size_class);
}

/* -------------------------------------------------------- slab lifecycle */

static size_t slab_pages(const tess_page_t *d) { return tessi_classes[d->size_class].slab_pages; }

/* Back to the partition. Slab pages carry head offsets, and the head an
 * owner: a free span's descriptors must be zero. */
static void slab_release(tess_page_t *d) {
  size_t pages = slab_pages(d);
  for (size_t i = 1; i < pages; i++) d[i].head_delta = 0;
  atomic_store_explicit(&d->owner, NULL, memory_order_relaxed);
  tessi_pages_free(d, pages);
}

/* --------------------------------------------------------- span cache */

void tessi_heap_span_drain(tess_heap_t *h) {
  for (size_t pages = 1; pages <= TESS_SPAN_CACHE_PAGES; pages++) {
    tess_page_t *d;
    while ((d = tessi_heap_span_pop(h, pages)) != NULL) tessi_pages_free(d, pages);
  }
}

/* The score fell low, or the shared budget shrank: spans beyond the
 * budget go back. */
void tessi_heap_span_shrink(tess_heap_t *h) {
  size_t budget = tessi_heap_span_budget(h);
  for (size_t pages = TESS_SPAN_CACHE_PAGES; pages > 0 && h->span_pages << TESS_PAGE_SHIFT > budget;
       pages--) {
    tess_page_t *d;
    while (h->span_pages << TESS_PAGE_SHIFT > budget &&
           (d = tessi_heap_span_pop(h, pages)) != NULL) {
      tessi_pages_free(d, pages);
    }
  }
}

void tessi_heap_span_trip(tess_heap_t *h) {
  TESS_STAT_ADD(h->stats.span_trips, 1);
  /* (outside a fixed region, both budgets are the same: nothing to learn) */
  if (h->span_wide || !tessi_primary->is_fixed) return;
  h->span_trips++;
  TESS_STAT_ADD(h->stats.span_trips_narrow, 1);
  if (!tessi_pages_busy(h->home)) return;
  TESS_STAT_ADD(h->stats.span_trips_busy, 1);
  if (++h->span_busy >= WIDE_BUSY_MIN && h->span_busy * WIDE_BUSY_SHARE >= h->span_trips) {
    h->span_wide = true;
    TESS_STAT_ADD(h->stats.span_widenings, 1);
  }
}

/* A take found nothing: the score falls, and a heap over a budget that
 * shrank as other heaps were taken sheds the rest.
 * Misses before the heap has kept a span in this call do not count: its
 * cache is empty, so they say nothing about whether it works. Counted,
 * the first requests of a call (all misses) took one or two of OE's 16
 * calls at once below the mark, where 8 KiB finds too little to raise
 * the score again: they went to their partition for nearly every large
 * block for the rest of the call, 144,000 times in a run. Not counted:
 * 12 % fewer instructions with all 16 calls at once and 13 % less time;
 * workload B the same. */
static void span_missed(tess_heap_t *h) {
  if (h == &tessi_heap_empty) return; /* shared by every thread without a heap */
  if (h->span_pages << TESS_PAGE_SHIFT > tessi_heap_span_budget(h)) {
    /* the budget shrank as other heaps were taken: shed now, or a heap
     * that ran alone at first keeps its larger cache for the rest of its
     * call (here at a miss, so that a keep costs nothing more) */
    tessi_heap_span_shrink(h);
  }
  if (h->span_unfed) return;
  if (h->span_score > 0 && --h->span_score == TESS_SPAN_SCORE_LOW - 1) tessi_heap_span_shrink(h);
}

TESS_NOINLINE tess_page_t *tessi_heap_span_take_longer(tess_heap_t *h, size_t pages) {
  if (h->span_score >= TESS_SPAN_SCORE_LOW) {
    size_t slack = h->span_wide ? TESS_SPAN_SLACK_WIDE : TESS_SPAN_SLACK;
    size_t last = TESS_MIN(pages + slack, (size_t)TESS_SPAN_CACHE_PAGES);
    for (size_t longer = pages + 1; longer <= last; longer++) {
      tess_page_t *d = tessi_heap_span_take_exact(h, longer);
      if (d != NULL) return d;
    }
  }
  span_missed(h);
  return NULL;
}

/* Every empty slab and free span h keeps. */
static void empty_cache_drain(tess_heap_t *h) {
  while (h->empty_slabs != NULL) {
    tess_page_t *d = h->empty_slabs;
    h->empty_slabs = d->next;
    slab_release(d);
  }
  h->empty_slab_pages = 0;
  tessi_heap_span_drain(h);
}

/* A slab of h with no block out that is not current (the current slab
 * holds a bias). Cache it for reuse by any class of the same length, up to
 * the per-heap budget, else give it back at once. */
static void slab_empty(tess_heap_t *h, tess_page_t *d) {
  if (in_bin(h, d)) bin_unlink(h, d);
  h->slabs_owned[d->size_class]--;
  TESS_STAT_ADD(h->stats.slabs_done[d->size_class], 1);
  size_t pages = slab_pages(d);
  if ((h->empty_slab_pages + pages) << TESS_PAGE_SHIFT <=
      atomic_load_explicit(&empty_slab_budget, memory_order_relaxed)) {
    /* no block and no class until formatted again (check.c relies on it) */
    d->free = d->local_free = NULL;
    __atomic_store_n(&d->capacity, 0, __ATOMIC_RELAXED); /* any thread's free reads it */
    d->next = h->empty_slabs;
    h->empty_slabs = d;
    h->empty_slab_pages += pages;
  } else {
    slab_release(d);
  }
}

static tess_page_t *slab_new(tess_heap_t *h, unsigned cls) {
  size_t pages = tessi_classes[cls].slab_pages;
  for (tess_page_t **link = &h->empty_slabs; *link != NULL; link = &(*link)->next) {
    tess_page_t *d = *link;
    if (slab_pages(d) == pages) {
      *link = d->next;
      h->empty_slab_pages -= pages;
      tessi_slab_format(d, cls, h);
      h->slabs_owned[cls]++;
      return d;
    }
  }
  bool zero;
  tess_partition_t *from;
  tess_page_t *d = tessi_pages_alloc(h->home, pages, 1, TESS_PAGE_SLAB, &zero, &from);
  if (d == NULL && h->empty_slabs != NULL) {
    /* short of memory: cached slabs of other lengths may merge into one */
    empty_cache_drain(h);
    d = tessi_pages_alloc(h->home, pages, 1, TESS_PAGE_SLAB, &zero, &from);
  }
  if (d == NULL) return NULL;
  tessi_slab_format(d, cls, h);
  h->slabs_owned[cls]++;
  return d;
}

/* ----------------------------------------------------------------- frees */

/* (sequentially consistent: the free then reads h->pooled, the pool's
 * push writes it and then reads the list: one sees the other's) */
static void heap_delayed_push(tess_heap_t *h, tess_block_t *b) {
  tess_block_t *old = atomic_load_explicit(&h->delayed, memory_order_relaxed);
  do {
    if (TESS_UNLIKELY(old == b)) tessi_report_invalid("free", b, "freed twice");
    b->next = old;
  } while (!atomic_compare_exchange_weak_explicit(&h->delayed, &old, b, memory_order_seq_cst,
                                                  memory_order_relaxed));
}

static bool orphan_free(tess_page_t *d, tess_block_t *b, tess_heap_t *owner);
static void orphan_note_late(tess_page_t *d, tess_heap_t *mark);
static void idle_collect(tess_heap_t *h);

void tessi_heap_free_remote(tess_page_t *d, tess_block_t *b) {
  tess_heap_t *mark = atomic_load_explicit(&d->owner, memory_order_relaxed);
  if (tessi_is_orphan_owner(mark) && orphan_free(d, b, mark)) return;
  /* the slab's state counts the block out until it is taken off a list */
  TESS_STAT_MINE(pending_in[d->size_class], 1);
  uintptr_t old = atomic_load_explicit(&d->remote, memory_order_relaxed);
  for (;;) {
    if (TESS_UNLIKELY(old & TESS_REMOTE_NOTIFY)) {
      /* first free into a detached slab: take the flag and hand the block
       * to the owner, which re-attaches the slab when it frees it. Until
       * then the block keeps the slab alive (its state counts it). The
       * owner is read before the flag is taken: an owner that gives the
       * slab up (orphans it) clears the flag first, so if our exchange
       * wins, the flag was set by a heap that owned the slab after our
       * read of `old`. That need not be the owner we read: between the
       * two loads the slab may have been orphaned (owner: a list's mark),
       * then taken by another heap, filled and detached again, so that
       * the exchange still finds NOTIFY. A mark is no heap: `old` is
       * stale (an orphan never has the flag), so it is read again
       * (acquire: after a mark, the orphaning's exchange of `remote` is
       * seen). A heap read so is not the one whose flag was taken: the
       * block went to the slab by way of it, but the slab's new owner,
       * its flag gone, never learned that the slab had room, and kept it
       * full until its call ended (races/notify_owner.sh). So the owner
       * is read again after the exchange, which sees the flag setter's
       * owner (or a later one: a mark, when it orphaned the slab since,
       * counting our block, which then goes on its stack, noted). */
      tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_acquire);
      if (TESS_UNLIKELY(owner == NULL || tessi_is_orphan_owner(owner))) {
        old = atomic_load_explicit(&d->remote, memory_order_relaxed);
        continue;
      }
      if (atomic_compare_exchange_weak_explicit(&d->remote, &old, 0, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        tess_heap_t *now = atomic_load_explicit(&d->owner, memory_order_acquire);
        if (TESS_UNLIKELY(now != owner)) {
          if (tessi_is_orphan_owner(now)) { /* on its stack, noted (counted pending) */
            old = atomic_load_explicit(&d->remote, memory_order_relaxed);
            continue;
          }
          owner = now;
        }
        heap_delayed_push(owner, b);
        /* an owner that has trimmed and gone idle meanwhile (fixed mode)
         * would keep the block, and its slab (an orphan now) the pages */
        if (TESS_UNLIKELY(atomic_load_explicit(&owner->pooled, memory_order_seq_cst))) {
          idle_collect(owner);
        }
        return;
      }
    } else {
      /* the block on top freed again: a double free, which would link the
       * block to itself (and the owner's collection loop for good) */
      if (TESS_UNLIKELY((tess_block_t *)old == b)) tessi_report_invalid("free", b, "freed twice");
      b->next = (tess_block_t *)old;
      if (atomic_compare_exchange_weak_explicit(&d->remote, &old, (uintptr_t)b,
                                                memory_order_seq_cst, memory_order_relaxed)) {
        /* the owner again: an orphan now (its list was busy, or a heap
         * orphaned the slab since we read it) collects the block only if
         * told (orphan_note_late) */
        tess_heap_t *now = atomic_load_explicit(&d->owner, memory_order_seq_cst);
        if (TESS_UNLIKELY(tessi_is_orphan_owner(now))) orphan_note_late(d, now);
        return;
      }
    }
  }
}

static void heap_give_away(tess_heap_t *h);
/* Frees into full slabs, with no malloc slow path between them, after
 * which a fixed heap gives its slabs away (8 and 16 did no better in
 * workload B; fewer would start it by chance in a call still allocating) */
#define GIVE_AWAY_AFTER 32

void tessi_heap_local_free_done(tess_heap_t *h, tess_page_t *d) {
  if (d->state == -1 || (d->state == 0 && h->current[d->size_class] == d)) {
    /* nothing was out (the current slab's bias is not a block): undo the
     * push, so the heap stays sound, and report */
    tess_block_t *b = d->local_free;
    d->local_free = b->next;
    d->state = 0;
    tessi_report_invalid("free", b, "double free");
  }
  if (d->state & TESS_STATE_DETACHED) {
    tessi_list_unlink(&h->full, d);
    d->state &= TESS_STATE_COUNT;
    /* the frees that came in after the one that took NOTIFY sit on its
     * remote stack, which only a slow path of its class would look at:
     * a thread that handed a class's blocks to another to free, and then
     * allocated other sizes, kept every slab of each class it had used
     * (OS mode, a review: 1.25 GiB for 64 MiB ever live) */
    tessi_slab_collect_remote(d);
    bin_push_back(h, d); /* behind the current slab, which stays current */
    if (tessi_primary->is_fixed && ++h->reattached == GIVE_AWAY_AFTER) {
      if (d->state == 0) slab_empty(h, d);
      heap_give_away(h);
      return;
    }
  }
  if (d->state == 0) slab_empty(h, d);
}

void tessi_heap_free_block(tess_heap_t *h, tess_page_t *d, tess_block_t *b) {
  if (atomic_load_explicit(&d->owner, memory_order_relaxed) == h) {
    b->next = d->local_free;
    d->local_free = b;
    if (--d->state <= 0) tessi_heap_local_free_done(h, d);
  } else {
    tessi_heap_free_remote(d, b);
  }
}

static tess_page_t *slab_of_block(tess_block_t *b) {
  tess_region_t *r = tessi_region_of((uintptr_t)b);
  tess_page_t *d = &r->pages[((uintptr_t)b - r->base) >> TESS_PAGE_SHIFT];
  return tessi_page_head(d);
}

/* Blocks that other threads freed into our detached slabs. */
static void process_delayed(tess_heap_t *h) {
  tess_block_t *b = atomic_exchange_explicit(&h->delayed, NULL, memory_order_acquire);
  while (b != NULL) {
    tess_block_t *next = b->next;
    tess_page_t *d = slab_of_block(b);
    TESS_STAT_ADD(h->stats.pending_out[d->size_class], 1);
    tessi_heap_free_block(h, d, b);
    b = next;
  }
}

/* ---------------------------------------------------------- orphans */

/* Fixed mode: slabs with live blocks that no heap owns. A heap whose
 * thread is done (the end of an enclave call) leaves its slabs here, and
 * any heap short of a slab of that class takes one back before it takes
 * fresh pages. So the free blocks of a partial slab serve every thread,
 * rather than wait for one heap to run again.
 *
 * Orphans are kept in buckets by how full they are. The sparsest (under
 * a quarter full) are taken last, left alone to empty as their blocks die;
 * of the others, the one with the most room is taken first, so that a
 * take yields more blocks before the next slow path (orphan_pick_locked).
 * A free into an orphan is done at once, under its list's lock (there
 * is no owner to collect it), so its block is free for the next taker and
 * an orphan that empties goes back to its partition at once. An orphan
 * never has NOTIFY set, as only an owner detaches a slab. */
#define ORPHAN_BUCKETS 4
/* Each class's orphans are split over a few lists; a heap files and takes
 * orphans from its own list first, moving on when one is busy, so threads
 * ending or starting calls together do not queue on one lock. */
#define ORPHAN_SHARDS 8
#define ORPHAN_LATE_SLOTS 4

/* A line or two of its own, and each class's mask below a line of its
 * own: with 20 calls at once on 16 CPUs (workload B, pooled), the loads
 * of the masks and counts that every slab slow path makes were 5 % of the
 * samples while 44 masks shared one line and neighbouring lists shared
 * theirs, each write by one class sending the line away from every core.
 * With this and the partitions' ranges apart (types.h), B pooled ran 6 %
 * more calls per second there (medians of 4 interleaved runs;
 * docs/results/enclave-16cpu/experiments/2026-11-26c). */
typedef struct orphan_list_s {
  _Alignas(64) tess_lock_t lock;
  _Atomic(uint32_t) with_room;       /* slabs in the buckets: a lock-free peek */
  _Atomic(uint32_t) filed;           /* every slab filed, full ones too: the same */
  tess_bin_t bucket[ORPHAN_BUCKETS]; /* with room; [ORPHAN_BUCKETS - 1]: fullest */
  tess_bin_t full;                   /* no free block */
  /* late frees (orphan_note_late): orphans to collect, more than the slots
   * hold (collect every one), and whether any is noted */
  _Atomic(tess_page_t *) late[ORPHAN_LATE_SLOTS];
  _Atomic(bool) late_more;
  _Atomic(bool) late_noted;
} orphan_list_t;
static orphan_list_t orphans[TESS_CLASSES][ORPHAN_SHARDS];
/* the same lists, one after another (fork, the reclaim) */
static orphan_list_t *const all_orphan_lists = &orphans[0][0];
/* Bit k of orphans_filed[cls]: orphans[cls][k] has a slab filed. Written
 * when a list's count goes from or to 0 (under its lock), so a heap that
 * takes a slab while there are no orphans of its class (a call in full
 * swing) learns it with one load. */
typedef struct orphan_mask_s {
  _Alignas(64) _Atomic(uint8_t) bits;
} orphan_mask_t;
static orphan_mask_t orphans_filed[TESS_CLASSES];
_Static_assert(ORPHAN_SHARDS <= 8, "a bit per shard");

/* An orphan's owner is the mark of the list it is filed in: a free into
 * it finds the list without a search (and without reading the slab's
 * class, which a late free must not: heap.c, orphan_note_late), and the
 * filer may choose any list that is not busy. */
char tessi_orphan_marks[TESS_ORPHAN_LISTS];
_Static_assert(ORPHAN_SHARDS == TESS_ORPHAN_SHARDS, "TESS_ORPHAN_LISTS counts the lists");

static inline tess_heap_t *orphan_mark(const orphan_list_t *list) {
  return (tess_heap_t *)(void *)&tessi_orphan_marks[list - all_orphan_lists];
}

static inline orphan_list_t *orphan_list_of(const tess_heap_t *mark) {
  return all_orphan_lists + ((const char *)(const void *)mark - tessi_orphan_marks);
}

/* The first list of class cls, from h's own on, that is not busy, locked
 * (h's own, waited for, when all are busy). */
static orphan_list_t *orphan_list_lock(tess_heap_t *h, unsigned cls) {
  for (unsigned k = 0; k < ORPHAN_SHARDS; k++) {
    orphan_list_t *list = &orphans[cls][(h->shard + k) % ORPHAN_SHARDS];
    if (tessi_trylock(&list->lock)) return list;
  }
  orphan_list_t *own = &orphans[cls][h->shard % ORPHAN_SHARDS];
  tessi_lock(&own->lock);
  return own;
}

/* The bin an orphan is in: the one its state gives (every change of an
 * orphan's state, under the lock, refiles it). */
static tess_bin_t *orphan_bin_locked(orphan_list_t *list, const tess_page_t *d) {
  uint32_t blocks = tessi_classes[d->size_class].slab_blocks;
  uint32_t out = (uint32_t)d->state;
  if (out >= blocks) return &list->full;
  /* out * ORPHAN_BUCKETS / blocks without a division: a free into an
   * orphan asks twice */
  _Static_assert(ORPHAN_BUCKETS == 4, "three bounds");
  uint32_t q = out * ORPHAN_BUCKETS;
  return &list->bucket[(q >= blocks) + (q >= 2 * blocks) + (q >= 3 * blocks)];
}

/* list = orphans[cls][k]: which bit of orphans_filed it is */
static inline void orphans_filed_mark(orphan_list_t *list, bool filed) {
  size_t index = (size_t)(list - &orphans[0][0]);
  _Atomic(uint8_t) *mask = &orphans_filed[index / ORPHAN_SHARDS].bits;
  uint8_t bit = (uint8_t)(1u << (index % ORPHAN_SHARDS));
  if (filed)
    atomic_fetch_or_explicit(mask, bit, memory_order_relaxed);
  else
    atomic_fetch_and_explicit(mask, (uint8_t)~bit, memory_order_relaxed);
}

static void orphan_file_locked(orphan_list_t *list, tess_page_t *d) {
  tess_bin_t *bin = orphan_bin_locked(list, d);
  tessi_list_push(bin, d);
  if (list->filed == 0) orphans_filed_mark(list, true);
  atomic_store_explicit(&list->filed, list->filed + 1, memory_order_relaxed);
  if (bin != &list->full) {
    atomic_store_explicit(&list->with_room, list->with_room + 1, memory_order_relaxed);
  }
}

/* Out of `bin`, the one its state gave when it was filed. */
static void orphan_unfile_from(orphan_list_t *list, tess_page_t *d, tess_bin_t *bin) {
  tessi_list_unlink(bin, d);
  atomic_store_explicit(&list->filed, list->filed - 1, memory_order_relaxed);
  if (list->filed == 0) orphans_filed_mark(list, false);
  if (bin != &list->full) {
    atomic_store_explicit(&list->with_room, list->with_room - 1, memory_order_relaxed);
  }
}

static void orphan_unfile_locked(orphan_list_t *list, tess_page_t *d) {
  orphan_unfile_from(list, d, orphan_bin_locked(list, d));
}

/* An orphan that emptied leaves its list: no longer marked, under the
 * list's lock, so that whoever finds a list's mark on a slab under that
 * lock finds the slab filed there (orphans_collect_noted_locked). */
static inline void orphan_unmark_locked(tess_page_t *d) {
  atomic_store_explicit(&d->owner, NULL, memory_order_relaxed);
}

/* An emptied orphan, out of its list, on the chain *released (for
 * orphans_release). */
static inline void orphan_retire_locked(tess_page_t *d, tess_page_t **released) {
  orphan_unmark_locked(d);
  d->next = *released;
  *released = d;
}

/* Collects the frees on orphan d's remote stack: d is refiled, or, when
 * that emptied it, retired. */
static void orphan_collect_locked(orphan_list_t *list, tess_page_t *d, tess_page_t **released) {
  orphan_unfile_locked(list, d);
  tessi_slab_collect_remote(d);
  if (d->state == 0) {
    orphan_retire_locked(d, released);
  } else {
    orphan_file_locked(list, d);
  }
}

/* Returns a chain of emptied orphans to their partitions (no lock held). */
static TESS_NOINLINE void orphans_release_chain(tess_page_t *chain) {
  while (chain != NULL) {
    tess_page_t *next = chain->next;
    TESS_STAT_MINE(slabs_done[chain->size_class], 1);
    slab_release(chain);
    chain = next;
  }
}

/* The look inline: a free into an orphan seldom empties it. */
static inline void orphans_release(tess_page_t *chain) {
  if (chain != NULL) orphans_release_chain(chain);
}

/* Late frees. A free leaves its block on an orphan's remote stack when
 * the orphan's list is busy, or when it read a heap as the slab's owner
 * just before the heap orphaned it. Left there, an orphan whose last
 * blocks were freed so looked in use until a heap took it, and the
 * sparsest are taken last: in test_fixed's orphan-race, nearly every
 * round ended with a page held so. So that free notes the orphan on its
 * list, and whoever holds the list collects what is noted before letting
 * it go (orphan_list_unlock); the free takes the lock itself if it is,
 * or soon becomes, free (orphan_note_late). */

/* The noted orphans of a locked list: each still filed in it is
 * collected (and on *released if that emptied it). */
static void orphans_collect_noted_locked(orphan_list_t *list, tess_page_t **released) {
  tess_heap_t *mark = orphan_mark(list);
  for (unsigned k = 0; k < ORPHAN_LATE_SLOTS; k++) {
    tess_page_t *d = atomic_exchange_explicit(&list->late[k], NULL, memory_order_seq_cst);
    /* filed here: its owner is the mark only while it is (and one noted
     * twice and emptied at the first is unmarked) */
    if (d != NULL && atomic_load_explicit(&d->owner, memory_order_relaxed) == mark) {
      orphan_collect_locked(list, d, released);
    }
  }
  if (!atomic_exchange_explicit(&list->late_more, false, memory_order_seq_cst)) return;
  for (unsigned b = 0; b <= ORPHAN_BUCKETS; b++) {
    tess_bin_t *bucket = b < ORPHAN_BUCKETS ? &list->bucket[b] : &list->full;
    for (tess_page_t *d = bucket->first, *next; d != NULL; d = next) {
      next = d->next;
      if (atomic_load_explicit(&d->remote, memory_order_relaxed) != 0) {
        orphan_collect_locked(list, d, released);
      }
    }
  }
}

/* orphan_list_unlock when a note was seen: collects until no note is left
 * (a collection may walk the whole list, and a free that notes meanwhile
 * finds the lock held), so that its last look comes just before the
 * unlock. */
static TESS_NOINLINE void orphan_list_unlock_noted(orphan_list_t *list) {
  tess_page_t *released = NULL;
  while (atomic_exchange_explicit(&list->late_noted, false, memory_order_acq_rel)) {
    orphans_collect_noted_locked(list, &released);
  }
  tessi_unlock(&list->lock);
  orphans_release(released);
}

/* Unlocks a list, having collected the late frees noted on it. */
static inline void orphan_list_unlock(orphan_list_t *list) {
  if (TESS_UNLIKELY(atomic_load_explicit(&list->late_noted, memory_order_acquire))) {
    orphan_list_unlock_noted(list);
    return;
  }
  tessi_unlock(&list->lock);
}

/* Spins of a late free on a busy list (orphan_note_late). */
#define ORPHAN_NOTE_SPINS 64

/* A free left a block on the remote stack of d, then found d an orphan
 * filed under `mark`: notes d on that list for its holder, or, if the
 * list is free, collects it now. Nothing else of d is read: it may have
 * emptied and been made anew since (the holder then finds it filed
 * elsewhere, or not at all, and passes).
 *
 * A holder that looked for notes just before ours unlocks a few
 * instructions later (it looks again after each collection), so the free
 * waits a little for the lock, takes it and collects; it gives up after
 * ORPHAN_NOTE_SPINS to a holder that has not looked yet (it will), or as
 * soon as the note is taken. Only a holder that loses its CPU between its
 * last look and its unlock longer than that leaves the note to the
 * list's next holder, or to the reclaim before a NULL
 * (tessi_orphans_collect_noted): under ThreadSanitizer, about 1 round in
 * 260,000 of test_fixed's orphan-race. (Looking again after every
 * unlock, with a full barrier, closes that too, but cost 2 % of workload
 * B's calls per second: B locks lists 2 million times a second, and
 * notes about 20,000.) */
static TESS_NOINLINE void orphan_note_late(tess_page_t *d, tess_heap_t *mark) {
  orphan_list_t *list = orphan_list_of(mark);
  unsigned k = 0;
  for (; k < ORPHAN_LATE_SLOTS; k++) {
    tess_page_t *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&list->late[k], &none, d, memory_order_seq_cst,
                                                memory_order_relaxed)) {
      break;
    }
  }
  if (k == ORPHAN_LATE_SLOTS) atomic_store_explicit(&list->late_more, true, memory_order_seq_cst);
  atomic_exchange_explicit(&list->late_noted, true, memory_order_seq_cst);
  for (unsigned spin = 0; spin < ORPHAN_NOTE_SPINS; spin++) {
    if (!atomic_load_explicit(&list->late_noted, memory_order_relaxed)) return; /* taken */
    if (tessi_trylock(&list->lock)) {
      orphan_list_unlock(list);
      return;
    }
    tessi_cpu_relax();
  }
}

/* Files the chain (through next) of orphans of one class, all collected,
 * without bias, with some block out, in a list that is not busy. The owner
 * becomes the list's mark under its lock, so a thread that finds the mark
 * finds the slab filed. */
static void orphans_push(tess_heap_t *h, tess_page_t *chain) {
  orphan_list_t *list = orphan_list_lock(h, chain->size_class);
  tess_page_t *released = NULL;
  while (chain != NULL) {
    tess_page_t *next = chain->next;
    h->slabs_owned[chain->size_class]--;
    atomic_store_explicit(&chain->owner, orphan_mark(list), memory_order_seq_cst);
    orphan_file_locked(list, chain);
    /* a free that read h as the owner pushes, then reads the owner again
     * (tessi_heap_free_remote): we mark, then read the stack (seq_cst),
     * so one of the two sees the other's */
    if (atomic_load_explicit(&chain->remote, memory_order_seq_cst) != 0) {
      orphan_collect_locked(list, chain, &released);
    }
    chain = next;
  }
  orphan_list_unlock(list);
  orphans_release(released);
}

/* A free by any thread into an orphan (owner: a list's mark): done at once
 * under the list's lock, if it is free. False when it is busy, or a heap
 * took the slab meanwhile: the caller pushes the block on the remote stack
 * then, and notes it for the list's holder if it is still an orphan. */
static bool orphan_free(tess_page_t *d, tess_block_t *b, tess_heap_t *owner) {
  orphan_list_t *list = orphan_list_of(owner);
  if (!tessi_trylock(&list->lock)) return false;
  if (atomic_load_explicit(&d->owner, memory_order_relaxed) != owner) {
    orphan_list_unlock(list);
    return false;
  }
  /* it goes to the front of its bucket (takers take the first), maybe
   * another one (a bucket spans a quarter of the slab); the list's counts
   * change only when it empties or leaves the full list */
  tess_bin_t *was = orphan_bin_locked(list, d);
  tessi_slab_collect_remote(d); /* frees that raced with the orphaning */
  if (d->state <= 0) {
    orphan_unfile_from(list, d, was);
    orphan_file_locked(list, d);
    orphan_list_unlock(list);
    tessi_report_invalid("free", b, "double free");
  }
  b->next = d->local_free;
  d->local_free = b;
  tess_page_t *released = NULL;
  if (--d->state == 0) {
    orphan_unfile_from(list, d, was);
    orphan_retire_locked(d, &released);
  } else {
    tess_bin_t *now = orphan_bin_locked(list, d); /* (never the full list) */
    if (now != was || was->first != d) {
      tessi_list_unlink(was, d);
      tessi_list_push(now, d);
      if (was == &list->full) {
        atomic_store_explicit(&list->with_room, list->with_room + 1, memory_order_relaxed);
      }
    }
  }
  orphan_list_unlock(list);
  orphans_release(released);
  return true;
}

tess_lock_t *tessi_orphan_list_lock(unsigned cls, unsigned shard) {
  return &orphans[cls][shard % ORPHAN_SHARDS].lock;
}

void tessi_orphan_list_unlock(unsigned cls, unsigned shard) {
  orphan_list_unlock(&orphans[cls][shard % ORPHAN_SHARDS]);
}

/* Takes an orphan with room of a locked list, or NULL: from the bucket of
 * those a quarter to half full, then fuller ones, the sparsest last. Taken
 * fullest first (as before), an orphan yielded few blocks: in workload B
 * with pooled hosts, on 2 CPUs, this order gave 11.7 % more calls per
 * second (worker calls 5.5 %) at the same mean footprint; with a new host
 * thread per call 7 % more and +0.011 of footprint per live byte over
 * time (its peaks no higher). The sparsest first gained as much speed but
 * cost that variant 0.03 (docs/results/README.md, thirteenth session). */
static tess_page_t *orphan_pick_locked(orphan_list_t *list) {
  _Static_assert(ORPHAN_BUCKETS == 4, "the order names every bucket");
  static const uint8_t order[ORPHAN_BUCKETS] = {1, 2, 3, 0};
  for (unsigned k = 0; k < ORPHAN_BUCKETS; k++) {
    tess_page_t *d = list->bucket[order[k]].first;
    if (d != NULL) {
      orphan_unfile_locked(list, d);
      return d;
    }
  }
  return NULL;
}

/* An orphan of class cls with room (orphan_pick_locked), from h's shard
 * first, now h's; or NULL. A busy shard is passed over and tried once
 * more only if no other one had any, never waited for (unless `wait`,
 * when the region is out of memory): the fixed platform can only spin,
 * and a spin on a lock whose holder lost its CPU costs more than the
 * fresh slab the caller takes instead. */
static TESS_NOINLINE tess_page_t *orphan_take_filed(tess_heap_t *h, unsigned cls, bool wait) {
  orphan_list_t *shards = orphans[cls];
  tess_page_t *d = NULL;
  unsigned busy = 0; /* bit k: shard h->shard + k was locked when tried */
  /* a shard is locked when it has an orphan with room: a heap that keeps
   * making slabs while there are no orphans (a call in full swing) pays a
   * few loads here */
  for (unsigned k = 0; k < ORPHAN_SHARDS && d == NULL; k++) {
    orphan_list_t *list = &shards[(h->shard + k) % ORPHAN_SHARDS];
    if (atomic_load_explicit(&list->with_room, memory_order_relaxed) == 0) continue;
    if (!tessi_trylock(&list->lock)) {
      busy |= 1u << k;
      continue;
    }
    d = orphan_pick_locked(list);
    if (d != NULL) atomic_store_explicit(&d->owner, h, memory_order_relaxed);
    orphan_list_unlock(list);
  }
  /* the busy ones once more, waited for only when out of memory */
  for (; busy != 0 && d == NULL; busy &= busy - 1) {
    orphan_list_t *list = &shards[(h->shard + (unsigned)__builtin_ctz(busy)) % ORPHAN_SHARDS];
    if (atomic_load_explicit(&list->with_room, memory_order_relaxed) == 0) continue;
    if (wait) {
      tessi_lock(&list->lock);
    } else if (!tessi_trylock(&list->lock)) {
      continue;
    }
    d = orphan_pick_locked(list);
    if (d != NULL) atomic_store_explicit(&d->owner, h, memory_order_relaxed);
    orphan_list_unlock(list);
  }
  if (d != NULL) {
    tessi_slab_collect_remote(d);
    h->slabs_owned[cls]++;
  }
  return d;
}

/* The same, after one load when class cls has no orphan (a call in full
 * swing); out of line otherwise, so that the slow path that calls it stays
 * small. */
static inline tess_page_t *orphan_take(tess_heap_t *h, unsigned cls, bool wait) {
  if (atomic_load_explicit(&orphans_filed[cls].bits, memory_order_relaxed) == 0) return NULL;
  return orphan_take_filed(h, cls, wait);
}

/* The first block of slab d's free list (not empty), counted out. */
static inline tess_block_t *slab_pop(tess_page_t *d) {
  tess_block_t *b = d->free;
  d->free = b->next;
  d->state++;
  return b;
}

/* A block of an orphan with room of a locked list, or NULL: the slab is
 * not taken, only refiled by its new count (its free lists are the
 * list's, under its lock, like a free into it). */
static tess_block_t *orphan_pop_locked(orphan_list_t *list) {
  tess_page_t *d = orphan_pick_locked(list);
  if (d == NULL) return NULL;
  /* with room: a block on a list, on its remote stack or not yet carved */
  tess_block_t *b = tessi_slab_refill(d) ? slab_pop(d) : NULL;
  orphan_file_locked(list, d);
  return b;
}

void *tessi_orphan_block(unsigned cls, bool larger) {
  unsigned top = larger ? tessi_classes[cls].lends_to_top : cls;
  for (unsigned c = cls; c <= top; c++) {
    if (atomic_load_explicit(&orphans_filed[c].bits, memory_order_relaxed) == 0) continue;
    for (unsigned k = 0; k < ORPHAN_SHARDS; k++) {
      orphan_list_t *list = &orphans[c][k];
      if (atomic_load_explicit(&list->with_room, memory_order_relaxed) == 0) continue;
      tessi_lock(&list->lock);
      tess_block_t *b = orphan_pop_locked(list);
      orphan_list_unlock(list);
      if (b != NULL) {
        /* shared, not the heap's: a heap's count of a class that borrows
         * is moved to its lender when the borrowing ends (types.h) */
        (void)__atomic_fetch_add(&tessi_stats_shared.allocs[c], 1, __ATOMIC_RELAXED);
        return b;
      }
    }
  }
  return NULL;
}

/* Every list with a note is locked (waited for) and let go, so that
 * nothing noted is left (the rare note that a holder left for the list's
 * next holder, orphan_note_late): before an allocation answers NULL, and
 * in fork()'s child. */
void tessi_orphans_collect_noted(void) {
  for (unsigned i = 0; i < TESS_ORPHAN_LISTS; i++) {
    orphan_list_t *list = &all_orphan_lists[i];
    if (!atomic_load_explicit(&list->late_noted, memory_order_relaxed)) continue;
    tessi_lock(&list->lock);
    orphan_list_unlock(list);
  }
}

/* ---------------------------------------------------------------- malloc */

static inline void *pop_block(tess_heap_t *h, tess_page_t *d) {
  TESS_STAT_ADD(h->stats.allocs[d->size_class], 1);
  return slab_pop(d);
}

/* Fixed mode, class cls has no slab with room and there is no orphan: a
 * block of a lender's current slab (see borrowing above), or NULL. A
 * request served by a borrowed slab costs no more than one served by its
 * own. */
static void *borrow_block(tess_heap_t *h, unsigned cls) {
  for (unsigned c = cls + 1, top = tessi_classes[cls].lends_to_top; c <= top; c++) {
    tess_page_t *d = h->current[c];
    if (d == &tessi_page_empty || h->borrow[c] != 0 || h->slabs_owned[c] > BORROW_LENDER_SLABS) {
      continue;
    }
    if (!tessi_slab_refill(d)) continue;
    /* (ends a borrowing from another lender too; one that goes on with the
     * same lender keeps counting where it began: stats.c moves the count
     * of an ongoing borrowing) */
    if (h->borrow[cls] != c + 1) borrow_set(h, cls, c + 1);
    point_current(h, cls, d);
    return pop_block(h, d);
  }
  if (h->borrow[cls] != 0) borrow_end(h, cls);
  return NULL;
}

/* Fixed mode: a class the heap has stopped using keeps its current slab,
 * empty, for the rest of the call (the current slab holds a bias, so
 * free() never finds it empty). In OE's allocation sample, whose 16
 * calls at once each touch most of 26 classes, such slabs were most of
 * the 0.74 MiB of slabs that held 0.08 MiB of blocks. So every 8th slab
 * slow path looks at one class in turn, and gives its current slab back
 * (to the heap's empty-slab cache, or its partition) if no block of it is
 * out. A class in use loses its slab at most once per 352 slow paths:
 * looking at every slow path cost 2 % more instructions in the sample,
 * one in 8 nothing measurable (and asking whether the class allocated
 * since the last look kept the slabs of classes used a few times per
 * round). */
#define SWEEP_PACE TESS_FULL_SLOW_PATH_EVERY

static TESS_NOINLINE void release_empty_current(tess_heap_t *h) {
  unsigned c = (h->slab_slow_paths / SWEEP_PACE) % TESS_CLASSES;
  tess_page_t *d = h->current[c];
  /* state 1: the bias alone, no block out (a borrower's blocks count too) */
  if (h->borrow[c] == 0 && d != &tessi_page_empty && d->state == 1) bin_remove(h, d);
}

void *tessi_heap_malloc_class(tess_heap_t *h, unsigned cls, bool may_borrow) {
  h->reattached = 0;
  if (h->slab_slow_paths++ % SWEEP_PACE == 0 && tessi_primary->is_fixed) release_empty_current(h);
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) process_delayed(h);
  bool reclaimed = false;
  tess_page_t *d;
again:
  while ((d = h->bins[cls].first) != NULL) {
    if (tessi_slab_refill(d)) return pop_block(h, d);
    /* full: out of the bin, unless remote frees arrived meanwhile */
    if (tessi_slab_try_detach(d)) {
      bin_remove(h, d);
      tessi_list_push(&h->full, d);
    }
  }
  tessi_purge_if_due();
  d = orphan_take(h, cls, reclaimed);
  if (d != NULL) {
    bin_push_front(h, d);
    goto again;
  }
  if (may_borrow && tessi_primary->is_fixed) {
    void *b = borrow_block(h, cls);
    if (b != NULL) return b;
  }
  d = slab_new(h, cls);
  if (d == NULL) {
    /* out of memory: take back what idle heaps hold, then try once more */
    if (!reclaimed) {
      tessi_heap_reclaim(h);
      reclaimed = true;
      goto again;
    }
    /* no page for a slab: a block of an orphan of a class that may lend
     * to cls (none of cls has room: orphan_take waited for its lists) */
    return tessi_primary->is_fixed ? tessi_orphan_block(cls, may_borrow) : NULL;
  }
  bin_push_front(h, d);
  tessi_slab_refill(d);
  return pop_block(h, d);
}

/* ----------------------------------------------------------- trimming */

/* h's full slabs leave it (fixed mode): frees into them would otherwise
 * wait for h to run again. Each is collected, then cached or freed if
 * that emptied it, else chained on leaving[its class], an orphan to be.
 * Collecting clears NOTIFY; a free that took NOTIFY just before left its
 * block on h's delayed list, from where it reaches the slab later. */
static void full_slabs_leave(tess_heap_t *h, tess_page_t *leaving[TESS_CLASSES]) {
  while (h->full.first != NULL) {
    tess_page_t *d = h->full.first;
    tessi_list_unlink(&h->full, d);
    d->state &= TESS_STATE_COUNT;
    tessi_slab_collect_remote(d);
    if (d->state == 0) {
      slab_empty(h, d);
    } else {
      d->next = leaving[d->size_class];
      leaving[d->size_class] = d;
    }
  }
}

/* Gives back every slab of h that holds no live block, current slabs
 * included, after collecting all frees made into them (to the bounded
 * cache, or their partition); in fixed mode the slabs with live blocks
 * become orphans, and the caches are emptied too. The caller has h to itself: h is its
 * own heap, or one it took out of the pool. */
static void heap_trim(tess_heap_t *h) {
  bool orphan_partials = tessi_primary->is_fixed;
  process_delayed(h);
  tess_page_t *leaving[TESS_CLASSES] = {NULL}; /* orphans to be, by class */
  if (orphan_partials) full_slabs_leave(h, leaving);
  for (unsigned cls = 0; cls < TESS_CLASSES; cls++) {
    for (tess_page_t *d = h->bins[cls].first, *next; d != NULL; d = next) {
      next = d->next;
      tessi_slab_collect_remote(d);
      int16_t bias = d == h->current[cls] ? 1 : 0;
      if (d->state == bias) {
        /* out of the bin (and its bias); empty, so cached or freed */
        if (bias)
          bin_remove(h, d);
        else
          slab_empty(h, d);
      } else if (orphan_partials) {
        bin_remove(h, d);
        d->next = leaving[cls];
        leaving[cls] = d;
      }
    }
    if (leaving[cls] != NULL) orphans_push(h, leaving[cls]);
  }
  if (!orphan_partials) return;
  empty_cache_drain(h); /* no private reserve while idle */
  /* a free that took a full slab's NOTIFY bit before full_slabs_leave
   * collected it pushes its block on h's delayed list, maybe since the
   * first look: freed into its slab, an orphan now, rather than left with
   * a heap about to sit idle (one pushed later is collected by its free or
   * as h goes into the pool: idle_collect) */
  if (atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) process_delayed(h);
}

/* Fixed mode: a heap that keeps freeing into its full slabs without taking
 * a new one (a call freeing what it made) gives its slabs other than the
 * current ones away as orphans, so that calls still allocating can fill
 * them while their last blocks are freed. */
static void heap_give_away(tess_heap_t *h) {
  process_delayed(h);
  tess_page_t *leaving[TESS_CLASSES] = {NULL};
  full_slabs_leave(h, leaving);
  for (unsigned cls = 0; cls < TESS_CLASSES; cls++) {
    tess_page_t *current = h->bins[cls].first;
    for (tess_page_t *d = current ? current->next : NULL, *next; d != NULL; d = next) {
      next = d->next;
      tessi_slab_collect_remote(d);
      bin_unlink(h, d);
      if (d->state == 0) {
        slab_empty(h, d);
      } else {
        d->next = leaving[cls];
        leaving[cls] = d;
      }
    }
    if (leaving[cls] != NULL) orphans_push(h, leaving[cls]);
  }
}

/* ----------------------------------------------------------------- pool */

static struct {
  tess_lock_t lock;
  tess_heap_t *warmest; /* released last */
  tess_heap_t *coldest;
  size_t length;
  uint64_t releases;
  /* trims under way of idle heaps taken out of the pool (tessi_heap_reclaim,
   * tessi_heap_release), which put them back when done: a thread that
   * finds the pool empty meanwhile waits for one rather than make a heap,
   * which is never freed. Under memory pressure with 8 threads making
   * calls, 12 to 30 heaps were made where 9 ever ran at once, each 5 KiB
   * of the region for good. */
  size_t trimming;
} pool;

/* (fixed mode: h->pooled, then a look at h->delayed by pool_pushed) */
static void pool_push_locked(tess_heap_t *h, bool warm) {
  h->prev_idle = warm ? NULL : pool.coldest;
  h->next_idle = warm ? pool.warmest : NULL;
  if (warm) {
    if (pool.warmest != NULL)
      pool.warmest->prev_idle = h;
    else
      pool.coldest = h;
    pool.warmest = h;
  } else {
    if (pool.coldest != NULL)
      pool.coldest->next_idle = h;
    else
      pool.warmest = h;
    pool.coldest = h;
  }
  pool.length++;
  if (tessi_primary->is_fixed) atomic_store_explicit(&h->pooled, true, memory_order_seq_cst);
}

static void pool_unlink_locked(tess_heap_t *h) {
  if (h->prev_idle != NULL)
    h->prev_idle->next_idle = h->next_idle;
  else
    pool.warmest = h->next_idle;
  if (h->next_idle != NULL)
    h->next_idle->prev_idle = h->prev_idle;
  else
    pool.coldest = h->prev_idle;
  h->next_idle = h->prev_idle = NULL;
  pool.length--;
  atomic_store_explicit(&h->pooled, false, memory_order_relaxed);
}

/* Late frees to idle heaps (fixed mode). A free that took a full slab's
 * NOTIFY just before the owner's trim collected the slab pushes its block
 * on the owner's delayed list after the trim's last look (heap_trim), and
 * the heap goes idle: the slab, an orphan by then, counts the block as
 * live, and its pages stay until the heap is taken again. Each release
 * used to trim the coldest idle heap, and put it back at the cold end, so
 * no other idle heap was trimmed again: in a pool of three, the one in
 * the middle kept such a block through any number of later calls
 * (races/idle_delayed.sh). Now the free, having pushed, reads `pooled`;
 * whoever puts a heap into the pool sets it, then reads the list
 * (pool_pushed), both sequentially consistent: one of the two sees the
 * other, and collects. A heap out of the pool meanwhile is collected by
 * whoever holds it: a call's slow paths and release, a trim. */
static TESS_NOINLINE void idle_collect(tess_heap_t *h) {
  if (tessi_fork_holder) return; /* (its handlers hold the pool's lock) */
  do {
    tessi_lock(&pool.lock);
    if (!atomic_load_explicit(&h->pooled, memory_order_relaxed)) {
      tessi_unlock(&pool.lock); /* taken since: its holder collects */
      return;
    }
    pool_unlink_locked(h);
    pool.trimming++;
    tessi_unlock(&pool.lock);
    heap_trim(h);
    tessi_lock(&pool.lock);
    pool_push_locked(h, false);
    pool.trimming--;
    tessi_unlock(&pool.lock);
    /* (a free that pushed during the trim, after its last look) */
  } while (atomic_load_explicit(&h->delayed, memory_order_seq_cst) != NULL);
}

/* h was put into the pool (its lock let go since): a free that pushed on
 * its delayed list before it was, after its trim looked, is collected. */
static inline void pool_pushed(tess_heap_t *h) {
  if (TESS_UNLIKELY(tessi_primary->is_fixed &&
                    atomic_load_explicit(&h->delayed, memory_order_seq_cst) != NULL)) {
    idle_collect(h);
  }
}

size_t tessi_heap_pool_length(void) {
  tessi_lock(&pool.lock);
  size_t length = pool.length;
  tessi_unlock(&pool.lock);
  return length;
}

/* The warmest idle heap, or NULL; *trimming: whether idle heaps were out
 * of the pool to be trimmed then (one snapshot, under the pool's lock). */
static tess_heap_t *pool_take(bool *trimming) {
  tessi_lock(&pool.lock);
  tess_heap_t *h = pool.warmest;
  if (h != NULL) pool_unlink_locked(h);
  *trimming = pool.trimming != 0;
  tessi_unlock(&pool.lock);
  return h;
}

/* ----------------------------------------------------------- shared heap */

/* Fixed mode: the heap of the threads that can have none of their own
 * (past tessi_fixed_heaps_allowed, or with no room for a struct). Such a
 * thread holds none: its fast paths find the empty heap and fall to
 * alloc_any, which takes this one's lock for each block (alloc.c); its
 * frees of the blocks are other threads' frees to the heap, lock-free,
 * which its slow path collects. Its allocations ask the pool again once a
 * heap was given back (tessi_heap_acquire), so it gets a heap of its own
 * soon after one is free. So a small region serves any number of threads
 * at once, the ones past the cap at about the speed of one lock (about 6
 * times a heap's time for a malloc and free: docs/results), and what they
 * leave is its blocks, which go back like any heap's. */
static tess_heap_t *shared_slot;     /* its struct, carved at init */
static tess_heap_t *shared_heap;     /* the same once made (under the lock) */
static tess_lock_t shared_lock;
static _Atomic(bool) shared_used;     /* allocated from since its last trim */
static __thread bool used_shared;     /* by this thread, since its call began */
static size_t heaps_allowed;          /* fixed mode, set at init */
static _Atomic(size_t) heaps_counted; /* made against heaps_allowed */

static void heap_format(tess_heap_t *h);

/* (its struct is made at the first use: touched at init, its two pages
 * would count in every fixed region, used or not) */
void tessi_heap_shared_init(void) {
  heaps_allowed = tessi_fixed_heaps_allowed(tessi_primary);
  shared_slot = tessi_meta_carve(sizeof(tess_heap_t));
}

void *tessi_heap_shared_malloc(unsigned cls, bool may_borrow) {
  /* no shared heap (OS mode, or no room for it at init): blocks of
   * orphans, as its slow path would end (in OS mode there are none) */
  if (shared_slot == NULL) return tessi_orphan_block(cls, may_borrow);
  tessi_lock(&shared_lock);
  if (shared_heap == NULL) {
    memset(shared_slot, 0, sizeof *shared_slot);
    shared_slot->is_shared = true;
    heap_format(shared_slot);
    __atomic_store_n(&shared_heap, shared_slot, __ATOMIC_RELEASE); /* (peeked at below) */
  }
  void *p = tessi_heap_malloc_class(shared_heap, cls, may_borrow);
  atomic_store_explicit(&shared_used, true, memory_order_relaxed);
  tessi_unlock(&shared_lock);
  used_shared = true;
  return p;
}

/* Like a heap at the end of a call, the shared heap gives back its empty
 * slabs and orphans its partial ones (its blocks freed by their threads
 * wait on its slabs until then): after 32 calls at once in 1 MiB, 0.44
 * MiB of its slabs held no live block. Its lock is held. */
static void shared_trim_locked(void) {
  atomic_store_explicit(&shared_used, false, memory_order_relaxed);
  heap_trim(shared_heap); /* (a fixed heap's trim empties its caches too) */
}

/* ... when a call that allocated from it ends (the thread's own frees
 * came first: tess_thread_cleanup) */
void tessi_heap_shared_done(void) {
  if (!used_shared) return;
  used_shared = false;
  tessi_lock(&shared_lock);
  shared_trim_locked();
  tessi_unlock(&shared_lock);
}

/* ... and, if it was used since, when a reclaim runs or another call ends
 * (a thread that used it may exit without a cleanup), unless a thread is
 * in it (its own reclaim has trimmed it as self). Also when a free left a
 * block on its delayed list after its last trim (the free took a full
 * slab's NOTIFY just before the trim collected the slab, and pushed
 * after it): nothing else would collect that block, and its slab, an
 * orphan by then, stayed pinned for good (a review). */
static void shared_trim_if_used(const tess_heap_t *self) {
  tess_heap_t *shared = __atomic_load_n(&shared_heap, __ATOMIC_ACQUIRE);
  if (shared == NULL || self == shared ||
      (!atomic_load_explicit(&shared_used, memory_order_relaxed) &&
       atomic_load_explicit(&shared->delayed, memory_order_relaxed) == NULL) ||
      !tessi_trylock(&shared_lock)) {
    return;
  }
  shared_trim_locked();
  tessi_unlock(&shared_lock);
}

/* One more heap may be made (always in OS mode); false past the cap. */
static bool heap_count_take(void) {
  if (!tessi_primary->is_fixed) return true;
  size_t n = atomic_load_explicit(&heaps_counted, memory_order_relaxed);
  do {
    if (n >= heaps_allowed) return false;
  } while (!atomic_compare_exchange_weak_explicit(&heaps_counted, &n, n + 1,
                                                  memory_order_relaxed, memory_order_relaxed));
  return true;
}

static void heap_count_return(void) {
  if (tessi_primary->is_fixed) atomic_fetch_sub_explicit(&heaps_counted, 1, memory_order_relaxed);
}

void tessi_heap_reclaim(tess_heap_t *self) {
  /* its own slabs first, as at the end of a call: other threads' frees
   * into its full slabs wait for its next slow path of their class, so a
   * thread whose blocks were all freed elsewhere found no room for any
   * other size; and its kept spans, which may merge with their neighbours */
  if (self != NULL) {
    heap_trim(self);
    empty_cache_drain(self);
    tessi_heap_span_drain(self);
  }
  /* take every idle heap out while it is worked on, then put them back */
  tess_heap_t *taken = NULL;
  tessi_lock(&pool.lock);
  pool.trimming++;
  tessi_unlock(&pool.lock);
  bool trimming;
  for (tess_heap_t *h; (h = pool_take(&trimming)) != NULL;) {
    heap_trim(h); /* in fixed mode its partial slabs become orphans */
    empty_cache_drain(h);
    h->next_idle = taken;
    taken = h;
  }
  shared_trim_if_used(self);
  tessi_orphans_collect_noted();
  tessi_span_drain_all(); /* what the trims freed while a partition was busy */
  while (taken != NULL) {
    tess_heap_t *next = taken->next_idle;
    tessi_lock(&pool.lock);
    pool_push_locked(taken, false);
    tessi_unlock(&pool.lock);
    pool_pushed(taken);
    taken = next;
  }
  tessi_lock(&pool.lock);
  pool.trimming--;
  tessi_unlock(&pool.lock);
}

static tess_heap_t *heap_create(void) {
  tess_heap_t *h = tessi_meta_alloc(sizeof(tess_heap_t));
  if (h != NULL) heap_format(h);
  return h;
}

/* A zeroed struct becomes a heap, in the list of heaps made. */
static void heap_format(tess_heap_t *h) {
  for (unsigned i = 0; i < TESS_DIRECT_SLOTS; i++) h->direct[i] = &tessi_page_empty;
  for (unsigned c = 0; c < TESS_CLASSES; c++) h->current[c] = &tessi_page_empty;
  h->slab_limit = tessi_slab_limit;
  h->home = tessi_partition_for_heap();
  h->span_score = TESS_SPAN_SCORE_MAX / 2;
  static _Atomic(uint32_t) heaps_made;
  h->shard = atomic_fetch_add_explicit(&heaps_made, 1, memory_order_relaxed) % ORPHAN_SHARDS;
  tess_heap_t *first = atomic_load_explicit(&tessi_heaps_made, memory_order_relaxed);
  do {
    h->next_made = first;
  } while (!atomic_compare_exchange_weak_explicit(&tessi_heaps_made, &first, h,
                                                  memory_order_release, memory_order_relaxed));
}

/* A heap whose thread exited without giving it back: glibc runs key
 * destructors four rounds at most, and a thread that first allocates in
 * the last one attaches a heap whose release (init.c, thread_exit) never
 * runs (a review: 20,000 such threads left 20,000 heaps in use). Looked
 * for when the pool is empty, a few heaps a time from where the last look
 * stopped; each holder asked of the OS.
 *
 * `holder` names who holds the heap (0 in the pool): the thread's id and
 * the process's token, below a count of the heap's takes, so that a
 * thread id the OS hands out again cannot make a heap taken, given back
 * and taken by the new thread look like the one found gone. The token is
 * 1, and one more in each fork() child: a child never takes the heaps
 * that its parent's other threads held, which may have been
 * mid-operation, even where it has its parent's process id (a new pid
 * namespace; a review) or a descendant gets it later. The heap stays
 * counted in use.
 *
 * A child that no fork handler saw (_Fork(), clone() without CLONE_VM)
 * has its parent's token, and its thread the parent's id: the heap that
 * thread holds named a thread that is none of the child's, and the
 * child's next thread took it for gone while it was in use (a review).
 * So the token is kept with the id of the process it was made in, written
 * before any heap names the token; a look that finds another process id
 * takes a new token, and looks no further (no heap names a thread of
 * the new one that is gone); a thread asks its own id again once the
 * token changed. The heaps named under the old token, gone holders
 * included, are never taken there, as in a fork() child. (A task that
 * shares the memory but not the process, a vfork() child, takes a token
 * too, and its parent then one more.) */
#define GONE_LOOK 4
#define HOLDER_WHO_BITS (2 * TESS_PLAT_ID_BITS)
#define HOLDER_WHO_MASK (((uint64_t)1 << HOLDER_WHO_BITS) - 1)
#define HOLDER_ID_MASK (((uint64_t)1 << TESS_PLAT_ID_BITS) - 1)
static _Atomic(tess_heap_t *) gone_cursor;
/* The token (low half) and the process id it belongs to (high half; 0:
 * not asked yet), in one word so that they change together. */
static _Atomic(uint64_t) process_ident = 1;
static __thread int32_t own_thread_id;
static __thread uint32_t own_id_token; /* the token when own_thread_id was asked; 0: never */

static inline uint32_t ident_token(uint64_t ident) { return (uint32_t)ident; }
static inline int32_t ident_pid(uint64_t ident) { return (int32_t)(ident >> 32); }
static inline uint64_t ident_make(int32_t pid, uint32_t token) {
  return (uint64_t)(uint32_t)pid << 32 | token;
}

/* The token after `token` (never 0: a holder of 0 is none). */
static uint32_t token_next(uint32_t token) {
  uint32_t next = (token + 1) & (uint32_t)HOLDER_ID_MASK;
  return next != 0 ? next : 1;
}

/* Who the calling thread is, for `holder`; 0 where the platform cannot
 * tell. The process id goes with the token before the first heap names
 * it. */
static uint64_t holder_me(void) {
  uint64_t ident = atomic_load_explicit(&process_ident, memory_order_relaxed);
  if (TESS_UNLIKELY(ident_pid(ident) == 0)) {
    int32_t pid = tessi_plat_process_id();
    if (pid == 0) return 0; /* the platform cannot tell */
    /* (lost to another thread of this process: the same id) */
    if (atomic_compare_exchange_strong_explicit(&process_ident, &ident,
                                                ident_make(pid, ident_token(ident)),
                                                memory_order_relaxed, memory_order_relaxed)) {
      ident = ident_make(pid, ident_token(ident));
    }
  }
  uint32_t token = ident_token(ident);
  if (own_id_token != token) {
    own_thread_id = tessi_plat_thread_id();
    own_id_token = token;
  }
  if (own_thread_id == 0) return 0;
  return (uint64_t)token << TESS_PLAT_ID_BITS | ((uint64_t)own_thread_id & HOLDER_ID_MASK);
}

/* The token of this process, whose id is `pid`, or 0 when it has just
 * become this process's: a new one if it was made in another process (a
 * child no fork handler saw), which names no heap of a thread gone yet. */
static uint32_t token_here(int32_t pid) {
  uint64_t ident = atomic_load_explicit(&process_ident, memory_order_relaxed);
  while (ident_pid(ident) != pid) {
    /* (not asked yet: no heap names the token) */
    uint32_t token = ident_pid(ident) == 0 ? ident_token(ident) : token_next(ident_token(ident));
    if (atomic_compare_exchange_weak_explicit(&process_ident, &ident, ident_make(pid, token),
                                              memory_order_relaxed, memory_order_relaxed)) {
      return 0;
    }
  }
  return ident_token(ident);
}

/* The holder word of a heap taken by `who` after `was`. */
static inline uint64_t holder_taken(uint64_t was, uint64_t who) {
  return ((was >> HOLDER_WHO_BITS) + 1) << HOLDER_WHO_BITS | who;
}

/* A heap whose holder, a thread of this process (its token), has exited,
 * taken; or NULL. */
static tess_heap_t *heap_of_gone_thread(void) {
  int32_t pid = tessi_plat_process_id();
  if (pid == 0) return NULL; /* the platform cannot tell */
  uint32_t token = token_here(pid);
  if (token == 0) return NULL;
  uint64_t me = holder_me();
  if (me == 0) return NULL;
  tess_heap_t *h = atomic_load_explicit(&gone_cursor, memory_order_acquire);
  for (unsigned n = 0; n < GONE_LOOK; n++) {
    if (h == NULL) h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire);
    if (h == NULL) break;
    tess_heap_t *next = h->next_made;
    uint64_t was = atomic_load_explicit(&h->holder, memory_order_relaxed);
    uint64_t who = was & HOLDER_WHO_MASK;
    /* a heap given back clears its holder before its thread can exit:
     * found gone, a holder still named is one that never gave it back */
    if (who != 0 && who != me && who >> TESS_PLAT_ID_BITS == token &&
        tessi_plat_thread_gone(pid, (int32_t)(who & HOLDER_ID_MASK)) &&
        atomic_compare_exchange_strong_explicit(&h->holder, &was, holder_taken(was, me),
                                                memory_order_acquire, memory_order_relaxed)) {
      atomic_store_explicit(&gone_cursor, next, memory_order_release);
      return h;
    }
    h = next;
  }
  atomic_store_explicit(&gone_cursor, h, memory_order_release);
  return NULL;
}

/* Whether a thread that got no heap should reclaim before it tries again:
 * once per release of a heap (which may leave frees to collect) in the
 * whole process. A thread without a heap comes here at every allocation
 * (it takes orphans' blocks meanwhile: alloc.c), and a reclaim trims
 * every idle heap while others wait for the pool. */
static bool reclaim_may_help(void) {
  static _Atomic(uint64_t) reclaimed_at = UINT64_MAX;
  tessi_lock(&pool.lock);
  uint64_t releases = pool.releases;
  tessi_unlock(&pool.lock);
  uint64_t last = atomic_load_explicit(&reclaimed_at, memory_order_relaxed);
  return last != releases &&
         atomic_compare_exchange_strong_explicit(&reclaimed_at, &last, releases,
                                                 memory_order_relaxed, memory_order_relaxed);
}

/* A thread past the cap asks the pool again only when a heap was given
 * back since it met the cap, or at every CAPPED_RETRY-th allocation, for
 * heaps whose threads exited without giving them back (no release says
 * so). Asking at every allocation took the pool's lock and, looking for
 * such heaps, made 4 system calls: one thread past the cap ran about 300
 * times slower than with a heap (a review; docs/results, 2026-11-27e). */
#define CAPPED_RETRY 1024
static __thread uint64_t capped_releases; /* 1 + pool.releases when it met the cap; 0: none */
static __thread uint32_t capped_asks;

tess_heap_t *tessi_heap_acquire(void) {
  uint64_t releases = __atomic_load_n(&pool.releases, __ATOMIC_RELAXED);
  if (capped_releases != 0) {
    if (capped_releases == releases + 1 && ++capped_asks % CAPPED_RETRY != 0) return NULL;
    capped_releases = 0;
  }
  bool trimming;
  tess_heap_t *h;
  /* (not while this thread holds every lock for fork(): the trims wait
   * for it) */
  while ((h = pool_take(&trimming)) == NULL && trimming && !tessi_fork_holder) {
    tessi_plat_yield();
  }
  if (h == NULL && (h = heap_of_gone_thread()) != NULL) {
    tessi_tls_heap = h; /* in use all along */
    return h;
  }
  if (h == NULL) {
    if (!heap_count_take()) { /* past the cap: the shared heap */
      capped_releases = releases + 1;
      return NULL;
    }
    h = heap_create();
    if (h == NULL && tessi_primary->is_fixed && !tessi_fork_holder && reclaim_may_help()) {
      /* no room for the struct (two pages in a row, in a region full of
       * slabs with live blocks): what idle heaps and frees in flight hold
       * goes back, and a heap released meanwhile will do */
      tessi_heap_reclaim(NULL);
      h = pool_take(&trimming);
      if (h != NULL) {
        heap_count_return(); /* none made */
      } else {
        h = heap_create();
      }
    }
    if (h == NULL) {
      heap_count_return();
      return NULL;
    }
  }
  /* (after the look, which may have taken a new token) */
  uint64_t was = atomic_load_explicit(&h->holder, memory_order_relaxed);
  atomic_store_explicit(&h->holder, holder_taken(was, holder_me()), memory_order_relaxed);
  heaps_in_use_add(1);
  h->span_unfed = true;
  h->span_wide = false;
  h->span_trips = h->span_busy = 0;
  tessi_tls_heap = h;
  return h;
}

/* In a fixed region a heap gives back its slabs when its thread is done
 * (the end of an enclave call): the empty ones to their partitions, the
 * others as orphans, so an idle heap holds nothing but a late free to its
 * delayed list, which is collected at once (idle_collect). */
void tessi_heap_release(tess_heap_t *h) {
  process_delayed(h);
  bool fixed = tessi_primary->is_fixed;
  if (fixed) heap_trim(h);
  tessi_purge_if_due();
  if (tessi_tls_heap == h) tessi_tls_heap = &tessi_heap_empty;
  uint64_t was = atomic_load_explicit(&h->holder, memory_order_relaxed);
  atomic_store_explicit(&h->holder, was & ~HOLDER_WHO_MASK, memory_order_relaxed);
  heaps_in_use_add(-1);
  tessi_lock(&pool.lock);
  pool_push_locked(h, true);
  /* (atomic: a thread past the cap peeks at it without the lock) */
  __atomic_add_fetch(&pool.releases, 1, __ATOMIC_RELAXED);
  tessi_unlock(&pool.lock);
  pool_pushed(h);
  shared_trim_if_used(NULL);
}

void tessi_heaps_fork_prepare(void) {
  tessi_lock(&shared_lock);
  tessi_lock(&pool.lock);
  for (unsigned i = 0; i < TESS_ORPHAN_LISTS; i++) {
    tessi_lock(&all_orphan_lists[i].lock);
  }
}

/* A free into an orphan while fork() held the lists was noted: collected
 * as the lists are let go (the partitions are free again by now: init.c),
 * in the parent and in the child alike. */
void tessi_heaps_fork_parent(void) {
  tessi_unlock(&pool.lock);
  tessi_unlock(&shared_lock);
  for (unsigned i = 0; i < TESS_ORPHAN_LISTS; i++) {
    orphan_list_unlock(&all_orphan_lists[i]);
  }
}

bool tessi_heaps_abandoned;

/* In a fork() child: the heaps that were neither in the pool nor this
 * thread's (nor the shared heap, whose lock fork held) were in use by the
 * parent's other threads, which may have been mid-operation, or out of
 * the pool for a trim; they are marked, for tess_heap_check. */
static void mark_abandoned(const tess_heap_t *own) {
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire); h != NULL;
       h = h->next_made) {
    h->abandoned = h != own && !h->is_shared;
  }
  for (tess_heap_t *h = pool.warmest; h != NULL; h = h->next_idle) h->abandoned = false;
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire); h != NULL;
       h = h->next_made) {
    if (h->abandoned) tessi_heaps_abandoned = true;
  }
}

/* The other threads' heaps are not in the pool, and stay out of it in the
 * child: their owners may have been mid-operation when fork() copied them,
 * so they are never handed out again. Frees into their slabs still work
 * (as remote frees). */
void tessi_heaps_fork_child(void) {
  for (unsigned i = 0; i < TESS_ORPHAN_LISTS; i++) {
    tessi_lock_reset(&all_orphan_lists[i].lock);
  }
  tessi_lock_reset(&pool.lock);
  tessi_lock_reset(&shared_lock); /* held by this thread (prepare): nothing was under way */
  /* heaps out for a trim in another thread are lost with it */
  pool.trimming = 0;
  /* a new token: the parent's other threads' heaps name the old one, and
   * are never taken here; the child's one thread has an id of its own
   * (asked again, as the token changed), and its heap names it */
  uint32_t token =
      token_next(ident_token(atomic_load_explicit(&process_ident, memory_order_relaxed)));
  atomic_store_explicit(&process_ident, ident_make(tessi_plat_process_id(), token),
                        memory_order_relaxed);
  tess_heap_t *own = tessi_tls_heap;
  if (own != &tessi_heap_empty) {
    uint64_t was = atomic_load_explicit(&own->holder, memory_order_relaxed);
    atomic_store_explicit(&own->holder, holder_taken(was, holder_me()), memory_order_relaxed);
  }
  mark_abandoned(own);
  tessi_orphans_collect_noted();
}
