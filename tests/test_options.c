/* TESS_* options and returning memory to the OS.
 *
 * Options are read once at start-up, so each scenario runs in a child
 * process (this program re-executed with the scenario's environment); the
 * parent checks its exit status and what it printed on stderr.
 *
 * Usage: test_options (all); test_options SCENARIO runs one without its
 * environment (set the TESS_* values of scenarios[] by hand)
 *
 *   decommit-now     TESS_DECOMMIT_DELAY_MS=0: a freed 8 MiB large block
 *                    leaves RSS at once
 *   decommit-delay   TESS_DECOMMIT_DELAY_MS=300: it stays until the delay has
 *                    passed, then goes on the next allocation slow path
 *   decommit-min     TESS_DECOMMIT_MIN=12M: a free 8 MiB span stays resident,
 *                    the 16 MiB span it merges into later does not
 *   committed-count  a freed 2 MiB block merged with its partition's
 *                    untouched end: committed counts its pages, not the
 *                    partition's (it read 32 GiB with 1 MiB resident)
 *   decommit-count   TESS_DECOMMIT_DELAY_MS=0: an 8 MiB block freed there
 *                    adds 8 MiB to the decommitted bytes, not the span's
 *   huge             TESS_HUGE_THRESHOLD=4M: a 6 MiB block is its own mapping,
 *                    unmapped on free, and realloc moves it with mremap
 *   small-reserve    TESS_RESERVE=16M: more memory than the first region holds
 *                    comes from overflow regions, all of it usable and freeable
 *   address-limit    with 40 MiB of address space left (RLIMIT_AS), the first
 *                    reservation halves down to 16 MiB and blocks come
 *   address-share    with 1 GiB of address space left (RLIMIT_AS), the first
 *                    reservation leaves room for a 700 MiB block (it took
 *                    about half of what was left)
 *   bad-options      malformed values are reported in one line each and the
 *                    defaults kept
 *   warn-errno       TESS_DECOMMIT_DELAY_MS=soon with standard error closed:
 *                    the first malloc succeeds and leaves errno as it was
 *                    (the failed write of the report set it to EBADF)
 *   count-suffix     a size suffix on a count or a time in milliseconds
 *                    (TESS_PARTITIONS=8B, TESS_DECOMMIT_DELAY_MS=1K) is
 *                    reported and ignored (both were taken as 8 and 1024)
 *   big-overflow     TESS_RESERVE=16M TESS_HUGE_THRESHOLD=1T: blocks longer
 *                    than half the first region come from overflow regions
 *                    whose partitions hold them (they failed with ENOMEM)
 *   series-reentry   TESS_HEAP_SIZE=64M TESS_STATS_INTERVAL_MS=1: a report
 *                    written to a stream whose writes allocate (as stdio's
 *                    do) while the series is due (it deadlocked)
 *   heap-unreserved  TESS_HEAP_SIZE=1G under a 40 MiB address-space limit:
 *                    every allocation fails with ENOMEM, and one line says
 *                    why (it said nothing)
 *   series-region    TESS_STATS_INTERVAL_MS=50: tess_init_region still
 *                    takes its region (the series' start at load made the
 *                    process OS mode, and it answered EBUSY)
 *   series-fork      TESS_STATS_INTERVAL_MS=20, OS mode: a fork() child
 *                    writes series lines of its own (its sampler thread was
 *                    not copied, and it wrote none)
 *   decommit-locked  TESS_DECOMMIT_DELAY_MS=0, 32 KiB of a freed 1 MiB
 *                    block locked (mlock): the OS refuses to drop the span,
 *                    and calloc of it must still read zero (it was marked
 *                    zero anyway, and calloc returned 1 MiB of 0xff);
 *                    skipped where RLIMIT_MEMLOCK is below 32 KiB
 *   fork-decommit    TESS_DECOMMIT_DELAY_MS=0: 300 fork() children of a
 *                    process whose thread frees big blocks pass the heap
 *                    check (a fork while a decommit round had the
 *                    partition unlocked for its madvise calls left the
 *                    round's spans parked for good in 190-220 of them)
 *   clock-wrap       the allocator's clock (this program's clock_gettime)
 *                    1 min past 2^31 ms: an 8 MiB block freed next to its
 *                    partition's untouched end is decommitted
 *   clock-old-neighbour  TESS_DECOMMIT_MIN=1M: an 8 MiB block freed 25 days
 *                    after its 160 KiB neighbour is decommitted
 *   clock-idle       a slow path 25 days after an 8 MiB free decommits it
 *                    (each of the three stayed: the times were compared by
 *                    sign, and the span looked due 24 days ahead)
 *   cancel-warn      TESS_DECOMMIT_DELAY_MS=soon: a thread with a
 *                    cancellation request pending makes the first malloc,
 *                    which reports the value: the malloc returns and the
 *                    next one works (the report's write() acted on the
 *                    request, and the thread ended there with the
 *                    initialization's lock held: every malloc then spun)
 *   cancel-series    TESS_HEAP_SIZE=64M TESS_STATS_INTERVAL_MS=1: such a
 *                    thread's slow paths write series lines and return;
 *                    a report afterwards does not wait for good (the line's
 *                    open() acted on the request with the output's lock held)
 *   cpus-errno       with every open() refused (seccomp, as where /sys and
 *                    /proc are not mounted) the first malloc leaves errno as
 *                    it was (the count of CPUs left ENOENT)
 *   stats-file-kept  TESS_STATS_INTERVAL_MS=20 TESS_STATS_FILE=...: once
 *                    the environment's strings are moved and overwritten, as
 *                    setproctitle emulations (nginx, PostgreSQL) do, the
 *                    series still goes to the file (the reports opened what
 *                    the old place held: "", and wrote to standard error)
 *   sampler-errno    TESS_STATS_INTERVAL_MS=1000 with thread creation
 *                    refused (seccomp): the first malloc, whose slow path
 *                    cannot start the sampler, leaves errno as it was (it
 *                    left EAGAIN)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pattern.h"
#include "tessalloc.h"

#define MiB ((size_t)1 << 20)

/* How much RSS fell from `before` to `after` (negative if it grew). */
static long fell(size_t before, size_t after) { return (long)before - (long)after; }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *touched(size_t size) {
  void *p = tess_malloc(size);
  REQUIRE(p != NULL, "malloc(%zu) failed", size);
  memset(p, 0xA5, size);
  return p;
}

