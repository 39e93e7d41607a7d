/* enclave_bench: one run of a fixed-heap allocator in a model of an enclave.
 *
 *   enclave_bench --allocator PATH.so --workload a|b [options] [--csv FILE]
 *   enclave_bench --allocator PATH.so --info
 *
 * The allocator is a plugin (fixed_alloc.h) loaded with dlopen. One process
 * run is one "enclave": a heap region of --heap-pages pages is mapped once,
 * filled with a pattern, handed to the plugin's init(), and then used by
 * ECALLs. An ECALL is thread_init -> work -> thread_cleanup on whatever host
 * thread runs it; at most --tcs ECALLs are in flight (a counting semaphore
 * models the enclave's thread slots). Host threads are either a pool created
 * before init (--host pooled) or a new thread per ECALL (--host new-thread).
 *
 * Workload a: Open Enclave's pluggable_allocator sample (per ECALL a FIFO of
 * 15 live blocks, N iterations of malloc(rand % max) + free of the oldest;
 * one ECALL on each of --threads threads; elapsed wall time).
 * Workload b: the fragmentation soak (worker and other threads doing rapid
 * ECALLs with bursts of mixed sizes, a shared pool of long-lived blocks,
 * a sampler writing live bytes and footprint every --sample-interval s).
 *
 * Checked for every allocator alike, see README.md: pointers inside the
 * region, block contents, the guard zones around the region, OS memory calls
 * (mmap family, brk, sbrk: interposed below) after init, NULL returns.
 * The last line on stdout is "result key=value ..."; exit 0 when every
 * check passed, 1 when one failed (or on corruption, at once), 2 on a usage
 * or plugin-loading error. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fixed_alloc.h"

#define PAGE 4096u
#define GUARD_BYTES (64u * 1024u) /* pattern-filled zone on each side */
#define REGION_ALIGN ((size_t)2 << 20)
#define FILL_WORD 0xC5E1F1A5D00DFEEDull
#define A_QUEUE_LENGTH 15 /* the sample's QUEUE_LENGTH */

/* ------------------------------------------------------------------ *
 * OS memory calls: interposed. The executable defines mmap & co. and
 * exports them (linked with -rdynamic), so a dlopen'd plugin's calls bind
 * here. Each call is counted by phase and by context: "in allocator" when
 * the calling thread is executing plugin code (dlopen, init, an ECALL,
 * footprint()) or is a per-ECALL host thread (whose thread-exit destructors
 * belong to the allocator); "outside" otherwise. glibc's own calls (thread
 * stacks, its malloc) go through its internal aliases and never reach these
 * definitions.
 * ------------------------------------------------------------------ */
enum { OS_MMAP, OS_MUNMAP, OS_MREMAP, OS_MADVISE, OS_BRK, OS_SBRK, OS_N };
static const char *const os_names[OS_N] = {"mmap", "munmap", "mremap", "madvise", "brk", "sbrk"};
enum { PH_START, PH_LOAD, PH_INIT, PH_RUN, PH_N };
static const char *const phase_names[PH_N] = {"start", "load", "init", "after_init"};

static _Atomic int g_phase = PH_START;
static __thread int tls_in_alloc; /* > 0: this thread runs allocator code */
static _Atomic unsigned long g_os_calls[PH_N][2][OS_N];
static _Atomic unsigned long g_os_bytes[PH_N][2]; /* bytes asked of mmap/mremap */

static void os_count(int fn, size_t bytes) {
  int ph = atomic_load_explicit(&g_phase, memory_order_relaxed);
  int in = tls_in_alloc > 0;
  atomic_fetch_add_explicit(&g_os_calls[ph][in][fn], 1, memory_order_relaxed);
  if (bytes) atomic_fetch_add_explicit(&g_os_bytes[ph][in], bytes, memory_order_relaxed);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  os_count(OS_MMAP, len);
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
  os_count(OS_MMAP, len);
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len) {
  os_count(OS_MUNMAP, 0);
  return (int)syscall(SYS_munmap, addr, len);
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  void *new_addr = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void *);
    va_end(ap);
  }
  os_count(OS_MREMAP, new_len > old_len ? new_len - old_len : 0);
  return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

int madvise(void *addr, size_t len, int advice) {
  os_count(OS_MADVISE, 0);
  return (int)syscall(SYS_madvise, addr, len, advice);
}

/* brk/sbrk go to glibc's own (it keeps the current break in a variable). */
int brk(void *addr) {
  static int (*real)(void *);
  os_count(OS_BRK, 0);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "brk");
  if (!real) {
    errno = ENOMEM;
    return -1;
  }
  return real(addr);
}

void *sbrk(intptr_t increment) {
  static void *(*real)(intptr_t);
  os_count(OS_SBRK, increment > 0 ? (size_t)increment : 0);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "sbrk");
  if (!real) {
    errno = ENOMEM;
    return (void *)-1;
  }
  return real(increment);
}

static unsigned long os_calls(int ph, int in) {
  unsigned long n = 0;
  for (int f = 0; f < OS_N; f++) n += atomic_load(&g_os_calls[ph][in][f]);
  return n;
}

/* ------------------------------------------------------------------ *
 * Options
 * ------------------------------------------------------------------ */
enum { HOST_POOLED, HOST_NEW_THREAD };
enum { VERIFY_NONE, VERIFY_HEAD, VERIFY_SIG, VERIFY_FULL };

static struct {
  const char *allocator;
  char workload; /* 'a' or 'b' */
  int host;      /* -1: the workload's default */
  long heap_pages;
  long tcs;
  long threads;
  long num_allocations;
  long max_allocation_size;
  int overlap; /* a: every ECALL waits for all at its midpoint */
  long workers, others;
  double duration;
  long ecalls; /* b: per host thread, at most (0: no limit) */
  size_t pool_bytes;
  double sample_interval;
  double peak_interval; /* b: live bytes and footprint read for the peaks */
  long burst_min, burst_max;
  long keep_percent;
  long other_frees;
  uint64_t seed;
  int verify; /* VERIFY_* */
  size_t misalign;
  long max_nulls;    /* -1: no limit */
  long max_os_calls; /* -1: no limit */
  const char *csv;
  const char *stats_jsonl;
  int info;
} O = {
    .host = -1,
    .heap_pages = -1,
    .tcs = -1,
    .threads = 1,
    .num_allocations = 100000,
    .max_allocation_size = 16384,
    .workers = 16,
    .others = 4,
    .duration = 60.0,
    .pool_bytes = 16u << 20,
    .sample_interval = 0.5,
    .peak_interval = 0.002,
    .burst_min = 200,
    .burst_max = 2000,
    .keep_percent = 2,
    .other_frees = 512,
    .seed = 1,
    .verify = VERIFY_SIG,
    .max_nulls = -1,
    .max_os_calls = -1,
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: enclave_bench --allocator PATH.so --workload a|b [options]\n"
          "       enclave_bench --allocator PATH.so --info\n"
          "enclave model:\n"
          "  --host pooled|new-thread   host threads: a pool made before init, or a new\n"
          "                             thread per ECALL (default: a new-thread, b pooled)\n"
          "  --heap-pages N             heap region in 4 KiB pages (a: 8192, b: 16384)\n"
          "  --tcs N                    thread slots, ECALLs in flight at most\n"
          "                             (a: 16, b: workers + others)\n"
          "  --misalign N               region start and end moved N bytes inward\n"
          "workload a (Open Enclave pluggable_allocator sample):\n"
          "  --threads N                threads, one ECALL each (1)\n"
          "  --num-allocations N        iterations per ECALL (100000)\n"
          "  --max-allocation-size N    sizes are rand %% N (16384)\n"
          "  --overlap                  each ECALL waits at its midpoint until all are\n"
          "                             there, so the peak footprint is that of every\n"
          "                             thread's ECALL at once, as with a core per\n"
          "                             thread (the time is then not the sample's)\n"
          "workload b (fragmentation soak):\n"
          "  --workers N --others N     host threads of each role (16, 4)\n"
          "  --duration S               seconds (60)\n"
          "  --ecalls N                 each host thread stops after N ECALLs (the run\n"
          "                             ends when all have, or at --duration): a fixed\n"
          "                             amount of work, for instruction counts\n"
          "  --pool-bytes N[K|M|G]      cap of the long-lived pool, requested bytes (16M)\n"
          "  --sample-interval S        sampler period (0.5)\n"
          "  --peak-interval S          live bytes and footprint read between samples\n"
          "                             for the peaks, at once (0.002)\n"
          "  --burst-min N --burst-max N  mallocs per worker ECALL (200, 2000)\n"
          "  --keep-percent N           %% of a burst's survivors offered to the pool (2)\n"
          "  --other-frees N            pool blocks an other-ECALL frees at most (512)\n"
          "  --csv FILE                 b: the time series; a: the result as one CSV row\n"
          "  --stats-jsonl FILE         b: the allocator's own statistics at each sample,\n"
          "                             one JSON object per line (if it has any); a:\n"
          "                             one line after the last ECALL, and with\n"
          "                             --overlap one before it, at the midpoint while\n"
          "                             every ECALL waits (the time then includes it)\n"
          "checks:\n"
          "  --verify sig|head|full|none  write and check in each block: the first,\n"
          "                             the last and one word per 4 KiB (sig), the\n"
          "                             first word (head), every word (full), or\n"
          "                             nothing (none) (default: sig)\n"
          "  --max-nulls N              fail when more mallocs return NULL (no limit)\n"
          "  --max-os-calls N           fail when the allocator makes more OS memory\n"
          "                             calls after init (no limit)\n"
          "  --seed N                   PRNG seed (1)\n");
}

