//! object_store's own reqwest client, with one hook: replies that object_store would turn
//! into errors known only by their text come back as typed errors of ours, which
//! `errors::map_error` finds in the source chain. Every status of 400 or more (and a
//! redirect reqwest did not follow) becomes an `ErrorReply` (with at most `MAX_ERROR_BODY` of its body: object_store would read an
//! error body whole), and a 200 to a ranged request a `WholeObject`. With object_store's
//! retries off (see `build`), nothing retries these before core's policy sees them.

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use sluice_core::wire::MAX_ERROR_BODY;
use std::time::Duration;

/// An error status and what was read of its body.
#[derive(Debug)]
pub struct ErrorReply {
    pub status: u16,
    pub request_id: Option<String>,
    /// A redirect's `Location` and `x-amz-bucket-region`.
    pub location: Option<String>,
    pub region: Option<String>,
    pub body: Bytes,
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}", self.status)
    }
}

impl std::error::Error for ErrorReply {}

/// A 200 (the whole object) to a request for a range: allowed by HTTP (RFC 9110 §14.2),
/// refused by object_store; the GET reads the object unranged instead.
#[derive(Debug)]
pub struct WholeObject;

impl std::fmt::Display for WholeObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a 200 (the whole object) answered a request for a range")
    }
}

impl std::error::Error for WholeObject {}

/// What our HTTP client is built with (see `Connector`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub connect_timeout: Duration,
    /// Each read, the response head's included: a server that accepts and never answers
    /// must not hang a call (the body's own stall timeout is shorter and applies per chunk).
    pub read_timeout: Duration,
    pub max_idle_per_host: usize,
    pub http2: bool,
    /// Extra trust roots (AWS_CA_BUNDLE).
    pub roots: Vec<reqwest::Certificate>,
}

/// Builds object_store's HTTP client itself rather than through its `ReqwestConnector`,
/// for one setting `ClientOptions` does not offer: no redirect is followed. reqwest's
/// default policy follows up to ten with none of the checks of core's (`sluice_core::
/// redirect`: never https to http, never to a link-local or metadata address, credentials
/// and session token only to the same origin); here each comes back as an answer for core.
#[derive(Debug)]
pub struct Connector(pub Settings);

impl HttpConnector for Connector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let s = &self.0;
        let generic = |e: reqwest::Error| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        };
        let mut b = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(s.connect_timeout)
            .read_timeout(s.read_timeout)
            .pool_max_idle_per_host(s.max_idle_per_host);
        if !s.http2 {
            b = b.http1_only();
        }
        if !s.roots.is_empty() {
            b = b.tls_certs_merge(s.roots.iter().cloned());
        }
        let client = b.build().map_err(generic)?;
        Ok(HttpClient::new(Service(HttpClient::new(client))))
    }
}

#[derive(Debug)]
struct Service(HttpClient);

#[async_trait]
impl HttpService for Service {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let ranged = req.headers().contains_key(http::header::RANGE);
        let res = self.0.execute(req).await?;
        let status = res.status();
        if ranged && status == http::StatusCode::OK {
            return Err(HttpError::new(HttpErrorKind::Unknown, WholeObject));
        }
        if ranged && status == http::StatusCode::PARTIAL_CONTENT && empty_range(&res) {
            // Azurite answers a range that begins at the object's end (`bytes=0-` of an
            // empty blob) with a 206 of `bytes 0--1/0`, where Azure and S3 answer 416.
            return Err(HttpError::new(
                HttpErrorKind::Unknown,
                ErrorReply {
                    status: 416,
                    request_id: None,
                    location: None,
                    region: None,
                    body: Bytes::new(),
                },
            ));
        }
        // A redirect is an answer to report, as hyper's wire does (see `Connector`).
        let redirect = status.is_redirection() && status != http::StatusCode::NOT_MODIFIED;
        if status.as_u16() < 400 && !redirect {
            return Ok(res);
        }
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let request_id = header("x-amz-request-id").or_else(|| header("x-ms-request-id"));
        let location = header("location");
        let region = header("x-amz-bucket-region");
        let mut body = BytesMut::new();
        let mut stream = res.into_body().bytes_stream();
        while body.len() < MAX_ERROR_BODY {
            match stream.next().await {
                Some(Ok(chunk)) => {
                    let room = MAX_ERROR_BODY - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                // What arrived is enough to name the error; a broken body does not change it.
                _ => break,
            }
        }
        Err(HttpError::new(
            HttpErrorKind::Unknown,
            ErrorReply {
                status: status.as_u16(),
                request_id,
                location,
                region,
                body: body.freeze(),
            },
        ))
    }
}

/// Whether a 206's `Content-Range` names no byte (`bytes 5-4/5`, `bytes 0--1/0`).
fn empty_range(res: &HttpResponse) -> bool {
    let Some(v) = res
        .headers()
        .get(http::header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let span = v
        .trim()
        .strip_prefix("bytes ")
        .and_then(|r| r.split_once('/'));
    let Some((first, last)) = span.and_then(|(range, _)| {
        let (a, b) = range.split_once('-')?;
        Some((a.parse::<i64>().ok()?, b.parse::<i64>().ok()?))
    }) else {
        return false;
    };
    last < first
}
