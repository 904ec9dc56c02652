//! The global allocator of the `norr` binary.
//!
//! mimalloc rather than glibc malloc: the data node allocates and frees many
//! small objects per operation and a few batch-sized buffers per request, and
//! glibc consolidates its fast bins on every allocation of 1 KiB or more (about
//! 30% of an update's instructions went to malloc/free).
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it sends every request, even
//! `Layout { align: 1 }`, through `mi_malloc_aligned`. That entry point has a
//! fast path only while the size class's free list is non-empty; when it is
//! empty it falls back to over-allocating from a *larger* size class instead
//! of collecting the blocks freed into the page's local free list, so a
//! steady allocate/free cycle of one size keeps missing the fast path. In
//! `norr sqld` under sysbench half of all allocations took that fallback and
//! allocation cost 14% of the process's instructions (callgrind, see
//! bench/RESULTS.md). Plain `mi_malloc` / `mi_realloc` have no such fallback.
//!
//! Alignment: every mimalloc block is word (8-byte) aligned, and a request
//! whose size is a multiple of 16 lands in a size class that is too (the
//! classes are exact word counts up to 64 bytes, even word counts above), so
//! plain calls serve `align <= 8`, and `align == 16` when the size is a
//! multiple of 16, which Rust guarantees for any type of alignment 16. The
//! result is still checked; a misaligned block (a mimalloc change breaking
//! that reasoning) is given back and the aligned entry point used instead.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as ffi;

/// `#[global_allocator] static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;`
pub struct Allocator;

/// True if a plain (unaligned) mimalloc call is expected to satisfy `align`
/// for a block of `size` bytes.
#[inline]
fn plain_suffices(size: usize, align: usize) -> bool {
    align <= 8 || (align == 16 && size & 15 == 0)
}

#[inline]
fn aligned(p: *mut c_void, align: usize) -> bool {
    (p as usize) & (align - 1) == 0
}

unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if plain_suffices(size, align) {
            let p = ffi::mi_malloc(size);
            if aligned(p, align) {
                return p as *mut u8;
            }
            ffi::mi_free(p);
        }
        ffi::mi_malloc_aligned(size, align) as *mut u8
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if plain_suffices(size, align) {
            let p = ffi::mi_zalloc(size);
            if aligned(p, align) {
                return p as *mut u8;
            }
            ffi::mi_free(p);
        }
        ffi::mi_zalloc_aligned(size, align) as *mut u8
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        ffi::mi_free(ptr as *mut c_void);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        if !plain_suffices(new_size, align) {
            return ffi::mi_realloc_aligned(ptr as *mut c_void, new_size, align) as *mut u8;
        }
        let p = ffi::mi_realloc(ptr as *mut c_void, new_size);
        if p.is_null() || aligned(p, align) {
            return p as *mut u8;
        }
        // The contents moved to a misaligned block (and `ptr` is freed): move
        // them once more, into an aligned one.
        let q = ffi::mi_malloc_aligned(new_size, align);
        if !q.is_null() {
            core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, new_size.min(layout.size()));
        }
        ffi::mi_free(p);
        q as *mut u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(p: *mut u8, n: usize) {
        for i in 0..n {
            unsafe { *p.add(i) = (i * 31 + 7) as u8 };
        }
    }

    fn holds_pattern(p: *const u8, n: usize) -> bool {
        (0..n).all(|i| unsafe { *p.add(i) } == (i * 31 + 7) as u8)
    }

    /// Sizes and alignments a Rust type can ask for, allocated, grown, shrunk
    /// and freed: every block comes back aligned and keeps its contents.
    #[test]
    fn alignment_and_contents_survive_alloc_and_realloc() {
        let a = Allocator;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            let sizes = (1..=64).map(|k| k * align).chain([8192 + align * 3, 300_000]);
            for size in sizes.map(|s| s.next_multiple_of(align)) {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let mut p = a.alloc(layout);
                    assert!(!p.is_null() && aligned(p.cast(), align), "alloc {size}/{align}");
                    fill(p, size);
                    for new_size in [size * 2 + align, (size / 2).next_multiple_of(align).max(align)] {
                        let q = a.realloc(p, layout, new_size);
                        assert!(!q.is_null() && aligned(q.cast(), align), "realloc {size}->{new_size}/{align}");
                        assert!(holds_pattern(q, size.min(new_size)), "realloc {size}->{new_size}/{align}");
                        p = a.realloc(q, Layout::from_size_align(new_size, align).unwrap(), size);
                        assert!(!p.is_null() && aligned(p.cast(), align));
                        assert!(holds_pattern(p, size.min(new_size)));
                        fill(p, size);
                    }
                    a.dealloc(p, layout);
                    let z = a.alloc_zeroed(layout);
                    assert!(!z.is_null() && aligned(z.cast(), align));
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed {size}/{align}");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
