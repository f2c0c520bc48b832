//! One store behind several endpoints (`S3_ENDPOINT_URIS`): [`Spread`] is a [`Wire`] over one
//! wire per endpoint. Each attempt goes to the endpoint with the fewest requests in flight
//! (ties in turn), so a fast node takes more; an endpoint that refuses, resets or times
//! out is avoided for a while (backing off, doubling) and the attempt's retry — [`S3Store`](crate::S3Store)'s,
//! within the same budget, resumed and pinned to the same version with If-Match like any
//! other — goes to another. An answer from the server (404, 503 SlowDown, ...) says the
//! node is alive and marks nothing.

/// The logger its events go to: `sluice.core.spread` in Python, as before the module moved
/// under `wire/` (users filter by it).
const LOG_TARGET: &str = "sluice_core::spread";

use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::object::EndpointStats;
use crate::wire::{BodySink, GetRequest, GetWire, Operations, Reply, Request};
use crate::wire::{Wire, WireFromConfig};
use async_trait::async_trait;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use url::Url;

/// How long an endpoint is avoided after its first connection failure; doubled for each
/// failure in a row, up to `MAX_DOWN`. Short, because a reset may be one connection's
/// trouble, not the node's.
const FIRST_DOWN: Duration = Duration::from_millis(200);
/// The longest an endpoint is avoided: a node that comes back is used again within this.
const MAX_DOWN: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Endpoint<W> {
    url: Url,
    wire: W,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    failures: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    /// Failures in a row and until when the endpoint is avoided.
    down: Mutex<(u32, Option<Instant>)>,
}

impl<W> Endpoint<W> {
    fn down_until(&self) -> Option<Instant> {
        self.down.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Counts an attempt in flight until the guard drops.
    fn enter(&self) -> InFlight<'_, W> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Records how an attempt ended and hands its result on. `answered`: a response head
    /// arrived (a GET whose body then broke reached the node all the same).
    fn settle<T>(&self, result: Result<T>, answered: bool) -> Result<T> {
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Err(e) if !answered && unreachable(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                down.0 = down.0.saturating_add(1);
                let wait = down_for(down.0);
                down.1 = Some(Instant::now() + wait);
                tracing::warn!(target: LOG_TARGET, endpoint = %self.url, error = %e, ?wait, "endpoint avoided");
            }
            // Any answer from the node (an error status included) shows it is up.
            Ok(_) => *down = (0, None),
            Err(e) if answered || from_server(e) => *down = (0, None),
            // Failures of our own (credentials, configuration) say nothing about the node.
            Err(_) => {}
        }
        result
    }

    /// Lets one attempt through to an endpoint whose wait is over but that has not answered
    /// since it failed: the others keep avoiding it until this probe settles, so a node that
    /// is still gone costs one attempt per wait, not a burst.
    fn probe(&self, now: Instant) {
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        if down.0 > 0 && down.1.is_some_and(|t| t <= now) {
            down.1 = Some(now + down_for(down.0));
        }
    }
}

/// How long an endpoint is avoided after `failures` failures in a row (at least one).
fn down_for(failures: u32) -> Duration {
    FIRST_DOWN
        .saturating_mul(1u32 << (failures.max(1) - 1).min(16))
        .min(MAX_DOWN)
}

/// An attempt that did not reach the endpoint's server at all.
fn unreachable(e: &Error) -> bool {
    matches!(e, Error::Transport { .. } | Error::Timeout { .. })
}

/// An error the node's answer carried.
fn from_server(e: &Error) -> bool {
    match e {
        Error::Service { .. }
        | Error::NotFound { .. }
        | Error::Integrity { .. }
        | Error::Redirect { .. } => true,
        Error::PermissionDenied { status, .. } => *status != 0,
        _ => false,
    }
}

struct InFlight<'a, W>(&'a Endpoint<W>);

impl<W> Drop for InFlight<'_, W> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A wire over one wire per endpoint (see the module).
#[derive(Debug)]
pub struct Spread<W> {
    endpoints: Vec<Endpoint<W>>,
    cfg: StoreConfig,
    turn: AtomicUsize,
}

