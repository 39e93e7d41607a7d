/* fork() of a multi-threaded process while its threads allocate.
 *
 * Four threads keep allocating, verifying and freeing, and publish some of
 * their blocks in a shared pool. The main thread forks repeatedly; each
 * child frees pool blocks that the parent's other threads allocated, does
 * small and large allocations of its own, verifies everything and exits.
 * An allocator lock held by another thread at fork time shows up as a
 * child that hangs (killed by alarm) or dies; the parent checks every
 * child's status and that its own threads keep making progress.
 *
 * Two more ways to meet a lock held across fork():
 * - a fifth thread keeps reading and printing the statistics, whose locks
 *   the child then needs for its own (tess_stats_get, tess_stats_print);
 * - fork handlers registered before the allocator's (a constructor at
 *   tessalloc's own priority, linked first; fully static, just after
 *   it: TESS_FORK_STATIC) allocate and free, as glibc
 *   allows: with tess_*, their prepare step runs after the allocator's has
 *   taken its locks, their child step before it lets them go;
 * - with the standard names, a handler registered that early also takes a
 *   lock of its own, which a thread holds while it allocates: tessalloc's
 *   handlers must run after it (glibc takes its malloc locks inside fork).
 *
 * First, while the process has one thread, children that no fork handler
 * sees (_Fork(), clone() without CLONE_VM): a new thread of the child must
 * not take the heap its first thread holds. Then (not in sanitizer
 * builds), a child's new thread, finding the pool empty, must not take the
 * heap the parent's other thread held at fork() (heap.c, gone threads).
 *
 * The normal build uses the standard names (libtessalloc.a), so glibc's
 * fork handling of malloc is replaced too; TESS_FORK_API selects tess_*.
 *
 * Usage: test_fork [forks]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"
#include "tessalloc.h"

#ifdef TESS_FORK_API
#define T_MALLOC tess_malloc
#define T_REALLOC tess_realloc
#define T_FREE tess_free
#else
#define T_MALLOC malloc
#define T_REALLOC realloc
#define T_FREE free
#endif

enum { THREADS = 4, SLOTS = 128, POOL = 256, CHILD_ALARM_S = 30 };

struct block {
  void *p;
  size_t n;
  uint64_t key;
};

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block g_pool[POOL];
static int g_npool;
static atomic_int g_stop;
static atomic_long g_progress[THREADS];

static FILE *g_devnull;

static void *stats_reader(void *arg) {
  (void)arg;
  struct tess_stats stats;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    REQUIRE(tess_stats_get(&stats, sizeof stats) == 0, "tess_stats_get");
    tess_stats_print(g_devnull);
  }
  return NULL;
}

/* Blocks of both kinds (a slab's, and pages of their own) made and freed
 * in a fork handler; its exit status tells a child that it failed. */
static atomic_int g_handler_failed;

static void allocate_in_handler(void) {
  void *small = T_MALLOC(100), *large = T_MALLOC(300 << 10);
  if (small == NULL || large == NULL) atomic_store(&g_handler_failed, 1);
  if (large != NULL) memset(large, 0x5a, 300 << 10);
  T_FREE(small);
  T_FREE(large);
}

#ifndef TESS_FORK_API
static pthread_mutex_t g_handler_lock = PTHREAD_MUTEX_INITIALIZER;
static void handler_lock(void) { pthread_mutex_lock(&g_handler_lock); }
static void handler_unlock(void) { pthread_mutex_unlock(&g_handler_lock); }

/* Allocates and frees with g_handler_lock held, as a library does under
 * the lock its fork handlers take. */
static void *lock_holder(void *arg) {
  (void)arg;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    pthread_mutex_lock(&g_handler_lock);
    void *small = T_MALLOC(48), *large = T_MALLOC(200 << 10);
    REQUIRE(small != NULL && large != NULL, "malloc under the handlers' lock");
    T_FREE(large);
    T_FREE(small);
    pthread_mutex_unlock(&g_handler_lock);
  }
  return NULL;
}
#endif

/* At the priority of tessalloc's own constructor (init.c), linked first,
 * so that it runs first and its handlers come in through our
 * __register_atfork (the LD_PRELOAD case, where the program's libraries
 * start first); fully static, glibc's __register_atfork is linked, and only
 * a later constructor can count on ours going first. */
