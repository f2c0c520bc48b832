//! `sluice bench`: the A/B benchmark. Reader shapes of the MLPerf Storage workload
//! (processes × prefetch, each worker a real process reading its shard in batches of 7),
//! for each backend, beside a `curl` reference reading the same objects.

use crate::output::{Failure, process_cpu_seconds};
use crate::{StoreArgs, rusage};
use clap::Args;
use serde::{Deserialize, Serialize};
use sluice_core::{ObjectUri, StoreConfig};
use sluice_loader::{Dataset, Item, Loader, LoaderOptions, Sharding};
use sluice_testserver::{DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BATCH: usize = 7;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Read this existing prefix instead of starting a server and generating a dataset
    #[arg(long)]
    uri: Option<String>,
    /// Records to generate on the embedded server
    #[arg(long, default_value_t = 24)]
    count: usize,
    /// Size of each generated record (unet3d's mean: 146600628)
    #[arg(long, default_value = "146600628", value_parser = crate::serve::parse_size)]
    size: u64,
    /// Reader shapes, processes x prefetch
    #[arg(long, value_delimiter = ',', default_value = "1x16,4x4,8x4,16x4")]
    shapes: Vec<String>,
    /// Backends to compare [default: every compiled one]
    #[arg(long, value_delimiter = ',')]
    backends: Vec<String>,
    /// Passes over the dataset per worker; the table reports the last (buffers warm)
    #[arg(long, default_value_t = 2)]
    epochs: u32,
    /// Skip the curl reference row
    #[arg(long)]
    no_curl: bool,
    /// Use the embedded server's https endpoint
    #[arg(long)]
    https: bool,
    /// Put the server on CPU 0 and the clients on the other CPUs (taskset)
    #[arg(long)]
    pin: bool,
    /// Write the results as JSON here
    #[arg(long = "json", value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Draw throughput by shape and backend into this SVG
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

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
}

fn parse_shape(s: &str) -> Result<(usize, usize), Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--shapes: {s:?} is not PROCESSESxPREFETCH, e.g. 4x4"
        ))
    };
    let (p, f) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let (p, f): (usize, usize) = (p.parse().map_err(|_| bad())?, f.parse().map_err(|_| bad())?);
    if p == 0 || f == 0 {
        return Err(bad());
    }
    Ok((p, f))
}

/// The embedded server, a child process killed on drop.
struct Server {
    child: Child,
    http: String,
    https: String,
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn start_server(pin: bool) -> Result<Server, Failure> {
    let dir = tempfile::tempdir().map_err(|e| Failure::Other(format!("temp dir: {e}")))?;
    let ca = dir.path().join("ca.pem");
    let port = |l: std::net::TcpListener| l.local_addr().map(|a| a.port()).unwrap_or(0);
    let http = port(
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Failure::Other(e.to_string()))?,
    );
    let https = port(
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Failure::Other(e.to_string()))?,
    );
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Other(format!("cannot find the sluice binary: {e}")))?;
    let mut cmd = pinned(pin.then_some("0"), &exe);
    cmd.args([
        "serve",
        "--addr",
        &format!("127.0.0.1:{http}"),
        "--https-addr",
        &format!("127.0.0.1:{https}"),
        "--ca-out",
    ])
    .arg(&ca)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::Other(format!("cannot start `sluice serve`: {e}")))?;
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line)
            .map_err(|e| Failure::Other(format!("reading the server's output: {e}")))?;
        if n == 0 {
            return Err(Failure::Other(
                "`sluice serve` exited before it was ready".into(),
            ));
        }
        if line.trim() == "ready" {
            break;
        }
    }
    // Keep draining so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Ok(Server {
        child,
        http: format!("http://127.0.0.1:{http}"),
        https: format!("https://localhost:{https}"),
        ca,
        _dir: dir,
    })
}

