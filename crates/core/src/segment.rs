//! Zero-copy assembly: one allocation, pre-split into per-chunk segments that independent
//! tasks fill, rejoined in O(1).
//!
//! Each byte is copied exactly once, from the socket's frame into its final place (a counting
//! segment, for a reader that keeps nothing, copies none). A segment's capacity is exactly
//! its expected length, so filling it never reallocates and the segments stay adjacent in
//! memory; `BytesMut::unsplit` then rejoins them without a copy.

use crate::checksum::{HOT, Pieces, Tally};
use bytes::{Bytes, BytesMut};

/// A fill went wrong: more bytes than the segment holds, or a declared length that does not
/// match what the segment expects. The caller turns this into `Error::Integrity` with its URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// A write would have run past the end of a fixed segment; nothing of it was written.
    #[error("received more bytes than expected ({got} > {expected})")]
    Overflow {
        /// The segment's fixed length.
        expected: usize,
        /// The length the write would have reached.
        got: usize,
    },
    /// A response declares a body length other than what a fixed segment has left to fill,
    /// or more than this machine can address (for a growable one).
    #[error("response declares {declared} bytes but {remaining} remain to fill")]
    LengthMismatch {
        /// Body bytes the response declares (its Content-Length).
        declared: u64,
        /// Bytes the segment still expects; `usize::MAX` when the declared length does not
        /// fit in a `usize`.
        remaining: usize,
    },
    /// A counting segment (`Segment::counting`) was asked for bytes it never kept.
    #[error("the segment counted its bytes and kept none")]
    NotKept,
    /// No memory for a segment of the length asked (a size a server reported, say).
    #[error("cannot allocate a buffer of {len} bytes")]
    Allocation {
        /// The length asked for.
        len: u64,
    },
    /// A fixed segment was frozen or joined before it was full.
    #[error("segment {index} holds {got} of its {expected} bytes")]
    Incomplete {
        /// Its position among the segments joined (0 for one frozen alone).
        index: usize,
        /// Its fixed length.
        expected: usize,
        /// Bytes written into it.
        got: usize,
    },
}

/// The most a counting segment reads from a socket at once (`poll_read_from`): sixteen
/// connections' scratch buffers then fit a core's L2, which measured cheaper than larger
/// ones for hyper's read buffers (`READ_BUF_MAX` in backend-hyper).
const COUNT_SOCKET_READ: usize = 256 << 10;

/// The most a growable segment reserves on a response's word (see `expect_more`).
const RESERVE_CAP: usize = 1 << 30;

/// The most a counting segment reads from a file at once (`read_at`): its scratch buffer.
const COUNT_SCRATCH: usize = 1 << 20;

/// The most a growable segment with no room left grows by for one read (`poll_read_from`).
const GROW_STEP: usize = 1 << 20;

/// A destination for one response body: either exactly `len` bytes (part of a
/// [`SegmentedBuffer`], or a known-size object), or growable (size unknown up front); its
/// bytes kept in memory, or only counted (`counting`).
#[derive(Debug)]
pub struct Segment {
    data: Data,
    /// `Some(n)`: exactly n bytes must be written. `None`: growable.
    expected: Option<usize>,
    /// When the first body byte arrived (time to first byte, for `sluice bench`); one clock
    /// read per segment.
    first_byte: Option<std::time::Instant>,
    /// The CRC of the bytes kept, taken as they land (`tallied`).
    tally: Option<Tally>,
}

#[derive(Debug)]
enum Data {
    Kept(BytesMut),
    /// A reader that needs only the count (`sluice get` without `-o`): each body frame is
    /// checked against the length and dropped where it lies, never copied. `scratch` is
    /// where a file's bytes are read to be counted.
    Counted {
        written: usize,
        scratch: Vec<u8>,
    },
}

impl Segment {
    /// A growable segment; it reserves what a response declares in one step.
    pub fn growable() -> Self {
        Self::kept(BytesMut::new(), None)
    }

