/* plugin_check: a quick self-check of one fixed-heap allocator plugin.
 *
 *   plugin_check PLUGIN.so [--region-mib N] [--offset BYTES] [--threads N]
 *                [--iterations N]
 *
 * Loads the plugin (fixed_alloc.h), gives it a region (default 64 MiB) in
 * the middle of a larger mapping whose every byte is filled with a pattern;
 * the region starts on a 2 MiB boundary, or BYTES after one (to try
 * unaligned regions; the region's end moves with its start),
 * then runs N threads (default 4), each: thread_init; I iterations (default
 * 10^5) of malloc of a random size in 0..16 KiB kept in a FIFO of 15 live
 * blocks, the oldest checked and freed, with now and then a calloc, a
 * realloc or a block handed to another thread to free; thread_cleanup.
 *
 * Checked: every block lies inside the region and is aligned (16 bytes, or
 * 8 for blocks of at most 8 bytes); usable_size >= the size asked for; a
 * block's contents survive until it is freed; calloc gives zeros; realloc
 * keeps the contents; no malloc returns NULL (the live set is far below the region); the guard
 * bytes around the region are untouched afterwards.
 *
 * Prints name, version, the footprint before the threads start and after
 * they are done, and PASS or FAIL. Exit status: 0 pass, 1 fail, 2 the
 * plugin could not be loaded or initialised.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../fixed_alloc.h"

enum {
  FIFO_LEN = 15,
  MAX_SIZE = 16 * 1024,
  STASH_LEN = 64,
  GUARD = 1 << 20,        /* bytes of pattern either side of the region */
  REGION_ALIGN = 2 << 20, /* where the region starts (plus --offset) */
  MAX_THREADS = 64,
  REGION_FILL = 0xA5,
  GUARD_FILL = 0x5A,
  MAX_REPORTS = 10,
};

static const fixed_allocator_t *alloc;
static unsigned char *region_start;
static unsigned char *region_end;
static long iterations = 100000;

static atomic_long failures;
static atomic_long null_count;
static atomic_long alloc_count;

/* Blocks handed between threads: freed by whichever thread takes them. */
typedef struct {
  void *ptr;
  size_t size;
  unsigned char fill;
} block_t;

static pthread_mutex_t stash_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t stash[STASH_LEN];

static void fail(const char *what, const void *ptr, size_t size) {
  long n = atomic_fetch_add(&failures, 1);
  if (n < MAX_REPORTS) {
    fprintf(stderr, "plugin_check: FAIL: %s (ptr %p, size %zu)\n", what, ptr,
            size);
  }
}

