//! What a request-driven workload measured (`OpsReport`): per request kind, the count,
//! bytes, failures by kind and the latency histograms; for the whole run, CPU, peak RSS,
//! retries and the throughput of each second. Reports of several processes or MPI ranks
//! that ran at once merge into one (`merge`).

use super::latency::{Latency, Percentiles};
use super::workload::Op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One request kind's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpStats {
    /// Requests that succeeded.
    pub ok: u64,
    /// Body bytes moved by them.
    pub bytes: u64,
    /// Failed requests (after the store's own retries), by `Error::kind_label`.
    pub errors: BTreeMap<String, u64>,
    /// Whole-request latency of the successful ones.
    pub latency: Latency,
    /// Time to the first body byte (GETs only).
    pub ttfb: Latency,
}

impl OpStats {
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Adds another task's or process's figures for the same kind.
    pub fn merge(&mut self, o: &OpStats) {
        self.ok += o.ok;
        self.bytes += o.bytes;
        for (k, n) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += n;
        }
        self.latency.merge(&o.latency);
        self.ttfb.merge(&o.ttfb);
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stopped {
    /// `--duration` ran out.
    Duration,
    /// `--ops` requests were made (or, for delete, the objects ran out; for checkpoint,
    /// every rank's objects were written or read).
    Count,
    /// `--autoterm`: throughput held steady.
    Autoterm,
    /// More than `--max-error-share` of requests failed.
    Errors,
    /// Ctrl-C.
    Interrupted,
}

/// One workload's run in one process (or, merged, in several at once).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpsReport {
    /// `put`, `small`, ..., `checkpoint write`, `checkpoint read`.
    pub workload: String,
    /// The measured window (after `--warmup`); merged, from the first process's start to the
    /// last one's end.
    pub seconds: f64,
    /// When the window opened, in seconds since the UNIX epoch: ranks' windows merge on this
    /// common clock (one machine's, or hosts' kept in step). `None` in reports written before
    /// it was recorded.
    #[serde(default)]
    pub started_unix: Option<f64>,
    pub ops: BTreeMap<Op, OpStats>,
    /// CPU seconds (user + system, all threads) over the measured window.
    pub cpu_seconds: f64,
    /// The largest peak RSS of the processes (for curl: 0, not measured).
    pub peak_rss_bytes: u64,
    /// Retries the store made, by the kind of failure retried.
    pub retries: BTreeMap<String, u64>,
    pub stopped: Stopped,
    /// The figure (megabytes a second, or requests a second where no bytes move) of each whole second of the
    /// window, summed over merged processes: the run-to-run noise `compare` judges by.
    pub per_second: Vec<f64>,
    /// Processes (MPI ranks) merged into this report.
    pub ranks: usize,
}

/// Seconds since the UNIX epoch, now.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl OpsReport {
    pub fn bytes(&self) -> u64 {
        self.ops.values().map(|s| s.bytes).sum()
    }

    pub fn ok(&self) -> u64 {
        self.ops.values().map(|s| s.ok).sum()
    }

    pub fn failed(&self) -> u64 {
        self.ops.values().map(OpStats::failed).sum()
    }

    /// Every request kind's latency together.
    pub fn latency(&self) -> Option<Percentiles> {
        let mut all = Latency::default();
        self.ops.values().for_each(|s| all.merge(&s.latency));
        all.percentiles()
    }

    pub fn ttfb(&self) -> Option<Percentiles> {
        let mut all = Latency::default();
        self.ops.values().for_each(|s| all.merge(&s.ttfb));
        all.percentiles()
    }

    /// Failures of every kind, summed over request kinds.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for s in self.ops.values() {
            for (k, n) in &s.errors {
                *out.entry(k.clone()).or_default() += n;
            }
        }
        out
    }

    /// Adds a report of a process that ran at the same time (another MPI rank): counts and
    /// CPU add up, histograms merge, the per-second figures add, and the window spans both.
    /// Ranks start and stop apart: dividing all their bytes by the longest single window
    /// read two ranks on one link as faster than the link.
    pub fn merge(&mut self, o: &OpsReport) {
        match (self.started_unix, o.started_unix) {
            (Some(a), Some(b)) => {
                let start = a.min(b);
                let end = (a + self.seconds).max(b + o.seconds);
                (self.started_unix, self.seconds) = (Some(start), end - start);
            }
            _ => self.seconds = self.seconds.max(o.seconds),
        }
        for (op, s) in &o.ops {
            self.ops.entry(*op).or_default().merge(s);
        }
        self.cpu_seconds += o.cpu_seconds;
        self.peak_rss_bytes = self.peak_rss_bytes.max(o.peak_rss_bytes);
        for (k, n) in &o.retries {
            *self.retries.entry(k.clone()).or_default() += n;
        }
        if o.stopped != Stopped::Count && o.stopped != Stopped::Duration {
            self.stopped = o.stopped;
        }
        if self.per_second.len() < o.per_second.len() {
            self.per_second.resize(o.per_second.len(), 0.0);
        }
        for (a, b) in self.per_second.iter_mut().zip(&o.per_second) {
            *a += b;
        }
        self.ranks += o.ranks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn report(ok: u64, bytes: u64, err: u64, secs: f64, started: f64) -> OpsReport {
        let mut s = OpStats {
            ok,
            bytes,
            ..Default::default()
        };
        if err > 0 {
            s.errors.insert("HTTP 503 SlowDown".into(), err);
        }
        for _ in 0..ok {
            s.latency.record(Duration::from_millis(10));
        }
        OpsReport {
            workload: "put".into(),
            seconds: secs,
            started_unix: Some(started),
            ops: BTreeMap::from([(Op::Put, s)]),
            cpu_seconds: 1.0,
            peak_rss_bytes: 10,
            retries: BTreeMap::from([("Transport".into(), 2)]),
            stopped: Stopped::Duration,
            per_second: vec![1.0, 2.0],
            ranks: 1,
        }
    }

    #[test]
    fn reports_of_ranks_add_up() {
        let mut a = report(10, 100, 1, 2.0, 1000.0);
        let b = report(5, 50, 2, 3.0, 1000.5);
        a.merge(&b);
        assert_eq!((a.ok(), a.bytes(), a.failed(), a.ranks), (15, 150, 3, 2));
        assert_eq!((a.seconds, a.started_unix), (3.5, Some(1000.0)));
        assert_eq!(a.per_second, vec![2.0, 4.0]);
        assert_eq!(a.retries["Transport"], 4);
        assert_eq!(a.errors()["HTTP 503 SlowDown"], 3);
        assert_eq!(a.ops[&Op::Put].latency.count(), 15);
    }

    #[test]
    fn windows_of_ranks_merge_over_their_span() {
        // Two ranks in turn on one link: each moved 100 bytes in 1 s; together 200 in 2 s.
        let mut a = report(1, 100, 0, 1.0, 1000.0);
        a.merge(&report(1, 100, 0, 1.0, 1001.0));
        assert_eq!((a.seconds, a.started_unix), (2.0, Some(1000.0)));
        // The later rank first: the same span.
        let mut b = report(1, 100, 0, 1.0, 1001.0);
        b.merge(&report(1, 100, 0, 1.0, 1000.0));
        assert_eq!((b.seconds, b.started_unix), (2.0, Some(1000.0)));
        // A report without a start (an older one) keeps the longest window.
        let mut old = report(1, 100, 0, 4.0, 0.0);
        old.started_unix = None;
        old.merge(&report(1, 100, 0, 1.0, 1000.0));
        assert_eq!(old.seconds, 4.0);
    }
}
