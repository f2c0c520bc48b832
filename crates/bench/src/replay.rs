//! `sluice bench --replay FILE...`: the requests of a recorded run (its op-logs,
//! `SLUICE_OP_LOG`) made again against the store of `--uri` (or the embedded server), one
//! row per client stack, with the figures and percentiles of every request-driven row.
//!
//! What is replayed: each call's first request (its retries and resumptions were the
//! recorded store's; the replaying client makes its own). GETs keep their ranges; a
//! multipart upload becomes one upload of its parts' total size, sent when the original
//! started (the client cuts it into parts of its own size); a listing asks for one page of
//! the same prefix. Batch deletes, copies and bucket probes are not replayed, and counted.
//!
//! Keys keep their place below the deepest folder all recorded objects share, moved under
//! the target prefix. Objects the log reads before (or without) writing them are created
//! first, of the size the log saw, not timed; everything the replay wrote is deleted after.
//!
//! Pace: `recorded` sends each request at its recorded offset from the first, whatever is in
//! flight (the recorded gaps and concurrency: a slower store has more in flight);
//! `fast` sends them in order, as many in flight as the log ever had at once.

use crate::ops::{OpStats, OpsReport, Stopped, unix_now};
use crate::workload::Op;
use bytes::Bytes;
use futures::StreamExt;
use sluice_console::output::Failure;
use sluice_console::rusage;
use sluice_core::listing::ListOptions;
use sluice_core::oplog::{self, Entry};
use sluice_core::{
    ByteRange, GetOptions, ObjectStore, ObjectStoreExt, ObjectUri, PutPayload, Segment,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How fast the requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pace {
    /// At their recorded offsets.
    Recorded,
    /// In order, as many in flight as the log ever had.
    Fast,
}

/// One request to make.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Key, range, and the bytes the answer brings.
    Get(String, Option<ByteRange>, u64),
    Head(String),
    Put(String, u64),
    List(String, bool),
    Delete(String),
}

impl Action {
    fn op(&self) -> Op {
        match self {
            Action::Get(..) => Op::Get,
            Action::Head(_) => Op::Stat,
            Action::Put(..) => Op::Put,
            Action::List(..) => Op::List,
            Action::Delete(_) => Op::Delete,
        }
    }
}

/// A recorded run, ready to replay: keys are relative to the recorded objects' folder.
#[derive(Debug)]
pub struct Recording {
    /// Each request, at its offset from the first.
    requests: Vec<(Duration, Action)>,
    /// Objects to create before the clock starts: relative key, size.
    setup: BTreeMap<String, u64>,
    /// The most requests the log had in flight at once.
    pub max_in_flight: usize,
    /// Requests not replayed, by operation.
    pub skipped: BTreeMap<String, u64>,
    /// How the replayed requests ended when recorded: failures by kind (a replay that
    /// fails as often, the same way, is faithful).
    pub recorded_failures: BTreeMap<String, u64>,
    /// The folder the keys were relative to.
    pub source: String,
}

impl Recording {
    /// Reads the op-logs at `paths` (a run's processes: merged by start time).
    pub fn read(paths: &[PathBuf]) -> Result<Self, Failure> {
        let mut entries = Vec::new();
        for p in paths {
            entries.extend(oplog::read(p).map_err(Failure::Usage)?);
        }
        if entries.is_empty() {
            return Err(Failure::Usage(format!(
                "--replay {}: no requests in the log",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )));
        }
        entries.sort_by_key(|e| e.start_unix_us);
        Ok(Self::from_entries(&entries))
    }

