/* Statistics output in OS builds (not in libtessalloc-oe.a): the readable
 * table, TESS_STATS at exit, the TESS_STATS_INTERVAL_MS series, and glibc's
 * mallinfo2 / mallinfo / malloc_stats / malloc_info on top of the merged
 * counters.
 *
 * Output never allocates from tessalloc: reports are formatted into static
 * buffers and written with write(2), so they work at exit, from the sampler
 * thread, and with the heap in any state. The series comes from a thread in
 * OS mode; in (emulated) fixed mode, where an enclave has no threads of its
 * own to spare, from the allocation slow path, at most once per interval. */
#include "internal.h"
#include "tessalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One merge and one report at a time: both are static (5 and 16 KiB, too
 * much for the stack of a small thread or a destructor), under
 * output_lock, held until the report is written out. A mutex, not one of
 * the allocator's locks: fork() does not wait for it (a report may be
 * blocked on a full pipe) and the child makes it anew, and the thread that
 * forks does not count it as its own (tessi_fork_holder). */
static pthread_mutex_t output_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tess_stats merged;
static char report[16384];

/* output_lock with cancellation off while it is held: open(), write()
 * and stdio are cancellation points, and a thread cancelled there kept
 * the lock for good (every later report waited, the one at exit too); in
 * fixed mode a series line is written from malloc, which POSIX does not
 * let act on a cancellation request (test_options cancel-series). The
 * result is the state to give back to output_unlock. */
static int output_lock_take(void) {
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  pthread_mutex_lock(&output_lock);
  return cancel;
}

/* The same without waiting: false (and cancellation as it was) when the
 * lock is held. */
static bool output_lock_try(int *cancel) {
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel);
  if (pthread_mutex_trylock(&output_lock) == 0) return true;
  pthread_setcancelstate(*cancel, cancel);
  return false;
}

static void output_unlock(int cancel) {
  pthread_mutex_unlock(&output_lock);
  pthread_setcancelstate(cancel, &cancel);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t start_ms;

/* tessi_stats_series_on until the first slow path starts the series
 * (internal.h) */
#define SERIES_UNSTARTED 2

/* The child has no sampler thread: its first allocation slow path starts
 * one (tessi_stats_series_tick), or its series would stop at fork(). The
 * flag is 0 in OS mode with the series on once a thread of the parent
 * took it to start the sampler (started, starting as fork() came, or
 * failed): in each case the child has none. */
void tessi_stats_output_fork_child(void) {
  pthread_mutex_init(&output_lock, NULL);
  if (tessi_options.stats_interval_ms != 0 && !tessi_primary->is_fixed &&
      atomic_load_explicit(&tessi_stats_series_on, memory_order_relaxed) == 0) {
    atomic_store_explicit(&tessi_stats_series_on, SERIES_UNSTARTED, memory_order_relaxed);
  }
}

static void write_all(int fd, const char *text, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, text, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    len -= (size_t)n;
  }
}

/* Appends text to TESS_STATS_FILE, or writes it to standard error (also
 * when the file cannot be opened, which is said once). output_lock is
 * held. */
