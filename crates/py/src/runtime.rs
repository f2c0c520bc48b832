//! One tokio runtime per process, created on first use and rebuilt after `fork`.
//!
//! A forked child (PyTorch DataLoader workers with the fork start method) inherits the
//! parent's memory but none of its threads: the parent's runtime and the connections of its
//! clients are unusable there. Everything process-bound is therefore keyed by process id and
//! rebuilt when the id changes; the parent's copies are leaked in the child, since dropping
//! them would wait for threads that do not exist.

use crate::errors::to_py;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::pyfunction;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::runtime::Runtime;
use tokio::time::timeout;

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

/// Runs `fut` to completion on this process's runtime with the GIL released, checking for
/// signals every `SIGNAL_CHECK` so that Ctrl-C cancels a call stuck on a stalled request.
pub fn block<T: Send + 'static>(
    py: Python<'_>,
    fut: impl Future<Output = sluice_core::Result<T>> + Send + 'static,
) -> PyResult<T> {
    block_map(py, fut, to_py)
}

/// A call's work, its arguments checked and owned: `run` waits for it (the blocking API),
/// `aio::awaitable` hands it to asyncio.
pub type Call<T> = futures::future::BoxFuture<'static, PyResult<T>>;

/// `fut` as a `Call`, its error made a Python exception.
pub fn call<T>(fut: impl Future<Output = sluice_core::Result<T>> + Send + 'static) -> Call<T> {
    Box::pin(async move { fut.await.map_err(to_py) })
}

/// `block` for a future whose errors are already Python's (a `Call`).
pub fn run<T: Send + 'static>(
    py: Python<'_>,
    fut: impl Future<Output = PyResult<T>> + Send + 'static,
) -> PyResult<T> {
    block(py, async move { Ok::<_, sluice_core::Error>(fut.await) })?
}

/// `block`, its error made a Python exception by `map`.
pub fn block_map<T: Send + 'static>(
    py: Python<'_>,
    fut: impl Future<Output = sluice_core::Result<T>> + Send + 'static,
    map: impl FnOnce(sluice_core::Error) -> PyErr,
) -> PyResult<T> {
    let rt = runtime()?;
    let mut task = rt.spawn(fut);
    loop {
        // `timeout` needs the runtime's context: build it inside the async block.
        let waited = py.detach(|| rt.block_on(async { timeout(SIGNAL_CHECK, &mut task).await }));
        match waited {
            Ok(Ok(result)) => return result.map_err(map),
            // A panic inside the task stays a task failure, never a panic in Python.
            Ok(Err(e)) => return Err(PyRuntimeError::new_err(format!("I/O task failed: {e}"))),
            Err(_elapsed) => {
                if let Err(interrupted) = py.check_signals() {
                    task.abort();
                    return Err(interrupted);
                }
            }
        }
    }
}

/// As `block`, for a future that borrows from the caller (bytes lent for the call): polled
/// on this thread, not spawned, so that an interrupt drops it before this returns and
/// nothing outlives the loan.
pub fn block_lent<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = sluice_core::Result<T>> + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    let mut fut = std::pin::pin!(fut);
    loop {
        // `timeout` needs the runtime's context: built inside the async block.
        let waited = py.detach(|| rt.block_on(async { timeout(SIGNAL_CHECK, fut.as_mut()).await }));
        match waited {
            Ok(result) => return result.map_err(to_py),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}
