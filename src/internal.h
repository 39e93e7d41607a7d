/* tessalloc internal interfaces: cross-file functions (prefix tessi_, hidden
 * visibility through the build's default) and the small inline helpers the
 * hot paths share. Layers, bottom up — each file uses only those below it:
 *   platform  -> options, report -> sizeclass -> region, span
 *   -> slab -> heap -> large -> alloc (public API), init, override */
#ifndef TESS_INTERNAL_H
#define TESS_INTERNAL_H

#include "platform.h"
#include "types.h"

/* Everything declared below is internal to the library: telling the
 * compiler so lets it address globals directly instead of through the GOT. */
#pragma GCC visibility push(hidden)

#define TESS_LIKELY(x) __builtin_expect(!!(x), 1)
#define TESS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TESS_NOINLINE __attribute__((noinline))
#define TESS_COLD __attribute__((cold, noinline))
#define TESS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TESS_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline size_t tessi_align_up(size_t n, size_t align) {
  return (n + align - 1) & ~(align - 1);
}
static inline bool tessi_is_pow2(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

/* ------------------------------------------------------------- options */
extern tess_options_t tessi_options;
void tessi_options_init(void);
/* Parses "64M", "4096", "1g"; false on garbage or overflow. */
bool tessi_parse_size(const char *text, size_t *out);

/* -------------------------------------------------------------- report */
/* One line on stderr, then abort: "tessalloc: invalid <op> of 0x... (<why>)" */
_Noreturn void tessi_report_invalid(const char *op, const void *ptr, const char *why);
void tessi_warn(const char *msg, const char *detail);

/* ------------------------------------------------------------------ locks */
void tessi_lock_slow(tess_lock_t *lock);

/* Set in the thread that calls fork() from when the fork handlers hold
 * every lock until the parent or child handler lets them go (init.c).
 * Other fork handlers run in that thread then, and glibc lets them
 * allocate: to that thread every lock is its own, so taking one passes
 * and letting one go waits for the handler to do it. */
extern __thread bool tessi_fork_holder;

static inline void tessi_lock(tess_lock_t *lock) {
  if (TESS_LIKELY(!atomic_exchange_explicit(&lock->held, 1, memory_order_acquire))) return;
  tessi_lock_slow(lock);
}
static inline bool tessi_trylock(tess_lock_t *lock) {
  if (atomic_load_explicit(&lock->held, memory_order_relaxed) == 0 &&
      !atomic_exchange_explicit(&lock->held, 1, memory_order_acquire)) {
    return true;
  }
  return TESS_UNLIKELY(tessi_fork_holder);
}
static inline void tessi_unlock(tess_lock_t *lock) {
  if (TESS_UNLIKELY(tessi_fork_holder)) return;
  atomic_store_explicit(&lock->held, 0, memory_order_release);
}
/* after fork() in the child: no other thread can hold it */
static inline void tessi_lock_reset(tess_lock_t *lock) {
  atomic_store_explicit(&lock->held, 0, memory_order_relaxed);
}

/* What a lock does at each of fork()'s handlers: taken before, let go
 * after in the parent, reset in the child. */
typedef enum { TESS_FORK_PREPARE, TESS_FORK_PARENT, TESS_FORK_CHILD } tess_fork_phase_t;
static inline void tessi_lock_for_fork(tess_lock_t *lock, tess_fork_phase_t phase) {
  if (phase == TESS_FORK_PREPARE) {
    tessi_lock(lock);
  } else if (phase == TESS_FORK_PARENT) {
    tessi_unlock(lock);
  } else {
    tessi_lock_reset(lock);
  }
}

/* ---------------------------------------------------------- size classes */
extern tess_class_info_t tessi_classes[TESS_CLASSES];
extern size_t tessi_slab_limit; /* largest size served from slabs */

/* Slabs of at least slab_target_bytes and min_blocks blocks; sizes above
 * slab_limit are page spans; a class may borrow blocks up to borrow_window
 * times its size from larger classes' slabs (1: no borrowing). */
void tessi_sizeclass_init(size_t slab_target_bytes, uint32_t min_blocks, size_t slab_limit,
                          uint32_t borrow_window);

static inline unsigned tessi_class_of(size_t n) {
  if (n <= 128) return n <= 16 ? 0 : (unsigned)((n - 1) >> 4);
  size_t m = n - 1;
  unsigned top = 63u - (unsigned)__builtin_clzll(m); /* >= 7 */
  return TESS_EXACT_CLASSES + (top - 7u) * 4u + (unsigned)((m >> (top - 2u)) & 3u);
}
/* Smallest class >= size whose blocks are all `align`-aligned (align <= page);
 * -1 when none (then the block is a page span). */
int tessi_class_for_aligned(size_t size, size_t align);

/* Lemire's divisibility test: off % size == 0 for off < 2^32, with
 * div_magic = ceil(2^64 / size) (the low 64 bits of the product are below
 * div_magic exactly for multiples). Offsets in a slab are below 2^19. */
static inline bool tessi_is_block_start(uint64_t off, uint64_t div_magic) {
  return off * div_magic < div_magic;
}

/* ------------------------------------------------------------- regions */
/* The primary region, copied into globals for the free() fast path (each
 * is one rip-relative load). base and size are 0 before init, so every
 * pointer then takes the slow path. The size is that of the partitions
 * opened so far (a fixed region opens them as they fill, and lays their
 * descriptors only then): a pointer beyond is not ours. */
extern _Atomic(uintptr_t) tessi_primary_base;
extern _Atomic(size_t) tessi_primary_size;
/* Acquire: a free racing the first initialization that read the base
 * before it was set (0) and the size after (a NULL then passes the range
 * test, as the region's first page) reads the page descriptors after the
 * size, so it must see them laid (init.c, make_primary, stores the size
 * last, with release). On x86-64 the load is a plain one either way
 * (there the fast path's test is the asm below); ThreadSanitizer, which
 * sees the C path, reported the descriptor reads racing with init in one
 * CI run of race_first_init (of many) while this load was relaxed. */
static inline size_t tessi_primary_extent(void) {
  return atomic_load_explicit(&tessi_primary_size, memory_order_acquire);
}
/* offset (from the primary base) >= the extent: free()'s range test. GCC
 * loads an atomic into a register before comparing; on x86-64 the relaxed
 * load is any load, so one `cmp` with the global as its memory operand
 * does both (an instruction less on the free fast path). */
static inline bool tessi_beyond_primary(uintptr_t offset) {
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  bool beyond;
  __asm__("cmpq %1, %2"
          : "=@ccae"(beyond)
          : "m"(*(const size_t *)&tessi_primary_size), "r"(offset));
  return beyond;
#else
  return offset >= tessi_primary_extent();
#endif
}
extern tess_page_t *tessi_primary_pages;
extern size_t tessi_primary_desc_bytes; /* its whole descriptor array */
extern tess_region_t *tessi_primary;

/* Region holding address a (primary or overflow), or NULL. */
tess_region_t *tessi_region_of(uintptr_t a);
/* The one region of fixed mode: [start, start+size), any alignment (the
 * page-aligned part is used). is_zero: it is known to read as zero. NULL
 * when too small. */
tess_region_t *tessi_region_add_fixed(uintptr_t start, size_t size, bool is_zero);
/* OS mode: reserve a new region of `want` bytes, or less down to `need`
 * when the OS refuses, and link it; each of its partitions holds `need`. */
tess_region_t *tessi_region_add_os(size_t want, size_t need);
/* Partition a new heap should allocate from (round robin). */
tess_partition_t *tessi_partition_for_heap(void);
/* Whether the partition a heap at `home` tries first for pages is locked
 * by another thread right now (a relaxed peek). */
bool tessi_pages_busy(const tess_partition_t *home);
tess_partition_t *tessi_partition_of(tess_region_t *r, const tess_page_t *d);
/* The bytes blocks can take in fixed region r: its pages less the meta
 * pages (header, descriptors) and the first chunk of heap structs. */
size_t tessi_fixed_allocatable(const tess_region_t *r);
/* Carve `bytes` of metadata (heap structs) out of a region, zeroed; never
 * freed. */
void *tessi_meta_alloc(size_t bytes);
/* The same, its bytes untouched (as the region left them). */
void *tessi_meta_carve(size_t bytes);
/* Fixed region r: how many heaps may be made, the shared one aside
 * (region.c). */
size_t tessi_fixed_heaps_allowed(const tess_region_t *r);
/* Every region, for fork handlers and purging: first, then next until NULL
 * (regions are only ever appended, so the walk needs no lock). */
tess_region_t *tessi_region_first(void);
static inline tess_region_t *tessi_region_next(const tess_region_t *r) {
  return atomic_load_explicit(&r->next_region, memory_order_acquire);
}
/* Partitions of r in use, from the first (a fixed region opens them as
 * they fill; only their descriptors are laid). */
static inline unsigned tessi_open_partitions(tess_region_t *r) {
  return atomic_load_explicit(&r->open_partitions, memory_order_acquire);
}
/* Bytes from r's base through its last open partition: its pages beyond
 * have no descriptors yet, so no pointer there is ours. */
static inline size_t tessi_region_extent(tess_region_t *r) {
  return (size_t)r->partitions[tessi_open_partitions(r) - 1].end_page << TESS_PAGE_SHIFT;
}
/* Every partition lock of r, taken in order (the only order in which code
 * holds more than one), and released. */
static inline void tessi_partitions_lock(tess_region_t *r) {
  for (unsigned i = 0; i < r->partition_count; i++) tessi_lock(&r->partitions[i].lock);
}
static inline void tessi_partitions_unlock(tess_region_t *r) {
  for (unsigned i = r->partition_count; i-- > 0;) tessi_unlock(&r->partitions[i].lock);
}
/* fork: every partition lock held, with no decommit round or deferred
 * free under way, and none starts until tessi_span_fork_done (span.c) */
void tessi_span_fork_prepare(void);
void tessi_span_fork_done(bool in_child);
/* fork: hold every region, partition and metadata lock across fork() */
void tessi_regions_lock_all(void);
void tessi_regions_unlock_all(bool in_child);

/* Region whose descriptor array holds d (region.c), and the same with
 * the primary region tried first (the usual answer). */
tess_region_t *tessi_region_of_desc(const tess_page_t *d);
static inline tess_region_t *tessi_region_of_page(const tess_page_t *d) {
  if ((uintptr_t)d - (uintptr_t)tessi_primary_pages < tessi_primary_desc_bytes) {
    return tessi_primary;
  }
  return tessi_region_of_desc(d);
}

/* --*state, answering whether the result is <= 0 (signed): free()'s test
 * for "needs the slow path". GCC reloads, decrements and tests a 16-bit
 * field in four instructions; on x86-64 one `sub` sets the flags. */
static inline bool tessi_state_drop(int16_t *state) {
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  bool at_or_below_zero;
  __asm__("subw $1, %0" : "+m"(*state), "=@ccle"(at_or_below_zero));
  return at_or_below_zero;
#else
  return --*state <= 0;
#endif
}

/* The head descriptor of the slab (or span) page d belongs to. */
static inline tess_page_t *tessi_page_head(tess_page_t *d) {
  return (tess_page_t *)((char *)d - d->head_delta);
}
/* Offset of a from the start of the span whose page descriptor is d, given
 * a's offset from the region base. */
static inline uint64_t tessi_offset_in_span(uintptr_t region_offset, const tess_page_t *d) {
  return (region_offset & (TESS_PAGE_SIZE - 1)) +
         ((uint64_t)d->head_delta << (TESS_PAGE_SHIFT - 6));
}
_Static_assert(sizeof(tess_page_t) == 1 << 6, "tessi_offset_in_span scales by 64");

static inline uintptr_t tessi_page_addr(const tess_region_t *r, const tess_page_t *d) {
  return r->base + ((uintptr_t)(d - r->pages) << TESS_PAGE_SHIFT);
}

/* ---------------------------------------------------------------- spans */
/* Footprint: pages handed out of the partitions, plus the meta pages
 * (region headers and the descriptors laid so far). The span allocator
 * counts its own pages (span.c); tessi_footprint_meta_add counts meta
 * pages; tessi_footprint answers bytes now and, in *peak, the most ever. */
void tessi_footprint_meta_add(size_t pages);
size_t tessi_footprint(size_t *peak);
/* tess_heap_check, the program quiescent: the global bound is the meta
 * pages plus every partition's pages in use and slack, and the peak is
 * not below the footprint nor above the regions' pages. */
bool tessi_footprint_consistent(void);
/* The peak alone: one load of a line that is written only when the peak
 * rises. */
extern _Atomic(size_t) tessi_peak_pages;
static inline size_t tessi_footprint_peak(void) {
  return atomic_load_explicit(&tessi_peak_pages, memory_order_relaxed) << TESS_PAGE_SHIFT;
}
/* The most bytes the partitions held in use at once (blocks, slabs, kept
 * spans and heap structs; no header or descriptors). */
extern _Atomic(size_t) tessi_peak_partition_pages;
static inline size_t tessi_peak_partition_bytes(void) {
  return atomic_load_explicit(&tessi_peak_partition_pages, memory_order_relaxed)
         << TESS_PAGE_SHIFT;
}
/* OS mode: bytes of free spans that may still be resident, and bytes
 * decommitted so far. */
void tessi_span_os_counts(size_t *dirty, size_t *decommitted);

/* A new partition: all of its pages become one free span. */
void tessi_span_init_partition(tess_partition_t *p, bool is_zero);
/* Pages from one partition, aligned to align_pages (power of two), the
 * head stamped with `kind` and the length; *is_zero says whether all of it
 * reads as zero. NULL when the partition is full, or (unless `wait`) its
 * lock is busy, or (unless `fresh`) only pages above its high water would
 * serve. */
tess_page_t *tessi_span_alloc(tess_partition_t *p, size_t pages, size_t align_pages, uint8_t kind,
                              bool *is_zero, bool wait, bool fresh);
/* Frees pages of one partition (tessi_pages_free: of any span). In a
 * fixed region a busy lock is not waited for: the span is parked BUSY on
 * the partition's deferred stack, which whoever takes the lock next
 * empties first (span.c). */
void tessi_span_free(tess_partition_t *p, tess_page_t *head, size_t pages);
/* A span of a fixed region that runs on past the end of p, its head's
 * partition (tessi_span_alloc_across made it): freed with the locks of
 * every partition it lies in held, so nobody sees it half freed. */
void tessi_span_free_across(tess_partition_t *p, tess_page_t *head, size_t pages);
/* Fixed regions: the lowest run of free pages across partition boundaries
 * that fits, or with `inside` the lowest run or span (locks every open
 * partition). NULL when there is none, and *tail the free pages that end
 * where the open partitions end. */
tess_page_t *tessi_span_alloc_across(tess_region_t *r, size_t pages, size_t align_pages,
                                     uint8_t kind, bool *is_zero, bool inside, size_t *tail);
/* Empties every deferred stack of r; the caller holds all its locks. */
void tessi_span_drain_deferred(tess_region_t *r);
/* Bytes of the spans on the partitions' deferred stacks now (a read of
 * their counts, no lock): free, out of the footprint, not yet in the bins. */
size_t tessi_span_deferred_bytes(void);
/* Empties every deferred stack, waiting for each partition's lock (the
 * out-of-memory path: spans freed while it trimmed count too). */
void tessi_span_drain_all(void);
/* Grow an allocated span in place by taking `extra` pages right of it:
 * in its partition p, or (fixed regions) from a run of free pages that may
 * cross the boundaries of the open partitions (locks every one; a run too
 * short that ends where they end sets *short_at_limit). */
bool tessi_span_grow(tess_partition_t *p, tess_page_t *head, size_t pages, size_t extra);
bool tessi_span_grow_across(tess_region_t *r, tess_page_t *head, size_t pages, size_t extra,
                            bool *short_at_limit);
/* Purge every partition that has spans overdue; one load when none is
 * (inline: a fixed region never schedules one). Called from allocation
 * slow paths, so memory goes back even when no span is freed later. */
extern _Atomic(uint32_t) tessi_purge_due_ms; /* earliest due time, 0: none */
void tessi_purge_scheduled(uint32_t due);
static inline void tessi_purge_if_due(void) {
  uint32_t due = atomic_load_explicit(&tessi_purge_due_ms, memory_order_relaxed);
  if (TESS_UNLIKELY(due != 0)) tessi_purge_scheduled(due);
}

/* Pages from home, else any partition of any region, else a new region (OS
 * mode); in a fixed region first a span below the high water of any open
 * partition, starting at home (alloc_in_fixed in region.c). *from
 * receives the partition. */
tess_page_t *tessi_pages_alloc(tess_partition_t *home, size_t pages, size_t align_pages,
                               uint8_t kind, bool *is_zero, tess_partition_t **from);
/* Whether tessi_pages_alloc places such a request as a big block of a
 * fixed region: the lowest run that fits, across partitions. */
bool tessi_pages_big(const tess_partition_t *home, size_t pages, size_t align_pages);
void tessi_pages_free(tess_page_t *head, size_t pages);
/* Grow a span of region r in place by `extra` pages (tessi_span_grow; a
 * big one of a fixed region across partition boundaries too). */
bool tessi_pages_grow(tess_region_t *r, tess_page_t *head, size_t pages, size_t extra);

/* Doubly linked lists of span heads through their next/prev: a heap's bins,
 * full list, the orphan lists. */
static inline void tessi_list_unlink(tess_bin_t *list, tess_page_t *d) {
  if (d->prev != NULL)
    d->prev->next = d->next;
  else
    list->first = d->next;
  if (d->next != NULL)
    d->next->prev = d->prev;
  else
    list->last = d->prev;
  d->next = d->prev = NULL;
}

static inline void tessi_list_push(tess_bin_t *list, tess_page_t *d) {
  d->prev = NULL;
  d->next = list->first;
  if (list->first != NULL)
    list->first->prev = d;
  else
    list->last = d;
  list->first = d;
}

static inline void tessi_list_append(tess_bin_t *list, tess_page_t *d) {
  d->next = NULL;
  d->prev = list->last;
  if (list->last != NULL)
    list->last->next = d;
  else
    list->first = d;
  list->last = d;
}

/* ----------------------------------------------------------------- slabs */
extern tess_page_t tessi_page_empty; /* sentinel: a slab with nothing free */

void tessi_slab_format(tess_page_t *d, unsigned cls, tess_heap_t *owner);
/* Moves other threads' frees onto d->free, counting them back in (the
 * owner's frees are counted at once; they wait on local_free). Inline
 * the look, which mostly finds none (every free into an orphan asks). */
void tessi_slab_collect_remote_slow(tess_page_t *d);
static inline void tessi_slab_collect_remote(tess_page_t *d) {
  if (atomic_load_explicit(&d->remote, memory_order_relaxed) != 0)
    tessi_slab_collect_remote_slow(d);
}
/* Makes d->free non-empty if the slab has any block left: collects local
 * and remote frees, carves fresh blocks. Returns whether d->free != NULL. */
bool tessi_slab_refill_slow(tess_page_t *d);
static inline bool tessi_slab_refill(tess_page_t *d) {
  if (d->free != NULL) return true;
  /* a slab with nothing freed and every block carved is full, and the
   * slab slow path asks that first of each slab that ran dry */
  if (d->local_free == NULL && atomic_load_explicit(&d->remote, memory_order_relaxed) == 0 &&
      d->capacity == tessi_classes[d->size_class].slab_blocks) {
    return false;
  }
  return tessi_slab_refill_slow(d);
}
/* Detaches a full slab: later remote frees notify the owner. False when a
 * remote free arrived meanwhile (then refill again). */
static inline bool tessi_slab_try_detach(tess_page_t *d) {
  uintptr_t expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&d->remote, &expected, TESS_REMOTE_NOTIFY,
                                               memory_order_acq_rel, memory_order_acquire) &&
      expected != TESS_REMOTE_NOTIFY) {
    return false; /* a remote free came in: there is something to collect */
  }
  d->state |= TESS_STATE_DETACHED;
  return true;
}

