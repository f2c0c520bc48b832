//! The loader's driver: one task per loader that admits items (a prefetch slot, then, under
//! a budget, the turn to take memory and memory for the first request: `budget`), starts one
//! fetch task per admitted item, and sends finished objects to the consumer in the chosen
//! order. Dropping it (the loader aborts its task) drops the task set, which aborts every
//! fetch in flight.

use crate::budget::{Budget, Reservation};
use crate::dataset::Item;
use crate::fetch::{Fetched, Fetcher};
use crate::loader::{Delivery, FOLLOW_MAX, FOLLOW_MIN, LoaderOptions, Object, OnError, Order};
use crate::stats::Stats;
use futures::{FutureExt, StreamExt};
use sluice_core::{Error, Result};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::{JoinError, JoinSet};
use tokio_util::task::AbortOnDropHandle;

/// An item whose turn has come: it holds a prefetch slot and, under a memory budget, memory
/// for its first piece (the rest is taken as its requests go out: `budget`).
struct Admitted {
    seq: usize,
    item: Result<Item>,
    slot: OwnedSemaphorePermit,
    memory: Option<Reservation>,
}

type Sized = futures::stream::BoxStream<'static, (usize, Result<Item>)>;

/// The items in dataset order, each with its size known when a memory budget needs it: an
/// object named without a size is asked for it with a HEAD (a few ahead, pipelined), whose
/// ETag then pins the read to the version measured. Memory is then taken in dataset order,
/// each range's before its GET, so the budget holds for every byte and no later object can
/// starve an earlier one (`budget`: the loader cannot deadlock in either order).
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
    let memory = match budget {
        // The first request's worth; unsized under a budget only when its HEAD failed: one
        // chunk, as the first range.
        Some(b) => Some(
            b.admit(size.map_or(first_chunk, |s| s.min(first_chunk)))
                .await,
        ),
        None => None,
    };
    let (slot, seq, item) = staged.take().expect("staged above");
    Some(Admitted {
        seq,
        item,
        slot,
        memory,
    })
}

/// Deliveries put back into dataset order (`Order::Input`): each is held until every one
/// before it has gone.
#[derive(Default)]
struct InOrder {
    waiting: BTreeMap<usize, Delivery>,
    next: usize,
}

impl InOrder {
    /// `delivery` (number `seq`), and what it lets go, in order.
    fn push(&mut self, seq: usize, delivery: Delivery) -> Vec<Delivery> {
        self.waiting.insert(seq, delivery);
        let mut out = Vec::new();
        while let Some(d) = self.waiting.remove(&self.next) {
            out.push(d);
            self.next += 1;
        }
        out
    }
}

/// Objects allowed in flight: the caller's `prefetch`, or (`None`) twice the requests the
/// store's client allows now (`FOLLOW_MIN`). It only grows: the client's limit is what
/// shrinks when the store asks for fewer, and objects waiting for a request hold no more
/// than their first piece of the memory budget.
struct Window {
    slots: Arc<Semaphore>,
    size: usize,
    follows: bool,
}

impl Window {
    fn new(prefetch: Option<usize>, fetcher: &Fetcher) -> Self {
        let size = prefetch.unwrap_or_else(|| Self::followed(fetcher));
        Self {
            slots: Arc::new(Semaphore::new(size)),
            size,
            follows: prefetch.is_none(),
        }
    }

    fn followed(fetcher: &Fetcher) -> usize {
        let limit = fetcher.store.congestion().map_or(0, |c| c.limit);
        (2 * limit).clamp(FOLLOW_MIN, FOLLOW_MAX)
    }

    fn grow_to(&mut self, size: usize) {
        if size > self.size {
            self.slots.add_permits(size - self.size);
            self.size = size;
        }
    }

    /// Follows the store's limit, where it does; returns the size now.
    fn update(&mut self, fetcher: &Fetcher) -> usize {
        if self.follows {
            self.grow_to(Self::followed(fetcher));
        }
        self.size
    }
}

/// The range size of an object whose read begins now, 0 where none is split (`Stats`).
fn range_size(fetcher: &Fetcher) -> u64 {
    let planner = fetcher.planner();
    if planner.splits() {
        planner.chunk_size.get()
    } else {
        0
    }
}

/// What the driver does after an event.
enum Next {
    Continue,
    Stop,
}

/// The state of one loader's driver task.
pub(crate) struct Driver {
    fetcher: Fetcher,
    opts: LoaderOptions,
    tx: mpsc::Sender<Delivery>,
    stats: Arc<Stats>,
    window: Window,
    budget: Option<Budget>,
    sized: Sized,
    /// An item taken from `sized`, waiting for its memory (see `admit`).
    staged: Option<(OwnedSemaphorePermit, usize, Result<Item>)>,
    tasks: JoinSet<(usize, Delivery)>,
    in_order: InOrder,
}

