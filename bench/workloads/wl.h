/* The common part of tessbench's workload programs.
 *
 * Every workload is one program, tb_<name>, that calls plain malloc/free
 * (the allocator under test is preloaded) and shares this command line:
 *
 *   --threads N      worker threads (1)
 *   --size N         the workload's size parameter (its own default)
 *   --iterations N   work per thread (its own default) ...
 *   --duration S     ... or run for S seconds instead
 *   --seed N         PRNG seed (1)
 *   --help
 *
 * plus options of its own (wl_option_t). It checks its own results (every
 * block it writes is read back) and on success prints one line on stdout:
 *
 *   result workload=<name> threads=N ops=N elapsed_s=F ops_per_s=F [k=v ...]
 *
 * A failed check prints "tb_<name>: check failed: ..." on stderr and exits
 * with 3; a bad command line exits with 2. So a broken allocator fails
 * loudly instead of looking fast. */
#ifndef TESSBENCH_WL_H
#define TESSBENCH_WL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WL_EXIT_USAGE 2
#define WL_EXIT_CHECK 3

typedef struct wl_args_s {
  const char *name; /* the workload, as printed in the result line */
  int threads;
  size_t size;
  uint64_t iterations;
  double duration; /* seconds; 0: iteration-bound */
  uint64_t seed;
} wl_args_t;

typedef enum { WL_OPT_U64, WL_OPT_SIZE, WL_OPT_DOUBLE, WL_OPT_STRING, WL_OPT_FLAG } wl_opt_kind_t;

/* A workload's own option: "--name VALUE" stored into *dest (a uint64_t,
 * size_t, double, const char * or bool, by kind). */
typedef struct wl_option_s {
  const char *name; /* without the leading "--" */
  wl_opt_kind_t kind;
  void *dest;
  const char *help;
} wl_option_t;

/* Parses argv into *args (defaults already set by the caller: name,
 * size, iterations) and the extra options (a NULL-named entry ends the
 * array; extra may be NULL). Exits with usage on error or --help. Sizes
 * accept K, M, G suffixes. */
void wl_parse(int argc, char **argv, wl_args_t *args, const wl_option_t *extra,
              const char *description);

/* ---------------------------------------------------------------- time */

double wl_now(void); /* monotonic seconds */

/* True when a duration-bound run is over: checks the clock every 64th
 * call, so a tight loop may call it per iteration. Iteration-bound runs:
 * i >= args->iterations. */
bool wl_done(const wl_args_t *args, uint64_t i, double start);

/* ---------------------------------------------------------------- PRNG */

typedef struct wl_rng_s {
  uint64_t state;
} wl_rng_t;

void wl_rng_seed(wl_rng_t *rng, uint64_t seed, uint64_t stream);
uint64_t wl_rand(wl_rng_t *rng);
/* uniform in [0, n), n > 0 */
uint64_t wl_rand_below(wl_rng_t *rng, uint64_t n);
/* uniform in [lo, hi] */
uint64_t wl_rand_range(wl_rng_t *rng, uint64_t lo, uint64_t hi);

/* ------------------------------------------------------------- threads */

/* Runs fn(index, ctx) on n threads released together; returns the seconds
 * from the first thread's start until the last one returned, as the
 * threads' own clock readings say (so a preempted main thread does not
 * shorten it). n == 1 still uses a thread, so every allocator sees the
 * same thread setup. */
double wl_run_threads(int n, void (*fn)(int index, void *ctx), void *ctx);

/* ------------------------------------------------------------- checks */

/* Marks a block of n bytes (n >= 1) with a tag derived from `tag`: its
 * first and last bytes, and one word per 4 KiB where it fits, so a block
 * that overlaps another, or that another's writes reach, is detected. */
void wl_fill(void *p, size_t n, uint64_t tag);
/* Checks what wl_fill wrote; on mismatch fails with `what` in the
 * message. */
void wl_verify(const void *p, size_t n, uint64_t tag, const char *what);

/* Fails the run: prints "tb_<name>: check failed: <message>" and exits
 * with WL_EXIT_CHECK. */
__attribute__((noreturn, format(printf, 1, 2))) void wl_fail(const char *fmt, ...);
/* malloc that fails the run on NULL (a workload never expects one). */
void *wl_xmalloc(size_t n);

/* -------------------------------------------------------------- output */

/* Prints the result line; `extra_fmt` (may be NULL) appends " k=v ..." */
__attribute__((format(printf, 4, 5))) void wl_result(const wl_args_t *args, uint64_t ops,
                                                      double elapsed_s, const char *extra_fmt,
                                                      ...);

#endif