/* ----------------------------------------------------------------- heaps */
extern __thread tess_heap_t *tessi_tls_heap;
extern tess_heap_t tessi_heap_empty;
/* An orphan slab's owner is not a heap but one of these marks (heap.c): the
 * one of the list it is filed in (a list per class and shard). */
#define TESS_ORPHAN_SHARDS 8
#define TESS_ORPHAN_LISTS (TESS_CLASSES * TESS_ORPHAN_SHARDS)
extern char tessi_orphan_marks[TESS_ORPHAN_LISTS];
static inline bool tessi_is_orphan_owner(const tess_heap_t *owner) {
  return (uintptr_t)owner - (uintptr_t)tessi_orphan_marks < TESS_ORPHAN_LISTS;
}
/* The lock of orphan list `shard` of class cls: tests hold it, so that
 * frees into its orphans miss it, and let it go with the unlock that
 * collects what they noted (test_fixed's "late"). */
tess_lock_t *tessi_orphan_list_lock(unsigned cls, unsigned shard);
void tessi_orphan_list_unlock(unsigned cls, unsigned shard);
/* The heap that owns a slab, or NULL (an orphan, or a free span). */
static inline tess_heap_t *tessi_owner_heap(const tess_page_t *d) {
  tess_heap_t *owner = atomic_load_explicit(&d->owner, memory_order_relaxed);
  return tessi_is_orphan_owner(owner) ? NULL : owner;
}

