/* tessalloc — a scalable malloc for Linux and for fixed heaps.
 *
 * Public API. Every function here behaves like its C/POSIX/glibc namesake
 * (same arguments, same errno conventions); the libtessalloc shared and
 * static libraries also export the standard names (malloc, free, ...) so
 * that preloading or linking replaces the whole malloc family.
 */
#ifndef TESSALLOC_H
#define TESSALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSALLOC_VERSION_MAJOR 0
#define TESSALLOC_VERSION_MINOR 1
#define TESSALLOC_VERSION_PATCH 0

#if defined(__GNUC__)
#define TESS_API __attribute__((visibility("default")))
#define TESS_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#define TESS_ALLOC_SIZE(...) __attribute__((alloc_size(__VA_ARGS__)))
#else
#define TESS_API
#define TESS_MALLOC_ATTR
#define TESS_ALLOC_SIZE(...)
#endif

/* The malloc family. Failure: NULL with errno = ENOMEM (EINVAL for a bad
 * alignment where the standard says so). Sizes above PTRDIFF_MAX fail. */
TESS_API void *tess_malloc(size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1);
TESS_API void *tess_calloc(size_t count, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1, 2);
TESS_API void *tess_realloc(void *ptr, size_t size) TESS_ALLOC_SIZE(2);
TESS_API void *tess_reallocarray(void *ptr, size_t count, size_t size) TESS_ALLOC_SIZE(2, 3);
TESS_API void tess_free(void *ptr);

/* Sized deallocation (C23). `size` must be the size that was requested (or
 * any value between it and the usable size); `alignment` the alignment. */
TESS_API void tess_free_sized(void *ptr, size_t size);
TESS_API void tess_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* Aligned allocation: any power-of-two alignment. aligned_alloc and memalign
 * accept alignments below sizeof(void *); posix_memalign returns EINVAL for
 * them and for non-powers of two (and leaves *out untouched). */
