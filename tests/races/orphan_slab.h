/* What the reproducers of a free held while its slab is orphaned and
 * taken again (notify_aba.c, notify_owner.c) share: an 8 MiB region; heap
 * h's thread, which fills slab d of 64-byte blocks (and one block more, so
 * that d is full and detached) and ends its call when cmd_h is posted;
 * thread_g, a free into the orphan; thread_f, the free F that the hook
 * holds (is_f). orphan_slab_init() comes first, orphan_slab_of_h() once h
 * has filled d. */
#ifndef ORPHAN_SLAB_H
#define ORPHAN_SLAB_H

#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"
#include "tessalloc.h"

extern void (*tessi_test_hook)(int);
static sem_t cmd_h, done_h;
static __thread int is_f;
static void **blocks;
static size_t nblocks;
static tess_page_t *d;

static void *thread_h(void *arg) {
  (void)arg;
  for (size_t i = 0; i < nblocks; i++) blocks[i] = tess_malloc(64);
  sem_post(&done_h);
  sem_wait(&cmd_h);
  tess_thread_cleanup(); /* end of the call: d becomes an orphan */
  sem_post(&done_h);
  return NULL;
}

static void *thread_g(void *arg) { tess_free(arg); return NULL; } /* a free into the orphan */

static void *thread_f(void *arg) {
  is_f = 1;
  tess_free(arg);
  return NULL;
}

/* The region, the blocks' array and the two semaphores of h; nonzero when
 * the region cannot be had. */
static int orphan_slab_init(void) {
  size_t size = 8 << 20;
  char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || tess_init_region(map, map + size) != 0) return -1;
  nblocks = tessi_classes[tessi_class_of(64)].slab_blocks + 1;
  blocks = calloc(nblocks, sizeof *blocks);
  sem_init(&cmd_h, 0, 0);
  sem_init(&done_h, 0, 0);
  return 0;
}

/* d: the slab of h's first block. */
static void orphan_slab_of_h(void) {
  size_t page = ((uintptr_t)blocks[0] - tessi_primary_base) >> TESS_PAGE_SHIFT;
  d = tessi_page_head(&tessi_primary_pages[page]);
}

#endif
