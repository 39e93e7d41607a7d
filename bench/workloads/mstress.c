/* tb_mstress: memory stress in the spirit of mimalloc-bench's mstress
 * (mimalloc's test-stress): many threads, widely varying sizes, blocks that
 * outlive their threads and are freed by others.
 *
 * Each of --rounds (20) rounds starts --threads new threads. A thread keeps an
 * array of --live slots; every step it frees the block in a random slot (if
 * any) and, three times in four, puts a new block there, so about 3/4 of
 * the slots hold a block. Sizes: 98.9 % small (1 .. 16-256 bytes, the upper
 * bound a random power of two), 1 % 1 KiB .. 64 KiB, 0.1 % 64 KiB .. --size
 * (1 MiB). Every TRANSFER_EVERY steps the thread swaps BUCKET_SLOTS random
 * slots with one random bucket of a shared exchange array (a quarter of its
 * steps' worth of blocks): the blocks it hands over are freed by another
 * thread, maybe one of a later round, and it adopts the ones it gets. A
 * thread frees what it holds when it ends; the exchange array keeps its
 * blocks from round to round and is emptied at the end.
 *
 * ops = steps (a free, a malloc, or both, plus the share of transfers).
 * Every block is tagged when allocated and checked before it is freed. The
 * bookkeeping (slot arrays, the exchange array) is allocated or static before
 * the first block, so a broken allocator overlaps blocks with blocks. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define BUCKETS 64         /* exchange buckets, one lock each */
#define BUCKET_SLOTS 32    /* blocks swapped per transfer */
#define TRANSFER_EVERY 128 /* steps between a thread's transfers */
#define SMALL_MAX_SHIFT 4  /* small blocks: up to 16 << 4 = 256 bytes */
#define LARGE_MIN ((size_t)1024)
#define GIANT_MIN ((size_t)64 << 10)

typedef struct block_s {
  void *p; /* NULL: an empty slot */
  size_t size;
  uint64_t tag;
} block_t;

typedef struct bucket_s {
  pthread_mutex_t lock;
  block_t slots[BUCKET_SLOTS];
} bucket_t;

typedef struct worker_s {
  block_t *live;
  uint64_t steps, mallocs, moved; /* written once, at the end of a round */
} worker_t;

static wl_args_t args = {.name = "mstress", .threads = 1, .size = (size_t)1 << 20,
                         .iterations = 250000};
static uint64_t rounds = 20;
static size_t live_slots = 4096;

static wl_args_t round_args; /* args with the duration split over the rounds */
static uint64_t round_index;
static worker_t *workers;
static bucket_t exchange[BUCKETS]; /* static: no allocator involved */

static size_t random_size(wl_rng_t *rng) {
  uint64_t pick = wl_rand_below(rng, 1000);
  size_t size;
  if (pick == 0) {
    uint64_t hi = args.size > GIANT_MIN ? args.size : GIANT_MIN + 1;
    size = (size_t)wl_rand_range(rng, GIANT_MIN + 1, hi);
  } else if (pick <= 10) {
    size = (size_t)wl_rand_range(rng, LARGE_MIN + 1, GIANT_MIN);
  } else {
    size = (size_t)wl_rand_range(rng, 1, (uint64_t)16 << wl_rand_below(rng, SMALL_MAX_SHIFT + 1));
  }
  return size < args.size ? size : args.size; /* --size caps every tier */
}

static void drop(block_t *b, const char *what) {
  wl_verify(b->p, b->size, b->tag, what);
  free(b->p);
  b->p = NULL;
}

/* Swaps BUCKET_SLOTS random slots of `live` with a random bucket; returns
 * the blocks handed over. */
