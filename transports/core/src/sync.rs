//! The poison-tolerant lock every transport uses for its counters and small state.
//!
//! Why: a `std::sync::Mutex` is poisoned when a thread panics while holding it, and
//! `lock().unwrap()` then panics in every later caller. For a transport that would turn
//! one bug in a delivery into a second panic in `diagnose` or `send`, long after the
//! first, hiding what actually went wrong. The data behind these locks (counters, the
//! last error, a rate limiter's buckets) stays usable after a panic, so the guard is
//! taken anyway.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the guard even when a panic elsewhere poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let counter = std::sync::Arc::new(Mutex::new(1));
        let held = counter.clone();
        let panicked = std::thread::spawn(move || {
            let mut guard = held.lock().expect("not poisoned yet");
            *guard = 2;
            panic!("a bug while holding the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(counter.is_poisoned());
        assert_eq!(*lock(&counter), 2);
    }
}
