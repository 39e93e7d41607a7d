/* tb_enclave and tb_frag: workloads A and B of the fixed-heap issue under
 * tessbench's common command line (wl.h). Both run the enclave harness
 * (bench/enclave/enclave_bench) with the allocator's enclave plugin, as a
 * child, and turn its result line into the common one.
 *
 * tb_enclave (workload A, Open Enclave's pluggable_allocator sample): each
 * of --threads threads makes one ECALL in which it keeps a FIFO of 15
 * blocks, malloc(rand() % --size) (16384) and a free of the oldest,
 * --iterations (100000) times, in a heap of 8192 pages; a new host thread
 * per ECALL. A fixed amount of work: --duration is refused.
 * ops = malloc+free pairs (the harness's mallocs).
 *
 * tb_frag (workload B, the fragmentation soak): a 64 MiB enclave, --threads
 * worker threads and max(1, --threads / 4) other threads making rapid
 * ECALLs with bursts of mixed sizes and a shared pool of long-lived blocks
 * (capped at --size requested bytes, 16M), for --duration seconds (10);
 * --csv FILE receives the time series of live bytes and footprint. Time-
 * bound: --iterations is refused. ops = ECALLs.
 *
 * The harness checks every block (the first and last byte and one word per
 * 4 KiB, written at malloc and read back before the free), pointers outside
 * the region, writes outside it, and OS memory calls after init. A failed
 * check makes it print "enclave_bench: FAIL: ..." and exit 1: this program
 * then exits with WL_EXIT_CHECK (3), like every workload.
 *
 * The harness is the one this build made (TB_ENCLAVE_BENCH at compile
 * time); --harness PATH names another. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl.h"

#ifndef TB_ENCLAVE_WORKLOAD
#error "define TB_ENCLAVE_WORKLOAD: 'a' (tb_enclave) or 'b' (tb_frag)"
#endif
#ifndef TB_ENCLAVE_BENCH
#define TB_ENCLAVE_BENCH "enclave_bench"
#endif

#define IS_FRAG (TB_ENCLAVE_WORKLOAD == 'b')
#define MAX_ARGS 32
#define LINE_MAX_BYTES 8192

#if IS_FRAG
#define WORKLOAD_NAME "frag"
#define DEFAULT_SIZE ((size_t)16 << 20) /* the pool's cap */
#define DEFAULT_ITERATIONS 0            /* refused: time-bound */
#define DEFAULT_DURATION 10
#else
#define WORKLOAD_NAME "enclave"
#define DEFAULT_SIZE 16384 /* sizes are rand() % this */
#define DEFAULT_ITERATIONS 100000
#define DEFAULT_DURATION 0 /* refused: a fixed amount of work */
#endif

static wl_args_t args = {.name = WORKLOAD_NAME,
                         .threads = 1,
                         .size = DEFAULT_SIZE,
                         .iterations = DEFAULT_ITERATIONS,
                         .duration = DEFAULT_DURATION};
static const char *plugin;
static const char *harness = TB_ENCLAVE_BENCH;
#if IS_FRAG
static const char *series_csv;
#endif

#if IS_FRAG
/* frag's other threads: a quarter of the workers, at least one */
static int others_count(void) { return args.threads / 4 > 0 ? args.threads / 4 : 1; }
#endif

/* The harness's result line, cut into key=value pairs (in place). */
#define MAX_PAIRS 128
static char result_line[LINE_MAX_BYTES];
static const char *keys[MAX_PAIRS], *values[MAX_PAIRS];
static int npairs;

static void split_result(void) {
  char *save = NULL;
  for (char *tok = strtok_r(result_line, " \n", &save); tok != NULL && npairs < MAX_PAIRS;
       tok = strtok_r(NULL, " \n", &save)) {
    char *eq = strchr(tok, '=');
    if (eq == NULL) continue;
    *eq = '\0';
    keys[npairs] = tok;
    values[npairs++] = eq + 1;
  }
}

static const char *value_of(const char *key) {
  for (int i = 0; i < npairs; i++) {
    if (strcmp(keys[i], key) == 0) return values[i];
  }
  return NULL;
}

static const char *require(const char *key) {
  const char *v = value_of(key);
  if (v == NULL) {
    fprintf(stderr, "tb_%s: the harness's result line has no %s=\n", args.name, key);
    exit(1);
  }
  return v;
}

static uint64_t require_u64(const char *key) { return strtoull(require(key), NULL, 10); }

static void print_result(void) {
  split_result();
  double elapsed = strtod(require("elapsed_ms"), NULL) / 1000;
  char extra[1024];
#if IS_FRAG
  /* the work is the allocation calls: ECALLs weigh the other threads'
   * short calls, whose share differs by allocator (run_enclave.py judges
   * workload B the same way) */
  uint64_t ops = require_u64("mallocs");
  long long live = strtoll(require("peak_live_bytes"), NULL, 10);
  long long footprint = strtoll(require("peak_footprint_bytes"), NULL, 10);
  char ratio[32] = "";
  /* a negative footprint: the allocator cannot tell its own */
  if (live > 0 && footprint >= 0) snprintf(ratio, sizeof ratio, "%.3f", (double)footprint / live);
  snprintf(extra, sizeof extra,
           "others=%d ecalls=%s worker_ecalls=%s nulls=%s peak_live_bytes=%lld "
           "peak_footprint_bytes=%lld peak_touched_bytes=%s footprint_ratio=%s "
           "os_calls_after_init=%s",
           others_count(), require("ecalls"), require("worker_ecalls"), require("nulls"), live,
           footprint, require("peak_touched_bytes"), ratio, require("os_calls_after_init"));
#else
  uint64_t ops = require_u64("mallocs");
  /* named as frag's: the heap is touched only more as the run goes on */
  snprintf(extra, sizeof extra,
           "nulls=%s peak_footprint_bytes=%s peak_touched_bytes=%s os_calls_after_init=%s",
           require("nulls"), require("footprint_peak"), require("touched_bytes"),
           require("os_calls_after_init"));
#endif
  wl_result(&args, ops, elapsed, "%s", extra);
}