static size_t parse_size(const char *s, const char *opt) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm')
    mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g')
    mul = 1ull << 30, end++;
  if (errno || end == s || *end || (mul > 1 && v > SIZE_MAX / mul)) {
    fprintf(stderr, "enclave_bench: bad value for %s: '%s'\n", opt, s);
    exit(2);
  }
  return (size_t)(v * mul);
}

static long parse_long(const char *s, const char *opt, long min) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min) {
    fprintf(stderr, "enclave_bench: bad value for %s: '%s' (at least %ld)\n", opt, s, min);
    exit(2);
  }
  return v;
}

static double parse_double(const char *s, const char *opt) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v > 0)) {
    fprintf(stderr, "enclave_bench: bad value for %s: '%s'\n", opt, s);
    exit(2);
  }
  return v;
}

static void parse_args(int argc, char **argv) {
  enum {
    OPT_ALLOC = 256,
    OPT_WORKLOAD,
    OPT_HOST,
    OPT_HEAP,
    OPT_TCS,
    OPT_THREADS,
    OPT_NALLOC,
    OPT_MAXSIZE,
    OPT_OVERLAP,
    OPT_WORKERS,
    OPT_OTHERS,
    OPT_DURATION,
    OPT_ECALLS,
    OPT_POOL,
    OPT_SAMPLE,
    OPT_PEAK,
    OPT_BMIN,
    OPT_BMAX,
    OPT_KEEP,
    OPT_OFREES,
    OPT_SEED,
    OPT_VERIFY,
    OPT_MISALIGN,
    OPT_MAXNULL,
    OPT_MAXOS,
    OPT_CSV,
    OPT_STATS,
    OPT_INFO,
    OPT_HELP
  };
  static const struct option opts[] = {
      {"allocator", required_argument, 0, OPT_ALLOC},
      {"workload", required_argument, 0, OPT_WORKLOAD},
      {"host", required_argument, 0, OPT_HOST},
      {"heap-pages", required_argument, 0, OPT_HEAP},
      {"tcs", required_argument, 0, OPT_TCS},
      {"threads", required_argument, 0, OPT_THREADS},
      {"num-allocations", required_argument, 0, OPT_NALLOC},
      {"max-allocation-size", required_argument, 0, OPT_MAXSIZE},
      {"overlap", no_argument, 0, OPT_OVERLAP},
      {"workers", required_argument, 0, OPT_WORKERS},
      {"others", required_argument, 0, OPT_OTHERS},
      {"duration", required_argument, 0, OPT_DURATION},
      {"ecalls", required_argument, 0, OPT_ECALLS},
      {"pool-bytes", required_argument, 0, OPT_POOL},
      {"sample-interval", required_argument, 0, OPT_SAMPLE},
      {"peak-interval", required_argument, 0, OPT_PEAK},
      {"burst-min", required_argument, 0, OPT_BMIN},
      {"burst-max", required_argument, 0, OPT_BMAX},
      {"keep-percent", required_argument, 0, OPT_KEEP},
      {"other-frees", required_argument, 0, OPT_OFREES},
      {"seed", required_argument, 0, OPT_SEED},
      {"verify", required_argument, 0, OPT_VERIFY},
      {"misalign", required_argument, 0, OPT_MISALIGN},
      {"max-nulls", required_argument, 0, OPT_MAXNULL},
      {"max-os-calls", required_argument, 0, OPT_MAXOS},
      {"csv", required_argument, 0, OPT_CSV},
      {"stats-jsonl", required_argument, 0, OPT_STATS},
      {"info", no_argument, 0, OPT_INFO},
      {"help", no_argument, 0, OPT_HELP},
      {0, 0, 0, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
      case OPT_ALLOC: O.allocator = optarg; break;
      case OPT_WORKLOAD:
        if (strcmp(optarg, "a") && strcmp(optarg, "b")) {
          fprintf(stderr, "enclave_bench: --workload must be a or b\n");
          exit(2);
        }
        O.workload = optarg[0];
        break;
      case OPT_HOST:
        if (!strcmp(optarg, "pooled"))
          O.host = HOST_POOLED;
        else if (!strcmp(optarg, "new-thread"))
          O.host = HOST_NEW_THREAD;
        else {
          fprintf(stderr, "enclave_bench: --host must be pooled or new-thread\n");
          exit(2);
        }
        break;
      case OPT_HEAP: O.heap_pages = parse_long(optarg, "--heap-pages", 16); break;
      case OPT_TCS: O.tcs = parse_long(optarg, "--tcs", 1); break;
      case OPT_THREADS: O.threads = parse_long(optarg, "--threads", 1); break;
      case OPT_NALLOC: O.num_allocations = parse_long(optarg, "--num-allocations", 0); break;
      case OPT_MAXSIZE:
        O.max_allocation_size = parse_long(optarg, "--max-allocation-size", 1);
        break;
      case OPT_WORKERS: O.workers = parse_long(optarg, "--workers", 0); break;
      case OPT_OTHERS: O.others = parse_long(optarg, "--others", 0); break;
      case OPT_DURATION: O.duration = parse_double(optarg, "--duration"); break;
      case OPT_ECALLS: O.ecalls = parse_long(optarg, "--ecalls", 1); break;
      case OPT_POOL: O.pool_bytes = parse_size(optarg, "--pool-bytes"); break;
      case OPT_SAMPLE: O.sample_interval = parse_double(optarg, "--sample-interval"); break;
      case OPT_PEAK: O.peak_interval = parse_double(optarg, "--peak-interval"); break;
      case OPT_BMIN: O.burst_min = parse_long(optarg, "--burst-min", 1); break;
      case OPT_BMAX: O.burst_max = parse_long(optarg, "--burst-max", 1); break;
      case OPT_KEEP: O.keep_percent = parse_long(optarg, "--keep-percent", 0); break;
      case OPT_OFREES: O.other_frees = parse_long(optarg, "--other-frees", 0); break;
      case OPT_SEED: O.seed = (uint64_t)parse_size(optarg, "--seed"); break;
      case OPT_VERIFY:
        if (!strcmp(optarg, "full"))
          O.verify = VERIFY_FULL;
        else if (!strcmp(optarg, "sig"))
          O.verify = VERIFY_SIG;
        else if (!strcmp(optarg, "head"))
          O.verify = VERIFY_HEAD;
        else if (!strcmp(optarg, "none"))
          O.verify = VERIFY_NONE;
        else {
          fprintf(stderr, "enclave_bench: --verify must be sig, head, full or none\n");
          exit(2);
        }
        break;
      case OPT_OVERLAP: O.overlap = 1; break;
      case OPT_MISALIGN: O.misalign = parse_size(optarg, "--misalign"); break;
      case OPT_MAXNULL: O.max_nulls = parse_long(optarg, "--max-nulls", -1); break;
      case OPT_MAXOS: O.max_os_calls = parse_long(optarg, "--max-os-calls", -1); break;
      case OPT_CSV: O.csv = optarg; break;
      case OPT_STATS: O.stats_jsonl = optarg; break;
      case OPT_INFO: O.info = 1; break;
      case OPT_HELP: usage(stdout); exit(0);
      default: usage(stderr); exit(2);
    }
  }
  if (optind != argc || !O.allocator || (!O.info && !O.workload)) {
    usage(stderr);
    exit(2);
  }
  if (O.keep_percent > 100 || O.burst_min > O.burst_max) {
    fprintf(stderr, "enclave_bench: need --keep-percent <= 100, --burst-min <= --burst-max\n");
    exit(2);
  }
  if (O.workload == 'b' && O.workers + O.others < 1) {
    fprintf(stderr, "enclave_bench: workload b needs at least one thread\n");
    exit(2);
  }
  if (O.host < 0) O.host = O.workload == 'a' ? HOST_NEW_THREAD : HOST_POOLED;
  if (O.heap_pages < 0) O.heap_pages = O.workload == 'a' ? 8192 : 16384;
  if (O.tcs < 0) O.tcs = O.workload == 'a' ? 16 : O.workers + O.others;
  if (O.overlap && (O.workload != 'a' || O.tcs < O.threads)) {
    fprintf(stderr, "enclave_bench: --overlap is for workload a, with --tcs >= --threads\n");
    exit(2);
  }
  if (O.misalign * 2 + PAGE > (size_t)O.heap_pages * PAGE) {
    fprintf(stderr, "enclave_bench: --misalign too large for the heap\n");
    exit(2);
  }
}

