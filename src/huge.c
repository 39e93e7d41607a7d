/* Huge blocks (OS mode): at or above TESS_HUGE_THRESHOLD a block gets a
 * mapping of its own, unmapped on free and resized with mremap (which may
 * move it; realloc promises no alignment beyond the default). A hash
 * table (open addressing, in memory of its own) records them, so free()
 * can tell a huge block from a pointer that is not ours. */
#include "internal.h"

#define SLOT_EMPTY 0
#define SLOT_DELETED 1

static struct {
  tess_lock_t lock;
  tess_huge_t *slots;
  size_t capacity; /* a power of two, or 0 */
  size_t used;     /* live + deleted slots */
  size_t live;
  size_t bytes;    /* the live blocks' */
  size_t peak_live, peak_bytes; /* the most ever live at once (malloc_stats) */
} huge;

static inline size_t slot_of(uintptr_t ptr, size_t capacity) {
  return (size_t)(((ptr >> TESS_PAGE_SHIFT) * 0x9E3779B97F4A7C15ull) >> 20) & (capacity - 1);
}

static tess_huge_t *find_locked(uintptr_t ptr) {
  /* 0 and 1 are the slots' marks, never a block: (void *)1 matched a
   * deleted slot, and free took it for a huge block (freed it "again",
   * live count and statistics off by one), usable_size answered the
   * deleted block's size and realloc copied from address 1 */
  if (huge.capacity == 0 || ptr <= SLOT_DELETED) return NULL;
  for (size_t i = slot_of(ptr, huge.capacity);; i = (i + 1) & (huge.capacity - 1)) {
    tess_huge_t *s = &huge.slots[i];
    if (s->ptr == ptr) return s;
    if (s->ptr == SLOT_EMPTY) return NULL;
  }
}

static void put_locked(const tess_huge_t *entry) {
  size_t i = slot_of(entry->ptr, huge.capacity);
  while (huge.slots[i].ptr > SLOT_DELETED) i = (i + 1) & (huge.capacity - 1);
  if (huge.slots[i].ptr == SLOT_EMPTY) huge.used++;
  huge.slots[i] = *entry;
  huge.live++;
  huge.bytes += entry->size;
  /* (a rebuild puts every block back: never above the peaks so far) */
  if (huge.live > huge.peak_live) huge.peak_live = huge.live;
  if (huge.bytes > huge.peak_bytes) huge.peak_bytes = huge.bytes;
}

/* Room for one more entry: rebuild at the size the live entries need. */
static bool reserve_locked(void) {
  if ((huge.used + 1) * 4 <= huge.capacity * 3) return true;
  size_t capacity = 256;
  while ((huge.live + 1) * 2 > capacity) capacity *= 2;
  tess_huge_t *slots = tessi_plat_reserve(capacity * sizeof(tess_huge_t), TESS_PAGE_SIZE);
  if (slots == NULL) return false;
  tess_huge_t *old = huge.slots;
  size_t old_capacity = huge.capacity;
  huge.slots = slots;
  huge.capacity = capacity;
  huge.used = huge.live = huge.bytes = 0;
  for (size_t i = 0; i < old_capacity; i++) {
    if (old[i].ptr > SLOT_DELETED) put_locked(&old[i]);
  }
  if (old != NULL) tessi_plat_release(old, old_capacity * sizeof(tess_huge_t));
  return true;
}

static void remove_locked(tess_huge_t *s) {
  s->ptr = SLOT_DELETED;
  huge.live--;
  huge.bytes -= s->size;
}

void *tessi_huge_alloc(size_t size, size_t align) {
  size_t usable = tessi_align_up(TESS_MAX(size, (size_t)1), TESS_PAGE_SIZE);
  if (usable < size) return NULL;
  void *p = tessi_plat_map(usable, TESS_MAX(align, TESS_PAGE_SIZE));
  if (p == NULL) return NULL;
  tess_huge_t entry = {(uintptr_t)p, usable};
  tessi_lock(&huge.lock);
  bool ok = reserve_locked();
  if (ok) put_locked(&entry);
  tessi_unlock(&huge.lock);
  if (!ok) {
    tessi_plat_release(p, usable);
    return NULL;
  }
  return p; /* a fresh mapping reads as zero */
}

size_t tessi_huge_usable(const void *p) {
  tessi_lock(&huge.lock);
  tess_huge_t *s = find_locked((uintptr_t)p);
  size_t usable = s ? s->size : 0;
  tessi_unlock(&huge.lock);
  return usable;
}

bool tessi_huge_free(void *p) {
  tessi_lock(&huge.lock);
  tess_huge_t *s = find_locked((uintptr_t)p);
  tess_huge_t entry = {0, 0};
  if (s != NULL) {
    entry = *s;
    remove_locked(s);
  }
  tessi_unlock(&huge.lock);
  if (s == NULL) return false;
  tessi_plat_release((void *)entry.ptr, entry.size);
  return true;
}

void *tessi_huge_realloc(void *p, size_t size) {
  size_t usable = tessi_align_up(size, TESS_PAGE_SIZE);
  if (usable < size) return NULL;
  tessi_lock(&huge.lock);
  tess_huge_t *s = find_locked((uintptr_t)p);
  void *q = NULL;
  /* the table must have room before the block moves, or it could be lost */
  if (s != NULL && reserve_locked()) {
    s = find_locked((uintptr_t)p); /* the table may have been rebuilt */
    q = tessi_plat_remap(p, s->size, usable);
    if (q != NULL) {
      remove_locked(s);
      tess_huge_t entry = {(uintptr_t)q, usable};
      put_locked(&entry);
    }
  }
  tessi_unlock(&huge.lock);
  return q;
}

void tessi_huge_live(size_t *count, size_t *bytes) {
  tessi_lock(&huge.lock);
  *count = huge.live;
  *bytes = huge.bytes;
  tessi_unlock(&huge.lock);
}

void tessi_huge_peaks(size_t *count, size_t *bytes) {
  tessi_lock(&huge.lock);
  *count = huge.peak_live;
  *bytes = huge.peak_bytes;
  tessi_unlock(&huge.lock);
}

int tessi_huge_visit(int (*visit)(void *ptr, size_t size, void *arg), void *arg, size_t tag) {
  tessi_lock(&huge.lock);
  int result = 0;
  for (size_t i = 0; i < huge.capacity && result == 0; i++) {
    const tess_huge_t *s = &huge.slots[i];
    if (s->ptr > SLOT_DELETED) result = visit((void *)s->ptr, s->size - tag, arg);
  }
  tessi_unlock(&huge.lock);
  return result;
}

void tessi_huge_fork_prepare(void) { tessi_lock(&huge.lock); }
void tessi_huge_fork_parent(void) { tessi_unlock(&huge.lock); }
void tessi_huge_fork_child(void) { tessi_lock_reset(&huge.lock); }