static void emit(const char *text, size_t len) {
  int saved = errno;
  int fd = STDERR_FILENO;
  if (tessi_options.stats_file != NULL) {
    fd = open(tessi_options.stats_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    static bool warned;
    if (fd < 0 && !warned) {
      warned = true;
      tessi_warn("TESS_STATS_FILE", "cannot be opened for appending: statistics on stderr");
    }
  }
  write_all(fd >= 0 ? fd : STDERR_FILENO, text, len);
  if (fd >= 0 && fd != STDERR_FILENO) close(fd);
  errno = saved;
}

/* ------------------------------------------------------------ the table */

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

static double fragmentation(uint64_t live, uint64_t slab) {
  return slab == 0 ? 0.0 : 1.0 - (double)live / (double)slab;
}

/* The table into buf (snprintf, which does not allocate for these
 * formats); returns its length. */
static size_t format_table(char *buf, size_t size, const struct tess_stats *s) {
  size_t n = 0;
#define OUT(...)                                                      \
  do {                                                                \
    int k_ = snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__); \
    if (k_ > 0) n += (size_t)k_;                                      \
  } while (0)
  uint64_t slab_live = 0;
  for (unsigned c = 0; c < s->class_count; c++) slab_live += s->classes[c].live_bytes;
  OUT("tessalloc %s statistics (%s mode)\n", tess_version_string() + sizeof "tessalloc " - 1,
      s->fixed ? "fixed" : "OS");
  OUT("  footprint %.2f MiB (peak %.2f) of %.2f MiB %s\n", mib(s->footprint),
      mib(s->peak_footprint), mib(s->region_bytes), s->fixed ? "region" : "reserved");
  if (!s->fixed) {
    OUT("  committed %.2f MiB, decommitted so far %.2f MiB\n", mib(s->committed),
        mib(s->decommitted));
  }
  OUT("  heaps: %llu in use, %llu pooled\n", (unsigned long long)s->heaps_in_use,
      (unsigned long long)s->heaps_pooled);
  OUT("  live %.2f MiB (peak %.2f) in %llu allocs - %llu frees; slabs %.2f MiB, "
      "fragmentation %.1f%%\n",
      mib(s->live_bytes), mib(s->peak_live_bytes), (unsigned long long)s->allocs,
      (unsigned long long)s->frees, mib(s->slab_bytes),
      100.0 * fragmentation(slab_live, s->slab_bytes));
  OUT("  free in slabs: %.2f MiB in current slabs, %.2f in other slabs of heaps, %.2f in "
      "orphans, %.2f freed by other threads and not yet collected; kept for reuse: empty "
      "slabs %.2f MiB, large spans %.2f MiB; spans freed while their partition was locked "
      "%.2f MiB\n",
      mib(s->slab_free_current), mib(s->slab_free_held), mib(s->slab_free_orphaned),
      mib(s->slab_free_pending), mib(s->empty_slab_bytes), mib(s->kept_span_bytes),
      mib(s->deferred_span_bytes));
  OUT("  large: %llu live, %.2f MiB (%llu allocs); huge: %llu live, %.2f MiB (%llu allocs)\n",
      (unsigned long long)s->large.live, mib(s->large.live_bytes),
      (unsigned long long)s->large.allocs, (unsigned long long)s->huge.live,
      mib(s->huge.live_bytes), (unsigned long long)s->huge.allocs);
  OUT("  large allocations from a partition, not a heap's span cache: %llu",
      (unsigned long long)s->span_trips);
  if (s->fixed) {
    OUT(" (%llu with a narrow budget, %llu of those found it locked; %llu widenings)",
        (unsigned long long)s->span_trips_narrow, (unsigned long long)s->span_trips_busy,
        (unsigned long long)s->span_widenings);
  }
  OUT("\n");
  OUT("  %8s %12s %12s %10s %11s %11s %7s %11s %6s\n", "block", "allocs", "frees", "live",
      "live KiB", "peak KiB", "slabs", "slab KiB", "frag");
  for (unsigned c = 0; c < s->class_count; c++) {
    const struct tess_class_stats *cs = &s->classes[c];
    if (cs->allocs == 0 && cs->slabs == 0) continue;
    OUT("  %8llu %12llu %12llu %10llu %11.1f %11.1f %7llu %11.1f %5.1f%%\n",
        (unsigned long long)cs->block_size, (unsigned long long)cs->allocs,
        (unsigned long long)cs->frees, (unsigned long long)cs->live_blocks,
        (double)cs->live_bytes / 1024.0, (double)cs->peak_live_bytes / 1024.0,
        (unsigned long long)cs->slabs, (double)cs->slab_bytes / 1024.0,
        100.0 * fragmentation(cs->live_bytes, cs->slab_bytes));
  }
#undef OUT
  return TESS_MIN(n, size > 0 ? size - 1 : 0);
}

/* The statistics merged now, as one JSON line (time_ms < 0: none) or the
 * table, into report; 0 when the line did not fit. The caller holds
 * output_lock. */
static size_t format_locked(bool json, int64_t time_ms) {
  tessi_stats_merge(&merged);
  if (!json) return format_table(report, sizeof report, &merged);
  /* the pid: with a preloaded library every process of a program writes
   * to the same TESS_STATS_FILE */
  size_t len = tessi_stats_json(report, sizeof report - 1, &merged, time_ms, getpid());
  if (len >= sizeof report - 1) return 0;
  report[len++] = '\n';
  return len;
}

/* Writes the statistics to TESS_STATS_FILE or standard error. */
static void emit_stats(bool json, int64_t time_ms) {
  int cancel = output_lock_take();
  emit(report, format_locked(json, time_ms));
  output_unlock(cancel);
}

void tess_stats_print(FILE *out) {
  (void)tessi_ensure_init();
  int cancel = output_lock_take();
  fwrite(report, 1, format_locked(false, -1), out != NULL ? out : stderr);
  output_unlock(cancel);
}

