/* libtb_broken_fixed.so: the allocator broken on purpose (broken.h:
 * overlapping blocks) as an enclave harness plugin
 * (bench/enclave/fixed_alloc.h), for the fixed-heap workloads: tb_enclave
 * and tb_frag --allocator libtb_broken_fixed.so, and tb_x509 under
 * libtb_fixed.so with TB_FIXED_PLUGIN=libtb_broken_fixed.so, must fail
 * their checks. It serves from the region given to init() and never reuses
 * memory. */
#include <string.h>

#include "../enclave/fixed_alloc.h"
#include "broken.h"

static broken_t heap;

static int init(void *start, void *end) {
  broken_setup(&heap, (uintptr_t)start, (uintptr_t)end);
  return 0;
}

static void thread_noop(void) {}

static void *broken_malloc(size_t size) { return broken_alloc(&heap, size, 16); }

static void broken_free(void *p) { (void)p; }

static void *broken_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return NULL;
  void *p = broken_alloc(&heap, total, 16);
  if (p != NULL) memset(p, 0, total);
  return p;
}

static void *broken_realloc(void *p, size_t size) {
  void *q = broken_alloc(&heap, size, 16);
  if (q != NULL && p != NULL) {
    size_t old = broken_size(p);
    memmove(q, p, old < size ? old : size);
  }
  return q;
}

static size_t usable_size(void *p) { return p != NULL ? broken_size(p) : 0; }

static size_t footprint(void) {
  uintptr_t next = atomic_load(&heap.next);
  return (next < heap.end ? next : heap.end) - heap.start;
}

static const fixed_allocator_t broken = {
    .name = "broken",
    .version = "0",
    .init = init,
    .thread_init = thread_noop,
    .thread_cleanup = thread_noop,
    .malloc = broken_malloc,
    .free = broken_free,
    .calloc = broken_calloc,
    .realloc = broken_realloc,
    .usable_size = usable_size,
    .footprint = footprint,
    .footprint_peak = footprint,
    .stats_json = NULL,
};

__attribute__((visibility("default"))) const fixed_allocator_t *fixed_allocator(void) {
  return &broken;
}
