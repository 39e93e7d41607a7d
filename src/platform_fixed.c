/* The platform contract for an embedder that gives tessalloc one fixed
 * region and nothing else (an Open Enclave enclave, a board without an
 * OS): no memory from the OS, no clock, no environment, no output. Errors
 * stop the thread with a trap, since nothing may be logged. Used by
 * libtessalloc-oe.a instead of platform_os.c. */
#include "platform.h"

void *tessi_plat_reserve(size_t size, size_t align) {
  (void)size;
  (void)align;
  return NULL;
}

void *tessi_plat_map(size_t size, size_t align) {
  (void)size;
  (void)align;
  return NULL;
}

void tessi_plat_release(void *addr, size_t size) {
  (void)addr;
  (void)size;
}

bool tessi_plat_decommit(void *addr, size_t size) {
  (void)addr;
  (void)size;
  return false;
}

void *tessi_plat_remap(void *addr, size_t old_size, size_t new_size) {
  (void)addr;
  (void)old_size;
  (void)new_size;
  return NULL;
}

uint32_t tessi_plat_now_ms(void) { return 0; }

void tessi_plat_yield(void) { tessi_cpu_relax(); }

void tessi_plat_write_error(const char *msg, size_t len) {
  (void)msg;
  (void)len;
}

/* Inside an enclave, OE's own abort (oecore) when it is linked: a trap
 * there becomes an exception that the enclave's handlers may continue
 * past. Elsewhere (tests, other fixed heaps) a trap, for good. */
extern _Noreturn void oe_abort(void) __attribute__((weak));

_Noreturn void tessi_plat_abort(void) {
  if (oe_abort != NULL) oe_abort();
  for (;;) __builtin_trap();
}

const char *tessi_plat_getenv(const char *name) {
  (void)name;
  return NULL;
}

unsigned tessi_plat_cpu_count(void) { return 0; }

bool tessi_plat_thread_exit_init(void (*on_exit)(void *arg)) {
  (void)on_exit;
  return false;
}

void tessi_plat_thread_watch(void *arg) { (void)arg; }

size_t tessi_plat_address_limit(void) { return SIZE_MAX; }

int32_t tessi_plat_thread_id(void) { return 0; }

int32_t tessi_plat_process_id(void) { return 0; }

bool tessi_plat_thread_gone(int32_t pid, int32_t tid) {
  (void)pid;
  (void)tid;
  return false;
}

void tessi_plat_fork_hooks(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare;
  (void)parent;
  (void)child;
}