    fn from_entries(entries: &[Entry]) -> Self {
        let source = common_folder(entries.iter().map(|e| e.uri.as_str()));
        let rel = |uri: &str| uri.get(source.len()..).unwrap_or("").to_owned();
        let t0 = entries[0].start_unix_us;
        let at = |e: &Entry| Duration::from_micros(e.start_unix_us.saturating_sub(t0));
        let mut requests: Vec<(Duration, Action)> = Vec::new();
        let mut skipped = BTreeMap::new();
        // Multipart uploads in progress: key -> (index in `requests`, bytes so far).
        let mut uploads: HashMap<String, (usize, u64)> = HashMap::new();
        let mut written = BTreeSet::new();
        let mut setup: BTreeMap<String, u64> = BTreeMap::new();
        let mut recorded_failures = BTreeMap::new();
        for e in entries.iter().filter(|e| e.attempt <= 1) {
            let key = rel(&e.uri);
            let action = match e.op.as_str() {
                "GetObject" => {
                    // What the answer brought when it came whole; else what the range
                    // asks of the object, a range past its end clipped as S3 clips it.
                    let range = byte_range(e);
                    let asked = match (range, e.object_size) {
                        (Some(r), Some(size)) => {
                            let rest = size.saturating_sub(r.start());
                            r.len().map_or(rest, |n| n.min(rest))
                        }
                        (Some(r), None) => r.len().unwrap_or(e.bytes),
                        (None, size) => size.unwrap_or(e.bytes),
                    };
                    let len = if e.error.is_empty() { e.bytes } else { asked };
                    Action::Get(key.clone(), range, len)
                }
                "HeadObject" => Action::Head(key.clone()),
                "PutObject" => Action::Put(key.clone(), e.object_size.unwrap_or(e.bytes)),
                "ListObjectsV2" => Action::List(key.clone(), e.range.as_deref() == Some("/")),
                "DeleteObject" => Action::Delete(key.clone()),
                "CreateMultipartUpload" => {
                    uploads.insert(key.clone(), (requests.len(), 0));
                    Action::Put(key.clone(), 0)
                }
                "UploadPart" => {
                    if let Some((_, n)) = uploads.get_mut(&key) {
                        *n += e.bytes;
                    }
                    continue;
                }
                "CompleteMultipartUpload" | "AbortMultipartUpload" => {
                    if let Some((i, n)) = uploads.remove(&key) {
                        requests[i] = (requests[i].0, Action::Put(key.clone(), n));
                    }
                    continue;
                }
                other => {
                    *skipped.entry(other.to_owned()).or_default() += 1;
                    continue;
                }
            };
            match &action {
                Action::Put(k, _) => {
                    written.insert(k.clone());
                }
                // A read of an object the run had not written, that was there: it must be
                // there for the replay, as large as any answer said it was.
                Action::Get(k, ..) | Action::Head(k)
                    if !written.contains(k) && e.error.is_empty() =>
                {
                    let end = byte_range(e).and_then(|r| r.end());
                    let size = e.object_size.or(end).unwrap_or(e.bytes);
                    let s = setup.entry(k.clone()).or_default();
                    *s = (*s).max(size);
                }
                _ => {}
            }
            if !e.error.is_empty() {
                *recorded_failures.entry(e.error.clone()).or_default() += 1;
            }
            requests.push((at(e), action));
        }
        Self {
            max_in_flight: max_in_flight(entries),
            requests,
            setup,
            skipped,
            recorded_failures,
            source,
        }
    }

    /// Requests to replay.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// How long the recorded run took, first start to last.
    pub fn span(&self) -> Duration {
        self.requests.last().map_or(Duration::ZERO, |(t, _)| *t)
    }
}

/// A GET line's range (`start..end`, `start..`).
fn byte_range(e: &Entry) -> Option<ByteRange> {
    let (a, b) = e.range.as_deref()?.split_once("..")?;
    let start = a.parse().ok()?;
    match b {
        "" => Some(ByteRange::from_offset(start)),
        b => ByteRange::new(start, b.parse().ok()?).ok(),
    }
}

