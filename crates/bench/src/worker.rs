//! The bench's worker processes: each reads its shard like a DataLoader worker (batches
//! of 7) and reports one JSON line per epoch, then its CPU time and peak RSS; `worker_row`
//! starts them and sums their reports into a row.

use super::args::{Prefetch, WorkerArgs};
use super::latency::Latency;
use super::report::{EndpointCount, InFlight, Row};
use super::server::pinned;
use serde::{Deserialize, Serialize};
use sluice_console::StoreArgs;
use sluice_console::output::{Failure, MB, cpu_s_per_gb, mb_per_sec};
use sluice_console::rusage;
use sluice_core::ObjectUri;
use sluice_loader::{Dataset, Item, Loader, LoaderOptions, Sharding};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Objects per batch, as DLIO's loop takes them.
const BATCH: usize = 7;

/// What one worker process reports (one JSON line per epoch, then a summary).
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerEpoch {
    epoch: u32,
    bytes: u64,
    seconds: f64,
    gap_p50_ms: f64,
    gap_max_ms: f64,
    /// Each object's fetch time.
    #[serde(default)]
    latency: Latency,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerDone {
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    #[serde(default)]
    endpoints: Vec<EndpointCount>,
    /// The client's requests in flight at the end, and how many throttles it saw.
    #[serde(default)]
    in_flight: Option<InFlight>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn worker_row(
    backend: &str,
    // This MPI rank's first reader's place among all `world` readers of every rank.
    (first_rank, world): (usize, usize),
    procs: usize,
    prefetch: Prefetch,
    epochs: u32,
    pin_endpoint: bool,
    store: &StoreArgs,
    keys: Option<&(String, String)>,
    list: &Path,
    cpus: Option<&str>,
) -> Result<Row, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Other(e.to_string()))?;
    let before = rusage::children();
    let mut children = Vec::new();
    for rank in 0..procs {
        let mut cmd = pinned(cpus, &exe);
        cmd.args(["bench-worker", "--list"]).arg(list);
        cmd.args([
            "--rank",
            &(first_rank + rank).to_string(),
            "--world",
            &world.to_string(),
            "--prefetch",
            &prefetch.to_string(),
            "--epochs",
            &epochs.to_string(),
            "--backend",
            backend,
        ]);
        if pin_endpoint {
            cmd.arg("--pin-endpoint");
        }
        pass_store(&mut cmd, store, keys);
        children.push(
            cmd.stdout(Stdio::piped())
                .spawn()
                .map_err(|e| Failure::Other(format!("starting a worker: {e}")))?,
        );
    }
    let mut per_epoch: Vec<Vec<WorkerEpoch>> = Vec::new();
    let mut dones = Vec::new();
    for c in children {
        let out = c
            .wait_with_output()
            .map_err(|e| Failure::Other(format!("waiting for a worker: {e}")))?;
        if !out.status.success() {
            return Err(Failure::Other(format!(
                "a {backend} worker failed ({})",
                out.status
            )));
        }
        let mut epochs_seen = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Ok(e) = serde_json::from_str::<WorkerEpoch>(line) {
                epochs_seen.push(e);
            } else if let Ok(d) = serde_json::from_str::<WorkerDone>(line) {
                dones.push(d);
            }
        }
        per_epoch.push(epochs_seen);
    }
    let after = rusage::children();
    let last = |w: &Vec<WorkerEpoch>| w.last().map(|e| (e.bytes, e.seconds)).unwrap_or((0, 0.0));
    let bytes_last: u64 = per_epoch.iter().map(|w| last(w).0).sum();
    let secs_last = per_epoch.iter().map(|w| last(w).1).fold(0.0, f64::max);
    let first = (epochs > 1).then(|| {
        let b: u64 = per_epoch
            .iter()
            .filter_map(|w| w.first())
            .map(|e| e.bytes)
            .sum();
        let s = per_epoch
            .iter()
            .filter_map(|w| w.first())
            .map(|e| e.seconds)
            .fold(0.0, f64::max);
        mb_per_sec(b, s)
    });
    let gaps: Vec<&WorkerEpoch> = per_epoch.iter().filter_map(|w| w.last()).collect();
    let mut latency = Latency::default();
    for e in &gaps {
        latency.merge(&e.latency);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let all_bytes: u64 = per_epoch.iter().flatten().map(|e| e.bytes).sum();
    let cpu: f64 = dones
        .iter()
        .map(|d| d.cpu_seconds)
        .sum::<f64>()
        .max(after.cpu_seconds - before.cpu_seconds);
    Ok(Row {
        client: backend.to_string(),
        processes: procs,
        prefetch,
        bytes: bytes_last,
        seconds: secs_last,
        mb_per_s: mb_per_sec(bytes_last, secs_last),
        per_process_mb_per_s: median(
            per_epoch
                .iter()
                .map(|w| {
                    let (b, s) = last(w);
                    mb_per_sec(b, s)
                })
                .collect(),
        ),
        batch_gap_p50_ms: median(gaps.iter().map(|g| g.gap_p50_ms).collect()),
        batch_gap_max_ms: gaps.iter().map(|g| g.gap_max_ms).fold(0.0, f64::max),
        cpu_s_per_gb: cpu_s_per_gb(cpu, all_bytes),
        peak_rss_mb: dones.iter().map(|d| d.peak_rss_bytes).max().unwrap_or(0) as f64 / MB,
        first_epoch_mb_per_s: first,
        in_flight: InFlight::sum(dones.iter().filter_map(|d| d.in_flight)),
        endpoints: EndpointCount::sum(dones.into_iter().flat_map(|d| d.endpoints)),
        accelerators: Vec::new(),
        latency: None,
    }
    .with_latency(latency))
}

