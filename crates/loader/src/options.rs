//! How a [`Loader`](crate::Loader) reads: [`LoaderOptions`] and the defaults they start from.

#[cfg(doc)]
use crate::Loader;
use crate::dataset::Sharding;
use crate::pool::BufferPool;
use sluice_core::{Error, RangeSize, Result};
use std::num::NonZeroU64;
use std::sync::Arc;

/// The order in which a [`Loader`] delivers objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// As objects finish: the fastest delivery.
    #[default]
    Completion,
    /// In dataset (after shuffle) order: a finished object waits for those before it,
    /// keeping its prefetch slot, so one slow object can hold back the whole window.
    Input,
}

/// What a [`Loader`] does with an object that cannot be read (after the store's retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// The first object that fails (after retries) ends the stream with its error.
    #[default]
    FailFast,
    /// Failed objects are delivered as errors naming the URI; reading continues.
    Deliver,
}

/// Objects at or above this size are read as parallel ranged GETs (of 4 to 8 MiB by default:
/// `sluice_core::RangeSize::Follow`). Ranges let one object use many connections — what a
/// link with real latency needs — while a range of megabytes keeps the per-request overhead
/// (signing, one round trip) under a per cent of the transfer; below 32 MiB an object gains
/// little from splitting and pays the extra requests (docs/benchmarks.md, "Why the
/// defaults").
pub const DEFAULT_RANGE_THRESHOLD: u64 = 32 << 20;

/// Bytes of objects in flight by default. A first pass (every DLIO epoch: it starts new
/// worker processes each time) page-faults in every byte of memory it touches, and faulting
/// costs more than the copy; bounded by bytes, the loader recycles a small set of buffers
/// from the first object on (docs/benchmarks.md, "Why the defaults"). 256 MiB still holds
/// enough ranges of a few MiB to cover a fast link's bandwidth × delay. Objects named without
/// a size are counted at the largest size seen so far (`LoaderOptions::memory_budget`), not
/// sized by a HEAD each.
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 << 20;

/// The window of a loader that follows its store (`LoaderOptions::prefetch` `None`): twice
/// the requests the store's client allows now, so that requests are always waiting when its
/// controller raises the limit (it grows only while it has them: `congestion`), and objects
/// delivered but not yet taken do not starve it. At least 16, the fixed window it replaced;
/// at most twice the default request cap. The memory budget bounds the bytes either way.
pub const FOLLOW_MIN: usize = 16;
/// The largest window of a loader that follows its store (see [`FOLLOW_MIN`]).
pub const FOLLOW_MAX: usize = 2 * sluice_core::config::DEFAULT_MAX_CONNECTIONS;

