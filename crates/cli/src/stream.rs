//! `sluice get` as a stream of ranged GETs: no object is ever whole in memory. Each object is cut
//! into ranges (one GET below the range threshold) of the version listed, or for an object named
//! alone, of the version and size its first range's answer names (no HEAD: `Reader::first`),
//! pinned by ETag, of the size chosen as it is cut, once the range before it has its memory
//! (`RangeSize`: smaller while the client allows more GETs). A range is only counted as it
//! arrives (a counting `Segment`: each body frame is dropped where the client stack read it, no
//! copy, no memory); with `--verify` (checked against the pattern at its offset) or `-o`
//! (written at its offset into the object's temporary file with `pwrite`, renamed into place
//! when its last range is in) it lands in one of a few reused buffers, as an unsized object's
//! first range always does. Each GET holds its piece's bytes of the memory budget from before
//! it is sent until it is done, so memory stays within the budget whatever the range size,
//! touched once per process: a first pass costs no more page faults than a second.

use crate::outdir::OutFile;
use bytes::BytesMut;
use futures::StreamExt;
use hdrhistogram::Histogram;
use sluice_core::{
    ByteRange, GetOptions, ObjectStore, ObjectUri, RangePlanner, RangeSize, Segment,
};
use sluice_loader::{BufferPool, MemoryUnits, StatsSnapshot};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// One object to read: its version and size (as listed; named alone, learned from its first
/// answer), and where it goes.
#[derive(Debug)]
pub struct Object {
    pub uri: ObjectUri,
    pub size: Option<u64>,
    pub etag: Option<String>,
    /// Path segments under `-o DIR`, when the object is written.
    pub file: Option<Vec<String>>,
}

/// How the stream is cut and bounded.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// GETs in flight, at most.
    pub jobs: usize,
    /// Bytes the GETs in flight may ask for together (`None`: no bound): a GET waits until
    /// its piece (a range, or an object below the threshold) fits.
    pub memory_budget: Option<u64>,
    /// Objects at least this large are read in ranges...
    pub range_threshold: u64,
    /// ...of this size, chosen as each object's first range is cut.
    pub range_size: RangeSize,
    /// Check every byte against the deterministic pattern.
    pub verify: bool,
}

/// What one pass did; `refused` names objects that were read but could not be written.
pub struct Pass {
    pub stats: StatsSnapshot,
    pub refused: Vec<(ObjectUri, String)>,
}

/// An object's progress within a pass: its file, once opened, and the ranges still out.
struct Open {
    file: Mutex<Option<Result<Arc<OutFile>, String>>>,
    left: AtomicU64,
    started: Mutex<Option<Instant>>,
}

