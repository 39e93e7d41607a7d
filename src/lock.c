/* The spin lock's contended path. Critical sections (span allocation, heap
 * pool) are short, so spin briefly, then let the holder run: a yield
 * matters when threads outnumber cores. */
#include "internal.h"

__thread bool tessi_fork_holder;

void tessi_lock_slow(tess_lock_t *lock) {
  if (tessi_fork_holder) return; /* held for fork(): by this thread */
  unsigned spins = 0;
  for (;;) {
    if (atomic_load_explicit(&lock->held, memory_order_relaxed) == 0 &&
        !atomic_exchange_explicit(&lock->held, 1, memory_order_acquire)) {
      return;
    }
    if (spins < 64) {
      spins++;
      tessi_cpu_relax();
    } else {
      tessi_plat_yield();
    }
  }
}
