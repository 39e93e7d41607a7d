/* bench_core — allocator workload mixes for comparing malloc implementations.
 *
 * The program calls plain malloc/free and links no allocator: choose the one
 * under test with LD_PRELOAD (no preload = glibc). bench/core_bench.py runs
 * it for every allocator and mix.
 *
 *   bench_core <mix> [--iterations N] [--seed S] [--threads T]
 *   bench_core --identify
 *
 * Mixes (N = --iterations, per thread):
 *   small    single-thread churn of 8..128 B blocks: a working set of 1000
 *            live blocks with random ones replaced, interleaved with bursts
 *            of 512 allocations freed in LIFO and then in FIFO order.
 *   mixed    single-thread mixed sizes 8 B .. 64 KiB, skewed to small (size
 *            class ~ geometric), working set of 4000 live blocks with random
 *            ones replaced.
 *   xthread  a producer thread mallocs 16..1024 B blocks and hands them
 *            through a bounded lock-free single-producer/single-consumer
 *            ring to a consumer thread, which checks and frees them.
 *
 * --threads T runs T independent copies of small/mixed (T = 1: in the main
 * thread, with no thread ever created, so glibc stays in its single-thread
 * mode), or T producer/consumer pairs for xthread.
 *
 * Every block is written when allocated (first word, last word and one word
 * per 4 KiB page) and checked before it is freed; a mismatch prints the
 * details and exits with status 1. The output is one line:
 *
 *   mix=<name> ops=<n> elapsed_s=<t> ops_per_s=<r>
 *
 * where ops counts malloc+free pairs (every block allocated in the timed
 * region is freed in it) and the time is CLOCK_MONOTONIC around the work
 * only (argument parsing and this printing excluded).
 *
 * --identify prints which object malloc resolves to (and its version where
 * the allocator exports one), one key=value per line, so that the driver
 * can check that a preload really took effect.
 */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- helpers */

typedef struct {
  uint64_t state;
} rng_t;

/* splitmix64: tiny, fast and good enough to pick sizes and slots. */
static inline uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) for n < 2^32, by multiply-shift (no division). */
static inline uint32_t rng_below(rng_t *r, uint32_t n) {
  return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *msg) {
  fprintf(stderr, "bench_core: %s\n", msg);
  exit(1);
}

/* A live block: where, how big, and the tag written into it. */
typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} block_t;

enum { PAGE_STRIDE = 4096 };

static inline void put64(unsigned char *at, uint64_t v) { memcpy(at, &v, sizeof v); }

static inline uint64_t get64(const unsigned char *at) {
  uint64_t v;
  memcpy(&v, at, sizeof v);
  return v;
}

/* Words written: the first; one per 4 KiB page after it, so every page of a
 * big block is touched (page faults count); and the last (bit-inverted tag)
 * when it does not overlap the first (size >= 16). Sizes are always >= 8. */
static inline void stamp(const block_t *b) {
  put64(b->p, b->tag);
  for (size_t off = PAGE_STRIDE; off + 16 <= b->size; off += PAGE_STRIDE)
    put64(b->p + off, b->tag + off);
  if (b->size >= 16) put64(b->p + b->size - 8, ~b->tag);
}

static void corrupt(const block_t *b, size_t off, uint64_t want, uint64_t got) {
  fprintf(stderr,
          "bench_core: CORRUPTION: block %p size %zu: word at offset %zu is "
          "%016" PRIx64 ", expected %016" PRIx64 "\n",
          (void *)b->p, b->size, off, got, want);
  exit(1);
}

static inline void check(const block_t *b) {
  uint64_t got = get64(b->p);
  if (got != b->tag) corrupt(b, 0, b->tag, got);
  for (size_t off = PAGE_STRIDE; off + 16 <= b->size; off += PAGE_STRIDE) {
    got = get64(b->p + off);
    if (got != b->tag + off) corrupt(b, off, b->tag + off, got);
  }
  if (b->size >= 16) {
    got = get64(b->p + b->size - 8);
    if (got != ~b->tag) corrupt(b, b->size - 8, ~b->tag, got);
  }
}

