/* libtb_fixed.so: runs a whole program with every allocation in one fixed
 * heap, served by an enclave harness plugin (bench/enclave/fixed_alloc.h),
 * the way the plugin's allocator would serve an SGX enclave.
 *
 *   LD_PRELOAD=libtb_fixed.so TB_FIXED_PLUGIN=path/libfixed_X.so \
 *   TB_FIXED_HEAP=64M program ...
 *
 * TB_FIXED_HEAP is the heap's size (K, M, G suffixes; 64M when unset). On
 * first use (or in its constructor, whichever comes first) the shim maps
 * the heap, dlopen()s the plugin and hands it the heap with init(); it then
 * replaces malloc, free, calloc, realloc, reallocarray, aligned_alloc,
 * posix_memalign, memalign, valloc, pvalloc and malloc_usable_size. The
 * heap never grows: when the plugin returns NULL the caller gets NULL and
 * errno ENOMEM, as in an enclave.
 *
 * Threads: a thread's first call makes the plugin's thread_init() call (an
 * enclave call begins), a pthread key's destructor makes thread_cleanup()
 * at thread exit (the call ends). Frees after that are passed on as they
 * come (OE's late destructors); an allocation after it begins a new
 * "call" and re-arms the destructor.
 *
 * Re-entrancy: while the shim starts the heap (dlopen, the plugin's own
 * start-up), and whenever the plugin itself calls malloc (glibc allocates
 * a dlopen'ed library's dynamic TLS block with malloc, from inside the
 * plugin's first TLS access on each thread), the calling thread is already
 * inside the shim. Such calls are served from a static bootstrap buffer
 * instead of re-entering the plugin, whose locks may be held. Bootstrap
 * blocks freed again are recycled by size class (those TLS blocks come and
 * go with threads); realloc out of the buffer copies into the heap.
 *
 * Alignment: the plugin interface has only malloc, whose blocks are 16-byte
 * aligned (small ones 8-byte, for mimalloc). A larger alignment (or 16,
 * where the plugin's block is not) is served by over-allocating and
 * returning an aligned address inside the block, with a header just before
 * it holding the plugin's pointer and a mark (a function of both addresses
 * and a per-process secret) by which free() tells such a block from a plain
 * one.
 *
 * A pointer that is neither in the heap nor in the bootstrap buffer is
 * never passed to the plugin: free/realloc/malloc_usable_size print one
 * line and abort. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h> /* memalign, pvalloc, malloc_usable_size: checks the signatures */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "fixed_alloc.h"

#define EXPORT __attribute__((visibility("default")))
/* the shim is preloaded, so its thread-locals sit in static TLS: no
 * __tls_get_addr, hence no malloc, on first touch */
#define THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))

#define DEFAULT_HEAP ((size_t)64 << 20)
#define REGION_ALIGN ((size_t)2 << 20)
#define MIN_ALIGN 16 /* what every plugin's malloc guarantees */
#define BOOT_BYTES ((size_t)256 << 10) /* start-up takes 7-10 KiB */
#define BOOT_HEADER 16
#define BOOT_CLASSES 13 /* 16 B .. 64 KiB, powers of two */
#define BOOT_NO_CLASS SIZE_MAX

/* ------------------------------------------------------------- messages */

/* write(2) only: this may run inside malloc, before the heap exists */
static void say(const char *a, const char *b, const char *c) {
  const char *parts[] = {"tb_fixed: ", a, b, c, "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (parts[i] != NULL && write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0) return;
  }
}

static char *hex(char *buf, uintptr_t v) { /* buf: at least 19 bytes */
  char *p = buf + 18;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  return p;
}

/* A configuration or start-up error: the program cannot run in the fixed
 * heap, and running it on another allocator would measure the wrong one. */
static __attribute__((noreturn)) void die(const char *what, const char *detail) {
  say(what, detail != NULL ? ": " : NULL, detail);
  _exit(127);
}

/* ------------------------------------------------------ bootstrap buffer */

