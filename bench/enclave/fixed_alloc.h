/* The enclave harness's view of a fixed-heap allocator.
 *
 * Each allocator under test (tessalloc through its oe_allocator_* entry
 * points, dlmalloc, snmalloc, mimalloc 3) is a plugin: a shared object
 * exporting
 *
 *     const fixed_allocator_t *fixed_allocator(void);
 *
 * which the harness loads with dlopen. The plugin's allocator must use the
 * region given to init() as its heap (its own metadata may live inside it
 * or, for peers that cannot do otherwise, outside: the harness measures
 * and reports both).
 */
#ifndef FIXED_ALLOC_H
#define FIXED_ALLOC_H

#include <stddef.h>

typedef struct fixed_allocator_s {
  const char *name;    /* "tessalloc", "dlmalloc", "snmalloc", "mimalloc3" */
  const char *version; /* of the allocator, as built */
  /* Make [start, end) the heap. 0 on success. Called once, before any
   * other function, from the harness's main thread. */
  int (*init)(void *start, void *end);
  /* An enclave call begins / ends on the calling host thread (OE's
   * oe_allocator_thread_init / _thread_cleanup). */
  void (*thread_init)(void);
  void (*thread_cleanup)(void);
  void *(*malloc)(size_t size);
  void (*free)(void *ptr);
  void *(*calloc)(size_t count, size_t size);
  void *(*realloc)(void *ptr, size_t size);
  size_t (*usable_size)(void *ptr);
  /* Bytes of the region the allocator holds now (handed out to blocks or
   * kept for them: its footprint), by its own account; (size_t)-1 when it
   * cannot tell. Called from any thread, concurrently with allocation. */
  size_t (*footprint)(void);
  /* The most footprint() has been since init, exactly, by the allocator's
   * own account; NULL when it keeps no such figure (the harness then
   * samples footprint()). */
  size_t (*footprint_peak)(void);
  /* The allocator's statistics as one JSON object (tessalloc's
   * tess_stats_json: snprintf's contract); NULL when it has none. Called
   * by the sampler of workload B with --stats-jsonl. */
  size_t (*stats_json)(char *buf, size_t size);
} fixed_allocator_t;

typedef const fixed_allocator_t *(*fixed_allocator_fn)(void);
#define FIXED_ALLOCATOR_SYMBOL "fixed_allocator"

#endif /* FIXED_ALLOC_H */
