/* Conformance of every function in tessalloc.h, called by its tess_ name.
 *
 * Each section is one function family; they share check_block(), which
 * asserts the properties every returned block must have (alignment, usable
 * size, all usable bytes writable).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tessalloc.h"

#define KiB ((size_t)1024)
#define MiB (KiB * 1024)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sizes every failing-allocation test uses: all exceed what can exist. */
static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, (size_t)1 << 62,
};

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static int is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static int all_bytes(const void *p, int byte, size_t n) {
  const unsigned char *c = p;
  /* c[0] == byte and c[i] == c[i+1] for all i => every byte is `byte`. */
  return n == 0 || (c[0] == (unsigned char)byte && memcmp(c, c + 1, n - 1) == 0);
}

/* Properties of any successful allocation of `size` bytes at `align`:
 * non-NULL, aligned, usable >= size, every usable byte writable. */
static void check_block(const char *what, void *p, size_t size, size_t align) {
  REQUIRE(p != NULL, "%s(size %zu, align %zu) returned NULL", what, size, align);
  CHECK(is_aligned(p, align), "%s(size %zu): %p not aligned to %zu", what, size, p, align);
  size_t us = tess_usable_size(p);
  CHECK(us >= size, "%s(size %zu): usable size %zu too small", what, size, us);
  memset(p, 0x5C, us);
}

static void test_version(void) {
  const char *v = tess_version_string();
  REQUIRE(v != NULL, "tess_version_string() is NULL");
  CHECK(strncmp(v, "tessalloc ", 10) == 0, "version string is \"%s\"", v);
  printf("version: %s\n", v);
}

static void test_free_null(void) {
  /* Must return without touching anything. */
  tess_free(NULL);
  tess_free_sized(NULL, 0);
  tess_free_sized(NULL, 123);
  tess_free_aligned_sized(NULL, 64, 0);
  CHECK(tess_usable_size(NULL) == 0, "usable_size(NULL) = %zu", tess_usable_size(NULL));
}

#define EXPECT_ENOMEM(call, desc, n)                                               \
  do {                                                                             \
    errno = 0;                                                                     \
    void *r_ = (call);                                                             \
    int e_ = errno;                                                                \
    CHECK(r_ == NULL, "%s(%#zx) returned %p", desc, (size_t)(n), r_);              \
    CHECK(e_ == ENOMEM, "%s(%#zx): errno %d, want ENOMEM", desc, (size_t)(n), e_); \
    if (r_) tess_free(r_);                                                         \
  } while (0)

static void test_enomem(void) {
  void *live = tess_malloc(100);
  REQUIRE(live != NULL, "malloc(100)");
  memset(live, 0x11, 100);
  for (size_t i = 0; i < ARRAY_LEN(huge_sizes); i++) {
    size_t n = opaque(huge_sizes[i]);
    EXPECT_ENOMEM(tess_malloc(n), "malloc", n);
    EXPECT_ENOMEM(tess_calloc(1, n), "calloc(1, n)", n);
    EXPECT_ENOMEM(tess_calloc(n, 1), "calloc(n, 1)", n);
    EXPECT_ENOMEM(tess_realloc(NULL, n), "realloc(NULL, n)", n);
    EXPECT_ENOMEM(tess_realloc(live, n), "realloc(p, n)", n);
    EXPECT_ENOMEM(tess_reallocarray(NULL, 1, n), "reallocarray(NULL, 1, n)", n);
    EXPECT_ENOMEM(tess_reallocarray(live, n, 1), "reallocarray(p, n, 1)", n);
    EXPECT_ENOMEM(tess_aligned_alloc(16, n), "aligned_alloc(16, n)", n);
    EXPECT_ENOMEM(tess_aligned_alloc(4096, n), "aligned_alloc(4096, n)", n);
    EXPECT_ENOMEM(tess_aligned_alloc(2 * MiB, n), "aligned_alloc(2MiB, n)", n);
    EXPECT_ENOMEM(tess_memalign(64, n), "memalign(64, n)", n);
    EXPECT_ENOMEM(tess_memalign(1 * MiB, n), "memalign(1MiB, n)", n);
    EXPECT_ENOMEM(tess_valloc(n), "valloc", n);
    EXPECT_ENOMEM(tess_pvalloc(n), "pvalloc", n);

    void *out = (void *)&live; /* sentinel: must stay untouched */
    int rc = tess_posix_memalign(&out, 64, n);
    CHECK(rc == ENOMEM, "posix_memalign(64, %#zx) returned %d", n, rc);
    CHECK(out == (void *)&live, "posix_memalign(64, %#zx) changed *out", n);
    rc = tess_posix_memalign(&out, 4096, n);
    CHECK(rc == ENOMEM, "posix_memalign(4096, %#zx) returned %d", n, rc);
    CHECK(out == (void *)&live, "posix_memalign(4096, %#zx) changed *out", n);
  }
  /* A failed realloc leaves the block alone. */
  CHECK(all_bytes(live, 0x11, 100), "block changed by failed reallocs");
  CHECK(tess_usable_size(live) >= 100, "usable size of survivor");
  tess_free(live);

  /* An alignment so large that nothing can satisfy it. */
  size_t big_align = opaque((size_t)1 << 62);
  errno = 0;
  void *p = tess_aligned_alloc(big_align, 1);
  CHECK(p == NULL && (errno == ENOMEM || errno == EINVAL), "aligned_alloc(2^62, 1) = %p errno %d",
        p, errno);
  errno = 0;
  p = tess_memalign(big_align, 1);
  CHECK(p == NULL && (errno == ENOMEM || errno == EINVAL), "memalign(2^62, 1) = %p errno %d", p,
        errno);
}

