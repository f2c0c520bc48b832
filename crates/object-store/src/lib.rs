//! `object_store::ObjectStore` over sluice, for the Rust data systems built on Apache
//! object_store (DataFusion, Polars, Lance): one bucket, read and written through any of
//! sluice's client stacks with sluice's retries, resumption and version pinning.
//!
//! ```no_run
//! # async fn demo() -> sluice_core::Result<()> {
//! use std::sync::Arc;
//! let cfg = sluice_core::StoreConfig::from_env().await?;
//! let store = sluice_object_store::SluiceObjectStore::new(sluice::open(None, cfg)?, "bucket");
//! let store: Arc<dyn object_store::ObjectStore> = Arc::new(store);
//! # Ok(()) }
//! ```
//!
//! Conditional writes (`PutMode::Create`/`Update`) are S3's `If-None-Match: *` and `If-Match`
//! on PutObject and CompleteMultipartUpload; attributes (content headers, user metadata) are
//! stored with the object and returned on GET and HEAD; `MultipartStore` drives S3's
//! multipart calls and `PaginatedListStore` single ListObjectsV2 pages, with sluice's
//! retries. What it does not do (each an
//! `Error::NotImplemented` naming the operation): version ids, tags, delimiters other than
//! `/` in `PaginatedListStore`, attributes S3 has no
//! header for here (the storage class), and — on the objectstore backend only — conditional
//! writes large enough to go multipart (object_store keeps that condition to itself).
//!
//! A GET is a HEAD then a ranged GET pinned to the HEAD's ETag (If-Match): object_store's
//! result carries the object's size, modification time and attributes, and the two requests
//! cannot describe two versions. A copy is a server-side CopyObject for objects up to 5 GiB
//! where the store has it; larger objects, stores without it, and `CopyMode::Create` (S3's
//! CopyObject takes no condition on its target) are read and re-uploaded through this
//! process, the last with `If-None-Match: *`.

#![warn(missing_docs)]

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    Attributes, CopyMode, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload,
    ListResult, MultipartId, MultipartUpload, ObjectMeta, PutMode, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, TagSet, UploadPart,
};
use sluice_backend_objectstore::attributes::{from_object_store, to_object_store};
use sluice_core::Multipart;
use sluice_core::ObjectStoreExt;
use sluice_core::listing::ListOptions;
use sluice_core::wire::UploadedPart;
use sluice_core::{ByteRange, Error, ListEntry, ObjectUri, Segment, WriteOptions};
use std::ops::Range;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

const STORE: &str = "sluice";

/// Reads of an object replaced between its HEAD and its GET before the race is reported
/// (object_store's suite races five writers against each reader).
const VERSION_RACE_ATTEMPTS: u32 = 16;

/// One bucket of a sluice store as an `object_store::ObjectStore`.
#[derive(Debug, Clone)]
pub struct SluiceObjectStore {
    store: Arc<dyn sluice_core::ObjectStore>,
    bucket: String,
    parts: WriteOptions,
}

impl SluiceObjectStore {
    /// `bucket` of `store` (from `sluice::open`, any backend); multipart uploads in parts of
    /// the default size (`with_write_options` to change it).
    pub fn new(store: Arc<dyn sluice_core::ObjectStore>, bucket: impl Into<String>) -> Self {
        Self {
            store,
            bucket: bucket.into(),
            // Checksummed, the stores' default; a wire that cannot send them ignores it.
            parts: WriteOptions::with_part_size(sluice_core::config::DEFAULT_MULTIPART_PART_SIZE),
        }
    }

    /// How `put_multipart` cuts and sends parts (e.g. `WriteOptions::from_config`).
    pub fn with_write_options(mut self, parts: WriteOptions) -> Self {
        self.parts = parts;
        self
    }

    fn uri(&self, location: &Path) -> object_store::Result<ObjectUri> {
        ObjectUri::new(&self.bucket, location.as_ref()).map_err(|e| generic(e.into()))
    }

