//! Work in flight over time: how many requests (or parts) are out now, and their integral
//! since a mark. By Little's law a rate is what is in flight ÷ the time each takes, so the
//! request controller (`congestion`) and the parts window (`parts_in_flight`) judge a round
//! by the number it actually kept in flight, averaged over the round's time — not by the
//! limit, which a client that asked for fewer never reached.

use std::time::Instant;

/// A count of things in flight and its integral over time since the last [`restart`](Self::restart).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InFlight {
    count: usize,
    /// When `count` last changed, or the integral last restarted.
    changed: Instant,
    /// `count` integrated since the restart, up to `changed` (thing-seconds).
    area: f64,
    since: Instant,
}

impl InFlight {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            count: 0,
            changed: now,
            area: 0.0,
            since: now,
        }
    }

    /// When the count last changed (or the integral restarted).
    #[cfg(test)]
    pub(crate) fn changed(&self) -> Instant {
        self.changed
    }

    /// How many are in flight now.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// `by` more (or fewer) from `now`: the time since the last change counts at the old
    /// number.
    pub(crate) fn step(&mut self, now: Instant, by: isize) {
        let since = now.saturating_duration_since(self.changed).as_secs_f64();
        self.area += self.count as f64 * since;
        self.count = self.count.saturating_add_signed(by);
        self.changed = now;
    }

    /// A new integral from `now` (a round starts).
    pub(crate) fn restart(&mut self, now: Instant) {
        self.step(now, 0);
        self.area = 0.0;
        self.since = now;
    }

    /// The number in flight on average from the restart to `now`; `None` before any time
    /// has passed.
    pub(crate) fn average(&self, now: Instant) -> Option<f64> {
        let elapsed = now.saturating_duration_since(self.since).as_secs_f64();
        let pending = now.saturating_duration_since(self.changed).as_secs_f64();
        (elapsed > 0.0).then(|| (self.area + self.count as f64 * pending) / elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_average_weighs_each_count_by_how_long_it_held() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut f = InFlight::new(t0);
        assert_eq!(f.average(t0), None);
        f.step(t0, 4);
        f.step(at(100), -2);
        // 4 for 100 ms, then 2 for 100 ms.
        assert!((f.average(at(200)).unwrap() - 3.0).abs() < 1e-9);
        f.restart(at(200));
        assert_eq!(f.count(), 2);
        assert!((f.average(at(300)).unwrap() - 2.0).abs() < 1e-9);
    }
}