/// Hands a worker process the store's flags (but the backend, which each row names) and, for the embedded server, its keys (in the
/// environment, never on the command line).
pub(super) fn pass_store(
    cmd: &mut std::process::Command,
    store: &StoreArgs,
    keys: Option<&(String, String)>,
) {
    if let Some(e) = &store.endpoint {
        cmd.args(["--endpoint", e]);
    }
    if !store.endpoints.is_empty() {
        cmd.arg("--endpoints").arg(store.endpoints.join(","));
    }
    if let Some(r) = &store.region {
        cmd.args(["--region", r]);
    }
    if let Some(c) = &store.ca_bundle {
        cmd.arg("--ca-bundle").arg(c);
    }
    if let Some(p) = &store.profile {
        cmd.args(["--profile", p]);
    }
    if store.no_sign_request {
        cmd.arg("--no-sign-request");
    }
    // Each worker logs beside the run's first log (`oplog`: NAME.<pid>.EXT, or its {pid}).
    if let Some(p) = &store.op_log {
        cmd.arg("--op-log").arg(p);
    }
    if let Some((ak, sk)) = keys {
        cmd.env("AWS_ACCESS_KEY_ID", ak)
            .env("AWS_SECRET_ACCESS_KEY", sk)
            .env_remove("AWS_SESSION_TOKEN");
    }
}

/// One bench worker: reads its shard like a DataLoader worker, in batches of 7, and reports.
pub async fn worker(a: WorkerArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.list)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", a.list.display())))?;
    let mut items = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (u, s) = line
            .split_once('\t')
            .ok_or_else(|| Failure::Usage(format!("bad dataset line {line:?}")))?;
        items.push(Item {
            uri: ObjectUri::parse(u)?,
            size: s.parse().ok().filter(|n| *n > 0),
            etag: None,
        });
    }
    let dataset = Dataset::from_items(items);
    let mut cfg = a.store.config().await?;
    if a.pin_endpoint {
        cfg.pin_endpoint(a.rank);
    }
    let store = sluice::registry::open(a.store.backend.as_deref(), cfg)?;
    let cpu0 = rusage::this_process().unwrap_or(0.0);
    let (mut window, mut range_size) = (None, 0);
    for epoch in 0..a.epochs.max(1) {
        let opts = LoaderOptions {
            prefetch: a.prefetch.window(),
            sharding: Sharding {
                rank: a.rank,
                world_size: a.world,
                ..Default::default()
            },
            epoch: u64::from(epoch),
            ..Default::default()
        };
        let mut loader = Loader::new(store.clone(), &dataset, opts)?;
        let mut bytes = 0u64;
        loop {
            let batch = loader.collect_batch(BATCH).await;
            if batch.is_empty() {
                break;
            }
            for item in batch {
                bytes += item?.data.len() as u64; // DLIO only looks at len()
            }
        }
        let s = loader.stats();
        window = Some(s.window);
        range_size = s.range_size;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let line = WorkerEpoch {
            epoch,
            bytes,
            seconds: s.elapsed.as_secs_f64(),
            gap_p50_ms: ms(s.batch_gap_p50),
            gap_max_ms: ms(s.batch_gap_max),
            latency: Latency::of(&loader.latency_histogram()),
        };
        println!("{}", serde_json::to_string(&line).expect("serialisable"));
    }
    let done = WorkerDone {
        cpu_seconds: rusage::this_process().unwrap_or(0.0) - cpu0,
        peak_rss_bytes: peak_rss_bytes(),
        endpoints: store
            .endpoint_stats()
            .into_iter()
            .map(|e| EndpointCount {
                url: e.url.to_string(),
                requests: e.requests,
                failures: e.failures,
                bytes_read: e.bytes_read,
            })
            .collect(),
        in_flight: store.congestion().map(|c| InFlight {
            requests: c.limit,
            adaptive: c.adaptive,
            throttled: c.throttled,
            window: window.unwrap_or(0),
            range_size,
            last: c.last,
        }),
    };
    println!("{}", serde_json::to_string(&done).expect("serialisable"));
    Ok(())
}

/// VmHWM from /proc/self/status.
pub(super) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
