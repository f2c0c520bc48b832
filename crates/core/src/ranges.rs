//! Many ranges of one object in few requests (`ObjectStoreExt::get_ranges`): ranges whose
//! gap is small are merged into spans, as object_store's `get_ranges` merges them; a span
//! longer than one request's range is cut into pieces; every piece of every span is fetched
//! at once, into its place in one buffer per span; each range asked for comes back as a
//! slice of its span's buffer, without a copy.
//!
//! All pieces read one version of the object: the version given, else the one the first
//! piece's answer names. Pieces are sent without a pin and their ETags compared afterwards,
//! so a read costs one round trip, not two (first answer, then the rest pinned to it); when
//! they disagree, every piece is read again pinned to the first one's ETag.
//!
//! Past the object's end the ranges follow object_store: a range that runs past the end is
//! clipped to it, one that starts at or after the end is an error naming it and the size.

use crate::error::{Error, Result};
use crate::object::{GetInfo, GetOptions, MAX_OBJECT_SIZE, same_etag};
use crate::range::{ByteRange, FOLLOW_MAX_RANGE, split_ranges};
use crate::segment::{Segment, SegmentedBuffer};
use crate::uri::ObjectUri;
use bytes::Bytes;
use std::future::Future;
use std::num::NonZeroU64;
use std::ops::Range;

/// Ranges at most this far apart are read as one: object_store's
/// `OBJECT_STORE_COALESCE_DEFAULT`, about what one more request costs in bytes against S3
/// (its first-byte latency times one connection's rate).
pub const DEFAULT_COALESCE: u64 = 1 << 20;

/// How [`ObjectStoreExt::get_ranges_with`](crate::ObjectStoreExt::get_ranges_with) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangesOptions {
    /// Ranges separated by at most this many bytes are read by one request, the bytes
    /// between them read and dropped ([`DEFAULT_COALESCE`]; 0 merges only ranges that touch
    /// or overlap). [`gap_within`] finds the gap that keeps those bytes under a share.
    pub coalesce: u64,
    /// The most one request asks for: a longer span is read as parallel pieces of this
    /// size into one buffer (default `FOLLOW_MAX_RANGE`, the loader's largest range).
    pub range_size: NonZeroU64,
    /// Read only this version (an ETag from a listing or an earlier read); `None`: the
    /// version the first piece's answer names.
    pub if_match: Option<String>,
}

impl Default for RangesOptions {
    fn default() -> Self {
        Self {
            coalesce: DEFAULT_COALESCE,
            range_size: NonZeroU64::new(FOLLOW_MAX_RANGE).expect("not 0"),
            if_match: None,
        }
    }
}

/// The largest gap that may be read and dropped so that the bytes read stay within
/// `(1 + share)` times the bytes of `ranges`: the smallest gaps are merged first, as long as
/// their sum stays within `share` of the ranges' bytes. For a caller that pays for bytes
/// more than for requests (a column projection, which must not read the columns it skips).
pub fn gap_within(ranges: &[Range<u64>], share: f64) -> u64 {
    let spans = merge(ranges, 0);
    let wanted: u64 = spans.iter().map(|s| s.end - s.start).sum();
    let mut gaps: Vec<u64> = spans.windows(2).map(|w| w[1].start - w[0].end).collect();
    gaps.sort_unstable();
    let budget = (wanted as f64 * share.max(0.0)) as u64;
    let (mut spent, mut gap) = (0u64, 0);
    // Gaps of one size are merged together or not at all: a gap of g merges every gap ≤ g.
    for same in gaps.chunk_by(|a, b| a == b) {
        spent = spent.saturating_add(same[0].saturating_mul(same.len() as u64));
        if spent > budget {
            break;
        }
        gap = same[0];
    }
    gap
}

/// The requests that read a set of ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangesPlan {
    /// Disjoint, in order: each read into one buffer.
    spans: Vec<Range<u64>>,
    /// Each span's pieces, one request each: contiguous, covering the span.
    pieces: Vec<Vec<ByteRange>>,
}

