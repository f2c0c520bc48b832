//! Requests in flight per client, found at run time: as many as the store answers faster
//! with, fewer while it asks for fewer — the client's share of a store, found as TCP finds its
//! share of a link.
//!
//! The rate of a client is requests in flight ÷ latency (Little's law). With 30 ms to the
//! first byte a fixed 16 in flight gives ~500 objects/s however fast the code is; on a
//! loopback server answering in microseconds, 16 already saturate a core and more only add
//! memory and queueing. The right number depends on the store, so one `Congestion` per
//! client (per [`S3Store`](crate::S3Store), shared by its clones: the Loader, `get_many`,
//! `sluice get/cp`, multipart parts and the compat module all send through it) sets it, by
//! one rule — **probe on rate, AIMD on throttles**:
//!
//! - **slow start** ([`Concurrency::Adaptive`], the default): the limit starts at
//!   [`ADAPTIVE_START`] and doubles after each measured round (a round: `limit` answers to
//!   let the new requests settle, then `4 × limit` answers, and 50 ms, counted — or as few
//!   as `limit` (at least 16) once the mean time of the answers counted is known to
//!   ±[`ROUND_ERROR`]: large requests, whose times vary little, are judged in one round
//!   trip) whose rate rose by at least a quarter over the round before (the rate: bytes
//!   answered per second, each answer counting [`ANSWER_BYTES`] beyond its body, so that
//!   small requests count by number and large ones by bytes). A store
//!   that is latency-bound answers a doubling with about twice the rate; one that is
//!   saturated (its CPU, the link, the client's own core) with the same rate, so the first
//!   doubling that does not pay is undone and the controller holds. Rounds in which the
//!   client kept less than [`FULL`] of the limit in flight, on average over the round's
//!   time, say nothing about the limit (the application asked for fewer) and are not
//!   judged.
//! - **a start from the job** ([`Congestion::expect_requests`]): a job that knows its
//!   objects (`sluice get` of a listing, the loader, `cp` to a file) names the requests it
//!   could have in flight at once within its memory, and a fresh search starts there, then
//!   halves while half as many read about as fast (a doubling not worth 1.25×) and doubles
//!   on from the start when it was needed. A short job under latency is done in the round
//!   trips its requests need; one on loopback comes down to what it needs. A throttle during
//!   that search falls to [`ADAPTIVE_START`] at once: one round of overshoot at most.
//! - **one limiter per kind** ([`Kind`]: reads of bytes, reads of metadata, writes), all
//!   under the client's cap (`max_connections`): S3 rates GET/HEAD and PUT/COPY/DELETE per
//!   prefix apart, and a store pays differently for each, so each kind searches its own
//!   limit on its own answers. A store saturated by a checkpoint's writes at 16 requests may
//!   serve its reads best at 128; a burst of HEADs (which wait on latency alone) does not
//!   draw the reads' limit to the cap; and a round of one kind is never judged against
//!   rates measured on another. Each limiter is the algorithm ([`judge`], a function of a
//!   round's rate) apart from its gate (`Limiter`: the permits, the pause at one request).
//! - **hold and probe**: after [`PROBE_EVERY`] rounds at the limit, it tries a quarter more
//!   and keeps it only if the rate rose by a tenth. A rate below half the held one means the
//!   store's latency rose: slow start again from the limit; above twice, that it fell: slow
//!   start again from [`ADAPTIVE_START`], as fewer may do.
//! - **multiplicative decrease**: a throttle (`Error::is_throttle`: 503, 429, `SlowDown`),
//!   a timeout or a transport failure multiplies the limit by 0.7 (the factor of CUBIC and
//!   of the AWS SDKs' adaptive mode), down to one request — unless the failed request was
//!   sent before the last cut: requests sent under the old limit say nothing about the new
//!   one (TCP's rule of one cut per window);
//! - **additive increase**: after a cut, each answer raises the limit by `1 / limit` (one
//!   request per limit's worth of answers) back to where it was cut — the throttling
//!   store's ceiling, probed again later;
//! - **gate**: once a kind's limit is down to one request, a throttle also holds every new
//!   request of that kind for a full-jitter backoff that doubles with each throttle in a row
//!   (the retry policy's base and cap) and resets on the first answer: below one request in
//!   flight, the gate is what slows a client further. Other kinds go on (S3 throttles them
//!   apart).
//!
//! The limit never exceeds `max_connections` (default 256; the memory budget bounds what
//! the loader asks for). [`Concurrency::Fixed`] (what `SLUICE_MAX_CONNECTIONS` sets) starts
//! at `max_connections` and never probes: a user's number wins, cut only while the store
//! throttles. Not-found, refusals and other answers change nothing: they say nothing about
//! load.
//!
//! Each limit is a semaphore's permits, so a freed place wakes one waiter, not all of them:
//! a cut forgets idle permits and owes the rest, paid as requests in flight return theirs.
//! The cap is one more semaphore, which every request of every kind holds a place of.

use crate::error::{ErrorKind, Result};
use crate::in_flight::InFlight;
use crate::retry::RetryPolicy;
use std::sync::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// The multiplicative decrease.
const BETA: f64 = 0.7;
/// Where an adaptive limit starts: the loader's fixed window before the controller, which
/// saturates one core against a loopback server (docs/benchmarks.md).
pub const ADAPTIVE_START: usize = 16;
/// Measured rounds at a held limit before it tries a quarter more.
pub(crate) const PROBE_EVERY: u32 = 8;
/// Rate a doubling must bring to be kept: a latency-bound store answers about 2×; a round
/// of `4 × limit` answers varies by ~10% on a store with S3's latency spread, one ended
/// early by ±[`ROUND_ERROR`].
const SLOW_START_GAIN: f64 = 1.25;
/// Share of the limit a client must have kept in flight, on average over a round, for the
/// round to judge the limit: below it the application, not the store, set the rate (a
/// round that spans the end of one job and the start of the next, half full, says nothing).
const FULL: f64 = 0.9;
/// Standard errors (of the round's mean answer time: `Round::error`) by which a doubling's
/// gain must clear [`SLOW_START_GAIN`] to be kept after one limit of answers rather than
/// `4 × limit`. A latency-bound store answers a doubling with about twice the rate, which
/// clears 1.25 by far even when small requests' times spread as widely as S3's latency
/// (5 to 150 ms); a rate gain that close to the bar is judged on the
/// full round. Four round trips per doubling made a short job end before its search did
/// (400 objects of 128 KiB under `s3-standard`: docs/benchmarks.md).
const CLEAR: f64 = 3.0;
/// Relative error of the mean answer time at which the first round of a search, which only
/// sets the rate the first doubling is judged by, ends after one limit of answers: 16
/// answers of 5 to 150 ms know it to about this, where `4 × limit` answers took four round
/// trips before any doubling. Its error counts in the next verdict ([`CLEAR`]), and a
/// doubling that pays 2x still clears the bar by far.
const BASE_ERROR: f64 = 0.15;
/// Rate a quarter more must bring to be kept.
const PROBE_GAIN: f64 = 1.10;
/// A held limit whose rate falls below this share of the held rate starts over.
const CHANGED: f64 = 0.5;
/// What an answer is worth beyond the bytes of its body, in bytes, when rounds are compared:
/// about what a request costs a loopback client over 64 KiB of transfer (~30 µs of a core).
/// A round's rate is its answers' bytes plus this per answer, per second: rounds of small
/// requests and HEADs, which move few bytes, are measured by their answers, and rounds of
/// large ones by their bytes. Answers per second alone counted a loader whose ranges were
/// cut smaller (`RangeSize::Follow`) as faster at the same bytes per second: against nginx
/// the limit climbed from 20 to 64-256 as ranges went from 8 to 2 MiB.
const ANSWER_BYTES: f64 = 65_536.0;
/// Fewest answers counted in a round, so a small limit's rate is not one request's luck.
const MIN_ROUND: u64 = 32;
/// Standard error of the mean answer time (relative) at which a round of at least `limit`
/// answers ends before `4 × limit`: the rate of a round is answers ÷ its time (of answers of
/// one size), whose relative error is that of the mean answer time, so this is the rate's
/// error too. Reads
/// of a 2 GiB checkpoint are 128 answers of 16 MiB (each ~200 ms, ±~10% under
/// `s3-standard`): rounds of `4 × limit` answers ended the read before the search reached
/// the limit that reads it fastest (docs/benchmarks.md, "Why the defaults"). Small requests,
/// whose times spread as widely as their latency, still take `4 × limit` answers.
const ROUND_ERROR: f64 = 0.05;
/// Shortest round: against a loopback server 80 answers take ~3 ms, where the scheduling of
/// two cores alone moves a rate by a quarter (measured: rounds that short let the limit climb
/// to ~150 where 16 do as well, at 1.24x the CPU per GB).
const MIN_ROUND_TIME: std::time::Duration = std::time::Duration::from_millis(50);

