/* tb_malloc_cmp: after IsoAlloc's malloc comparison test (its
 * "malloc_cmp_test", the allocator tests built against the system malloc):
 * the same pattern of allocations made through malloc, then calloc, then
 * realloc, each call family timed on its own.
 *
 * A family's phase is a series of batches of 16, 32, ... 16384 allocations
 * (cycling). In a batch every block is allocated and tagged, and each time
 * an odd-numbered block has been allocated the even one before it is
 * checked and freed, so every other allocation is freed as the batch goes;
 * the rest are checked and freed when the batch ends. The families differ
 * in how a block of n bytes is made:
 *   malloc   malloc(n)
 *   calloc   calloc(n, 1), then checked to be all zero
 *   realloc  malloc(n / 2), tagged, grown by realloc(p, n), then checked to
 *            have kept its first n / 2 bytes' tags
 * Sizes: a class k = 0 .. 12 with probability proportional to 2^(-k/2)
 * (each doubling of the size is sqrt(2) times rarer), then uniform in
 * (8 << k, 16 << k]: 9 B .. 64 KiB, 770 bytes on average, capped at --size.
 *
 * --iterations is allocations per family per thread: 480000 by default, so
 * 1.44 million allocations in all (IsoAlloc's test makes 1441616 per
 * family). With --threads N each thread runs the whole test; the threads
 * meet at a barrier between families, so malloc_s, calloc_s and realloc_s
 * are each family's wall time. ops = allocations of all families and
 * threads (a realloc-family allocation is a malloc and a realloc).
 * --duration is ignored: the test is a fixed amount of work. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define MIN_BATCH 16
#define MAX_BATCH 16384
#define CLASSES 13 /* 16 << 12 = 64 KiB */

typedef enum { FAMILY_MALLOC, FAMILY_CALLOC, FAMILY_REALLOC, FAMILIES } family_t;

static const char *const family_names[FAMILIES] = {"malloc", "calloc", "realloc"};

typedef struct entry_s {
  void *p; /* NULL: freed */
  size_t size;
  uint64_t tag;
} entry_t;

static wl_args_t args = {.name = "malloc-cmp", .threads = 1, .size = (size_t)64 << 10,
                         .iterations = 480000};
static uint32_t class_cut[CLASSES]; /* cumulative, in units of 2^-32 */
static entry_t **entries;           /* per thread, MAX_BATCH each */
static pthread_barrier_t barrier;
static double family_seconds[FAMILIES];

static void draw_classes(void) {
  double weight[CLASSES], total = 0, sum = 0;
  for (int k = 0; k < CLASSES; k++) {
    weight[k] = k == 0 ? 1.0 : weight[k - 1] * 0.70710678118654752; /* 2^(-k/2) */
    total += weight[k];
  }
  for (int k = 0; k < CLASSES; k++) {
    sum += weight[k];
    double cut = sum / total * 4294967296.0;
    class_cut[k] = k == CLASSES - 1 || cut >= 4294967295.0 ? UINT32_MAX : (uint32_t)cut;
  }
}

static size_t random_size(wl_rng_t *rng) {
  uint32_t r = (uint32_t)(wl_rand(rng) >> 32);
  int k = 0;
  while (k < CLASSES - 1 && r >= class_cut[k]) k++;
  size_t size = (size_t)wl_rand_range(rng, ((uint64_t)8 << k) + 1, (uint64_t)16 << k);
  return size < args.size ? size : args.size;
}

static void check_zero(const void *p, size_t n) {
  const unsigned char *bytes = p;
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, bytes + i, 8);
    any |= v;
  }
  for (; i < n; i++) any |= bytes[i];
  if (any != 0) wl_fail("malloc-cmp: calloc(%zu, 1) returned %p, not all zero", n, p);
}

