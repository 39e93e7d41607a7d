/* tb_xmalloc: producers and consumers, after Lever & Boreham's xmalloc-test
 * ("malloc() Performance in a Multithreaded Linux Environment", USENIX 2000).
 *
 * Producer threads allocate blocks of random sizes (1 .. --size bytes) and
 * pass them in batches of --batch through one shared queue (a mutex and two
 * condition variables) to consumer threads, which free them: every block is
 * freed by a thread that did not allocate it, the case an allocator with
 * per-thread caches must send back to the owner.
 *
 * --threads N runs ceil(N/2) producers and floor(N/2) consumers, but at
 * least one of each: --threads 1 runs one producer and one consumer (two
 * threads); the result line says producers= and consumers=. --iterations is
 * the blocks per producer; ops = blocks, each allocated, checked and freed
 * once.
 *
 * Every block is tagged (wl_fill) by its producer and checked (wl_verify) by
 * its consumer before the free, so overlapping blocks fail the run. The
 * batches are allocated before the first block, so a broken allocator
 * overlaps blocks with blocks, not with the queue. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

#define BATCHES_PER_THREAD 4 /* in flight: lets producers run ahead a little */
#define MAX_BATCH ((uint64_t)1 << 20)

typedef struct entry_s {
  void *p;
  size_t size;
  uint64_t tag;
} entry_t;

typedef struct batch_s {
  struct batch_s *next;
  size_t count;
  entry_t *entries;
} batch_t;

/* Per-thread counters, padded apart: they are written per block. */
typedef struct counter_s {
  uint64_t blocks;
  char pad[56];
} counter_t;

static wl_args_t args = {.name = "xmalloc", .threads = 1, .size = 128, .iterations = 6000000};
static uint64_t batch_size = 256;
static int producers, consumers;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t have_full = PTHREAD_COND_INITIALIZER;  /* consumers wait */
static pthread_cond_t have_empty = PTHREAD_COND_INITIALIZER; /* producers wait */
static batch_t *full_head, *full_tail; /* FIFO: the oldest blocks go first */
static batch_t *empty_list;
static int producers_left;
static counter_t *counters; /* producers, then consumers */

static batch_t *take_empty(void) {
  pthread_mutex_lock(&lock);
  while (empty_list == NULL) pthread_cond_wait(&have_empty, &lock);
  batch_t *b = empty_list;
  empty_list = b->next;
  pthread_mutex_unlock(&lock);
  return b;
}

static void give_empty(batch_t *b) {
  pthread_mutex_lock(&lock);
  b->next = empty_list;
  empty_list = b;
  pthread_cond_signal(&have_empty);
  pthread_mutex_unlock(&lock);
}

static void give_full(batch_t *b) {
  pthread_mutex_lock(&lock);
  b->next = NULL;
  if (full_tail != NULL) {
    full_tail->next = b;
  } else {
    full_head = b;
  }
  full_tail = b;
  pthread_cond_signal(&have_full);
  pthread_mutex_unlock(&lock);
}

/* The oldest full batch, or NULL once the producers are done and the queue
 * is drained. */
static batch_t *take_full(void) {
  pthread_mutex_lock(&lock);
  while (full_head == NULL && producers_left > 0) pthread_cond_wait(&have_full, &lock);
  batch_t *b = full_head;
  if (b != NULL) {
    full_head = b->next;
    if (full_head == NULL) full_tail = NULL;
  }
  pthread_mutex_unlock(&lock);
  return b;
}

static void produce(int index) {
  wl_rng_t rng;
  wl_rng_seed(&rng, args.seed, (uint64_t)index);
  double start = wl_now();
  uint64_t i = 0;
  bool more = true;
  while (more) {
    batch_t *b = take_empty();
    b->count = 0;
    while (b->count < batch_size) {
      if (wl_done(&args, i, start)) {
        more = false;
        break;
      }
      entry_t *e = &b->entries[b->count++];
      e->size = (size_t)wl_rand_range(&rng, 1, args.size);
      e->p = wl_xmalloc(e->size);
      e->tag = ((uint64_t)(index + 1) << 40) + i;
      wl_fill(e->p, e->size, e->tag);
      i++;
    }
    if (b->count > 0) {
      give_full(b);
    } else {
      give_empty(b);
    }
  }
  counters[index].blocks = i;
  pthread_mutex_lock(&lock);
  if (--producers_left == 0) pthread_cond_broadcast(&have_full);
  pthread_mutex_unlock(&lock);
}

static void consume(int index) {
  uint64_t n = 0;
  batch_t *b;
  while ((b = take_full()) != NULL) {
    for (size_t k = 0; k < b->count; k++) {
      entry_t *e = &b->entries[k];
      wl_verify(e->p, e->size, e->tag, "xmalloc: a block in the queue");
      free(e->p);
    }
    n += b->count;
    give_empty(b);
  }
  counters[index].blocks = n;
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  if (index < producers) {
    produce(index);
  } else {
    consume(index);
  }
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"batch", WL_OPT_U64, &batch_size, "blocks per batch passed through the queue (256)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "Lever & Boreham's xmalloc-test: producer threads malloc blocks of 1..--size\n"
           "bytes and pass them in batches through a shared queue to consumer threads,\n"
           "which free them. --threads N: ceil(N/2) producers and floor(N/2) consumers,\n"
           "at least one of each (--threads 1 runs 2 threads). --iterations is blocks per\n"
           "producer. ops = blocks (each malloc'd, checked and freed once).");
  if (batch_size < 1 || batch_size > MAX_BATCH) {
    fprintf(stderr, "tb_xmalloc: --batch must be 1 .. 1M (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  producers = (args.threads + 1) / 2;
  consumers = args.threads / 2 > 0 ? args.threads / 2 : 1;
  int total = producers + consumers;
  producers_left = producers;

  size_t batch_count = (size_t)BATCHES_PER_THREAD * (size_t)total;
  batch_t *batches = wl_xmalloc(sizeof *batches * batch_count);
  entry_t *entries = wl_xmalloc(sizeof *entries * batch_count * (size_t)batch_size);
  for (size_t k = 0; k < batch_count; k++) {
    batches[k].entries = entries + k * (size_t)batch_size;
    batches[k].next = k + 1 < batch_count ? &batches[k + 1] : NULL;
  }
  empty_list = &batches[0];
  counters = wl_xmalloc(sizeof *counters * (size_t)total);
  memset(counters, 0, sizeof *counters * (size_t)total);

  double elapsed = wl_run_threads(total, worker_main, NULL);

  uint64_t made = 0, freed = 0;
  for (int t = 0; t < total; t++) {
    if (t < producers) {
      made += counters[t].blocks;
    } else {
      freed += counters[t].blocks;
    }
  }
  if (made != freed || full_head != NULL) {
    wl_fail("xmalloc: %" PRIu64 " blocks allocated but %" PRIu64 " freed", made, freed);
  }
  wl_result(&args, freed, elapsed, "producers=%d consumers=%d batch=%" PRIu64 " max_size=%zu",
            producers, consumers, batch_size, args.size);
  free(counters);
  free(entries);
  free(batches);
  return 0;
}
