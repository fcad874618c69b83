//! Helpers shared by tether's crates (`tether-broker`, `tether-sdk`); not part of any API and
//! hidden from the documentation.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, also when it is poisoned.
///
/// A lock is poisoned when a thread panicked while holding it. tether's locks guard plain data
/// that every critical section leaves consistent (nothing under them panics half-way through an
/// update), so the data behind a poisoned lock is still valid, and carrying on is better than
/// turning one panic into a panic of every later user of the lock.
///
/// ```
/// use std::sync::Mutex;
/// use tether_transport::internal::lock;
///
/// let counter = Mutex::new(0);
/// *lock(&counter) += 1;
/// assert_eq!(*lock(&counter), 1);
/// ```
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
