/* Thread churn: many short-lived threads, a few alive at a time, each
 * allocating, freeing blocks that earlier threads left behind, and leaving
 * a few of its own for the next ones. Whatever per-thread state the
 * allocator keeps must be reclaimed at thread exit, so RSS after 10000
 * threads must stay close to RSS after the first 1000. Then one thread
 * hands the blocks of size after size to another to free: the footprint
 * must not grow with the number of sizes.
 *
 * The normal build links libtessalloc.a and uses the standard names, so
 * glibc's own thread start/exit allocations go through tessalloc too.
 * Sanitizer builds (TESS_CHURN_API) call tess_* and skip the RSS bound:
 * the sanitizer runtimes' own per-thread memory makes RSS meaningless.
 *
 * Usage: test_churn [threads]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"
#include "tessalloc.h"

#ifdef TESS_CHURN_API
#define T_MALLOC tess_malloc
#define T_REALLOC tess_realloc
#define T_FREE tess_free
#else
#define T_MALLOC malloc
#define T_REALLOC realloc
#define T_FREE free
#endif

enum { WINDOW = 4, OWN = 40, LEAVE = 3, TAKE = 6, HANDOFF_CAP = 64 };

struct block {
  void *p;
  size_t n;
  uint64_t key;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block g_handoff[HANDOFF_CAP];
static int g_nhandoff;

static void verify_and_free(struct block *b) {
  size_t bad = pat_check(b->p, b->n, b->key);
  REQUIRE(bad == PAT_OK, "block %p (%zu bytes) corrupted at %zu", b->p, b->n, bad);
  T_FREE(b->p);
  b->p = NULL;
}

static void *churner(void *arg) {
  uint64_t rng = rng_seed((uintptr_t)arg);
  struct block own[OWN];
  for (int i = 0; i < OWN; i++) {
    /* Mostly small, now and then a medium or large block. */
    size_t n = rng_size(&rng, 256 * 1024);
    own[i].p = T_MALLOC(n);
    REQUIRE(own[i].p != NULL, "malloc(%zu)", n);
    own[i].n = n;
    own[i].key = pat_key(own[i].p, n, (uintptr_t)arg);
    pat_fill(own[i].p, n, own[i].key);
  }
  /* Grow a couple of blocks. */
  for (int i = 0; i < 2; i++) {
    struct block *b = &own[rng_next(&rng) % OWN];
    size_t n = b->n * 2 + 100;
    void *q = T_REALLOC(b->p, n);
    REQUIRE(q != NULL, "realloc(%zu)", n);
    REQUIRE(pat_check(q, b->n, b->key) == PAT_OK, "realloc lost data");
    b->p = q;
    b->n = n;
    b->key = pat_key(q, n, 7);
    pat_fill(q, n, b->key);
  }

  /* Free what earlier (now dead or dying) threads left; leave some. */
  struct block taken[TAKE];
  int ntaken = 0;
  pthread_mutex_lock(&g_lock);
  while (ntaken < TAKE && g_nhandoff > 0) taken[ntaken++] = g_handoff[--g_nhandoff];
  int leave = 0;
  while (leave < LEAVE && g_nhandoff < HANDOFF_CAP) g_handoff[g_nhandoff++] = own[leave++];
  pthread_mutex_unlock(&g_lock);

  for (int i = 0; i < ntaken; i++) verify_and_free(&taken[i]);
  for (int i = leave; i < OWN; i++) verify_and_free(&own[i]);
  return NULL;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, rss = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = -1;
    fclose(f);
  }
  return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One long-lived thread hands every block of one size to another thread,
 * which frees them all, then goes on to the next size: what the other
 * thread freed must come back although the first one never asks for that
 * size again. The slabs of each size stayed, every block but one left on
 * their remote stacks (only a slow path of the class looked there): the
 * footprint grew by a round's blocks per size (a review: 1.25 GiB for 64
 * MiB ever live). */
enum { HANDED_ROUNDS = 24, HANDED_BYTES = 4 << 20 };
static pthread_mutex_t handed_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handed_cond = PTHREAD_COND_INITIALIZER;
static void **handed_blocks;
static size_t handed_count;
static int handed_state; /* 0: none, 1: blocks to free, 2: stop */