#ifdef TESS_FORK_STATIC
#define EARLY_HANDLERS_PRIORITY 101
#else
#define EARLY_HANDLERS_PRIORITY 100
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wprio-ctor-dtor"
__attribute__((constructor(EARLY_HANDLERS_PRIORITY))) static void early_fork_handlers(void) {
  pthread_atfork(allocate_in_handler, allocate_in_handler, allocate_in_handler);
#ifndef TESS_FORK_API
  pthread_atfork(handler_lock, handler_unlock, handler_unlock);
#endif
}
#pragma GCC diagnostic pop

static int block_ok(const struct block *b) { return pat_check(b->p, b->n, b->key) == PAT_OK; }

static void make(struct block *b, size_t n, uint64_t seed) {
  b->p = T_MALLOC(n);
  REQUIRE(b->p != NULL, "malloc(%zu)", n);
  b->n = n;
  b->key = pat_key(b->p, n, seed);
  pat_fill(b->p, n, b->key);
}

static void drop(struct block *b) {
  REQUIRE(block_ok(b), "block %p (%zu bytes) corrupted", b->p, b->n);
  T_FREE(b->p);
  b->p = NULL;
}

static void *worker(void *arg) {
  int id = (int)(uintptr_t)arg;
  uint64_t rng = rng_seed(100 + (uint64_t)id);
  struct block slots[SLOTS];
  memset(slots, 0, sizeof slots);
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    struct block *b = &slots[rng_next(&rng) % SLOTS];
    if (!b->p) {
      make(b, rng_size(&rng, (size_t)1 << 20), (uint64_t)id);
    } else if (rng_next(&rng) % 8 == 0) {
      /* Swap with the shared pool: the children free these. */
      pthread_mutex_lock(&g_pool_lock);
      struct block out = {0};
      if (g_npool == POOL) {
        int k = (int)(rng_next(&rng) % POOL);
        out = g_pool[k];
        g_pool[k] = *b;
      } else {
        g_pool[g_npool++] = *b;
      }
      pthread_mutex_unlock(&g_pool_lock);
      b->p = NULL;
      if (out.p) drop(&out);
    } else if (rng_next(&rng) % 4 == 0) {
      size_t n = rng_size(&rng, (size_t)1 << 20) + 1;
      void *q = T_REALLOC(b->p, n);
      REQUIRE(q != NULL, "realloc(%zu)", n);
      size_t keep = b->n < n ? b->n : n;
      REQUIRE(pat_check_prefix(q, b->n, keep, b->key) == PAT_OK, "realloc lost data");
      b->p = q;
      b->n = n;
      b->key = pat_key(q, n, (uint64_t)id);
      pat_fill(q, n, b->key);
    } else {
      drop(b);
    }
    atomic_fetch_add_explicit(&g_progress[id], 1, memory_order_relaxed);
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p) drop(&slots[i]);
  return NULL;
}

/* Runs in the child; exit status 0 means all went well. */
static int child(uint64_t seed) {
  alarm(CHILD_ALARM_S); /* a deadlock becomes a SIGALRM death */
  if (atomic_load(&g_handler_failed)) return 5;
  /* the heaps the parent's other threads were using are copied as fork()
   * found them, maybe between two stores: the check must pass all the
   * same (with TESS_HEAP_SIZE it failed in 5-15 % of the children, on a
   * slab's count or the statistics' slab counts) */
  const char *heap = tess_heap_check();
  if (heap != NULL) {
    fprintf(stderr, "child's heap check: %s\n", heap);
    return 7;
  }
  struct tess_stats stats;
  if (tess_stats_get(&stats, sizeof stats) != 0) return 6;
  tess_stats_print(g_devnull);
  for (int i = 0; i < g_npool; i++) {
    if (!block_ok(&g_pool[i])) return 2;
    if (i % 2 == 0) T_FREE(g_pool[i].p); /* allocated by another parent thread */
  }
  uint64_t rng = rng_seed(seed);
  struct block mine[64];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 64; i++) {
      size_t n = i < 56   ? rng_range(&rng, 0, 2048)
                 : i < 62 ? rng_range(&rng, 64 << 10, 512 << 10)
                          : rng_range(&rng, 2 << 20, 8 << 20);
      make(&mine[i], n, seed + (uint64_t)i);
    }
    for (int i = 0; i < 64; i++) {
      if (!block_ok(&mine[i])) return 3;
      T_FREE(mine[i].p);
    }
  }
  /* Pool blocks we did not free must still be intact. */
  for (int i = 1; i < g_npool; i += 2)
    if (!block_ok(&g_pool[i])) return 4;
  return 0;
}

