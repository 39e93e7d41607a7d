/* tb_cache_scratch: passive false sharing, as described for Hoard's
 * cache-scratch benchmark (Berger et al., "Hoard: A Scalable Memory
 * Allocator for Multithreaded Applications", ASPLOS 2000).
 *
 * The main thread allocates one small object (--size bytes) per worker, one
 * after the other, so that they likely share cache lines, and hands one to
 * each worker. A worker frees its object first, then repeatedly allocates an
 * object, writes it --writes times and frees it, as in cache-thrash. An
 * allocator that gives a worker back the memory it freed, on the main
 * thread's lines, lets the workers' objects share lines: their writes then
 * thrash although no thread ever shares an object on purpose.
 *
 * --iterations is the objects per thread; ops = objects (one malloc,
 * --writes writes and one free each; the handed-over objects not counted).
 *
 * The check: a handed-over object is tagged by the main thread and checked
 * by its worker before the free. Every write stores a value made of the
 * thread's id and a counter, and each write first reads back the previous
 * one (and the object is read back before its free). An object that another
 * thread was also given shows that thread's values and fails the run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

/* Per-thread state, padded apart: the workload measures false sharing, so
 * it must not add its own. */
typedef struct worker_s {
  void *handed; /* the main thread's object, freed by the worker */
  uint64_t objects;
  char pad[48];
} worker_t;

static wl_args_t args = {.name = "cache-scratch", .threads = 1, .size = 8, .iterations = 800000};
static uint64_t writes = 1000;
static worker_t *workers;

static __attribute__((noreturn)) void shared(int index, const volatile void *p, uint64_t got,
                                             uint64_t want) {
  wl_fail("cache-scratch: thread %d's object %p holds %#" PRIx64 ", not %#" PRIx64
          " (another thread writes it)",
          index, (const void *)p, got, want);
}

/* Writes the object `writes` times as whole words, checking each time what
 * the previous write left. Volatile: every write and read must reach the
 * cache line. */
static void write_words(int index, volatile uint64_t *w, size_t words, uint64_t base) {
  for (size_t j = 0; j < words; j++) w[j] = base;
  for (uint64_t k = 1; k < writes; k++) {
    for (size_t j = 0; j < words; j++) {
      uint64_t got = w[j];
      if (got != base + k - 1) shared(index, w, got, base + k - 1);
      w[j] = base + k;
    }
  }
  for (size_t j = 0; j < words; j++) {
    uint64_t got = w[j];
    if (got != base + writes - 1) shared(index, w, got, base + writes - 1);
  }
}

/* The same for objects smaller than a word, byte by byte. */
static void write_bytes(int index, volatile unsigned char *b, size_t n, unsigned char base) {
  for (size_t j = 0; j < n; j++) b[j] = base;
  for (uint64_t k = 1; k < writes; k++) {
    unsigned char want = (unsigned char)(base + k - 1);
    for (size_t j = 0; j < n; j++) {
      unsigned char got = b[j];
      if (got != want) shared(index, b, got, want);
      b[j] = (unsigned char)(want + 1);
    }
  }
  unsigned char want = (unsigned char)(base + writes - 1);
  for (size_t j = 0; j < n; j++) {
    unsigned char got = b[j];
    if (got != want) shared(index, b, got, want);
  }
}

/* Object i of thread `index`: the values written are the thread in the top
 * 16 bits, the object in the middle and the count of writes in the low 24
 * bits, so different threads never write equal words. Bytes mix the thread
 * and the object into 8 bits: two threads agree now and then, not for long. */
static void write_object(int index, void *p, uint64_t i) {
  if (args.size >= 8) {
    uint64_t base = (uint64_t)(index + 1) << 48 | (i & 0xffffff) << 24;
    write_words(index, p, args.size / 8, base);
  } else {
    write_bytes(index, p, args.size, (unsigned char)((uint64_t)(index + 1) * 0x9d + i * 0x3b));
  }
}

static void worker_main(int index, void *ctx) {
  (void)ctx;
  worker_t *me = &workers[index];
  double start = wl_now();
  wl_verify(me->handed, args.size, (uint64_t)index, "cache-scratch: the handed-over object");
  free(me->handed);
  uint64_t i = 0;
  for (; !wl_done(&args, i, start); i++) {
    void *p = wl_xmalloc(args.size);
    write_object(index, p, i);
    free(p);
  }
  me->objects = i;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"writes", WL_OPT_U64, &writes, "writes to each object before it is freed (1000)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "Passive false sharing (Hoard's cache-scratch): the main thread mallocs one\n"
           "object of --size bytes per worker and hands it over; the worker frees it, then\n"
           "repeatedly mallocs an object, writes it --writes times and frees it. Objects\n"
           "reusing the main thread's cache lines make the writes thrash. --iterations is\n"
           "objects per thread. ops = objects (malloc + writes + free each).");
  if (writes < 1 || writes >= ((uint64_t)1 << 24)) {
    fprintf(stderr, "tb_cache_scratch: --writes must be 1 .. 16M-1 (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  workers = wl_xmalloc(sizeof *workers * (size_t)args.threads);
  memset(workers, 0, sizeof *workers * (size_t)args.threads);
  /* one after the other, so neighbours likely share a line */
  for (int t = 0; t < args.threads; t++) {
    workers[t].handed = wl_xmalloc(args.size);
    wl_fill(workers[t].handed, args.size, (uint64_t)t);
  }

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t objects = 0;
  for (int t = 0; t < args.threads; t++) objects += workers[t].objects;
  wl_result(&args, objects, elapsed, "size=%zu writes=%" PRIu64, args.size, writes);
  free(workers);
  return 0;
}
