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
//! - **a change of work starts the search again**: a round of one kind judged after the
//!   phase's rates were measured on another (reads of bytes, of metadata, writes; [`Kind`],
//!   ≥ 90% of a round's answers) is taken as the base of a new slow start from the limit,
//!   and judged quickly like one: a store saturated by a checkpoint's writes at 16
//!   requests may serve its reads best at 128. After metadata, whose requests wait on
//!   latency alone, the new search starts from [`ADAPTIVE_START`] instead.
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
//! - **gate**: once the limit is down to one request, a throttle also holds every new
//!   request of the client for a full-jitter backoff that doubles with each throttle in a row
//!   (the retry policy's base and cap) and resets on the first answer: below one request in
//!   flight, the gate is what slows a client further.
//!
//! The limit never exceeds `max_connections` (default 256; the memory budget bounds what
//! the loader asks for). [`Concurrency::Fixed`] (what `SLUICE_MAX_CONNECTIONS` sets) starts
//! at `max_connections` and never probes: a user's number wins, cut only while the store
//! throttles. Not-found, refusals and other answers change nothing: they say nothing about
//! load.
//!
//! The limit is a semaphore's permits, so a freed place wakes one waiter, not all of them:
//! a cut forgets idle permits and owes the rest, paid as requests in flight return theirs.

use crate::error::{ErrorKind, Result};
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
/// round to judge the limit: below it the application, not the store, set the rate. A
/// round that mixed a checkpoint's write at 16 parts under a limit of 32 with its read at
/// 32 (75% full) judged 32 no faster than 16, and held the read at 16.
const FULL: f64 = 0.9;
/// Share of a round's answers of one [`Kind`] for the round to be of that kind.
const ONE_KIND: f64 = 0.9;
/// Answers of the other kind in a row, in a round of one kind, that end the round then and
/// there: the work changed kind (a checkpoint's read after its write). The round in progress
/// would otherwise mix the two and, being of neither kind, take `4 × limit` answers before
/// the search could start again: a checkpoint's read held at the write's limit for half its
/// length (docs/benchmarks.md, "Why the defaults"). A stray request of the other kind (a HEAD
/// among writes) is one in a row, and an even mix makes no round of one kind. A round begun
/// at a change is not ended by the next: work that changes kind in bursts still has rounds
/// that end.
const SWITCH: u64 = 8;
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
/// controller (`congestion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// GET of an object's bytes.
    Read,
    /// HEAD, LIST: reads whose answers are metadata.
    Meta,
    /// PUT, COPY, DELETE, and a multipart upload's create, parts, complete and abort.
    Write,
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
    /// Counted answers of each kind (`Kind as usize`).
    kinds: [u64; 3],
    /// Sum and sum of squares of the counted answers' times, in seconds.
    took: f64,
    took_sq: f64,
    /// Requests in flight integrated over the round's time (request-seconds).
    area: f64,
    /// Begun at a change of kind (`SWITCH`): the next change does not end it.
    switched: bool,
}

impl Round {
    fn new(limit: usize, now: Instant) -> Self {
        Self {
            settle: limit as u64,
            started: now,
            answers: 0,
            work: 0.0,
            kinds: [0; 3],
            took: 0.0,
            took_sq: 0.0,
            area: 0.0,
            switched: false,
        }
    }

