//! The bench's results: one row per client and shape, printed as a table.

use super::args::Prefetch;
use super::latency::{Latency, Percentiles, Timed};
use super::ops::{OpsReport, Stopped};
use super::sizes::Preset;
use serde::{Deserialize, Serialize};
use sluice_console::output::{Failure, GB, MB, cpu_s_per_gb, mb_per_sec};
use std::collections::BTreeMap;
use std::path::Path;

/// One row of the get table (a reader shape).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub client: String,
    pub processes: usize,
    pub prefetch: Prefetch,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub per_process_mb_per_s: f64,
    pub batch_gap_p50_ms: f64,
    pub batch_gap_max_ms: f64,
    pub cpu_s_per_gb: f64,
    pub peak_rss_mb: f64,
    /// The first pass, when more than one was made (fresh memory, cold pools).
    pub first_epoch_mb_per_s: Option<f64>,
    /// What each endpoint served, summed over the row's processes, when the store spreads
    /// over several (`--endpoints`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointCount>,
    /// Requests in flight the clients allowed at the end (summed over the row's processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// For an MLPerf preset: accelerators the last pass's rate keeps at the minimum AU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<(String, u64)>,
    /// Per object of the last pass, from its request (the loader: its admission, prefetch
    /// slot and memory held) to its last byte; ranged reads of one object count as one.
    /// `None` where no object was timed.
    #[serde(flatten)]
    pub latency: Option<Timed>,
}

/// Where the clients' controllers ended (`sluice_core::CongestionStats`), summed over processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// Requests allowed in flight.
    pub requests: usize,
    /// Whether found at run time (else fixed by SLUICE_MAX_CONNECTIONS).
    pub adaptive: bool,
    /// Answers that asked the clients to slow down.
    pub throttled: u64,
    /// Objects the loaders let be in flight.
    pub window: usize,
    /// Bytes per ranged GET at the end, the largest of the processes' (0: none split).
    #[serde(default)]
    pub range_size: u64,
    /// The first process's controller's last decision, and why.
    #[serde(default)]
    pub last: Option<sluice_core::Decision>,
}

impl InFlight {
    /// The processes' figures added up; `None` when none had a controller.
    pub fn sum(each: impl Iterator<Item = InFlight>) -> Option<InFlight> {
        each.reduce(|a, b| InFlight {
            requests: a.requests + b.requests,
            adaptive: a.adaptive || b.adaptive,
            throttled: a.throttled + b.throttled,
            window: a.window + b.window,
            range_size: a.range_size.max(b.range_size),
            last: a.last.or(b.last),
        })
    }
}

/// One endpoint's share of a row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCount {
    pub url: String,
    pub requests: u64,
    /// Attempts that did not reach it (refused, reset, timed out).
    pub failures: u64,
    pub bytes_read: u64,
}

impl EndpointCount {
    /// `counts` summed per endpoint, in the order each was first seen.
    pub fn sum(counts: impl IntoIterator<Item = EndpointCount>) -> Vec<EndpointCount> {
        let mut out: Vec<EndpointCount> = Vec::new();
        for c in counts {
            match out.iter_mut().find(|o| o.url == c.url) {
                Some(o) => {
                    o.requests += c.requests;
                    o.failures += c.failures;
                    o.bytes_read += c.bytes_read;
                }
                None => out.push(c),
            }
        }
        out
    }
}

