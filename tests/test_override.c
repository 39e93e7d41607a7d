/* The standard malloc names resolve to tessalloc when linking
 * libtessalloc.a, including for allocations made inside libc.
 *
 * tess_usable_size() aborts on a pointer tessalloc does not own, so "passes
 * tess_usable_size and equals malloc_usable_size" proves a block is ours.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tessalloc.h"

/* C23 names that glibc 2.36's headers do not declare yet. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);

static void ours(const char *what, void *p, size_t size) {
  REQUIRE(p != NULL, "%s returned NULL", what);
  size_t t = tess_usable_size(p); /* aborts if p is not tessalloc's */
  size_t m = malloc_usable_size(p);
  CHECK(t == m, "%s: tess_usable_size %zu != malloc_usable_size %zu", what, t, m);
  CHECK(t >= size, "%s: usable size %zu < %zu", what, t, size);
  memset(p, 0x3C, t);
}

static void same_object(const char *name, void *fn) {
  Dl_info a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  REQUIRE(dladdr(fn, &a) != 0, "dladdr(&%s) failed", name);
  REQUIRE(dladdr((void *)&tess_malloc, &b) != 0, "dladdr(&tess_malloc) failed");
  CHECK(a.dli_fbase == b.dli_fbase, "%s is in %s, tess_malloc in %s", name,
        a.dli_fname ? a.dli_fname : "?", b.dli_fname ? b.dli_fname : "?");
  CHECK(a.dli_fname == NULL || strstr(a.dli_fname, "libc.so") == NULL, "%s resolves into %s", name,
        a.dli_fname);
}

/* glibc's internal names and the old cfree: programs and libc's own
 * corners call them, and they must be ours too */
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);
void *__libc_memalign(size_t alignment, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);
void cfree(void *p);

#define NAMED(fn) {#fn, (void *)&fn}
static void test_symbols(void) {
  /* glibc's would work on its own arena (malloc_trim asking brk for the
   * break): ours do nothing and say so (below) */
  static const struct {
    const char *name;
    void *fn;
  } names[] = {NAMED(malloc),          NAMED(free),           NAMED(realloc),
               NAMED(calloc),          NAMED(malloc_trim),    NAMED(mallopt),
               NAMED(__libc_malloc),   NAMED(__libc_calloc),  NAMED(__libc_realloc),
               NAMED(__libc_free),     NAMED(__libc_memalign), NAMED(__libc_valloc),
               NAMED(__libc_pvalloc),  NAMED(cfree)};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    same_object(names[i].name, names[i].fn);
  }
  void *q = __libc_memalign(4096, 1 << 20);
  ours("__libc_memalign", q, 1 << 20);
  CHECK(((uintptr_t)q & 4095) == 0, "__libc_memalign(4096) gave %p", q);
  size_t held = mallinfo2().uordblks;
  cfree(q);
  CHECK(mallinfo2().uordblks + (1 << 20) <= held, "cfree did not free: %zu in use, %zu before",
        mallinfo2().uordblks, held);
  CHECK(malloc_trim(0) == 0, "malloc_trim released something");
  CHECK(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 0, "mallopt claimed to set a parameter");
  /* What libc itself calls: the global-scope definition. */
  void *g = dlsym(RTLD_DEFAULT, "malloc");
  CHECK(g == (void *)&malloc, "dlsym(RTLD_DEFAULT, \"malloc\") = %p, &malloc = %p", g,
        (void *)&malloc);
  g = dlsym(RTLD_DEFAULT, "free");
  CHECK(g == (void *)&free, "dlsym(RTLD_DEFAULT, \"free\") = %p, &free = %p", g, (void *)&free);
}

static void test_standard_names(void) {
  void *p = malloc(100);
  ours("malloc", p, 100);
  p = realloc(p, 5000);
  ours("realloc", p, 5000);
  free(p);

  p = calloc(10, 30);
  ours("calloc", p, 300);
  free(p);

  p = reallocarray(NULL, 20, 50);
  ours("reallocarray", p, 1000);
  p = reallocarray(p, 200, 50);
  ours("reallocarray grow", p, 10000);
  free(p);

  p = aligned_alloc(256, 1000);
  ours("aligned_alloc", p, 1000);
  CHECK(((uintptr_t)p & 255) == 0, "aligned_alloc(256) = %p", p);
  free(p);

  p = NULL;
  CHECK(posix_memalign(&p, 4096, 10000) == 0, "posix_memalign failed");
  ours("posix_memalign", p, 10000);
  CHECK(((uintptr_t)p & 4095) == 0, "posix_memalign(4096) = %p", p);
  free(p);

  p = memalign(64, 333);
  ours("memalign", p, 333);
  free(p);

  long pg = sysconf(_SC_PAGESIZE);
  p = valloc(10);
  ours("valloc", p, 10);
  CHECK(((uintptr_t)p & (uintptr_t)(pg - 1)) == 0, "valloc = %p", p);
  free(p);

  p = pvalloc(10);
  ours("pvalloc", p, (size_t)pg);
  free(p);

  p = malloc(200);
  ours("malloc", p, 200);
  free_sized(p, 200);
  p = aligned_alloc(128, 200);
  ours("aligned_alloc", p, 200);
  free_aligned_sized(p, 128, 200);

  /* Large and huge blocks through the standard names. */
  p = malloc(300 * 1024);
  ours("malloc(300KiB)", p, 300 * 1024);
  free(p);
  p = malloc(40 << 20);
  ours("malloc(40MiB)", p, 40 << 20);
  free(p);

  errno = 0;
  p = malloc(opaque(SIZE_MAX));
  CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX) = %p errno %d", p, errno);

  free(NULL);
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
}