/* ------------------------------------------------------------ scenarios */

static void decommit_now(void) {
  void *p = touched(8 * MiB);
  size_t before = rss_bytes();
  tess_free(p);
  size_t after = rss_bytes();
  printf("decommit-now: RSS %zu -> %zu KiB\n", before >> 10, after >> 10);
  CHECK(fell(before, after) >= (long)(7 * MiB), "freed 8 MiB, RSS fell by only %ld KiB",
        fell(before, after) / 1024);
}

static void decommit_delay(void) {
  void *p = touched(8 * MiB);
  size_t before = rss_bytes();
  tess_free(p);
  size_t right_after = rss_bytes();
  CHECK(fell(before, right_after) < (long)(2 * MiB), "decommitted before the delay: %zu -> %zu KiB",
        before >> 10, right_after >> 10);
  sleep_ms(450);
  tess_free(tess_malloc(200 * 1024)); /* a large allocation: a slow path */
  size_t later = rss_bytes();
  printf("decommit-delay: RSS %zu -> %zu -> %zu KiB\n", before >> 10, right_after >> 10,
         later >> 10);
  CHECK(fell(before, later) >= (long)(7 * MiB), "after the delay RSS fell by only %ld KiB",
        fell(before, later) / 1024);
}

static void decommit_min(void) {
  char *a = touched(8 * MiB);
  char *b = touched(8 * MiB);
  char *c = touched(8 * MiB);
  /* spans are split off the front of the free space: they are neighbours */
  REQUIRE(b == a + 8 * MiB && c == b + 8 * MiB, "blocks not adjacent: %p %p %p", (void *)a,
          (void *)b, (void *)c);
  size_t start = rss_bytes();
  tess_free(b);
  size_t one = rss_bytes();
  CHECK(fell(start, one) < (long)(2 * MiB),
        "an 8 MiB span below TESS_DECOMMIT_MIN was decommitted");
  tess_free(a);
  size_t two = rss_bytes();
  printf("decommit-min: RSS %zu -> %zu -> %zu KiB\n", start >> 10, one >> 10, two >> 10);
  CHECK(fell(one, two) >= (long)(15 * MiB), "the merged 16 MiB span stayed: RSS fell by %ld KiB",
        fell(one, two) / 1024);
  tess_free(c);
}

static void huge(void) {
  size_t base = rss_bytes();
  char *p = touched(6 * MiB);
  CHECK(tess_usable_size(p) == 6 * MiB, "usable size %zu", tess_usable_size(p));
  char *q = tess_realloc(p, 40 * MiB);
  REQUIRE(q != NULL, "realloc of a huge block failed");
  for (size_t i = 0; i < 6 * MiB; i += 4096) REQUIRE((unsigned char)q[i] == 0xA5, "lost byte");
  memset(q, 0x5A, 40 * MiB);
  size_t peak = rss_bytes();
  tess_free(q);
  size_t after = rss_bytes();
  printf("huge: RSS %zu -> %zu -> %zu KiB\n", base >> 10, peak >> 10, after >> 10);
  CHECK(fell(peak, after) >= (long)(39 * MiB), "a freed huge block stayed mapped");
}

