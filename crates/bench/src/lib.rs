//! `sluice bench`: the A/B benchmark of client stacks, one family of rows per workload.
//! `get`: the MLPerf reader shapes (processes × prefetch, each worker a real process
//! reading its shard in batches of 7) beside a `curl` reference. The request-driven
//! workloads (put, small, stat, list, delete, mixed, checkpoint) run in a worker process
//! per row (`engine`), beside curl where curl can make the requests (GET, PUT).
//!
//! `args`: command lines; `plan`: the validated run; `server`: the embedded server and CPU
//! pinning; `worker`: the get workers; `engine`: the request-driven workers; `ops`: their
//! reports; `latency`: histograms; `sizes`: sizes and the MLPerf presets; `curl`: the
//! reference rows; `ranks`: MPI; `report`: tables; `plot`: SVGs; `compare`: two runs.

mod args;
mod compare;
mod curl;
mod engine;
mod latency;
mod ops;
mod plan;
mod plot;
mod ranks;
mod replay;
mod report;
mod server;
mod sizes;
mod worker;
mod workload;

pub use args::{BenchArgs, WorkerArgs};
pub use engine::{OpsArgs, run as ops_worker};
pub use worker::worker;

use args::BenchCmd;
use curl::CurlTarget;
use ops::{OpsReport, Stopped};
use plan::Plan;
use ranks::Ranks;
use report::{OpsRow, Row};
use server::{client_cpus, pinned, start_server, which};
use sizes::{Preset, SizeSpec};
use sluice_console::StoreArgs;
use sluice_console::output::Failure;
use sluice_core::ObjectStoreExt;
use sluice_core::listing::ListOptions;
use sluice_core::{ObjectStore, ObjectUri, StoreConfig};
use sluice_loader::Dataset;
use sluice_testserver::{DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY};
use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use workload::{Op, Workload};

/// Where the run goes and how to reach it.
struct Target {
    store_args: StoreArgs,
    cfg: StoreConfig,
    store: Arc<dyn ObjectStore>,
    /// The embedded server's keys (a real store uses the environment's).
    keys: Option<(String, String)>,
    /// get reads this prefix's objects.
    dataset: ObjectUri,
    /// This rank's writes go under this prefix (its own, under the run's).
    scratch: ObjectUri,
    /// curl's endpoint, when one is known.
    endpoint: Option<String>,
    cpus: Option<String>,
}

