//! Byte ranges and range planning: how one large object becomes parallel ranged GETs.

use crate::error::{Error, Result};
use std::num::NonZeroU64;

/// A half-open byte range `start..end`, or `start..` (to the end of the object). Never empty:
/// HTTP has no syntax for an empty range, so an empty one cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteRange {
    start: u64,
    end: Option<u64>,
}

impl ByteRange {
    /// `start..end`; errors if the range would be empty.
    pub fn new(start: u64, end: u64) -> Result<Self> {
        if end <= start {
            return Err(Error::config(
                "range",
                format!("byte range {start}..{end} is empty or reversed"),
            ));
        }
        Ok(Self {
            start,
            end: Some(end),
        })
    }

    /// `start..start+len`; errors if `len` is 0.
    pub fn with_len(start: u64, len: u64) -> Result<Self> {
        Self::new(start, start.saturating_add(len))
    }

    /// `start..` to the end of the object.
    pub fn from_offset(start: u64) -> Self {
        Self { start, end: None }
    }

    /// The first byte's offset in the object.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Exclusive end, if bounded.
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// Bytes in the range; `None` for an open-ended `start..`, whose length depends on the
    /// object.
    pub fn len(&self) -> Option<u64> {
        self.end.map(|e| e - self.start)
    }

    /// Ranges are never empty; provided for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The remainder after the first `n` bytes were received, or `None` if nothing remains.
    pub fn advance(&self, n: u64) -> Option<Self> {
        let start = self.start + n;
        match self.end {
            Some(end) if start >= end => None,
            end => Some(Self { start, end }),
        }
    }

    /// The HTTP `Range` header value (inclusive end, per RFC 9110).
    pub fn to_header(&self) -> String {
        match self.end {
            Some(end) => format!("bytes={}-{}", self.start, end - 1),
            None => format!("bytes={}-", self.start),
        }
    }
}

impl std::fmt::Display for ByteRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.end {
            Some(end) => write!(f, "{}..{}", self.start, end),
            None => write!(f, "{}..", self.start),
        }
    }
}

/// Decides whether an object is fetched in one GET or as parallel ranged GETs, and cuts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangePlanner {
    /// Objects of at least this many bytes are split.
    pub threshold: u64,
    /// Size of each ranged GET (the last one may be shorter).
    pub chunk_size: NonZeroU64,
}

impl RangePlanner {
    /// A threshold that no object reaches: every object is read with one GET.
    pub const NEVER: u64 = u64::MAX;

    /// Whether any object could be split (false when the threshold is `NEVER`).
    pub fn splits(&self) -> bool {
        self.threshold != Self::NEVER
    }

    /// `None`: fetch in one request. `Some(ranges)`: contiguous, covering `0..size`, each at
    /// most `chunk_size` bytes, in order.
    pub fn plan(&self, size: u64) -> Option<Vec<ByteRange>> {
        if size < self.threshold || size <= self.chunk_size.get() {
            return None;
        }
        Some(split_ranges(size, self.chunk_size))
    }

    /// As [`plan`](Self::plan), for `range` of an object rather than all of it: `None` for
    /// one request (an open range, or one below the threshold or within one chunk), else
    /// contiguous ranges covering it, each at most `chunk_size` bytes, in order.
    pub fn plan_range(&self, range: ByteRange) -> Option<Vec<ByteRange>> {
        let len = range.len()?;
        let start = range.start();
        let mut ranges = self.plan(len)?;
        for r in &mut ranges {
            r.start += start;
            r.end = r.end.map(|e| e + start);
        }
        Some(ranges)
    }
}

/// How many bytes each ranged GET asks for: a size set, or one that follows the client's
/// controller ([`RangeSize::follow`], the default of the loader and `sluice get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSize {
    /// Always this many bytes.
    Fixed(NonZeroU64),
    /// The memory budget ÷ twice the requests the client allows now, rounded up to a power
    /// of two within [`FOLLOW_MIN_RANGE`]..=[`FOLLOW_MAX_RANGE`].
    ///
    /// A ranged GET holds its bytes of the budget from the moment it is sent, while it
    /// waits for its first byte: with a store's latency and a rate per connection (S3's, as
    /// the `s3-standard` profile models them), `memory` bytes read at most `memory ÷
    /// (latency + range ÷ rate)`, so where the controller finds that more requests pay, smaller ranges let the
    /// same memory hold them. Twice the limit, as the loader's window holds twice the limit
    /// in objects: the controller grows the limit only while requests wait beyond it.
    /// Rounded up, so the budget holds one to two times the limit in ranges (fewer at the
    /// floor: 64 of 4 MiB in 256 MiB, whatever the limit above 64), and a loopback
    /// server, which the controller serves with 16 to 31 requests, keeps the 8 MiB measured
    /// best there (4 MiB ranges read 0.91x as fast against nginx in the loader at prefetch
    /// 16, at 1.06x the CPU per GB for `sluice get`). A power of two, so that the limit's
    /// probes of a quarter more and its cuts of 0.7 do not each change the range size.
    ///
    /// The controller compares rounds by bytes per second, not answers
    /// (`congestion::ANSWER_BYTES`): smaller ranges answer more often at the same bytes per
    /// second, which judged by answers looked like a gain and drew ever more requests.
    Follow {
        /// The bytes in flight the ranges share (the loader's memory budget).
        memory: u64,
    },
}

