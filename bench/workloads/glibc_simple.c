/* tb_glibc_simple: after glibc's benchtests/bench-malloc-simple: the cost
 * of malloc and free in tight loops, size by size.
 *
 * One pass: for each size (16, 32, ... doubling up to --size, 4096; a
 * --size that is no power of two is added last) and each block count N of
 * 25, 100, 400 and 1600 (glibc's), malloc N blocks of that size, then free
 * them in the same order. --iterations is passes per thread (or passes
 * until --duration). Every block is tagged after its malloc and checked
 * before its free.
 *
 * ops = malloc+free pairs. Extra columns: ns_per_pair, the thread time per
 * pair over all sizes, and ns_<size> per size (each size's loops are timed
 * on their own; with several threads, the time of every thread counts). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define MAX_SIZES 64
#define MAX_COUNT 1600

static const size_t counts[] = {25, 100, 400, MAX_COUNT};
#define NCOUNTS (sizeof counts / sizeof counts[0])

typedef struct worker_s {
  void **blocks; /* MAX_COUNT */
  double seconds[MAX_SIZES];
  uint64_t passes;
} worker_t;

static wl_args_t args = {.name = "glibc-simple", .threads = 1, .size = 4096, .iterations = 60};
static size_t sizes[MAX_SIZES];
static int nsizes;
static uint64_t pairs_per_size; /* per pass */
static worker_t *workers;

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *w = &workers[index];
  void **blocks = w->blocks;
  uint64_t tag = (uint64_t)(index + 1) << 44;
  double start = wl_now();
  uint64_t pass = 0;
  while (args.duration > 0 ? wl_now() - start < args.duration : pass < args.iterations) {
    for (int s = 0; s < nsizes; s++) {
      size_t size = sizes[s];
      double t0 = wl_now();
      for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = counts[c];
        for (size_t i = 0; i < n; i++) {
          blocks[i] = wl_xmalloc(size);
          wl_fill(blocks[i], size, tag + i);
        }
        for (size_t i = 0; i < n; i++) {
          wl_verify(blocks[i], size, tag + i, "glibc-simple: a block before its free");
          free(blocks[i]);
        }
        tag += n;
      }
      w->seconds[s] += wl_now() - t0;
    }
    pass++;
  }
  w->passes = pass;
}

int main(int argc, char **argv) {
  wl_parse(argc, argv, &args, NULL,
           "After glibc's bench-malloc-simple: per pass, for each size 16, 32, ... --size\n"
           "(4096) and each count N of 25, 100, 400, 1600, malloc N blocks, then free them.\n"
           "--iterations is passes per thread. ops = malloc+free pairs; ns_per_pair and\n"
           "ns_<size> give the thread time per pair, over all sizes and per size.");
  for (size_t s = 16; s < args.size && nsizes < MAX_SIZES - 1; s *= 2) sizes[nsizes++] = s;
  sizes[nsizes++] = args.size;
  for (size_t c = 0; c < NCOUNTS; c++) pairs_per_size += counts[c];

  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  memset(workers, 0, sizeof *workers * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    workers[t].blocks = wl_xmalloc(sizeof(void *) * MAX_COUNT);
  }

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t passes = 0;
  double seconds[MAX_SIZES] = {0}, total_seconds = 0;
  for (int t = 0; t < args.threads; t++) {
    passes += workers[t].passes;
    for (int s = 0; s < nsizes; s++) seconds[s] += workers[t].seconds[s];
    free(workers[t].blocks);
  }
  free(workers);
  for (int s = 0; s < nsizes; s++) total_seconds += seconds[s];
  uint64_t pairs = passes * pairs_per_size * (uint64_t)nsizes;

  /* the per-size columns, then the result line */
  char columns[MAX_SIZES * 40];
  size_t used = 0;
  for (int s = 0; s < nsizes && used < sizeof columns; s++) {
    double ns = passes > 0 ? seconds[s] * 1e9 / (double)(passes * pairs_per_size) : 0.0;
    used += (size_t)snprintf(columns + used, sizeof columns - used, " ns_%zu=%.2f", sizes[s], ns);
  }
  wl_result(&args, pairs, elapsed, "passes=%" PRIu64 " ns_per_pair=%.2f%s", passes,
            pairs > 0 ? total_seconds * 1e9 / (double)pairs : 0.0, columns);
  return 0;
}
