/* libtb_glibc.so: glibc's malloc, preloadable.
 *
 * A program linked with another allocator (Debian's redis-server links
 * jemalloc) never uses glibc's malloc, even with nothing preloaded. To
 * measure glibc there, this shim puts the C library's own entry points
 * (__libc_malloc and friends, which glibc exports for exactly this) in
 * front of the linked allocator. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

void *malloc(size_t size) { return __libc_malloc(size); }
void free(void *p) { __libc_free(p); }
void cfree(void *p) { __libc_free(p); }
void *calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
void *realloc(void *p, size_t size) { return __libc_realloc(p, size); }
void *memalign(size_t align, size_t size) { return __libc_memalign(align, size); }
void *valloc(size_t size) { return __libc_valloc(size); }
void *pvalloc(size_t size) { return __libc_pvalloc(size); }

static int is_power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

void *aligned_alloc(size_t align, size_t size) {
  if (!is_power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
  if (!is_power_of_two(align) || align % sizeof(void *) != 0) return EINVAL;
  void *p = __libc_memalign(align, size);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, total);
}

/* glibc exports no __libc_ name for it: take the C library's own symbol
 * (not the next one in the search order, which may be the linked
 * allocator's). Looked up on first use, after start-up. */
size_t malloc_usable_size(void *p) {
  static size_t (*libc_usable)(void *);
  if (libc_usable == NULL) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc != NULL) libc_usable = (size_t (*)(void *))dlsym(libc, "malloc_usable_size");
    if (libc_usable == NULL) abort();
  }
  return libc_usable(p);
}