/// Largest range that follows the controller: 8 MiB, the fixed size measured before it on
/// loopback (`DEFAULT_RANGE_THRESHOLD` in the loader: signing and a round trip under 1% of
/// the transfer).
pub const FOLLOW_MAX_RANGE: u64 = 8 << 20;
/// Smallest range that follows the controller: 4 MiB. Each request costs the server, and S3
/// limits requests per second per prefix, so a prefix serves bytes in proportion to the range
/// size: fewer, larger ranges read faster than more, smaller ones at the same bytes in flight
/// (docs/benchmarks.md, "Why the defaults").
pub const FOLLOW_MIN_RANGE: u64 = 4 << 20;

impl RangeSize {
    /// The size `set`, else one that follows the controller within `memory` bytes.
    pub fn set_or_follow(set: Option<NonZeroU64>, memory: Option<u64>) -> Self {
        set.map_or_else(|| Self::follow(memory), Self::Fixed)
    }

    /// Follows the controller within `memory` bytes (`None`: no budget, the largest range).
    pub fn follow(memory: Option<u64>) -> Self {
        Self::Follow {
            memory: memory.unwrap_or(u64::MAX),
        }
    }

    /// The size of a range planned now by a client whose controller stands at `congestion`
    /// (`ObjectStore::congestion`; none: the largest): by the requests it allows now.
    pub fn for_client(self, congestion: Option<crate::congestion::CongestionStats>) -> NonZeroU64 {
        self.now(congestion.map_or(0, |c| c.limit))
    }

    /// How many requests a job over objects of `sizes` (in the order it reads them; `None`:
    /// not known, read by one first request) could have in flight at once, counting no more
    /// than `at_most`: one per object below `threshold`, one per range of the smallest size
    /// this gives for a larger one, and no more than `memory` holds (each request holding
    /// its bytes, a first request of unknown size one range). What a job tells its client's
    /// controller to start from (`ObjectStore::expect_requests`).
    pub fn requests_at_once(
        self,
        sizes: impl IntoIterator<Item = Option<u64>>,
        threshold: u64,
        memory: Option<u64>,
        at_most: usize,
    ) -> usize {
        let range = match self {
            Self::Fixed(n) => n.get(),
            Self::Follow { .. } => FOLLOW_MIN_RANGE,
        };
        let mut memory = memory.unwrap_or(u64::MAX);
        let mut requests = 0;
        for size in sizes {
            let (count, each) = match size {
                Some(s) if s >= threshold && s > range => (s.div_ceil(range), range),
                Some(s) => (1, s.max(1)),
                None => (1, range),
            };
            let fits = (memory / each).min(count);
            requests = (requests as u64).saturating_add(fits).min(at_most as u64) as usize;
            memory -= fits * each;
            if fits < count || requests == at_most {
                break;
            }
        }
        requests
    }

    /// The size of a range planned now, when the client allows `limit` requests in flight
    /// (0: it has no controller).
    pub fn now(self, limit: usize) -> NonZeroU64 {
        let bytes = match self {
            Self::Fixed(n) => return n,
            Self::Follow { .. } if limit == 0 => FOLLOW_MAX_RANGE,
            Self::Follow { memory } => {
                let share = memory / (limit as u64).saturating_mul(2);
                let up = share
                    .checked_next_power_of_two()
                    .unwrap_or(FOLLOW_MAX_RANGE);
                up.clamp(FOLLOW_MIN_RANGE, FOLLOW_MAX_RANGE)
            }
        };
        NonZeroU64::new(bytes).expect("within the bounds above, not 0")
    }
}

