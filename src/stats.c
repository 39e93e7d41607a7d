/* Statistics: merging the per-heap counters, and the JSON form.
 *
 * Each heap counts what its thread does (types.h, tess_heap_stats_t);
 * threads without a heap count in tessi_stats_shared. A read walks the list
 * of every heap ever made and adds up, so nothing on the fast paths is
 * shared. Slab frees are not counted at all: the read also walks the
 * slabs (check.c), whose states count the blocks out, and frees = allocs -
 * live. Peaks cannot be summed from per-thread counters, so the merge
 * itself keeps them: every read, and every time the footprint has grown by
 * 1/64 since the last merge (allocation slow path), updates the peak of
 * each class's live bytes. Plain C and no libc beyond memset: this file is
 * in libtessalloc-oe.a. See docs/mechanisms/stats.md. */
#include "internal.h"
#include "tessalloc.h"

#include <errno.h>
#include <string.h>

_Static_assert(TESS_CLASSES <= TESS_STATS_MAX_CLASSES, "public stats struct too small");

static tess_lock_t peak_lock;
/* One merged struct for the readers that want a part of it or its JSON:
 * 5.4 KiB, kept off their callers' stacks (an enclave's threads may have
 * a few pages of stack); one reader at a time, under read_lock, which is
 * taken before peak_lock */
static struct tess_stats read_stats;
static tess_lock_t read_lock;
static uint64_t class_peak[TESS_CLASSES]; /* under peak_lock */
static uint64_t total_peak;
/* merge when the peak passes it; read on every allocation slow path, so on
 * a line of its own */
_Alignas(64) _Atomic(size_t) tessi_stats_next_sample;
_Atomic(int) tessi_stats_series_on;

static uint64_t load(const uint64_t *counter) { return __atomic_load_n(counter, __ATOMIC_RELAXED); }

static uint64_t difference(uint64_t in, uint64_t out) { return in > out ? in - out : 0; }

typedef struct totals_s {
  uint64_t allocs[TESS_CLASSES], made[TESS_CLASSES], done[TESS_CLASSES];
  uint64_t pending_in[TESS_CLASSES], pending_out[TESS_CLASSES];
  tess_slab_census_t census; /* what the slab states count */
  uint64_t span[8];           /* large_allocs .. huge_bytes_out, in struct order */
  uint64_t requested_in, requested_out;
  uint64_t trips[4]; /* span_trips .. span_widenings, in struct order */
  uint64_t heaps;
  /* one heap's, for add_allocs */
  uint64_t lent[TESS_CLASSES], base[TESS_CLASSES], counts[TESS_CLASSES];
  uint8_t lender[TESS_CLASSES];
} totals_t;

/* A read adds up in two passes: first what counts slabs and bytes in,
 * then (pass_out) what counts them out. One event's in and out may be
 * counted in two heaps' counters (or in tessi_stats_shared's): a slab made
 * by a heap and emptied as an orphan by a thread without one, a block
 * freed by another thread. Read heap by heap, a read that lost its CPU
 * between the heap that counted the out and the one that counted the in
 * counted everything made and undone meanwhile as live (test_fixed
 * stats-slabs: up to 280 MB of slabs in 16 MiB). With every out read
 * after every in, an out seen has its in seen, so a difference never
 * counts more than was live between the passes. (The pending frees,
 * subtracted from what the walk finds, are read before it, as they were:
 * docs/mechanisms/stats.md.) */
static void pass_in(totals_t *t, const tess_heap_stats_t *s) {
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    t->pending_in[c] += load(&s->pending_in[c]);
    t->pending_out[c] += load(&s->pending_out[c]);
    t->made[c] += load(&s->slabs_made[c]);
  }
  const uint64_t *span = &s->large_allocs;
  for (unsigned i = 0; i < 8; i++) t->span[i] += load(&span[i]);
  t->requested_in += load(&s->requested_in);
  const uint64_t *trips = &s->span_trips;
  for (unsigned i = 0; i < 4; i++) t->trips[i] += load(&trips[i]);
}

static void pass_out(totals_t *t, const tess_heap_stats_t *s) {
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    t->done[c] += load(&s->slabs_done[c]);
  }
  t->requested_out += load(&s->requested_out);
}

