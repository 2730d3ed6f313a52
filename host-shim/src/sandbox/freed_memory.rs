//! Gives the memory that hibernating sessions freed back to the system
//! (docs/scaling.md#idle-sessions).
//!
//! A session's instance comes and goes (a wake, a sleep), and with it the host's part of
//! the store: thousands of allocations freed between the long-lived pieces each session
//! keeps while it sleeps. glibc keeps such free chunks resident in its arenas, so a node
//! whose sessions had all hibernated still held the memory of the instances it had run:
//! measured at 2,000 hibernated sessions, 19.7 KiB resident per session, of which 12.3 KiB
//! was allocated. `malloc_trim` hands every whole free page inside the arenas back to the
//! kernel, not only the top of the heap.

use std::sync::atomic::{AtomicU64, Ordering};

/// At most one trim per this many ms by the sessions' clock: a trim walks every arena's free
/// lists under its lock (milliseconds with a large heap), and a node that hibernates
/// thousands of sessions in a minute needs it about once, not once per session.
pub const EVERY_MS: u64 = 1_000;

/// When memory was last given back, ms; 0 for never.
pub struct Trims {
    last_ms: AtomicU64,
}

/// The process's trims: the allocator is one per process, whichever session asks.
static TRIMS: Trims = Trims::new();

impl Trims {
    /// Never trimmed yet.
    pub const fn new() -> Trims {
        Trims {
            last_ms: AtomicU64::new(0),
        }
    }

    /// Whether a trim is due at `now_ms`, taking it if so: the first ever, or [`EVERY_MS`]
    /// or more from the last by the caller's clock (either way: sessions may run on clocks
    /// that disagree, and a clock behind the last trim must not stop trims for good).
    pub fn take(&self, now_ms: u64) -> bool {
        let last = self.last_ms.load(Ordering::Relaxed);
        if last != 0 && now_ms.abs_diff(last) < EVERY_MS {
            return false;
        }
        // Two sessions hibernating at once: one of them trims.
        self.last_ms
            .compare_exchange(last, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

impl Default for Trims {
    fn default() -> Self {
        Trims::new()
    }
}

/// A session has just dropped its instance at `now_ms`: returns the allocator's free pages to
/// the system, at most once per [`EVERY_MS`]. True when it trimmed.
pub fn release(now_ms: u64) -> bool {
    if !TRIMS.take(now_ms) {
        return false;
    }
    trim();
    true
}

/// Returns the allocator's free pages to the system now, whatever the last trim: for a
/// reading of resident memory (a benchmark's) that must not count what was freed before.
pub fn release_now() {
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointer; it works on glibc's own arenas under their locks.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl's, macOS's) give freed pages back by themselves or offer no call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_is_taken_at_most_once_a_second_by_the_clock_that_asks() {
        let trims = Trims::new();
        assert!(trims.take(10_000), "the first is due");
        assert!(!trims.take(10_000), "not twice at once");
        assert!(!trims.take(10_999));
        assert!(trims.take(11_000), "a second later");
        // A session on a clock behind the last trim still gets one a second apart.
        assert!(!trims.take(10_500));
        assert!(trims.take(9_000));
    }
}