/* ------------------------------------------------------------------ *
 * Small helpers
 * ------------------------------------------------------------------ */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Per-thread PRNG (xorshift64*): glibc's rand() takes a lock on every call. */
static inline uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}
static inline uint32_t rnd31(uint64_t *s) { return (uint32_t)(rnd(s) >> 33); } /* like rand() */
static inline uint64_t rnd_below(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }

/* One writer per counter (a slot's thread): a relaxed load+store, no lock prefix. */
static inline void bump_u(_Atomic uint64_t *c, uint64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}
static inline void bump_i(_Atomic int64_t *c, int64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

static void atomic_max(_Atomic uint64_t *m, uint64_t v) {
  uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak(m, &cur, v)) {
  }
}

static void die_corrupt(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "enclave_bench: FAIL: corruption: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stdout);
  fflush(stderr);
  _exit(1);
}

/* ------------------------------------------------------------------ *
 * The heap region: pattern-filled, with guard zones
 * ------------------------------------------------------------------ */
static unsigned char *g_map; /* GUARD | region pages | GUARD */
static size_t g_map_len;
static uintptr_t g_lo, g_hi;            /* the region handed to init */
static size_t g_first_page, g_end_page; /* region pages, indices into g_map */
static unsigned char *g_touched;        /* per page of g_map: 1 once it left the pattern */
static size_t g_touched_pages;
static unsigned char g_pattern_page[PAGE];

static void region_create(void) {
  size_t region_len = (size_t)O.heap_pages * PAGE;
  g_map_len = region_len + 2 * GUARD_BYTES;
  /* The harness's own mmap: counted in phase "start", outside the allocator.
   * The region starts on a 2 MiB boundary (an enclave heap is at least
   * page-aligned; some peers need more, e.g. mimalloc's 64 KiB arenas), the
   * guard zones lie just around it; the rest of the mapping is never used. */
  void *m = mmap(NULL, g_map_len + REGION_ALIGN, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    perror("enclave_bench: mmap of the heap region");
    exit(2);
  }
  uintptr_t start =
      ((uintptr_t)m + GUARD_BYTES + REGION_ALIGN - 1) & ~(uintptr_t)(REGION_ALIGN - 1);
  g_map = (unsigned char *)(start - GUARD_BYTES);
  uint64_t w = FILL_WORD;
  for (size_t i = 0; i < PAGE; i += 8) memcpy(g_pattern_page + i, &w, 8);
  for (size_t off = 0; off < g_map_len; off += PAGE) memcpy(g_map + off, g_pattern_page, PAGE);
  g_lo = (uintptr_t)g_map + GUARD_BYTES + O.misalign;
  g_hi = (uintptr_t)g_map + GUARD_BYTES + region_len - O.misalign;
  g_first_page = (g_lo - (uintptr_t)g_map) / PAGE;
  g_end_page = (g_hi - (uintptr_t)g_map + PAGE - 1) / PAGE;
  g_touched = calloc(g_map_len / PAGE, 1);
  if (!g_touched) exit(2);
}

/* Pages of the region that no longer hold the pattern (a high-water mark:
 * a page once touched stays counted). One caller at a time. */
static size_t scan_touched(void) {
  for (size_t i = g_first_page; i < g_end_page; i++) {
    if (!g_touched[i] && memcmp(g_map + i * PAGE, g_pattern_page, PAGE) != 0) {
      g_touched[i] = 1;
      g_touched_pages++;
    }
  }
  return g_touched_pages;
}

/* Bytes outside [g_lo, g_hi) that changed: the guard zones and the
 * misaligned slivers. */
static size_t guard_damage(uintptr_t *first) {
  size_t bad = 0;
  *first = 0;
  const unsigned char *pat = (const unsigned char *)&(uint64_t){FILL_WORD};
  for (size_t off = 0; off < g_map_len; off++) {
    uintptr_t a = (uintptr_t)g_map + off;
    if (a == g_lo) off = g_hi - (uintptr_t)g_map, a = g_hi;
    if (off >= g_map_len) break;
    if (g_map[off] != pat[off % 8]) {
      if (!bad) *first = a;
      bad++;
    }
  }
  return bad;
}

static inline int in_region(const void *p, size_t size) {
  uintptr_t a = (uintptr_t)p;
  return a >= g_lo && a <= g_hi && size <= g_hi - a;
}

/* ------------------------------------------------------------------ *
 * Block contents: written after malloc, checked before free
 * ------------------------------------------------------------------ */
typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} block_t;

/* The words written into a block of `size` bytes (--verify sig): a head
 * word at 0, a tail word at size-8 (size >= 16), one word per 4 KiB page in
 * between; full: every 8-byte word; head: the head word (bytes, below 8);
 * none: nothing. Words never overlap. */
static inline size_t sig_step(void) { return O.verify == VERIFY_FULL ? 8 : PAGE; }