    /// The URI of a prefix: `location/`, or the bucket's root.
    fn prefix_uri(&self, prefix: Option<&Path>) -> object_store::Result<ObjectUri> {
        let key = match prefix.map(Path::as_ref) {
            None | Some("") => String::new(),
            Some(p) => format!("{p}/"),
        };
        ObjectUri::new(&self.bucket, &key).map_err(|e| generic(e.into()))
    }

    async fn meta(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        Ok(self.head_with_attributes(location).await?.0)
    }

    /// HEAD: the object's meta and the attributes stored with it.
    async fn head_with_attributes(
        &self,
        location: &Path,
    ) -> object_store::Result<(ObjectMeta, Attributes)> {
        let m = self
            .store
            .head(&self.uri(location)?)
            .await
            .map_err(|e| error(location, e))?;
        Ok((meta(location.clone(), &m), to_object_store(&m.attributes)))
    }

    /// `range` of exactly the version `meta` describes (If-Match on its ETag).
    async fn read_version(
        &self,
        uri: &ObjectUri,
        meta: &ObjectMeta,
        range: &Range<u64>,
    ) -> sluice_core::Result<Bytes> {
        let opts = sluice_core::GetOptions {
            range: Some(ByteRange::new(range.start, range.end)?),
            if_match: meta.e_tag.clone(),
        };
        let subject = uri.key();
        // The length is the server's word (HEAD): one no machine holds is an error.
        let mut seg = Segment::try_exact(range.end - range.start)
            .map_err(|e| Error::integrity(subject, e.to_string()))?;
        self.store.get_into_with(uri, &opts, &mut seg).await?;
        seg.freeze()
            .map_err(|e| Error::integrity(subject, e.to_string()))
    }

    /// Whether the object under `location` is no longer the version `meta` describes.
    async fn replaced(&self, location: &Path, meta: &ObjectMeta) -> bool {
        match self.meta(location).await {
            Ok(now) => now.e_tag != meta.e_tag,
            Err(object_store::Error::NotFound { .. }) => true,
            Err(_) => false,
        }
    }

    fn multipart(&self, location: &Path) -> object_store::Result<(ObjectUri, Multipart)> {
        let uri = self.uri(location)?;
        let m = self.store.multipart(&uri).ok_or_else(|| {
            not_implemented("MultipartStore on a store without multipart uploads")
        })?;
        Ok((uri, m))
    }
}

/// The write options of a put: tags are refused (S3 takes them, sluice does not send them
/// yet), as are attributes that have no S3 header here; never dropped.
fn write_options(
    mode: sluice_core::PutMode,
    tags: &TagSet,
    attributes: &Attributes,
) -> object_store::Result<sluice_core::PutOptions> {
    if !tags.encoded().is_empty() {
        return Err(not_implemented("tags"));
    }
    let (ours, left) = from_object_store(attributes);
    if let Some(a) = left.first() {
        return Err(not_implemented(&format!("the attribute {a:?}")));
    }
    Ok(sluice_core::PutOptions {
        mode,
        attributes: ours,
    })
}

impl std::fmt::Display for SluiceObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SluiceObjectStore({}, s3://{})",
            self.store.backend(),
            self.bucket
        )
    }
}

fn generic(source: Box<dyn std::error::Error + Send + Sync>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source,
    }
}

fn not_implemented(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: operation.to_owned(),
        implementer: "sluice".to_owned(),
    }
}

/// Ours as object_store's: a missing object is `NotFound`, a failed condition
/// `Precondition`, what the backend cannot do `NotImplemented`.
fn error(location: &Path, e: Error) -> object_store::Error {
    match e {
        Error::NotFound { .. } => object_store::Error::NotFound {
            path: location.to_string(),
            source: Box::new(e),
        },
        Error::Service { status: 412, .. } => object_store::Error::Precondition {
            path: location.to_string(),
            source: Box::new(e),
        },
        Error::Service { status: 501, .. } => object_store::Error::NotImplemented {
            operation: e.to_string(),
            implementer: "sluice".to_owned(),
        },
        e => generic(Box::new(e)),
    }
}