/// What a request asks of the store, as S3 rates it: a prefix answers 5,500 GET/HEAD and
/// 3,500 PUT/COPY/POST/DELETE requests per second, and a store pays differently for each (a
/// write lands in fresh memory or on disk, a read may come from cache), so a limit found on
/// one says little about the other. A GET's body is also told from the answers that carry
/// only metadata (HEAD, LIST): a HEAD answers a hundredth of a ranged GET's bytes in about
/// its time, so rounds of the two compared by bytes per second would mislead the client's
/// controller (`congestion`). Each kind has a limiter of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// GET of an object's bytes.
    Read,
    /// HEAD, LIST: reads whose answers are metadata.
    Meta,
    /// PUT, COPY, DELETE, and a multipart upload's create, parts, complete and abort.
    Write,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Read, Kind::Meta, Kind::Write];
}

/// How a client's requests in flight are set (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Concurrency {
    /// Found at run time, from [`ADAPTIVE_START`] up to `max_connections`.
    #[default]
    Adaptive,
    /// `max_connections`, cut only while the store throttles.
    Fixed,
}

/// Where the adaptive search is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling while the rate follows; `base`: the limit before and its rate.
    SlowStart { base: Option<(f64, f64)> },
    /// Started where the job asked ([`Congestion::expect_requests`]) and halving while half
    /// as many read about as fast; `base`: the limit above and its rate.
    FromAbove { base: Option<(f64, f64)> },
    /// At a limit that paid; `rounds` measured there, at `rate` (bytes per second, with
    /// `ANSWER_BYTES` per answer).
    Hold { rounds: u32, rate: f64 },
    /// Trying more than `from`, which answered at `rate`.
    Probe { from: f64, rate: f64 },
}

/// The answers of the round being measured.
#[derive(Debug)]
struct Round {
    /// Answers still to pass before counting starts (the new limit settling).
    settle: u64,
    started: Instant,
    answers: u64,
    /// The counted answers' bytes, each with `ANSWER_BYTES` more: what the rate is of.
    work: f64,
    /// Sum and sum of squares of the counted answers' times, in seconds.
    took: f64,
    took_sq: f64,
}

impl Round {
    fn new(limit: usize, now: Instant) -> Self {
        Self {
            settle: limit as u64,
            started: now,
            answers: 0,
            work: 0.0,
            took: 0.0,
            took_sq: 0.0,
        }
    }

    /// Counts an answer that took `took` and brought `bytes`.
    fn count(&mut self, took: std::time::Duration, bytes: u64) {
        let t = took.as_secs_f64();
        self.answers += 1;
        self.work += bytes as f64 + ANSWER_BYTES;
        self.took += t;
        self.took_sq += t * t;
    }

    /// The standard error of the mean answer time, relative to it (infinite before two
    /// answers).
    fn error(&self) -> f64 {
        let n = self.answers as f64;
        if self.answers < 2 || self.took <= 0.0 {
            return f64::INFINITY;
        }
        let mean = self.took / n;
        let var = ((self.took_sq - n * mean * mean) / (n - 1.0)).max(0.0);
        (var / n).sqrt() / mean
    }

    /// Whether enough answers are counted to judge a `limit`: `4 × limit`, or `limit` known
    /// to ±[`ROUND_ERROR`] when `quick` (slow start, whose doublings must pay a quarter; a
    /// probe, judged at a tenth, takes the full round).
    fn is_complete(&self, limit: usize, quick: bool) -> bool {
        let limit = limit as u64;
        let full = self.answers >= (4 * limit).max(MIN_ROUND);
        let known = self.answers >= limit.max(MIN_ROUND / 2) && self.error() <= ROUND_ERROR;
        full || (quick && known)
    }
}

#[derive(Debug)]
struct State {
    limit: f64,
    /// Where additive increase stops: `max` when fixed; the limit the search chose, or the
    /// one a throttle cut, when adaptive.
    ceiling: f64,
    /// Permits in circulation, and those owed back (a cut below what is in use).
    issued: usize,
    debt: usize,
    /// Requests of this kind in flight over the round's time (`FULL`).
    flight: InFlight,
    last_cut: Option<Instant>,
    throttles_in_a_row: u32,
    gate: Option<Instant>,
    throttled: u64,
    cuts: u64,
    phase: Phase,
    round: Round,
    /// Work per second of the last round judged (bytes, with `ANSWER_BYTES` per answer):
    /// the rate rounds are compared by.
    rate: f64,
    /// Answers per second of the same round (`CongestionStats::rate`).
    answer_rate: f64,
    /// The relative error of that round's rate (`Round::error`).
    judged_error: f64,
    /// The last decision about the limit (`CongestionStats::last`).
    last: Option<Decision>,
    /// No request of this kind has been sent yet (`Congestion::acquire` may seed it).
    fresh: bool,
    /// A round kept full has been judged: the limit is the search's, not a guess.
    judged: bool,
}

impl State {
    fn allowed(&self, max: usize) -> usize {
        (self.limit as usize).clamp(1, max)
    }

    fn set_limit(&mut self, limit: f64, max: usize, now: Instant) {
        self.limit = limit.clamp(1.0, max as f64);
        self.round = Round::new(self.allowed(max), now);
    }
}

/// The search's verdict on a round judged at `limit` that read at `rate` (module docs): the
/// next limit and phase. `max` is the cap. The whole algorithm of a limiter, apart from its
/// gate and its rounds: a function of a sample, as Netflix's `Limit.onSample` is.
fn judge(phase: Phase, limit: f64, rate: f64, max: f64) -> (f64, Phase) {
    let hold = |rate| Phase::Hold { rounds: 0, rate };
    match phase {
        Phase::SlowStart {
            base: Some((from, was)),
        } if rate < was * SLOW_START_GAIN => (from, hold(was)),
        // Twice as many paid: the limit above was needed, and more may be.
        Phase::FromAbove {
            base: Some((from, was)),
        } if was >= rate * SLOW_START_GAIN => {
            if from >= max {
                (from, hold(was))
            } else {
                let base = Some((from, was));
                ((from * 2.0).min(max), Phase::SlowStart { base })
            }
        }
        Phase::FromAbove { .. } if limit / 2.0 >= ADAPTIVE_START as f64 => {
            let base = Some((limit, rate));
            (limit / 2.0, Phase::FromAbove { base })
        }
        Phase::FromAbove { .. } => (limit, hold(rate)),
        Phase::SlowStart { .. } if limit >= max => (limit, hold(rate)),
        Phase::SlowStart { .. } => {
            let base = Some((limit, rate));
            (limit * 2.0, Phase::SlowStart { base })
        }
        Phase::Probe { from: _, rate: was } if rate >= was * PROBE_GAIN => (limit, hold(rate)),
        Phase::Probe { from, rate: was } => (from, hold(was)),
        Phase::Hold { rate: held, .. } if rate < held * CHANGED => {
            // This round straddled the change: no base to judge the next one by.
            ((limit * 2.0).min(max), Phase::SlowStart { base: None })
        }
        Phase::Hold { rate: held, .. } if rate > held / CHANGED => {
            // Faster at the same limit: latency fell, so fewer may do; search again.
            (ADAPTIVE_START as f64, Phase::SlowStart { base: None })
        }
        Phase::Hold { rounds, .. } if rounds + 1 >= PROBE_EVERY && limit < max => {
            let more = (limit * 1.25).max(limit + 1.0);
            (more, Phase::Probe { from: limit, rate })
        }
        Phase::Hold { rounds, .. } => (
            limit,
            Phase::Hold {
                rounds: rounds + 1,
                rate,
            },
        ),
    }
}