pub async fn run(a: BenchArgs) -> Result<(), Failure> {
    if let Some(BenchCmd::Compare { a: x, b: y }) = &a.cmd {
        return compare::run(x, y);
    }
    let plan = Plan::new(&a)?;
    let ranks = Ranks::init()?;
    // Ctrl-C: rows stop, what they wrote is deleted (the workers see the signal too), the
    // figures so far are printed.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
    }
    // The embedded server lives on rank 0; every rank reaches it at the address broadcast.
    let server = match (&a.uri, ranks.is_root()) {
        (None, true) => Some(start_server(a.pin, &a.server_profile)?),
        _ => None,
    };
    let shared = ranks.broadcast(match &server {
        Some(s) => format!(
            "{}\t{}\t{}",
            if a.https { &s.https } else { &s.http },
            s.ca.display(),
            run_id()
        ),
        None => format!("\t\t{}", run_id()),
    });
    let mut parts = shared.split('\t');
    let (endpoint, ca, id) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let target = target(&a, &ranks, endpoint, ca, id).await?;

    let mut get_rows = Vec::new();
    let mut ops_rows = Vec::new();
    let mut failure = None;
    // A replay runs on the first rank alone.
    if !a.replay.is_empty() && ranks.is_root() {
        match replay_rows(&a, &plan, &target).await {
            Ok(rows) => ops_rows = rows,
            Err(e) => failure = Some(e),
        }
    }
    let workloads = if a.replay.is_empty() {
        &plan.workloads[..]
    } else {
        &[]
    };
    for &w in workloads {
        if interrupted.load(Ordering::SeqCst) {
            break;
        }
        let result = if w == Workload::Get {
            get_workload(&a, &plan, &ranks, &target)
                .await
                .map(|rows| get_rows.extend(rows))
        } else {
            ops_workload(&a, &plan, w, &ranks, &target, &interrupted)
                .await
                .map(|rows| ops_rows.extend(rows))
        };
        if let Err(e) = result {
            failure = Some(e);
            break;
        }
    }
    drop(server);
    if !ranks.is_root() {
        return failure.map_or(Ok(()), Err);
    }

    if !get_rows.is_empty() {
        report::print_table(&get_rows);
    }
    if !ops_rows.is_empty() {
        if !get_rows.is_empty() {
            println!();
        }
        report::print_ops_table(&ops_rows);
    }
    if let Some(p) = &a.json_out {
        let doc = serde_json::json!({
            "environment": environment(&a, &target, &ranks),
            "workloads": plan.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
            "preset": plan.preset.map(Preset::name),
            "pinned": a.pin,
            "https": a.https,
            "rows": get_rows,
            "ops_rows": ops_rows,
        });
        report::write_json(p, &doc)?;
    }
    if let Some(p) = &a.plot {
        plot::workloads(p, &get_rows, &ops_rows)
            .map_err(|e| Failure::Other(format!("drawing {}: {e}", p.display())))?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(r) = ops_rows
        .iter()
        .find(|r| r.report.stopped == Stopped::Errors)
    {
        return Err(Failure::Other(format!(
            "{} {} x{}: more than {}% of requests failed ({} of {}); figures so far above",
            r.workload,
            r.client,
            r.concurrency,
            a.max_error_share * 100.0,
            r.report.failed(),
            r.report.failed() + r.report.ok()
        )));
    }
    if interrupted.load(Ordering::SeqCst) {
        return Err(Failure::Other("interrupted; figures so far above".into()));
    }
    Ok(())
}

/// A name no other run has: milliseconds since the epoch and the process id.
fn run_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{ms:x}-{}", std::process::id())
}

