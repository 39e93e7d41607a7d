/* Start-up, thread exit and fork.
 *
 * Three ways to start:
 *   - OS mode (the default): on the first allocation, a large reservation
 *     becomes the primary region; more are added as needed.
 *   - emulated fixed mode (TESS_HEAP_SIZE=64M): on the first allocation,
 *     one mapping of that size is reserved, and it is all there is.
 *   - fixed mode: tess_init_region(start, end) / oe_allocator_init, before
 *     the first allocation, hands over the only memory.
 * Fixed regions get slab geometry and caches scaled to their size, so a
 * small heap with many threads stays bounded (see docs/mechanisms/
 * fixed-heap.md). Thread exit is seen through the platform's hook where
 * there is one; fork() is bracketed by handlers that hold every allocator
 * lock, so the child starts with consistent, unlocked state. */
#include "internal.h"
#include "tessalloc.h"

#include <errno.h>

_Atomic(int) tessi_ready;
static tess_lock_t init_lock;

__thread bool tessi_tls_exiting;

static void thread_exit(void *heap) {
  tessi_tls_exiting = true;
  /* only the heap the thread holds: one it handed back early is in the
   * pool, maybe in another thread's hands */
  if (heap == tessi_tls_heap) tessi_heap_release(heap);
}

void tessi_thread_attach(tess_heap_t *h) { tessi_plat_thread_watch(h); }

/* fork(): every lock of the allocator is held across it, in the order in
 * which code that holds one takes the next (the heap walk merges the
 * statistics, a merge counts the heaps and spans), so that the child
 * starts with consistent state and no lock held. The thread that forks
 * may allocate meanwhile, in other fork handlers (tessi_fork_holder). The
 * statistics output's mutex is not held, only made anew in the child. */
static __thread bool fork_held; /* between this thread's handlers */

static void fork_locks(tess_fork_phase_t phase) {
  tessi_check_fork(phase);
  tessi_stats_fork(phase);
}

static void fork_prepare(void) {
  fork_held = tessi_ensure_init();
  if (!fork_held) return;
  fork_locks(TESS_FORK_PREPARE);
  tessi_heaps_fork_prepare();
  tessi_regions_lock_all();
  tessi_huge_fork_prepare();
  tessi_fork_holder = true;
}

static void fork_parent(void) {
  if (!fork_held) return;
  tessi_fork_holder = false;
  tessi_huge_fork_parent();
  tessi_regions_unlock_all(false);
  tessi_heaps_fork_parent();
  fork_locks(TESS_FORK_PARENT);
}

static void fork_child(void) {
  if (!fork_held) return;
  tessi_fork_holder = false;
  tessi_huge_fork_child();
  tessi_regions_unlock_all(true);
  tessi_heaps_fork_child();
  fork_locks(TESS_FORK_CHILD);
#if !TESS_OE
  tessi_stats_output_fork_child();
#endif
}

static void make_primary(tess_region_t *r) {
  tessi_primary = r;
  tessi_primary_pages = r->pages;
  tessi_primary_desc_bytes = r->page_count * sizeof(tess_page_t);
  /* the base before the size (0 until now, so that every offset was
   * beyond it): a free racing the first initialization that sees the
   * size sees the base and the pages too; one that reads the base before
   * the size takes the slow path or, for NULL, the region's first page
   * (a data race under ThreadSanitizer before, with the size stored
   * first) */
  atomic_store_explicit(&tessi_primary_base, r->base, memory_order_relaxed);
  atomic_store_explicit(&tessi_primary_size, tessi_region_extent(r), memory_order_release);
}