static void small_reserve(void) {
  enum { LARGE = 160, SMALL = 40000 };
  void *large[LARGE];
  void *small[SMALL];
  for (int i = 0; i < LARGE; i++) {
    large[i] = tess_malloc(MiB); /* 160 MiB in all: ten times the first region */
    REQUIRE(large[i] != NULL, "malloc(1 MiB) #%d failed", i);
    pat_fill(large[i], MiB, 7);
  }
  for (int i = 0; i < SMALL; i++) {
    small[i] = tess_malloc((size_t)(i % 700) + 1);
    REQUIRE(small[i] != NULL, "small malloc #%d failed", i);
    pat_fill(small[i], (size_t)(i % 700) + 1, 7);
  }
  for (int i = 0; i < LARGE; i++) {
    CHECK(tess_usable_size(large[i]) >= MiB, "usable size of large block #%d", i);
    CHECK(pat_check(large[i], MiB, 7) == PAT_OK, "large block #%d corrupted", i);
    tess_free(large[i]);
  }
  for (int i = 0; i < SMALL; i++) {
    CHECK(pat_check(small[i], (size_t)(i % 700) + 1, 7) == PAT_OK, "small block #%d corrupted", i);
    tess_free(small[i]);
  }
  printf("small-reserve: 160 MiB of large and %d small blocks through overflow regions\n", SMALL);
}

/* Address space the process has mapped now (VmSize), in bytes. */
static size_t vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  REQUIRE(f != NULL, "/proc/self/status");
  char line[256];
  size_t kib = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "VmSize: %zu kB", &kib) == 1) break;
  }
  fclose(f);
  REQUIRE(kib > 0, "no VmSize in /proc/self/status");
  return kib << 10;
}

/* Under an address-space limit (RLIMIT_AS: `ulimit -v`, a sandbox), the
 * first reservation halves until the OS agrees, down to a region of 16
 * MiB: with 40 MiB of address space left, blocks still come. It stopped
 * at 64 MiB, and no allocation could be made at all. */