    fn kept(buf: BytesMut, expected: Option<usize>) -> Self {
        Self {
            data: Data::Kept(buf),
            expected,
            first_byte: None,
            tally: None,
        }
    }

    /// Exactly `len` bytes that are counted (and checked against `len`, as any fixed
    /// segment's) but not kept: for a reader that discards what it reads. No memory is
    /// touched for the body; `as_slice` has nothing to give and `freeze` refuses.
    pub fn counting(len: usize) -> Self {
        Self {
            data: Data::Counted {
                written: 0,
                scratch: Vec::new(),
            },
            expected: Some(len),
            first_byte: None,
            tally: None,
        }
    }

    /// A growable segment over reused memory (e.g. from a buffer pool); `buf` is cleared.
    pub fn growable_in(mut buf: BytesMut) -> Self {
        buf.clear();
        Self::kept(buf, None)
    }

    /// The memory back, to reuse it (none from a counting segment).
    pub fn into_buffer(self) -> BytesMut {
        match self.data {
            Data::Kept(buf) => buf,
            Data::Counted { .. } => BytesMut::new(),
        }
    }

    /// A stand-alone segment of exactly `len` bytes.
    pub fn exact(len: usize) -> Self {
        Self::kept(BytesMut::with_capacity(len), Some(len))
    }

    /// As `exact`, for a length that comes from outside (a server's Content-Length): one
    /// the machine cannot hold is an error, not an abort.
    pub fn try_exact(len: u64) -> Result<Self, SegmentError> {
        let fail = || SegmentError::Allocation { len };
        let n = usize::try_from(len).map_err(|_| fail())?;
        // BytesMut cannot report a failed allocation (it aborts): ask a Vec first, as the
        // buffer pool does (unmapped memory costs nothing: the probe is an mmap/munmap pair).
        Vec::<u8>::new().try_reserve_exact(n).map_err(|_| fail())?;
        Ok(Self::exact(n))
    }

    /// Wraps caller-provided memory (e.g. from a buffer pool). `buf` is cleared; its capacity
    /// must be at least `len`.
    pub fn from_buffer(mut buf: BytesMut, len: usize) -> Self {
        buf.clear();
        if buf.capacity() < len {
            buf.reserve(len);
        }
        Self::kept(buf, Some(len))
    }

    /// This segment's memory, taking however many bytes come: for a read that may come
    /// back shorter than its length (a range that runs past the object's end), whose caller
    /// checks what arrived. More than its length still lands, in memory of its own.
    pub fn into_growable(self) -> Self {
        Self {
            expected: None,
            ..self
        }
    }

    /// Takes the CRC of the bytes as they land, while they are still in cache (reads land
    /// at most `checksum::HOT` bytes at a time), one CRC per `piece` bytes — where a writer will cut
    /// its parts, so it can checksum them without reading them again: see [`Pieces`] and
    /// `freeze_with_pieces`. A counting segment keeps no bytes and takes no CRC.
    pub fn tallied(mut self, piece: u64) -> Self {
        if matches!(self.data, Data::Kept(_)) {
            self.tally = Some(Tally::new(piece));
        }
        self
    }

    /// The most one read should land at once: [`HOT`] when tallied, so it is summed hot.
    fn read_cap(&self, max: usize) -> usize {
        if self.tally.is_some() {
            max.min(HOT)
        } else {
            max
        }
    }

    /// When the first body byte was written into this segment (kept across `reset`: a
    /// resumed read's first byte is still the request's first).
    pub fn first_byte_at(&self) -> Option<std::time::Instant> {
        self.first_byte
    }

