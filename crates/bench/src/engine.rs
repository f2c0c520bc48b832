//! The request-driven workloads (`put`, `small`, `stat`, `list`, `delete`, `mixed`,
//! `checkpoint`), run in a worker process of their own (`sluice bench-ops`) so that its CPU
//! time and peak RSS are the row's alone. `--concurrency` tasks make requests back to back
//! until the run ends (`--duration`, `--ops`, `--autoterm`, too many failures, Ctrl-C);
//! every request is timed into its kind's histograms. What the run writes is deleted at
//! its end, whatever ended it.

use super::ops::{OpStats, OpsReport, Stopped, unix_now};
use super::sizes::SizeSpec;
use super::workload::{Mix, Op, Workload};
use bytes::Bytes;
use clap::Args;
use futures::StreamExt;
use sluice_console::StoreArgs;
use sluice_console::output::{Failure, progress};
use sluice_console::rusage;
use sluice_core::ObjectStoreExt;
use sluice_core::listing::ListOptions;
use sluice_core::{ByteRange, ObjectStore, ObjectUri, PutPayload, Segment, WriteOptions};
use sluice_loader::{Dataset, Item};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The command line of `sluice bench-ops` (hidden; `sluice bench` starts it).
#[derive(Args, Debug, Clone)]
pub struct OpsArgs {
    #[arg(long, value_parser = |s: &str| Workload::parse(s).map_err(|e| e.to_string()))]
    pub(super) workload: Workload,
    /// Where this run writes: every key it makes starts with this prefix
    #[arg(long)]
    pub(super) prefix: String,
    #[arg(long)]
    pub(super) size: String,
    /// put: keys written in turn (each rewritten when the turn comes round); small, stat,
    /// list, mixed: objects read; delete: objects written, then deleted; checkpoint:
    /// checkpoints each rank writes
    #[arg(long)]
    pub(super) count: usize,
    #[arg(long)]
    pub(super) concurrency: usize,
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(super) duration: Duration,
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(super) warmup: Duration,
    #[arg(long)]
    pub(super) ops: Option<u64>,
    #[arg(long)]
    pub(super) autoterm: Option<f64>,
    #[arg(long, default_value = super::workload::DEFAULT_MIX)]
    pub(super) mix: String,
    #[arg(long)]
    pub(super) max_error_share: f64,
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// Read the objects already under --prefix; write none (`sluice bench --existing`)
    #[arg(long)]
    pub(super) existing: bool,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

/// Seconds of steady throughput `--autoterm` wants before it stops a run.
pub const AUTOTERM_SECONDS: usize = 5;
/// Failures below this count never end a run, whatever their share (a run's first request
/// failing is not yet a pattern).
const MIN_ERRORS_TO_STOP: u64 = 10;
/// Bytes one checkpoint `write` hands the writer (a framework's tensor-sized chunk).
const CHECKPOINT_CHUNK: usize = 16 << 20;

/// Runs one workload and prints one JSON `OpsReport` line per phase (two for checkpoint).
pub async fn run(a: OpsArgs) -> Result<(), Failure> {
    let sizes = SizeSpec::parse(&a.size)?;
    let mix = match a.workload {
        Workload::Put => Mix::only(Op::Put),
        Workload::Small => Mix::only(Op::Get),
        Workload::Stat => Mix::only(Op::Stat),
        Workload::List => Mix::only(Op::List),
        Workload::Delete => Mix::only(Op::Delete),
        Workload::Mixed => Mix::parse(&a.mix)?,
        Workload::Checkpoint => Mix::only(Op::Put),
        Workload::Get => {
            return Err(Failure::Usage(
                "bench-ops: get runs in bench-worker processes".into(),
            ));
        }
    };
    let cfg = a.store.config().await?;
    let store = sluice::registry::open(a.store.backend.as_deref(), cfg.clone())?;
    let prefix = ObjectUri::parse(&a.prefix)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
    }
    let max = usize::try_from(sizes.max())
        .map_err(|_| Failure::Usage(format!("--size {sizes}: too large for memory")))?;
    // The bytes every PUT sends a slice of: random, so no layer can compress them.
    let source_len = if a.workload == Workload::Checkpoint {
        max.min(CHECKPOINT_CHUNK)
    } else {
        max
    };
    let mut rng = fastrand::Rng::with_seed(a.seed);
    let payload = Bytes::from((0..source_len).map(|_| rng.u8(..)).collect::<Vec<u8>>());
    if a.existing
        && !matches!(
            a.workload,
            Workload::Small | Workload::Stat | Workload::List
        )
    {
        return Err(Failure::Usage(format!(
            "--existing: {} writes; only small, stat and list read what is there",
            a.workload.name()
        )));
    }
    let list_dir = if a.existing {
        prefix.clone()
    } else {
        prefix.with_key(format!("{}objects/", prefix.key()))
    };
    let mut ctx = Ctx {
        store: store.clone(),
        list_dir,
        prefix,
        sizes,
        payload,
        objects: Dataset::default(),
        deletable: Mutex::new(Vec::new()),
        written: Mutex::new(BTreeSet::new()),
        put_keys: if mix.deletes() {
            PutKeys::Fresh
        } else {
            PutKeys::Cycle(a.count.div_ceil(a.concurrency.max(1)).max(1) as u64)
        },
        checkpoints: a.count.max(1),
        write_opts: WriteOptions::from_config(&cfg),
    };
    let setup = setup(&a, &mix, &mut ctx).await;
    let ctx = Arc::new(ctx);
    let outcome = match setup {
        Ok(()) => phases(&a, &ctx, mix, &interrupted).await,
        Err(e) => Err(e),
    };
    // Whatever happened, what this run wrote goes.
    let left: Vec<ObjectUri> = std::mem::take(&mut *lock(&ctx.written))
        .into_iter()
        .collect();
    for chunk in left.chunks(1000) {
        let failed = store.delete_many(chunk).await?;
        if let Some(e) = failed.first() {
            eprintln!(
                "bench-ops: {} of the run's objects could not be deleted: {e}",
                failed.len()
            );
        }
    }
    for r in outcome? {
        println!("{}", serde_json::to_string(&r).expect("serialisable"));
    }
    Ok(())
}