/* A block of class cls (slow path: refills, new slabs; in fixed mode,
 * when may_borrow, a block of a larger class's slab). NULL when out of
 * memory. */
void *tessi_heap_malloc_class(tess_heap_t *h, unsigned cls, bool may_borrow);
/* Every this many slab slow paths, one is tessi_heap_malloc_class whatever
 * the slab holds: the heap's chores run there (delayed frees, the sweep of
 * empty current slabs, statistics samples). */
#define TESS_FULL_SLOW_PATH_EVERY 8
/* h's current slab d (for some size) ran dry: if the owner has freed
 * blocks into it, they become its free list, unless the full slow path is
 * due, other threads' frees wait on the slab (the full path takes them
 * too, so they are used first, as before) or on h's delayed list. About
 * 10 instructions where tessi_heap_malloc_class takes 240: in OE's sample
 * the 1-3 KiB classes hold 2-5 blocks per slab, and half their slow paths
 * found nothing to do but this. False: take the full slow path. */
static inline bool tessi_heap_refill_local(tess_heap_t *h, tess_page_t *d) {
  if (d->local_free == NULL || h->slab_slow_paths % TESS_FULL_SLOW_PATH_EVERY == 0 ||
      atomic_load_explicit(&d->remote, memory_order_relaxed) != 0 ||
      atomic_load_explicit(&h->delayed, memory_order_relaxed) != NULL) {
    return false;
  }
  h->slab_slow_paths++;
  h->reattached = 0; /* an allocation: the heap is not just freeing (heap.c) */
  d->free = d->local_free;
  d->local_free = NULL;
  return true;
}
/* The owner pushed a block onto d->local_free and the decremented state
 * is <= 0: the slab was detached, or its last block came back, or nothing
 * was out at all (a double free, reported). */
