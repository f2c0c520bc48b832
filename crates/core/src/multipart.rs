//! Multipart upload, once for every backend that speaks the S3 multipart API itself: cut the
//! payload into parts (zero-copy slices), upload a few at a time with retries, complete, and
//! abort if anything fails so no orphaned parts keep costing storage.

use crate::checksum::{Crc, HOT, Pieces, Tally};
use crate::error::{Error, Result};
use crate::object::{ObjectMeta, PutInfo, same_etag};
use crate::parts_in_flight::PartsWindow;
use crate::put_options::{Attributes, PutMode, PutOptions};
use crate::retry::{RetryPolicy, retry};
use crate::upload::{MAX_PARTS, ObjectWriter, WriteInfo, WriteOptions, WriterState};
use crate::uri::ObjectUri;
use crate::wire::{Operations, OperationsExt, UploadedPart};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use std::ops::Range;
use std::sync::Arc;
use tokio::task::JoinSet;

use crate::upload::PARTS_FROM_MEMORY;

/// A multipart upload that is aborted when this guard is dropped armed (with an id): the
/// future of a whole-object upload dropped before Complete (Ctrl-C, a caller's timeout), or a
/// streaming writer dropped unfinished, leaves no parts behind.
struct AbortGuard {
    api: Arc<dyn Operations>,
    uri: ObjectUri,
    upload_id: Option<String>,
    /// To abort from `Drop`, which may run outside the runtime (a Python finaliser).
    runtime: Option<tokio::runtime::Handle>,
    /// A forked child drops its copy of the parent's upload: that must not abort the
    /// parent's upload (nor touch the parent's runtime, which has no threads in the child).
    owner: u32,
}

impl AbortGuard {
    fn new(api: Arc<dyn Operations>, uri: ObjectUri, upload_id: Option<String>) -> Self {
        Self {
            api,
            uri,
            upload_id,
            runtime: tokio::runtime::Handle::try_current().ok(),
            owner: std::process::id(),
        }
    }

    fn disarm(&mut self) {
        self.upload_id = None;
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        let Some(upload_id) = self.upload_id.take() else {
            return;
        };
        if self.owner != std::process::id() {
            return;
        }
        let (api, uri) = (self.api.clone(), self.uri.clone());
        match &self.runtime {
            Some(rt) => {
                rt.spawn(async move {
                    if let Err(e) = api.abort_multipart_upload(&uri, &upload_id).await {
                        tracing::warn!(%uri, upload_id, error = %e, "could not abort dropped multipart upload");
                    }
                });
            }
            None => {
                tracing::warn!(%uri, upload_id, "dropped multipart upload not aborted: no runtime")
            }
        }
    }
}

/// S3's ETag of a multipart object: the MD5 of its parts' binary MD5s, then `-<parts>`
/// (quoted, lower-case hex; compared to a HEAD's without regard to quotes or case).
/// `None` when a part's ETag is not an MD5 (stores that do not follow the convention).
pub(crate) fn multipart_etag(parts: &[UploadedPart]) -> Option<String> {
    use md5::{Digest, Md5};
    let mut all = Md5::new();
    for UploadedPart { etag, .. } in parts {
        let hex = etag.trim_matches('"');
        if hex.len() != 32 {
            return None;
        }
        for i in (0..32).step_by(2) {
            all.update([u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()?]);
        }
    }
    Some(format!("\"{}-{}\"", hex(&all.finalize()), parts.len()))
}

/// S3's ETag of an object sent in one PUT: the MD5 of its bytes, quoted lower-case hex.
pub(crate) fn md5_etag(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    format!("\"{}\"", hex(&Md5::digest(data)))
}

/// A digest as an ETag writes it: lower-case hex.
fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn no_such_upload(e: &Error) -> bool {
    matches!(e, Error::NotFound { code, .. } | Error::Service { code, .. } if code == "NoSuchUpload")
}

/// CompleteMultipartUpload with retries. A retry answered `NoSuchUpload` (or, for a
/// conditional upload, `412`) usually means an earlier attempt was applied and only its
/// answer was lost: the object is then checked by HEAD, and the upload counts as done only
/// if its ETag is the one these parts make.
async fn complete(
    api: &dyn Operations,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    upload_id: &str,
    parts: &[UploadedPart],
    mode: &PutMode,
) -> Result<Option<String>> {
    // The whole object's CRC, when every part was sent with one.
    let checksum = parts
        .iter()
        .map(|p| p.checksum)
        .collect::<Option<Vec<Crc>>>()
        .map(Crc::of_parts);
    let sent = std::sync::atomic::AtomicBool::new(false);
    // What the HEAD of a lost answer's check found: the size check needs no second HEAD.
    let headed = std::sync::Mutex::new(None::<ObjectMeta>);
    let found = |meta: ObjectMeta| {
        let etag = meta.etag.clone();
        *headed.lock().expect("headed lock") = Some(meta);
        etag
    };
    let etag = retry(policy, || async {
        let again = sent.swap(true, std::sync::atomic::Ordering::Relaxed);
        match api
            .complete_multipart_upload(uri, upload_id, parts, checksum, mode)
            .await
        {
            Err(e) if again && no_such_upload(&e) => {
                match applied_earlier(api, uri, multipart_etag(parts)).await? {
                    Some(meta) => Ok(found(meta)),
                    None => Err(Error::integrity(
                        uri.to_string(),
                        format!(
                            "CompleteMultipartUpload was retried and the upload is gone ({e}), \
                             but the object is not the one these parts make: it was not written"
                        ),
                    )),
                }
            }
            // S3 voids an upload whose conditional Complete raced another write (409): a
            // retry could only find it gone. The condition lost, as with a 412.
            Err(Error::Service { status: 409, .. }) if *mode != PutMode::Overwrite => {
                Err(Error::from_service(
                    uri.to_string(),
                    412,
                    "PreconditionFailed",
                    "CompleteMultipartUpload raced another write of the key (409 ConditionalRequestConflict); the upload is void",
                    None,
                ))
            }
            Err(e) if again && e.is_precondition_failed() => Ok(found(
                applied_earlier(api, uri, multipart_etag(parts))
                    .await?
                    .ok_or(e)?,
            )),
            r => r,
        }
    })
    .await?;
    let headed = headed.into_inner().expect("headed lock");
    check_size(api, policy, uri, parts, etag.as_deref(), headed).await?;
    Ok(etag)
}

