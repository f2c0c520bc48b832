//! One tokio runtime per process, created on first use and rebuilt after `fork`.
//!
//! A forked child (PyTorch DataLoader workers with the fork start method) inherits the
//! parent's memory but none of its threads: the parent's runtime and the connections of its
//! clients are unusable there. Everything process-bound is therefore keyed by process id and
//! rebuilt when the id changes; the parent's copies are leaked in the child, since dropping
//! them would wait for threads that do not exist.

use pyo3::PyResult;
use pyo3::exceptions::PyRuntimeError;
use pyo3::pyfunction;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::runtime::Runtime;

/// A value that belongs to the process that made it.
#[derive(Debug)]
pub struct PerProcess<T> {
    slot: Mutex<Option<(u32, Arc<T>)>>,
}

impl<T> PerProcess<T> {
    pub const fn new() -> Self {
        Self {
            slot: Mutex::new(None),
        }
    }

    /// This process's value, made by `make` the first time (and after a fork).
    pub fn get_or_try_init(&self, make: impl FnOnce() -> PyResult<T>) -> PyResult<Arc<T>> {
        let pid = std::process::id();
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some((owner, v)) if *owner == pid => Ok(v.clone()),
            _ => {
                if let Some((_, inherited)) = slot.take() {
                    std::mem::forget(inherited);
                }
                let v = Arc::new(make()?);
                *slot = Some((pid, v.clone()));
                Ok(v)
            }
        }
    }
}

static RUNTIME: PerProcess<Runtime> = PerProcess::new();

/// Worker threads asked for by `set_runtime_threads` (0: SLUICE_THREADS, else one per CPU).
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// How long Rust waits without the GIL before checking for Ctrl-C (and other signals).
pub const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

pub fn runtime() -> PyResult<Arc<Runtime>> {
    RUNTIME.get_or_try_init(|| {
        let built = match THREADS.load(Ordering::Relaxed) {
            0 => sluice::runtime(),
            n => sluice::runtime_with_threads(n),
        };
        built.map_err(|e| PyRuntimeError::new_err(format!("cannot start the I/O runtime: {e}")))
    })
}

impl<T> PerProcess<T> {
    /// Whether this process has made its value yet.
    pub fn is_set(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        matches!(slot.as_ref(), Some((owner, _)) if *owner == std::process::id())
    }
}

/// Sets the I/O runtime's worker threads for this process (and its forks). Takes effect only
/// before the runtime starts (the first I/O call); returns whether it did.
#[pyfunction]
pub fn set_runtime_threads(threads: usize) -> bool {
    THREADS.store(threads, Ordering::Relaxed);
    !RUNTIME.is_set()
}

/// Fails clearly when an object made in one process is used in a forked child.
pub fn check_owner(owner: u32, what: &str) -> PyResult<()> {
    if owner == std::process::id() {
        Ok(())
    } else {
        Err(PyRuntimeError::new_err(format!(
            "this {what} was created in process {owner} and cannot be used after fork; create it in the worker (for example in worker_init_fn or __iter__)"
        )))
    }
}