/// The error of a conditional write that lost: `Create` finds the key taken
/// (`AlreadyExists`); `Update` finds another version or none (`Precondition`, as object_store's
/// S3 store reports S3's 404 for a missing one).
fn write_error(location: &Path, mode: &sluice_core::PutMode, e: Error) -> object_store::Error {
    use sluice_core::PutMode as M;
    match (mode, e) {
        (M::Create, e) if e.is_precondition_failed() => object_store::Error::AlreadyExists {
            path: location.to_string(),
            source: Box::new(e),
        },
        (M::Update(_), e @ Error::NotFound { .. }) => object_store::Error::Precondition {
            path: location.to_string(),
            source: Box::new(e),
        },
        (_, e) => error(location, e),
    }
}

fn meta(location: Path, m: &sluice_core::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: m
            .last_modified
            .map(DateTime::<Utc>::from)
            .unwrap_or(DateTime::UNIX_EPOCH),
        size: m.size,
        e_tag: m.etag.clone(),
        version: None,
    }
}

/// The bytes `range` asks of an object of `size`, as object_store defines it (a bounded
/// range is clipped at the end; a start at or past the end is an error).
fn resolve(
    location: &Path,
    range: Option<&GetRange>,
    size: u64,
) -> object_store::Result<Range<u64>> {
    let out_of_range = |what: String| object_store::Error::Generic {
        store: STORE,
        source: format!("{location}: {what} of an object of {size} bytes").into(),
    };
    Ok(match range {
        None => 0..size,
        Some(GetRange::Bounded(r)) if r.start >= r.end => {
            return Err(out_of_range(format!("empty range {r:?}")));
        }
        Some(GetRange::Bounded(r)) if r.start >= size && size > 0 => {
            return Err(out_of_range(format!("range {r:?}")));
        }
        Some(GetRange::Bounded(r)) => r.start.min(size)..r.end.min(size),
        Some(GetRange::Offset(o)) if *o >= size && size > 0 => {
            return Err(out_of_range(format!("offset {o}")));
        }
        Some(GetRange::Offset(o)) => (*o).min(size)..size,
        Some(GetRange::Suffix(n)) => size.saturating_sub(*n)..size,
    })
}