static void *handed_freer(void *arg) {
  (void)arg;
  pthread_mutex_lock(&handed_lock);
  for (;;) {
    while (handed_state == 0) pthread_cond_wait(&handed_cond, &handed_lock);
    if (handed_state == 2) break;
    for (size_t i = 0; i < handed_count; i++) T_FREE(handed_blocks[i]);
    handed_state = 0;
    pthread_cond_broadcast(&handed_cond);
  }
  pthread_mutex_unlock(&handed_lock);
  return NULL;
}

static void handed_classes(void) {
  pthread_t freer;
  REQUIRE(pthread_create(&freer, NULL, handed_freer, NULL) == 0, "pthread_create");
  size_t most = HANDED_BYTES / 16;
  handed_blocks = T_MALLOC(most * sizeof(void *));
  REQUIRE(handed_blocks != NULL, "malloc of the list");
  size_t first_rounds = 0;
  for (int round = 0; round < HANDED_ROUNDS; round++) {
    size_t size = 16 + 48 * (size_t)round; /* a new size class each round */
    size_t count = HANDED_BYTES / size;
    for (size_t i = 0; i < count; i++) {
      handed_blocks[i] = T_MALLOC(size);
      REQUIRE(handed_blocks[i] != NULL, "malloc(%zu)", size);
      memset(handed_blocks[i], 0x33, 16);
    }
    pthread_mutex_lock(&handed_lock);
    handed_count = count;
    handed_state = 1;
    pthread_cond_broadcast(&handed_cond);
    while (handed_state != 0) pthread_cond_wait(&handed_cond, &handed_lock);
    pthread_mutex_unlock(&handed_lock);
    if (round == 1) first_rounds = tess_footprint(NULL);
  }
  size_t end = tess_footprint(NULL);
  pthread_mutex_lock(&handed_lock);
  handed_state = 2;
  pthread_cond_broadcast(&handed_cond);
  pthread_mutex_unlock(&handed_lock);
  REQUIRE(pthread_join(freer, NULL) == 0, "pthread_join");
  T_FREE(handed_blocks);
  printf("test_churn: %d sizes of %d MiB each freed by another thread: footprint %zu KiB after "
         "two, %zu KiB after all\n",
         HANDED_ROUNDS, HANDED_BYTES >> 20, first_rounds >> 10, end >> 10);
  CHECK(end <= first_rounds + (size_t)HANDED_BYTES, "footprint %zu KiB after %d sizes, %zu KiB "
        "after two", end >> 10, HANDED_ROUNDS, first_rounds >> 10);
}

#ifndef TESS_CHURN_API
/* Threads whose key destructor allocates in every round glibc runs (it
 * runs four, and this one asks for six): the heap a thread takes in the
 * last round must come back too. It did not, and each such thread left a
 * heap in use for good. */
static pthread_key_t rearm_key;

static void rearming_destructor(void *rounds) {
  for (size_t n = 300; n <= 300 * 1000; n *= 1000) {
    unsigned char *p = T_MALLOC(n);
    REQUIRE(p != NULL, "malloc(%zu) in a destructor", n);
    memset(p, 0x5A, n);
    T_FREE(p);
  }
  uintptr_t left = (uintptr_t)rounds - 1;
  if (left > 0) pthread_setspecific(rearm_key, (void *)left);
}

static void *rearming_thread(void *arg) {
  (void)arg;
  pthread_setspecific(rearm_key, (void *)(uintptr_t)6);
  T_FREE(T_MALLOC(100));
  return NULL;
}

static size_t heaps_made(void) {
  struct tess_stats s;
  REQUIRE(tess_stats_get(&s, sizeof s) == 0, "tess_stats_get");
  return (size_t)(s.heaps_in_use + s.heaps_pooled);
}

/* Threads that allocate only in glibc's last destructor round: the heap
 * taken there is attached, but no round runs to give it back. Each such
 * thread left a heap in use for good (a review: 20,000 threads, 20,000
 * heaps); a thread short of a heap now takes the heap of one that has
 * exited. */
static pthread_key_t last_key;

