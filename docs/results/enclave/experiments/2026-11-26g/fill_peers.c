/* How much of a 64 MiB region blocks of one size fill, per fixed-heap
 * plugin (a throwaway of the eighteenth session, kept with its output).
 *
 *   cc -O2 -I bench/enclave fill_peers.c -ldl -o /tmp/fill_peers
 *   /tmp/fill_peers PLUGIN.so KiB...
 *
 * One process per plugin (each allocator takes its region once): blocks of
 * each size are allocated until NULL, counted, and freed again, in turn,
 * in one enclave call. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fixed_alloc.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PLUGIN.so KiB...\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  fixed_allocator_fn get = lib ? (fixed_allocator_fn)dlsym(lib, FIXED_ALLOCATOR_SYMBOL) : NULL;
  if (get == NULL) {
    fprintf(stderr, "%s: %s\n", argv[1], dlerror());
    return 2;
  }
  const fixed_allocator_t *a = get();
  size_t region = (size_t)64 << 20;
  char *map = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || a->init(map, map + region) != 0) return 1;
  a->thread_init();
  enum { MAX = 1 << 20 };
  void **blocks = calloc(MAX, sizeof *blocks);
  for (int i = 2; i < argc; i++) {
    size_t size = (size_t)(atof(argv[i]) * 1024);
    size_t n = 0;
    while (n < MAX && (blocks[n] = a->malloc(size)) != NULL) n++;
    printf("%-12s %8zu-byte blocks: %7zu, %6.2f MiB of 64\n", a->name, size, n,
           (double)n * (double)size / 1048576.0);
    while (n > 0) a->free(blocks[--n]);
  }
  a->thread_cleanup();
  return 0;
}
