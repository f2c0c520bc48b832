//! The loader: a driver task that keeps `prefetch` objects in flight, each fetched by its own
//! task on the multi-threaded runtime, and hands finished objects to the consumer through a
//! bounded channel. Dropping the loader aborts the driver, whose task set aborts every fetch.

use crate::dataset::{Dataset, Item, Sharding, plan_indices};
use crate::fetch::{Fetched, Fetcher};
use crate::pool::BufferPool;
use crate::stats::{Stats, StatsSnapshot};
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use sluice_core::{Error, ObjectStore, ObjectUri, RangePlanner, Result};
use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::task::AbortOnDropHandle;

/// The order in which a `Loader` delivers objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// As objects finish: the fastest delivery.
    #[default]
    Completion,
    /// In dataset (after shuffle) order: a finished object waits for those before it,
    /// keeping its prefetch slot, so one slow object can hold back the whole window.
    Input,
}

/// What a `Loader` does with an object that cannot be read (after the store's retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// The first object that fails (after retries) ends the stream with its error.
    #[default]
    FailFast,
    /// Failed objects are delivered as errors naming the URI; reading continues.
    Deliver,
}

/// Objects at or above this size are read as parallel ranged GETs of `DEFAULT_CHUNK_SIZE`.
/// Measured on this 2-core VM (server CPU 0, client CPU 1, 24 × 146,600,628 B, prefetch 1,
/// `sluice get`): whole-object GETs 1,785 MB/s, 8 MiB ranges 2,051 MB/s; at prefetch 16 the
/// ranged loader reached 0.98–1.23× curl's single-stream rate in the warm pass. Ranges let one
/// object use many connections — what a link with real latency needs — while 8 MiB keeps the
/// per-request overhead (signing ~12 µs, one round trip) under 1% of the transfer. Objects
/// below 32 MiB gain little from splitting and pay the extra requests.
pub const DEFAULT_RANGE_THRESHOLD: u64 = 32 << 20;
/// Bytes per ranged GET by default: 8 MiB (the measurements and the reasoning are at
/// `DEFAULT_RANGE_THRESHOLD`).
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;

/// Bytes of objects in flight by default. A first pass (every DLIO epoch: it starts new
/// worker processes each time) page-faults in every byte of memory it touches, and faulting
/// costs more than the copy; bounded by bytes, the loader recycles a small set of buffers from
/// the first object on. Measured against nginx (CPU 0, client CPU 1, 24 × 146.6 MB, first
/// pass): `sluice get -j 16` without a budget touched 2.3 GB and ran at 0.5× curl; with
/// 256 MiB it touches ~300 MB and runs at 0.8–1.0× curl (medians of 3, two sets) at about
/// curl's CPU per GB; the Python `Loader` (prefetch 16) went from 1,141 MB/s and 2.6 GB to
/// 1,812–1,966 MB/s and 484 MB.
/// 256 MiB still holds 32 ranges of 8 MiB: enough to keep a 10 GB/s link with 25 ms of
/// latency busy. The cost: objects named without a size are sized by a HEAD each.
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 << 20;

/// How a `Loader` reads: which objects and in what order (sharding, shuffle, epoch), how
/// much at once (objects, requests, bytes), how large objects are cut into ranges, and what
/// a failure does. `Default` holds the measured defaults, explained at each constant;
/// `Loader::new` checks the options with `validate`.
#[derive(Debug, Clone)]
pub struct LoaderOptions {
    /// Objects fetched or waiting for the consumer at once (default 16); at least 1.
    pub prefetch: usize,
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
    /// Bytes per ranged GET, the last range shorter (default `DEFAULT_CHUNK_SIZE`); at
    /// least 1.
    pub chunk_size: u64,
    /// HTTP requests in flight across all objects, the HEADs that size objects included
    /// (default 64); at least 1.
    pub max_requests: usize,
    /// Bytes of objects in flight (fetching or undelivered); `None`: only `prefetch` bounds.
    /// Default `DEFAULT_MEMORY_BUDGET`.
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
            prefetch: 16,
            order: Order::Completion,
            shuffle_seed: None,
            epoch: 0,
            sharding: Sharding::default(),
            range_threshold: DEFAULT_RANGE_THRESHOLD,
            chunk_size: DEFAULT_CHUNK_SIZE,
            max_requests: 64,
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
        if self.prefetch == 0 {
            return bad("prefetch", "must be at least 1");
        }
        if self.chunk_size == 0 {
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
}

/// One delivered object. `data` shares the loader's memory; it returns to the pool when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct Object {
    /// The object read.
    pub uri: ObjectUri,
    /// All of its bytes, of one version.
    pub data: Bytes,
}

