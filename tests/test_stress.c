/* Multi-threaded stress of the tess_* API.
 *
 * Each round has three phases:
 *  A. workers allocate, realloc, verify and free random blocks of their
 *     own, then leave their surviving blocks as orphans;
 *  B. producers allocate blocks and pass them through a queue to consumers,
 *     which verify, sometimes realloc, and free them (remote frees);
 *  C. fresh threads whose very first allocator call is a free release the
 *     orphans of phase A.
 * Every block carries a pattern keyed by (pointer, size, seed), checked
 * before every free and realloc.
 *
 * Usage: test_stress [scale-percent [seed]]; sanitizer builds pass a
 * smaller scale.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "pattern.h"
#include "tessalloc.h"

enum { WORKERS = 4, SLOTS = 256, PRODUCERS = 2, CONSUMERS = 2, FRESH = 3, QCAP = 256, ROUNDS = 3 };

struct block {
  void *p;
  size_t n;
  size_t align; /* 0: allocated without alignment request */
  uint64_t key;
};

static long g_ops;   /* phase A operations per worker */
static long g_items; /* phase B blocks per producer */
static uint64_t g_seed;
static size_t g_big_max = (size_t)4 << 20;

static struct block g_orphans[WORKERS * SLOTS];
static int g_norphans;

/* ---- block helpers ---- */

static void verify(const struct block *b, const char *when) {
  size_t bad = pat_check(b->p, b->n, b->key);
  REQUIRE(bad == PAT_OK, "%s: block %p (%zu bytes) corrupted at offset %zu", when, b->p, b->n, bad);
}

static void stamp(struct block *b, uint64_t seed) {
  b->key = pat_key(b->p, b->n, seed);
  pat_fill(b->p, b->n, b->key);
}

/* calloc memory must read as zero; large blocks are sampled. */
static void check_zero(const void *p, size_t n) {
  const unsigned char *c = p;
  size_t step = n <= PAT_DENSE_MAX ? 1 : 509;
  for (size_t i = 0; i < n; i += step)
    REQUIRE(c[i] == 0, "calloc block %p (%zu bytes) byte %zu is %#x", p, n, i, c[i]);
  if (n) REQUIRE(c[n - 1] == 0, "calloc block %p last byte is %#x", p, c[n - 1]);
}

static void new_block(struct block *b, uint64_t *rng) {
  size_t n = rng_size(rng, g_big_max);
  uint64_t how = rng_next(rng) % 100;
  b->n = n;
  b->align = 0;
  if (how < 60) {
    b->p = tess_malloc(n);
  } else if (how < 75) {
    b->p = tess_calloc(1, n);
    REQUIRE(b->p != NULL, "calloc(1, %zu) failed", n);
    check_zero(b->p, n);
  } else if (how < 85) {
    b->align = (size_t)16 << rng_range(rng, 0, 8);
    b->p = tess_aligned_alloc(b->align, n);
  } else if (how < 90) {
    b->align = (size_t)8 << rng_range(rng, 0, 10);
    void *out = NULL;
    REQUIRE(tess_posix_memalign(&out, b->align, n) == 0, "posix_memalign(%zu, %zu)", b->align, n);
    b->p = out;
  } else {
    b->p = tess_realloc(NULL, n);
  }
  REQUIRE(b->p != NULL, "allocation of %zu bytes (kind %d) failed", n, (int)how);
  size_t a = b->align > 16 ? b->align : 16;
  REQUIRE(((uintptr_t)b->p & (a - 1)) == 0, "block %p not aligned to %zu", b->p, a);
  REQUIRE(tess_usable_size(b->p) >= n, "usable_size(%p) = %zu < %zu", b->p, tess_usable_size(b->p),
          n);
  stamp(b, g_seed);
}

static void free_block(struct block *b, uint64_t *rng) {
  verify(b, "before free");
  if (b->align && rng_next(rng) % 2)
    tess_free_aligned_sized(b->p, b->align, b->n);
  else if (!b->align && rng_next(rng) % 4 == 0)
    tess_free_sized(b->p, b->n);
  else
    tess_free(b->p);
  b->p = NULL;
}

static void realloc_block(struct block *b, uint64_t *rng) {
  verify(b, "before realloc");
  size_t n = rng_size(rng, g_big_max);
  if (n == 0) n = 1; /* realloc(p, 0) frees: tested in test_api */
  void *q = tess_realloc(b->p, n);
  REQUIRE(q != NULL, "realloc(%p, %zu) failed", b->p, n);
  REQUIRE(((uintptr_t)q & 15) == 0, "realloc result %p misaligned", q);
  size_t keep = b->n < n ? b->n : n;
  size_t bad = pat_check_prefix(q, b->n, keep, b->key);
  REQUIRE(bad == PAT_OK, "realloc %zu -> %zu (%p -> %p) lost byte %zu", b->n, n, b->p, q, bad);
  b->p = q;
  b->n = n;
  b->align = 0;
  stamp(b, g_seed);
}

