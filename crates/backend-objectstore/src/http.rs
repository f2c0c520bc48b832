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
    ReqwestConnector,
};
use sluice_core::reply::MAX_ERROR_BODY;

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

#[derive(Debug, Default)]
pub struct Connector(ReqwestConnector);

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Service(self.0.connect(options)?)))
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
        // reqwest has followed every redirect with a Location; one left (S3's 301
        // PermanentRedirect to another region has none) is an answer to report, as hyper does.
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
        let request_id = header("x-amz-request-id");
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