    /// Counts an answer to a request of `kind` that took `took` and brought `bytes`.
    fn count(&mut self, took: std::time::Duration, kind: Kind, bytes: u64) {
        let t = took.as_secs_f64();
        self.answers += 1;
        self.work += bytes as f64 + ANSWER_BYTES;
        self.kinds[kind as usize] += 1;
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

    /// The kind of nine in ten of the answers counted, if one is.
    fn kind(&self) -> Option<Kind> {
        let share = |n: u64| n as f64 >= ONE_KIND * self.answers as f64;
        match () {
            _ if self.answers == 0 => None,
            _ if share(self.kinds[Kind::Write as usize]) => Some(Kind::Write),
            _ if share(self.kinds[Kind::Meta as usize]) => Some(Kind::Meta),
            _ if share(self.kinds[Kind::Read as usize]) => Some(Kind::Read),
            _ => None,
        }
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
    in_flight: usize,
    /// When `in_flight` last changed.
    changed: Instant,
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
    /// The kind of requests the phase's rates were measured on, when one kind.
    judged_on: Option<Kind>,
    /// The last answers of one kind in a row.
    run: Run,
}

/// Answers of one kind in a row (`SWITCH`).
#[derive(Debug, Clone, Copy)]
struct Run {
    kind: Kind,
    len: u64,
    /// The kind of the round the run began in, if it was of one kind and had not itself
    /// begun at a change; `None` too once that round is over.
    against: Option<Kind>,
}

impl State {
    fn allowed(&self, max: usize) -> usize {
        (self.limit as usize).clamp(1, max)
    }

    /// Requests in flight change by `by` at `now`: the time since the last change counts at
    /// the old number.
    fn step(&mut self, now: Instant, by: isize) {
        let since = now.saturating_duration_since(self.changed).as_secs_f64();
        self.round.area += self.in_flight as f64 * since;
        self.in_flight = self.in_flight.saturating_add_signed(by);
        self.changed = now;
    }

    fn set_limit(&mut self, limit: f64, max: usize, now: Instant) {
        self.limit = limit.clamp(1.0, max as f64);
        self.round = Round::new(self.allowed(max), now);
        self.run.against = None;
    }
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
    /// The store's latency or the kind of work changed: the search started again.
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
            Decision::Halved { to, tried, gain } => write!(
                f,
                "halved to {to}: {tried} read only {} of what half as many did",
                x(gain)
            ),
            Decision::Capped { at } => write!(f, "at the cap, {at}"),
            Decision::Restarted { at } => {
                write!(
                    f,
                    "search restarted at {at}: the latency or the kind of work changed"
                )
            }
            Decision::Cut { to } => write!(f, "cut to {to}: the store throttled or failed"),
        }
    }
}

/// The controller of one client (module docs).
#[derive(Debug)]
pub(crate) struct Congestion {
    max: usize,
    mode: Concurrency,
    policy: RetryPolicy,
    permits: Semaphore,
    state: Mutex<State>,
}

