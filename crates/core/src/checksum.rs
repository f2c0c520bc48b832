//! Upload checksums: what makes a store refuse bytes that changed on the way (a flipped bit
//! on a link or in a NIC, a proxy that rewrote a body) instead of storing them. Plain http
//! has no integrity of its own and sluice signs `UNSIGNED-PAYLOAD` (hashing every body with
//! SHA-256 would cost more than sending it), so without a checksum nothing checks the bytes.
//!
//! The checksum is CRC64NVME, S3's default and its only full-object CRC for multipart
//! uploads: each PUT and each part carries the CRC of its bytes
//! (`x-amz-checksum-crc64nvme`), and CompleteMultipartUpload carries the whole object's,
//! combined from the parts' (a CRC of concatenated bytes follows from the CRCs of the pieces
//! and their lengths), which the store checks against what it assembled. The CRC is
//! computed by `crc-fast` with carry-less multiplication (PCLMULQDQ / VPCLMULQDQ / PMULL),
//! at several times the rate a core sends bytes at: next to that cost, it is a few per cent.

use base64::Engine as _;
use crc_fast::CrcAlgorithm::Crc64Nvme;
use std::ops::Range;

/// The `x-amz-checksum-algorithm` / `x-amz-sdk-checksum-algorithm` value.
pub const ALGORITHM: &str = "CRC64NVME";
/// The header that carries the value.
pub const HEADER: &str = "x-amz-checksum-crc64nvme";

/// The CRC64NVME of some bytes, and how many there were (what combining needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc {
    /// The CRC value.
    pub crc: u64,
    /// Bytes it covers.
    pub len: u64,
}

impl Crc {
    /// The CRC of `data`.
    pub fn of(data: &[u8]) -> Self {
        Self {
            crc: crc_fast::checksum(Crc64Nvme, data),
            len: data.len() as u64,
        }
    }

    /// The CRC of this one's bytes followed by `next`'s.
    pub fn then(self, next: Crc) -> Self {
        // Combining costs tens of µs: not spent on an empty side.
        if next.len == 0 {
            return self;
        }
        if self.len == 0 {
            return next;
        }
        Self {
            crc: crc_fast::checksum_combine(Crc64Nvme, self.crc, next.crc, next.len),
            len: self.len + next.len,
        }
    }

    /// The CRC of parts in order: the whole object's.
    pub fn of_parts(parts: impl IntoIterator<Item = Crc>) -> Self {
        parts.into_iter().fold(Self::of(&[]), Self::then)
    }

    /// As S3 writes it: the base64 of the value's eight big-endian bytes.
    pub fn to_base64(self) -> String {
        Self::encode(self.crc)
    }

    /// A CRC value as S3 writes it (`parse_base64`'s inverse).
    pub fn encode(crc: u64) -> String {
        base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes())
    }

    /// A value as S3 writes it; `None` when it is not eight bytes of base64.
    pub fn parse_base64(value: &str) -> Option<u64> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .ok()?;
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }
}

/// The most bytes summed at once while they are hot. Reads into a tallied
/// [`Segment`](crate::Segment) land at most this much at a time, and a writer copies and sums
/// in steps of it. The kernel's copy of a larger read leaves fewer of its bytes in cache, so
/// the smaller the step the cheaper the sum, down to about this size (docs/benchmarks.md, "Why the defaults").
pub(crate) const HOT: usize = 128 << 10;

/// CRCs of consecutive pieces of some bytes, taken while the bytes were still in cache (as
/// they were read from a file or a socket, see `Tally`). A writer that cuts the bytes into
/// parts uses a piece that is exactly a part as the part's CRC instead of reading the part
/// again: a CRC pass over bytes already evicted from cache cost 7% of `sluice cp`'s CPU
/// samples, the same CRC taken as the bytes landed 3% (see `HOT`). Pieces are best cut
/// where the parts will be: combining CRCs (`crc-fast`'s `checksum_combine`, GF(2) matrix
/// squaring) costs tens of µs each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces(Vec<Crc>);

impl Pieces {
    /// How many bytes the pieces cover.
    pub fn len(&self) -> u64 {
        self.0.iter().map(|p| p.len).sum()
    }

    /// Whether they cover no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CRC of all the bytes (no combining for one piece).
    pub fn whole(&self) -> Crc {
        Crc::of_parts(self.0.iter().copied())
    }