void tessi_heap_local_free_done(tess_heap_t *h, tess_page_t *d);
/* A free by a thread that does not own slab d. */
void tessi_heap_free_remote(tess_page_t *d, tess_block_t *b);
/* Free of block b of slab d by the thread holding heap h (owner or not). */
void tessi_heap_free_block(tess_heap_t *h, tess_page_t *d, tess_block_t *b);
/* The region is out of memory: trims self and every idle heap in the
 * pool (collects their frees, returns their empty slabs and caches; in
 * fixed mode their partial slabs become orphans, which any heap takes).
 * The caller then tries once more, whatever the footprint did: another
 * thread's allocation meanwhile may hide what was freed. self may be NULL
 * (a thread without a heap). */
void tessi_heap_reclaim(tess_heap_t *self);
/* Fixed mode, no page left for a slab: a block of an orphan of class cls,
 * or with `larger` of a class that may lend it blocks (heap.c, borrowing),
 * taken without taking the slab; NULL when none has room. For a heap out
 * of pages, and a thread that could get no heap at all. */
void *tessi_orphan_block(unsigned cls, bool larger);
/* Locks and lets go of every orphan list with a late free noted, so that
 * the notes a holder left for the list's next holder are collected (the
 * reclaim, fork()'s child; heap.c, orphan_note_late). */
