//! A global allocator that keeps a hostile element count from killing the process.
//!
//! `kafka-protocol` reserves `Vec::with_capacity(count)` for arrays before reading their
//! elements, with `count` straight off the wire (up to 2^31 elements, hundreds of GiB).
//! The system allocator refuses such a request and Rust aborts. This wrapper serves
//! allocations of at least `HUGE_ALLOCATION_BYTES` with an anonymous mapping reserved
//! with MAP_NORESERVE: address space only, no memory committed until touched. A bogus
//! count touches a few elements before the decoder runs out of frame bytes and fails;
//! the mapping is then unmapped. Genuine large buffers (a 100 MiB frame) work the same way,
//! committed page by page as they are written.
//!
//! Install in a binary with `#[global_allocator] static A: HugeAllocationGuard = HugeAllocationGuard;`.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at or above this size are served by `mmap(MAP_NORESERVE)`.
pub const HUGE_ALLOCATION_BYTES: usize = 1 << 30;

pub struct HugeAllocationGuard;

// SAFETY: small allocations are delegated to `System` unchanged. Huge ones come from
// mmap, which returns page-aligned (4 KiB) zero-filled memory; layouts needing larger
// alignment are delegated to `System` too. `dealloc` and `realloc` route by the same size
// test, so a block is always freed by the allocator that made it.
unsafe impl GlobalAlloc for HugeAllocationGuard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map_reserved(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map_reserved(layout.size()) // fresh anonymous mappings are zero-filled
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !is_huge(layout) && !is_huge(new_layout) {
            return System.realloc(ptr, layout, new_size);
        }
        let new_ptr = self.alloc(new_layout);
        if !new_ptr.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new_ptr
    }
}

fn is_huge(layout: Layout) -> bool {
    layout.size() >= HUGE_ALLOCATION_BYTES && layout.align() <= 4096
}

unsafe fn map_reserved(size: usize) -> *mut u8 {
    let ptr = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}