/* A block the machine could not back: where the kernel checks the commit
 * charge (vm.overcommit_memory 0 or 2), 64 TiB is refused, and malloc
 * answers ENOMEM as glibc's does. Mapped without its charge, it was
 * handed out, and the process killed for memory once it was written. */
static void test_beyond_memory(void) {
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  int mode = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &mode) != 1) mode = -1;
    fclose(f);
  }
  if (mode != 0 && mode != 2) {
    printf("beyond memory: vm.overcommit_memory is %d, the kernel grants anything: skipped\n",
           mode);
    return;
  }
  size_t n = opaque((size_t)1 << 46);
  EXPECT_ENOMEM(tess_malloc(n), "malloc", n);
  EXPECT_ENOMEM(tess_calloc(1, n), "calloc", n);
  EXPECT_ENOMEM(tess_aligned_alloc(2 * MiB, n), "aligned_alloc(2MiB, n)", n);
  void *live = tess_malloc(64 * MiB);
  REQUIRE(live != NULL, "malloc(64 MiB)");
  EXPECT_ENOMEM(tess_realloc(live, n), "realloc(64 MiB block, n)", n);
  tess_free(live);
}

static void test_mul_overflow(void) {
  const size_t pairs[][2] = {
      {SIZE_MAX / 2 + 1, 2}, {2, SIZE_MAX / 2 + 1}, {(size_t)1 << 32, (size_t)1 << 32},
      {SIZE_MAX, SIZE_MAX},  {SIZE_MAX / 3 + 1, 3}, {((size_t)1 << 33) + 1, (size_t)1 << 31},
  };
  void *live = tess_malloc(64);
  REQUIRE(live != NULL, "malloc(64)");
  memset(live, 0x22, 64);
  for (size_t i = 0; i < ARRAY_LEN(pairs); i++) {
    size_t a = opaque(pairs[i][0]), b = opaque(pairs[i][1]);
    errno = 0;
    void *p = tess_calloc(a, b);
    CHECK(p == NULL && errno == ENOMEM, "calloc(%#zx, %#zx) = %p errno %d", a, b, p, errno);
    errno = 0;
    p = tess_reallocarray(NULL, a, b);
    CHECK(p == NULL && errno == ENOMEM, "reallocarray(NULL, %#zx, %#zx) = %p errno %d", a, b, p,
          errno);
    errno = 0;
    p = tess_reallocarray(live, a, b);
    CHECK(p == NULL && errno == ENOMEM, "reallocarray(p, %#zx, %#zx) = %p errno %d", a, b, p,
          errno);
  }
  CHECK(all_bytes(live, 0x22, 64), "block changed by failed reallocarray");
  tess_free(live);

  /* A zero factor is no overflow: the product is 0, a valid request. */
  void *z1 = tess_calloc(0, opaque(SIZE_MAX));
  void *z2 = tess_calloc(opaque(SIZE_MAX), 0);
  void *z3 = tess_reallocarray(NULL, 0, opaque(SIZE_MAX));
  CHECK(z1 != NULL, "calloc(0, SIZE_MAX) returned NULL");
  CHECK(z2 != NULL, "calloc(SIZE_MAX, 0) returned NULL");
  CHECK(z3 != NULL, "reallocarray(NULL, 0, SIZE_MAX) returned NULL");
  tess_free(z1);
  tess_free(z2);
  tess_free(z3);

  /* reallocarray in normal use: grows like realloc(count * size). */
  uint32_t *arr = tess_reallocarray(NULL, 10, sizeof(uint32_t));
  check_block("reallocarray", arr, 10 * sizeof(uint32_t), 16);
  for (uint32_t i = 0; i < 10; i++) arr[i] = i * 7919u;
  arr = tess_reallocarray(arr, 5000, sizeof(uint32_t));
  REQUIRE(arr != NULL, "reallocarray grow");
  for (uint32_t i = 0; i < 10; i++) CHECK(arr[i] == i * 7919u, "reallocarray lost element %u", i);
  tess_free(arr);
}

