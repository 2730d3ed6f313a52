//! The process's allocator, counting the bytes held while [`COUNTING`] is on: what one
//! phase of a bench leaves allocated (the guest's code run natively in the session bench,
//! the host's part of each hibernated session in the hibernation bench). Inside a
//! component the guest's allocations land in its linear memory, where the host cannot tell
//! them apart. Off, it costs one relaxed load per allocation.
#![allow(dead_code)] // the broker bench counts nothing

use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Counting is on.
pub static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed while counting was on.
pub static HELD: AtomicIsize = AtomicIsize::new(0);
/// The most [`HELD`] has been: a guest's linear memory keeps the pages of its high-water
/// mark resident (freed memory is never given back), so its peak is what a session costs.
pub static PEAK: AtomicIsize = AtomicIsize::new(0);

fn count(bytes: isize) {
    let held = HELD.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(held, Ordering::Relaxed);
}

struct Counting;

// Sound: every call is passed to the system allocator unchanged; only a counter is added.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { std::alloc::System.alloc(layout) };
        if !ptr.is_null() && COUNTING.load(Ordering::Relaxed) {
            count(layout.size() as isize);
        }
        ptr
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            count(-(layout.size() as isize));
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        if !moved.is_null() && COUNTING.load(Ordering::Relaxed) {
            count(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
