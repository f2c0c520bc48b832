//! What a backend's GET attempt is given and writes into: the request, the checked head of
//! the answer, and the sink its body goes to (a [`Segment`]'s memory).

use crate::error::{Error, Result, TimeoutPhase};
use crate::object::MAX_OBJECT_SIZE;
use crate::range::ByteRange;
use crate::segment::Segment;
use crate::uri::ObjectUri;
use futures::{Stream, StreamExt};
use std::time::Duration;

/// One HTTP GET to make.
#[derive(Debug, Clone)]
pub struct GetRequest<'a> {
    /// The object to read.
    pub uri: &'a ObjectUri,
    /// The bytes to ask for (the `Range` header, `ByteRange::to_header`); `None`: the whole
    /// object. On resumption, what is still missing of the range first asked.
    pub range: Option<ByteRange>,
    /// Set on resumption: the object must still be the one whose first bytes we hold.
    pub if_match: Option<&'a str>,
}

/// What a response head says about the body that follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// Content-Length of this response.
    pub content_length: u64,
    /// The whole object's size: from Content-Range on a 206, Content-Length on a 200.
    pub object_size: Option<u64>,
    /// The version served (the ETag header, as sent); pins every later request for the
    /// same read.
    pub etag: Option<String>,
    /// The whole object's CRC64NVME, when the store sent one (`x-amz-checksum-crc64nvme`,
    /// answering `x-amz-checksum-mode: ENABLED` on a whole-object GET): checked against the
    /// bytes read by `get_with_resume`.
    pub checksum: Option<u64>,
}

impl ResponseHead {
    /// A 2xx answer to a GET other than 200 and 206 is refused at once: a 204 or 205 never
    /// carries a body, whatever its Content-Length says (RFC 9112 §6.3), so waiting for one
    /// would only end at the stall timeout, and taking it as empty would lose the object.
    pub fn check_status(uri: &ObjectUri, status: u16) -> Result<()> {
        if matches!(status, 200 | 206) {
            return Ok(());
        }
        Err(Error::from_service(
            uri.to_string(),
            status,
            "UnexpectedStatus",
            "a GET is answered with 200 or 206 and the object's bytes",
            None,
        ))
    }

    /// The head of a GET response to `range`, from its Content-Length and Content-Range
    /// (sent with a 206, absent from a 200), checked against what was asked: a reply that
    /// does not answer exactly the range asked for (a different start, more or fewer bytes,
    /// an end past the object's size, a part of the object for a whole-object request, a
    /// length beyond any S3 object) is an `Integrity` error, since writing it at the
    /// requested offset would corrupt data. A 200 without Content-Range is the whole object
    /// and answers a range from 0 that covers it (servers may ignore Range, RFC 9110 §14.2).
    pub fn from_headers(
        uri: &ObjectUri,
        range: Option<ByteRange>,
        content_length: u64,
        content_range: Option<&str>,
        etag: Option<String>,
    ) -> Result<Self> {
        let asked = range.map_or_else(|| "the whole object".to_owned(), |r| format!("bytes {r}"));
        let bad =
            |why: String| Error::integrity(uri.to_string(), format!("{why} (asked for {asked})"));
        if content_length > MAX_OBJECT_SIZE {
            return Err(bad(format!(
                "Content-Length {content_length} is larger than any S3 object"
            )));
        }
        let start = range.map_or(0, |r| r.start());
        let wanted = range.and_then(|r| r.len());
        let object_size = match content_range {
            None => {
                if start != 0 {
                    return Err(bad(
                        "a reply without Content-Range to a range that does not start at 0".into(),
                    ));
                }
                if let Some(len) = wanted.filter(|len| content_length > *len) {
                    return Err(bad(format!(
                        "the whole object ({content_length} bytes) instead of the {len} bytes asked"
                    )));
                }
                Some(content_length)
            }
            Some(v) => {
                let (s, e, total) = parse_content_range(v)
                    .ok_or_else(|| bad(format!("unreadable Content-Range {v:?}")))?;
                let span = (e - s).saturating_add(1);
                if s != start {
                    return Err(bad(format!("Content-Range {v:?} starts at {s}")));
                }
                if span != content_length {
                    return Err(bad(format!(
                        "Content-Range {v:?} is {span} bytes but Content-Length is {content_length}"
                    )));
                }
                if total.is_some_and(|t| e >= t || t > MAX_OBJECT_SIZE) {
                    return Err(bad(format!(
                        "Content-Range {v:?} runs past the object's size"
                    )));
                }
                // Exactly what was asked, or less where the object ends first.
                let ends_object = total.is_some_and(|t| e.checked_add(1) == Some(t));
                match wanted {
                    Some(len) if span > len => {
                        return Err(bad(format!(
                            "Content-Range {v:?} is more than the {len} bytes asked"
                        )));
                    }
                    Some(len) if span < len && !ends_object => {
                        return Err(bad(format!(
                            "Content-Range {v:?} is less than the {len} bytes asked"
                        )));
                    }
                    None if !ends_object => {
                        return Err(bad(format!(
                            "Content-Range {v:?} stops before the end of the object"
                        )));
                    }
                    _ => {}
                }
                total
            }
        };
        Ok(ResponseHead {
            content_length,
            object_size,
            etag,
            checksum: None,
        })
    }

