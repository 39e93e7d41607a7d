/* The review's benchmark behind "25-50 % slower" (twenty-first session):
 * T threads each take 8 blocks of PAGES pages and free them, over and
 * over, for SECS seconds in a 64 MiB fixed region that stays near its
 * footprint's peak, so nearly every free gives pages back to the bound.
 * Prints allocation and free calls per second (Mops/s). Compare builds
 * in turn on one machine:
 *   cc -O2 -pthread -Iinclude span_churn.c build/libtessalloc-api.a -o churn
 *   ./churn 8 16 2 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tessalloc.h"

static size_t block_bytes;
static _Atomic int stop;
static _Atomic long total;

static void *churn(void *arg) {
  (void)arg;
  long calls = 0;
  void *held[8];
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (int i = 0; i < 8; i++) held[i] = tess_malloc(block_bytes);
    for (int i = 0; i < 8; i++) tess_free(held[i]);
    calls += 16;
  }
  atomic_fetch_add(&total, calls);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s THREADS PAGES SECONDS\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[1]);
  block_bytes = (size_t)atoi(argv[2]) * 4096;
  double seconds = atof(argv[3]);
  size_t size = (size_t)64 << 20;
  char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || tess_init_region(map, map + size) != 0 || threads < 1 ||
      threads > 64) {
    fprintf(stderr, "churn: no region, or threads not in 1..64\n");
    return 2;
  }
  pthread_t t[64];
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, churn, NULL);
  usleep((useconds_t)(seconds * 1e6));
  atomic_store(&stop, 1);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("threads %d, %s pages: %.2f Mops/s\n", threads, argv[2], total / seconds / 1e6);
  return 0;
}
