/* tb_alloc_test: after alloc-test, the allocator test that mimalloc-bench
 * runs as alloc-test1 / alloc-testN: random allocations and frees in a
 * bounded window, per thread, of sizes from a heavy-tailed mix.
 *
 * Each thread owns a window of --size slots (16384). A step picks a random
 * slot: a block there is checked and freed; an empty slot gets a new block
 * with probability keep / (100 - keep), --keep being 20, so about a fifth
 * of the window is live at any time and a freed slot waits a while before
 * it is used again. Sizes: 98 % up to 1 KiB, spread evenly over the
 * power-of-two ranges 1..8, 9..16, ... 513..1024 (uniform within a range),
 * and 2 % larger, 1 KiB .. --max-size (32 KiB).
 *
 * ops = mallocs + frees of the random phase; --iterations is ops per thread
 * (or steps until --duration). The blocks still live at the end are checked
 * and freed, in the time but not in ops. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define SMALL_MAX_SHIFT 10 /* small blocks: up to 1 KiB */
#define LARGE_IN 50        /* 1 in 50 blocks is larger */

typedef struct slot_s {
  void *p; /* NULL: empty */
  size_t size;
  uint64_t tag;
} slot_t;

typedef struct worker_s {
  slot_t *window;
  uint64_t ops, mallocs;
} worker_t;

static wl_args_t args = {.name = "alloc-test", .threads = 1, .size = 16384,
                         .iterations = 10000000};
static uint64_t keep = 20;
static size_t max_size = 32768;
static worker_t *workers;

static size_t random_size(wl_rng_t *rng) {
  if (wl_rand_below(rng, LARGE_IN) == 0) {
    return (size_t)wl_rand_range(rng, ((size_t)1 << SMALL_MAX_SHIFT) + 1, max_size);
  }
  unsigned shift = 3 + (unsigned)wl_rand_below(rng, SMALL_MAX_SHIFT - 2); /* 8 .. 1024 */
  size_t lo = shift == 3 ? 1 : ((size_t)1 << (shift - 1)) + 1;
  return (size_t)wl_rand_range(rng, lo, (size_t)1 << shift);
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *w = &workers[index];
  slot_t *window = w->window;
  wl_rng_t rng;
  wl_rng_seed(&rng, args.seed, (uint64_t)index);
  uint64_t tag = (uint64_t)(index + 1) << 44;
  uint64_t ops = 0, mallocs = 0, step = 0;
  double start = wl_now();
  while (args.duration > 0 ? !wl_done(&args, step, start) : ops < args.iterations) {
    step++;
    slot_t *s = &window[wl_rand_below(&rng, args.size)];
    if (s->p != NULL) {
      wl_verify(s->p, s->size, s->tag, "alloc-test: a block before its free");
      free(s->p);
      s->p = NULL;
      ops++;
    } else if (wl_rand_below(&rng, 100 - keep) < keep) {
      s->size = random_size(&rng);
      s->p = wl_xmalloc(s->size);
      s->tag = tag + mallocs++;
      wl_fill(s->p, s->size, s->tag);
      ops++;
    }
  }
  for (size_t k = 0; k < args.size; k++) {
    if (window[k].p == NULL) continue;
    wl_verify(window[k].p, window[k].size, window[k].tag, "alloc-test: a block at the end");
    free(window[k].p);
    window[k].p = NULL;
  }
  w->ops = ops;
  w->mallocs = mallocs;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"keep", WL_OPT_U64, &keep, "percent of the window live, 1..99 (20)"},
      {"max-size", WL_OPT_SIZE, &max_size, "largest of the 2 % larger blocks, > 1K (32K)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "After alloc-test (mimalloc-bench's alloc-test1/N): each thread owns a window of\n"
           "--size (16384) slots; a step picks a random slot, frees its block or, if empty,\n"
           "allocates one with a chance that keeps about --keep % (20) of the window live.\n"
           "Sizes: 98 % up to 1 KiB, log-uniform by power of two; 2 % 1 KiB..--max-size.\n"
           "--iterations is ops per thread (or steps until --duration). ops = mallocs +\n"
           "frees; the blocks live at the end are freed in the time, not in ops.");
  if (keep < 1 || keep > 99 || max_size <= ((size_t)1 << SMALL_MAX_SHIFT) ||
      args.size > ((size_t)1 << 28)) {
    fprintf(stderr,
            "tb_alloc_test: --keep must be 1..99, --max-size over 1K, --size 1..256M"
            " (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    workers[t] = (worker_t){.window = wl_xmalloc(sizeof(slot_t) * args.size)};
    memset(workers[t].window, 0, sizeof(slot_t) * args.size);
  }

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t ops = 0, mallocs = 0;
  for (int t = 0; t < args.threads; t++) {
    ops += workers[t].ops;
    mallocs += workers[t].mallocs;
    free(workers[t].window);
  }
  free(workers);
  wl_result(&args, ops, elapsed, "window=%zu keep_pct=%" PRIu64 " max_size=%zu mallocs=%" PRIu64,
            args.size, keep, max_size, mallocs);
  return 0;
}