TESS_API void *tess_aligned_alloc(size_t alignment, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(2);
TESS_API int tess_posix_memalign(void **out, size_t alignment, size_t size);
TESS_API void *tess_memalign(size_t alignment, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(2);
TESS_API void *tess_valloc(size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1);
TESS_API void *tess_pvalloc(size_t size) TESS_MALLOC_ATTR;

/* Bytes usable at ptr (>= the size requested; all of them writable).
 * 0 for NULL. */
TESS_API size_t tess_usable_size(const void *ptr);

/* "tessalloc 0.1.0" — for logs and benchmark metadata. */
TESS_API const char *tess_version_string(void);

/* ---- fixed-heap mode ----
 * Makes [start, end) the only memory tessalloc uses: every byte of its
 * metadata is carved from inside it and no OS memory call (mmap, munmap,
 * mremap, madvise, brk, sbrk) happens afterwards; allocations fail with
 * ENOMEM when it is full. start and end need not be aligned; the range
 * must hold at least 1 MiB. Must come before the first allocation or
 * statistics read of the process (either starts the allocator; with the
 * preloaded library, set TESS_HEAP_SIZE instead).
 * Returns 0, EINVAL for a range that is too small or inverted, or EBUSY
 * when tessalloc is already initialized. */
TESS_API int tess_init_region(void *start, void *end);

/* Hands the calling thread's heap back to the pool now (in OS mode its
 * slabs stay warm for the next thread that takes it; in a fixed region its
 * empty slabs and caches go back, and slabs with live blocks are shared
 * with every heap); the thread may allocate again
 * later. Thread exit does this by itself, except in libtessalloc-oe.a
 * (no thread-exit hook there: OE calls oe_allocator_thread_cleanup, and
 * an embedder without OE calls this before a thread ends, or its heap
 * stays in use with what it holds); call it where a thread stops
 * allocating for a long time, or at the end of an enclave call. */
TESS_API void tess_thread_cleanup(void);

/* ---- statistics and introspection ----
 * Counters are kept per heap, with no atomics or locks, and merged when
 * read, so they are always on; live blocks are what a walk of the slabs
 * (and the huge-block table) finds. Read while other threads allocate, the
 * figures are a consistent-enough snapshot (not taken at one instant: live
 * counts may be off by the frees other threads make during the read's
 * walk); read with the program quiescent, they add up exactly. See
 * docs/mechanisms/stats.md. */

#define TESS_STATS_VERSION 3
#define TESS_STATS_MAX_CLASSES 64

struct tess_class_stats {
  uint64_t block_size;      /* bytes per block */
  uint64_t slab_pages;      /* 4 KiB pages per slab */
  uint64_t allocs;          /* blocks handed out, ever */
  uint64_t frees;           /* blocks given back, ever */
  uint64_t live_blocks;     /* allocs - frees */
  uint64_t live_bytes;      /* live_blocks * block_size */
  uint64_t slabs;           /* slabs of the class now */
  uint64_t slab_bytes;      /* slabs * slab_pages * 4096 */
  uint64_t peak_live_bytes; /* highest live_bytes seen by a merge (see docs) */
};

struct tess_span_stats { /* large (page spans) or huge (own mappings) blocks */
  uint64_t allocs, frees, live, live_bytes;
};

struct tess_stats {
  uint32_t version;     /* TESS_STATS_VERSION */
  uint32_t size;        /* bytes of this struct that were filled */
  uint32_t class_count; /* entries of classes[] in use (at most those size holds) */
  uint32_t fixed;       /* 1: fixed-heap mode (tess_init_region / TESS_HEAP_SIZE) */
  uint64_t footprint;      /* bytes of the region(s) handed out, metadata included */
  uint64_t peak_footprint; /* highest footprint so far (see tess_footprint) */
  uint64_t region_bytes;   /* fixed: the region; OS mode: address space reserved */
  uint64_t committed;      /* OS mode: footprint + free pages freed since their last
                              decommit (an upper bound: may read high after splits) */
  uint64_t decommitted;    /* OS mode: bytes given back to the OS so far (of pages
                              counted dirty: an upper bound) */
  uint64_t heaps_in_use;   /* heaps held by threads */
  uint64_t heaps_pooled;   /* idle heaps waiting for a thread */
  uint64_t allocs, frees;  /* all blocks: slab, large and huge */
  uint64_t live_bytes;     /* bytes of live blocks (block sizes, pages) */
  uint64_t slab_bytes;     /* bytes of all slabs */
  uint64_t peak_live_bytes;
  uint64_t requested_live_bytes; /* bytes asked for by live blocks; 0 unless
                                    built with TESS_STATS_REQUESTED */
  struct tess_span_stats large, huge;
  struct tess_class_stats classes[TESS_STATS_MAX_CLASSES];
  /* Version 2. The bytes of the slabs (slab_bytes) not in live blocks:
   * free, by who holds the slab (a heap, as the current slab of its
   * class; a heap, otherwise; no heap: fixed mode's orphans, which every
   * heap takes from), and freed by other threads, waiting on a list for
   * the slab's holder to collect them. Quiescent, the four add up to
   * slab_bytes less the classes' live_bytes. */
  uint64_t slab_free_current;
  uint64_t slab_free_held;
  uint64_t slab_free_orphaned;
  uint64_t slab_free_pending;
  uint64_t empty_slab_bytes; /* empty slabs heaps keep for reuse (not in slab_bytes) */
  uint64_t kept_span_bytes;  /* freed large spans heaps keep for reuse (not live) */
  uint64_t deferred_span_bytes; /* fixed mode: spans freed while their partition was locked,
                                   waiting for its next holder (free: not in the footprint) */
  uint64_t orphaned_slabs[TESS_STATS_MAX_CLASSES]; /* slabs of each class no heap holds */
  /* Version 3. Large allocations that no heap's span cache served, each a
   * trip to a partition and its lock (aligned ones and spans over 32 pages
   * always go). Fixed mode: of those, the trips made while the heap's
   * cache had its narrow budget, the ones of these that found the
   * partition locked, and the calls in which a heap widened its cache for
   * that (docs/mechanisms/fixed-heap.md); 0 in OS mode. */
  uint64_t span_trips;
  uint64_t span_trips_narrow;
  uint64_t span_trips_busy;
  uint64_t span_widenings;
};

/* Fills *out (struct_size = sizeof *out as the caller was compiled; an
 * older, shorter struct gets its prefix). Returns 0, EINVAL when
 * struct_size is below the version 1 prefix (offsetof classes), or
 * EDEADLK from a tess_heap_visit callback. */
TESS_API int tess_stats_get(struct tess_stats *out, size_t struct_size);

/* Bytes of memory the allocator holds now: the pages of its regions handed
 * out (to blocks, slabs, caches and heap structs) plus their headers and
 * page descriptors (in fixed mode those laid so far); huge blocks' own
 * mappings (OS mode) are not counted. *peak (when not NULL) receives the
 * most it has been: exactly, except that a new high reached while another
 * thread is returning freed pages may count those pages too (in fixed
 * mode never more than the region). No lock: two loads per open partition
 * (its pages in use and its deferred ones). 0 before initialization (in
 * OS mode, the first allocation). */
TESS_API size_t tess_footprint(size_t *peak);

/* The statistics as one line of JSON (schema: docs/stats.schema.json).
 * Returns the length it has or would have (like snprintf); writes at most
 * buf_size bytes, always NUL-terminated when buf_size > 0. */
TESS_API size_t tess_stats_json(char *buf, size_t buf_size);

/* A readable table of the statistics (totals, then one row per size class
 * in use). Not in libtessalloc-oe.a, which has no stdio. */
TESS_API void tess_stats_print(FILE *out);

/* Checks the heap's invariants (free lists against slab counts, page map,
 * counters). Returns NULL when all hold, else a description of the first
 * broken one. Call it while no other thread allocates or frees. In a
 * fork() child, the heaps that the parent's other threads were using are
 * never used again and may have been copied mid-operation: their slabs'
 * counts and the statistics' counters are not checked there. */
TESS_API const char *tess_heap_check(void);

/* Calls visit(ptr, usable_size, arg) for every live block: slab and
 * large blocks in address order per region, then the huge blocks (OS
 * mode: mappings of their own) in no particular order; stops when visit
 * returns nonzero and returns that value (0 when all were visited).
 * Call it while no other thread
 * allocates or frees. visit runs with the heap's locks held: it must not
 * allocate or free, nor read the statistics (tess_stats_print,
 * mallinfo2, malloc_info, malloc_stats wait forever; tess_stats_json
 * writes "" and returns 0, tess_stats_get returns EDEADLK,
 * tess_heap_check an error, and tess_heap_visit -1). */
TESS_API int tess_heap_visit(int (*visit)(void *ptr, size_t size, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* TESSALLOC_H */