#[async_trait]
impl object_store::ObjectStore for SluiceObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let mode = match opts.mode {
            PutMode::Overwrite => sluice_core::PutMode::Overwrite,
            PutMode::Create => sluice_core::PutMode::Create,
            PutMode::Update(v) => sluice_core::PutMode::Update(v.e_tag.ok_or_else(|| {
                generic(format!("{location}: PutMode::Update needs an ETag").into())
            })?),
        };
        let opts = write_options(mode, &opts.tags, &opts.attributes)?;
        let data: Bytes = payload.into();
        let info = self
            .store
            .put_opts(&self.uri(location)?, data.into(), &opts)
            .await
            .map_err(|e| write_error(location, &opts.mode, e))?;
        Ok(PutResult {
            e_tag: info.etag,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let uri = self.uri(location)?;
        let mut parts = self.parts.clone();
        parts.put = write_options(
            sluice_core::PutMode::Overwrite,
            &opts.tags,
            &opts.attributes,
        )?;
        let writer = self
            .store
            .writer(&uri, parts)
            .await
            .map_err(|e| error(location, e))?;
        Ok(Box::new(Upload::start(writer, location.clone())))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if options.version.is_some() {
            return Err(not_implemented("get_opts with a version"));
        }
        // The HEAD and the GET pinned to its ETag are two requests: an object replaced
        // between them (a concurrent writer, object_store's `PutMode::Update` loops) is read
        // again as the new version, a few times, rather than failed; a read that cannot
        // finish on one version keeps failing and is reported.
        let uri = self.uri(location)?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (meta, attributes) = self.head_with_attributes(location).await?;
            options.check_preconditions(&meta)?;
            let range = resolve(location, options.range.as_ref(), meta.size)?;
            let data = if options.head || range.is_empty() {
                Bytes::new()
            } else {
                match self.read_version(&uri, &meta, &range).await {
                    Ok(data) => data,
                    Err(_)
                        if attempts < VERSION_RACE_ATTEMPTS
                            && self.replaced(location, &meta).await =>
                    {
                        // Full jitter, growing to 100 ms: readers racing a busy writer
                        // spread out instead of meeting it again.
                        let cap = (1u64 << attempts.min(7)).min(100);
                        tokio::time::sleep(std::time::Duration::from_millis(fastrand::u64(
                            0..=cap,
                        )))
                        .await;
                        continue;
                    }
                    Err(e) => return Err(error(location, e)),
                }
            };
            return Ok(GetResult {
                payload: GetResultPayload::Stream(
                    futures::stream::once(async { Ok(data) }).boxed(),
                ),
                meta,
                range,
                attributes,
                extensions: Default::default(),
            });
        }
    }

    /// sluice's own coalesced read (`ObjectStoreExt::get_ranges`) rather than the trait's
    /// default: the same 1 MiB gap, but merged ranges longer than a range are read as
    /// parallel pieces into one buffer, every range is a slice of it, and all pieces are of
    /// one version.
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let uri = self.uri(location)?;
        self.store
            .get_ranges(&uri, ranges)
            .await
            .map_err(|e| error(location, e))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // DeleteObjects batches: sluice's delete_many sends each chunk as one request.
        let this = self.clone();
        locations
            .try_chunks(sluice_core::wire::MAX_DELETE_BATCH)
            .map(move |chunk| {
                let this = this.clone();
                async move {
                    let paths = chunk.map_err(|e| e.1)?;
                    let uris = paths
                        .iter()
                        .map(|p| this.uri(p))
                        .collect::<object_store::Result<Vec<_>>>()?;
                    let mut refused = this
                        .store
                        .delete_many(&uris)
                        .await
                        .map_err(|e| error(&paths[0], e))?;
                    let results: Vec<object_store::Result<Path>> = uris
                        .iter()
                        .zip(paths)
                        .map(|(uri, path)| {
                            let uri = uri.to_string();
                            match refused.iter().position(|e| e.subject() == uri) {
                                Some(i) => Err(error(&path, refused.swap_remove(i))),
                                None => Ok(path),
                            }
                        })
                        .collect();
                    Ok::<_, object_store::Error>(futures::stream::iter(results))
                }
            })
            .buffered(4)
            .try_flatten()
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let rx = match self.prefix_uri(prefix) {
            Ok(uri) => sluice_core::spawn_list(self.store.clone(), uri, true, 1000),
            Err(e) => return futures::stream::once(async { Err(e) }).boxed(),
        };
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .filter_map(|e| async move {
                match e {
                    Ok(ListEntry::Object(m)) => Some(
                        Path::parse(m.uri.key())
                            .map(|p| meta(p, &m))
                            .map_err(|e| object_store::Error::InvalidPath { source: e }),
                    ),
                    Ok(ListEntry::Prefix(_)) => None,
                    Err(e) => Some(Err(generic(Box::new(e)))),
                }
            })
            // The first error ends the listing, as it ends sluice's.
            .scan(false, |ended, item| {
                let next = (!*ended).then(|| {
                    *ended = item.is_err();
                    item
                });
                futures::future::ready(next)
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let uri = self.prefix_uri(prefix)?;
        let entries: Vec<ListEntry> = self
            .store
            .list(&uri, false)
            .try_collect()
            .await
            .map_err(|e| generic(Box::new(e)))?;
        list_result(entries)
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        // A missing source is NotFound whatever the mode, as object_store's stores answer.
        let size = self.meta(from).await?.size;
        let (src, dst) = (self.uri(from)?, self.uri(to)?);
        if matches!(options.mode, CopyMode::Overwrite)
            && size <= sluice_core::MAX_COPY_SIZE
            && self
                .store
                .copy(&src, &dst)
                .await
                .map_err(|e| error(to, e))?
                .is_some()
        {
            return Ok(());
        }
        let got = self.get_opts(from, GetOptions::default()).await?;
        let mode = match options.mode {
            CopyMode::Overwrite => PutMode::Overwrite,
            CopyMode::Create => PutMode::Create,
        };
        let put = PutOptions {
            mode,
            attributes: got.attributes.clone(),
            ..PutOptions::default()
        };
        self.put_opts(to, got.bytes().await?.into(), put)
            .await
            .map(drop)
    }
}