/// The store and prefixes of the run: the embedded server at `endpoint` (rank 0's), or
/// `--uri`'s store.
async fn target(
    a: &BenchArgs,
    ranks: &Ranks,
    endpoint: &str,
    ca: &str,
    id: &str,
) -> Result<Target, Failure> {
    let embedded = a.uri.is_none();
    let mut store_args = a.store.clone();
    if embedded {
        store_args.endpoint = Some(endpoint.to_owned());
        store_args.ca_bundle = Some(ca.into());
        // The embedded server is the one endpoint.
        store_args.endpoints.clear();
    }
    let keys = embedded.then(|| {
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
    let (dataset, run_dir) = match &a.uri {
        None => (
            ObjectUri::parse("s3://sluice-test/bench/")?,
            ObjectUri::parse(&format!("s3://sluice-test/bench-run-{id}/"))?,
        ),
        Some(u) => {
            let mut u = u.clone();
            if !u.ends_with('/') {
                u.push('/');
            }
            let base = ObjectUri::parse(&u)?;
            let run_dir = base.with_key(format!("{}sluice-bench-{id}/", base.key()));
            (base, run_dir)
        }
    };
    let endpoint = store_args
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL_S3").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        // Of several, curl uses the first.
        .or_else(|| cfg.endpoints.first().map(|u| u.to_string()));
    Ok(Target {
        scratch: run_dir.with_key(format!("{}r{}/", run_dir.key(), ranks.rank)),
        store_args,
        cfg,
        store,
        keys,
        dataset,
        endpoint,
        cpus: client_cpus(a.pin),
    })
}

/// The writing workloads on `--uri` refuse a prefix that holds objects, unless allowed.
async fn check_empty(a: &BenchArgs, t: &Target) -> Result<(), Failure> {
    if a.uri.is_none() || a.allow_existing || a.existing {
        return Ok(());
    }
    let opts = ListOptions {
        recursive: true,
        max_keys: Some(1),
        ..Default::default()
    };
    let page = t.store.list_page(&t.dataset, &opts).await?;
    if let Some(e) = page.entries.first() {
        return Err(Failure::Usage(format!(
            "--uri {}: the prefix already holds objects (e.g. {}); writing workloads want one \
             of their own, or --allow-existing (they then write under a sub-prefix and delete \
             only what they wrote)",
            t.dataset,
            e.uri()
        )));
    }
    Ok(())
}

/// The get rows: each shape × backend, and curl.
async fn get_workload(
    a: &BenchArgs,
    plan: &Plan,
    ranks: &Ranks,
    t: &Target,
) -> Result<Vec<Row>, Failure> {
    let size = plan.get_size()?;
    let count = a.count.unwrap_or(24);
    if a.uri.is_none() {
        if ranks.is_root() {
            eprintln!(
                "generating {count} records of {size} bytes under {} ...",
                t.dataset
            );
            sluice_console::dataset::write_dataset(
                t.store.clone(),
                &t.dataset,
                count,
                size,
                4,
                true,
            )
            .await?;
        }
        ranks.barrier();
    }
    let dataset = Dataset::from_prefix(t.store.as_ref(), &t.dataset, None).await?;
    if dataset.is_empty() {
        return Err(sluice_core::Error::NotFound {
            uri: t.dataset.to_string(),
            code: "no objects to read".into(),
        }
        .into());
    }
    let total: u64 = dataset.iter().filter_map(|i| i.size).sum();
    let list = tempfile::NamedTempFile::new().map_err(|e| Failure::Other(e.to_string()))?;
    {
        let mut f = std::io::BufWriter::new(list.as_file());
        for i in dataset.iter() {
            writeln!(f, "{}\t{}", i.uri, i.size.unwrap_or(0))
                .map_err(|e| Failure::Other(e.to_string()))?;
        }
    }
    let mut rows = Vec::new();
    if !a.no_curl && ranks.is_root() {
        match t.endpoint.as_deref() {
            Some(ep) if which("curl").is_some() => {
                let uris: Vec<ObjectUri> = dataset.iter().map(|i| i.uri).collect();
                rows.push(curl::curl_row(&curl_target(t, ep), &uris, total).await?);
            }
            _ => eprintln!("skipping the curl row: curl or an endpoint URL is missing"),
        }
    }
    for backend in &plan.backends {
        for &(procs, prefetch) in &plan.shapes {
            if ranks.is_root() {
                eprintln!("{backend}: {procs} process(es) x prefetch {prefetch} ...");
            }
            ranks.barrier();
            let row = worker::worker_row(
                backend,
                (ranks.rank * procs, ranks.size * procs),
                procs,
                prefetch,
                a.epochs,
                a.pin_endpoints,
                &t.store_args,
                t.keys.as_ref(),
                list.path(),
                t.cpus.as_deref(),
            )?;
            let all = ranks.gather(serde_json::to_string(&row).expect("serialisable"));
            let mut merged: Option<Row> = None;
            for r in &all {
                let r: Row = serde_json::from_str(r)
                    .map_err(|e| Failure::Other(format!("a rank's row: {e}")))?;
                match &mut merged {
                    Some(m) => m.merge(&r),
                    None => merged = Some(r),
                }
            }
            rows.extend(merged);
        }
    }
    // The unet3d record size is the default; its accelerators column comes with it.
    let preset = plan.preset.or((a.size.is_none()
        && a.size_dist.is_none()
        && size == Preset::Unet3d.object_size())
    .then_some(Preset::Unet3d));
    if let Some(p) = preset {
        for r in &mut rows {
            r.accelerators = p
                .accelerators_fed(r.mb_per_s)
                .into_iter()
                .map(|(n, c)| (n.to_owned(), c))
                .collect();
        }
    }
    Ok(rows)
}

fn curl_target<'a>(t: &'a Target, endpoint: &'a str) -> CurlTarget<'a> {
    CurlTarget {
        endpoint,
        cfg: &t.cfg,
        keys: t.keys.as_ref(),
        cpus: t.cpus.as_deref(),
    }
}

/// One request-driven workload: a row per backend and concurrency (ranks merged), and
/// curl's row where curl can make its requests.
async fn ops_workload(
    a: &BenchArgs,
    plan: &Plan,
    w: Workload,
    ranks: &Ranks,
    t: &Target,
    interrupted: &AtomicBool,
) -> Result<Vec<OpsRow>, Failure> {
    check_empty(a, t).await?;
    let sizes = plan.sizes(w)?;
    let mut rows = Vec::new();
    for conc in plan.concurrency(w) {
        let count = plan.count(w, &sizes, conc);
        let first_row = rows.len();
        for backend in &plan.backends {
            if interrupted.load(Ordering::SeqCst) {
                return Ok(rows);
            }
            if ranks.is_root() {
                eprintln!("{backend}: {} x{conc} ...", w.name());
            }
            let prefix = if a.existing {
                t.dataset.clone()
            } else {
                t.scratch.with_key(format!(
                    "{}{}-{backend}-c{conc}/",
                    t.scratch.key(),
                    w.name()
                ))
            };
            ranks.barrier();
            let reports = ops_process(a, plan, w, backend, &sizes, count, conc, &prefix, t)?;
            let all = ranks.gather(serde_json::to_string(&reports).expect("serialisable"));
            for report in merge_ranks(&all)? {
                rows.push(OpsRow::new(
                    backend,
                    conc,
                    &sizes.to_string(),
                    plan.preset,
                    report,
                ));
            }
        }
        if !a.no_curl && ranks.is_root() {
            let op = match w {
                Workload::Put => Some(Op::Put),
                Workload::Small => Some(Op::Get),
                _ => None,
            };
            match (op, t.endpoint.as_deref()) {
                (Some(op), Some(ep)) if which("curl").is_some() => {
                    // As many requests as the fewest a client stack made here, so that
                    // curl runs about as long as they did.
                    let requests = rows[first_row..]
                        .iter()
                        .map(|r: &OpsRow| r.report.ok() + r.report.failed())
                        .min()
                        .unwrap_or(1000)
                        .max(10);
                    let report =
                        curl_ops(a.existing, w, op, &sizes, count, requests, conc, t, ep).await?;
                    rows.push(OpsRow::new(
                        "curl",
                        conc,
                        &sizes.to_string(),
                        plan.preset,
                        report,
                    ));
                }
                (Some(_), _) => {
                    eprintln!("skipping the curl row: curl or an endpoint URL is missing")
                }
                _ => {}
            }
        }
    }
    Ok(rows)
}

/// `--replay`: the recording made again with each client stack, onto `--uri`'s prefix (when
/// it is empty) or the run's own.
async fn replay_rows(a: &BenchArgs, plan: &Plan, t: &Target) -> Result<Vec<OpsRow>, Failure> {
    let rec = replay::Recording::read(&a.replay)?;
    let prefix = if a.uri.is_some() && !a.allow_existing {
        check_empty(a, t).await?;
        t.dataset.clone()
    } else {
        t.scratch.clone()
    };
    eprintln!(
        "replay: {} requests, {:.1} s recorded under {}, at most {} in flight; onto {prefix}",
        rec.len(),
        rec.span().as_secs_f64(),
        rec.source,
        rec.max_in_flight
    );
    if !rec.skipped.is_empty() {
        eprintln!(
            "replay: not replayed (see docs/oplog.md): {:?}",
            rec.skipped
        );
    }
    if !rec.recorded_failures.is_empty() {
        eprintln!(
            "replay: these failed when recorded (a faithful replay fails alike): {:?}",
            rec.recorded_failures
        );
    }
    let target = replay::Target {
        store: t.store.clone(),
        prefix,
    };
    let written = replay::Written::default();
    let mut result = replay::set_up(&rec, &target, 64, &written)
        .await
        .map(|()| Vec::new());
    for backend in &plan.backends {
        let Ok(rows) = &mut result else { break };
        eprintln!("{backend}: replay ({:?}) ...", a.pace);
        let store = match sluice::registry::open(Some(backend), t.cfg.clone()) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e.into());
                break;
            }
        };
        let on = replay::Target {
            store,
            prefix: target.prefix.clone(),
        };
        let report = replay::replay(&rec, &on, a.pace, &written).await;
        rows.push(OpsRow::new(
            backend,
            rec.max_in_flight,
            "as logged",
            None,
            report,
        ));
    }
    // Whatever happened, what the replay wrote goes.
    let left: Vec<ObjectUri> =
        std::mem::take(&mut *written.lock().unwrap_or_else(|p| p.into_inner()))
            .into_iter()
            .collect();
    for chunk in left.chunks(1000) {
        let failed = t.store.delete_many(chunk).await?;
        if let Some(e) = failed.first() {
            eprintln!(
                "replay: {} of the objects it wrote could not be deleted: {e}",
                failed.len()
            );
        }
    }
    result
}

