//! `sluice cp SRC DST`, after s5cmd and `aws s3 cp`: S3 to local, local to S3, S3 to S3
//! (a server-side CopyObject up to 5 GiB, through this machine above), `-` for stdin or
//! stdout, `--recursive` prefixes and directories, wildcards (`s3://b/train/*.npz`),
//! `--include`/`--exclude`, `--no-clobber`, `--dry-run`, one JSON line per object with
//! `--json`, and a progress bar on a terminal.
//!
//! Local paths are `file://` URIs of the same store (sluice's file backend), so every copy the
//! store cannot make on its side is one mechanism: ranged GETs of one version (pinned by
//! ETag) streamed into a writer — a multipart upload to S3, a temporary file renamed into
//! place locally. Memory stays bounded whatever the objects' sizes: a `CHUNK` read per object
//! in flight, and the parts in flight of the client's one window of uploads
//! (`parts_in_flight`); a download to a local file reads ranges in parallel within the
//! loader's memory budget, shared by the objects copied at once (`download`). Keys that would
//! be unsafe as local file names, or lead through a symlinked directory, are refused one by
//! one, as for `get -o`.

use bytes::Bytes;
use clap::Args;
use futures::{StreamExt, TryStreamExt};
use sluice_console::StoreArgs;
use sluice_console::output::{Failure, progress};
use sluice_core::ObjectStoreExt;
use sluice_core::checksum::Pieces;
use sluice_core::{
    ByteRange, Error, GetOptions, ObjectMeta, ObjectStore, ObjectUri, RangeSize, Segment,
    WriteOptions,
};
use sluice_loader::BufferPool;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read per GET of a large object, and held per object being copied.
const CHUNK: u64 = 32 << 20;
/// The same, read for an upload: whole parts, at least this many bytes. Each object copied
/// holds the chunk whose parts wait for a place in the window; at 32 MiB, `cp -j 8` to an
/// nginx sink peaked at 580–740 MB of memory, at one 16 MiB part 350–520 MB, as fast (6 runs
/// each, alternating).
const UPLOAD_CHUNK: u64 = 16 << 20;

