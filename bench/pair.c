/* pair — probe of the malloc+free fast path, meant to run under
 * valgrind --tool=callgrind with the allocator under test in LD_PRELOAD.
 *
 *   pair <size> <pairs> [warmup]          warmup + pairs of p = malloc(size);
 *                                          touch p; free(p)
 *   pair --baseline <size> <pairs> [warmup]  the same loop on a static buffer,
 *                                          with no malloc/free: the loop's own
 *                                          instructions
 *
 * The driver (bench/core_bench.py) runs it with two pair counts N1 < N2 and
 * takes (Ir(N2) - Ir(N1)) / (N2 - N1): instructions per pair, with start-up,
 * warm-up and exit costs cancelled. Every pointer is stored to a volatile
 * sink, so the compiler cannot drop the malloc/free pair.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static unsigned char baseline_buf[1 << 16];

/* noinline: one loop body for warm-up and measured pairs alike. */
static __attribute__((noinline)) void pairs(size_t size, unsigned long n) {
  for (unsigned long i = 0; i < n; i++) {
    unsigned char *p = malloc(size);
    if (p == NULL) abort();
    p[0] = (unsigned char)i;
    sink = p;
    free(p);
  }
}

static __attribute__((noinline)) void pairs_baseline(size_t size, unsigned long n) {
  (void)size;
  for (unsigned long i = 0; i < n; i++) {
    unsigned char *p = baseline_buf;
    p[0] = (unsigned char)i;
    sink = p;
  }
}

static unsigned long parse(const char *s, const char *what) {
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (end == s || *end != '\0' || s[0] == '-') {
    fprintf(stderr, "pair: bad %s '%s'\n", what, s);
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  int baseline = argc > 1 && strcmp(argv[1], "--baseline") == 0;
  int a = 1 + baseline;
  if (argc - a < 2 || argc - a > 3) {
    fprintf(stderr, "usage: pair [--baseline] <size> <pairs> [warmup]\n");
    return 2;
  }
  size_t size = parse(argv[a], "size");
  unsigned long n = parse(argv[a + 1], "pairs");
  unsigned long warmup = argc - a == 3 ? parse(argv[a + 2], "warmup") : 10000;
  if (size == 0 || size > sizeof baseline_buf) {
    fprintf(stderr, "pair: size must be 1..%zu\n", sizeof baseline_buf);
    return 2;
  }
  void (*run)(size_t, unsigned long) = baseline ? pairs_baseline : pairs;
  run(size, warmup);
  run(size, n);
  return 0;
}