/* Address space from now on: `more` bytes beyond what is mapped. */
static void limit_address_space(size_t more) {
  size_t limit = vm_size() + more;
  struct rlimit lim = {limit, limit};
  REQUIRE(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
}

static void address_limit(void) {
  limit_address_space(40 * MiB);
  enum { LARGE = 8, SMALL = 2000 };
  void *large[LARGE], *small[SMALL];
  for (int i = 0; i < LARGE; i++) {
    large[i] = tess_malloc(MiB);
    REQUIRE(large[i] != NULL, "malloc(1 MiB) #%d under the limit", i);
    pat_fill(large[i], MiB, 3);
  }
  for (int i = 0; i < SMALL; i++) {
    small[i] = tess_malloc((size_t)(i % 500) + 1);
    REQUIRE(small[i] != NULL, "small malloc #%d under the limit", i);
  }
  for (int i = 0; i < LARGE; i++) {
    CHECK(pat_check(large[i], MiB, 3) == PAT_OK, "block #%d corrupted", i);
    tess_free(large[i]);
  }
  for (int i = 0; i < SMALL; i++) tess_free(small[i]);
  printf("address-limit: 8 MiB of blocks with 40 MiB of address space left\n");
}

/* Under a limit with room, the first reservation takes an eighth of it,
 * not about half (halved from 64 GiB until the OS agreed): with 1 GiB of
 * address space left, a block of 700 MiB (its own mapping) found no room
 * (a review: 1.7 GB against glibc's 3.8 GB under a 4 GB limit). */
static void address_share(void) {
  limit_address_space(1024 * MiB);
  void *small = tess_malloc(100); /* the first reservation */
  REQUIRE(small != NULL, "malloc(100) under the limit");
  size_t big = 700 * MiB;
  char *p = tess_malloc(big);
  printf("address-share: 1 GiB of address space left: malloc(700 MiB) %s\n",
         p != NULL ? "served" : "failed");
  CHECK(p != NULL, "malloc(700 MiB) with 1 GiB of address space left: NULL");
  if (p != NULL) {
    p[0] = 1;
    p[big - 1] = 2;
  }
  tess_free(p);
  tess_free(small);
}

static void heap_unreserved(void) {
  limit_address_space(40 * MiB);
  for (int i = 0; i < 3; i++) {
    errno = 0;
    void *p = tess_malloc(100);
    CHECK(p == NULL && errno == ENOMEM, "malloc #%d with no heap: %p, errno %d", i, p, errno);
  }
  printf("heap-unreserved: 3 mallocs failed with ENOMEM\n");
}

static void bad_options(void) { tess_free(tess_malloc(100)); /* options were read at start-up */ }

/* The first malloc reads the options and reports the malformed one; with
 * no standard error that write fails, and its errno (EBADF) was left to
 * the malloc's caller, whose call succeeded. */
static void warn_errno(void) {
  int saved_fd = dup(STDERR_FILENO);
  REQUIRE(saved_fd >= 0, "dup");
  close(STDERR_FILENO);
  errno = EDOM;
  void *p = tess_malloc(100);
  int after = errno;
  dup2(saved_fd, STDERR_FILENO);
  close(saved_fd);
  CHECK(p != NULL && after == EDOM, "first malloc with a malformed option, no stderr: %p, "
        "errno %d (was %d)", p, after, EDOM);
  tess_free(p);
}

static void big_overflow(void) {
  size_t before = vm_size();
  static const size_t sizes[] = {16 * MiB - 4096, 16 * MiB - 4096, 40 * MiB, 100 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *p = tess_malloc(sizes[i]);
    REQUIRE(p != NULL, "malloc(%zu KiB) with a 16 MiB first region", sizes[i] >> 10);
    memset(p, 0x3c, sizes[i]);
    tess_free(p);
  }
  void *q = tess_aligned_alloc(16 * MiB, 100);
  CHECK(q != NULL && ((uintptr_t)q & (16 * MiB - 1)) == 0, "aligned_alloc(16 MiB, 100): %p", q);
  tess_free(q);
  size_t grew = vm_size() - before;
  printf("big-overflow: blocks of up to 100 MiB; address space +%zu MiB\n", grew >> 20);
  /* the regions made are kept and reused: about the blocks' size, not
   * several times it */
  CHECK(grew <= 400 * MiB, "address space grew by %zu MiB", grew >> 20);
}

/* A stream whose every write sleeps past the series interval, then
 * allocates on a slow path, where the series line comes due. */
static ssize_t allocating_write(void *cookie, const char *buf, size_t size) {
  (void)cookie;
  (void)buf;
  sleep_ms(2);
  void *p = tess_aligned_alloc(4096, 64 << 10);
  REQUIRE(p != NULL, "aligned_alloc in the stream");
  tess_free(p);
  return (ssize_t)size;
}

static void series_reentry(void) {
  cookie_io_functions_t io = {.write = allocating_write};
  FILE *f = fopencookie(NULL, "w", io);
  REQUIRE(f != NULL, "fopencookie");
  setvbuf(f, NULL, _IONBF, 0); /* every fwrite reaches allocating_write */
  alarm(20);                   /* a deadlock becomes a failure */
  for (int i = 0; i < 5; i++) tess_stats_print(f);
  fclose(f);
  printf("series-reentry: 5 reports written while the series was due\n");
}

static void series_region(void) {
  static char region[8 << 20];
  CHECK(tess_init_region(region, region + sizeof region) == 0, "tess_init_region");
  void *p = tess_malloc(100);
  struct tess_stats s;
  CHECK(tess_stats_get(&s, sizeof s) == 0 && s.fixed, "the process is in fixed mode");
  CHECK((char *)p >= region && (char *)p < region + sizeof region, "a block outside the region");
  tess_free(p);
  printf("series-region: fixed mode with the series on\n");
}

#define SERIES_FILE "test_options_series.jsonl"

/* Allocates blocks of many sizes for ms milliseconds (slow paths too). */
static void allocate_for(int ms) {
  uint64_t end = now_ms() + (uint64_t)ms;
  for (size_t round = 0; now_ms() < end; round++) {
    for (size_t size = 16; size <= 300000; size = size * 3 / 2 + 16) {
      void *p = tess_malloc(size + round % 64);
      REQUIRE(p != NULL, "malloc(%zu)", size);
      tess_free(p);
    }
    sleep_ms(1);
  }
}

/* Lines of the series file `path` written by process pid (0: none). */
static int series_lines_in(const char *path, pid_t pid) {
  FILE *f = fopen(path, "r");
  if (f == NULL && errno == ENOENT) return 0;
  REQUIRE(f != NULL, "open %s", path);
  char want[32], line[32768];
  snprintf(want, sizeof want, "\"pid\":%d,", (int)pid);
  int lines = 0;
  while (fgets(line, sizeof line, f) != NULL) lines += strstr(line, want) != NULL;
  fclose(f);
  return lines;
}

static void series_fork(void) {
  unlink(SERIES_FILE);
  allocate_for(50);
  pid_t child = fork();
  REQUIRE(child >= 0, "fork");
  allocate_for(300);
  if (child == 0) _exit(0);
  int status;
  REQUIRE(waitpid(child, &status, 0) == child && WIFEXITED(status), "the child");
  int parent_lines = series_lines_in(SERIES_FILE, getpid()),
      child_lines = series_lines_in(SERIES_FILE, child);
  printf("series-fork: %d lines from the parent, %d from the child\n", parent_lines,
         child_lines);
  CHECK(parent_lines >= 3 && child_lines >= 3, "series lines: parent %d, child %d",
        parent_lines, child_lines);
  unlink(SERIES_FILE);
}

static void decommit_locked(void) {
  /* mlock of the block's first 32 KiB: within the smallest default
   * RLIMIT_MEMLOCK (64 KiB) and no CAP_IPC_LOCK needed (mlockall is
   * refused unprivileged: the reserved region counts against the limit).
   * madvise fails for a whole range that holds a locked page. */
  unsigned char *p = tess_malloc(MiB);
  REQUIRE(p != NULL, "malloc(1 MiB)");
  memset(p, 0xff, MiB);
  if (mlock(p, 32 << 10) != 0) {
    printf("decommit-locked: skipped, mlock: %s\n", strerror(errno));
    tess_free(p);
    return;
  }
  tess_free(p); /* its decommit round fails: the pages are locked */
  unsigned char *z = tess_calloc(1, MiB);
  REQUIRE(z != NULL, "calloc(1 MiB)");
  size_t nonzero = 0;
  for (size_t i = 0; i < MiB; i++) nonzero += z[i] != 0;
  printf("decommit-locked: calloc %s the freed block, %zu bytes not zero\n",
         z == p ? "reused" : "did not reuse", nonzero);
  CHECK(nonzero == 0, "calloc(1 MiB) has %zu bytes that are not zero", nonzero);
  tess_free(z);
  munlock(p, 32 << 10);
  CHECK_HEAP("after the locked decommit");
}

/* A thread that allocates big blocks, touches them and frees them, so
 * that decommit rounds (madvise, the partition unlocked) go on all the
 * time, until told to stop. */
static void *big_churn(void *arg) {
  _Atomic(bool) *stop = arg;
  while (!atomic_load(stop)) {
    void *blocks[8];
    for (size_t i = 0; i < 8; i++) {
      blocks[i] = tess_malloc((i + 1) << 18); /* 256 KiB to 2 MiB */
      REQUIRE(blocks[i] != NULL, "malloc of %zu KiB", (i + 1) << 8);
      memset(blocks[i], 1, 4096);
    }
    for (size_t i = 0; i < 8; i++) tess_free(blocks[i]);
  }
  return NULL;
}

static void fork_decommit(void) {
  _Atomic(bool) stop = false;
  pthread_t churn;
  REQUIRE(pthread_create(&churn, NULL, big_churn, &stop) == 0, "pthread_create");
  int broken = 0, children = 300;
  for (int i = 0; i < children; i++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) _exit(tess_heap_check() == NULL ? 0 : 1);
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) broken++;
  }
  atomic_store(&stop, true);
  pthread_join(churn, NULL);
  printf("fork-decommit: %d of %d children failed the heap check\n", broken, children);
  CHECK(broken == 0, "%d of %d fork() children failed the heap check", broken, children);
  CHECK_HEAP("after the forks");
}