/// Setup, not measured: the objects the load reads, or those delete deletes.
async fn setup(a: &OpsArgs, mix: &Mix, ctx: &mut Ctx) -> Result<(), Failure> {
    match a.workload {
        Workload::Delete => {
            let set = write_set(ctx, "objects", a.count.max(1), a.concurrency).await?;
            *lock(&ctx.deletable) = set.into_iter().map(|(u, _)| u).collect();
        }
        Workload::Checkpoint => {}
        _ if a.existing => {
            ctx.objects = Dataset::from_prefix(ctx.store.as_ref(), &ctx.prefix, None).await?;
            if ctx.objects.is_empty() {
                return Err(Failure::Usage(format!(
                    "--existing: no objects under {}",
                    ctx.prefix
                )));
            }
        }
        _ if mix.reads() => {
            let set = write_set(ctx, "objects", a.count.max(1), a.concurrency).await?;
            ctx.objects = Dataset::from_items(set.into_iter().map(|(uri, size)| Item {
                uri,
                size: Some(size),
                etag: None,
            }));
        }
        _ => {}
    }
    Ok(())
}

/// The measured phases: the load; for checkpoint, the writes and then the reads of what
/// was written.
async fn phases(
    a: &OpsArgs,
    ctx: &Arc<Ctx>,
    mix: Mix,
    interrupted: &Arc<AtomicBool>,
) -> Result<Vec<OpsReport>, Failure> {
    if a.workload == Workload::Checkpoint {
        let write = checkpoint(a, ctx, CheckpointPhase::Write, interrupted).await;
        if write.stopped != Stopped::Count {
            return Ok(vec![write]);
        }
        let read = checkpoint(a, ctx, CheckpointPhase::Read, interrupted).await;
        return Ok(vec![write, read]);
    }
    let ops_bound = match a.workload {
        Workload::Delete => Some(a.ops.map_or(a.count as u64, |n| n.min(a.count as u64))),
        _ => a.ops,
    };
    let report = drive(
        a,
        a.workload.name(),
        ctx.clone(),
        ops_bound,
        a.workload.moves_bytes(),
        interrupted,
        move |ctx, task, seq, rng| {
            let op = mix.pick(rng);
            let ctx = ctx.clone();
            let size = ctx.sizes.sample(rng);
            let pick = rng.usize(..ctx.objects.len().max(1));
            async move { ctx.request(op, task, seq, size, pick).await }
        },
    )
    .await;
    Ok(vec![report])
}

