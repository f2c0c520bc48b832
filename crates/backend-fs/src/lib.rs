//! `file://` and `direct://` objects: the `ObjectStore` trait over a local or network file
//! system, for datasets that live on one (MLPerf Storage's `direct_fs`, DLIO's file
//! workloads) and to compare a store with the disk beneath it.
//!
//! - The key is the path: `file:///data/x.npz` is `/data/x.npz`.
//! - `file://` reads through the page cache with `pread` straight into the caller's segment.
//! - `direct://` opens with `O_DIRECT`: reads go through pooled aligned buffers in aligned
//!   chunks (the unaligned head and tail of a range are cut out of them), so the page cache
//!   is neither used nor polluted — what a benchmark of the device needs.
//! - Puts and streamed writes are atomic: written to a hidden temporary file beside the target, then renamed, so
//!   a reader never sees half an object; `direct://` puts are synced before the rename.
//! - Listings walk directories and return keys in byte order, as S3 does; a prefix need not
//!   end at a directory (`/data/img_1` matches `/data/img_10.npz`).
//!
//! File system calls block, so each operation runs on tokio's blocking pool.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod aligned;
mod list;
mod read;
mod writer;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use sluice_core::unsupported;
use sluice_core::wire::{Handlers, Operations, Reply, Request};
use sluice_core::{
    Attributes, Error, GetInfo, GetOptions, ListEntry, ObjectMeta, ObjectStore, ObjectUri,
    ObjectWriter, PutInfo, PutMode, PutOptions, PutPayload, Result, Scheme, Segment, WriteOptions,
};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Temporary files of puts in progress start with this; listings skip them.
const TMP_MARKER: &str = ".sluice-tmp.";

/// Reads and writes `file://` or `direct://` URIs.
#[derive(Debug, Clone)]
pub struct FsStore {
    scheme: Scheme,
    buffers: Arc<aligned::Pool>,
}

impl FsStore {
    /// `file://`: through the page cache.
    pub fn file() -> Self {
        Self::new(Scheme::File)
    }

    /// `direct://`: O_DIRECT, bypassing the page cache.
    pub fn direct() -> Self {
        Self::new(Scheme::Direct)
    }

    fn new(scheme: Scheme) -> Self {
        Self {
            scheme,
            buffers: Arc::new(aligned::Pool::default()),
        }
    }

    fn is_direct(&self) -> bool {
        self.scheme == Scheme::Direct
    }

    /// The path of `uri`, refusing URIs of another scheme (a routing bug, not user input).
    fn path(&self, uri: &ObjectUri) -> Result<PathBuf> {
        if uri.scheme() != self.scheme {
            return Err(Error::InvalidUri {
                uri: uri.to_string(),
                reason: format!("this store serves {} URIs", self.scheme.prefix()),
            });
        }
        Ok(PathBuf::from(uri.key()))
    }
}

/// Runs blocking file system work off the async threads.
async fn blocking<T: Send + 'static>(
    uri: &ObjectUri,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| task_failed(uri, e))?
}

/// A blocking file task that panicked or was cancelled, as this object's error.
fn task_failed(uri: &ObjectUri, e: tokio::task::JoinError) -> Error {
    Error::integrity(uri.to_string(), format!("file task failed: {e}"))
}

/// A version tag for a file: modification time and size, which change on every rewrite.
fn etag_of(meta: &std::fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{mtime:x}-{:x}", meta.len())
}

fn object_meta(uri: ObjectUri, meta: &std::fs::Metadata) -> ObjectMeta {
    ObjectMeta {
        uri,
        size: meta.len(),
        etag: Some(etag_of(meta)),
        last_modified: meta.modified().ok(),
        attributes: Attributes::default(),
    }
}

/// Metadata of the file at `path`; a directory is not an object (S3 answers 404), nor is
/// a FIFO, socket or device (whose read could block forever or never end).
fn file_meta(uri: &ObjectUri, path: &Path) -> Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(uri.to_string(), "stat", e))?;
    regular(uri, meta)
}