static void wait_progress(int fork_no) {
  long base[THREADS];
  for (int i = 0; i < THREADS; i++) base[i] = atomic_load(&g_progress[i]);
  for (int tries = 0; tries < 1000; tries++) {
    int all = 1;
    for (int i = 0; i < THREADS; i++) all &= atomic_load(&g_progress[i]) > base[i] + 10;
    if (all) return;
    usleep(10000);
  }
  for (int i = 0; i < THREADS; i++)
    CHECK(atomic_load(&g_progress[i]) > base[i] + 10,
          "parent thread %d made no progress after fork %d", i, fork_no);
  fflush(stderr);
  abort(); /* a stuck thread would hang the join below */
}

static void *allocate_once(void *arg) {
  (void)arg;
  T_FREE(T_MALLOC(64));
  return NULL;
}

/* A fork() child's new thread, finding the pool empty, may take the heap
 * of a thread that exited without giving it back (heap.c), but never one
 * the parent's other threads held: they may have been mid-operation when
 * fork() copied them. Their ids are unknown to the child, and a child
 * took them for gone (4 of 900 such children then failed the heap check:
 * a review). Counted: the heaps in use in the child before and after its
 * thread ran. */
#ifndef TESS_FORK_API
static pthread_barrier_t g_hold_barrier;

static void *hold_a_heap(void *arg) {
  (void)arg;
  void *p = T_MALLOC(64);
  pthread_barrier_wait(&g_hold_barrier); /* it has a heap */
  pthread_barrier_wait(&g_hold_barrier); /* main has forked */
  T_FREE(p);
  return NULL;
}

static void fork_keeps_parent_heaps(void) {
  REQUIRE(pthread_barrier_init(&g_hold_barrier, NULL, 2) == 0, "barrier");
  pthread_t holder;
  REQUIRE(pthread_create(&holder, NULL, hold_a_heap, NULL) == 0, "create");
  pthread_barrier_wait(&g_hold_barrier);
  T_FREE(T_MALLOC(64));
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    struct tess_stats before, after;
    if (tess_stats_get(&before, sizeof before) != 0) _exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, allocate_once, NULL) != 0 || pthread_join(t, NULL) != 0) _exit(3);
    if (tess_stats_get(&after, sizeof after) != 0) _exit(2);
    _exit(after.heaps_in_use == before.heaps_in_use ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a fork() child's thread took a heap the parent's other thread held (status %#x)",
        status);
  pthread_barrier_wait(&g_hold_barrier);
  pthread_join(holder, NULL);
  pthread_barrier_destroy(&g_hold_barrier);
}
#endif

/* A child that no fork handler saw (glibc's _Fork(), clone() without
 * CLONE_VM), of a process with one thread: it may allocate and start
 * threads. Its thread holds the heap that thread held in the parent,
 * named by the parent's ids (the process's token, its own cached thread
 * id), which are not threads of the child: a new thread of the child,
 * finding the pool empty, took that heap for one whose holder had exited
 * (heap.c, gone threads), and the two threads shared it. Also after the
 * child's thread gives its heap back and takes one again, under its own
 * id. Counted: the heaps in use before and after each new thread ran;
 * then the heap check. Exit status 0: none was shared. */
static pthread_barrier_t g_unseen_barrier;

static void *unseen_holder(void *arg) {
  (void)arg;
  void *p = T_MALLOC(64);
  pthread_barrier_wait(&g_unseen_barrier); /* it has a heap */
  pthread_barrier_wait(&g_unseen_barrier); /* the other thread has run */
  T_FREE(p);
  return NULL;
}

static uint64_t heaps_in_use(void) {
  struct tess_stats stats;
  if (tess_stats_get(&stats, sizeof stats) != 0) _exit(2);
  return stats.heaps_in_use;
}