    /// The CRC of `bytes[range]`, where `bytes` are the bytes these pieces were taken of:
    /// pieces wholly inside the range are used as they are (combined when there are
    /// several), and only the ends of pieces the range cuts are read from `bytes`. Pieces
    /// that do not cover `bytes` (a caller's mistake) give the CRC read from the bytes,
    /// never a wrong one.
    pub fn crc_of(&self, bytes: &[u8], range: Range<usize>) -> Crc {
        if self.len() != bytes.len() as u64 {
            return Crc::of(&bytes[range]);
        }
        let mut crc = Crc::of(&[]);
        let mut at = 0usize;
        for piece in &self.0 {
            let end = at + piece.len as usize;
            let (from, to) = (at.max(range.start), end.min(range.end));
            if from < to {
                crc = crc.then(if (from, to) == (at, end) {
                    *piece
                } else {
                    Crc::of(&bytes[from..to])
                });
            }
            if end >= range.end {
                break;
            }
            at = end;
        }
        crc
    }
}

/// Takes the CRC of bytes as they land, one running digest per piece of `piece` bytes (see
/// [`Pieces`]). The caller feeds each run of bytes right after writing it, while it is hot.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    piece: u64,
    done: Vec<Crc>,
    open: Option<(crc_fast::Digest, u64)>,
}

impl Tally {
    /// A tally that closes a piece every `piece` bytes (at least one).
    pub(crate) fn new(piece: u64) -> Self {
        Self {
            piece: piece.max(1),
            done: Vec::new(),
            open: None,
        }
    }

    /// Adds the next `bytes`.
    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (digest, len) = self
                .open
                .get_or_insert_with(|| (crc_fast::Digest::new(Crc64Nvme), 0));
            let room = usize::try_from(self.piece - *len).unwrap_or(usize::MAX);
            let take = room.min(bytes.len());
            digest.update(&bytes[..take]);
            *len += take as u64;
            bytes = &bytes[take..];
            if *len == self.piece {
                self.close();
            }
        }
    }

    fn close(&mut self) {
        if let Some((digest, len)) = self.open.take() {
            self.done.push(Crc {
                crc: digest.finalize(),
                len,
            });
        }
    }

    /// How many bytes it has taken.
    pub(crate) fn len(&self) -> u64 {
        self.done.iter().map(|p| p.len).sum::<u64>() + self.open.as_ref().map_or(0, |o| o.1)
    }

    /// Forgets everything taken (the piece length stays).
    pub(crate) fn clear(&mut self) {
        self.done.clear();
        self.open = None;
    }

    /// The pieces of everything taken.
    pub(crate) fn finish(mut self) -> Pieces {
        self.close();
        Pieces(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_combine_to_the_whole_and_encode_as_s3_does() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = Crc::of(&data);
        let parts = data.chunks(30_000).map(Crc::of);
        assert_eq!(Crc::of_parts(parts), whole);
        assert_eq!(Crc::of_parts([]), Crc::of(&[]));
        // The check value of the CRC-64/NVME catalogue entry, as S3 would print it.
        assert_eq!(Crc::of(b"123456789").crc, 0xae8b_1486_0a79_9888);
        let b64 = Crc::of(b"123456789").to_base64();
        assert_eq!(Crc::parse_base64(&b64), Some(0xae8b_1486_0a79_9888));
        assert_eq!(Crc::parse_base64("not base64"), None);
    }

    #[test]
    fn pieces_give_the_crc_of_any_range() {
        const PIECE: usize = 1 << 20;
        let data: Vec<u8> = (0..(3 * PIECE + 12_345) as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut tally = Tally::new(PIECE as u64);
        // Fed in uneven runs, as reads land.
        for run in data.chunks(70_001) {
            tally.update(run);
        }
        assert_eq!(tally.len(), data.len() as u64);
        let pieces = tally.finish();
        assert_eq!(pieces.0.len(), 4);
        assert_eq!(pieces.len(), data.len() as u64);
        let n = data.len();
        for range in [
            0..n,
            0..PIECE,
            PIECE..2 * PIECE,
            5..n - 7,
            PIECE - 1..PIECE + 1,
            2 * PIECE + 3..2 * PIECE + 3,
            3 * PIECE..n,
        ] {
            assert_eq!(
                pieces.crc_of(&data, range.clone()),
                Crc::of(&data[range.clone()]),
                "{range:?}"
            );
        }
        // Pieces of other bytes than those given: read from the bytes, not trusted.
        assert_eq!(pieces.crc_of(&data[..10], 0..10), Crc::of(&data[..10]));
        assert!(Tally::new(PIECE as u64).finish().is_empty());
    }
}
