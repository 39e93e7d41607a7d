/* tessalloc internal types: the one header that defines every structure.
 *
 * Memory model (see docs/design.md):
 *   region     one contiguous range of address space: the primary region
 *              (OS mode: a large reservation; fixed mode: the user's range)
 *              plus, in OS mode only, overflow regions. Its first pages hold
 *              the region header and one descriptor per 4 KiB page of the
 *              rest.
 *   partition  a slice of a region's pages with its own lock and span
 *              allocator, so threads do not all contend on one lock.
 *   span       a run of pages: free, a slab, or a large block.
 *   slab       a span cut into blocks of one size class.
 *   heap       per-thread (pooled) bins of slabs.
 *   huge       OS mode only: blocks with a mapping of their own.
 */
#ifndef TESS_TYPES_H
#define TESS_TYPES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- sizes */

#define TESS_PAGE_SHIFT 12
#define TESS_PAGE_SIZE ((size_t)1 << TESS_PAGE_SHIFT)
#define TESS_MIN_ALIGN 16

/* Size classes: multiples of 16 up to 128 bytes, then four per doubling up
 * to TESS_SLAB_MAX_SIZE. Blocks above the slab limit are page spans. */
#define TESS_EXACT_CLASSES 8 /* 16, 32, ..., 128 */
#define TESS_CLASSES 44      /* ..., 57344, 65536 */
#define TESS_SLAB_MAX_SIZE 65536
#define TESS_SMALL_MAX 1024 /* sizes served by heap->direct[] */
#define TESS_DIRECT_SLOTS (TESS_SMALL_MAX / 16 + 1)
#define TESS_SLAB_MAX_PAGES 128 /* head_delta fits 16 bits */
/* Fixed mode: a seldom-used class may borrow blocks up to this many times
 * its own size from a larger class's slab (heap.c). OE's sample, every
 * call at once: 2x pinned 0.16 MiB more in current slabs than 4x, which
 * costs 1.5 % more instructions at one thread (borrowings start and end
 * more often) at the same wall time. 8x: 0.1 MiB less again (the classes
 * up to 1 KiB find a lender), which pays for TESS_SPAN_SLACK_WIDE, at 3 %
 * more of the allocator's instructions at one thread, wall times within
 * their spread; workload B unchanged (an early version cost it calls per
 * second; none now, 3 x 15 s per host). */
#define TESS_BORROW_WINDOW 8

#define TESS_SPAN_CACHE_PAGES 32 /* large spans a heap may keep: 1..32 pages */

#define TESS_MAX_PARTITIONS 16 /* and what TESS_PARTITIONS may ask for */
/* Fixed regions: partitions in use from the start (more are opened as
 * these fill: region.c). 4 rather than 8 lay half the descriptors at
 * init (OE's sample, 16 calls at once: 0.13 MiB less), at the same speed
 * in both workloads; workload B, which opens about 9 as it fills, the
 * same footprint and calls per second (eighth session of 2026-11-25). */
#define TESS_FIXED_OPEN_PARTITIONS 4
/* A fixed region above 1 GiB gets more than 16 partitions, none larger
 * than this (up to TESS_FIXED_MAX_PARTITIONS), and opens at first only
 * as many as cover TESS_FIXED_OPEN_BYTES: a partition's descriptors are
 * laid when it opens, 1/64 of its size, and 8 of 16 partitions of a 64
 * GiB region laid 512 MiB of them at init (region.c). */
#define TESS_FIXED_PARTITION_MAX ((size_t)64 << 20)
#define TESS_FIXED_MAX_PARTITIONS 1024
#define TESS_FIXED_OPEN_BYTES ((size_t)512 << 20)
#define TESS_SPAN_BINS 128 /* free-span size bins (page counts) */

/* ----------------------------------------------------------- page kinds */

/* Every page of a region has a descriptor. Only span heads, the last page
 * of a free span, and the pages of a slab carry meaning; every other
 * descriptor is zero (kind NONE, head_delta 0, owner NULL). That invariant
 * is what lets free() reject interior and stale pointers without a search:
 * in particular a descriptor whose owner is the calling thread's heap is a
 * live slab head. */
enum tess_page_kind {
  TESS_PAGE_NONE = 0,      /* interior of a span, or never used */
  TESS_PAGE_SLAB = 1,      /* head of a slab */
  TESS_PAGE_LARGE = 2,     /* head of a large block */
  TESS_PAGE_FREE = 3,      /* head of a free span */
  TESS_PAGE_FREE_TAIL = 4, /* last page of a free span of 2+ pages */
  TESS_PAGE_META = 5,      /* region header, descriptors, heap structs */
  TESS_PAGE_BUSY = 6,      /* free span out of the bins: being purged, or deferred;
                              a large block another thread is freeing (large.c) */
};

