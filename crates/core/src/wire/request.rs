//! Every S3 operation but GetObject as a value: one [`Request`] (what to send), one [`Reply`]
//! (what came back), and one method that sends it ([`Operations::send`]). A layer over the
//! wire (the limiter, redirects, several endpoints, injected faults) handles every operation
//! in that one method, so a new operation is a variant here and a case in each backend, not
//! a method forwarded through every layer. [`OperationsExt`] gives callers the typed calls
//! (`head_object(uri)` and the rest), as object_store's `GetClientExt` does over its
//! `GetClient`.
//!
//! GetObject stays apart ([`GetWire`](super::GetWire)): its body streams into the caller's
//! sink as it arrives, which no reply value could do without a copy.

use crate::checksum::Crc;
pub use crate::congestion::Kind;
use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, UploadMarker, UploadsPage};
use crate::object::{ObjectMeta, PutInfo};
use crate::put_options::{PutMode, PutOptions};
use crate::uri::ObjectUri;
use async_trait::async_trait;
use bytes::Bytes;

use super::UploadedPart;

/// The S3 operations sluice sends, by their S3 names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// GetObject (sent through [`GetWire`](super::GetWire), not as a [`Request`]).
    GetObject,
    /// HeadObject.
    HeadObject,
    /// ListObjectsV2.
    ListObjectsV2,
    /// PutObject.
    PutObject,
    /// CreateMultipartUpload.
    CreateMultipartUpload,
    /// UploadPart.
    UploadPart,
    /// CompleteMultipartUpload.
    CompleteMultipartUpload,
    /// AbortMultipartUpload.
    AbortMultipartUpload,
    /// DeleteObject.
    DeleteObject,
    /// DeleteObjects.
    DeleteObjects,
    /// CopyObject.
    CopyObject,
    /// ListMultipartUploads.
    ListMultipartUploads,
    /// HeadBucket.
    HeadBucket,
}

impl Operation {
    /// The operation's S3 name.
    pub fn name(self) -> &'static str {
        match self {
            Self::GetObject => "GetObject",
            Self::HeadObject => "HeadObject",
            Self::ListObjectsV2 => "ListObjectsV2",
            Self::PutObject => "PutObject",
            Self::CreateMultipartUpload => "CreateMultipartUpload",
            Self::UploadPart => "UploadPart",
            Self::CompleteMultipartUpload => "CompleteMultipartUpload",
            Self::AbortMultipartUpload => "AbortMultipartUpload",
            Self::DeleteObject => "DeleteObject",
            Self::DeleteObjects => "DeleteObjects",
            Self::CopyObject => "CopyObject",
            Self::ListMultipartUploads => "ListMultipartUploads",
            Self::HeadBucket => "HeadBucket",
        }
    }

    /// How the store rates it.
    pub fn kind(self) -> Kind {
        match self {
            Self::GetObject => Kind::Read,
            Self::HeadObject
            | Self::ListObjectsV2
            | Self::ListMultipartUploads
            | Self::HeadBucket => Kind::Meta,
            Self::PutObject
            | Self::CreateMultipartUpload
            | Self::UploadPart
            | Self::CompleteMultipartUpload
            | Self::AbortMultipartUpload
            | Self::DeleteObject
            | Self::DeleteObjects
            | Self::CopyObject => Kind::Write,
        }
    }
}