/* One heap's allocations by class, what its borrowing classes counted so
 * far moved to their lenders' (types.h). Its thread moves counts from a
 * borrower's class (lent) to its lender's as a borrowing ends, and an
 * ongoing borrowing's count is the borrower's fast-path count less its
 * base: so lent and the bases are read first, the counts after them, once
 * (the borrowing's share came from a second read of the counts, and a
 * class whose count moved on between counted below zero: 2^64 - 1). A
 * borrowing that ends or begins as this reads may still leave a class a
 * few blocks off, never below zero. */
static void add_allocs(totals_t *t, const tess_heap_stats_t *s, const tess_heap_t *h) {
  uint64_t *lent = t->lent, *base = t->base, *counts = t->counts;
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    lent[c] = __atomic_load_n(&s->lent[c], __ATOMIC_ACQUIRE);
    t->lender[c] = h != NULL ? __atomic_load_n(&h->borrow[c], __ATOMIC_ACQUIRE) : 0;
    base[c] = h != NULL ? __atomic_load_n(&h->borrow_base[c], __ATOMIC_ACQUIRE) : 0;
    counts[c] = load(&s->allocs[c]);
  }
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    /* its direct[] slots' counts (sizes up to TESS_SMALL_MAX), after the
     * loads above; what its fast path counts is those, or allocs[c]
     * (tessi_fast_allocs, which would read the counts a second time) */
    const tess_class_info_t *info = &tessi_classes[c];
    uint64_t slots = 0;
    for (unsigned slot = info->first_slot; slot < info->first_slot + info->slot_count; slot++) {
      slots += load(&s->slot_allocs[slot]);
    }
    uint64_t fast = info->slot_count != 0 ? slots : counts[c];
    uint64_t own = difference(counts[c] + slots, lent[c]);
    unsigned lender = t->lender[c];
    if (lender != 0) {
      uint64_t moved = TESS_MIN(difference(fast, base[c]), own);
      own -= moved;
      t->allocs[lender - 1] += moved;
    }
    t->allocs[c] += own;
  }
}

static void fill_span(struct tess_span_stats *out, const uint64_t *span) {
  out->allocs = span[0];
  out->frees = span[1];
  out->live = difference(span[0], span[1]);
  out->live_bytes = difference(span[2], span[3]);
}

/* Adds up every heap's counters into s (when not NULL: a read, which
 * walks the slabs with their partitions locked; NULL: an automatic
 * sample, which walks them without) and updates the peaks. Holds
 * peak_lock. */