/* slab->state: blocks out (allocated, or freed remotely and not yet
 * collected), plus one while the slab is its bin's current slab, so that
 * the current slab never looks empty to free(); the top bit marks a full
 * slab that left its bin. free() takes its slow path exactly when the
 * decremented state is <= 0 as a signed 16-bit number. */
#define TESS_STATE_DETACHED INT16_MIN
#define TESS_STATE_COUNT INT16_MAX

/* flags of a large head */
#define TESS_LARGE_CACHED 0x01 /* free, kept in its heap's span cache */

/* flags of a free span head */
#define TESS_SPAN_ZERO 0x01 /* every byte known to be zero (dirty pages: span_dirty) */

/* low bit of slab->remote: the slab is detached and the next remote free
 * must tell the owner (blocks are 16-byte aligned, so the bit is free) */
#define TESS_REMOTE_NOTIFY ((uintptr_t)1)

typedef struct tess_block_s {
  struct tess_block_s *next;
} tess_block_t;

struct tess_heap_s;

/* The page descriptor: 64 bytes, one cache line. Field use depends on kind;
 * the layout keeps what free() reads in the first half. */
typedef struct tess_page_s {
  union {
    tess_block_t *free;              /* slab: blocks to allocate */
    struct tess_heap_s *large_owner; /* large: the heap that allocated it */
    uint64_t span_dirty;             /* free head: pages that may be resident (span.c) */
  };
  union {
    tess_block_t *local_free; /* slab: blocks freed by the owner */
    void *large_block;        /* large: its address (malloc finds it in one load) */
  };
  int16_t state; /* slab: TESS_STATE_* */
  union {
    uint16_t capacity; /* slab: blocks carved so far */
    uint16_t flags;    /* free span: TESS_SPAN_* */
  };
  uint16_t head_delta; /* slab pages: bytes back to the head's descriptor
                          (pages * sizeof(tess_page_t)), else 0 */
  uint8_t size_class;  /* slab */
  uint8_t kind;        /* enum tess_page_kind */
  union {
    uint64_t div_magic; /* slab: ceil(2^64 / block_size), block-start test */
    struct {
      uint32_t pages;       /* large/free head: span length; free tail: distance to head */
      uint32_t freed_at_ms; /* free head: when it became dirty (purge clock) */
    } span;
  } u;
  _Atomic(uintptr_t) remote;           /* slab: blocks freed by other threads | NOTIFY */
  _Atomic(struct tess_heap_s *) owner; /* slab: owning heap */
  struct tess_page_s *next;            /* slab: bin list; free span: size-bin list */
  struct tess_page_s *prev;
} tess_page_t;

_Static_assert(sizeof(tess_page_t) == 64, "page descriptor must stay one cache line");

/* ------------------------------------------------------------- regions */

typedef struct tess_lock_s {
  _Atomic(uint32_t) held;
} tess_lock_t;

/* Cache-line aligned, with the deferred stack on a line of its own: the
 * partitions lie side by side in the region header, and with 16 calls
 * at once on 16 cores a partition's lock shared its line with the
 * previous partition's deferred stack and region pointer (OE's sample,
 * 16 threads: 10 % less time). */
typedef struct tess_partition_s {
  /* set when the region is made, then only read, on a line of their own:
   * every span free and every trip asks a partition's range, and on the
   * lock's line (partition 0's range also places every page) they missed
   * whenever another core had locked it (OE's sample, 16 threads on 16
   * CPUs: 5.7 % of the samples were those reads) */
  _Alignas(64) uint32_t first_page; /* page index range [first_page, end_page) */
  uint32_t end_page;
  struct tess_region_s *region;
  _Alignas(64) tess_lock_t lock;
  uint32_t next_purge_ms;
  uint32_t purging; /* purges between their unlock and relock (span.c), under the lock */
  /* fixed regions: one past the highest page ever handed out, under the
   * lock; the pages above it were never touched (span.c) */
  uint32_t high_water;
  size_t free_pages;
  /* the footprint's share (span.c), written under the lock and read
   * without it: pages handed out (free_pages' other side), and pages
   * counted in the global bound beyond those */
  _Atomic(size_t) used_pages;
  _Atomic(size_t) slack_pages;
  uint64_t nonempty[TESS_SPAN_BINS / 64]; /* bit b: bins[b] has spans */
  _Atomic(uint32_t) bins_used;            /* highest b with spans, + 1: a lock-free peek */
  _Atomic(bool) near_peak;                /* span.c: the bound was near the peak at its last look */
  tess_page_t *bins[TESS_SPAN_BINS];
  /* fixed regions: spans freed while the lock was busy, and frees pushing
   * one now (span.c) */
  _Alignas(64) _Atomic(tess_page_t *) deferred;
  _Atomic(uint32_t) pushing;
  /* on the stack: in used_pages until drained, but free from the push on,
   * so neither in the footprint nor in the bound (span.c) */
  _Atomic(size_t) deferred_pages;
} tess_partition_t;

