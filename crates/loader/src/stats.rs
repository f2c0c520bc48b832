//! What a loader did: counts, throughput, per-object latency and gaps between batches.

use hdrhistogram::Histogram;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A loader's running counters, updated by its fetch tasks and by the consumer's calls;
/// `snapshot` reads them (`Loader::stats`).
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    last_delivery: Mutex<Option<Instant>>,
    objects: AtomicU64,
    bytes: AtomicU64,
    requests: AtomicU64,
    attempts: AtomicU64,
    errors: AtomicU64,
    /// Objects allowed in flight now (the driver's window).
    pub(crate) window: AtomicUsize,
    /// Bytes per ranged GET of an object whose read begins now.
    pub(crate) range_size: AtomicU64,
    /// The most bytes one object read beyond the memory budget (`budget`'s guesses).
    pub(crate) over_budget: AtomicU64,
    /// Per-object fetch latency, microseconds.
    latency: Mutex<Histogram<u64>>,
    /// Time between consecutive `collect_batch` returns, microseconds.
    gaps: Mutex<Histogram<u64>>,
    last_batch: Mutex<Option<Instant>>,
}

/// A point-in-time copy of `Stats`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSnapshot {
    /// Objects fetched whole.
    pub objects: u64,
    /// Bytes of those objects.
    pub bytes: u64,
    /// From the loader's start to its last delivery (to now, before the first).
    pub elapsed: Duration,
    /// `bytes` over `elapsed`, in decimal megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// GET requests of those objects: one per whole-object read, one per range (the loader
    /// sends no other). Retries are not counted.
    pub requests: u64,
    /// Extra HTTP attempts beyond one per request (retries and resumptions).
    pub retries: u64,
    /// Objects that could not be read (after retries), whether delivered as errors or
    /// ending the stream.
    pub errors: u64,
    /// Median time to fetch one object, from its admission (prefetch slot and memory held)
    /// to its last byte; zero before any. Microsecond resolution.
    pub latency_p50: Duration,
    /// 99th percentile of the same.
    pub latency_p99: Duration,
    /// Median time between two consecutive non-empty batches returned by `collect_batch`
    /// or `fill_batch`: the consumer's own work plus its wait for data. Zero before two.
    pub batch_gap_p50: Duration,
    /// Longest such time.
    pub batch_gap_max: Duration,
    /// Objects the loader lets be in flight now (being read or waiting for the consumer):
    /// `prefetch` plus the requests its client allows, or without a `prefetch`, twice those
    /// requests (`LoaderOptions::prefetch`).
    pub window: usize,
    /// Bytes per ranged GET of an object whose read begins now: as set, or following the
    /// requests the store's client allows (`LoaderOptions::chunk_size`); 0 when no object is
    /// ever split (`range_threshold` `NEVER`). (`sluice get` reports the size it last cut an
    /// object into, 0 when none was split.)
    pub range_size: u64,
    /// The most bytes one object read beyond the memory budget: an object named without a
    /// size is budgeted at the largest size seen before it, and one larger than that reads
    /// its excess over the budget when none is free (`LoaderOptions::memory_budget`). 0 for
    /// a dataset listed with its sizes.
    pub over_budget: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            last_delivery: Mutex::default(),
            objects: AtomicU64::default(),
            bytes: AtomicU64::default(),
            requests: AtomicU64::default(),
            attempts: AtomicU64::default(),
            errors: AtomicU64::default(),
            window: AtomicUsize::default(),
            range_size: AtomicU64::default(),
            over_budget: AtomicU64::default(),
            latency: Mutex::new(histogram()),
            gaps: Mutex::new(histogram()),
            last_batch: Mutex::default(),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros())
        .unwrap_or(u64::MAX)
        .clamp(1, 3_600_000_000)
}

impl Stats {
    pub(crate) fn fetched(&self, bytes: u64, requests: u32, attempts: u32, latency: Duration) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.requests
            .fetch_add(u64::from(requests), Ordering::Relaxed);
        self.attempts
            .fetch_add(u64::from(attempts), Ordering::Relaxed);
        self.latency
            .lock()
            .unwrap()
            .saturating_record(micros(latency));
    }

    pub(crate) fn failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn delivered(&self) {
        *self.last_delivery.lock().unwrap() = Some(Instant::now());
    }

    pub(crate) fn batch_returned(&self) {
        let now = Instant::now();
        let mut last = self.last_batch.lock().unwrap();
        if let Some(prev) = last.replace(now) {
            self.gaps
                .lock()
                .unwrap()
                .saturating_record(micros(now - prev));
        }
    }

    /// Every object's fetch latency so far (microseconds, 3 significant digits): what a
    /// caller merges across loaders or processes, as the bench does.
    pub fn latency_histogram(&self) -> Histogram<u64> {
        self.latency.lock().unwrap().clone()
    }

    /// The counters and percentiles as of now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let end = self
            .last_delivery
            .lock()
            .unwrap()
            .unwrap_or_else(Instant::now);
        let elapsed = end.saturating_duration_since(self.started);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let requests = self.requests.load(Ordering::Relaxed);
        let lat = self.latency.lock().unwrap();
        let gaps = self.gaps.lock().unwrap();
        let us = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                Duration::ZERO
            } else {
                Duration::from_micros(h.value_at_quantile(q))
            }
        };
        StatsSnapshot {
            objects: self.objects.load(Ordering::Relaxed),
            bytes,
            elapsed,
            mb_per_s: bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9),
            requests,
            retries: self
                .attempts
                .load(Ordering::Relaxed)
                .saturating_sub(requests),
            errors: self.errors.load(Ordering::Relaxed),
            latency_p50: us(&lat, 0.5),
            latency_p99: us(&lat, 0.99),
            batch_gap_p50: us(&gaps, 0.5),
            batch_gap_max: if gaps.is_empty() {
                Duration::ZERO
            } else {
                Duration::from_micros(gaps.max())
            },
            window: self.window.load(Ordering::Relaxed),
            range_size: self.range_size.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }
}