    fn mark_first_byte(&mut self, n: usize) {
        if n > 0 && self.first_byte.is_none() {
            self.first_byte = Some(std::time::Instant::now());
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        match &self.data {
            Data::Kept(buf) => buf.len(),
            Data::Counted { written, .. } => *written,
        }
    }

    /// The fixed length; `None` for a growable segment.
    pub fn expected_len(&self) -> Option<usize> {
        self.expected
    }

    /// Bytes still to be written, if the length is fixed.
    pub fn remaining(&self) -> Option<usize> {
        self.expected.map(|e| e - self.written())
    }

    /// Whether it can be frozen: a fixed segment is full, a growable one always is.
    pub fn is_complete(&self) -> bool {
        self.expected.is_none_or(|e| e == self.written())
    }

    /// Called when a response head declares `declared` more body bytes: a fixed segment
    /// checks they fit exactly; a growable one reserves them so the fill never reallocates.
    pub fn expect_more(&mut self, declared: u64) -> Result<(), SegmentError> {
        match self.remaining() {
            Some(remaining) if remaining as u64 != declared => Err(SegmentError::LengthMismatch {
                declared,
                remaining,
            }),
            Some(_) => Ok(()),
            None => {
                let add = usize::try_from(declared).map_err(|_| SegmentError::LengthMismatch {
                    declared,
                    remaining: usize::MAX,
                })?;
                // A declared length is a claim: reserve at most RESERVE_CAP up front and let
                // the buffer grow as bytes actually arrive, so a lying Content-Length cannot
                // make the process abort on an impossible allocation.
                if let Data::Kept(buf) = &mut self.data {
                    buf.reserve(add.min(RESERVE_CAP));
                }
                Ok(())
            }
        }
    }

    /// Appends body bytes; never past a fixed segment's end.
    pub fn write(&mut self, data: &[u8]) -> Result<(), SegmentError> {
        if let Some(expected) = self.expected {
            let got = self.written() + data.len();
            if got > expected {
                return Err(SegmentError::Overflow { expected, got });
            }
        }
        self.mark_first_byte(data.len());
        match (&mut self.data, &mut self.tally) {
            // A piece at a time, each summed right after its copy.
            (Data::Kept(buf), Some(tally)) => {
                for step in data.chunks(HOT) {
                    buf.extend_from_slice(step);
                    tally.update(step);
                }
            }
            (Data::Kept(buf), None) => buf.extend_from_slice(data),
            (Data::Counted { written, .. }, _) => *written += data.len(),
        }
        Ok(())
    }

    /// Discards everything written (a response that must be read again from its start).
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Appends up to `max` bytes read from `file` at `offset` with one `pread`, straight
    /// into the segment's memory: no intermediate buffer and no zero-filling first (a
    /// memset per read costs as much as the read from the page cache). A fixed
    /// segment never takes more than it has room for. Returns the bytes read (0 at the end).
    #[allow(unsafe_code)]
    pub fn read_at(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        max: usize,
    ) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        let max = self.read_cap(self.remaining().map_or(max, |r| r.min(max)));
        let offset = libc::off_t::try_from(offset).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "file offset out of range")
        })?;
        let spare = self.spare(max, COUNT_SCRATCH);
        let max = spare.len();
        // SAFETY: `spare` is `max` bytes of an allocation this segment owns, exclusively
        // borrowed; pread writes at most `max` bytes there and nowhere else.
        let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), max, offset) };
        let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
        // SAFETY: pread initialised the first `n` (<= `max`) bytes of `spare`.
        unsafe { self.advance(n) };
        Ok(n)
    }

    /// Appends what one read of `reader` brings, at most `max` bytes, straight into the
    /// segment's memory (a counting segment reads into its scratch): the socket's bytes land
    /// where they belong with the kernel's one copy, no intermediate buffer and no
    /// zero-filling first. A fixed segment never takes more than it has room for; a growable
    /// one fills the room it has, else grows by at most `GROW_STEP` (a declared length is
    /// only a claim). `Ready(Ok(0))`: the reader is at its end (or `max` is 0).
    #[allow(unsafe_code)]
    pub fn poll_read_from<R: tokio::io::AsyncRead + ?Sized>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        reader: std::pin::Pin<&mut R>,
        max: usize,
    ) -> std::task::Poll<std::io::Result<usize>> {
        let max = self.read_cap(self.remaining().map_or(max, |r| r.min(max)));
        if max == 0 {
            return std::task::Poll::Ready(Ok(0));
        }
        // A growable segment fills the room it has before it grows, and grows by a step.
        let want = match (&self.data, self.expected) {
            (Data::Kept(buf), None) => match buf.capacity() - buf.len() {
                room if room >= max => max,
                0 => max.min(GROW_STEP),
                room => room,
            },
            _ => max,
        };
        let spare = self.spare(want, COUNT_SOCKET_READ);
        let (at, room) = (spare.as_ptr(), spare.len());
        let mut rb = tokio::io::ReadBuf::uninit(spare);
        std::task::ready!(reader.poll_read(cx, &mut rb))?;
        // A reader may swap in a `ReadBuf` of its own (safe code can): then its bytes are
        // not in this memory, and counting them here would expose uninitialised bytes.
        if rb.filled().as_ptr() != at.cast() || rb.filled().len() > room {
            return std::task::Poll::Ready(Err(std::io::Error::other(
                "the reader filled a buffer other than the one it was given",
            )));
        }
        let n = rb.filled().len();
        // SAFETY: `ReadBuf` guarantees its first `n` bytes were initialised by the read, and
        // they are the first `n` bytes of `spare` (checked above).
        unsafe { self.advance(n) };
        std::task::Poll::Ready(Ok(n))
    }

    /// Room for the next read of `want` bytes, past what is written: in the buffer (reserved
    /// if it lacks it; a fixed segment's already holds its whole length), or for a counting
    /// segment in its scratch, at most `count_cap` bytes of it.
    fn spare(&mut self, want: usize, count_cap: usize) -> &mut [std::mem::MaybeUninit<u8>] {
        match &mut self.data {
            Data::Kept(buf) => {
                buf.reserve(want);
                &mut buf.spare_capacity_mut()[..want]
            }
            Data::Counted { scratch, .. } => {
                let want = want.min(count_cap);
                scratch.reserve(want);
                &mut scratch.spare_capacity_mut()[..want]
            }
        }
    }

    /// Counts `n` bytes a read put at the start of `spare`'s room.
    ///
    /// # Safety
    /// The first `n` bytes of the slice the last `spare` returned must be initialised.
    #[allow(unsafe_code)]
    unsafe fn advance(&mut self, n: usize) {
        self.mark_first_byte(n);
        match &mut self.data {
            Data::Kept(buf) => {
                // SAFETY: the caller's promise: those bytes lie past the length, within the
                // capacity `spare` reserved, and are initialised.
                unsafe { buf.set_len(buf.len() + n) };
                if let Some(tally) = &mut self.tally {
                    tally.update(&buf[buf.len() - n..]);
                }
            }
            // The scratch's bytes are never read: counted, they have served.
            Data::Counted { written, .. } => *written += n,
        }
    }

    /// Drops everything written after the first `len` bytes (to read them again).
    pub fn truncate(&mut self, len: usize) {
        match &mut self.data {
            Data::Kept(buf) => {
                buf.truncate(len);
                // Rare (a read resumed mid-body): the CRC of what stays is taken again.
                if let Some(tally) = &mut self.tally
                    && tally.len() != buf.len() as u64
                {
                    tally.clear();
                    tally.update(buf);
                }
            }
            Data::Counted { written, .. } => *written = (*written).min(len),
        }
    }

    /// The bytes written so far; `None` from a counting segment, which keeps none.
    pub fn as_slice(&self) -> Option<&[u8]> {
        match &self.data {
            Data::Kept(buf) => Some(buf),
            Data::Counted { .. } => None,
        }
    }

    /// The filled bytes, without a copy. Errors if a fixed segment is not full, or if it
    /// only counted them.
    pub fn freeze(self) -> Result<Bytes, SegmentError> {
        self.check_complete(0)?;
        Ok(self.into_kept()?.freeze())
    }

    /// As `freeze`, with the CRC pieces of a `tallied` segment (`None` when it was not).
    pub fn freeze_with_pieces(mut self) -> Result<(Bytes, Option<Pieces>), SegmentError> {
        let pieces = self.tally.take().map(Tally::finish);
        Ok((self.freeze()?, pieces))
    }

    fn into_kept(self) -> Result<BytesMut, SegmentError> {
        match self.data {
            Data::Kept(buf) => Ok(buf),
            Data::Counted { .. } => Err(SegmentError::NotKept),
        }
    }

    fn check_complete(&self, index: usize) -> Result<(), SegmentError> {
        match self.expected {
            Some(expected) if expected != self.written() => Err(SegmentError::Incomplete {
                index,
                expected,
                got: self.written(),
            }),
            _ => Ok(()),
        }
    }
}