/* Runs the harness with argv, passing its output lines on to stdout but
 * keeping its result line; returns its wait status. */
static int run_harness(char **argv) {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("pipe");
    exit(1);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execv(argv[0], argv);
    fprintf(stderr, "tb_%s: cannot run %s: %s\n", args.name, argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  if (in == NULL) {
    perror("fdopen");
    exit(1);
  }
  char line[LINE_MAX_BYTES];
  while (fgets(line, sizeof line, in) != NULL) {
    if (strncmp(line, "result ", 7) == 0) {
      memcpy(result_line, line, sizeof line);
    } else {
      fputs(line, stdout);
    }
  }
  fclose(in);
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      perror("waitpid");
      exit(1);
    }
  }
  return status;
}

int main(int argc, char **argv) {
  const wl_option_t options[] = {
    {"allocator", WL_OPT_STRING, &plugin, "the allocator's enclave plugin, libfixed_*.so"},
    {"harness", WL_OPT_STRING, &harness, "the enclave harness (this build's enclave_bench)"},
#if IS_FRAG
    {"csv", WL_OPT_STRING, &series_csv, "write the time series (t_s, live_bytes, ...) here"},
#endif
    {NULL, WL_OPT_STRING, NULL, NULL},
  };
  wl_parse(argc, argv, &args, options,
#if IS_FRAG
           "The fragmentation soak (workload B) in the enclave harness: a 64 MiB heap,\n"
           "--threads workers and threads/4 (at least 1) other threads making ECALLs for\n"
           "--duration seconds (10); --size caps the long-lived pool (16M). Time-bound:\n"
           "--iterations is refused. ops = ECALLs."
#else
           "Open Enclave's pluggable_allocator sample (workload A) in the enclave harness:\n"
           "--threads ECALLs, each --iterations times malloc(rand() % --size) + free of the\n"
           "oldest of 15 blocks, in a heap of 8192 pages. A fixed amount of work:\n"
           "--duration is refused. ops = malloc+free pairs."
#endif
  );
  if (plugin == NULL) {
    fprintf(stderr, "tb_%s: --allocator PLUGIN is required (try --help)\n", args.name);
    return WL_EXIT_USAGE;
  }
  char threads[24], seed[24], size[24], work[32], others[24];
  snprintf(threads, sizeof threads, "%d", args.threads);
  snprintf(seed, sizeof seed, "%" PRIu64, args.seed);
  snprintf(size, sizeof size, "%zu", args.size);
  char *cmd[MAX_ARGS];
  int n = 0;
  cmd[n++] = (char *)harness;
  cmd[n++] = "--allocator";
  cmd[n++] = (char *)plugin;
  cmd[n++] = "--seed";
  cmd[n++] = seed;
#if IS_FRAG
  if (args.iterations != 0) {
    fprintf(stderr, "tb_frag: the soak is time-bound: --duration, not --iterations\n");
    return WL_EXIT_USAGE;
  }
  snprintf(others, sizeof others, "%d", others_count());
  snprintf(work, sizeof work, "%g", args.duration);
  cmd[n++] = "--workload";
  cmd[n++] = "b";
  cmd[n++] = "--workers";
  cmd[n++] = threads;
  cmd[n++] = "--others";
  cmd[n++] = others;
  cmd[n++] = "--duration";
  cmd[n++] = work;
  cmd[n++] = "--pool-bytes";
  cmd[n++] = size;
  if (series_csv != NULL) {
    cmd[n++] = "--csv";
    cmd[n++] = (char *)series_csv;
  }
#else
  if (args.duration > 0) {
    fprintf(stderr,
            "tb_enclave: the sample is a fixed amount of work: --iterations, not "
            "--duration\n");
    return WL_EXIT_USAGE;
  }
  (void)others;
  snprintf(work, sizeof work, "%" PRIu64, args.iterations);
  cmd[n++] = "--workload";
  cmd[n++] = "a";
  cmd[n++] = "--threads";
  cmd[n++] = threads;
  cmd[n++] = "--num-allocations";
  cmd[n++] = work;
  cmd[n++] = "--max-allocation-size";
  cmd[n++] = size;
#endif
  cmd[n] = NULL;

  int status = run_harness(cmd);
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "tb_%s: the harness was killed by signal %d\n", args.name, WTERMSIG(status));
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  int code = WEXITSTATUS(status);
  if (code == 1) return WL_EXIT_CHECK; /* "enclave_bench: FAIL: ..." on stderr */
  if (code != 0) return code;
  if (result_line[0] == '\0') {
    fprintf(stderr, "tb_%s: the harness printed no result line\n", args.name);
    return 1;
  }
  print_result();
  return 0;
}
