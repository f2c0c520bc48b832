//! Request-rate limits per partition: token buckets that answer `503 SlowDown` when empty.
//!
//! S3 scales a bucket by splitting its key space into partitions and publishes a rate per
//! "partitioned prefix". Which prefixes are partitions is decided by S3 at run time (it splits
//! under sustained load, over 30–60 minutes) and is not visible to clients, so a model has to
//! pick a rule. We take the first path segment of the key (`train/` of `train/x.npz`): a
//! dataset is usually laid out under one or a few top-level prefixes, a bucket that has been
//! in use has been split at least that far, and a user can spread load deliberately by
//! prefix, as AWS advises. S3 Express directory buckets publish their rate per bucket
//! ([`Partition::Bucket`]).

use super::OpClass;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// What one token bucket covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partition {
    /// The bucket and the key up to its first `/`; keys without one share the bucket's
    /// root partition.
    #[default]
    FirstSegment,
    /// The whole bucket.
    Bucket,
}

impl std::str::FromStr for Partition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "first-segment" | "prefix" => Ok(Partition::FirstSegment),
            "bucket" => Ok(Partition::Bucket),
            other => Err(format!(
                "unknown partition rule {other:?}: expected first-segment or bucket"
            )),
        }
    }
}

impl Partition {
    /// The partition of a request for `key` (or, for a LIST, its `prefix`) in `bucket`.
    pub fn of<'a>(self, bucket: &'a str, key: &'a str) -> (&'a str, &'a str) {
        match self {
            Partition::Bucket => (bucket, ""),
            Partition::FirstSegment => (bucket, key.find('/').map_or("", |i| &key[..=i])),
        }
    }
}

/// Requests per second per partition; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RequestRate {
    /// GET and HEAD of objects, and LISTs (a GET on the bucket, as S3 counts it).
    pub get: Option<f64>,
    /// PUT, POST, DELETE, COPY.
    pub put: Option<f64>,
    /// What one limit applies to (a bucket, or a prefix).
    pub partition: Partition,
}

impl RequestRate {
    /// The limit for a class of request.
    pub fn of(&self, class: OpClass) -> Option<f64> {
        match class {
            OpClass::Read | OpClass::List => self.get,
            OpClass::Write => self.put,
        }
    }

    /// Parses `get=5500/s,put=3500/s` (either may be left out: unlimited), or `none`. Keeps
    /// the partition rule of `self`.
    pub fn parse_onto(mut self, s: &str) -> Result<Self, String> {
        self.get = None;
        self.put = None;
        if matches!(s.trim(), "none" | "off") {
            return Ok(self);
        }
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not CLASS=RATE/s"))?;
            let n = v.trim();
            let n = n.strip_suffix("/s").unwrap_or(n);
            let rate: f64 = n
                .parse()
                .map_err(|_| format!("{v:?} is not a rate such as 5500/s"))?;
            if !(rate > 0.0 && rate.is_finite()) {
                return Err(format!(
                    "{v:?}: a rate must be above zero (leave the class out for no limit)"
                ));
            }
            match k.trim() {
                "get" => self.get = Some(rate),
                "put" => self.put = Some(rate),
                other => return Err(format!("unknown request class {other:?} (get and put are)")),
            }
        }
        Ok(self)
    }
}

/// One token bucket. It holds one second of requests, so a client that has been quiet may
/// burst that many at once; S3 does not publish its burst allowance.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// The token buckets of one server, by class and partition.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    rates: RequestRate,
    buckets: Mutex<HashMap<(bool, String), Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(rates: RequestRate) -> Self {
        Self {
            rates,
            buckets: Mutex::default(),
        }
    }

    /// Takes a token for this request; `false` when its partition's bucket is empty.
    pub(crate) fn admit(&self, class: OpClass, bucket: &str, key: &str, now: Instant) -> bool {
        let Some(rate) = self.rates.of(class) else {
            return true;
        };
        let (b, p) = self.rates.partition.of(bucket, key);
        let id = (class == OpClass::Write, format!("{b}/{p}"));
        let mut buckets = self.buckets.lock().unwrap();
        let tb = buckets.entry(id).or_insert(Bucket {
            tokens: rate,
            last: now,
        });
        let elapsed = now.saturating_duration_since(tb.last).as_secs_f64();
        tb.tokens = (tb.tokens + elapsed * rate).min(rate);
        tb.last = now;
        if tb.tokens >= 1.0 {
            tb.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Offers `n` requests evenly over one second after the first second's burst is spent.
    fn admitted_at(rate: f64, offered_per_sec: u32) -> u32 {
        let limiter = RateLimiter::new(RequestRate {
            get: Some(rate),
            ..Default::default()
        });
        let t0 = Instant::now();
        // Spend the initial burst.
        while limiter.admit(OpClass::Read, "b", "k", t0) {}
        let step = Duration::from_secs(1) / offered_per_sec;
        (1..=offered_per_sec)
            .filter(|i| limiter.admit(OpClass::Read, "b", "k", t0 + step * *i))
            .count() as u32
    }

    #[test]
    fn a_partition_admits_its_rate_and_no_more() {
        assert_eq!(admitted_at(100.0, 50), 50, "below the rate all pass");
        let got = admitted_at(100.0, 400);
        assert!(
            (99..=101).contains(&got),
            "above the rate, the rate passes: {got}"
        );
    }

    #[test]
    fn partitions_and_classes_have_their_own_buckets() {
        let limiter = RateLimiter::new(RequestRate {
            get: Some(2.0),
            put: Some(1.0),
            partition: Partition::FirstSegment,
        });
        let now = Instant::now();
        let take = |c, k| limiter.admit(c, "b", k, now);
        assert!(take(OpClass::Read, "a/1") && take(OpClass::Read, "a/2"));
        assert!(!take(OpClass::Read, "a/3"), "partition a/ is empty");
        assert!(
            !take(OpClass::List, "a/"),
            "a LIST counts against the GET rate"
        );
        assert!(
            take(OpClass::Read, "b/1"),
            "partition b/ has its own bucket"
        );
        assert!(take(OpClass::Read, "x") && take(OpClass::Read, "y"));
        assert!(
            !take(OpClass::Read, "z"),
            "keys without a / share the root partition"
        );
        assert!(take(OpClass::Write, "a/1") && !take(OpClass::Write, "a/2"));
        let whole = RateLimiter::new(RequestRate {
            get: Some(1.0),
            put: None,
            partition: Partition::Bucket,
        });
        assert!(whole.admit(OpClass::Read, "b", "a/1", now));
        assert!(
            !whole.admit(OpClass::Read, "b", "z/1", now),
            "one bucket-wide partition"
        );
        assert!(whole.admit(OpClass::Write, "b", "a/1", now), "no put limit");
    }

    #[test]
    fn rates_parse_and_bad_ones_say_why() {
        let r = RequestRate::default()
            .parse_onto("get=5500/s,put=3500/s")
            .unwrap();
        assert_eq!((r.get, r.put), (Some(5500.0), Some(3500.0)));
        let r = RequestRate::default().parse_onto("put=10").unwrap();
        assert_eq!((r.get, r.put), (None, Some(10.0)));
        for (input, want) in [
            ("get=0/s", "above zero"),
            ("get=-1/s", "above zero"),
            ("get=fast", "not a rate"),
            ("read=5/s", "unknown request class"),
            ("5500", "not CLASS=RATE"),
        ] {
            let e = RequestRate::default().parse_onto(input).unwrap_err();
            assert!(e.contains(want), "{input}: {e}");
        }
    }
}