/* A freed span merges with the untouched pages at its partition's end:
 * only its own pages count as committed, and only they as decommitted.
 * With a flag for "dirty", the merged span was dirty as a whole: the
 * statistics read 32 GiB committed with 1 MiB resident (a review), and
 * each decommit counted the partition's whole untouched end. */
static void stats_of(struct tess_stats *s) {
  REQUIRE(tess_stats_get(s, sizeof *s) == 0, "tess_stats_get");
}

static void committed_count(void) {
  tess_free(touched(2 * MiB));
  struct tess_stats s;
  stats_of(&s);
  printf("committed-count: footprint %llu KiB, committed %llu KiB\n",
         (unsigned long long)s.footprint >> 10, (unsigned long long)s.committed >> 10);
  CHECK(s.committed <= s.footprint + 4 * MiB, "committed %llu KiB, footprint %llu KiB",
        (unsigned long long)s.committed >> 10, (unsigned long long)s.footprint >> 10);
}

static void decommit_count(void) {
  struct tess_stats before, after;
  tess_free(tess_malloc(100)); /* a heap, whose first slab is counted before */
  stats_of(&before);
  tess_free(touched(8 * MiB));
  stats_of(&after);
  uint64_t given = after.decommitted - before.decommitted;
  printf("decommit-count: an 8 MiB block freed, %llu KiB decommitted\n",
         (unsigned long long)given >> 10);
  CHECK(given >= 8 * MiB && given <= 9 * MiB, "%llu KiB decommitted for 8 MiB",
        (unsigned long long)given >> 10);
}

/* The clock tessalloc reads: this program's clock_gettime takes the place
 * of libc's for the statically linked allocator (as test_oscalls' mmap
 * does), shifted by clock_shift_ms (0 but in clock-wrap). */
static uint64_t clock_shift_ms;

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (syscall(SYS_clock_gettime, id, ts) != 0) return -1;
  if (clock_shift_ms != 0) {
    uint64_t ns = (uint64_t)ts->tv_nsec + (clock_shift_ms % 1000) * 1000000u;
    ts->tv_sec += (time_t)(clock_shift_ms / 1000 + ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
  }
  return 0;
}

/* tessalloc's clock is 32-bit milliseconds, which pass 2^31 after 24.8
 * days of uptime (and again every 49.7 days). There, a freed block that
 * merged with its partition's untouched end (never freed: time 0) took
 * the later time "0" (a signed compare across half the range): due at 0
 * + delay, which looked 24 days ahead, and neither it nor anything after
 * it in that partition was decommitted until the clock went round. */
