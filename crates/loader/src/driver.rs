//! The loader's driver: one task per loader that admits items (a prefetch slot, then, under
//! a budget, the turn to take memory and memory for the first request: `budget`), starts one
//! fetch task per admitted item, and sends finished objects to the consumer in the chosen
//! order. Dropping it (the loader aborts its task) drops the task set, which aborts every
//! fetch in flight.

use crate::budget::{Budget, Reservation};
use crate::dataset::{Item, Shard};
use crate::delivery::{Delivery, Object};
use crate::fetch::{Fetched, Fetcher};
use crate::options::{FOLLOW_MAX, FOLLOW_MIN, LoaderOptions, OnError, Order};
use crate::stats::Stats;
use futures::FutureExt;
use sluice_core::{Error, Result};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::{JoinError, JoinSet};

/// An item whose turn has come: it holds a prefetch slot and, under a memory budget, memory
/// for its first piece (the rest is taken as its requests go out: `budget`).
struct Admitted {
    seq: usize,
    item: Item,
    slot: OwnedSemaphorePermit,
    memory: Option<Reservation>,
}

/// The items in dataset order, numbered. Nothing is asked before an object's first GET: an
/// object named without a size learns it from its first answer, and under a memory budget
/// is admitted on a guess (`Fetcher::first_piece`).
type Items = std::iter::Enumerate<Shard>;

/// Waits for the next item's prefetch slot and memory. Cancel-safe, for `select!`: an item
/// taken from `items` waits in `staged` until its memory is granted. `None` at the end.
async fn admit(
    slots: &Arc<Semaphore>,
    items: &mut Items,
    staged: &mut Option<(OwnedSemaphorePermit, usize, Item)>,
    budget: Option<&Budget>,
    fetcher: &Fetcher,
) -> Option<Admitted> {
    if staged.is_none() {
        let slot = slots
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        let (seq, item) = items.next()?;
        *staged = Some((slot, seq, item));
    }
    let size = staged.as_ref().and_then(|(_, _, item)| item.size);
    let memory = match budget {
        Some(b) => {
            let first = fetcher.first_piece(size);
            let mut memory = b.admit(first.bytes).await;
            if first.done {
                memory.complete();
            }
            Some(memory)
        }
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

/// Objects allowed in flight (being read, or read and waiting for the consumer): with a
/// `prefetch` set, that many waiting plus the requests the store's client allows now, so
/// that small objects under latency fill the requests whatever `prefetch` is; without, twice
/// those requests (`FOLLOW_MIN`). It only grows: the client's limit is what shrinks when the
/// store asks for fewer, and objects waiting for a request hold no more than their first
/// piece of the memory budget.
struct Window {
    slots: Arc<Semaphore>,
    size: usize,
    prefetch: Option<usize>,
    max: usize,
}

impl Window {
    fn new(opts: &LoaderOptions, fetcher: &Fetcher) -> Self {
        let mut w = Self {
            slots: Arc::new(Semaphore::new(0)),
            size: 0,
            prefetch: opts.prefetch,
            max: opts.window_max(),
        };
        w.update(fetcher);
        w
    }

    fn target(&self, fetcher: &Fetcher) -> usize {
        let limit = fetcher.store.congestion().map_or(0, |c| c.limit);
        match self.prefetch {
            Some(p) => p.saturating_add(limit).min(self.max),
            None => (2 * limit).clamp(FOLLOW_MIN, FOLLOW_MAX),
        }
    }

    /// Follows the store's limit; returns the size now.
    fn update(&mut self, fetcher: &Fetcher) -> usize {
        let size = self.target(fetcher);
        if size > self.size {
            self.slots.add_permits(size - self.size);
            self.size = size;
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
    items: Items,
    /// An item taken from `items`, waiting for its memory (see `admit`).
    staged: Option<(OwnedSemaphorePermit, usize, Item)>,
    tasks: JoinSet<(usize, Delivery)>,
    in_order: InOrder,
}

impl Driver {
    pub(crate) fn new(
        fetcher: Fetcher,
        items: Shard,
        opts: LoaderOptions,
        tx: mpsc::Sender<Delivery>,
        stats: Arc<Stats>,
    ) -> Self {
        let budget = opts.memory_budget.map(Budget::new);
        if let Some(b) = &budget {
            // Listed sizes are known now; the others as their answers come (`Fetcher::saw`).
            b.room_for(items.sizes().flatten().max().unwrap_or(0));
        }
        // A fresh client starts its search from what this job could have in flight.
        if let Some(c) = fetcher.store.congestion() {
            let sizes = items.sizes().take(opts.window_max());
            let requests = fetcher.range_size.requests_at_once(
                sizes,
                fetcher.range_threshold,
                opts.memory_budget,
                c.max,
            );
            fetcher.store.expect_requests(requests);
        }
        let window = Window::new(&opts, &fetcher);
        stats.window.store(window.size, Ordering::Relaxed);
        stats
            .range_size
            .store(range_size(&fetcher), Ordering::Relaxed);
        Self {
            window,
            budget,
            items: items.enumerate(),
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
            let next = tokio::select! {
                // Completed fetches first: they free slots and keep the consumer fed.
                biased;
                Some(joined) = self.tasks.join_next() => self.finished(joined).await,
                admitted = admit(&self.window.slots, &mut self.items, &mut self.staged, self.budget.as_ref(), &self.fetcher), if !exhausted => {
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
            let item = fetch_one(&fetcher, &item, memory.as_mut()).await.map(|f| {
                stats.fetched(f.data.len() as u64, f.requests, f.attempts, t0.elapsed());
                Object {
                    uri: item.uri,
                    data: f.data,
                }
            });
            if item.is_err() {
                stats.failed();
            }
            if let Some(m) = &memory {
                stats.over_budget.fetch_max(m.over(), Ordering::Relaxed);
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
