/* The mimalloc 3 peer: mimalloc from the PyPI wheel cmeel-mimalloc, with the
 * region as its only arena, as a fixed_allocator_t plugin.
 *
 * Set-up (init): OS allocation is switched off (mi_option_disallow_os_alloc)
 * and the region is handed over with mi_manage_os_memory_ex as committed,
 * pinned (an enclave cannot decommit: no purging, so no madvise on it), not
 * known to be zero, and NOT exclusive: the threads' default heaps then
 * allocate from it, the only arena there is. With exclusive=true only a heap
 * made by mi_heap_new_in_arena may use the arena, and with OS allocation off
 * that heap cannot be created (mimalloc 3.4.3 returns NULL), so exclusive is
 * not an option here.
 *
 * Per thread: thread_init makes sure mimalloc knows the thread
 * (mi_thread_init); thread_cleanup does nothing. The thread's heap stays
 * with the host thread, as mimalloc's thread-local heaps do (and as they
 * would per TCS inside an enclave, where thread-locals belong to the TCS);
 * when a host thread exits, mimalloc's own pthread-key destructor abandons
 * its pages for other threads to reclaim. Calling mi_thread_done at
 * thread_cleanup instead -- the nearest mimalloc has to giving a heap back
 * -- crashes mimalloc 3.4.3 with OS allocation disallowed: in runs of 16
 * threads (plugin_check --threads 16) the thread-exit destructor
 * (_mi_thread_done) then segfaults, most runs.
 *
 * Known limits, reported rather than hidden: mimalloc allocates some of its
 * own state from the OS outside the region (about 2.3 MiB when it loads, and
 * 64 KiB of thread metadata mapped after init); the arena's own bitmaps are
 * inside the region. Arenas come in 32 MiB units (512 slices of 64 KiB)
 * from a 64 KiB-aligned start: only the largest such part of the region is
 * used, so a region under 32 MiB (after aligning its start) cannot be used
 * at all and a 64 MiB region that is not 64 KiB-aligned gives mimalloc only
 * 32 MiB. It can return NULL while much of the region is free (many threads
 * in a small region). footprint() is unavailable (see mim_footprint).
 *
 * The object file from the wheel also defines malloc, free, new, delete and
 * so on; the build keeps only its mi_* symbols global (objcopy
 * --keep-global-symbols) and exports only fixed_allocator() from the shared
 * object, so the process's own malloc is left alone.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimalloc.h>

#include "../fixed_alloc.h"

#ifndef PEER_VERSION
#define PEER_VERSION "unknown"
#endif

static mi_arena_id_t arena;

static int mim_init(void *start, void *end) {
  uintptr_t s = (uintptr_t)start;
  uintptr_t e = (uintptr_t)end;
  uintptr_t align = (uintptr_t)mi_arena_min_alignment();
  if (s == 0 || e <= s || align == 0) {
    return -1;
  }
  uintptr_t base = (s + align - 1) & ~(align - 1);
  if (e <= base) {
    return -1;
  }
  size_t size = (size_t)(e - base) & ~(size_t)(align - 1);
  if (size < mi_arena_min_size()) {
    return -1;
  }
  mi_option_set(mi_option_disallow_os_alloc, 1);
  if (!mi_manage_os_memory_ex((void *)base, size, /* is_committed */ true,
                              /* is_pinned */ true, /* is_zero */ false,
                              /* numa_node */ -1, /* exclusive */ false,
                              &arena)) {
    return -1;
  }
  return 0;
}

static void mim_thread_init(void) { mi_thread_init(); }

/* See the top of the file for why this is not mi_thread_done(). */
static void mim_thread_cleanup(void) {}

static void *mim_malloc(size_t size) { return mi_malloc(size); }

static void mim_free(void *ptr) { mi_free(ptr); }

static void *mim_calloc(size_t count, size_t size) {
  return mi_calloc(count, size);
}

static void *mim_realloc(void *ptr, size_t size) {
  return mi_realloc(ptr, size);
}

static size_t mim_usable_size(void *ptr) { return mi_usable_size(ptr); }

/* mimalloc 3.4.3 has no cheap, thread-safe account of how much of an arena
 * is in use: its statistics count OS memory (the arena, handed over
 * committed, adds nothing to them) and pages, not bytes of the region; the
 * arena bitmaps are only printed (mi_debug_show_arenas). So: unknown. */
static size_t mim_footprint(void) { return (size_t)-1; }

static const fixed_allocator_t mimalloc_peer = {
    .name = "mimalloc3",
    .version = PEER_VERSION,
    .init = mim_init,
    .thread_init = mim_thread_init,
    .thread_cleanup = mim_thread_cleanup,
    .malloc = mim_malloc,
    .free = mim_free,
    .calloc = mim_calloc,
    .realloc = mim_realloc,
    .usable_size = mim_usable_size,
    .footprint = mim_footprint,
};

__attribute__((visibility("default"))) const fixed_allocator_t *
fixed_allocator(void) {
  return &mimalloc_peer;
}
