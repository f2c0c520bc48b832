//! How many parts one streaming upload ([`ObjectWriter`](crate::ObjectWriter)) sends at once,
//! found while it uploads.
//!
//! Each part in flight is a buffer of `part_size` held until its answer, so the number is a
//! trade of memory for speed, and the speed it buys depends on the store: against S3 (tens of
//! milliseconds before an answer, ~90 MB/s per connection) a part in flight carries
//! ~70 MB/s and the rate grows with every part added; against a store that is already busy
//! (a loopback server, an nginx sink) more parts only queue there, each answered later, for
//! the same rate and more of the store's CPU (docs/benchmarks.md, "Writes and checkpoints").
//!
//! The rule is the client controller's slow start (`congestion`), judged per upload and by
//! Little's law, since an upload sends too few requests for the controller's rounds to
//! judge in time: a 2 GiB checkpoint is 128 parts.
//!
//! - Start at [`PART_CONCURRENCY`](crate::PART_CONCURRENCY) parts, or where the client's
//!   last searched upload held, if more ([`Settled`]).
//! - A round is the answers to `limit` parts sent at the current limit (answers to parts
//!   sent before it say nothing about it; at least [`MIN_ROUND`]), during which the producer
//!   had to wait for a free place at least once: a producer slower than the upload is the
//!   bound, and more parts would change nothing.
//! - The round's rate is Little's law, `λ = L / W`: the parts actually in flight, averaged
//!   over the round's time (not the limit: a producer that cannot keep the window full
//!   leaves it part empty), over the mean time a part took, times the bytes per part.
//! - Double while a doubling raised that rate by at least [`GAIN`]; when one did not, go
//!   back to the limit before and hold it to the end of the upload.
//!
//! The limit never exceeds `max` (the memory the caller allows, `upload::PARTS_MEMORY` by
//! default), and each part still waits for the client's controller like every request.
//! A number set by the user (`SLUICE_PARTS_IN_FLIGHT`, `max_in_flight=`) is held as set.

use crate::upload::PART_CONCURRENCY;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Rate a doubling must bring to be kept. Lower than the controller's 1.25: under
/// `s3-standard` 8 → 16 parts of 16 MiB brought 1.28× and 16 → 32 1.15×, so at 1.25 the
/// search stopped at 8 or 16 by the luck of a round (2 GiB checkpoint writes of 341 to
/// 692 MB/s at defaults, `scripts/measure-checkpoint`); a store already busy answers a
/// doubling with ~1.0×.
const GAIN: f64 = 1.15;
/// Fewest answers a round counts. A round is `limit` answers, so the close calls (16 → 32
/// parts, 1.0-1.15× under `s3-standard`) are judged on 16 parts' times, while the first
/// doublings, which pay ~2×, are taken after one round trip each.
const MIN_ROUND: usize = 4;

/// The most parts in flight a searched upload of a client (an [`S3Store`](crate::S3Store)
/// and its clones) held, where its next upload starts: what one upload learned of the store
/// holds for the next, as TCP hands what one connection learned of a path to the next
/// (RFC 2140). A process that saves a checkpoint every few minutes, or a rank writing its
/// shards one after another, searches once; each search costs a 2 GiB checkpoint's first
/// dozen parts at 4 and 8 in flight under `s3-standard`, ~13% of its write. The search still
/// goes on from there, so a store that got faster gets more parts; one that got slower
/// keeps this many, within the memory each upload allows (uploads running at once each
/// start here, each within its own).
#[derive(Debug, Default, Clone)]
pub(crate) struct Settled(Arc<AtomicUsize>);

impl Settled {
    /// Where the next search starts.
    fn start(&self) -> usize {
        self.0.load(Ordering::Relaxed).max(PART_CONCURRENCY)
    }
}

/// The search of one upload (module docs).
#[derive(Debug, Clone)]
pub(crate) struct PartsInFlight {
    limit: usize,
    max: usize,
    phase: Phase,
    /// Told the limit the search holds at.
    settled: Option<Settled>,
    /// Which limit a part was sent under: a round counts only parts of its own limit.
    epoch: u32,
    round: Round,
    /// Parts in flight now, and since when.
    in_flight: usize,
    changed: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling; `base`: the limit before and the rate it reached.
    Search { base: Option<(usize, f64)> },
    /// Done searching (or never searching: a fixed limit).
    Hold,
}

