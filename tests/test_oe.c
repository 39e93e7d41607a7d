/* Open Enclave's pluggable-allocator interface (libtessalloc-oe.a), used
 * the way OE uses it: oe_allocator_init over the heap, enclave calls
 * between thread_init and thread_cleanup, and oe_allocator_mallinfo, whose
 * current size is the bytes allocated at the moment (OE's definition): a
 * call that frees all it allocated leaves it where it was, as OE's own
 * memory test asks. It was the footprint before, which a call that took a
 * slab or laid descriptors left higher. Its maximum is what blocks can
 * take, so that 0.99 of it less the current size fits in one block, as
 * OE's bigmalloc test asks (the region's size, reported before, did not;
 * the limits of that: docs/mechanisms/fixed-heap.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "check.h"
#include "tessalloc.h"
#include "tessalloc_oe.h"

#define MiB ((size_t)1 << 20)

static oe_mallinfo_t mallinfo_now(void) {
  oe_mallinfo_t info;
  REQUIRE(oe_allocator_mallinfo(&info) == OE_OK, "oe_allocator_mallinfo");
  CHECK(info.peak_allocated_heap_size >= info.current_allocated_heap_size,
        "peak %zu below current %zu", info.peak_allocated_heap_size,
        info.current_allocated_heap_size);
  return info;
}

/* OE's tests/memory loops: fixed and random sizes, each block freed. */
static void call_that_frees_all(unsigned seed) {
  oe_allocator_thread_init();
  for (int i = 0; i < 1000; i++) oe_allocator_free(oe_allocator_malloc(1024));
  void *held[64] = {0};
  for (int i = 0; i < 20000; i++) {
    int k = rand_r(&seed) % 64;
    oe_allocator_free(held[k]);
    size_t n = (size_t)(rand_r(&seed) % 4 == 0 ? rand_r(&seed) % (200 << 10)
                                                : rand_r(&seed) % 2048);
    held[k] = k % 3 == 0 ? oe_allocator_calloc(1, n) : oe_allocator_malloc(n);
    REQUIRE(held[k] != NULL || n == 0, "allocation of %zu bytes", n);
  }
  for (int k = 0; k < 64; k++) oe_allocator_free(held[k]);
  oe_allocator_thread_cleanup();
}

/* mallinfo's peak covers a high of live bytes reached in pages already in
 * use: blocks made in the holes of a slab, after a larger high of the
 * footprint. The live bytes' own peak, seen only at the statistics'
 * samples (at footprint growth), reported 2.07 MB of a true 3.10. */
static void peak_reached_in_holes(void) {
  static void *small[2000], *big[16], *again[1000];
  size_t live = 0, most = 0;
  oe_allocator_thread_init();
  for (int i = 0; i < 2000; i++) {
    REQUIRE((small[i] = oe_allocator_malloc(1000)) != NULL, "malloc(1000)");
    live += oe_allocator_malloc_usable_size(small[i]);
  }
  for (int i = 0; i < 2000; i += 2) {
    live -= oe_allocator_malloc_usable_size(small[i]);
    oe_allocator_free(small[i]);
  }
  for (int i = 0; i < 16; i++) {
    REQUIRE((big[i] = oe_allocator_malloc(65536)) != NULL, "malloc(65536)");
    live += oe_allocator_malloc_usable_size(big[i]);
  }
  for (int i = 0; i < 1000; i++) {
    REQUIRE((again[i] = oe_allocator_malloc(1000)) != NULL, "malloc(1000)");
    live += oe_allocator_malloc_usable_size(again[i]);
  }
  most = live;
  for (int i = 1; i < 2000; i += 2) oe_allocator_free(small[i]);
  for (int i = 0; i < 16; i++) oe_allocator_free(big[i]);
  for (int i = 0; i < 1000; i++) oe_allocator_free(again[i]);
  oe_allocator_thread_cleanup();
  oe_mallinfo_t info = mallinfo_now();
  CHECK(info.peak_allocated_heap_size >= most, "peak %zu below the %zu bytes live at once",
        info.peak_allocated_heap_size, most);
  CHECK(info.peak_allocated_heap_size <= info.max_total_heap_size, "peak %zu above max %zu",
        info.peak_allocated_heap_size, info.max_total_heap_size);
  CHECK(info.current_allocated_heap_size == 0, "%zu bytes allocated after all was freed",
        info.current_allocated_heap_size);
}

