//! `sluice bench compare A.json B.json`: each row of B beside the same row of A (same
//! workload, client and shape or concurrency), with the change of its figure and a `*` where
//! the change is beyond run-to-run noise.
//!
//! The rule: where both rows carry at least `MIN_SECONDS` per-second figures (the
//! request-driven workloads), a change is marked when it exceeds twice the standard error
//! of the difference of the two means (Welch; about 95% confidence that the runs differ)
//! and also `MIN_CHANGE_PCT`. Rows without them (get shapes, curl) are single
//! measurements: a change is marked beyond `SINGLE_RUN_PCT`, the spread of repeated
//! `sluice bench` runs on one machine.

use super::report::{OpsRow, Row};
use sluice_console::output::Failure;
use std::path::Path;

const MIN_SECONDS: usize = 3;
const MIN_CHANGE_PCT: f64 = 2.0;
const SINGLE_RUN_PCT: f64 = 5.0;

/// One comparable row: its key, figure, unit, per-second figures, p99 latency.
struct Point {
    key: String,
    figure: f64,
    unit: &'static str,
    per_second: Vec<f64>,
    p99_ms: Option<f64>,
}

fn load(path: &Path) -> Result<Vec<Point>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("{}: {e}", path.display())))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{}: not JSON: {e}", path.display())))?;
    let bad = |e: serde_json::Error| {
        Failure::Usage(format!(
            "{}: not the JSON of `sluice bench --json`: {e}",
            path.display()
        ))
    };
    let rows: Vec<Row> = match doc.get("rows") {
        Some(v) => serde_json::from_value(v.clone()).map_err(bad)?,
        None => {
            return Err(Failure::Usage(format!(
                "{}: not the JSON of `sluice bench --json` (no \"rows\")",
                path.display()
            )));
        }
    };
    let ops: Vec<OpsRow> = match doc.get("ops_rows") {
        Some(v) => serde_json::from_value(v.clone()).map_err(bad)?,
        None => Vec::new(),
    };
    let mut points: Vec<Point> = rows
        .iter()
        .map(|r| Point {
            key: format!("get {} {}x{}", r.client, r.processes, r.prefetch),
            figure: r.mb_per_s,
            unit: "MB/s",
            per_second: Vec::new(),
            p99_ms: None,
        })
        .collect();
    points.extend(ops.iter().map(|r| Point {
        key: format!("{} {} x{}", r.workload, r.client, r.concurrency),
        figure: r.figure(),
        unit: if r.report.bytes() > 0 {
            "MB/s"
        } else {
            "req/s"
        },
        per_second: r.report.per_second.clone(),
        p99_ms: r.latency.map(|l| l.p99_ms),
    }));
    Ok(points)
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var)
}

/// Whether the change from `a` to `b` is beyond noise (the module's rule).
fn beyond_noise(a: &Point, b: &Point) -> bool {
    let change_pct = 100.0 * (b.figure - a.figure).abs() / a.figure.abs().max(1e-9);
    if a.per_second.len() >= MIN_SECONDS && b.per_second.len() >= MIN_SECONDS {
        let (ma, va) = mean_var(&a.per_second);
        let (mb, vb) = mean_var(&b.per_second);
        let se = (va / a.per_second.len() as f64 + vb / b.per_second.len() as f64).sqrt();
        (mb - ma).abs() > 2.0 * se && change_pct >= MIN_CHANGE_PCT
    } else {
        change_pct > SINGLE_RUN_PCT
    }
}

pub fn run(a: &Path, b: &Path) -> Result<(), Failure> {
    let (pa, pb) = (load(a)?, load(b)?);
    println!(
        "{:<40} {:>11} {:>11} {:<5} {:>8}  {:<6} {:>17}",
        "row", "A", "B", "", "change", "", "p99 ms A -> B"
    );
    for p in &pb {
        let Some(q) = pa.iter().find(|q| q.key == p.key) else {
            println!("{:<40} only in B", p.key);
            continue;
        };
        let change = 100.0 * (p.figure - q.figure) / q.figure.abs().max(1e-9);
        let p99 = match (q.p99_ms, p.p99_ms) {
            (Some(x), Some(y)) => format!("{x:.2} -> {y:.2}"),
            _ => "-".into(),
        };
        println!(
            "{:<40} {:>11.1} {:>11.1} {:<5} {:>+7.1}%  {:<6} {:>17}",
            p.key,
            q.figure,
            p.figure,
            p.unit,
            change,
            if beyond_noise(q, p) { "*" } else { "" },
            p99
        );
    }
    for q in pa.iter().filter(|q| !pb.iter().any(|p| p.key == q.key)) {
        println!("{:<40} only in A", q.key);
    }
    println!(
        "* beyond run-to-run noise: with per-second figures, a change above twice the \
         standard error of the difference and above {MIN_CHANGE_PCT}%; without, above \
         {SINGLE_RUN_PCT}%"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(figure: f64, per_second: Vec<f64>) -> Point {
        Point {
            key: "k".into(),
            figure,
            unit: "MB/s",
            per_second,
            p99_ms: None,
        }
    }

    #[test]
    fn noise_rule_marks_only_real_changes() {
        // Noisy seconds: a 4% change in the means is within twice the standard error.
        let a = point(100.0, vec![80.0, 120.0, 95.0, 105.0, 100.0]);
        let b = point(104.0, vec![84.0, 124.0, 99.0, 109.0, 104.0]);
        assert!(!beyond_noise(&a, &b));
        // Steady seconds: the same change is real.
        let a = point(100.0, vec![100.0, 101.0, 99.0, 100.0, 100.0]);
        let b = point(104.0, vec![104.0, 105.0, 103.0, 104.0, 104.0]);
        assert!(beyond_noise(&a, &b));
        // Steady but tiny: below the 2% floor.
        let b = point(101.0, vec![101.0, 101.0, 101.0, 101.0, 101.0]);
        let a = point(100.0, vec![100.0, 100.0, 100.0, 100.0, 100.0]);
        assert!(!beyond_noise(&a, &b));
        // Single measurements: 5%.
        assert!(!beyond_noise(&point(100.0, vec![]), &point(104.0, vec![])));
        assert!(beyond_noise(&point(100.0, vec![]), &point(94.0, vec![])));
    }
}
