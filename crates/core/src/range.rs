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