impl Driver {
    pub(crate) fn new(
        fetcher: Fetcher,
        items: Vec<Item>,
        opts: LoaderOptions,
        tx: mpsc::Sender<Delivery>,
        stats: Arc<Stats>,
    ) -> Self {
        let budget = opts.memory_budget.map(Budget::new);
        // HEADs run as far ahead as the window may ever reach: each waits for a request.
        let sized = sized_items(&fetcher, items, budget.is_some(), opts.window_max());
        let window = Window::new(opts.prefetch, &fetcher);
        stats.window.store(window.size, Ordering::Relaxed);
        stats
            .range_size
            .store(range_size(&fetcher), Ordering::Relaxed);
        Self {
            window,
            budget,
            sized,
            staged: None,
            tasks: JoinSet::new(),
            in_order: InOrder::default(),
            fetcher,
            opts,
            tx,
            stats,
        }
    }

    /// Runs until every item is delivered, the consumer is gone, or (fail-fast) an item
    /// failed.
    pub(crate) async fn run(mut self) {
        let mut exhausted = false;
        loop {
            let chunk = self.fetcher.planner().chunk_size.get();
            let next = tokio::select! {
                // Completed fetches first: they free slots and keep the consumer fed.
                biased;
                Some(joined) = self.tasks.join_next() => self.finished(joined).await,
                admitted = admit(&self.window.slots, &mut self.sized, &mut self.staged, self.budget.as_ref(), chunk), if !exhausted => {
                    match admitted {
                        Some(a) => self.start(a),
                        None => exhausted = true,
                    }
                    Next::Continue
                }
                else => Next::Stop,
            };
            if let Next::Stop = next {
                return;
            }
        }
    }

    /// Starts the fetch of an admitted item as its own task.
    fn start(&mut self, admitted: Admitted) {
        let Admitted {
            seq,
            item,
            slot,
            memory,
        } = admitted;
        let fetcher = self.fetcher.clone();
        let stats = self.stats.clone();
        self.tasks.spawn(async move {
            let t0 = Instant::now();
            let mut memory = memory;
            let item = match item {
                Ok(item) => fetch_one(&fetcher, &item, memory.as_mut()).await.map(|f| {
                    stats.fetched(f.data.len() as u64, f.requests, f.attempts, t0.elapsed());
                    Object {
                        uri: item.uri,
                        data: f.data,
                    }
                }),
                Err(e) => Err(e),
            };
            if item.is_err() {
                stats.failed();
            }
            let delivery = Delivery {
                item,
                _slot: Some(slot),
                _memory: memory.and_then(Reservation::into_held),
            };
            (seq, delivery)
        });
    }

    /// Hands a finished fetch (and, in input order, what it lets go) to the consumer.
    async fn finished(
        &mut self,
        joined: std::result::Result<(usize, Delivery), JoinError>,
    ) -> Next {
        let (seq, delivery) = match joined {
            Ok(r) => r,
            Err(e) if e.is_cancelled() => return Next::Stop,
            Err(e) => {
                // Fetch panics are caught in the task; this is anything else. The consumer
                // must not take the end of the stream for a complete epoch.
                tracing::error!(error = %e, "loader task panicked");
                let failed = Delivery {
                    item: Err(Error::integrity(
                        "loader",
                        format!("a loader task panicked: {e}"),
                    )),
                    _slot: None,
                    _memory: None,
                };
                let _ = self.tx.send(failed).await;
                return Next::Stop;
            }
        };
        let window = self.window.update(&self.fetcher);
        self.stats.window.store(window, Ordering::Relaxed);
        self.stats
            .range_size
            .store(range_size(&self.fetcher), Ordering::Relaxed);
        let ready = match self.opts.order {
            Order::Completion => vec![delivery],
            Order::Input => self.in_order.push(seq, delivery),
        };
        for d in ready {
            let stop = d.item.is_err() && self.opts.on_error == OnError::FailFast;
            if self.tx.send(d).await.is_err() || stop {
                // Consumer gone, or fail-fast: dropping `tasks` aborts the rest.
                return Next::Stop;
            }
        }
        Next::Continue
    }
}

async fn fetch_one(
    fetcher: &Fetcher,
    item: &Item,
    memory: Option<&mut Reservation>,
) -> Result<Fetched> {
    AssertUnwindSafe(fetcher.fetch(&item.uri, item.size, item.etag.as_deref(), memory))
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
