//! Service profiles: how the server behaves like the stores users read from, rather than a
//! loopback server that answers in microseconds, never throttles and streams one connection
//! as fast as a core can copy.
//!
//! A profile is four behaviours, each off in `loopback` and each overridable on its own:
//! - first-byte latency per operation class, a seeded log-normal through a p50 and a p99
//!   ([`latency`]), slept before the handler runs, so before the status line is sent;
//! - request-rate limits per partition, token buckets answering `503 SlowDown` ([`rate`]);
//! - bandwidth per connection and per node for GET and PUT bodies ([`pace`]);
//! - and a record of what the server did ([`stats`]).
//!
//! The numbers of the named profiles and their sources are in [`ServiceProfile::named`] and in
//! docs/design.md ("Service profiles").

pub mod latency;
pub(crate) mod layer;
pub mod pace;
pub mod rate;
pub mod stats;

pub use latency::FirstByteLatency;
pub use pace::Bandwidth;
pub use rate::{Partition, RequestRate};
pub use stats::{ServiceStats, StatsSnapshot};

use std::time::Duration;

/// The classes of request a profile treats differently. S3 publishes its rate limits for
/// GET/HEAD and for PUT/COPY/POST/DELETE; a LIST is a GET on the bucket (it counts against
/// the GET rate) but is slower to answer, so it has its own latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// GET or HEAD of an object.
    Read,
    /// PUT, POST, DELETE, COPY: anything that changes the store.
    Write,
    /// GET on a bucket: ListObjectsV2, ListMultipartUploads, ListBuckets.
    List,
}

impl OpClass {
    /// Every class, in the order stats print them.
    pub const ALL: [OpClass; 3] = [OpClass::Read, OpClass::Write, OpClass::List];

    /// The class as `--stats-json` names it (`get`, `put`, `list`).
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Read => "get",
            OpClass::Write => "put",
            OpClass::List => "list",
        }
    }
}

/// First-byte latency per class; `None` answers at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpLatency {
    /// For GET and HEAD.
    pub get: Option<FirstByteLatency>,
    /// For PUT, POST, DELETE and COPY.
    pub put: Option<FirstByteLatency>,
    /// For listings.
    pub list: Option<FirstByteLatency>,
}

impl OpLatency {
    /// The same distribution for every class.
    pub fn all(l: Option<FirstByteLatency>) -> Self {
        Self {
            get: l,
            put: l,
            list: l,
        }
    }

    /// The latency of `class`, if the profile sets one.
    pub fn of(&self, class: OpClass) -> Option<FirstByteLatency> {
        match class {
            OpClass::Read => self.get,
            OpClass::Write => self.put,
            OpClass::List => self.list,
        }
    }
}

/// How the server behaves: a named preset, then any value overridden on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceProfile {
    /// The preset this profile started from (reported in the stats).
    pub name: String,
    /// First-byte latency per class of request.
    pub latency: OpLatency,
    /// Request-rate limits, per partition.
    pub request_rate: RequestRate,
    /// Pace of one connection's GET and PUT bodies (both directions, each on its own).
    pub connection_bandwidth: Option<Bandwidth>,
    /// Pace shared by every connection of the server: a node behind a link.
    pub node_bandwidth: Option<Bandwidth>,
    /// Seeds the latency draws, so two runs of a benchmark see the same sequence.
    pub seed: u64,
}

impl Default for ServiceProfile {
    fn default() -> Self {
        Self::loopback()
    }
}

/// What [`ServiceProfile::set`] overrides, in the order they apply (the per-class latencies
/// after the one for all classes).
pub const SETTINGS: [&str; 9] = [
    "first-byte-latency",
    "get-latency",
    "put-latency",
    "list-latency",
    "request-rate",
    "rate-partition",
    "connection-bandwidth",
    "node-bandwidth",
    "latency-seed",
];

/// The names [`ServiceProfile::named`] accepts.
pub const PROFILE_NAMES: [&str; 4] = ["loopback", "s3-standard", "s3-express", "on-prem"];

const DEFAULT_SEED: u64 = 0x5eed_5eed;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn lognormal(p50: Duration, p99: Duration) -> Option<FirstByteLatency> {
    Some(FirstByteLatency::new(p50, p99).expect("preset percentiles are ordered"))
}

impl ServiceProfile {
    /// Today's test server: no latency, no limits, no pacing.
    pub fn loopback() -> Self {
        Self {
            name: "loopback".into(),
            latency: OpLatency::default(),
            request_rate: RequestRate::default(),
            connection_bandwidth: None,
            node_bandwidth: None,
            seed: DEFAULT_SEED,
        }
    }