static void *make(family_t family, size_t n, uint64_t tag) {
  void *p;
  switch (family) {
    case FAMILY_MALLOC: p = wl_xmalloc(n); break;
    case FAMILY_CALLOC:
      p = calloc(n, 1);
      if (p == NULL) wl_fail("calloc(%zu, 1) returned NULL", n);
      check_zero(p, n);
      break;
    default: {
      size_t half = n / 2 > 0 ? n / 2 : 1;
      void *old = wl_xmalloc(half);
      wl_fill(old, half, tag);
      p = realloc(old, n);
      if (p == NULL) wl_fail("realloc(%p, %zu) returned NULL", old, n);
      wl_verify(p, half, tag, "malloc-cmp: a block grown by realloc");
      break;
    }
  }
  wl_fill(p, n, tag);
  return p;
}

static void drop(entry_t *e) {
  wl_verify(e->p, e->size, e->tag, "malloc-cmp: a block before its free");
  free(e->p);
  e->p = NULL;
}

/* One family's phase: `count` allocations in cycling batches. */
static void run_family(family_t family, entry_t *batch, wl_rng_t *rng, uint64_t *tag,
                       uint64_t count) {
  size_t batch_size = MIN_BATCH;
  while (count > 0) {
    size_t n = count < batch_size ? (size_t)count : batch_size;
    for (size_t i = 0; i < n; i++) {
      entry_t *e = &batch[i];
      e->size = random_size(rng);
      e->tag = (*tag)++;
      e->p = make(family, e->size, e->tag);
      if ((i & 1) != 0) drop(&batch[i - 1]);
    }
    for (size_t i = 0; i < n; i++) {
      if (batch[i].p != NULL) drop(&batch[i]);
    }
    count -= n;
    batch_size = batch_size < MAX_BATCH ? batch_size * 2 : MIN_BATCH;
  }
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  wl_rng_t rng;
  wl_rng_seed(&rng, args.seed, (uint64_t)index);
  uint64_t tag = (uint64_t)(index + 1) << 44;
  pthread_barrier_wait(&barrier);
  double t = wl_now();
  for (int f = 0; f < FAMILIES; f++) {
    run_family((family_t)f, entries[index], &rng, &tag, args.iterations);
    /* the family ends when its slowest thread does */
    pthread_barrier_wait(&barrier);
    if (index == 0) {
      double now = wl_now();
      family_seconds[f] = now - t;
      t = now;
    }
  }
}

int main(int argc, char **argv) {
  wl_parse(argc, argv, &args, NULL,
           "After IsoAlloc's malloc comparison test: per call family (malloc, calloc,\n"
           "realloc: malloc(n/2) grown to n), batches of 16..16384 allocations of 9 B..64 KiB\n"
           "(capped at --size; each doubling sqrt(2) times rarer), freeing every other one\n"
           "as the batch goes and the rest at its end. --iterations is allocations per\n"
           "family per thread (480000: 1.44 million in all); each thread runs the\n"
           "whole test. --duration is ignored. ops = allocations; malloc_s, calloc_s and\n"
           "realloc_s time each family. calloc blocks must be zero, realloc keep contents.");
  draw_classes();
  entries = wl_xmalloc(sizeof *entries * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    entries[t] = wl_xmalloc(sizeof(entry_t) * MAX_BATCH);
  }
  pthread_barrier_init(&barrier, NULL, (unsigned)args.threads);

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  pthread_barrier_destroy(&barrier);
  for (int t = 0; t < args.threads; t++) free(entries[t]);
  free(entries);
  uint64_t per_family = args.iterations * (uint64_t)args.threads;
  char columns[256];
  size_t used = 0;
  for (int f = 0; f < FAMILIES; f++) {
    used += (size_t)snprintf(columns + used, sizeof columns - used, " %s_s=%.6f %s_ops=%" PRIu64,
                             family_names[f], family_seconds[f], family_names[f], per_family);
  }
  wl_result(&args, per_family * FAMILIES, elapsed, "max_size=%zu%s", args.size, columns);
  return 0;
}
