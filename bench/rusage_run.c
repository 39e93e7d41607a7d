/* rusage_run — run a command and report its resource usage from wait4.
 *
 *   rusage_run -o FILE [-p PRELOAD] -- COMMAND [ARG...]
 *
 * Forks, sets LD_PRELOAD=PRELOAD in the child only (removes LD_PRELOAD
 * when -p is absent or empty), execs COMMAND, waits for it with wait4 and
 * writes one line to FILE:
 *
 *   status=<exit code or -signal> max_rss_kib=<n> user_s=<t> sys_s=<t>
 *   minor_faults=<n> major_faults=<n>
 *
 * Exits with COMMAND's exit code (128 + signal when it was killed).
 *
 * Why not wait4 from the Python driver directly: on Linux a process's
 * ru_maxrss keeps the high-water mark of the image it exec'ed from, so a
 * child forked from a 25 MB Python reports at least 25 MB. Forked from this
 * small program instead, the measured program's own peak dominates.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child = -1;

/* Pass termination on to the child, so that a killed driver leaves no
 * orphan behind. */
static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

static double seconds(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6; }

int main(int argc, char **argv) {
  const char *out = NULL, *preload = NULL;
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
      out = argv[++i];
    else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
      preload = argv[++i];
    else
      break;
  }
  if (out == NULL || i >= argc) {
    fprintf(stderr, "usage: rusage_run -o FILE [-p PRELOAD] -- COMMAND [ARG...]\n");
    return 125;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);

  child = fork();
  if (child < 0) {
    perror("rusage_run: fork");
    return 125;
  }
  if (child == 0) {
    if (preload != NULL && preload[0] != '\0')
      setenv("LD_PRELOAD", preload, 1);
    else
      unsetenv("LD_PRELOAD");
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "rusage_run: cannot run %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }

  int status;
  struct rusage ru;
  pid_t got;
  do got = wait4(child, &status, 0, &ru);
  while (got < 0 && errno == EINTR);
  if (got < 0) {
    perror("rusage_run: wait4");
    return 125;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);

  FILE *f = fopen(out, "w");
  if (f == NULL) {
    perror("rusage_run: cannot write the report");
    return 125;
  }
  fprintf(f,
          "status=%d max_rss_kib=%ld user_s=%.6f sys_s=%.6f minor_faults=%ld "
          "major_faults=%ld\n",
          code, ru.ru_maxrss, seconds(ru.ru_utime), seconds(ru.ru_stime), ru.ru_minflt,
          ru.ru_majflt);
  if (fclose(f) != 0) {
    perror("rusage_run: cannot write the report");
    return 125;
  }
  return code >= 0 ? code : 128 - code;
}