/// A store can answer CompleteMultipartUpload with success and yet hold an object short by
/// whole parts (an AIStore deployment did, for 0.016% of uploads: mlcommons/storage#593).
/// So the object is asked for its size (or `headed`, what a HEAD just said of it): when it
/// is still this upload's (its ETag) and holds other than the bytes sent, the write fails
/// as corrupt. A HEAD that fails (a write-only
/// role has no GetObject) leaves the write as the store answered it.
async fn check_size(
    api: &dyn Operations,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    parts: &[UploadedPart],
    etag: Option<&str>,
    headed: Option<ObjectMeta>,
) -> Result<()> {
    let Some(sent) = parts.iter().map(|p| p.size).sum::<Option<u64>>() else {
        return Ok(());
    };
    let head = match headed {
        Some(meta) => Ok(meta),
        None => retry(policy, || api.head_object(uri)).await,
    };
    let meta = match head {
        Ok(meta) => meta,
        Err(e) => {
            tracing::warn!(%uri, error = %e, "the completed upload's size could not be checked");
            return Ok(());
        }
    };
    let ours = etag
        .zip(meta.etag.as_deref())
        .is_none_or(|(sent, got)| same_etag(sent, got));
    if ours && meta.size != sent {
        return Err(Error::integrity(
            uri.to_string(),
            format!(
                "CompleteMultipartUpload answered success, but the object holds {} bytes of \
                 the {sent} sent in {} parts: the store lost data, and the object must not be used",
                meta.size,
                parts.len()
            ),
        ));
    }
    Ok(())
}

/// Whether an attempt whose answer was lost wrote the object: `Some(what HEAD said)` when
/// the object under `uri` now has the ETag `expected` (what these bytes make), `None` when
/// it has another or none; `Err` only for a HEAD that failed in a way worth retrying (the
/// caller's retry loop repeats the request, whose answer brings the check back).
async fn applied_earlier(
    api: &dyn Operations,
    uri: &ObjectUri,
    expected: Option<String>,
) -> Result<Option<ObjectMeta>> {
    match api.head_object(uri).await {
        Ok(meta)
            if meta
                .etag
                .as_deref()
                .zip(expected.as_deref())
                .is_some_and(|(got, want)| same_etag(&got.to_ascii_lowercase(), want)) =>
        {
            Ok(Some(meta))
        }
        Err(head) if head.is_retryable() => Err(head),
        _ => Ok(None),
    }
}

/// One PUT of a whole object, retried. A conditional PUT whose retry is answered 412 may
/// have lost to its own first attempt (applied, answer lost): it succeeds if the object is
/// now these bytes (its ETag their MD5, as S3 makes it for a single PUT). The ETag cannot
/// tell this write from another writer's of the very same bytes, which then also counts as
/// this one's: the object is what was asked for either way.
async fn put_whole(
    api: &dyn Operations,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    data: &Bytes,
    crc: Option<Crc>,
    opts: &PutOptions,
) -> Result<Option<String>> {
    let sent = std::sync::atomic::AtomicBool::new(false);
    retry(policy, || async {
        let again = sent.swap(true, std::sync::atomic::Ordering::Relaxed);
        match api.put_object(uri, data.clone(), crc, opts).await {
            Err(e) if again && e.is_precondition_failed() => {
                Ok(applied_earlier(api, uri, Some(md5_etag(data)))
                    .await?
                    .ok_or(e)?
                    .etag)
            }
            r => r,
        }
    })
    .await
}

/// Uploads `data` as parts of `part_size` bytes (the last shorter), each with its checksum
/// when `checksums`, the object made as `opts` says. On error, or if this future is dropped
/// before Complete, the upload is aborted.
pub(crate) async fn upload(
    api: &Arc<dyn Operations>,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    data: Bytes,
    part_size: u64,
    checksums: bool,
    opts: &PutOptions,
) -> Result<PutInfo> {
    let part_size = usize::try_from(part_size.max(1)).unwrap_or(usize::MAX);
    if data.len().div_ceil(part_size) > MAX_PARTS as usize {
        return Err(Error::config(
            "SLUICE_MULTIPART_PART_SIZE",
            format!(
                "{uri}: {} bytes in parts of {part_size} is more than S3's {MAX_PARTS} parts; use a larger part size",
                data.len()
            ),
        ));
    }
    let upload_id = retry(policy, || api.create_multipart_upload(uri, checksums, opts)).await?;
    let mut guard = AbortGuard::new(api.clone(), uri.clone(), Some(upload_id.clone()));
    let parts: Vec<(u32, Bytes)> = data
        .chunks(part_size)
        .enumerate()
        .map(|(i, c)| (i as u32 + 1, data.slice_ref(c)))
        .collect();
    let uploaded: Result<Vec<UploadedPart>> = futures::stream::iter(parts)
        .map(|(n, chunk)| {
            let crc = checksums.then(|| Crc::of(&chunk));
            upload_part(api.as_ref(), policy, uri, &upload_id, n, chunk, crc)
        })
        .buffered(PARTS_FROM_MEMORY)
        .try_collect()
        .await;
    let result = match uploaded {
        Ok(parts) => complete(api.as_ref(), policy, uri, &upload_id, &parts, &opts.mode)
            .await
            .map(|etag| PutInfo {
                etag,
                parts: Some(parts.len()),
            }),
        Err(e) => Err(e),
    };
    guard.disarm();
    if let Err(e) = &result {
        match api.abort_multipart_upload(uri, &upload_id).await {
            Ok(()) => {
                tracing::info!(%uri, upload_id, error = %e, "aborted failed multipart upload")
            }
            Err(abort) => {
                tracing::warn!(%uri, upload_id, error = %abort, "could not abort failed multipart upload")
            }
        }
    }
    result
}