/* ---- phase A: private churn ---- */

static void *worker(void *arg) {
  uint64_t rng = rng_seed(g_seed * 1000 + (uintptr_t)arg);
  struct block slots[SLOTS];
  memset(slots, 0, sizeof slots);
  for (long op = 0; op < g_ops; op++) {
    struct block *b = &slots[rng_next(&rng) % SLOTS];
    uint64_t r = rng_next(&rng) % 100;
    if (!b->p)
      new_block(b, &rng);
    else if (r < 55)
      free_block(b, &rng);
    else if (r < 80)
      realloc_block(b, &rng);
    else
      verify(b, "spot check");
  }
  /* Leave the survivors to threads that have never allocated. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p) g_orphans[g_norphans++] = slots[i];
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* ---- phase B: producer/consumer ---- */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  struct block items[QCAP];
  int head, count, producers_left;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .not_empty = PTHREAD_COND_INITIALIZER,
       .not_full = PTHREAD_COND_INITIALIZER};

static void q_push(const struct block *b) {
  pthread_mutex_lock(&q.lock);
  while (q.count == QCAP) pthread_cond_wait(&q.not_full, &q.lock);
  q.items[(q.head + q.count++) % QCAP] = *b;
  pthread_cond_signal(&q.not_empty);
  pthread_mutex_unlock(&q.lock);
}

/* Returns 0 when all producers are done and the queue is drained. */
static int q_pop(struct block *b) {
  pthread_mutex_lock(&q.lock);
  while (q.count == 0 && q.producers_left > 0) pthread_cond_wait(&q.not_empty, &q.lock);
  if (q.count == 0) {
    pthread_mutex_unlock(&q.lock);
    return 0;
  }
  *b = q.items[q.head];
  q.head = (q.head + 1) % QCAP;
  q.count--;
  pthread_cond_signal(&q.not_full);
  pthread_mutex_unlock(&q.lock);
  return 1;
}

static void *producer(void *arg) {
  uint64_t rng = rng_seed(g_seed * 2000 + (uintptr_t)arg);
  for (long i = 0; i < g_items; i++) {
    struct block b;
    new_block(&b, &rng);
    q_push(&b);
  }
  pthread_mutex_lock(&q.lock);
  if (--q.producers_left == 0) pthread_cond_broadcast(&q.not_empty);
  pthread_mutex_unlock(&q.lock);
  return NULL;
}

static void *consumer(void *arg) {
  uint64_t rng = rng_seed(g_seed * 3000 + (uintptr_t)arg);
  struct block b;
  while (q_pop(&b)) {
    if (rng_next(&rng) % 5 == 0)
      realloc_block(&b, &rng); /* realloc of a block another thread made */
    free_block(&b, &rng);
  }
  return NULL;
}

/* ---- phase C: first call is a free ---- */

static void *fresh(void *arg) {
  uintptr_t k = (uintptr_t)arg;
  uint64_t rng = rng_seed(g_seed * 4000 + k);
  for (int i = (int)k; i < g_norphans; i += FRESH) free_block(&g_orphans[i], &rng);
  return NULL;
}

static void run(void *(*fn)(void *), int n) {
  pthread_t t[16];
  for (int i = 0; i < n; i++)
    REQUIRE(pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
  long scale = argc > 1 ? atol(argv[1]) : 100;
  g_seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
  if (scale < 1) scale = 1;
  g_ops = 30000 * scale / 100;
  g_items = 20000 * scale / 100;
  if (scale < 100) g_big_max = (size_t)1 << 20;
  printf("test_stress: scale %ld%%, seed %llu (rerun: test_stress %ld %llu)\n", scale,
         (unsigned long long)g_seed, scale, (unsigned long long)g_seed);
  fflush(stdout);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int round = 0; round < ROUNDS; round++) {
    g_norphans = 0;
    run(worker, WORKERS);

    q.producers_left = PRODUCERS;
    pthread_t p[PRODUCERS], c[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++)
      REQUIRE(pthread_create(&c[i], NULL, consumer, (void *)(uintptr_t)i) == 0, "create");
    for (int i = 0; i < PRODUCERS; i++)
      REQUIRE(pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)i) == 0, "create");
    for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
    for (int i = 0; i < CONSUMERS; i++) pthread_join(c[i], NULL);
    CHECK(q.count == 0, "queue not drained: %d", q.count);

    int orphans = g_norphans;
    run(fresh, FRESH);
    printf("round %d: %d orphans freed by fresh threads\n", round, orphans);
    CHECK_HEAP("after a round");
    g_seed++;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("elapsed %.2f s\n",
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  return check_finish("test_stress");
}