/* tessalloc's clock (32-bit milliseconds) set to read `at` now. */
static void clock_set(uint32_t at) {
  struct timespec ts;
  REQUIRE(syscall(SYS_clock_gettime, CLOCK_MONOTONIC_COARSE, &ts) == 0, "clock_gettime");
  uint32_t real = (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
  clock_shift_ms = (uint32_t)(at - real);
}

#define DAY_MS (24u * 3600u * 1000u)

static void clock_wrap(void) {
  clock_set(((uint32_t)1 << 31) + 60000u); /* 1 min past 2^31 */
  void *p = touched(8 * MiB); /* the first block of a partition */
  size_t before = rss_bytes();
  tess_free(p);
  sleep_ms(50);
  tess_free(tess_malloc(200 * 1024)); /* a slow path: a purge due is done */
  size_t after = rss_bytes();
  printf("clock-wrap: clock 1 min past 2^31 ms, RSS %zu -> %zu KiB\n", before >> 10, after >> 10);
  CHECK(fell(before, after) >= (long)(7 * MiB), "freed 8 MiB, RSS fell by only %ld KiB",
        fell(before, after) / 1024);
  CHECK_HEAP("after the wrapped clock");
}

/* A free span too small to decommit (below TESS_DECOMMIT_MIN, and longer
 * than a heap keeps) freed 25 days before its 8 MiB neighbour: the merged
 * span is as new as the neighbour. The later of the two times was taken
 * by a signed compare, which past 2^31 ms (24.8 days) picked the old one:
 * the span looked due 24 days ahead, and with the partition's next round
 * set there, nothing in it was decommitted meanwhile. */
static void clock_old_neighbour(void) {
  clock_set(60000u);
  char *guard = touched(160 << 10);
  char *small = touched(160 << 10);
  char *big = touched(8 * MiB);
  char *after = touched(160 << 10);
  REQUIRE(small == guard + (160 << 10) && big == small + (160 << 10) && after == big + 8 * MiB,
          "blocks not adjacent: %p %p %p %p", (void *)guard, (void *)small, (void *)big,
          (void *)after);
  tess_free(small); /* dirty, below the minimum: stays */
  clock_set(60000u + 25 * DAY_MS);
  size_t before = rss_bytes();
  tess_free(big);
  sleep_ms(50);
  tess_free(tess_malloc(200 * 1024)); /* a slow path: a purge due is done */
  size_t after_free = rss_bytes();
  printf("clock-old-neighbour: a neighbour freed 25 days before, RSS %zu -> %zu KiB\n",
         before >> 10, after_free >> 10);
  CHECK(fell(before, after_free) >= (long)(7 * MiB), "freed 8 MiB, RSS fell by only %ld KiB",
        fell(before, after_free) / 1024);
  tess_free(guard);
  tess_free(after);
  CHECK_HEAP("after the old neighbour");
}

/* A process idle for 25 days after a free (the decommit waits for its
 * next slow path): the span is overdue, not due 24 days ahead (a signed
 * compare of the times, past 2^31 ms, said it was not due). */
static void clock_idle(void) {
  clock_set(60000u);
  char *guard = touched(160 << 10);
  char *big = touched(8 * MiB);
  char *after = touched(160 << 10);
  size_t before = rss_bytes();
  tess_free(big); /* due in 300 ms */
  clock_set(60000u + 25 * DAY_MS);
  tess_free(tess_malloc(200 * 1024)); /* a slow path: a purge due is done */
  size_t after_idle = rss_bytes();
  printf("clock-idle: a slow path 25 days after the free, RSS %zu -> %zu KiB\n", before >> 10,
         after_idle >> 10);
  CHECK(fell(before, after_idle) >= (long)(7 * MiB), "freed 8 MiB, RSS fell by only %ld KiB",
        fell(before, after_idle) / 1024);
  tess_free(guard);
  tess_free(after);
  CHECK_HEAP("after the idle days");
}

/* A thread whose cancellation request is pending when it allocates (it
 * spins until then: no cancellation point). POSIX lets malloc act on none;
 * the thread returns 1 if its calls returned. */
static atomic_int cancel_go;
static void (*cancelled_work)(void);

static void *cancelled_thread(void *arg) {
  (void)arg;
  while (!atomic_load(&cancel_go)) {
  }
  cancelled_work();
  return (void *)1;
}

static void run_cancelled(void (*work)(void)) {
  cancelled_work = work;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, cancelled_thread, NULL) == 0, "pthread_create");
  REQUIRE(pthread_cancel(t) == 0, "pthread_cancel");
  atomic_store(&cancel_go, 1);
  void *result = NULL;
  REQUIRE(pthread_join(t, &result) == 0, "pthread_join");
  CHECK(result == (void *)1, "the thread's allocations %s",
        result == PTHREAD_CANCELED ? "acted on its cancellation request" : "failed");
}

static void first_malloc(void) {
  void *p = tess_malloc(100);
  REQUIRE(p != NULL, "the first malloc");
  tess_free(p);
}

static void cancel_warn(void) {
  run_cancelled(first_malloc);
  alarm(10); /* a lock the cancelled thread kept: a failure, not a hang */
  void *p = tess_malloc(100);
  CHECK(p != NULL, "malloc after the cancelled thread's");
  tess_free(p);
  alarm(0);
  printf("cancel-warn: the first malloc returned, the next one too\n");
}

