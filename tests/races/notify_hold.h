/* What the reproducers of a free held at tessi_heap_free_remote's NOTIFY
 * hook (shared_delayed.c, idle_delayed.c) share: the hook, which stops
 * the first free a thread marked `is_f` makes there until go_on is
 * posted (at_hook tells that it is there), the region and the
 * footprint. notify_hold_init() comes first. */
#ifndef NOTIFY_HOLD_H
#define NOTIFY_HOLD_H

#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/mman.h>

#include "tessalloc.h"

extern void (*tessi_test_hook)(int);
static sem_t at_hook, go_on;
static __thread int is_f;

static void notify_hold(int where) {
  static int seen;
  if (where != 1 || !is_f || seen++) return;
  sem_post(&at_hook);
  sem_wait(&go_on);
}

/* A fixed region of `size` bytes, its ends unaligned, and the hook;
 * nonzero when either cannot be had. */
static int notify_hold_init(size_t size) {
  char *map = mmap(NULL, size + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || tess_init_region(map + 13, map + 13 + size) != 0) return -1;
  sem_init(&at_hook, 0, 0);
  sem_init(&go_on, 0, 0);
  tessi_test_hook = notify_hold;
  return 0;
}

static size_t footprint(void) {
  struct tess_stats s;
  return tess_stats_get(&s, sizeof s) == 0 ? (size_t)s.footprint : 0;
}

/* The verdict: the footprint back at `before`, and the heap checks out;
 * printed, and the exit status. */
static int notify_hold_verdict(size_t before) {
  size_t after = footprint();
  const char *err = tess_heap_check();
  printf("%s: footprint %zu bytes before the calls, %zu after them (%+zd); heap check %s\n",
         after == before && err == NULL ? "ok" : "FAIL", before, after,
         (ssize_t)after - (ssize_t)before, err != NULL ? err : "ok");
  return after == before && err == NULL ? 0 : 1;
}

#endif
