//! Reading a body through failures: retry the request, and when a body breaks part-way,
//! ask only for the bytes not yet received, pinned to the same object version with
//! `If-Match` on its ETag. Every backend's `get_into` goes through `get_with_resume`.

use crate::error::{Error, Result, TimeoutPhase};
use crate::object::{GetInfo, GetOptions, MAX_OBJECT_SIZE, same_etag};
use crate::range::ByteRange;
use crate::retry::RetryPolicy;
use crate::segment::Segment;
use crate::uri::ObjectUri;
use async_trait::async_trait;
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
}

impl<'a> BodySink<'a> {
    /// A sink writing the response to a request for `uri` into `seg`, after whatever `seg`
    /// already holds.
    pub fn new(uri: &'a ObjectUri, seg: &'a mut Segment) -> Self {
        Self {
            uri,
            seg,
            head: None,
        }
    }

    /// Records the response head and checks the declared length fits the segment.
    pub fn begin(&mut self, head: ResponseHead) -> Result<()> {
        self.seg
            .expect_more(head.content_length)
            .map_err(|e| Error::integrity(self.uri.to_string(), e.to_string()))?;
        self.head = Some(head);
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

/// A backend's single attempt at a GET: send `req`, call `sink.begin` with the head, then
/// `sink.write` for each frame, and return once the body ended. It must return an error (a
/// retryable `Transport`) if the body ends before `content_length` bytes.
#[async_trait]
pub trait GetAttempt: Send + Sync {
    /// Makes one attempt at `req`, writing its answer into `sink` as described above. An
    /// error reply (4xx, 5xx) is returned as the [`Error`] it maps to, before `sink.begin`.
    async fn get_attempt(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()>;
}

/// The `Integrity` error of a read that would mix two versions of `uri`.
pub fn changed(uri: &ObjectUri) -> Error {
    Error::integrity(
        uri.to_string(),
        "the object changed while being read (its ETag no longer matches)",
    )
}

/// Checks the bytes read into `dst` (from `origin`) against the store's full-object CRC, when
/// it sent one and `dst` kept them (a counting segment checks nothing). A mismatch is an
/// `Integrity` error naming both values: the bytes are not handed out, and not retried.
fn verify(uri: &ObjectUri, expected: Option<u64>, dst: &Segment, origin: usize) -> Result<()> {
    use crate::checksum::Crc;
    let (Some(expected), Some(bytes)) = (expected, dst.as_slice()) else {
        return Ok(());
    };
    let got = Crc::of(bytes.get(origin..).unwrap_or_default());
    if got.crc == expected {
        return Ok(());
    }
    Err(Error::integrity(
        uri.to_string(),
        format!(
            "the bytes read do not match the store's CRC64NVME (the store says {}, the bytes give {})",
            Crc::encode(expected),
            got.to_base64()
        ),
    ))
}

/// Reads `opts.range` of `uri` into `dst` with retries; a body that breaks part-way is
/// resumed from the first missing byte of the same object version. Never returns wrong
/// bytes: every request after the first (or every request, with `opts.if_match`) carries
/// `If-Match`, and a 412 or a reply with another ETag is an `Integrity` error; a wrong
/// length is an `Integrity` error too.
pub async fn get_with_resume(
    getter: &dyn GetAttempt,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    opts: &GetOptions,
    dst: &mut Segment,
) -> Result<GetInfo> {
    let range = opts.range;
    let origin = dst.written();
    let mut etag: Option<String> = opts.if_match.clone();
    let mut object_size: Option<u64> = None;
    // The whole object's CRC, from the answer to a whole-object request (the first).
    let mut checksum: Option<u64> = None;
    let mut attempts = 0;
    loop {
        let got = (dst.written() - origin) as u64;
        // What is still missing; `None` once everything asked for has arrived.
        let missing = match range {
            None if got == 0 => Some(None),
            None if object_size == Some(got) => None,
            None => Some(Some(ByteRange::from_offset(got))),
            Some(r) => r.advance(got).map(Some),
        };
        let Some(req_range) = missing else {
            verify(uri, checksum, dst, origin)?;
            return Ok(GetInfo {
                bytes: got,
                object_size,
                etag,
                attempts,
            });
        };
        let req = GetRequest {
            uri,
            range: req_range,
            if_match: etag.as_deref(),
        };
        let mut sink = BodySink::new(uri, dst);
        let result = getter.get_attempt(&req, &mut sink).await;
        if let Some(head) = sink.head.take() {
            // A server that ignores If-Match must not splice versions either.
            if let (Some(pin), Some(got)) = (&etag, &head.etag)
                && !same_etag(pin, got)
            {
                return Err(changed(uri));
            }
            etag = etag.or(head.etag);
            // The store's checksum covers the whole object: it checks a reply that is the
            // whole object, asked for whole or by a range from 0 that covers it (what a read
            // of unknown size asks first, `loader/src/fetch.rs`).
            let whole = req_range.is_none_or(|r| r.start() == 0)
                && head.object_size == Some(head.content_length);
            if whole {
                checksum = checksum.or(head.checksum);
            }
            // A resumed request's Content-Range still carries the whole object's size, and
            // one version has one size: a store that says otherwise is not to be spliced.
            if let (Some(first), Some(now)) = (object_size, head.object_size)
                && first != now
            {
                return Err(Error::integrity(
                    uri.to_string(),
                    format!(
                        "the object's size changed between replies for one version \
                         ({first} bytes, then {now})"
                    ),
                ));
            }
            object_size = object_size.or(head.object_size);
        }
        attempts += 1;
        match result {
            Ok(()) => {
                verify(uri, checksum, dst, origin)?;
                let bytes = (dst.written() - origin) as u64;
                return Ok(GetInfo {
                    bytes,
                    object_size,
                    etag,
                    attempts,
                });
            }
            // The version we hold the first bytes of is gone: never splice two versions.
            Err(Error::Service { status: 412, .. }) if etag.is_some() => {
                return Err(changed(uri));
            }
            Err(e) if policy.may_retry(&e, attempts) => {
                tracing::info!(error = %e, attempts, received = dst.written() - origin, "resuming GET");
                if etag.is_none() && dst.written() > origin {
                    // No ETag: the rest could not be pinned to the version of the bytes held,
                    // so the next attempt reads everything asked for again, and that reply's
                    // checksum (the object may have been replaced meanwhile) is the one.
                    dst.truncate(origin);
                    checksum = None;
                }
                tokio::time::sleep(policy.backoff(attempts - 1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A fake server in memory: serves `data`, cutting the body after `cut_after` bytes for
    /// the first `cuts` attempts, and records the requests it saw.
    struct Flaky {
        data: Vec<u8>,
        cut_after: usize,
        cuts: Mutex<u32>,
        seen: Mutex<Vec<(Option<ByteRange>, Option<String>)>>,
        etag: Option<&'static str>,
        /// Overwritten after the first response: If-Match fails from then on.
        changed: bool,
        /// The object size that replies after the first report (a store that lies).
        later_total: Option<u64>,
        /// The full-object CRC every reply carries.
        checksum: Option<u64>,
    }

    #[async_trait]
    impl GetAttempt for Flaky {
        async fn get_attempt(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
            self.seen
                .lock()
                .unwrap()
                .push((req.range, req.if_match.map(str::to_owned)));
            if self.changed && req.if_match.is_some() {
                return Err(Error::from_service(
                    req.uri.to_string(),
                    412,
                    "PreconditionFailed",
                    "",
                    None,
                ));
            }
            let total = self.data.len() as u64;
            let (start, end) = match req.range {
                None => (0, total),
                Some(r) => (r.start(), r.end().unwrap_or(total).min(total)),
            };
            let body = &self.data[start as usize..end as usize];
            let first = self.seen.lock().unwrap().len() == 1;
            sink.begin(ResponseHead {
                checksum: self.checksum,
                content_length: body.len() as u64,
                object_size: Some(if first {
                    total
                } else {
                    self.later_total.unwrap_or(total)
                }),
                etag: self.etag.map(str::to_owned),
            })?;
            let mut cuts = self.cuts.lock().unwrap();
            if *cuts > 0 && body.len() > self.cut_after {
                *cuts -= 1;
                sink.write(&body[..self.cut_after])?;
                return Err(Error::transport(req.uri.to_string(), "connection reset"));
            }
            sink.write(body)
        }
    }

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

    fn flaky(cuts: u32) -> Flaky {
        Flaky {
            data: (0..1000u32).map(|i| i as u8).collect(),
            cut_after: 300,
            cuts: Mutex::new(cuts),
            seen: Mutex::default(),
            etag: Some("\"e1\""),
            changed: false,
            later_total: None,
            checksum: None,
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        }
    }

    #[tokio::test]
    async fn resumes_whole_object_from_the_first_missing_byte() {
        let f = flaky(2);
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let mut seg = Segment::growable();
        let info = get_with_resume(&f, &fast(), &uri, &GetOptions::default(), &mut seg)
            .await
            .unwrap();
        assert_eq!(info.bytes, 1000);
        assert_eq!(info.attempts, 3);
        assert_eq!(seg.as_slice(), Some(&f.data[..]));
        let seen = f.seen.lock().unwrap().clone();
        assert_eq!(seen[0], (None, None));
        assert_eq!(
            seen[1],
            (Some(ByteRange::from_offset(300)), Some("\"e1\"".into()))
        );
        assert_eq!(
            seen[2],
            (Some(ByteRange::from_offset(600)), Some("\"e1\"".into()))
        );
    }

    #[tokio::test]
    async fn a_reply_that_is_the_whole_object_is_checked_against_the_stores_checksum() {
        let wrong = crate::checksum::Crc::of(b"other bytes").crc;
        async fn read(f: Flaky, range: Option<ByteRange>) -> Result<GetInfo> {
            let uri = ObjectUri::parse("s3://bucket/k").unwrap();
            let mut seg = Segment::growable();
            get_with_resume(&f, &fast(), &uri, &GetOptions::range(range), &mut seg).await
        }
        let bad = |cuts| Flaky {
            checksum: Some(wrong),
            ..flaky(cuts)
        };
        let covering = ByteRange::with_len(0, 8 << 20).unwrap();
        // Whole, by a range from 0 that covers it (a read of unknown size), and resumed
        // after a cut: the CRC of the bytes read is not the store's.
        for (f, range) in [(bad(0), None), (bad(0), Some(covering)), (bad(1), None)] {
            let e = read(f, range).await.unwrap_err();
            assert!(matches!(e, Error::Integrity { .. }), "{range:?}: {e}");
        }
        // A part of the object: its bytes are not what the checksum covers.
        let part = ByteRange::new(100, 200).unwrap();
        read(bad(0), Some(part)).await.unwrap();
        let good = Flaky {
            checksum: Some(crate::checksum::Crc::of(&flaky(0).data).crc),
            ..flaky(1)
        };
        read(good, Some(covering)).await.unwrap();
    }

    #[tokio::test]
    async fn resumes_a_bounded_range_into_a_fixed_segment() {
        let f = flaky(1);
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let r = ByteRange::new(100, 900).unwrap();
        let mut seg = Segment::exact(800);
        get_with_resume(&f, &fast(), &uri, &GetOptions::range(Some(r)), &mut seg)
            .await
            .unwrap();
        assert_eq!(seg.as_slice(), Some(&f.data[100..900]));
        assert_eq!(
            f.seen.lock().unwrap()[1].0,
            Some(ByteRange::new(400, 900).unwrap())
        );
    }

    #[tokio::test]
    async fn gives_up_after_the_budget() {
        let f = flaky(100);
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let mut seg = Segment::growable();
        let p = RetryPolicy {
            max_attempts: 2,
            ..fast()
        };
        let err = get_with_resume(&f, &p, &uri, &GetOptions::default(), &mut seg)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Transport { .. }));
        assert_eq!(f.seen.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn without_an_etag_a_broken_body_is_read_again_from_the_start() {
        let f = Flaky {
            etag: None,
            ..flaky(1)
        };
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let mut seg = Segment::growable();
        get_with_resume(&f, &fast(), &uri, &GetOptions::default(), &mut seg)
            .await
            .unwrap();
        assert_eq!(seg.as_slice(), Some(&f.data[..]), "no splice");
        assert_eq!(
            f.seen.lock().unwrap()[1],
            (None, None),
            "whole object again"
        );
    }

    #[tokio::test]
    async fn an_object_changed_while_being_read_is_an_integrity_error() {
        let f = Flaky {
            changed: true,
            ..flaky(1)
        };
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let mut seg = Segment::growable();
        let err = get_with_resume(&f, &fast(), &uri, &GetOptions::default(), &mut seg)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Integrity { .. })
                && err.to_string().contains("changed while being read"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_resumed_reply_with_another_total_is_an_integrity_error() {
        let r = ByteRange::new(0, 800).unwrap();
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        for later in [600, 5000] {
            let f = Flaky {
                later_total: Some(later),
                ..flaky(1)
            };
            let mut seg = Segment::growable();
            let err = get_with_resume(&f, &fast(), &uri, &GetOptions::range(Some(r)), &mut seg)
                .await
                .unwrap_err();
            assert!(
                matches!(err, Error::Integrity { .. })
                    && err
                        .to_string()
                        .contains(&format!("1000 bytes, then {later}")),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn a_pinned_read_sends_if_match_and_refuses_another_version() {
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let pinned = |tag: &str| GetOptions {
            range: None,
            if_match: Some(tag.to_owned()),
        };
        // The listing's ETag, unquoted as some stores send it, still matches.
        let f = flaky(0);
        let mut seg = Segment::growable();
        get_with_resume(&f, &fast(), &uri, &pinned("e1"), &mut seg)
            .await
            .unwrap();
        assert_eq!(f.seen.lock().unwrap()[0], (None, Some("e1".into())));
        // A server that ignores If-Match and answers another version: refused.
        let f = flaky(0);
        let mut seg = Segment::growable();
        let err = get_with_resume(&f, &fast(), &uri, &pinned("\"e0\""), &mut seg)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("changed while being read"),
            "{err}"
        );
    }
}