/* Geometry and caches for a fixed region of `size` bytes. Slabs stay
 * short (4 KiB target, 2 blocks at least) so a class used by few objects
 * pins little; blocks above 3 KiB are page spans: a slab of the 3.5 and
 * 4 KiB classes holds two blocks in two pages, no less per block than a
 * page each, but as a heap's current slab it pins both pages for a class
 * that may hold one block or none (OE's sample, every call at once: 0.1
 * MiB less, at fewer instructions per request). A heap keeps freed large
 * spans up to 1/128 of the region (8 to 256 KiB) and empty slabs up to
 * an eighth of that, and empties both when its thread is done, so only
 * heaps in use hold them (and while many are, they share: heap.c). Less
 * costs speed: in OE's sample (32 MiB) 1/256 for every heap made one
 * thread run 15 % slower. Options set in the environment still win (read after
 * this). Measured on the enclave workloads: docs/results/enclave/. */
static void configure_fixed(size_t size) {
  tessi_sizeclass_init(TESS_PAGE_SIZE, 2, 3072, TESS_BORROW_WINDOW);
  tessi_options.heap_cache = TESS_MIN(TESS_MAX(size / 128, (size_t)8 << 10), (size_t)256 << 10);
  tessi_span_budget_low = TESS_SPAN_LOW_FIXED;
}

static bool init_fixed_locked(uintptr_t start, size_t size, bool is_zero) {
  configure_fixed(size);
  tessi_options_init();
  tess_region_t *r = tessi_region_add_fixed(start, size, is_zero);
  if (r == NULL) return false;
  make_primary(r);
  tessi_heap_shared_init(); /* the first chunk of heap structs with it */
  return true;
}

static bool init_os_locked(void) {
  /* the mode decides the defaults, so TESS_HEAP_SIZE is looked at first;
   * options are then read once (a bad value is reported there) */
  size_t heap_size;
  if (tessi_parse_size(tessi_plat_getenv("TESS_HEAP_SIZE"), &heap_size) &&
      heap_size >= ((size_t)1 << 20) && heap_size <= ((size_t)1 << 42)) {
    /* emulated fixed mode: one reservation, then no OS memory call */
    void *mem = tessi_plat_reserve(heap_size, TESS_PAGE_SIZE);
    if (mem == NULL) {
      /* every allocation tries again and fails (a smaller heap than was
       * asked for would not be the fixed heap the program is tested in):
       * said once, or it looks like a heap that is full from the start */
      static bool told; /* under init_lock */
      if (!told) tessi_warn("TESS_HEAP_SIZE", "could not reserve the heap: every allocation fails");
      told = true;
      return false;
    }
    return init_fixed_locked((uintptr_t)mem, heap_size, true);
  }
  tessi_options_init();
  tessi_sizeclass_init((size_t)64 << 10, 8, TESS_SLAB_MAX_SIZE, 1);
  /* under a limit on address space (RLIMIT_AS: `ulimit -v`, a sandbox),
   * unless TESS_RESERVE says otherwise, an eighth of it: halving from 64
   * GiB until the OS agreed took about half, and a program that glibc let
   * make a 3.8 GB block under a 4 GB limit got 1.7 GB, and half as many
   * threads (a review) */
  if (!tessi_options.reserve_given) {
    tessi_options.reserve = TESS_MIN(tessi_options.reserve, tessi_plat_address_limit() / 8);
  }
  /* TESS_RESERVE, or less down to one region of 16 MiB (RLIMIT_AS) */
  tess_region_t *r = tessi_region_add_os(tessi_options.reserve, (size_t)16 << 20);
  if (r == NULL) return false;
  make_primary(r);
  return true;
}

/* Marks the process ready; called with init_lock held, releases it. */
static void finish_init(void) {
  /* the low span budget is never above the full one (TESS_HEAP_CACHE may
   * ask for less), so tessi_heap_span_budget need not compare them */
  tessi_span_budget_low = TESS_MIN(tessi_span_budget_low, tessi_options.heap_cache);
  tessi_plat_thread_exit_init(thread_exit);
  atomic_store_explicit(&tessi_ready, 1, memory_order_release);
  tessi_unlock(&init_lock);
}