/// Builds the segments of one object and joins them back.
#[derive(Debug)]
pub struct SegmentedBuffer;

impl SegmentedBuffer {
    /// Splits one allocation of `sum(lens)` bytes into adjacent segments of the given lengths.
    pub fn split(lens: impl IntoIterator<Item = usize>) -> Vec<Segment> {
        let lens: Vec<usize> = lens.into_iter().collect();
        Self::split_buffer(BytesMut::with_capacity(lens.iter().sum()), &lens)
    }

    /// As `split`, for lengths that come from outside (ranges a caller asked for): memory
    /// the machine cannot give is an error, not an abort.
    pub fn try_split(lens: &[usize]) -> Result<Vec<Segment>, SegmentError> {
        let total = lens.iter().try_fold(0usize, |a, &l| a.checked_add(l));
        let fail = || SegmentError::Allocation {
            len: lens.iter().map(|&l| l as u64).fold(0, u64::saturating_add),
        };
        let total = total.ok_or_else(fail)?;
        // As `Segment::try_exact`: BytesMut aborts on a failed allocation, a Vec reports it.
        Vec::<u8>::new()
            .try_reserve_exact(total)
            .map_err(|_| fail())?;
        Ok(Self::split_buffer(BytesMut::with_capacity(total), lens))
    }

