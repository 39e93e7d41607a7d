//! dlmalloc (the crates.io `dlmalloc` crate) over one fixed region, behind
//! one global lock: the enclave benchmark's model of Open Enclave's default
//! allocator.
//!
//! The crate asks its `Allocator` for system memory; here that is a bump
//! pointer over the region given to `tdl_init` -- an sbrk over a heap
//! reserved up front. It hands out memory until the region is exhausted
//! (then null) and takes back the top that dlmalloc trims, as OE's
//! dlmalloc_sbrk does with a negative increment. All of dlmalloc's state is
//! reached through one lock, as OE serialises every dlmalloc call with one,
//! and it is OE's kind of lock: a spin lock (USE_LOCKS 1, and dlmalloc
//! 2.8.6 then defaults to USE_SPIN_LOCKS on x86 with GCC or Clang: a
//! test-and-test-and-set loop whose periodic sched_yield OE's allocator.c
//! replaces with a pause or nothing, since an enclave cannot yield). Waiting
//! threads spin and never sleep. A sleeping lock (`std::sync::Mutex`, this
//! peer's first model) is kinder where threads outnumber CPUs, but with a
//! core per thread it collapses: on 16 CPUs workload A at 16 threads took
//! 3.4 s with it against 11 ms at one thread, about 19 times less work per
//! second with sixteen cores than with one.
//!
//! The C side (`dlmalloc_plugin.c`) wraps these `tdl_*` functions in the
//! harness's `fixed_allocator_t`.

use core::ffi::{c_int, c_void};
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dlmalloc::{Allocator, Dlmalloc};

/// The bump pointer's granularity: what the crate's `page_size` reports
/// and how far apart segment boundaries fall.
const PAGE: usize = 4096;

/// The granularity dlmalloc asks its system allocator for memory in (C
/// dlmalloc's default over sbrk is one page; the crate defaults to 64 KiB).
const GRANULARITY: usize = PAGE;

/// Alignment of the start of the region handed to dlmalloc.
const REGION_ALIGN: usize = 64;

/// Next free byte of the region (0 until `tdl_init`).
static CURSOR: AtomicUsize = AtomicUsize::new(0);
/// First byte of the region after alignment (0 until `tdl_init`).
static BASE: AtomicUsize = AtomicUsize::new(0);
/// The highest the cursor has been (0 until `tdl_init`).
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// One past the last usable byte of the region (0 until `tdl_init`).
static LIMIT: AtomicUsize = AtomicUsize::new(0);

/// An sbrk over the pre-reserved region. All its state is in the statics
/// above; it is only called with the heap lock held.
struct Bump;

unsafe impl Allocator for Bump {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let cur = CURSOR.load(Ordering::Relaxed);
        let limit = LIMIT.load(Ordering::Relaxed);
        if cur == 0 || size > limit - cur {
            return (ptr::null_mut(), 0, 0);
        }
        CURSOR.store(cur + size, Ordering::Relaxed);
        PEAK.fetch_max(cur + size, Ordering::Relaxed);
        (cur as *mut u8, size, 0)
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    // OE's dlmalloc_sbrk takes negative increments, and OE's dlmalloc
    // (3rdparty/dlmalloc/allocator.c: MORECORE without MORECORE_CANNOT_TRIM)
    // trims its top chunk beyond the trim threshold (2 MiB) with them: the
    // bump pointer goes back when the memory given back ends at it.
    fn free_part(&self, ptr: *mut u8, oldsize: usize, newsize: usize) -> bool {
        let end = ptr as usize + oldsize;
        CURSOR
            .compare_exchange(end, ptr as usize + newsize, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    fn free(&self, ptr: *mut u8, size: usize) -> bool {
        self.free_part(ptr, size, 0)
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        true
    }

    fn allocates_zeros(&self) -> bool {
        // The region's contents are whatever the caller left there.
        false
    }

    fn page_size(&self) -> usize {
        PAGE
    }
}

/// The one lock around the heap, as OE's dlmalloc takes it: try to take
/// it, and while it is held read it (not write it) until it is free.
struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// The value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    const fn new(value: T) -> Self {
        SpinLock { held: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    fn lock(&self) -> SpinGuard<'_, T> {
        while self.held.swap(true, Ordering::Acquire) {
            while self.held.load(Ordering::Relaxed) {
                core::hint::spin_loop();
            }
        }
        SpinGuard { lock: self }
    }
}

struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

static HEAP: SpinLock<Dlmalloc<Bump>> = SpinLock::new(Dlmalloc::new_with_allocator(Bump));

fn heap() -> SpinGuard<'static, Dlmalloc<Bump>> {
    HEAP.lock()
}