/// One attempt of an S3 operation other than GetObject: its parameters, borrowed from the
/// caller (a body is a `Bytes`, shared, never copied). Cloned to send it again (a redirect).
#[derive(Debug, Clone)]
pub enum Request<'a> {
    /// HeadObject: the object's size, ETag and attributes. A missing object is
    /// `Error::NotFound`. [`Reply::Meta`].
    HeadObject {
        /// The object.
        uri: &'a ObjectUri,
    },
    /// ListObjectsV2: one page of keys under `prefix`'s key, as `opts` asks. [`Reply::Page`].
    ListObjectsV2 {
        /// The bucket and key prefix.
        prefix: &'a ObjectUri,
        /// Delimiter, start, page size.
        opts: &'a ListOptions,
    },
    /// PutObject: one PUT of a whole object, with `opts`' condition and attributes, and
    /// `checksum` for the store to check (a stack that cannot send one ignores it; a
    /// condition or attributes it cannot send are refused, never dropped). [`Reply::ETag`].
    PutObject {
        /// The object.
        uri: &'a ObjectUri,
        /// Its bytes.
        data: Bytes,
        /// Their CRC64NVME.
        checksum: Option<Crc>,
        /// Condition and attributes.
        opts: &'a PutOptions,
    },
    /// CreateMultipartUpload, the object to carry `opts.attributes`; with `checksummed`, the
    /// parts and whole object carry CRC64NVME checksums. `opts.mode` is sent only with
    /// Complete, but a stack that cannot send it there refuses here, before any part is
    /// uploaded. [`Reply::UploadId`].
    CreateMultipartUpload {
        /// The object.
        uri: &'a ObjectUri,
        /// Whether parts carry checksums.
        checksummed: bool,
        /// Condition and attributes.
        opts: &'a PutOptions,
    },
    /// UploadPart: [`Reply::ETag`], the ETag the response carried (the upload loop turns a
    /// missing one into an error).
    UploadPart {
        /// The object.
        uri: &'a ObjectUri,
        /// The upload.
        upload_id: &'a str,
        /// 1 to 10,000.
        part_number: u32,
        /// The part's bytes.
        data: Bytes,
        /// Their CRC64NVME.
        checksum: Option<Crc>,
    },
    /// CompleteMultipartUpload of `parts` in order; `checksum` is the whole object's; the
    /// object appears only if `mode` allows. [`Reply::ETag`].
    CompleteMultipartUpload {
        /// The object.
        uri: &'a ObjectUri,
        /// The upload.
        upload_id: &'a str,
        /// Its parts, in order.
        parts: &'a [UploadedPart],
        /// The whole object's CRC64NVME.
        checksum: Option<Crc>,
        /// The condition the object appears under.
        mode: &'a PutMode,
    },
    /// AbortMultipartUpload: deletes the parts uploaded so far, which would otherwise be kept
    /// (and billed) by the store. [`Reply::Done`].
    AbortMultipartUpload {
        /// The object.
        uri: &'a ObjectUri,
        /// The upload.
        upload_id: &'a str,
    },
    /// DeleteObject. [`Reply::Done`].
    DeleteObject {
        /// The object.
        uri: &'a ObjectUri,
    },
    /// DeleteObjects, all in one bucket and at most [`MAX_DELETE_BATCH`](super::MAX_DELETE_BATCH)
    /// of them: [`Reply::NotDeleted`], the objects the server answered it did not delete,
    /// each as an error ([`delete_refused`](super::delete_refused)).
    DeleteObjects {
        /// The objects.
        uris: &'a [ObjectUri],
    },
    /// CopyObject: the server makes `to` a copy of `from`. [`Reply::Copied`], `None` where
    /// this client stack cannot ask for this copy (see `ObjectStoreExt::copy`).
    CopyObject {
        /// The source.
        from: &'a ObjectUri,
        /// The destination, whose bucket the request is sent to.
        to: &'a ObjectUri,
    },
    /// ListMultipartUploads: one page of the uploads in progress under `prefix`'s key, after
    /// `from` (`None`: the first page). [`Reply::Uploads`]. A client stack that cannot ask
    /// refuses (`store::unsupported`).
    ListMultipartUploads {
        /// The bucket and key prefix.
        prefix: &'a ObjectUri,
        /// The previous page's markers.
        from: Option<UploadMarker>,
    },
    /// HeadBucket: whether the bucket exists and may be read. A missing bucket is
    /// `Error::NotFound`. [`Reply::Done`].
    HeadBucket {
        /// The bucket (the key is not sent).
        bucket: &'a ObjectUri,
    },
}