#[derive(Args, Debug)]
pub struct CpArgs {
    /// What to copy: s3://bucket/key, a prefix or directory with --recursive, a wildcard
    /// (s3://bucket/train/*.npz; `*` any characters, `?` one), a local path, or - (stdin)
    src: String,
    /// Where: s3://bucket/key or a prefix ending in /, a local file or directory, or -
    /// (stdout)
    dst: String,
    /// Copy everything under the source prefix or directory
    #[arg(short, long)]
    recursive: bool,
    /// Copy only paths (relative to the source) matching one of these globs
    #[arg(long)]
    include: Vec<String>,
    /// Skip paths (relative to the source) matching any of these globs; wins over --include
    #[arg(long)]
    exclude: Vec<String>,
    /// Leave destinations that exist alone
    #[arg(short = 'n', long)]
    no_clobber: bool,
    /// Print what would be copied, copy nothing
    #[arg(long)]
    dry_run: bool,
    /// Objects copied at once
    #[arg(short, long, default_value_t = 8)]
    jobs: usize,
    /// One JSON object per line per object (source, destination, bytes, status)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

impl CpArgs {
    /// A copy of one object or file, `src` to `dst`, with the defaults.
    pub fn one(src: String, dst: String, json: bool, store: StoreArgs) -> Self {
        Self {
            src,
            dst,
            recursive: false,
            include: Vec::new(),
            exclude: Vec::new(),
            no_clobber: false,
            dry_run: false,
            jobs: 1,
            json,
            store,
        }
    }
}

/// One end of a copy.
#[derive(Debug, Clone)]
enum Loc {
    Uri(ObjectUri),
    Std,
}

fn loc(s: &str) -> Result<Loc, Failure> {
    if s == "-" {
        return Ok(Loc::Std);
    }
    if s.contains("://") {
        return Ok(Loc::Uri(ObjectUri::parse(s)?));
    }
    let abs = std::path::absolute(s)
        .map_err(|e| Failure::Usage(format!("{s}: not a usable path: {e}")))?;
    let mut text = abs.to_string_lossy().into_owned();
    if (s.ends_with('/') || abs.is_dir()) && !text.ends_with('/') {
        text.push('/');
    }
    Ok(Loc::Uri(ObjectUri::parse(&format!("file://{text}"))?))
}

/// One object to copy: where from (its size and version, when listed) and its path
/// relative to the source, which names it under a destination prefix.
#[derive(Debug, Clone)]
struct Job {
    src: ObjectUri,
    rel: String,
    size: Option<u64>,
    etag: Option<String>,
}

pub async fn cp(a: CpArgs) -> Result<(), Failure> {
    if a.jobs == 0 {
        return Err(Failure::Usage("--jobs: must be at least 1".into()));
    }
    let cfg = a.store.config_for(&[&a.src, &a.dst]).await?;
    let parts = WriteOptions::from_config(&cfg);
    let store = sluice::registry::open(a.store.backend.as_deref(), cfg)?;
    let (src, dst) = (loc(&a.src)?, loc(&a.dst)?);
    let src = match (src, &dst) {
        (Loc::Std, Loc::Std) => {
            return Err(Failure::Usage("cp: - to - copies nothing".into()));
        }
        (Loc::Std, Loc::Uri(d)) => {
            if a.no_clobber && store.head(d).await.is_ok() {
                println!("skipped (exists) - -> {d}");
                return Ok(());
            }
            if a.dry_run {
                println!("would copy - -> {d}");
                return Ok(());
            }
            return from_stdin(store, d, parts, a.json).await;
        }
        (Loc::Uri(s), _) => s,
    };
    let jobs = sources(store.as_ref(), &src, &a).await?;
    let many = a.recursive || has_glob(src.key());
    if let Loc::Std = dst {
        if many {
            return Err(Failure::Usage("cp: only one object can go to -".into()));
        }
        let job = jobs.into_iter().next().expect("sources gives one or fails");
        return to_stdout(store, &job, &chunk_pool(1, &parts)).await;
    }
    let Loc::Uri(dst) = dst else { unreachable!() };
    let total: u64 = jobs.iter().filter_map(|j| j.size).sum();
    let bar = progress(total, true, a.json || !std::io::stderr().is_terminal());
    let count = jobs.len();
    let at_once = a.jobs.min(count).max(1);
    let pool = chunk_pool(at_once, &parts);
    let (a, parts, pool) = (&a, &parts, &pool);
    let results: Vec<bool> = futures::stream::iter(jobs)
        .map(|job| {
            let (store, dst, bar) = (store.clone(), &dst, &bar);
            let to = destination(&job, dst, many);
            async move {
                let outcome = match to {
                    Err(e) => Err(e),
                    Ok(to) => copy_job(store.as_ref(), &job, &to, a, at_once, parts, pool, bar)
                        .await
                        .map(|s| (to.uri, s)),
                };
                report(&job, outcome, a.json)
            }
        })
        .buffer_unordered(a.jobs)
        .collect()
        .await;
    bar.finish_and_clear();
    let failed = results.iter().filter(|ok| !**ok).count();
    if failed > 0 {
        return Err(Failure::Other(format!(
            "{failed} of {count} objects not copied"
        )));
    }
    Ok(())
}

/// What `cp` found to copy: one object, everything under a prefix (`--recursive`), or the
/// keys matching a wildcard; filtered by `--include`/`--exclude`.
async fn sources(
    store: &dyn ObjectStore,
    src: &ObjectUri,
    a: &CpArgs,
) -> Result<Vec<Job>, Failure> {
    let key = src.key();
    let (list_from, pattern) = match key.find(['*', '?']) {
        Some(i) => (&key[..key[..i].rfind('/').map_or(0, |j| j + 1)], Some(key)),
        None if a.recursive => (key, None),
        None if key.is_empty() || key.ends_with('/') => {
            return Err(Failure::Usage(format!(
                "cp {src}: a prefix or directory; add --recursive"
            )));
        }
        None => {
            let meta = store.head(src).await?;
            let rel = key.rsplit('/').next().unwrap_or(key).to_owned();
            return Ok(vec![Job {
                src: src.clone(),
                rel,
                size: Some(meta.size),
                etag: meta.etag,
            }]);
        }
    };
    let mut prefix = list_from.to_owned();
    if pattern.is_none() && !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    let mut jobs = Vec::new();
    let job = |m: ObjectMeta| {
        let k = m.uri.key();
        if pattern.is_some_and(|p| !glob(p, k)) || k.ends_with('/') {
            return None;
        }
        // A listing that answers keys outside the prefix asked is wrong; they are not ours.
        let rel = k.strip_prefix(prefix.as_str())?.to_owned();
        selected(&rel, &a.include, &a.exclude).then_some(Job {
            rel,
            size: Some(m.size),
            etag: m.etag,
            src: m.uri,
        })
    };
    sluice_core::list_parallel_into(
        store,
        &src.with_key(prefix.clone()),
        sluice_core::LIST_WORKERS,
        |part: &mut Vec<Job>, m| part.extend(job(m)),
        |part| jobs.extend(part),
    )
    .await?;
    if jobs.is_empty() {
        return Err(Error::NotFound {
            uri: src.to_string(),
            code: "nothing to copy".into(),
        }
        .into());
    }
    Ok(jobs)
}

fn has_glob(key: &str) -> bool {
    key.contains(['*', '?'])
}

/// `--include` (any, when given) and not `--exclude` (any), as s5cmd filters.
fn selected(rel: &str, include: &[String], exclude: &[String]) -> bool {
    (include.is_empty() || include.iter().any(|p| glob(p, rel)))
        && !exclude.iter().any(|p| glob(p, rel))
}

/// Whether `text` matches `pattern`: `*` any run of characters (`/` included, as in s5cmd
/// and `aws s3`), `?` exactly one, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Where one object goes: its URI, and for a file under a local destination directory, that
/// directory and the key's path under it, which `OutFile` writes without following a
/// symlink on the way (the check here is only the early refusal).
#[derive(Debug)]
struct Dest {
    uri: ObjectUri,
    confined: Option<(PathBuf, Vec<String>)>,
}

/// Where `job` goes: under `dst` by its relative path when copying many or when `dst` is
/// a prefix or directory (ends in `/`), else `dst` itself. A relative path that is not a
/// safe file name is refused for a local destination.
fn destination(job: &Job, dst: &ObjectUri, many: bool) -> Result<Dest, String> {
    if !many && !dst.key().ends_with('/') {
        // A local file named: written in its directory as a file under a directory is.
        let path = std::path::Path::new(dst.key());
        let confined = match (dst.scheme(), path.parent(), path.file_name()) {
            (sluice_core::Scheme::File, Some(dir), Some(name)) => {
                Some((dir.to_path_buf(), vec![name.to_string_lossy().into_owned()]))
            }
            _ => None,
        };
        return Ok(Dest {
            uri: dst.clone(),
            confined,
        });
    }
    let mut confined = None;
    if !dst.scheme().is_object_store() {
        let why = |why: String| format!("{}: {why}", job.src);
        match crate::outdir::target(&job.rel).map_err(why)? {
            crate::outdir::Target::File(segments) => {
                let dir = PathBuf::from(dst.key());
                crate::outdir::no_symlinks(&dir, &segments).map_err(why)?;
                confined = Some((dir, segments));
            }
            crate::outdir::Target::DirMarker => {}
        }
    }
    let mut key = dst.key().to_owned();
    if !key.is_empty() && !key.ends_with('/') {
        key.push('/');
    }
    key.push_str(&job.rel);
    Ok(Dest {
        uri: dst.with_key(key),
        confined,
    })
}

/// What happened to one object.
enum Done {
    Copied(u64),
    Exists,
    WouldCopy,
}

#[allow(clippy::too_many_arguments)]
async fn copy_job(
    store: &dyn ObjectStore,
    job: &Job,
    dest: &Dest,
    a: &CpArgs,
    at_once: usize,
    parts: &WriteOptions,
    pool: &Arc<BufferPool>,
    bar: &indicatif::ProgressBar,
) -> Result<Done, String> {
    let fail = |e: Error| e.to_string();
    if a.no_clobber && store.head(&dest.uri).await.is_ok() {
        bar.inc(job.size.unwrap_or(0));
        return Ok(Done::Exists);
    }
    if a.dry_run {
        return Ok(Done::WouldCopy);
    }
    let to = &dest.uri;
    let size = match job.size {
        Some(n) => n,
        None => store.head(&job.src).await.map_err(fail)?.size,
    };
    if let Some((dir, segments)) = dest.confined.clone() {
        // The objects copied at once share the budget.
        let memory = sluice_loader::DEFAULT_MEMORY_BUDGET / at_once as u64;
        download(store, job, size, (dir, segments), memory, pool, bar).await?;
        return Ok(Done::Copied(size));
    }
    if size <= sluice_core::MAX_COPY_SIZE {
        match store.copy(&job.src, to).await {
            Ok(Some(_)) => {
                bar.inc(size);
                return Ok(Done::Copied(size));
            }
            Ok(None) => {}
            // A store without CopyObject, or one that refuses this copy (onto itself, say):
            // copied through this machine instead.
            Err(Error::Service { status, code, .. })
                if status == 501
                    || matches!(code.as_str(), "NotImplemented" | "InvalidRequest") => {}
            Err(e) => return Err(fail(e)),
        }
    }
    let mut writer = store.writer(to, parts.clone()).await.map_err(fail)?;
    let copied: sluice_core::Result<()> = async {
        // Summed part by part as they are read, so the upload's checksums cost no second
        // read of the bytes.
        let tally =
            (parts.checksums && to.scheme() == sluice_core::Scheme::S3).then_some(parts.part_size);
        let mut chunks = std::pin::pin!(chunks(store, job, size, tally, pool));
        while let Some((_, chunk, pieces)) = chunks.try_next().await? {
            bar.inc(chunk.len() as u64);
            match pieces {
                Some(pieces) => writer.write_with_pieces(chunk, pieces).await?,
                None => writer.write(chunk).await?,
            }
        }
        writer.finish().await.map(drop)
    }
    .await;
    if let Err(e) = copied {
        // Now, not at the writer's drop: the runtime may be gone by then, leaving parts.
        let _ = writer.abort().await;
        return Err(fail(e));
    }
    Ok(Done::Copied(size))
}

/// `job`'s object, `size` bytes of one version, into a new local file: ranges read in
/// parallel and each written at its offset as it lands (`pwrite`), as `get -o` writes, the
/// file renamed into place once whole. One GET at a time is one connection's rate, which S3
/// caps; the ranges follow the client's controller as the loader's do, as many at once as
/// `memory` holds (the client's controller sends what pays of them).
async fn download(
    store: &dyn ObjectStore,
    job: &Job,
    size: u64,
    (dir, segments): (PathBuf, Vec<String>),
    memory: u64,
    pool: &Arc<BufferPool>,
    bar: &indicatif::ProgressBar,
) -> Result<(), String> {
    use crate::outdir::{OutFile, blocking};
    let file = Arc::new(blocking(move || OutFile::create(&dir, &segments, size)).await?);
    let ranges = RangeSize::follow(Some(memory));
    if let Some(c) = store.congestion() {
        store.expect_requests(ranges.requests_at_once([Some(size)], 0, Some(memory), c.max));
    }
    let range = ranges.for_client(store.congestion()).get();
    let at_once = usize::try_from(memory / range).unwrap_or(usize::MAX).max(1);
    let offsets = std::iter::successors(Some(0), |at| Some(at + range)).take_while(|&at| at < size);
    futures::stream::iter(offsets)
        .map(|at| {
            let file = file.clone();
            async move {
                let len = range.min(size - at);
                let (chunk, _) = read(store, &job.src, job.etag.clone(), at, len, None, pool)
                    .await
                    .map_err(|e| e.to_string())?;
                blocking(move || file.write_at(&chunk, at)).await?;
                bar.inc(len);
                Ok::<_, String>(())
            }
        })
        .buffer_unordered(at_once)
        .try_collect::<()>()
        .await?;
    let file = Arc::try_unwrap(file).map_err(|_| "the file is still being written")?;
    blocking(move || file.publish()).await?;
    Ok(())
}

/// A chunk of an object: its offset, its bytes, and their CRC pieces when asked for.
type Chunk = (u64, Bytes, Option<Pieces>);

/// Memory for the chunks of `jobs` objects copied at once: a chunk's buffer comes back when
/// the writer has sent the last part cut from it, and the next chunk lands in memory already
/// mapped. Fresh 32 MiB buffers cost a quarter of an upload's CPU in page faults
/// (`clear_page_erms`, perf of `sluice cp` of 1 GiB). The objects hold at most the parts in
/// flight of the client's one window (`parts_in_flight`: searched uploads share it), and
/// each the part pending and the chunk being read; idle memory never exceeds what was held
/// at once (`BufferPool`).
fn chunk_pool(jobs: usize, parts: &WriteOptions) -> Arc<BufferPool> {
    // A number of parts the user set is each writer's own.
    let in_flight = if parts.adaptive {
        parts.max_in_flight
    } else {
        jobs * parts.max_in_flight
    };
    // Downloads to files hold as many ranges as the memory budget does (`download`).
    let ranges = (sluice_loader::DEFAULT_MEMORY_BUDGET / sluice_core::FOLLOW_MIN_RANGE) as usize;
    BufferPool::new((in_flight + 2 * jobs).max(ranges), 0)
}

/// The `size` bytes of `job`'s object, of one version (its ETag), in `CHUNK`s in order, each
/// with its offset: what every copy through this machine reads, whatever it writes to. With
/// `tally: Some(part)`, chunks are whole parts (the fewest that make `UPLOAD_CHUNK`) and
/// each part's CRC is taken as its bytes land (`Segment::tallied`).
fn chunks<'a>(
    store: &'a dyn ObjectStore,
    job: &'a Job,
    size: u64,
    tally: Option<u64>,
    pool: &'a Arc<BufferPool>,
) -> impl futures::Stream<Item = sluice_core::Result<Chunk>> + Send + 'a {
    let chunk = tally.map_or(CHUNK, |part| UPLOAD_CHUNK.div_ceil(part) * part);
    futures::stream::try_unfold(0, move |at| async move {
        if at >= size {
            return Ok(None);
        }
        let len = chunk.min(size - at);
        let (chunk, pieces) = read(store, &job.src, job.etag.clone(), at, len, tally, pool).await?;
        let next = at + chunk.len() as u64;
        Ok(Some(((at, chunk, pieces), next)))
    })
}