/// One ListObjectsV2 page as object_store asks for it: a raw key prefix ("fo" lists
/// "foo/..." and "fob/..."), no delimiter or "/", a page size, a start key, and the previous
/// page's continuation token as the page token.
#[async_trait]
impl PaginatedListStore for SluiceObjectStore {
    async fn list_paginated(
        &self,
        prefix: Option<&str>,
        opts: PaginatedListOptions,
    ) -> object_store::Result<PaginatedListResult> {
        let recursive = match opts.delimiter.as_deref() {
            None => true,
            Some("/") => false,
            Some(d) => {
                return Err(not_implemented(&format!(
                    "listing with the delimiter {d:?}"
                )));
            }
        };
        let uri =
            ObjectUri::new(&self.bucket, prefix.unwrap_or("")).map_err(|e| generic(e.into()))?;
        let list = ListOptions {
            recursive,
            token: opts.page_token,
            max_keys: opts.max_keys.map(|m| m.min(1000) as u32),
            start_after: opts.offset,
        };
        let at = Path::from(prefix.unwrap_or(""));
        let page = self
            .store
            .list_page(&uri, &list)
            .await
            .map_err(|e| error(&at, e))?;
        Ok(PaginatedListResult {
            result: list_result(page.entries)?,
            page_token: page.next_token,
        })
    }
}

/// Listing entries as object_store's: objects, and prefixes without their trailing `/`.
fn list_result(entries: Vec<ListEntry>) -> object_store::Result<ListResult> {
    let mut out = ListResult {
        common_prefixes: Vec::new(),
        objects: Vec::new(),
        extensions: Default::default(),
    };
    for e in entries {
        match e {
            ListEntry::Object(m) => {
                let p = Path::parse(m.uri.key())
                    .map_err(|e| object_store::Error::InvalidPath { source: e })?;
                out.objects.push(meta(p, &m));
            }
            ListEntry::Prefix(u) => {
                let p = Path::parse(u.key().trim_end_matches('/'))
                    .map_err(|e| object_store::Error::InvalidPath { source: e })?;
                out.common_prefixes.push(p);
            }
        }
    }
    Ok(out)
}

/// S3's multipart calls, one by one, with sluice's retries: object_store's part index `i`
/// is S3's part number `i + 1`, its `PartId` the part's ETag.
#[async_trait]
impl MultipartStore for SluiceObjectStore {
    async fn create_multipart(&self, path: &Path) -> object_store::Result<MultipartId> {
        self.create_multipart_opts(path, PutMultipartOptions::default())
            .await
    }

