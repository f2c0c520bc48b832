//! Reads for front ends that ask for objects one call at a time (Python's `get`,
//! `get_range`, [`get_many`]): the bytes land in the process's capped pool
//! ([`BufferPool::for_get_many`]), so a caller that reads and drops, call after call, reuses
//! memory instead of faulting in fresh pages each time (on a VM those cost more than the
//! copy of the bytes).

use crate::dataset::Dataset;
use crate::delivery::Object;
use crate::fetch::Fetcher;
use crate::loader::Loader;
use crate::options::{
    DEFAULT_MEMORY_BUDGET, DEFAULT_RANGE_THRESHOLD, FOLLOW_MAX, LoaderOptions, Order,
};
use crate::pool::BufferPool;
use bytes::Bytes;
use sluice_core::{
    Error, GetOptions, ObjectStore, ObjectUri, RangePlanner, RangeSize, Result, Segment,
};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Every object of `uris` in the order given, `max_in_flight` at a time (at least one;
/// `None`: as many as the store's client allows, twice over, as a loader that follows its
/// store). The first failure (after retries) is the result.
pub async fn get_many(
    store: Arc<dyn ObjectStore>,
    uris: Vec<ObjectUri>,
    max_in_flight: Option<usize>,
) -> Result<Vec<Object>> {
    let dataset = Dataset::from_uris(uris);
    let max_in_flight = max_in_flight.map(|n| n.max(1));
    let opts = LoaderOptions {
        prefetch: max_in_flight,
        max_requests: max_in_flight.unwrap_or(sluice_core::config::DEFAULT_MAX_CONNECTIONS),
        order: Order::Input,
        // Everything is kept until the end anyway.
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

/// Above this a caller's length is not taken as the size to reserve: a range asked far past
/// an object's end must not populate memory the object cannot fill (the buffer grows).
const MAX_HINT: u64 = 256 << 20;

/// The object, or `opts.range` of it, as `ObjectStore::get_with`, in memory from the
/// process's capped pool; `len` is how many bytes the caller expects, when it knows.
///
/// A range of a pinned version (`opts.if_match`) whose length the caller expects in full is
/// of an object the caller knows: one long enough to be split is read as parallel ranged
/// GETs, as the loader reads a large object (`sluice.open`'s windows; one GET is one
/// connection, at one connection's capped rate against S3). Any other range is one GET,
/// which may return fewer bytes where the object ends first.
pub async fn get_one(
    store: &Arc<dyn ObjectStore>,
    uri: &ObjectUri,
    opts: &GetOptions,
    len: Option<u64>,
) -> Result<Bytes> {
    let pool = BufferPool::for_get_many();
    if let (Some(range), Some(etag)) = (opts.range, opts.if_match.as_deref())
        && range.len().is_some_and(|n| Some(n) == len)
    {
        let fetcher = Fetcher {
            store: store.clone(),
            range_threshold: DEFAULT_RANGE_THRESHOLD,
            // Sized as a loader's ranges are; the window itself is the memory here, held
            // whole by the caller, so no budget is enforced.
            range_size: RangeSize::follow(Some(DEFAULT_MEMORY_BUDGET)),
            pool,
            requests: Arc::new(Semaphore::new(FOLLOW_MAX)),
            sizes: Default::default(),
        };
        return Ok(fetcher.fetch_range(uri, range, Some(etag)).await?.data);
    }
    let buf = match len.filter(|&n| n <= MAX_HINT) {
        Some(n) => pool.take_for(uri, n as usize)?,
        None => pool.take_largest(),
    };
    // Growable: S3 answers a range that runs past the end with the bytes that exist.
    let mut seg = Segment::growable_in(buf);
    store.get_into_with(uri, opts, &mut seg).await?;
    let data = seg
        .freeze()
        .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
    Ok(pool.share(data))
}