/// `len` bytes at `at` of one version of `src` (`etag`; any when `None`), in memory from
/// `pool`, with their CRC in pieces of `tally` bytes when given.
async fn read(
    store: &dyn ObjectStore,
    src: &ObjectUri,
    etag: Option<String>,
    at: u64,
    len: u64,
    tally: Option<u64>,
    pool: &Arc<BufferPool>,
) -> sluice_core::Result<(Bytes, Option<Pieces>)> {
    if len == 0 {
        return Ok((Bytes::new(), None));
    }
    let opts = GetOptions {
        range: Some(ByteRange::new(at, at + len)?),
        if_match: etag,
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    let mut seg = Segment::from_buffer(pool.take_for(src, len)?, len);
    if let Some(piece) = tally {
        seg = seg.tallied(piece);
    }
    if let Err(e) = store.get_into_with(src, &opts, &mut seg).await {
        pool.give_back(seg.into_buffer());
        return Err(e);
    }
    let (bytes, pieces) = seg
        .freeze_with_pieces()
        .map_err(|e| Error::integrity(src.to_string(), e.to_string()))?;
    Ok((pool.share(bytes), pieces))
}

/// Prints one object's outcome; whether it succeeded.
fn report(job: &Job, outcome: Result<(ObjectUri, Done), String>, json: bool) -> bool {
    let (to, status, bytes, error) = match &outcome {
        Ok((to, Done::Copied(n))) => (Some(to), "copied", Some(*n), None),
        Ok((to, Done::Exists)) => (Some(to), "skipped (exists)", None, None),
        Ok((to, Done::WouldCopy)) => (Some(to), "would copy", job.size, None),
        Err(e) => (None, "failed", None, Some(e.as_str())),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"source": job.src.to_string(), "destination": to.map(|t| t.to_string()),
                "status": status, "bytes": bytes, "error": error})
        );
    } else {
        match (to, error) {
            (Some(to), _) => println!("{status} {} -> {to}", job.src),
            (None, Some(e)) => eprintln!("sluice: cp {}: {e}", job.src),
            (None, None) => {}
        }
    }
    outcome.is_ok()
}

