//! The policy layer: a backend implements [`Wire`] (one attempt of each S3 call, in its client
//! library's terms) and [`S3Store`](crate::S3Store) turns it into an [`ObjectStore`](crate::ObjectStore), writing every rule of a
//! request once — the retry budget, resumption and version pinning of bodies, the
//! multipart threshold and upload loop, pagination, and the bound on requests in flight.
//!
//! The split follows Apache object_store's `GetClient`/`GetClientExt`: what differs between
//! client stacks (building a request, reading its answer, mapping the library's typed errors
//! to ours) is the wire; what must not differ is here.

use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, UploadMarker, UploadsPage};
use crate::multipart::MultipartApi;
use crate::resume::GetAttempt;
use crate::store::PutInfo;
use crate::uri::ObjectUri;
use async_trait::async_trait;

/// One attempt of each S3 operation, as a client stack makes it: no retries, no resumption,
/// no pagination (those are [`S3Store`](crate::S3Store)'s). Timeouts that only the stack can see (connect,
/// first byte) are the wire's; errors are mapped to [`Error`] kinds by type, status and S3
/// code. The GET attempt ([`GetAttempt`]) and the multipart calls (`MultipartApi`, whose
/// `head_object` is the single HEAD attempt) are the two halves defined where their policy
/// lives.
#[async_trait]
pub trait Wire: GetAttempt + MultipartApi + std::fmt::Debug {
    /// The backend's name as `S3_BACKEND` spells it.
    fn backend(&self) -> &'static str;

    /// The configuration the wire was built from: [`S3Store`](crate::S3Store) takes its policy from it.
    fn config(&self) -> &StoreConfig;

    /// What each endpoint has served ([`Spread`](crate::Spread)); empty for a wire of one endpoint.
    fn endpoint_stats(&self) -> Vec<crate::store::EndpointStats> {
        Vec::new()
    }

    /// One ListObjectsV2 page of keys under `prefix`'s key, as `opts` asks.
    async fn list_page(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage>;

    /// One DeleteObject.
    async fn delete_once(&self, uri: &ObjectUri) -> Result<()>;

    /// One DeleteObjects request for `uris`, all in one bucket and at most
    /// `MAX_DELETE_BATCH` of them ([`S3Store`](crate::S3Store) batches them so): the objects the server
    /// answered it did not delete, each as an error (`delete_refused`).
    async fn delete_batch_once(&self, uris: &[ObjectUri]) -> Result<Vec<Error>>;

    /// One CopyObject: the server makes `to` a copy of `from`. `Ok(None)`: this client
    /// stack cannot ask for this copy (see `ObjectStore::copy`).
    async fn copy_once(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>>;

    /// One ListMultipartUploads page of the uploads in progress under `prefix`'s key, after
    /// `from` (the previous page's markers; `None`: the first page). A client stack that
    /// cannot ask refuses (`store::unsupported`).
    async fn list_uploads_page(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage>;
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
