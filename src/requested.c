/* Requested bytes (built with TESS_STATS_REQUESTED): the public entry
 * points over the core ones of alloc.c, which includes this file. Every
 * block gets 8 more bytes, and the size asked for is kept in its last 8
 * (usable size - 8); free reads it back to count it out. That costs a
 * block lookup (classify) on every free, which is why it is a build
 * option: tess_stats' requested_live_bytes is 0 in a default build.
 * The usable size reported excludes the tag, so callers cannot overwrite
 * it through malloc_usable_size. */

#define REQUESTED_TAG sizeof(size_t)

static void *tag_block(void *p, size_t size) {
  if (p != NULL) {
    size_t usable = core_usable_size(p);
    memcpy((char *)p + usable - REQUESTED_TAG, &size, sizeof size);
    TESS_STAT_MINE(requested_in, size);
  }
  return p;
}

/* the tag of p, given to `op`: a bad p is reported as that call's, not
 * as usable_size's */
static size_t tag_of(const void *p, const char *op) {
  size_t size;
  memcpy(&size, (const char *)p + usable_checked(p, op) - REQUESTED_TAG, sizeof size);
  return size;
}

/* n plus the tag, or SIZE_MAX (which every core call refuses with ENOMEM)
 * when that overflows */
static size_t with_tag(size_t n) {
  return n > SIZE_MAX - REQUESTED_TAG ? SIZE_MAX : n + REQUESTED_TAG;
}

void *tess_malloc(size_t size) { return tag_block(core_malloc(with_tag(size)), size); }

void *tess_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return fail_nomem();
  return tag_block(core_calloc(1, with_tag(total)), total);
}

void tess_free(void *p) {
  if (p == NULL) return;
  TESS_STAT_MINE(requested_out, tag_of(p, "free"));
  core_free(p);
}

void *tess_realloc(void *p, size_t size) {
  if (p == NULL) return tess_malloc(size);
  if (size == 0) {
    tess_free(p);
    return NULL;
  }
  size_t old = tag_of(p, "realloc");
  void *q = core_realloc(p, with_tag(size));
  if (q == NULL) return NULL; /* p and its tag untouched */
  TESS_STAT_MINE(requested_out, old);
  return tag_block(q, size);
}

void *tess_aligned_alloc(size_t alignment, size_t size) {
  return tag_block(core_aligned_alloc(alignment, with_tag(size)), size);
}

int tess_posix_memalign(void **out, size_t alignment, size_t size) {
  int result = core_posix_memalign(out, alignment, with_tag(size));
  if (result == 0) tag_block(*out, size);
  return result;
}

void *tess_memalign(size_t alignment, size_t size) {
  return tag_block(core_memalign(alignment, with_tag(size)), size);
}

void *tess_valloc(size_t size) { return tag_block(core_valloc(with_tag(size)), size); }

void *tess_pvalloc(size_t size) {
  /* pvalloc promises whole pages beyond the tag too */
  size_t rounded = tessi_align_up(size ? size : 1, TESS_PAGE_SIZE);
  if (rounded < size) return fail_nomem();
  return tag_block(core_pvalloc(with_tag(rounded)), size);
}

size_t tess_usable_size(const void *p) {
  return p == NULL ? 0 : core_usable_size(p) - REQUESTED_TAG;
}