/* Slow paths (aligned: never a kept span) for 50 ms, so series lines */
static void slow_paths(void) {
  uint64_t end = now_ms() + 50;
  while (now_ms() < end) {
    void *p = tess_aligned_alloc(4096, 64 << 10);
    REQUIRE(p != NULL, "aligned_alloc(4096, 64 KiB)");
    tess_free(p);
  }
}

static void cancel_series(void) {
  run_cancelled(slow_paths);
  FILE *null = fopen("/dev/null", "w");
  REQUIRE(null != NULL, "/dev/null");
  alarm(10); /* the output's lock kept: a failure, not a hang */
  tess_stats_print(null);
  alarm(0);
  fclose(null);
  printf("cancel-series: the slow paths returned, a report after them too\n");
}

/* From here on, the system calls nrs[] fail with err (a seccomp filter of
 * the native architecture's numbers); false where the kernel refuses it. */
static bool deny_syscalls(const long *nrs, size_t count, int err) {
  struct sock_filter prog[16];
  unsigned n = 0;
  REQUIRE(2 * count + 2 <= sizeof prog / sizeof prog[0], "too many calls");
  prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                           offsetof(struct seccomp_data, nr));
  for (size_t i = 0; i < count; i++) {
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i], 0, 1);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                             SECCOMP_RET_ERRNO | ((uint32_t)err & 0xffff));
  }
  prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0;
}

/* The first malloc with the calls refused succeeds and leaves errno. */
static void first_malloc_errno(const char *name, const long *nrs, size_t count, int err) {
  if (!deny_syscalls(nrs, count, err)) {
    printf("%s: skipped, no seccomp filter: %s\n", name, strerror(errno));
    return;
  }
  errno = EDOM;
  void *p = tess_malloc(100);
  int after = errno;
  CHECK(p != NULL && after == EDOM, "%s: first malloc %p, errno %d (was %d)", name, p, after,
        EDOM);
  tess_free(p);
  printf("%s: the first malloc left errno %d\n", name, after);
}

static void cpus_errno(void) {
  static const long opens[] = {
      SYS_openat,
#ifdef SYS_open
      SYS_open,
#endif
  };
  first_malloc_errno("cpus-errno", opens, sizeof opens / sizeof opens[0], ENOENT);
}

static void sampler_errno(void) {
  static const long clones[] = {
      SYS_clone,
#ifdef SYS_clone3
      SYS_clone3,
#endif
  };
  first_malloc_errno("sampler-errno", clones, sizeof clones / sizeof clones[0], EAGAIN);
}

#define KEPT_FILE "test_options_kept.jsonl"

/* What setproctitle emulations do: the environment's strings copied to the
 * heap, environ pointed at the copies, and the strings' first place
 * overwritten (with the title and zeros). */
static void overwrite_environment(void) {
  extern char **environ;
  for (char **e = environ; *e != NULL; e++) {
    char *copy = strdup(*e);
    REQUIRE(copy != NULL, "strdup");
    memset(*e, 0, strlen(*e));
    *e = copy;
  }
}

static void stats_file_kept(void) {
  unlink(KEPT_FILE);
  tess_free(tess_malloc(100)); /* the options are read, the sampler starts */
  overwrite_environment();
  CHECK(strcmp(getenv("TESS_STATS_FILE"), KEPT_FILE) == 0, "the moved environment");
  sleep_ms(50);
  unlink(KEPT_FILE); /* the lines before the overwrite */
  allocate_for(200);
  int lines = series_lines_in(KEPT_FILE, getpid());
  printf("stats-file-kept: %d series lines in %s after the overwrite\n", lines, KEPT_FILE);
  CHECK(lines >= 3, "%d series lines in %s after the environment was overwritten", lines,
        KEPT_FILE);
  unlink(KEPT_FILE);
}

/* ---------------------------------------------------------------- driver */

typedef struct scenario_s {
  const char *name;
  void (*run)(void);
  const char *env[4];           /* NULL-ended */
  const char *expect_stderr[4]; /* substrings that must appear; NULL-ended */
} scenario_t;