/* Our fork handlers, registered once. Without the standard names they go
 * in when the first initialization starts, before init_lock (a fork()
 * meanwhile then waits in fork_prepare for the initialization to end):
 * registered once it had ended, a fork() while a thread was initializing
 * ran no handler, and the child waited for good on a lock that thread
 * held (17 of 50 children forked as a thread's first call began:
 * test_fork_first_init). pthread_atfork allocates with glibc's malloc
 * there, not ours. */
static _Atomic(int) fork_hooks_in;

static void fork_hooks_once(void) {
  if (!atomic_exchange_explicit(&fork_hooks_in, 1, memory_order_acq_rel)) {
    tessi_plat_fork_hooks(fork_prepare, fork_parent, fork_child);
  }
}

#if TESS_OVERRIDE
/* As the malloc of the process, our fork handlers go in before any other:
 * handlers run before fork() in the reverse order of their registration,
 * so ours run last, and a lock another handler takes, whose holder waits
 * in malloc, is free before we hold malloc's (glibc takes its own inside
 * fork(), after every handler). Our constructor may run after other
 * libraries' constructors have registered theirs (with LD_PRELOAD, the
 * program's libraries start first), so pthread_atfork's __register_atfork
 * is ours too: the first registration puts ours in first. glibc keeps the
 * first handlers without allocating. */
/* Priority 100, of the implementation's (0-100): in a fully static
 * program glibc's __register_atfork is linked, not ours (below), and only
 * this puts ours before the handlers of any constructor of the program's
 * (test_fork's, at 101, took a lock that a thread held in malloc, and
 * every fork hung) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wprio-ctor-dtor"
__attribute__((constructor(100))) static void fork_hooks_early(void) { fork_hooks_once(); }
#pragma GCC diagnostic pop

/* Weak: a fully static program that forks links glibc's own (fork()
 * needs its object), which then wins; ours was a duplicate definition and
 * such a program did not link (a review). Our handlers then go in through
 * glibc's (platform_os.c), when our constructor runs. */
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso);

__attribute__((weak, visibility("default"))) int __register_atfork(void (*prepare)(void),
                                                                   void (*parent)(void),
                                                                   void (*child)(void),
                                                                   void *dso) {
  fork_hooks_once();
  return tessi_plat_register_atfork(prepare, parent, child, dso);
}
#endif

static TESS_COLD bool init_slow(void) {
#if !TESS_OVERRIDE
  fork_hooks_once();
#endif
  tessi_lock(&init_lock);
  if (atomic_load_explicit(&tessi_ready, memory_order_relaxed)) {
    tessi_unlock(&init_lock);
    return true;
  }
  if (!init_os_locked()) {
    tessi_unlock(&init_lock);
    return false;
  }
  finish_init();
  return true;
}

bool tessi_ensure_init(void) {
  if (TESS_LIKELY(atomic_load_explicit(&tessi_ready, memory_order_acquire))) return true;
  return init_slow();
}

int tess_init_region(void *start, void *end) {
  if (start == NULL || end == NULL || (uintptr_t)end <= (uintptr_t)start) return EINVAL;
#if !TESS_OVERRIDE
  fork_hooks_once();
#endif
  tessi_lock(&init_lock);
  if (atomic_load_explicit(&tessi_ready, memory_order_relaxed)) {
    tessi_unlock(&init_lock);
    return EBUSY;
  }
  size_t size = (uintptr_t)end - (uintptr_t)start;
  if (size < ((size_t)1 << 20) || !init_fixed_locked((uintptr_t)start, size, false)) {
    tessi_unlock(&init_lock);
    return EINVAL;
  }
  finish_init();
  return 0;
}

void tess_thread_cleanup(void) {
  tess_heap_t *h = tessi_tls_heap;
  if (h == &tessi_heap_empty) {
    tessi_heap_shared_done();
    return;
  }
  tessi_plat_thread_watch(NULL); /* nothing left to release at exit */
  tessi_heap_release(h);
}