    /// With the store's full-object checksum header value, if it sent one. A value that is
    /// not a CRC64NVME (a composite checksum of parts, `…-N`) checks nothing and is ignored.
    pub fn with_checksum(mut self, value: Option<&str>) -> Self {
        self.checksum = value.and_then(crate::checksum::Crc::parse_base64);
        self
    }
}

/// `bytes 100-199/1000` → (100, 199, Some(1000)); a total of `*` → None. `None` for anything
/// else, including an end before the start.
pub fn parse_content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (start, end) = span.split_once('-')?;
    let (start, end): (u64, u64) = (start.parse().ok()?, end.parse().ok()?);
    let total = match total {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    (end >= start).then_some((start, end, total))
}

/// Where a backend writes one response: it reports the head, then each body frame.
#[derive(Debug)]
pub struct BodySink<'a> {
    uri: &'a ObjectUri,
    seg: &'a mut Segment,
    head: Option<ResponseHead>,
    /// When `begin` was called: the op-log's time to first byte.
    began: Option<std::time::Instant>,
}

impl<'a> BodySink<'a> {
    /// A sink writing the response to a request for `uri` into `seg`, after whatever `seg`
    /// already holds.
    pub fn new(uri: &'a ObjectUri, seg: &'a mut Segment) -> Self {
        Self {
            uri,
            seg,
            head: None,
            began: None,
        }
    }

    /// Records the response head and checks the declared length fits the segment.
    pub fn begin(&mut self, head: ResponseHead) -> Result<()> {
        self.seg
            .expect_more(head.content_length)
            .map_err(|e| Error::integrity(self.uri.to_string(), e.to_string()))?;
        self.head = Some(head);
        self.began = Some(std::time::Instant::now());
        Ok(())
    }

