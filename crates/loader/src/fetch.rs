//! Reading one object: a single GET, or parallel ranged GETs into one buffer.

use crate::budget::Reservation;
use crate::pool::BufferPool;
use bytes::Bytes;
use sluice_core::changed;
use sluice_core::same_etag;
use sluice_core::{
    ByteRange, Error, GetOptions, ObjectStore, ObjectUri, RangePlanner, RangeSize, Result, Segment,
    SegmentedBuffer,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// What one object fetch needs, shared by all fetches of a loader.
#[derive(Debug, Clone)]
pub struct Fetcher {
    pub store: Arc<dyn ObjectStore>,
    /// Objects of at least this many bytes are split into ranges...
    pub range_threshold: u64,
    /// ...of this size, chosen as each object's read begins.
    pub range_size: RangeSize,
    pub pool: Arc<BufferPool>,
    /// Global cap on HTTP requests in flight across all objects.
    pub requests: Arc<Semaphore>,
    /// The sizes this fetcher has learned.
    pub sizes: Arc<SizesSeen>,
}

/// The smallest and largest sizes seen so far (none at first): what an object named without
/// a size is guessed at before its first answer tells its own.
#[derive(Debug, Default)]
pub struct SizesSeen {
    /// `size + 1`, so that 0 can mean none seen and an empty object still counts.
    largest: AtomicU64,
    /// `u64::MAX - size`, so that 0 can mean none seen (`fetch_max` on both).
    smallest: AtomicU64,
}

impl SizesSeen {
    fn saw(&self, size: u64) {
        self.largest
            .fetch_max(size.saturating_add(1), Ordering::Relaxed);
        self.smallest.fetch_max(u64::MAX - size, Ordering::Relaxed);
    }

    /// The largest size seen: a guess that fits every object seen.
    fn largest(&self) -> Option<u64> {
        self.largest.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Whether every size seen is within `1/UNIFORM` of the largest, so that a buffer of
    /// the largest size wastes little on any of them. A generated dataset of one size is;
    /// unet3d's (146.6 ± 68.3 MB) is not, and there buffers of the largest size held far
    /// more than the objects in them (docs/mlperf.md, unet3d_b200).
    fn uniform(&self) -> bool {
        match (self.largest(), self.smallest.load(Ordering::Relaxed)) {
            (Some(largest), smallest) if smallest > 0 => {
                let smallest = u64::MAX - smallest;
                largest - smallest <= largest / UNIFORM
            }
            _ => false,
        }
    }
}

/// Sizes within `1/UNIFORM` of each other count as one (`SizesSeen::uniform`).
const UNIFORM: u64 = 16;

/// The most bytes a guessed size reserves in a buffer before its answer: the buffer grows
/// past it where the object is larger.
const MAX_GUESS_BUFFER: u64 = 256 << 20;

/// How admission budgets an object's first request (`Fetcher::first_piece`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FirstPiece {
    /// Bytes of memory to hold before the first request goes out.
    pub bytes: u64,
    /// The object is taken to need nothing more: the next object may take its turn now.
    pub done: bool,
}

/// A fetched object and what it cost.
#[derive(Debug)]
pub struct Fetched {
    pub data: Bytes,
    pub requests: u32,
    pub attempts: u32,
}

impl Fetcher {
    /// How an object whose read begins now is cut: the range size follows the requests the
    /// store's client allows now, where it follows at all (`RangeSize::Follow`).
    pub(crate) fn planner(&self) -> RangePlanner {
        RangePlanner {
            threshold: self.range_threshold,
            chunk_size: self.range_size.for_client(self.store.congestion()),
        }
    }

    /// What admission takes for an object of `size` (when known) whose read begins now:
    /// memory for its first request, and whether that is all of it. A known size, or no
    /// guess yet, holds the turn until the object's size is covered (`budget`). Otherwise the
    /// object is guessed at the largest size seen; where one request reads an object of that
    /// size, that is all it takes, and the next object is admitted without waiting for this
    /// one's answer (one round trip per object otherwise, where objects are small).
    pub(crate) fn first_piece(&self, size: Option<u64>) -> FirstPiece {
        let planner = self.planner();
        let chunk = planner.chunk_size.get();
        match (size, self.sizes.largest()) {
            (Some(size), _) => FirstPiece {
                bytes: size.min(chunk),
                done: false,
            },
            (None, Some(guess)) if planner.plan(guess).is_none() => FirstPiece {
                bytes: guess,
                done: true,
            },
            (None, _) => FirstPiece {
                bytes: chunk,
                done: false,
            },
        }
    }

    /// Reads `uri`, of `size` when known, pinned to version `etag` when known (else to the
    /// first response's): the bytes delivered are always one version of the object, whole.
    /// Under a budget, `memory` covers each request's bytes before it goes out and is
    /// complete once the last has (`budget`).
    pub(crate) async fn fetch(
        &self,
        uri: &ObjectUri,
        size: Option<u64>,
        etag: Option<&str>,
        mut memory: Option<&mut Reservation>,
    ) -> Result<Fetched> {
        let fetched = match size {
            Some(size) => self.fetch_known(uri, size, etag, &mut memory).await,
            None => self.fetch_unknown(uri, &mut memory).await,
        };
        // Done already where the last request went out; here for a read that ended early.
        complete(&mut memory);
        fetched
    }

    async fn fetch_known(
        &self,
        uri: &ObjectUri,
        size: u64,
        etag: Option<&str>,
        memory: &mut Option<&mut Reservation>,
    ) -> Result<Fetched> {
        let len = to_usize(uri, size)?;
        match self.planner().plan(size) {
            None => {
                cover(memory, size).await;
                complete(memory);
                let mut seg = Segment::from_buffer(self.pool.take_for(uri, len)?, len);
                let info = self.get_into(uri, None, etag, &mut seg).await?;
                same_size(uri, size, info.object_size)?;
                Ok(Fetched {
                    data: self.finish(uri, seg)?,
                    requests: 1,
                    attempts: info.attempts,
                })
            }
            Some(ranges) => {
                self.fetch_ranges(uri, Some(size), &ranges, None, etag, memory)
                    .await
            }
        }
    }

    /// Size unknown: the first ranged GET learns it from Content-Range (no HEAD round trip);
    /// small objects are done in that one request.
    async fn fetch_unknown(
        &self,
        uri: &ObjectUri,
        memory: &mut Option<&mut Reservation>,
    ) -> Result<Fetched> {
        let planner = self.planner();
        // A buffer for the size guessed where there is a guess: a chunk-sized one per small
        // object would hold a chunk of the pool each.
        let guess = self.sizes.largest();
        if !planner.splits() {
            // Never split: one plain GET, whatever the size (the buffer grows to fit), whose
            // memory is covered once its size is known.
            let buf = match guess {
                // A guess is not a size: never more than a window's worth up front.
                Some(g) => self
                    .pool
                    .take_for(uri, to_usize(uri, g.min(MAX_GUESS_BUFFER))?)?,
                None => self.pool.take_largest(),
            };
            let mut seg = Segment::growable_in(buf);
            let info = self.get_into(uri, None, None, &mut seg).await?;
            self.learned(info.bytes, memory).await;
            return Ok(Fetched {
                data: self.finish(uri, seg)?,
                requests: 1,
                attempts: info.attempts,
            });
        }
        // Guessed large: all its ranges at once, where objects are of one size. Where they
        // vary, a buffer of the largest size held each object, however small; instead the
        // first chunk tells the size, and the rest goes into a buffer of exactly that size.
        let large = guess.and_then(|g| Some((g, planner.plan(g)?)));
        if let Some((guess, ranges)) = large.as_ref().filter(|_| self.sizes.uniform()) {
            return self.fetch_guessed(uri, *guess, ranges, memory).await;
        }
        let small_guess = guess.filter(|_| large.is_none());
        let chunk = planner.chunk_size.get();
        if memory.as_ref().is_some_and(|m| m.has_turn()) {
            // Admission covered the range size of its moment; the limit may have moved since.
            cover(memory, chunk).await;
        }
        // Guessed not to be split (DLIO's 4 MiB npy records against 4 MiB ranges): ask for
        // all an object below the threshold can hold, so that one request reads it whole.
        // A first range of one chunk took a second request for the bytes beyond it.
        let first_len = match small_guess {
            Some(_) => planner.threshold.max(chunk),
            None => chunk,
        };
        let first = ByteRange::with_len(0, first_len).expect("chunk size is non-zero");
        // From the pool: a fresh allocation per object would be page-faulted in every time,
        // and the s3dlio-compatible loop never knows sizes.
        let buf_len = small_guess.map_or(chunk, |g| g.clamp(1, first_len));
        let mut seg = Segment::growable_in(self.pool.take_for(uri, to_usize(uri, buf_len)?)?);
        let info = match self.get_into(uri, Some(first), None, &mut seg).await {
            // S3 answers a range on an empty object with 416: read it plainly.
            Err(Error::Service { status: 416, .. }) => {
                let info = self.get_into(uri, None, None, &mut seg).await?;
                self.learned(info.bytes, memory).await;
                return Ok(Fetched {
                    data: self.finish(uri, seg)?,
                    requests: 2,
                    attempts: info.attempts + 1,
                });
            }
            r => r?,
        };
        let size = info.object_size.ok_or_else(|| {
            Error::integrity(
                uri.to_string(),
                "ranged response did not give the object size",
            )
        })?;
        if size == info.bytes {
            self.learned(size, memory).await;
            return Ok(Fetched {
                data: self.finish(uri, seg)?,
                requests: 1,
                attempts: info.attempts,
            });
        }
        self.saw(size, memory);
        to_usize(uri, size)?;
        // More bytes than the object has: the store contradicts itself.
        let after_first = ByteRange::new(info.bytes, size).map_err(|_| {
            Error::integrity(
                uri.to_string(),
                format!(
                    "{} bytes arrived of an object said to be {size} bytes long",
                    info.bytes
                ),
            )
        })?;
        // The bytes in hand, then the rest: in planned chunks where large, else one more
        // request.
        let mut rest = vec![ByteRange::new(0, info.bytes).expect("some bytes arrived")];
        rest.extend(
            planner
                .plan_range(after_first)
                .unwrap_or_else(|| vec![after_first]),
        );
        // The first chunk already sits in its own buffer: one chunk's copy is the price of not
        // knowing the size up front, against a HEAD round trip per object.
        // The rest must be the version the first chunk came from.
        let mut fetched = self
            .fetch_ranges(
                uri,
                Some(size),
                &rest,
                seg.as_slice(), // a kept segment: always its bytes
                info.etag.as_deref(),
                memory,
            )
            .await?;
        self.pool.give_back(seg.into_buffer());
        fetched.requests += 1;
        fetched.attempts += info.attempts;
        Ok(fetched)
    }

    /// Size unknown but guessed large (`guess`, the largest seen, would be cut into
    /// `ranges`), all sizes seen alike: every range goes out at once, as for an object known
    /// to be that size, and the first range's answer says how large it is. Waiting for that
    /// answer before the rest went out cost each large object a round trip, with the budget's
    /// turn held through it: one object admitted per round trip. Objects of one size (a
    /// generated dataset's) are read exactly as if listed. A smaller object's ranges past its
    /// end are refused (416) and the range across its end is read again to the end, into the
    /// same memory; a larger one's bytes beyond the guess are read after (`fetch_ranges`).
    async fn fetch_guessed(
        &self,
        uri: &ObjectUri,
        guess: u64,
        ranges: &[ByteRange],
        memory: &mut Option<&mut Reservation>,
    ) -> Result<Fetched> {
        let lens = range_lens(uri, ranges)?;
        let buf = self.pool.take_for(uri, to_usize(uri, guess)?)?;
        let mut tasks = JoinSet::new();
        for (i, (seg, range)) in SegmentedBuffer::split_buffer(buf, &lens)
            .into_iter()
            .zip(ranges.iter().copied())
            .enumerate()
        {
            cover(memory, range.end().expect("planned ranges are bounded")).await;
            // The first range may find the whole object shorter than itself.
            let mut seg = match i {
                0 => Segment::growable_in(seg.into_buffer()),
                _ => seg,
            };
            let this = self.clone();
            let uri = uri.clone();
            tasks.spawn(async move {
                let got = this.get_into(&uri, Some(range), None, &mut seg).await;
                (i, seg, got)
            });
        }
        complete(memory);
        let mut answers: Vec<Option<(Segment, Result<sluice_core::GetInfo>)>> =
            (0..ranges.len()).map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            let (i, seg, got) = joined.map_err(|e| {
                Error::transport(uri.to_string(), format!("range task failed: {e}"))
            })?;
            answers[i] = Some((seg, got));
        }
        let mut answers = answers
            .into_iter()
            .map(|a| a.expect("every range task reported"));
        let (first_seg, first) = answers.next().expect("a plan has a first range");
        let first = match first {
            // S3 answers a range on an empty object with 416: read it plainly.
            Err(Error::Service { status: 416, .. }) => {
                let mut seg = Segment::growable_in(first_seg.into_buffer());
                let info = self.get_into(uri, None, None, &mut seg).await?;
                self.learned(info.bytes, memory).await;
                return Ok(Fetched {
                    data: self.finish(uri, seg)?,
                    requests: ranges.len() as u32 + 1,
                    attempts: info.attempts + ranges.len() as u32,
                });
            }
            r => r?,
        };
        let size = first.object_size.ok_or_else(|| {
            Error::integrity(
                uri.to_string(),
                "ranged response did not give the object size",
            )
        })?;
        to_usize(uri, size)?;
        self.saw(size, memory);
        if first.bytes == size {
            return Ok(Fetched {
                data: self.finish(uri, first_seg)?,
                requests: ranges.len() as u32,
                attempts: first.attempts + ranges.len() as u32 - 1,
            });
        }
        let etag = first.etag;
        let mut attempts = first.attempts;
        // The ranges inside the object, in order from 0, all of the first one's version and
        // size; the one across its end, if any, to be read again; those past it are dropped.
        let mut kept = vec![first_seg];
        let mut across = None;
        for ((seg, got), range) in answers.zip(&ranges[1..]) {
            let end = range.end().expect("planned ranges are bounded");
            if end <= size {
                let info = got?;
                same_size(uri, size, info.object_size)?;
                if let (Some(a), Some(b)) = (&etag, &info.etag)
                    && !same_etag(a, b)
                {
                    return Err(changed(uri));
                }
                attempts += info.attempts;
                kept.push(seg);
            } else if range.start() < size {
                across = Some(seg);
            }
        }
        let read = ranges
            .iter()
            .map_while(|r| r.end().filter(|&e| e <= size))
            .last()
            .unwrap_or(0);
        let mut requests = ranges.len() as u32;
        if read < size && size < guess {
            // The tail, into the memory of the range that ran across the end: the segments
            // stay adjacent and are joined without a copy.
            let tail_range = ByteRange::new(read, size).expect("read < size");
            // The wire refuses a range answered short of the object's end, so the first
            // range held the whole object if its end fell there; else a later one has it.
            let across = across.ok_or_else(|| {
                Error::integrity(
                    uri.to_string(),
                    "no planned range ran across the object's end",
                )
            })?;
            let mut tail = Segment::from_buffer(across.into_buffer(), to_usize(uri, size - read)?);
            let info = self
                .get_into(uri, Some(tail_range), etag.as_deref(), &mut tail)
                .await?;
            same_size(uri, size, info.object_size)?;
            attempts += info.attempts;
            requests += 1;
            kept.push(tail);
        }
        let data = SegmentedBuffer::join(kept)
            .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
        if size <= guess {
            return Ok(Fetched {
                data: self.pool.share(data),
                requests,
                attempts,
            });
        }
        // Larger than every object seen: the guess's bytes are in hand, the rest follows.
        let mut rest = vec![ByteRange::new(0, guess).expect("a guess that splits is not 0")];
        let beyond = ByteRange::new(guess, size).expect("size > guess");
        rest.extend(
            self.planner()
                .plan_range(beyond)
                .unwrap_or_else(|| vec![beyond]),
        );
        let mut fetched = self
            .fetch_ranges(uri, Some(size), &rest, Some(&data), etag.as_deref(), memory)
            .await?;
        fetched.requests += requests;
        fetched.attempts += attempts;
        Ok(fetched)
    }

    /// An object read in one request turned out `size` bytes: the next guess, and its memory
    /// (waited for with the turn, taken where free without: `budget`).
    async fn learned(&self, size: u64, memory: &mut Option<&mut Reservation>) {
        self.saw(size, memory);
        cover(memory, size).await;
    }

    /// An object read turned out `size` bytes: the next guess, and under a budget, room for
    /// an object of its size and no more memory held for this one than it needs.
    fn saw(&self, size: u64, memory: &mut Option<&mut Reservation>) {
        self.sizes.saw(size);
        if let Some(m) = memory {
            m.learned(size);
        }
    }

    /// `range` of `uri` (bounded), of version `etag` when given: one GET, or where the
    /// planner would split an object of its length, parallel ranged GETs into one buffer as
    /// for a whole object (a window of `sluice.open`: one GET of 64 MiB is one connection,
    /// at one connection's capped rate against S3).
    pub(crate) async fn fetch_range(
        &self,
        uri: &ObjectUri,
        range: ByteRange,
        etag: Option<&str>,
    ) -> Result<Fetched> {
        match self.planner().plan_range(range) {
            Some(ranges) => {
                self.fetch_ranges(uri, None, &ranges, None, etag, &mut None)
                    .await
            }
            None => {
                let len = to_usize(uri, range.len().unwrap_or(0))?;
                // Growable: S3 answers a range that runs past the end with the bytes there.
                let mut seg = Segment::growable_in(self.pool.take_for(uri, len)?);
                let info = self.get_into(uri, Some(range), etag, &mut seg).await?;
                Ok(Fetched {
                    data: self.finish(uri, seg)?,
                    requests: 1,
                    attempts: info.attempts,
                })
            }
        }
    }

    /// Every range its own task, each writing its own segment of one buffer. With `head`, the
    /// first range's bytes are already known and copied in instead of fetched. With `etag`
    /// every range asks for that version (If-Match); without, the ranges' ETags must agree.
    /// Either way each must report the same object size, `size` when known: one that grew or
    /// shrank since its size was learned is refused, not truncated.
    async fn fetch_ranges(
        &self,
        uri: &ObjectUri,
        mut size: Option<u64>,
        ranges: &[ByteRange],
        head: Option<&[u8]>,
        etag: Option<&str>,
        memory: &mut Option<&mut Reservation>,
    ) -> Result<Fetched> {
        let lens = range_lens(uri, ranges)?;
        let len = lens.iter().sum();
        let base = ranges.first().map_or(0, ByteRange::start);
        let mut segments = SegmentedBuffer::split_buffer(self.pool.take_for(uri, len)?, &lens);
        let skip = match head {
            Some(bytes) => {
                segments[0]
                    .write(bytes)
                    .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
                1
            }
            None => 0,
        };
        let mut done: Vec<Option<Segment>> = (0..lens.len()).map(|_| None).collect();
        let mut tasks = JoinSet::new();
        for (i, (seg, range)) in segments.into_iter().zip(ranges.iter().copied()).enumerate() {
            if i < skip {
                done[i] = Some(seg); // already filled from `head`
                continue;
            }
            // This range's memory before its GET; the ranges in flight go on meanwhile.
            cover(
                memory,
                range.end().expect("planned ranges are bounded") - base,
            )
            .await;
            let this = self.clone();
            let uri = uri.clone();
            let etag = etag.map(str::to_owned);
            tasks.spawn(async move {
                let mut seg = seg;
                let info = this
                    .get_into(&uri, Some(range), etag.as_deref(), &mut seg)
                    .await?;
                Ok::<_, Error>((i, seg, info))
            });
        }
        complete(memory);
        let mut attempts = 0;
        let mut seen_etag: Option<String> = etag.map(str::to_owned);
        while let Some(joined) = tasks.join_next().await {
            let (i, seg, info) = joined.map_err(|e| {
                Error::transport(uri.to_string(), format!("range task failed: {e}"))
            })??;
            match size {
                Some(planned) => same_size(uri, planned, info.object_size)?,
                None => size = info.object_size,
            }
            match (&seen_etag, info.etag) {
                (Some(a), Some(b)) if !same_etag(a, &b) => return Err(changed(uri)),
                (None, b) => seen_etag = b,
                _ => {}
            }
            done[i] = Some(seg);
            attempts += info.attempts;
        }
        let segments: Vec<Segment> = done
            .into_iter()
            .map(|s| s.expect("every range task reported"))
            .collect();
        let data = SegmentedBuffer::join(segments)
            .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
        Ok(Fetched {
            data: self.pool.share(data),
            requests: (ranges.len() - skip) as u32,
            attempts,
        })
    }

    async fn get_into(
        &self,
        uri: &ObjectUri,
        range: Option<ByteRange>,
        etag: Option<&str>,
        seg: &mut Segment,
    ) -> Result<sluice_core::GetInfo> {
        let _permit = self
            .requests
            .acquire()
            .await
            .map_err(|_| Error::Cancelled {
                uri: uri.to_string(),
            })?;
        let opts = GetOptions {
            range,
            if_match: etag.map(str::to_owned),
        };
        self.store.get_into_with(uri, &opts, seg).await
    }

    fn finish(&self, uri: &ObjectUri, seg: Segment) -> Result<Bytes> {
        let data = seg
            .freeze()
            .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))?;
        Ok(self.pool.share(data))
    }
}