/// One pass over `objects`; `done(bytes)` as each range lands and `sized(bytes)` when an
/// object named without a size learns it (the progress bar).
pub async fn pass(
    store: &Arc<dyn ObjectStore>,
    objects: &[Object],
    plan: Plan,
    out: Option<&PathBuf>,
    pool: &Arc<BufferPool>,
    done: impl Fn(u64) + Sync,
    sized: impl Fn(u64) + Sync,
) -> sluice_core::Result<Pass> {
    let started = Instant::now();
    // A fresh client starts its search from what this pass could have in flight.
    if let Some(c) = store.congestion() {
        let requests = plan.range_size.requests_at_once(
            objects.iter().map(|o| o.size),
            plan.range_threshold,
            plan.memory_budget,
            c.max.min(plan.jobs),
        );
        store.expect_requests(requests);
    }
    let memory = plan.memory_budget.map(MemoryUnits::new);
    let open: Vec<Open> = objects
        .iter()
        .map(|_| Open {
            file: Mutex::new(None),
            left: AtomicU64::new(0),
            started: Mutex::new(None),
        })
        .collect();
    // Lazily, so that each object is cut with the range size of the moment the range before
    // it had its memory (the next range is taken from here only then, below), and a size no
    // store could hold (a hostile listing's) never becomes a list.
    let range_size = AtomicU64::new(0);
    let pieces = objects.iter().enumerate().flat_map(|(i, o)| {
        let chunk = plan.range_size.for_client(store.congestion());
        let (cut, first) = match o.size {
            Some(size) => (cut(size, plan.range_threshold, chunk), None),
            // Named without a size: its first piece tells it (`Reader::first`), no HEAD.
            None => {
                let len = (plan.range_threshold != RangePlanner::NEVER).then_some(chunk.get());
                (
                    cut_from(0, 0, plan.range_threshold, chunk),
                    Some(Piece::First(len)),
                )
            }
        };
        if cut.count > 1 {
            range_size.store(cut.step, Ordering::Relaxed);
        }
        open[i]
            .left
            .store(cut.count + u64::from(first.is_some()), Ordering::Relaxed);
        cut.map(Piece::Range).chain(first).map(move |p| (i, p))
    });
    let (mut requests, mut attempts, mut bytes, mut finished) = (0u64, 0u64, 0u64, 0u64);
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds");
    let mut refused = Vec::new();
    let reader = Reader {
        store,
        plan,
        out,
        pool,
        memory: memory.as_ref(),
        done: &done,
        sized: &sized,
        range_size: &range_size,
    };
    let reader = &reader;
    let mut reads = futures::stream::iter(pieces)
        .then(|(i, piece)| async move {
            let held = reader.hold(piece.bytes(plan)).await;
            (i, piece, held)
        })
        .map(|(i, piece, held)| {
            let (obj, open) = (&objects[i], &open[i]);
            async move {
                match piece {
                    Piece::Range(range) => {
                        let size = obj.size.expect("cut from a known size");
                        let etag = obj.etag.as_deref();
                        Ok(vec![
                            reader.range(obj, open, i, range, size, etag, held).await?,
                        ])
                    }
                    Piece::First(len) => reader.first(obj, open, i, len, held).await,
                }
            }
        })
        .buffer_unordered(plan.jobs.max(1))
        .boxed(); // Send checked here, where the borrows' lifetimes are known (rustc #102211)
    while let Some(r) = reads.next().await {
        for r in r? {
            requests += 1;
            attempts += u64::from(r.attempts);
            bytes += r.len;
            if let Some(why) = r.refused {
                refused.push((objects[r.object].uri.clone(), why));
            }
            if let Some(took) = r.finished {
                finished += 1;
                latency
                    .saturating_record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1));
            }
        }
    }
    let elapsed = started.elapsed();
    let q = |q: f64| {
        Duration::from_micros(if latency.is_empty() {
            0
        } else {
            latency.value_at_quantile(q)
        })
    };
    Ok(Pass {
        stats: StatsSnapshot {
            objects: finished,
            bytes,
            elapsed,
            mb_per_s: bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9),
            requests,
            retries: attempts.saturating_sub(requests),
            errors: 0,
            latency_p50: q(0.5),
            latency_p99: q(0.99),
            window: plan.jobs,
            range_size: range_size.load(Ordering::Relaxed),
            batch_gap_p50: Duration::ZERO,
            batch_gap_max: Duration::ZERO,
            over_budget: 0,
        },
        refused,
    })
}

/// What a pass reads: a range of an object of known size, or the first piece of one named
/// without a size (a ranged GET of this many bytes; `None`: the whole object, splitting off).
#[derive(Debug, Clone, Copy)]
enum Piece {
    Range((u64, u64)),
    First(Option<u64>),
}

impl Piece {
    /// The memory it holds while read: a first piece of the whole object, its range size.
    fn bytes(&self, plan: Plan) -> u64 {
        match *self {
            Piece::Range((_, len)) => len,
            Piece::First(Some(len)) => len,
            Piece::First(None) => plan.range_size.now(0).get(),
        }
    }
}

