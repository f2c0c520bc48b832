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
//! What it does not do (each an `Error::NotImplemented` naming the operation): conditional
//! puts and copies (`PutMode::Create`/`Update`, `CopyMode::Create`), version ids, tags. A GET
//! is a HEAD then a ranged GET pinned to the HEAD's ETag (If-Match): object_store's result
//! carries the object's size and modification time, and the two requests cannot describe two
//! versions. A copy is a server-side CopyObject for objects up to 5 GiB where the store has
//! it; larger objects, and stores without it, are read and re-uploaded here.

#![warn(missing_docs)]

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    UploadPart,
};
use sluice_core::{ByteRange, Error, ListEntry, ObjectUri, Segment, WriteOptions};
use std::ops::Range;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

const STORE: &str = "sluice";

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
            parts: WriteOptions {
                part_size: sluice_core::config::DEFAULT_MULTIPART_PART_SIZE,
                max_in_flight: sluice_core::multipart::PART_CONCURRENCY,
                abort_on_drop: true,
                // The stores' default; a wire that cannot send checksums ignores it.
                checksums: true,
            },
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
        let m = self
            .store
            .head(&self.uri(location)?)
            .await
            .map_err(|e| error(location, e))?;
        Ok(meta(location.clone(), &m))
    }
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

/// Ours as object_store's: a missing object is `NotFound`, a failed pin `Precondition`.
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
        e => generic(Box::new(e)),
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
        if !matches!(opts.mode, PutMode::Overwrite) {
            return Err(not_implemented("put_opts with PutMode::Create or Update"));
        }
        let data: Bytes = payload.into();
        let info = self
            .store
            .put(&self.uri(location)?, data.into())
            .await
            .map_err(|e| error(location, e))?;
        Ok(PutResult {
            e_tag: info.etag,
            version: None,
            extensions: Default::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let uri = self.uri(location)?;
        let writer = self
            .store
            .writer(&uri, self.parts)
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
        let meta = self.meta(location).await?;
        options.check_preconditions(&meta)?;
        let range = resolve(location, options.range.as_ref(), meta.size)?;
        let data = if options.head || range.is_empty() {
            Bytes::new()
        } else {
            let opts = sluice_core::GetOptions {
                range: Some(ByteRange::new(range.start, range.end).map_err(|e| generic(e.into()))?),
                if_match: meta.e_tag.clone(),
            };
            // The length is the server's word (HEAD): one no machine holds is an error.
            let mut seg = Segment::try_exact(range.end - range.start).map_err(|e| {
                error(
                    location,
                    Error::integrity(location.to_string(), e.to_string()),
                )
            })?;
            self.store
                .get_into_with(&self.uri(location)?, &opts, &mut seg)
                .await
                .map_err(|e| error(location, e))?;
            seg.freeze().map_err(|e| generic(e.into()))?
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(data) }).boxed()),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
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
            Ok(uri) => sluice_core::listing::spawn_list(self.store.clone(), uri, true, 1000),
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

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        // A missing source is NotFound whatever the mode, as object_store's stores answer.
        let size = self.meta(from).await?.size;
        if !matches!(options.mode, CopyMode::Overwrite) {
            return Err(not_implemented("copy_opts with CopyMode::Create"));
        }
        let (src, dst) = (self.uri(from)?, self.uri(to)?);
        if size <= sluice_core::MAX_COPY_SIZE
            && self
                .store
                .copy(&src, &dst)
                .await
                .map_err(|e| error(to, e))?
                .is_some()
        {
            return Ok(());
        }
        let got = self
            .get_opts(from, GetOptions::default())
            .await?
            .bytes()
            .await?;
        self.put_opts(to, got.into(), PutOptions::default())
            .await
            .map(drop)
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