/// The deepest folder (`s3://bucket/dir/`) every URI is in; `s3://` when they span buckets.
fn common_folder<'a>(uris: impl Iterator<Item = &'a str>) -> String {
    let mut common: Option<&str> = None;
    for u in uris {
        common = Some(match common {
            None => u,
            Some(c) => {
                let n = c.bytes().zip(u.bytes()).take_while(|(a, b)| a == b).count();
                &c[..n]
            }
        });
    }
    let c = common.unwrap_or("");
    match c.rfind('/') {
        Some(i) if i >= "s3://".len() => c[..=i].to_owned(),
        _ => c
            .get(..c.find("://").map_or(0, |i| i + 3))
            .unwrap_or("")
            .to_owned(),
    }
}

/// The most requests in flight at once in the log, attempts included.
fn max_in_flight(entries: &[Entry]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::with_capacity(entries.len() * 2);
    for e in entries {
        edges.push((e.start_unix_us, 1));
        edges.push((e.start_unix_us + e.duration_us.max(1), -1));
    }
    // Ends before starts at the same instant: touching requests do not overlap.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most.max(1) as usize
}

/// Where the replay writes.
#[derive(Clone)]
pub struct Target {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: ObjectUri,
}

impl Target {
    fn uri(&self, rel: &str) -> ObjectUri {
        self.prefix.with_key(format!("{}{rel}", self.prefix.key()))
    }
}