/// Each rank's reports (one list per rank, one report per phase) merged phase by phase.
fn merge_ranks(all: &[String]) -> Result<Vec<OpsReport>, Failure> {
    let mut merged: Vec<OpsReport> = Vec::new();
    for r in all {
        let reports: Vec<OpsReport> =
            serde_json::from_str(r).map_err(|e| Failure::Other(format!("a rank's report: {e}")))?;
        if merged.is_empty() {
            merged = reports;
        } else {
            for (m, r) in merged.iter_mut().zip(&reports) {
                m.merge(r);
            }
        }
    }
    Ok(merged)
}

/// Runs one row in a `sluice bench-ops` process and reads its reports.
#[allow(clippy::too_many_arguments)]
fn ops_process(
    a: &BenchArgs,
    plan: &Plan,
    w: Workload,
    backend: &str,
    sizes: &SizeSpec,
    count: usize,
    conc: usize,
    prefix: &ObjectUri,
    t: &Target,
) -> Result<Vec<OpsReport>, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Other(e.to_string()))?;
    let mut cmd = pinned(t.cpus.as_deref(), &exe);
    cmd.args(["bench-ops", "--workload", w.name(), "--backend", backend]);
    cmd.arg("--prefix").arg(prefix.to_string());
    cmd.arg("--size").arg(sizes.to_string());
    cmd.arg("--count").arg(count.to_string());
    cmd.arg("--concurrency").arg(conc.to_string());
    cmd.arg("--duration")
        .arg(humantime::format_duration(a.duration).to_string());
    cmd.arg("--warmup")
        .arg(humantime::format_duration(a.warmup).to_string());
    if let Some(n) = a.ops {
        cmd.arg("--ops").arg(n.to_string());
    }
    if a.autoterm {
        cmd.arg("--autoterm").arg(a.autoterm_pct.to_string());
    }
    cmd.arg("--mix").arg(plan.mix.to_string());
    cmd.arg("--max-error-share")
        .arg(a.max_error_share.to_string());
    if a.existing {
        cmd.arg("--existing");
    }
    worker::pass_store(&mut cmd, &t.store_args, t.keys.as_ref());
    // The worker's log (SLUICE_LOG, warnings by default) goes where the bench's does.
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Failure::Other(format!("starting a bench-ops worker: {e}")))?;
    let reports: Vec<OpsReport> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if !out.status.success() || reports.is_empty() {
        return Err(Failure::Other(format!(
            "the {backend} {} worker failed ({})",
            w.name(),
            out.status
        )));
    }
    Ok(reports)
}

