//! The tokio runtime a front end runs its client on, sized by `SLUICE_THREADS`.

/// A multi-threaded runtime for a loader's client: `SLUICE_THREADS` worker threads, else one
/// per CPU this process may use. A `SLUICE_THREADS` that is not a positive number is an
/// `InvalidInput` error naming it.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let threads = sluice_core::settings::THREADS
        .from_env()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    runtime_with_threads(threads.filter(|n| *n > 0).unwrap_or_else(cpus))
}

/// A multi-threaded runtime with `threads` worker threads (at least one).
pub fn runtime_with_threads(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("sluice")
        .enable_all()
        .build()
}

/// `SLUICE_THREADS` when it is a positive number (a bad value reads as unset here; the
/// client refuses it), else the CPUs this process may use.
pub fn default_threads() -> usize {
    sluice_core::settings::THREADS
        .from_env()
        .ok()
        .flatten()
        .filter(|n| *n > 0)
        .unwrap_or_else(cpus)
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
