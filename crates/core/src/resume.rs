//! Reading a body through failures: retry the request, and when a body breaks part-way,
//! ask only for the bytes not yet received, pinned to the same object version with
//! `If-Match` on its ETag. Every backend's `get_into` goes through `get_with_resume`.

use crate::error::{Error, Result};
use crate::object::{GetInfo, GetOptions, same_etag};
use crate::range::ByteRange;
use crate::retry::RetryPolicy;
use crate::segment::Segment;
use crate::uri::ObjectUri;
use crate::wire::{BodySink, GetRequest, GetWire};

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
    getter: &dyn GetWire,
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
        let result =
            crate::oplog::as_attempt(attempts + 1, getter.get_object(&req, &mut sink)).await;
        if let Some(head) = sink.take_head() {
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
    use crate::wire::ResponseHead;
    use async_trait::async_trait;
    use std::sync::Mutex;
    use std::time::Duration;

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
    impl GetWire for Flaky {
        async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
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
