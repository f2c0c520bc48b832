//! `MemoryWire`: S3's answers from a map in memory.

use super::faults::{Op, Script};
use crate::checksum::Crc;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, Upload, UploadMarker, UploadsPage};
use crate::multipart::{md5_etag, multipart_etag};
use crate::object::same_etag;
use crate::put_options::{Attributes, PutMode, PutOptions};
use crate::store::{ListEntry, ObjectMeta, PutInfo};
use crate::uri::ObjectUri;
use crate::wire::{BodySink, GetRequest, GetWire, ResponseHead};
use crate::wire::{Handlers, Operations, Reply, Request, UploadedPart};
use crate::wire::{Wire, WireFromConfig};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Bytes per body frame, as a socket would deliver them.
const FRAME: usize = 64 * 1024;

#[derive(Debug)]
struct Stored {
    data: Bytes,
    etag: String,
}

/// An open upload's parts: part number → (data, ETag).
type Parts = BTreeMap<u32, (Bytes, String)>;

#[derive(Debug, Default)]
struct State {
    /// (bucket, key) → object.
    objects: BTreeMap<(String, String), Stored>,
    /// upload id → the object it would create, and its parts.
    uploads: HashMap<String, (ObjectUri, Parts)>,
    next_upload: u64,
    /// Bodies still to cut short: (bytes sent before the cut, how many more GETs).
    cut: Option<(u64, u32)>,
    /// Keys a DeleteObjects refuses (`AccessDenied`).
    locked: BTreeSet<String>,
    /// DeleteObjects requests answered.
    delete_batches: u32,
}

/// A [`Wire`] over objects in memory. Listing pages hold `page_size` entries; each GET waits
/// `latency` before answering, so concurrency can be observed (`peak_in_flight`). Chosen
/// calls fail with chosen errors (`fail`), and every call is counted (`calls`).
#[derive(Debug)]
pub struct MemoryWire {
    cfg: StoreConfig,
    /// Shared by the nodes of one cluster (`another_node`).
    state: Arc<Mutex<State>>,
    page_size: usize,
    latency: Duration,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    faults: Script,
}

impl WireFromConfig for MemoryWire {
    fn from_config(cfg: StoreConfig) -> Result<Self> {
        Ok(Self {
            cfg,
            state: Arc::default(),
            page_size: 1000,
            latency: Duration::ZERO,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            faults: Script::default(),
        })
    }
}

fn not_found(uri: &ObjectUri) -> Error {
    Error::from_service(uri.to_string(), 404, "NoSuchKey", "no such key", None)
}

impl MemoryWire {
    /// An empty store configured by `cfg` (see `testing::config`): pages of 1000 entries,
    /// no latency.
    pub fn new(cfg: StoreConfig) -> Self {
        Self::from_config(cfg).expect("a memory wire always builds")
    }

    /// Another node of the same store: the same objects and uploads, its own latency,
    /// counters and faults (for the endpoints of one cluster).
    pub fn another_node(&self) -> Self {
        Self {
            cfg: self.cfg.clone(),
            state: self.state.clone(),
            page_size: self.page_size,
            latency: self.latency,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            faults: Script::default(),
        }
    }

    /// Listing pages of `n` entries (at least 1), to exercise pagination.
    pub fn with_page_size(mut self, n: usize) -> Self {
        self.page_size = n.max(1);
        self
    }

    /// Each GET waits `latency` before answering, so that GETs overlap and
    /// `peak_in_flight` shows how many ran at once.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// The next `times` calls of `op` fail with `error(uri)` before reaching the objects.
    pub fn fail(&self, op: Op, times: u32, error: fn(&ObjectUri) -> Error) {
        self.faults.fail(op, times, error);
    }

    /// Calls of `op` so far, failed or not.
    pub fn calls(&self, op: Op) -> u32 {
        self.faults.calls(op)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("memory wire lock")
    }

    /// Stores `data` under `uri` as a PUT would; returns its ETag.
    pub fn insert(&self, uri: &ObjectUri, data: impl Into<Bytes>) -> String {
        let data = data.into();
        let etag = md5_etag(&data);
        self.state().objects.insert(
            (uri.bucket().to_owned(), uri.key().to_owned()),
            Stored {
                data,
                etag: etag.clone(),
            },
        );
        etag
    }

