//! Requests in flight per client, adapted to what the store says: the client's share of a
//! store's request rate, found at run time, as TCP finds its share of a link.
//!
//! A throttling store (S3 answers `503 SlowDown` above a partition's rate) is a shared
//! resource: every request a client sends while the store is refusing costs the store and
//! the client and delivers nothing. Retrying each request on its own (full-jitter backoff per
//! request) does not slow a client with 16 requests in flight: the other 15 keep arriving.
//! So one `Congestion` per client (per [`S3Store`](crate::S3Store), shared by its clones) decides how many
//! requests may be in flight, by one rule, AIMD:
//!
//! - **additive increase**: each answered request raises the limit by `1 / limit`, i.e. by
//!   one request per limit's worth of answers, up to `max_connections`;
//! - **multiplicative decrease**: a throttle (`Error::is_throttle`: 503, 429, `SlowDown`)
//!   multiplies it by 0.7 (the factor of CUBIC and of the AWS SDKs' adaptive mode), down to
//!   one request — unless the refused request was sent before the last cut: requests sent
//!   under the old limit say nothing about the new one (TCP's rule of one cut per window);
//! - **gate**: once the limit is down to one request, a throttle also holds every new
//!   request of the client for a full-jitter backoff that doubles with each throttle in a row
//!   (the retry policy's base and cap) and resets on the first answer: below one request in
//!   flight, the gate is what slows a client further.
//!
//! The limit starts at `max_connections`: a store that never throttles sees exactly the
//! fixed bound it always had. Other errors (404, resets, timeouts) change nothing: they say
//! nothing about load, and a dead endpoint is `spread`'s business.

use crate::error::Result;
use crate::retry::RetryPolicy;
use std::sync::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The multiplicative decrease.
const BETA: f64 = 0.7;

/// The AIMD controller of one client (module docs).
#[derive(Debug)]
pub struct Congestion {
    max: usize,
    policy: RetryPolicy,
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_flight: usize,
    last_cut: Option<Instant>,
    throttles_in_a_row: u32,
    gate: Option<Instant>,
    throttled: u64,
    cuts: u64,
}

impl State {
    fn allowed(&self, max: usize) -> usize {
        (self.limit as usize).clamp(1, max)
    }
}

/// How an attempt ended, as far as the controller cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The store answered: grow.
    Answered,
    /// The store asked for fewer requests: cut, and pause at one.
    Throttled,
    /// Another failure, or the caller gave up: nothing said about load.
    Other,
}

/// What the controller has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CongestionStats {
    /// Requests allowed in flight now.
    pub limit: usize,
    /// The bound it never exceeds (`max_connections`).
    pub max: usize,
    /// Answers that asked the client to slow down.
    pub throttled: u64,
    /// Times the limit was cut.
    pub cuts: u64,
}

impl Congestion {
    /// At most `max` requests in flight (at least one); the gate's backoff follows `policy`.
    pub fn new(max: usize, policy: RetryPolicy) -> Self {
        let max = max.max(1);
        Self {
            max,
            policy,
            state: Mutex::new(State {
                limit: max as f64,
                in_flight: 0,
                last_cut: None,
                throttles_in_a_row: 0,
                gate: None,
                throttled: 0,
                cuts: 0,
            }),
            changed: Notify::new(),
        }
    }

    /// Waits until a request may be sent: the gate is open and fewer than the limit are in
    /// flight.
    pub async fn acquire(&self) -> Permit<'_> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let gate = {
                let mut s = self.state.lock().unwrap();
                match s.gate {
                    Some(g) if g > Instant::now() => Some(g),
                    _ => {
                        if s.in_flight < s.allowed(self.max) {
                            s.in_flight += 1;
                            return Permit {
                                owner: self,
                                sent: Instant::now(),
                                recorded: false,
                            };
                        }
                        None
                    }
                }
            };
            match gate {
                Some(until) => tokio::time::sleep_until(until).await,
                None => notified.await,
            }
        }
    }

    /// The limit now and what set it.
    pub fn stats(&self) -> CongestionStats {
        let s = self.state.lock().unwrap();
        CongestionStats {
            limit: s.allowed(self.max),
            max: self.max,
            throttled: s.throttled,
            cuts: s.cuts,
        }
    }

    fn record(&self, sent: Instant, outcome: Outcome) {
        let mut s = self.state.lock().unwrap();
        s.in_flight -= 1;
        let now = Instant::now();
        if outcome == Outcome::Throttled {
            s.throttled += 1;
            s.throttles_in_a_row += 1;
            if s.limit <= 1.0 {
                let wait = self.policy.backoff(s.throttles_in_a_row - 1);
                s.gate = s.gate.max(Some(now + wait));
            }
            if s.last_cut.is_none_or(|cut| sent > cut) {
                s.limit = (s.limit * BETA).max(1.0);
                s.last_cut = Some(now);
                s.cuts += 1;
                tracing::debug!(
                    limit = s.allowed(self.max),
                    "throttled: requests in flight cut"
                );
            }
        } else if outcome == Outcome::Answered {
            s.throttles_in_a_row = 0;
            s.gate = None;
            s.limit = (s.limit + 1.0 / s.limit).min(self.max as f64);
        }
        drop(s);
        self.changed.notify_waiters();
    }
}

