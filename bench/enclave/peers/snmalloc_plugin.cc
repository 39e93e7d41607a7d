// The snmalloc peer: snmalloc (source from the crates.io snmalloc-sys crate)
// in its fixed-range configuration, as a fixed_allocator_t plugin.
//
// The model is Open Enclave's snmalloc integration, with snmalloc 0.7.6 as
// it would behave built for OE: one FixedRangeConfig over the enclave heap,
// with the page map carved from the start of the region and no OS memory
// (PALNoAlloc); each enclave thread takes an allocator from snmalloc's pool
// when it enters (thread_init) and, when it leaves (thread_cleanup), gives
// it back to the pool, so the next thread to enter may take it over with
// whatever it caches.
//
// The flush at thread_cleanup: this plugin flushes the allocator
// (Allocator::flush: drains its message queue, returns its fast free lists
// and empty slabs, posts its remote frees) before releasing it, as
// snmalloc's own thread teardown does. OE's 0.5-era
// 3rdparty/snmalloc/allocator.cpp did not (its oe_allocator_thread_cleanup
// was current_alloc_pool()->release(ThreadAlloc::get()) and nothing else);
// its 0.6-era one, as found in a search of public sources (thirtieth
// session), calls teardown(), which flushes. Without the flush (build with
// -DFIXED_SNMALLOC_OE_RELEASE_ONLY) snmalloc 0.7.6 takes about 0.6x the CPU
// for the same work of workload B on 2 CPUs (--ecalls 400), but fills B's
// 64 MiB region within seconds (NULLs; a new allocator for the teardown
// call then aborts: "Failed to initialise thread local allocator"). With
// the flush, every ECALL pays for it, the short ECALLs of B's other threads
// most.
//
// Its locks spin, as in an enclave. snmalloc 0.7's combining lock (the
// backend's global range; the allocator pool's lock always spins) takes
// its waiting primitive from DefaultPal, not from the Config's PAL: on
// Linux a queued waiter that has spun 100 pauses sleeps on a futex, unless
// built with SNMALLOC_USE_WAIT_ON_ADDRESS=0. An enclave thread cannot make
// that system call directly (it would need an OCALL, which OE's own
// mutexes make and its snmalloc does not), and snmalloc's OE PAL has no
// WaitOnAddress: built for OE, 0.7.6 spins, as OE's dlmalloc lock and
// tessalloc's do. (OE itself ships snmalloc 0.6.2, whose backend lock is
// a plain spin lock: the waiting is reproduced, not the lock's algorithm.)
// Built with the futex (until the thirtieth session), workload B pooled on
// 2 CPUs made 56,843 futex calls in 3 s (strace -f -c). One OS call is
// left: a new allocator (the pool empty) draws its free-list keys with
// getrandom, where OE uses oe_random; a warm-up cost only.
//
// This file does not replace the process's malloc: no snmalloc override is
// compiled in, and the plugin exports only fixed_allocator().
//
// Build (build_peers.py): g++ -std=c++20 -O3 -fPIC -mcx16 -fno-exceptions
//   -fno-rtti -DNDEBUG -DSNMALLOC_USE_WAIT_ON_ADDRESS=0
//   -I<snmalloc-sys>/upstream/src -shared snmalloc_plugin.cc ...

#define SNMALLOC_EXTERNAL_THREAD_ALLOC
#define SNMALLOC_PROVIDE_OWN_CONFIG

#include <snmalloc/backend/fixedglobalconfig.h>
#include <snmalloc/snmalloc_core.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace snmalloc
{
  // One fixed address range, no OS allocation at all.
  using Config = FixedRangeConfig<PALNoAlloc<DefaultPal>>;
  using Alloc = Allocator<Config>;
} // namespace snmalloc

namespace
{
  // The calling thread's allocator while it is inside an "enclave call";
  // null outside one.
  thread_local snmalloc::Alloc* tls_alloc = nullptr;
} // namespace

// snmalloc's front end (snmalloc_front.h) finds the thread's allocator
// through this class when SNMALLOC_EXTERNAL_THREAD_ALLOC is defined. The
// plugin calls the allocator directly, but the front end's helpers
// (alloc_size) are compiled with it.
class ThreadAllocExternal
{
public:
  static snmalloc::Alloc& get()
  {
    return *tls_alloc;
  }
};

#include <snmalloc/snmalloc_front.h>

extern "C"
{
#include "../fixed_alloc.h"
}

#ifndef PEER_VERSION
#  define PEER_VERSION "unknown"
#endif

namespace
{
  using snmalloc::Alloc;
  using snmalloc::Config;

  // Bytes at the start of the region taken by snmalloc's page map (computed
  // as FlatPagemap::init does), counted in the footprint.
  size_t pagemap_bytes = 0;

