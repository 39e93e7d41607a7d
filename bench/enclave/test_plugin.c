/* Test plugins for enclave_bench's self-test (never measured).
 *
 * A small, correct fixed-region allocator ("testref": size classes of
 * 2^k and 1.5 * 2^k bytes, a 16-byte header holding the class, free lists,
 * a bump pointer over the region, one global lock), and, selected with
 * TEST_FAULT, the same allocator broken on purpose so that the harness
 * must notice:
 *   TEST_FAULT_OUTSIDE  every 1000th malloc returns a block outside the region
 *   TEST_FAULT_OVERLAP  every 1000th malloc returns the block it returned last
 *                       (two live blocks on the same memory)
 *   TEST_FAULT_OSCALL   every 1000th malloc maps and unmaps a page (mmap and
 *                       munmap after init)
 *   TEST_FAULT_GUARD    init writes one byte just below the region
 *   TEST_FAULT_NULL     every 1000th malloc returns NULL although memory is free
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "fixed_alloc.h"

#define HDR 16u
#define NCLASS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t bump, limit, base;
static void *free_list[NCLASS];
static unsigned long calls;
static void *last_block;

/* Class c holds (c even) 2^(c/2+4) or (c odd) 1.5 * 2^(c/2+4) bytes. */
static size_t class_size(unsigned c) {
  size_t b = (size_t)1 << (c / 2 + 4);
  return c & 1 ? b + b / 2 : b;
}

static unsigned size_class(size_t total) {
  unsigned c = 0;
  while (c < NCLASS && class_size(c) < total) c++;
  return c;
}

static int init(void *start, void *end) {
  base = ((uintptr_t)start + 15) & ~(uintptr_t)15;
  bump = base;
  limit = (uintptr_t)end;
#ifdef TEST_FAULT_GUARD
  ((volatile unsigned char *)start)[-1] ^= 0xFF;
#endif
  return 0;
}

static void thread_noop(void) {}

static void *ref_malloc(size_t size) {
  if (size > ((size_t)1 << 40)) return NULL;
  unsigned c = size_class(size + HDR);
  if (c >= NCLASS) return NULL;
  pthread_mutex_lock(&lock);
  unsigned long n = ++calls;
  void *p = free_list[c];
  if (p) {
    free_list[c] = *(void **)p;
  } else if (limit - bump >= class_size(c)) {
    p = (void *)bump;
    bump += class_size(c);
  }
  pthread_mutex_unlock(&lock);
  if (!p) return NULL;
  *(size_t *)p = c;
  void *user = (char *)p + HDR;
  (void)n;
#ifdef TEST_FAULT_OUTSIDE
  static unsigned char outside[1 << 16] __attribute__((aligned(16)));
  if (n % 1000 == 0 && size <= sizeof outside) return outside;
#endif
#ifdef TEST_FAULT_OVERLAP
  if (n % 1000 == 0 && last_block) return last_block; /* p is leaked */
#endif
#ifdef TEST_FAULT_OSCALL
  if (n % 1000 == 0) {
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) munmap(m, 4096);
  }
#endif
#ifdef TEST_FAULT_NULL
  if (n % 1000 == 0) return NULL; /* p is leaked */
#endif
  last_block = user;
  return user;
}

static void ref_free(void *ptr) {
  if (!ptr) return;
  void *p = (char *)ptr - HDR;
  unsigned c = (unsigned)*(size_t *)p;
  pthread_mutex_lock(&lock);
  *(void **)p = free_list[c];
  free_list[c] = p;
  pthread_mutex_unlock(&lock);
}

static size_t ref_usable(void *ptr) {
  return class_size((unsigned)*(size_t *)((char *)ptr - HDR)) - HDR;
}

static void *ref_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = ref_malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

static void *ref_realloc(void *ptr, size_t size) {
  if (!ptr) return ref_malloc(size);
  size_t old = ref_usable(ptr);
  if (size <= old) return ptr;
  void *q = ref_malloc(size);
  if (!q) return NULL;
  memcpy(q, ptr, old);
  ref_free(ptr);
  return q;
}

static size_t footprint(void) {
  pthread_mutex_lock(&lock);
  size_t f = bump - base;
  pthread_mutex_unlock(&lock);
  return f;
}

#ifndef TEST_PLUGIN_NAME
#define TEST_PLUGIN_NAME "testref"
#endif

static const fixed_allocator_t table = {
    .name = TEST_PLUGIN_NAME,
    .version = "test",
    .init = init,
    .thread_init = thread_noop,
    .thread_cleanup = thread_noop,
    .malloc = ref_malloc,
    .free = ref_free,
    .calloc = ref_calloc,
    .realloc = ref_realloc,
    .usable_size = ref_usable,
    .footprint = footprint,
};

__attribute__((visibility("default"))) const fixed_allocator_t *fixed_allocator(void) {
  return &table;
}
