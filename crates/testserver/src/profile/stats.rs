//! What the server did: requests and throttled requests per class, body bytes each way, and
//! the first-byte latency it applied (an HDR histogram, microseconds).

use super::OpClass;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a server with a profile has done: requests by class, throttles, bytes and the first-byte latency it applied.
#[derive(Debug)]
pub struct ServiceStats {
    profile: String,
    requests: [AtomicU64; 3],
    throttled: [AtomicU64; 3],
    pub(crate) bytes_sent: Arc<AtomicU64>,
    pub(crate) bytes_received: Arc<AtomicU64>,
    /// Applied latency per class, µs, 1 µs to 1 hour at 3 significant digits.
    latency: [Mutex<Histogram<u64>>; 3],
}

fn index(c: OpClass) -> usize {
    match c {
        OpClass::Read => 0,
        OpClass::Write => 1,
        OpClass::List => 2,
    }
}

impl ServiceStats {
    pub(crate) fn new(profile: &str) -> Self {
        let h = || {
            Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid"),
            )
        };
        Self {
            profile: profile.to_owned(),
            requests: Default::default(),
            throttled: Default::default(),
            bytes_sent: Arc::default(),
            bytes_received: Arc::default(),
            latency: [h(), h(), h()],
        }
    }

    pub(crate) fn request(&self, c: OpClass) {
        self.requests[index(c)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn throttle(&self, c: OpClass) {
        self.throttled[index(c)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn latency(&self, c: OpClass, d: Duration) {
        let us = (d.as_micros() as u64).max(1);
        self.latency[index(c)].lock().unwrap().saturating_record(us);
    }

    /// A copy of the counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot {
            profile: self.profile.clone(),
            requests: BTreeMap::new(),
            throttled: BTreeMap::new(),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            first_byte_latency_ms: BTreeMap::new(),
        };
        for c in OpClass::ALL {
            let i = index(c);
            s.requests
                .insert(c.name(), self.requests[i].load(Ordering::Relaxed));
            s.throttled
                .insert(c.name(), self.throttled[i].load(Ordering::Relaxed));
            let h = self.latency[i].lock().unwrap();
            if !h.is_empty() {
                let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
                s.first_byte_latency_ms.insert(
                    c.name(),
                    Percentiles {
                        count: h.len(),
                        p50: ms(0.50),
                        p90: ms(0.90),
                        p99: ms(0.99),
                        max: h.max() as f64 / 1000.0,
                    },
                );
            }
        }
        s
    }
}

/// A copy of the counters at one moment; serialises to the `--stats-json` file.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatsSnapshot {
    /// The profile's name.
    pub profile: String,
    /// Requests that reached the server, by class (`get`, `put`, `list`).
    pub requests: BTreeMap<&'static str, u64>,
    /// Of those, answered `503 SlowDown` by the rate limit.
    pub throttled: BTreeMap<&'static str, u64>,
    /// Body bytes sent (GET) and received (PUT, parts).
    pub bytes_sent: u64,
    /// Body bytes received (PUT, parts).
    pub bytes_received: u64,
    /// First-byte latency the server applied, by class; absent where it applied none.
    pub first_byte_latency_ms: BTreeMap<&'static str, Percentiles>,
}

/// Percentiles of a distribution, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Percentiles {
    /// How many values.
    pub count: u64,
    /// The median.
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest value.
    pub max: f64,
}

impl std::fmt::Display for StatsSnapshot {
    /// The summary `sluice serve` prints at exit.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: u64 = self.requests.values().sum();
        let throttled: u64 = self.throttled.values().sum();
        writeln!(
            f,
            "served {total} requests (get {}, put {}, list {}), {throttled} throttled with SlowDown",
            self.requests["get"], self.requests["put"], self.requests["list"]
        )?;
        writeln!(
            f,
            "bytes sent {} received {} (profile {})",
            self.bytes_sent, self.bytes_received, self.profile
        )?;
        for (class, p) in &self.first_byte_latency_ms {
            writeln!(
                f,
                "first-byte latency applied to {class}: p50 {:.1} ms, p90 {:.1}, p99 {:.1}, max {:.1} ({} requests)",
                p.p50, p.p90, p.p99, p.max, p.count
            )?;
        }
        Ok(())
    }
}
