/* Stands for liboecore's callers of the plug-in (enclave/core/sgx/
 * threadlocal.c and calls.c, enclave/core/malloc.c): linked after the
 * plug-in, so what the plug-in's objects leave undefined comes from the
 * default allocator in the same archive. */
typedef struct {
  unsigned long max_total_heap_size, current_allocated_heap_size, peak_allocated_heap_size;
} mallinfo_t;
void oe_allocator_init(void *start, void *end);
void oe_allocator_cleanup(void);
void oe_allocator_thread_init(void);
void oe_allocator_thread_cleanup(void);
int oe_allocator_mallinfo(mallinfo_t *info);
void oe_allocator_free(void *ptr);
void oecore_thread_start(void);
void oecore_thread_end(void);
int oecore_mallinfo(mallinfo_t *info);

void oecore_thread_start(void) {
  oe_allocator_init(0, 0);
  oe_allocator_thread_init();
}

void oecore_thread_end(void) {
  oe_allocator_thread_cleanup();
  oe_allocator_cleanup();
}

int oecore_mallinfo(mallinfo_t *info) { return oe_allocator_mallinfo(info); }