void tessi_orphans_collect_noted(void);
/* The heap's cache of freed large spans. Large spans freed by the thread
 * that allocated them are kept by its heap (lengths up to
 * TESS_SPAN_CACHE_PAGES pages), so a thread that allocates and frees large
 * blocks does not take its partition's lock each time. A kept span stays a
 * LARGE span in the partition's eyes, marked TESS_LARGE_CACHED. Take: one
 * of at least `pages` pages (below), now h's, or NULL. Keep: false when
 * over budget (free it then).
 * The budget follows how well the cache works for this heap: each take
 * that finds a span raises span_score, each that finds none lowers it
 * (once the heap has kept a span in its call: heap.c, span_missed); at
 * TESS_SPAN_SCORE_LOW and above the heap may keep TESS_HEAP_CACHE bytes,
 * below it tessi_span_budget_low. A thread that frees and allocates large
 * blocks in turn (OE's allocation sample: 99 % found) keeps its spans; one
 * whose freed spans mostly wait in vain (a burst of mixed sizes: 25 %
 * found) does not pin them. That low budget is TESS_SPAN_SMALL, and
 * TESS_SPAN_LOW_FIXED in a fixed region: in workload B (20 calls at once,
 * each heap's cache below the mark) 8 KiB rather than 32 held 0.3 MiB
 * less of the region at the same speed.
 * A heap whose cache works takes a span up to TESS_SPAN_SLACK pages longer
 * when it keeps none of the exact length. Without that, the count kept of
 * each length drifts like a random walk (a 2-page block freed, a 4-page one
 * wanted) until the budget is full; with it, OE's sample with all 16 calls
 * at once peaks 0.6 MiB lower (8.4 -> 7.8 MiB), at the same hit rate. */