/// What `judge` decided, as `sluice bench` prints it: from `judged` at `was` requests to
/// `phase` at `now_at`, on a round that read at `rate`. `None`: nothing worth telling.
fn decision(judged: Phase, phase: Phase, was: usize, now_at: usize, rate: f64) -> Option<Decision> {
    let gain = |before: f64| (100.0 * rate / before.max(f64::MIN_POSITIVE)).round() as u32;
    let loss = |above: f64| (100.0 * above / rate.max(f64::MIN_POSITIVE)).round() as u32;
    Some(match (judged, phase) {
        (Phase::SlowStart { base }, Phase::SlowStart { .. }) if now_at > was => Decision::Doubled {
            to: now_at,
            gain: base.map(|(_, before)| gain(before)),
        },
        (
            Phase::SlowStart {
                base: Some((_, before)),
            },
            Phase::Hold { .. },
        ) if now_at < was => Decision::Held {
            at: now_at,
            tried: was,
            gain: gain(before),
        },
        (Phase::SlowStart { .. }, Phase::Hold { .. }) => Decision::Capped { at: now_at },
        (
            Phase::FromAbove {
                base: Some((from, above)),
            },
            _,
        ) if now_at <= was => Decision::Halved {
            to: now_at,
            tried: from as usize,
            gain: loss(above),
        },
        (
            Phase::FromAbove {
                base: Some((_, above)),
            },
            Phase::SlowStart { .. },
        ) => Decision::Doubled {
            to: now_at,
            gain: Some(loss(above)),
        },
        (
            Phase::FromAbove {
                base: Some((_, above)),
            },
            Phase::Hold { .. },
        ) => Decision::Held {
            at: now_at,
            tried: was,
            gain: gain(above),
        },
        (Phase::Probe { rate: before, .. }, Phase::Hold { .. }) if now_at < was => Decision::Held {
            at: now_at,
            tried: was,
            gain: gain(before),
        },
        (Phase::Probe { rate: before, .. }, Phase::Hold { .. }) => Decision::Probed {
            at: now_at,
            gain: gain(before),
        },
        (Phase::Hold { .. }, Phase::SlowStart { .. }) => Decision::Restarted { at: now_at },
        _ => return None,
    })
}

/// How an attempt ended, as far as the controller cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The store answered: count it, grow.
    Answered,
    /// The store asked for fewer requests: cut, and pause at one.
    Throttled,
    /// The request timed out or its connection failed: cut.
    Failed,
    /// Another answer, or the caller gave up: nothing said about load.
    Other,
}

/// What the controller has done so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CongestionStats {
    /// Requests allowed in flight now.
    pub limit: usize,
    /// The bound it never exceeds (`max_connections`).
    pub max: usize,
    /// Whether the limit is searched for ([`Concurrency::Adaptive`]) or set.
    pub adaptive: bool,
    /// Answers per second in the last round judged (0 before the first).
    pub rate: f64,
    /// Answers that asked the client to slow down.
    pub throttled: u64,
    /// Times the limit was cut.
    pub cuts: u64,
    /// The last decision about the limit and why (`None` before the first).
    pub last: Option<Decision>,
}

/// The controller's last decision about its limit, and the rates it rested on: what
/// `sluice bench` prints beside the limit each row ended at. Gains are percent of the rate
/// before (a doubling must bring 125, a probe 110).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    /// Slow start doubled the limit.
    Doubled {
        /// The limit now.
        to: usize,
        /// The last doubling's gain, where there was one before.
        gain: Option<u32>,
    },
    /// More requests did not pay enough.
    Held {
        /// The limit held.
        at: usize,
        /// The limit tried.
        tried: usize,
        /// What the limit tried read, against the limit held.
        gain: u32,
    },
    /// A quarter more paid.
    Probed {
        /// The limit kept.
        at: usize,
        /// What it read against the limit before.
        gain: u32,
    },
    /// The search started where the job asked: it had that many requests ready.
    FromJob {
        /// Where it starts.
        at: usize,
    },
    /// The first requests of a kind (reads, writes) started where the other kind's held.
    FromKind {
        /// Where it starts.
        at: usize,
    },
    /// Half as many requests read about as fast as `tried`: the search from above goes on.
    Halved {
        /// The limit now.
        to: usize,
        /// The limit above.
        tried: usize,
        /// What `tried` read, against half as many.
        gain: u32,
    },
    /// Slow start reached the cap.
    Capped {
        /// The cap.
        at: usize,
    },
    /// The store's latency changed: the search started again.
    Restarted {
        /// Where it starts.
        at: usize,
    },
    /// The store throttled or failed.
    Cut {
        /// The limit now.
        to: usize,
    },
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let x = |pct: u32| format!("{:.2}x", f64::from(pct) / 100.0);
        match *self {
            Decision::Doubled { to, gain: None } => write!(f, "slow start, doubled to {to}"),
            Decision::Doubled { to, gain: Some(g) } => {
                write!(
                    f,
                    "slow start, doubled to {to}: the last doubling read {}",
                    x(g)
                )
            }
            Decision::Held { at, tried, gain } => write!(
                f,
                "held at {at}: {tried} read {} as fast (more must pay {} for a doubling, {} for a quarter)",
                x(gain),
                x((SLOW_START_GAIN * 100.0) as u32),
                x((PROBE_GAIN * 100.0).round() as u32)
            ),
            Decision::Probed { at, gain } => {
                write!(f, "kept {at}: a quarter more read {}", x(gain))
            }
            Decision::FromJob { at } => write!(f, "started at {at}: the job had as many ready"),
            Decision::FromKind { at } => {
                write!(
                    f,
                    "started at {at}: where the client's other transfers held"
                )
            }
            Decision::Halved { to, tried, gain } => write!(
                f,
                "halved to {to}: {tried} read only {} of what half as many did",
                x(gain)
            ),
            Decision::Capped { at } => write!(f, "at the cap, {at}"),
            Decision::Restarted { at } => {
                write!(f, "search restarted at {at}: the store's latency changed")
            }
            Decision::Cut { to } => write!(f, "cut to {to}: the store throttled or failed"),
        }
    }
}

/// The controller of one client (module docs): a limiter per [`Kind`] under the client's cap.
#[derive(Debug)]
pub(crate) struct Congestion {
    /// One place per request in flight, of any kind (`max_connections`).
    cap: Semaphore,
    limiters: [Limiter; 3],
}

impl Congestion {
    /// At most `max` requests in flight (at least one), found at run time per kind or fixed
    /// (`mode`); the gate's backoff follows `policy`.
    pub(crate) fn new(max: usize, mode: Concurrency, policy: RetryPolicy) -> Self {
        let max = max.max(1);
        Self {
            cap: Semaphore::new(max),
            limiters: Kind::ALL.map(|_| Limiter::new(max, mode, policy)),
        }
    }