pub(super) fn print_table(rows: &[Row]) {
    println!(
        "{:<12} {:>5} {:>8} {:>9} {:>11} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11}",
        "client",
        "procs",
        "prefetch",
        "MB/s",
        "MB/s/proc",
        "gap p50ms",
        "gap maxms",
        "obj p50ms",
        "obj p99ms",
        "CPU-s/GB",
        "RSS MB",
        "1st pass"
    );
    let fed = |r: &Row| {
        let v: Vec<String> = r
            .accelerators
            .iter()
            .map(|(n, c)| format!("{c} {n}"))
            .collect();
        if v.is_empty() {
            String::new()
        } else {
            format!("  fed (AU): {}", v.join(", "))
        }
    };
    // "-": not measured (curl's own RSS; gaps need two batches in a process).
    let or_dash = |v: f64, decimals: usize| {
        if v > 0.0 {
            format!("{v:.decimals$}")
        } else {
            "-".into()
        }
    };
    for r in rows {
        println!(
            "{:<12} {:>5} {:>8} {:>9.0} {:>11.0} {:>10} {:>10} {:>9} {:>9} {:>9.3} {:>9} {:>11}{}",
            r.client,
            r.processes,
            r.prefetch,
            r.mb_per_s,
            r.per_process_mb_per_s,
            or_dash(r.batch_gap_p50_ms, 1),
            or_dash(r.batch_gap_max_ms, 1),
            or_dash(
                r.latency.as_ref().map_or(0.0, |l| l.percentiles().p50_ms),
                1
            ),
            or_dash(
                r.latency.as_ref().map_or(0.0, |l| l.percentiles().p99_ms),
                1
            ),
            r.cpu_s_per_gb,
            or_dash(r.peak_rss_mb, 0),
            r.first_epoch_mb_per_s
                .map_or("-".into(), |m| format!("{m:.0}")),
            fed(r),
        );
    }
    for r in rows {
        if let Some(f) = r.in_flight {
            let how = if f.adaptive {
                "found at run time"
            } else {
                "fixed"
            };
            let why = f.last.map_or(String::new(), |d| format!("; {d}"));
            println!(
                "  {} {}x{}: requests in flight at the end {} ({how}), objects {}, ranges of {}, \
                 {} throttled{why}",
                r.client,
                r.processes,
                r.prefetch,
                f.requests,
                f.window,
                sluice_console::output::human_size(f.range_size),
                f.throttled
            );
        }
        for e in &r.endpoints {
            let share = 100.0 * e.bytes_read as f64 / r.bytes_total().max(1) as f64;
            println!(
                "  {} {}x{}: endpoint {}: {} requests, {} failed, {:.0} MB read ({share:.0}%)",
                r.client,
                r.processes,
                r.prefetch,
                e.url,
                e.requests,
                e.failures,
                e.bytes_read as f64 / MB,
            );
        }
    }
}

impl Row {
    /// Bytes read from every endpoint, all epochs.
    fn bytes_total(&self) -> u64 {
        self.endpoints.iter().map(|e| e.bytes_read).sum()
    }
}

/// Writes the results (and what they measured) as JSON.
pub(super) fn write_json(path: &Path, doc: &serde_json::Value) -> Result<(), Failure> {
    std::fs::write(path, serde_json::to_vec_pretty(doc).expect("serialisable"))
        .map_err(|e| Failure::Other(format!("writing {}: {e}", path.display())))
}

/// One row of a request-driven workload: its figures, and the report they come from
/// (histograms included, so rows of several runs or ranks can be merged and compared).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpsRow {
    pub workload: String,
    pub client: String,
    /// Requests in flight (checkpoint: ranks).
    pub concurrency: usize,
    /// The object sizes (`SizeSpec`'s text).
    pub size: String,
    pub mb_per_s: f64,
    pub req_per_s: f64,
    /// `None` where no bytes moved (stat, list, delete).
    pub cpu_s_per_gb: Option<f64>,
    pub cpu_us_per_req: f64,
    pub peak_rss_mb: f64,
    pub latency: Option<Percentiles>,
    pub ttfb: Option<Percentiles>,
    pub errors: BTreeMap<String, u64>,
    /// For an MLPerf preset: accelerators this rate keeps at the workload's minimum AU.
    pub accelerators: Vec<(String, u64)>,
    pub report: OpsReport,
}

