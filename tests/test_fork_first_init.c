/* fork() while another thread's first call initializes tessalloc (the
 * tess_* names): the child must not inherit a lock that thread held.
 *
 * Each trial runs in a process of its own, forked before tessalloc was
 * ever used there: a thread's first call is tess_stats_print into a pipe
 * nobody reads (it initializes tessalloc, then blocks writing the report
 * with the report's lock held), and the main thread forks at once. The
 * child allocates and prints a report. Before the fork handlers went in
 * at the start of the first initialization, 3 of 20 such children waited
 * for good (the handlers were registered only once it had ended).
 *
 * Usage: test_fork_first_init [trials]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tessalloc.h"

enum { CHILD_ALARM_S = 10 };

static FILE *g_full_pipe;
static atomic_int g_calling;

static void *first_call(void *arg) {
  (void)arg;
  atomic_store(&g_calling, 1);
  for (;;) tess_stats_print(g_full_pipe); /* blocks once the pipe is full */
  return NULL;
}

/* One trial, in a process where tessalloc is not initialized yet: 0 when
 * the child of the fork made as the first call began exited cleanly. */
static int trial(void) {
  int fds[2];
  if (pipe(fds) != 0) return 10;
  g_full_pipe = fdopen(fds[1], "w");
  FILE *devnull = fopen("/dev/null", "w");
  if (g_full_pipe == NULL || devnull == NULL) return 11;
  /* unbuffered: neither makes libc allocate in the child */
  setvbuf(g_full_pipe, NULL, _IONBF, 0);
  setvbuf(devnull, NULL, _IONBF, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, first_call, NULL) != 0) return 12;
  while (!atomic_load(&g_calling)) {
  }
  pid_t pid = fork(); /* as its first call begins: mostly while it initializes */
  if (pid < 0) return 13;
  if (pid == 0) {
    alarm(CHILD_ALARM_S); /* a lock held for good becomes a SIGALRM death */
    void *p = tess_malloc(100);
    tess_stats_print(devnull);
    tess_free(p);
    _exit(p != NULL ? 0 : 2);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 14;
  if (WIFSIGNALED(status)) return 20 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 15;
}

int main(int argc, char **argv) {
  int trials = argc > 1 ? atoi(argv[1]) : 50;
  int failed = 0;
  for (int k = 0; k < trials; k++) {
    pid_t pid = fork(); /* tessalloc is not initialized in this process */
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) _exit(trial());
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid");
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    if (code != 0) failed++;
    CHECK(code == 0, "trial %d: status %d%s", k, code,
          code == 20 + 14 ? " (the child hung: a lock held across fork)" : "");
  }
  printf("test_fork_first_init: %d trials, %d failed\n", trials, failed);
  return check_finish("test_fork_first_init");
}