/// How a [`Loader`] reads: which objects and in what order (sharding, shuffle, epoch), how
/// much at once (objects, requests, bytes), how large objects are cut into ranges, and what
/// a failure does. `Default` holds the measured defaults, explained at each constant;
/// `Loader::new` checks the options with `validate`.
#[derive(Debug, Clone)]
pub struct LoaderOptions {
    /// Objects read ahead of the consumer, waiting for it; at least 1. It bounds finished
    /// objects, not requests: as many more objects as the store's client allows requests
    /// (its controller's limit, found at run time: `sluice_core::Concurrency`) may be being
    /// read besides, so that small objects under latency keep the requests busy whatever
    /// `prefetch` is, and a large object's ranges fill them (bytes stay within
    /// `memory_budget`). `None` (the default): twice the requests the client allows
    /// (`FOLLOW_MIN`).
    pub prefetch: Option<usize>,
    /// The order objects are delivered in (default `Order::Completion`).
    pub order: Order,
    /// Shuffle with this seed; a new permutation per `epoch`. `None` (default): dataset
    /// order.
    pub shuffle_seed: Option<u64>,
    /// The epoch number (default 0). With `shuffle_seed`, it picks the permutation, the same
    /// on every rank and worker, so their shards stay disjoint.
    pub epoch: u64,
    /// Which share of the dataset this reader takes (default: all of it).
    pub sharding: Sharding,
    /// Objects of at least this many bytes are read as parallel ranged GETs (default
    /// `DEFAULT_RANGE_THRESHOLD`); `RangePlanner::NEVER` reads every object with one GET.
    pub range_threshold: u64,
    /// Bytes per ranged GET, the last range shorter; at least 1. `None` (the default): 4 to
    /// 8 MiB, smaller as the store's client allows more requests within `memory_budget`
    /// (`sluice_core::RangeSize::Follow`), so that a store with latency gets more ranges in
    /// flight for the same memory.
    pub chunk_size: Option<u64>,
    /// HTTP requests in flight across all objects (default `DEFAULT_MAX_CONNECTIONS`, 256;
    /// the store's client allows fewer while its controller finds no gain in more); at
    /// least 1.
    pub max_requests: usize,
    /// Bytes of objects in flight (fetching or undelivered), plus room for one object of the
    /// largest size seen, the one being finished (objects are handed out whole); `None`:
    /// only the window bounds. Default `DEFAULT_MEMORY_BUDGET`. Exact for objects of known
    /// size (a listing's); an object named without one is counted at the largest size seen
    /// before it, and one larger than that may read its excess beyond the budget
    /// (`StatsSnapshot::over_budget`).
    pub memory_budget: Option<u64>,
    /// What a failed object does to the stream (default `OnError::FailFast`).
    pub on_error: OnError,
    /// Buffers to reuse. `None`: the process's pool for this window (`BufferPool::shared`),
    /// so the loaders of successive epochs share memory and the second epoch touches no
    /// fresh pages; `Some(BufferPool::for_prefetch(..))` for a loader of its own.
    pub pool: Option<Arc<BufferPool>>,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        Self {
            prefetch: None,
            order: Order::Completion,
            shuffle_seed: None,
            epoch: 0,
            sharding: Sharding::default(),
            range_threshold: DEFAULT_RANGE_THRESHOLD,
            chunk_size: None,
            max_requests: sluice_core::config::DEFAULT_MAX_CONNECTIONS,
            memory_budget: Some(DEFAULT_MEMORY_BUDGET),
            on_error: OnError::FailFast,
            pool: None,
        }
    }
}

impl LoaderOptions {
    /// Refuses options a loader cannot run with, naming the one at fault: a zero
    /// `prefetch`, `chunk_size`, `max_requests` or `memory_budget`, or an invalid
    /// `sharding` (`Sharding::validate`).
    pub fn validate(&self) -> Result<()> {
        let bad = |option: &str, reason: &str| Err(Error::config(option, reason));
        if self.prefetch == Some(0) {
            return bad("prefetch", "must be at least 1");
        }
        if self.chunk_size == Some(0) {
            return bad("chunk_size", "must be at least 1 byte");
        }
        if self.max_requests == 0 {
            return bad("max_requests", "must be at least 1");
        }
        if self.memory_budget == Some(0) {
            return bad("memory_budget", "must be at least 1 byte");
        }
        self.sharding.validate()
    }

    /// How ranges are sized: as set, or following the store's client within the budget.
    pub(crate) fn range_size(&self) -> RangeSize {
        RangeSize::set_or_follow(
            self.chunk_size.and_then(NonZeroU64::new),
            self.memory_budget,
        )
    }

    /// The most objects the loader may hold in flight: `prefetch` and the most requests it
    /// may send, or `FOLLOW_MAX`.
    pub(crate) fn window_max(&self) -> usize {
        match self.prefetch {
            Some(p) => p.saturating_add(self.max_requests),
            None => FOLLOW_MAX,
        }
    }

    /// These options with a buffer pool of their own (`BufferPool::for_prefetch`, sized for
    /// the largest window and the memory budget), gone with the loader, instead of the
    /// process's shared one.
    pub fn with_own_pool(mut self) -> Self {
        self.pool = Some(BufferPool::for_prefetch(
            self.window_max(),
            self.memory_budget,
        ));
        self
    }
}