/// Make `[start, end)` the heap. Returns 0, or -1 if the region is
/// unusable (null, reversed, or too small for one page) or init already ran.
///
/// # Safety
/// `[start, end)` must be writable memory that nothing else uses.
#[no_mangle]
pub unsafe extern "C" fn tdl_init(start: *mut c_void, end: *mut c_void) -> c_int {
    let (s, e) = (start as usize, end as usize);
    if s == 0 || e <= s {
        return -1;
    }
    let base = (s + REGION_ALIGN - 1) & !(REGION_ALIGN - 1);
    let limit = e & !(REGION_ALIGN - 1);
    if limit <= base || limit - base < PAGE {
        return -1;
    }
    let mut h = heap();
    if BASE.load(Ordering::Relaxed) != 0 {
        return -1;
    }
    if !h.set_granularity(GRANULARITY) {
        return -1;
    }
    BASE.store(base, Ordering::Relaxed);
    LIMIT.store(limit, Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    CURSOR.store(base, Ordering::Release);
    0
}

/// C `malloc`.
///
/// # Safety
/// `tdl_init` must have succeeded.
#[no_mangle]
pub unsafe extern "C" fn tdl_malloc(size: usize) -> *mut c_void {
    heap().c_malloc(size).cast()
}

/// C `free`.
///
/// # Safety
/// `p` is null or a live block from this heap.
#[no_mangle]
pub unsafe extern "C" fn tdl_free(p: *mut c_void) {
    if !p.is_null() {
        heap().c_free(p.cast());
    }
}

/// C `calloc`: null on overflow of `count * size`.
///
/// # Safety
/// `tdl_init` must have succeeded.
#[no_mangle]
pub unsafe extern "C" fn tdl_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(bytes) = count.checked_mul(size) else {
        return ptr::null_mut();
    };
    let p = heap().c_malloc(bytes);
    if !p.is_null() {
        // The region is not known to be zero (allocates_zeros is false), so
        // dlmalloc's calloc would always clear too; do it outside the lock.
        ptr::write_bytes(p, 0, bytes);
    }
    p.cast()
}

/// C `realloc`.
///
/// # Safety
/// `p` is null or a live block from this heap.
#[no_mangle]
pub unsafe extern "C" fn tdl_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    heap().c_realloc(p.cast(), size).cast()
}

/// Usable bytes of a live block, from its dlmalloc chunk header: the size
/// word just below the block holds the chunk size in its upper bits and
/// three flag bits; an in-use chunk that is not mmapped (the only kind a
/// bump allocator produces) has one word of overhead, an mmapped one two.
///
/// # Safety
/// `p` is null or a live block from this heap.
#[no_mangle]
pub unsafe extern "C" fn tdl_usable_size(p: *mut c_void) -> usize {
    const WORD: usize = core::mem::size_of::<usize>();
    const FLAG_BITS: usize = 7;
    const INUSE: usize = 3;
    if p.is_null() {
        return 0;
    }
    // Only the flag bits of this word change while the block is live (when
    // its neighbour is freed or allocated under the lock): read it
    // atomically and mask them off.
    let head_ptr = p.cast::<u8>().sub(WORD).cast::<usize>();
    let head = AtomicUsize::from_ptr(head_ptr).load(Ordering::Relaxed);
    let overhead = if head & INUSE == 0 { 2 * WORD } else { WORD };
    (head & !FLAG_BITS) - overhead
}

/// Bytes of the region below `mark` (0 before `tdl_init`).
fn above_base(mark: &AtomicUsize) -> usize {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 {
        return 0;
    }
    mark.load(Ordering::Relaxed) - base
}

/// Bytes of the region below the bump pointer (dlmalloc's footprint: its
/// top is trimmed back, as over OE's sbrk).
#[no_mangle]
pub extern "C" fn tdl_footprint() -> usize {
    above_base(&CURSOR)
}

/// The most `tdl_footprint` has been since `tdl_init`.
#[no_mangle]
pub extern "C" fn tdl_footprint_peak() -> usize {
    above_base(&PEAK)
}