static void last_round_destructor(void *round) {
  uintptr_t n = (uintptr_t)round;
  if (n < 4) {
    pthread_setspecific(last_key, (void *)(n + 1)); /* another round */
    return;
  }
  unsigned char *p = T_MALLOC(100);
  REQUIRE(p != NULL, "malloc in the last destructor round");
  memset(p, 0x5B, 100);
  T_FREE(p);
}

static void *last_round_thread(void *arg) {
  (void)arg;
  pthread_setspecific(last_key, (void *)(uintptr_t)1);
  return NULL;
}

/* The heaps made by `threads` threads running `body` one after another,
 * with *key made for `destructor` first: before and after. */
static void keyed_threads(pthread_key_t *key, void (*destructor)(void *), void *(*body)(void *),
                          long threads, size_t *before, size_t *after) {
  REQUIRE(pthread_key_create(key, destructor) == 0, "pthread_key_create");
  *before = heaps_made();
  for (long i = 0; i < threads; i++) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, body, NULL) == 0, "pthread_create");
    REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
  }
  *after = heaps_made();
}

static void last_round_allocates(long threads) {
  size_t before, after;
  keyed_threads(&last_key, last_round_destructor, last_round_thread, threads, &before, &after);
  printf("test_churn: %ld threads allocating only in the last destructor round: %zu heaps, then "
         "%zu\n",
         threads, before, after);
  CHECK(after <= before + 2, "%zu heaps after %ld threads, %zu before", after, threads, before);
}

static void destructors_allocate(long threads) {
  size_t before, after;
  keyed_threads(&rearm_key, rearming_destructor, rearming_thread, threads, &before, &after);
  printf("test_churn: %ld threads allocating in every destructor round: %zu heaps, then %zu\n",
         threads, before, after);
  CHECK(after <= before + 1, "%zu heaps after %ld threads, %zu before", after, threads, before);
}
#endif

int main(int argc, char **argv) {
  long total = argc > 1 ? atol(argv[1]) : 10000;
  long warmup = total / 10;
  pthread_t win[WINDOW];
  int running[WINDOW] = {0};
  long rss_warm = -1;

  for (long i = 0; i < total; i++) {
    int s = (int)(i % WINDOW);
    if (running[s]) REQUIRE(pthread_join(win[s], NULL) == 0, "pthread_join");
    REQUIRE(pthread_create(&win[s], NULL, churner, (void *)(uintptr_t)(i + 1)) == 0,
            "pthread_create #%ld", i);
    running[s] = 1;
    if (i + 1 == warmup) {
      for (int k = 0; k < WINDOW; k++)
        if (running[k]) pthread_join(win[k], NULL);
      memset(running, 0, sizeof running);
      rss_warm = rss_kib();
    }
  }
  for (int k = 0; k < WINDOW; k++)
    if (running[k]) pthread_join(win[k], NULL);
  long rss_end = rss_kib();

  printf("test_churn: %ld threads, RSS after %ld: %ld KiB, at end: %ld KiB, growth %ld KiB\n",
         total, warmup, rss_warm, rss_end, rss_end - rss_warm);
#ifdef TESS_CHURN_API
  printf("RSS bound not checked in sanitizer builds\n");
#else
  CHECK(rss_warm > 0 && rss_end > 0, "could not read /proc/self/statm");
  CHECK(rss_end - rss_warm < 16 * 1024, "RSS grew by %ld KiB over %ld threads", rss_end - rss_warm,
        total - warmup);
#endif
  for (int i = 0; i < g_nhandoff; i++) verify_and_free(&g_handoff[i]);
  CHECK_HEAP("after the churn");
  handed_classes();
  CHECK_HEAP("after the sizes freed by another thread");
#ifdef TESS_CHURN_API
  /* the sanitizer runtimes finish a thread in glibc's last destructor
   * round, and TSan faulted on an allocation made after that */
  printf("destructors allocating in every round: not run in sanitizer builds\n");
#else
  destructors_allocate(total / 5);
  CHECK_HEAP("after the threads whose destructors allocate");
  last_round_allocates(total / 5);
  CHECK_HEAP("after the threads that allocate in the last destructor round");
#endif
  return check_finish("test_churn");
}