#define TESS_SPAN_SCORE_MAX 64
#define TESS_SPAN_SCORE_LOW 16
#define TESS_SPAN_SMALL ((size_t)32 << 10)
#define TESS_SPAN_LOW_FIXED ((size_t)8 << 10)
extern size_t tessi_span_budget_low; /* set once at init, <= TESS_HEAP_CACHE (init.c) */
#define TESS_SPAN_SLACK 2
/* A widened heap (heap.c: its trips find the partition busy) takes a span
 * up to TESS_SPAN_SLACK_WIDE pages longer. There trips queue on the
 * partitions: in OE's sample on 16 CPUs each cost its call about 3 us.
 * With all 16 calls at once, the longer reach sent 0.5 % of the
 * iterations to a partition for a span instead of 1.3 % (and as many
 * frees), and 3,000,000 iterations per call took 208 ms instead of 274
 * (snmalloc: 202). The longer blocks hold 0.1 MiB more at once, which
 * the wider borrowing window (types.h) pays for. */
#define TESS_SPAN_SLACK_WIDE 3
/* Spans beyond the heap's budget go back, longest first (heap.c). */
void tessi_heap_span_shrink(tess_heap_t *h);
/* Every span the heap keeps goes back (heap.c). */
void tessi_heap_span_drain(tess_heap_t *h);
/* A take missed and the heap goes to its partition: in a fixed region,
 * counts the trip and whether the partition was busy, which widens the
 * heap's budget (heap.c). */
void tessi_heap_span_trip(tess_heap_t *h);
/* A cached span of `pages` pages, out of the cache and h's again; or NULL.
 * Its large_owner is h already (only the owner keeps a span), and `next`
 * means nothing to an allocated large head (every list that takes it
 * again sets both links). */
static inline tess_page_t *tessi_heap_span_pop(tess_heap_t *h, size_t pages) {
  tess_page_t *d = h->spans[pages];
  if (d == NULL) return NULL;
  h->spans[pages] = d->next;
  h->span_pages -= pages;
  d->flags &= (uint16_t)~TESS_LARGE_CACHED;
  return d;
}
/* The exact length kept: the score rises (inline: nearly every take of
 * OE's sample finds one). */
static inline tess_page_t *tessi_heap_span_take_exact(tess_heap_t *h, size_t pages) {
  tess_page_t *d = tessi_heap_span_pop(h, pages);
  if (d != NULL) h->span_score += h->span_score < TESS_SPAN_SCORE_MAX;
  return d;
}
/* When the exact length is not kept: a span up to TESS_SPAN_SLACK pages
 * longer (TESS_SPAN_SLACK_WIDE for a widened heap), or NULL, and the miss
 * counted (heap.c). */
tess_page_t *tessi_heap_span_take_longer(tess_heap_t *h, size_t pages);
/* A kept span of `pages` to `pages` + TESS_SPAN_SLACK (_WIDE) pages, or NULL.
 * (0 pages, a size within a page of SIZE_MAX rounded up, finds none.) */
static inline tess_page_t *tessi_heap_span_take(tess_heap_t *h, size_t pages) {
  if (pages - 1 >= TESS_SPAN_CACHE_PAGES) return NULL;
  tess_page_t *d = tessi_heap_span_take_exact(h, pages);
  return d != NULL ? d : tessi_heap_span_take_longer(h, pages);
}

/* TESS_HEAP_CACHE, or less while many heaps are in use (heap.c) */
extern _Atomic(size_t) tessi_heap_cache_now[2]; /* [h->span_wide] */
static inline size_t tessi_heap_span_budget(const tess_heap_t *h) {
  /* (tessi_span_budget_low is never above the full budget: init.c) */
  if (h->span_score < TESS_SPAN_SCORE_LOW) return tessi_span_budget_low;
  return atomic_load_explicit(&tessi_heap_cache_now[h->span_wide], memory_order_relaxed);
}