/// Uploads part `n` with retries, with its checksum `crc` when given (sent with every
/// attempt); a reply without an ETag is an error (Complete needs it).
async fn upload_part(
    api: &dyn Operations,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    upload_id: &str,
    n: u32,
    chunk: Bytes,
    crc: Option<Crc>,
) -> Result<UploadedPart> {
    let etag = retry(policy, || async {
        api.upload_part(uri, upload_id, n, chunk.clone(), crc)
            .await?
            .ok_or_else(|| {
                Error::transport(
                    uri.to_string(),
                    format!("UploadPart {n} answered without an ETag"),
                )
            })
    })
    .await?;
    Ok(UploadedPart {
        number: n,
        etag,
        checksum: crc,
        size: Some(chunk.len() as u64),
    })
}

/// Whole-object upload of `data`: one PUT below `threshold`, multipart at or above it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn put(
    api: &Arc<dyn Operations>,
    policy: &RetryPolicy,
    uri: &ObjectUri,
    data: Bytes,
    threshold: u64,
    part_size: u64,
    checksums: bool,
    opts: &PutOptions,
) -> Result<PutInfo> {
    opts.attributes.validate()?;
    if data.len() as u64 >= threshold {
        return upload(api, policy, uri, data, part_size, checksums, opts).await;
    }
    let crc = checksums.then(|| Crc::of(&data));
    let etag = put_whole(api.as_ref(), policy, uri, &data, crc, opts).await?;
    Ok(PutInfo { etag, parts: None })
}

/// An S3 store's multipart calls, each retried under the store's policy, for a caller that
/// drives an upload part by part itself (object_store's `MultipartStore`). Parts carry no
/// checksum: their caller numbers them and may send them from anywhere.
#[derive(Clone)]
pub struct Multipart {
    api: Arc<dyn Operations>,
    policy: RetryPolicy,
}

impl std::fmt::Debug for Multipart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Multipart")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Multipart {
    /// The calls of `api`, retried under `policy`.
    pub fn new(api: Arc<dyn Operations>, policy: RetryPolicy) -> Self {
        Self { api, policy }
    }

    /// Creates an upload of `uri`, the object to carry `attributes`. Returns its id.
    pub async fn create(&self, uri: &ObjectUri, attributes: &Attributes) -> Result<String> {
        attributes.validate()?;
        let opts = PutOptions {
            attributes: attributes.clone(),
            ..PutOptions::default()
        };
        retry(&self.policy, || {
            self.api.create_multipart_upload(uri, false, &opts)
        })
        .await
    }

    /// Uploads part `number` (1 to 10,000).
    pub async fn part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        number: u32,
        data: Bytes,
    ) -> Result<UploadedPart> {
        upload_part(
            self.api.as_ref(),
            &self.policy,
            uri,
            upload_id,
            number,
            data,
            None,
        )
        .await
    }

    /// Completes the upload from `parts` in order, the object appearing only as `mode`
    /// allows. Returns its ETag.
    pub async fn complete(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        mode: &PutMode,
    ) -> Result<Option<String>> {
        complete(self.api.as_ref(), &self.policy, uri, upload_id, parts, mode).await
    }

    /// Aborts the upload: its parts are deleted.
    pub async fn abort(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        retry(&self.policy, || {
            self.api.abort_multipart_upload(uri, upload_id)
        })
        .await
    }
}

/// A streaming multipart upload: parts are cut from the bytes written and uploaded while
/// the producer goes on, as many at a time as `window` has places for. The
/// upload is created with the first full part; an object that never fills one is sent with
/// a single PUT at `finish`.
pub(crate) struct MultipartWriter {
    api: Arc<dyn Operations>,
    policy: RetryPolicy,
    uri: ObjectUri,
    opts: WriteOptions,
    /// The upload once created; aborted if the writer is dropped unfinished (when
    /// `opts.abort_on_drop`).
    upload: AbortGuard,
    /// Bytes written but not yet cut into a part (less than one part).
    pending: BytesMut,
    /// Their CRC, taken as they were copied in, when checksums are on.
    pending_crc: Option<Tally>,
    next_part: u32,
    in_flight: JoinSet<Result<UploadedPart>>,
    /// The client's window, shared by its uploads, or one of this writer's own for a number
    /// the user set (`parts_in_flight`).
    window: Arc<PartsWindow>,
    /// The window has heard of this upload (`PartsWindow::begin`).
    begun: bool,
    done: Vec<UploadedPart>,
    written: u64,
    state: WriterState,
}