/// What every request task shares.
struct Ctx {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectUri,
    sizes: SizeSpec,
    payload: Bytes,
    /// The read set: objects and their sizes (millions, with `--existing`: kept compact).
    objects: Dataset,
    /// Where `list` lists: the read set's prefix.
    list_dir: ObjectUri,
    /// Objects the load may delete (its own PUTs', or delete's setup).
    deletable: Mutex<Vec<ObjectUri>>,
    /// Every object this run wrote that still exists: deleted at the end.
    written: Mutex<BTreeSet<ObjectUri>>,
    /// Which keys PUTs write.
    put_keys: PutKeys,
    checkpoints: usize,
    write_opts: WriteOptions,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which keys a load's PUTs write.
#[derive(Debug, Clone, Copy)]
enum PutKeys {
    /// Each task's `n` keys in turn, each rewritten when its turn comes round: an
    /// in-memory server's memory stays bounded however long the run.
    Cycle(u64),
    /// A new key each time, handed to the load's deletes.
    Fresh,
}

/// One request's outcome: `None` when there was nothing to do (nothing left to delete).
type Done = Option<(Op, u64, Option<Duration>)>;

impl Ctx {
    fn key(&self, rest: &str) -> ObjectUri {
        self.prefix.with_key(format!("{}{rest}", self.prefix.key()))
    }