static inline bool tessi_heap_span_keep(tess_heap_t *h, tess_page_t *d) {
  size_t pages = d->u.span.pages;
  if (pages > TESS_SPAN_CACHE_PAGES ||
      (h->span_pages + pages) << TESS_PAGE_SHIFT > tessi_heap_span_budget(h)) {
    return false;
  }
  d->flags |= TESS_LARGE_CACHED;
  d->next = h->spans[pages];
  h->spans[pages] = d;
  h->span_pages += pages;
  h->span_unfed = false;
  return true;
}
/* The calling thread's heap now (from the pool, a thread gone, or made);
 * NULL when none can be had: in a fixed region, past the cap on heaps
 * (tessi_fixed_heaps_allowed), or with no room for a struct. */
tess_heap_t *tessi_heap_acquire(void);
void tessi_heap_release(tess_heap_t *h);
/* Fixed mode, at init: the cap on heaps, and the place of the heap that
 * threads which can have none of their own share under a lock (the first
 * chunk's first struct; made at its first use). */
void tessi_heap_shared_init(void);
/* A block of class cls from the shared heap, under its lock, or without
 * one a block of an orphan; NULL when out of memory (the shared heap's
 * slow path has reclaimed what idle heaps held, and looked at the orphans,
 * by then). */
void *tessi_heap_shared_malloc(unsigned cls, bool may_borrow);
/* A thread without a heap of its own ends a call (tess_thread_cleanup):
 * if it allocated from the shared heap, that is trimmed like a heap given
 * back. */
void tessi_heap_shared_done(void);
/* Every heap ever made, newest first, linked by next_made (heaps are never
 * freed, so the list only grows); and how many sit in the pool. */
extern _Atomic(tess_heap_t *) tessi_heaps_made;
size_t tessi_heap_pool_length(void);

/* Counting (stats.c merges). The thread holding a heap adds to its
 * counters with plain adds: readers load them relaxed, and an aligned
 * 64-bit store does not tear on the targets we build for. Under TSan the
 * adds are atomic, so that it checks everything else. Threads without a
 * heap count in tessi_stats_shared, atomically. */
#if defined(TESS_COUNTERS) && !TESS_COUNTERS /* a build measuring their cost */
#define TESS_STAT_ADD(counter, n) ((void)(n))
#elif defined(__SANITIZE_THREAD__)
#define TESS_STAT_ADD(counter, n) ((void)__atomic_fetch_add(&(counter), (n), __ATOMIC_RELAXED))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TESS_STAT_ADD(counter, n) ((void)__atomic_fetch_add(&(counter), (n), __ATOMIC_RELAXED))
#endif
#endif
#ifndef TESS_STAT_ADD
#define TESS_STAT_ADD(counter, n) ((void)((counter) += (n)))
/* counter array[index] += 1 as one x86-64 add to memory: GCC would form
 * the address first (one instruction more on the malloc fast path) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TESS_STAT_INC_AT(array, index) __asm__("addq $1, %0" : "+m"((array)[index]))
#endif
#endif
#ifndef TESS_STAT_INC_AT
#define TESS_STAT_INC_AT(array, index) TESS_STAT_ADD((array)[index], 1)
#endif
extern tess_heap_stats_t tessi_stats_shared;
/* What malloc's fast path has counted for class c: its direct[] slots
 * (sizes up to TESS_SMALL_MAX), else allocs[c]. Loads are relaxed: the
 * merge reads other threads' counters. */
static inline uint64_t tessi_fast_allocs(const tess_heap_stats_t *s, unsigned c) {
  const tess_class_info_t *info = &tessi_classes[c];
  if (info->slot_count == 0) return __atomic_load_n(&s->allocs[c], __ATOMIC_RELAXED);
  uint64_t sum = 0;
  for (unsigned slot = info->first_slot; slot < info->first_slot + info->slot_count; slot++) {
    sum += __atomic_load_n(&s->slot_allocs[slot], __ATOMIC_RELAXED);
  }
  return sum;
}
/* Adds n to `field` of the calling thread's counters (off the fast paths). */
#define TESS_STAT_MINE(field, n)                                                  \
  do {                                                                            \
    tess_heap_t *stat_heap_ = tessi_tls_heap;                                     \
    if (stat_heap_ != &tessi_heap_empty)                                          \
      TESS_STAT_ADD(stat_heap_->stats.field, (n));                                \
    else                                                                          \
      (void)__atomic_fetch_add(&tessi_stats_shared.field, (n), __ATOMIC_RELAXED); \
  } while (0)
void tessi_heaps_fork_prepare(void);
void tessi_heaps_fork_parent(void);
void tessi_heaps_fork_child(void);
/* A fork() child with heaps marked `abandoned` (heap.c): their slabs and
 * counters are as the fork found them, maybe mid-operation (check.c). */
extern bool tessi_heaps_abandoned;

/* ----------------------------------------------------------------- large */
/* The span of a new large block of at least `size` bytes, or NULL.
 * try_cache: look in h's span cache first (false when the caller has).
 * h NULL: a thread that could get no heap (fixed mode, no room for its
 * struct): the block is nobody's to keep. */