/// The ranges one object is read in: one (the whole object, an empty one included) below
/// `threshold`, else `chunk` bytes each.
struct Cut {
    size: u64,
    start: u64,
    step: u64,
    count: u64,
    next: u64,
}

fn cut(size: u64, threshold: u64, chunk: std::num::NonZeroU64) -> Cut {
    let mut cut = cut_from(0, size, threshold, chunk);
    cut.count = cut.count.max(1); // an empty object is still read, once
    cut
}

/// The ranges of `start..size` of an object of `size` bytes, cut as `cut` cuts the whole:
/// none when `start` is its end.
fn cut_from(start: u64, size: u64, threshold: u64, chunk: std::num::NonZeroU64) -> Cut {
    let left = size.saturating_sub(start);
    let step = if size >= threshold {
        chunk.get()
    } else {
        left.max(1)
    };
    Cut {
        size,
        start,
        step,
        count: left.div_ceil(step),
        next: 0,
    }
}

/// A piece of an object: (offset, length).
impl Iterator for Cut {
    type Item = (u64, u64);
    fn next(&mut self) -> Option<(u64, u64)> {
        if self.next >= self.count {
            return None;
        }
        let at = self.start + self.next * self.step;
        self.next += 1;
        Some((at, self.step.min(self.size - at)))
    }
}

/// What one range read did.
struct RangeDone {
    object: usize,
    len: u64,
    attempts: u32,
    /// The object's last range: how long the object took, from its first range's start.
    finished: Option<Duration>,
    /// The object could not be written (the others go on).
    refused: Option<String>,
}

/// What every piece of a pass reads with.
struct Reader<'a> {
    store: &'a Arc<dyn ObjectStore>,
    plan: Plan,
    out: Option<&'a PathBuf>,
    pool: &'a Arc<BufferPool>,
    memory: Option<&'a MemoryUnits>,
    /// Called with a piece's bytes as it lands, whoever read it (the progress bar).
    done: &'a (dyn Fn(u64) + Sync),
    /// Called with an object's size when its first piece learns it.
    sized: &'a (dyn Fn(u64) + Sync),
    /// The range size an object was last cut into (`StatsSnapshot::range_size`).
    range_size: &'a AtomicU64,
}