    /// DeleteObjects refuses `key` from now on, as S3 refuses a key under a legal hold.
    pub fn lock_key(&self, key: &str) {
        self.state().locked.insert(key.to_owned());
    }

    /// How many DeleteObjects requests were answered.
    pub fn delete_batches(&self) -> u32 {
        self.state().delete_batches
    }

    /// The object's bytes, if it exists.
    pub fn object(&self, uri: &ObjectUri) -> Option<Bytes> {
        self.state()
            .objects
            .get(&(uri.bucket().to_owned(), uri.key().to_owned()))
            .map(|o| o.data.clone())
    }

    /// Multipart uploads created and neither completed nor aborted.
    pub fn open_uploads(&self) -> usize {
        self.state().uploads.len()
    }

    /// The next `times` GET bodies longer than `after` bytes end there (a connection reset
    /// mid-body).
    pub fn cut_bodies(&self, after: u64, times: u32) {
        self.state().cut = Some((after, times));
    }

    /// The most GETs that were answering at once.
    pub fn peak_in_flight(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Where to cut a body of `len` bytes, if it is one of the next bodies to cut. Only a
    /// body longer than the cut counts: a resumed GET for the rest of a cut range may arrive
    /// before the other ranges' first GETs, and must not use up a cut meant for them.
    fn take_cut(&self, len: u64) -> Option<u64> {
        let mut st = self.state();
        let (after, times) = st.cut?;
        if len <= after {
            return None;
        }
        st.cut = (times > 1).then_some((after, times - 1));
        Some(after)
    }
}

/// Counts a GET in flight for as long as it lives.
struct InFlight<'a>(&'a MemoryWire);

impl<'a> InFlight<'a> {
    fn enter(w: &'a MemoryWire) -> Self {
        let now = w.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        w.peak.fetch_max(now, Ordering::SeqCst);
        Self(w)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl GetWire for MemoryWire {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        self.faults.call(Op::GetObject, req.uri)?;
        let _counted = InFlight::enter(self);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let uri = req.uri;
        let (data, etag) = {
            let st = self.state();
            let o = st
                .objects
                .get(&(uri.bucket().to_owned(), uri.key().to_owned()))
                .ok_or_else(|| not_found(uri))?;
            (o.data.clone(), o.etag.clone())
        };
        if let Some(want) = req.if_match
            && !same_etag(want, &etag)
        {
            return Err(Error::from_service(
                uri.to_string(),
                412,
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold",
                None,
            ));
        }
        let len = data.len() as u64;
        let (body, content_range) = match req.range {
            None => (data, None),
            Some(r) if r.start() >= len => {
                return Err(Error::from_service(
                    uri.to_string(),
                    416,
                    "InvalidRange",
                    "The requested range is not satisfiable",
                    None,
                ));
            }
            Some(r) => {
                let end = r.end().map_or(len, |e| e.min(len));
                let range = format!("bytes {}-{}/{len}", r.start(), end - 1);
                (data.slice(r.start() as usize..end as usize), Some(range))
            }
        };
        sink.begin(ResponseHead::from_headers(
            uri,
            req.range,
            body.len() as u64,
            content_range.as_deref(),
            Some(etag),
        )?)?;
        let sent = match self.take_cut(body.len() as u64) {
            Some(after) => body.slice(..after as usize),
            None => body,
        };
        let frames: Vec<std::result::Result<Bytes, std::convert::Infallible>> = (0..sent.len())
            .step_by(FRAME)
            .map(|at| Ok(sent.slice(at..(at + FRAME).min(sent.len()))))
            .collect();
        sink.drain(
            self.cfg.timeouts.stall,
            futures::stream::iter(frames),
            |e| match e {},
        )
        .await
    }
}

/// As S3: bytes that do not match the checksum sent with them are refused (400 BadDigest).
fn check(uri: &ObjectUri, data: &[u8], checksum: Option<Crc>) -> Result<()> {
    match checksum {
        Some(sent) if sent != Crc::of(data) => Err(Error::from_service(
            uri.to_string(),
            400,
            "BadDigest",
            "The CRC64NVME you specified did not match the calculated checksum.",
            None,
        )),
        _ => Ok(()),
    }
}

/// S3's conditional write, checked under the lock that the write then holds.
fn admit(st: &State, uri: &ObjectUri, mode: &PutMode) -> Result<()> {
    let current = st
        .objects
        .get(&(uri.bucket().to_owned(), uri.key().to_owned()));
    let refused = |status, code| Err(Error::from_service(uri.to_string(), status, code, "", None));
    match (mode, current) {
        (PutMode::Overwrite, _) | (PutMode::Create, None) => Ok(()),
        (PutMode::Update(etag), Some(o)) if same_etag(&o.etag, etag) => Ok(()),
        (PutMode::Update(_), None) => refused(404, "NoSuchKey"),
        _ => refused(412, "PreconditionFailed"),
    }
}

/// This double keeps no headers: it says so rather than drop them.
fn refuse_attributes(uri: &ObjectUri, attributes: &Attributes) -> Result<()> {
    if attributes.is_empty() {
        return Ok(());
    }
    Err(crate::store::unsupported(
        "memory",
        uri,
        "storing object attributes",
    ))
}

#[async_trait]
impl Operations for MemoryWire {
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        // A batch's fault names its first object; an empty batch is never scripted.
        if let Some(uri) = req.uri() {
            self.faults.call(req.operation(), uri)?;
        }
        Answers(self).send(req).await
    }
}