    /// Waits until a request of `kind` may be sent: its kind's gate is open, fewer than its
    /// kind's limit are in flight, and fewer than the cap of all kinds.
    pub(crate) async fn acquire(&self, kind: Kind) -> Permit<'_> {
        let limiter = &self.limiters[kind as usize];
        loop {
            let (fresh, gate) = {
                let s = limiter.state.lock().unwrap();
                (s.fresh, s.gate)
            };
            if fresh {
                self.seed(kind);
            }
            if let Some(until) = gate.filter(|g| *g > Instant::now()) {
                tokio::time::sleep_until(until).await;
                continue;
            }
            let permit = limiter.permits.acquire().await.expect("never closed");
            let cap = self.cap.acquire().await.expect("never closed");
            let mut s = limiter.state.lock().unwrap();
            let now = Instant::now();
            if s.gate.is_some_and(|g| g > now) {
                // Closed while this request waited: it waits for the gate too.
                continue;
            }
            s.flight.step(now.into_std(), 1);
            return Permit {
                owner: self,
                kind,
                permit: Some((permit, cap)),
                sent: now,
                bytes: 0,
            };
        }
    }

    /// The first request of `kind` (reads or writes of bytes): its search starts where the
    /// other's held, as the client's work changed kind (a checkpoint's read after its write)
    /// and the store did not. Metadata, whose requests wait on latency alone, neither seeds
    /// nor is seeded: a burst of HEADs can hold the cap where bytes would only queue.
    fn seed(&self, kind: Kind) {
        let held = match kind {
            Kind::Read => self.limiters[Kind::Write as usize].held(),
            Kind::Write => self.limiters[Kind::Read as usize].held(),
            // Only clears its first-request mark.
            Kind::Meta => None,
        };
        self.limiters[kind as usize].start_at(held);
    }

    /// The job has `requests` reads ready to send at once (its objects' requests, as many as
    /// its memory holds): a fresh search of the reads' limit starts there
    /// ([`Limiter::expect_requests`]).
    pub(crate) fn expect_requests(&self, requests: usize) {
        self.limiters[Kind::Read as usize].expect_requests(requests);
    }

    /// The reads' limit (what the loader's window and the range size follow) and what set
    /// it — the writes' for a client that has only written —, with the throttles and cuts of
    /// every kind.
    pub(crate) fn stats(&self) -> CongestionStats {
        let unused = |k: Kind| self.limiters[k as usize].state.lock().unwrap().fresh;
        let kind = if unused(Kind::Read) && !unused(Kind::Write) {
            Kind::Write
        } else {
            Kind::Read
        };
        let mut stats = self.limiters[kind as usize].stats();
        let all = self.limiters.iter().map(Limiter::stats);
        (stats.throttled, stats.cuts) = all.fold((0, 0), |(t, c), s| (t + s.throttled, c + s.cuts));
        stats
    }
}

/// The limit of one kind of request (module docs): its permits, its gate and its search.
#[derive(Debug)]
struct Limiter {
    max: usize,
    mode: Concurrency,
    policy: RetryPolicy,
    permits: Semaphore,
    state: Mutex<State>,
}

impl Limiter {
    fn new(max: usize, mode: Concurrency, policy: RetryPolicy) -> Self {
        let (start, phase) = match mode {
            Concurrency::Adaptive => (ADAPTIVE_START.min(max), Phase::SlowStart { base: None }),
            Concurrency::Fixed => (
                max,
                Phase::Hold {
                    rounds: 0,
                    rate: 0.0,
                },
            ),
        };
        let now = Instant::now();
        Self {
            max,
            mode,
            policy,
            permits: Semaphore::new(start),
            state: Mutex::new(State {
                limit: start as f64,
                ceiling: start as f64,
                issued: start,
                debt: 0,
                flight: InFlight::new(now.into_std()),
                last_cut: None,
                throttles_in_a_row: 0,
                gate: None,
                throttled: 0,
                cuts: 0,
                phase,
                round: Round::new(start, now),
                rate: 0.0,
                answer_rate: 0.0,
                judged_error: 0.0,
                last: None,
                fresh: true,
                judged: false,
            }),
        }
    }

    /// The job has `requests` ready to send at once. A fresh adaptive search starts there,
    /// up to `max_connections`, instead of at [`ADAPTIVE_START`], and halves while half as
    /// many read about as fast ([`Phase::FromAbove`]): a short job under latency is done in
    /// the round trips its requests need rather than in the doublings up to them, and a store
    /// that is as fast with fewer (loopback) is searched down to them. Fewer than twice the
    /// start, or a search already under way, change nothing.
    fn expect_requests(&self, requests: usize) {
        let mut s = self.state.lock().unwrap();
        let fresh = s.phase == Phase::SlowStart { base: None } && s.last.is_none();
        let start = requests.min(self.max);
        if self.mode != Concurrency::Adaptive
            || !fresh
            || start < 2 * ADAPTIVE_START
            || start <= s.allowed(self.max)
        {
            return;
        }
        let now = Instant::now();
        s.fresh = false;
        s.phase = Phase::FromAbove { base: None };
        s.set_limit(start as f64, self.max, now);
        s.ceiling = s.limit;
        s.last = Some(Decision::FromJob { at: start });
        self.resize(&mut s, start);
    }

    /// The limit a search of this kind has judged, if one has.
    /// Not a start from the job ([`Phase::FromAbove`]) still being searched: that is a
    /// guess above anything the store has answered.
    fn held(&self) -> Option<usize> {
        let s = self.state.lock().unwrap();
        let searched = s.judged && !matches!(s.phase, Phase::FromAbove { .. });
        (self.mode == Concurrency::Adaptive && searched).then(|| s.allowed(self.max))
    }

    /// Starts a fresh search at `limit` (when above its start) rather than at
    /// [`ADAPTIVE_START`]: a slow start whose first round is its base.
    fn start_at(&self, limit: Option<usize>) {
        let mut s = self.state.lock().unwrap();
        if !std::mem::take(&mut s.fresh) {
            return;
        }
        let Some(at) = limit.filter(|at| *at > s.allowed(self.max)) else {
            return;
        };
        if s.phase != (Phase::SlowStart { base: None }) {
            return;
        }
        s.set_limit(at as f64, self.max, Instant::now());
        s.ceiling = s.limit;
        s.last = Some(Decision::FromKind { at });
        self.resize(&mut s, at);
    }

    fn stats(&self) -> CongestionStats {
        let s = self.state.lock().unwrap();
        CongestionStats {
            limit: s.allowed(self.max),
            max: self.max,
            adaptive: self.mode == Concurrency::Adaptive,
            rate: s.answer_rate,
            throttled: s.throttled,
            cuts: s.cuts,
            last: s.last,
        }
    }

    /// Records the outcome of a request sent at `sent` whose answer brought `bytes`.
    fn record(&self, permit: SemaphorePermit<'_>, (sent, bytes): (Instant, u64), outcome: Outcome) {
        let mut s = self.state.lock().unwrap();
        let now = Instant::now();
        s.flight.step(now.into_std(), -1);
        let before = s.allowed(self.max);
        match outcome {
            Outcome::Throttled | Outcome::Failed => {
                if outcome == Outcome::Throttled {
                    s.throttled += 1;
                    s.throttles_in_a_row += 1;
                    if s.limit <= 1.0 {
                        let wait = self.policy.backoff(s.throttles_in_a_row - 1);
                        s.gate = s.gate.max(Some(now + wait));
                    }
                }
                if s.last_cut.is_none_or(|cut| sent > cut) {
                    let mut cut = s.limit * BETA;
                    if self.mode == Concurrency::Adaptive {
                        // A start from the job's requests is a guess above anything the store
                        // has answered: throttled, it falls to where a search starts and grows
                        // back no further, so it overshoots by one round at most.
                        s.ceiling = if matches!(s.phase, Phase::FromAbove { .. }) {
                            cut = cut.min(ADAPTIVE_START as f64);
                            cut
                        } else {
                            s.limit
                        };
                        s.phase = Phase::Hold {
                            rounds: 0,
                            rate: s.rate,
                        };
                    }
                    s.set_limit(cut, self.max, now);
                    s.last_cut = Some(now);
                    s.cuts += 1;
                    s.last = Some(Decision::Cut {
                        to: s.allowed(self.max),
                    });
                }
            }
            Outcome::Answered => {
                s.throttles_in_a_row = 0;
                s.gate = None;
                if s.limit < s.ceiling {
                    s.limit = (s.limit + 1.0 / s.limit).min(s.ceiling);
                } else if self.mode == Concurrency::Adaptive {
                    let took = now.saturating_duration_since(sent);
                    self.count_answer(&mut s, now, took, bytes);
                }
            }
            Outcome::Other => {}
        }
        let after = s.allowed(self.max);
        if after != before {
            tracing::debug!(
                limit = after,
                bytes_per_s = s.rate,
                "requests in flight: {before} -> {after}"
            );
        }
        self.resize(&mut s, after);
        if s.debt > 0 {
            s.debt -= 1;
            permit.forget();
        }
    }

