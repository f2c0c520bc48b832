//! The bad-input catalogue: what a broken gateway, a wrong proxy or an attacker on the path
//! may answer, as scripts for the [`HostileServer`](crate::hostile::HostileServer), each
//! with what a client must make of it — the right bytes, or a specific error — within its
//! timeouts, without a panic, and without a secret in the message. Every backend runs every case (`run_catalogue`); the
//! CLI and the Python tests run them through their own front ends.

use crate::hostile::{Reply, Seen};
use sluice_core::ErrorKind;
use std::time::Duration;

/// Credentials the catalogue's stores sign with; none may ever appear in a message.
pub const ACCESS_KEY: &str = "AKIAHOSTILETESTKEY01";
/// The secret key the cases sign with: a test fails if it appears in any error text.
pub const SECRET_KEY: &str = "hostile/SECRET/key/never+shown0123456789";
/// The session token the cases send: a test fails if it appears in any error text.
pub const SESSION_TOKEN: &str = "HOSTILE-SESSION-TOKEN-never-shown-FwoGZXIvYXdzEJr";

/// The object the well-behaved answers serve: 100 bytes, `0123456789` ten times.
pub static OBJECT: [u8; 100] = object();

const fn object() -> [u8; 100] {
    let mut a = [0u8; 100];
    let mut i = 0;
    while i < 100 {
        a[i] = b'0' + (i % 10) as u8;
        i += 1;
    }
    a
}

/// The bucket every case addresses.
pub const BUCKET: &str = "bkt";
/// The key every case reads or writes.
pub const KEY: &str = "k";
/// The prefix the listing cases list.
pub const PREFIX: &str = "p/";

/// What the client is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `get` of the whole of `s3://bkt/k`.
    Get,
    /// `get` of bytes `[start, end)`.
    GetRange(u64, u64),
    /// `head` of `s3://bkt/k`.
    Head,
    /// A recursive listing of `s3://bkt/p/`.
    List,
    /// `put` of this many bytes to `s3://bkt/k`.
    Put(usize),
}