/// Creates the objects the log reads but does not write, `jobs` at a time; `written`
/// gathers them.
pub async fn set_up(
    rec: &Recording,
    t: &Target,
    jobs: usize,
    written: &Written,
) -> Result<(), Failure> {
    let largest = rec.setup.values().copied().max().unwrap_or(0);
    let payload = Bytes::from(sluice_testdata_bytes(largest));
    let bar = sluice_console::output::progress(rec.setup.len() as u64, false, false);
    bar.set_message("creating the objects the log reads");
    let objects: Vec<(ObjectUri, Bytes)> = rec
        .setup
        .iter()
        .map(|(k, size)| (t.uri(k), payload.slice(..*size as usize)))
        .collect();
    lock(written).extend(objects.iter().map(|(u, _)| u.clone()));
    let store = t.store.clone();
    let mut puts = futures::stream::iter(objects)
        .map(move |(uri, data)| {
            let store = store.clone();
            async move { store.put(&uri, PutPayload(data)).await }
        })
        .buffer_unordered(jobs.max(1));
    while let Some(r) = puts.next().await {
        r?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Bytes that no layer can compress, of length `n`.
fn sluice_testdata_bytes(n: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(n);
    (0..n).map(|_| rng.u8(..)).collect()
}

/// What a replay wrote: deleted at the end.
pub type Written = Arc<Mutex<BTreeSet<ObjectUri>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Replays `rec` once against `t` and reports it; `written` gathers what its PUTs made.
pub async fn replay(rec: &Recording, t: &Target, pace: Pace, written: &Written) -> OpsReport {
    let largest = rec
        .requests
        .iter()
        .filter_map(|(_, a)| match a {
            Action::Put(_, n) => Some(*n),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let payload = Bytes::from(sluice_testdata_bytes(largest));
    let limit = Arc::new(tokio::sync::Semaphore::new(match pace {
        Pace::Recorded => tokio::sync::Semaphore::MAX_PERMITS,
        Pace::Fast => rec.max_in_flight,
    }));
    let retries0 = sluice_core::retry_counts();
    let cpu0 = rusage::this_process();
    let started = Instant::now();
    // Each request a task of its own: they run on every worker thread, as the recorded
    // application's did.
    let mut tasks = tokio::task::JoinSet::new();
    let mut tally = Tally::default();
    for (at, action) in &rec.requests {
        let permit = limit.clone().acquire_owned().await.expect("never closed");
        if pace == Pace::Recorded {
            tokio::time::sleep_until((started + *at).into()).await;
        }
        let (payload, action) = (payload.clone(), action.clone());
        let (t, written) = (t.clone(), written.clone());
        tasks.spawn(async move {
            let t0 = Instant::now();
            let r = request(&t, &action, payload, &written).await;
            drop(permit);
            Ended {
                op: action.op(),
                took: t0.elapsed(),
                second: started.elapsed().as_secs() as usize,
                result: r,
            }
        });
        // Tally what ended meanwhile: the set holds no more than what is in flight.
        while let Some(done) = tasks.try_join_next() {
            tally.add(done.expect("a replayed request never panics"));
        }
    }
    while let Some(done) = tasks.join_next().await {
        tally.add(done.expect("a replayed request never panics"));
    }
    let seconds = started.elapsed().as_secs_f64();
    OpsReport {
        workload: "replay".into(),
        seconds,
        started_unix: Some(unix_now() - seconds),
        per_second: tally.per_second(),
        ops: tally.ops,
        cpu_seconds: cpu0.map_or(0.0, |c0| rusage::this_process().unwrap_or(c0) - c0),
        peak_rss_bytes: crate::worker::peak_rss_bytes(),
        retries: crate::engine::diff(sluice_core::retry_counts(), &retries0),
        stopped: Stopped::Count,
        ranks: 1,
    }
}

/// What a request moved: bytes, and its time to first byte (GETs).
type Moved = (u64, Option<Duration>);

async fn request(
    t: &Target,
    action: &Action,
    payload: Bytes,
    written: &Mutex<BTreeSet<ObjectUri>>,
) -> sluice_core::Result<Moved> {
    let t0 = Instant::now();
    match action {
        Action::Get(k, range, len) => {
            let opts = GetOptions {
                range: *range,
                ..Default::default()
            };
            let mut seg = Segment::counting(*len as usize);
            let info = t.store.get_into_with(&t.uri(k), &opts, &mut seg).await?;
            Ok((info.bytes, seg.first_byte_at().map(|f| f - t0)))
        }
        Action::Head(k) => t.store.head(&t.uri(k)).await.map(|_| (0, None)),
        Action::Put(k, n) => {
            let uri = t.uri(k);
            lock(written).insert(uri.clone());
            let data = payload.slice(..*n as usize);
            t.store
                .put(&uri, PutPayload(data))
                .await
                .map(|_| (*n, None))
        }
        Action::List(k, grouped) => {
            let opts = ListOptions {
                recursive: !grouped,
                ..Default::default()
            };
            t.store.list_page(&t.uri(k), &opts).await.map(|_| (0, None))
        }
        Action::Delete(k) => t.store.delete(&t.uri(k)).await.map(|_| (0, None)),
    }
}

/// Figures gathered as requests end.
#[derive(Default)]
struct Tally {
    ops: BTreeMap<Op, OpStats>,
    /// Bytes (and requests) ended in each second of the run.
    seconds: Vec<(u64, u64)>,
}

impl Tally {
    /// MB/s of each whole second, or requests a second where no bytes moved.
    fn per_second(&self) -> Vec<f64> {
        let by_bytes = self.seconds.iter().any(|(b, _)| *b > 0);
        let whole = self.seconds.len().saturating_sub(1);
        self.seconds[..whole]
            .iter()
            .map(|(b, n)| if by_bytes { *b as f64 / 1e6 } else { *n as f64 })
            .collect()
    }
}

/// A request that ended.
struct Ended {
    op: Op,
    took: Duration,
    /// The second of the run it ended in.
    second: usize,
    result: sluice_core::Result<Moved>,
}

impl Tally {
    fn add(&mut self, e: Ended) {
        let s = self.ops.entry(e.op).or_default();
        if self.seconds.len() <= e.second {
            self.seconds.resize(e.second + 1, (0, 0));
        }
        match e.result {
            Ok((bytes, ttfb)) => {
                s.ok += 1;
                s.bytes += bytes;
                s.latency.record(e.took);
                if let Some(f) = ttfb {
                    s.ttfb.record(f);
                }
                self.seconds[e.second].0 += bytes;
                self.seconds[e.second].1 += 1;
            }
            Err(err) => *s.errors.entry(err.kind_label()).or_default() += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(start: u64, op: &str, uri: &str, range: Option<&str>, bytes: u64, dur: u64) -> Entry {
        Entry {
            start_unix_us: start,
            op: op.into(),
            uri: uri.into(),
            range: range.map(str::to_owned),
            bytes,
            object_size: None,
            status: 200,
            first_byte_us: None,
            duration_us: dur,
            attempt: 1,
            error: String::new(),
        }
    }

    #[test]
    fn a_log_becomes_requests_under_the_common_folder_with_its_setup() {
        let mut retry = e(5, "GetObject", "s3://b/run/train/a", None, 10, 1);
        retry.attempt = 2;
        let log = vec![
            e(0, "GetObject", "s3://b/run/train/a", None, 10, 2),
            e(
                1,
                "GetObject",
                "s3://b/run/train/b",
                Some("100..200"),
                100,
                2,
            ),
            e(2, "CreateMultipartUpload", "s3://b/run/ckpt/c", None, 0, 1),
            e(3, "UploadPart", "s3://b/run/ckpt/c", None, 7, 1),
            e(4, "UploadPart", "s3://b/run/ckpt/c", None, 5, 1),
            e(
                5,
                "CompleteMultipartUpload",
                "s3://b/run/ckpt/c",
                None,
                0,
                1,
            ),
            retry,
            e(6, "GetObject", "s3://b/run/ckpt/c", None, 12, 1),
            e(7, "DeleteObjects", "s3://b/run/", None, 0, 1),
            e(8, "ListObjectsV2", "s3://b/run/train/", Some("/"), 0, 1),
        ];
        let r = Recording::from_entries(&log);
        assert_eq!(r.source, "s3://b/run/");
        let actions: Vec<&Action> = r.requests.iter().map(|(_, a)| a).collect();
        assert_eq!(
            actions,
            [
                &Action::Get("train/a".into(), None, 10),
                &Action::Get(
                    "train/b".into(),
                    Some(ByteRange::new(100, 200).unwrap()),
                    100
                ),
                &Action::Put("ckpt/c".into(), 12),
                &Action::Get("ckpt/c".into(), None, 12),
                &Action::List("train/".into(), true),
            ]
        );
        // Read before written: created first, as large as seen; the upload's own object not.
        assert_eq!(
            r.setup,
            BTreeMap::from([("train/a".into(), 10), ("train/b".into(), 200)])
        );
        assert_eq!(r.skipped, BTreeMap::from([("DeleteObjects".into(), 1)]));
        assert!(r.recorded_failures.is_empty());
        let mut failed = log[1].clone();
        failed.error = "HTTP 416 InvalidRange".into();
        let one = Recording::from_entries(&[log[0].clone(), failed]);
        assert_eq!(
            one.recorded_failures,
            BTreeMap::from([("HTTP 416 InvalidRange".into(), 1)])
        );
        // A read that failed when recorded needs no object made for it.
        assert_eq!(one.setup, BTreeMap::from([("a".into(), 10)]));
        // Two at once, at most: 0..2 with 1..3, 1..3 with 2..3, the completion with the retry.
        assert_eq!(r.max_in_flight, 2);
        assert_eq!(r.requests[3].0, Duration::from_micros(6));
    }

    #[test]
    fn keys_in_different_buckets_keep_their_bucket() {
        let f = common_folder(["s3://a/x/1", "s3://b/x/2"].into_iter());
        assert_eq!(f, "s3://");
        assert_eq!(
            common_folder(["s3://a/x/1", "s3://a/x/12"].into_iter()),
            "s3://a/x/"
        );
        assert_eq!(common_folder(["s3://a/k"].into_iter()), "s3://a/");
    }
}