impl OpsRow {
    pub fn new(
        client: &str,
        concurrency: usize,
        size: &str,
        preset: Option<Preset>,
        report: OpsReport,
    ) -> Self {
        let secs = report.seconds.max(1e-9);
        let (bytes, reqs) = (report.bytes(), report.ok() + report.failed());
        let mb_per_s = mb_per_sec(bytes, secs);
        // A checkpoint's rate is not a training read rate: no accelerators column.
        let reads = !report.workload.starts_with("checkpoint") && report.workload != "put";
        Self {
            workload: report.workload.clone(),
            client: client.to_owned(),
            concurrency,
            size: size.to_owned(),
            mb_per_s,
            req_per_s: reqs as f64 / secs,
            cpu_s_per_gb: (bytes > 0).then(|| cpu_s_per_gb(report.cpu_seconds, bytes)),
            cpu_us_per_req: report.cpu_seconds * 1e6 / reqs.max(1) as f64,
            peak_rss_mb: report.peak_rss_bytes as f64 / MB,
            latency: report.latency(),
            ttfb: report.ttfb(),
            errors: report.errors(),
            accelerators: preset
                .filter(|_| reads)
                .map(|p| {
                    p.accelerators_fed(mb_per_s)
                        .into_iter()
                        .map(|(n, c)| (n.to_owned(), c))
                        .collect()
                })
                .unwrap_or_default(),
            report,
        }
    }

    /// The row's figure: megabytes a second where bytes move, else requests a second.
    pub fn figure(&self) -> f64 {
        if self.report.bytes() > 0 {
            self.mb_per_s
        } else {
            self.req_per_s
        }
    }
}

pub(super) fn print_ops_table(rows: &[OpsRow]) {
    println!(
        "{:<17} {:<11} {:>5} {:>9} {:>9} {:>8} {:>10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}  fed (AU)",
        "workload",
        "client",
        "conc",
        "MB/s",
        "req/s",
        "CPU-s/GB",
        "CPU-us/req",
        "RSS MB",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "ttfb p50",
        "ttfb p99",
        "failed"
    );
    let ms = |p: Option<Percentiles>, f: fn(&Percentiles) -> f64| {
        p.map_or("-".to_owned(), |p| format!("{:.2}", f(&p)))
    };
    for r in rows {
        let fed: Vec<String> = r
            .accelerators
            .iter()
            .map(|(n, c)| format!("{c} {n}"))
            .collect();
        println!(
            "{:<17} {:<11} {:>5} {:>9} {:>9.0} {:>8} {:>10.1} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}  {}",
            r.workload,
            r.client,
            r.concurrency,
            if r.report.bytes() > 0 {
                format!("{:.1}", r.mb_per_s)
            } else {
                "-".into()
            },
            r.req_per_s,
            r.cpu_s_per_gb.map_or("-".into(), |c| format!("{c:.3}")),
            r.cpu_us_per_req,
            if r.peak_rss_mb > 0.0 {
                format!("{:.0}", r.peak_rss_mb)
            } else {
                "-".into()
            },
            ms(r.latency, |p| p.p50_ms),
            ms(r.latency, |p| p.p90_ms),
            ms(r.latency, |p| p.p99_ms),
            ms(r.latency, |p| p.p999_ms),
            ms(r.latency, |p| p.max_ms),
            ms(r.ttfb, |p| p.p50_ms),
            ms(r.ttfb, |p| p.p99_ms),
            r.report.failed(),
            if fed.is_empty() {
                "-".into()
            } else {
                fed.join(", ")
            },
        );
    }
    // What the columns cannot hold: each kind of a mixed load, failures and retries by
    // kind, runs that ended early.
    for r in rows {
        let who = format!("  {} {} x{}:", r.workload, r.client, r.concurrency);
        if r.report.ops.len() > 1 {
            for (op, s) in &r.report.ops {
                let p = s.latency.percentiles();
                println!(
                    "{who} {}: {} ok, {:.0} req/s, p50 {} ms, p99 {} ms",
                    op.name(),
                    s.ok,
                    s.ok as f64 / r.report.seconds.max(1e-9),
                    ms(p, |p| p.p50_ms),
                    ms(p, |p| p.p99_ms),
                );
            }
        }
        for (kind, n) in &r.errors {
            println!("{who} {n} failed: {kind}");
        }
        for (kind, n) in &r.report.retries {
            println!("{who} {n} retried: {kind}");
        }
        if r.report.ranks > 1 {
            println!("{who} {} ranks together", r.report.ranks);
        }
        match r.report.stopped {
            Stopped::Duration | Stopped::Count => {}
            Stopped::Autoterm => println!(
                "{who} stopped after {:.0} s: throughput steady (--autoterm)",
                r.report.seconds
            ),
            Stopped::Errors => println!("{who} stopped: too many requests failed"),
            Stopped::Interrupted => println!("{who} interrupted"),
        }
    }
}