static uint64_t next_random(uint64_t *state) {
  /* xorshift64* */
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Checks a fresh block: inside the region, aligned, usable_size. Returns
 * whether there is a block (failed checks are counted, not fatal). */
static int check_new(const void *p, size_t size) {
  const unsigned char *c = p;
  if (c == NULL) {
    return 0;
  }
  if (c < region_start || c > region_end || size > (size_t)(region_end - c)) {
    fail("block outside the region", p, size);
    return 1;
  }
  /* 16-byte alignment, or 8 for blocks of at most 8 bytes (as mimalloc). */
  uintptr_t align_mask = size <= 8 ? 7u : 15u;
  if (((uintptr_t)c & align_mask) != 0) {
    fail("block not aligned (16 bytes; 8 up to 8 bytes)", p, size);
  }
  size_t usable = alloc->usable_size((void *)p);
  if (usable < size) {
    fail("usable_size smaller than the size asked for", p, size);
  } else if (usable > (size_t)(region_end - c)) {
    fail("usable_size reaches outside the region", p, usable);
  }
  return 1;
}

static void verify(const block_t *b, const char *what) {
  const unsigned char *c = b->ptr;
  for (size_t i = 0; i < b->size; i++) {
    if (c[i] != b->fill) {
      fail(what, b->ptr, b->size);
      return;
    }
  }
}

static void release(block_t *b) {
  if (b->ptr != NULL) {
    verify(b, "block contents changed before free");
    alloc->free(b->ptr);
    b->ptr = NULL;
  }
}

/* A new block of size bytes filled with fill (NULL counted, not fatal). */
static block_t take(uint64_t *rng, size_t size, unsigned char fill) {
  block_t b = {NULL, size, fill};
  unsigned kind = (unsigned)(next_random(rng) % 64);
  atomic_fetch_add(&alloc_count, 1);
  if (kind == 0) { /* calloc: must come back zeroed */
    b.ptr = alloc->calloc(1, size);
    if (check_new(b.ptr, size)) {
      const unsigned char *c = b.ptr;
      for (size_t i = 0; i < size; i++) {
        if (c[i] != 0) {
          fail("calloc block not zeroed", b.ptr, size);
          break;
        }
      }
    }
  } else if (kind == 1 && size > 0) { /* realloc from half the size */
    size_t half = size / 2;
    void *p = alloc->malloc(half);
    if (check_new(p, half)) {
      memset(p, fill, half);
      b.ptr = alloc->realloc(p, size);
      if (b.ptr == NULL) {
        alloc->free(p);
      } else if (check_new(b.ptr, size)) {
        block_t old = {b.ptr, half, fill};
        verify(&old, "realloc lost the contents");
      }
    }
  } else {
    b.ptr = alloc->malloc(size);
    check_new(b.ptr, size);
  }
  if (b.ptr == NULL) {
    if (size > 0) { /* malloc(0) may return NULL */
      atomic_fetch_add(&null_count, 1);
    }
    return b;
  }
  memset(b.ptr, fill, size);
  return b;
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t rng = 0x9E3779B97F4A7C15ULL * (id + 1);
  block_t fifo[FIFO_LEN];
  memset(fifo, 0, sizeof fifo);

  alloc->thread_init();
  for (long i = 0; i < iterations; i++) {
    block_t *slot = &fifo[i % FIFO_LEN];
    release(slot);
    size_t size = (size_t)(next_random(&rng) % (MAX_SIZE + 1));
    *slot = take(&rng, size, (unsigned char)(id * 31 + (unsigned)i));
    if (i % 64 == 63 && slot->ptr != NULL) {
      /* Swap with the stash: another thread frees this one. */
      unsigned k = (unsigned)(next_random(&rng) % STASH_LEN);
      pthread_mutex_lock(&stash_lock);
      block_t theirs = stash[k];
      stash[k] = *slot;
      pthread_mutex_unlock(&stash_lock);
      *slot = theirs;
    }
  }
  for (int k = 0; k < FIFO_LEN; k++) {
    release(&fifo[k]);
  }
  alloc->thread_cleanup();
  return NULL;
}

static void usage(void) {
  fprintf(stderr, "usage: plugin_check PLUGIN.so [--region-mib N] "
                  "[--offset BYTES] [--threads N] [--iterations N]\n");
}

static void print_footprint(const char *when, size_t fp) {
  if (fp == (size_t)-1) {
    printf("footprint %s: unavailable\n", when);
  } else {
    printf("footprint %s: %zu bytes (%.2f MiB)\n", when, fp,
           (double)fp / (1024.0 * 1024.0));
  }
}

int main(int argc, char **argv) {
  const char *path = NULL;
  long region_mib = 64;
  long threads = 4;
  long offset = 0;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--region-mib") == 0) {
      region_mib = strtol(argv[++i], NULL, 10);
    } else if (i + 1 < argc && strcmp(argv[i], "--offset") == 0) {
      offset = strtol(argv[++i], NULL, 0);
    } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
      threads = strtol(argv[++i], NULL, 10);
    } else if (i + 1 < argc && strcmp(argv[i], "--iterations") == 0) {
      iterations = strtol(argv[++i], NULL, 10);
    } else if (path == NULL && argv[i][0] != '-') {
      path = argv[i];
    } else {
      usage();
      return 2;
    }
  }
  if (path == NULL || region_mib < 1 || threads < 1 || threads > MAX_THREADS ||
      iterations < 1 || offset < 0 || offset >= REGION_ALIGN) {
    usage();
    return 2;
  }

  /* dlopen searches the library path for a bare name: make it a path. */
  char local[4096];
  if (strchr(path, '/') == NULL) {
    snprintf(local, sizeof local, "./%s", path);
    path = local;
  }
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    fprintf(stderr, "plugin_check: dlopen: %s\n", dlerror());
    return 2;
  }
  void *sym = dlsym(handle, FIXED_ALLOCATOR_SYMBOL);
  fixed_allocator_fn get = NULL;
  memcpy(&get, &sym, sizeof get); /* object to function pointer, as POSIX */
  if (get == NULL || (alloc = get()) == NULL) {
    fprintf(stderr, "plugin_check: %s has no usable %s()\n", path,
            FIXED_ALLOCATOR_SYMBOL);
    return 2;
  }
  printf("plugin: %s\nname: %s\nversion: %s\n", path, alloc->name,
         alloc->version);

  size_t region_size = (size_t)region_mib << 20;
  size_t map_size = region_size + 2 * (size_t)GUARD + 2 * (size_t)REGION_ALIGN;
  unsigned char *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    perror("plugin_check: mmap");
    return 2;
  }
  memset(map, GUARD_FILL, map_size);
  uintptr_t aligned = ((uintptr_t)map + GUARD + REGION_ALIGN - 1) &
                      ~(uintptr_t)(REGION_ALIGN - 1);
  region_start = (unsigned char *)aligned + offset;
  region_end = region_start + region_size;
  memset(region_start, REGION_FILL, region_size);
  printf("region: %p-%p (%ld MiB, offset %ld), %ld threads x %ld "
         "iterations\n",
         (void *)region_start, (void *)region_end, region_mib, offset, threads,
         iterations);

  if (alloc->init(region_start, region_end) != 0) {
    fprintf(stderr, "plugin_check: init failed\n");
    return 2;
  }
  print_footprint("before", alloc->footprint());

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t tids[MAX_THREADS];
  for (long t = 0; t < threads; t++) {
    if (pthread_create(&tids[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
      fprintf(stderr, "plugin_check: pthread_create failed\n");
      return 2;
    }
  }
  for (long t = 0; t < threads; t++) {
    pthread_join(tids[t], NULL);
  }
  /* The blocks left in the stash: freed by the main thread. */
  alloc->thread_init();
  for (int k = 0; k < STASH_LEN; k++) {
    release(&stash[k]);
  }
  alloc->thread_cleanup();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

  print_footprint("after", alloc->footprint());
  for (unsigned char *c = map; c < map + map_size; c++) {
    if (c == region_start) {
      c = region_end - 1;
    } else if (*c != GUARD_FILL) {
      fail("a byte outside the region was written", c, 1);
      break;
    }
  }
  long nulls = atomic_load(&null_count);
  if (nulls > 0) {
    fail("malloc returned NULL with the region mostly free", NULL,
         (size_t)nulls);
  }
  long failed = atomic_load(&failures);
  printf("allocations: %ld, NULL: %ld, time: %.3f s\n",
         atomic_load(&alloc_count), nulls, secs);
  printf("result: %s", failed == 0 ? "PASS" : "FAIL");
  if (failed != 0) {
    printf(" (%ld failed checks)", failed);
  }
  printf("\n");
  fflush(stdout);
  /* No dlclose: a peer may not support being unloaded with threads gone. */
  return failed == 0 ? 0 : 1;
}
