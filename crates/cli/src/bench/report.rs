//! The bench's results: one row per client and shape, printed as a table.

use crate::output::{Failure, MB};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub client: String,
    pub processes: usize,
    pub prefetch: usize,
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointCount>,
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
        "{:<12} {:>5} {:>8} {:>9} {:>11} {:>10} {:>10} {:>9} {:>9} {:>11}",
        "client",
        "procs",
        "prefetch",
        "MB/s",
        "MB/s/proc",
        "gap p50ms",
        "gap maxms",
        "CPU-s/GB",
        "RSS MB",
        "1st pass"
    );
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
            "{:<12} {:>5} {:>8} {:>9.0} {:>11.0} {:>10} {:>10} {:>9.3} {:>9} {:>11}",
            r.client,
            r.processes,
            r.prefetch,
            r.mb_per_s,
            r.per_process_mb_per_s,
            or_dash(r.batch_gap_p50_ms, 1),
            or_dash(r.batch_gap_max_ms, 1),
            r.cpu_s_per_gb,
            or_dash(r.peak_rss_mb, 0),
            r.first_epoch_mb_per_s
                .map_or("-".into(), |m| format!("{m:.0}"))
        );
    }
    for r in rows {
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