#[derive(Debug, Clone, Copy)]
struct Round {
    started: Instant,
    /// Parts in flight integrated over the round's time (part-seconds).
    area: f64,
    answers: usize,
    bytes: u64,
    took: Duration,
    producer_waited: bool,
}

impl Round {
    fn new(now: Instant) -> Self {
        Self {
            started: now,
            area: 0.0,
            answers: 0,
            bytes: 0,
            took: Duration::ZERO,
            producer_waited: false,
        }
    }
}

impl PartsInFlight {
    /// `n` parts in flight, never changed.
    pub(crate) fn fixed(n: usize) -> Self {
        Self::new(n.max(1), n.max(1), Phase::Hold, None)
    }

    /// From where `settled` says up to `max` parts, searched as the module docs say; the
    /// limit it holds at is told to `settled`.
    pub(crate) fn adaptive(settled: &Settled, max: usize) -> Self {
        let max = max.max(1);
        let start = settled.start().clamp(1, max);
        let phase = Phase::Search { base: None };
        Self::new(start, max, phase, Some(settled.clone()))
    }

    fn new(limit: usize, max: usize, phase: Phase, settled: Option<Settled>) -> Self {
        let now = Instant::now();
        Self {
            limit,
            max,
            phase,
            settled,
            epoch: 0,
            round: Round::new(now),
            in_flight: 0,
            changed: now,
        }
    }

    /// Parts in flight change at `now`: the time since the last change is counted at the old
    /// number.
    fn step(&mut self, now: Instant, by: isize) {
        let since = now.saturating_duration_since(self.changed).as_secs_f64();
        self.round.area += self.in_flight as f64 * since;
        self.in_flight = self.in_flight.saturating_add_signed(by);
        self.changed = now;
    }

    /// Ends the search at `limit`, and tells the client's next upload to start there, if
    /// higher: an upload whose memory allows fewer parts (larger parts, `cp -j N`'s share)
    /// held where its cap, not the store, stopped it.
    fn hold(&mut self, limit: usize) {
        self.limit = limit;
        self.phase = Phase::Hold;
        if let Some(s) = &self.settled {
            s.0.fetch_max(limit, Ordering::Relaxed);
        }
    }

    /// Parts allowed in flight now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A part is sent at `now`; its stamp, to give back with its answer.
    pub(crate) fn sent(&mut self, now: Instant) -> u32 {
        self.step(now, 1);
        self.epoch
    }

    /// The producer found every place taken and waits for an answer.
    pub(crate) fn producer_waited(&mut self) {
        self.round.producer_waited = true;
    }

