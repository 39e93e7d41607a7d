/* Fuzz target: the tess_* API against a model.
 *
 * Input bytes are a program of operations over SLOTS slots. The model keeps,
 * per slot, the requested size, the alignment and the byte every requested
 * byte must hold; contents are verified before every free and realloc, and
 * calloc memory must be zero. Each input frees everything it allocated, so
 * the statistics must show as many frees as allocations over it, and every
 * 32nd input tess_heap_check() must find the heap sound.
 *
 * In a fixed region (test_fuzz's third argument, or TESS_FUZZ_REGION_MIB
 * for libFuzzer: tess_init_region over that many MiB) the live bytes are
 * capped at a quarter of it. A request needing less than 1/256 of the
 * region (size plus alignment) must still succeed: at most SLOTS blocks,
 * as many slabs and a heap's caches split the free three quarters into
 * a few hundred runs at most, so some run is longer. A larger one may
 * fail with ENOMEM (no run long enough), leaving its slot as it was.
 * Now and then an operation ends the "enclave call" (tess_thread_cleanup)
 * with blocks live: the heap goes back to the pool (in a fixed region its
 * slabs become orphans), and the next allocation takes a heap again.
 *
 * Built with -DTESS_LIBFUZZER and -fsanitize=fuzzer this is a libFuzzer
 * target; otherwise main() runs random inputs:
 *     test_fuzz [iterations [seed [region-MiB]]]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "tessalloc.h"

enum { SLOTS = 64 };
static size_t live_cap = (size_t)96 << 20; /* total live bytes per input */
static int fixed_region;                    /* tess_init_region was called */
static size_t may_fail_from;                /* fixed region: see above */

/* Makes a fresh mapping of `mib` MiB the only memory (unaligned ends). */
static void use_fixed_region(size_t mib) {
  size_t size = mib << 20;
  char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || tess_init_region(map + 7, map + size - 9) != 0) {
    fprintf(stderr, "fuzz_api: no fixed region of %zu MiB\n", mib);
    abort();
  }
  fixed_region = 1;
  live_cap = size / 4;
  may_fail_from = size / 256;
}

struct slot {
  unsigned char *p;
  size_t size;
  size_t align;
  unsigned char fill;
};

struct reader {
  const uint8_t *data;
  size_t size, pos;
};

static unsigned byte(struct reader *r) { return r->pos < r->size ? r->data[r->pos++] : 0; }

static unsigned u16(struct reader *r) {
  unsigned lo = byte(r);
  return lo | byte(r) << 8;
}

/* Sizes covering every class: tiny, small, medium, large and huge. */
static size_t draw_size(struct reader *r) {
  unsigned kind = byte(r);
  unsigned v = u16(r);
  if (kind < 100) return v % 129;                     /* 0..128 */
  if (kind < 170) return v % 1025;                    /* ..1 KiB */
  if (kind < 215) return (size_t)v % (64 * 1024 + 1); /* ..64 KiB */
  if (kind < 248) return ((size_t)v << 4) + byte(r);  /* ..1 MiB */
  if (kind < 250) return ((size_t)v << 7) + byte(r);  /* ..8 MiB */
  static const size_t edges[] = {0,    1,     8,     15,    16,     17,      4095,         4096,
                                 4097, 65535, 65536, 65537, 262144, 1 << 20, (1 << 21) + 1};
  return edges[v % (sizeof edges / sizeof edges[0])];
}

static void fail(const char *what, const struct slot *s, size_t at) {
  fprintf(stderr, "fuzz_api: %s: block %p size %zu align %zu fill %#x, offset %zu\n", what,
          (void *)s->p, s->size, s->align, s->fill, at);
  abort();
}

/* All of [0, n) equals b: check byte 0, then that the range equals
 * itself shifted by one. */
static int all_equal(const unsigned char *p, unsigned char b, size_t n) {
  return n == 0 || (p[0] == b && memcmp(p, p + 1, n - 1) == 0);
}

static size_t first_diff(const unsigned char *p, unsigned char b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != b) return i;
  return n;
}

static void verify(const struct slot *s, size_t n, const char *when) {
  if (!all_equal(s->p, s->fill, n)) fail(when, s, first_diff(s->p, s->fill, n));
}