    /// Counts one answer to the round; at the round's end, judges the limit (`judge`).
    fn count_answer(&self, s: &mut State, now: Instant, took: std::time::Duration, bytes: u64) {
        if s.round.settle > 0 {
            s.round.settle -= 1;
            if s.round.settle == 0 {
                s.round.started = now;
                s.flight.restart(now.into_std());
            }
            return;
        }
        s.round.count(took, bytes);
        let elapsed = now.duration_since(s.round.started);
        let quick = matches!(s.phase, Phase::SlowStart { .. } | Phase::FromAbove { .. });
        // A search's rounds may end after one limit of answers: the first where its rate is
        // known well enough to be the base, a later one where the verdict on its doubling
        // (or halving) is clear (`BASE_ERROR`, `CLEAR`).
        let allowed = s.allowed(self.max);
        let one_limit = s.round.answers >= (allowed as u64).max(MIN_ROUND / 2);
        let clear = || {
            let rate = s.round.work / elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
            (rate, 1.0 + CLEAR * s.round.error().hypot(s.judged_error))
        };
        let early = match s.phase {
            Phase::SlowStart { base: None } | Phase::FromAbove { base: None } => {
                one_limit && s.round.error() <= BASE_ERROR
            }
            Phase::SlowStart {
                base: Some((_, was)),
            } if one_limit => {
                let (rate, margin) = clear();
                rate >= was * SLOW_START_GAIN * margin
            }
            // Judged at half of `was`'s limit: clearly needed, or clearly not.
            Phase::FromAbove {
                base: Some((_, was)),
            } if one_limit => {
                let (rate, margin) = clear();
                rate * SLOW_START_GAIN * margin <= was || rate * SLOW_START_GAIN >= was * margin
            }
            _ => false,
        };
        if !(s.round.is_complete(allowed, quick) || early) || elapsed < MIN_ROUND_TIME {
            return;
        }
        let error = s.round.error();
        let secs = elapsed.as_secs_f64();
        let rate = s.round.work / secs;
        let answer_rate = s.round.answers as f64 / secs;
        let in_flight = s.flight.average(now.into_std()).unwrap_or(0.0);
        let kept_full = in_flight >= FULL * allowed as f64;
        s.round = Round::new(0, now);
        s.flight.restart(now.into_std());
        if !kept_full {
            return;
        }
        s.judged = true;
        s.rate = rate;
        s.judged_error = if error.is_finite() { error } else { 0.0 };
        s.answer_rate = answer_rate;
        let judged = s.phase;
        let (next, phase) = judge(judged, s.limit, rate, self.max as f64);
        s.phase = phase;
        if next != s.limit {
            s.set_limit(next, self.max, now);
        }
        s.ceiling = s.limit;
        let now_at = s.allowed(self.max);
        if let Some(d) = decision(judged, phase, allowed, now_at, rate) {
            s.last = Some(d);
        }
    }

    /// Puts `allowed` permits in circulation: adds what is missing (first cancelling what is
    /// owed), forgets idle ones, and owes the rest.
    fn resize(&self, s: &mut State, allowed: usize) {
        if allowed > s.issued {
            let more = allowed - s.issued;
            let cancelled = more.min(s.debt);
            s.debt -= cancelled;
            self.permits.add_permits(more - cancelled);
        } else if allowed < s.issued {
            let fewer = s.issued - allowed;
            s.debt += fewer - self.permits.forget_permits(fewer);
        }
        s.issued = allowed;
    }
}

/// One request in flight. `finish` tells the controller how it went; dropped unfinished
/// (the caller gave up), it only frees its places.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    owner: &'a Congestion,
    kind: Kind,
    /// Its place under its kind's limit and under the cap.
    permit: Option<(SemaphorePermit<'a>, SemaphorePermit<'a>)>,
    sent: Instant,
    /// Body bytes the answer brought (`moved`).
    bytes: u64,
}