static inline void put_word(unsigned char *p, size_t n, uint64_t v) { memcpy(p, &v, n); }

static void sign(const block_t *b) {
  size_t size = b->size;
  if (!size || O.verify == VERIFY_NONE) return;
  if (size < 16 || O.verify == VERIFY_HEAD) {
    put_word(b->p, size < 8 ? size : 8, b->tag);
    return;
  }
  size_t step = sig_step();
  for (size_t off = 0; off + 8 <= size - 8; off += step) put_word(b->p + off, 8, b->tag + off);
  put_word(b->p + size - 8, 8, ~b->tag);
}

/* Offset of the first wrong word among those lying inside [0, limit) of
 * the block, or SIZE_MAX when all are right. zero: expect zeros (calloc). */
static size_t sig_check(const unsigned char *p, size_t size, uint64_t tag, size_t limit, int zero) {
  uint64_t got;
  if (!size || O.verify == VERIFY_NONE) return SIZE_MAX;
  if (size < 16 || O.verify == VERIFY_HEAD) {
    size_t n = size < 8 ? size : 8;
    if (n > limit) n = limit;
    uint64_t want = zero ? 0 : tag;
    return memcmp(p, &want, n) ? 0 : SIZE_MAX;
  }
  size_t step = sig_step();
  for (size_t off = 0; off + 8 <= size - 8 && off + 8 <= limit; off += step) {
    memcpy(&got, p + off, 8);
    if (got != (zero ? 0 : tag + off)) return off;
  }
  if (size <= limit) {
    memcpy(&got, p + size - 8, 8);
    if (got != (zero ? 0 : ~tag)) return size - 8;
  }
  return SIZE_MAX;
}

static void check_block(const block_t *b, const char *when) {
  size_t off = sig_check(b->p, b->size, b->tag, b->size, 0);
  if (off != SIZE_MAX)
    die_corrupt(
        "block %p of %zu bytes changed at offset %zu (%s): another block overlaps it "
        "or the allocator wrote into it",
        (void *)b->p, b->size, off, when);
}

/* ------------------------------------------------------------------ *
 * The allocator and the enclave's thread slots
 * ------------------------------------------------------------------ */
static const fixed_allocator_t *A;
static sem_t g_tcs;

static _Atomic uint64_t g_violations, g_usable_errors, g_footprint_peak;
static _Atomic int g_stop;
static _Atomic size_t g_threads_done; /* b: host threads that ran their --ecalls */

/* b: whether the host thread that ran *ran ECALLs has run its --ecalls. */
static int ecalls_done(long *ran) {
  if (O.ecalls == 0 || ++*ran < O.ecalls) return 0;
  atomic_fetch_add(&g_threads_done, 1);
  return 1;
}
static double g_t0;
static _Atomic uint64_t g_first_null_ns; /* since g_t0, + 1; 0 = none yet */

typedef struct slot_s {
  int index;
  int role; /* ROLE_* */
  uint64_t rng;
  uint64_t next_id;
  pthread_t thread;
  block_t *local; /* b: the current burst's live blocks */
  size_t local_cap;
  block_t *batch; /* b: blocks taken from the pool */
  _Atomic uint64_t ecalls, mallocs, nulls;
  _Atomic int64_t live; /* requested bytes allocated minus freed by this slot */
  /* b: CPU time of the host threads that ran this slot's ECALLs. On a
   * machine with fewer CPUs than threads, an allocator whose waiting
   * threads sleep (snmalloc's combining lock) leaves CPU time to the
   * others, and one that spins does not: calls per CPU-second compare the
   * work each costs. */
  _Atomic uint64_t cpu_ns;
} __attribute__((aligned(64))) slot_t;
enum { ROLE_A, ROLE_WORKER, ROLE_OTHER };

static slot_t *g_slots;
static size_t g_nslots;

static size_t footprint_now(void) {
  if (!A->footprint) return SIZE_MAX;
  tls_in_alloc++;
  size_t f = A->footprint();
  tls_in_alloc--;
  if (f != SIZE_MAX) atomic_max(&g_footprint_peak, f);
  return f;
}

static void note_violation(const void *p, size_t size, const char *fn) {
  uint64_t n = atomic_fetch_add(&g_violations, 1);
  if (n < 5)
    fprintf(stderr, "enclave_bench: %s returned %p for %zu bytes, outside the region [%p, %p)\n",
            fn, p, size, (void *)g_lo, (void *)g_hi);
}

static void note_null(slot_t *s) {
  bump_u(&s->nulls, 1);
  if (atomic_load_explicit(&g_first_null_ns, memory_order_relaxed) == 0) {
    uint64_t ns = (uint64_t)((now_s() - g_t0) * 1e9) + 1, zero = 0;
    atomic_compare_exchange_strong(&g_first_null_ns, &zero, ns);
  }
}

static void check_usable(const block_t *b) {
  if (!A->usable_size) return;
  size_t us = A->usable_size(b->p);
  if (us < b->size || !in_region(b->p, us)) {
    uint64_t n = atomic_fetch_add(&g_usable_errors, 1);
    if (n < 5)
      fprintf(stderr, "enclave_bench: usable_size(%p) = %zu for a block of %zu bytes%s\n",
              (void *)b->p, us, b->size, us < b->size ? "" : " reaches outside the region");
  }
}

/* A new block from p (NULL or not) of `size` bytes: 1 if it is usable. */
static int take_block(slot_t *s, block_t *b, void *p, size_t size, const char *fn) {
  b->p = p;
  b->size = size;
  if (!p) {
    if (size) note_null(s); /* malloc(0) may answer NULL */
    return 0;
  }
  if (!in_region(p, size)) {
    note_violation(p, size, fn); /* never written, never freed */
    b->p = NULL;
    return 0;
  }
  b->tag = splitmix64(((uint64_t)s->index << 40) ^ s->next_id++ ^ (uintptr_t)p);
  bump_i(&s->live, (int64_t)size);
  return 1;
}

static void free_block(slot_t *s, block_t *b, const char *when) {
  check_block(b, when);
  A->free(b->p);
  bump_i(&s->live, -(int64_t)b->size);
  b->p = NULL;
}

static void ecall(slot_t *s, void (*body)(slot_t *)) {
  while (sem_wait(&g_tcs) != 0) {
  }
  tls_in_alloc++;
  if (A->thread_init) A->thread_init();
  body(s);
  if (A->thread_cleanup) A->thread_cleanup();
  tls_in_alloc--;
  sem_post(&g_tcs);
  bump_u(&s->ecalls, 1);
}

/* ------------------------------------------------------------------ *
 * Workload a: the pluggable_allocator sample's ECALL
 * ------------------------------------------------------------------ */
static pthread_barrier_t g_midpoint; /* --overlap */
static FILE *g_stats;                /* --stats-jsonl */
static char g_stats_line[1 << 16];   /* the allocator's statistics, last read */

/* Reads the allocator's statistics into g_stats_line: false when they
 * are not one JSON object that fits. */
static int stats_read(void) {
  size_t len = A->stats_json(g_stats_line, sizeof g_stats_line);
  return len < sizeof g_stats_line && len > 2 && g_stats_line[0] == '{';
}

/* --overlap: every ECALL waits here at its midpoint. With --stats-jsonl,
 * the last to arrive writes the allocator's statistics while the others
 * wait on, so that they describe every call's memory at once. */
static void midpoint_wait(void) {
  int last = pthread_barrier_wait(&g_midpoint) == PTHREAD_BARRIER_SERIAL_THREAD;
  if (!g_stats) return;
  if (last && stats_read())
    fprintf(g_stats, "{\"at\":\"midpoint\",\"threads\":%ld,%s\n", O.threads, g_stats_line + 1);
  pthread_barrier_wait(&g_midpoint);
}