/* Properties of every fresh block; then fill it with the slot's byte. */
static void accept(struct slot *s, unsigned char *p, size_t size, size_t align, unsigned char fill,
                   int zeroed) {
  s->p = p;
  s->size = size;
  s->align = align;
  s->fill = fill;
  size_t a = align > 16 ? align : 16;
  if ((uintptr_t)p & (a - 1)) fail("misaligned", s, 0);
  if (tess_usable_size(p) < size) fail("usable size too small", s, tess_usable_size(p));
  if (zeroed && !all_equal(p, 0, size)) fail("calloc memory not zero", s, first_diff(p, 0, size));
  memset(p, fill, size);
}

/* A request that found no room: allowed in a fixed region, for large
 * requests, with errno ENOMEM. */
static unsigned long no_room; /* such failures, reported at the end */

static int may_fail(size_t bytes) {
  int ok = fixed_region && bytes >= may_fail_from && errno == ENOMEM;
  errno = 0;
  no_room += (unsigned long)ok;
  return ok;
}

static void release(struct slot *s, size_t *live, int how) {
  verify(s, s->size, "corrupted before free");
  if (how == 1 && !s->align)
    tess_free_sized(s->p, s->size);
  else if (how == 1)
    tess_free_aligned_sized(s->p, s->align, s->size);
  else
    tess_free(s->p);
  *live -= s->size;
  s->p = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct slot slots[SLOTS];
  memset(slots, 0, sizeof slots);
  struct reader r = {data, size, 0};
  size_t live = 0;
  static struct tess_stats stats;
  static unsigned long inputs;
  tess_stats_get(&stats, sizeof stats);
  uint64_t allocs_before = stats.allocs, frees_before = stats.frees;

  while (r.pos < r.size) {
    errno = 0; /* a failure must set ENOMEM (may_fail) */
    unsigned op = byte(&r) % 10;
    struct slot *s = &slots[byte(&r) % SLOTS];
    unsigned char fill = (unsigned char)byte(&r);
    if (op <= 4 && s->p) op = 5; /* slot busy: free it instead */
    switch (op) {
      case 0: { /* malloc */
        size_t n = draw_size(&r);
        if (live + n > live_cap) break;
        unsigned char *p = tess_malloc(n);
        if (!p && may_fail(n)) break;
        if (!p) fail("malloc failed", s, n);
        accept(s, p, n, 0, fill, 0);
        live += n;
        break;
      }
      case 1: { /* calloc, the size split in two factors */
        size_t n = draw_size(&r);
        size_t k = 1 + byte(&r) % 8;
        if (live + n * k > live_cap) break;
        unsigned char *p = tess_calloc(k, n);
        if (!p && may_fail(n * k)) break;
        if (!p) fail("calloc failed", s, n * k);
        accept(s, p, n * k, 0, 0, 1);
        live += n * k;
        break;
      }
      case 2: { /* aligned_alloc, any power of two up to 4 MiB */
        size_t a = (size_t)1 << (byte(&r) % 23);
        size_t n = draw_size(&r);
        if (live + n > live_cap) break;
        unsigned char *p = tess_aligned_alloc(a, n);
        if (!p && may_fail(n + a)) break;
        if (!p) fail("aligned_alloc failed", s, a);
        accept(s, p, n, a, fill, 0);
        live += n;
        break;
      }
      case 3: { /* posix_memalign, also with invalid alignments */
        unsigned k = byte(&r);
        size_t a = (k & 0x80) ? (size_t)(k & 0x7f) : (size_t)1 << (k % 23);
        size_t n = draw_size(&r);
        if (live + n > live_cap) break;
        void *out = &slots; /* sentinel */
        int rc = tess_posix_memalign(&out, a, n);
        int valid = a >= sizeof(void *) && (a & (a - 1)) == 0;
        if (!valid) {
          if (rc != EINVAL || out != (void *)&slots)
            fail("posix_memalign accepted a bad alignment", s, a);
          break;
        }
        if (rc == ENOMEM && out == (void *)&slots) {
          errno = ENOMEM; /* (posix_memalign leaves errno alone) */
          if (may_fail(n + a)) break;
        }
        if (rc != 0) fail("posix_memalign failed", s, a);
        accept(s, out, n, a, fill, 0);
        live += n;
        break;
      }
      case 4: { /* realloc(NULL, n) */
        size_t n = draw_size(&r);
        if (live + n > live_cap) break;
        unsigned char *p = tess_realloc(NULL, n);
        if (!p && may_fail(n)) break;
        if (!p) fail("realloc(NULL) failed", s, n);
        accept(s, p, n, 0, fill, 0);
        live += n;
        break;
      }
      case 5: /* free or free_sized */
        if (s->p) release(s, &live, fill & 1);
        break;
      case 6: { /* realloc: keep the prefix, fill the new tail */
        if (!s->p) break;
        size_t n = draw_size(&r);
        if (live - s->size + n > live_cap) break;
        verify(s, s->size, "corrupted before realloc");
        unsigned char *p = tess_realloc(s->p, n);
        if (n == 0) { /* glibc semantics: frees, returns NULL */
          if (p) fail("realloc(p, 0) returned a block", s, 0);
          live -= s->size;
          s->p = NULL;
          break;
        }
        if (!p && may_fail(n)) { /* the block stays as it was */
          verify(s, s->size, "failed realloc changed the block");
          break;
        }
        if (!p) fail("realloc failed", s, n);
        size_t keep = s->size < n ? s->size : n;
        struct slot moved = {p, keep, 0, s->fill};
        verify(&moved, keep, "realloc lost the prefix");
        live = live - s->size + n;
        accept(s, p, n, 0, s->fill, 0);
        break;
      }
      case 7: { /* usable_size: every usable byte is writable */
        if (!s->p) break;
        size_t us = tess_usable_size(s->p);
        if (us < s->size) fail("usable size shrank", s, us);
        memset(s->p + s->size, fill, us - s->size);
        break;
      }
      case 8: { /* failing requests leave the slot alone */
        if (!s->p) break;
        volatile size_t huge = SIZE_MAX - byte(&r); /* no compile-time warning */
        errno = 0;
        void *q = tess_realloc(s->p, huge);
        if (q || errno != ENOMEM) fail("huge realloc did not fail with ENOMEM", s, 0);
        verify(s, s->size, "failed realloc changed the block");
        break;
      }
      default: /* verify; now and then end the "call" first: the heap goes
                  back to the pool with blocks live (in a fixed region its
                  slabs become orphans), and later frees and allocations
                  find them there */
        if ((fill & 7) == 0) tess_thread_cleanup();
        if (s->p) verify(s, s->size, "corrupted");
        break;
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p) release(&slots[i], &live, i & 1);
  tess_stats_get(&stats, sizeof stats);
  if (stats.allocs - allocs_before != stats.frees - frees_before) {
    fprintf(stderr, "fuzz_api: statistics: %llu allocations but %llu frees in one input\n",
            (unsigned long long)(stats.allocs - allocs_before),
            (unsigned long long)(stats.frees - frees_before));
    abort();
  }
  if (++inputs % 32 == 0) {
    const char *error = tess_heap_check();
    if (error != NULL) {
      fprintf(stderr, "fuzz_api: tess_heap_check: %s\n", error);
      abort();
    }
  }
  return 0;
}

#ifdef TESS_LIBFUZZER
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *mib = getenv("TESS_FUZZ_REGION_MIB");
  if (mib != NULL) use_fixed_region(strtoull(mib, NULL, 0));
  return 0;
}
#else
static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 2000;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 12345;
  size_t region_mib = argc > 3 ? strtoull(argv[3], NULL, 0) : 0;
  uint64_t s = seed ? seed : 1;
  static uint8_t buf[4096];
  if (region_mib) use_fixed_region(region_mib);
  printf("test_fuzz: %ld inputs from seed %llu%s\n", iterations, (unsigned long long)seed,
         region_mib ? " in a fixed region" : "");
  for (long i = 0; i < iterations; i++) {
    size_t n = 1 + next(&s) % sizeof buf;
    for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)(next(&s) >> 24);
    LLVMFuzzerTestOneInput(buf, n);
  }
  if (region_mib) printf("test_fuzz: %lu large requests found no room\n", no_room);
  printf("test_fuzz: ok\n");
  return 0;
}
#endif
