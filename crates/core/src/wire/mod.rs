//! The wire: one attempt of each S3 operation, in a client stack's terms, and what wraps a
//! wire without changing what it is ([`redirect`]: regions that moved; [`spread`]: several
//! endpoints). A backend implements [`Wire`]: GetObject through [`GetWire`], every other
//! operation as one [`Request`] value sent through [`Operations::send`] — and
//! [`S3Store`](crate::S3Store) turns the result into an [`ObjectStore`](crate::ObjectStore),
//! writing every rule of a request once: the retry budget, resumption and version pinning of
//! bodies, the multipart threshold and upload loop, pagination, and the bound on requests in
//! flight.
//!
//! The split follows Apache object_store's `GetClient`/`GetClientExt`: what differs between
//! client stacks (building a request, reading its answer, mapping the library's typed errors
//! to ours) is the wire; what must not differ is above it. A wrapper handles every request in
//! its one `send`, so a new operation never passes through it; docs/design.md, "Adding an S3
//! operation", lists the files a new operation touches.

pub mod get;
pub mod redirect;
pub mod request;
pub mod spread;

pub use crate::reply::{ErrorDoc, MAX_ERROR_BODY, error_reply};
pub use get::{BodySink, GetRequest, ResponseHead, parse_content_range};
pub use request::{Handlers, Kind, Operation, Operations, OperationsExt, Reply, Request};

use crate::checksum::Crc;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::object::EndpointStats;
use crate::uri::ObjectUri;
use async_trait::async_trait;

/// One attempt of each S3 operation, as a client stack makes it: no retries, no resumption,
/// no pagination (those are [`S3Store`](crate::S3Store)'s). GetObject streams through
/// [`GetWire`]; every other operation is a [`Request`] sent through [`Operations`]. A
/// checksum given is sent for the store to check the bytes against (`checksum`'s module says
/// why and how); a condition ([`PutMode`](crate::PutMode)) or attributes a stack cannot send
/// are refused (`store::unsupported`), never dropped.
pub trait Wire: GetWire + Operations + std::fmt::Debug + 'static {
    /// The backend's name as `S3_BACKEND` spells it.
    fn backend(&self) -> &'static str;

    /// The configuration the wire was built from: [`S3Store`](crate::S3Store) takes its policy from it.
    fn config(&self) -> &StoreConfig;

    /// What each endpoint has served ([`Spread`](spread::Spread)); empty for a wire of one endpoint.
    fn endpoint_stats(&self) -> Vec<EndpointStats> {
        Vec::new()
    }
}

/// GetObject, one attempt: send `req`, call `sink.begin` with the head, then `sink.write`
/// for each frame, and return once the body ended. Apart from [`Operations`] because its body
/// streams into the caller's sink, and so that resumption (`resume`) can be tested against a
/// fake that only serves GETs.
#[async_trait]
pub trait GetWire: Send + Sync {
    /// Makes one attempt at `req`, writing its answer into `sink`. An error reply (4xx,
    /// 5xx) is returned as the [`Error`] it maps to, before `sink.begin`; a body that ends
    /// before its head's `content_length` is a retryable `Transport` error.
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()>;
}

/// A part uploaded: what CompleteMultipartUpload names it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedPart {
    /// 1 to 10,000.
    pub number: u32,
    /// The ETag the store answered the part with.
    pub etag: String,
    /// The checksum it was sent with, if any (repeated in Complete, as S3 asks).
    pub checksum: Option<Crc>,
    /// Its length, when the uploader knows it (not through object_store's `PartId`): the
    /// completed object's size is checked against the parts' sum.
    pub size: Option<u64>,
}

/// Uploads asked for per ListMultipartUploads page (S3's most).
pub const MAX_UPLOADS_PAGE: usize = 1000;

/// The most keys one DeleteObjects request may name (S3's limit).
pub const MAX_DELETE_BATCH: usize = 1000;

/// The error for one key of a DeleteObjects answer that the server did not delete: its S3
/// code and message (the answer has no status per key; one is inferred from the code so
/// the error is the kind a DeleteObject refused the same way would be).
pub fn delete_refused(uri: &ObjectUri, code: &str, message: &str) -> Error {
    let status = match code {
        "AccessDenied" | "AllAccessDisabled" => 403,
        "NoSuchBucket" | "NoSuchKey" => 404,
        "SlowDown" => 503,
        "InternalError" => 500,
        _ => 400,
    };
    Error::from_service(uri.to_string(), status, code, message, None)
}

/// A backend whose wire is built from configuration alone, so `S3Store::new(cfg)` makes it.
pub trait WireFromConfig: Wire + Sized {
    /// Builds the wire (its client, connection pool, TLS roots) for `cfg`; errors when
    /// `cfg` cannot be used (an unreadable CA bundle, say).
    fn from_config(cfg: StoreConfig) -> Result<Self>;
}