/* oe_allocator_mallinfo and tess_stats_json on a stack of one page with
 * nothing mapped below (an enclave's thread stacks can be that small):
 * they put the 5.4 KiB statistics struct on the stack (mallinfo twice,
 * its own and tess_stats_get's) and ran off the end. Not under the
 * sanitizers, whose frames are larger and which follow stack switches
 * poorly. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static ucontext_t small_stack_ctx, main_ctx;
static oe_result_t small_stack_result = OE_FAILURE;
static oe_mallinfo_t small_stack_info;

static size_t small_stack_json_length;

static void mallinfo_on_small_stack(void) {
  small_stack_result = oe_allocator_mallinfo(&small_stack_info);
  static char json[1 << 16];
  small_stack_json_length = tess_stats_json(json, sizeof json);
}

static void mallinfo_small_stack(void) {
  size_t page = 4096, pages = 1;
  char *map = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED, "mmap");
  REQUIRE(mprotect(map, page, PROT_NONE) == 0, "guard page");
  REQUIRE(getcontext(&small_stack_ctx) == 0, "getcontext");
  small_stack_ctx.uc_stack.ss_sp = map + page;
  small_stack_ctx.uc_stack.ss_size = pages * page;
  small_stack_ctx.uc_link = &main_ctx;
  makecontext(&small_stack_ctx, mallinfo_on_small_stack, 0);
  REQUIRE(swapcontext(&main_ctx, &small_stack_ctx) == 0, "swapcontext");
  CHECK(small_stack_result == OE_OK, "mallinfo on a 4 KiB stack");
  CHECK(small_stack_info.max_total_heap_size > 0, "mallinfo on a 4 KiB stack: max");
  CHECK(small_stack_json_length > 0, "tess_stats_json on a 4 KiB stack");
  munmap(map, (pages + 1) * page);
}
#else
static void mallinfo_small_stack(void) {}
#endif

/* Reads while calls allocate large blocks and free them once they have
 * ended (as a destructor's frees come after the thread's cleanup): a
 * block's allocation is counted in its heap's counters, its free in those
 * of threads without a heap, which a read added up first, so a read that
 * lost its CPU between the two counted every block made meanwhile as
 * live: up to 53 GB allocated of a 16 MiB heap, in 3 to 5 of 23,000 to
 * 34,000 reads on 2 busy CPUs (fails on the old code). */
static _Atomic(int) churn_stop;