static void body_a(slot_t *s) {
  block_t q[A_QUEUE_LENGTH] = {{0}};
  unsigned head = 0;
  uint64_t n = (uint64_t)O.num_allocations, half = n / 2;
  for (uint64_t i = 0; i < n; i++) {
    block_t old = q[head];
    size_t size = (size_t)(rnd31(&s->rng) % (uint64_t)O.max_allocation_size);
    void *p = A->malloc(size);
    if (take_block(s, &q[head], p, size, "malloc")) sign(&q[head]);
    bump_u(&s->mallocs, 1);
    head = head + 1 == A_QUEUE_LENGTH ? 0 : head + 1;
    if (old.p) free_block(s, &old, "before free");
    if (i == half) {
      if (O.overlap) midpoint_wait();
      footprint_now();
    }
  }
  footprint_now();
  for (unsigned k = 0; k < A_QUEUE_LENGTH; k++)
    if (q[k].p) free_block(s, &q[k], "before free, end of ECALL");
}

/* ------------------------------------------------------------------ *
 * Workload b: the fragmentation soak
 * ------------------------------------------------------------------ */
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t *g_pool;
static size_t g_pool_n, g_pool_cap;
static _Atomic size_t g_pool_bytes;

/* 85 %: 16..512 B; 12 %: 1..4 KiB; 3 %: 8..32 KiB (uniform within each). */
static size_t draw_size(uint64_t *rng) {
  uint64_t r = rnd_below(rng, 1000);
  if (r < 850) return 16 + (size_t)rnd_below(rng, 512 - 16 + 1);
  if (r < 970) return 1024 + (size_t)rnd_below(rng, 4096 - 1024 + 1);
  return 8192 + (size_t)rnd_below(rng, 32768 - 8192 + 1);
}

/* The block moves from s's live bytes to the pool's under g_pool_lock,
 * which the readers of live bytes hold for their sums (live_sum_locked):
 * one step to them. */
static int pool_put(slot_t *s, const block_t *b) {
  int ok = 0;
  pthread_mutex_lock(&g_pool_lock);
  size_t bytes = atomic_load_explicit(&g_pool_bytes, memory_order_relaxed);
  if (g_pool_n < g_pool_cap && bytes + b->size <= O.pool_bytes) {
    g_pool[g_pool_n++] = *b;
    bump_i(&s->live, -(int64_t)b->size);
    atomic_store_explicit(&g_pool_bytes, bytes + b->size, memory_order_relaxed);
    ok = 1;
  }
  pthread_mutex_unlock(&g_pool_lock);
  return ok;
}

/* Takes random pool blocks while the pool holds more than 7/8 of its cap,
 * at most `max`; returns how many. */
static size_t pool_take(slot_t *s, block_t *out, size_t max) {
  size_t n = 0;
  pthread_mutex_lock(&g_pool_lock);
  size_t bytes = atomic_load_explicit(&g_pool_bytes, memory_order_relaxed);
  size_t low = O.pool_bytes / 8 * 7;
  int64_t taken = 0;
  while (n < max && g_pool_n && bytes > low) {
    size_t j = (size_t)rnd_below(&s->rng, g_pool_n);
    out[n] = g_pool[j];
    g_pool[j] = g_pool[--g_pool_n];
    taken += (int64_t)out[n].size;
    bytes -= out[n++].size;
  }
  /* live in s until freed (the pool's count drops them all at once, up to
   * 512 blocks, and the samples taken while they are freed counted them
   * nowhere); both counts under g_pool_lock, as pool_put's: a reader
   * between the two counted them twice */
  bump_i(&s->live, taken);
  atomic_store_explicit(&g_pool_bytes, bytes, memory_order_relaxed);
  pthread_mutex_unlock(&g_pool_lock);
  return n;
}

/* One allocation of a burst: 3 % calloc, 3 % realloc of a live block of the
 * burst, else malloc; then, half the time, free a random live block. */
static void burst_step(slot_t *s, size_t *count) {
  block_t *local = s->local;
  size_t size = draw_size(&s->rng);
  uint64_t op = rnd_below(&s->rng, 100);
  bump_u(&s->mallocs, 1);
  if (op < 3 && *count && A->realloc) {
    block_t *b = &local[rnd_below(&s->rng, *count)];
    check_block(b, "before realloc");
    void *q = A->realloc(b->p, size);
    if (!q) {
      if (size) note_null(s); /* the old block stays valid */
      return;
    }
    block_t old = *b;
    bump_i(&s->live, -(int64_t)old.size);
    if (!take_block(s, b, q, size, "realloc")) {
      *b = local[--*count]; /* lost (outside the region): never touched again */
      return;
    }
    size_t keep = old.size < size ? old.size : size;
    size_t off = sig_check(b->p, old.size, old.tag, keep, 0);
    if (off != SIZE_MAX)
      die_corrupt("realloc(%p, %zu) -> %p lost the old contents at offset %zu", (void *)old.p, size,
                  (void *)q, off);
    sign(b);
  } else {
    block_t *b = &local[*count];
    int zeroed = op < 6 && A->calloc;
    void *p = zeroed ? (size % 8 ? A->calloc(size, 1) : A->calloc(size / 8, 8)) : A->malloc(size);
    if (!take_block(s, b, p, size, zeroed ? "calloc" : "malloc")) return;
    if (zeroed) {
      size_t off = sig_check(b->p, size, 0, size, 1);
      if (off != SIZE_MAX)
        die_corrupt("calloc block %p of %zu bytes not zero at offset %zu", (void *)b->p, size, off);
    }
    sign(b);
    if ((s->next_id & 15) == 0) check_usable(b);
    ++*count;
  }
  if (*count && (rnd(&s->rng) & 1)) {
    size_t j = (size_t)rnd_below(&s->rng, *count);
    free_block(s, &local[j], "before free");
    local[j] = local[--*count];
  }
}

static void burst(slot_t *s, long min, long max) {
  size_t n = (size_t)min + (size_t)rnd_below(&s->rng, (uint64_t)(max - min + 1));
  size_t count = 0;
  for (size_t i = 0; i < n; i++) burst_step(s, &count);
  for (size_t j = 0; j < count; j++) {
    block_t *b = &s->local[j];
    if (s->role == ROLE_WORKER && rnd_below(&s->rng, 100) < (uint64_t)O.keep_percent &&
        pool_put(s, b)) {
      continue; /* the pool's bytes are counted apart */
    }
    free_block(s, b, "before free, end of burst");
  }
}

static void body_worker(slot_t *s) { burst(s, O.burst_min, O.burst_max); }

/* An other-thread ECALL: frees long-lived blocks that workers put in the
 * pool, then a short burst of its own (all freed). */
static void body_other(slot_t *s) {
  size_t n = pool_take(s, s->batch, (size_t)O.other_frees);
  for (size_t i = 0; i < n; i++) {
    check_block(&s->batch[i], "before free, from the pool");
    A->free(s->batch[i].p);
    bump_i(&s->live, -(int64_t)s->batch[i].size);
  }
  long lo = O.burst_min / 4 > 0 ? O.burst_min / 4 : 1,
       hi = O.burst_max / 10 > lo ? O.burst_max / 10 : lo;
  burst(s, lo, hi);
}

/* The last ECALL, on the main thread: frees what the pool still holds. */
static void body_teardown(slot_t *s) {
  (void)s;
  pthread_mutex_lock(&g_pool_lock);
  for (size_t i = 0; i < g_pool_n; i++) {
    check_block(&g_pool[i], "before free, teardown");
    A->free(g_pool[i].p);
  }
  g_pool_n = 0;
  atomic_store(&g_pool_bytes, 0);
  pthread_mutex_unlock(&g_pool_lock);
}