/* Allocations made inside libc go through our malloc and our free takes
 * them back. */
static void test_libc_internal(void) {
  char *s = strdup("tessalloc override test");
  ours("strdup", s, 24);
  free(s);

  s = strndup("abcdefghijklmnopqrstuvwxyz", 10);
  ours("strndup", s, 11);
  free(s);

  s = NULL;
  int n = asprintf(&s, "%s-%d-%0500d", "x", 42, 7);
  CHECK(n == 505, "asprintf returned %d", n);
  ours("asprintf", s, (size_t)n + 1);
  free(s);

  /* getline grows its buffer with realloc. */
  static const char text[] =
      "short\n"
      "a somewhat longer line that makes getline grow its buffer "
      "beyond the first guess, several times over if possible......\n"
      "end\n";
  FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
  REQUIRE(f != NULL, "fmemopen");
  char *line = NULL;
  size_t cap = 0;
  int lines = 0;
  while (getline(&line, &cap, f) > 0) {
    lines++;
    ours("getline", line, strlen(line) + 1);
  }
  CHECK(lines == 3, "getline read %d lines", lines);
  free(line);
  fclose(f);

  /* A big getline buffer from a file. */
  FILE *t = tmpfile();
  REQUIRE(t != NULL, "tmpfile");
  for (int i = 0; i < 200000; i++) fputc('a' + i % 26, t);
  fputc('\n', t);
  rewind(t);
  line = NULL;
  cap = 0;
  ssize_t len = getline(&line, &cap, t);
  CHECK(len == 200001, "getline of a long line returned %zd", len);
  ours("getline(long)", line, 200002);
  free(line);
  fclose(t);

  /* open_memstream and friends allocate inside libc too. */
  char *buf = NULL;
  size_t size = 0;
  FILE *m = open_memstream(&buf, &size);
  REQUIRE(m != NULL, "open_memstream");
  for (int i = 0; i < 10000; i++) fprintf(m, "%d,", i);
  fclose(m);
  ours("open_memstream", buf, size + 1);
  free(buf);
}

/* malloc_stats' "max mmap" lines, as glibc's: the most blocks with
 * mappings of their own (huge blocks here), and bytes of them, live at
 * once; they printed the ones live now (0 after the frees; a review). */
static void test_malloc_stats_peaks(void) {
  void *a = malloc((size_t)32 << 20), *b = malloc((size_t)32 << 20);
  REQUIRE(a != NULL && b != NULL, "two 32 MiB blocks");
  free(a);
  free(b);
  char path[] = "/tmp/test_override_statsXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0, "mkstemp");
  int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0, "dup2");
  malloc_stats();
  dup2(saved, STDERR_FILENO);
  close(saved);
  char text[1024] = "";
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  unlink(path);
  REQUIRE(n > 0, "malloc_stats wrote nothing");
  text[n] = '\0';
  unsigned long long regions = 0, bytes = 0;
  const char *r = strstr(text, "max mmap regions =");
  const char *m = strstr(text, "max mmap bytes   =");
  REQUIRE(r != NULL && m != NULL, "malloc_stats: %s", text);
  sscanf(r, "max mmap regions = %llu", &regions);
  sscanf(m, "max mmap bytes   = %llu", &bytes);
  CHECK(regions >= 2 && bytes >= (64ull << 20), "max mmap regions %llu, bytes %llu", regions,
        bytes);
}

/* glibc's old mallinfo (int fields) says what mallinfo2 says, clamped */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void test_mallinfo_int(void) {
  same_object("mallinfo", (void *)&mallinfo);
  same_object("mallinfo2", (void *)&mallinfo2);
  struct mallinfo2 before = mallinfo2();
  void *p = malloc(3 << 20);
  ours("malloc(3 MiB)", p, 3 << 20);
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m = mallinfo();
  CHECK(m2.uordblks >= before.uordblks + (3 << 20), "mallinfo2: %zu in use after 3 MiB, %zu before",
        m2.uordblks, before.uordblks);
  size_t in_use = m2.uordblks > INT_MAX ? INT_MAX : m2.uordblks;
  CHECK((size_t)m.uordblks == in_use, "mallinfo().uordblks %d, mallinfo2 %zu", m.uordblks,
        m2.uordblks);
  size_t arena = m2.arena > INT_MAX ? INT_MAX : m2.arena;
  CHECK((size_t)m.arena == arena, "mallinfo().arena %d, mallinfo2 %zu", m.arena, m2.arena);
  free(p);
}
#pragma GCC diagnostic pop

int main(void) {
  test_symbols();
  test_mallinfo_int();
  test_standard_names();
  test_libc_internal();
  test_malloc_stats_peaks();
  return check_finish("test_override");
}