/* calloc must hand out zeroed memory even when it reuses dirty blocks. */
static void test_calloc_zero(void) {
  static const struct {
    size_t size, count;
  } cases[] = {
      {1, 300},    {8, 300},       {24, 300},      {100, 300},     {256, 200},   {1000, 200},
      {4000, 100}, {20 * KiB, 50}, {100 * KiB, 8}, {300 * KiB, 6}, {3 * MiB, 3},
  };
  void *blocks[300];
  for (size_t c = 0; c < ARRAY_LEN(cases); c++) {
    size_t size = cases[c].size, count = cases[c].count;
    for (int round = 0; round < 6; round++) {
      for (size_t i = 0; i < count; i++) {
        /* Alternate malloc-and-dirty with calloc of the same size. */
        if (round == 0) {
          blocks[i] = tess_malloc(size);
          check_block("malloc", blocks[i], size, 16);
          memset(blocks[i], 0xAA, tess_usable_size(blocks[i]));
          continue;
        }
        /* Split the product differently each round. */
        size_t n = (round & 1) && size % 4 == 0 ? size / 4 : size;
        size_t m = size / n;
        blocks[i] = tess_calloc(n, m);
        REQUIRE(blocks[i] != NULL, "calloc(%zu, %zu)", n, m);
        CHECK(is_aligned(blocks[i], 16), "calloc %p misaligned", blocks[i]);
        CHECK(all_bytes(blocks[i], 0, size), "calloc(%zu, %zu) round %d block %zu not zeroed", n, m,
              round, i);
        memset(blocks[i], 0xAA, tess_usable_size(blocks[i]));
      }
      for (size_t i = 0; i < count; i++) tess_free(blocks[i]);
    }
  }
  /* Freed blocks of other sizes dirtying the same memory, then calloc. */
  for (int round = 0; round < 20; round++) {
    for (size_t i = 0; i < 64; i++) {
      blocks[i] = tess_malloc(16 + i * 48 + (size_t)round * 8);
      REQUIRE(blocks[i] != NULL, "malloc");
      memset(blocks[i], 0xAA, tess_usable_size(blocks[i]));
    }
    for (size_t i = 0; i < 64; i++) tess_free(blocks[i]);
    for (size_t i = 0; i < 64; i++) {
      size_t n = 8 + i * 40 + (size_t)round * 16;
      blocks[i] = tess_calloc(1, n);
      REQUIRE(blocks[i] != NULL, "calloc");
      CHECK(all_bytes(blocks[i], 0, n), "calloc(1, %zu) not zeroed", n);
    }
    for (size_t i = 0; i < 64; i++) tess_free(blocks[i]);
  }
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void test_malloc_zero(void) {
  enum { N = 2000 };
  static void *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = tess_malloc(0);
    check_block("malloc(0)", p[i], 0, 16);
  }
  qsort(p, N, sizeof p[0], cmp_ptr);
  for (int i = 1; i < N; i++) CHECK(p[i] != p[i - 1], "malloc(0) returned %p twice", p[i]);
  for (int i = 0; i < N; i++) tess_free(p[i]);
}

static unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)((i * 31u + (i >> 8) * 7u + seed) & 0xff);
}

static void fill_pat(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = pat(i, seed);
}

static size_t bad_pat(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != pat(i, seed)) return i;
  return SIZE_MAX;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = -1;
  fclose(f);
  return rss < 0 ? -1 : rss * (long)(page_size() / 1024);
}