impl Reader<'_> {
    /// `bytes` of the memory budget, when there is one: given back when the permit drops.
    async fn hold(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        match self.memory {
            Some(m) => Some(m.hold(bytes).await),
            None => None,
        }
    }

    /// `range` of `obj`, whose size is `size`, of version `etag`.
    #[allow(clippy::too_many_arguments)]
    async fn range(
        &self,
        obj: &Object,
        open: &Open,
        index: usize,
        (at, len): (u64, u64),
        size: u64,
        etag: Option<&str>,
        // Its share of the memory budget, given back when the range is done.
        _memory: Option<OwnedSemaphorePermit>,
    ) -> sluice_core::Result<RangeDone> {
        let first = open.start();
        // Bytes that are neither checked nor written are only counted: each body frame is
        // dropped where the client stack read it, as `curl -o /dev/null` does, with no copy.
        let mut seg = if self.plan.verify || self.out.is_some() {
            Segment::from_buffer(self.pool.take_for(&obj.uri, to_usize(len))?, to_usize(len))
        } else {
            Segment::counting(to_usize(len))
        };
        // An object read in one piece is asked for whole (an answer with only part of it is
        // then refused by core); every answer must agree with the size it was listed with.
        let opts = GetOptions {
            range: if len == size {
                None
            } else {
                Some(ByteRange::new(at, at + len)?)
            },
            if_match: etag.map(str::to_owned),
        };
        let got = self
            .store
            .get_into_with(&obj.uri, &opts, &mut seg)
            .await
            .and_then(|info| match info.object_size {
                Some(n) if n != size => Err(sluice_core::Error::integrity(
                    obj.uri.to_string(),
                    format!("the object is {n} bytes, listed as {size}"),
                )),
                _ => Ok(info),
            });
        let got = got.and_then(|info| {
            // Core checks every answer's length; this keeps a short one out of a file
            // whatever a store's client did.
            if seg.is_complete() {
                Ok(info)
            } else {
                Err(sluice_core::Error::integrity(
                    obj.uri.to_string(),
                    format!("{} of {len} bytes at {at} arrived", seg.written()),
                ))
            }
        });
        match got {
            Ok(info) => {
                self.finish(obj, open, index, at, size, seg, info.attempts, first)
                    .await
            }
            Err(e) => {
                self.pool.give_back(seg.into_buffer());
                Err(e)
            }
        }
    }

    /// The first piece of `obj`, named without a size: a GET of its first `len` bytes
    /// (`None`: of all of it), whose answer names the size and the version the rest is then
    /// read of, as ranges cut from that size. Its memory is given back before the rest
    /// takes theirs, so pieces waiting for memory never hold any.
    async fn first(
        &self,
        obj: &Object,
        open: &Open,
        index: usize,
        len: Option<u64>,
        memory: Option<OwnedSemaphorePermit>,
    ) -> sluice_core::Result<Vec<RangeDone>> {
        let started = open.start();
        let buf_len = to_usize(len.unwrap_or(self.plan.range_size.now(0).get()));
        let mut seg = Segment::growable_in(self.pool.take_for(&obj.uri, buf_len)?);
        let opts = GetOptions {
            range: len.map(|n| ByteRange::new(0, n)).transpose()?,
            if_match: None,
        };
        let answer = match self.store.get_into_with(&obj.uri, &opts, &mut seg).await {
            // S3 answers a range on an empty object with 416: read it plainly.
            Err(sluice_core::Error::Service { status: 416, .. }) if len.is_some() => self
                .store
                .get_into_with(&obj.uri, &GetOptions::default(), &mut seg)
                .await
                .map(|info| sluice_core::GetInfo {
                    attempts: info.attempts + 1,
                    ..info
                }),
            r => r,
        };
        let (info, size) = match answer.and_then(|info| {
            let size = match (len, info.object_size) {
                (_, Some(size)) => size,
                (None, None) => info.bytes,
                (Some(_), None) => {
                    return Err(sluice_core::Error::integrity(
                        obj.uri.to_string(),
                        "a ranged answer did not give the object's size",
                    ));
                }
            };
            if size > sluice_core::MAX_OBJECT_SIZE || size < info.bytes {
                return Err(sluice_core::Error::integrity(
                    obj.uri.to_string(),
                    format!("an answer of {} bytes named a size of {size}", info.bytes),
                ));
            }
            Ok((info, size))
        }) {
            Ok(answer) => answer,
            Err(e) => {
                self.pool.give_back(seg.into_buffer());
                return Err(e);
            }
        };
        (self.sized)(size);
        let chunk = self.plan.range_size.for_client(self.store.congestion());
        let rest = cut_from(info.bytes, size, self.plan.range_threshold, chunk);
        if size >= self.plan.range_threshold {
            self.range_size.store(chunk.get(), Ordering::Relaxed);
        }
        open.left.store(1 + rest.count, Ordering::Relaxed);
        let etag = info.etag.clone();
        let head = self
            .finish(obj, open, index, 0, size, seg, info.attempts, started)
            .await?;
        drop(memory);
        let mut done = vec![head];
        let mut rest = futures::stream::iter(rest)
            .then(|range| async move { (range, self.hold(range.1).await) })
            .map(|(range, held)| self.range(obj, open, index, range, size, etag.as_deref(), held))
            .buffer_unordered(self.plan.jobs.max(1))
            .boxed(); // Send checked here (rustc #102211)
        while let Some(r) = rest.next().await {
            done.push(r?);
        }
        Ok(done)
    }

    /// A piece at `at` that arrived whole in `seg`: checked against the pattern, written at
    /// its offset, its buffer back in the pool, and when it is its object's last, the
    /// object's file published.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        obj: &Object,
        open: &Open,
        index: usize,
        at: u64,
        size: u64,
        seg: Segment,
        attempts: u32,
        first: Instant,
    ) -> sluice_core::Result<RangeDone> {
        let len = seg.written() as u64;
        (self.done)(len);
        if self.plan.verify
            && let Err(at) = seg.as_slice().map_or(Err(at), |bytes| {
                sluice_testdata::pattern::verify(obj.uri.key(), at, bytes)
            })
        {
            self.pool.give_back(seg.into_buffer());
            return Err(sluice_core::Error::integrity(
                obj.uri.to_string(),
                format!("wrong byte at offset {at}"),
            ));
        }
        let buf = seg.into_buffer();
        let (buf, mut refused) = match (self.out, &obj.file) {
            (Some(dir), Some(segments)) => write_range(open, dir, segments, size, at, buf).await,
            _ => (buf, None),
        };
        self.pool.give_back(buf);
        let last = open.left.fetch_sub(1, Ordering::AcqRel) == 1;
        let taken = if last {
            open.file.lock().unwrap().take()
        } else {
            None
        };
        if let Some(Ok(file)) = taken {
            // Every other range has written and let go of the file.
            let published = match Arc::try_unwrap(file) {
                Ok(file) => crate::outdir::blocking(move || file.publish()).await,
                Err(_) => Err("a range still holds the file".into()),
            };
            if let Err(why) = published {
                refused.get_or_insert(why);
            }
        }
        Ok(RangeDone {
            object: index,
            len,
            attempts,
            finished: last.then(|| first.elapsed()),
            refused,
        })
    }
}

