/* Deterministic reproducer, run by shared_delayed.sh (which builds the
 * library with a test hook in tessi_heap_free_remote's NOTIFY branch,
 * between taking a detached slab's NOTIFY and pushing the block onto the
 * owner's delayed list).
 *
 * In a 1 MiB region (2 heaps allowed), the main thread and a holder take
 * both heaps; a call C past the cap allocates from the shared heap until
 * one of its slabs is full (detached), a thread F frees a block of that
 * slab and stops at the hook, holding the NOTIFY it took; C frees the
 * rest and ends its call, which trims the shared heap (the slab becomes
 * an orphan); then F pushes onto the shared heap's delayed list. Nothing
 * allocates from the shared heap again. Once every call has ended and a
 * fill has run the region out of memory (a reclaim), the footprint must
 * be back where it started: before 2026-11-27's fix the orphan stayed,
 * counting F's block as live, for good. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#include "notify_hold.h"
#include "tessalloc.h"

static sem_t holder_ready, holder_go;
static void *blocks[5];

static void *holder(void *arg) {
  (void)arg;
  void *p = tess_malloc(100); /* the second heap: the cap */
  sem_post(&holder_ready);
  sem_wait(&holder_go);
  tess_free(p);
  tess_thread_cleanup();
  return NULL;
}

static void *freer(void *arg) {
  is_f = 1;
  tess_free(arg);
  return NULL;
}

static pthread_t f;

static void *capped_call(void *arg) {
  (void)arg;
  /* 1024-byte blocks, 4 to a one-page slab: the fifth detaches the first
   * slab (full) and takes another */
  for (int i = 0; i < 5; i++) blocks[i] = tess_malloc(1024);
  pthread_create(&f, NULL, freer, blocks[0]);
  sem_wait(&at_hook); /* F holds the first slab's NOTIFY */
  for (int i = 1; i < 5; i++) tess_free(blocks[i]);
  tess_thread_cleanup(); /* the shared heap is trimmed */
  return NULL;
}

int main(void) {
  if (notify_hold_init((size_t)1 << 20) != 0) return 2;
  sem_init(&holder_ready, 0, 0);
  sem_init(&holder_go, 0, 0);
  tess_free(tess_malloc(100));
  tess_thread_cleanup();
  size_t before = footprint();
  void *mine = tess_malloc(100); /* the first heap */
  pthread_t h, c;
  pthread_create(&h, NULL, holder, NULL);
  sem_wait(&holder_ready);
  pthread_create(&c, NULL, capped_call, NULL);
  pthread_join(c, NULL);
  sem_post(&go_on); /* F pushes now, after the trim */
  pthread_join(f, NULL);
  sem_post(&holder_go);
  pthread_join(h, NULL);
  tess_free(mine);
  tess_thread_cleanup();
  /* run the region out of memory (a reclaim), then free it all */
  static void *all[1 << 12];
  size_t n = 0;
  while (n < sizeof all / sizeof all[0] && (all[n] = tess_malloc(1024)) != NULL) n++;
  for (size_t i = 0; i < n; i++) tess_free(all[i]);
  tess_thread_cleanup();
  return notify_hold_verdict(before);
}
