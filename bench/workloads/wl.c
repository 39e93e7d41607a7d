/* The common part of tessbench's workload programs (see wl.h). */
#include "wl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *program = "tb";
static char program_buf[64];

/* ------------------------------------------------------------ parsing */

static bool parse_u64(const char *s, uint64_t *out) {
  if (s == NULL || *s == '\0' || *s == '-') return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return false;
  uint64_t scale = 1;
  switch (*end) {
    case 'K': case 'k': scale = (uint64_t)1 << 10; end++; break;
    case 'M': case 'm': scale = (uint64_t)1 << 20; end++; break;
    case 'G': case 'g': scale = (uint64_t)1 << 30; end++; break;
    default: break;
  }
  if (*end != '\0' || (v != 0 && scale > UINT64_MAX / v)) return false;
  *out = (uint64_t)v * scale;
  return true;
}

static bool parse_double(const char *s, double *out) {
  if (s == NULL || *s == '\0') return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || *end != '\0' || !(v >= 0)) return false;
  *out = v;
  return true;
}

static void usage(const wl_args_t *a, const wl_option_t *extra, const char *description,
                  FILE *out) {
  fprintf(out, "usage: %s [options]\n%s\n", program, description);
  fprintf(out,
          "  --threads N      worker threads (%d)\n"
          "  --size N         size parameter, K/M/G suffixes (%zu)\n"
          "  --iterations N   work per thread (%" PRIu64 ")\n"
          "  --duration S     run for S seconds instead of --iterations\n"
          "  --seed N         PRNG seed (%" PRIu64 ")\n",
          a->threads, a->size, a->iterations, a->seed);
  for (const wl_option_t *o = extra; o != NULL && o->name != NULL; o++) {
    fprintf(out, "  --%-14s %s\n", o->name, o->help);
  }
  fprintf(out,
          "prints: result workload=%s threads=N ops=N elapsed_s=F ops_per_s=F ...\n"
          "exit status: 0 ok, %d usage, %d a check failed\n",
          a->name, WL_EXIT_USAGE, WL_EXIT_CHECK);
}

static __attribute__((noreturn)) void bad_usage(const char *fmt, const char *what) {
  fprintf(stderr, "%s: ", program);
  fprintf(stderr, fmt, what);
  fprintf(stderr, " (try --help)\n");
  exit(WL_EXIT_USAGE);
}

static bool set_option(const wl_option_t *o, const char *value) {
  uint64_t u;
  switch (o->kind) {
    case WL_OPT_U64:
      if (!parse_u64(value, &u)) return false;
      *(uint64_t *)o->dest = u;
      return true;
    case WL_OPT_SIZE:
      if (!parse_u64(value, &u) || u > SIZE_MAX) return false;
      *(size_t *)o->dest = (size_t)u;
      return true;
    case WL_OPT_DOUBLE: return parse_double(value, (double *)o->dest);
    case WL_OPT_STRING: *(const char **)o->dest = value; return true;
    case WL_OPT_FLAG: *(bool *)o->dest = true; return true;
  }
  return false;
}

void wl_parse(int argc, char **argv, wl_args_t *args, const wl_option_t *extra,
              const char *description) {
  snprintf(program_buf, sizeof program_buf, "tb_%s", args->name);
  program = program_buf;
  if (args->threads <= 0) args->threads = 1;
  if (args->seed == 0) args->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(args, extra, description, stdout);
      exit(0);
    }
    if (strncmp(arg, "--", 2) != 0) bad_usage("unexpected argument '%s'", arg);
    const char *name = arg + 2;
    const wl_option_t *found = NULL;
    for (const wl_option_t *o = extra; o != NULL && o->name != NULL; o++) {
      if (strcmp(o->name, name) == 0) found = o;
    }
    if (found != NULL && found->kind == WL_OPT_FLAG) {
      set_option(found, NULL);
      continue;
    }
    if (i + 1 >= argc) bad_usage("%s needs a value", arg);
    const char *value = argv[++i];
    uint64_t u;
    bool ok = true;
    if (found != NULL) {
      ok = set_option(found, value);
    } else if (strcmp(name, "threads") == 0) {
      ok = parse_u64(value, &u) && u >= 1 && u <= 4096;
      if (ok) args->threads = (int)u;
    } else if (strcmp(name, "size") == 0) {
      ok = parse_u64(value, &u) && u >= 1 && u <= SIZE_MAX;
      if (ok) args->size = (size_t)u;
    } else if (strcmp(name, "iterations") == 0) {
      ok = parse_u64(value, &u) && u >= 1;
      if (ok) args->iterations = u;
    } else if (strcmp(name, "duration") == 0) {
      ok = parse_double(value, &args->duration) && args->duration > 0;
    } else if (strcmp(name, "seed") == 0) {
      ok = parse_u64(value, &u);
      if (ok) args->seed = u;
    } else {
      bad_usage("unknown option '%s'", arg);
    }
    if (!ok) bad_usage("bad value for %s", arg);
  }
}

