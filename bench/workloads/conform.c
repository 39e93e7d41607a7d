/* tb_conform: how the preloaded allocator answers the malloc family's edge
 * cases -- not a workload (nothing is timed), but facts for the report.
 *
 * Each check runs in a child process of its own, so that an allocator that
 * crashes on one (jemalloc on malloc_usable_size of a pvalloc'ed block, whose
 * pvalloc it does not replace) fails that check and no other. One line per
 * check on stdout:
 *
 *   conform check=<name> result=ok|fail|crash [detail=<word>]
 *
 * then "conform checks=N ok=N". Exit status 0 however the checks went (2 on
 * a bad command line): the findings are data. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A check: returns NULL when the allocator behaves, else a one-word reason. */
typedef const char *(*check_fn)(void);

/* volatile: the compiler must not fold the calls on sizes it can see */
static volatile size_t huge = SIZE_MAX;
static volatile size_t half = SIZE_MAX / 2 + 1;

/* NULL with errno ENOMEM; else what happened ("not-null", "errno-22") */
static const char *enomem_or(const void *p, int err) {
  static char why[32];
  if (p != NULL) return "not-null";
  if (err == ENOMEM) return NULL;
  snprintf(why, sizeof why, "errno-%d", err);
  return why;
}

static const char *malloc_huge(void) {
  errno = 0;
  void *p = malloc(huge);
  return enomem_or(p, errno);
}

static const char *malloc_above_ptrdiff(void) {
  errno = 0;
  void *p = malloc(half);
  return enomem_or(p, errno);
}

static const char *calloc_overflow(void) {
  errno = 0;
  void *p = calloc(half, 2);
  return enomem_or(p, errno);
}

static const char *realloc_huge_keeps_block(void) {
  char *p = malloc(64);
  if (p == NULL) return "malloc-null";
  memset(p, 0x5a, 64);
  errno = 0;
  void *q = realloc(p, huge);
  const char *why = enomem_or(q, errno);
  if (why != NULL) return why;
  for (int i = 0; i < 64; i++) {
    if (p[i] != 0x5a) return "block-changed";
  }
  free(p);
  return NULL;
}

static const char *malloc_zero_unique(void) {
  void *a = malloc(0), *b = malloc(0);
  if (a == NULL || b == NULL) return "null";
  bool same = a == b;
  free(a);
  free(b);
  return same ? "same-pointer" : NULL;
}

static const char *usable_size_writable(void) {
  for (size_t n = 1; n <= 100000; n = n * 3 + 1) {
    unsigned char *p = malloc(n);
    if (p == NULL) return "null";
    size_t usable = malloc_usable_size(p);
    if (usable < n) return "too-small";
    memset(p, 0xa5, usable);
    free(p);
  }
  return NULL;
}

static const char *posix_memalign_einval(void) {
  void *p = NULL;
  if (posix_memalign(&p, 24, 16) != EINVAL) return "not-EINVAL";
  return NULL;
}

static const char *aligned_alloc_large(void) {
  /* the size a multiple of the alignment, as C11 wanted it */
  for (size_t align = 16; align <= ((size_t)1 << 22); align <<= 1) {
    void *p = aligned_alloc(align, 2 * align);
    if (p == NULL) return "null";
    bool ok = ((uintptr_t)p & (align - 1)) == 0;
    free(p);
    if (!ok) {
      static char why[32];
      snprintf(why, sizeof why, "misaligned-at-%zu", align);
      return why;
    }
  }
  return NULL;
}

static const char *memalign_page(void) {
  void *p = memalign(4096, 10);
  if (p == NULL) return "null";
  bool ok = ((uintptr_t)p & 4095) == 0;
  free(p);
  return ok ? NULL : "misaligned";
}

static const char *pvalloc_usable_free(void) {
  void *p = pvalloc(100);
  if (p == NULL) return "null";
  if (((uintptr_t)p & 4095) != 0) return "misaligned";
  if (malloc_usable_size(p) < 4096) return "too-small";
  free(p);
  return NULL;
}

static const char *valloc_free(void) {
  void *p = valloc(5000);
  if (p == NULL) return "null";
  bool ok = ((uintptr_t)p & 4095) == 0;
  free(p);
  return ok ? NULL : "misaligned";
}

static const struct {
  const char *name;
  check_fn fn;
} checks[] = {
    {"malloc_huge_enomem", malloc_huge},
    {"malloc_above_ptrdiff_enomem", malloc_above_ptrdiff},
    {"calloc_overflow_enomem", calloc_overflow},
    {"realloc_huge_keeps_block", realloc_huge_keeps_block},
    {"malloc_zero_unique", malloc_zero_unique},
    {"usable_size_writable", usable_size_writable},
    {"posix_memalign_einval", posix_memalign_einval},
    {"aligned_alloc_4mib", aligned_alloc_large},
    {"memalign_page", memalign_page},
    {"valloc_free", valloc_free},
    {"pvalloc_usable_free", pvalloc_usable_free},
};
#define NCHECKS (sizeof checks / sizeof checks[0])

int main(int argc, char **argv) {
  if (argc > 1) {
    fprintf(stderr,
            "usage: %s (no arguments): runs the malloc family's edge-case checks under the "
            "preloaded allocator\n",
            argv[0]);
    return strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  int passed = 0;
  for (size_t i = 0; i < NCHECKS; i++) {
    fflush(stdout);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      close(fds[0]);
      const char *why = checks[i].fn();
      const char *text = why != NULL ? why : "";
      ssize_t n = write(fds[1], text, strlen(text));
      _exit(n < 0 ? 1 : why != NULL ? 1 : 0);
    }
    close(fds[1]);
    char why[64] = "";
    ssize_t n = read(fds[0], why, sizeof why - 1);
    why[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) return 1;
    }
    printf("conform check=%s ", checks[i].name);
    if (WIFSIGNALED(status)) {
      printf("result=crash detail=signal-%d\n", WTERMSIG(status));
    } else if (WEXITSTATUS(status) == 0) {
      printf("result=ok\n");
      passed++;
    } else {
      printf("result=fail detail=%s\n", why[0] != '\0' ? why : "unknown");
    }
  }
  printf("conform checks=%zu ok=%d\n", NCHECKS, passed);
  return 0;
}
