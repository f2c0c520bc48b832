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
//! tens of GB/s per core: next to the cost of sending the bytes, it is a few per cent.

use base64::Engine as _;
use crc_fast::CrcAlgorithm::Crc64Nvme;

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
}
