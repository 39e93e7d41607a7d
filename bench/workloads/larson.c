/* tb_larson: Larson & Krishnan's server simulation ("Memory Allocation for
 * Long-Running Server Applications", ISMM 1998).
 *
 * Each of the --threads workers owns an array of --slots live blocks. A
 * round frees the block of a random slot and puts a new block of random size
 * (--min-size .. --max-size bytes) in its place. After --rounds-per-thread
 * rounds the thread hands its array to a new thread and ends, as a server
 * hands a connection's state on: the new thread frees blocks that an earlier
 * thread allocated. Here a worker runs its generations one after the other
 * (it creates the next generation's thread and joins it), which keeps the
 * number of threads bounded: --iterations rounds per worker make
 * iterations / rounds-per-thread generations.
 *
 * ops = rounds, one free and one malloc each. Filling the slots (by the
 * worker, before its first generation) is timed but not counted; the blocks
 * left at the end are checked and freed by the main thread, untimed.
 *
 * Every block is tagged (wl_fill) when allocated and checked (wl_verify)
 * before it is freed, so overlapping blocks fail the run. All bookkeeping is
 * allocated before the first block, so a broken allocator overlaps blocks
 * with blocks, not with the bookkeeping. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

/* A generation only loops over its slot array: a small stack keeps thread
 * creation cheap and lets glibc cache the stacks of many workers. */
#define GENERATION_STACK ((size_t)256 << 10)
#define MAX_SLOTS ((uint64_t)1 << 24)

typedef struct slot_s {
  void *p;
  size_t size;
  uint64_t tag;
} slot_t;

typedef struct worker_s {
  slot_t *slots;
  wl_rng_t rng;
  int index;
  double start;         /* the worker's release: --duration counts from it */
  uint64_t serial;      /* blocks allocated: makes every tag unique */
  uint64_t rounds;      /* rounds done, over all generations */
  uint64_t generations; /* threads that worked on the slots */
  bool done;
  char pad[64]; /* keeps workers' counters off each other's cache lines */
} worker_t;

static wl_args_t args = {.name = "larson", .threads = 1, .size = 512, .iterations = 15000000};
static size_t min_size = 16;
static uint64_t slot_count = 1000;
static uint64_t rounds_per_thread = 10000;
static worker_t *workers;

static void new_block(worker_t *w, slot_t *s) {
  s->size = (size_t)wl_rand_range(&w->rng, min_size, args.size);
  s->p = wl_xmalloc(s->size);
  s->tag = ((uint64_t)(w->index + 1) << 40) + w->serial++;
  wl_fill(s->p, s->size, s->tag);
}

/* One generation: up to rounds_per_thread rounds on the inherited slots. */
static void *generation_main(void *arg) {
  worker_t *w = arg;
  uint64_t i = w->rounds;
  uint64_t end = i + rounds_per_thread;
  for (; i < end; i++) {
    if (wl_done(&args, i, w->start)) {
      w->done = true;
      break;
    }
    slot_t *s = &w->slots[wl_rand_below(&w->rng, slot_count)];
    wl_verify(s->p, s->size, s->tag, "larson: a live block");
    free(s->p);
    new_block(w, s);
  }
  /* no empty generation after the last round of an iteration-bound run */
  if (args.duration <= 0 && i >= args.iterations) w->done = true;
  w->rounds = i;
  return NULL;
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *w = &workers[index];
  w->start = wl_now();
  for (uint64_t k = 0; k < slot_count; k++) new_block(w, &w->slots[k]);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, GENERATION_STACK);
  while (!w->done) {
    /* pthread_create and pthread_join order the generations' accesses */
    pthread_t thread;
    int err = pthread_create(&thread, &attr, generation_main, w);
    if (err != 0) wl_fail("pthread_create: %s", strerror(err));
    pthread_join(thread, NULL);
    w->generations++;
  }
  pthread_attr_destroy(&attr);
}

static __attribute__((noreturn)) void bad_option(const char *what) {
  fprintf(stderr, "tb_larson: %s (try --help)\n", what);
  exit(WL_EXIT_USAGE);
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"min-size", WL_OPT_SIZE, &min_size, "smallest block in bytes (16)"},
      {"max-size", WL_OPT_SIZE, &args.size, "largest block in bytes, same as --size (512)"},
      {"slots", WL_OPT_U64, &slot_count, "live blocks per thread (1000)"},
      {"rounds-per-thread", WL_OPT_U64, &rounds_per_thread,
       "rounds before a thread hands its blocks to a new thread (10000)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "Larson & Krishnan's server simulation: each thread owns --slots live blocks and\n"
           "replaces a random one per round (free, then malloc of --min-size..--max-size\n"
           "bytes); after --rounds-per-thread rounds it hands the blocks to a new thread,\n"
           "which frees blocks it did not allocate. --size is the largest block,\n"
           "--iterations the rounds per worker (over all its threads).\n"
           "ops = rounds (one free + one malloc each).");
  if (min_size < 1 || min_size > args.size) bad_option("need 1 <= --min-size <= --max-size");
  if (slot_count < 1 || slot_count > MAX_SLOTS) bad_option("--slots must be 1 .. 16M");
  if (rounds_per_thread < 1) bad_option("--rounds-per-thread must be at least 1");

  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  memset(workers, 0, sizeof *workers * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    workers[t].index = t;
    workers[t].slots = wl_xmalloc(sizeof(slot_t) * (size_t)slot_count);
    wl_rng_seed(&workers[t].rng, args.seed, (uint64_t)t);
  }

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t rounds = 0, generations = 0;
  for (int t = 0; t < args.threads; t++) {
    worker_t *w = &workers[t];
    for (uint64_t k = 0; k < slot_count; k++) {
      wl_verify(w->slots[k].p, w->slots[k].size, w->slots[k].tag, "larson: a block left live");
      free(w->slots[k].p);
    }
    rounds += w->rounds;
    generations += w->generations;
  }
  wl_result(&args, rounds, elapsed,
            "generations=%" PRIu64 " slots=%" PRIu64 " min_size=%zu max_size=%zu", generations,
            slot_count, min_size, args.size);
  for (int t = 0; t < args.threads; t++) free(workers[t].slots);
  free(workers);
  return 0;
}