impl std::fmt::Debug for MultipartWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultipartWriter")
            .field("uri", &self.uri)
            .field("opts", &self.opts)
            .field("upload_id", &self.upload.upload_id)
            .field("written", &self.written)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl MultipartWriter {
    /// A writer of `uri` through `api`, each request retried under `policy`, parts cut and
    /// sent as `opts` says: a searched number in flight through the client's `window`, a set
    /// one through a window of its own. Nothing is sent until the first part is full. Errors
    /// if `opts` is outside S3's limits (`WriteOptions::validate`).
    pub(crate) fn new(
        api: Arc<dyn Operations>,
        policy: RetryPolicy,
        uri: ObjectUri,
        opts: WriteOptions,
        window: &Arc<PartsWindow>,
    ) -> Result<Self> {
        opts.validate()?;
        opts.put.attributes.validate()?;
        let window = if opts.adaptive {
            window.clone()
        } else {
            PartsWindow::fixed(opts.max_in_flight)
        };
        Ok(Self {
            upload: AbortGuard::new(api.clone(), uri.clone(), None),
            api,
            policy,
            uri,
            opts,
            pending: BytesMut::new(),
            pending_crc: None,
            next_part: 1,
            in_flight: JoinSet::new(),
            window,
            begun: false,
            done: Vec::new(),
            written: 0,
            state: WriterState::Open,
        })
    }

    fn part_len(&self) -> usize {
        usize::try_from(self.opts.part_size).unwrap_or(usize::MAX)
    }

    /// Starts uploading `part` (whose CRC is `crc`, when checksums are on) as the next part
    /// number, first waiting for a slot.
    async fn send(&mut self, part: Bytes, crc: Option<Crc>) -> Result<()> {
        let n = self.next_part;
        if n > MAX_PARTS {
            return Err(Error::config(
                "part_size",
                format!(
                    "{}: more than S3's {MAX_PARTS} parts at {} bytes each; use a larger part size",
                    self.uri, self.opts.part_size
                ),
            ));
        }
        let upload_id = match &self.upload.upload_id {
            Some(id) => id.clone(),
            None => {
                let checksummed = self.opts.checksums;
                let id = retry(&self.policy, || {
                    self.api
                        .create_multipart_upload(&self.uri, checksummed, &self.opts.put)
                })
                .await?;
                self.upload.upload_id = Some(id.clone());
                id
            }
        };
        if !self.begun {
            self.window.begin();
            self.begun = true;
        }
        let place = self.window.place(part.len() as u64).await;
        // Parts of this upload answered meanwhile: a failure stops it now.
        while let Some(done) = self.in_flight.try_join_next() {
            self.reaped(done)?;
        }
        self.next_part += 1;
        let (api, policy, uri) = (self.api.clone(), self.policy, self.uri.clone());
        let window = self.window.clone();
        self.in_flight.spawn(async move {
            let bytes = part.clone();
            // The place is freed when this ends, answered or not (failed, or aborted).
            let part = upload_part(api.as_ref(), &policy, &uri, &upload_id, n, part, crc).await;
            window.buffers.give_back(bytes);
            let part = part?;
            place.answered();
            Ok(part)
        });
        Ok(())
    }

    /// Waits for one part in flight to finish.
    async fn reap_one(&mut self) -> Result<()> {
        match self.in_flight.join_next().await {
            None => Ok(()),
            Some(done) => self.reaped(done),
        }
    }

    /// Takes in a part's outcome.
    fn reaped(
        &mut self,
        done: std::result::Result<Result<UploadedPart>, tokio::task::JoinError>,
    ) -> Result<()> {
        match done {
            Ok(Ok(part)) => {
                self.done.push(part);
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(e) => Err(Error::integrity(
                self.uri.to_string(),
                format!("part upload task failed: {e}"),
            )),
        }
    }

    /// Passes `result` through; on error, aborts the upload so no parts are left behind.
    async fn or_abort<T>(&mut self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.state = WriterState::Failed;
            self.abort_upload().await;
        }
        result
    }

    async fn abort_upload(&mut self) {
        self.in_flight.abort_all();
        while self.in_flight.join_next().await.is_some() {}
        if let Some(id) = self.upload.upload_id.take() {
            match self.api.abort_multipart_upload(&self.uri, &id).await {
                Ok(()) => {
                    tracing::info!(uri = %self.uri, upload_id = id, "aborted multipart upload")
                }
                Err(e) => {
                    tracing::warn!(uri = %self.uri, upload_id = id, error = %e, "could not abort multipart upload")
                }
            }
        }
    }

    /// The CRC of `bytes` when checksums are on. Taken as the bytes arrive, while they are
    /// still in the cache the caller (or the copy into `pending`) left them in: a CRC pass
    /// over a part later, from memory, costs several times as much (`checksum::HOT`).
    fn crc(&self, bytes: &[u8]) -> Option<Crc> {
        self.opts.checksums.then(|| Crc::of(bytes))
    }

    /// The CRC of `whole[range]` when checksums are on: from the caller's `pieces` of
    /// `whole` where given, else read from the bytes.
    fn crc_in(&self, whole: &[u8], range: Range<usize>, pieces: Option<&Pieces>) -> Option<Crc> {
        match pieces {
            Some(p) => self.opts.checksums.then(|| p.crc_of(whole, range)),
            None => self.crc(&whole[range]),
        }
    }

    /// Appends `bytes` to `pending`, a step that stays in cache at a time, each step summed
    /// right after its copy (when checksums are on).
    fn append_pending(&mut self, bytes: &[u8]) {
        if !self.opts.checksums {
            self.pending.extend_from_slice(bytes);
            return;
        }
        let tally = self.pending_crc.get_or_insert_with(|| Tally::new(u64::MAX));
        for step in bytes.chunks(HOT) {
            self.pending.extend_from_slice(step);
            tally.update(step);
        }
    }

    /// Pending bytes start in a buffer with a part's room, lent by the window where one of
    /// its parts has been answered: grown by doubling, it would be copied again, and fresh
    /// memory is faulted in as it fills.
    fn room_for_a_part(&mut self, part_len: usize) {
        if self.pending.is_empty() && self.pending.capacity() < part_len {
            self.pending = self.window.buffers.take(part_len);
        }
    }

    /// Copies `data` in, sending each part it fills: bytes lent for the call, which no part
    /// may keep.
    async fn copy_in(&mut self, mut data: &[u8]) -> Result<()> {
        let part_len = self.part_len();
        while !data.is_empty() {
            self.room_for_a_part(part_len);
            let (now, rest) = data.split_at((part_len - self.pending.len()).min(data.len()));
            self.append_pending(now);
            data = rest;
            if self.pending.len() == part_len {
                let (part, crc) = self.take_pending();
                self.send(part, crc).await?;
            }
        }
        Ok(())
    }

    /// The bytes pending, as a part, with their CRC (when checksums are on).
    fn take_pending(&mut self) -> (Bytes, Option<Crc>) {
        // The whole buffer goes with the part (not `split`, which would keep a share of its
        // memory here), so that it can come back once the part is answered.
        let part = std::mem::take(&mut self.pending).freeze();
        let crc = match self.pending_crc.take() {
            Some(tally) => Some(tally.finish().whole()),
            None => self.crc(&part),
        };
        (part, crc)
    }

    /// Cuts `data` into parts; `pieces`, when given, are CRCs of `data` taken as it was
    /// produced, combined here instead of reading the bytes again.
    async fn write_inner(&mut self, data: Bytes, pieces: Option<&Pieces>) -> Result<()> {
        let part_len = self.part_len();
        let whole = data.clone();
        let (mut data, mut at) = (data, 0usize);
        while !data.is_empty() {
            if self.pending.is_empty() && data.len() >= part_len {
                // A whole part inside the caller's buffer: sent without a copy.
                let part = data.split_to(part_len);
                let crc = self.crc_in(&whole, at..at + part_len, pieces);
                at += part_len;
                self.send(part, crc).await?;
                continue;
            }
            self.room_for_a_part(part_len);
            // Copied, and summed as it is copied: cheaper than combining known CRCs.
            let take = (part_len - self.pending.len()).min(data.len());
            self.append_pending(&data.split_to(take));
            at += take;
            if self.pending.len() == part_len {
                let (part, crc) = self.take_pending();
                self.send(part, crc).await?;
            }
        }
        Ok(())
    }

    async fn finish_inner(&mut self) -> Result<WriteInfo> {
        let (rest, crc) = self.take_pending();
        if self.upload.upload_id.is_none() {
            let etag = put_whole(
                self.api.as_ref(),
                &self.policy,
                &self.uri,
                &rest,
                crc,
                &self.opts.put,
            )
            .await?;
            return Ok(WriteInfo {
                total_bytes: self.written,
                parts: 1,
                etag,
            });
        }
        if !rest.is_empty() {
            self.send(rest, crc).await?;
        }
        while !self.in_flight.is_empty() {
            self.reap_one().await?;
        }
        self.done.sort_unstable_by_key(|p| p.number);
        let id = self.upload.upload_id.clone().unwrap_or_default();
        let etag = complete(
            self.api.as_ref(),
            &self.policy,
            &self.uri,
            &id,
            &self.done,
            &self.opts.put.mode,
        )
        .await?;
        Ok(WriteInfo {
            total_bytes: self.written,
            parts: self.done.len() as u32,
            etag,
        })
    }
}