impl Permit<'_> {
    /// The answer brought `bytes` bytes of body: rounds are compared by bytes per second
    /// (with `ANSWER_BYTES` per answer), not answers alone.
    pub(crate) fn moved(&mut self, bytes: u64) {
        self.bytes = bytes;
    }

    /// Records the request's outcome and frees its places.
    pub(crate) fn finish<T>(mut self, result: &Result<T>) {
        let outcome = match result {
            Ok(_) => Outcome::Answered,
            Err(e) if e.is_throttle() => Outcome::Throttled,
            Err(e) if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Transport) => {
                Outcome::Failed
            }
            Err(_) => Outcome::Other,
        };
        self.end(outcome);
    }

    fn end(&mut self, outcome: Outcome) {
        if let Some((permit, cap)) = self.permit.take() {
            self.owner.limiters[self.kind as usize].record(
                permit,
                (self.sent, self.bytes),
                outcome,
            );
            drop(cap);
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.end(Outcome::Other);
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

    fn state(c: &Congestion, kind: Kind) -> std::sync::MutexGuard<'_, State> {
        c.limiters[kind as usize].state.lock().unwrap()
    }

    fn stats_of(c: &Congestion, kind: Kind) -> CongestionStats {
        c.limiters[kind as usize].stats()
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
        let c = Congestion::new(4, Concurrency::Fixed, quick());
        let permits: Vec<_> =
            futures::future::join_all((0..4).map(|_| c.acquire(Kind::Read))).await;
        let fifth = tokio::time::timeout(Duration::from_millis(20), c.acquire(Kind::Read)).await;
        assert!(fifth.is_err(), "a fifth waits");
        for p in permits {
            p.finish(&Ok(()));
        }
        assert_eq!(c.stats().limit, 4);
        c.acquire(Kind::Read).await.finish(&Ok(()));
    }

    #[tokio::test]
    async fn throttles_cut_once_per_window_and_answers_grow_it_back() {
        let c = Congestion::new(64, Concurrency::Fixed, quick());
        // A burst of refusals for requests sent together: one cut.
        let permits: Vec<_> =
            futures::future::join_all((0..10).map(|_| c.acquire(Kind::Read))).await;
        for p in permits {
            p.finish(&slow_down());
        }
        let s = c.stats();
        assert_eq!((s.limit, s.throttled, s.cuts), (44, 10, 1), "64 x 0.7");
        // Requests sent after a cut cut again, down to one request, never zero.
        for _ in 0..20 {
            c.acquire(Kind::Read).await.finish(&slow_down());
        }
        assert_eq!(c.stats().limit, 1);
        // Additive increase: one more request per limit's worth of answers.
        let mut answers = 0;
        while c.stats().limit < 4 {
            c.acquire(Kind::Read).await.finish(&Ok(()));
            answers += 1;
        }
        assert!(
            (4..=7).contains(&answers),
            "1 + 1/1 + 1/2 + 1/3 ... : {answers}"
        );
    }

    #[tokio::test]
    async fn at_one_request_a_throttle_holds_new_requests_until_its_backoff_ends() {
        let above = Congestion::new(8, Concurrency::Fixed, quick());
        above.acquire(Kind::Read).await.finish(&slow_down());
        assert!(state(&above, Kind::Read).gate.is_none(), "a cut is enough");
        let c = Congestion::new(
            1,
            Concurrency::Fixed,
            RetryPolicy {
                max_attempts: 3,
                base_delay: Duration::from_millis(200),
                max_delay: Duration::from_millis(200),
            },
        );
        // Full jitter can draw zero: throttle until the gate is set some way ahead.
        let gate = loop {
            c.acquire(Kind::Read).await.finish(&slow_down());
            let g = state(&c, Kind::Read).gate.unwrap();
            if g > Instant::now() + Duration::from_millis(50) {
                break g;
            }
        };
        c.acquire(Kind::Read).await.finish(&Ok(()));
        let s = state(&c, Kind::Read);
        assert!(s.gate.is_none(), "an answer opens the gate");
        assert!(Instant::now() >= gate, "the request waited for it");
    }

    #[tokio::test]
    async fn other_errors_and_abandoned_requests_change_nothing() {
        let c = Congestion::new(8, Concurrency::Fixed, quick());
        c.acquire(Kind::Read)
            .await
            .finish(&Err::<(), _>(Error::from_service(
                "u",
                404,
                "NoSuchKey",
                "no such key",
                None,
            )));
        drop(c.acquire(Kind::Read).await);
        let s = c.stats();
        assert_eq!((s.limit, s.throttled, s.cuts), (8, 0, 0));
        assert_eq!(state(&c, Kind::Read).flight.count(), 0);
    }

    /// A store without I/O, in paused time: `clients` tasks send requests back to back
    /// through `c` for `run` of virtual time; each request is `answer(now, n)` (the n-th
    /// request: how long it takes and how it ends). Returns the limit sampled every 10 ms.
    async fn simulate(
        c: &std::sync::Arc<Congestion>,
        clients: usize,
        run: Duration,
        answer: impl Fn(Instant, u64) -> (Duration, Result<()>) + Send + Sync + 'static,
    ) -> Vec<usize> {
        simulate_kind(c, clients, Kind::Read, run, answer).await
    }

    /// `simulate`, every request of `kind`.
    async fn simulate_kind(
        c: &std::sync::Arc<Congestion>,
        clients: usize,
        kind: Kind,
        run: Duration,
        answer: impl Fn(Instant, u64) -> (Duration, Result<()>) + Send + Sync + 'static,
    ) -> Vec<usize> {
        let answer = std::sync::Arc::new(answer);
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let end = Instant::now() + run;
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (c, answer, sent) = (c.clone(), answer.clone(), sent.clone());
            tasks.spawn(async move {
                while Instant::now() < end {
                    let p = c.acquire(kind).await;
                    let n = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (took, result) = answer(Instant::now(), n);
                    tokio::time::sleep(took).await;
                    p.finish(&result);
                }
            });
        }
        let mut samples = Vec::new();
        while Instant::now() < end {
            samples.push(c.stats().limit);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tasks.join_all().await;
        samples
    }

    /// A store that serves one request at a time: each waits for those before it, then for
    /// its own service time, however many are in flight. Clones share the one queue.
    #[derive(Clone)]
    struct OneAtATime(std::sync::Arc<Mutex<Instant>>);

    impl OneAtATime {
        fn new() -> Self {
            Self(std::sync::Arc::new(Mutex::new(Instant::now())))
        }

        /// How long a request that arrives at `now` and takes `service` waits for its answer.
        fn answer(&self, now: Instant, service: Duration) -> Duration {
            let mut free = self.0.lock().unwrap();
            *free = (*free).max(now) + service;
            *free - now
        }
    }

    fn adaptive(max: usize) -> std::sync::Arc<Congestion> {
        std::sync::Arc::new(Congestion::new(max, Concurrency::Adaptive, quick()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_latency_bound_store_is_given_more_requests_up_to_the_cap() {
        // 30 ms a request however many are in flight: the rate follows the limit.
        let c = adaptive(256);
        let limits = simulate(&c, 400, Duration::from_secs(10), |_, _| {
            (Duration::from_millis(30), Ok(()))
        })
        .await;
        assert_eq!(limits[0], ADAPTIVE_START);
        assert!(limits.iter().all(|l| *l <= 256), "never above the cap");
        let s = c.stats();
        assert_eq!(s.limit, 256, "{s:?}");
        assert!(s.rate > 0.9 * 256.0 / 0.030, "rate {}", s.rate);
        assert!(
            matches!(
                s.last,
                Some(Decision::Capped { at: 256 } | Decision::Probed { .. })
            ),
            "{s:?}"
        );
    }

    #[test]
    fn a_round_of_answers_that_vary_little_ends_after_one_limit_of_them() {
        let ms = std::time::Duration::from_millis;
        // 16 MiB ranges at one S3 connection's rate: ~200 ms each, ±10%.
        let mut large = Round::new(0, Instant::now());
        for i in 0..32u64 {
            large.count(ms(180 + (i * 7919) % 40), 16 << 20);
        }
        // Their spread is ~4.9% of the mean; the mean's error, ÷ √32, ~0.86%.
        assert!((large.error() - 0.0086).abs() < 0.0005, "{}", large.error());
        assert!(large.is_complete(32, true), "one limit's answers");
        assert!(
            !large.is_complete(32, false),
            "a probe takes the full round"
        );
        assert!(!large.is_complete(64, true), "fewer than the limit");
        // 150-250 ms (a spread of ~15%): ±2.6% after 32 answers, enough.
        let mut wider = Round::new(0, Instant::now());
        for i in 0..32u64 {
            wider.count(ms(150 + (i * 7919) % 101), 16 << 20);
        }
        assert!((wider.error() - 0.0263).abs() < 0.001, "{}", wider.error());
        assert!(wider.is_complete(32, true));
        // Small requests whose times spread as widely as S3's latency: 5 to 150 ms.
        let mut small = Round::new(0, Instant::now());
        for i in 0..64u64 {
            small.count(ms(5 + (i * 7919) % 146), 128 << 10);
        }
        assert!(!small.is_complete(32, true), "{}", small.error());
        for i in 64..128u64 {
            small.count(ms(5 + (i * 7919) % 146), 128 << 10);
        }
        assert!(
            small.is_complete(32, false),
            "4 x limit answers end any round"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn small_requests_spread_as_s3_latency_reach_the_cap_in_a_short_job() {
        // 5 to 150 ms a request however many are in flight (small objects under S3's
        // latency): the first round sets the base after one limit of answers, and each
        // doubling, which pays about 2x, is judged as soon as one limit of answers shows it.
        let c = adaptive(256);
        let limits = simulate(&c, 400, Duration::from_secs(2), |_, n| {
            (Duration::from_millis(5 + (n * 7919) % 146), Ok(()))
        })
        .await;
        // Rounds of `4 x limit` answers did not get there within the bound.
        let at = limits.iter().position(|l| *l == 256);
        assert!(
            at.is_some_and(|i| i <= 80),
            "limits every 10 ms: {limits:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn large_requests_reach_the_cap_within_a_few_round_trips() {
        // 200 ms a request (±10%) however many are in flight, as 16 MiB ranges of a
        // checkpoint: 16 -> 32 -> 64 takes two rounds of one round trip to settle and one to
        // count, where rounds of 4 x limit answers took ~2 s.
        let c = adaptive(64);
        let limits = simulate(&c, 64, Duration::from_millis(1500), |_, n| {
            (Duration::from_millis(190 + (n * 7919) % 20), Ok(()))
        })
        .await;
        assert_eq!(limits[0], ADAPTIVE_START);
        assert_eq!(*limits.last().unwrap(), 64, "{limits:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_in_which_the_client_asked_for_fewer_than_the_limit_judges_nothing() {
        // A checkpoint written with 16 parts in flight, then read with 64 requests: the
        // limit doubles to 32 during the write, and the round that spans the write's end and
        // the read's start (half full) must not undo it.
        let c = adaptive(64);
        let store = |_: Instant, n: u64| (Duration::from_millis(190 + (n * 7919) % 20), Ok(()));
        simulate(&c, 16, Duration::from_secs(1), store).await;
        assert_eq!(c.stats().limit, 32, "16 full, then doubled");
        simulate(&c, 64, Duration::from_secs(2), store).await;
        assert_eq!(c.stats().limit, 64, "{:?}", c.stats());
    }

    #[tokio::test(start_paused = true)]
    async fn reads_after_writes_search_their_own_limit() {
        // Writes saturate the store at 100/s (10 ms each, one at a time): their limit stays
        // at or near 16. Reads then take 200 ms however many are in flight: their limit must
        // not stay where the writes' did.
        let server = OneAtATime::new();
        let c = adaptive(256);
        simulate_kind(
            &c,
            64,
            Kind::Write,
            Duration::from_secs(20),
            move |now, _| (server.answer(now, Duration::from_millis(10)), Ok(())),
        )
        .await;
        let writes = stats_of(&c, Kind::Write);
        let after_writes = writes.limit;
        assert!(after_writes <= 2 * ADAPTIVE_START, "{writes:?}");
        // It says why: more did not pay (a saturated store answers more as fast).
        match writes.last {
            Some(d @ Decision::Held { at, tried, gain }) => {
                assert!(at < tried && gain < 125, "{d}");
                assert!(
                    d.to_string()
                        .starts_with(&format!("held at {at}: {tried} read")),
                    "{d}"
                );
            }
            other => panic!("{other:?}"),
        }
        let store = |_: Instant, n: u64| (Duration::from_millis(190 + (n * 7919) % 20), Ok(()));
        // Within a few round trips.
        simulate_kind(&c, 256, Kind::Read, Duration::from_millis(800), store).await;
        assert!(
            c.stats().limit >= 4 * after_writes,
            "{after_writes} -> {:?}",
            c.stats()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_checkpoints_read_starts_where_its_writes_held() {
        // A checkpoint written as 16 MiB parts of ~200 ms each however many are in flight:
        // the writes' limit reaches 64. Its read, of ranges as large, starts there: from 16 it
        // would spend the first round trips of a short read climbing back.
        let c = adaptive(64);
        let store = |_: Instant, n: u64| (Duration::from_millis(190 + (n * 7919) % 20), Ok(()));
        simulate_kind(&c, 64, Kind::Write, Duration::from_millis(1500), store).await;
        assert_eq!(stats_of(&c, Kind::Write).limit, 64);
        assert_eq!(
            stats_of(&c, Kind::Read).limit,
            ADAPTIVE_START,
            "no read sent yet"
        );
        let limits = simulate_kind(&c, 64, Kind::Read, Duration::from_millis(500), store).await;
        assert!(limits.iter().skip(1).all(|l| *l == 64), "{limits:?}");
        let reads = stats_of(&c, Kind::Read);
        assert!(
            matches!(
                reads.last,
                Some(Decision::FromKind { at: 64 } | Decision::Capped { at: 64 })
            ),
            "{reads:?}"
        );
        assert_eq!(
            Decision::FromKind { at: 64 }.to_string(),
            "started at 64: where the client's other transfers held"
        );
        // Metadata neither seeds nor is seeded.
        c.acquire(Kind::Meta).await.finish(&Ok(()));
        assert_eq!(stats_of(&c, Kind::Meta).limit, ADAPTIVE_START);
        // A job's guess is no limit the store answered: writes do not start from it.
        let c = adaptive(256);
        c.expect_requests(256);
        c.acquire(Kind::Write).await.finish(&Ok(()));
        assert_eq!(stats_of(&c, Kind::Write).limit, ADAPTIVE_START);
    }

    #[tokio::test]
    async fn a_client_that_only_writes_reports_its_writes() {
        let c = Congestion::new(8, Concurrency::Fixed, quick());
        c.acquire(Kind::Write).await.finish(&slow_down());
        let s = c.stats();
        assert_eq!((s.limit, s.throttled, s.cuts), (5, 1, 1), "8 x 0.7: {s:?}");
        c.acquire(Kind::Read).await.finish(&Ok(()));
        assert_eq!(c.stats().limit, 8, "reads, once there are any");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_after_a_burst_of_heads_search_from_the_start() {
        // HEADs take 30 ms however many are in flight: their limit goes to the cap. Reads then
        // find the store saturated (1,000/s, one at a time): a search from the HEADs' limit
        // would never come down from it; the reads' own starts at the start.
        let c = adaptive(256);
        simulate_kind(&c, 400, Kind::Meta, Duration::from_secs(5), |_, _| {
            (Duration::from_millis(30), Ok(()))
        })
        .await;
        let heads = stats_of(&c, Kind::Meta);
        assert_eq!(heads.limit, 256, "{heads:?}");
        let server = OneAtATime::new();
        simulate(&c, 400, Duration::from_secs(10), move |now, _| {
            (server.answer(now, Duration::from_millis(1)), Ok(()))
        })
        .await;
        let s = c.stats();
        assert!(s.limit <= 2 * ADAPTIVE_START, "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn each_kind_has_its_own_limit_under_the_one_cap() {
        // At once: 64 writers to a store saturated at 100/s (10 ms each, one at a time) and
        // 256 readers of 30 ms however many are in flight. The writes stay near the start
        // (more only queue), the reads go to the cap's neighbourhood, and together they never
        // exceed the cap.
        use std::sync::atomic::{AtomicUsize, Ordering};
        let server = OneAtATime::new();
        let c = adaptive(128);
        let end = Instant::now() + Duration::from_secs(20);
        let (writing, most_writing) = (
            std::sync::Arc::new(AtomicUsize::new(0)),
            std::sync::Arc::new(AtomicUsize::new(0)),
        );
        let mut writers = tokio::task::JoinSet::new();
        for _ in 0..64 {
            let (c, server) = (c.clone(), server.clone());
            let (writing, most_writing) = (writing.clone(), most_writing.clone());
            writers.spawn(async move {
                while Instant::now() < end {
                    let p = c.acquire(Kind::Write).await;
                    let now = writing.fetch_add(1, Ordering::Relaxed) + 1;
                    most_writing.fetch_max(now, Ordering::Relaxed);
                    let wait = server.answer(Instant::now(), Duration::from_millis(10));
                    tokio::time::sleep(wait).await;
                    writing.fetch_sub(1, Ordering::Relaxed);
                    p.finish(&Ok(()));
                }
            });
        }
        let reads = simulate_kind(&c, 256, Kind::Read, Duration::from_secs(20), |_, _| {
            (Duration::from_millis(30), Ok(()))
        });
        let watch = async {
            let mut most = 0;
            while Instant::now() < end {
                most = most.max(128 - c.cap.available_permits());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            most
        };
        let (_, most) = tokio::join!(reads, watch);
        writers.join_all().await;
        let late_writes = state(&c, Kind::Write).limit;
        let reads = state(&c, Kind::Read).limit;
        assert!(
            late_writes <= (2 * ADAPTIVE_START) as f64,
            "writes' limit {late_writes}"
        );
        assert!(
            most_writing.load(Ordering::Relaxed) <= 2 * ADAPTIVE_START,
            "{most_writing:?} writes in flight at once"
        );
        assert!(reads >= 96.0, "reads' limit {reads}");
        assert!(most <= 128, "{most} in flight");
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_changes_kind_in_bursts_still_judges_rounds() {
        // Reads and writes in bursts of 32 answers each, 30 ms each however many are in
        // flight: each kind's rounds are its own answers, and both limits climb.
        let c = adaptive(256);
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let end = Instant::now() + Duration::from_secs(10);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..512 {
            let (c, sent) = (c.clone(), sent.clone());
            tasks.spawn(async move {
                while Instant::now() < end {
                    let n = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let kind = [Kind::Read, Kind::Write][(n / 32 % 2) as usize];
                    let p = c.acquire(kind).await;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    p.finish(&Ok(()));
                }
            });
        }
        tasks.join_all().await;
        assert!(c.stats().limit >= 4 * ADAPTIVE_START, "{:?}", c.stats());
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_keeps_changing_kind_on_a_saturated_store_does_not_climb() {
        // Reads and writes in turns of 2 s, the store serving 1,000/s of either whatever the
        // limit: neither kind's search keeps a doubling, and a round that spans a turn of the
        // other kind (its own kind idle) judges nothing.
        let server = OneAtATime::new();
        let c = adaptive(256);
        for turn in 0..8 {
            let kind = [Kind::Read, Kind::Write][turn % 2];
            let server = server.clone();
            simulate_kind(&c, 400, kind, Duration::from_secs(2), move |now, _| {
                (server.answer(now, Duration::from_millis(1)), Ok(()))
            })
            .await;
        }
        let s = c.stats();
        assert!(s.limit <= 2 * ADAPTIVE_START, "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_saturated_store_is_not_given_more_than_pays() {
        // One request at a time, 1 ms each: 1,000/s whatever the limit; more in flight only
        // queue.
        let server = OneAtATime::new();
        let c = adaptive(256);
        simulate(&c, 400, Duration::from_secs(20), move |now, _| {
            (server.answer(now, Duration::from_millis(1)), Ok(()))
        })
        .await;
        let s = c.stats();
        assert!(s.limit <= 2 * ADAPTIVE_START, "{s:?}");
        assert!((900.0..1100.0).contains(&s.rate), "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn ranges_cut_smaller_as_the_limit_grows_do_not_draw_more_requests() {
        // A store that moves a gigabyte a second whatever is asked of it, asked for ranges of the size a
        // loader cuts at the limit of the moment (`RangeSize::Follow` within 256 MiB: 8 MiB
        // up to 31 requests, 4 MiB from 32): at twice the limit, twice the answers of half
        // the size, the same bytes per second. Judged by answers alone the limit went to 40
        // (and, with a floor of 2 MiB, to 64).
        let c = adaptive(256);
        let server = OneAtATime::new();
        let follow = crate::range::RangeSize::follow(Some(256 << 20));
        let end = Instant::now() + Duration::from_secs(20);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..400 {
            let (c, server) = (c.clone(), server.clone());
            tasks.spawn(async move {
                while Instant::now() < end {
                    let mut p = c.acquire(Kind::Read).await;
                    let bytes = follow.now(c.stats().limit).get();
                    let service = Duration::from_secs_f64(bytes as f64 / 1e9);
                    tokio::time::sleep(server.answer(Instant::now(), service)).await;
                    p.moved(bytes);
                    p.finish(&Ok(()));
                }
            });
        }
        tasks.join_all().await;
        let s = c.stats();
        assert!(s.limit < 2 * ADAPTIVE_START, "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_latency_jump_is_followed_up_and_the_cap_holds_both_ways() {
        // 1 ms, then 500 ms for 60 s, then 1 ms again; a store that serves 2,000/s at most,
        // so at 1 ms the limit that pays is small and at 500 ms ~1,000 would.
        let t0 = Instant::now();
        let server = OneAtATime::new();
        let c = adaptive(128);
        let latency = move |now: Instant| {
            let t = now - t0;
            if t >= Duration::from_secs(10) && t < Duration::from_secs(70) {
                Duration::from_millis(500)
            } else {
                Duration::from_millis(1)
            }
        };
        let limits = simulate(&c, 300, Duration::from_secs(80), move |now, _| {
            (
                server.answer(now, Duration::from_micros(500)) + latency(now),
                Ok(()),
            )
        })
        .await;
        assert!(
            limits.iter().all(|l| (1..=128).contains(l)),
            "within bounds"
        );
        let before = limits[900];
        let during = limits[6900];
        assert!(before <= 32, "at 1 ms: {before}");
        assert_eq!(during, 128, "at 500 ms the cap: {limits:?}");
        let after = *limits.last().unwrap();
        assert!(after <= 32, "back at 1 ms, fewer again: {after}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_refusing_half_its_requests_is_sent_fewer_but_never_none() {
        let c = adaptive(256);
        let limits = simulate(&c, 300, Duration::from_secs(20), |_, n| {
            let result = if n % 2 == 0 { Ok(()) } else { slow_down() };
            (Duration::from_millis(20), result)
        })
        .await;
        assert!(limits.iter().all(|l| (1..=256).contains(l)));
        let s = c.stats();
        assert!(s.throttled > 1000, "{s:?}");
        assert!(
            s.limit <= ADAPTIVE_START,
            "cut below where it started: {s:?}"
        );
        assert_eq!(state(&c, Kind::Read).flight.count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_with_its_requests_ready_starts_with_them_under_latency() {
        // 400 small objects under S3's latency (5 to 150 ms): the job names its 256 requests,
        // the first round is all of them, and half as many then read about half as fast.
        let c = adaptive(256);
        c.expect_requests(400);
        assert_eq!(c.stats().last, Some(Decision::FromJob { at: 256 }));
        let limits = simulate(&c, 400, Duration::from_secs(3), |_, n| {
            (Duration::from_millis(5 + (n * 7919) % 146), Ok(()))
        })
        .await;
        assert_eq!(limits[0], 256);
        let s = c.stats();
        assert_eq!(s.limit, 256, "{s:?} {limits:?}");
        assert!(
            matches!(s.last, Some(Decision::Held { at: 256, tried: 128, gain }) if gain < 80),
            "{s:?}"
        );
        // A search under way, or a job too small to matter, changes nothing.
        c.expect_requests(1000);
        let fresh = adaptive(256);
        fresh.expect_requests(2 * ADAPTIVE_START - 1);
        assert_eq!(fresh.stats().limit, ADAPTIVE_START);
        let fixed = Congestion::new(8, Concurrency::Fixed, quick());
        fixed.expect_requests(1000);
        assert_eq!(fixed.stats().limit, 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_from_the_job_comes_down_on_a_store_as_fast_with_fewer() {
        // One request at a time, 1 ms each: the rate is the same at any limit, so the search
        // halves from the job's 256 to where it starts without one.
        let c = adaptive(256);
        c.expect_requests(256);
        let server = OneAtATime::new();
        simulate(&c, 256, Duration::from_secs(20), move |now, _| {
            (server.answer(now, Duration::from_millis(1)), Ok(()))
        })
        .await;
        let s = c.stats();
        assert!(s.limit <= ADAPTIVE_START + ADAPTIVE_START / 4, "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_start_from_the_job_that_the_store_throttles_overshoots_one_round() {
        // A store that refuses every request beyond 20 in flight, 30 ms each: the job's 256
        // are one round's overshoot, then the limit falls to the start and the search goes
        // on as it does without the job's number.
        async fn storm(job: Option<usize>) -> (CongestionStats, Vec<usize>) {
            let c = adaptive(256);
            if let Some(n) = job {
                c.expect_requests(n);
            }
            let in_flight = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let limits = simulate(&c, 256, Duration::from_secs(5), move |_, _| {
                use std::sync::atomic::Ordering::Relaxed;
                let answer = if in_flight.fetch_add(1, Relaxed) >= 20 {
                    slow_down()
                } else {
                    Ok(())
                };
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    in_flight.fetch_sub(1, Relaxed);
                });
                (Duration::from_millis(30), answer)
            })
            .await;
            (c.stats(), limits)
        }
        let (alone, _) = storm(None).await;
        let (from_job, limits) = storm(Some(256)).await;
        assert_eq!(limits[0], 256);
        assert!(
            from_job.throttled <= alone.throttled + 256,
            "{alone:?} {from_job:?}"
        );
        // The first round lasts its first answers' 30 ms; after it, no more than a search
        // from the start reaches.
        let after = limits.iter().skip_while(|l| **l == 256);
        assert!(after.clone().count() >= limits.len() - 4, "{limits:?}");
        assert!(
            after.clone().all(|l| *l <= 2 * ADAPTIVE_START),
            "{limits:?}"
        );
    }
}
