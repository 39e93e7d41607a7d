/* A free racing the first initialization: one thread frees NULL in a loop
 * while the main thread's first allocation sets the primary region up.
 * The free reads the region's base and size without a lock; they are
 * published base first, then size (init.c, make_primary), both atomic.
 * Stored the other way round and the base as a plain variable, a free
 * could pair the new size with base 0, and ThreadSanitizer reported a
 * data race in every run (a review); in its build this test then fails
 * (TSan's exit code). Elsewhere it checks that nothing breaks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "check.h"
#include "tessalloc.h"

static atomic_int started, stop;

static void *free_null(void *arg) {
  (void)arg;
  atomic_store(&started, 1);
  while (!atomic_load(&stop)) tess_free(NULL);
  return NULL;
}

int main(void) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_null, NULL) == 0, "thread");
  while (!atomic_load(&started)) {
  }
  void *p = tess_malloc(16); /* the first allocation: initialization */
  REQUIRE(p != NULL, "malloc");
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  tess_free(p);
  CHECK(tess_heap_check() == NULL, "heap check: %s", tess_heap_check());
  return check_finish("race_first_init");
}
