//! `sluice gen | ls | get | put | rm`.

use crate::outdir::{self, Target};
use crate::stream;
use clap::Args;
use futures::{StreamExt, TryStreamExt};
use sluice_console::StoreArgs;
use sluice_console::output::{Failure, cpu_s_per_gb, mb_per_s, progress};
use sluice_console::rusage;
use sluice_core::ObjectStoreExt;
use sluice_core::wire::{MAX_DELETE_BATCH, Request};
use sluice_core::{ListEntry, ObjectStore, ObjectUri};
use sluice_loader::{BufferPool, Dataset, Item, StatsSnapshot};
use std::collections::HashMap;
use std::io::Write;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn parse_uri(s: &str) -> Result<ObjectUri, Failure> {
    Ok(ObjectUri::parse(s)?)
}

#[derive(Args, Debug)]
pub struct LsArgs {
    uri: String,
    /// List every key below, not just the next level
    #[arg(short, long)]
    recursive: bool,
    /// Sizes in KiB, MiB, GiB (exact bytes otherwise)
    #[arg(short = 'H', long)]
    human: bool,
    /// One JSON object per line (uri, size, etag, last_modified; prefixes with "prefix": true)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

pub async fn ls(a: LsArgs) -> Result<(), Failure> {
    let store = a.store.open_for(&[&a.uri]).await?;
    let uri = parse_uri(&a.uri)?;
    if uri.scheme().is_object_store() && uri.key().is_empty() {
        bucket_exists(store.as_ref(), &uri).await?;
    }
    let (human, json) = (a.human, a.json);
    if a.recursive {
        // Several pages in flight (`list_parallel_into`); each range's lines are printed
        // once the ranges before it are, so output starts early and stays in key order.
        let out = std::io::stdout();
        let mut failed = None;
        sluice_core::list_parallel_into(
            store.as_ref(),
            &uri,
            sluice_core::LIST_WORKERS,
            |lines: &mut String, m| lines.push_str(&ls_line(&ListEntry::Object(m), human, json)),
            |lines| {
                if failed.is_none() {
                    failed = out.lock().write_all(lines.as_bytes()).err();
                }
            },
        )
        .await?;
        return failed.map_or(Ok(()), |e| Err(Failure::Other(format!("stdout: {e}"))));
    }
    let mut entries = store.list(&uri, false);
    // Each entry as it arrives: a listing of millions of keys is never held.
    while let Some(e) = entries.try_next().await? {
        print!("{}", ls_line(&e, human, json));
    }
    Ok(())
}

/// One line of `ls` output, with its newline.
fn ls_line(e: &ListEntry, human: bool, json: bool) -> String {
    match (e, json) {
        (ListEntry::Object(m), false) if human => format!(
            "{:>10}  {}\n",
            sluice_console::output::human_size(m.size),
            m.uri
        ),
        (ListEntry::Object(m), false) => format!("{:>14}  {}\n", m.size, m.uri),
        (ListEntry::Prefix(p), false) => format!("{:>14}  {p}\n", "PRE"),
        (ListEntry::Object(m), true) => format!(
            "{}\n",
            serde_json::json!({"uri": m.uri.to_string(), "size": m.size, "etag": m.etag,
                "last_modified": m.last_modified.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_secs())})
        ),
        (ListEntry::Prefix(p), true) => format!(
            "{}\n",
            serde_json::json!({"uri": p.to_string(), "prefix": true})
        ),
    }
}