impl Row {
    /// Adds the row another MPI rank measured at the same time: bytes and CPU add up, the
    /// slowest rank's time is the row's.
    pub fn merge(&mut self, o: &Row) {
        let cpu = self.cpu_s_per_gb * self.bytes as f64 / GB + o.cpu_s_per_gb * o.bytes as f64 / GB;
        self.processes += o.processes;
        self.bytes += o.bytes;
        self.seconds = self.seconds.max(o.seconds);
        self.mb_per_s = mb_per_sec(self.bytes, self.seconds);
        self.batch_gap_max_ms = self.batch_gap_max_ms.max(o.batch_gap_max_ms);
        self.cpu_s_per_gb = cpu_s_per_gb(cpu, self.bytes);
        self.peak_rss_mb = self.peak_rss_mb.max(o.peak_rss_mb);
        self.first_epoch_mb_per_s = match (self.first_epoch_mb_per_s, o.first_epoch_mb_per_s) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.endpoints = EndpointCount::sum(self.endpoints.drain(..).chain(o.endpoints.clone()));
        self.in_flight = InFlight::sum(self.in_flight.into_iter().chain(o.in_flight));
        match (&mut self.latency, &o.latency) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.latency = Some(theirs.clone()),
            (_, None) => {}
        }
    }

    /// `latency` of a histogram; none when it is empty.
    pub fn with_latency(mut self, latency: Latency) -> Self {
        self.latency = Timed::of(latency);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(bytes: u64, latencies_ms: &[u64]) -> Row {
        let mut latency = Latency::default();
        for ms in latencies_ms {
            latency.record(Duration::from_millis(*ms));
        }
        Row {
            client: "hyper".into(),
            processes: 1,
            prefetch: Prefetch::Fixed(4),
            bytes,
            seconds: 1.0,
            mb_per_s: mb_per_sec(bytes, 1.0),
            per_process_mb_per_s: mb_per_sec(bytes, 1.0),
            batch_gap_p50_ms: 0.0,
            batch_gap_max_ms: 0.0,
            cpu_s_per_gb: 0.5,
            peak_rss_mb: 10.0,
            first_epoch_mb_per_s: None,
            endpoints: Vec::new(),
            in_flight: None,
            accelerators: Vec::new(),
            latency: None,
        }
        .with_latency(latency)
    }

    #[test]
    fn ranks_merge_their_object_latencies_exactly() {
        let mut a = row(1_000_000, &[10, 20]);
        a.merge(&row(1_000_000, &[30, 400]));
        assert_eq!(a.processes, 2);
        let p = a.latency.as_ref().unwrap().percentiles();
        assert!((p.max_ms - 400.0).abs() < 1.0, "{p:?}");
        assert!((p.p50_ms - 20.0).abs() < 1.0, "{p:?}");
        // A rank that timed nothing takes the other's histogram as it is.
        let mut empty = row(0, &[]);
        assert!(empty.latency.is_none());
        empty.merge(&a);
        assert_eq!(empty.latency.unwrap().percentiles(), p);
    }

    #[test]
    fn a_rows_json_keeps_its_fields_and_reads_back_from_the_histogram() {
        let a = row(1_000_000, &[10, 20, 30]);
        let json: serde_json::Value = serde_json::to_value(&a).unwrap();
        assert!((json["latency"]["p99_ms"].as_f64().unwrap() - 30.0).abs() < 1.0);
        assert!(json["latency_us"].is_array(), "{json}");
        // Percentiles that disagree with the histogram are not believed.
        let mut edited = json.clone();
        edited["latency"]["p99_ms"] = 999.0.into();
        let back: Row = serde_json::from_value(edited).unwrap();
        assert_eq!(
            back.latency.unwrap().percentiles(),
            a.latency.as_ref().unwrap().percentiles()
        );
        // A row that timed nothing has neither field, and reads back so.
        let none = serde_json::to_value(row(0, &[])).unwrap();
        assert!(none.get("latency").is_none() && none.get("latency_us").is_none());
        let back: Row = serde_json::from_value(none).unwrap();
        assert!(back.latency.is_none());
    }
}