fn regular(uri: &ObjectUri, meta: std::fs::Metadata) -> Result<std::fs::Metadata> {
    if meta.is_dir() {
        return Err(Error::NotFound {
            uri: uri.to_string(),
            code: "EISDIR".into(),
        });
    }
    if !meta.is_file() {
        return Err(Error::NotFound {
            uri: uri.to_string(),
            code: "not a regular file (a FIFO, socket or device)".into(),
        });
    }
    Ok(meta)
}

/// Opens `path` for reading, refusing what is not a regular file. `O_NONBLOCK`: a FIFO put
/// in the file's place since it was looked at must not block the open (it is refused after).
fn open_for_read(uri: &ObjectUri, path: &Path, direct: bool) -> Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    opts.custom_flags(libc::O_NONBLOCK | if direct { libc::O_DIRECT } else { 0 });
    let file = opts.open(path).map_err(|e| {
        if direct && e.raw_os_error() == Some(libc::EINVAL) {
            Error::Io {
                uri: uri.to_string(),
                op: "open with O_DIRECT (this file system does not support it; tmpfs does not: use file://)",
                source: e,
            }
        } else {
            Error::io(uri.to_string(), "open", e)
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(uri.to_string(), "stat", e))?;
    regular(uri, meta)?;
    Ok(file)
}

#[async_trait]
impl ObjectStore for FsStore {
    fn backend(&self) -> &'static str {
        if self.is_direct() { "direct" } else { "file" }
    }

    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        let path = self.path(uri)?;
        let (u, direct, buffers) = (uri.clone(), self.is_direct(), self.buffers.clone());
        let opts = opts.clone();
        // The blocking task needs the segment by value; it comes back with the result.
        let mut seg = std::mem::replace(dst, Segment::growable());
        let (seg, result) = tokio::task::spawn_blocking(move || {
            let r = read::read_into(&u, &path, direct, &buffers, &opts, &mut seg);
            (seg, r)
        })
        .await
        .map_err(|e| task_failed(uri, e))?;
        *dst = seg;
        result
    }

    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>> {
        let prefix = prefix.clone();
        if let Err(e) = self.path(&prefix) {
            return futures::stream::once(async { Err(e) }).boxed();
        }
        futures::stream::once(async move {
            let p = prefix.clone();
            blocking(&prefix, move || list::walk(&p, recursive)).await
        })
        .flat_map(|r| match r {
            Ok(entries) => futures::stream::iter(entries.into_iter().map(Ok)).boxed(),
            Err(e) => futures::stream::once(async { Err(e) }).boxed(),
        })
        .boxed()
    }

    async fn put_opts(
        &self,
        uri: &ObjectUri,
        data: PutPayload,
        opts: &PutOptions,
    ) -> Result<PutInfo> {
        let path = self.path(uri)?;
        let create_only = create_only(uri, opts)?;
        let (u, sync) = (uri.clone(), self.is_direct());
        blocking(uri, move || {
            let meta = write_atomically(&u, &path, &data.0, sync, create_only)?;
            Ok(PutInfo {
                etag: Some(etag_of(&meta)),
                parts: None,
            })
        })
        .await
    }

    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>> {
        let path = self.path(uri)?;
        let create_only = create_only(uri, &opts.put)?;
        let (u, sync) = (uri.clone(), self.is_direct());
        let w = blocking(uri, move || {
            writer::FsWriter::create(u, path, sync, create_only)
        })
        .await?;
        Ok(Box::new(w))
    }

    /// HEAD, DELETE (one object or a batch) and COPY as requests, as every store takes them
    /// (`ObjectStoreExt`).
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        Operations::send(self, req).await
    }
}

/// The operations a file system answers; the rest keep `Handlers`' refusals naming them.
#[async_trait]
impl Handlers for FsStore {
    fn stack(&self) -> &'static str {
        self.backend()
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let path = self.path(uri)?;
        let u = uri.clone();
        blocking(uri, move || {
            let meta = file_meta(&u, &path)?;
            Ok(object_meta(u, &meta))
        })
        .await
    }

    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        let path = self.path(uri)?;
        let u = uri.clone();
        blocking(uri, move || match std::fs::remove_file(&path) {
            // Deleting what is not there succeeds, as on S3.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r.map_err(|e| Error::io(u.to_string(), "remove", e)),
        })
        .await
    }

    /// One file after another: a file that cannot be removed is refused, not retried; a
    /// failure that may pass (`is_retryable`) ends the batch, to be sent again.
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let mut refused = Vec::new();
        for uri in uris {
            match self.delete_object(uri).await {
                Ok(()) => {}
                Err(e) if e.is_retryable() => return Err(e),
                Err(e) => refused.push(e),
            }
        }
        Ok(refused)
    }

    /// No copy on the file system's side: the caller copies through itself.
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let _ = (from, to);
        Ok(None)
    }
}