    /// A named preset: `s3-standard` (a general-purpose S3 bucket read from EC2 in the same
    /// region), `s3-express` (an S3 Express One Zone directory bucket in the client's zone)
    /// or `on-prem` (one node of a self-hosted store behind the smallest link MinIO's
    /// hardware checklist recommends). The values below are their one definition; the
    /// published figure behind each, and where we chose within a documented range, are in
    /// docs/design.md, "Service profiles".
    pub fn named(name: &str) -> Result<Self, String> {
        let mut p = Self::loopback();
        p.name = name.to_owned();
        match name {
            "loopback" => {}
            "s3-standard" => {
                p.latency = OpLatency {
                    get: lognormal(ms(30), ms(150)),
                    put: lognormal(ms(50), ms(250)),
                    list: lognormal(ms(60), ms(300)),
                };
                p.request_rate = RequestRate {
                    get: Some(5500.0),
                    put: Some(3500.0),
                    partition: Partition::FirstSegment,
                };
                p.connection_bandwidth = Some(Bandwidth::bytes_per_sec(90e6));
            }
            "s3-express" => {
                p.latency = OpLatency {
                    get: lognormal(ms(2), ms(8)),
                    put: lognormal(ms(3), ms(10)),
                    list: lognormal(ms(4), ms(12)),
                };
                p.request_rate = RequestRate {
                    get: Some(200_000.0),
                    put: Some(100_000.0),
                    partition: Partition::Bucket,
                };
            }
            "on-prem" => {
                p.latency = OpLatency::all(lognormal(ms(1), ms(5)));
                p.node_bandwidth = Some(Bandwidth::bytes_per_sec(25e9 / 8.0));
            }
            other => {
                return Err(format!(
                    "unknown profile {other:?}: expected one of {}",
                    PROFILE_NAMES.join(", ")
                ));
            }
        }
        Ok(p)
    }

    /// Overrides one value, by the name `sluice serve` gives its flag and
    /// `sluice.testing.TestServer` its keyword (with `_`). The one place settings are read
    /// from text, so the command line and Python accept and refuse the same values.
    pub fn set(&mut self, setting: &str, value: &str) -> Result<(), String> {
        let example = |e: String, ex: &str| format!("{e}; e.g. {ex}");
        let latency = || {
            latency::parse_optional(value)
                .map_err(|e| example(e, "p50=30ms,p99=150ms, 5ms or none"))
        };
        let bandwidth = |ex| pace::parse_optional(value).map_err(|e| example(e, ex));
        match setting {
            "first-byte-latency" => self.latency = OpLatency::all(latency()?),
            "get-latency" => self.latency.get = latency()?,
            "put-latency" => self.latency.put = latency()?,
            "list-latency" => self.latency.list = latency()?,
            "request-rate" => {
                self.request_rate = self
                    .request_rate
                    .parse_onto(value)
                    .map_err(|e| example(e, "get=5500/s,put=3500/s or none"))?
            }
            "rate-partition" => self.request_rate.partition = value.parse()?,
            "connection-bandwidth" => self.connection_bandwidth = bandwidth("90MB/s or none")?,
            "node-bandwidth" => self.node_bandwidth = bandwidth("25Gbit/s or none")?,
            "latency-seed" => {
                self.seed = value
                    .parse()
                    .map_err(|_| format!("{value:?} is not a whole number; e.g. 42"))?
            }
            other => {
                return Err(format!(
                    "unknown setting {other:?}: expected one of {}",
                    SETTINGS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Overrides several values, in `SETTINGS` order whatever the order given (the
    /// all-class latency before the per-class ones), so every front end builds the same
    /// server from the same settings. An error names the setting at fault.
    pub fn set_all<'a>(
        &mut self,
        settings: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), (String, String)> {
        let mut given: Vec<_> = settings.into_iter().collect();
        // Unknown names last: `set` refuses them, naming the ones it knows.
        given.sort_by_key(|(s, _)| SETTINGS.iter().position(|k| k == s).unwrap_or(usize::MAX));
        for (setting, value) in given {
            self.set(setting, value)
                .map_err(|e| (setting.to_owned(), e))?;
        }
        Ok(())
    }

    /// Whether any behaviour is on (loopback's is not).
    pub fn is_shaping(&self) -> bool {
        self.latency != OpLatency::default()
            || self.request_rate.get.is_some()
            || self.request_rate.put.is_some()
            || self.connection_bandwidth.is_some()
            || self.node_bandwidth.is_some()
    }
}

impl std::str::FromStr for ServiceProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::named(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_profile_builds_and_only_loopback_is_idle() {
        for name in PROFILE_NAMES {
            let p = ServiceProfile::named(name).unwrap();
            assert_eq!(p.is_shaping(), name != "loopback", "{name}");
        }
        let e = ServiceProfile::named("s3").unwrap_err();
        assert!(e.contains("s3-standard"), "{e}");
    }

    #[test]
    fn settings_override_one_value_each_and_refuse_bad_ones() {
        let mut p = ServiceProfile::named("s3-standard").unwrap();
        p.set("first-byte-latency", "none").unwrap();
        p.set("get-latency", "7ms").unwrap();
        assert_eq!(p.latency.put, None);
        assert_eq!(p.latency.get.unwrap().p99(), Duration::from_millis(7));
        p.set("rate-partition", "bucket").unwrap();
        p.set("request-rate", "put=10/s").unwrap();
        assert_eq!(p.request_rate.get, None);
        assert_eq!(p.request_rate.partition, Partition::Bucket);
        p.set("connection-bandwidth", "none").unwrap();
        assert_eq!(p.connection_bandwidth, None);
        for (k, v, want) in [
            ("node-bandwidth", "3", "no unit"),
            ("get-latency", "p50=9ms,p99=1ms", "p50=30ms,p99=150ms"),
            ("request-rate", "get=0", "get=5500/s"),
            ("latency-seed", "x", "whole number"),
            ("bandwidth", "1MB/s", "connection-bandwidth"),
        ] {
            let e = p.set(k, v).unwrap_err();
            assert!(e.contains(want), "{k}={v}: {e}");
        }
    }
}