impl Open {
    /// When the object's first piece started: now, for the first to ask.
    fn start(&self) -> Instant {
        *self
            .started
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now)
    }
}

/// Writes `buf` at `at` into the object's temporary file (opened by its first range to
/// arrive); the buffer comes back whatever happens. An object whose file cannot be opened
/// or written is refused once, by the range that found out.
async fn write_range(
    open: &Open,
    dir: &std::path::Path,
    segments: &[String],
    size: u64,
    at: u64,
    buf: BytesMut,
) -> (BytesMut, Option<String>) {
    let file = {
        let mut slot = open.file.lock().unwrap();
        if slot.is_none() {
            let created = OutFile::create(dir, segments, size).map(Arc::new);
            let failed = created.as_ref().err().cloned();
            *slot = Some(created);
            if failed.is_some() {
                return (buf, failed);
            }
        }
        match slot.as_ref() {
            Some(Ok(f)) => f.clone(),
            _ => return (buf, None), // refused already, by the range that found out
        }
    };
    let (buf, written) = tokio::task::spawn_blocking(move || {
        let r = file.write_at(&buf, at);
        (buf, r)
    })
    .await
    .unwrap_or_else(|e| {
        (
            BytesMut::new(),
            Err(format!("the writing task failed: {e}")),
        )
    });
    match written {
        Ok(()) => (buf, None),
        Err(why) => {
            // Later ranges of this object skip writing; its file is never published. Only
            // the range that found out reports it (others in flight may fail the same way).
            let mut slot = open.file.lock().unwrap();
            let first = matches!(*slot, Some(Ok(_)));
            *slot = Some(Err(why.clone()));
            (buf, first.then_some(why))
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_cut_into_ranges_that_cover_them_once() {
        let four = std::num::NonZeroU64::new(4).unwrap();
        assert_eq!(cut(0, 10, four).collect::<Vec<_>>(), vec![(0, 0)]);
        assert_eq!(cut(9, 10, four).collect::<Vec<_>>(), vec![(0, 9)]);
        assert_eq!(
            cut(10, 10, four).collect::<Vec<_>>(),
            vec![(0, 4), (4, 4), (8, 2)]
        );
        assert_eq!(cut(u64::MAX, 10, four).count, u64::MAX.div_ceil(4));
    }
}
