//! The tokio runtime a front end runs its client on, sized by `SLUICE_THREADS`.

/// A multi-threaded runtime for a loader's client: `SLUICE_THREADS` worker threads, else one
/// per CPU this process may use.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    runtime_with_threads(default_threads())
}

/// A multi-threaded runtime with `threads` worker threads (at least one).
pub fn runtime_with_threads(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("sluice")
        .enable_all()
        .build()
}

/// `SLUICE_THREADS` when it is a positive number, else the CPUs this process may use.
pub fn default_threads() -> usize {
    threads_from(std::env::var("SLUICE_THREADS").ok().as_deref())
}

fn threads_from(setting: Option<&str>) -> usize {
    setting
        .and_then(|v| v.trim().parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sluice_threads_counts_only_when_positive() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(threads_from(Some(" 3 ")), 3);
        assert_eq!(threads_from(Some("0")), cpus);
        assert_eq!(threads_from(Some("many")), cpus);
        assert_eq!(threads_from(None), cpus);
    }
}