/// What a case expects. Errors are accepted by core's `ErrorKind` (backends differ in how
/// their stacks classify some failures, so a case may accept several); every error must be
/// specific and name the URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// These bytes (a read), this many entries (a listing), or success (a put or head).
    Ok(&'static [u8]),
    /// This many entries (a listing).
    Listed(usize),
    /// This many entries, or an error of one of these kinds.
    ListedOr(usize, &'static [ErrorKind]),
    /// Success with nothing to compare (a put or a head).
    Done,
    /// An error of one of these kinds.
    Error(&'static [ErrorKind]),
    /// These bytes, or an error of one of these kinds: HTTP allows either reading.
    OkOr(&'static [u8], &'static [ErrorKind]),
    /// Corruption a checksum reveals: an error of one of these kinds from every backend but
    /// those named, which do not check this answer (their gap, printed in the table); from
    /// those, any success.
    Checked(&'static [ErrorKind], &'static [&'static str]),
}

/// The backends that send no upload checksum (object_store's S3 client cannot) or do not
/// check a GET's checksum unless asked (`AWS_RESPONSE_CHECKSUM_VALIDATION`; awssdk, and
/// object_store never): where a corrupted byte goes unnoticed with the default settings.
pub const UNCHECKED_PUT: &[&str] = &["objectstore"];
/// The backends that do not check a GET's bytes against the store's CRC with the default
/// settings (awssdk checks only when asked, object_store never).
pub const UNCHECKED_GET: &[&str] = &["awssdk", "objectstore"];

/// One case of the catalogue: a scripted answer and what a client must make of it.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Its name, as the catalogue table prints it.
    pub name: &'static str,
    /// What the server does, for the catalogue table.
    pub input: &'static str,
    /// The operation the client makes.
    pub op: Op,
    /// The server's answers.
    pub script: fn(&Seen, usize) -> Reply,
    /// What the client must return.
    pub expect: Expect,
}

fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Bytes of the multipart upload in `put_multipart_loses_a_part`: three parts at the
/// default part size, the last one short.
pub const MULTIPART_PUT: usize = 40 << 20;

/// The bytes that upload's object keeps: its last part lost.
const KEPT_OF_MULTIPART: usize = 32 << 20;

/// A multipart upload answered as S3 answers each step, except that Complete drops the
/// last part and HEAD then tells the object's true, short size (mlcommons/storage#593).
fn loses_a_part(req: &Seen, _: usize) -> Reply {
    let xml = |body: String| Reply::with_body(200, &[("Content-Type", "application/xml")], body);
    match req.method.as_str() {
        "POST" if req.query("uploads").is_some() => xml(format!(
            "<InitiateMultipartUploadResult><Bucket>{BUCKET}</Bucket><Key>{KEY}</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>"
        )),
        "PUT" if req.query("partNumber").is_some() => {
            let etag = format!("\"{:032x}\"", req.target.len());
            Reply::with_body(200, &[("ETag", &etag)], Vec::new())
        }
        "POST" => xml(format!(
            "<CompleteMultipartUploadResult><Bucket>{BUCKET}</Bucket><Key>{KEY}</Key><ETag>&quot;lost-3&quot;</ETag></CompleteMultipartUploadResult>"
        )),
        "HEAD" => Reply::Send {
            status: 200,
            headers: h(&[
                ("ETag", "\"lost-3\""),
                ("Content-Length", &KEPT_OF_MULTIPART.to_string()),
            ]),
            body: Vec::new(),
        },
        "DELETE" => Reply::with_body(204, &[], Vec::new()),
        _ => Reply::s3_error(400, "InvalidRequest", "not part of this case"),
    }
}

/// 200 with `body` (its true Content-Length), ETag "e1" and the CRC64NVME of the whole
/// `OBJECT`, as a store sends the checksum it recorded.
fn with_object_crc(body: Vec<u8>) -> Reply {
    let crc = sluice_core::checksum::Crc::of(&OBJECT).to_base64();
    Reply::with_body(
        200,
        &[
            ("ETag", "\"e1\""),
            (sluice_core::checksum::HEADER, &crc),
            ("x-amz-checksum-type", "FULL_OBJECT"),
        ],
        body,
    )
}

/// 200 with the object and ETag "e1".
fn whole(_: &Seen, _: usize) -> Reply {
    Reply::with_body(200, &[("ETag", "\"e1\"")], OBJECT)
}

/// A 206 with this Content-Range, Content-Length and body.
fn partial(range: &str, len: usize, body: &[u8]) -> Reply {
    Reply::Send {
        status: 206,
        headers: h(&[
            ("Content-Range", range),
            ("Content-Length", &len.to_string()),
            ("ETag", "\"e1\""),
        ]),
        body: body.to_vec(),
    }
}

/// A 200 whose Content-Length header says `len`, with `body`.
fn claims(len: &str, body: &[u8]) -> Reply {
    Reply::Send {
        status: 200,
        headers: h(&[("Content-Length", len), ("ETag", "\"e1\"")]),
        body: body.to_vec(),
    }
}

/// A 200 with the object as one chunk (`Transfer-Encoding: chunked`), and `more` headers.
fn chunked(more: &[(&str, &str)]) -> Reply {
    let mut body = format!("{:x}\r\n", OBJECT.len()).into_bytes();
    body.extend_from_slice(&OBJECT);
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut headers = h(&[("Transfer-Encoding", "chunked")]);
    headers.extend(h(more));
    Reply::Send {
        status: 200,
        headers,
        body,
    }
}

/// Where a request's `Range: bytes=S-` or `bytes=S-E` starts (0 without one).
fn range_start(req: &Seen) -> u64 {
    req.header("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The object as S3 would answer `req` (206 from the range's start to the end when it has
/// a Range, 200 otherwise), with `etag`, the body cut after `cut` bytes when given.
fn object_reply(req: &Seen, etag: Option<&str>, cut: Option<usize>) -> Reply {
    let start = range_start(req).min(100) as usize;
    let mut headers = h(&[("Content-Length", &(100 - start).to_string())]);
    let status = if req.header("range").is_some() {
        headers.push(("Content-Range".into(), format!("bytes {start}-99/100")));
        206
    } else {
        200
    };
    if let Some(e) = etag {
        headers.push(("ETag".into(), e.into()));
    }
    let body = OBJECT[start..].to_vec();
    match cut {
        Some(sent) => Reply::Cut {
            status,
            headers,
            body,
            sent,
        },
        None => Reply::Send {
            status,
            headers,
            body,
        },
    }
}

/// A ListObjectsV2 page.
fn listing(contents: &[(&str, &str)], truncated: bool, token: Option<&str>) -> Reply {
    let mut x = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
    );
    x.push_str(&format!(
        "<Name>{BUCKET}</Name><Prefix>{PREFIX}</Prefix><KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>{truncated}</IsTruncated>",
        contents.len()
    ));
    if let Some(t) = token {
        x.push_str(&format!(
            "<NextContinuationToken>{t}</NextContinuationToken>"
        ));
    }
    for (key, size) in contents {
        x.push_str(&format!(
            "<Contents><Key>{key}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>&quot;e1&quot;</ETag><Size>{size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        ));
    }
    x.push_str("</ListBucketResult>");
    Reply::with_body(200, &[("Content-Type", "application/xml")], x)
}

use ErrorKind::*;

/// The catalogue.
pub fn catalogue() -> Vec<Case> {
    let c = |name: &'static str,
             input: &'static str,
             op: Op,
             script: fn(&Seen, usize) -> Reply,
             expect: Expect| Case {
        name,
        input,
        op,
        script,
        expect,
    };
    vec![
        c(
            "plain_get",
            "200 with the object (control case)",
            Op::Get,
            whole,
            Expect::Ok(&OBJECT),
        ),
        c(
            "content_length_1_tib",
            "200 Content-Length: 1099511627776, 10 bytes, close",
            Op::Get,
            |_, _| claims("1099511627776", &OBJECT[..10]),
            Expect::Error(&[Transport, Integrity]),
        ),
        c(
            "content_length_u64_max",
            "200 Content-Length: 18446744073709551615",
            Op::Get,
            |_, _| claims("18446744073709551615", &OBJECT[..10]),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "content_length_not_a_number",
            "200 Content-Length: abc",
            Op::Get,
            |_, _| claims("abc", &OBJECT[..10]),
            Expect::Error(&[Transport, Integrity]),
        ),
        c(
            "partial_answer_to_whole_get",
            "unranged GET answered 206 bytes 0-49/100 with 50 bytes",
            Op::Get,
            |_, _| partial("bytes 0-49/100", 50, &OBJECT[..50]),
            Expect::Error(&[Integrity]),
        ),
        c(
            "content_range_past_the_end",
            "GET 0-199 answered 206 bytes 0-199/100 with 200 bytes",
            Op::GetRange(0, 200),
            |_, _| partial("bytes 0-199/100", 200, &[b'x'; 200]),
            Expect::Error(&[Integrity]),
        ),
        c(
            "content_range_other_start",
            "GET 10-19 answered 206 bytes 0-9/100",
            Op::GetRange(10, 20),
            |_, _| partial("bytes 0-9/100", 10, &OBJECT[..10]),
            Expect::Error(&[Integrity]),
        ),
        c(
            "content_range_more_than_asked",
            "GET 0-9 answered 206 bytes 0-19/100 with 20 bytes",
            Op::GetRange(0, 10),
            |_, _| partial("bytes 0-19/100", 20, &OBJECT[..20]),
            Expect::Error(&[Integrity]),
        ),
        c(
            "content_range_less_than_asked",
            "GET 0-49 answered 206 bytes 0-9/100 with 10 bytes",
            Op::GetRange(0, 50),
            |_, _| partial("bytes 0-9/100", 10, &OBJECT[..10]),
            Expect::Error(&[Integrity]),
        ),
        c(
            "content_range_unreadable",
            "GET 0-9 answered 206 Content-Range: items 0-9/100",
            Op::GetRange(0, 10),
            |_, _| partial("items 0-9/100", 10, &OBJECT[..10]),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "content_range_total_u64_max",
            "GET 0-9 answered 206 bytes 0-9/18446744073709551615",
            Op::GetRange(0, 10),
            |_, _| partial("bytes 0-9/18446744073709551615", 10, &OBJECT[..10]),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "content_length_disagrees_with_range",
            "GET 0-9 answered 206 bytes 0-9/100 with Content-Length 5",
            Op::GetRange(0, 10),
            |_, _| partial("bytes 0-9/100", 5, &OBJECT[..5]),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "range_ignored_whole_object_fits",
            "GET 0-199 answered 200 with the whole 100-byte object",
            Op::GetRange(0, 200),
            whole,
            Expect::Ok(&OBJECT),
        ),
        c(
            "range_ignored_from_the_middle",
            "GET 10-19 answered 200 with the whole object",
            Op::GetRange(10, 20),
            whole,
            Expect::Error(&[Integrity]),
        ),
        c(
            "range_ignored_larger_than_asked",
            "GET 0-9 answered 200 with the whole 100-byte object",
            Op::GetRange(0, 10),
            whole,
            Expect::Error(&[Integrity]),
        ),
        c(
            "body_shorter_than_content_length",
            "every GET's body cut after 40 bytes (Content-Length promised more)",
            Op::Get,
            |req, _| object_reply(req, Some("\"e1\""), Some(40)),
            // Each resume brings 40 more bytes of the same version: the whole object when
            // the retry budget lasts (object_store's own retries add to ours), else an error.
            Expect::OkOr(&OBJECT, &[Transport, Timeout]),
        ),
        c(
            "object_changed_before_resume",
            "body cut at 40; the resume (If-Match \"e1\") answered 412",
            Op::Get,
            |req, _| match req.header("if-match") {
                Some(_) => Reply::s3_error(
                    412,
                    "PreconditionFailed",
                    "At least one of the pre-conditions you specified did not hold",
                ),
                None => object_reply(req, Some("\"e1\""), Some(40)),
            },
            Expect::Error(&[Integrity]),
        ),
        c(
            "resume_ignores_if_match",
            "body cut at 40; the resume answered 206 40-99 with other bytes and ETag \"e2\"",
            Op::Get,
            |req, _| match range_start(req) {
                0 => object_reply(req, Some("\"e1\""), Some(40)),
                _ => Reply::Send {
                    status: 206,
                    headers: h(&[
                        ("Content-Range", "bytes 40-99/100"),
                        ("Content-Length", "60"),
                        ("ETag", "\"e2\""),
                    ]),
                    body: vec![b'X'; 60],
                },
            },
            Expect::Error(&[Integrity]),
        ),
        c(
            "resume_without_etag_rereads",
            "body cut at 40 without ETag; a resume from 40 would get other bytes",
            Op::Get,
            |req, n| match (n, range_start(req)) {
                (0, _) => object_reply(req, None, Some(40)),
                (_, 0) => object_reply(req, None, None),
                _ => Reply::Send {
                    status: 206,
                    headers: h(&[
                        ("Content-Range", "bytes 40-99/100"),
                        ("Content-Length", "60"),
                    ]),
                    body: vec![b'X'; 60],
                },
            },
            Expect::Ok(&OBJECT),
        ),
        c(
            "never_answers",
            "accepts the request, never answers",
            Op::Get,
            |_, _| Reply::Hang,
            Expect::Error(&[Timeout]),
        ),
        c(
            "drips_slower_than_the_stall_timeout",
            "200 Content-Length: 100, one byte every 2.5 s",
            Op::Get,
            |_, _| Reply::Drip {
                status: 200,
                headers: h(&[("Content-Length", "100")]),
                body: OBJECT.to_vec(),
                every: Duration::from_millis(2500),
            },
            Expect::Error(&[Timeout, Transport]),
        ),
        c(
            "not_http",
            "answers SSH-2.0-OpenSSH_9.6",
            Op::Get,
            |_, _| Reply::Raw(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec()),
            Expect::Error(&[Transport]),
        ),
        c(
            "closes_without_answer",
            "closes the connection after the request",
            Op::Get,
            |_, _| Reply::Raw(Vec::new()),
            Expect::Error(&[Transport]),
        ),
        c(
            "internal_error_always",
            "500 InternalError on every attempt",
            Op::Get,
            |_, _| Reply::s3_error(500, "InternalError", "We encountered an internal error"),
            Expect::Error(&[Service]),
        ),
        c(
            "slowdown_always",
            "503 SlowDown on every attempt",
            Op::Get,
            |_, _| Reply::s3_error(503, "SlowDown", "Please reduce your request rate"),
            Expect::Error(&[Service]),
        ),
        c(
            "error_body_64_mib",
            "500 with a 64 MiB error message",
            Op::Get,
            |_, _| Reply::s3_error(500, "InternalError", &"A".repeat(64 << 20)),
            Expect::Error(&[Service, Transport]),
        ),
        c(
            "error_echoes_secrets",
            "403 SignatureDoesNotMatch echoing the session token, secret and signature",
            Op::Get,
            |req, _| {
                let auth = req.header("authorization").unwrap_or_default().to_owned();
                Reply::s3_error(
                    403,
                    "SignatureDoesNotMatch",
                    &format!(
                        "The request signature we calculated does not match. StringToSign: x-amz-security-token:{SESSION_TOKEN} secret {SECRET_KEY} {auth}"
                    ),
                )
            },
            Expect::Error(&[PermissionDenied]),
        ),
        c(
            "error_xml_truncated",
            "500 with <Error><Code>Intern (cut XML)",
            Op::Get,
            |_, _| {
                Reply::with_body(
                    500,
                    &[("Content-Type", "application/xml")],
                    "<Error><Code>Intern",
                )
            },
            Expect::Error(&[Service]),
        ),
        c(
            "not_found",
            "404 NoSuchKey",
            Op::Get,
            |_, _| Reply::s3_error(404, "NoSuchKey", "The specified key does not exist."),
            Expect::Error(&[NotFound]),
        ),
        c(
            "redirect_elsewhere",
            "301 to http://169.254.169.254/",
            Op::Get,
            |_, _| {
                Reply::with_body(
                    301,
                    &[("Location", "http://169.254.169.254/latest/meta-data/")],
                    "<Error><Code>PermanentRedirect</Code><Message>moved</Message></Error>",
                )
            },
            // Never followed: link-local (every backend reports redirects to core's policy).
            Expect::Error(&[Redirect]),
        ),
        c(
            "redirect_to_region",
            "301 PermanentRedirect, x-amz-bucket-region: eu-west-1, until signed for it",
            Op::Get,
            |req, n| {
                let scope = req.header("authorization").unwrap_or_default();
                if scope.contains("/eu-west-1/s3/aws4_request") {
                    whole(req, n)
                } else {
                    Reply::with_body(
                        301,
                        &[("x-amz-bucket-region", "eu-west-1")],
                        "<Error><Code>PermanentRedirect</Code><Message>The bucket is in this region: eu-west-1.</Message></Error>",
                    )
                }
            },
            Expect::Ok(&OBJECT),
        ),
        c(
            "redirect_to_another_host",
            "307 to the same port under another host name (a gateway's node)",
            Op::Get,
            |req, n| {
                let host = req.header("host").unwrap_or_default();
                match host.strip_prefix("localhost:") {
                    // Signatures and tokens stay with the host they were made for.
                    Some(_) if req.header("authorization").is_some() => Reply::s3_error(
                        400,
                        "CredentialsSentElsewhere",
                        "a signed request was redirected to another host",
                    ),
                    Some(_) => whole(req, n),
                    None => {
                        let port = host.rsplit(':').next().unwrap_or("80");
                        let to = format!("http://localhost:{port}/{BUCKET}/{KEY}");
                        Reply::with_body(307, &[("Location", &to)], "")
                    }
                }
            },
            Expect::Ok(&OBJECT),
        ),
        c(
            "redirect_loop",
            "307 to the same URL, every time",
            Op::Get,
            |req, _| Reply::with_body(307, &[("Location", &req.target)], ""),
            Expect::Error(&[Redirect]),
        ),
        c(
            "chunked_body",
            "200 with a chunked body (no Content-Length)",
            Op::Get,
            |_, _| chunked(&[]),
            Expect::OkOr(&OBJECT, &[Transport, Integrity]),
        ),
        c(
            "chunked_body_with_content_length",
            "200 with a chunked body and a Content-Length of the object's size beside it",
            Op::Get,
            |_, _| chunked(&[("Content-Length", "100")]),
            // Read as 100 raw bytes it would be the chunk header and 96 bytes of the object.
            Expect::OkOr(&OBJECT, &[Transport, Integrity]),
        ),
        c(
            "no_content_with_content_length",
            "204 No Content to a GET, with the object's Content-Length and no body",
            Op::Get,
            |_, _| Reply::Send {
                status: 204,
                headers: h(&[("Content-Length", "100"), ("ETag", "\"e1\"")]),
                body: Vec::new(),
            },
            // A 204 has no body (RFC 9112 6.3): waiting for 100 bytes would end at the stall
            // timeout, taking it as empty would lose the object.
            Expect::Error(&[Service, Transport, Integrity]),
        ),
        c(
            "head_without_content_length",
            "HEAD answered 200 without Content-Length",
            Op::Head,
            |_, _| Reply::Send {
                status: 200,
                headers: h(&[("ETag", "\"e1\"")]),
                body: Vec::new(),
            },
            Expect::Error(&[Transport, Integrity]),
        ),
        c(
            "head_never_answers",
            "HEAD never answered",
            Op::Head,
            |_, _| Reply::Hang,
            Expect::Error(&[Timeout]),
        ),
        c(
            "listing_repeats_its_token",
            "every page IsTruncated with NextContinuationToken t1",
            Op::List,
            |_, _| listing(&[("p/a", "1")], true, Some("t1")),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "listing_truncated_without_token",
            "IsTruncated true, no NextContinuationToken",
            Op::List,
            |_, _| listing(&[("p/a", "1")], true, None),
            // object_store reads a page without a token as the last one (its pagination is
            // internal); hyper and awssdk refuse it.
            Expect::ListedOr(1, &[Integrity, Transport]),
        ),
        c(
            "listing_not_xml",
            "200 listing body that is not XML",
            Op::List,
            |_, _| {
                Reply::with_body(
                    200,
                    &[("Content-Type", "application/xml")],
                    "this is not xml <",
                )
            },
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "listing_size_not_a_number",
            "a listing entry with <Size>-1</Size>",
            Op::List,
            |_, _| listing(&[("p/a", "-1")], false, None),
            Expect::Error(&[Integrity, Transport]),
        ),
        c(
            "listing_size_u64_max",
            "a listing entry of 18446744073709551615 bytes (refused when read)",
            Op::List,
            |_, _| listing(&[("p/a", "18446744073709551615")], false, None),
            // A listing may carry the claim (reads refuse it) or refuse it already.
            Expect::ListedOr(1, &[Integrity, Transport]),
        ),
        c(
            "listing_error",
            "500 InternalError to the listing",
            Op::List,
            |_, _| Reply::s3_error(500, "InternalError", "We encountered an internal error"),
            Expect::Error(&[Service]),
        ),
        c(
            "put_internal_error",
            "500 to a PUT",
            Op::Put(1000),
            |_, _| Reply::s3_error(500, "InternalError", "We encountered an internal error"),
            Expect::Error(&[Service]),
        ),
        c(
            "put_never_answers",
            "a PUT never answered",
            Op::Put(1000),
            |_, _| Reply::Hang,
            Expect::Error(&[Timeout]),
        ),
        c(
            "get_one_byte_corrupted",
            "200 with byte 50 of the object changed and the object's true x-amz-checksum-crc64nvme",
            Op::Get,
            |_, _| {
                let mut body = OBJECT.to_vec();
                body[50] ^= 0x01;
                with_object_crc(body)
            },
            Expect::Checked(&[Integrity], UNCHECKED_GET),
        ),
        c(
            "put_one_byte_corrupted",
            "a PUT whose body lost a byte on the way: 400 BadDigest when it carries a checksum (as S3 answers), stored otherwise",
            Op::Put(1000),
            |req, _| {
                if req.header(sluice_core::checksum::HEADER).is_some() {
                    Reply::s3_error(
                        400,
                        "BadDigest",
                        "The CRC64NVME you specified did not match the calculated checksum.",
                    )
                } else {
                    Reply::with_body(200, &[("ETag", "\"e1\"")], Vec::new())
                }
            },
            Expect::Checked(&[Service], UNCHECKED_PUT),
        ),
        c(
            "get_short_by_a_part",
            "200 with the object's first 60 bytes, a Content-Length of 60 and the whole object's x-amz-checksum-crc64nvme (an object a store assembled without its last part)",
            Op::Get,
            |_, _| with_object_crc(OBJECT[..60].to_vec()),
            Expect::Checked(&[Integrity], UNCHECKED_GET),
        ),
        c(
            "put_multipart_loses_a_part",
            "a multipart upload whose Complete answers 200 but whose object lacks its last part, as HEAD then tells",
            Op::Put(MULTIPART_PUT),
            loses_a_part,
            Expect::Error(&[Integrity]),
        ),
        c(
            "put_access_denied",
            "403 AccessDenied to a PUT",
            Op::Put(1000),
            |_, _| Reply::s3_error(403, "AccessDenied", "Access Denied"),
            Expect::Error(&[PermissionDenied]),
        ),
    ]
}
