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

#![warn(missing_docs)]

mod budget;
mod columns;
pub mod dataset;
mod delivery;
mod driver;
mod fetch;
mod fresh;
mod item;
pub mod loader;
mod many;
mod options;
pub mod pool;
pub mod shm;
pub mod stats;
pub mod trim;

/// The tests run under the allocator the binaries install, so that `shm`'s are real.
#[cfg(test)]
#[global_allocator]
static ALLOC: shm::PoolAlloc = shm::PoolAlloc;

pub use budget::MemoryUnits;
pub use dataset::{Dataset, Item, Sharding};
pub use delivery::Object;
pub use loader::Loader;
pub use many::{get_many, get_one};
pub use options::{
    DEFAULT_MEMORY_BUDGET, DEFAULT_RANGE_THRESHOLD, FOLLOW_MAX, FOLLOW_MIN, LoaderOptions, OnError,
    Order,
};
pub use pool::{BufferPool, PoolStats};
pub use stats::StatsSnapshot;