impl<W: WireFromConfig> WireFromConfig for Spread<W> {
    /// One wire per endpoint of `cfg.endpoints` (or the one endpoint), each configured as
    /// `cfg` but for its endpoint.
    fn from_config(cfg: StoreConfig) -> Result<Self> {
        let urls = if cfg.endpoints.is_empty() {
            vec![cfg.endpoint_url()]
        } else {
            cfg.endpoints.clone()
        };
        let wires = urls
            .into_iter()
            .map(|url| {
                let mut one = cfg.clone();
                one.endpoint = Some(url.clone());
                one.endpoints = Vec::new();
                Ok((url, W::from_config(one)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::new(cfg, wires))
    }
}

impl<W> Spread<W> {
    /// Over `wires`, one per endpoint (at least one), with the policy of `cfg`.
    pub fn new(cfg: StoreConfig, wires: Vec<(Url, W)>) -> Self {
        assert!(!wires.is_empty(), "a store needs an endpoint");
        Self {
            endpoints: wires
                .into_iter()
                .map(|(url, wire)| Endpoint {
                    url,
                    wire,
                    in_flight: AtomicUsize::new(0),
                    requests: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    bytes_read: AtomicU64::new(0),
                    bytes_written: AtomicU64::new(0),
                    down: Mutex::new((0, None)),
                })
                .collect(),
            cfg,
            turn: AtomicUsize::new(0),
        }
    }

    /// Each endpoint's counters, in the configured order.
    pub fn stats(&self) -> Vec<EndpointStats> {
        let now = Instant::now();
        self.endpoints
            .iter()
            .map(|e| EndpointStats {
                url: e.url.clone(),
                requests: e.requests.load(Ordering::Relaxed),
                failures: e.failures.load(Ordering::Relaxed),
                bytes_read: e.bytes_read.load(Ordering::Relaxed),
                bytes_written: e.bytes_written.load(Ordering::Relaxed),
                in_flight: e.in_flight.load(Ordering::Relaxed),
                down: e.down_until().is_some_and(|t| t > now),
            })
            .collect()
    }

    /// The wire of endpoint `i` (in the configured order).
    pub fn wire(&self, i: usize) -> &W {
        &self.endpoints[i].wire
    }

    /// The endpoint for the next attempt: among those not being avoided (or, when all are,
    /// the one whose wait ends first), the fewest in flight, ties taken in turn.
    fn pick(&self) -> &Endpoint<W> {
        let now = Instant::now();
        let n = self.endpoints.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let in_turn = (0..n).map(|k| &self.endpoints[(start + k) % n]);
        let up = in_turn
            .clone()
            .filter(|e| e.down_until().is_none_or(|t| t <= now))
            .min_by_key(|e| e.in_flight.load(Ordering::Relaxed));
        let ep = up.unwrap_or_else(|| {
            in_turn
                .min_by_key(|e| e.down_until())
                .expect("at least one endpoint")
        });
        ep.probe(now);
        ep
    }

    /// One attempt that is not a GET (whose body tells whether the node answered): on the
    /// endpoint `pick` chooses, counted in flight, with `sent` body bytes, and settled.
    async fn attempt<'a, T, F, Fut>(&'a self, sent: u64, call: F) -> Result<T>
    where
        F: FnOnce(&'a W) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let ep = self.pick();
        let _counted = ep.enter();
        ep.bytes_written.fetch_add(sent, Ordering::Relaxed);
        ep.settle(call(&ep.wire).await, false)
    }
}

#[async_trait]
impl<W: Wire> GetWire for Spread<W> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let ep = self.pick();
        let _counted = ep.enter();
        let before = sink.written();
        let result = ep.wire.get_object(req, sink).await;
        ep.bytes_read
            .fetch_add(sink.written().saturating_sub(before), Ordering::Relaxed);
        let answered = sink.head().is_some();
        ep.settle(result, answered)
    }
}

#[async_trait]
impl<W: Wire> Operations for Spread<W> {
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        let sent = req.body_len();
        self.attempt(sent, |w| w.send(req)).await
    }
}

// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> Wire for Spread<W> {
    fn backend(&self) -> &'static str {
        self.endpoints[0].wire.backend()
    }

    fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    fn endpoint_stats(&self) -> Vec<EndpointStats> {
        self.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3store::S3Store;
    use crate::segment::Segment;
    use crate::store::ObjectStoreExt;
    use crate::store::{GetOptions, ObjectStore};
    use crate::testing::{self, MemoryWire, Op, reset};
    use crate::uri::ObjectUri;

    /// A store over `n` nodes of one in-memory cluster, each with its own faults.
    fn cluster(n: usize, latency: Duration) -> S3Store<Spread<MemoryWire>> {
        let mut cfg = testing::config();
        cfg.max_connections = 64;
        let first = MemoryWire::new(cfg.clone()).with_latency(latency);
        let wires = (0..n)
            .map(|i| {
                let url: Url = format!("http://node{i}.invalid").parse().unwrap();
                (url, first.another_node())
            })
            .collect();
        S3Store::over(Spread::new(cfg, wires))
    }

    fn uri(key: &str) -> ObjectUri {
        ObjectUri::parse(&format!("s3://bkt/{key}")).unwrap()
    }

    #[tokio::test]
    async fn concurrent_requests_spread_over_every_endpoint() {
        let s = cluster(3, Duration::from_millis(20));
        s.wire().wire(0).insert(&uri("a"), vec![7u8; 1000]);
        let a = uri("a");
        let gets = (0..12).map(|_| s.get(&a, None));
        for got in futures::future::join_all(gets).await {
            assert_eq!(got.unwrap().len(), 1000);
        }
        let per_node: Vec<u64> = s.wire().stats().iter().map(|e| e.requests).collect();
        assert_eq!(per_node, [4, 4, 4], "least outstanding requests first");
        let read: Vec<u64> = s.endpoint_stats().iter().map(|e| e.bytes_read).collect();
        assert_eq!(read, [4000, 4000, 4000]);
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_is_avoided_and_its_attempts_go_elsewhere() {
        let s = cluster(3, Duration::ZERO);
        s.wire().wire(0).insert(&uri("a"), vec![1u8; 100]);
        s.wire().wire(1).fail(Op::HeadObject, 1000, reset);
        s.wire().wire(1).fail(Op::GetObject, 1000, reset);
        for _ in 0..30 {
            assert_eq!(s.head(&uri("a")).await.unwrap().size, 100);
            assert_eq!(s.get(&uri("a"), None).await.unwrap().len(), 100);
        }
        let stats = s.wire().stats();
        assert!(stats[1].down, "{stats:?}");
        // Reached once, then avoided for longer than this test runs.
        assert_eq!(stats[1].failures, 1, "{stats:?}");
        assert_eq!(stats[0].requests + stats[2].requests, 60, "{stats:?}");
    }

    #[tokio::test]
    async fn a_body_cut_on_one_endpoint_resumes_on_another_pinned_to_its_version() {
        let s = cluster(2, Duration::ZERO);
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        s.wire().wire(0).insert(&uri("a"), data.clone());
        s.wire().wire(0).cut_bodies(100_000, 1);
        let mut seg = Segment::growable();
        let info = s
            .get_into_with(&uri("a"), &GetOptions::default(), &mut seg)
            .await
            .unwrap();
        assert_eq!(info.attempts, 2);
        assert_eq!(seg.freeze().unwrap(), data);
        let stats = s.wire().stats();
        assert_eq!((stats[0].requests, stats[1].requests), (1, 1), "{stats:?}");
        // It answered before its body broke: not a node that is gone.
        assert!(!stats[0].down && stats[0].failures == 0, "{stats:?}");
    }

    #[tokio::test]
    async fn when_every_endpoint_is_down_the_retry_budget_still_decides() {
        let s = cluster(2, Duration::ZERO);
        for i in 0..2 {
            s.wire().wire(i).fail(Op::HeadObject, 1000, reset);
        }
        let e = s.head(&uri("a")).await.unwrap_err();
        assert!(matches!(e, Error::Transport { .. }), "{e:?}");
        let sent: u64 = s.wire().stats().iter().map(|e| e.requests).sum();
        assert_eq!(sent, u64::from(testing::config().retry.max_attempts));
    }
}