/* ------------------------------------------------------------------ *
 * Host threads
 * ------------------------------------------------------------------ */
static pthread_mutex_t g_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cond = PTHREAD_COND_INITIALIZER;
static int g_gate_open;

static void gate_wait(void) {
  pthread_mutex_lock(&g_gate_lock);
  while (!g_gate_open) pthread_cond_wait(&g_gate_cond, &g_gate_lock);
  pthread_mutex_unlock(&g_gate_lock);
}

static void gate_open(void) {
  pthread_mutex_lock(&g_gate_lock);
  g_gate_open = 1;
  pthread_cond_broadcast(&g_gate_cond);
  pthread_mutex_unlock(&g_gate_lock);
}

static void (*body_of(const slot_t *s))(slot_t *) {
  return s->role == ROLE_A ? body_a : s->role == ROLE_WORKER ? body_worker : body_other;
}

static void create_thread(pthread_t *t, void *(*fn)(void *), void *arg) {
  int err;
  for (int tries = 0; (err = pthread_create(t, NULL, fn, arg)) == EAGAIN && tries < 1000; tries++)
    usleep(1000);
  if (err) {
    fprintf(stderr, "enclave_bench: pthread_create: %s\n", strerror(err));
    _exit(2);
  }
}

/* The calling thread's CPU time so far (0 if the clock is missing). */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A host thread made for one ECALL: all its code is the enclave's, up to
 * and including its thread-exit destructors (its CPU time is counted up
 * to its return: not the destructors, nor the making of the thread). */
static void *ecall_thread(void *arg) {
  slot_t *s = arg;
  tls_in_alloc = 1;
  ecall(s, body_of(s));
  atomic_fetch_add(&s->cpu_ns, thread_cpu_ns());
  return NULL;
}

/* pooled: made before init; runs ECALLs (a: one; b: until stopped), then
 * exits (the enclave is over). */
static void *pooled_thread(void *arg) {
  slot_t *s = arg;
  gate_wait();
  long ran = 0;
  do ecall(s, body_of(s));
  while (s->role != ROLE_A && !atomic_load_explicit(&g_stop, memory_order_relaxed) &&
         !ecalls_done(&ran));
  atomic_fetch_add(&s->cpu_ns, thread_cpu_ns()); /* (its wait at the gate took next to none) */
  tls_in_alloc = 1; /* what runs at thread exit now is the allocator's destructors */
  return NULL;
}

/* new-thread, workload b: made before init; starts a new host thread per
 * ECALL and waits for it. */
static void *driver_thread(void *arg) {
  slot_t *s = arg;
  gate_wait();
  long ran = 0;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    pthread_t t;
    create_thread(&t, ecall_thread, s);
    pthread_join(t, NULL);
    if (ecalls_done(&ran)) break;
  }
  return NULL;
}

/* ------------------------------------------------------------------ *
 * Sampler (workload b)
 * ------------------------------------------------------------------ */
typedef struct {
  double t;
  int64_t live;
  size_t footprint, touched;
  uint64_t ecalls, nulls, mallocs;
  size_t pool_bytes;
} sample_t;

static FILE *g_csv;
static int g_stats_ok;
static sample_t g_peak; /* per column maximum */
static size_t g_nsamples;
static _Atomic int g_sampler_stop;

/* The live bytes: the pool's and every thread's, read under g_pool_lock,
 * so that a block moving between a thread and the pool (pool_put,
 * pool_take) counts once; the pool's bytes in *pool_bytes. */
static int64_t live_sum_locked(size_t *pool_bytes) {
  pthread_mutex_lock(&g_pool_lock);
  size_t pool = atomic_load_explicit(&g_pool_bytes, memory_order_relaxed);
  int64_t live = (int64_t)pool;
  for (size_t i = 0; i < g_nslots; i++)
    live += atomic_load_explicit(&g_slots[i].live, memory_order_relaxed);
  pthread_mutex_unlock(&g_pool_lock);
  if (pool_bytes != NULL) *pool_bytes = pool;
  return live;
}

static void take_sample(sample_t *x) {
  x->t = now_s() - g_t0;
  x->ecalls = x->nulls = x->mallocs = 0;
  x->live = live_sum_locked(&x->pool_bytes);
  for (size_t i = 0; i < g_nslots; i++) {
    slot_t *s = &g_slots[i];
    x->ecalls += atomic_load_explicit(&s->ecalls, memory_order_relaxed);
    x->nulls += atomic_load_explicit(&s->nulls, memory_order_relaxed);
    x->mallocs += atomic_load_explicit(&s->mallocs, memory_order_relaxed);
  }
  x->footprint = footprint_now();
  /* the allocator's statistics right after its footprint, before the
   * slow scan of the region, so that both describe about one moment */
  if (g_stats) g_stats_ok = stats_read();
  x->touched = scan_touched() * PAGE;
}

static void record_sample(const sample_t *x) {
  if (g_csv)
    fprintf(g_csv, "%.3f,%" PRId64 ",%lld,%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%zu\n", x->t,
            x->live, x->footprint == SIZE_MAX ? -1LL : (long long)x->footprint, x->touched,
            x->ecalls, x->nulls, x->mallocs, x->pool_bytes);
  if (g_stats && g_stats_ok) {
    /* the sample's time goes first: {"time_ms":N, then the object's fields */
    fprintf(g_stats, "{\"time_ms\":%lld,%s\n", (long long)(x->t * 1000.0), g_stats_line + 1);
  }
  if (x->live > g_peak.live) g_peak.live = x->live;
  if (x->footprint != SIZE_MAX && (g_peak.footprint == SIZE_MAX || x->footprint > g_peak.footprint))
    g_peak.footprint = x->footprint;
  if (x->touched > g_peak.touched) g_peak.touched = x->touched;
  g_nsamples++;
}

/* The peaks from reads of live bytes and footprint alone, every
 * --peak-interval between the samples: live bytes swing with the bursts
 * in flight and the footprint lags them, so maxima over the 0.5-s samples
 * miss more of the live peak than of the footprint's. */
static int64_t g_fine_live;
static size_t g_fine_footprint = SIZE_MAX;
static size_t g_fine_reads;

static void fine_peaks_raise(int64_t live, size_t footprint) {
  if (live > g_fine_live) g_fine_live = live;
  if (footprint != SIZE_MAX && (g_fine_footprint == SIZE_MAX || footprint > g_fine_footprint))
    g_fine_footprint = footprint;
}

static void fine_read(void) {
  int64_t live = live_sum_locked(NULL);
  fine_peaks_raise(live, footprint_now());
  g_fine_reads++;
}

static void *sampler_thread(void *arg) {
  (void)arg;
  gate_wait();
  double next = g_t0;
  while (!atomic_load(&g_sampler_stop)) {
    sample_t x;
    take_sample(&x);
    record_sample(&x);
    next += O.sample_interval;
    for (;;) {
      double wait = next - now_s();
      if (wait <= 0 || atomic_load(&g_sampler_stop)) break;
      if (wait > O.peak_interval) wait = O.peak_interval;
      /* (whole seconds apart: a tv_nsec of a second or more is EINVAL, and
       * --peak-interval 2 read the footprint without a pause) */
      struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
      nanosleep(&ts, NULL);
      fine_read();
    }
  }
  return NULL;
}

/* ------------------------------------------------------------------ *
 * Plugin loading
 * ------------------------------------------------------------------ */