static void merge_counters_locked(struct tess_stats *s) {
  bool is_read = s != NULL;
  static totals_t t; /* too large for a small thread's stack; under peak_lock */
  static struct tess_stats scratch;
  if (s == NULL) s = &scratch;
  memset(&t, 0, sizeof t);
  pass_in(&t, &tessi_stats_shared);
  add_allocs(&t, &tessi_stats_shared, NULL);
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire); h != NULL;
       h = h->next_made) {
    pass_in(&t, &h->stats);
    add_allocs(&t, &h->stats, h);
    t.heaps += !h->is_shared; /* no thread's */
  }
  /* every out after every in (above); the list read again: a heap made
   * since may have counted the out of an in counted above */
  atomic_thread_fence(memory_order_acquire);
  pass_out(&t, &tessi_stats_shared);
  for (tess_heap_t *h = atomic_load_explicit(&tessi_heaps_made, memory_order_acquire); h != NULL;
       h = h->next_made) {
    pass_out(&t, &h->stats);
  }
  tessi_slab_census(&t.census, is_read);
  s->class_count = TESS_CLASSES;
  s->fixed = tessi_primary->is_fixed;
  s->live_bytes = s->slab_bytes = s->allocs = s->frees = s->slab_free_pending = 0;
  for (unsigned c = 0; c < TESS_CLASSES; c++) {
    struct tess_class_stats *cs = &s->classes[c];
    const tess_class_info_t *info = &tessi_classes[c];
    cs->block_size = info->block_size;
    cs->slab_pages = info->slab_pages;
    cs->allocs = t.allocs[c];
    /* live: what the slabs count out, less what waits on remote lists */
    uint64_t pending = difference(t.pending_in[c], t.pending_out[c]);
    cs->live_blocks = TESS_MIN(difference(t.census.out[c], pending), t.allocs[c]);
    s->slab_free_pending += (t.census.out[c] - cs->live_blocks) * info->block_size;
    cs->frees = t.allocs[c] - cs->live_blocks;
    cs->live_bytes = cs->live_blocks * info->block_size;
    cs->slabs = difference(t.made[c], t.done[c]);
    cs->slab_bytes = (cs->slabs * info->slab_pages) << TESS_PAGE_SHIFT;
    if (cs->live_bytes > class_peak[c]) class_peak[c] = cs->live_bytes;
    cs->peak_live_bytes = class_peak[c];
    s->allocs += cs->allocs;
    s->frees += cs->frees;
    s->live_bytes += cs->live_bytes;
    s->slab_bytes += cs->slab_bytes;
    s->orphaned_slabs[c] = t.census.orphaned[c];
  }
  s->slab_free_current = t.census.free_bytes[TESS_HOLDER_CURRENT];
  s->slab_free_held = t.census.free_bytes[TESS_HOLDER_HEAP];
  s->slab_free_orphaned = t.census.free_bytes[TESS_HOLDER_ORPHANS];
  s->empty_slab_bytes = t.census.empty_bytes;
  s->kept_span_bytes = t.census.kept_bytes;
  fill_span(&s->large, &t.span[0]);
  /* live large blocks: as the walk found them, as for slabs. A block's
   * allocation and free may be counted in different heaps' counters, read
   * apart: a read that lost its CPU between them counted every block made
   * and freed meanwhile as live (53 GB of a 16 MiB region: test_oe) */
  s->large.live = TESS_MIN(t.census.large_blocks, s->large.allocs);
  s->large.frees = s->large.allocs - s->large.live;
  s->large.live_bytes = t.census.large_bytes;
  fill_span(&s->huge, &t.span[4]);
  /* live huge blocks: as the table holds them, for the same reason */
  size_t huge_live, huge_bytes;
  tessi_huge_live(&huge_live, &huge_bytes);
  s->huge.live = TESS_MIN((uint64_t)huge_live, s->huge.allocs);
  s->huge.frees = s->huge.allocs - s->huge.live;
  s->huge.live_bytes = huge_bytes;
  s->allocs += s->large.allocs + s->huge.allocs;
  s->frees += s->large.frees + s->huge.frees;
  s->live_bytes += s->large.live_bytes + s->huge.live_bytes;
  if (s->live_bytes > total_peak) total_peak = s->live_bytes;
  s->peak_live_bytes = total_peak;
  s->heaps_in_use = t.heaps; /* less the pooled ones, below */
  s->requested_live_bytes = difference(t.requested_in, t.requested_out);
  s->span_trips = t.trips[0];
  s->span_trips_narrow = t.trips[1];
  s->span_trips_busy = t.trips[2];
  s->span_widenings = t.trips[3];
}

void tessi_stats_merge(struct tess_stats *s) {
  memset(s, 0, sizeof *s);
  s->version = TESS_STATS_VERSION;
  s->size = (uint32_t)sizeof *s;
  if (!atomic_load_explicit(&tessi_ready, memory_order_acquire)) return;
  /* the footprint first, as the program left it: the walk below locks
   * every partition, and while it waits for them and walks, frees that
   * find one locked are deferred and allocations go elsewhere. Read
   * during or after the walk, workload B's mean footprint over a run was
   * 3 % below to 11 % above the harness's read just before the
   * statistics; read first, the same. */
  size_t peak;
  s->footprint = tessi_footprint(&peak);
  s->peak_footprint = peak;
  s->deferred_span_bytes = tessi_span_deferred_bytes();
  tessi_lock(&peak_lock);
  merge_counters_locked(s);
  tessi_unlock(&peak_lock);

  size_t pooled = tessi_heap_pool_length();
  s->heaps_pooled = pooled;
  s->heaps_in_use = difference(s->heaps_in_use, pooled);
  for (tess_region_t *r = tessi_region_first(); r != NULL; r = tessi_region_next(r)) {
    s->region_bytes += r->size;
  }
  if (!s->fixed) {
    size_t dirty, decommitted;
    tessi_span_os_counts(&dirty, &decommitted);
    s->committed = s->footprint + dirty;
    s->decommitted = decommitted;
  }
}

/* read_lock before peak_lock, as the readers take them */
void tessi_stats_fork(tess_fork_phase_t phase) {
  if (phase == TESS_FORK_PREPARE) {
    tessi_lock_for_fork(&read_lock, phase);
    tessi_lock_for_fork(&peak_lock, phase);
  } else {
    tessi_lock_for_fork(&peak_lock, phase);
    tessi_lock_for_fork(&read_lock, phase);
  }
}