static int unseen_child(void *arg) {
  (void)arg;
  alarm(CHILD_ALARM_S);
  void *mine = T_MALLOC(64); /* the heap copied from the parent */
  uint64_t before = heaps_in_use();
  pthread_t holder, t;
  if (pthread_barrier_init(&g_unseen_barrier, NULL, 2) != 0) _exit(3);
  if (pthread_create(&holder, NULL, unseen_holder, NULL) != 0) _exit(3);
  pthread_barrier_wait(&g_unseen_barrier);
  if (heaps_in_use() != before + 1) _exit(10); /* the holder took ours */
  /* ours given back and taken again: named now by this thread's id */
  T_FREE(mine);
  tess_thread_cleanup();
  mine = T_MALLOC(64);
  if (pthread_create(&t, NULL, allocate_once, NULL) != 0 || pthread_join(t, NULL) != 0) _exit(3);
  if (heaps_in_use() != before + 1) _exit(11); /* it took ours, or the holder's */
  pthread_barrier_wait(&g_unseen_barrier);
  if (pthread_join(holder, NULL) != 0) _exit(3);
  T_FREE(mine);
  const char *heap = tess_heap_check();
  if (heap != NULL) {
    fprintf(stderr, "unseen child's heap check: %s\n", heap);
    _exit(12);
  }
  _exit(0);
}

static void unseen_fork_keeps_own_heap(const char *how) {
  void *volatile mine = T_MALLOC(64); /* this thread holds a heap */
  T_FREE(mine);
  pid_t pid;
  if (strcmp(how, "_Fork") == 0) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
    pid = _Fork();
    if (pid == 0) unseen_child(NULL);
#else
    printf("test_fork: no _Fork() in this C library\n");
    return;
#endif
  } else {
    static char stack[256 << 10];
    pid = clone(unseen_child, stack + sizeof stack, SIGCHLD, NULL);
  }
  REQUIRE(pid > 0, "%s", how);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "a thread of a %s() child took the heap its other thread held (status %#x)", how, status);
}

int main(int argc, char **argv) {
  int forks = argc > 1 ? atoi(argv[1]) : 50;
  unseen_fork_keeps_own_heap("_Fork"); /* first: while this process has one thread */
  unseen_fork_keeps_own_heap("clone");
#ifndef TESS_FORK_API
  /* (not under the sanitizers: TSan refuses a thread started in the child
   * of a multi-threaded process) */
  fork_keeps_parent_heaps();
#endif
  pthread_t t[THREADS], reader;
#ifndef TESS_FORK_API
  pthread_t holder;
  REQUIRE(pthread_create(&holder, NULL, lock_holder, NULL) == 0, "create");
#endif
  g_devnull = fopen("/dev/null", "w");
  REQUIRE(g_devnull != NULL, "/dev/null");
  /* unbuffered: a child's first write to it would allocate its buffer,
   * with the sanitizers' malloc, whose lock another thread may have held
   * at fork() (the first child hung in about one ASan run in 50) */
  REQUIRE(setvbuf(g_devnull, NULL, _IONBF, 0) == 0, "setvbuf");
  for (int i = 0; i < THREADS; i++)
    REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "create");
  REQUIRE(pthread_create(&reader, NULL, stats_reader, NULL) == 0, "create");
  fflush(stdout);

  for (int k = 0; k < forks; k++) {
    usleep(2000 + (useconds_t)(k % 5) * 1000);
    /* Hold the pool lock across fork so the child sees a consistent
     * pool; the allocator's own locks get no such help. */
    pthread_mutex_lock(&g_pool_lock);
    pid_t pid = fork();
    pthread_mutex_unlock(&g_pool_lock);
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) _exit(child((uint64_t)k + 1));

    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    if (WIFSIGNALED(status))
      CHECK(0, "child %d killed by signal %d%s", k, WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (hung: deadlock after fork?)" : "");
    else
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d exited with status %d", k,
            WEXITSTATUS(status));
    wait_progress(k);
  }

  atomic_store(&g_stop, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  pthread_join(reader, NULL);
#ifndef TESS_FORK_API
  pthread_join(holder, NULL);
#endif
  CHECK(!atomic_load(&g_handler_failed), "an allocation in a fork handler failed");
  for (int i = 0; i < g_npool; i++) drop(&g_pool[i]);
  long ops = 0;
  for (int i = 0; i < THREADS; i++) ops += atomic_load(&g_progress[i]);
  printf("test_fork: %d forks, %ld parent operations\n", forks, ops);
  CHECK_HEAP("after the forks");
  return check_finish("test_fork");
}