static void load_plugin(void) {
  atomic_store(&g_phase, PH_LOAD);
  tls_in_alloc++;
  void *h = dlopen(O.allocator, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "enclave_bench: cannot load %s: %s\n", O.allocator, dlerror());
    exit(2);
  }
  fixed_allocator_fn fn;
  *(void **)&fn = dlsym(h, FIXED_ALLOCATOR_SYMBOL);
  if (!fn) {
    fprintf(stderr, "enclave_bench: %s has no %s()\n", O.allocator, FIXED_ALLOCATOR_SYMBOL);
    exit(2);
  }
  A = fn();
  tls_in_alloc--;
  if (!A || !A->name || !A->init || !A->malloc || !A->free) {
    fprintf(stderr, "enclave_bench: %s: incomplete fixed_allocator_t\n", O.allocator);
    exit(2);
  }
}

/* Checks that the interposed functions are the ones a plugin binds to. */
static void check_interposition(void) {
  if (dlsym(RTLD_DEFAULT, "mmap") != (void *)mmap ||
      dlsym(RTLD_DEFAULT, "munmap") != (void *)munmap ||
      dlsym(RTLD_DEFAULT, "madvise") != (void *)madvise) {
    fprintf(stderr,
            "enclave_bench: the OS-call counters are not exported (link with -rdynamic): "
            "plugins would bypass them\n");
    exit(2);
  }
}

static const char *nz(const char *s) { return s && *s ? s : "?"; }

/* Spaces and '=' in a value would break "key=value" parsing. */
static void print_token(const char *s) {
  for (; *s; s++) putchar(*s == ' ' || *s == '=' || *s == '\t' ? '_' : *s);
}

static long long ll_or_unknown(size_t v) { return v == SIZE_MAX ? -1LL : (long long)v; }

/* ------------------------------------------------------------------ *
 * main
 * ------------------------------------------------------------------ */
