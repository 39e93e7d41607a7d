/* The allocator broken on purpose, shared by libtb_broken.so (preloaded:
 * broken_shim.c) and libtb_broken_fixed.so (an enclave plugin:
 * broken_plugin.c), so that every tessbench workload, process-wide or in a
 * fixed heap, meets the same fault.
 *
 * A bump allocator over one range that never reuses memory, except that
 * every TB_BROKEN_EVERY-th small allocation (default 64; the first
 * BROKEN_ALIAS_AFTER are left alone, so that a program's start-up works)
 * returns the address of the previous one: two live blocks overlap. free()
 * is a no-op. Each block's size is kept in the 16 bytes before it. */
#ifndef TESSBENCH_BROKEN_H
#define TESSBENCH_BROKEN_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define BROKEN_HEADER 16        /* the block's size, before it */
#define BROKEN_ALIAS_AFTER 1000 /* allocations served honestly first */
#define BROKEN_ALIAS_MAX 4096   /* only blocks up to this size alias */
#define BROKEN_DEFAULT_EVERY 64

typedef struct broken_s {
  _Atomic(uintptr_t) next; /* 0: not set up */
  uintptr_t start, end;
  _Atomic(uintptr_t) last_block;
  _Atomic(uint64_t) calls;
  uint64_t alias_every;
} broken_t;

/* Makes [start, end) the range and reads TB_BROKEN_EVERY. */
static inline void broken_setup(broken_t *b, uintptr_t start, uintptr_t end) {
  const char *every = getenv("TB_BROKEN_EVERY");
  long long n = every != NULL ? atoll(every) : 0;
  b->alias_every = n > 0 ? (uint64_t)n : BROKEN_DEFAULT_EVERY;
  b->start = start;
  b->end = end;
  atomic_store(&b->next, start);
}

/* A block of size bytes aligned to align (a power of two), or NULL with
 * errno ENOMEM when the range is used up. */
static inline void *broken_alloc(broken_t *b, size_t size, size_t align) {
  if (size > (b->end - b->start) / 2) {
    errno = ENOMEM;
    return NULL;
  }
  if (align < 16) align = 16;
  uint64_t n = atomic_fetch_add(&b->calls, 1);
  if (n >= BROKEN_ALIAS_AFTER && n % b->alias_every == 0 && size <= BROKEN_ALIAS_MAX &&
      align == 16) {
    uintptr_t prev = atomic_load(&b->last_block);
    if (prev != 0) return (void *)prev; /* the bug: overlaps a live block */
  }
  size_t need = size + BROKEN_HEADER + align;
  uintptr_t at = atomic_fetch_add(&b->next, (need + 15) & ~(uintptr_t)15);
  if (at + need > b->end) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t block = (at + BROKEN_HEADER + align - 1) & ~(uintptr_t)(align - 1);
  ((size_t *)block)[-1] = size;
  atomic_store(&b->last_block, block);
  return (void *)block;
}

/* The size a block was allocated with. */
static inline size_t broken_size(const void *p) { return ((const size_t *)p)[-1]; }

#endif
