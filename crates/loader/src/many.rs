//! Reading a list of objects at once, for front ends that want them all (Python's
//! `get_many`): the loader, in the order given, with its ranged reads and shared pool.

use crate::dataset::Dataset;
use crate::loader::{Loader, LoaderOptions, Object, Order};
use sluice_core::{ObjectStore, ObjectUri, Result};
use std::sync::Arc;

/// Every object of `uris` in the order given, `max_in_flight` at a time (at least one).
/// The first failure (after retries) is the result.
pub async fn get_many(
    store: Arc<dyn ObjectStore>,
    uris: Vec<ObjectUri>,
    max_in_flight: usize,
) -> Result<Vec<Object>> {
    let dataset = Dataset::from_uris(uris);
    let opts = LoaderOptions {
        prefetch: max_in_flight.max(1),
        order: Order::Input,
        // Everything is kept until the end anyway, and a budget would first ask each
        // object's size with a HEAD.
        memory_budget: None,
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(store, &dataset, opts)?;
    let mut out = Vec::with_capacity(dataset.len());
    while let Some(obj) = loader.next().await {
        out.push(obj?);
    }
    Ok(out)
}