/// A command, under `taskset -c CPUS` when pinning.
fn pinned(cpus: Option<&str>, program: &Path) -> Command {
    match cpus {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(c).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

fn client_cpus(pin: bool) -> Option<String> {
    if !pin {
        return None;
    }
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    Some(if n <= 2 {
        "1".to_string()
    } else {
        format!("1-{}", n - 1)
    })
}

pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    let shapes: Vec<(usize, usize)> = a
        .shapes
        .iter()
        .map(|s| parse_shape(s))
        .collect::<Result<_, _>>()?;
    let backends: Vec<String> = if a.backends.is_empty() {
        sluice::registry::compiled()
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.backends.clone()
    };
    for b in &backends {
        if !sluice::registry::compiled().contains(&b.as_str()) {
            return Err(sluice_core::Error::config(
                "--backends",
                format!(
                    "backend {b:?} is not in this build; available: {}",
                    sluice::registry::compiled().join(", ")
                ),
            )
            .into());
        }
    }
    if a.pin && which("taskset").is_none() {
        return Err(Failure::Usage("--pin needs `taskset` (util-linux)".into()));
    }

    // The store: an embedded server with a generated dataset, or the one given.
    let (server, store_args, prefix) = match &a.uri {
        Some(u) => (None, a.store.clone(), ObjectUri::parse(u)?),
        None => {
            let server = start_server(a.pin)?;
            let mut s = a.store.clone();
            s.endpoint = Some(if a.https {
                server.https.clone()
            } else {
                server.http.clone()
            });
            s.ca_bundle = Some(server.ca.clone());
            (
                Some(server),
                s,
                ObjectUri::parse("s3://sluice-test/bench/")?,
            )
        }
    };
    // The embedded server takes its published test keys; a real store, the environment's.
    let keys = server.as_ref().map(|_| {
        (
            DEFAULT_ACCESS_KEY.to_string(),
            DEFAULT_SECRET_KEY.to_string(),
        )
    });
    let mut cfg = store_args.config().await?;
    if let Some((ak, sk)) = &keys {
        cfg.credentials = sluice_core::CredentialsCache::from_static(ak, sk, None);
    }
    let store = sluice::registry::open(store_args.backend.as_deref(), cfg.clone())?;
    if server.is_some() {
        eprintln!(
            "generating {} records of {} bytes under {prefix} ...",
            a.count, a.size
        );
        crate::objects::write_dataset(store.clone(), &prefix, a.count, a.size, 4, true).await?;
    }
    let dataset = Dataset::from_prefix(store.as_ref(), &prefix, None).await?;
    if dataset.is_empty() {
        return Err(sluice_core::Error::NotFound {
            uri: prefix.to_string(),
            code: "no objects to read".into(),
        }
        .into());
    }
    let total: u64 = dataset.items().iter().filter_map(|i| i.size).sum();
    let list = tempfile::NamedTempFile::new().map_err(|e| Failure::Other(e.to_string()))?;
    {
        let mut f = std::io::BufWriter::new(list.as_file());
        for i in dataset.items() {
            writeln!(f, "{}\t{}", i.uri, i.size.unwrap_or(0))
                .map_err(|e| Failure::Other(e.to_string()))?;
        }
    }
    let endpoint = store_args
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    let cpus = client_cpus(a.pin);

    let mut rows = Vec::new();
    if !a.no_curl {
        match endpoint.as_deref() {
            Some(ep) if which("curl").is_some() => rows
                .push(curl_row(ep, &cfg, keys.as_ref(), &dataset, total, cpus.as_deref()).await?),
            _ => eprintln!("skipping the curl row: curl or an endpoint URL is missing"),
        }
    }
    for backend in &backends {
        for &(procs, prefetch) in &shapes {
            eprintln!("{backend}: {procs} process(es) x prefetch {prefetch} ...");
            rows.push(worker_row(
                backend,
                procs,
                prefetch,
                a.epochs,
                &store_args,
                keys.as_ref(),
                list.path(),
                cpus.as_deref(),
            )?);
        }
    }
    drop(server);

    print_table(&rows);
    if let Some(p) = &a.json_out {
        let doc = serde_json::json!({"objects": dataset.len(), "bytes_per_pass": total, "pinned": a.pin, "https": a.https, "rows": rows});
        std::fs::write(p, serde_json::to_vec_pretty(&doc).expect("serialisable"))
            .map_err(|e| Failure::Other(format!("writing {}: {e}", p.display())))?;
    }
    if let Some(p) = &a.plot {
        crate::plot::throughput(p, &rows)
            .map_err(|e| Failure::Other(format!("drawing {}: {e}", p.display())))?;
    }
    Ok(())
}

fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(cmd))
            .find(|f| f.is_file())
    })
}

