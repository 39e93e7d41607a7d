/* tessalloc as an Open Enclave pluggable allocator (libtessalloc-oe.a).
 *
 * Declares the functions of Open Enclave's pluggable-allocator interface
 * (openenclave/advanced/allocator.h and mallinfo.h) with the same
 * signatures, so that this library can be built and tested without the OE
 * SDK. Link libtessalloc-oe.a before oelibc/oecore and OE calls these
 * instead of its default dlmalloc. None of them logs, blocks in the OS or
 * calls out of the enclave. OE runs a thread's destructors before
 * oe_allocator_thread_cleanup, and frees may still follow it, and follow
 * oe_allocator_cleanup (OE's destructor call frees before its last
 * thread cleanup): both are tolerated.
 *
 * Where OE's headers are on the include path, this header includes them
 * and uses their declarations; elsewhere it declares OE's result type only
 * as far as oe_allocator_mallinfo needs it (so OE's openenclave/bits/
 * result.h, if it could be included after this header without being
 * found by it, would declare the type again). A heap of less than
 * 1 MiB (end - start) is not taken: every allocation then answers NULL and
 * oe_allocator_mallinfo OE_FAILURE. */
#ifndef TESSALLOC_OE_H
#define TESSALLOC_OE_H

#include <stddef.h>

#if defined(__has_include)
#if __has_include(<openenclave/advanced/allocator.h>)
#include <openenclave/advanced/allocator.h>
#endif
#if __has_include(<openenclave/advanced/mallinfo.h>)
#include <openenclave/advanced/mallinfo.h>
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifndef OE_ADVANCED_ALLOCATOR_H
#define OE_ADVANCED_ALLOCATOR_H /* OE's allocator.h, included later, adds nothing */
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
#define OE_ADVANCED_MALLINFO_H /* OE's mallinfo.h, included later, adds nothing */
#if !defined(_OE_BITS_RESULT_H) && !defined(_OE_BITS_RESULT) /* its guard, new and old */
/* OE's result codes that oe_allocator_mallinfo returns (same values, and
 * the same 4-byte size as OE's enum, whose last value is 0xffffffff). */
typedef enum _oe_result { OE_OK = 0, OE_FAILURE = 1, __OE_RESULT_MAX = 0xffffffff } oe_result_t;
#endif
typedef struct _oe_mallinfo {
  size_t max_total_heap_size;         /* bytes that can be allocated in total */
  size_t current_allocated_heap_size; /* bytes allocated at the moment */
  size_t peak_allocated_heap_size;    /* highest value of the above seen */
} oe_mallinfo_t;
oe_result_t oe_allocator_mallinfo(oe_mallinfo_t *info);
#endif

#ifdef __cplusplus
}
#endif

#endif /* TESSALLOC_OE_H */