impl RangesPlan {
    /// Plans `ranges` (in any order, overlapping allowed; empty ones need no bytes): merged
    /// where at most `coalesce` bytes apart, cut into pieces of at most `range_size`. A
    /// reversed range is refused, naming it.
    pub fn new(ranges: &[Range<u64>], coalesce: u64, range_size: NonZeroU64) -> Result<Self> {
        if let Some(r) = ranges.iter().find(|r| r.end < r.start) {
            return Err(Error::config(
                "range",
                format!("byte range {}..{} is reversed", r.start, r.end),
            ));
        }
        if let Some(r) = ranges
            .iter()
            .find(|r| r.start < r.end && r.start >= MAX_OBJECT_SIZE)
        {
            return Err(Error::config(
                "range",
                format!(
                    "byte range {}..{} starts past the largest object S3 holds ({MAX_OBJECT_SIZE} bytes)",
                    r.start, r.end
                ),
            ));
        }
        let spans = merge(ranges, coalesce);
        let pieces = spans
            .iter()
            .map(|s| {
                split_ranges(s.end - s.start, range_size)
                    .into_iter()
                    .map(|p| {
                        let end = p.end().expect("split ranges are bounded");
                        ByteRange::new(s.start + p.start(), s.start + end)
                            .expect("split ranges are not empty")
                    })
                    .collect()
            })
            .collect();
        Ok(Self { spans, pieces })
    }

    /// The merged spans, in order.
    pub fn spans(&self) -> &[Range<u64>] {
        &self.spans
    }

    /// The requests the plan sends.
    pub fn requests(&self) -> usize {
        self.pieces.iter().map(Vec::len).sum()
    }

    /// The bytes the plan asks for (more than the ranges' by the gaps merged over).
    pub fn bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.end - s.start).sum()
    }

    /// The span that holds `r` (a non-empty range the plan was made for).
    fn span_of(&self, r: &Range<u64>) -> usize {
        self.spans.partition_point(|s| s.start <= r.start) - 1
    }
}

/// The non-empty `ranges`, sorted and merged where at most `coalesce` bytes apart; an end
/// past the largest object S3 holds is planned as that size (no object reaches further, and
/// a plan of pieces up to `u64::MAX` would not fit in memory).
fn merge(ranges: &[Range<u64>], coalesce: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges
        .iter()
        .map(|r| r.start..r.end.min(MAX_OBJECT_SIZE))
        .filter(|r| r.start < r.end)
        .collect();
    sorted.sort_unstable_by_key(|r| r.start);
    let mut spans: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match spans.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(coalesce) => {
                last.end = last.end.max(r.end);
            }
            _ => spans.push(r),
        }
    }
    spans
}

/// One piece's answer: its bytes landed in its segment, or (`None`) the store said the object
/// ends before the piece starts (416).
type Piece = Option<(Segment, GetInfo)>;

/// `ranges` of `uri` as `opts` asks, in the caller's order (see the module's doc), each
/// piece read by `get` (a store's `get_into_with`) into the segment it is given.
pub(crate) async fn get_ranges<F, Fut>(
    uri: &ObjectUri,
    ranges: &[Range<u64>],
    opts: &RangesOptions,
    get: F,
) -> Result<Vec<Bytes>>
where
    F: Fn(GetOptions, Segment) -> Fut,
    Fut: Future<Output = Result<(Segment, GetInfo)>>,
{
    let plan = RangesPlan::new(ranges, opts.coalesce, opts.range_size)?;
    if plan.spans.is_empty() {
        return Ok(vec![Bytes::new(); ranges.len()]);
    }
    let mut pieces = fetch(&get, &plan, opts.if_match.as_deref()).await?;
    if opts.if_match.is_none()
        && let Some(first) = version_in_doubt(&plan, &pieces)
    {
        // Another version was written while the pieces were in flight: read them all again,
        // of the version the first answer named (a further change is then a 412, an error).
        pieces = fetch(&get, &plan, Some(&first)).await?;
    }
    let size = object_size(uri, &plan, &pieces)?;
    let spans = join(uri, &plan, pieces, size)?;
    ranges
        .iter()
        .map(|r| {
            if r.start == r.end {
                return Ok(Bytes::new());
            }
            if r.start >= size {
                return Err(Error::config(
                    "range",
                    format!(
                        "byte range {}..{} starts at or past the end of {uri} ({size} bytes)",
                        r.start, r.end
                    ),
                ));
            }
            let i = plan.span_of(r);
            let base = plan.spans[i].start;
            let end = r.end.min(size);
            Ok(spans[i].slice((r.start - base) as usize..(end - base) as usize))
        })
        .collect()
}