static void test_realloc(void) {
  /* realloc(NULL, n) is malloc(n). */
  for (size_t n = 0; n < 70000; n = n * 2 + 1) {
    void *p = tess_realloc(NULL, n);
    check_block("realloc(NULL)", p, n, 16);
    tess_free(p);
  }

  /* realloc(p, 0) frees p and returns NULL (glibc behaviour). If it did
   * not free, this loop would leak ~320 MiB. */
  long before = rss_kib();
  for (int i = 0; i < 20000; i++) {
    void *p = tess_malloc(16 * KiB);
    REQUIRE(p != NULL, "malloc(16KiB)");
    memset(p, 1, 16 * KiB);
    void *r = tess_realloc(p, 0);
    CHECK(r == NULL, "realloc(p, 0) returned %p, want NULL", r);
    if (r) tess_free(r);
  }
  long after = rss_kib();
  CHECK(after - before < 64 * 1024, "realloc(p, 0) leaks? RSS %ld -> %ld KiB", before, after);

  /* Prefix kept across classes, growing to MiB sizes and back. */
  static const size_t steps[] = {
      1,         7,       16,          17,      31,      48,      64,        100,       255,
      512,       1000,    2048,        4000,    8192,    16000,   20000,     65536,     100000,
      300 * KiB, 1 * MiB, 3 * MiB,     8 * MiB, 3 * MiB, 1 * MiB, 300 * KiB, 100000,    20000,
      4000,      1000,    100,         17,      1,       5 * MiB, 24,        200 * KiB, 40,
      40 * KiB,  2 * MiB, 2 * MiB + 1, 20 * MiB, 40 * MiB, 20 * MiB, 64, 0,
  };
  for (unsigned seed = 0; seed < 3; seed++) {
    size_t cur = 0;
    unsigned char *p = NULL;
    for (size_t i = 0; i < ARRAY_LEN(steps); i++) {
      size_t n = steps[i];
      unsigned char *q = tess_realloc(p, n);
      if (n == 0) {
        CHECK(q == NULL, "realloc(p, 0) = %p", (void *)q);
        p = NULL;
        cur = 0;
        continue;
      }
      REQUIRE(q != NULL, "realloc(%p, %zu)", (void *)p, n);
      CHECK(is_aligned(q, 16), "realloc result %p misaligned", (void *)q);
      CHECK(tess_usable_size(q) >= n, "realloc to %zu: usable %zu", n, tess_usable_size(q));
      /* blocks of a MiB and more are pages, not classes: the usable size
       * follows the block down too (a huge block shrunk in place) */
      CHECK(n < MiB || tess_usable_size(q) < n + 2 * 4096, "realloc to %zu: usable %zu", n,
            tess_usable_size(q));
      size_t keep = cur < n ? cur : n;
      size_t bad = bad_pat(q, keep, seed + i);
      CHECK(bad == SIZE_MAX, "realloc %zu -> %zu lost byte %zu", cur, n, bad);
      fill_pat(q, n, seed + i + 1);
      p = q;
      cur = n;
    }
    tess_free(p);
  }

  /* Failure leaves the old block intact and freeable, for each size kind. */
  static const size_t olds[] = {1, 100, 5000, 20 * KiB, 300 * KiB, 4 * MiB};
  static const size_t bad_sizes[] = {SIZE_MAX, (size_t)PTRDIFF_MAX + 1};
  for (size_t i = 0; i < ARRAY_LEN(olds); i++) {
    unsigned char *p = tess_malloc(olds[i]);
    REQUIRE(p != NULL, "malloc(%zu)", olds[i]);
    fill_pat(p, olds[i], 9);
    for (size_t j = 0; j < ARRAY_LEN(bad_sizes); j++) {
      errno = 0;
      void *q = tess_realloc(p, opaque(bad_sizes[j]));
      CHECK(q == NULL && errno == ENOMEM, "realloc(%zu-byte block, %#zx) = %p errno %d", olds[i],
            bad_sizes[j], q, errno);
    }
    CHECK(bad_pat(p, olds[i], 9) == SIZE_MAX, "failed realloc damaged %zu-byte block", olds[i]);
    CHECK(tess_usable_size(p) >= olds[i], "usable size after failed realloc");
    tess_free(p);
  }

  /* realloc of an over-aligned block keeps its contents. */
  for (size_t a = 32; a <= 64 * KiB; a *= 8) {
    unsigned char *p = tess_aligned_alloc(a, 100);
    REQUIRE(p != NULL, "aligned_alloc(%zu, 100)", a);
    fill_pat(p, 100, 3);
    p = tess_realloc(p, 5000);
    REQUIRE(p != NULL, "realloc aligned block");
    CHECK(bad_pat(p, 100, 3) == SIZE_MAX, "realloc of %zu-aligned block lost data", a);
    tess_free(p);
  }
}