typedef struct boot_header_s {
  size_t size;  /* bytes usable */
  size_t klass; /* size class, or BOOT_NO_CLASS: never recycled */
} boot_header_t;

static _Alignas(4096) unsigned char boot_buf[BOOT_BYTES];
static size_t boot_used;
static void *boot_lists[BOOT_CLASSES];
static atomic_flag boot_lock = ATOMIC_FLAG_INIT;

static bool in_boot(uintptr_t p) {
  return p >= (uintptr_t)boot_buf && p < (uintptr_t)boot_buf + BOOT_BYTES;
}

static void boot_acquire(void) {
  while (atomic_flag_test_and_set_explicit(&boot_lock, memory_order_acquire)) sched_yield();
}

static void boot_release(void) { atomic_flag_clear_explicit(&boot_lock, memory_order_release); }

static void *boot_alloc(size_t size, size_t align) {
  if (size > BOOT_BYTES || align > BOOT_BYTES) return NULL;
  size_t klass = BOOT_NO_CLASS, cap = size < MIN_ALIGN ? MIN_ALIGN : size;
  if (align <= MIN_ALIGN && cap <= ((size_t)MIN_ALIGN << (BOOT_CLASSES - 1))) {
    klass = 0;
    while (((size_t)MIN_ALIGN << klass) < cap) klass++;
    cap = (size_t)MIN_ALIGN << klass;
  }
  if (align < MIN_ALIGN) align = MIN_ALIGN;
  void *p = NULL;
  boot_acquire();
  if (klass != BOOT_NO_CLASS && boot_lists[klass] != NULL) {
    p = boot_lists[klass];
    memcpy(&boot_lists[klass], p, sizeof(void *));
  } else {
    uintptr_t base = (uintptr_t)boot_buf;
    uintptr_t at = (base + boot_used + BOOT_HEADER + align - 1) & ~(uintptr_t)(align - 1);
    if (at + cap <= base + BOOT_BYTES) {
      boot_used = at + cap - base;
      p = (void *)at;
      ((boot_header_t *)p)[-1] = (boot_header_t){cap, klass};
    }
  }
  boot_release();
  return p;
}

static size_t boot_size(const void *p) { return ((const boot_header_t *)p)[-1].size; }

static void boot_free(void *p) {
  size_t klass = ((boot_header_t *)p)[-1].klass;
  if (klass >= BOOT_CLASSES) return;
  boot_acquire();
  memcpy(p, &boot_lists[klass], sizeof(void *));
  boot_lists[klass] = p;
  boot_release();
}

/* ------------------------------------------------------------- the heap */

enum { HEAP_NONE, HEAP_STARTING, HEAP_READY };
enum { THREAD_NEW, THREAD_ACTIVE, THREAD_DONE };

static _Atomic int heap_state;
static const fixed_allocator_t *plugin;
static uintptr_t heap_lo, heap_hi;
static uintptr_t align_secret;
static pthread_key_t thread_key;

/* >0 while this thread is inside the plugin, or starting the heap: a call
 * into the shim then comes from there and is served from boot_buf */
static THREAD_LOCAL int depth;
static THREAD_LOCAL int thread_state;

static bool in_heap(uintptr_t p) { return p >= heap_lo && p < heap_hi; }

static size_t parse_size(const char *s) {
  size_t v = 0;
  const char *c = s;
  for (; *c >= '0' && *c <= '9'; c++) {
    if (v > (SIZE_MAX - 9) / 10) return 0;
    v = v * 10 + (size_t)(*c - '0');
  }
  if (c == s) return 0;
  unsigned shift = 0;
  switch (*c) {
    case 'K': case 'k': shift = 10; c++; break;
    case 'M': case 'm': shift = 20; c++; break;
    case 'G': case 'g': shift = 30; c++; break;
    default: break;
  }
  if (*c != '\0' || v > (SIZE_MAX >> shift)) return 0;
  return v << shift;
}

static void thread_exit(void *arg) {
  (void)arg;
  if (thread_state != THREAD_ACTIVE) return;
  thread_state = THREAD_DONE;
  depth++;
  plugin->thread_cleanup();
  depth--;
}

