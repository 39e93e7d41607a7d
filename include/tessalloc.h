/* tessalloc — a scalable malloc for Linux and for fixed heaps.
 *
 * Public API. Every function here behaves like its C/POSIX/glibc namesake
 * (same arguments, same errno conventions); the libtessalloc shared and
 * static libraries also export the standard names (malloc, free, ...) so
 * that preloading or linking replaces the whole malloc family.
 */
#ifndef TESSALLOC_H
#define TESSALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSALLOC_VERSION_MAJOR 0
#define TESSALLOC_VERSION_MINOR 1
#define TESSALLOC_VERSION_PATCH 0

#if defined(__GNUC__)
#define TESS_API __attribute__((visibility("default")))
#define TESS_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#define TESS_ALLOC_SIZE(...) __attribute__((alloc_size(__VA_ARGS__)))
#else
#define TESS_API
#define TESS_MALLOC_ATTR
#define TESS_ALLOC_SIZE(...)
#endif

/* The malloc family. Failure: NULL with errno = ENOMEM (EINVAL for a bad
 * alignment where the standard says so). Sizes above PTRDIFF_MAX fail. */
TESS_API void *tess_malloc(size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1);
TESS_API void *tess_calloc(size_t count, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1, 2);
TESS_API void *tess_realloc(void *ptr, size_t size) TESS_ALLOC_SIZE(2);
TESS_API void *tess_reallocarray(void *ptr, size_t count, size_t size) TESS_ALLOC_SIZE(2, 3);
TESS_API void tess_free(void *ptr);

/* Sized deallocation (C23). `size` must be the size that was requested (or
 * any value between it and the usable size); `alignment` the alignment. */
TESS_API void tess_free_sized(void *ptr, size_t size);
TESS_API void tess_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* Aligned allocation: any power-of-two alignment. aligned_alloc and memalign
 * accept alignments below sizeof(void *); posix_memalign returns EINVAL for
 * them and for non-powers of two (and leaves *out untouched). */
TESS_API void *tess_aligned_alloc(size_t alignment, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(2);
TESS_API int tess_posix_memalign(void **out, size_t alignment, size_t size);
TESS_API void *tess_memalign(size_t alignment, size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(2);
TESS_API void *tess_valloc(size_t size) TESS_MALLOC_ATTR TESS_ALLOC_SIZE(1);
TESS_API void *tess_pvalloc(size_t size) TESS_MALLOC_ATTR;

/* Bytes usable at ptr (>= the size requested; all of them writable).
 * 0 for NULL. */
TESS_API size_t tess_usable_size(const void *ptr);

/* "tessalloc 0.1.0" — for logs and benchmark metadata. */
TESS_API const char *tess_version_string(void);

/* ---- fixed-heap mode ----
 * Makes [start, end) the only memory tessalloc uses: every byte of its
 * metadata is carved from inside it and no OS memory call (mmap, munmap,
 * mremap, madvise, brk, sbrk) happens afterwards; allocations fail with
 * ENOMEM when it is full. start and end need not be aligned; the range
 * must hold at least 1 MiB. Must come before the first allocation of the
 * process (with the preloaded library, set TESS_HEAP_SIZE instead).
 * Returns 0, EINVAL for a range that is too small or inverted, or EBUSY
 * when tessalloc is already initialized. */
TESS_API int tess_init_region(void *start, void *end);

/* Hands the calling thread's heap back to the pool now (its slabs stay
 * warm for the next thread that takes it); the thread may allocate again
 * later. Thread exit does this by itself; call it where a thread stops
 * allocating for a long time, or at the end of an enclave call. */
TESS_API void tess_thread_cleanup(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSALLOC_H */
