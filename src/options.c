/* TESS_* environment options, read once at start-up. Bad values are
 * reported (one line) and the default is kept. */
#include "internal.h"

#include <string.h>

tess_options_t tessi_options = {
    .decommit_delay_ms = 250,
    .decommit_min = 64 * 1024,
    .reserve = (size_t)64 << 30,
    .huge_threshold = (size_t)16 << 20,
    .heap_cache = 512 * 1024,
    .partitions = 0,
    .heap_size = 0,
};

bool tessi_parse_size(const char *text, size_t *out) {
  if (text == NULL || *text == '\0') return false;
  size_t value = 0;
  const char *c = text;
  for (; *c >= '0' && *c <= '9'; c++) {
    size_t digit = (size_t)(*c - '0');
    if (value > (SIZE_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  if (c == text) return false;
  unsigned shift = 0;
  switch (*c) {
    case 'k':
    case 'K':
      shift = 10;
      c++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      c++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      c++;
      break;
    case 't':
    case 'T':
      shift = 40;
      c++;
      break;
    default: break;
  }
  if (shift && (*c == 'i' || *c == 'I')) c++; /* "64MiB" */
  if (*c == 'b' || *c == 'B') c++;
  if (*c != '\0') return false;
  if (shift && value > (SIZE_MAX >> shift)) return false;
  *out = value << shift;
  return true;
}

/* `why`: the message for a value that does not parse or lies outside
 * [min, max], which says what is expected (no formatting: the fixed
 * platform links no printf). */
static bool read_size(const char *name, size_t *target, size_t min, size_t max, const char *why) {
  const char *text = tessi_plat_getenv(name);
  if (text == NULL) return false;
  size_t value;
  if (!tessi_parse_size(text, &value) || value < min || value > max) {
    tessi_warn(name, why);
    return false;
  }
  *target = value;
  return true;
}

/* read_size for a count or a time in milliseconds: digits only, since a
 * size suffix there ("16B" partitions, "1M" ms) is a mistake, not a unit */
static void read_number(const char *name, size_t *target, size_t max, const char *why) {
  const char *text = tessi_plat_getenv(name);
  if (text == NULL) return;
  for (const char *c = text; *c != '\0'; c++) {
    if (*c < '0' || *c > '9') {
      tessi_warn(name, why);
      return;
    }
  }
  read_size(name, target, 0, max, why);
}

/* strcmp() == 0 without libc: libtessalloc-oe.a links nothing it need not */
static bool same(const char *a, const char *b) {
  while (*a != '\0' && *a == *b) a++, b++;
  return *a == *b;
}

/* TESS_STATS_FILE, copied: the environment's strings may be overwritten
 * once read (setproctitle emulations, as in nginx and PostgreSQL, move
 * them to the heap and write the title over them), and the reports opened
 * what the old place held by then (test_options stats-file-kept) */
static void set_stats_file(const char *file) {
#if TESS_OE
  (void)file; /* (no statistics output there) */
#else
  static char copy[4096];
  size_t len = strlen(file);
  if (len >= sizeof copy) {
    tessi_warn("TESS_STATS_FILE", "ignored: a path of 4095 bytes at most is expected");
    return;
  }
  memcpy(copy, file, len + 1);
  tessi_options.stats_file = copy;
#endif
}

void tessi_options_init(void) {
  size_t value = tessi_options.decommit_delay_ms;
  read_number("TESS_DECOMMIT_DELAY_MS", &value, 3600u * 1000u,
              "ignored: expected milliseconds, 0 to 3600000");
  tessi_options.decommit_delay_ms = (uint32_t)value;
  read_size("TESS_DECOMMIT_MIN", &tessi_options.decommit_min, TESS_PAGE_SIZE, SIZE_MAX / 2,
            "ignored: expected a size of 4K or more, such as 64K or 2M");
  tessi_options.reserve_given =
      read_size("TESS_RESERVE", &tessi_options.reserve, (size_t)16 << 20, (size_t)1 << 42,
                "ignored: expected a size from 16M to 4T, such as 64G");
  read_size("TESS_HUGE_THRESHOLD", &tessi_options.huge_threshold, (size_t)1 << 20, (size_t)1 << 40,
            "ignored: expected a size from 1M to 1T, such as 16M");
  read_size("TESS_HEAP_CACHE", &tessi_options.heap_cache, 0, (size_t)1 << 30,
            "ignored: expected a size up to 1G, such as 512K");
  value = tessi_options.partitions;
  read_number("TESS_PARTITIONS", &value, TESS_MAX_PARTITIONS,
              "ignored: expected a number from 0 (one per CPU) to 16");
  tessi_options.partitions = (uint32_t)value;
  read_size("TESS_HEAP_SIZE", &tessi_options.heap_size, (size_t)1 << 20, (size_t)1 << 42,
            "ignored: expected a size from 1M to 4T, such as 64M");
  const char *stats = tessi_plat_getenv("TESS_STATS");
  if (stats != NULL) {
    if (same(stats, "0") || stats[0] == '\0') {
      tessi_options.stats_at_exit = 0;
    } else if (same(stats, "1") || same(stats, "table")) {
      tessi_options.stats_at_exit = 1;
    } else if (same(stats, "json")) {
      tessi_options.stats_at_exit = 2;
    } else {
      tessi_warn("TESS_STATS", "ignored: expected 0, 1, table or json");
    }
  }
  value = tessi_options.stats_interval_ms;
  read_number("TESS_STATS_INTERVAL_MS", &value, 24u * 3600u * 1000u,
              "ignored: expected milliseconds, 0 to 86400000");
  tessi_options.stats_interval_ms = (uint32_t)value;
  const char *file = tessi_plat_getenv("TESS_STATS_FILE");
  if (file != NULL && file[0] != '\0') set_stats_file(file);
}