/// Under a budget, memory for the object's first `bytes` bytes.
async fn cover(memory: &mut Option<&mut Reservation>, bytes: u64) {
    if let Some(m) = memory {
        m.cover(bytes).await;
    }
}

/// Under a budget, the object's last request has its memory: the next object's turn.
fn complete(memory: &mut Option<&mut Reservation>) {
    if let Some(m) = memory {
        m.complete();
    }
}

/// A response's word on the object's size must be the size its reading was planned for.
fn same_size(uri: &ObjectUri, planned: u64, reported: Option<u64>) -> Result<()> {
    match reported {
        Some(now) if now != planned => Err(Error::integrity(
            uri.to_string(),
            format!(
                "the object is {now} bytes now, not the {planned} it was listed with: it changed while being read"
            ),
        )),
        _ => Ok(()),
    }
}

/// The lengths of planned (bounded) ranges, as segment lengths.
fn range_lens(uri: &ObjectUri, ranges: &[ByteRange]) -> Result<Vec<usize>> {
    ranges
        .iter()
        .map(|r| to_usize(uri, r.len().expect("planned ranges are bounded")))
        .collect()
}

/// A size from a listing or a response, as a length to allocate: never more than any S3
/// object can be (a larger claim is a broken or hostile reply, not an object).
fn to_usize(uri: &ObjectUri, size: u64) -> Result<usize> {
    if size > sluice_core::MAX_OBJECT_SIZE {
        return Err(Error::integrity(
            uri.to_string(),
            format!("a size of {size} bytes is larger than any S3 object (5 TiB)"),
        ));
    }
    usize::try_from(size).map_err(|_| {
        Error::integrity(
            uri.to_string(),
            format!("object of {size} bytes does not fit in memory"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::S3Store;
    use sluice_core::testing::{self, MemoryWire};
    use std::num::NonZeroU64;

    const MIB: usize = 1 << 20;

    /// Objects named without sizes, read one after another, whose sizes vary (unet3d's
    /// 146.6 ± 68.3 MB): each lands in a buffer of its own size once the sizes seen differ.
    /// Buffers of the largest size seen held each at the cost of the largest. Every object
    /// is held until the end, so each buffer is its own, and all come back to the pool.
    #[tokio::test]
    async fn objects_of_varying_size_are_read_into_buffers_of_their_size() {
        let sizes = [
            9 * MIB,
            3 * MIB + 5,
            4 * MIB,
            2 * MIB + 1,
            5 * MIB + 3,
            3 * MIB,
        ];
        let store = Arc::new(S3Store::over(MemoryWire::new(testing::config())));
        let pool = BufferPool::new(64, usize::MAX);
        let fetcher = Fetcher {
            store: store.clone(),
            range_threshold: 2 * MIB as u64,
            range_size: RangeSize::Fixed(NonZeroU64::new(MIB as u64).unwrap()),
            pool: pool.clone(),
            requests: Arc::new(Semaphore::new(8)),
            sizes: Default::default(),
        };
        let mut held = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let uri = ObjectUri::parse(&format!("s3://bkt/v/{i}")).unwrap();
            let data: Bytes = (0..len).map(|b| (b % 251) as u8 ^ i as u8).collect();
            store.wire().insert(&uri, data.clone());
            let got = fetcher.fetch(&uri, None, None, None).await.unwrap();
            assert!(got.data == data, "{uri}: {} B, not {len}", got.data.len());
            held.push(got.data);
        }
        drop(held);
        let objects: usize = sizes.iter().sum();
        // The objects' buffers, the second's of the first's size (the one size seen when it
        // began), and the chunk that learned sizes. Buffers of the largest size seen would
        // hold 9 MiB each, 27 MiB more.
        let second_guessed = sizes[0] - sizes[1];
        let idle = pool.idle_bytes();
        assert!(
            (objects..=objects + second_guessed + MIB).contains(&idle),
            "{idle} B of buffers for {objects} B of objects"
        );
    }
}
