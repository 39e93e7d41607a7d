/* Process start-up, thread exit and fork.
 *
 * Initialization happens on the first allocation or in the library
 * constructor, whichever comes first. Thread exit is seen through a
 * pthread key destructor, which hands the thread's heap back to the pool.
 * fork() is bracketed by handlers that hold every allocator lock, so the
 * child starts with consistent, unlocked state. */
#include "internal.h"

#include <pthread.h>

_Atomic(int) tessi_ready;
static tess_lock_t init_lock;
static pthread_key_t thread_key;
static _Atomic(int) thread_key_ready;

static void thread_exit(void *heap) {
  /* the thread may allocate again in a later destructor: it then takes a
   * heap anew and sets the key again, and this runs again */
  tessi_heap_release(heap);
}

void tessi_thread_attach(tess_heap_t *h) {
  if (atomic_load_explicit(&thread_key_ready, memory_order_acquire)) {
    pthread_setspecific(thread_key, h);
  }
}

static void fork_prepare(void) {
  tessi_heaps_fork_prepare();
  tessi_regions_lock_all();
  tessi_huge_fork_prepare();
}

static void fork_parent(void) {
  tessi_huge_fork_parent();
  tessi_regions_unlock_all(false);
  tessi_heaps_fork_parent();
}

static void fork_child(void) {
  tessi_huge_fork_child();
  tessi_regions_unlock_all(true);
  tessi_heaps_fork_child();
}

static bool process_init(void) {
  tessi_options_init();
  tessi_sizeclass_init((size_t)64 << 10, TESS_SLAB_MAX_SIZE);
  tess_region_t *r = tessi_region_add_os(tessi_options.reserve, (size_t)64 << 20);
  if (r == NULL) return false;
  tessi_primary = r;
  tessi_primary_pages = r->pages;
  tessi_primary_size = r->size;
  tessi_primary_base = r->base;
  return true;
}

static TESS_COLD bool init_slow(void) {
  tessi_lock(&init_lock);
  bool ok = atomic_load_explicit(&tessi_ready, memory_order_relaxed) || process_init();
  if (ok && !atomic_load_explicit(&tessi_ready, memory_order_relaxed)) {
    /* glibc's pthread_key_create does not allocate */
    if (pthread_key_create(&thread_key, thread_exit) == 0) {
      atomic_store_explicit(&thread_key_ready, 1, memory_order_release);
    }
    atomic_store_explicit(&tessi_ready, 1, memory_order_release);
    tessi_unlock(&init_lock);
    /* may allocate (now served by us), so only once we are ready */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    return true;
  }
  tessi_unlock(&init_lock);
  return ok;
}

bool tessi_ensure_init(void) {
  if (TESS_LIKELY(atomic_load_explicit(&tessi_ready, memory_order_acquire))) return true;
  return init_slow();
}

__attribute__((constructor)) static void tess_constructor(void) { tessi_ensure_init(); }