typedef struct tess_region_s {
  uintptr_t base;     /* page i starts at base + i * TESS_PAGE_SIZE */
  size_t size;        /* bytes of the whole region, header included */
  tess_page_t *pages; /* descriptor of page i = pages[i] */
  size_t page_count;  /* pages from base (the header's have none) */
  bool is_fixed;      /* the user's memory: never decommitted or unmapped */
  uint32_t partition_count;
  _Atomic(uint32_t) next_partition;          /* round robin for new heaps */
  _Atomic(uint32_t) open_partitions;         /* fixed: the first ones, in use */
  bool fresh_zero;                           /* the memory was zero when given */
  struct tess_region_s *_Atomic next_region; /* OS mode overflow regions */
  tess_partition_t partitions[];             /* partition_count of them */
} tess_region_t;

/* ---------------------------------------------------------------- heaps */

typedef struct tess_bin_s {
  tess_page_t *first; /* slabs with free blocks, current first */
  tess_page_t *last;
} tess_bin_t;

/* Counters of one heap, written only by the thread that holds the heap
 * and read by anyone (stats.c merges them). Slab blocks are counted by
 * class except on the small malloc fast path, which counts by its direct[]
 * slot (no class lookup). A fixed heap's class may borrow another class's
 * slab (heap.c): what its fast path counted meanwhile is moved to the
 * lender's class when the borrowing ends (allocs of the lender, lent of
 * the borrower), and the merge moves what an ongoing borrowing counted so
 * far (stats.c, add_allocs). Slab frees are not counted: a
 * slab's state already counts its blocks out, so stats.c finds the live
 * blocks by walking the slabs and derives frees = allocs - live; the
 * counters here only track the frees that other threads left on a slab's
 * remote stack or a heap's delayed list, which the state still counts as
 * out (pending_in when pushed, by the freeing thread; pending_out when
 * taken off, by the thread that does it). So a heap's counters may be
 * negative alone. */
typedef struct tess_heap_stats_s {
  uint64_t slot_allocs[TESS_DIRECT_SLOTS]; /* the small fast path, by direct[] slot */
  uint64_t allocs[TESS_CLASSES];
  uint64_t lent[TESS_CLASSES]; /* counted in this class, made in a lender's slab */
  uint64_t pending_in[TESS_CLASSES];
  uint64_t pending_out[TESS_CLASSES];
  uint64_t slabs_made[TESS_CLASSES]; /* formatted for the class */
  uint64_t slabs_done[TESS_CLASSES]; /* emptied, no longer of the class */
  uint64_t large_allocs, large_frees, large_bytes_in, large_bytes_out;
  uint64_t huge_allocs, huge_frees, huge_bytes_in, huge_bytes_out;
  uint64_t requested_in, requested_out; /* built with TESS_STATS_REQUESTED */
  /* large allocations the span cache did not serve (trips to a partition);
   * fixed mode: those made while the heap was narrow, the ones of those
   * that found the partition busy, and the calls in which it widened */
  uint64_t span_trips, span_trips_narrow, span_trips_busy, span_widenings;
} tess_heap_stats_t;

