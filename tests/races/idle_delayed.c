/* Deterministic reproducer, run by idle_delayed.sh (which builds the
 * library with a test hook in tessi_heap_free_remote's NOTIFY branch,
 * between taking a detached slab's NOTIFY and pushing the block onto the
 * owner's delayed list).
 *
 * In an 8 MiB region three calls hold heaps at once: C, V and W. C ends
 * first. V fills a slab of 1024-byte blocks (detached), a thread F frees
 * one of them and stops at the hook, holding the NOTIFY it took; V frees
 * the rest and ends (its slab becomes an orphan, counting F's block);
 * then W ends, so that the pool holds W's heap (warmest), V's and C's
 * (coldest). F pushes onto V's heap's delayed list now. Then 200 calls,
 * one at a time, each allocate, free and end: the footprint must be back
 * where it started once they are done, with no reclaim (nothing runs
 * short). Before the fix only the coldest idle heap was ever trimmed
 * again (it went back to the cold end), so V's heap, in the middle of
 * the pool, kept the block and the orphan its page, for good. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#include "notify_hold.h"
#include "tessalloc.h"

static sem_t held[3], end[3], ended[3];
static void *blocks[5];
static pthread_t f;

static void *freer(void *arg) {
  is_f = 1;
  tess_free(arg);
  return NULL;
}

/* call 0: C, 1: V, 2: W */
static void *call(void *arg) {
  int who = (int)(size_t)arg;
  void *p = tess_malloc(100); /* a heap of its own */
  sem_post(&held[who]);
  sem_wait(&end[who]);
  tess_free(p);
  if (who == 1) {
    /* 1024-byte blocks, 4 to a one-page slab: the fifth detaches the
     * first slab (full) and takes another */
    for (int i = 0; i < 5; i++) blocks[i] = tess_malloc(1024);
    pthread_create(&f, NULL, freer, blocks[0]);
    sem_wait(&at_hook); /* F holds the first slab's NOTIFY */
    for (int i = 1; i < 5; i++) tess_free(blocks[i]);
  }
  tess_thread_cleanup();
  sem_post(&ended[who]);
  return NULL;
}

int main(void) {
  if (notify_hold_init((size_t)8 << 20) != 0) return 2;
  for (int i = 0; i < 3; i++) {
    sem_init(&held[i], 0, 0);
    sem_init(&end[i], 0, 0);
    sem_init(&ended[i], 0, 0);
  }
  tess_free(tess_malloc(100));
  tess_thread_cleanup();
  size_t before = footprint();
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    pthread_create(&t[i], NULL, call, (void *)(size_t)i);
    sem_wait(&held[i]);
  }
  for (int i = 0; i < 3; i++) { /* C, then V, then W end */
    sem_post(&end[i]);
    sem_wait(&ended[i]);
  }
  sem_post(&go_on); /* F pushes now, onto an idle heap in the pool's middle */
  pthread_join(f, NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 200; i++) {
    tess_free(tess_malloc(64));
    tess_thread_cleanup();
  }
  return notify_hold_verdict(before);
}