impl Congestion {
    /// At most `max` requests in flight (at least one), found at run time or fixed (`mode`);
    /// the gate's backoff follows `policy`.
    pub(crate) fn new(max: usize, mode: Concurrency, policy: RetryPolicy) -> Self {
        let max = max.max(1);
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
                in_flight: 0,
                changed: Instant::now(),
                last_cut: None,
                throttles_in_a_row: 0,
                gate: None,
                throttled: 0,
                cuts: 0,
                phase,
                round: Round::new(start, Instant::now()),
                rate: 0.0,
                answer_rate: 0.0,
                judged_error: 0.0,
                last: None,
                judged_on: None,
                run: Run {
                    kind: Kind::Read,
                    len: 0,
                    against: None,
                },
            }),
        }
    }

    /// Waits until a request of `kind` may be sent: the gate is open and fewer than the limit
    /// are in flight.
    pub(crate) async fn acquire(&self, kind: Kind) -> Permit<'_> {
        loop {
            let gate = self.state.lock().unwrap().gate;
            if let Some(until) = gate.filter(|g| *g > Instant::now()) {
                tokio::time::sleep_until(until).await;
                continue;
            }
            let permit = self.permits.acquire().await.expect("never closed");
            let mut s = self.state.lock().unwrap();
            let now = Instant::now();
            if s.gate.is_some_and(|g| g > now) {
                // Closed while this request waited: it waits for the gate too.
                continue;
            }
            s.step(now, 1);
            return Permit {
                owner: self,
                kind,
                permit: Some(permit),
                sent: Instant::now(),
                bytes: 0,
            };
        }
    }

    /// The job has `requests` ready to send at once (its objects' requests, as many as its
    /// memory holds). A fresh adaptive search starts there, up to `max_connections`, instead
    /// of at [`ADAPTIVE_START`], and halves while half as many read about as fast
    /// ([`Phase::FromAbove`]): a short job under latency is done in the round trips its
    /// requests need rather than in the doublings up to them, and a store that is as fast
    /// with fewer (loopback) is searched down to them. Fewer than twice the start, or a
    /// search already under way, change nothing.
    pub(crate) fn expect_requests(&self, requests: usize) {
        let mut s = self.state.lock().unwrap();
        let fresh =
            s.phase == Phase::SlowStart { base: None } && s.last.is_none() && s.judged_on.is_none();
        let start = requests.min(self.max);
        if self.mode != Concurrency::Adaptive
            || !fresh
            || start < 2 * ADAPTIVE_START
            || start <= s.allowed(self.max)
        {
            return;
        }
        let now = Instant::now();
        s.phase = Phase::FromAbove { base: None };
        s.set_limit(start as f64, self.max, now);
        s.ceiling = s.limit;
        s.last = Some(Decision::FromJob { at: start });
        self.resize(&mut s, start);
    }

    /// The limit now and what set it.
    pub(crate) fn stats(&self) -> CongestionStats {
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

    /// Records the outcome of a request of `kind` sent at `sent` whose answer brought `bytes`.
    fn record(
        &self,
        permit: SemaphorePermit<'_>,
        (sent, kind, bytes): (Instant, Kind, u64),
        outcome: Outcome,
    ) {
        let mut s = self.state.lock().unwrap();
        let now = Instant::now();
        s.step(now, -1);
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
                    self.count_answer(&mut s, now, took, kind, bytes);
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

    /// Counts one answer to the round; at the round's end, judges the limit (module docs).
    fn count_answer(
        &self,
        s: &mut State,
        now: Instant,
        took: std::time::Duration,
        kind: Kind,
        bytes: u64,
    ) {
        if s.round.settle > 0 {
            s.round.settle -= 1;
            if s.round.settle == 0 {
                s.round.started = now;
                s.round.area = 0.0;
            }
            return;
        }
        if s.run.kind == kind {
            s.run.len += 1;
        } else {
            let against = s.round.kind().filter(|_| !s.round.switched);
            s.run = Run {
                kind,
                len: 1,
                against,
            };
        }
        if s.run.len == SWITCH && s.run.against.is_some_and(|k| k != kind) {
            // The work changed kind: a round of the new kind from here.
            s.round = Round::new(0, now);
            s.round.switched = true;
            s.run.against = None;
        }
        s.round.count(took, kind, bytes);
        let elapsed = now.duration_since(s.round.started);
        let round_kind = s.round.kind();
        let other_work = matches!((round_kind, s.judged_on), (Some(a), Some(b)) if a != b);
        let after_meta = other_work && s.judged_on == Some(Kind::Meta);
        let quick =
            other_work || matches!(s.phase, Phase::SlowStart { .. } | Phase::FromAbove { .. });
        // A search's rounds may end after one limit of answers: the first where its rate is
        // known well enough to be the base, a later one where the verdict on its doubling
        // (or halving) is clear (`BASE_ERROR`, `CLEAR`).
        let allowed = s.allowed(self.max);
        let one_limit = !other_work && s.round.answers >= (allowed as u64).max(MIN_ROUND / 2);
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
        let kept_full = s.round.area / secs >= FULL * s.allowed(self.max) as f64;
        s.round = Round::new(0, now);
        // A run that began in the round just judged is not against this one.
        s.run.against = None;
        if !kept_full {
            return;
        }
        s.rate = rate;
        s.judged_error = if error.is_finite() { error } else { 0.0 };
        s.answer_rate = answer_rate;
        let max = self.max as f64;
        s.judged_on = round_kind.or(s.judged_on);
        let phase = if other_work {
            // The phase's rates were another kind of request's: a new search from here,
            // this round its base.
            Phase::SlowStart { base: None }
        } else {
            s.phase
        };
        let judged = phase;
        let (next, phase) = match phase {
            // HEADs and LISTs wait on latency alone, so a burst of them (`sluice get` sizing
            // its objects) can draw the limit to the cap, and a slow start from there never
            // goes below it: bytes search from the start, as a fresh client's do.
            _ if after_meta => (
                (ADAPTIVE_START as f64).min(s.limit),
                Phase::SlowStart { base: None },
            ),
            Phase::SlowStart {
                base: Some((from, was)),
            } if rate < was * SLOW_START_GAIN => (
                from,
                Phase::Hold {
                    rounds: 0,
                    rate: was,
                },
            ),
            Phase::FromAbove {
                base: Some((from, was)),
            } if was >= rate * SLOW_START_GAIN => {
                // Twice as many paid: the limit above was needed, and more may be.
                if from >= max {
                    (
                        from,
                        Phase::Hold {
                            rounds: 0,
                            rate: was,
                        },
                    )
                } else {
                    let base = Some((from, was));
                    ((from * 2.0).min(max), Phase::SlowStart { base })
                }
            }
            Phase::FromAbove { .. } if s.limit / 2.0 >= ADAPTIVE_START as f64 => {
                let base = Some((s.limit, rate));
                (s.limit / 2.0, Phase::FromAbove { base })
            }
            Phase::FromAbove { .. } => (s.limit, Phase::Hold { rounds: 0, rate }),
            Phase::SlowStart { .. } if s.limit >= max => (s.limit, Phase::Hold { rounds: 0, rate }),
            Phase::SlowStart { .. } => {
                let base = Some((s.limit, rate));
                (s.limit * 2.0, Phase::SlowStart { base })
            }
            Phase::Probe { from: _, rate: was } if rate >= was * PROBE_GAIN => {
                (s.limit, Phase::Hold { rounds: 0, rate })
            }
            Phase::Probe { from, rate: was } => (
                from,
                Phase::Hold {
                    rounds: 0,
                    rate: was,
                },
            ),
            Phase::Hold { rate: held, .. } if rate < held * CHANGED => {
                // This round straddled the change: no base to judge the next one by.
                ((s.limit * 2.0).min(max), Phase::SlowStart { base: None })
            }
            Phase::Hold { rate: held, .. } if rate > held / CHANGED => {
                // Faster at the same limit: latency fell, so fewer may do; search again.
                (ADAPTIVE_START as f64, Phase::SlowStart { base: None })
            }
            Phase::Hold { rounds, .. } if rounds + 1 >= PROBE_EVERY && s.limit < max => {
                let more = (s.limit * 1.25).max(s.limit + 1.0);
                (
                    more,
                    Phase::Probe {
                        from: s.limit,
                        rate,
                    },
                )
            }
            Phase::Hold { rounds, .. } => (
                s.limit,
                Phase::Hold {
                    rounds: rounds + 1,
                    rate,
                },
            ),
        };
        let was = s.allowed(self.max);
        s.phase = phase;
        if next != s.limit {
            s.set_limit(next, self.max, now);
        }
        s.ceiling = s.limit;
        let now_at = s.allowed(self.max);
        let gain = |before: f64| (100.0 * rate / before.max(f64::MIN_POSITIVE)).round() as u32;
        let decision = match (judged, phase) {
            _ if after_meta => Some(Decision::Restarted { at: now_at }),
            (Phase::SlowStart { base }, Phase::SlowStart { .. }) if now_at > was => {
                Some(Decision::Doubled {
                    to: now_at,
                    gain: base.map(|(_, before)| gain(before)),
                })
            }
            (
                Phase::SlowStart {
                    base: Some((_, before)),
                },
                Phase::Hold { .. },
            ) if now_at < was => Some(Decision::Held {
                at: now_at,
                tried: was,
                gain: gain(before),
            }),
            (Phase::SlowStart { .. }, Phase::Hold { .. }) => Some(Decision::Capped { at: now_at }),
            (
                Phase::FromAbove {
                    base: Some((from, above)),
                },
                _,
            ) if now_at <= was => Some(Decision::Halved {
                to: now_at,
                tried: from as usize,
                gain: (100.0 * above / rate.max(f64::MIN_POSITIVE)).round() as u32,
            }),
            (
                Phase::FromAbove {
                    base: Some((_, above)),
                },
                Phase::SlowStart { .. },
            ) => Some(Decision::Doubled {
                to: now_at,
                gain: Some((100.0 * above / rate.max(f64::MIN_POSITIVE)).round() as u32),
            }),
            (
                Phase::FromAbove {
                    base: Some((_, above)),
                },
                Phase::Hold { .. },
            ) => Some(Decision::Held {
                at: now_at,
                tried: was,
                gain: gain(above),
            }),
            (Phase::Probe { rate: before, .. }, Phase::Hold { .. }) if now_at < was => {
                Some(Decision::Held {
                    at: now_at,
                    tried: was,
                    gain: gain(before),
                })
            }
            (Phase::Probe { rate: before, .. }, Phase::Hold { .. }) => Some(Decision::Probed {
                at: now_at,
                gain: gain(before),
            }),
            (Phase::Hold { .. }, Phase::SlowStart { .. }) => {
                Some(Decision::Restarted { at: now_at })
            }
            _ => None,
        };
        if decision.is_some() {
            s.last = decision;
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
/// (the caller gave up), it only frees its place.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    owner: &'a Congestion,
    kind: Kind,
    permit: Option<SemaphorePermit<'a>>,
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

    /// Records the request's outcome and frees its place.
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
        if let Some(p) = self.permit.take() {
            self.owner
                .record(p, (self.sent, self.kind, self.bytes), outcome);
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
        assert!(
            above.state.lock().unwrap().gate.is_none(),
            "a cut is enough"
        );
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
            let g = c.state.lock().unwrap().gate.unwrap();
            if g > Instant::now() + Duration::from_millis(50) {
                break g;
            }
        };
        c.acquire(Kind::Read).await.finish(&Ok(()));
        let s = c.state.lock().unwrap();
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
        assert_eq!(c.state.lock().unwrap().in_flight, 0);
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
        // 16 MiB ranges at ~90 MB/s: ~200 ms each, ±10%.
        let mut large = Round::new(0, Instant::now());
        for i in 0..32u64 {
            large.count(ms(180 + (i * 7919) % 40), Kind::Read, 16 << 20);
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
            wider.count(ms(150 + (i * 7919) % 101), Kind::Read, 16 << 20);
        }
        assert!((wider.error() - 0.0263).abs() < 0.001, "{}", wider.error());
        assert!(wider.is_complete(32, true));
        // Small requests whose times spread as widely as S3's latency: 5 to 150 ms.
        let mut small = Round::new(0, Instant::now());
        for i in 0..64u64 {
            small.count(ms(5 + (i * 7919) % 146), Kind::Read, 128 << 10);
        }
        assert!(!small.is_complete(32, true), "{}", small.error());
        for i in 64..128u64 {
            small.count(ms(5 + (i * 7919) % 146), Kind::Read, 128 << 10);
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
    async fn reads_after_writes_search_again_from_the_writes_limit() {
        // Writes saturate the store at 100/s (10 ms each, one at a time): the limit stays at
        // or near 16. Reads then take 200 ms however many are in flight: the limit must not
        // stay where the writes left it.
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
        let after_writes = c.stats().limit;
        assert!(after_writes <= 2 * ADAPTIVE_START, "{:?}", c.stats());
        // It says why: more did not pay (a saturated store answers more as fast).
        match c.stats().last {
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
    async fn reads_after_a_burst_of_heads_search_again_from_the_start() {
        // HEADs take 30 ms however many are in flight: the limit goes to the cap. Reads then
        // find the store saturated (1,000/s, one at a time): a search from the HEADs' limit
        // would never come down from it.
        let c = adaptive(256);
        simulate_kind(&c, 400, Kind::Meta, Duration::from_secs(5), |_, _| {
            (Duration::from_millis(30), Ok(()))
        })
        .await;
        assert_eq!(c.stats().limit, 256, "{:?}", c.stats());
        let server = OneAtATime::new();
        simulate(&c, 400, Duration::from_secs(10), move |now, _| {
            (server.answer(now, Duration::from_millis(1)), Ok(()))
        })
        .await;
        let s = c.stats();
        assert!(s.limit <= 2 * ADAPTIVE_START, "{s:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_of_kind_ends_the_round_in_progress() {
        // Writes held at a saturated store (100/s), stopped a third of the way into a round.
        let server = OneAtATime::new();
        let c = adaptive(256);
        let writes = |c, run| {
            let server = server.clone();
            simulate_kind(c, 64, Kind::Write, run, move |now, _| {
                (server.answer(now, Duration::from_millis(10)), Ok(()))
            })
        };
        writes(&c, Duration::from_secs(20)).await;
        let in_round = || c.state.lock().unwrap().round.answers;
        for _ in 0..100 {
            if (16..32).contains(&in_round()) {
                break;
            }
            writes(&c, Duration::from_millis(20)).await;
        }
        assert!((16..32).contains(&in_round()), "{}", in_round());
        let after_writes = c.stats().limit;
        // Reads of 200 ms however many are in flight. A round mixing the writes with the
        // first reads is of neither kind, so it takes `4 × limit` answers (three batches of
        // reads) and judges the limit as held; ended at the change, the next round is of
        // reads, judged after one limit's answers.
        let store = |_: Instant, n: u64| (Duration::from_millis(190 + (n * 7919) % 20), Ok(()));
        let limits = simulate_kind(&c, 256, Kind::Read, Duration::from_secs(2), store).await;
        let doubled = limits.iter().position(|l| *l >= 2 * after_writes);
        // In 10 ms samples: two batches of reads.
        assert!(
            doubled.is_some_and(|at| at <= 45),
            "{after_writes}: {doubled:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_changes_kind_in_bursts_still_judges_rounds() {
        // Reads and writes in bursts of 32 answers each, 30 ms each however many are in
        // flight: every change ends a round of one kind, but the round it begins is not ended
        // by the next, so rounds still end and the limit climbs.
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
        // limit: each change searches again, and each search undoes its doubling.
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
        // A store that moves 1 GB/s whatever is asked of it, asked for ranges of the size a
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
        assert_eq!(c.state.lock().unwrap().in_flight, 0);
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