typedef struct tess_heap_s {
  /* current slab per size, for sizes <= TESS_SMALL_MAX: direct[(n+15)/16] */
  tess_page_t *direct[TESS_DIRECT_SLOTS];
  /* bins[c].first, the empty page, or the slab class c borrows */
  tess_page_t *current[TESS_CLASSES];
  /* tessi_slab_limit (0 in the empty heap): read by malloc's fast path,
   * which may run before init */
  size_t slab_limit;
  tess_bin_t bins[TESS_CLASSES];
  /* fixed mode: 1 + the larger class whose current slab class c borrows
   * (heap.c), 0 when none; borrow_base[c]: c's fast-path count when it
   * began (both read by stats.c: written with relaxed atomic stores) */
  uint8_t borrow[TESS_CLASSES];
  uint8_t borrowers[TESS_CLASSES]; /* classes that borrow class c's slab now */
  uint64_t borrow_base[TESS_CLASSES];
  uint32_t slabs_owned[TESS_CLASSES]; /* slabs of each class it owns */
  tess_bin_t full;                    /* detached (full) slabs, any class */
  _Atomic(tess_block_t *) delayed;    /* remote frees into detached slabs */
  tess_page_t *empty_slabs;           /* cached empty slabs (any class) */
  size_t empty_slab_pages;
  tess_page_t *spans[TESS_SPAN_CACHE_PAGES + 1]; /* freed large spans, by length */
  size_t span_pages;
  uint32_t span_score;            /* how well its span cache works (internal.h) */
  bool span_unfed;                /* no span kept since the call took it (heap.c) */
  bool span_wide;                 /* fixed: its trips find the partition busy (heap.c) */
  uint32_t span_trips, span_busy; /* fixed: trips to the partition in this call, busy ones */
  tess_partition_t *home;         /* where new spans come from */
  uint32_t shard;                 /* which orphan lists it uses first */
  bool is_shared;                 /* fixed: the heap of calls past the cap (heap.c) */
  bool abandoned; /* a fork() child's copy of a heap that another thread used (heap.c) */
  uint32_t reattached;            /* fixed: full slabs freed into since the last malloc slow path */
  uint32_t slab_slow_paths;       /* every 8th is a full one; fixed: it gives back an empty
                                     current slab (heap.c) */
  struct tess_heap_s *next_idle;  /* pool links: next is colder */
  struct tess_heap_s *prev_idle;
  _Atomic(bool) pooled;          /* fixed: in the pool (heap.c, idle_collect) */
  struct tess_heap_s *next_made; /* every heap ever made (never freed) */
  _Atomic(uint64_t) holder;      /* who holds it, and how often taken (heap.c) */
  tess_heap_stats_t stats;
} tess_heap_t;

/* ---------------------------------------------------------- size classes */

typedef struct tess_class_info_s {
  uint32_t block_size;
  uint32_t slab_pages;
  uint32_t slab_blocks;
  uint32_t extend_blocks; /* blocks carved at a time (lazy slab init) */
  uint64_t div_magic;
  /* fixed mode: the classes that may lend it blocks are (c, lends_to_top],
   * the lowest that may borrow from it borrows_from_low (heap.c) */
  uint8_t lends_to_top, borrows_from_low;
  /* sizes up to TESS_SMALL_MAX: heap->direct[first_slot] and the next
   * slot_count - 1 slots point at the class's current slab (1, 2, 4 or 8
   * slots; 0 above) */
  uint8_t first_slot, slot_count;
} tess_class_info_t;

/* --------------------------------------------------------- slab census */

/* Who holds a slab, for the census's free bytes. */
enum { TESS_HOLDER_CURRENT, TESS_HOLDER_HEAP, TESS_HOLDER_ORPHANS, TESS_HOLDERS };
/* Every slab counted (check.c), for the statistics (stats.c). */
typedef struct tess_slab_census_s {
  /* out[c]: blocks every slab of class c counts out (allocated, or freed
   * by another thread and still on a list), the current slabs' bias left
   * out */
  uint64_t out[TESS_CLASSES];
  uint64_t orphaned[TESS_CLASSES]; /* slabs of class c no heap holds */
  /* bytes of those slabs not in blocks out, by holder */
  uint64_t free_bytes[TESS_HOLDERS];
  uint64_t empty_bytes; /* empty slabs kept in heaps' caches (no class) */
  uint64_t kept_bytes;  /* freed large spans kept in heaps' caches */
  uint64_t large_blocks, large_bytes; /* live large blocks (not kept) */
} tess_slab_census_t;

/* ---------------------------------------------------------- huge blocks */

typedef struct tess_huge_s {
  uintptr_t ptr; /* start of the mapping, what malloc returned;
                    0 = empty slot, 1 = deleted */
  size_t size;   /* bytes mapped (and usable) */
} tess_huge_t;

/* --------------------------------------------------------------- options */

typedef struct tess_options_s {
  uint32_t decommit_delay_ms; /* TESS_DECOMMIT_DELAY_MS */
  size_t decommit_min;        /* TESS_DECOMMIT_MIN: smaller free spans stay */
  size_t reserve;             /* TESS_RESERVE: OS-mode primary region size */
  bool reserve_given;         /* a valid TESS_RESERVE was read (else: init.c's default) */
  size_t huge_threshold;      /* TESS_HUGE_THRESHOLD: own mapping from here */
  size_t heap_cache;          /* TESS_HEAP_CACHE: freed span bytes a heap keeps */
  uint32_t partitions;        /* TESS_PARTITIONS: 0 = automatic */
  size_t heap_size;           /* TESS_HEAP_SIZE: run in one fixed region of this
                                 size (0: OS mode) */
  uint32_t stats_at_exit;     /* TESS_STATS: 0 none, 1 table, 2 JSON */
  uint32_t stats_interval_ms; /* TESS_STATS_INTERVAL_MS: 0 = no series */
  const char *stats_file;     /* TESS_STATS_FILE: NULL = standard error */
} tess_options_t;

#endif /* TESS_TYPES_H */