    /// One request of kind `op`: (bytes, time to first byte).
    async fn request(
        &self,
        op: Op,
        task: usize,
        seq: u64,
        size: u64,
        pick: usize,
    ) -> Result<Done, (Op, sluice_core::Error)> {
        let t0 = Instant::now();
        let fail = |e| (op, e);
        match op {
            Op::Get => {
                let Some(item) = self.objects.get(pick) else {
                    return Ok(None);
                };
                let mut seg = Segment::counting(item.size.unwrap_or(0) as usize);
                let info = self
                    .store
                    .get_into(&item.uri, None, &mut seg)
                    .await
                    .map_err(fail)?;
                Ok(Some((op, info.bytes, seg.first_byte_at().map(|t| t - t0))))
            }
            Op::Put => {
                let data = self.payload.slice(..size as usize);
                let uri = match self.put_keys {
                    PutKeys::Cycle(n) => self.key(&format!("put/{task}-{}", seq % n)),
                    PutKeys::Fresh => self.key(&format!("mixed/{task}-{seq}")),
                };
                lock(&self.written).insert(uri.clone());
                self.store.put(&uri, PutPayload(data)).await.map_err(fail)?;
                if let PutKeys::Fresh = self.put_keys {
                    lock(&self.deletable).push(uri);
                }
                Ok(Some((op, size, None)))
            }
            Op::Stat => {
                let Some(item) = self.objects.get(pick) else {
                    return Ok(None);
                };
                self.store.head(&item.uri).await.map_err(fail)?;
                Ok(Some((op, 0, None)))
            }
            Op::List => {
                // A page from a random place in the read set, as a listing split across
                // the key space asks for them: not the first page again and again.
                let opts = ListOptions {
                    recursive: true,
                    start_after: self.objects.key(pick).map(str::to_owned),
                    ..Default::default()
                };
                self.store
                    .list_page(&self.list_dir, &opts)
                    .await
                    .map_err(fail)?;
                Ok(Some((op, 0, None)))
            }
            Op::Delete => {
                let Some(uri) = lock(&self.deletable).pop() else {
                    return Ok(None);
                };
                self.store.delete(&uri).await.map_err(fail)?;
                lock(&self.written).remove(&uri);
                Ok(Some((op, 0, None)))
            }
        }
    }
}

/// Writes `n` objects of the run's sizes under `PREFIX/dir/`, `jobs` at a time (setup, not
/// measured).
async fn write_set(
    ctx: &Ctx,
    dir: &str,
    n: usize,
    jobs: usize,
) -> Result<Vec<(ObjectUri, u64)>, Failure> {
    let mut rng = fastrand::Rng::with_seed(n as u64);
    let plan: Vec<(ObjectUri, u64)> = (0..n)
        .map(|i| {
            (
                ctx.key(&format!("{dir}/{i:08}")),
                ctx.sizes.sample(&mut rng),
            )
        })
        .collect();
    let mut puts = futures::stream::iter(plan.clone())
        .map(|(uri, size)| async move {
            lock(&ctx.written).insert(uri.clone());
            let data = ctx.payload.slice(..size as usize);
            ctx.store.put(&uri, PutPayload(data)).await
        })
        .buffer_unordered(jobs.max(1));
    while let Some(r) = puts.next().await {
        r?;
    }
    Ok(plan)
}

/// Live counters the sampler reads while the tasks run.
#[derive(Default)]
struct Live {
    stop: AtomicBool,
    /// Set when the measured window opens (after `--warmup`).
    measuring: OnceLock<Instant>,
    issued: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    bytes: AtomicU64,
    /// Tasks that ended: the `--ops` bound reached, or nothing left to do.
    finished: AtomicU64,
}

/// Runs `request` on `--concurrency` tasks until the run ends, and reports.
async fn drive<F, Fut>(
    a: &OpsArgs,
    label: &str,
    ctx: Arc<Ctx>,
    ops_bound: Option<u64>,
    by_bytes: bool,
    interrupted: &Arc<AtomicBool>,
    request: F,
) -> OpsReport
where
    F: Fn(&Arc<Ctx>, usize, u64, &mut fastrand::Rng) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Done, (Op, sluice_core::Error)>> + Send,
{
    let live = Arc::new(Live::default());
    let request = Arc::new(request);
    let retries0 = sluice_core::retry_counts();
    let started = Instant::now();
    if a.warmup.is_zero() {
        live.measuring.set(started).ok();
    }
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..a.concurrency.max(1) {
        let (ctx, live, request) = (ctx.clone(), live.clone(), request.clone());
        let mut rng = fastrand::Rng::with_seed(a.seed.wrapping_mul(1_000_003) + task as u64);
        tasks.spawn(async move {
            let mut stats: BTreeMap<Op, OpStats> = BTreeMap::new();
            let mut seq = 0u64;
            while !live.stop.load(Ordering::Relaxed) {
                let n = live.issued.fetch_add(1, Ordering::Relaxed);
                if ops_bound.is_some_and(|max| n >= max) {
                    break;
                }
                let t0 = Instant::now();
                let result = request(&ctx, task, seq, &mut rng).await;
                seq += 1;
                let elapsed = t0.elapsed();
                let counted = live.measuring.get().is_some_and(|m| t0 >= *m);
                match result {
                    Ok(None) => break,
                    Ok(Some((op, bytes, ttfb))) => {
                        if counted {
                            let s = stats.entry(op).or_default();
                            s.ok += 1;
                            s.bytes += bytes;
                            s.latency.record(elapsed);
                            if let Some(t) = ttfb {
                                s.ttfb.record(t);
                            }
                            live.ok.fetch_add(1, Ordering::Relaxed);
                            live.bytes.fetch_add(bytes, Ordering::Relaxed);
                        }
                    }
                    Err((op, e)) => {
                        if counted {
                            let s = stats.entry(op).or_default();
                            *s.errors.entry(e.kind_label()).or_default() += 1;
                            live.failed.fetch_add(1, Ordering::Relaxed);
                        }
                        tracing::debug!(error = %e, "bench request failed");
                    }
                }
            }
            live.finished.fetch_add(1, Ordering::Relaxed);
            stats
        });
    }
    let (stopped, per_second, cpu) =
        sample(a, label, &live, by_bytes, interrupted, started, tasks.len()).await;
    let mut ops: BTreeMap<Op, OpStats> = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        if let Ok(stats) = r {
            for (op, s) in stats {
                ops.entry(op).or_default().merge(&s);
            }
        }
    }
    // The window closes when the last counted request has finished: a request that started
    // inside it is counted, so its time is too.
    let window_s = live
        .measuring
        .get()
        .map_or(0.0, |m| m.elapsed().as_secs_f64());
    OpsReport {
        workload: label.into(),
        seconds: window_s,
        started_unix: Some(unix_now() - window_s),
        ops,
        cpu_seconds: cpu.map_or(0.0, |c0| rusage::this_process().unwrap_or(c0) - c0),
        peak_rss_bytes: super::worker::peak_rss_bytes(),
        retries: diff(sluice_core::retry_counts(), &retries0),
        stopped,
        per_second,
        ranks: 1,
    }
}

