//! The [`ObjectStore`] trait every backend implements.

use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, Upload, paginate};
use crate::multipart::no_such_upload;
pub use crate::object::{
    GetInfo, GetOptions, ListEntry, MAX_COPY_SIZE, ObjectMeta, PutInfo, PutPayload,
};
use crate::put_options::PutOptions;
use crate::range::ByteRange;
use crate::ranges::RangesOptions;
use crate::retry::RetryPolicy;
use crate::segment::Segment;
use crate::upload::{ObjectWriter, WriteOptions};
use crate::uri::ObjectUri;
use crate::wire::{MAX_DELETE_BATCH, Operations, OperationsExt, Reply, Request};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use std::ops::Range;

/// One async interface to every store: the S3 backends (each client stack, through
/// [`S3Store`](crate::S3Store)) and the file system (`file://`, `direct://`). The loader and the front ends
/// reach storage only through `Arc<dyn ObjectStore>`.
///
/// A caller makes each call once: implementations retry transient failures under the
/// configured [`RetryPolicy`](crate::RetryPolicy), resume broken bodies pinned to one version, and split large
/// uploads into parts. Failures are [`Error`] kinds, the same whichever backend met them.
#[async_trait]
pub trait ObjectStore: Send + Sync + std::fmt::Debug + 'static {
    /// The backend's name as `S3_BACKEND` spells it.
    fn backend(&self) -> &'static str;

    /// What each endpoint has served, for a store over several (`StoreConfig::endpoints`);
    /// empty for one that does not count per endpoint.
    fn endpoint_stats(&self) -> Vec<crate::object::EndpointStats> {
        Vec::new()
    }

    /// Requests in flight allowed now and the throttles that set it (`congestion`); `None`
    /// for a store that sends no requests (`file://`).
    fn congestion(&self) -> Option<crate::congestion::CongestionStats> {
        None
    }

    /// The job about to start has `requests` ready to send at once
    /// ([`RangeSize::requests_at_once`](crate::RangeSize::requests_at_once)): a client that
    /// searches its requests in flight may start from there (`congestion`). Nothing for a
    /// store without a controller.
    fn expect_requests(&self, requests: usize) {
        let _ = requests;
    }

    /// Streams the object, or `opts.range` of it, into `dst`; returns what was written. Each
    /// body byte is copied once, from the network buffer into `dst` (or only counted, into a
    /// `Segment::counting`). A fixed-length `dst` must match the response length exactly; a
    /// body cut short is resumed (see `resume`).
    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo>;

    /// Lists keys starting with `prefix`'s key, page by page. `recursive = false` groups keys
    /// below the next `/` into `ListEntry::Prefix`.
    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>>;

    /// `put` with a condition and the headers to store with the object. A store that
    /// cannot honour `opts` refuses (`unsupported`), never writes without it.
    async fn put_opts(
        &self,
        uri: &ObjectUri,
        data: PutPayload,
        opts: &PutOptions,
    ) -> Result<PutInfo>;

    /// A streaming upload of `uri`: bytes are sent in parts as they are written, with
    /// memory bounded by the options (see `upload`). Nothing is visible before `finish`.
    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>>;

    /// `uri`'s store's multipart calls, for a caller that uploads part by part itself;
    /// `None` where the store has no multipart uploads (a file system).
    fn multipart(&self, uri: &ObjectUri) -> Option<crate::multipart::Multipart> {
        let _ = uri;
        None
    }

    /// Any operation but GetObject, as a [`Request`] value, under the store's policy (its
    /// retries, its bound on requests in flight): HEAD, LIST, DELETE, CopyObject and the
    /// rest, which [`ObjectStoreExt`] offers as typed calls. A request whose attempt fails
    /// retryably is sent again, so send only what a repeat cannot harm; the writes have
    /// methods of their own (`put_opts`, `writer`) that know what a lost answer means. An
    /// operation the store does not offer is refused, naming it.
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        let what = req.name();
        Err(match req.uri() {
            Some(uri) => unsupported(self.backend(), uri, what),
            None => Error::config(
                what,
                format!("the {} store does not send it", self.backend()),
            ),
        })
    }
}

/// The typed calls over [`ObjectStore`]'s methods, for every store (as object_store's
/// `GetClientExt`): a store implements the methods that carry policy (`send` among them),
/// and a layer over stores (the scheme router) forwards only those.
#[async_trait]
pub trait ObjectStoreExt: ObjectStore {
    /// `get_into_with` of any version.
    async fn get_into(
        &self,
        uri: &ObjectUri,
        range: Option<ByteRange>,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        self.get_into_with(uri, &GetOptions::range(range), dst)
            .await
    }

    /// The object, or `opts.range` of it (clipped at the object's end, as S3 does), of the
    /// version `opts.if_match` pins when given, as one buffer.
    async fn get_with(&self, uri: &ObjectUri, opts: &GetOptions) -> Result<Bytes> {
        // Growable: S3 answers a range that runs past the end with the bytes that exist.
        let mut seg = Segment::growable();
        self.get_into_with(uri, opts, &mut seg).await?;
        seg.freeze()
            .map_err(|e| crate::Error::integrity(uri.to_string(), e.to_string()))
    }

    /// `get_with` of any version.
    async fn get(&self, uri: &ObjectUri, range: Option<ByteRange>) -> Result<Bytes> {
        self.get_with(uri, &GetOptions::range(range)).await
    }

    /// `ranges` of the object, each as its own buffer in the order asked: ranges at most
    /// 1 MiB apart read by one request, all requests at once, every range a slice of its
    /// request's buffer (no copy), all of one version (see `RangesOptions`). Overlapping,
    /// unsorted and empty ranges are allowed; a range past the end is clipped to it, one that
    /// starts at or past the end is an error, as in object_store's `get_ranges`.
    async fn get_ranges(&self, uri: &ObjectUri, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.get_ranges_with(uri, ranges, &RangesOptions::default())
            .await
    }