    /// As `split`, over caller-provided memory (e.g. from a buffer pool).
    pub fn split_buffer(mut buf: BytesMut, lens: &[usize]) -> Vec<Segment> {
        buf.clear();
        let total: usize = lens.iter().sum();
        if buf.capacity() < total {
            buf.reserve(total);
        }
        let mut out = Vec::with_capacity(lens.len());
        for (i, &len) in lens.iter().enumerate() {
            // split_off at the capacity boundary leaves `buf` owning exactly `len` bytes of
            // capacity and hands the rest on; no bytes are touched.
            let rest = if i + 1 == lens.len() {
                BytesMut::new()
            } else {
                buf.split_off(len)
            };
            out.push(Segment::kept(buf, Some(len)));
            buf = rest;
        }
        out
    }

    /// Rejoins segments, in order, into one `Bytes`. O(1) per segment when they came from one
    /// `split` (adjacent memory); each must be exactly full.
    pub fn join(segments: Vec<Segment>) -> Result<Bytes, SegmentError> {
        let mut iter = segments.into_iter().enumerate();
        let Some((_, first)) = iter.next() else {
            return Ok(Bytes::new());
        };
        first.check_complete(0)?;
        let mut acc = first.into_kept()?;
        for (i, seg) in iter {
            seg.check_complete(i)?;
            acc.unsplit(seg.into_kept()?);
        }
        Ok(acc.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Segment {
        fn buf(&self) -> &BytesMut {
            match &self.data {
                Data::Kept(buf) => buf,
                Data::Counted { .. } => panic!("a counting segment has no buffer"),
            }
        }
    }

    #[test]
    fn a_counting_segment_checks_the_length_and_keeps_nothing() {
        let mut s = Segment::counting(6);
        assert!(
            s.expect_more(7).is_err(),
            "a declared length that does not fit"
        );
        s.expect_more(6).unwrap();
        s.write(b"abcd").unwrap();
        assert_eq!((s.written(), s.remaining()), (4, Some(2)));
        assert_eq!(
            s.write(b"efg"),
            Err(SegmentError::Overflow {
                expected: 6,
                got: 7
            }),
            "never past its end"
        );
        s.truncate(1); // a resumed body re-reads from byte 1
        s.write(b"bcdef").unwrap();
        assert!(s.is_complete());
        assert_eq!(s.as_slice(), None);
        assert_eq!(s.freeze(), Err(SegmentError::NotKept));

        let path = std::env::temp_dir().join(format!("sluice-counting-{}", std::process::id()));
        std::fs::write(&path, vec![1u8; COUNT_SCRATCH + 10]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mut c = Segment::counting(COUNT_SCRATCH + 5);
        assert_eq!(c.read_at(&file, 0, usize::MAX).unwrap(), COUNT_SCRATCH);
        assert_eq!(c.read_at(&file, 0, usize::MAX).unwrap(), 5, "the room left");
        assert!(c.is_complete());
        assert_eq!(c.into_buffer().capacity(), 0, "no memory to give back");
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn read_at_reads_in_place_and_never_past_a_fixed_end() {
        let path = std::env::temp_dir().join(format!("sluice-segment-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mut s = Segment::exact(5);
        assert_eq!(
            s.read_at(&file, 2, 100).unwrap(),
            5,
            "offered only the room left"
        );
        assert_eq!(s.as_slice(), Some(&b"23456"[..]));
        assert_eq!(s.read_at(&file, 0, 100).unwrap(), 0, "full");
        let mut g = Segment::growable();
        assert_eq!(g.read_at(&file, 7, 100).unwrap(), 3);
        assert_eq!(g.read_at(&file, 10, 100).unwrap(), 0, "end of file");
        assert_eq!(g.freeze().unwrap(), &b"789"[..]);
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }

    /// One `poll_read_from` on `reader`, which is always ready (a byte slice).
    fn read_once(seg: &mut Segment, reader: &mut &[u8], max: usize) -> usize {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match seg.poll_read_from(&mut cx, std::pin::Pin::new(reader), max) {
            std::task::Poll::Ready(n) => n.unwrap(),
            std::task::Poll::Pending => unreachable!("a slice is always ready"),
        }
    }

    #[test]
    fn socket_reads_land_in_place_and_never_past_a_fixed_end() {
        let mut src: &[u8] = b"0123456789";
        let mut fixed = Segment::exact(4);
        assert_eq!(
            read_once(&mut fixed, &mut src, 100),
            4,
            "only the room left"
        );
        assert_eq!(read_once(&mut fixed, &mut src, 100), 0, "full");
        assert_eq!(fixed.freeze().unwrap(), &b"0123"[..]);
        // A growable segment with no room grows by a bounded step, whatever `max` says.
        let mut grow = Segment::growable();
        assert_eq!(read_once(&mut grow, &mut src, usize::MAX), 6);
        assert_eq!(
            read_once(&mut grow, &mut src, usize::MAX),
            0,
            "the reader's end"
        );
        assert_eq!(grow.freeze().unwrap(), &b"456789"[..]);
        let mut counted = Segment::counting(3);
        let mut src: &[u8] = b"abcdef";
        assert_eq!(read_once(&mut counted, &mut src, 2), 2);
        assert_eq!(read_once(&mut counted, &mut src, 100), 1);
        assert!(counted.is_complete() && counted.as_slice().is_none());
    }

    #[test]
    fn a_tallied_segment_has_the_crc_of_what_it_kept_however_it_landed() {
        use crate::checksum::Crc;
        const PIECE: usize = 3 * HOT / 2;
        let data: Vec<u8> = (0..(2 * PIECE + 777) as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let mut seg = Segment::exact(data.len()).tallied(PIECE as u64);
        // A socket read is cut to what stays hot, whatever it is offered.
        let mut src: &[u8] = &data;
        assert_eq!(read_once(&mut seg, &mut src, usize::MAX), HOT);
        let mut src: &[u8] = &data[HOT..PIECE];
        while read_once(&mut seg, &mut src, usize::MAX) > 0 {}
        // A write of more than a piece, then a read resumed after dropping some bytes.
        seg.write(&data[PIECE..PIECE + PIECE / 2 + 3]).unwrap();
        seg.truncate(PIECE + 10);
        let mut src: &[u8] = &data[PIECE + 10..];
        while read_once(&mut seg, &mut src, usize::MAX) > 0 {}
        let (bytes, pieces) = seg.freeze_with_pieces().unwrap();
        assert_eq!(bytes, data);
        let pieces = pieces.expect("tallied");
        assert_eq!(pieces.len(), data.len() as u64);
        for range in [0..data.len(), 3..PIECE + 5, PIECE..2 * PIECE] {
            assert_eq!(pieces.crc_of(&bytes, range.clone()), Crc::of(&data[range]));
        }
        // Untallied: no pieces, and reads not cut.
        let mut plain = Segment::exact(data.len());
        let mut src: &[u8] = &data;
        assert_eq!(read_once(&mut plain, &mut src, usize::MAX), data.len());
        assert_eq!(plain.freeze_with_pieces().unwrap().1, None);
    }

    #[test]
    fn fixed_segments_refuse_overflow_and_mismatch() {
        let mut s = Segment::exact(4);
        assert_eq!(
            s.expect_more(5),
            Err(SegmentError::LengthMismatch {
                declared: 5,
                remaining: 4
            })
        );
        s.expect_more(4).unwrap();
        s.write(b"abc").unwrap();
        assert_eq!(
            s.write(b"de"),
            Err(SegmentError::Overflow {
                expected: 4,
                got: 5
            })
        );
        assert!(matches!(
            Segment::exact(2).freeze(),
            Err(SegmentError::Incomplete { .. })
        ));
    }

    #[test]
    fn growable_reserves_once() {
        let mut s = Segment::growable();
        s.expect_more(1000).unwrap();
        let cap = s.buf().capacity();
        s.write(&[7; 1000]).unwrap();
        assert_eq!(s.buf().capacity(), cap, "no reallocation after reserving");
        assert_eq!(s.freeze().unwrap().len(), 1000);
    }

    #[test]
    fn join_is_zero_copy() {
        let mut segs = SegmentedBuffer::split([3, 5, 2]);
        let base = segs[0].buf().as_ptr() as usize;
        for (i, s) in segs.iter_mut().enumerate() {
            let n = s.expected_len().unwrap();
            s.write(&vec![i as u8; n]).unwrap();
        }
        let out = SegmentedBuffer::join(segs).unwrap();
        assert_eq!(out.as_ptr() as usize, base, "joined in place");
        assert_eq!(&out[..], &[0, 0, 0, 1, 1, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn join_rejects_short_fill_naming_the_segment() {
        let mut segs = SegmentedBuffer::split([2, 2]);
        segs[0].write(b"ab").unwrap();
        segs[1].write(b"c").unwrap();
        assert_eq!(
            SegmentedBuffer::join(segs),
            Err(SegmentError::Incomplete {
                index: 1,
                expected: 2,
                got: 1
            })
        );
    }

    proptest! {
        #[test]
        fn any_split_and_fill_order_reassembles(lens in proptest::collection::vec(0usize..300, 0..12), order_seed in any::<u64>()) {
            let mut segs = SegmentedBuffer::split(lens.iter().copied());
            let total: usize = lens.iter().sum();
            let expected: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            // Fill in a shuffled order, in uneven pieces, as concurrent tasks would.
            let mut idx: Vec<usize> = (0..segs.len()).collect();
            fastrand::Rng::with_seed(order_seed).shuffle(&mut idx);
            let offsets: Vec<usize> = lens.iter().scan(0, |acc, l| { let o = *acc; *acc += l; Some(o) }).collect();
            for i in idx {
                let data = &expected[offsets[i]..offsets[i] + lens[i]];
                for piece in data.chunks(7) {
                    segs[i].write(piece).unwrap();
                }
            }
            let out = SegmentedBuffer::join(segs).unwrap();
            prop_assert_eq!(&out[..], &expected[..]);
        }
    }
}
