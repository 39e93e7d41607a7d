/* A sampling profiler for machines without perf (the lent 16-CPU device):
 * preloaded into enclave_bench, it gives every thread (made with
 * pthread_create, and the main one) a timer that interrupts it every
 * PROF_US microseconds of wall time (default 200), and records the
 * interrupted instruction with the 8 words at the top of the stack
 * (return addresses among them). A thread that is blocked is sampled in
 * its system call, so waiting shows too. It writes them with
 * /proc/self/maps to $PROF_OUT when the program calls _exit
 * (enclave_bench ends that way). prof.py symbolizes the file.
 * (A process-wide ITIMER_PROF gave a tenth of the samples on 16 CPUs.)
 *
 *   cc -O2 -shared -fPIC -o libprof.so prof.c -ldl -lrt
 *   PROF_OUT=a.prof LD_PRELOAD=./libprof.so enclave_bench ...
 *
 * The handler writes only to a static array, so it is safe in any code,
 * allocators included. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_SAMPLES (1u << 20)

#define STACK_WORDS 8

/* the pc, then the words at the stack top (return addresses among them) */
static uintptr_t samples[MAX_SAMPLES][1 + STACK_WORDS];
static atomic_uint taken;
static const char *out_path;
static long period_us = 200;
static pthread_key_t timer_key;

static void on_prof(int sig, siginfo_t *info, void *context) {
  (void)sig;
  (void)info;
  const ucontext_t *uc = context;
  unsigned i = atomic_fetch_add_explicit(&taken, 1, memory_order_relaxed);
  if (i >= MAX_SAMPLES) return;
  samples[i][0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  const uintptr_t *sp = (const uintptr_t *)uc->uc_mcontext.gregs[REG_RSP];
  for (int w = 0; w < STACK_WORDS; w++) samples[i][1 + w] = sp[w];
}

/* A timer for the calling thread (deleted when it exits). */
static void thread_timer_start(void) {
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return;
  struct itimerspec every = {{0, period_us * 1000}, {0, period_us * 1000}};
  timer_settime(timer, 0, &every, NULL);
  pthread_setspecific(timer_key, timer);
}

static void thread_timer_stop(void *timer) { timer_delete((timer_t)timer); }

typedef struct {
  void *(*fn)(void *);
  void *arg;
} start_t;

static void *sampled_start(void *arg) {
  start_t start = *(start_t *)arg;
  free(arg);
  thread_timer_start();
  return start.fn(start.arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (real == NULL)
    real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
        RTLD_NEXT, "pthread_create");
  start_t *start = out_path != NULL ? malloc(sizeof *start) : NULL;
  if (start == NULL) return real(thread, attr, fn, arg);
  start->fn = fn;
  start->arg = arg;
  int err = real(thread, attr, sampled_start, start);
  if (err != 0) free(start);
  return err;
}

__attribute__((constructor)) static void prof_start(void) {
  out_path = getenv("PROF_OUT");
  if (out_path == NULL) return;
  const char *us = getenv("PROF_US");
  if (us != NULL && atol(us) > 0) period_us = atol(us);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  pthread_key_create(&timer_key, thread_timer_stop);
  thread_timer_start();
}

static void write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n <= 0) return;
    p += n;
    len -= (size_t)n;
  }
}

/* Text: "maps" then the maps file, "samples N", then per sample the pc
 * and the stack words, in hex. */
static void prof_dump(void) {
  if (out_path == NULL) return;
  signal(SIGPROF, SIG_IGN);
  int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  static char buf[1 << 16];
  write_all(fd, "maps\n", 5);
  int maps = open("/proc/self/maps", O_RDONLY);
  ssize_t n;
  while (maps >= 0 && (n = read(maps, buf, sizeof buf)) > 0) write_all(fd, buf, (size_t)n);
  if (maps >= 0) close(maps);
  unsigned count = atomic_load(&taken);
  if (count > MAX_SAMPLES) count = MAX_SAMPLES;
  static const char digits[] = "0123456789abcdef";
  char line[(1 + STACK_WORDS) * 17];
  size_t len = 0;
  unsigned c = count;
  char num[16];
  int k = 0;
  do num[k++] = (char)('0' + c % 10);
  while ((c /= 10) != 0);
  memcpy(line, "samples ", 8);
  len = 8;
  while (k > 0) line[len++] = num[--k];
  line[len++] = '\n';
  write_all(fd, line, len);
  for (unsigned i = 0; i < count; i++) {
    len = 0;
    for (int w = 0; w <= STACK_WORDS; w++) {
      for (int shift = 60; shift >= 0; shift -= 4)
        line[len++] = digits[(samples[i][w] >> shift) & 15];
      line[len++] = w < STACK_WORDS ? ' ' : '\n';
    }
    write_all(fd, line, len);
  }
  close(fd);
}

/* enclave_bench ends with _exit: take it, write, then end the process. */
void _exit(int status) {
  prof_dump();
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
