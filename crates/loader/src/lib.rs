//! sluice-loader: reading many objects fast from one process.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn sluice_core::ObjectStore>) -> sluice_core::Result<()> {
//! use sluice_loader::{Dataset, Loader, LoaderOptions};
//! let prefix = sluice_core::ObjectUri::parse("s3://bucket/train/")?;
//! let dataset = Dataset::from_prefix(store.as_ref(), &prefix, Some(".npz")).await?;
//! let mut loader = Loader::new(store, &dataset, LoaderOptions::default())?;
//! while let Some(obj) = loader.next().await {
//!     let obj = obj?;
//!     println!("{} {}", obj.uri, obj.data.len());
//! }
//! # Ok(()) }
//! ```

pub mod dataset;
mod fetch;
mod hugepages;
pub mod loader;
pub mod pool;
pub mod registry;
pub mod stats;

pub use dataset::{Dataset, Item, Sharding};
pub use loader::{DEFAULT_MEMORY_BUDGET, Loader, LoaderOptions, Object, OnError, Order};
pub use pool::BufferPool;
pub use stats::StatsSnapshot;

/// A multi-threaded runtime for a loader's client: SLUICE_THREADS worker threads, else one
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

pub fn default_threads() -> usize {
    std::env::var("SLUICE_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