async fn curl_row(
    endpoint: &str,
    cfg: &StoreConfig,
    keys: Option<&(String, String)>,
    dataset: &Dataset,
    total: u64,
    cpus: Option<&str>,
) -> Result<Row, Failure> {
    eprintln!("curl: 1 process, one object after another ...");
    let (ak, sk) = match keys {
        Some((a, s)) => (a.clone(), s.clone()),
        None => match cfg.credentials.get(endpoint).await? {
            Some(c) => (
                c.access_key_id().to_owned(),
                c.secret_access_key().to_owned(),
            ),
            None => (String::new(), String::new()),
        },
    };
    let ca = cfg.ca_bundle.as_deref();
    let mut cmd = pinned(cpus, Path::new("curl"));
    let region = &cfg.region;
    cmd.args([
        "--http1.1",
        "-sS",
        "--fail",
        "--aws-sigv4",
        &format!("aws:amz:{region}:s3"),
        "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
    ]);
    // Credentials go to curl on its standard input (`-K -`), never on its command line,
    // where any user of the machine could read them in the process list.
    cmd.args(["-K", "-"]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    let base = endpoint.trim_end_matches('/');
    for item in dataset.items() {
        cmd.args(["-o", "/dev/null"]).arg(format!(
            "{base}/{}/{}",
            item.uri.bucket(),
            item.uri.key()
        ));
    }
    let before = rusage::children();
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
    {
        use std::io::Write;
        let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
        let mut stdin = child.stdin.take().expect("stdin was piped");
        writeln!(stdin, "user = \"{}:{}\"", quote(&ak), quote(&sk))
            .map_err(|e| Failure::Other(format!("passing credentials to curl: {e}")))?;
    }
    let status = child
        .wait()
        .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
    let secs = t0.elapsed().as_secs_f64();
    if !status.success() {
        return Err(Failure::Other(format!("curl failed: {status}")));
    }
    let after = rusage::children();
    let mb = total as f64 / 1e6 / secs;
    Ok(Row {
        client: "curl".into(),
        processes: 1,
        prefetch: 1,
        bytes: total,
        seconds: secs,
        mb_per_s: mb,
        per_process_mb_per_s: mb,
        batch_gap_p50_ms: 0.0,
        batch_gap_max_ms: 0.0,
        cpu_s_per_gb: (after.cpu_seconds - before.cpu_seconds) / (total as f64 / 1e9),
        // RUSAGE_CHILDREN's peak is the largest of every child so far, not curl's own.
        peak_rss_mb: 0.0,
        first_epoch_mb_per_s: None,
    })
}

/// What one worker process reports (one JSON line per epoch, then a summary).
#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerEpoch {
    epoch: u32,
    bytes: u64,
    seconds: f64,
    gap_p50_ms: f64,
    gap_max_ms: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WorkerDone {
    cpu_seconds: f64,
    peak_rss_bytes: u64,
}

#[allow(clippy::too_many_arguments)]
fn worker_row(
    backend: &str,
    procs: usize,
    prefetch: usize,
    epochs: u32,
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
            &rank.to_string(),
            "--world",
            &procs.to_string(),
            "--prefetch",
            &prefetch.to_string(),
            "--epochs",
            &epochs.to_string(),
            "--backend",
            backend,
        ]);
        if let Some(e) = &store.endpoint {
            cmd.args(["--endpoint", e]);
        }
        if let Some(r) = &store.region {
            cmd.args(["--region", r]);
        }
        if let Some(c) = &store.ca_bundle {
            cmd.arg("--ca-bundle").arg(c);
        }
        if let Some((ak, sk)) = keys {
            cmd.env("AWS_ACCESS_KEY_ID", ak)
                .env("AWS_SECRET_ACCESS_KEY", sk)
                .env_remove("AWS_SESSION_TOKEN");
        }
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
        b as f64 / 1e6 / s.max(1e-9)
    });
    let gaps: Vec<&WorkerEpoch> = per_epoch.iter().filter_map(|w| w.last()).collect();
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
        mb_per_s: bytes_last as f64 / 1e6 / secs_last.max(1e-9),
        per_process_mb_per_s: median(
            per_epoch
                .iter()
                .map(|w| {
                    let (b, s) = last(w);
                    b as f64 / 1e6 / s.max(1e-9)
                })
                .collect(),
        ),
        batch_gap_p50_ms: median(gaps.iter().map(|g| g.gap_p50_ms).collect()),
        batch_gap_max_ms: gaps.iter().map(|g| g.gap_max_ms).fold(0.0, f64::max),
        cpu_s_per_gb: cpu / (all_bytes as f64 / 1e9).max(1e-9),
        peak_rss_mb: dones.iter().map(|d| d.peak_rss_bytes).max().unwrap_or(0) as f64 / 1e6,
        first_epoch_mb_per_s: first,
    })
}

fn print_table(rows: &[Row]) {
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
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Dataset file: one `URI<TAB>size` per line
    #[arg(long)]
    list: PathBuf,
    #[arg(long)]
    rank: usize,
    #[arg(long)]
    world: usize,
    #[arg(long)]
    prefetch: usize,
    #[arg(long, default_value_t = 1)]
    epochs: u32,
    #[command(flatten)]
    store: StoreArgs,
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
    let store = a.store.open().await?;
    let cpu0 = process_cpu_seconds().unwrap_or(0.0);
    for epoch in 0..a.epochs.max(1) {
        let opts = LoaderOptions {
            prefetch: a.prefetch,
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
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let line = WorkerEpoch {
            epoch,
            bytes,
            seconds: s.elapsed.as_secs_f64(),
            gap_p50_ms: ms(s.batch_gap_p50),
            gap_max_ms: ms(s.batch_gap_max),
        };
        println!("{}", serde_json::to_string(&line).expect("serialisable"));
    }
    let done = WorkerDone {
        cpu_seconds: process_cpu_seconds().unwrap_or(0.0) - cpu0,
        peak_rss_bytes: peak_rss_bytes(),
    };
    println!("{}", serde_json::to_string(&done).expect("serialisable"));
    Ok(())
}

/// VmHWM from /proc/self/status.
fn peak_rss_bytes() -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_reject_nonsense() {
        assert_eq!(parse_shape("4x4").unwrap(), (4, 4));
        assert_eq!(parse_shape(" 16X2 ").unwrap(), (16, 2));
        for bad in ["4", "0x4", "ax4", "4x0", ""] {
            assert!(parse_shape(bad).is_err(), "{bad}");
        }
    }
}