static void heap_start(void) {
  int expected = HEAP_NONE;
  if (!atomic_compare_exchange_strong(&heap_state, &expected, HEAP_STARTING)) {
    /* another thread is starting it */
    while (atomic_load_explicit(&heap_state, memory_order_acquire) != HEAP_READY) sched_yield();
    return;
  }
  depth++; /* dlopen's and the plugin's own allocations: boot_buf */
  const char *path = getenv("TB_FIXED_PLUGIN");
  if (path == NULL || *path == '\0') {
    die("TB_FIXED_PLUGIN is not set (the path of a libfixed_*.so)", NULL);
  }
  const char *size_env = getenv("TB_FIXED_HEAP");
  size_t size = DEFAULT_HEAP;
  if (size_env != NULL && *size_env != '\0') {
    size = parse_size(size_env);
    if (size < 4096) die("bad TB_FIXED_HEAP (a size, K/M/G suffixes)", size_env);
  }
  size = (size + 4095) & ~(size_t)4095;
  /* On a 2 MiB boundary, as the enclave harness maps it (an enclave heap is
   * at least page-aligned; mimalloc uses only 64 KiB-aligned parts) */
  if (size > SIZE_MAX - REGION_ALIGN) die("bad TB_FIXED_HEAP (too large)", size_env);
  char *map = mmap(NULL, size + REGION_ALIGN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) die("cannot map the heap", strerror(errno));
  char *mem = (char *)(((uintptr_t)map + REGION_ALIGN - 1) & ~(uintptr_t)(REGION_ALIGN - 1));
  if (mem > map) munmap(map, (size_t)(mem - map));
  munmap(mem + size, (size_t)(map + REGION_ALIGN - mem));
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) die("dlopen", dlerror());
  fixed_allocator_fn get;
  void *sym = dlsym(lib, FIXED_ALLOCATOR_SYMBOL);
  memcpy(&get, &sym, sizeof get); /* object to function pointer, as POSIX allows */
  const fixed_allocator_t *a = get != NULL ? get() : NULL;
  if (a == NULL || a->init == NULL || a->thread_init == NULL || a->thread_cleanup == NULL ||
      a->malloc == NULL || a->free == NULL || a->calloc == NULL || a->realloc == NULL ||
      a->usable_size == NULL) {
    die("not an enclave plugin (no complete fixed_allocator())", path);
  }
  heap_lo = (uintptr_t)mem;
  heap_hi = heap_lo + size;
  /* the aligned blocks' mark (a system call, no allocation) */
  if (getrandom(&align_secret, sizeof align_secret, GRND_NONBLOCK) != sizeof align_secret) {
    align_secret = heap_lo * 0x9e3779b97f4a7c15u ^ (uintptr_t)&align_secret;
  }
  if (a->init(mem, mem + size) != 0) die("the plugin's init() failed", a->name);
  if (pthread_key_create(&thread_key, thread_exit) != 0) die("pthread_key_create failed", NULL);
  plugin = a;
  depth--;
  atomic_store_explicit(&heap_state, HEAP_READY, memory_order_release);
}

/* Start the heap when the program starts, if no allocation has yet. */
__attribute__((constructor)) static void shim_start(void) {
  if (depth == 0 && atomic_load_explicit(&heap_state, memory_order_acquire) == HEAP_NONE) {
    heap_start();
  }
}

/* Begins a call into the plugin on this thread: false when the caller must
 * use boot_buf instead (this thread is already inside the plugin or
 * starting the heap). A thread's first call, and its first allocation
 * after thread_cleanup(), begin an enclave call (thread_init). */
static inline bool enter(bool allocating) {
  if (depth != 0) return false;
  if (atomic_load_explicit(&heap_state, memory_order_acquire) != HEAP_READY) heap_start();
  depth = 1;
  if (thread_state == THREAD_NEW || (allocating && thread_state == THREAD_DONE)) {
    thread_state = THREAD_ACTIVE;
    plugin->thread_init();
    /* any non-NULL value: the destructor runs at thread exit */
    pthread_setspecific(thread_key, &thread_state);
  }
  return true;
}

