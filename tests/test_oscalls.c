/* No OS memory call after a fixed region is set up.
 *
 * This program defines mmap, munmap, mremap, madvise, brk and sbrk itself
 * (counting, then making the system call), so the statically linked
 * allocator's calls land here. glibc's own calls (thread stacks) use its
 * internal entry points and are not counted.
 *
 *   test_oscalls region    tess_init_region over memory this program maps;
 *                          then 8 threads allocate and free every kind of
 *                          block, across threads, up to exhaustion and back:
 *                          no call may be counted after init
 *   test_oscalls heap-size (linked with the malloc-replacing library, run
 *                          with TESS_HEAP_SIZE=32M) the first malloc makes
 *                          exactly one reservation, everything after none,
 *                          and allocation ends in ENOMEM inside 32 MiB
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"
#include "tessalloc.h"

static atomic_long os_calls;
static char last_call[16];

static void note(const char *name) {
  atomic_fetch_add(&os_calls, 1);
  strncpy(last_call, name, sizeof(last_call) - 1);
}

void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  note("mmap");
  return (void *)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
}
int munmap(void *addr, size_t length) {
  note("munmap");
  return (int)syscall(SYS_munmap, addr, length);
}
void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...) {
  note("mremap");
  va_list ap;
  va_start(ap, flags);
  void *new_address = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
  va_end(ap);
  return (void *)syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
}
int madvise(void *addr, size_t length, int advice) {
  note("madvise");
  return (int)syscall(SYS_madvise, addr, length, advice);
}
int brk(void *addr) {
  note("brk");
  return syscall(SYS_brk, addr) == (long)addr ? 0 : -1;
}
void *sbrk(intptr_t increment) {
  note("sbrk");
  errno = ENOMEM; /* nothing here needs it: count it and refuse */
  (void)increment;
  return (void *)-1;
}

/* Every kind of block, freed by the next thread along. */
static void *worker(void *arg) {
  _Atomic(void *) *slots = arg;
  uint64_t rng = (uintptr_t)pthread_self();
  for (int i = 0; i < 30000; i++) {
    uint64_t r = rng_next(&rng);
    size_t size = r % 32 == 0 ? r % (3 << 20) : r % 4096;
    /* every entry point, alignments up to 4 MiB, blocks up to 3 MiB and
     * (1 in 512) beyond a partition's 8 MiB */
    size_t align = (size_t)32 << (r % 18);
    void *p = NULL;
    if (r % 8 == 6) {
      if (tess_posix_memalign(&p, align, size) != 0) p = NULL;
    } else {
      p = r % 8 == 0     ? tess_calloc(1, size)
          : r % 8 == 1   ? tess_aligned_alloc(align, size)
          : r % 8 == 2   ? tess_memalign(align, size)
          : r % 8 == 3   ? tess_valloc(size)
          : r % 8 == 4   ? tess_pvalloc(size)
          : r % 512 == 5 ? tess_malloc((size_t)9 << 20)
                         : tess_malloc(size);
    }
    if (p != NULL && r % 3 == 0) {
      void *q = tess_realloc(p, size + 5000);
      if (q != NULL) p = q;
    }
    void *old = atomic_exchange(&slots[r % 256], p);
    tess_free(old);
    if (i % 5000 == 4999) tess_thread_cleanup();
    if (i % 10000 == 9999) { /* the statistics read the heap too */
      struct tess_stats stats;
      static _Thread_local char json[1 << 16];
      CHECK(tess_stats_get(&stats, sizeof stats) == 0, "tess_stats_get");
      CHECK(tess_stats_json(json, sizeof json) > 0, "tess_stats_json");
    }
  }
  return NULL;
}

static void region(void) {
  size_t size = (size_t)40 << 20;
  char *mem = (char *)syscall(SYS_mmap, NULL, size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED, "mmap");
  REQUIRE(tess_init_region(mem + 100, mem + size) == 0, "tess_init_region");
  long before = atomic_load(&os_calls);
  static _Atomic(void *) slots[256];
  pthread_t threads[8];
  for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, worker, slots);
  for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
  const char *broken = tess_heap_check(); /* (with no other thread running) */
  CHECK(broken == NULL, "heap check: %s", broken);
  /* run it dry, then use it again */
  void *blocks[20000];
  int n = 0;
  while (n < 20000 && (blocks[n] = tess_malloc(4000)) != NULL) n++;
  CHECK(n < 20000, "40 MiB never filled up");
  while (n > 0) tess_free(blocks[--n]);
  for (int i = 0; i < 256; i++) tess_free(atomic_exchange(&slots[i], NULL));
  void *p = tess_malloc(1 << 20);
  CHECK(p != NULL, "no 1 MiB block after everything was freed");
  tess_free(p);
  long calls = atomic_load(&os_calls) - before;
  printf("region: %ld OS memory calls after init\n", calls);
  CHECK(calls == 0, "%ld OS memory calls after init (the last: %s)", calls, last_call);
}

static void heap_size(void) {
  const char *env = getenv("TESS_HEAP_SIZE");
  REQUIRE(env != NULL && strcmp(env, "32M") == 0, "run with TESS_HEAP_SIZE=32M");
  long at_start = atomic_load(&os_calls);
  void *first = malloc(100); /* the replaced malloc: sets up the region */
  long at_init = atomic_load(&os_calls) - at_start;
  CHECK(at_init == 1, "%ld OS memory calls to set up the region, not 1", at_init);
  char *lo = first, *hi = first;
  size_t total = 0;
  void **blocks = NULL;
  size_t n = 0;
  for (;;) {
    errno = 0;
    void **grown = realloc(blocks, (n + 1) * sizeof(void *));
    if (grown == NULL) break;
    blocks = grown;
    char *p = malloc(7000);
    if (p == NULL) {
      CHECK(errno == ENOMEM, "errno %d, not ENOMEM", errno);
      break;
    }
    blocks[n++] = p;
    total += 7000;
    if (p < lo) lo = p;
    if (p + 7000 > hi) hi = p + 7000;
  }
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  free(blocks);
  free(first);
  long after = atomic_load(&os_calls) - at_start - at_init;
  printf("heap-size: %zu KiB allocated in a span of %zu KiB; %ld OS memory calls after init\n",
         total >> 10, (size_t)(hi - lo) >> 10, after);
  CHECK(hi - lo <= (32 << 20), "blocks span %zu bytes, more than the 32 MiB heap",
        (size_t)(hi - lo));
  CHECK(total > (24 << 20), "only %zu bytes fit in the 32 MiB heap", total);
  CHECK(after == 0, "%ld OS memory calls after init (the last: %s)", after, last_call);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "region") == 0) region();
  else if (argc == 2 && strcmp(argv[1], "heap-size") == 0) heap_size();
  else {
    fprintf(stderr, "usage: test_oscalls region|heap-size\n");
    return 2;
  }
  return check_finish("test_oscalls");
}
