/* tb_cache_thrash: active false sharing, as described for Hoard's
 * cache-thrash benchmark (Berger et al., "Hoard: A Scalable Memory Allocator
 * for Multithreaded Applications", ASPLOS 2000).
 *
 * Each thread repeatedly allocates a small object (--size bytes), writes it
 * --writes times and frees it. The threads share nothing, but an allocator
 * that hands objects on one cache line to different threads makes their
 * writes fight over that line: the run then slows down as threads are added
 * instead of scaling.
 *
 * --iterations is the objects per thread; ops = objects (one malloc, --writes
 * writes and one free each).
 *
 * The check: every write stores a value made of the thread's id and a
 * counter, and each write first reads back the previous one (and the object
 * is read back before its free). An object that another thread was also
 * given shows that thread's values and fails the run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

/* Per-thread count of objects, padded apart: the workload measures false
 * sharing, so it must not add its own. */
typedef struct counter_s {
  uint64_t objects;
  char pad[56];
} counter_t;

static wl_args_t args = {.name = "cache-thrash", .threads = 1, .size = 8, .iterations = 800000};
static uint64_t writes = 1000;
static counter_t *counters;

static __attribute__((noreturn)) void shared(int index, const volatile void *p, uint64_t got,
                                             uint64_t want) {
  wl_fail("cache-thrash: thread %d's object %p holds %#" PRIx64 ", not %#" PRIx64
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
  double start = wl_now();
  uint64_t i = 0;
  for (; !wl_done(&args, i, start); i++) {
    void *p = wl_xmalloc(args.size);
    write_object(index, p, i);
    free(p);
  }
  counters[index].objects = i;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
      {"writes", WL_OPT_U64, &writes, "writes to each object before it is freed (1000)"},
      {NULL, WL_OPT_U64, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
           "Active false sharing (Hoard's cache-thrash): each thread repeatedly mallocs an\n"
           "object of --size bytes, writes it --writes times and frees it; objects of\n"
           "different threads on one cache line make the writes thrash. --iterations is\n"
           "objects per thread. ops = objects (malloc + writes + free each).");
  if (writes < 1 || writes >= ((uint64_t)1 << 24)) {
    fprintf(stderr, "tb_cache_thrash: --writes must be 1 .. 16M-1 (try --help)\n");
    exit(WL_EXIT_USAGE);
  }
  counters = wl_xmalloc(sizeof *counters * (size_t)args.threads);
  memset(counters, 0, sizeof *counters * (size_t)args.threads);

  double elapsed = wl_run_threads(args.threads, worker_main, NULL);

  uint64_t objects = 0;
  for (int t = 0; t < args.threads; t++) objects += counters[t].objects;
  wl_result(&args, objects, elapsed, "size=%zu writes=%" PRIu64, args.size, writes);
  free(counters);
  return 0;
}