uint64_t tessi_stats_live_bytes(void) {
  tessi_lock(&read_lock);
  tessi_stats_merge(&read_stats);
  uint64_t live = read_stats.live_bytes;
  tessi_unlock(&read_lock);
  return live;
}

void tessi_stats_sample(size_t peak, size_t next) {
  /* one thread merges, the others go on; never waits */
  if (!atomic_compare_exchange_strong_explicit(&tessi_stats_next_sample, &next,
                                               peak + peak / 64 + TESS_PAGE_SIZE,
                                               memory_order_relaxed, memory_order_relaxed) ||
      !tessi_trylock(&peak_lock)) {
    return;
  }
  merge_counters_locked(NULL);
  tessi_unlock(&peak_lock);
}

size_t tess_footprint(size_t *peak) {
  if (!atomic_load_explicit(&tessi_ready, memory_order_acquire)) {
    if (peak != NULL) *peak = 0;
    return 0;
  }
  return tessi_footprint(peak);
}

/* A caller's struct shorter than ours (an older header): copied from the
 * shared one as far as it goes. */
static void stats_get_prefix(struct tess_stats *out, size_t struct_size) {
  tessi_lock(&read_lock);
  tessi_stats_merge(&read_stats);
  read_stats.size = (uint32_t)struct_size;
  /* a prefix that ends inside classes[] counts only the entries it holds */
  size_t whole =
      (struct_size - offsetof(struct tess_stats, classes)) / sizeof(struct tess_class_stats);
  if (read_stats.class_count > whole) read_stats.class_count = (uint32_t)whole;
  memcpy(out, &read_stats, struct_size);
  tessi_unlock(&read_lock);
}

int tess_stats_get(struct tess_stats *out, size_t struct_size) {
  if (out == NULL || struct_size < offsetof(struct tess_stats, classes)) return EINVAL;
  if (tessi_in_visit) return EDEADLK; /* the walk's locks are held */
  (void)tessi_ensure_init();
  /* straight into the caller's struct (no copy of it on the stack) */
  if (struct_size >= sizeof(struct tess_stats))
    tessi_stats_merge(out);
  else
    stats_get_prefix(out, struct_size);
  return 0;
}

/* ------------------------------------------------------------------ JSON */

typedef struct writer_s {
  char *buf;
  size_t size; /* of buf */
  size_t len;  /* of the whole text, written or not */
} writer_t;

static void put(writer_t *w, const char *text) {
  for (; *text != '\0'; text++, w->len++) {
    if (w->len + 1 < w->size) w->buf[w->len] = *text;
  }
}