/// `cp - DST`: standard input, streamed into one object.
async fn from_stdin(
    store: Arc<dyn ObjectStore>,
    dst: &ObjectUri,
    parts: WriteOptions,
    json: bool,
) -> Result<(), Failure> {
    if dst.key().ends_with('/') || dst.key().is_empty() {
        return Err(Failure::Usage(format!(
            "cp - {dst}: name the object, not a prefix"
        )));
    }
    let mut writer = store.writer(dst, parts).await?;
    let mut stdin = tokio::io::stdin();
    let mut total = 0u64;
    loop {
        // Whole parts' worth at a time: the writer cuts them into parts as they fill.
        let mut buf = vec![0u8; 8 << 20];
        let mut filled = 0;
        while filled < buf.len() {
            match stdin.read(&mut buf[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(Failure::Other(format!("reading stdin: {e}")));
                }
            }
        }
        let last = filled < buf.len();
        buf.truncate(filled);
        total += filled as u64;
        if filled > 0
            && let Err(e) = writer.write(Bytes::from(buf)).await
        {
            let _ = writer.abort().await;
            return Err(e.into());
        }
        if last {
            break;
        }
    }
    writer.finish().await?;
    if json {
        println!(
            "{}",
            serde_json::json!({"source": "-", "destination": dst.to_string(), "status": "copied", "bytes": total})
        );
    } else {
        eprintln!("copied - -> {dst} ({total} bytes)");
    }
    Ok(())
}

