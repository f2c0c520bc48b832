//! Per-request latencies of the bench: an HDR histogram of microseconds, carried between
//! processes (and MPI ranks) as its recorded (value, count) pairs so that they merge exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;

/// The longest latency kept apart: an hour (longer ones are clamped to it).
const MAX_US: u64 = 3_600_000_000;

/// Latencies in microseconds, 3 significant digits.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_US, 3).expect("valid bounds"))
    }
}

/// The figures a table shows, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros())
            .unwrap_or(MAX_US)
            .clamp(1, MAX_US);
        self.0
            .record(us)
            .expect("clamped into the histogram's range");
    }

    /// The values another histogram recorded (the loader's, whose bounds may differ), each
    /// clamped into this one's range.
    pub fn from_recorded(pairs: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut h = Latency::default();
        for (v, n) in pairs {
            h.0.record_n(v.clamp(1, MAX_US), n)
                .expect("clamped into the histogram's range");
        }
        h
    }

    /// What `h` recorded.
    pub fn of(h: &Histogram<u64>) -> Self {
        Self::from_recorded(
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value())),
        )
    }

    pub fn merge(&mut self, other: &Latency) {
        self.0.add(&other.0).expect("same bounds");
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// `None` when nothing was recorded.
    pub fn percentiles(&self) -> Option<Percentiles> {
        if self.0.is_empty() {
            return None;
        }
        let ms = |q: f64| self.0.value_at_quantile(q) as f64 / 1e3;
        Some(Percentiles {
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: self.0.max() as f64 / 1e3,
        })
    }
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<[u64; 2]> = self
            .0
            .iter_recorded()
            .map(|v| [v.value_iterated_to(), v.count_at_value()])
            .collect();
        pairs.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = Vec::<[u64; 2]>::deserialize(d)?;
        Ok(Self::from_recorded(pairs.into_iter().map(|[v, n]| (v, n))))
    }
}

/// A row's per-object latency: the histogram and the percentiles read from it, made only from
/// a histogram that recorded something, so the two cannot disagree. In a row's JSON it is the
/// `latency` (percentiles, for people and plots) and `latency_us` (the histogram, so rows of
/// several ranks merge exactly) fields; it is read back from the histogram alone.
#[derive(Debug, Clone)]
pub struct Timed {
    histogram: Latency,
    percentiles: Percentiles,
}

impl Timed {
    /// `None` when `histogram` recorded nothing.
    pub fn of(histogram: Latency) -> Option<Self> {
        let percentiles = histogram.percentiles()?;
        Some(Self {
            histogram,
            percentiles,
        })
    }

    pub fn percentiles(&self) -> Percentiles {
        self.percentiles
    }

    /// Adds what `other` recorded.
    pub fn merge(&mut self, other: &Timed) {
        self.histogram.merge(&other.histogram);
        self.percentiles = self
            .histogram
            .percentiles()
            .expect("a histogram with values, and more added");
    }
}

impl Serialize for Timed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Fields<'a> {
            latency: &'a Percentiles,
            latency_us: &'a Latency,
        }
        Fields {
            latency: &self.percentiles,
            latency_us: &self.histogram,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Timed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            latency_us: Latency,
        }
        let f = Fields::deserialize(d)?;
        Timed::of(f.latency_us).ok_or_else(|| serde::de::Error::custom("latency_us is empty"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_json_and_merges_exactly() {
        let mut a = Latency::default();
        let mut b = Latency::default();
        for i in 1..=1000u64 {
            a.record(Duration::from_micros(i * 100));
        }
        b.record(Duration::from_secs(2));
        let back: Latency = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.percentiles(), a.percentiles());
        let p = back.percentiles().unwrap();
        assert!((p.p50_ms - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99_ms - 99.0).abs() < 0.2, "{p:?}");
        let mut m = back;
        m.merge(&b);
        assert_eq!(m.count(), 1001);
        assert!((m.percentiles().unwrap().max_ms - 2000.0).abs() < 2.0);
        assert!(Latency::default().percentiles().is_none());
    }
}