/* --------------------------------------------------------------- time */

double wl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool wl_done(const wl_args_t *args, uint64_t i, double start) {
  if (args->duration <= 0) return i >= args->iterations;
  if ((i & 63) != 0) return false;
  return wl_now() - start >= args->duration;
}

/* --------------------------------------------------------------- PRNG */

/* splitmix64: small state, good enough for workload shapes */
uint64_t wl_rand(wl_rng_t *rng) {
  uint64_t z = (rng->state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

void wl_rng_seed(wl_rng_t *rng, uint64_t seed, uint64_t stream) {
  rng->state = seed * 0x2545f4914f6cdd1du + stream * 0x9e3779b97f4a7c15u;
  (void)wl_rand(rng);
}

uint64_t wl_rand_below(wl_rng_t *rng, uint64_t n) {
  /* multiply-shift: no modulo bias worth measuring at these n */
  return (uint64_t)(((unsigned __int128)wl_rand(rng) * n) >> 64);
}

uint64_t wl_rand_range(wl_rng_t *rng, uint64_t lo, uint64_t hi) {
  return lo + wl_rand_below(rng, hi - lo + 1);
}

/* ------------------------------------------------------------ threads */

typedef struct thread_start_s {
  void (*fn)(int, void *);
  void *ctx;
  int index;
  pthread_barrier_t *barrier;
  double began; /* after the barrier, in the thread itself */
  double ended; /* after fn returned */
} thread_start_t;

static void *thread_main(void *arg) {
  thread_start_t *start = arg;
  pthread_barrier_wait(start->barrier);
  start->began = wl_now();
  start->fn(start->index, start->ctx);
  start->ended = wl_now();
  return NULL;
}

/* The time is taken by the workers themselves, from the first one's start
 * to the last one's end: the main thread may be preempted between the
 * barrier and a clock reading of its own (a busy machine), which would
 * make a short run look shorter, even instantaneous. */
double wl_run_threads(int n, void (*fn)(int, void *), void *ctx) {
  pthread_t *ids = wl_xmalloc(sizeof *ids * (size_t)n);
  thread_start_t *starts = wl_xmalloc(sizeof *starts * (size_t)n);
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++) {
    starts[i] = (thread_start_t){fn, ctx, i, &barrier, 0.0, 0.0};
    int err = pthread_create(&ids[i], NULL, thread_main, &starts[i]);
    if (err != 0) wl_fail("pthread_create: %s", strerror(err));
  }
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < n; i++) pthread_join(ids[i], NULL);
  double first = starts[0].began, last = starts[0].ended;
  for (int i = 1; i < n; i++) {
    if (starts[i].began < first) first = starts[i].began;
    if (starts[i].ended > last) last = starts[i].ended;
  }
  pthread_barrier_destroy(&barrier);
  free(starts);
  free(ids);
  return last - first;
}

/* ------------------------------------------------------------- checks */

static uint64_t mark(uint64_t tag, size_t where) {
  uint64_t z = tag * 0x9e3779b97f4a7c15u + where;
  return z ^ (z >> 29);
}

void wl_fill(void *p, size_t n, uint64_t tag) {
  unsigned char *bytes = p;
  bytes[0] = (unsigned char)mark(tag, 0);
  if (n > 1) bytes[n - 1] = (unsigned char)mark(tag, n);
  /* words end before the last byte, which has a mark of its own */
  for (size_t at = 8; at + 8 < n; at += 4096) {
    uint64_t v = mark(tag, at);
    memcpy(bytes + at, &v, 8);
  }
}

void wl_verify(const void *p, size_t n, uint64_t tag, const char *what) {
  const unsigned char *bytes = p;
  bool ok = bytes[0] == (unsigned char)mark(tag, 0) &&
            (n == 1 || bytes[n - 1] == (unsigned char)mark(tag, n));
  for (size_t at = 8; ok && at + 8 < n; at += 4096) {
    uint64_t v;
    memcpy(&v, bytes + at, 8);
    ok = v == mark(tag, at);
  }
  if (!ok) wl_fail("%s: block %p of %zu bytes was overwritten", what, p, n);
}

void wl_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: check failed: ", program);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(WL_EXIT_CHECK);
}

void *wl_xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) wl_fail("malloc(%zu) returned NULL", n);
  return p;
}

/* ------------------------------------------------------------- output */

void wl_result(const wl_args_t *args, uint64_t ops, double elapsed_s, const char *extra_fmt,
               ...) {
  double rate = elapsed_s > 0 ? (double)ops / elapsed_s : 0.0;
  printf("result workload=%s threads=%d ops=%" PRIu64 " elapsed_s=%.9f ops_per_s=%.1f", args->name,
         args->threads, ops, elapsed_s, rate);
  if (extra_fmt != NULL) {
    va_list ap;
    va_start(ap, extra_fmt);
    putchar(' ');
    vprintf(extra_fmt, ap);
    va_end(ap);
  }
  putchar('\n');
  fflush(stdout);
}
