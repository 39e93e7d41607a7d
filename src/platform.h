/* The platform contract: the only functions through which tessalloc talks to
 * the operating system. Everything above this layer is OS-agnostic, so a
 * fixed region (an enclave heap, a board's RAM) can be the only memory:
 * a fixed-mode platform answers reserve() with NULL and makes decommit()
 * a no-op. */
#ifndef TESS_PLATFORM_H
#define TESS_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The smallest unit reserve/decommit work in (the hardware page). */
#define TESS_PLAT_PAGE ((size_t)4096)

#pragma GCC visibility push(hidden)

/* A spin-wait hint to the CPU (x86 pause, Arm yield; nothing elsewhere). */
static inline void tessi_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

/* Address space, readable and writable, zero-filled, aligned to `align`
 * (a power of two >= the page size). NULL when none is available. */
void *tessi_plat_reserve(size_t size, size_t align);

/* The same, for one block: charged against the system's commit limit, so
 * that the OS refuses what it could not back (ENOMEM now, rather than the
 * process killed for memory later); reserve()'s address space is not
 * charged (a 64 GiB reservation on a smaller machine). */
void *tessi_plat_map(size_t size, size_t align);

/* Give back what reserve() or map() returned (or a page-aligned part of it). */
void tessi_plat_release(void *addr, size_t size);

/* Drop the contents of a page-aligned range; it reads as zero afterwards and
 * stays usable. Returns false when the platform cannot do it. */
bool tessi_plat_decommit(void *addr, size_t size);

/* Grow or shrink a mapping from reserve() or map(); may move it. NULL on
 * failure. */
void *tessi_plat_remap(void *addr, size_t old_size, size_t new_size);

/* Monotonic milliseconds, coarse (cheap) is fine. */
uint32_t tessi_plat_now_ms(void);

/* Let another thread run while we wait for a lock. */
void tessi_plat_yield(void);

/* Write a message to the error stream without allocating. */
void tessi_plat_write_error(const char *msg, size_t len);

/* Stop the process (after an error report). */
_Noreturn void tessi_plat_abort(void);

/* Value of an environment variable, or NULL; must not allocate. */
const char *tessi_plat_getenv(const char *name);

/* The process's limit on address space (RLIMIT_AS), SIZE_MAX when none. */
size_t tessi_plat_address_limit(void);

/* Number of processors online (>= 1); 0 when unknown. */
unsigned tessi_plat_cpu_count(void);

/* Thread exit: once, at start-up, name the function to run when a thread
 * that called tessi_plat_thread_watch(arg) exits; it gets that arg. False
 * when the platform cannot tell (fixed platforms: the embedder ends threads
 * with tess_thread_cleanup / oe_allocator_thread_cleanup instead). */
bool tessi_plat_thread_exit_init(void (*on_exit)(void *arg));
void tessi_plat_thread_watch(void *arg);

/* The calling thread's id and its process's, as the OS knows them (below
 * 2^TESS_PLAT_ID_BITS; 0 where the platform cannot tell), and whether
 * thread `tid` of process `pid` has exited (false where it cannot tell).
 * None changes errno. */
#define TESS_PLAT_ID_BITS 22
int32_t tessi_plat_thread_id(void);
int32_t tessi_plat_process_id(void);
bool tessi_plat_thread_gone(int32_t pid, int32_t tid);

/* Run these around fork() (no-op where there is no fork). */
void tessi_plat_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* Override builds only (OS platform): glibc's own __register_atfork,
 * which ours stands in front of (init.c); an error number when it cannot
 * be found. */
int tessi_plat_register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                               void *dso);

#pragma GCC visibility pop

#endif /* TESS_PLATFORM_H */