/// `cp SRC -`: one object to standard output, a range at a time.
async fn to_stdout(
    store: Arc<dyn ObjectStore>,
    job: &Job,
    pool: &Arc<BufferPool>,
) -> Result<(), Failure> {
    let size = job.size.unwrap_or(0);
    let mut out = tokio::io::stdout();
    let mut chunks = std::pin::pin!(chunks(store.as_ref(), job, size, None, pool));
    while let Some((_, chunk, _)) = chunks.try_next().await? {
        out.write_all(&chunk)
            .await
            .map_err(|e| Failure::Other(format!("writing stdout: {e}")))?;
    }
    out.flush()
        .await
        .map_err(|e| Failure::Other(format!("writing stdout: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_s5cmd_does() {
        for (p, t, want) in [
            ("*.npz", "a.npz", true),
            ("*.npz", "dir/a.npz", true),
            ("*.npz", "a.npy", false),
            ("train/img_?.npz", "train/img_7.npz", true),
            ("train/img_?.npz", "train/img_17.npz", false),
            ("*", "", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(glob(p, t), want, "{p} ~ {t}");
        }
    }

    #[test]
    fn include_and_exclude_filter_as_documented() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(selected("a.npz", &[], &[]));
        assert!(selected("a.npz", &v(&["*.npz"]), &[]));
        assert!(!selected("a.txt", &v(&["*.npz"]), &[]));
        assert!(!selected("tmp/a.npz", &v(&["*.npz"]), &v(&["tmp/*"])));
    }

    #[test]
    fn destinations_under_a_prefix_keep_relative_paths_and_refuse_unsafe_ones_locally() {
        let job = |rel: &str| Job {
            src: ObjectUri::parse(&format!("s3://bkt/p/{rel}")).unwrap(),
            rel: rel.into(),
            size: Some(1),
            etag: None,
        };
        let s3 = ObjectUri::parse("s3://out/x/").unwrap();
        assert_eq!(
            destination(&job("a/b"), &s3, true).unwrap().uri.to_string(),
            "s3://out/x/a/b"
        );
        let file = ObjectUri::parse("file:///tmp/out").unwrap();
        assert_eq!(
            destination(&job("a"), &file, false)
                .unwrap()
                .uri
                .to_string(),
            "file:///tmp/out"
        );
        assert_eq!(
            destination(&job("a/b"), &file, true)
                .unwrap()
                .uri
                .to_string(),
            "file:///tmp/out/a/b"
        );
        assert!(
            destination(&job("../evil"), &file, true)
                .unwrap_err()
                .contains("..")
        );
    }
}