static void put_u64(writer_t *w, uint64_t v) {
  char digits[21];
  size_t i = sizeof digits - 1;
  digits[i] = '\0';
  do {
    digits[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  put(w, &digits[i]);
}

static void field(writer_t *w, const char *name, uint64_t v) {
  put(w, ",\"");
  put(w, name);
  put(w, "\":");
  put_u64(w, v);
}

/* 1 - live/slab with four decimals (0 when there are no slab bytes) */
static void put_fragmentation(writer_t *w, uint64_t live, uint64_t slab) {
  uint64_t free = difference(slab, live);
  uint64_t ten_thousandths = slab == 0 ? 0 : (free * 10000 + slab / 2) / slab;
  put(w, ",\"fragmentation\":");
  put_u64(w, ten_thousandths / 10000);
  put(w, ".");
  char frac[5] = {(char)('0' + ten_thousandths / 1000 % 10),
                  (char)('0' + ten_thousandths / 100 % 10), (char)('0' + ten_thousandths / 10 % 10),
                  (char)('0' + ten_thousandths % 10), '\0'};
  put(w, frac);
}

/* ,"name":{"keys[0]":values[0],...} */
static void put_object(writer_t *w, const char *name, const char *const keys[4],
                       const uint64_t values[4]) {
  put(w, ",\"");
  put(w, name);
  put(w, "\":{\"");
  put(w, keys[0]);
  put(w, "\":");
  put_u64(w, values[0]);
  for (unsigned i = 1; i < 4; i++) field(w, keys[i], values[i]);
  put(w, "}");
}

static void put_span(writer_t *w, const char *name, const struct tess_span_stats *s) {
  static const char *const keys[4] = {"allocs", "frees", "live", "live_bytes"};
  const uint64_t values[4] = {s->allocs, s->frees, s->live, s->live_bytes};
  put_object(w, name, keys, values);
}

size_t tessi_stats_json(char *buf, size_t size, const struct tess_stats *s, int64_t time_ms,
                        int64_t pid) {
  writer_t w = {buf, size, 0};
  put(&w, "{\"tessalloc\":\"");
  put(&w, tess_version_string() + sizeof "tessalloc " - 1);
  put(&w, "\"");
  field(&w, "version", s->version);
  if (time_ms >= 0) field(&w, "time_ms", (uint64_t)time_ms);
  if (pid >= 0) field(&w, "pid", (uint64_t)pid);
  put(&w, s->fixed ? ",\"mode\":\"fixed\"" : ",\"mode\":\"os\"");
  field(&w, "footprint", s->footprint);
  field(&w, "peak_footprint", s->peak_footprint);
  field(&w, "region_bytes", s->region_bytes);
  field(&w, "committed", s->committed);
  field(&w, "decommitted", s->decommitted);
  field(&w, "heaps_in_use", s->heaps_in_use);
  field(&w, "heaps_pooled", s->heaps_pooled);
  field(&w, "allocs", s->allocs);
  field(&w, "frees", s->frees);
  field(&w, "live_bytes", s->live_bytes);
  field(&w, "slab_bytes", s->slab_bytes);
  field(&w, "peak_live_bytes", s->peak_live_bytes);
  field(&w, "requested_live_bytes", s->requested_live_bytes);
  uint64_t slab_live = 0;
  for (unsigned c = 0; c < s->class_count; c++) slab_live += s->classes[c].live_bytes;
  put_fragmentation(&w, slab_live, s->slab_bytes);
  static const char *const free_keys[4] = {"current", "held", "orphaned", "pending"};
  const uint64_t free_bytes[4] = {s->slab_free_current, s->slab_free_held,
                                  s->slab_free_orphaned, s->slab_free_pending};
  put_object(&w, "slab_free", free_keys, free_bytes);
  field(&w, "empty_slab_bytes", s->empty_slab_bytes);
  field(&w, "kept_span_bytes", s->kept_span_bytes);
  field(&w, "deferred_span_bytes", s->deferred_span_bytes);
  put_span(&w, "large", &s->large);
  put_span(&w, "huge", &s->huge);
  static const char *const trip_keys[4] = {"all", "narrow", "busy", "widenings"};
  const uint64_t trips[4] = {s->span_trips, s->span_trips_narrow, s->span_trips_busy,
                             s->span_widenings};
  put_object(&w, "span_trips", trip_keys, trips);
  put(&w, ",\"classes\":[");
  bool first = true;
  for (unsigned c = 0; c < s->class_count; c++) {
    const struct tess_class_stats *cs = &s->classes[c];
    if (cs->allocs == 0 && cs->slabs == 0) continue; /* never used: left out */
    put(&w, first ? "{\"class\":" : ",{\"class\":");
    first = false;
    put_u64(&w, c);
    field(&w, "block_size", cs->block_size);
    field(&w, "slab_pages", cs->slab_pages);
    field(&w, "allocs", cs->allocs);
    field(&w, "frees", cs->frees);
    field(&w, "live_blocks", cs->live_blocks);
    field(&w, "live_bytes", cs->live_bytes);
    field(&w, "slabs", cs->slabs);
    field(&w, "slab_bytes", cs->slab_bytes);
    field(&w, "orphaned_slabs", s->orphaned_slabs[c]);
    field(&w, "peak_live_bytes", cs->peak_live_bytes);
    put_fragmentation(&w, cs->live_bytes, cs->slab_bytes);
    put(&w, "}");
  }
  put(&w, "]}");
  if (size > 0) buf[TESS_MIN(w.len, size - 1)] = '\0';
  return w.len;
}

size_t tess_stats_json(char *buf, size_t buf_size) {
  if (tessi_in_visit) { /* the walk's locks are held */
    if (buf_size > 0) buf[0] = '\0';
    return 0;
  }
  (void)tessi_ensure_init();
  tessi_lock(&read_lock);
  tessi_stats_merge(&read_stats);
  size_t len = tessi_stats_json(buf, buf_size, &read_stats, -1, -1);
  tessi_unlock(&read_lock);
  return len;
}
