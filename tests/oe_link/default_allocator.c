/* Stands for OE's default allocator (3rdparty/dlmalloc/allocator.c): all
 * twelve functions in one object, in the same archive as oecore. The
 * marker tells whether the linker took it. */
typedef unsigned long size_t;
int oe_default_allocator_linked = 1;
void oe_allocator_init(void *start, void *end) { (void)start; (void)end; }
void oe_allocator_cleanup(void) {}
void oe_allocator_thread_init(void) {}
void oe_allocator_thread_cleanup(void) {}
void *oe_allocator_malloc(size_t size) { return (void *)size; }
void oe_allocator_free(void *ptr) { (void)ptr; }
void *oe_allocator_calloc(size_t n, size_t size) { return (void *)(n * size); }
void *oe_allocator_realloc(void *ptr, size_t size) { return (char *)ptr + size; }
void *oe_allocator_aligned_alloc(size_t align, size_t size) { return (void *)(align + size); }
int oe_allocator_posix_memalign(void **out, size_t align, size_t size) {
  *out = (void *)(align + size);
  return 0;
}
size_t oe_allocator_malloc_usable_size(void *ptr) { return (size_t)ptr; }
int oe_allocator_mallinfo(void *info) { return info != 0; }