impl Request<'_> {
    /// Which operation this is.
    pub fn operation(&self) -> Operation {
        match self {
            Self::HeadObject { .. } => Operation::HeadObject,
            Self::ListObjectsV2 { .. } => Operation::ListObjectsV2,
            Self::PutObject { .. } => Operation::PutObject,
            Self::CreateMultipartUpload { .. } => Operation::CreateMultipartUpload,
            Self::UploadPart { .. } => Operation::UploadPart,
            Self::CompleteMultipartUpload { .. } => Operation::CompleteMultipartUpload,
            Self::AbortMultipartUpload { .. } => Operation::AbortMultipartUpload,
            Self::DeleteObject { .. } => Operation::DeleteObject,
            Self::DeleteObjects { .. } => Operation::DeleteObjects,
            Self::CopyObject { .. } => Operation::CopyObject,
            Self::ListMultipartUploads { .. } => Operation::ListMultipartUploads,
            Self::HeadBucket { .. } => Operation::HeadBucket,
        }
    }

    /// The operation's S3 name.
    pub fn name(&self) -> &'static str {
        self.operation().name()
    }

    /// How the store rates it.
    pub fn kind(&self) -> Kind {
        self.operation().kind()
    }

    /// The object (or prefix) the request is about, what its errors name: a copy's
    /// destination, a batch's first object (`None` for an empty batch).
    pub fn uri(&self) -> Option<&ObjectUri> {
        match self {
            Self::HeadObject { uri }
            | Self::PutObject { uri, .. }
            | Self::CreateMultipartUpload { uri, .. }
            | Self::UploadPart { uri, .. }
            | Self::CompleteMultipartUpload { uri, .. }
            | Self::AbortMultipartUpload { uri, .. }
            | Self::DeleteObject { uri } => Some(uri),
            Self::ListObjectsV2 { prefix, .. } | Self::ListMultipartUploads { prefix, .. } => {
                Some(prefix)
            }
            Self::CopyObject { to, .. } => Some(to),
            Self::HeadBucket { bucket } => Some(bucket),
            Self::DeleteObjects { uris } => uris.first(),
        }
    }

    /// The bucket the request is sent to ("" for an empty batch).
    pub fn bucket(&self) -> &str {
        self.uri().map_or("", ObjectUri::bucket)
    }

    /// Bytes of body the request carries (a PUT's or a part's; 0 for the rest).
    pub fn body_len(&self) -> u64 {
        match self {
            Self::PutObject { data, .. } | Self::UploadPart { data, .. } => data.len() as u64,
            _ => 0,
        }
    }
}

/// What the store answered a [`Request`]; each request's docs name its reply.
#[derive(Debug)]
pub enum Reply {
    /// An answer with nothing in it.
    Done,
    /// An object's metadata.
    Meta(ObjectMeta),
    /// The ETag an answer carried, if it did.
    ETag(Option<String>),
    /// A new multipart upload's ID.
    UploadId(String),
    /// A page of a listing.
    Page(ListPage),
    /// A page of uploads in progress.
    Uploads(UploadsPage),
    /// The objects of a batch the server did not delete.
    NotDeleted(Vec<Error>),
    /// A copy's result.
    Copied(Option<PutInfo>),
}

/// Sends a [`Request`], one attempt: no retries, no pagination (those are
/// [`S3Store`](crate::S3Store)'s). Timeouts that only the stack can see (connect, first
/// byte) are the sender's; errors are mapped to [`Error`] kinds by type, status and S3 code.
#[async_trait]
pub trait Operations: Send + Sync {
    /// Sends `req` and returns the store's answer to it.
    async fn send(&self, req: Request<'_>) -> Result<Reply>;
}

/// The error for a reply that does not answer its request: a backend's mistake, reported
/// rather than trusted.
fn mismatched(op: Operation, reply: &Reply) -> Error {
    Error::integrity(
        op.name(),
        format!("the client stack answered {} with {reply:?}", op.name()),
    )
}

macro_rules! expect_reply {
    ($op:expr, $reply:expr, $pat:pat => $out:expr) => {
        match $reply {
            $pat => Ok($out),
            other => Err(mismatched($op, &other)),
        }
    };
}

/// The typed calls over [`Operations::send`], one per operation, each building its
/// [`Request`] and taking its [`Reply`] apart.
#[async_trait]
pub trait OperationsExt: Operations {
    /// HeadObject ([`Request::HeadObject`]).
    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let reply = self.send(Request::HeadObject { uri }).await?;
        expect_reply!(Operation::HeadObject, reply, Reply::Meta(m) => m)
    }