/// Cuts `0..size` into contiguous chunks of `chunk` bytes (the last shorter). Empty for 0.
pub fn split_ranges(size: u64, chunk: NonZeroU64) -> Vec<ByteRange> {
    let chunk = chunk.get();
    (0..size.div_ceil(chunk))
        .map(|i| {
            let start = i * chunk;
            ByteRange {
                start,
                end: Some((start + chunk).min(size)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_job_counts_its_requests_within_its_memory() {
        let follow = RangeSize::follow(None);
        let mib = 1u64 << 20;
        let small = std::iter::repeat_n(Some(128 << 10), 400);
        assert_eq!(
            follow.requests_at_once(small.clone(), 16 * mib, None, 256),
            256
        );
        assert_eq!(follow.requests_at_once(small, 16 * mib, Some(mib), 256), 8);
        // 146 MB objects in ranges of 4 MiB, 256 MiB of memory: 64 ranges at once.
        let large = std::iter::repeat_n(Some(146_600_628), 24);
        assert_eq!(
            follow.requests_at_once(large.clone(), 16 * mib, Some(256 * mib), 256),
            64
        );
        assert_eq!(
            follow.requests_at_once(large, RangePlanner::NEVER, None, 256),
            24
        );
        // Not known: one first request each.
        assert_eq!(
            follow.requests_at_once([None, None, Some(0)], 16 * mib, None, 256),
            3
        );
        let fixed = RangeSize::Fixed(NonZeroU64::new(mib).unwrap());
        assert_eq!(fixed.requests_at_once([Some(10 * mib)], 0, None, 256), 10);
    }

    #[test]
    fn header_uses_inclusive_end() {
        assert_eq!(ByteRange::new(0, 1).unwrap().to_header(), "bytes=0-0");
        assert_eq!(
            ByteRange::with_len(10, 5).unwrap().to_header(),
            "bytes=10-14"
        );
        assert_eq!(ByteRange::from_offset(7).to_header(), "bytes=7-");
        assert!(ByteRange::new(5, 5).is_err());
        assert!(ByteRange::with_len(5, 0).is_err());
    }

    #[test]
    fn advance_consumes_the_prefix() {
        let r = ByteRange::new(10, 20).unwrap();
        assert_eq!(r.advance(4), Some(ByteRange::new(14, 20).unwrap()));
        assert_eq!(r.advance(10), None);
        assert_eq!(
            ByteRange::from_offset(3).advance(5),
            Some(ByteRange::from_offset(8))
        );
    }

    #[test]
    fn small_objects_are_not_split() {
        let p = RangePlanner {
            threshold: 100,
            chunk_size: NonZeroU64::new(40).unwrap(),
        };
        assert_eq!(p.plan(99), None);
        assert_eq!(p.plan(100).unwrap().len(), 3);
        let p = RangePlanner {
            threshold: 0,
            chunk_size: NonZeroU64::new(40).unwrap(),
        };
        assert_eq!(p.plan(40), None, "one chunk's worth is one request");
        let r = ByteRange::new(1000, 1100).unwrap();
        let planned = p.plan_range(r).unwrap();
        assert_eq!(planned.first().unwrap().start(), 1000);
        assert_eq!(planned.last().unwrap().end(), Some(1100));
        assert!(planned.windows(2).all(|w| w[0].end() == Some(w[1].start())));
        assert_eq!(
            p.plan_range(ByteRange::new(1000, 1040).unwrap()),
            None,
            "one chunk's worth is one request"
        );
        assert_eq!(
            p.plan_range(ByteRange::from_offset(5)),
            None,
            "an open range: one GET"
        );
    }

    #[test]
    fn a_followed_range_shrinks_as_the_limit_grows_within_its_bounds() {
        let mib = |n: u64| NonZeroU64::new(n << 20).unwrap();
        let follow = RangeSize::follow(Some(256 << 20));
        // 256 MiB hold 32 ranges of 8 MiB: twice a limit of 16 (the controller's start).
        assert_eq!(follow.now(16), mib(8));
        assert_eq!(
            follow.now(31),
            mib(8),
            "4.1 MiB rounds up to a power of two"
        );
        assert_eq!(follow.now(32), mib(4));
        assert_eq!(follow.now(64), mib(4), "2 MiB: never below 4 MiB");
        assert_eq!(follow.now(256), mib(4));
        assert_eq!(follow.now(1), mib(8), "never above 8 MiB");
        assert_eq!(follow.now(0), mib(8), "no controller: the largest");
        assert_eq!(
            RangeSize::follow(None).now(256),
            mib(8),
            "no budget: the largest"
        );
        assert_eq!(RangeSize::follow(Some(1)).now(1), mib(4));
        assert_eq!(RangeSize::follow(Some(1 << 30)).now(64), mib(8));
        assert_eq!(
            RangeSize::follow(Some(1 << 30)).now(100),
            mib(8),
            "5.1 MiB: up"
        );
        assert_eq!(RangeSize::Fixed(mib(3)).now(64), mib(3), "a size set wins");
    }

    proptest! {
        #[test]
        fn plan_is_contiguous_complete_and_bounded(size in 0u64..1<<40, chunk in 1u64..1<<32, threshold in 0u64..1<<41) {
            let p = RangePlanner { threshold, chunk_size: NonZeroU64::new(chunk).unwrap() };
            match p.plan(size) {
                None => prop_assert!(size < threshold || size <= chunk),
                Some(ranges) => {
                    prop_assert!(ranges.len() >= 2);
                    let mut pos = 0;
                    for r in &ranges {
                        prop_assert_eq!(r.start(), pos);
                        let len = r.len().unwrap();
                        prop_assert!(len > 0 && len <= chunk);
                        pos = r.end().unwrap();
                    }
                    prop_assert_eq!(pos, size);
                    prop_assert_eq!(ranges.len() as u64, size.div_ceil(chunk));
                }
            }
        }
    }
}
