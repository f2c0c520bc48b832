//! First-byte latency: a log-normal distribution through two percentiles.
//!
//! Request latencies of object stores are skewed: most requests meet no queue, a few meet
//! several. A log-normal is the usual model and is fixed by two points, so a user gives what
//! the stores publish or what they measured — a median and a p99 — and gets exactly those.

use std::time::Duration;

/// z of the 99th percentile of the standard normal distribution.
const Z99: f64 = 2.326_347_874;

/// Draws are capped at this multiple of the p99, so one draw from the far tail cannot stall
/// a test for minutes (beyond p99.999 at the preset spreads).
const CAP_OVER_P99: f64 = 10.0;

/// A first-byte latency distribution: log-normal, set by its median and 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstByteLatency {
    p50: Duration,
    p99: Duration,
    /// ln of the median.
    mu: f64,
    /// Standard deviation of ln(latency).
    sigma: f64,
}

impl FirstByteLatency {
    /// The log-normal whose median is `p50` and whose 99th percentile is `p99`; equal values
    /// give a fixed delay.
    pub fn new(p50: Duration, p99: Duration) -> Result<Self, String> {
        if p50.is_zero() {
            return Err("p50 must be above zero (use `none` for no latency)".into());
        }
        if p99 < p50 {
            return Err(format!("p99 ({p99:?}) is below p50 ({p50:?})"));
        }
        let mu = p50.as_secs_f64().ln();
        let sigma = (p99.as_secs_f64().ln() - mu) / Z99;
        Ok(Self {
            p50,
            p99,
            mu,
            sigma,
        })
    }

    /// The median.
    pub fn p50(&self) -> Duration {
        self.p50
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.p99
    }

    /// One draw. Box–Muller on the seeded generator: two uniforms give one standard normal.
    pub fn sample(&self, rng: &mut fastrand::Rng) -> Duration {
        // 1 - u is in (0, 1], so the logarithm is finite.
        let u1 = 1.0 - rng.f64();
        let u2 = rng.f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let secs = (self.mu + self.sigma * z).exp();
        Duration::from_secs_f64(secs.min(self.p99.as_secs_f64() * CAP_OVER_P99))
    }

    /// Parses `p50=30ms,p99=150ms`, or one duration (`5ms`) for a fixed delay. `none` (or
    /// `0`) is handled by the caller, as "no latency".
    pub fn parse(s: &str) -> Result<Self, String> {
        let dur = |v: &str| {
            humantime::parse_duration(v.trim())
                .map_err(|e| format!("{v:?} is not a duration ({e})"))
        };
        if !s.contains('=') {
            let d = dur(s)?;
            return Self::new(d, d);
        }
        let (mut p50, mut p99) = (None, None);
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not KEY=DURATION"))?;
            match k.trim() {
                "p50" => p50 = Some(dur(v)?),
                "p99" => p99 = Some(dur(v)?),
                other => return Err(format!("unknown percentile {other:?} (p50 and p99 are)")),
            }
        }
        match (p50, p99) {
            (Some(a), Some(b)) => Self::new(a, b),
            _ => Err("both p50 and p99 are needed".into()),
        }
    }
}

/// `none`/`0`/`off` → no latency, else [`FirstByteLatency::parse`].
pub fn parse_optional(s: &str) -> Result<Option<FirstByteLatency>, String> {
    match s.trim() {
        "none" | "off" | "0" => Ok(None),
        v => FirstByteLatency::parse(v).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percentile(sorted: &[Duration], q: f64) -> Duration {
        sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
    }

    #[test]
    fn draws_land_on_the_requested_percentiles() {
        let l = FirstByteLatency::parse("p50=30ms,p99=150ms").unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut v: Vec<Duration> = (0..200_000).map(|_| l.sample(&mut rng)).collect();
        v.sort();
        let p50 = percentile(&v, 0.50).as_secs_f64();
        let p99 = percentile(&v, 0.99).as_secs_f64();
        assert!((p50 / 0.030 - 1.0).abs() < 0.02, "p50 {p50}");
        assert!((p99 / 0.150 - 1.0).abs() < 0.03, "p99 {p99}");
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let l = FirstByteLatency::parse("p50=3ms,p99=9ms").unwrap();
        let draw = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..5).map(|_| l.sample(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn a_single_value_is_a_fixed_delay() {
        let l = FirstByteLatency::parse("5ms").unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..100 {
            let d = l.sample(&mut rng).as_secs_f64();
            assert!((d - 0.005).abs() < 1e-9, "{d}");
        }
    }

    #[test]
    fn malformed_distributions_are_refused_with_the_reason() {
        for (input, want) in [
            ("p50=30ms,p99=10ms", "below p50"),
            ("p50=-3ms,p99=10ms", "not a duration"),
            ("p50=30", "not a duration"),
            ("p50=30ms", "both p50 and p99"),
            ("p90=30ms,p99=40ms", "unknown percentile"),
            ("p50=0ms,p99=1ms", "above zero"),
        ] {
            let e = FirstByteLatency::parse(input).unwrap_err();
            assert!(e.contains(want), "{input}: {e}");
        }
        assert_eq!(parse_optional("none").unwrap(), None);
    }
}
