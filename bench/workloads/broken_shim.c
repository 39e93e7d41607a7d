/* libtb_broken.so: an allocator broken on purpose, to prove that every
 * tessbench workload's self-check catches a wrong allocator.
 *
 * A bump allocator over one large reservation that never reuses memory,
 * except that every TB_BROKEN_EVERY-th small allocation (default 64; the
 * first 1000 are left alone, so the program's start-up works) returns the
 * address of the previous one: two live blocks overlap. free() is a no-op.
 * Preload it: LD_PRELOAD=libtb_broken.so tb_larson ... must fail. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_BYTES ((size_t)64 << 30) /* reserved, touched only as used */
#define HEADER 16                      /* the block's size, before it */
#define ALIAS_AFTER 1000               /* allocations served honestly first */
#define ALIAS_MAX 4096                 /* only blocks up to this size alias */

static _Atomic(uintptr_t) arena_next;
static uintptr_t arena_end;
static _Atomic(uintptr_t) last_block;
static _Atomic(uint64_t) calls;
static uint64_t alias_every;

static void arena_init(void) {
  uintptr_t expected = 0;
  if (atomic_load(&arena_next) != 0) return;
  void *mem = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) abort();
  if (!atomic_compare_exchange_strong(&arena_next, &expected, (uintptr_t)mem)) {
    munmap(mem, ARENA_BYTES); /* another thread won */
    return;
  }
  arena_end = (uintptr_t)mem + ARENA_BYTES;
  const char *every = getenv("TB_BROKEN_EVERY");
  alias_every = every != NULL && atoll(every) > 0 ? (uint64_t)atoll(every) : 64;
}

static void *bump(size_t size, size_t align) {
  arena_init();
  if (size > ARENA_BYTES / 2) {
    errno = ENOMEM;
    return NULL;
  }
  if (align < 16) align = 16;
  uint64_t n = atomic_fetch_add(&calls, 1);
  if (n >= ALIAS_AFTER && n % alias_every == 0 && size <= ALIAS_MAX && align == 16) {
    uintptr_t prev = atomic_load(&last_block);
    if (prev != 0) return (void *)prev; /* the bug: overlaps a live block */
  }
  size_t need = size + HEADER + align;
  uintptr_t start = atomic_fetch_add(&arena_next, (need + 15) & ~(uintptr_t)15);
  if (start + need > arena_end) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t block = (start + HEADER + align - 1) & ~(uintptr_t)(align - 1);
  ((size_t *)block)[-1] = size;
  atomic_store(&last_block, block);
  return (void *)block;
}

static size_t block_size(const void *p) { return ((const size_t *)p)[-1]; }

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
    size_t old = block_size(p);
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

size_t malloc_usable_size(void *p) { return p != NULL ? block_size(p) : 0; }