/* Sizes to try at a given alignment. */
static size_t sizes_for(size_t a, size_t out[7]) {
  size_t n = 0;
  out[n++] = 0;
  out[n++] = 1;
  if (a > 2) out[n++] = a - 1;
  out[n++] = a;
  out[n++] = a + 1;
  out[n++] = 3 * a;
  out[n++] = 100000;
  return n;
}

static void test_aligned(void) {
  for (size_t a = 1; a <= 16 * MiB; a *= 2) {
    size_t sizes[7];
    size_t ns = sizes_for(a, sizes);
    for (size_t k = 0; k < ns; k++) {
      size_t n = sizes[k];
      void *p = tess_aligned_alloc(a, n);
      check_block("aligned_alloc", p, n, a);
      if (k & 1)
        tess_free_aligned_sized(p, a, n);
      else
        tess_free(p);

      p = tess_memalign(a, n);
      check_block("memalign", p, n, a);
      tess_free(p);

      if (a >= sizeof(void *)) {
        void *out = NULL;
        int rc = tess_posix_memalign(&out, a, n);
        CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", a, n, rc);
        if (rc == 0) {
          check_block("posix_memalign", out, n, a);
          tess_free(out);
        }
      }
    }
  }

  /* posix_memalign: EINVAL for zero, non-powers of two, < sizeof(void *). */
  static const size_t bad_pm[] = {0, 1, 2, 4, 3, 24, 48, 100, 4097, SIZE_MAX};
  for (size_t i = 0; i < ARRAY_LEN(bad_pm); i++) {
    if (bad_pm[i] >= sizeof(void *) && (bad_pm[i] & (bad_pm[i] - 1)) == 0) continue;
    void *out = (void *)bad_pm;
    int rc = tess_posix_memalign(&out, opaque(bad_pm[i]), 64);
    CHECK(rc == EINVAL, "posix_memalign(align %zu) returned %d, want EINVAL", bad_pm[i], rc);
    CHECK(out == (void *)bad_pm, "posix_memalign(align %zu) changed *out", bad_pm[i]);
  }

  /* aligned_alloc: a non-power-of-two alignment is EINVAL. */
  static const size_t bad_aa[] = {3, 24, 48, 100, 1000, 4097, 3 * MiB};
  for (size_t i = 0; i < ARRAY_LEN(bad_aa); i++) {
    errno = 0;
    void *p = tess_aligned_alloc(opaque(bad_aa[i]), 64);
    CHECK(p == NULL && errno == EINVAL, "aligned_alloc(%zu, 64) = %p errno %d", bad_aa[i], p,
          errno);
    if (p) tess_free(p);
  }

  /* memalign: a non-power-of-two alignment is rounded up (glibc). */
  static const size_t odd[][2] = {
      {3, 4}, {24, 32}, {48, 64}, {100, 128}, {1000, 1024}, {4097, 8192}, {3 * MiB, 4 * MiB},
  };
  for (size_t i = 0; i < ARRAY_LEN(odd); i++) {
    void *p = tess_memalign(opaque(odd[i][0]), 1000);
    check_block("memalign(non-power-of-two)", p, 1000, odd[i][1]);
    tess_free(p);
  }
  /* glibc: EINVAL only above SIZE_MAX / 2 + 1 (no power of two to round
   * up to); 2^63, and 2^62 + 1 rounded up to it, fail with ENOMEM. */
  static const size_t top[] = {(size_t)1 << 63, ((size_t)1 << 62) + 1, ((size_t)1 << 62)};
  for (size_t i = 0; i < ARRAY_LEN(top); i++) {
    errno = 0;
    void *q = tess_memalign(opaque(top[i]), 1);
    CHECK(q == NULL && errno == ENOMEM, "memalign(%#zx, 1) = %p errno %d, want ENOMEM", top[i], q,
          errno);
  }
  errno = 0;
  void *q = tess_memalign(opaque(((size_t)1 << 63) + 1), 1);
  CHECK(q == NULL && errno == EINVAL, "memalign(2^63 + 1, 1) = %p errno %d, want EINVAL", q, errno);
  /* glibc treats memalign(0, n) as malloc(n). */
  void *p = tess_memalign(opaque(0), 10);
  check_block("memalign(0)", p, 10, 16);
  tess_free(p);
}