static uint64_t transfer(block_t *live, wl_rng_t *rng) {
  size_t picks[BUCKET_SLOTS];
  for (int i = 0; i < BUCKET_SLOTS; i++) picks[i] = (size_t)wl_rand_below(rng, live_slots);
  bucket_t *bucket = &exchange[wl_rand_below(rng, BUCKETS)];
  uint64_t given = 0;
  pthread_mutex_lock(&bucket->lock);
  for (int i = 0; i < BUCKET_SLOTS; i++) {
    block_t mine = live[picks[i]];
    live[picks[i]] = bucket->slots[i];
    bucket->slots[i] = mine;
    given += mine.p != NULL;
  }
  pthread_mutex_unlock(&bucket->lock);
  return given;
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *w = &workers[index];
  block_t *live = w->live;
  wl_rng_t rng;
  /* a stream per thread and round: each round's threads are new ones */
  wl_rng_seed(&rng, args.seed, round_index * 65536 + (uint64_t)index);
  uint64_t tag_base = (round_index << 48) ^ ((uint64_t)index << 36);
  uint64_t mallocs = 0, moved = 0, step = 0;
  double start = wl_now();
  for (; !wl_done(&round_args, step, start); step++) {
    block_t *b = &live[wl_rand_below(&rng, live_slots)];
    if (b->p != NULL) drop(b, "mstress: a block being replaced");
    if ((wl_rand(&rng) & 3) != 0) {
      b->size = random_size(&rng);
      b->p = wl_xmalloc(b->size);
      b->tag = tag_base + mallocs++;
      wl_fill(b->p, b->size, b->tag);
    }
    if (step % TRANSFER_EVERY == TRANSFER_EVERY - 1) moved += transfer(live, &rng);
  }
  /* the thread's blocks die with it; adopted ones are freed remotely here */
  for (size_t i = 0; i < live_slots; i++) {
    if (live[i].p != NULL) drop(&live[i], "mstress: a block at its thread's end");
  }
  w->steps += step;
  w->mallocs += mallocs;
  w->moved += moved;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"rounds", WL_OPT_U64, &rounds, "rounds, each with --threads new threads (20)"},
      {"live", WL_OPT_SIZE, &live_slots, "block slots per thread, about 3/4 full (4096)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "Memory stress after mimalloc-bench's mstress: --rounds rounds of --threads new\n"
           "threads. Each thread keeps --live slots of blocks and per step frees a random\n"
           "slot's block and (3 in 4) allocates a new one: mostly 1..256 bytes, 1 % up to\n"
           "64 KiB, 0.1 % up to --size (1M). Every 128 steps it swaps 32 of its blocks with\n"
           "a bucket of a shared exchange array, so blocks are freed by other threads, also\n"
           "of later rounds. --iterations is steps per thread per round; --duration is split\n"
           "over the rounds. ops = steps.");
  if (rounds < 1 || rounds > 100000 || live_slots < 1 || live_slots > ((size_t)1 << 26)) {
    fprintf(stderr, "tb_mstress: --rounds must be 1..100000 and --live 1..64M (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  round_args = args;
  round_args.duration = args.duration / (double)rounds;

  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  for (int t = 0; t < args.threads; t++) {
    workers[t] = (worker_t){.live = wl_xmalloc(sizeof(block_t) * live_slots)};
    memset(workers[t].live, 0, sizeof(block_t) * live_slots);
  }
  for (int k = 0; k < BUCKETS; k++) pthread_mutex_init(&exchange[k].lock, NULL);

  double elapsed = 0;
  for (round_index = 0; round_index < rounds; round_index++) {
    elapsed += wl_run_threads(args.threads, worker_main, NULL);
  }
  /* what is left in the exchange was allocated by threads long gone */
  double t0 = wl_now();
  uint64_t leftover = 0;
  for (int k = 0; k < BUCKETS; k++) {
    for (int i = 0; i < BUCKET_SLOTS; i++) {
      block_t *b = &exchange[k].slots[i];
      if (b->p != NULL) {
        drop(b, "mstress: a block left in the exchange");
        leftover++;
      }
    }
  }
  elapsed += wl_now() - t0;

  uint64_t steps = 0, mallocs = 0, moved = 0;
  for (int t = 0; t < args.threads; t++) {
    steps += workers[t].steps;
    mallocs += workers[t].mallocs;
    moved += workers[t].moved;
    free(workers[t].live);
  }
  free(workers);
  wl_result(&args, steps, elapsed,
            "rounds=%" PRIu64 " live=%zu max_size=%zu mallocs=%" PRIu64 " moved=%" PRIu64
            " leftover=%" PRIu64,
            rounds, live_slots, args.size, mallocs, moved, leftover);
  return 0;
}