static void *churn_late_frees(void *arg) {
  size_t size = (size_t)(uintptr_t)arg;
  while (!atomic_load_explicit(&churn_stop, memory_order_relaxed)) {
    oe_allocator_thread_init();
    void *p = oe_allocator_malloc(size);
    oe_allocator_thread_cleanup();
    oe_allocator_free(p);
  }
  return NULL;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void mallinfo_during_late_frees(void) {
  enum { THREADS = 3 };
  pthread_t threads[THREADS];
  atomic_store(&churn_stop, 0);
  for (int i = 0; i < THREADS; i++) {
    REQUIRE(pthread_create(&threads[i], NULL, churn_late_frees, (void *)(uintptr_t)(3 * MiB)) == 0,
            "pthread_create");
  }
  long reads = 0, above = 0;
  size_t worst = 0, max = 0;
  double end = seconds_now() + 1.0;
  do {
    oe_mallinfo_t info;
    REQUIRE(oe_allocator_mallinfo(&info) == OE_OK, "oe_allocator_mallinfo");
    reads++;
    max = info.max_total_heap_size;
    if (info.current_allocated_heap_size > max || info.peak_allocated_heap_size > max) {
      above++;
      if (info.current_allocated_heap_size > worst) worst = info.current_allocated_heap_size;
    }
  } while (seconds_now() < end);
  atomic_store(&churn_stop, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  CHECK(above == 0, "%ld of %ld reads while calls freed late above the maximum %zu (current %zu)",
        above, reads, max, worst);
}

/* Every entry point through OE's names, as an enclave calls them:
 * aligned_alloc and posix_memalign (alignments up to 1 MiB, their errors),
 * realloc keeping the contents, calloc zeroing memory that was used. */
static void every_entry_point(void) {
  oe_allocator_thread_init();
  for (size_t align = 16; align <= ((size_t)1 << 20); align <<= 1) {
    char *p = oe_allocator_aligned_alloc(align, 3 * align);
    REQUIRE(p != NULL, "aligned_alloc(%zu)", align);
    CHECK(((uintptr_t)p & (align - 1)) == 0, "aligned_alloc(%zu) gave %p", align, (void *)p);
    CHECK(oe_allocator_malloc_usable_size(p) >= 3 * align, "aligned_alloc usable size");
    memset(p, 0x6B, 3 * align);
    void *q = (void *)1;
    CHECK(oe_allocator_posix_memalign(&q, align, align + 1) == 0 && q != NULL &&
              ((uintptr_t)q & (align - 1)) == 0,
          "posix_memalign(%zu)", align);
    oe_allocator_free(q);
    oe_allocator_free(p);
  }
  void *untouched = (void *)0x5A;
  CHECK(oe_allocator_posix_memalign(&untouched, 24, 64) == EINVAL && untouched == (void *)0x5A,
        "posix_memalign with alignment 24: EINVAL, *out untouched");
  CHECK(oe_allocator_posix_memalign(&untouched, 64, SIZE_MAX - 4096) == ENOMEM &&
            untouched == (void *)0x5A,
        "posix_memalign of SIZE_MAX - 4096: ENOMEM, *out untouched");
  /* realloc keeps the contents as it grows across slab and page sizes and
   * shrinks back */
  unsigned char *r = oe_allocator_malloc(24);
  REQUIRE(r != NULL, "malloc(24)");
  for (size_t i = 0; i < 24; i++) r[i] = (unsigned char)(i * 7 + 1);
  size_t kept = 24;
  const size_t steps[] = {100, 3000, 70000, 1 << 20, 5000, 40};
  for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
    unsigned char *next = oe_allocator_realloc(r, steps[k]);
    REQUIRE(next != NULL, "realloc to %zu", steps[k]);
    r = next;
    size_t check = kept < steps[k] ? kept : steps[k];
    for (size_t i = 0; i < check; i++) {
      if (r[i] != (unsigned char)(i * 7 + 1)) {
        CHECK(0, "realloc to %zu: byte %zu lost", steps[k], i);
        break;
      }
    }
    for (size_t i = check; i < steps[k]; i++) r[i] = (unsigned char)(i * 7 + 1);
    kept = steps[k];
  }
  oe_allocator_free(r);
  /* calloc over memory that held data */
  for (size_t n = 16; n <= ((size_t)256 << 10); n *= 4) {
    unsigned char *dirty = oe_allocator_malloc(n);
    REQUIRE(dirty != NULL, "malloc(%zu)", n);
    memset(dirty, 0xEE, n);
    oe_allocator_free(dirty);
    unsigned char *clean = oe_allocator_calloc(n / 8, 8);
    REQUIRE(clean != NULL, "calloc(%zu)", n);
    for (size_t i = 0; i < n; i++) {
      if (clean[i] != 0) {
        CHECK(0, "calloc(%zu / 8, 8): byte %zu is %u", n, i, clean[i]);
        break;
      }
    }
    oe_allocator_free(clean);
  }
  CHECK(oe_allocator_calloc(SIZE_MAX / 2, 4) == NULL, "calloc overflow");
  oe_allocator_thread_cleanup();
}

int main(void) {
  oe_mallinfo_t info;
  CHECK(oe_allocator_mallinfo(&info) == OE_FAILURE, "mallinfo before init");
  size_t size = 16 * MiB;
  char *heap = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(heap != MAP_FAILED, "mmap");
  oe_allocator_init(heap, heap + size);
  CHECK(oe_allocator_mallinfo(NULL) == OE_FAILURE, "mallinfo(NULL)");
  info = mallinfo_now();
  /* the bytes blocks can take: the region less its descriptors (1/64) and
   * metadata, so that the second step of OE's bigmalloc test (0.99 of
   * max_total less current, in one block) passes */
  CHECK(info.max_total_heap_size <= size && info.max_total_heap_size >= size - size / 32,
        "max_total_heap_size %zu of %zu", info.max_total_heap_size, size);
  CHECK(info.current_allocated_heap_size == 0, "%zu bytes allocated before any allocation",
        info.current_allocated_heap_size);
  peak_reached_in_holes();
  mallinfo_small_stack();
  every_entry_point();

  for (unsigned round = 0; round < 3; round++) {
    size_t before = mallinfo_now().current_allocated_heap_size;
    call_that_frees_all(round + 1);
    size_t after = mallinfo_now().current_allocated_heap_size;
    CHECK(after == before, "round %u: %zu bytes allocated after a call that freed all, %zu before",
          round, after, before);
  }

  /* a live block counts at its size, from any call, until it is freed */
  oe_allocator_thread_init();
  size_t before = mallinfo_now().current_allocated_heap_size;
  void *block = oe_allocator_malloc(100000);
  REQUIRE(block != NULL, "malloc(100000)");
  memset(block, 0x5A, 100000);
  oe_allocator_thread_cleanup();
  info = mallinfo_now();
  CHECK(info.current_allocated_heap_size >= before + 100000 &&
            info.current_allocated_heap_size <= before + 100000 + 4096,
        "%zu bytes allocated with a block of 100000 live, %zu before",
        info.current_allocated_heap_size, before);
  CHECK(info.peak_allocated_heap_size >= info.current_allocated_heap_size, "peak");
  oe_allocator_free(block); /* after cleanup, as a late destructor would */
  CHECK(mallinfo_now().current_allocated_heap_size == before, "the block freed");

  /* OE's tests/bigmalloc: 0.99 of what mallinfo says remains, in one block */
  oe_allocator_thread_init();
  info = mallinfo_now();
  size_t want = (size_t)(0.99 * (double)(info.max_total_heap_size -
                                         info.current_allocated_heap_size));
  block = oe_allocator_malloc(want);
  CHECK(block != NULL, "malloc(%zu): 0.99 of max_total %zu less current %zu", want,
        info.max_total_heap_size, info.current_allocated_heap_size);
  oe_allocator_free(block);
  oe_allocator_thread_cleanup();

  mallinfo_during_late_frees();
  oe_allocator_cleanup();
  return check_finish("test_oe");
}