/* ------------------------------------------------------ exit and series */

__attribute__((destructor)) static void report_at_exit(void) {
  if (!atomic_load_explicit(&tessi_ready, memory_order_acquire)) return;
  if (tessi_options.stats_at_exit != 0) emit_stats(tessi_options.stats_at_exit == 2, -1);
}

static _Atomic(uint64_t) next_line_ms;

static void *sampler(void *arg) {
  (void)arg;
  for (;;) {
    emit_stats(true, (int64_t)(now_ms() - start_ms));
    uint32_t ms = tessi_options.stats_interval_ms;
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return NULL;
}

static void start_sampler(void) {
  int saved = errno; /* a failed start's (EAGAIN) is not the malloc's caller's */
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, sampler, NULL) != 0) {
    tessi_warn("TESS_STATS_INTERVAL_MS", "ignored: the sampler thread could not start");
  }
  pthread_attr_destroy(&attr);
  errno = saved;
}

void tessi_stats_series_tick(void) {
  int on = atomic_load_explicit(&tessi_stats_series_on, memory_order_relaxed);
  if (on == SERIES_UNSTARTED) {
    /* the first slow path since series_start or fork(): the mode is known
     * now. Not from fork()'s handlers, which hold every lock. */
    if (tessi_fork_holder) return;
    bool is_on = tessi_options.stats_interval_ms != 0;
    bool in_thread = is_on && !tessi_primary->is_fixed;
    if (!atomic_compare_exchange_strong_explicit(&tessi_stats_series_on, &on,
                                                 is_on && !in_thread ? 1 : 0,
                                                 memory_order_relaxed, memory_order_relaxed) ||
        !is_on) {
      return;
    }
    if (in_thread) {
      start_sampler();
      return;
    }
  }
  uint64_t now = now_ms();
  uint64_t due = atomic_load_explicit(&next_line_ms, memory_order_relaxed);
  if (now < due || !atomic_compare_exchange_strong_explicit(
                       &next_line_ms, &due, now + tessi_options.stats_interval_ms,
                       memory_order_relaxed, memory_order_relaxed)) {
    return;
  }
  /* the line is skipped while a report is being written: malloc_info and
   * tess_stats_print write theirs with stdio under output_lock, and stdio
   * may allocate, which brings this thread back here */
  int cancel;
  if (!output_lock_try(&cancel)) return;
  emit(report, format_locked(true, (int64_t)(now - start_ms)));
  output_unlock(cancel);
}

/* Runs when the library is loaded (or the program starts, when linked
 * statically). Init stays lazy: made here, it would be OS mode, and a
 * program linked with libtessalloc.a could no longer call
 * tess_init_region (EBUSY; pthread_create alone allocates). The first
 * allocation slow path, which knows the mode, starts the sampler (OS
 * mode) or the slow path's series (fixed). */
__attribute__((constructor)) static void series_start(void) {
  start_ms = now_ms();
  if (tessi_plat_getenv("TESS_STATS_INTERVAL_MS") == NULL) return;
  atomic_store_explicit(&tessi_stats_series_on, SERIES_UNSTARTED, memory_order_relaxed);
}

/* ------------------------------------------------- glibc's interfaces */
#if TESS_OVERRIDE

static size_t clamp_int(uint64_t v) { return v > INT_MAX ? INT_MAX : v; }

/* Free blocks in slabs: what the slab bytes could still hold. */
static uint64_t slab_free_blocks(const struct tess_stats *s) {
  uint64_t blocks = 0;
  for (unsigned c = 0; c < s->class_count; c++) {
    const struct tess_class_stats *cs = &s->classes[c];
    if (cs->block_size == 0) continue;
    uint64_t room = cs->slab_bytes / cs->block_size;
    blocks += room > cs->live_blocks ? room - cs->live_blocks : 0;
  }
  return blocks;
}

__attribute__((visibility("default"))) struct mallinfo2 mallinfo2(void) {
  (void)tessi_ensure_init();
  pthread_mutex_lock(&output_lock);
  tessi_stats_merge(&merged);
  const struct tess_stats *s = &merged;
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  uint64_t in_use = s->live_bytes - s->huge.live_bytes;
  mi.arena = s->footprint;
  mi.ordblks = slab_free_blocks(s);
  mi.hblks = s->huge.live;
  mi.hblkhd = s->huge.live_bytes;
  mi.usmblks = s->peak_footprint;
  mi.uordblks = in_use;
  mi.fordblks = s->footprint > in_use ? s->footprint - in_use : 0;
  pthread_mutex_unlock(&output_lock);
  return mi;
}

