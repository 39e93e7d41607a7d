/* tb_fixed_test: checks libtb_fixed.so from the outside. Run it under the
 * shim (LD_PRELOAD, TB_FIXED_PLUGIN, TB_FIXED_HEAP); without the shim it
 * fails, as it should, at the first check.
 *
 *  1. every block lies within TB_FIXED_HEAP bytes of the others, and
 *     allocating 1 MiB blocks fails with NULL and errno ENOMEM before
 *     twice the heap is handed out; after freeing them the heap serves
 *     again;
 *  2. overflowing calloc/reallocarray/posix_memalign requests fail cleanly;
 *  3. aligned_alloc, posix_memalign, memalign, valloc, pvalloc give aligned
 *     blocks that are writable over malloc_usable_size, survive realloc
 *     and free;
 *  4. threads that allocate, free each other's blocks and exit, in rounds
 *     (thread_init / thread_cleanup). */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK ((size_t)1 << 20)
#define THREADS 8
#define ROUNDS 3
#define PER_THREAD 2000

static int failures;

#define CHECK(cond, ...)                             \
  do {                                               \
    if (!(cond)) {                                   \
      fprintf(stderr, "tb_fixed_test: FAIL: ");      \
      fprintf(stderr, __VA_ARGS__);                  \
      fputc('\n', stderr);                           \
      failures++;                                    \
    }                                                \
  } while (0)

static uintptr_t lowest = UINTPTR_MAX, highest;

static void note(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  if (a < lowest) lowest = a;
  if (a + n > highest) highest = a + n;
}

static size_t heap_bytes(void) {
  const char *s = getenv("TB_FIXED_HEAP");
  if (s == NULL) return (size_t)64 << 20;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
  }
  return (size_t)v;
}

static void test_exhaustion(size_t heap) {
  size_t cap = 2 * heap / BLOCK + 2;
  void **blocks = calloc(cap, sizeof *blocks);
  CHECK(blocks != NULL, "calloc of the block table");
  if (blocks == NULL) return;
  note(blocks, cap * sizeof *blocks);
  size_t n = 0;
  errno = 0;
  for (; n < cap; n++) {
    blocks[n] = malloc(BLOCK);
    if (blocks[n] == NULL) break;
    memset(blocks[n], (int)n, BLOCK);
    note(blocks[n], BLOCK);
  }
  CHECK(n < cap, "%zu blocks of 1 MiB (twice TB_FIXED_HEAP) and no NULL: not a fixed heap", n);
  CHECK(n == cap || errno == ENOMEM, "malloc returned NULL with errno %d, not ENOMEM", errno);
  CHECK(n >= 1, "not even one 1 MiB block in a %zu-byte heap", heap);
  CHECK(highest - lowest <= heap, "blocks span %zu bytes, more than the heap's %zu",
        (size_t)(highest - lowest), heap);
  for (size_t i = 0; i < n; i++) {
    unsigned char *b = blocks[i];
    CHECK(b[0] == (unsigned char)i && b[BLOCK - 1] == (unsigned char)i, "block %zu changed", i);
    free(b);
  }
  /* the heap serves again after the exhaustion */
  size_t again = 0;
  for (; again < n / 2; again++) {
    blocks[again] = malloc(BLOCK);
    if (blocks[again] == NULL) break;
  }
  CHECK(again == n / 2, "after freeing, only %zu of %zu blocks again", again, n / 2);
  for (size_t i = 0; i < again; i++) free(blocks[i]);
  free(blocks);
  if (n < cap) printf("exhaustion: %zu blocks of 1 MiB, then NULL and ENOMEM\n", n);
}

static void test_overflow(void) {
  /* volatile: the compiler would warn about the sizes it can see */
  volatile size_t half = SIZE_MAX / 2, huge = SIZE_MAX - 4096;
  errno = 0;
  CHECK(calloc(half, 4) == NULL && errno == ENOMEM, "calloc overflow");
  errno = 0;
  CHECK(reallocarray(NULL, half, 4) == NULL && errno == ENOMEM, "reallocarray overflow");
  errno = 0;
  CHECK(malloc(huge) == NULL && errno == ENOMEM, "malloc(SIZE_MAX - 4096)");
  void *out = &out;
  CHECK(posix_memalign(&out, 64, huge) == ENOMEM && out == &out,
        "posix_memalign of SIZE_MAX - 4096");
  CHECK(posix_memalign(&out, 24, 16) == EINVAL, "posix_memalign with alignment 24");
  errno = 0;
  CHECK(aligned_alloc(48, 96) == NULL && errno == EINVAL, "aligned_alloc with alignment 48");
  void *p = malloc(10);
  CHECK(p != NULL && realloc(p, 0) == NULL, "realloc(p, 0) frees and returns NULL");
}