static inline void leave(void) { depth = 0; }

static __attribute__((noreturn)) void bad_pointer(const char *fn, const void *p) {
  char b0[20], b1[20], b2[20];
  const char *lo = hex(b1, heap_lo), *hi = hex(b2, heap_hi);
  const char *parts[] = {fn, "(", hex(b0, (uintptr_t)p), "): not a block of the fixed heap [",
                         lo, ", ", hi, ") nor of the bootstrap buffer"};
  char line[256];
  size_t n = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    size_t len = strlen(parts[i]);
    if (n + len >= sizeof line) break;
    memcpy(line + n, parts[i], len);
    n += len;
  }
  line[n] = '\0';
  say(line, NULL, NULL);
  abort();
}

/* ------------------------------------------------------ aligned blocks */

typedef struct align_header_s {
  uintptr_t orig; /* what the plugin's malloc returned */
  uintptr_t mark;
} align_header_t;

/* Set before the first over-aligned block is handed out: a thread that
 * frees it got the pointer after this store, so it sees the flag. */
static atomic_bool aligned_used;

static uintptr_t align_mark(uintptr_t p, uintptr_t orig) {
  return (p ^ (orig * 0xbf58476d1ce4e5b9u)) ^ align_secret;
}

/* Whether p (in the heap) is an over-aligned block, and its plugin block.
 * Such blocks are aligned to at least 16 and their header lies inside the
 * heap; a plain block's preceding bytes (the plugin's or another block's)
 * hold the mark only by a 2^-64 chance. Until the first such block, plain
 * blocks are not even looked at. */
static bool aligned_block(uintptr_t p, uintptr_t *orig) {
  if (!atomic_load_explicit(&aligned_used, memory_order_relaxed)) return false;
  if ((p & (MIN_ALIGN - 1)) != 0 || p - heap_lo < sizeof(align_header_t)) return false;
  const align_header_t *h = (const align_header_t *)p - 1;
  if (h->orig < heap_lo || h->orig > p - sizeof *h || h->mark != align_mark(p, h->orig)) {
    return false;
  }
  *orig = h->orig;
  return true;
}

/* ------------------------------------------------------- the functions */

static void *shim_malloc(size_t size) {
  if (!enter(true)) {
    void *b = boot_alloc(size, MIN_ALIGN);
    if (b == NULL) errno = ENOMEM;
    return b;
  }
  void *p = plugin->malloc(size != 0 ? size : 1);
  leave();
  if (p == NULL) errno = ENOMEM;
  return p;
}

static void shim_free(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  if (p == 0) return;
  if (in_boot(p)) {
    boot_free(ptr);
    return;
  }
  if (!in_heap(p)) bad_pointer("free", ptr);
  /* from inside the plugin: leaked, rather than re-entering it */
  if (!enter(false)) return;
  uintptr_t orig;
  if (aligned_block(p, &orig)) {
    ((align_header_t *)p)[-1].mark = 0; /* no stale mark for a later block */
    ptr = (void *)orig;
  }
  plugin->free(ptr);
  leave();
}

