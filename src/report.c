/* Error reports: one line on stderr, built without allocating (the heap may
 * be the very thing that is broken), then abort. */
#include "internal.h"

#include <string.h>

typedef struct line_s {
  char text[256];
  size_t len;
} line_t;

static void put(line_t *line, const char *s) {
  size_t n = strlen(s);
  if (n > sizeof(line->text) - 1 - line->len) n = sizeof(line->text) - 1 - line->len;
  memcpy(line->text + line->len, s, n);
  line->len += n;
}

static void put_hex(line_t *line, uintptr_t value) {
  char digits[2 + 2 * sizeof(uintptr_t) + 1];
  char *end = digits + sizeof(digits) - 1;
  char *c = end;
  *c = '\0';
  do {
    *--c = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  *--c = 'x';
  *--c = '0';
  put(line, c);
}

static void emit(line_t *line) {
  put(line, "\n");
  tessi_plat_write_error(line->text, line->len);
}

void tessi_report_invalid(const char *op, const void *ptr, const char *why) {
  line_t line = {.len = 0};
  put(&line, "tessalloc: invalid ");
  put(&line, op);
  put(&line, " of ");
  put_hex(&line, (uintptr_t)ptr);
  put(&line, " (");
  put(&line, why);
  put(&line, ")");
  emit(&line);
  tessi_plat_abort();
}

void tessi_warn(const char *msg, const char *detail) {
  line_t line = {.len = 0};
  put(&line, "tessalloc: ");
  put(&line, msg);
  put(&line, ": ");
  put(&line, detail);
  emit(&line);
}
