//! Taking the binding's locks from Python without freezing the interpreter.
//!
//! A thread may hold a camera, processor or tensor lock across a wait with the GIL released
//! (a capture, a conversion). Another thread that then waited for that lock while holding
//! the GIL would stop every Python thread for as long: these helpers wait with the GIL
//! released and take the lock with it held (a guard cannot leave `Python::detach`).
//! Poisoned locks are recovered: the state they guard is valid between statements.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, TryLockError, TryLockResult};

use pyo3::Python;

/// Takes a lock with `try_lock` under the GIL; while it would block, waits for it (by
/// taking and dropping it) with the GIL released. Another thread may take it in between;
/// then this waits again.
fn take<G>(
    py: Python<'_>,
    mut try_take: impl FnMut() -> TryLockResult<G>,
    wait: impl Fn() + Send + Sync,
) -> G {
    loop {
        match try_take() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(TryLockError::WouldBlock) => py.detach(&wait),
        }
    }
}

/// `m.lock()`, waiting with the GIL released.
pub(crate) fn lock_without_gil<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    take(py, || m.try_lock(), || drop(m.lock()))
}

/// `l.read()`, waiting with the GIL released.
pub(crate) fn read_without_gil<'a, T: Send + Sync>(
    py: Python<'_>,
    l: &'a RwLock<T>,
) -> RwLockReadGuard<'a, T> {
    take(py, || l.try_read(), || drop(l.read()))
}
