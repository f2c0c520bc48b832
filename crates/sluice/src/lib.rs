//! sluice: read training data from S3-compatible storage at the speed of the network.
//!
//! The front door for applications and for sluice's own CLI and Python module: it owns the
//! choice of client stack (`S3_BACKEND=hyper|awssdk|objectstore`, and the cargo features of
//! the same names), the runtime (`SLUICE_THREADS`), and re-exports the core and loader APIs.
//! Endpoint, region and credentials come from the standard AWS environment
//! (`StoreConfig::from_env`).
//!
//! ```no_run
//! # async fn demo() -> sluice::Result<()> {
//! let store = sluice::open(None, sluice::StoreConfig::from_env().await?)?;
//! let prefix = sluice::ObjectUri::parse("s3://bucket/train/")?;
//! let dataset = sluice::Dataset::from_prefix(store.as_ref(), &prefix, Some(".npz")).await?;
//! let mut loader = sluice::Loader::new(store, &dataset, sluice::LoaderOptions::default())?;
//! while let Some(obj) = loader.next().await {
//!     println!("{} {}", obj?.uri, "bytes");
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod logging;
pub mod registry;
mod runtime;

pub use registry::{KNOWN, compiled, open};
pub use runtime::{default_threads, runtime, runtime_with_threads};
pub use sluice_core as core;
pub use sluice_core::{Error, ObjectStore, ObjectStoreExt, ObjectUri, Result, StoreConfig};
pub use sluice_loader as loader;
pub use sluice_loader::{Dataset, Loader, LoaderOptions, Object};