/// Every piece of the plan at once, each into its place in its span's buffer.
async fn fetch<F, Fut>(
    get: &F,
    plan: &RangesPlan,
    if_match: Option<&str>,
) -> Result<Vec<Vec<Piece>>>
where
    F: Fn(GetOptions, Segment) -> Fut,
    Fut: Future<Output = Result<(Segment, GetInfo)>>,
{
    let mut reads = Vec::with_capacity(plan.requests());
    for (span, pieces) in plan.spans.iter().zip(&plan.pieces) {
        let lens = pieces
            .iter()
            .map(|p| usize::try_from(p.len().unwrap_or(0)))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| {
                Error::config(
                    "range",
                    format!("{}..{} does not fit in memory", span.start, span.end),
                )
            })?;
        let segments = SegmentedBuffer::try_split(&lens)
            .map_err(|e| Error::config("range", format!("{}..{}: {e}", span.start, span.end)))?;
        // At most its length: a piece that runs past the object's end comes back shorter.
        let segments = segments.into_iter().map(Segment::into_growable);
        for (seg, range) in segments.zip(pieces.iter().copied()) {
            let opts = GetOptions {
                range: Some(range),
                if_match: if_match.map(str::to_owned),
            };
            let read = get(opts, seg);
            reads.push(async move {
                match read.await {
                    Ok(answer) => Ok(Some(answer)),
                    Err(Error::Service { status: 416, .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            });
        }
    }
    // One task polls them all: the store's limiter bounds the requests in flight, and a
    // caller's borrowed store needs no `'static` task.
    let mut done = futures::future::try_join_all(reads).await?.into_iter();
    Ok(plan
        .pieces
        .iter()
        .map(|p| done.by_ref().take(p.len()).collect())
        .collect())
}

/// The first piece's ETag when the answers may be of two versions: another piece names
/// another ETag, or a piece was refused as past the end (a 416 carries no ETag) below a size
/// another answer gave.
fn version_in_doubt(plan: &RangesPlan, pieces: &[Vec<Piece>]) -> Option<String> {
    let answers = || pieces.iter().flatten().filter_map(Option::as_ref);
    let mut etags = answers().filter_map(|(_, info)| info.etag.as_deref());
    let first = etags.next()?;
    let largest = answers().filter_map(|(_, info)| info.object_size).max();
    let refused_inside = plan
        .pieces
        .iter()
        .flatten()
        .zip(pieces.iter().flatten())
        .any(|(r, p)| p.is_none() && largest.is_some_and(|size| r.start() < size));
    (refused_inside || etags.any(|e| !same_etag(e, first))).then(|| first.to_owned())
}

/// The object's size, as every answer that gave one agrees; a piece past the end must lie
/// past it.
fn object_size(uri: &ObjectUri, plan: &RangesPlan, pieces: &[Vec<Piece>]) -> Result<u64> {
    let mut size = None;
    for p in pieces.iter().flatten() {
        if let Some((_, info)) = p
            && let Some(s) = info.object_size
        {
            match size {
                Some(known) if known != s => {
                    return Err(Error::integrity(
                        uri.to_string(),
                        format!(
                            "its size changed from {known} to {s} bytes while its ranges were read"
                        ),
                    ));
                }
                _ => size = Some(s),
            }
        }
    }
    let past: Vec<u64> = plan
        .pieces
        .iter()
        .flatten()
        .zip(pieces.iter().flatten())
        .filter_map(|(r, p)| p.is_none().then_some(r.start()))
        .collect();
    match (size, past.iter().min()) {
        (Some(s), Some(&start)) if start < s => Err(Error::integrity(
            uri.to_string(),
            format!("bytes from {start} were refused as past the end of a {s}-byte object"),
        )),
        (Some(s), _) => Ok(s),
        // Every piece past the end: the object is shorter than the first range's start.
        (None, Some(_)) => Err(Error::config(
            "range",
            format!(
                "byte range {}..{} starts at or past the end of {uri}",
                plan.spans[0].start, plan.spans[0].end
            ),
        )),
        // No answer said the size: the pieces' lengths say how far the object reaches.
        (None, None) => Ok(reached(plan, pieces)),
    }
}

/// Where the object ends as far as the answers show: past every piece answered in full, at
/// the end of the first that came back short.
fn reached(plan: &RangesPlan, pieces: &[Vec<Piece>]) -> u64 {
    let mut end = 0;
    for (r, p) in plan.pieces.iter().flatten().zip(pieces.iter().flatten()) {
        if let Some((seg, _)) = p {
            let got = r.start() + seg.written() as u64;
            if Some(got) != r.end() {
                return got;
            }
            end = got;
        }
    }
    end
}

/// Each span's pieces joined into one buffer, checked to hold every byte below `size`.
fn join(
    uri: &ObjectUri,
    plan: &RangesPlan,
    pieces: Vec<Vec<Piece>>,
    size: u64,
) -> Result<Vec<Bytes>> {
    plan.pieces
        .iter()
        .zip(pieces)
        .map(|(ranges, answers)| {
            let mut segs = Vec::with_capacity(answers.len());
            for (r, p) in ranges.iter().zip(answers) {
                let end = r.end().expect("pieces are bounded");
                let want = end.min(size).saturating_sub(r.start());
                let seg = p.map_or_else(Segment::growable, |(seg, _)| seg);
                if seg.written() as u64 != want {
                    return Err(Error::integrity(
                        uri.to_string(),
                        format!(
                            "asked for bytes {r} of a {size}-byte object, got {}",
                            seg.written()
                        ),
                    ));
                }
                segs.push(seg);
            }
            SegmentedBuffer::join(segs)
                .map_err(|e| Error::integrity(uri.to_string(), e.to_string()))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init, clippy::reversed_empty_ranges)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn size(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    #[test]
    fn close_ranges_merge_and_far_ones_do_not() {
        let p = RangesPlan::new(&[30..40, 0..10, 12..20, 100..110], 5, size(1 << 20)).unwrap();
        assert_eq!(p.spans(), &[0..20, 30..40, 100..110]);
        assert_eq!(p.bytes(), 40);
        let p = RangesPlan::new(&[0..10, 12..20], 0, size(1 << 20)).unwrap();
        assert_eq!(p.spans(), &[0..10, 12..20], "0 merges only touching ranges");
        let p = RangesPlan::new(&[0..10, 10..20, 5..7], 0, size(1 << 20)).unwrap();
        assert_eq!(p.spans(), &[0..20]);
    }

    #[test]
    fn a_long_span_is_cut_into_pieces() {
        let p = RangesPlan::new(&[0..25, 26..30], 1, size(10)).unwrap();
        assert_eq!(p.spans(), &[0..30]);
        assert_eq!(p.requests(), 3);
    }

    #[test]
    fn reversed_ranges_are_refused_and_empty_ones_need_nothing() {
        let e = RangesPlan::new(&[0..10, 9..3], 0, size(8)).unwrap_err();
        assert!(e.to_string().contains("9..3 is reversed"), "{e}");
        let p = RangesPlan::new(&[5..5, 7..7], 0, size(8)).unwrap();
        assert_eq!(p.requests(), 0);
    }

    #[test]
    fn the_gap_found_keeps_the_bytes_dropped_within_the_share() {
        // 4 ranges of 100 bytes, gaps of 5, 50 and 20: 10% of 400 is 40, so gaps of 5 and
        // 20 fit (25) and 50 does not.
        let ranges = [0..100, 105..205, 255..355, 375..475];
        assert_eq!(gap_within(&ranges, 0.10), 20);
        assert_eq!(gap_within(&ranges, 0.0), 0);
        assert_eq!(gap_within(&ranges, 1.0), 50);
        assert_eq!(gap_within(&[], 0.1), 0);
    }

    proptest! {
        #[test]
        fn a_plan_covers_every_range_within_its_bounds(
            ranges in proptest::collection::vec((0u64..10_000, 0u64..500), 0..40),
            coalesce in 0u64..300,
            piece in 1u64..700,
        ) {
            let ranges: Vec<Range<u64>> = ranges.into_iter().map(|(s, l)| s..s + l).collect();
            let p = RangesPlan::new(&ranges, coalesce, size(piece)).unwrap();
            for w in p.spans().windows(2) {
                prop_assert!(w[0].end + coalesce < w[1].start, "spans apart by more than the gap");
            }
            for r in ranges.iter().filter(|r| r.start < r.end) {
                let s = &p.spans()[p.span_of(r)];
                prop_assert!(s.start <= r.start && r.end <= s.end);
            }
            for (s, pieces) in p.spans.iter().zip(&p.pieces) {
                prop_assert_eq!(pieces.first().unwrap().start(), s.start);
                prop_assert_eq!(pieces.last().unwrap().end(), Some(s.end));
                prop_assert!(pieces.windows(2).all(|w| w[0].end() == Some(w[1].start())));
                prop_assert!(pieces.iter().all(|x| x.len().unwrap() <= piece));
            }
            let gap = gap_within(&ranges, 0.1);
            let wanted = RangesPlan::new(&ranges, 0, size(piece)).unwrap().bytes();
            let read = RangesPlan::new(&ranges, gap, size(piece)).unwrap().bytes();
            prop_assert!(read as f64 <= wanted as f64 * 1.1 + 1.0);
        }
    }
}