    /// A part of `bytes` sent under `epoch` was answered at `now`, `took` after it was sent.
    pub(crate) fn answered(&mut self, epoch: u32, bytes: u64, took: Duration, now: Instant) {
        self.step(now, -1);
        if self.phase == Phase::Hold || epoch != self.epoch {
            return;
        }
        let r = &mut self.round;
        r.answers += 1;
        r.bytes += bytes;
        r.took += took;
        if r.answers < self.limit.max(MIN_ROUND) {
            return;
        }
        let round = std::mem::replace(&mut self.round, Round::new(now));
        let elapsed = now.saturating_duration_since(round.started).as_secs_f64();
        if !round.producer_waited || round.took.is_zero() || elapsed == 0.0 {
            // The producer was the bound: this round says nothing about more parts.
            return;
        }
        let in_flight = round.area / elapsed;
        let mean_took = round.took.as_secs_f64() / round.answers as f64;
        let rate = in_flight / mean_took * (round.bytes as f64 / round.answers as f64);
        let Phase::Search { base } = self.phase else {
            return;
        };
        let before = self.limit;
        match base {
            Some((from, was)) if rate < was * GAIN => self.hold(from),
            _ if self.limit >= self.max => self.hold(self.limit),
            _ => {
                self.phase = Phase::Search {
                    base: Some((self.limit, rate)),
                };
                self.limit = (self.limit * 2).min(self.max);
            }
        }
        if self.limit != before {
            self.epoch += 1;
            self.round = Round::new(now);
            tracing::debug!(
                rate_mb_s = rate / 1e6,
                "parts in flight: {before} -> {}",
                self.limit
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PART: u64 = 16 << 20;

    /// Uploads `parts` parts to a store where each takes `took_at(the limit when it was
    /// sent)`, with a producer that has a part ready whenever there is a place.
    fn run(p: &mut PartsInFlight, parts: usize, took_at: impl Fn(usize) -> Duration) {
        let mut now = Instant::now();
        // (answered at, took, epoch)
        let mut flying: Vec<(Instant, Duration, u32)> = Vec::new();
        for _ in 0..parts {
            if flying.len() >= p.limit() {
                p.producer_waited();
                flying.sort_by_key(|f| std::cmp::Reverse(f.0));
                let (at, took, epoch) = flying.pop().unwrap();
                now = at;
                p.answered(epoch, PART, took, now);
            }
            while flying.len() < p.limit() {
                let took = took_at(p.limit());
                let epoch = p.sent(now);
                flying.push((now + took, took, epoch));
            }
        }
    }

    #[test]
    fn a_store_answering_each_part_as_fast_however_many_grows_to_the_max() {
        // S3: each part takes the same 0.24 s, so the rate follows the parts in flight.
        let mut p = PartsInFlight::adaptive(&Settled::default(), 32);
        run(&mut p, 200, |_| Duration::from_millis(240));
        assert_eq!(p.limit(), 32);
    }

    #[test]
    fn a_busy_store_keeps_the_limit_where_more_stopped_paying() {
        // Fills at 8: beyond it each part takes proportionally longer.
        let took = |n: usize| Duration::from_millis(100 * (n.max(8) as u64) / 8);
        let mut p = PartsInFlight::adaptive(&Settled::default(), 64);
        run(&mut p, 400, took);
        assert_eq!(p.limit(), 8, "16 brought no more than 8");
    }

    #[test]
    fn a_slow_producer_or_answers_to_an_older_limit_change_nothing() {
        let mut p = PartsInFlight::adaptive(&Settled::default(), 64);
        let mut now = Instant::now();
        for _ in 0..4 {
            // Never waited: the producer is the bound.
            for _ in 0..8 {
                let e = p.sent(now);
                now += Duration::from_millis(10);
                p.answered(e, PART, Duration::from_millis(10), now);
            }
        }
        assert_eq!(p.limit(), 4);
        run(&mut p, 12, |_| Duration::from_millis(10));
        assert_eq!(p.limit(), 8);
        let old = p.epoch - 1;
        p.producer_waited();
        for i in 0..100 {
            let at = now + Duration::from_millis(i);
            p.sent(at);
            p.answered(old, PART, Duration::from_millis(1), at);
        }
        assert_eq!(p.limit(), 8, "parts sent under 4 do not judge 8");
    }

    #[test]
    fn a_fixed_number_is_held() {
        let mut p = PartsInFlight::fixed(6);
        run(&mut p, 100, |_| Duration::from_millis(100));
        assert_eq!(p.limit(), 6);
        let settled = Settled::default();
        assert_eq!(
            PartsInFlight::adaptive(&settled, 2).limit(),
            2,
            "never above max"
        );
    }

    #[test]
    fn a_clients_next_upload_starts_where_its_last_search_held() {
        let settled = Settled::default();
        let mut first = PartsInFlight::adaptive(&settled, 32);
        assert_eq!(first.limit(), PART_CONCURRENCY);
        run(&mut first, 200, |_| Duration::from_millis(240));
        assert_eq!(first.limit(), 32);
        assert_eq!(PartsInFlight::adaptive(&settled, 64).limit(), 32);
        let mut capped = PartsInFlight::adaptive(&settled, 8);
        assert_eq!(capped.limit(), 8, "within what each upload allows");
        run(&mut capped, 100, |_| Duration::from_millis(240));
        assert_eq!(
            PartsInFlight::adaptive(&settled, 64).limit(),
            32,
            "a cap is not the store's answer"
        );
        // A fresh client's search that held at 8 is where its next starts.
        let busy = |n: usize| Duration::from_millis(100 * (n.max(8) as u64) / 8);
        let fresh = Settled::default();
        run(&mut PartsInFlight::adaptive(&fresh, 64), 400, busy);
        assert_eq!(PartsInFlight::adaptive(&fresh, 64).limit(), 8);
        // A fixed number says nothing about the store.
        run(&mut PartsInFlight::fixed(2), 100, busy);
        assert_eq!(PartsInFlight::adaptive(&fresh, 64).limit(), 8);
    }
}