/* align: a power of two */
static void *shim_aligned(size_t align, size_t size) {
  if (align <= MIN_ALIGN) {
    /* A plugin may align small blocks to 8 only (mimalloc does). */
    void *p = shim_malloc(size);
    if (p == NULL || ((uintptr_t)p & (align - 1)) == 0) return p;
    shim_free(p);
    align = MIN_ALIGN;
  }
  size_t total;
  if (__builtin_add_overflow(size, align + sizeof(align_header_t), &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (!enter(true)) {
    void *b = boot_alloc(size, align);
    if (b == NULL) errno = ENOMEM;
    return b;
  }
  void *raw = plugin->malloc(total);
  leave();
  if (raw == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (!atomic_load_explicit(&aligned_used, memory_order_relaxed)) {
    atomic_store_explicit(&aligned_used, true, memory_order_relaxed);
  }
  uintptr_t orig = (uintptr_t)raw;
  uintptr_t p = (orig + sizeof(align_header_t) + align - 1) & ~(uintptr_t)(align - 1);
  align_header_t *h = (align_header_t *)p - 1;
  h->orig = orig;
  h->mark = align_mark(p, orig);
  return (void *)p;
}

/* Bytes usable at ptr, a block of the heap. */
static size_t heap_usable(uintptr_t p) {
  uintptr_t orig;
  if (aligned_block(p, &orig)) return plugin->usable_size((void *)orig) - (p - orig);
  return plugin->usable_size((void *)p);
}

/* realloc by copying into a new block: out of boot_buf, or of an aligned
 * block (the plugin's realloc would lose the offset). */
static void *move_block(void *old, size_t old_size, size_t size) {
  void *q = shim_malloc(size);
  if (q == NULL) return NULL;
  memcpy(q, old, old_size < size ? old_size : size);
  shim_free(old);
  return q;
}

EXPORT void *malloc(size_t size) { return shim_malloc(size); }

EXPORT void free(void *ptr) { shim_free(ptr); }

EXPORT void *calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (!enter(true)) {
    void *b = boot_alloc(total, MIN_ALIGN);
    if (b == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    return memset(b, 0, total); /* recycled blocks are not zero */
  }
  void *p = total != 0 ? plugin->calloc(count, size) : plugin->calloc(1, 1);
  leave();
  if (p == NULL) errno = ENOMEM;
  return p;
}

EXPORT void *realloc(void *ptr, size_t size) {
  uintptr_t p = (uintptr_t)ptr;
  if (p == 0) return shim_malloc(size);
  bool boot = in_boot(p);
  if (!boot && !in_heap(p)) bad_pointer("realloc", ptr);
  if (size == 0) { /* glibc's behaviour */
    shim_free(ptr);
    return NULL;
  }
  if (boot) return move_block(ptr, boot_size(ptr), size);
  if (!enter(true)) die("realloc of a heap block from inside the plugin", NULL);
  uintptr_t orig;
  if (aligned_block(p, &orig)) {
    size_t old = plugin->usable_size((void *)orig) - (p - orig);
    leave();
    return move_block(ptr, old, size);
  }
  void *q = plugin->realloc(ptr, size);
  leave();
  if (q == NULL) errno = ENOMEM;
  return q;
}

EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(ptr, total);
}

static bool power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

EXPORT void *aligned_alloc(size_t align, size_t size) {
  if (!power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return shim_aligned(align, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (!power_of_two(align) || align % sizeof(void *) != 0) return EINVAL;
  int saved = errno; /* reports through its result, not errno */
  void *p = shim_aligned(align, size);
  errno = saved;
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void *memalign(size_t align, size_t size) {
  /* glibc: a non-power-of-two alignment is rounded up */
  size_t a = MIN_ALIGN;
  while (a < align && a != 0) a <<= 1;
  if (a == 0) {
    errno = EINVAL;
    return NULL;
  }
  return shim_aligned(a, size);
}

static size_t page_size(void) {
  size_t ps = (size_t)getauxval(AT_PAGESZ);
  return ps != 0 ? ps : 4096;
}

EXPORT void *valloc(size_t size) { return shim_aligned(page_size(), size); }

EXPORT void *pvalloc(size_t size) {
  size_t ps = page_size();
  if (size > SIZE_MAX - ps) {
    errno = ENOMEM;
    return NULL;
  }
  size_t rounded = size == 0 ? ps : (size + ps - 1) & ~(ps - 1);
  return shim_aligned(ps, rounded);
}

EXPORT size_t malloc_usable_size(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  if (p == 0) return 0;
  if (in_boot(p)) return boot_size(ptr);
  if (!in_heap(p)) bad_pointer("malloc_usable_size", ptr);
  if (!enter(false)) return 0; /* never asked from inside the plugin */
  size_t n = heap_usable(p);
  leave();
  return n;
}
