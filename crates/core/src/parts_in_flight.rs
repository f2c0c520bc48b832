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
//! - Start at [`PART_CONCURRENCY`](crate::PART_CONCURRENCY) parts.
//! - A round is the answers to `limit` parts sent at the current limit (answers to parts
//!   sent before it say nothing about it), during which the producer had to wait for a
//!   free place at least once: a producer slower than the upload is the bound, and more
//!   parts would change nothing.
//! - The round's rate is `limit × bytes per part ÷ mean time per part` (Little's law: the
//!   window was full).
//! - Double while a doubling raised that rate by at least 15%; when one did not, go
//!   back to the limit before and hold it to the end of the upload.
//!
//! The limit never exceeds `max` (the memory the caller allows, `upload::PARTS_MEMORY` by
//! default), and each part still waits for the client's controller like every request.
//! A number set by the user (`SLUICE_PARTS_IN_FLIGHT`, `max_in_flight=`) is held as set.

use std::time::Duration;

/// Rate a doubling must bring to be kept. Lower than the controller's 1.25: under
/// `s3-standard` 8 → 16 parts of 16 MiB brought 1.28× and 16 → 32 1.15×, so at 1.25 the
/// search stopped at 8 or 16 by the luck of a round (2 GiB checkpoint writes of 341 to
/// 692 MB/s at defaults, `scripts/measure-checkpoint`); a store already busy answers a
/// doubling with ~1.0×.
const GAIN: f64 = 1.15;
/// Fewest answers a round counts: S3's PUT latency spreads 5× from p50 to p99, and a mean
/// of 8 parts' times varies by less than the gain judged.
const MIN_ROUND: usize = 8;

/// The search of one upload (module docs).
#[derive(Debug, Clone)]
pub(crate) struct PartsInFlight {
    limit: usize,
    max: usize,
    phase: Phase,
    /// Which limit a part was sent under: a round counts only parts of its own limit.
    epoch: u32,
    round: Round,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling; `base`: the limit before and the rate it reached.
    Search { base: Option<(usize, f64)> },
    /// Done searching (or never searching: a fixed limit).
    Hold,
}

#[derive(Debug, Clone, Copy, Default)]
struct Round {
    answers: usize,
    bytes: u64,
    took: Duration,
    producer_waited: bool,
}

impl PartsInFlight {
    /// `n` parts in flight, never changed.
    pub(crate) fn fixed(n: usize) -> Self {
        Self::new(n.max(1), n.max(1), Phase::Hold)
    }

    /// From `start` up to `max` parts, searched as the module docs say.
    pub(crate) fn adaptive(start: usize, max: usize) -> Self {
        let max = max.max(1);
        Self::new(start.clamp(1, max), max, Phase::Search { base: None })
    }

    fn new(limit: usize, max: usize, phase: Phase) -> Self {
        Self {
            limit,
            max,
            phase,
            epoch: 0,
            round: Round::default(),
        }
    }

    /// Parts allowed in flight now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The stamp of a part sent now, to give back with its answer.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The producer found every place taken and waits for an answer.
    pub(crate) fn producer_waited(&mut self) {
        self.round.producer_waited = true;
    }

    /// A part of `bytes` sent under `epoch` was answered after `took`.
    pub(crate) fn answered(&mut self, epoch: u32, bytes: u64, took: Duration) {
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
        let round = std::mem::take(&mut self.round);
        if !round.producer_waited || round.took.is_zero() {
            // The producer was the bound: this round says nothing about more parts.
            return;
        }
        let rate = self.limit as f64 * round.bytes as f64 / round.took.as_secs_f64();
        let Phase::Search { base } = self.phase else {
            return;
        };
        let before = self.limit;
        match base {
            Some((from, was)) if rate < was * GAIN => {
                self.limit = from;
                self.phase = Phase::Hold;
            }
            _ if self.limit >= self.max => self.phase = Phase::Hold,
            _ => {
                self.phase = Phase::Search {
                    base: Some((self.limit, rate)),
                };
                self.limit = (self.limit * 2).min(self.max);
            }
        }
        if self.limit != before {
            self.epoch += 1;
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

    /// Answers one round at the current limit, each part taking what `took_at` says for
    /// that many parts in flight, with the producer waiting.
    fn round(p: &mut PartsInFlight, took_at: impl Fn(usize) -> Duration) {
        let (epoch, limit) = (p.epoch(), p.limit());
        p.producer_waited();
        for _ in 0..limit.max(MIN_ROUND) {
            p.answered(epoch, PART, took_at(limit));
        }
    }

    #[test]
    fn a_store_answering_each_part_as_fast_however_many_grows_to_the_max() {
        // S3: each part takes the same 0.24 s, so the rate follows the parts in flight.
        let mut p = PartsInFlight::adaptive(4, 32);
        for _ in 0..6 {
            round(&mut p, |_| Duration::from_millis(240));
        }
        assert_eq!(p.limit(), 32);
    }

    #[test]
    fn a_busy_store_keeps_the_limit_where_more_stopped_paying() {
        // Fills at 8: beyond it each part takes proportionally longer.
        let took = |n: usize| Duration::from_millis(100 * (n.max(8) as u64) / 8);
        let mut p = PartsInFlight::adaptive(4, 64);
        for _ in 0..10 {
            round(&mut p, took);
        }
        assert_eq!(p.limit(), 8, "16 brought no more than 8");
    }

    #[test]
    fn a_slow_producer_or_answers_to_an_older_limit_change_nothing() {
        let mut p = PartsInFlight::adaptive(4, 64);
        for _ in 0..4 {
            // Never waited: the producer is the bound.
            for _ in 0..8 {
                p.answered(p.epoch(), PART, Duration::from_millis(10));
            }
        }
        assert_eq!(p.limit(), 4);
        round(&mut p, |_| Duration::from_millis(10));
        assert_eq!(p.limit(), 8);
        let old = p.epoch() - 1;
        p.producer_waited();
        for _ in 0..100 {
            p.answered(old, PART, Duration::from_millis(1));
        }
        assert_eq!(p.limit(), 8, "parts sent under 4 do not judge 8");
    }

    #[test]
    fn a_fixed_number_is_held() {
        let mut p = PartsInFlight::fixed(6);
        for _ in 0..5 {
            round(&mut p, |_| Duration::from_millis(100));
        }
        assert_eq!(p.limit(), 6);
        assert_eq!(PartsInFlight::adaptive(4, 2).limit(), 2, "never above max");
    }
}