/// A bucket's root is listed only once HeadBucket says the bucket is there, so that a missing
/// bucket is named as such (an empty one lists nothing). A client stack that cannot ask
/// leaves it to the listing's answer.
async fn bucket_exists(store: &dyn ObjectStore, bucket: &ObjectUri) -> Result<(), Failure> {
    match store.send(Request::HeadBucket { bucket }).await {
        Ok(_) => Ok(()),
        Err(sluice_core::Error::NotFound { uri, .. }) => {
            Err(Failure::Store(sluice_core::Error::NotFound {
                uri: format!("{uri} (the bucket does not exist)"),
                code: "NoSuchBucket".into(),
            }))
        }
        Err(sluice_core::Error::Service { status: 501, .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Object URIs, or prefixes (ending in `/`) to read everything under
    #[arg(required = true)]
    uris: Vec<String>,
    /// GETs in flight (ranges of large objects, small objects whole), fixed [default: found
    /// at run time: as many as the store answers faster with, within --memory-budget]
    #[arg(short = 'j', long, value_parser = clap::value_parser!(u64).range(1..))]
    jobs: Option<u64>,
    /// Bytes in flight: fewer GETs than -j when -j pieces would not fit; "off": only -j
    /// bounds them. Objects at or above --range-threshold are never whole in memory: ranges
    /// are counted, checked or written at their offset as they arrive
    // The loader's DEFAULT_MEMORY_BUDGET (measured there); a test keeps the two equal.
    #[arg(long, default_value = "256MiB", value_parser = parse_budget)]
    memory_budget: u64,
    /// Objects at least this large are read as parallel ranged GETs ("off": never)
    #[arg(long, default_value = "32MiB", value_parser = parse_threshold)]
    range_threshold: u64,
    /// Size of each ranged GET [default: 4 to 8 MiB, smaller as the store's client allows
    /// more GETs within --memory-budget]
    #[arg(long, value_parser = parse_chunk_size)]
    chunk_size: Option<NonZeroU64>,
    /// Write objects under this directory, as paths relative to the prefix given (an object
    /// named alone: its last key segment); keys that would leave DIR are refused
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Check every byte against sluice's deterministic pattern (objects from `serve --populate`)
    #[arg(long)]
    verify: bool,
    /// Read everything this many times (the same buffers each time)
    #[arg(long, default_value_t = 1)]
    epochs: u32,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// A size, or "off" (0: no budget).
fn parse_budget(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(0);
    }
    match crate::serve::parse_size(s)? {
        0 => Err("must be at least 1 byte (or \"off\")".into()),
        n => Ok(n),
    }
}

fn parse_chunk_size(s: &str) -> Result<NonZeroU64, String> {
    NonZeroU64::new(crate::serve::parse_size(s)?).ok_or_else(|| "must be at least 1 byte".into())
}

fn parse_threshold(s: &str) -> Result<u64, String> {
    if s.eq_ignore_ascii_case("off") {
        Ok(sluice_core::RangePlanner::NEVER)
    } else {
        crate::serve::parse_size(s)
    }
}

/// The objects named: URIs as given (size learned while reading), prefixes listed (sizes
/// kept). Each with the path it gets under `get -o DIR`: the key relative to the prefix
/// listed, or the key's last segment for an object named alone (as `aws s3 cp` does).
async fn expand(
    store: &dyn ObjectStore,
    uris: &[String],
) -> Result<(Dataset, HashMap<ObjectUri, String>), Failure> {
    let mut items = Vec::new();
    let mut paths = HashMap::new();
    for s in uris {
        let uri = parse_uri(s)?;
        if uri.key().is_empty() || uri.key().ends_with('/') {
            let listed = Dataset::from_prefix(store, &uri, None).await?;
            if listed.is_empty() {
                return Err(sluice_core::Error::NotFound {
                    uri: uri.to_string(),
                    code: "no objects under this prefix".into(),
                }
                .into());
            }
            for item in listed.iter() {
                let rel = item
                    .uri
                    .key()
                    .strip_prefix(uri.key())
                    .unwrap_or(item.uri.key());
                paths.insert(item.uri.clone(), rel.to_owned());
                items.push(item);
            }
        } else {
            let name = uri.key().rsplit('/').next().unwrap_or_default().to_owned();
            paths.insert(uri.clone(), name);
            items.push(Item::new(uri));
        }
    }
    Ok((Dataset::from_items(items), paths))
}

/// Under `-o DIR`: which objects to read, each with its path segments under DIR. Directory
/// markers are left out; keys that cannot be a file inside DIR are reported one by one (the
/// count is returned) and left out, so the rest still download.
fn plan_output(
    dataset: &Dataset,
    paths: &HashMap<ObjectUri, String>,
    dir: &Path,
) -> (Dataset, HashMap<ObjectUri, Vec<String>>, usize) {
    let (mut items, mut files, mut refused) = (Vec::new(), HashMap::new(), 0);
    for item in dataset.iter() {
        let rel = paths.get(&item.uri).map_or("", String::as_str);
        match outdir::target(rel) {
            Ok(Target::File(segments)) => {
                files.insert(item.uri.clone(), segments);
                items.push(item);
            }
            Ok(Target::DirMarker) => {}
            Err(why) => {
                refused += 1;
                eprintln!(
                    "sluice: {}: not written under {}: {why} (relative path {rel:?})",
                    item.uri,
                    dir.display()
                );
            }
        }
    }
    (Dataset::from_items(items), files, refused)
}

pub async fn get(a: GetArgs) -> Result<(), Failure> {
    let uris: Vec<&str> = a.uris.iter().map(String::as_str).collect();
    let mut cfg = a.store.config_for(&uris).await?;
    // A number given is the number sent: the client's controller is off (`congestion`).
    let jobs = a.jobs.map(|j| usize::try_from(j).unwrap_or(usize::MAX));
    if let Some(j) = jobs {
        cfg.max_connections = j;
        cfg.concurrency = sluice_core::Concurrency::Fixed;
    }
    let store = sluice::registry::open(a.store.backend.as_deref(), cfg)?;
    let (dataset, paths) = expand(store.as_ref(), &a.uris).await?;
    let (dataset, files, refused) = match &a.out {
        Some(dir) => plan_output(&dataset, &paths, dir),
        None => (dataset, HashMap::new(), 0),
    };
    // Otherwise as many as could ever be sent; the controller sends what pays.
    let jobs = jobs.unwrap_or(sluice_loader::FOLLOW_MAX);
    // Listed objects with their sizes and versions; objects named alone are sized by their
    // first piece's answer (`stream::pass`), with no HEAD before it.
    let objects: Vec<stream::Object> = dataset
        .iter()
        .map(|item| stream::Object {
            file: files.get(&item.uri).cloned(),
            uri: item.uri,
            size: item.size,
            etag: item.etag,
        })
        .collect();
    let budget = (a.memory_budget > 0).then_some(a.memory_budget);
    let plan = stream::Plan {
        jobs,
        memory_budget: budget,
        range_threshold: a.range_threshold,
        range_size: sluice_core::RangeSize::set_or_follow(a.chunk_size, budget),
        verify: a.verify,
    };
    // Saturating: a hostile listing's sizes must not overflow the progress bar. Sizes not
    // known yet are added as they are learned.
    let total = objects
        .iter()
        .fold(0u64, |t, o| t.saturating_add(o.size.unwrap_or(0)));
    let pb = progress(
        total.saturating_mul(u64::from(a.epochs)).max(1),
        true,
        a.json,
    );
    // Buffers of one pass serve the next: nothing is page-faulted in twice.
    let idle_cap = match a.memory_budget {
        0 => usize::MAX,
        b => usize::try_from(b).unwrap_or(usize::MAX),
    };
    let pool = BufferPool::new(plan.jobs, idle_cap);
    let mut epochs = Vec::new();
    let mut not_written = std::collections::HashSet::new();
    for _ in 0..a.epochs.max(1) {
        let cpu0 = rusage::this_process();
        let pass = stream::pass(
            &store,
            &objects,
            plan,
            a.out.as_ref(),
            &pool,
            |n| pb.inc(n),
            |n| pb.inc_length(n),
        )
        .await?;
        for (uri, why) in &pass.refused {
            // One object that cannot be written (a symlink on its way, a full disk) is
            // reported; the others are still written.
            eprintln!("sluice: {uri}: not written: {why}");
        }
        not_written.extend(pass.refused.into_iter().map(|(uri, _)| uri));
        let cpu = cpu0
            .zip(rusage::this_process())
            .map(|(a, b)| cpu_s_per_gb(b - a, pass.stats.bytes));
        epochs.push((pass.stats, cpu));
    }
    pb.finish_and_clear();
    report_epochs(&epochs, store.backend(), store.congestion(), a.json);
    report_endpoints(&store.endpoint_stats(), a.json);
    // Never exit 0 having written fewer objects than were listed.
    let not_written = refused + not_written.len();
    if not_written > 0 {
        return Err(Failure::Usage(format!(
            "{not_written} object(s) not written (see above)"
        )));
    }
    Ok(())
}

/// One line per epoch; with JSON, each also carries the client's congestion figures since
/// the start (`throttled`, `in_flight_limit`: what the store's throttling left it).
fn report_epochs(
    epochs: &[(StatsSnapshot, Option<f64>)],
    backend: &str,
    congestion: Option<sluice_core::CongestionStats>,
    json: bool,
) {
    for (i, (s, cpu_per_gb)) in epochs.iter().enumerate() {
        let epoch = if epochs.len() > 1 {
            format!("epoch {i}: ")
        } else {
            String::new()
        };
        if json {
            println!(
                "{}",
                serde_json::json!({"backend": backend, "epoch": i, "objects": s.objects, "bytes": s.bytes, "seconds": s.elapsed.as_secs_f64(),
                    "mb_per_s": s.mb_per_s, "requests": s.requests, "retries": s.retries,
                    "latency_p50_ms": s.latency_p50.as_secs_f64() * 1e3, "latency_p99_ms": s.latency_p99.as_secs_f64() * 1e3,
                    "cpu_s_per_gb": cpu_per_gb, "range_size": s.range_size,
                    "throttled": congestion.map(|c| c.throttled), "in_flight_limit": congestion.map(|c| c.limit)})
            );
        } else {
            println!(
                "{epoch}{} objects, {} bytes in {:.3} s: {:.1} MB/s, {} CPU-s/GB ({}; {} requests, {} retries, latency p50 {:.1} ms p99 {:.1} ms)",
                s.objects,
                s.bytes,
                s.elapsed.as_secs_f64(),
                s.mb_per_s,
                cpu_per_gb.map_or("?".into(), |c| format!("{c:.3}")),
                backend,
                s.requests,
                s.retries,
                s.latency_p50.as_secs_f64() * 1e3,
                s.latency_p99.as_secs_f64() * 1e3
            );
        }
    }
    if let Some(c) = congestion.filter(|c| c.throttled > 0 && !json) {
        println!(
            "throttled {} times: requests in flight cut {} times, {} of {} allowed at the end",
            c.throttled, c.cuts, c.limit, c.max
        );
    }
}

/// What each endpoint served, when the store spreads over several (`--endpoints`).
fn report_endpoints(endpoints: &[sluice_core::EndpointStats], json: bool) {
    for e in endpoints {
        if json {
            println!(
                "{}",
                serde_json::json!({"endpoint": e.url.as_str(), "requests": e.requests, "failures": e.failures,
                    "bytes_read": e.bytes_read, "bytes_written": e.bytes_written, "down": e.down})
            );
        } else {
            println!(
                "endpoint {}: {} requests, {} failed to connect, {} bytes read{}",
                e.url,
                e.requests,
                e.failures,
                e.bytes_read,
                if e.down { " (avoided now)" } else { "" }
            );
        }
    }
}

#[derive(Args, Debug)]
pub struct PutArgs {
    /// Local file
    file: PathBuf,
    /// Destination object URI
    uri: String,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// `cp FILE URI`: the file streamed into a writer (multipart when large), never whole in
/// memory.
pub async fn put(a: PutArgs) -> Result<(), Failure> {
    crate::cp::cp(crate::cp::CpArgs::one(
        a.file.display().to_string(),
        a.uri,
        a.json,
        a.store,
    ))
    .await
}

#[derive(Args, Debug)]
pub struct RmArgs {
    #[arg(required = true)]
    pub(crate) uris: Vec<String>,
    /// Delete every object under each URI (a prefix)
    #[arg(short, long)]
    recursive: bool,
    /// Instead of objects, abort the multipart uploads in progress under each URI (a
    /// prefix): what a writer killed mid-upload leaves, stored and billed but never visible
    #[arg(long, conflicts_with = "recursive")]
    pub(crate) incomplete_uploads: bool,
    /// With --incomplete-uploads: only those begun at least this long ago (30m, 12h, 1d),
    /// so that uploads still being written are left alone
    #[arg(long, requires = "incomplete_uploads", value_parser = humantime::parse_duration)]
    pub(crate) older_than: Option<std::time::Duration>,
    /// Print what would be deleted, delete nothing
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// DeleteObjects requests (of up to 1,000 objects each) at once
    #[arg(short, long, default_value_t = 4)]
    pub(crate) jobs: usize,
    /// One JSON object per line per object
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) store: StoreArgs,
}

/// `sluice rm` of objects (`--incomplete-uploads` is `uploads::abort_incomplete`'s).
pub async fn rm(a: RmArgs) -> Result<(), Failure> {
    if a.jobs == 0 {
        return Err(Failure::Usage("--jobs: must be at least 1".into()));
    }
    let uris: Vec<&str> = a.uris.iter().map(String::as_str).collect();
    let store = a.store.open_for(&uris).await?;
    let mut targets = Vec::new();
    // Local files under a tree being removed: deleted through directory handles from the
    // tree's root down, so a directory swapped for a symlink after the listing is not
    // followed out of the tree (`outdir::remove`).
    let mut local = Vec::new();
    for s in &a.uris {
        let uri = parse_uri(s)?;
        if !a.recursive {
            targets.push(uri);
            continue;
        }
        let mut listed = store.list(&uri, true);
        while let Some(e) = listed.try_next().await? {
            if let ListEntry::Object(m) = e {
                match uri.scheme() {
                    s if s.is_object_store() => targets.push(m.uri),
                    _ => local.push((uri.clone(), m.uri)),
                }
            }
        }
    }
    // `--jobs` files at once, each reported as it is done.
    let failed_local: usize = futures::stream::iter(&local)
        .map(|(root, uri)| async {
            let error = if a.dry_run {
                None
            } else {
                remove_local(root, uri).await.err()
            };
            report_rm(uri, error.as_deref(), &a);
            usize::from(error.is_some())
        })
        .buffer_unordered(a.jobs)
        .boxed() // Send checked here, where the borrows' lifetimes are known (rustc #102211)
        .fold(0, |n, f| std::future::ready(n + f))
        .await;
    let count = targets.len() + local.len();
    let a = &a;
    // DeleteObjects batches (1,000 keys each, `--jobs` of them at once); each object is
    // reported as its batch answers.
    let failed: usize = futures::stream::iter(targets.chunks(MAX_DELETE_BATCH))
        .map(|batch| {
            let store = store.clone();
            async move {
                let outcome = if a.dry_run {
                    Ok(Vec::new())
                } else {
                    store.delete_many(batch).await
                };
                let mut refused = match outcome {
                    Ok(refused) => refused,
                    Err(e) => {
                        // The request failed as a whole: each of its objects may remain.
                        let e = e.to_string();
                        for uri in batch {
                            report_rm(uri, Some(&e), a);
                        }
                        return batch.len();
                    }
                };
                let mut failed = 0;
                for uri in batch {
                    let at = refused.iter().position(|e| e.subject() == uri.to_string());
                    let error = at.map(|i| refused.swap_remove(i).to_string());
                    failed += usize::from(error.is_some());
                    report_rm(uri, error.as_deref(), a);
                }
                // A refusal naming no key of the batch: something was not deleted.
                for e in &refused {
                    eprintln!("sluice: rm: {e}");
                }
                failed + refused.len()
            }
        })
        .buffer_unordered(a.jobs)
        .boxed() // Send checked here, where the borrows' lifetimes are known (rustc #102211)
        .fold(failed_local, |n, f| std::future::ready(n + f))
        .await;
    if failed > 0 {
        return Err(Failure::Other(format!(
            "{failed} of {count} objects not deleted"
        )));
    }
    Ok(())
}

/// Deletes the local file `uri`, listed under `root`, by the handles of the directories
/// from the listing's directory (the prefix up to its last `/`) down.
async fn remove_local(root: &ObjectUri, uri: &ObjectUri) -> Result<(), String> {
    let prefix = root.key();
    let base = &prefix[..prefix.rfind('/').map_or(0, |i| i + 1)];
    let rel = uri
        .key()
        .strip_prefix(base)
        .ok_or_else(|| format!("{uri} is not under {root}"))?;
    let crate::outdir::Target::File(segments) = crate::outdir::target(rel)? else {
        return Ok(());
    };
    let dir = std::path::PathBuf::from(if base.is_empty() { "." } else { base });
    crate::outdir::blocking(move || crate::outdir::remove(&dir, &segments)).await
}

/// One object's line of `rm`: deleted (or would be), or why not.
fn report_rm(uri: &ObjectUri, error: Option<&str>, a: &RmArgs) {
    let status = match (error, a.dry_run) {
        (Some(_), _) => "failed",
        (None, true) => "would delete",
        (None, false) => "deleted",
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({"uri": uri.to_string(), "status": status, "error": error})
        );
    } else if let Some(e) = error {
        eprintln!("sluice: rm {uri}: {e}");
    } else {
        println!("{status} {uri}");
    }
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// Where the dataset goes: s3://bucket/prefix/
    uri: String,
    /// Number of records
    #[arg(long, default_value_t = 24)]
    count: usize,
    /// Size of each record (bytes, or 140MiB); unet3d's mean is 146600628
    #[arg(long, default_value = sluice_console::dataset::UNET3D_RECORD_SIZE, value_parser = crate::serve::parse_size)]
    size: u64,
    /// Uploads in flight
    #[arg(short = 'j', long, default_value_t = 4)]
    jobs: usize,
    /// Print JSON instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

pub async fn generate(a: GenArgs) -> Result<(), Failure> {
    if a.jobs == 0 || a.count == 0 {
        return Err(Failure::Usage(
            "--count and -j/--jobs must be at least 1".into(),
        ));
    }
    let base = parse_uri(&a.uri)?;
    let store = a.store.open_for(&[&a.uri]).await?;
    let t0 = Instant::now();
    let bytes =
        sluice_console::dataset::write_dataset(store, &base, a.count, a.size, a.jobs, a.json)
            .await?;
    let elapsed = t0.elapsed();
    if a.json {
        println!(
            "{}",
            serde_json::json!({"objects": a.count, "bytes": bytes, "seconds": elapsed.as_secs_f64()})
        );
    } else {
        println!(
            "wrote {} records, {bytes} bytes under {base} in {:.1} s ({:.1} MB/s)",
            a.count,
            elapsed.as_secs_f64(),
            mb_per_s(bytes, elapsed)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_budget_defaults_to_the_loaders() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            get: GetArgs,
        }
        let cli = Cli::try_parse_from(["get", "s3://b/k"]).unwrap();
        assert_eq!(cli.get.memory_budget, sluice_loader::DEFAULT_MEMORY_BUDGET);
        let off = Cli::try_parse_from(["get", "--memory-budget", "off", "s3://b/k"]).unwrap();
        assert_eq!(off.get.memory_budget, 0);
        assert!(Cli::try_parse_from(["get", "--memory-budget", "0", "s3://b/k"]).is_err());
    }
}