/// The memory wire's answers to each request, past its faults.
struct Answers<'a>(&'a MemoryWire);

impl std::ops::Deref for Answers<'_> {
    type Target = MemoryWire;

    fn deref(&self) -> &MemoryWire {
        self.0
    }
}

#[async_trait]
impl Handlers for Answers<'_> {
    fn stack(&self) -> &'static str {
        "memory"
    }

    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        check(uri, &data, checksum)?;
        refuse_attributes(uri, &opts.attributes)?;
        admit(&self.state(), uri, &opts.mode)?;
        Ok(Some(self.insert(uri, data)))
    }

    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        _checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        refuse_attributes(uri, &opts.attributes)?;
        let mut st = self.state();
        st.next_upload += 1;
        let id = format!("upload-{}", st.next_upload);
        st.uploads.insert(id.clone(), (uri.clone(), Parts::new()));
        Ok(id)
    }

    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        check(uri, &data, checksum)?;
        let etag = md5_etag(&data);
        let mut st = self.state();
        let (_, parts) = st.uploads.get_mut(upload_id).ok_or_else(|| {
            Error::from_service(uri.to_string(), 404, "NoSuchUpload", upload_id, None)
        })?;
        parts.insert(part_number, (data, etag.clone()));
        Ok(Some(etag))
    }

    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        let mut st = self.state();
        admit(&st, uri, mode)?;
        let (_, stored) = st.uploads.remove(upload_id).ok_or_else(|| {
            Error::from_service(uri.to_string(), 404, "NoSuchUpload", upload_id, None)
        })?;
        let mut data = Vec::new();
        for UploadedPart {
            number: n, etag, ..
        } in parts
        {
            match stored.get(n) {
                Some((bytes, tag)) if same_etag(tag, etag) => data.extend_from_slice(bytes),
                _ => {
                    return Err(Error::from_service(
                        uri.to_string(),
                        400,
                        "InvalidPart",
                        format!("part {n}"),
                        None,
                    ));
                }
            }
        }
        check(uri, &data, checksum)?;
        let etag = multipart_etag(parts).unwrap_or_else(|| md5_etag(&data));
        st.objects.insert(
            (uri.bucket().to_owned(), uri.key().to_owned()),
            Stored {
                data: data.into(),
                etag: etag.clone(),
            },
        );
        Ok(Some(etag))
    }

    async fn abort_multipart_upload(&self, _: &ObjectUri, upload_id: &str) -> Result<()> {
        self.state().uploads.remove(upload_id);
        Ok(())
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let st = self.state();
        let o = st
            .objects
            .get(&(uri.bucket().to_owned(), uri.key().to_owned()))
            .ok_or_else(|| not_found(uri))?;
        Ok(ObjectMeta {
            uri: uri.clone(),
            size: o.data.len() as u64,
            etag: Some(o.etag.clone()),
            last_modified: Some(SystemTime::UNIX_EPOCH),
            attributes: Attributes::default(),
        })
    }

    /// Keys in order, from after `token` (the last key or prefix of the previous page);
    /// without recursion, keys below the next `/` are one prefix entry.
    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let (recursive, token) = (
            opts.recursive,
            opts.token.clone().or(opts.start_after.clone()),
        );
        let page_size = opts
            .max_keys
            .map_or(self.page_size, |m| (m as usize).min(self.page_size));
        let st = self.state();
        let mut entries: BTreeMap<String, ListEntry> = BTreeMap::new();
        let mut prefixes = BTreeSet::new();
        for ((bucket, key), o) in &st.objects {
            if bucket != prefix.bucket() || !key.starts_with(prefix.key()) {
                continue;
            }
            let rest = &key[prefix.key().len()..];
            match rest.find('/').filter(|_| !recursive) {
                Some(at) => {
                    let p = format!("{}{}", prefix.key(), &rest[..=at]);
                    if prefixes.insert(p.clone()) {
                        entries.insert(p.clone(), ListEntry::Prefix(prefix.with_key(p)));
                    }
                }
                None => {
                    entries.insert(
                        key.clone(),
                        ListEntry::Object(ObjectMeta {
                            uri: prefix.with_key(key.clone()),
                            size: o.data.len() as u64,
                            etag: Some(o.etag.clone()),
                            last_modified: Some(SystemTime::UNIX_EPOCH),
                            attributes: Attributes::default(),
                        }),
                    );
                }
            }
        }
        let after: Vec<(String, ListEntry)> = entries
            .into_iter()
            .filter(|(k, _)| token.as_ref().is_none_or(|t| k > t))
            .collect();
        let truncated = after.len() > page_size;
        let page: Vec<(String, ListEntry)> = after.into_iter().take(page_size).collect();
        let next = truncated.then(|| page.last().map(|(k, _)| k.clone()).unwrap_or_default());
        ListPage::new(
            &prefix.to_string(),
            page.into_iter().map(|(_, e)| e).collect(),
            truncated,
            next,
        )
    }
    /// Uploads under the prefix by (key, upload ID), `page_size` to a page.
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        let st = self.state();
        let mut all: Vec<Upload> = st
            .uploads
            .iter()
            .filter(|(_, (uri, _))| {
                uri.bucket() == prefix.bucket() && uri.key().starts_with(prefix.key())
            })
            .map(|(id, (uri, _))| Upload {
                uri: uri.clone(),
                upload_id: id.clone(),
                initiated: Some(SystemTime::UNIX_EPOCH),
            })
            .collect();
        all.sort_by(|a, b| (a.uri.key(), &a.upload_id).cmp(&(b.uri.key(), &b.upload_id)));
        all.retain(|u| {
            from.as_ref()
                .is_none_or(|m| (u.uri.key(), u.upload_id.as_str()) > (&m.key, &m.upload_id))
        });
        let truncated = all.len() > self.page_size;
        all.truncate(self.page_size);
        let next = all.last().map(|u| UploadMarker {
            key: u.uri.key().to_owned(),
            upload_id: u.upload_id.clone(),
        });
        UploadsPage::new(&prefix.to_string(), all, truncated, next)
    }
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        self.state()
            .objects
            .remove(&(uri.bucket().to_owned(), uri.key().to_owned()));
        Ok(())
    }
    /// Keys in `locked` are refused with `AccessDenied`, as S3 refuses one key of a batch.
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let mut st = self.state();
        st.delete_batches += 1;
        let mut refused = Vec::new();
        for uri in uris {
            if st.locked.contains(uri.key()) {
                refused.push(crate::wire::delete_refused(uri, "AccessDenied", "locked"));
            } else {
                st.objects
                    .remove(&(uri.bucket().to_owned(), uri.key().to_owned()));
            }
        }
        Ok(refused)
    }
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let mut st = self.state();
        let key = |u: &ObjectUri| (u.bucket().to_owned(), u.key().to_owned());
        let Some(src) = st.objects.get(&key(from)) else {
            return Err(not_found(from));
        };
        let copy = Stored {
            data: src.data.clone(),
            etag: src.etag.clone(),
        };
        let etag = copy.etag.clone();
        st.objects.insert(key(to), copy);
        Ok(Some(PutInfo {
            etag: Some(etag),
            parts: None,
        }))
    }
}

impl Wire for MemoryWire {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn config(&self) -> &StoreConfig {
        &self.cfg
    }
}