    /// `get_ranges` with its gap, range size and version set.
    async fn get_ranges_with(
        &self,
        uri: &ObjectUri,
        ranges: &[Range<u64>],
        opts: &RangesOptions,
    ) -> Result<Vec<Bytes>> {
        crate::ranges::get_ranges(uri, ranges, opts, |o, mut seg| async move {
            let info = self.get_into_with(uri, &o, &mut seg).await?;
            Ok((seg, info))
        })
        .await
    }

    /// Uploads `data`; multipart at or above the configured threshold.
    async fn put(&self, uri: &ObjectUri, data: PutPayload) -> Result<PutInfo> {
        self.put_opts(uri, data, &PutOptions::default()).await
    }

    /// The object's size, ETag and modification time, without its body (HeadObject). A
    /// missing object is `Error::NotFound`.
    async fn head(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        Policy(self).head_object(uri).await
    }

    /// Deletes the object (DeleteObject). Deleting one that does not exist succeeds, as on S3.
    async fn delete(&self, uri: &ObjectUri) -> Result<()> {
        Policy(self).delete_object(uri).await
    }

    /// Deletes every object of `uris` as DeleteObjects requests of up to 1,000 objects of one
    /// store and bucket, one after another; each is retried whole (deleting twice is
    /// harmless). `Ok` holds the objects the store refused to delete, each with its reason
    /// (not retried: S3 refuses a key for a reason that holds, access or a lock, not for
    /// load); `Err` is a request that failed as a whole, which ends the call: objects after
    /// it may remain.
    async fn delete_many(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let mut refused = Vec::new();
        for batch in delete_batches(uris) {
            refused.extend(Policy(self).delete_objects(batch).await?);
        }
        Ok(refused)
    }

    /// Makes `to` a copy of `from` inside the store, without the bytes passing through this
    /// process (CopyObject). One CopyObject copies at most `MAX_COPY_SIZE` bytes, which
    /// callers check. `Ok(None)`: this store cannot copy on its side (a file system, two
    /// stores, a client stack that cannot ask); the caller copies through itself.
    async fn copy(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        Policy(self).copy_object(from, to).await
    }

    /// One page of a listing (ListObjectsV2), as `opts` asks: for callers that page
    /// themselves (object_store's `PaginatedListStore`). A store without pages refuses.
    async fn list_page(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        Policy(self).list_objects_v2(prefix, opts).await
    }

    /// The multipart uploads in progress under `prefix`'s key (ListMultipartUploads, page by
    /// page): what writers killed mid-upload left. A store without them refuses.
    fn list_uploads(&self, prefix: &ObjectUri) -> BoxStream<'_, Result<Upload>> {
        // Each page is retried by `send`, under the store's own policy.
        static ONCE: RetryPolicy = RetryPolicy::none();
        let prefix = prefix.clone();
        paginate(&ONCE, move |from| {
            let prefix = prefix.clone();
            async move { Policy(self).list_multipart_uploads(&prefix, from).await }
        })
    }

    /// Aborts an upload in progress (AbortMultipartUpload): its parts are deleted, no object
    /// appears. Aborting one that is gone (completed or aborted since it was listed) succeeds.
    async fn abort_upload(&self, upload: &Upload) -> Result<()> {
        let policy = Policy(self);
        match policy
            .abort_multipart_upload(&upload.uri, &upload.upload_id)
            .await
        {
            // Completed or aborted since it was listed: nothing is left of it either way.
            Err(e) if no_such_upload(&e) => Ok(()),
            r => r,
        }
    }
}

/// `uris` cut into DeleteObjects batches: runs of one scheme and bucket, `MAX_DELETE_BATCH`
/// at most.
fn delete_batches(uris: &[ObjectUri]) -> impl Iterator<Item = &[ObjectUri]> {
    uris.chunk_by(|a, b| a.scheme() == b.scheme() && a.bucket() == b.bucket())
        .flat_map(|run| run.chunks(MAX_DELETE_BATCH))
}

/// A store's `send` as [`Operations`], so that [`OperationsExt`]'s typed calls, and their
/// checks of each reply, serve stores as they serve wires.
struct Policy<'a, S: ?Sized>(&'a S);

#[async_trait]
impl<S: ObjectStore + ?Sized> Operations for Policy<'_, S> {
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        self.0.send(req).await
    }
}

impl<T: ObjectStore + ?Sized> ObjectStoreExt for T {}

/// `store`'s listing of `prefix` as a channel that owns it: `ObjectStore::list` borrows its
/// store, so a consumer that must own its stream (a Python iterator, object_store's
/// `'static` list) gets one from a task on the current runtime, which pages ahead by at most
/// `ahead` entries, ends after the first error, and stops when the receiver is dropped.
/// Must be called within a tokio runtime.
pub fn spawn_list(
    store: std::sync::Arc<dyn ObjectStore>,
    prefix: ObjectUri,
    recursive: bool,
    ahead: usize,
) -> tokio::sync::mpsc::Receiver<Result<ListEntry>> {
    let (tx, rx) = tokio::sync::mpsc::channel(ahead.max(1));
    tokio::spawn(async move {
        let mut entries = store.list(&prefix, recursive);
        while let Some(e) = entries.next().await {
            let failed = e.is_err();
            if tx.send(e).await.is_err() || failed {
                break;
            }
        }
    });
    rx
}

/// The error of an operation a store does not offer.
pub fn unsupported(backend: &str, uri: &ObjectUri, what: &str) -> Error {
    Error::unsupported(uri.to_string(), backend, what)
}