    /// ListObjectsV2 ([`Request::ListObjectsV2`]).
    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let reply = self.send(Request::ListObjectsV2 { prefix, opts }).await?;
        expect_reply!(Operation::ListObjectsV2, reply, Reply::Page(p) => p)
    }

    /// PutObject ([`Request::PutObject`]).
    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        let req = Request::PutObject {
            uri,
            data,
            checksum,
            opts,
        };
        let reply = self.send(req).await?;
        expect_reply!(Operation::PutObject, reply, Reply::ETag(e) => e)
    }

    /// CreateMultipartUpload ([`Request::CreateMultipartUpload`]).
    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        let req = Request::CreateMultipartUpload {
            uri,
            checksummed,
            opts,
        };
        let reply = self.send(req).await?;
        expect_reply!(Operation::CreateMultipartUpload, reply, Reply::UploadId(id) => id)
    }

    /// UploadPart ([`Request::UploadPart`]).
    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        let req = Request::UploadPart {
            uri,
            upload_id,
            part_number,
            data,
            checksum,
        };
        let reply = self.send(req).await?;
        expect_reply!(Operation::UploadPart, reply, Reply::ETag(e) => e)
    }

    /// CompleteMultipartUpload ([`Request::CompleteMultipartUpload`]).
    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        let req = Request::CompleteMultipartUpload {
            uri,
            upload_id,
            parts,
            checksum,
            mode,
        };
        let reply = self.send(req).await?;
        expect_reply!(Operation::CompleteMultipartUpload, reply, Reply::ETag(e) => e)
    }

    /// AbortMultipartUpload ([`Request::AbortMultipartUpload`]).
    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let reply = self
            .send(Request::AbortMultipartUpload { uri, upload_id })
            .await?;
        expect_reply!(Operation::AbortMultipartUpload, reply, Reply::Done => ())
    }

    /// DeleteObject ([`Request::DeleteObject`]).
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        let reply = self.send(Request::DeleteObject { uri }).await?;
        expect_reply!(Operation::DeleteObject, reply, Reply::Done => ())
    }

    /// DeleteObjects ([`Request::DeleteObjects`]).
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let reply = self.send(Request::DeleteObjects { uris }).await?;
        expect_reply!(Operation::DeleteObjects, reply, Reply::NotDeleted(e) => e)
    }

    /// CopyObject ([`Request::CopyObject`]).
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let reply = self.send(Request::CopyObject { from, to }).await?;
        expect_reply!(Operation::CopyObject, reply, Reply::Copied(c) => c)
    }

    /// ListMultipartUploads ([`Request::ListMultipartUploads`]).
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        let reply = self
            .send(Request::ListMultipartUploads { prefix, from })
            .await?;
        expect_reply!(Operation::ListMultipartUploads, reply, Reply::Uploads(u) => u)
    }

    /// HeadBucket ([`Request::HeadBucket`]).
    async fn head_bucket(&self, bucket: &ObjectUri) -> Result<()> {
        let reply = self.send(Request::HeadBucket { bucket }).await?;
        expect_reply!(Operation::HeadBucket, reply, Reply::Done => ())
    }
}

impl<T: Operations + ?Sized> OperationsExt for T {}

/// What a client stack (or a test double) implements: one method per operation, each one
/// attempt, which [`Operations::send`] calls by the request's variant. An operation a stack
/// does not offer keeps the default: a clear refusal naming it, never a silent fallback.
#[async_trait]
pub trait Handlers: Send + Sync {
    /// The stack's name, for refusals (`Wire::backend`).
    fn stack(&self) -> &'static str;

