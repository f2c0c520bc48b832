//! The wire: one attempt of each S3 operation, in a client stack's terms, and what wraps a
//! wire without changing what it is ([`redirect`]: regions that moved; [`spread`]: several
//! endpoints). A backend implements the three traits here — every S3 operation sluice makes is
//! named in them, after its S3 name — and [`S3Store`](crate::S3Store) turns the result into
//! an [`ObjectStore`](crate::ObjectStore), writing every rule of a request once: the retry
//! budget, resumption and version pinning of bodies, the multipart threshold and upload
//! loop, pagination, and the bound on requests in flight.
//!
//! The split follows Apache object_store's `GetClient`/`GetClientExt`: what differs between
//! client stacks (building a request, reading its answer, mapping the library's typed errors
//! to ours) is the wire; what must not differ is above it. A wrapper forwards every method
//! (`#[deny(clippy::missing_trait_methods)]` on each forwarding impl), so a method added
//! here cannot silently fall back to a default in one of them. docs/design.md, "Adding an
//! S3 operation", lists the files a new operation touches.

pub mod get;
pub mod redirect;
pub mod spread;

pub use crate::reply::{ErrorDoc, MAX_ERROR_BODY, error_reply};
pub use get::{BodySink, GetRequest, ResponseHead, parse_content_range};

use crate::checksum::Crc;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, UploadMarker, UploadsPage};
use crate::object::{EndpointStats, ObjectMeta, PutInfo};
use crate::put_options::{PutMode, PutOptions};
use crate::uri::ObjectUri;
use async_trait::async_trait;
use bytes::Bytes;

/// One attempt of each S3 operation, as a client stack makes it: no retries, no resumption,
/// no pagination (those are [`S3Store`](crate::S3Store)'s). Timeouts that only the stack can see (connect,
/// first byte) are the wire's; errors are mapped to [`Error`] kinds by type, status and S3
/// code. GetObject ([`GetWire`]) and the writes with HeadObject ([`PutWire`]) are traits of
/// their own so the policy that uses each alone can be tested against a fake of it.
#[async_trait]
pub trait Wire: GetWire + PutWire + std::fmt::Debug {
    /// The backend's name as `S3_BACKEND` spells it.
    fn backend(&self) -> &'static str;

    /// The configuration the wire was built from: [`S3Store`](crate::S3Store) takes its policy from it.
    fn config(&self) -> &StoreConfig;

    /// What each endpoint has served ([`Spread`](spread::Spread)); empty for a wire of one endpoint.
    fn endpoint_stats(&self) -> Vec<EndpointStats> {
        Vec::new()
    }

    /// ListObjectsV2: one page of keys under `prefix`'s key, as `opts` asks.
    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage>;

    /// DeleteObject.
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()>;

    /// DeleteObjects for `uris`, all in one bucket and at most [`MAX_DELETE_BATCH`] of them
    /// ([`S3Store`](crate::S3Store) batches them so): the objects the server answered it did
    /// not delete, each as an error ([`delete_refused`]).
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>>;

    /// CopyObject: the server makes `to` a copy of `from`. `Ok(None)`: this client stack
    /// cannot ask for this copy (see `ObjectStore::copy`).
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>>;

    /// ListMultipartUploads: one page of the uploads in progress under `prefix`'s key, after
    /// `from` (the previous page's markers; `None`: the first page). A client stack that
    /// cannot ask refuses (`store::unsupported`).
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage>;
}

/// GetObject, one attempt: send `req`, call `sink.begin` with the head, then `sink.write`
/// for each frame, and return once the body ended. Apart from [`Wire`] so that resumption
/// (`resume`) can be tested against a fake that only serves GETs.
#[async_trait]
pub trait GetWire: Send + Sync {
    /// Makes one attempt at `req`, writing its answer into `sink`. An error reply (4xx,
    /// 5xx) is returned as the [`Error`] it maps to, before `sink.begin`; a body that ends
    /// before its head's `content_length` is a retryable `Transport` error.
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()>;
}

/// The writes of a wire — PutObject and the four calls of a multipart upload — and
/// HeadObject, which tells a write that was applied but whose answer was lost from one
/// that never happened; one attempt each. Apart from [`Wire`] so that the upload loop
/// (`multipart`) can be tested against a fake that only takes writes. A `checksum` given is sent for the store to check the bytes against
/// (`checksum`'s module says why and how); a stack that cannot send one ignores it. A
/// condition ([`PutMode`]) or attributes a stack cannot send are refused (`store::unsupported`),
/// never dropped.
#[async_trait]
pub trait PutWire: Send + Sync + 'static {
    /// PutObject: one PUT of a whole object, with `opts`' condition and attributes. Returns its ETag.
    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>>;
    /// CreateMultipartUpload, the object to carry `opts.attributes`; with `checksummed`, the
    /// upload's parts and whole object will carry CRC64NVME checksums. Returns the upload id
    /// every later call of the upload names. `opts.mode` is sent only with Complete, but a
    /// stack that cannot send it there refuses here, before any part is uploaded.
    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String>;
    /// UploadPart: returns the ETag the response carried; the upload loop turns a missing
    /// one into an error.
    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>>;
    /// CompleteMultipartUpload of `parts` in order; `checksum` is the whole object's; the object appears only if
    /// `mode` allows. Returns the object's ETag.
    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>>;
    /// AbortMultipartUpload: deletes the parts uploaded so far, which would otherwise be
    /// kept (and billed) by the store.
    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()>;
    /// HeadObject: the object's size, ETag and attributes. A missing object is
    /// `Error::NotFound`.
    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta>;
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