/// A new temporary file's path beside `path` (whose directories are created), hidden from
/// listings; renaming it onto `path` publishes the object whole.
fn temp_path(uri: &ObjectUri, path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|_| !uri.key().ends_with('/'))
        .ok_or_else(|| Error::InvalidUri {
            uri: uri.to_string(),
            reason: "an object needs a file name, not a directory".into(),
        })?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d)
            .map_err(|e| Error::io(uri.to_string(), "create directory", e))?;
    }
    // Part of the name only: the temporary one must stay within NAME_MAX (255 bytes).
    let stem: String = name.chars().take(100).collect();
    let tmp_name = format!(
        ".{stem}{TMP_MARKER}{}.{:x}",
        std::process::id(),
        fastrand::u64(..)
    );
    Ok(dir.map_or_else(|| PathBuf::from(&tmp_name), |d| d.join(&tmp_name)))
}

/// Makes a finished temporary file the object: synced first when asked, then renamed —
/// or, with `create_only`, linked (which, unlike a rename, fails if the name is taken, so
/// two writers cannot both create it) and the temporary name removed.
fn publish(
    uri: &ObjectUri,
    file: std::fs::File,
    tmp: &Path,
    path: &Path,
    sync: bool,
    create_only: bool,
) -> Result<std::fs::Metadata> {
    let io = |op: &'static str| move |e| Error::io(uri.to_string(), op, e);
    if sync {
        file.sync_all().map_err(io("sync"))?;
    }
    drop(file);
    if create_only {
        match std::fs::hard_link(tmp, path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::from_service(
                    uri.to_string(),
                    412,
                    "PreconditionFailed",
                    "the file exists (PutMode::Create)",
                    None,
                ));
            }
            r => r.map_err(io("link"))?,
        }
        // The object exists from the link on: a temporary name left behind is not a
        // failed write (which a retry would then find "taken").
        if let Err(e) = std::fs::remove_file(tmp) {
            tracing::warn!(%uri, tmp = %tmp.display(), error = %e, "could not remove the temporary name of a created file");
        }
    } else {
        std::fs::rename(tmp, path).map_err(io("rename"))?;
    }
    std::fs::metadata(path).map_err(io("stat"))
}

/// Whether a write may go ahead under `opts`, and if only as a creation: a file keeps no
/// attributes and has no ETag to compare atomically, so those are refused, never dropped.
fn create_only(uri: &ObjectUri, opts: &PutOptions) -> Result<bool> {
    if !opts.attributes.is_empty() {
        return Err(unsupported("fs", uri, "storing object attributes"));
    }
    match opts.mode {
        PutMode::Overwrite => Ok(false),
        PutMode::Create => Ok(true),
        PutMode::Update(_) => Err(unsupported(
            "fs",
            uri,
            "conditional updates (PutMode::Update)",
        )),
    }
}

fn create_temp(uri: &ObjectUri, tmp: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| Error::io(uri.to_string(), "create", e))
}

/// Writes `data` to a temporary file beside `path` and renames it into place, so that the
/// object appears whole or not at all. Returns the new file's metadata.
fn write_atomically(
    uri: &ObjectUri,
    path: &Path,
    data: &[u8],
    sync: bool,
    create_only: bool,
) -> Result<std::fs::Metadata> {
    let tmp = temp_path(uri, path)?;
    let result = create_temp(uri, &tmp).and_then(|mut f| {
        f.write_all(data)
            .map_err(|e| Error::io(uri.to_string(), "write", e))?;
        publish(uri, f, &tmp, path, sync, create_only)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
