/* The standard names. Included at the end of alloc.c when the library
 * replaces the malloc family (TESS_OVERRIDE), because an alias must be
 * defined in the same translation unit as its target: malloc *is*
 * tess_malloc, with no extra jump. glibc's own entry points (__libc_*) are
 * covered too, so no pointer from glibc's allocator reaches ours or the
 * reverse. Prototypes are declared here, not taken from <stdlib.h>, whose
 * attributes differ between glibc versions. */

void *malloc(size_t size) TESS_ALIAS(tess_malloc);
void *calloc(size_t count, size_t size) TESS_ALIAS(tess_calloc);
void *realloc(void *p, size_t size) TESS_ALIAS(tess_realloc);
void *reallocarray(void *p, size_t count, size_t size) TESS_ALIAS(tess_reallocarray);
void free(void *p) TESS_ALIAS(tess_free);
void cfree(void *p) TESS_ALIAS(tess_free);
void free_sized(void *p, size_t size) TESS_ALIAS(tess_free_sized);
void free_aligned_sized(void *p, size_t alignment, size_t size) TESS_ALIAS(tess_free_aligned_sized);
void *aligned_alloc(size_t alignment, size_t size) TESS_ALIAS(tess_aligned_alloc);
int posix_memalign(void **out, size_t alignment, size_t size) TESS_ALIAS(tess_posix_memalign);
void *memalign(size_t alignment, size_t size) TESS_ALIAS(tess_memalign);
void *valloc(size_t size) TESS_ALIAS(tess_valloc);
void *pvalloc(size_t size) TESS_ALIAS(tess_pvalloc);
size_t malloc_usable_size(void *p) TESS_ALIAS(tess_usable_size);

void *__libc_malloc(size_t size) TESS_ALIAS(tess_malloc);
void *__libc_calloc(size_t count, size_t size) TESS_ALIAS(tess_calloc);
void *__libc_realloc(void *p, size_t size) TESS_ALIAS(tess_realloc);
void __libc_free(void *p) TESS_ALIAS(tess_free);
void *__libc_memalign(size_t alignment, size_t size) TESS_ALIAS(tess_memalign);
void *__libc_valloc(size_t size) TESS_ALIAS(tess_valloc);
void *__libc_pvalloc(size_t size) TESS_ALIAS(tess_pvalloc);

/* glibc's malloc_trim and mallopt would work on glibc's own arena, which
 * this library replaces (its malloc_trim asks brk for the break: an OS
 * call that an emulated fixed heap must not see after init), so ours do
 * nothing. Free spans are decommitted on their own once free for
 * TESS_DECOMMIT_DELAY_MS: malloc_trim answers 0, nothing released by this
 * call; mallopt has no parameter to set: 0, as glibc answers for one it
 * does not know. */
int malloc_trim(size_t pad);
int mallopt(int param, int value);
__attribute__((visibility("default"))) int malloc_trim(size_t pad) {
  (void)pad;
  return 0;
}
__attribute__((visibility("default"))) int mallopt(int param, int value) {
  (void)param;
  (void)value;
  return 0;
}