impl MultipartWriter {
    async fn write_checked(&mut self, data: Bytes, pieces: Option<&Pieces>) -> Result<()> {
        self.begin_write(data.len())?;
        let r = self.write_inner(data, pieces).await;
        self.end_write(r).await
    }

    /// A write of `len` bytes begins. The writer is failed until it completes: if its
    /// future is dropped half-way (Ctrl-C in Python), bytes may be missing, so the object
    /// must never be completed.
    fn begin_write(&mut self, len: usize) -> Result<()> {
        self.state.check_open(&self.uri.to_string())?;
        self.state = WriterState::Failed;
        self.written += len as u64;
        Ok(())
    }

    /// The write ended with `r`: open again, or the upload aborted.
    async fn end_write(&mut self, r: Result<()>) -> Result<()> {
        self.or_abort(r).await?;
        self.state = WriterState::Open;
        Ok(())
    }
}

#[async_trait]
impl ObjectWriter for MultipartWriter {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.write_checked(data, None).await
    }

    async fn write_slice(&mut self, data: &[u8]) -> Result<()> {
        self.begin_write(data.len())?;
        let r = self.copy_in(data).await;
        self.end_write(r).await
    }

    async fn write_with_pieces(&mut self, data: Bytes, pieces: Pieces) -> Result<()> {
        self.write_checked(data, Some(&pieces)).await
    }

    async fn finish(&mut self) -> Result<WriteInfo> {
        self.state.check_open(&self.uri.to_string())?;
        self.state = WriterState::Failed;
        let r = self.finish_inner().await;
        let info = self.or_abort(r).await?;
        self.state = WriterState::Finished;
        self.upload.upload_id = None;
        Ok(info)
    }

    async fn abort(&mut self) -> Result<()> {
        if self.state == WriterState::Open {
            self.state = WriterState::Aborted;
            self.pending.clear();
            self.abort_upload().await;
        }
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }
}

impl Drop for MultipartWriter {
    fn drop(&mut self) {
        // Dropping the JoinSet cancels the parts in flight; the upload itself is aborted by
        // the guard's drop, unless the caller asked to keep it.
        if !self.opts.abort_on_drop {
            self.upload.disarm();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectMeta;
    use crate::wire::Handlers;
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Default)]
    struct Fake {
        single: Mutex<Vec<Bytes>>,
        created: Mutex<u32>,
        /// Parts uploading right now, and the most ever at once.
        active: Mutex<(usize, usize)>,
        part_delay: Option<Duration>,
        parts: Mutex<Vec<(u32, Bytes)>>,
        fail_part: Option<u32>,
        no_etag_part: Option<u32>,
        aborted: Mutex<bool>,
        completed: Mutex<Vec<UploadedPart>>,
        /// The whole object's checksum Complete was sent with.
        completed_checksum: Mutex<Option<Crc>>,
        /// Apply the first Complete but lose its answer; later ones find no upload.
        lose_complete_answer: bool,
        complete_calls: Mutex<u32>,
        /// What HEAD reports as the object's ETag.
        head_etag: Mutex<Option<String>>,
        /// HEADs asked.
        heads: Mutex<u32>,
        /// Complete drops the last part, answering success (mlcommons/storage#593).
        drop_last_part: bool,
        /// Hold every part this long (to drop an upload half-way).
        hang_parts: bool,
        /// Apply the first single PUT but lose its answer.
        lose_put_answer: bool,
    }

    fn api(fake: &Arc<Fake>) -> Arc<dyn Operations> {
        fake.clone()
    }

    #[async_trait]
    impl Handlers for Fake {
        fn stack(&self) -> &'static str {
            "fake"
        }

