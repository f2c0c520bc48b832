//! Upload bodies that carry their CRC64NVME in a trailer: `Content-Encoding: aws-chunked`
//! with `x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER`, as the AWS SDKs send
//! checksummed uploads.
//!
//! Why a trailer rather than the `x-amz-checksum-crc64nvme` header: a header must be known
//! before the body is sent, so the CRC took a pass over the whole part first, reading it
//! from memory once more than the send did (parts are MiBs, far beyond the cache): 11% of
//! `sluice cp`'s CPU over http. Here each chunk is checksummed as hyper asks for it, and
//! hyper's write buffer (`READ_BUF_MAX`, a few chunks) goes to the socket before the chunks
//! leave the cache, so the kernel's copy reads them from there.
//!
//! The framing, for each chunk: its length in hex, CRLF, the bytes, CRLF; then a chunk of
//! length 0, the trailer line and an empty line. Every length is known up front, so the
//! request has a `Content-Length` (S3 refuses `Transfer-Encoding: chunked` for PUTs).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use sluice_core::checksum::{self, Crc, Running};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

/// Bytes per chunk, as the AWS SDKs send: hyper queues chunks up to its buffer size
/// (`READ_BUF_MAX`, 256 KiB) before a write, which then still finds them in L2.
pub const CHUNK: usize = 64 << 10;

/// The `x-amz-content-sha256` value (and what the request is signed with).
pub const STREAMING_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

/// A body framed as aws-chunked, checksummed chunk by chunk as it is sent.
#[derive(Debug)]
pub struct ChunkedBody {
    data: Bytes,
    /// Bytes of `data` already framed.
    at: usize,
    /// The next frame is a chunk's data (its header was the last frame).
    data_next: bool,
    crc: Running,
    /// Where the CRC goes once the trailer is sent; `None` after.
    sent: Option<Arc<OnceLock<Crc>>>,
}

impl ChunkedBody {
    /// `data`, to be framed; `sent` receives its CRC when the trailer goes out.
    pub fn new(data: Bytes, sent: Arc<OnceLock<Crc>>) -> Self {
        Self {
            data,
            at: 0,
            data_next: false,
            crc: Running::default(),
            sent: Some(sent),
        }
    }

    /// The headers such a body needs beside the signature (which signs
    /// `STREAMING_TRAILER`): what it is framed as, the length of what it frames, and the
    /// trailer it ends with.
    pub fn headers(decoded_len: usize, headers: &mut HeaderMap) {
        // First in the list, as the SDKs put it: S3 drops it and keeps the object's own.
        let encoding = match headers.get(http::header::CONTENT_ENCODING) {
            Some(own) => HeaderValue::from_bytes(&[b"aws-chunked,", own.as_bytes()].concat())
                .expect("a header value with a token before it is one"),
            None => HeaderValue::from_static("aws-chunked"),
        };
        headers.insert(http::header::CONTENT_ENCODING, encoding);
        headers.insert("x-amz-decoded-content-length", decoded_len.into());
        headers.insert("x-amz-trailer", HeaderValue::from_static(checksum::HEADER));
        headers.insert(
            "x-amz-sdk-checksum-algorithm",
            HeaderValue::from_static(checksum::ALGORITHM),
        );
    }

    /// The length on the wire of `len` bytes framed: what `Content-Length` says.
    pub fn encoded_len(len: usize) -> u64 {
        let full = len / CHUNK;
        let last = len % CHUNK;
        let framed = |n: usize| (hex_len(n) + 2 + n + 2) as u64;
        full as u64 * framed(CHUNK) + if last > 0 { framed(last) } else { 0 } + end_len() as u64
    }

    /// The framing before the next chunk: the previous chunk's CRLF, then this one's size.
    fn chunk_header(&self, len: usize) -> Bytes {
        let sep = if self.at > 0 { "\r\n" } else { "" };
        Bytes::from(format!("{sep}{len:x}\r\n"))
    }

    /// The end: the last chunk's CRLF, the chunk of length 0, the trailer, an empty line.
    fn end(&self, crc: Crc) -> Bytes {
        let sep = if self.at > 0 { "\r\n" } else { "" };
        Bytes::from(format!(
            "{sep}0\r\n{}:{}\r\n\r\n",
            checksum::HEADER,
            crc.to_base64()
        ))
    }
}

fn hex_len(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()).div_ceil(4).max(1) as usize
}

/// `0\r\n`, the trailer line (a CRC64 is 12 characters of base64) and `\r\n`.
fn end_len() -> usize {
    3 + checksum::HEADER.len() + 1 + 12 + 2 + 2
}

impl Body for ChunkedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.data_next {
            let len = CHUNK.min(this.data.len() - this.at);
            let chunk = this.data.slice(this.at..this.at + len);
            this.crc.update(&chunk);
            this.at += len;
            this.data_next = false;
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if this.at < this.data.len() {
            let len = CHUNK.min(this.data.len() - this.at);
            this.data_next = true;
            return Poll::Ready(Some(Ok(Frame::data(this.chunk_header(len)))));
        }
        let Some(sent) = this.sent.take() else {
            return Poll::Ready(None);
        };
        let crc = this.crc.crc();
        let _ = sent.set(crc);
        Poll::Ready(Some(Ok(Frame::data(this.end(crc)))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // Exact only before the first frame: what hyper reads for `Content-Length`.
        if self.at == 0 && !self.data_next && self.sent.is_some() {
            SizeHint::with_exact(Self::encoded_len(self.data.len()))
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn framed(data: &[u8]) -> (Vec<u8>, Crc) {
        let sent = Arc::new(OnceLock::new());
        let body = ChunkedBody::new(Bytes::copy_from_slice(data), sent.clone());
        assert_eq!(
            body.size_hint().exact(),
            Some(ChunkedBody::encoded_len(data.len()))
        );
        let out = body.collect().await.unwrap().to_bytes().to_vec();
        (
            out,
            *sent.get().expect("the CRC is set once the trailer is sent"),
        )
    }

    /// The framing parsed back the way a store reads it.
    fn unframe(mut wire: &[u8]) -> (Vec<u8>, String) {
        let mut data = Vec::new();
        loop {
            let eol = wire.windows(2).position(|w| w == b"\r\n").unwrap();
            let len =
                usize::from_str_radix(std::str::from_utf8(&wire[..eol]).unwrap(), 16).unwrap();
            wire = &wire[eol + 2..];
            if len == 0 {
                break;
            }
            data.extend_from_slice(&wire[..len]);
            assert_eq!(&wire[len..len + 2], b"\r\n");
            wire = &wire[len + 2..];
        }
        assert!(
            wire.ends_with(b"\r\n\r\n"),
            "ends with the trailer and an empty line"
        );
        let trailer = std::str::from_utf8(&wire[..wire.len() - 4])
            .unwrap()
            .to_owned();
        (data, trailer)
    }

    #[tokio::test]
    async fn frames_any_length_with_its_crc_in_the_trailer() {
        for len in [0, 1, 15, 16, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 4097] {
            let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
            let (wire, crc) = framed(&data).await;
            assert_eq!(
                wire.len() as u64,
                ChunkedBody::encoded_len(len),
                "length {len}"
            );
            let (got, trailer) = unframe(&wire);
            assert_eq!(got, data, "length {len}");
            assert_eq!(crc, Crc::of(&data), "length {len}");
            assert_eq!(
                trailer,
                format!("{}:{}", checksum::HEADER, Crc::of(&data).to_base64())
            );
        }
    }
}
