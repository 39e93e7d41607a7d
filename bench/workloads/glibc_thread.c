/* tb_glibc_thread: after glibc's benchtests/bench-malloc-thread: each thread
 * randomly replaces the blocks of a working set.
 *
 * Each thread keeps a working set of --size slots (1024, glibc's). One
 * iteration picks a random slot, frees its block (checking its tag first;
 * slots start empty) and mallocs a new one of a random size. Sizes follow
 * an inverse-square distribution over 4 .. --max-size bytes (32768), as in
 * glibc's benchmark: over half the blocks are at most 8 bytes, about 1 in
 * 250 is over 1 KiB. The sizes come from a table drawn up front, so the loop costs an
 * index, not a sampling. --iterations is iterations per thread (or
 * iterations until --duration, as glibc runs it).
 *
 * ops = iterations. ns_per_iter is the elapsed time per iteration of one
 * thread (glibc's "time per iteration"). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define MIN_SIZE 4
#define SIZE_TABLE 8192 /* a power of two */

typedef struct slot_s {
  void *p; /* NULL: empty */
  size_t size;
  uint64_t tag;
} slot_t;

typedef struct worker_s {
  slot_t *set;
  uint64_t iterations;
} worker_t;

static wl_args_t args = {.name = "glibc-thread", .threads = 1, .size = 1024,
                         .iterations = 16000000};
static size_t max_size = 32768;
static uint32_t size_table[SIZE_TABLE]; /* static: drawn before any block */
static worker_t *workers;

/* Inverse-square density on [MIN_SIZE, max_size]: invert its CDF,
 * 1/x = 1/a - u (1/a - 1/b). */
static void draw_sizes(void) {
  wl_rng_t rng;
  wl_rng_seed(&rng, args.seed, UINT64_MAX);
  double a = MIN_SIZE, b = (double)max_size;
  for (int i = 0; i < SIZE_TABLE; i++) {
    double u = (double)(wl_rand(&rng) >> 11) * 0x1.0p-53;
    double x = a * b / (b - u * (b - a));
    size_t size = (size_t)x;
    size_table[i] = (uint32_t)(size < MIN_SIZE ? MIN_SIZE : size > max_size ? max_size : size);
  }
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *w = &workers[index];
  slot_t *set = w->set;
  size_t n = args.size;
  wl_rng_t rng;
  wl_rng_seed(&rng, args.seed, (uint64_t)index);
  uint64_t tag = (uint64_t)(index + 1) << 44;
  double start = wl_now();
  uint64_t i = 0;
  for (; !wl_done(&args, i, start); i++) {
    uint64_t r = wl_rand(&rng);
    slot_t *s = &set[(size_t)(((unsigned __int128)(r >> 16) * n) >> 48)];
    if (s->p != NULL) {
      wl_verify(s->p, s->size, s->tag, "glibc-thread: a block being replaced");
      free(s->p);
    }
    s->size = size_table[r & (SIZE_TABLE - 1)];
    s->p = wl_xmalloc(s->size);
    s->tag = tag + i;
    wl_fill(s->p, s->size, s->tag);
  }
  for (size_t k = 0; k < n; k++) {
    if (set[k].p == NULL) continue;
    wl_verify(set[k].p, set[k].size, set[k].tag, "glibc-thread: a block at the end");
    free(set[k].p);
    set[k].p = NULL;
  }
  w->iterations = i;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"max-size", WL_OPT_SIZE, &max_size, "largest block, bytes (32768)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "After glibc's bench-malloc-thread: each thread keeps a working set of --size\n"
           "(1024) blocks; an iteration frees a random one and mallocs a new one, sized\n"
           "by an inverse-square distribution over 4..--max-size bytes. --iterations is\n"
           "iterations per thread (or run for --duration). ops = iterations; ns_per_iter is\n"
           "the elapsed time per iteration of one thread.");
  if (max_size < MIN_SIZE || max_size > UINT32_MAX || args.size > ((size_t)1 << 28)) {
    fprintf(stderr, "tb_glibc_thread: --max-size must be 4..4G, --size 1..256M (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  draw_sizes();
  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    workers[t] = (worker_t){.set = wl_xmalloc(sizeof(slot_t) * args.size)};
    memset(workers[t].set, 0, sizeof(slot_t) * args.size);
  }

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t iterations = 0;
  for (int t = 0; t < args.threads; t++) {
    iterations += workers[t].iterations;
    free(workers[t].set);
  }
  free(workers);
  double per_thread = (double)iterations / (double)args.threads;
  wl_result(&args, iterations, elapsed, "working_set=%zu max_size=%zu ns_per_iter=%.2f",
            args.size, max_size, per_thread > 0 ? elapsed * 1e9 / per_thread : 0.0);
  return 0;
}