    async fn create_multipart_opts(
        &self,
        path: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<MultipartId> {
        let put = write_options(
            sluice_core::PutMode::Overwrite,
            &opts.tags,
            &opts.attributes,
        )?;
        let (uri, m) = self.multipart(path)?;
        m.create(&uri, &put.attributes)
            .await
            .map_err(|e| error(path, e))
    }

    async fn put_part(
        &self,
        path: &Path,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        let number = u32::try_from(part_idx + 1)
            .ok()
            .filter(|n| *n <= sluice_core::MAX_PARTS)
            .ok_or_else(|| {
                generic(format!("{path}: part index {part_idx} is past S3's 10,000 parts").into())
            })?;
        let (uri, m) = self.multipart(path)?;
        let part = m
            .part(&uri, id, number, data.into())
            .await
            .map_err(|e| error(path, e))?;
        Ok(PartId {
            content_id: part.etag,
        })
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        let (uri, m) = self.multipart(path)?;
        let mut uploaded: Vec<UploadedPart> = parts
            .into_iter()
            .zip(1..)
            .map(|(p, number)| UploadedPart {
                number,
                etag: p.content_id,
                checksum: None,
                size: None,
            })
            .collect();
        if uploaded.is_empty() {
            // S3 completes no upload without a part: an empty object is one empty part, as
            // object_store's own S3 store sends it.
            let part = m
                .part(&uri, id, 1, Bytes::new())
                .await
                .map_err(|e| error(path, e))?;
            uploaded.push(part);
        }
        let etag = m
            .complete(&uri, id, &uploaded, &sluice_core::PutMode::Overwrite)
            .await
            .map_err(|e| error(path, e))?;
        Ok(PutResult {
            e_tag: etag,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort_multipart(&self, path: &Path, id: &MultipartId) -> object_store::Result<()> {
        let (uri, m) = self.multipart(path)?;
        m.abort(&uri, id).await.map_err(|e| error(path, e))
    }
}

/// object_store's multipart upload over sluice's streaming writer. Parts are concatenated
/// in the order `put_part` is called, whatever order their futures run in: each is queued
/// at the call, and one task writes them in turn.
#[derive(Debug)]
struct Upload {
    parts: Option<mpsc::UnboundedSender<Step>>,
    location: Path,
}

enum Step {
    Part(Bytes, oneshot::Sender<object_store::Result<()>>),
    Complete(oneshot::Sender<object_store::Result<PutResult>>),
    Abort(oneshot::Sender<object_store::Result<()>>),
}

impl Upload {
    fn start(mut writer: Box<dyn sluice_core::ObjectWriter>, location: Path) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Step>();
        let at = location.clone();
        tokio::spawn(async move {
            while let Some(step) = rx.recv().await {
                match step {
                    Step::Part(data, done) => {
                        let _ = done.send(writer.write(data).await.map_err(|e| error(&at, e)));
                    }
                    Step::Complete(done) => {
                        let r = writer.finish().await.map_err(|e| error(&at, e));
                        let _ = done.send(r.map(|i| PutResult {
                            e_tag: i.etag,
                            version: None,
                            extensions: Default::default(),
                        }));
                        return;
                    }
                    Step::Abort(done) => {
                        let _ = done.send(writer.abort().await.map_err(|e| error(&at, e)));
                        return;
                    }
                }
            }
            // Dropped without completing: the writer's drop aborts the upload.
        });
        Self {
            parts: Some(tx),
            location,
        }
    }

    fn send<T: Send + 'static>(
        &mut self,
        step: impl FnOnce(oneshot::Sender<object_store::Result<T>>) -> Step,
        last: bool,
    ) -> oneshot::Receiver<object_store::Result<T>> {
        let (done, wait) = oneshot::channel();
        let parts = if last {
            self.parts.take()
        } else {
            self.parts.clone()
        };
        match parts {
            Some(p) => {
                let _ = p.send(step(done));
            }
            None => {
                let _ = done.send(Err(generic(
                    format!(
                        "{}: the upload was already completed or aborted",
                        self.location
                    )
                    .into(),
                )));
            }
        }
        wait
    }
}

async fn outcome<T>(wait: oneshot::Receiver<object_store::Result<T>>) -> object_store::Result<T> {
    wait.await
        .unwrap_or_else(|_| Err(generic("the upload's task ended early".into())))
}

#[async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let wait = self.send(|done| Step::Part(data.into(), done), false);
        Box::pin(outcome(wait))
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        outcome(self.send(Step::Complete, true)).await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        outcome(self.send(Step::Abort, true)).await
    }
}
