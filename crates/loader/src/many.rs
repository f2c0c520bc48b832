//! Reading a list of objects at once, for front ends that want them all (Python's
//! [`get_many`]): the loader, in the order given, one GET per object.

use crate::dataset::Dataset;
use crate::loader::{Loader, LoaderOptions, Object, Order};
use crate::pool::BufferPool;
use sluice_core::{ObjectStore, ObjectUri, RangePlanner, Result};
use std::sync::Arc;

/// Every object of `uris` in the order given, `max_in_flight` at a time (at least one;
/// `None`: as many as the store's client allows, twice over, as a loader that follows its
/// store). The first failure (after retries) is the result.
pub async fn get_many(
    store: Arc<dyn ObjectStore>,
    uris: Vec<ObjectUri>,
    max_in_flight: Option<usize>,
) -> Result<Vec<Object>> {
    let dataset = Dataset::from_uris(uris);
    let prefetch = max_in_flight.map(|n| n.max(1));
    let opts = LoaderOptions {
        prefetch,
        order: Order::Input,
        // Everything is kept until the end anyway, and a budget would first ask each
        // object's size with a HEAD.
        memory_budget: None,
        // Sizes are unknown and every object is kept: one GET each into a buffer that grows
        // to fit, not a chunk-sized buffer per small object.
        range_threshold: RangePlanner::NEVER,
        // The process's pool for these calls, hard-capped: kept objects must not leave
        // more idle buffers behind than the cap (a loader's pool, without a budget, keeps
        // what its consumer once held).
        pool: Some(BufferPool::for_get_many()),
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(store, &dataset, opts)?;
    let mut out = Vec::with_capacity(dataset.len());
    while let Some(obj) = loader.next().await {
        out.push(obj?);
    }
    Ok(out)
}