/// One request in flight. `finish` tells the controller how it went; dropped unfinished
/// (the caller gave up), it only frees its place.
#[derive(Debug)]
pub struct Permit<'a> {
    owner: &'a Congestion,
    sent: Instant,
    recorded: bool,
}

impl Permit<'_> {
    /// Records the request's outcome and frees its place.
    pub fn finish<T>(mut self, result: &Result<T>) {
        self.recorded = true;
        let outcome = match result {
            Ok(_) => Outcome::Answered,
            Err(e) if e.is_throttle() => Outcome::Throttled,
            Err(_) => Outcome::Other,
        };
        self.owner.record(self.sent, outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            self.owner.record(self.sent, Outcome::Other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::time::Duration;

    fn slow_down() -> Result<()> {
        Err(Error::from_service("u", 503, "SlowDown", "slow", None))
    }

    fn quick() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn a_store_that_never_throttles_keeps_the_fixed_bound() {
        let c = Congestion::new(4, quick());
        let permits: Vec<_> = futures::future::join_all((0..4).map(|_| c.acquire())).await;
        let fifth = tokio::time::timeout(Duration::from_millis(20), c.acquire()).await;
        assert!(fifth.is_err(), "a fifth waits");
        for p in permits {
            p.finish(&Ok(()));
        }
        assert_eq!(c.stats().limit, 4);
        c.acquire().await.finish(&Ok(()));
    }

    #[tokio::test]
    async fn throttles_cut_once_per_window_and_answers_grow_it_back() {
        let c = Congestion::new(64, quick());
        // A burst of refusals for requests sent together: one cut.
        let permits: Vec<_> = futures::future::join_all((0..10).map(|_| c.acquire())).await;
        for p in permits {
            p.finish(&slow_down());
        }
        let s = c.stats();
        assert_eq!((s.limit, s.throttled, s.cuts), (44, 10, 1), "64 x 0.7");
        // Requests sent after a cut cut again, down to one request, never zero.
        for _ in 0..20 {
            c.acquire().await.finish(&slow_down());
        }
        assert_eq!(c.stats().limit, 1);
        // Additive increase: one more request per limit's worth of answers.
        let mut answers = 0;
        while c.stats().limit < 4 {
            c.acquire().await.finish(&Ok(()));
            answers += 1;
        }
        assert!(
            (4..=7).contains(&answers),
            "1 + 1/1 + 1/2 + 1/3 ... : {answers}"
        );
    }

    #[tokio::test]
    async fn at_one_request_a_throttle_holds_new_requests_until_its_backoff_ends() {
        let above = Congestion::new(8, quick());
        above.acquire().await.finish(&slow_down());
        assert!(
            above.state.lock().unwrap().gate.is_none(),
            "a cut is enough"
        );
        let c = Congestion::new(
            1,
            RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(200),
                max_delay: Duration::from_millis(200),
            },
        );
        // Full jitter can draw zero: throttle until the gate is set some way ahead.
        let gate = loop {
            c.acquire().await.finish(&slow_down());
            let g = c.state.lock().unwrap().gate.unwrap();
            if g > Instant::now() + Duration::from_millis(50) {
                break g;
            }
        };
        c.acquire().await.finish(&Ok(()));
        let s = c.state.lock().unwrap();
        assert!(s.gate.is_none(), "an answer opens the gate");
        assert!(Instant::now() >= gate, "the request waited for it");
    }

    #[tokio::test]
    async fn other_errors_and_abandoned_requests_change_nothing() {
        let c = Congestion::new(8, quick());
        c.acquire()
            .await
            .finish(&Err::<(), _>(Error::transport("u", "reset")));
        drop(c.acquire().await);
        let s = c.stats();
        assert_eq!((s.limit, s.throttled, s.cuts), (8, 0, 0));
        assert_eq!(c.state.lock().unwrap().in_flight, 0);
    }
}