static void test_valloc(void) {
  size_t pg = page_size();
  static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 10000, 100000, 3 * MiB};
  for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
    size_t n = sizes[i];
    void *p = tess_valloc(n);
    check_block("valloc", p, n, pg);
    tess_free(p);

    size_t want = (n + pg - 1) / pg * pg;
    if (want == 0) want = pg;
    p = tess_pvalloc(n);
    check_block("pvalloc", p, want, pg);
    tess_free(p);
  }
}

static void test_usable_size(void) {
  /* Eight neighbours of each size, each filled to its full usable size
   * with its own byte: overlapping usable ranges (or usable sizes that run
   * into metadata) show up as a wrong byte or a crash. */
  enum { K = 8 };
  unsigned char *p[K];
  size_t n = 0;
  while (n <= 70000) {
    for (int i = 0; i < K; i++) {
      p[i] = tess_malloc(n);
      REQUIRE(p[i] != NULL, "malloc(%zu)", n);
      CHECK(is_aligned(p[i], 16), "malloc(%zu) = %p misaligned", n, (void *)p[i]);
      size_t us = tess_usable_size(p[i]);
      CHECK(us >= n, "usable_size(malloc(%zu)) = %zu", n, us);
      memset(p[i], 0x40 + i, us);
    }
    for (int i = 0; i < K; i++)
      CHECK(all_bytes(p[i], 0x40 + i, tess_usable_size(p[i])),
            "malloc(%zu): block %d overwritten by a neighbour", n, i);
    for (int i = 0; i < K; i++) tess_free(p[i]);
    n += n < 4096 ? 1 : 13 + n / 512;
  }
  static const size_t big[] = {MiB - 1, MiB, MiB + 1, 2 * MiB + 12345, 5 * MiB, 33 * MiB};
  for (size_t i = 0; i < ARRAY_LEN(big); i++) {
    void *q = tess_malloc(big[i]);
    check_block("malloc", q, big[i], 16);
    tess_free(q);
    q = tess_calloc(1, big[i]);
    REQUIRE(q != NULL, "calloc(1, %zu)", big[i]);
    CHECK(all_bytes(q, 0, big[i]), "calloc(1, %zu) not zeroed", big[i]);
    check_block("calloc", q, big[i], 16);
    tess_free(q);
  }
}

/* Sized frees must really free: memory comes back for the next round. */
static void test_free_sized(void) {
  enum { N = 500 };
  static unsigned char *p[N];
  static size_t sz[N], al[N];
  long before = 0;
  for (int round = 0; round < 30; round++) {
    for (int i = 0; i < N; i++) {
      sz[i] = (size_t)((i * 7919 + round * 31) % 9000);
      if (i % 97 == 0) sz[i] = 200 * KiB + (size_t)i;
      if (i % 3 == 0) {
        al[i] = (size_t)64 << (i % 7);
        p[i] = tess_aligned_alloc(al[i], sz[i]);
        check_block("aligned_alloc", p[i], sz[i], al[i]);
      } else {
        al[i] = 0;
        p[i] = tess_malloc(sz[i]);
        check_block("malloc", p[i], sz[i], 16);
      }
      fill_pat(p[i], sz[i], (unsigned)i);
    }
    for (int i = 0; i < N; i++) {
      CHECK(bad_pat(p[i], sz[i], (unsigned)i) == SIZE_MAX, "block %d corrupted", i);
      if (al[i])
        tess_free_aligned_sized(p[i], al[i], sz[i]);
      else if (i % 2)
        tess_free_sized(p[i], sz[i]);
      else /* any size between the request and the usable size */
        tess_free_sized(p[i], tess_usable_size(p[i]));
    }
    if (round == 2) before = rss_kib();
  }
  long after = rss_kib();
  CHECK(after - before < 32 * 1024, "sized frees do not free? RSS %ld -> %ld KiB", before, after);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_version();
  test_free_null();
  test_enomem();
  test_beyond_memory();
  test_mul_overflow();
  test_calloc_zero();
  test_malloc_zero();
  test_realloc();
  test_aligned();
  test_valloc();
  test_usable_size();
  test_free_sized();
  return check_finish("test_api");
}