__attribute__((visibility("default"))) struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = (int)clamp_int(m2.arena);
  mi.ordblks = (int)clamp_int(m2.ordblks);
  mi.hblks = (int)clamp_int(m2.hblks);
  mi.hblkhd = (int)clamp_int(m2.hblkhd);
  mi.usmblks = (int)clamp_int(m2.usmblks);
  mi.uordblks = (int)clamp_int(m2.uordblks);
  mi.fordblks = (int)clamp_int(m2.fordblks);
  return mi;
}

/* glibc's layout: one arena, then the totals, on standard error. */
__attribute__((visibility("default"))) void malloc_stats(void) {
  char line[1024];
  (void)tessi_ensure_init();
  pthread_mutex_lock(&output_lock);
  tessi_stats_merge(&merged);
  const struct tess_stats *s = &merged;
  uint64_t in_use = s->live_bytes - s->huge.live_bytes;
  /* glibc's "max mmap" lines: the most blocks with mappings of their own,
   * and bytes of them, live at once */
  size_t huge_peak, huge_peak_bytes;
  tessi_huge_peaks(&huge_peak, &huge_peak_bytes);
  int n = snprintf(line, sizeof line,
                   "Arena 0:\nsystem bytes     = %10llu\nin use bytes     = %10llu\n"
                   "Total (incl. mmap):\nsystem bytes     = %10llu\nin use bytes     = %10llu\n"
                   "max mmap regions = %10llu\nmax mmap bytes   = %10llu\n",
                   (unsigned long long)s->footprint, (unsigned long long)in_use,
                   (unsigned long long)(s->footprint + s->huge.live_bytes),
                   (unsigned long long)s->live_bytes, (unsigned long long)huge_peak,
                   (unsigned long long)huge_peak_bytes);
  pthread_mutex_unlock(&output_lock);
  if (n > 0) write_all(STDERR_FILENO, line, TESS_MIN((size_t)n, sizeof line - 1));
}

/* glibc's XML shape: <malloc version="1"><heap nr="0"> with the free
 * blocks by size, the totals and the system figures; then the totals of
 * all heaps (here: one). Options other than 0 are refused as glibc does:
 * EINVAL returned, errno untouched (it was -1 with errno set: a review). */
__attribute__((visibility("default"))) int malloc_info(int options, FILE *out) {
  if (options != 0 || out == NULL) return EINVAL;
  (void)tessi_ensure_init();
  int cancel = output_lock_take();
  tessi_stats_merge(&merged);
  const struct tess_stats *s = &merged; /* under output_lock to the end */
  uint64_t free_blocks = 0, free_bytes = 0, from = 1;
  fputs("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", out);
  for (unsigned c = 0; c < s->class_count; c++) {
    const struct tess_class_stats *cs = &s->classes[c];
    uint64_t room = cs->block_size ? cs->slab_bytes / cs->block_size : 0;
    uint64_t count = room > cs->live_blocks ? room - cs->live_blocks : 0;
    if (count != 0) {
      fprintf(out, "<size from=\"%llu\" to=\"%llu\" total=\"%llu\" count=\"%llu\"/>\n",
              (unsigned long long)from, (unsigned long long)cs->block_size,
              (unsigned long long)(count * cs->block_size), (unsigned long long)count);
    }
    free_blocks += count;
    free_bytes += count * cs->block_size;
    from = cs->block_size + 1;
  }
  uint64_t system = s->footprint;
  fprintf(out,
          "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
          "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
          "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n"
          "</heap>\n",
          (unsigned long long)free_blocks, (unsigned long long)free_bytes,
          (unsigned long long)system, (unsigned long long)s->peak_footprint,
          (unsigned long long)s->region_bytes, (unsigned long long)system);
  fprintf(out,
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
          "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
          "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
          "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n"
          "</malloc>\n",
          (unsigned long long)free_blocks, (unsigned long long)free_bytes,
          (unsigned long long)s->huge.live, (unsigned long long)s->huge.live_bytes,
          (unsigned long long)(system + s->huge.live_bytes), (unsigned long long)s->peak_footprint,
          (unsigned long long)s->region_bytes, (unsigned long long)system);
  output_unlock(cancel);
  return 0;
}

#endif /* TESS_OVERRIDE */
