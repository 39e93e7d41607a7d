/* Linked against an installed tessalloc: plain malloc must be tessalloc's
 * (tess_usable_size accepts its blocks; it aborts on foreign pointers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessalloc.h>

int main(void) {
  char *p = malloc(100);
  if (p == NULL || tess_usable_size(p) < 100) return 1;
  strcpy(p, "ok");
  free(p);
  printf("%s: %s\n", tess_version_string(), "malloc is tessalloc's");
  return strncmp(tess_version_string(), "tessalloc ", 10) != 0;
}