/// curl's row for `small` (GETs of `count` objects written for it) or `put` (PUTs of files
/// of the run's sizes to `count` keys in turn): `requests` of them, `conc` at once. What it
/// wrote is deleted after.
#[allow(clippy::too_many_arguments)]
async fn curl_ops(
    existing: bool,
    w: Workload,
    op: Op,
    sizes: &SizeSpec,
    count: usize,
    requests: u64,
    conc: usize,
    t: &Target,
    endpoint: &str,
) -> Result<OpsReport, Failure> {
    let dir = t
        .scratch
        .with_key(format!("{}{}-curl-c{conc}/", t.scratch.key(), w.name()));
    let requests = requests as usize;
    let mut rng = fastrand::Rng::with_seed(7);
    let files = tempfile::tempdir().map_err(|e| Failure::Other(format!("temp dir: {e}")))?;
    let mut written = Vec::new();
    let transfers: Vec<(ObjectUri, Option<std::path::PathBuf>)> = match op {
        // `--existing`: random objects of the prefix, as the client stacks read; none written.
        Op::Get if existing => {
            let listed = Dataset::from_prefix(t.store.as_ref(), &t.dataset, None).await?;
            if listed.is_empty() {
                return Err(Failure::Usage(format!(
                    "--existing: no objects under {}",
                    t.dataset
                )));
            }
            (0..requests)
                .filter_map(|_| listed.get(rng.usize(..listed.len())))
                .map(|item| (item.uri, None))
                .collect()
        }
        Op::Get => {
            let max = usize::try_from(sizes.max()).unwrap_or(usize::MAX);
            let data: bytes::Bytes = (0..max).map(|_| rng.u8(..)).collect::<Vec<u8>>().into();
            for i in 0..count.max(1) {
                let uri = dir.with_key(format!("{}{i:08}", dir.key()));
                let n = sizes.sample(&mut rng) as usize;
                written.push(uri.clone());
                t.store.put(&uri, data.slice(..n).into()).await?;
            }
            (0..requests)
                .map(|i| (written[i % written.len()].clone(), None))
                .collect()
        }
        _ => {
            // A few files of the run's sizes, uploaded in turn under `count` keys.
            let mut paths = Vec::new();
            for i in 0..requests.min(16) {
                let p = files.path().join(format!("f{i}"));
                let n = sizes.sample(&mut rng) as usize;
                std::fs::write(&p, (0..n).map(|_| rng.u8(..)).collect::<Vec<u8>>())
                    .map_err(|e| Failure::Other(format!("writing {}: {e}", p.display())))?;
                paths.push(p);
            }
            (0..requests)
                .map(|i| {
                    let uri = dir.with_key(format!("{}{:08}", dir.key(), i % count.max(1)));
                    if i < count.max(1) {
                        written.push(uri.clone());
                    }
                    (uri, Some(paths[i % paths.len()].clone()))
                })
                .collect()
        }
    };
    let report = curl::curl_ops_row(&curl_target(t, endpoint), w.name(), op, transfers, conc).await;
    for chunk in written.chunks(1000) {
        t.store.delete_many(chunk).await?;
    }
    report
}

/// What the figures were measured on.
fn environment(a: &BenchArgs, t: &Target, ranks: &Ranks) -> serde_json::Value {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let curl = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        });
    serde_json::json!({
        "sluice": env!("CARGO_PKG_VERSION"),
        "backends": sluice::registry::compiled(),
        "curl": curl,
        "cpu_model": cpu_model,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": kernel,
        "server": match &a.uri {
            None => format!("embedded sluice serve, profile {}", a.server_profile),
            Some(u) => u.clone(),
        },
        "endpoint": t.endpoint,
        "ranks": ranks.size,
    })
}