/* Per-thread state of one worker. */
typedef struct {
  rng_t rng;
  uint64_t serial; /* allocations so far: makes every tag distinct */
  uint64_t salt;
  uint64_t iterations;
  uint64_t ops; /* out: malloc+free pairs done */
} worker_t;

static inline void new_block(worker_t *w, block_t *b, size_t size) {
  b->p = malloc(size);
  if (b->p == NULL) {
    fprintf(stderr, "bench_core: malloc(%zu) failed: %s\n", size, strerror(errno));
    exit(1);
  }
  b->size = size;
  b->tag = mix64(++w->serial ^ w->salt);
  stamp(b);
}

static inline void drop_block(block_t *b) {
  check(b);
  free(b->p);
  b->p = NULL;
}

/* ------------------------------------------------------------------ small */

enum { SMALL_LIVE = 1000, SMALL_RANDOM_RUN = 2048, SMALL_BURST = 512 };

static inline size_t small_size(rng_t *r) { return 8 + rng_below(r, 121); } /* 8..128 */

static void *run_small(void *arg) {
  worker_t *w = arg;
  block_t live[SMALL_LIVE]; /* 36 KiB of stack together */
  block_t burst[SMALL_BURST];
  uint64_t done = 0;

  for (int i = 0; i < SMALL_LIVE; i++) new_block(w, &live[i], small_size(&w->rng));

  while (done < w->iterations) {
    /* Random replacement in the working set. */
    uint64_t n = w->iterations - done;
    if (n > SMALL_RANDOM_RUN) n = SMALL_RANDOM_RUN;
    for (uint64_t i = 0; i < n; i++) {
      block_t *b = &live[rng_below(&w->rng, SMALL_LIVE)];
      drop_block(b);
      new_block(w, b, small_size(&w->rng));
    }
    done += n;

    /* Burst: allocate k, free them newest first (LIFO), then allocate k
     * more and free them oldest first (FIFO). */
    for (int order = 0; order < 2 && done < w->iterations; order++) {
      uint64_t k = w->iterations - done;
      if (k > SMALL_BURST) k = SMALL_BURST;
      for (uint64_t i = 0; i < k; i++) new_block(w, &burst[i], small_size(&w->rng));
      if (order == 0) {
        for (uint64_t i = k; i-- > 0;) drop_block(&burst[i]);
      } else {
        for (uint64_t i = 0; i < k; i++) drop_block(&burst[i]);
      }
      done += k;
    }
  }

  for (int i = 0; i < SMALL_LIVE; i++) drop_block(&live[i]);
  w->ops = done + SMALL_LIVE;
  return NULL;
}

/* ------------------------------------------------------------------ mixed */

enum { MIXED_LIVE = 4000, MIXED_MIN_LOG = 3, MIXED_MAX_LOG = 15 };

/* Size class 2^e, e = 3.. 15, with P(e+1) / P(e) = 0.6 (the last class takes
 * the tail); the size is uniform within [2^e, 2^(e+1)), and the top class
 * reaches 64 KiB exactly. Mean ~ 300 B, median ~ 22 B, ~1% >= 4 KiB. */
static inline size_t mixed_size(rng_t *r) {
  const uint64_t q = (uint64_t)(0.6 * 4294967296.0);
  int e = MIXED_MIN_LOG;
  while (e < MIXED_MAX_LOG && (rng_next(r) >> 32) < q) e++;
  size_t lo = (size_t)1 << e;
  return lo + rng_below(r, (uint32_t)lo + (e == MIXED_MAX_LOG));
}

static void *run_mixed(void *arg) {
  worker_t *w = arg;
  block_t *live = calloc(MIXED_LIVE, sizeof *live);
  if (live == NULL) die("out of memory for the working-set table");

  for (int i = 0; i < MIXED_LIVE; i++) new_block(w, &live[i], mixed_size(&w->rng));
  for (uint64_t i = 0; i < w->iterations; i++) {
    block_t *b = &live[rng_below(&w->rng, MIXED_LIVE)];
    drop_block(b);
    new_block(w, b, mixed_size(&w->rng));
  }
  for (int i = 0; i < MIXED_LIVE; i++) drop_block(&live[i]);

  free(live);
  w->ops = w->iterations + MIXED_LIVE;
  return NULL;
}

