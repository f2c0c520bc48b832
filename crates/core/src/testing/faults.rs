//! `Faulty`: a wire whose chosen calls fail with chosen errors.

use crate::checksum::Crc;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::listing::{ListOptions, ListPage, UploadMarker, UploadsPage};
use crate::put_options::{PutMode, PutOptions};
use crate::store::{ObjectMeta, PutInfo};
use crate::uri::ObjectUri;
use crate::wire::Wire;
use crate::wire::{BodySink, GetRequest, GetWire};
use crate::wire::{PutWire, UploadedPart};
use async_trait::async_trait;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// The calls of a wire, as faults and counters name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `head_object`.
    Head,
    /// `get_object`.
    Get,
    /// `list_objects_v2`.
    List,
    /// `put_object`, a single PUT.
    Put,
    /// `create_multipart_upload`.
    CreateUpload,
    /// `upload_part`.
    UploadPart,
    /// `complete_multipart_upload`.
    CompleteUpload,
    /// `abort_multipart_upload`.
    AbortUpload,
    /// `delete_object`.
    Delete,
    /// `delete_objects` (the script's error names the batch's first object).
    DeleteBatch,
    /// `copy_object` (the script's error names the destination).
    Copy,
    /// `list_multipart_uploads`.
    ListUploads,
}

/// A 503 SlowDown, as S3 answers a burst.
pub fn slow_down(uri: &ObjectUri) -> Error {
    Error::from_service(
        uri.to_string(),
        503,
        "SlowDown",
        "Please reduce your request rate",
        None,
    )
}

/// A connection reset before any answer.
pub fn reset(uri: &ObjectUri) -> Error {
    Error::transport(uri.to_string(), "connection reset by peer")
}

type MakeError = fn(&ObjectUri) -> Error;

/// `inner`, except that the next calls of an operation fail as scripted (`fail`). Every call
/// is counted, failed or not (`calls`).
#[derive(Debug)]
pub struct Faulty<W> {
    inner: W,
    script: Mutex<HashMap<Op, (u32, MakeError)>>,
    calls: Mutex<HashMap<Op, u32>>,
}

impl<W> Faulty<W> {
    /// `inner` with no faults scripted yet.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            script: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// The wrapped wire (to insert objects, read its counters).
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// The next `times` calls of `op` fail with `error(uri)` instead of reaching `inner`.
    pub fn fail(&self, op: Op, times: u32, error: MakeError) {
        self.script
            .lock()
            .expect("faults lock")
            .insert(op, (times, error));
    }

    /// Calls of `op` so far.
    pub fn calls(&self, op: Op) -> u32 {
        self.calls
            .lock()
            .expect("faults lock")
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// Counts a call of `op`, and fails it if the script says so.
    fn call(&self, op: Op, uri: &ObjectUri) -> Result<()> {
        *self
            .calls
            .lock()
            .expect("faults lock")
            .entry(op)
            .or_default() += 1;
        let mut script = self.script.lock().expect("faults lock");
        match script.get_mut(&op) {
            Some((times, error)) if *times > 0 => {
                *times -= 1;
                Err(error(uri))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> GetWire for Faulty<W> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        self.call(Op::Get, req.uri)?;
        self.inner.get_object(req, sink).await
    }
}

#[async_trait]
// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> PutWire for Faulty<W> {
    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        self.call(Op::Put, uri)?;
        self.inner.put_object(uri, data, checksum, opts).await
    }

    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        self.call(Op::CreateUpload, uri)?;
        self.inner
            .create_multipart_upload(uri, checksummed, opts)
            .await
    }

    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        self.call(Op::UploadPart, uri)?;
        self.inner
            .upload_part(uri, upload_id, part_number, data, checksum)
            .await
    }

    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        self.call(Op::CompleteUpload, uri)?;
        self.inner
            .complete_multipart_upload(uri, upload_id, parts, checksum, mode)
            .await
    }

    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        self.call(Op::AbortUpload, uri)?;
        self.inner.abort_multipart_upload(uri, upload_id).await
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        self.call(Op::Head, uri)?;
        self.inner.head_object(uri).await
    }
}

#[async_trait]
// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> Wire for Faulty<W> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn config(&self) -> &StoreConfig {
        self.inner.config()
    }

    fn endpoint_stats(&self) -> Vec<crate::object::EndpointStats> {
        self.inner.endpoint_stats()
    }

    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        self.call(Op::List, prefix)?;
        self.inner.list_objects_v2(prefix, opts).await
    }

    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        self.call(Op::Delete, uri)?;
        self.inner.delete_object(uri).await
    }

    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<crate::Error>> {
        if let Some(first) = uris.first() {
            self.call(Op::DeleteBatch, first)?;
        }
        self.inner.delete_objects(uris).await
    }

    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        self.call(Op::Copy, to)?;
        self.inner.copy_object(from, to).await
    }

    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        self.call(Op::ListUploads, prefix)?;
        self.inner.list_multipart_uploads(prefix, from).await
    }
}
