/* tessalloc as an Open Enclave pluggable allocator (libtessalloc-oe.a).
 *
 * Declares the functions of Open Enclave's pluggable-allocator interface
 * (openenclave/advanced/allocator.h and mallinfo.h) with the same
 * signatures, so that this library can be built and tested without the OE
 * SDK. Link libtessalloc-oe.a before oelibc/oecore and OE calls these
 * instead of its default dlmalloc. None of them logs, blocks in the OS or
 * calls out of the enclave; oe_allocator_thread_cleanup may be followed by
 * frees from thread-exit destructors, which it tolerates.
 *
 * If OE's own headers are included first, their declarations are used. */
#ifndef TESSALLOC_OE_H
#define TESSALLOC_OE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef OE_ADVANCED_ALLOCATOR_H
void oe_allocator_init(void *heap_start_address, void *heap_end_address);
void oe_allocator_cleanup(void);
void oe_allocator_thread_init(void);
void oe_allocator_thread_cleanup(void);
void *oe_allocator_malloc(size_t size);
void oe_allocator_free(void *ptr);
void *oe_allocator_calloc(size_t nmemb, size_t size);
void *oe_allocator_realloc(void *ptr, size_t size);
void *oe_allocator_aligned_alloc(size_t alignment, size_t size);
int oe_allocator_posix_memalign(void **memptr, size_t alignment, size_t size);
size_t oe_allocator_malloc_usable_size(void *ptr);
#endif

#ifndef OE_ADVANCED_MALLINFO_H
#ifndef _OE_BITS_RESULT_H
/* OE's result codes that oe_allocator_mallinfo returns (same values). */
typedef enum _oe_result { OE_OK = 0, OE_FAILURE = 1 } oe_result_t;
#endif
typedef struct _oe_mallinfo {
  size_t max_total_heap_size;         /* bytes that can be allocated in total */
  size_t current_allocated_heap_size; /* bytes of the heap in use now */
  size_t peak_allocated_heap_size;    /* highest value of the above */
} oe_mallinfo_t;
oe_result_t oe_allocator_mallinfo(oe_mallinfo_t *info);
#endif

#ifdef __cplusplus
}
#endif

#endif /* TESSALLOC_OE_H */