/* ---------------------------------------------------------------- xthread */

enum { RING_CAP = 1024, SPINS_BEFORE_YIELD = 64 };

typedef struct {
  _Alignas(64) atomic_uint_fast64_t head; /* next slot to fill; producer writes */
  _Alignas(64) atomic_uint_fast64_t tail; /* next slot to drain; consumer writes */
  _Alignas(64) block_t slot[RING_CAP];
  worker_t producer;
  worker_t consumer;
} ring_t;

static inline void backoff(unsigned *spins) {
  if (++*spins < SPINS_BEFORE_YIELD) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield(); /* 2 cores, possibly more threads than cores */
    *spins = 0;
  }
}

static void *xthread_producer(void *arg) {
  ring_t *ring = arg;
  worker_t *w = &ring->producer;
  uint64_t head = 0, tail_seen = 0;
  for (uint64_t i = 0; i < w->iterations; i++) {
    block_t b;
    new_block(w, &b, 16 + rng_below(&w->rng, 1009)); /* 16..1024 */
    unsigned spins = 0;
    while (head - tail_seen == RING_CAP) {
      tail_seen = atomic_load_explicit(&ring->tail, memory_order_acquire);
      if (head - tail_seen == RING_CAP) backoff(&spins);
    }
    ring->slot[head % RING_CAP] = b;
    atomic_store_explicit(&ring->head, ++head, memory_order_release);
  }
  w->ops = w->iterations;
  return NULL;
}

static void *xthread_consumer(void *arg) {
  ring_t *ring = arg;
  worker_t *w = &ring->consumer;
  uint64_t tail = 0, head_seen = 0;
  for (uint64_t i = 0; i < w->iterations; i++) {
    unsigned spins = 0;
    while (tail == head_seen) {
      head_seen = atomic_load_explicit(&ring->head, memory_order_acquire);
      if (tail == head_seen) backoff(&spins);
    }
    block_t b = ring->slot[tail % RING_CAP];
    drop_block(&b);
    atomic_store_explicit(&ring->tail, ++tail, memory_order_release);
  }
  w->ops = w->iterations;
  return NULL;
}

/* ------------------------------------------------------------------- main */

typedef struct {
  const char *name;
  void *(*run)(void *);
  uint64_t default_iterations;
} mix_t;

/* Defaults: about half a second each with glibc on a 2-core CI machine. */
static const mix_t MIXES[] = {
    {"small", run_small, 20000000},
    {"mixed", run_mixed, 8000000},
    {"xthread", NULL, 2000000},
};

static void usage(FILE *to) {
  fprintf(to,
          "usage: bench_core <small|mixed|xthread> [--iterations N] [--seed S] "
          "[--threads T]\n"
          "       bench_core --identify\n");
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max) {
    fprintf(stderr, "bench_core: bad value for %s: '%s' (%" PRIu64 "..%" PRIu64 ")\n", opt, s, min,
            max);
    exit(2);
  }
  return (uint64_t)v;
}

/* Which object does malloc come from? Printed as key=value lines. */
static int identify(void) {
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  const char *from = "unknown";
  if (m != NULL && dladdr(m, &info) != 0 && info.dli_fname != NULL) from = info.dli_fname;
  printf("malloc_from=%s\n", from);

  void *sym;
  if ((sym = dlsym(RTLD_DEFAULT, "tess_version_string")) != NULL) {
    const char *(*fn)(void) = (const char *(*)(void))sym;
    printf("allocator=tessalloc\nversion=%s\n", fn());
  } else if ((sym = dlsym(RTLD_DEFAULT, "mi_version")) != NULL) {
    int (*fn)(void) = (int (*)(void))sym;
    printf("allocator=mimalloc\nversion=%d\n", fn());
  } else if ((sym = dlsym(RTLD_DEFAULT, "mallctl")) != NULL) {
    int (*fn)(const char *, void *, size_t *, void *, size_t) =
        (int (*)(const char *, void *, size_t *, void *, size_t))sym;
    const char *v = NULL;
    size_t len = sizeof v;
    printf("allocator=jemalloc\nversion=%s\n",
           fn("version", &v, &len, NULL, 0) == 0 && v ? v : "unknown");
  } else {
    printf("allocator=glibc\nversion=%s\n", gnu_get_libc_version());
  }
  return 0;
}

