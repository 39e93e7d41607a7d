/* Minimal assertions shared by the tessalloc tests.
 *
 * CHECK(cond, fmt, ...)   report file:line and the message, count a failure,
 *                         keep going (so one run shows several bugs).
 * REQUIRE(cond, fmt, ...) same, then abort: for states where going on would
 *                         only produce noise (corrupted memory, NULL block).
 * check_finish()          summary line; exit status for main().
 * CHECK_HEAP(when)        tess_heap_check() finds nothing wrong.
 * rss_bytes()             the process's resident memory (/proc/self/statm).
 *
 * Reporting uses only stdio on stderr (unbuffered), which is safe from any
 * thread; the failure counter is atomic.
 */
#ifndef TESS_TESTS_CHECK_H
#define TESS_TESTS_CHECK_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Stop printing after this many failures: one bug often trips thousands. */
#define CHECK_MAX_REPORTS 50

static atomic_long check_failures_;

__attribute__((format(printf, 4, 5), unused, noinline)) static void check_fail_(
    const char *file, int line, const char *expr, const char *fmt, ...) {
  long n = atomic_fetch_add(&check_failures_, 1) + 1;
  if (n > CHECK_MAX_REPORTS) return;
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s:%d: CHECK(%s) failed: %s\n", file, line, expr, msg);
  if (n == CHECK_MAX_REPORTS) fprintf(stderr, "(further failures are counted, not printed)\n");
}

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) check_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#define REQUIRE(cond, ...)                                 \
  do {                                                     \
    if (!(cond)) {                                         \
      check_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
      fflush(stderr);                                      \
      abort();                                             \
    }                                                      \
  } while (0)

__attribute__((unused)) static long check_failures(void) { return atomic_load(&check_failures_); }

/* Print a summary and return main()'s exit status. */
__attribute__((unused)) static int check_finish(const char *test) {
  long n = check_failures();
  if (n == 0) {
    printf("%s: all checks passed\n", test);
    return 0;
  }
  fprintf(stderr, "%s: %ld check(s) failed\n", test, n);
  return 1;
}

/* Hide a value from the optimiser so that calls such as malloc(SIZE_MAX)
 * are neither folded nor warned about at compile time. */
__attribute__((unused)) static size_t opaque(size_t x) {
  volatile size_t v = x;
  return v;
}

/* Resident bytes of this process, from /proc/self/statm. */
__attribute__((unused)) static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  REQUIRE(f != NULL, "cannot open /proc/self/statm");
  unsigned long size = 0, resident = 0;
  REQUIRE(fscanf(f, "%lu %lu", &size, &resident) == 2, "cannot parse statm");
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* tessalloc's own invariant check (tess_heap_check) must find nothing.
 * Call it where no other thread allocates or frees. */
const char *tess_heap_check(void);
#define CHECK_HEAP(when)                                                   \
  do {                                                                     \
    const char *heap_error_ = tess_heap_check();                           \
    CHECK(heap_error_ == NULL, "tess_heap_check %s: %s", (when), heap_error_); \
  } while (0)

#endif /* TESS_TESTS_CHECK_H */
