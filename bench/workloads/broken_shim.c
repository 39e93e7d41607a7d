/* libtb_broken.so: an allocator broken on purpose (broken.h: overlapping
 * blocks), to prove that every tessbench workload's self-check catches a
 * wrong allocator. Preload it: LD_PRELOAD=libtb_broken.so tb_larson ...
 * must fail. It serves from one large reservation, touched only as used. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "broken.h"

#define ARENA_BYTES ((size_t)64 << 30)

static broken_t arena;

static void *bump(size_t size, size_t align) {
  if (atomic_load(&arena.next) == 0) {
    static atomic_flag starting = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&starting)) {
      void *mem = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (mem == MAP_FAILED) abort();
      broken_setup(&arena, (uintptr_t)mem, (uintptr_t)mem + ARENA_BYTES);
    }
    while (atomic_load(&arena.next) == 0) { /* another thread sets it up */
    }
  }
  return broken_alloc(&arena, size, align);
}

void *malloc(size_t size) { return bump(size, 16); }
void free(void *p) { (void)p; }
void cfree(void *p) { (void)p; }

void *calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = bump(total, 16);
  if (p != NULL) memset(p, 0, total);
  return p;
}

void *realloc(void *p, size_t size) {
  void *q = bump(size, 16);
  if (q != NULL && p != NULL) {
    size_t old = broken_size(p);
    memmove(q, p, old < size ? old : size);
  }
  return q;
}

void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

void *aligned_alloc(size_t align, size_t size) { return bump(size, align); }
void *memalign(size_t align, size_t size) { return bump(size, align); }
void *valloc(size_t size) { return bump(size, 4096); }
void *pvalloc(size_t size) { return bump((size + 4095) & ~(size_t)4095, 4096); }

int posix_memalign(void **out, size_t align, size_t size) {
  void *p = bump(size, align);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

size_t malloc_usable_size(void *p) { return p != NULL ? broken_size(p) : 0; }
