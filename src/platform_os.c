/* Linux implementation of the platform contract (platform.h). */
#include "platform.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* size bytes at a multiple of align: a larger mapping, trimmed */
static void *map_aligned(size_t size, size_t align, int flags) {
  int saved = errno; /* a failed mapping is not the caller's error */
  size_t span = size + align - TESS_PLAT_PAGE;
  if (span < size) return NULL;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (raw == MAP_FAILED) {
    errno = saved;
    return NULL;
  }
  uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = start - (uintptr_t)raw;
  size_t tail = span - head - size;
  if (head) munmap(raw, head);
  if (tail) munmap((char *)start + size, tail);
  errno = saved;
  return (void *)start;
}

/* MAP_NORESERVE: address space, not charged against the commit limit;
 * pages are allocated as they are touched. */
void *tessi_plat_reserve(size_t size, size_t align) {
  return map_aligned(size, align, MAP_NORESERVE);
}

void *tessi_plat_map(size_t size, size_t align) { return map_aligned(size, align, 0); }

void tessi_plat_release(void *addr, size_t size) {
  int saved = errno;
  munmap(addr, size);
  errno = saved;
}

bool tessi_plat_decommit(void *addr, size_t size) {
  int saved = errno;
  bool ok = madvise(addr, size, MADV_DONTNEED) == 0;
  errno = saved;
  return ok;
}

void *tessi_plat_remap(void *addr, size_t old_size, size_t new_size) {
  int saved = errno;
  void *p = mremap(addr, old_size, new_size, MREMAP_MAYMOVE);
  errno = saved;
  return p == MAP_FAILED ? NULL : p;
}

uint32_t tessi_plat_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

void tessi_plat_yield(void) { sched_yield(); }

/* A warning's write may fail (no standard error): its errno is not the
 * caller's, whose allocation succeeds (a malformed option made the first
 * malloc leave EBADF). write() is a cancellation point, which a malloc
 * must not be (POSIX): a thread with a cancellation request pending ended
 * in the first malloc's report, holding the initialization's lock, and
 * every later malloc spun on it (test_options cancel-warn). */
void tessi_plat_write_error(const char *msg, size_t len) {
  int saved = errno;
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  while (len > 0) {
    ssize_t n = write(STDERR_FILENO, msg, len);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    msg += n;
    len -= (size_t)n;
  }
  pthread_setcancelstate(cancel, &cancel);
  errno = saved;
}

_Noreturn void tessi_plat_abort(void) { abort(); }

const char *tessi_plat_getenv(const char *name) {
  /* environ is set before any constructor runs; getenv() would do too, but
   * reading it directly is guaranteed not to allocate. */
  size_t len = strlen(name);
  if (environ == NULL) return NULL;
  for (char **e = environ; *e != NULL; e++) {
    if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') return *e + len + 1;
  }
  return NULL;
}

size_t tessi_plat_address_limit(void) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return limit.rlim_cur < SIZE_MAX ? (size_t)limit.rlim_cur : SIZE_MAX;
}

unsigned tessi_plat_cpu_count(void) {
  /* glibc's count leaves ENOENT where /sys is not mounted, and the first
   * malloc left it to its caller (test_options cpus-errno) */
  int saved = errno;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  errno = saved;
  return n > 0 ? (unsigned)n : 1u;
}

static pthread_key_t thread_key;
static _Atomic(int) thread_key_ready;

bool tessi_plat_thread_exit_init(void (*on_exit)(void *arg)) {
  /* glibc's pthread_key_create does not allocate */
  if (pthread_key_create(&thread_key, on_exit) != 0) return false;
  atomic_store_explicit(&thread_key_ready, 1, memory_order_release);
  return true;
}

void tessi_plat_thread_watch(void *arg) {
  /* a thread may allocate again in a later destructor: setting the key
   * again makes glibc run on_exit again (up to four rounds) */
  if (atomic_load_explicit(&thread_key_ready, memory_order_acquire)) {
    pthread_setspecific(thread_key, arg);
  }
}

/* (Linux ids are below PID_MAX_LIMIT, 2^22: TESS_PLAT_ID_BITS) */
int32_t tessi_plat_thread_id(void) { return (int32_t)syscall(SYS_gettid); }

int32_t tessi_plat_process_id(void) { return (int32_t)getpid(); }

bool tessi_plat_thread_gone(int32_t pid, int32_t tid) {
  int saved = errno;
  bool gone = syscall(SYS_tgkill, (long)pid, (long)tid, 0L) != 0 && errno == ESRCH;
  errno = saved;
  return gone;
}

#if TESS_OVERRIDE
extern void *__dso_handle;

typedef int (*register_atfork_fn)(void (*)(void), void (*)(void), void (*)(void), void *);

int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso);

int tessi_plat_register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                               void *dso) {
  static _Atomic(register_atfork_fn) glibc_register;
  register_atfork_fn fn = atomic_load_explicit(&glibc_register, memory_order_acquire);
  if (fn == NULL) {
    *(void **)&fn = dlsym(RTLD_NEXT, "__register_atfork"); /* POSIX's cast */
    if (fn == NULL) {
      /* a static program: the __register_atfork linked is glibc's where
       * the program forks (ours is weak: init.c), else ours, which comes
       * back here, and there is no fork to prepare for: done (pthread_atfork
       * may fail with ENOMEM only, and said ENOSYS: a review) */
      static __thread bool falling_back;
      if (falling_back) return 0;
      falling_back = true;
      int rc = __register_atfork(prepare, parent, child, dso);
      falling_back = false;
      return rc;
    }
    atomic_store_explicit(&glibc_register, fn, memory_order_release);
  }
  return fn(prepare, parent, child, dso);
}

/* (pthread_atfork would come back through our __register_atfork) */
void tessi_plat_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)tessi_plat_register_atfork(prepare, parent, child, &__dso_handle);
}
#else
void tessi_plat_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  pthread_atfork(prepare, parent, child);
}
#endif
