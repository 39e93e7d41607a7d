/* Fill/verify patterns for allocated blocks.
 *
 * The byte at offset i of a block depends on a key derived from (pointer,
 * size, seed), so a block that overlaps another one, or that was handed out
 * twice, or whose contents were not copied by realloc, shows up as a
 * mismatch. Blocks above PAT_DENSE_MAX are written sparsely (both ends plus
 * one chunk per page) so that multi-MiB blocks stay cheap but still get
 * every page touched.
 */
#ifndef TESS_TESTS_PATTERN_H
#define TESS_TESTS_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PAT_DENSE_MAX ((size_t)64 * 1024)
#define PAT_EDGE ((size_t)4096)
#define PAT_STRIDE ((size_t)4096)
#define PAT_CHUNK ((size_t)64)
#define PAT_OK SIZE_MAX

static inline uint64_t pat_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static inline uint64_t pat_key(const void *p, size_t n, uint64_t seed) {
  return pat_mix((uint64_t)(uintptr_t)p ^ pat_mix(n ^ (seed << 1)));
}

/* Word w of the pattern; byte i is byte (i % 8) of word (i / 8), so that
 * whole words can be stored at once (little-endian, as on x86-64). */
static inline uint64_t pat_word(uint64_t key, size_t w) {
  uint64_t v = key ^ ((uint64_t)w * 0xD6E8FEB86659FD93ull);
  return v ^ (v >> 32);
}

static inline uint8_t pat_byte(uint64_t key, size_t i) {
  return (uint8_t)(pat_word(key, i >> 3) >> ((i & 7) * 8));
}

/* Fill (fill != 0) or check the range [lo, hi) clipped to `limit`. */
static inline size_t pat_range_(uint8_t *p, size_t lo, size_t hi, size_t limit, uint64_t key,
                                int fill) {
  if (hi > limit) hi = limit;
  size_t i = lo;
  for (; i < hi && (i & 7); i++) {
    uint8_t b = pat_byte(key, i);
    if (fill)
      p[i] = b;
    else if (p[i] != b)
      return i;
  }
  for (; i + 8 <= hi; i += 8) {
    uint64_t v = pat_word(key, i >> 3), have;
    if (fill) {
      memcpy(p + i, &v, 8);
    } else {
      memcpy(&have, p + i, 8);
      if (have != v) break; /* the byte loop below finds the offset */
    }
  }
  for (; i < hi; i++) {
    uint8_t b = pat_byte(key, i);
    if (fill)
      p[i] = b;
    else if (p[i] != b)
      return i;
  }
  return PAT_OK;
}

/* Walk the pattern positions of a block laid out for `layout` bytes, but
 * only those below `limit` (the prefix kept by a realloc). Returns the
 * first mismatching offset, or PAT_OK. */
static inline size_t pat_walk(void *block, size_t layout, size_t limit, uint64_t key, int fill) {
  uint8_t *p = block;
  size_t bad;
  if (limit > layout) limit = layout;
  if (layout <= PAT_DENSE_MAX) return pat_range_(p, 0, layout, limit, key, fill);
  if ((bad = pat_range_(p, 0, PAT_EDGE, limit, key, fill)) != PAT_OK) return bad;
  for (size_t off = PAT_EDGE; off + PAT_CHUNK <= layout - PAT_EDGE && off < limit;
       off += PAT_STRIDE)
    if ((bad = pat_range_(p, off, off + PAT_CHUNK, limit, key, fill)) != PAT_OK) return bad;
  return pat_range_(p, layout - PAT_EDGE, layout, limit, key, fill);
}

static inline void pat_fill(void *p, size_t n, uint64_t key) { pat_walk(p, n, n, key, 1); }

static inline size_t pat_check(const void *p, size_t n, uint64_t key) {
  return pat_walk((void *)p, n, n, key, 0);
}

/* Check only the first `limit` bytes of a block laid out for `layout`. */
static inline size_t pat_check_prefix(const void *p, size_t layout, size_t limit, uint64_t key) {
  return pat_walk((void *)p, layout, limit, key, 0);
}

/* Small, fast, per-thread PRNG (xorshift64*). */
static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_seed(uint64_t seed) {
  uint64_t s = pat_mix(seed);
  return s ? s : 1;
}

/* Uniform in [lo, hi]. */
static inline size_t rng_range(uint64_t *s, size_t lo, size_t hi) {
  return lo + (size_t)(rng_next(s) % ((uint64_t)(hi - lo) + 1));
}

/* The size mix of the multi-threaded tests: 70% <= 256 B, 25% <= 64 KiB,
 * 5% up to `big_max` (4 MiB in the full runs). */
static inline size_t rng_size(uint64_t *s, size_t big_max) {
  uint64_t r = rng_next(s) % 100;
  if (r < 70) return rng_range(s, 0, 256);
  if (r < 95) return rng_range(s, 257, 64 * 1024);
  return rng_range(s, 64 * 1024 + 1, big_max);
}

#endif /* TESS_TESTS_PATTERN_H */