static const scenario_t scenarios[] = {
    {"decommit-now", decommit_now, {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=64K"}, {0}},
    {"decommit-delay",
     decommit_delay,
     {"TESS_DECOMMIT_DELAY_MS=300", "TESS_DECOMMIT_MIN=64K"},
     {0}},
    {"decommit-min", decommit_min, {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=12M"}, {0}},
    {"committed-count", committed_count, {"TESS_DECOMMIT_DELAY_MS=600000"}, {0}},
    {"decommit-count", decommit_count, {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=64K"}, {0}},
    {"huge", huge, {"TESS_HUGE_THRESHOLD=4M"}, {0}},
    {"small-reserve", small_reserve, {"TESS_RESERVE=16M"}, {0}},
    {"address-limit", address_limit, {0}, {0}},
    {"address-share", address_share, {0}, {0}},
    {"bad-options",
     bad_options,
     {"TESS_DECOMMIT_DELAY_MS=soon", "TESS_RESERVE=12Q", "TESS_PARTITIONS=99"},
     {"tessalloc: TESS_DECOMMIT_DELAY_MS: ignored", "tessalloc: TESS_RESERVE: ignored",
      "tessalloc: TESS_PARTITIONS: ignored"}},
    {"warn-errno", warn_errno, {"TESS_DECOMMIT_DELAY_MS=soon"}, {0}},
    {"count-suffix",
     bad_options,
     {"TESS_PARTITIONS=8B", "TESS_DECOMMIT_DELAY_MS=1K", "TESS_STATS_INTERVAL_MS=1M"},
     {"tessalloc: TESS_PARTITIONS: ignored", "tessalloc: TESS_DECOMMIT_DELAY_MS: ignored",
      "tessalloc: TESS_STATS_INTERVAL_MS: ignored"}},
    {"big-overflow", big_overflow, {"TESS_RESERVE=16M", "TESS_HUGE_THRESHOLD=1T"}, {0}},
    {"series-reentry",
     series_reentry,
     {"TESS_HEAP_SIZE=64M", "TESS_STATS_INTERVAL_MS=1", "TESS_STATS_FILE=/dev/null"},
     {0}},
    {"heap-unreserved",
     heap_unreserved,
     {"TESS_HEAP_SIZE=1G"},
     {"tessalloc: TESS_HEAP_SIZE: could not reserve the heap"}},
    {"series-region",
     series_region,
     {"TESS_STATS_INTERVAL_MS=50", "TESS_STATS_FILE=/dev/null"},
     {0}},
    {"series-fork",
     series_fork,
     {"TESS_STATS_INTERVAL_MS=20", "TESS_STATS_FILE=" SERIES_FILE},
     {0}},
    {"decommit-locked",
     decommit_locked,
     {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=64K"},
     {0}},
    {"fork-decommit", fork_decommit, {"TESS_DECOMMIT_DELAY_MS=0"}, {0}},
    {"clock-wrap", clock_wrap, {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=64K"}, {0}},
    {"clock-old-neighbour",
     clock_old_neighbour,
     {"TESS_DECOMMIT_DELAY_MS=0", "TESS_DECOMMIT_MIN=1M"},
     {0}},
    {"clock-idle", clock_idle, {"TESS_DECOMMIT_DELAY_MS=300", "TESS_DECOMMIT_MIN=64K"}, {0}},
    {"cancel-warn",
     cancel_warn,
     {"TESS_DECOMMIT_DELAY_MS=soon"},
     {"tessalloc: TESS_DECOMMIT_DELAY_MS: ignored"}},
    {"cancel-series",
     cancel_series,
     {"TESS_HEAP_SIZE=64M", "TESS_STATS_INTERVAL_MS=1", "TESS_STATS_FILE=/dev/null"},
     {0}},
    {"stats-file-kept",
     stats_file_kept,
     {"TESS_STATS_INTERVAL_MS=20", "TESS_STATS_FILE=" KEPT_FILE},
     {0}},
    {"cpus-errno", cpus_errno, {0}, {0}},
    {"sampler-errno",
     sampler_errno,
     {"TESS_STATS_INTERVAL_MS=1000", "TESS_STATS_FILE=/dev/null"},
     {0}},
};

/* Runs one scenario in a child with its environment; true if it passed. */
static bool run_child(const char *self, const scenario_t *s) {
  int err_pipe[2];
  REQUIRE(pipe(err_pipe) == 0, "pipe");
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    for (const char *const *e = s->env; *e != NULL; e++) putenv((char *)*e);
    execl(self, self, s->name, (char *)NULL);
    _exit(127);
  }
  close(err_pipe[1]);
  char err[8192];
  size_t len = 0;
  ssize_t n;
  while ((n = read(err_pipe[0], err + len, sizeof(err) - 1 - len)) > 0) len += (size_t)n;
  err[len] = '\0';
  close(err_pipe[0]);
  int status;
  waitpid(pid, &status, 0);
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  CHECK(ok, "%s: child failed (status %d); stderr:\n%s", s->name, status, err);
  for (const char *const *want = s->expect_stderr; *want != NULL; want++) {
    bool found = strstr(err, *want) != NULL;
    CHECK(found, "%s: stderr lacks \"%s\"; it was:\n%s", s->name, *want, err);
    ok = ok && found;
  }
  if (s->expect_stderr[0] == NULL && len > 0 && ok) fputs(err, stderr);
  return ok;
}

int main(int argc, char **argv) {
  size_t count = sizeof(scenarios) / sizeof(scenarios[0]);
  if (argc == 2) { /* child: one scenario */
    for (size_t i = 0; i < count; i++) {
      if (strcmp(argv[1], scenarios[i].name) == 0) {
        scenarios[i].run();
        return check_finish("test_options");
      }
    }
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
  }
  for (size_t i = 0; i < count; i++) {
    bool ok = run_child("/proc/self/exe", &scenarios[i]);
    printf("%-15s %s\n", scenarios[i].name, ok ? "ok" : "FAILED");
    fflush(stdout);
  }
  return check_finish("test_options");
}