int main(int argc, char **argv) {
  const mix_t *mix = NULL;
  uint64_t iterations = 0, seed = 42, threads = 1;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--identify") == 0) return identify();
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--iterations") == 0 || strcmp(a, "--seed") == 0 || strcmp(a, "--threads") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "bench_core: %s needs a value\n", a);
        return 2;
      }
      const char *v = argv[++i];
      if (a[2] == 'i')
        iterations = parse_u64(a, v, 1, UINT64_MAX / 4);
      else if (a[2] == 's')
        seed = parse_u64(a, v, 0, UINT64_MAX);
      else
        threads = parse_u64(a, v, 1, 256);
      continue;
    }
    if (a[0] == '-' || mix != NULL) {
      fprintf(stderr, "bench_core: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
    for (size_t k = 0; k < sizeof MIXES / sizeof MIXES[0]; k++)
      if (strcmp(a, MIXES[k].name) == 0) mix = &MIXES[k];
    if (mix == NULL) {
      fprintf(stderr, "bench_core: unknown mix '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (mix == NULL) {
    usage(stderr);
    return 2;
  }
  if (iterations == 0) iterations = mix->default_iterations;

  uint64_t ops = 0;
  double t0, t1;
  if (mix->run == NULL) { /* xthread: T producer/consumer pairs */
    ring_t *rings = aligned_alloc(64, threads * sizeof(ring_t));
    pthread_t *tids = calloc(2 * threads, sizeof *tids);
    if (rings == NULL || tids == NULL) die("out of memory for the rings");
    for (uint64_t t = 0; t < threads; t++) {
      ring_t *r = &rings[t];
      atomic_init(&r->head, 0);
      atomic_init(&r->tail, 0);
      r->producer = (worker_t){
          .rng = {seed + 2 * t}, .salt = mix64(seed + 2 * t + 1), .iterations = iterations};
      r->consumer = r->producer;
    }
    t0 = now_s();
    for (uint64_t t = 0; t < threads; t++) {
      if (pthread_create(&tids[2 * t], NULL, xthread_producer, &rings[t]) != 0 ||
          pthread_create(&tids[2 * t + 1], NULL, xthread_consumer, &rings[t]) != 0)
        die("pthread_create failed");
    }
    for (uint64_t t = 0; t < 2 * threads; t++) pthread_join(tids[t], NULL);
    t1 = now_s();
    for (uint64_t t = 0; t < threads; t++) ops += rings[t].consumer.ops;
    free(tids);
    free(rings);
  } else {
    worker_t *w = calloc(threads, sizeof *w);
    pthread_t *tids = calloc(threads, sizeof *tids);
    if (w == NULL || tids == NULL) die("out of memory for the workers");
    for (uint64_t t = 0; t < threads; t++)
      w[t] =
          (worker_t){.rng = {seed + t}, .salt = mix64(seed + t + 0x5A17), .iterations = iterations};
    t0 = now_s();
    if (threads == 1) {
      mix->run(&w[0]); /* no thread created: glibc keeps its single-thread path */
    } else {
      for (uint64_t t = 0; t < threads; t++)
        if (pthread_create(&tids[t], NULL, mix->run, &w[t]) != 0) die("pthread_create failed");
      for (uint64_t t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    }
    t1 = now_s();
    for (uint64_t t = 0; t < threads; t++) ops += w[t].ops;
    free(tids);
    free(w);
  }

  double elapsed = t1 - t0;
  printf("mix=%s ops=%" PRIu64 " elapsed_s=%.6f ops_per_s=%.1f\n", mix->name, ops, elapsed,
         elapsed > 0 ? (double)ops / elapsed : 0.0);
  return 0;
}