/// An item travelling to the consumer with the slots it holds: they free up when the
/// consumer takes it.
struct Delivery {
    item: Result<Object>,
    /// `None` only for the error that ends a driver that failed itself.
    _slot: Option<OwnedSemaphorePermit>,
    _memory: Option<OwnedSemaphorePermit>,
}

/// Memory permits count 64 KiB units so any object size fits a `u32` permit count.
const MEMORY_UNIT: u64 = 64 * 1024;

/// Reads this reader's shard of a dataset on the current tokio runtime, keeping up to
/// `prefetch` objects in flight, and hands them to the consumer (`next`, `collect_batch`)
/// in the chosen `Order`. Work is bounded three ways: objects (`prefetch`), HTTP requests
/// (`max_requests`) and bytes (`memory_budget`, reserved for whole objects in dataset order
/// so the loader cannot deadlock). Large objects are read as parallel ranges into one
/// buffer from a pool shared across epochs; every object delivered is whole and of one
/// version.
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

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("item", &self.item)
            .finish_non_exhaustive()
    }
}

impl Loader {
    /// Starts reading this reader's shard of `dataset` on the current tokio runtime.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        dataset: &Dataset,
        opts: LoaderOptions,
    ) -> Result<Self> {
        opts.validate()?;
        let items: Vec<Item> =
            plan_indices(dataset.len(), opts.shuffle_seed, opts.epoch, opts.sharding)
                .into_iter()
                .map(|i| dataset.items()[i].clone())
                .collect();
        let len = items.len();
        let fetcher = Fetcher {
            store,
            planner: RangePlanner {
                threshold: opts.range_threshold,
                chunk_size: NonZeroU64::new(opts.chunk_size).expect("validated"),
            },
            pool: opts
                .pool
                .clone()
                .unwrap_or_else(|| BufferPool::shared(opts.prefetch, opts.memory_budget)),
            requests: Arc::new(Semaphore::new(opts.max_requests)),
        };
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel(opts.prefetch);
        let driver = tokio::spawn(drive(fetcher, items, opts, tx, stats.clone()));
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

    /// What the loader has done so far: counts, throughput, latencies (see `StatsSnapshot`).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// An item whose turn has come: it holds a prefetch slot and, under a memory budget, the
/// memory its whole size needs.
struct Admitted {
    seq: usize,
    item: Result<Item>,
    slot: OwnedSemaphorePermit,
    memory: Option<OwnedSemaphorePermit>,
}

/// The memory budget in `MEMORY_UNIT`s.
struct Budget {
    units: Arc<Semaphore>,
    total: u32,
}

impl Budget {
    fn new(bytes: u64) -> Self {
        let total = bytes.div_ceil(MEMORY_UNIT).clamp(1, u64::from(u32::MAX)) as u32;
        Self {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Memory for an object of `size` bytes; one larger than the whole budget takes all of it.
    async fn reserve(&self, size: u64) -> OwnedSemaphorePermit {
        let want = size.div_ceil(MEMORY_UNIT).clamp(1, u64::from(self.total)) as u32;
        self.units
            .clone()
            .acquire_many_owned(want)
            .await
            .expect("semaphore never closed")
    }
}

type Sized = futures::stream::BoxStream<'static, (usize, Result<Item>)>;

/// The items in dataset order, each with its size known when a memory budget needs it: an
/// object named without a size is asked for it with a HEAD (a few ahead, pipelined), whose
/// ETag then pins the read to the version measured. Memory is then taken for whole objects,
/// in dataset order, before any byte arrives, so the budget holds for every object and the
/// next object to deliver always has its memory (no later object can starve it: the loader
/// cannot deadlock in either order).
fn sized_items(fetcher: &Fetcher, items: Vec<Item>, budget: bool, ahead: usize) -> Sized {
    let store = fetcher.store.clone();
    let requests = fetcher.requests.clone();
    futures::stream::iter(items.into_iter().enumerate())
        .map(move |(seq, item)| {
            if !budget || item.size.is_some() {
                return futures::future::ready((seq, Ok(item))).boxed();
            }
            let (store, requests) = (store.clone(), requests.clone());
            let uri = item.uri.to_string();
            // Its own task: a HEAD holds one of the loader's request permits, and must give
            // it back whether or not the driver is polling this stream (it may be waiting for
            // memory that only fetches needing those permits can free).
            let head = AbortOnDropHandle::new(tokio::spawn(async move {
                let Ok(_permit) = requests.acquire().await else {
                    return Err(Error::Cancelled {
                        uri: item.uri.to_string(),
                    });
                };
                // A failed HEAD says little (its answer has no body, so no S3 error code):
                // the item goes on unsized, and its GET reports what the server says.
                Ok(match store.head(&item.uri).await {
                    Ok(meta) => Item {
                        size: Some(meta.size),
                        etag: meta.etag,
                        uri: item.uri,
                    },
                    Err(_) => item,
                })
            }));
            head.map(move |joined| {
                let item = joined.unwrap_or_else(|e| {
                    Err(Error::integrity(uri, format!("sizing task failed: {e}")))
                });
                (seq, item)
            })
            .boxed()
        })
        .buffered(ahead)
        .boxed()
}

/// Waits for the next item's prefetch slot and memory. Cancel-safe, for `select!`: an item
/// taken from `sized` waits in `staged` until its memory is granted. `None` at the end.
async fn admit(
    slots: &Arc<Semaphore>,
    sized: &mut Sized,
    staged: &mut Option<(OwnedSemaphorePermit, usize, Result<Item>)>,
    budget: Option<&Budget>,
    first_chunk: u64,
) -> Option<Admitted> {
    if staged.is_none() {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        let (seq, item) = sized.next().await?;
        *staged = Some((slot, seq, item));
    }
    let size = match staged {
        Some((_, _, Ok(item))) => item.size,
        _ => None,
    };
    let memory = match (budget, size) {
        (Some(b), Some(size)) => Some(b.reserve(size).await),
        // Unsized under a budget only when its HEAD failed: one chunk, as the first range.
        (Some(b), None) => Some(b.reserve(first_chunk).await),
        _ => None,
    };
    let (slot, seq, item) = staged.take().expect("staged above");
    Some(Admitted {
        seq,
        item,
        slot,
        memory,
    })
}

async fn drive(
    fetcher: Fetcher,
    items: Vec<Item>,
    opts: LoaderOptions,
    tx: mpsc::Sender<Delivery>,
    stats: Arc<Stats>,
) {
    let slots = Arc::new(Semaphore::new(opts.prefetch));
    let budget = opts.memory_budget.map(Budget::new);
    let mut sized = sized_items(&fetcher, items, budget.is_some(), opts.prefetch);
    let mut staged = None;
    let mut tasks: JoinSet<(usize, Delivery)> = JoinSet::new();
    let mut reorder: BTreeMap<usize, Delivery> = BTreeMap::new();
    let mut next_out = 0;
    let mut exhausted = false;
    loop {
        tokio::select! {
            // Completed fetches first: they free slots and keep the consumer fed.
            biased;
            Some(joined) = tasks.join_next() => {
                let (seq, delivery) = match joined {
                    Ok(r) => r,
                    Err(e) if e.is_cancelled() => return,
                    Err(e) => {
                        // Fetch panics are caught in the task; this is anything else. The
                        // consumer must not take the end of the stream for a complete epoch.
                        tracing::error!(error = %e, "loader task panicked");
                        let _ = tx
                            .send(Delivery {
                                item: Err(Error::integrity("loader", format!("a loader task panicked: {e}"))),
                                _slot: None,
                                _memory: None,
                            })
                            .await;
                        return;
                    }
                };
                let ready = match opts.order {
                    Order::Completion => vec![delivery],
                    Order::Input => {
                        reorder.insert(seq, delivery);
                        let mut out = Vec::new();
                        while let Some(d) = reorder.remove(&next_out) {
                            out.push(d);
                            next_out += 1;
                        }
                        out
                    }
                };
                for d in ready {
                    let stop = d.item.is_err() && opts.on_error == OnError::FailFast;
                    if tx.send(d).await.is_err() || stop {
                        return; // consumer gone, or fail-fast: dropping `tasks` aborts the rest
                    }
                }
            }
            admitted = admit(&slots, &mut sized, &mut staged, budget.as_ref(), fetcher.planner.chunk_size.get()), if !exhausted => {
                let Some(Admitted { seq, item, slot, memory }) = admitted else {
                    exhausted = true;
                    continue;
                };
                let fetcher = fetcher.clone();
                let stats = stats.clone();
                tasks.spawn(async move {
                    let t0 = Instant::now();
                    let item = match item {
                        Ok(item) => fetch_one(&fetcher, &item).await.map(|f| {
                            stats.fetched(f.data.len() as u64, f.requests, f.attempts, t0.elapsed());
                            Object { uri: item.uri, data: f.data }
                        }),
                        Err(e) => Err(e),
                    };
                    if item.is_err() {
                        stats.failed();
                    }
                    (seq, Delivery { item, _slot: Some(slot), _memory: memory })
                });
            }
            else => return,
        }
    }
}

/// Reads one item. A panic while fetching (a bug, or a reply no check foresaw) is this
/// object's error, delivered like any other: never a silently shorter epoch.
async fn fetch_one(fetcher: &Fetcher, item: &Item) -> Result<Fetched> {
    AssertUnwindSafe(fetcher.fetch(&item.uri, item.size, item.etag.as_deref()))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(Error::integrity(
                item.uri.to_string(),
                format!("fetch panicked: {what}"),
            ))
        })
}