tess_page_t *tessi_large_alloc(tess_heap_t *h, size_t size, size_t align, bool zero,
                               bool try_cache);
/* A large block freed by a thread other than its owner: claimed (BUSY;
 * another free of it at once is reported), counted, and back to its
 * partition (large.c). */
void tessi_large_free_other(tess_page_t *d);
/* Free a large block: its owner keeps it if its cache has room (inline:
 * four frees in five of OE's sample). */
static inline void tessi_large_free(tess_page_t *d) {
  tess_heap_t *h = tessi_tls_heap;
  /* large_owner is never the empty heap: a thread without a heap keeps none */
  if (d->large_owner == h) {
    TESS_STAT_ADD(h->stats.large_frees, 1);
    TESS_STAT_ADD(h->stats.large_bytes_out, (size_t)d->u.span.pages << TESS_PAGE_SHIFT);
    if (tessi_heap_span_keep(h, d)) return;
    tessi_pages_free(d, d->u.span.pages);
    return;
  }
  tessi_large_free_other(d);
}
/* Resize in place (shrink, or grow into a free right neighbour). */
bool tessi_large_resize(tess_region_t *r, tess_page_t *d, size_t size);
/* a fresh mapping: reads as zero */
void *tessi_huge_alloc(size_t size, size_t align);
/* usable size of a huge block starting at p, 0 if p is not one */
size_t tessi_huge_usable(const void *p);
bool tessi_huge_free(void *p);
void *tessi_huge_realloc(void *p, size_t size);
/* visit(block, its size less `tag`, arg) for every huge block, in no
 * particular order, under the table's lock; the first nonzero answer
 * stops it and is returned (check.c, tess_heap_visit). */
int tessi_huge_visit(int (*visit)(void *ptr, size_t size, void *arg), void *arg, size_t tag);
/* The huge blocks live now, and their bytes, as the table holds them. */
void tessi_huge_live(size_t *count, size_t *bytes);
/* The most huge blocks, and bytes of them, live at once so far. */
void tessi_huge_peaks(size_t *count, size_t *bytes);
void tessi_huge_fork_prepare(void);
void tessi_huge_fork_parent(void);
void tessi_huge_fork_child(void);

/* ----------------------------------------------------------------- stats */
struct tess_stats;
/* Every slab (and kept span) of every region, counted (check.c): with
 * its partitions locked when `lock`; without, a span changing meanwhile
 * may be counted wrong. */
void tessi_slab_census(tess_slab_census_t *census, bool lock);
/* The calling thread is in a tess_heap_visit callback (check.c). */
extern __thread bool tessi_in_visit;
/* Every counter added up, peaks updated (stats.c). */
void tessi_stats_merge(struct tess_stats *s);
/* The live bytes of a merge, without the caller holding the 5.4 KiB struct
 * (oe_allocator_mallinfo). */
uint64_t tessi_stats_live_bytes(void);
/* The merge's lock (stats.c) and the heap walk's (check.c) across fork();
 * the output's mutex, made anew in the child (stats_os.c, not in OE
 * builds). */
void tessi_stats_fork(tess_fork_phase_t phase);
void tessi_check_fork(tess_fork_phase_t phase);
void tessi_stats_output_fork_child(void);
/* s as one JSON object (time_ms, pid < 0: no such field); snprintf's
 * contract. */
size_t tessi_stats_json(char *buf, size_t size, const struct tess_stats *s, int64_t time_ms,
                        int64_t pid);
/* A merge when the footprint has grown by 1/64 since the last, so that
 * peaks of live bytes are seen: two loads when not (inline, on every
 * allocation slow path). */
extern _Atomic(size_t) tessi_stats_next_sample;
void tessi_stats_sample(size_t peak, size_t next);
static inline void tessi_stats_sample_if_grown(void) {
  size_t peak = tessi_footprint_peak();
  size_t next = atomic_load_explicit(&tessi_stats_next_sample, memory_order_relaxed);
  if (TESS_UNLIKELY(peak >= next)) tessi_stats_sample(peak, next);
}
/* TESS_STATS_INTERVAL_MS (OS builds), nonzero while the allocation slow
 * path calls tessi_stats_series_tick (stats_os.c): 1 in fixed mode, where
 * it writes the series; 2 until the first slow path after load or fork()
 * starts the series of the mode (OS mode: a sampler thread, then 0). */
extern _Atomic(int) tessi_stats_series_on;
void tessi_stats_series_tick(void);

/* ------------------------------------------------------------------ init */
extern _Atomic(int) tessi_ready;
/* Initializes the process state once; false if no memory could be had. */
bool tessi_ensure_init(void);
/* Arrange for h to be released when the calling thread exits. */
void tessi_thread_attach(tess_heap_t *h);
/* The calling thread's exit destructor has run (init.c): a heap it takes
 * again, for an allocation in a later destructor, goes back at once. */
extern __thread bool tessi_tls_exiting;

#pragma GCC visibility pop

#endif /* TESS_INTERNAL_H */
