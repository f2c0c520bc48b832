//! The loader: a driver task that keeps a window of objects in flight, each fetched by its own
//! task on the multi-threaded runtime, and hands finished objects to the consumer through a
//! bounded channel. Dropping the loader aborts the driver, whose task set aborts every fetch.

use crate::dataset::{Dataset, Shard, plan_indices};
use crate::delivery::{Delivery, Object};
use crate::driver::Driver;
use crate::fetch::Fetcher;
use crate::options::LoaderOptions;
use crate::pool::BufferPool;
use crate::stats::{Stats, StatsSnapshot};
use sluice_core::{ObjectStore, Result};
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

/// Reads this reader's shard of a dataset on the current tokio runtime, keeping up to
/// a window of objects in flight, and hands them to the consumer (`next`, `collect_batch`)
/// in the chosen [`Order`](crate::Order). Work is bounded three ways: objects (the window: `prefetch`
/// waiting plus the requests the store's client allows), HTTP requests
/// (`max_requests`) and bytes (`memory_budget`, taken range by range before each GET, one
/// object at a time in dataset order so the loader cannot deadlock: `budget`). Large
/// objects are read as parallel ranges into one buffer from a pool shared across epochs;
/// every object delivered is whole and of one version.
///
/// A loader reads one epoch: make one per epoch (with `LoaderOptions::epoch` set).
/// Dropping it aborts every fetch in flight.
#[derive(Debug)]
pub struct Loader {
    rx: mpsc::Receiver<Delivery>,
    driver: JoinHandle<()>,
    stats: Arc<Stats>,
    len: usize,
}

impl Loader {
    /// Starts reading this reader's shard of `dataset` on the current tokio runtime.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        dataset: &Dataset,
        opts: LoaderOptions,
    ) -> Result<Self> {
        opts.validate()?;
        let order = plan_indices(dataset.len(), opts.shuffle_seed, opts.epoch, opts.sharding);
        let items = Shard::new(dataset, order);
        let len = items.len();
        let fetcher = Fetcher {
            store,
            range_threshold: opts.range_threshold,
            range_size: opts.range_size(),
            pool: opts
                .pool
                .clone()
                .unwrap_or_else(|| BufferPool::shared(opts.window_max(), opts.memory_budget)),
            requests: Arc::new(Semaphore::new(opts.max_requests)),
            sizes: Default::default(),
        };
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel(opts.window_max());
        let driver = tokio::spawn(Driver::new(fetcher, items, opts, tx, stats.clone()).run());
        Ok(Self {
            rx,
            driver,
            stats,
            len,
        })
    }

    /// Objects this loader will deliver (its shard).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this loader's shard has no objects.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next object, or `None` at the end.
    pub async fn next(&mut self) -> Option<Result<Object>> {
        let d = self.rx.recv().await?;
        self.stats.delivered();
        Some(d.item)
    }

    /// Up to `n` objects, waiting until `n` are ready or the stream ends; empty at the end.
    /// In fail-fast mode an error is the batch's last element and the stream ends after it.
    pub async fn collect_batch(&mut self, n: usize) -> Vec<Result<Object>> {
        let mut batch = Vec::with_capacity(n);
        self.fill_batch(&mut batch, n).await;
        batch
    }

    /// `collect_batch` into a caller's vector, so that it is cancel-safe: a caller that gives
    /// up waiting (to check for Ctrl-C, say) keeps what arrived and calls again.
    pub async fn fill_batch(&mut self, batch: &mut Vec<Result<Object>>, n: usize) {
        while batch.len() < n {
            match self.next().await {
                Some(item) => batch.push(item),
                None => break,
            }
        }
        if !batch.is_empty() {
            self.stats.batch_returned();
        }
    }

    /// What the loader has done so far: counts, throughput, latencies (see [`StatsSnapshot`]).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Every object's fetch latency so far, from its admission to its last byte, as an HDR
    /// histogram of microseconds (what [`StatsSnapshot`]'s percentiles are read from).
    pub fn latency_histogram(&self) -> hdrhistogram::Histogram<u64> {
        self.stats.latency_histogram()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
