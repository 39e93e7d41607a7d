/* Deterministic reproducer, run by notify_aba.sh (which builds the library
 * with a test hook in tessi_heap_free_remote's NOTIFY branch, before and
 * after its owner load).
 *
 * A remote free F loads d->remote == NOTIFY (slab d detached by heap h);
 * h orphans d (remote -> 0, owner -> list mark); F loads owner == mark; a
 * heap h2 takes the orphan, fills it and detaches it again (remote ->
 * NOTIFY); F's CAS(NOTIFY -> 0) succeeds (ABA) and F pushes its block on
 * ((tess_heap_t *)mark)->delayed: a write into allocator globals, and the
 * block is lost (d's state counts it out forever). */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "orphan_slab.h"

static sem_t at1, go1, at2, go2, cmd_h2, done_h2;

static void hook(int n) {
  static int seen[3];
  if (!is_f || seen[n]++) return; /* only F's first pass through each point */
  if (n == 1) { sem_post(&at1); sem_wait(&go1); }
  if (n == 2) { sem_post(&at2); sem_wait(&go2); }
}

static void *thread_h2(void *arg) {
  (void)arg;
  void *x = tess_malloc(64); /* takes orphan d (room: 1 block), fills it */
  void *y = tess_malloc(64); /* d full: detached again, NOTIFY set */
  sem_post(&done_h2);
  sem_wait(&cmd_h2);
  tess_free(x);
  tess_free(y);
  tess_thread_cleanup();
  return NULL;
}

int main(void) {
  if (orphan_slab_init() != 0) return 2;
  sem_t *sems[] = {&at1, &go1, &at2, &go2, &cmd_h2, &done_h2};
  for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++) sem_init(sems[i], 0, 0);
  pthread_t h, f, g, h2;
  pthread_create(&h, NULL, thread_h, NULL);
  sem_wait(&done_h);
  orphan_slab_of_h();
  printf("slab of %zu blocks, detached: %s, remote=%#lx\n", nblocks - 1,
         (d->state & TESS_STATE_DETACHED) ? "yes" : "no", (unsigned long)atomic_load(&d->remote));
  tessi_test_hook = hook;
  pthread_create(&f, NULL, thread_f, blocks[0]);
  sem_wait(&at1);                 /* F loaded remote == NOTIFY */
  sem_post(&cmd_h); sem_wait(&done_h); /* h orphans d */
  tess_heap_t *mark = atomic_load(&d->owner);
  printf("owner after the trim: %p (orphan mark: %s)\n", (void *)mark,
         tessi_is_orphan_owner(mark) ? "yes" : "no");
  sem_post(&go1);
  sem_wait(&at2);                 /* F loaded owner == mark */
  pthread_create(&g, NULL, thread_g, blocks[1]); pthread_join(g, NULL);
  pthread_create(&h2, NULL, thread_h2, NULL); sem_wait(&done_h2);
  uintptr_t remote = atomic_load(&d->remote);
  printf("after h2: owner=%p remote=%#lx (NOTIFY again: %s)\n", (void *)atomic_load(&d->owner),
         (unsigned long)remote, remote == TESS_REMOTE_NOTIFY ? "yes" : "no");
  void *before = *(void **)((char *)mark + offsetof(tess_heap_t, delayed));
  sem_post(&go2); pthread_join(f, NULL);
  void *after = *(void **)((char *)mark + offsetof(tess_heap_t, delayed));
  int corrupted = after != before && after == blocks[0];
  char *field = (char *)mark + offsetof(tess_heap_t, delayed);
  printf("bytes at mark+offsetof(delayed) (%p, %zu bytes past the marks array): %p -> %p%s\n",
         (void *)field, (size_t)(field - tessi_orphan_marks) - TESS_ORPHAN_LISTS, before, after,
         corrupted ? "  <== F's block pushed on a list mark as if it were a heap" : "");
  tessi_test_hook = NULL;
  sem_post(&cmd_h2); pthread_join(h2, NULL); pthread_join(h, NULL);
  for (size_t i = 2; i < nblocks; i++) tess_free(blocks[i]);
  tess_thread_cleanup();
  const char *e = tess_heap_check();
  printf("after freeing every block: heap check %s; slab's state %d (0 expected: gone), owner %p\n",
         e ? e : "ok", d->state & TESS_STATE_COUNT, (void *)atomic_load(&d->owner));
  int leaked = d->kind == TESS_PAGE_SLAB && (d->state & TESS_STATE_COUNT) != 0;
  if (corrupted || leaked || e) { puts("FAIL"); return 1; }
  puts("ok");
  return 0;
}