        async fn put_object(
            &self,
            uri: &ObjectUri,
            data: Bytes,
            _: Option<Crc>,
            opts: &PutOptions,
        ) -> Result<Option<String>> {
            let mut single = self.single.lock().unwrap();
            if opts.mode == PutMode::Create && !single.is_empty() {
                return Err(Error::from_service(
                    uri.to_string(),
                    412,
                    "PreconditionFailed",
                    "",
                    None,
                ));
            }
            single.push(data);
            if self.lose_put_answer && single.len() == 1 {
                return Err(Error::transport(uri.to_string(), "connection reset"));
            }
            Ok(Some("\"single\"".into()))
        }
        async fn create_multipart_upload(
            &self,
            _: &ObjectUri,
            _: bool,
            _: &PutOptions,
        ) -> Result<String> {
            *self.created.lock().unwrap() += 1;
            Ok("u1".into())
        }
        async fn upload_part(
            &self,
            uri: &ObjectUri,
            _: &str,
            n: u32,
            data: Bytes,
            checksum: Option<Crc>,
        ) -> Result<Option<String>> {
            assert!(
                checksum.is_none_or(|c| c == Crc::of(&data)),
                "part {n}'s checksum"
            );
            {
                let mut a = self.active.lock().unwrap();
                a.0 += 1;
                a.1 = a.1.max(a.0);
            }
            if let Some(d) = self.part_delay {
                tokio::time::sleep(d).await;
            }
            if self.hang_parts {
                std::future::pending::<()>().await;
            }
            self.active.lock().unwrap().0 -= 1;
            if self.fail_part == Some(n) {
                return Err(Error::from_service(
                    uri.to_string(),
                    400,
                    "InvalidArgument",
                    "bad part",
                    None,
                ));
            }
            self.parts.lock().unwrap().push((n, data));
            // MD5-shaped, as S3's are, so that the object's ETag can be derived from them.
            Ok((self.no_etag_part != Some(n)).then(|| format!("\"{n:032x}\"")))
        }
        async fn complete_multipart_upload(
            &self,
            uri: &ObjectUri,
            _: &str,
            parts: &[UploadedPart],
            checksum: Option<Crc>,
            _: &PutMode,
        ) -> Result<Option<String>> {
            *self.completed_checksum.lock().unwrap() = checksum;
            let calls = {
                let mut c = self.complete_calls.lock().unwrap();
                *c += 1;
                *c
            };
            if self.lose_complete_answer {
                return Err(if calls == 1 {
                    *self.completed.lock().unwrap() = parts.to_vec();
                    Error::transport(uri.to_string(), "connection reset")
                } else {
                    Error::from_service(uri.to_string(), 404, "NoSuchUpload", "", None)
                });
            }
            *self.completed.lock().unwrap() = parts.to_vec();
            Ok(Some("\"final-3\"".into()))
        }
        async fn abort_multipart_upload(&self, _: &ObjectUri, _: &str) -> Result<()> {
            *self.aborted.lock().unwrap() = true;
            Ok(())
        }
        async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
            *self.heads.lock().unwrap() += 1;
            let completed = self.completed.lock().unwrap();
            let kept = completed.len() - usize::from(self.drop_last_part);
            Ok(ObjectMeta {
                uri: uri.clone(),
                size: completed[..kept].iter().filter_map(|p| p.size).sum(),
                etag: self.head_etag.lock().unwrap().clone(),
                last_modified: None,
                attributes: Attributes::default(),
            })
        }
    }

    #[tokio::test]
    async fn a_conditional_put_that_lost_its_answer_checks_what_it_wrote() {
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let data = Bytes::from_static(b"checkpoint");
        // Its first attempt wrote the object: the 412 of the retry is its own doing.
        let fake = Arc::new(Fake {
            lose_put_answer: true,
            ..Fake::default()
        });
        *fake.head_etag.lock().unwrap() = Some(md5_etag(&data).to_uppercase());
        let opts = PutOptions::create();
        let info = put(
            &api(&fake),
            &policy(),
            &uri,
            data.clone(),
            100,
            10,
            false,
            &opts,
        )
        .await
        .unwrap();
        assert_eq!(info.etag, Some(md5_etag(&data).to_uppercase()));
        // Another writer's object is there: the 412 stands.
        let fake = Arc::new(Fake {
            lose_put_answer: true,
            ..Fake::default()
        });
        *fake.head_etag.lock().unwrap() = Some("\"0123\"".into());
        let err = put(&api(&fake), &policy(), &uri, data, 100, 10, false, &opts)
            .await
            .unwrap_err();
        assert!(err.is_precondition_failed(), "{err}");
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        }
    }

    /// A store that answers Complete with success but lost a part leaves a short object:
    /// the upload fails as corrupt, naming the sizes.
    #[tokio::test]
    async fn a_part_the_store_lost_on_complete_fails_the_upload() {
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let data = Bytes::from((0..25u8).collect::<Vec<_>>());
        let fake = Arc::new(Fake {
            drop_last_part: true,
            ..Fake::default()
        });
        let opts = PutOptions::default();
        let err = upload(&api(&fake), &policy(), &uri, data.clone(), 10, false, &opts)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Integrity { reason, .. } if reason.contains("holds 20 bytes of the 25 sent in 3 parts")),
            "{err}"
        );
        let sound = Arc::new(Fake::default());
        upload(&api(&sound), &policy(), &uri, data, 10, false, &opts)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn parts_are_zero_copy_slices_completed_in_order() {
        let fake = Arc::new(Fake::default());
        let data = Bytes::from((0..25u8).collect::<Vec<_>>());
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let info = upload(
            &api(&fake),
            &policy(),
            &uri,
            data.clone(),
            10,
            false,
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(info.parts, Some(3));
        let mut parts = fake.parts.lock().unwrap().clone();
        parts.sort_by_key(|p| p.0);
        assert_eq!(
            parts.iter().map(|p| p.1.len()).collect::<Vec<_>>(),
            vec![10, 10, 5]
        );
        assert_eq!(parts[1].1.as_ptr(), data[10..].as_ptr(), "no copy");
        let done = fake.completed.lock().unwrap().clone();
        assert_eq!(
            done.iter().map(|p| p.number).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(!*fake.aborted.lock().unwrap());
    }

    #[tokio::test]
    async fn a_failed_part_aborts_the_upload() {
        let fake = Arc::new(Fake {
            fail_part: Some(2),
            ..Default::default()
        });
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let err = upload(
            &api(&fake),
            &policy(),
            &uri,
            Bytes::from(vec![0; 30]),
            10,
            false,
            &PutOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("InvalidArgument"), "{err}");
        assert!(*fake.aborted.lock().unwrap());
    }

    #[tokio::test]
    async fn a_part_without_etag_fails_the_upload_naming_it() {
        let fake = Arc::new(Fake {
            no_etag_part: Some(3),
            ..Default::default()
        });
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let err = upload(
            &api(&fake),
            &policy(),
            &uri,
            Bytes::from(vec![0; 30]),
            10,
            false,
            &PutOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("UploadPart 3 answered without an ETag"),
            "{err}"
        );
        assert!(err.to_string().contains("s3://bucket/k"), "{err}");
        assert!(fake.completed.lock().unwrap().is_empty());
        assert!(*fake.aborted.lock().unwrap());
    }

    const MIB: usize = 1 << 20;

    fn writer(fake: &Arc<Fake>, part_size: usize, max_in_flight: usize) -> MultipartWriter {
        MultipartWriter::new(
            fake.clone(),
            policy(),
            ObjectUri::parse("s3://bucket/ckpt").unwrap(),
            WriteOptions {
                part_size: part_size as u64,
                max_in_flight,
                adaptive: false,
                put: PutOptions::default(),
                abort_on_drop: true,
                checksums: true,
            },
            &PartsWindow::adaptive(crate::upload::PARTS_MEMORY),
        )
        .unwrap()
    }

    /// CRC pieces of `data`, taken in uneven runs as reads would land.
    fn tallied(data: &[u8]) -> Pieces {
        let mut tally = Tally::new(5 * MIB as u64);
        for run in data.chunks(300_007) {
            tally.update(run);
        }
        tally.finish()
    }

    #[tokio::test]
    async fn a_writer_combines_the_crcs_it_is_given_instead_of_reading_again() {
        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        let data: Vec<u8> = (0..(27 * MIB + 5)).map(|i| (i % 253) as u8).collect();
        // Writes of two parts and a bit, each with pieces of a part from its start: the
        // first write's parts are its pieces; the next ones start with bytes pending, so
        // their parts cut across pieces.
        for chunk in data.chunks(10 * MIB + 5) {
            let bytes = Bytes::copy_from_slice(chunk);
            w.write_with_pieces(bytes, tallied(chunk)).await.unwrap();
        }
        let info = w.finish().await.unwrap();
        assert_eq!(info.parts, 6);
        // The fake checks each part's CRC against its bytes, as S3 does.
        assert_eq!(
            *fake.completed_checksum.lock().unwrap(),
            Some(Crc::of(&data))
        );

        // Pieces of other bytes of the same length: the writer used them (and the store
        // refused the part), so the bytes were not read again.
        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        let other = vec![7u8; 6 * MIB];
        let sent = w
            .write_with_pieces(Bytes::from(data[..6 * MIB].to_vec()), tallied(&other))
            .await;
        let finished = w.finish().await;
        assert!(
            sent.is_err() || finished.is_err(),
            "a part sent with a CRC that is not its bytes' must fail"
        );
    }

    #[tokio::test]
    async fn writer_streams_parts_with_bounded_concurrency() {
        let fake = Arc::new(Fake {
            part_delay: Some(Duration::from_millis(20)),
            ..Default::default()
        });
        let mut w = writer(&fake, 5 * MIB, 2);
        let data: Vec<u8> = (0..(23 * MIB)).map(|i| (i % 251) as u8).collect();
        // Odd-sized writes straddle part boundaries.
        for chunk in data.chunks(3 * MIB + 7) {
            w.write(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
        assert!(
            !fake.parts.lock().unwrap().is_empty(),
            "parts were sent before finish"
        );
        let info = w.finish().await.unwrap();
        assert_eq!((info.total_bytes, info.parts), (23 * MIB as u64, 5));
        assert_eq!(
            fake.active.lock().unwrap().1,
            2,
            "never more than max_in_flight"
        );
        let mut parts = fake.parts.lock().unwrap().clone();
        parts.sort_by_key(|p| p.0);
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.1.to_vec()).collect();
        assert!(joined == data, "parts reassemble the bytes written");
        let done = fake.completed.lock().unwrap().clone();
        assert_eq!(
            done.iter().map(|p| p.number).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        // Each part was sent with its CRC, and Complete with the whole object's.
        assert!(done.iter().all(|p| p.checksum.is_some()));
        assert_eq!(
            *fake.completed_checksum.lock().unwrap(),
            Some(Crc::of(&data))
        );
        assert!(fake.single.lock().unwrap().is_empty());
        assert!(w.write(Bytes::from_static(b"x")).await.is_err(), "closed");
    }

    #[tokio::test]
    async fn lent_bytes_are_copied_into_parts_with_their_crcs() {
        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        let data: Vec<u8> = (0..(12 * MIB + 5)).map(|i| (i % 253) as u8).collect();
        // Pieces smaller and larger than a part, straddling the part boundaries.
        for chunk in data.chunks(7 * MIB + 3) {
            w.write_slice(chunk).await.unwrap();
        }
        let info = w.finish().await.unwrap();
        assert_eq!((info.total_bytes, info.parts), (data.len() as u64, 3));
        let mut parts = fake.parts.lock().unwrap().clone();
        parts.sort_by_key(|p| p.0);
        assert_eq!(
            parts.iter().map(|p| p.1.len()).collect::<Vec<_>>(),
            vec![5 * MIB, 5 * MIB, 2 * MIB + 5]
        );
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.1.to_vec()).collect();
        assert!(joined == data, "parts reassemble the bytes lent");
        let done = fake.completed.lock().unwrap().clone();
        assert!(done.iter().all(|p| p.checksum.is_some()));
        assert_eq!(
            *fake.completed_checksum.lock().unwrap(),
            Some(Crc::of(&data))
        );
        assert!(w.write_slice(b"x").await.is_err(), "closed");
    }

    #[tokio::test]
    async fn a_small_object_is_one_put() {
        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        w.write(Bytes::from_static(b"hello ")).await.unwrap();
        w.write(Bytes::from_static(b"world")).await.unwrap();
        let info = w.finish().await.unwrap();
        assert_eq!((info.total_bytes, info.parts), (11, 1));
        assert_eq!(
            fake.single.lock().unwrap().clone(),
            vec![Bytes::from_static(b"hello world")]
        );
        assert_eq!(*fake.created.lock().unwrap(), 0, "no multipart upload");
    }

    #[tokio::test]
    async fn abort_and_drop_and_failure_abort_the_upload() {
        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        w.write(Bytes::from(vec![0; 6 * MIB])).await.unwrap();
        w.abort().await.unwrap();
        assert!(*fake.aborted.lock().unwrap());
        assert!(fake.completed.lock().unwrap().is_empty());

        let fake = Arc::new(Fake::default());
        let mut w = writer(&fake, 5 * MIB, 2);
        w.write(Bytes::from(vec![0; 6 * MIB])).await.unwrap();
        drop(w);
        for _ in 0..100 {
            if *fake.aborted.lock().unwrap() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(*fake.aborted.lock().unwrap(), "dropping unfinished aborts");

        let fake = Arc::new(Fake {
            fail_part: Some(2),
            ..Default::default()
        });
        let mut w = writer(&fake, 5 * MIB, 1);
        let mut result = Ok(());
        for _ in 0..4 {
            result = w.write(Bytes::from(vec![0; 5 * MIB])).await;
            if result.is_err() {
                break;
            }
        }
        let err = match result {
            Err(e) => e,
            Ok(()) => w.finish().await.unwrap_err(),
        };
        assert!(err.to_string().contains("InvalidArgument"), "{err}");
        assert!(*fake.aborted.lock().unwrap());
        assert!(fake.completed.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_write_cancelled_half_way_never_completes_the_object() {
        let fake = Arc::new(Fake {
            part_delay: Some(Duration::from_secs(5)),
            ..Default::default()
        });
        let mut w = writer(&fake, 5 * MIB, 1);
        w.write(Bytes::from(vec![1; 5 * MIB])).await.unwrap();
        // The second part waits for the first's slot; cancel it there (as Ctrl-C does).
        let cancelled = tokio::time::timeout(
            Duration::from_millis(50),
            w.write(Bytes::from(vec![2; 5 * MIB])),
        )
        .await;
        assert!(cancelled.is_err(), "the write was still waiting");
        let err = w.finish().await.unwrap_err();
        assert!(err.to_string().contains("failed"), "{err}");
        assert!(
            fake.completed.lock().unwrap().is_empty() && fake.single.lock().unwrap().is_empty()
        );
    }

    #[test]
    fn part_sizes_outside_s3_limits_are_refused() {
        let fake = Arc::new(Fake::default());
        let err = MultipartWriter::new(
            fake,
            policy(),
            ObjectUri::parse("s3://bucket/k").unwrap(),
            WriteOptions {
                part_size: 1024,
                max_in_flight: 1,
                adaptive: false,
                put: PutOptions::default(),
                abort_on_drop: true,
                checksums: false,
            },
            &PartsWindow::adaptive(crate::upload::PARTS_MEMORY),
        )
        .unwrap_err();
        assert!(err.to_string().contains("part_size"), "{err}");
    }

    #[tokio::test]
    async fn a_complete_whose_answer_was_lost_is_checked_by_head() {
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let data = Bytes::from(vec![0; 25]);
        let parts: Vec<UploadedPart> = (1..=3).map(|n| part(n, &format!("\"{n:032x}\""))).collect();
        let right = multipart_etag(&parts).unwrap();
        // The object HEAD finds is the one the parts make: written.
        let fake = Arc::new(Fake {
            lose_complete_answer: true,
            head_etag: Mutex::new(Some(right.clone())),
            ..Default::default()
        });
        let info = upload(
            &api(&fake),
            &policy(),
            &uri,
            data.clone(),
            10,
            false,
            &PutOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(info.etag, Some(right.clone()));
        assert!(!*fake.aborted.lock().unwrap());
        assert_eq!(
            *fake.heads.lock().unwrap(),
            1,
            "one HEAD checks ETag and size"
        );
        // A store that sends it unquoted and in upper case: the same ETag.
        let shouted = right.trim_matches('"').to_ascii_uppercase();
        let fake = Arc::new(Fake {
            lose_complete_answer: true,
            head_etag: Mutex::new(Some(shouted)),
            ..Default::default()
        });
        assert!(
            upload(
                &api(&fake),
                &policy(),
                &uri,
                data.clone(),
                10,
                false,
                &PutOptions::default()
            )
            .await
            .is_ok()
        );
        // Another object (someone else's write, or none): an error, and the upload aborted.
        let fake = Arc::new(Fake {
            lose_complete_answer: true,
            head_etag: Mutex::new(Some("\"other-3\"".into())),
            ..Default::default()
        });
        let err = upload(
            &api(&fake),
            &policy(),
            &uri,
            data,
            10,
            false,
            &PutOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("was not written"), "{err}");
        assert!(*fake.aborted.lock().unwrap());
    }

    #[test]
    fn multipart_etags_follow_s3s_rule() {
        // Two parts whose ETags are md5("a"): md5 of the two binary digests, then "-2"
        // (the value Python's hashlib gives).
        let md5a = "\"0cc175b9c0f1b6a831c399e269772661\"".to_owned();
        assert_eq!(
            multipart_etag(&[part(1, &md5a), part(2, &md5a)]).as_deref(),
            Some("\"7b3c799ee8b11a11c798c8b41bed8502-2\"")
        );
        assert_eq!(multipart_etag(&[part(1, "\"not-md5\"")]), None);
    }

    fn part(number: u32, etag: &str) -> UploadedPart {
        UploadedPart {
            number,
            etag: etag.to_owned(),
            checksum: None,
            size: None,
        }
    }

    #[tokio::test]
    async fn a_whole_object_upload_dropped_before_complete_is_aborted() {
        let fake = Arc::new(Fake {
            hang_parts: true,
            ..Default::default()
        });
        let uri = ObjectUri::parse("s3://bucket/k").unwrap();
        let (a, p) = (api(&fake), policy());
        let opts = PutOptions::default();
        let upload = upload(&a, &p, &uri, Bytes::from(vec![0; 30]), 10, false, &opts);
        // Ctrl-C, or a caller's timeout: the future is dropped with parts in flight.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), upload)
                .await
                .is_err()
        );
        for _ in 0..100 {
            if *fake.aborted.lock().unwrap() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            *fake.aborted.lock().unwrap(),
            "the dropped upload was aborted"
        );
        assert!(fake.completed.lock().unwrap().is_empty());
    }
}
