/* The speed of a thread past fixed mode's cap on heaps (the twenty-eighth
 * session): HOLDERS threads hold heaps of their own (waiting on a
 * barrier), then one more thread makes 1,000,000 malloc(64)/free pairs,
 * with a heap of its own if the cap leaves room, else from the shared heap.
 * Prints ns per pair. In a 4 MiB region the cap is 6 heaps.
 *   cc -O2 -std=gnu11 -pthread -Iinclude capped_speed.c build/libtessalloc-api.a -o capped_speed
 *   ./capped_speed MIB HOLDERS   (here: 4 0, then 4 8) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "tessalloc.h"

enum { PAIRS = 1000000 };
static pthread_barrier_t held, done;

static void *holder(void *arg) {
  (void)arg;
  void *p = tess_malloc(32);
  pthread_barrier_wait(&held);
  pthread_barrier_wait(&done);
  tess_free(p);
  tess_thread_cleanup();
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *runner(void *arg) {
  (void)arg;
  void *keep[16] = {0};
  double t0 = now();
  for (long i = 0; i < PAIRS; i++) {
    tess_free(keep[i & 15]);
    keep[i & 15] = tess_malloc(64);
  }
  double t1 = now();
  for (int j = 0; j < 16; j++) tess_free(keep[j]);
  printf("%.1f ns per malloc+free\n", (t1 - t0) / PAIRS * 1e9);
  tess_thread_cleanup();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  size_t region = (size_t)atol(argv[1]) << 20;
  int holders = atoi(argv[2]);
  char *m = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || holders > 256 || tess_init_region(m, m + region) != 0) return 2;
  pthread_barrier_init(&held, NULL, (unsigned)holders + 1);
  pthread_barrier_init(&done, NULL, (unsigned)holders + 1);
  pthread_t t[256], r;
  for (int i = 0; i < holders; i++) pthread_create(&t[i], NULL, holder, NULL);
  pthread_barrier_wait(&held);
  pthread_create(&r, NULL, runner, NULL);
  pthread_join(r, NULL);
  pthread_barrier_wait(&done);
  for (int i = 0; i < holders; i++) pthread_join(t[i], NULL);
  return 0;
}