int main(int argc, char **argv) {
  parse_args(argc, argv);
  setvbuf(stdout, NULL, _IOLBF, 0);
  check_interposition();
  if (O.info) {
    load_plugin();
    printf("name=%s\nversion=%s\n", A->name, nz(A->version));
    return 0;
  }

  /* Slots, pool and host threads first: nothing of the harness's own
   * set-up happens after the allocator's init. */
  g_nslots = O.workload == 'a' ? (size_t)O.threads : (size_t)(O.workers + O.others);
  g_slots = aligned_alloc(64, g_nslots * sizeof(slot_t));
  if (!g_slots) return 2;
  memset(g_slots, 0, g_nslots * sizeof(slot_t));
  for (size_t i = 0; i < g_nslots; i++) {
    slot_t *s = &g_slots[i];
    s->index = (int)i;
    s->role = O.workload == 'a' ? ROLE_A : (long)i < O.workers ? ROLE_WORKER : ROLE_OTHER;
    s->rng = splitmix64(O.seed * 0x100000001B3ull + i) | 1;
    if (O.workload == 'b') {
      s->local_cap = (size_t)O.burst_max + 1;
      s->local = calloc(s->local_cap, sizeof(block_t));
      s->batch = calloc((size_t)O.other_frees + 1, sizeof(block_t));
      if (!s->local || !s->batch) return 2;
    }
  }
  if (O.workload == 'b') {
    g_peak.footprint = SIZE_MAX; /* none known yet */
    g_pool_cap = O.pool_bytes / 16 + 1;
    g_pool = calloc(g_pool_cap, sizeof(block_t));
    if (!g_pool) return 2;
    if (O.csv) {
      g_csv = fopen(O.csv, "w");
      if (!g_csv) {
        perror(O.csv);
        return 2;
      }
      fputs("t_s,live_bytes,footprint_bytes,touched_bytes,ecalls,nulls,mallocs,pool_bytes\n",
            g_csv);
    }
  }
  if (O.overlap && pthread_barrier_init(&g_midpoint, NULL, (unsigned)O.threads) != 0) {
    fprintf(stderr, "enclave_bench: pthread_barrier_init failed\n");
    return 2;
  }
  if (sem_init(&g_tcs, 0, (unsigned)O.tcs) != 0) {
    perror("sem_init");
    return 2;
  }
  region_create();
  load_plugin();
  if (O.stats_jsonl && A->stats_json) {
    g_stats = fopen(O.stats_jsonl, "w");
    if (!g_stats) {
      perror(O.stats_jsonl);
      return 2;
    }
  }

  pthread_t sampler;
  int pooled = O.host == HOST_POOLED;
  if (O.workload == 'b') create_thread(&sampler, sampler_thread, NULL);
  if (O.workload == 'b' || pooled)
    for (size_t i = 0; i < g_nslots; i++)
      create_thread(&g_slots[i].thread, pooled ? pooled_thread : driver_thread, &g_slots[i]);

  /* The enclave starts: init on the main thread. */
  atomic_store(&g_phase, PH_INIT);
  tls_in_alloc++;
  int init_rc = A->init((void *)g_lo, (void *)g_hi);
  tls_in_alloc--;
  atomic_store(&g_phase, PH_RUN);
  if (init_rc != 0) {
    fprintf(stderr, "enclave_bench: FAIL: %s init() returned %d\n", A->name, init_rc);
    fflush(stdout);
    _exit(1);
  }
  size_t footprint_init = footprint_now();

  double t0 = now_s(), t1;
  g_t0 = t0;
  if (O.workload == 'a') {
    if (pooled) {
      gate_open();
    } else {
      for (size_t i = 0; i < g_nslots; i++)
        create_thread(&g_slots[i].thread, ecall_thread, &g_slots[i]);
    }
    for (size_t i = 0; i < g_nslots; i++) pthread_join(g_slots[i].thread, NULL);
    t1 = now_s();
    /* what the calls did in all (their trips to the partitions, say) */
    if (g_stats && stats_read())
      fprintf(g_stats, "{\"at\":\"end\",\"threads\":%ld,%s\n", O.threads, g_stats_line + 1);
  } else {
    gate_open();
    double end = t0 + O.duration;
    for (double left; (left = end - now_s()) > 0;) {
      if (atomic_load(&g_threads_done) == g_nslots) break; /* --ecalls: all ran theirs */
      if (O.ecalls != 0 && left > 0.01) left = 0.01;
      struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
      nanosleep(&ts, NULL);
    }
    atomic_store(&g_stop, 1);
    for (size_t i = 0; i < g_nslots; i++) pthread_join(g_slots[i].thread, NULL);
    t1 = now_s();
    atomic_store(&g_sampler_stop, 1);
    pthread_join(sampler, NULL);
    sample_t last;
    take_sample(&last);
    record_sample(&last);
  }
  double elapsed = t1 - t0;

  /* Teardown: the pool's blocks are freed in one last ECALL. */
  slot_t main_slot;
  memset(&main_slot, 0, sizeof main_slot);
  size_t pool_left = g_pool_n;
  if (O.workload == 'b') ecall(&main_slot, body_teardown);
  size_t footprint_end = footprint_now();
  size_t touched = scan_touched() * PAGE;
  uintptr_t first_bad;
  size_t guard_bad = guard_damage(&first_bad);

  uint64_t ecalls = 0, worker_ecalls = 0, worker_mallocs = 0, nulls = 0, mallocs = 0;
  uint64_t worker_cpu_ns = 0, other_cpu_ns = 0;
  int64_t live_left = 0;
  for (size_t i = 0; i < g_nslots; i++) {
    ecalls += g_slots[i].ecalls;
    if (g_slots[i].role == ROLE_WORKER) {
      worker_ecalls += g_slots[i].ecalls;
      worker_mallocs += g_slots[i].mallocs;
      worker_cpu_ns += g_slots[i].cpu_ns;
    } else {
      other_cpu_ns += g_slots[i].cpu_ns;
    }
    nulls += g_slots[i].nulls;
    mallocs += g_slots[i].mallocs;
    live_left += g_slots[i].live;
  }
  live_left += (int64_t)atomic_load(&g_pool_bytes);
  uint64_t violations = atomic_load(&g_violations), usable_errors = atomic_load(&g_usable_errors);
  unsigned long os_in = os_calls(PH_RUN, 1), os_out = os_calls(PH_RUN, 0);
  size_t heap_bytes = g_hi - g_lo;
  /* the allocator's own peak where it keeps one, else the most seen
   * in samples (footprint() read halfway and at the end of each A call) */
  size_t fp_peak = atomic_load(&g_footprint_peak);
  if (!A->footprint || fp_peak == 0) fp_peak = footprint_end;
  if (A->footprint_peak != NULL) {
    tls_in_alloc++;
    size_t exact = A->footprint_peak();
    tls_in_alloc--;
    if (exact != SIZE_MAX) fp_peak = exact;
  }

  /* Verdict. */
  char why[512] = "";
  size_t wl = 0;
#define WHY(...) \
  (wl < sizeof why ? (wl += (size_t)snprintf(why + wl, sizeof why - wl, __VA_ARGS__)) : 0)
  if (violations) WHY("%s%" PRIu64 " pointers outside the region", wl ? "; " : "", violations);
  if (usable_errors) WHY("%s%" PRIu64 " wrong usable sizes", wl ? "; " : "", usable_errors);
  if (guard_bad)
    WHY("%s%zu bytes outside the region changed (first at %p)", wl ? "; " : "", guard_bad,
        (void *)first_bad);
  if (O.max_nulls >= 0 && nulls > (uint64_t)O.max_nulls)
    WHY("%s%" PRIu64 " NULL returns (at most %ld allowed)", wl ? "; " : "", nulls, O.max_nulls);
  if (O.max_os_calls >= 0 && os_in + os_out > (unsigned long)O.max_os_calls)
    WHY("%s%lu OS memory calls after init (at most %ld allowed)", wl ? "; " : "", os_in + os_out,
        O.max_os_calls);
  if (live_left != 0 && violations == 0)
    WHY("%sharness bookkeeping: %" PRId64 " live bytes left", wl ? "; " : "", live_left);
#undef WHY
  int ok = wl == 0;

  /* Human-readable part. */
  const char *host = pooled ? "pooled" : "new-thread";
  if (O.workload == 'a') {
    printf("%s = %.1f ms (threads %ld, host %s, %ld allocations of < %ld bytes each, %" PRIu64
           " NULL)\n",
           A->name, elapsed * 1e3, O.threads, host, O.num_allocations, O.max_allocation_size,
           nulls);
  } else {
    printf("%s, host %s: %.1f s, %" PRIu64 " ECALLs (%.0f/s), %" PRIu64 " mallocs, %" PRIu64
           " NULL\n",
           A->name, host, elapsed, ecalls, (double)ecalls / elapsed, mallocs, nulls);
    if (g_peak.live > 0)
      printf(
          "  peak live %.2f MiB, peak footprint %.2f MiB (%.2fx), peak touched %.2f MiB "
          "(%.2fx), pool left %zu blocks\n",
          (double)g_peak.live / 1048576.0,
          g_peak.footprint == SIZE_MAX ? -1.0 : (double)g_peak.footprint / 1048576.0,
          g_peak.footprint == SIZE_MAX ? 0.0 : (double)g_peak.footprint / (double)g_peak.live,
          (double)g_peak.touched / 1048576.0, (double)g_peak.touched / (double)g_peak.live,
          pool_left);
  }
  printf("  OS memory calls by the allocator: load %lu, init %lu, after init %lu",
         os_calls(PH_LOAD, 1), os_calls(PH_INIT, 1), os_in);
  if (os_out) printf(" (+%lu outside allocator code)", os_out);
  printf("\n");
  if (!ok) fprintf(stderr, "enclave_bench: FAIL: %s\n", why);

  /* Machine-readable: one line. */
  printf("result workload=%c allocator=", O.workload);
  print_token(A->name);
  printf(" host=%s heap_bytes=%zu tcs=%ld threads=%zu elapsed_ms=%.3f ecalls=%" PRIu64
         " ecalls_per_s=%.1f mallocs=%" PRIu64 " nulls=%" PRIu64
         " first_null_s=%.3f"
         " violations=%" PRIu64 " usable_errors=%" PRIu64 " guard_bytes_changed=%zu",
         host, heap_bytes, O.tcs, g_nslots, elapsed * 1e3, ecalls, (double)ecalls / elapsed,
         mallocs, nulls, g_first_null_ns ? (double)(g_first_null_ns - 1) * 1e-9 : -1.0, violations,
         usable_errors, guard_bad);
  printf(" footprint_init=%lld footprint_peak=%lld footprint_end=%lld touched_bytes=%zu",
         ll_or_unknown(footprint_init), ll_or_unknown(fp_peak), ll_or_unknown(footprint_end),
         touched);
  if (O.workload == 'b')
    printf(" worker_ecalls=%" PRIu64 " worker_mallocs=%" PRIu64 " peak_live_bytes=%" PRId64
           " peak_footprint_bytes=%lld peak_touched_bytes=%zu samples=%zu",
           worker_ecalls, worker_mallocs, g_peak.live, ll_or_unknown(g_peak.footprint),
           g_peak.touched, g_nsamples);
  if (O.workload == 'b') {
    fine_peaks_raise(g_peak.live, g_peak.footprint); /* the samples are fine reads too */
    printf(" fine_peak_live_bytes=%" PRId64 " fine_peak_footprint_bytes=%lld fine_reads=%zu",
           g_fine_live, ll_or_unknown(g_fine_footprint), g_fine_reads);
    printf(" worker_cpu_s=%.3f other_cpu_s=%.3f", (double)worker_cpu_ns * 1e-9,
           (double)other_cpu_ns * 1e-9);
  }
  for (int ph = PH_LOAD; ph < PH_N; ph++)
    printf(" os_calls_%s=%lu os_mmap_bytes_%s=%lu", phase_names[ph], os_calls(ph, 1),
           phase_names[ph], atomic_load(&g_os_bytes[ph][1]));
  printf(" os_calls_after_init_outside=%lu", os_out);
  for (int f = 0; f < OS_N; f++)
    printf(" os_after_init_%s=%lu", os_names[f],
           atomic_load(&g_os_calls[PH_RUN][1][f]) + atomic_load(&g_os_calls[PH_RUN][0][f]));
  printf(" status=%s\n", ok ? "ok" : "fail");

  if (g_csv) fclose(g_csv);
  if (g_stats) fclose(g_stats);
  if (O.workload == 'a' && O.csv) {
    FILE *f = fopen(O.csv, "w");
    if (f) {
      fprintf(f,
              "allocator,host,threads,elapsed_ms,nulls,violations,os_calls_after_init,"
              "footprint_peak,footprint_end,touched_bytes,status\n");
      fprintf(f, "%s,%s,%zu,%.3f,%" PRIu64 ",%" PRIu64 ",%lu,%lld,%lld,%zu,%s\n", A->name, host,
              g_nslots, elapsed * 1e3, nulls, violations, os_in + os_out, ll_or_unknown(fp_peak),
              ll_or_unknown(footprint_end), touched, ok ? "ok" : "fail");
      fclose(f);
    }
  }
  fflush(stdout);
  /* No dlclose, no free: the enclave is simply gone (and a plugin's
   * destructors must not run against an unmapped heap). */
  _exit(ok ? 0 : 1);
}