    /// Appends one body frame.
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.seg
            .write(data)
            .map_err(|e| Error::integrity(self.uri.to_string(), e.to_string()))
    }

    /// Appends what one read of `reader` brings (at most `max` bytes), read straight into
    /// the segment's memory (`Segment::poll_read_from`); 0 at the reader's end. For a
    /// backend that reads the body from its socket itself instead of through frames.
    pub async fn read_from<R: tokio::io::AsyncRead + Unpin + ?Sized>(
        &mut self,
        reader: &mut R,
        max: usize,
    ) -> std::io::Result<usize> {
        std::future::poll_fn(|cx| {
            self.seg
                .poll_read_from(cx, std::pin::Pin::new(&mut *reader), max)
        })
        .await
    }

    /// Bytes written into the segment so far (by this and earlier attempts).
    pub fn written(&self) -> u64 {
        self.seg.written() as u64
    }

    /// The head recorded by `begin`; `None` until a response head arrived.
    pub fn head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// When the head arrived (`begin`); `None` until then.
    pub fn began(&self) -> Option<std::time::Instant> {
        self.began
    }

    /// The head recorded by `begin`, taken for the resumption loop to judge.
    pub(crate) fn take_head(&mut self) -> Option<ResponseHead> {
        self.head.take()
    }

    /// Writes every chunk of `body` (after `begin`), waiting at most `stall` for each, and
    /// checks the body was as long as its head said: a short body is a retryable
    /// `Transport` error, so `get_with_resume` asks for the rest. `map_err` turns the
    /// stack's own body errors into ours.
    pub async fn drain<S, B, E>(
        &mut self,
        stall: Duration,
        mut body: S,
        map_err: impl Fn(E) -> Error,
    ) -> Result<()>
    where
        S: Stream<Item = std::result::Result<B, E>> + Unpin,
        B: AsRef<[u8]>,
    {
        let expected = self.head.as_ref().map_or(0, |h| h.content_length);
        let mut received = 0u64;
        loop {
            match tokio::time::timeout(stall, body.next()).await {
                Err(_) => {
                    return Err(Error::Timeout {
                        uri: self.uri.to_string(),
                        phase: TimeoutPhase::Stall,
                        after: stall,
                    });
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(map_err(e)),
                Ok(Some(Ok(chunk))) => {
                    let chunk = chunk.as_ref();
                    received += chunk.len() as u64;
                    self.write(chunk)?;
                }
            }
        }
        if received != expected {
            return Err(Error::transport(
                self.uri.to_string(),
                format!("body ended after {received} of {expected} bytes"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_head_checks_the_range_answered() {
        let uri: ObjectUri = "s3://bkt/k".parse().unwrap();
        let head = |range, cr| ResponseHead::from_headers(&uri, range, 100, cr, None);
        let r = |s, e| Some(ByteRange::new(s, e).unwrap());
        assert_eq!(head(None, None).unwrap().object_size, Some(100));
        assert_eq!(
            head(r(100, 200), Some("bytes 100-199/1000"))
                .unwrap()
                .object_size,
            Some(1000)
        );
        assert_eq!(
            head(r(100, 200), Some("bytes 100-199/*"))
                .unwrap()
                .object_size,
            None
        );
        // A server that ignores an open-ended range from 0 sends the whole object: fine.
        let from0 = Some(ByteRange::from_offset(0));
        assert_eq!(head(from0, None).unwrap().object_size, Some(100));
        // Ignoring any other range, or answering a different one, is not.
        let e = head(r(100, 200), None).unwrap_err();
        assert!(matches!(e, Error::Integrity { .. }) && e.to_string().contains("s3://bkt/k"));
        assert!(head(r(100, 200), Some("bytes 0-99/1000")).is_err());
        assert!(head(r(100, 200), Some("items 1-2/3")).is_err());
        assert_eq!(parse_content_range("bytes 0-0/*"), Some((0, 0, None)));
        assert_eq!(parse_content_range("bytes 5-4/10"), None);
    }

    #[test]
    fn response_head_refuses_hostile_answers() {
        let uri: ObjectUri = "s3://bkt/k".parse().unwrap();
        let head = |range, len, cr| ResponseHead::from_headers(&uri, range, len, cr, None);
        let r = |s, e| Some(ByteRange::new(s, e).unwrap());
        let refused = |res: Result<ResponseHead>, what: &str| {
            let e = res.unwrap_err();
            assert!(
                matches!(e, Error::Integrity { .. }) && e.to_string().contains("s3://bkt/k"),
                "{what}: {e}"
            );
        };
        // An end past the object's size (206 bytes 0-199/100 to a 200-byte range).
        refused(
            head(r(0, 200), 200, Some("bytes 0-199/100")),
            "past the end",
        );
        // A part of the object for a whole-object request (206 bytes 0-49/100).
        refused(head(None, 50, Some("bytes 0-49/100")), "part for whole");
        // Content-Length disagreeing with Content-Range.
        refused(
            head(r(0, 100), 60, Some("bytes 0-99/1000")),
            "length mismatch",
        );
        // More than asked, or less before the object ends.
        refused(
            head(r(0, 100), 200, Some("bytes 0-199/1000")),
            "more than asked",
        );
        refused(
            head(r(0, 100), 50, Some("bytes 0-49/1000")),
            "less than asked",
        );
        // A whole object larger than the range from 0 that was asked (Range ignored).
        refused(
            head(r(0, 100), 1000, None),
            "whole object bigger than the range",
        );
        // Sizes beyond any S3 object.
        refused(head(None, 1 << 40 << 10, None), "1 PiB Content-Length");
        refused(
            head(None, 10, Some("bytes 0-9/18446744073709551615")),
            "huge total",
        );
        // Fine: less than asked where the object ends; the whole object when it fits.
        assert_eq!(
            head(r(0, 200), 100, Some("bytes 0-99/100"))
                .unwrap()
                .object_size,
            Some(100)
        );
        assert_eq!(head(r(0, 200), 100, None).unwrap().object_size, Some(100));
    }

    proptest::proptest! {
        #[test]
        fn content_range_parsing_never_panics(s in ".{0,40}", n in 0u64..u64::MAX) {
            let _ = parse_content_range(&s);
            let _ = parse_content_range(&format!("bytes {n}-{}/{}", n.wrapping_mul(3), n));
            let uri: ObjectUri = "s3://bkt/k".parse().unwrap();
            let _ = ResponseHead::from_headers(&uri, ByteRange::with_len(n / 2, 7).ok(), n, Some(&s), None);
        }
    }
}
