/* Deterministic reproducer, run by notify_owner.sh (the library built with
 * a test hook just after the owner load in tessi_heap_free_remote's NOTIFY
 * branch).
 *
 * A remote free F of a block of slab d (full, detached by heap h) loads
 * remote == NOTIFY and owner == h, and is held. h's call ends (d becomes
 * an orphan, NOTIFY cleared); another free makes room in it; heap h2 takes
 * d, fills it and detaches it (NOTIFY, h2's now). F's exchange takes h2's
 * flag and used to push the block on h's delayed list: it reached d's
 * remote stack, but h2, whose flag was gone, never learned that d had
 * room. Then every other block of d was freed, and h2, still in its call,
 * allocated a slab's worth of blocks: none came from d (a fresh slab was
 * carved), which stayed in h2's full list until h2's call ended. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include "orphan_slab.h"

static sem_t at2, go2, cmd_h2, done_h2, start_h2;
static int reused; /* blocks h2 got from d after d's other blocks were freed */

static void hook(int n) {
  static int seen;
  if (!is_f || n != 2 || seen++) return; /* F's first pass, owner loaded */
  sem_post(&at2);
  sem_wait(&go2);
}

static int in_d(const void *p) {
  uintptr_t base = tessi_primary_base + ((uintptr_t)(d - tessi_primary_pages) << TESS_PAGE_SHIFT);
  uintptr_t bytes = (uintptr_t)tessi_classes[d->size_class].slab_pages << TESS_PAGE_SHIFT;
  return (uintptr_t)p >= base && (uintptr_t)p < base + bytes;
}

static void *thread_h2(void *arg) {
  (void)arg;
  void *w = tess_malloc(16); /* a heap of its own, before h's goes to the pool */
  sem_post(&done_h2);
  sem_wait(&start_h2);
  void *x = tess_malloc(64); /* takes orphan d (room: 1 block), fills it */
  void *y = tess_malloc(64); /* d full: detached again, NOTIFY set */
  sem_post(&done_h2);
  sem_wait(&cmd_h2); /* F done, d's other blocks freed: its room is h2's */
  size_t n = 2 * (nblocks - 1);
  void **mine = calloc(n, sizeof *mine);
  for (size_t i = 0; i < n; i++) {
    mine[i] = tess_malloc(64);
    if (in_d(mine[i])) reused++;
  }
  for (size_t i = 0; i < n; i++) tess_free(mine[i]);
  free(mine);
  tess_free(x);
  tess_free(y);
  tess_free(w);
  tess_thread_cleanup();
  return NULL;
}

int main(void) {
  if (orphan_slab_init() != 0) return 2;
  sem_t *sems[] = {&at2, &go2, &cmd_h2, &done_h2, &start_h2};
  for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++) sem_init(sems[i], 0, 0);
  pthread_t h, f, g, h2;
  pthread_create(&h, NULL, thread_h, NULL);
  sem_wait(&done_h);
  pthread_create(&h2, NULL, thread_h2, NULL);
  sem_wait(&done_h2);
  orphan_slab_of_h();
  tessi_test_hook = hook;
  pthread_create(&f, NULL, thread_f, blocks[0]);
  sem_wait(&at2);                      /* F loaded remote == NOTIFY, owner == h */
  sem_post(&cmd_h); sem_wait(&done_h); /* h orphans d */
  pthread_create(&g, NULL, thread_g, blocks[1]); pthread_join(g, NULL);
  sem_post(&start_h2); sem_wait(&done_h2);
  tess_heap_t *h2_heap = atomic_load(&d->owner);
  printf("h2 took d and detached it: %s\n",
         !tessi_is_orphan_owner(h2_heap) && atomic_load(&d->remote) == TESS_REMOTE_NOTIFY ? "yes"
                                                                                       : "no");
  sem_post(&go2); pthread_join(f, NULL);
  tessi_test_hook = NULL;
  printf("after F: d's state %#x, remote %#lx (its NOTIFY taken: %s)\n",
         (unsigned)(uint16_t)d->state, (unsigned long)atomic_load(&d->remote),
         (atomic_load(&d->remote) & TESS_REMOTE_NOTIFY) ? "no" : "yes");
  for (size_t i = 2; i < nblocks; i++) tess_free(blocks[i]); /* d's other blocks (and h's last) */
  sem_post(&cmd_h2); pthread_join(h2, NULL); pthread_join(h, NULL);
  tess_thread_cleanup();
  const char *e = tess_heap_check();
  printf("h2, in its call, got %d of its %zu blocks from d, whose %zu blocks were all free; "
         "heap check %s\n", reused, 2 * (nblocks - 1), nblocks - 1, e ? e : "ok");
  if (reused == 0 || e) { puts("FAIL"); return 1; }
  puts("ok");
  return 0;
}