    /// [`Request::HeadObject`].
    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        Err(refused(self.stack(), Operation::HeadObject, uri))
    }

    /// [`Request::ListObjectsV2`].
    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let _ = opts;
        Err(refused(self.stack(), Operation::ListObjectsV2, prefix))
    }

    /// [`Request::PutObject`].
    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        let _ = (data, checksum, opts);
        Err(refused(self.stack(), Operation::PutObject, uri))
    }

    /// [`Request::CreateMultipartUpload`].
    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        let _ = (checksummed, opts);
        Err(refused(self.stack(), Operation::CreateMultipartUpload, uri))
    }

    /// [`Request::UploadPart`].
    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        let _ = (upload_id, part_number, data, checksum);
        Err(refused(self.stack(), Operation::UploadPart, uri))
    }

    /// [`Request::CompleteMultipartUpload`].
    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        let _ = (upload_id, parts, checksum, mode);
        Err(refused(
            self.stack(),
            Operation::CompleteMultipartUpload,
            uri,
        ))
    }

    /// [`Request::AbortMultipartUpload`].
    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let _ = upload_id;
        Err(refused(self.stack(), Operation::AbortMultipartUpload, uri))
    }

    /// [`Request::DeleteObject`].
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        Err(refused(self.stack(), Operation::DeleteObject, uri))
    }

    /// [`Request::DeleteObjects`].
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        match uris.first() {
            Some(uri) => Err(refused(self.stack(), Operation::DeleteObjects, uri)),
            None => Ok(Vec::new()),
        }
    }

    /// [`Request::CopyObject`].
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let _ = from;
        Err(refused(self.stack(), Operation::CopyObject, to))
    }

    /// [`Request::ListMultipartUploads`].
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        let _ = from;
        Err(refused(
            self.stack(),
            Operation::ListMultipartUploads,
            prefix,
        ))
    }

    /// [`Request::HeadBucket`].
    async fn head_bucket(&self, bucket: &ObjectUri) -> Result<()> {
        Err(refused(self.stack(), Operation::HeadBucket, bucket))
    }
}

/// The refusal of an operation a stack does not offer.
fn refused(stack: &str, op: Operation, uri: &ObjectUri) -> Error {
    Error::unsupported(uri.to_string(), stack, op.name())
}

#[async_trait]
impl<T: Handlers> Operations for T {
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        Ok(match req {
            Request::HeadObject { uri } => Reply::Meta(self.head_object(uri).await?),
            Request::ListObjectsV2 { prefix, opts } => {
                Reply::Page(self.list_objects_v2(prefix, opts).await?)
            }
            Request::PutObject {
                uri,
                data,
                checksum,
                opts,
            } => Reply::ETag(self.put_object(uri, data, checksum, opts).await?),
            Request::CreateMultipartUpload {
                uri,
                checksummed,
                opts,
            } => Reply::UploadId(self.create_multipart_upload(uri, checksummed, opts).await?),
            Request::UploadPart {
                uri,
                upload_id,
                part_number,
                data,
                checksum,
            } => Reply::ETag(
                self.upload_part(uri, upload_id, part_number, data, checksum)
                    .await?,
            ),
            Request::CompleteMultipartUpload {
                uri,
                upload_id,
                parts,
                checksum,
                mode,
            } => Reply::ETag(
                self.complete_multipart_upload(uri, upload_id, parts, checksum, mode)
                    .await?,
            ),
            Request::AbortMultipartUpload { uri, upload_id } => {
                self.abort_multipart_upload(uri, upload_id).await?;
                Reply::Done
            }
            Request::DeleteObject { uri } => {
                self.delete_object(uri).await?;
                Reply::Done
            }
            Request::DeleteObjects { uris } => Reply::NotDeleted(self.delete_objects(uris).await?),
            Request::CopyObject { from, to } => Reply::Copied(self.copy_object(from, to).await?),
            Request::ListMultipartUploads { prefix, from } => {
                Reply::Uploads(self.list_multipart_uploads(prefix, from).await?)
            }
            Request::HeadBucket { bucket } => {
                self.head_bucket(bucket).await?;
                Reply::Done
            }
        })
    }
}