static void check_aligned(const char *what, void *p, size_t align, size_t size) {
  CHECK(p != NULL, "%s: NULL", what);
  if (p == NULL) return;
  note(p, size);
  CHECK(((uintptr_t)p & (align - 1)) == 0, "%s: %p not aligned to %zu", what, p, align);
  size_t usable = malloc_usable_size(p);
  CHECK(usable >= size, "%s: usable size %zu < %zu", what, usable, size);
  memset(p, 0xa5, usable);
  void *q = realloc(p, size * 3 + 1);
  CHECK(q != NULL, "%s: realloc", what);
  if (q == NULL) {
    free(p);
    return;
  }
  note(q, size * 3 + 1);
  const unsigned char *b = q;
  bool same = true;
  for (size_t i = 0; i < size; i++) same = same && b[i] == 0xa5;
  CHECK(same, "%s: contents lost by realloc", what);
  free(q);
}

static void test_aligned(void) {
  for (size_t align = 8; align <= 65536; align *= 2) {
    for (size_t size = 1; size <= 100000; size = size * 7 + 3) {
      void *p = aligned_alloc(align, size);
      check_aligned("aligned_alloc", p, align, size);
      void *q = NULL;
      CHECK(posix_memalign(&q, align, size) == 0, "posix_memalign(%zu, %zu)", align, size);
      check_aligned("posix_memalign", q, align, size);
      check_aligned("memalign", memalign(align, size), align, size);
    }
  }
  check_aligned("valloc", valloc(5000), 4096, 5000);
  check_aligned("pvalloc", pvalloc(5000), 4096, 8192);
  /* aligned and plain blocks side by side, freed in mixed order */
  void *blocks[256];
  for (int i = 0; i < 256; i++) {
    blocks[i] = i % 2 ? malloc((size_t)i * 8 + 1) : aligned_alloc(64, (size_t)i * 8 + 1);
    CHECK(blocks[i] != NULL, "mixed block %d", i);
    if (blocks[i] != NULL) memset(blocks[i], i, (size_t)i * 8 + 1);
  }
  for (int i = 255; i >= 0; i -= 3) free(blocks[i]), blocks[i] = NULL;
  for (int i = 0; i < 256; i++) free(blocks[i]);
}

static void *shared[THREADS][PER_THREAD];

static void *thread_main(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < PER_THREAD; i++) {
    size_t n = (size_t)(i % 61) * 16 + 1;
    shared[t][i] = malloc(n);
    if (shared[t][i] != NULL) memset(shared[t][i], t, n);
  }
  return NULL;
}

static void *thread_free(void *arg) {
  int t = (int)(intptr_t)arg;
  /* frees the blocks of the next thread: remote frees */
  for (int i = 0; i < PER_THREAD; i++) {
    unsigned char *p = shared[(t + 1) % THREADS][i];
    CHECK(p != NULL && p[0] == (unsigned char)((t + 1) % THREADS), "thread block changed");
    free(p);
  }
  return NULL;
}

static void test_threads(void) {
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t ids[THREADS];
    for (int t = 0; t < THREADS; t++) {
      CHECK(pthread_create(&ids[t], NULL, thread_main, (void *)(intptr_t)t) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
    for (int t = 0; t < THREADS; t++) {
      CHECK(pthread_create(&ids[t], NULL, thread_free, (void *)(intptr_t)t) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
  }
}

int main(void) {
  size_t heap = heap_bytes();
  test_overflow();
  test_aligned();
  test_threads();
  test_exhaustion(heap);
  if (failures != 0) {
    fprintf(stderr, "tb_fixed_test: %d checks failed\n", failures);
    return 1;
  }
  printf("tb_fixed_test: ok\n");
  return 0;
}