/// Counts of `now` beyond those of `before`.
pub(crate) fn diff(
    now: BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    now.into_iter()
        .map(|(k, n)| {
            let b = before.get(&k).copied().unwrap_or(0);
            (k, n - b)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Watches the run once a second: opens the window after the warmup, records each
/// second's figure, draws the progress bar, and decides when to stop. Returns why it
/// stopped, the per-second figures, and the CPU time at the window's start.
async fn sample(
    a: &OpsArgs,
    label: &str,
    live: &Live,
    by_bytes: bool,
    interrupted: &AtomicBool,
    started: Instant,
    tasks: usize,
) -> (Stopped, Vec<f64>, Option<f64>) {
    let mut cpu0 = live.measuring.get().and_then(|_| rusage::this_process());
    let pb = progress(
        (a.warmup + a.duration).as_secs(),
        false,
        !std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    pb.set_message(label.to_owned());
    let mut per_second = Vec::new();
    let mut last = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut next_second = started + Duration::from_secs(1);
    let stop = |why, per_second, cpu0| {
        live.stop.store(true, Ordering::SeqCst);
        (why, per_second, cpu0)
    };
    loop {
        tick.tick().await;
        let now = Instant::now();
        if live.measuring.get().is_none() && now >= started + a.warmup {
            live.measuring.set(now).ok();
            cpu0 = rusage::this_process();
            next_second = now + Duration::from_secs(1);
            last = 0;
        }
        let figure_now = if by_bytes {
            live.bytes.load(Ordering::Relaxed)
        } else {
            live.ok.load(Ordering::Relaxed)
        };
        if live.measuring.get().is_some() && now >= next_second {
            let d = figure_now - last;
            per_second.push(if by_bytes { d as f64 / 1e6 } else { d as f64 });
            last = figure_now;
            next_second += Duration::from_secs(1);
            pb.set_position(now.duration_since(started).as_secs());
            pb.set_message(format!(
                "{label}: {:.0} {}/s",
                per_second.last().copied().unwrap_or(0.0),
                if by_bytes { "MB" } else { "req" }
            ));
        }
        let window = live.measuring.get().map(|m| now.duration_since(*m));
        if interrupted.load(Ordering::SeqCst) {
            pb.finish_and_clear();
            return stop(Stopped::Interrupted, per_second, cpu0);
        }
        if live.finished.load(Ordering::Relaxed) as usize >= tasks {
            pb.finish_and_clear();
            return stop(Stopped::Count, per_second, cpu0);
        }
        let (ok, failed) = (
            live.ok.load(Ordering::Relaxed),
            live.failed.load(Ordering::Relaxed),
        );
        if failed >= MIN_ERRORS_TO_STOP && failed as f64 > a.max_error_share * (ok + failed) as f64
        {
            pb.finish_and_clear();
            return stop(Stopped::Errors, per_second, cpu0);
        }
        if let Some(pct) = a.autoterm
            && steady(&per_second, pct)
        {
            pb.finish_and_clear();
            return stop(Stopped::Autoterm, per_second, cpu0);
        }
        if window.is_some_and(|w| w >= a.duration) {
            pb.finish_and_clear();
            return stop(Stopped::Duration, per_second, cpu0);
        }
    }
}

/// `--autoterm`'s rule: the last `AUTOTERM_SECONDS` whole seconds each lie within `pct`
/// percent of their mean (warp's rule, over seconds).
pub fn steady(per_second: &[f64], pct: f64) -> bool {
    if per_second.len() < AUTOTERM_SECONDS {
        return false;
    }
    let last = &per_second[per_second.len() - AUTOTERM_SECONDS..];
    let mean = last.iter().sum::<f64>() / last.len() as f64;
    mean > 0.0 && last.iter().all(|v| (v - mean).abs() <= mean * pct / 100.0)
}

#[derive(Clone, Copy, PartialEq)]
enum CheckpointPhase {
    Write,
    Read,
}

/// One checkpoint phase: each of `--concurrency` ranks writes (or reads back) its
/// `--count` objects of `--size` bytes; the streaming writer uploads parts in parallel,
/// and a read fetches part-sized ranges in parallel, as a restore does.
async fn checkpoint(
    a: &OpsArgs,
    ctx: &Arc<Ctx>,
    phase: CheckpointPhase,
    interrupted: &Arc<AtomicBool>,
) -> OpsReport {
    let label = match phase {
        CheckpointPhase::Write => "checkpoint write",
        CheckpointPhase::Read => "checkpoint read",
    };
    let warm = OpsArgs {
        warmup: Duration::ZERO,
        duration: Duration::from_secs(u64::MAX / 4),
        autoterm: None,
        ..a.clone()
    };
    let per_rank = ctx.checkpoints as u64;
    drive(
        &warm,
        label,
        ctx.clone(),
        // Each rank stops after its own `per_rank` (its requests answer `None` then). A
        // bound on all ranks' requests together let a rank that finished first take the
        // slot of one that had not started (its `None` counts as issued): that rank wrote
        // nothing, and the read phase found its checkpoint missing (a loaded test machine).
        None,
        true,
        interrupted,
        move |ctx, task, seq, rng| {
            let ctx = ctx.clone();
            let size = ctx.sizes.sample(rng);
            async move {
                if seq >= per_rank {
                    return Ok(None);
                }
                let uri = ctx.key(&format!("checkpoint/rank{task:04}-{seq}"));
                match phase {
                    CheckpointPhase::Write => ctx.write_checkpoint(&uri, size).await,
                    CheckpointPhase::Read => ctx.read_checkpoint(&uri).await,
                }
                .map(Some)
                .map_err(|e| (op_of(phase), e))
            }
        },
    )
    .await
}

fn op_of(phase: CheckpointPhase) -> Op {
    match phase {
        CheckpointPhase::Write => Op::Put,
        CheckpointPhase::Read => Op::Get,
    }
}

impl Ctx {
    async fn write_checkpoint(
        &self,
        uri: &ObjectUri,
        size: u64,
    ) -> Result<(Op, u64, Option<Duration>), sluice_core::Error> {
        lock(&self.written).insert(uri.clone());
        let mut w = self.store.writer(uri, self.write_opts.clone()).await?;
        let mut left = size;
        while left > 0 {
            let n = left.min(self.payload.len() as u64) as usize;
            w.write(self.payload.slice(..n)).await?;
            left -= n as u64;
        }
        w.finish().await?;
        Ok((Op::Put, size, None))
    }

    async fn read_checkpoint(
        &self,
        uri: &ObjectUri,
    ) -> Result<(Op, u64, Option<Duration>), sluice_core::Error> {
        let t0 = Instant::now();
        let size = self.store.head(uri).await?.size;
        let part = std::num::NonZeroU64::new(self.write_opts.part_size.max(1)).expect("above 0");
        let ranges = sluice_core::split_ranges(size, part);
        let first = Mutex::new(None::<Instant>);
        let mut reads = futures::stream::iter(ranges)
            .map(|r: ByteRange| {
                let first = &first;
                async move {
                    let len = r.len().unwrap_or(0) as usize;
                    let mut seg = Segment::counting(len);
                    let info = self.store.get_into(uri, Some(r), &mut seg).await?;
                    if let Some(t) = seg.first_byte_at() {
                        let mut f = lock(first);
                        *f = Some(f.map_or(t, |o| o.min(t)));
                    }
                    Ok::<u64, sluice_core::Error>(info.bytes)
                }
            })
            // Every range asked for at once, as `sluice get` does: the client's controller
            // sends as many as the store answers faster with.
            .buffer_unordered(sluice_loader::FOLLOW_MAX);
        let mut bytes = 0;
        while let Some(r) = reads.next().await {
            bytes += r?;
        }
        drop(reads);
        let ttfb = lock(&first).map(|t| t - t0);
        Ok((Op::Get, bytes, ttfb))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autoterm_waits_for_five_steady_seconds() {
        assert!(!steady(&[100.0; 4], 5.0), "four seconds are not enough");
        assert!(steady(&[10.0, 500.0, 100.0, 104.0, 97.0, 101.0, 99.0], 5.0));
        assert!(
            !steady(&[100.0, 104.0, 97.0, 101.0, 120.0], 5.0),
            "the last one jumped"
        );
        assert!(!steady(&[0.0; 6], 5.0), "nothing moving is not steady");
    }
}