  // The pointer the region starts at once aligned (see sn_init).
  constexpr size_t REGION_ALIGN = 64;

  Alloc* acquire()
  {
    Alloc* a = snmalloc::AllocPool<Config>::acquire();
    tls_alloc = a;
    return a;
  }

  // The thread's allocator, taken from the pool on demand (for a call made
  // outside thread_init/thread_cleanup; it goes back to the pool only at a
  // later thread_cleanup on the same thread).
  inline Alloc* current()
  {
    Alloc* a = tls_alloc;
    return SNMALLOC_LIKELY(a != nullptr) ? a : acquire();
  }

  int sn_init(void* start, void* end)
  {
    auto s = reinterpret_cast<uintptr_t>(start);
    auto e = reinterpret_cast<uintptr_t>(end);
    if (s == 0 || e <= s)
      return -1;
    uintptr_t base = (s + REGION_ALIGN - 1) & ~(uintptr_t)(REGION_ALIGN - 1);
    if (e <= base)
      return -1;
    size_t length = e - base;

    // The page map: one entry per MIN_CHUNK_SIZE granule of the region,
    // rounded out to whole granules, at the start of the region.
    constexpr size_t granule = snmalloc::MIN_CHUNK_SIZE;
    uintptr_t map_lo = base & ~(uintptr_t)(granule - 1);
    uintptr_t map_hi = (e + granule - 1) & ~(uintptr_t)(granule - 1);
    size_t map_bytes = ((map_hi - map_lo) / granule) *
      sizeof(typename Config::PagemapEntry);
    // Room for the map and at least one chunk after alignment.
    if (map_bytes + 2 * granule > length)
      return -1;
    // snmalloc expects the page map to start zeroed (an enclave's heap
    // pages, or fresh mmap memory, are); the region here may hold anything.
    memset(reinterpret_cast<void*>(base), 0, map_bytes);
    pagemap_bytes = map_bytes;

    Config::init(nullptr, reinterpret_cast<void*>(base), length);
    return 0;
  }

  void sn_thread_init()
  {
    if (tls_alloc == nullptr)
      acquire();
  }

  void sn_thread_cleanup()
  {
    Alloc* a = tls_alloc;
    if (a == nullptr)
      return;
    // snmalloc's own thread teardown, not OE's (see the top of the file):
    // post this thread's pending remote frees, return its free lists and
    // empty slabs, then return the allocator to the pool.
#ifndef FIXED_SNMALLOC_OE_RELEASE_ONLY
    a->flush();
#endif
    snmalloc::AllocPool<Config>::release(a);
    tls_alloc = nullptr;
  }

  void* sn_malloc(size_t size)
  {
    return current()->alloc(size);
  }

  void sn_free(void* p)
  {
    if (p != nullptr)
      current()->dealloc(p);
  }

  void* sn_calloc(size_t count, size_t size)
  {
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
    {
      errno = ENOMEM;
      return nullptr;
    }
    return current()->alloc<snmalloc::Zero>(bytes);
  }

  size_t sn_usable_size(void* p)
  {
    // The fixed range's page map has no entry for address 0.
    return p == nullptr ? 0 : snmalloc::alloc_size<Config>(p);
  }

  void* sn_realloc(void* p, size_t size)
  {
    if (p == nullptr)
      return sn_malloc(size);
    if (size == 0)
    {
      sn_free(p);
      return nullptr;
    }
    size_t old = sn_usable_size(p);
    // Keep the block when the new size rounds to the same size class (as
    // snmalloc's own realloc does).
    if (snmalloc::round_size(size) == old)
      return p;
    void* q = sn_malloc(size);
    if (q != nullptr)
    {
      memcpy(q, p, old < size ? old : size);
      sn_free(p);
    }
    return q;
  }

  // Bytes of the region snmalloc holds: chunks taken from its global range
  // (the backend's StatsRange counts them, slabs, large blocks and allocator
  // metadata alike, including chunks cached by allocators) plus the page
  // map. Chunks returned to the global range are not counted.
  size_t sn_footprint()
  {
    return Config::Backend::get_current_usage() + pagemap_bytes;
  }

  size_t sn_footprint_peak()
  {
    return Config::Backend::get_peak_usage() + pagemap_bytes;
  }

  const fixed_allocator_t snmalloc_peer = {
    "snmalloc",
    PEER_VERSION,
    sn_init,
    sn_thread_init,
    sn_thread_cleanup,
    sn_malloc,
    sn_free,
    sn_calloc,
    sn_realloc,
    sn_usable_size,
    sn_footprint,
    sn_footprint_peak,
  };
} // namespace

extern "C" __attribute__((visibility("default"))) const fixed_allocator_t*
fixed_allocator(void)
{
  return &snmalloc_peer;
}
