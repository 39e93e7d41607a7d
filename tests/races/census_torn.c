/* Deterministic reproducer, run by census_torn.sh (which builds the
 * library with a test hook in tessi_slab_census, just after a span
 * head's kind is read, called with the page's index).
 *
 * In a 16 MiB region a thread S runs an automatic sample (the merge the
 * allocation slow path makes as the footprint grows, whose census takes
 * no lock) and stops at the hook on the head of a large block L, its
 * kind read as large. Meanwhile L is freed, the call ends (L's span goes
 * back to its partition) and 96-byte blocks are allocated until a slab
 * starts at L's page: its head now holds the slab's division magic where
 * a span's length was. S goes on and reads that as L's length. Before
 * the fix it counted 2.9 billion pages of large blocks live for that
 * sample, and the peak of live bytes kept them for good: a read then
 * said a peak of terabytes in 16 MiB (a slab whose carved count is odd has the bit
 * of a cached span: those went to kept_span_bytes, not peaked). */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"
#include "tessalloc.h"

extern void (*tessi_test_hook)(int);
static sem_t at_hook, go_on;
static __thread int is_sampler;
static int large_page; /* L's page index in its region */
static _Atomic(int) paused;

static void hook(int where) {
  if (!is_sampler || where != large_page || atomic_exchange(&paused, 1)) return;
  sem_post(&at_hook);
  sem_wait(&go_on);
}

static void *sampler(void *arg) {
  is_sampler = 1;
  size_t next = atomic_load(&tessi_stats_next_sample);
  tessi_stats_sample(next, next); /* due: it merges, without locks */
  return arg;
}

int main(void) {
  size_t size = (size_t)16 << 20;
  char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || tess_init_region(map, map + size) != 0) return 2;
  void *large = tess_malloc(40000); /* 10 pages */
  if (large == NULL) return 2;
  tess_region_t *r = tessi_region_of((uintptr_t)large);
  large_page = (int)(((uintptr_t)large - r->base) >> TESS_PAGE_SHIFT);
  sem_init(&at_hook, 0, 0);
  sem_init(&go_on, 0, 0);
  tessi_test_hook = hook;
  pthread_t s;
  if (pthread_create(&s, NULL, sampler, NULL) != 0) return 2;
  sem_wait(&at_hook);
  tess_free(large);
  tess_thread_cleanup(); /* the span cache goes back to the partition */
  static void *blocks[100000];
  int n = 0, found = 0;
  while (n < 100000 && !found) {
    void *b = tess_malloc(96);
    if (b == NULL) break;
    blocks[n++] = b;
    found = b == large; /* a slab's first block: its head is L's */
  }
  sem_post(&go_on);
  pthread_join(s, NULL);
  tessi_test_hook = NULL;
  if (!found) {
    printf("FAIL: no slab of 96-byte blocks started at the large block's page\n");
    return 1;
  }
  struct tess_stats st;
  if (tess_stats_get(&st, sizeof st) != 0) return 2;
  for (int i = 0; i < n; i++) tess_free(blocks[i]);
  if (st.peak_live_bytes > st.region_bytes) {
    printf("FAIL: peak of live bytes %llu in a region of %llu\n",
           (unsigned long long)st.peak_live_bytes, (unsigned long long)st.region_bytes);
    return 1;
  }
  printf("ok: peak of live bytes %llu (kept spans %llu, large %llu)\n",
         (unsigned long long)st.peak_live_bytes, (unsigned long long)st.kept_span_bytes,
         (unsigned long long)st.large.live_bytes);
  return 0;
}
