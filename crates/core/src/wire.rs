//! The policy layer: a backend implements `Wire` (one attempt of each S3 call, in its client
//! library's terms) and `S3Store` turns it into an `ObjectStore`, writing every rule of a
//! request once — the retry budget, resumption and version pinning of bodies, the
//! multipart threshold and upload loop, pagination, and the bound on requests in flight.
//!
//! The split follows Apache object_store's `GetClient`/`GetClientExt`: what differs between
//! client stacks (building a request, reading its answer, mapping the library's typed errors
//! to ours) is the wire; what must not differ is here.

use crate::config::StoreConfig;
use crate::error::Result;
use crate::listing::{ListPage, paginate};
use crate::multipart::{self, MultipartApi, MultipartWriter};
use crate::resume::{BodySink, GetAttempt, GetRequest, get_with_resume};
use crate::retry::retry;
use crate::segment::Segment;
use crate::store::{GetInfo, GetOptions, ListEntry, ObjectMeta, ObjectStore, PutInfo, PutPayload};
use crate::upload::{ObjectWriter, WriteOptions};
use crate::uri::ObjectUri;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::sync::Arc;
use tokio::sync::{Semaphore, SemaphorePermit};

/// One attempt of each S3 operation, as a client stack makes it: no retries, no resumption,
/// no pagination (those are `S3Store`'s). Timeouts that only the stack can see (connect,
/// first byte) are the wire's; errors are mapped to `Error` kinds by type, status and S3
/// code. The GET attempt (`GetAttempt`) and the multipart calls (`MultipartApi`, whose
/// `head_object` is the single HEAD attempt) are the two halves defined where their policy
/// lives.
#[async_trait]
pub trait Wire: GetAttempt + MultipartApi + std::fmt::Debug {
    /// The backend's name as `S3_BACKEND` spells it.
    fn backend(&self) -> &'static str;

    /// The configuration the wire was built from: `S3Store` takes its policy from it.
    fn config(&self) -> &StoreConfig;

    /// One ListObjectsV2 page of keys under `prefix`'s key, from `token` (`None`: the first
    /// page); `recursive = false` groups keys below the next `/` into prefixes.
    async fn list_page(
        &self,
        prefix: &ObjectUri,
        recursive: bool,
        token: Option<String>,
    ) -> Result<ListPage>;

    /// One DeleteObject.
    async fn delete_once(&self, uri: &ObjectUri) -> Result<()>;
}

/// A backend whose wire is built from configuration alone, so `S3Store::new(cfg)` makes it.
pub trait WireFromConfig: Wire + Sized {
    fn from_config(cfg: StoreConfig) -> Result<Self>;
}

/// An `ObjectStore` over any `Wire`: the one implementation of request policy.
#[derive(Debug)]
pub struct S3Store<W> {
    inner: Arc<Limited<W>>,
}

impl<W> Clone for S3Store<W> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<W: WireFromConfig> S3Store<W> {
    pub fn new(cfg: StoreConfig) -> Result<Self> {
        Ok(Self::over(W::from_config(cfg)?))
    }

    /// Builds the store from the standard AWS environment (see `StoreConfig::from_env`).
    pub async fn from_env() -> Result<Self> {
        Self::new(StoreConfig::from_env().await?)
    }
}

impl<W: Wire> S3Store<W> {
    /// The policy layer over `wire`, configured by `wire.config()`.
    pub fn over(wire: W) -> Self {
        let permits = Semaphore::new(wire.config().max_connections.max(1));
        Self {
            inner: Arc::new(Limited { wire, permits }),
        }
    }

    pub fn wire(&self) -> &W {
        &self.inner.wire
    }

    fn cfg(&self) -> &StoreConfig {
        self.inner.wire.config()
    }

    fn multipart_api(&self) -> Arc<dyn MultipartApi> {
        self.inner.clone()
    }
}

/// The wire behind one permit per request in flight (`max_connections`): over HTTP/1.1 a
/// request holds a connection, and neither hyper's pool nor the SDK's bounds them. The
/// permit is held until the attempt's body has been read.
#[derive(Debug)]
struct Limited<W> {
    wire: W,
    permits: Semaphore,
}

impl<W> Limited<W> {
    async fn permit(&self) -> SemaphorePermit<'_> {
        self.permits
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }
}

#[async_trait]
impl<W: Wire> GetAttempt for Limited<W> {
    async fn get_attempt(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let _permit = self.permit().await;
        self.wire.get_attempt(req, sink).await
    }
}

#[async_trait]
impl<W: Wire> MultipartApi for Limited<W> {
    async fn put_object(&self, uri: &ObjectUri, data: Bytes) -> Result<Option<String>> {
        let _permit = self.permit().await;
        self.wire.put_object(uri, data).await
    }

    async fn create_upload(&self, uri: &ObjectUri) -> Result<String> {
        let _permit = self.permit().await;
        self.wire.create_upload(uri).await
    }

    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
    ) -> Result<Option<String>> {
        let _permit = self.permit().await;
        self.wire
            .upload_part(uri, upload_id, part_number, data)
            .await
    }

    async fn complete_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<Option<String>> {
        let _permit = self.permit().await;
        self.wire.complete_upload(uri, upload_id, parts).await
    }

    async fn abort_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let _permit = self.permit().await;
        self.wire.abort_upload(uri, upload_id).await
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let _permit = self.permit().await;
        self.wire.head_object(uri).await
    }
}

#[async_trait]
impl<W: Wire> ObjectStore for S3Store<W> {
    fn backend(&self) -> &'static str {
        self.inner.wire.backend()
    }

    async fn head(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        retry(&self.cfg().retry, || self.inner.head_object(uri)).await
    }

    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        get_with_resume(self.inner.as_ref(), &self.cfg().retry, uri, opts, dst).await
    }

    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>> {
        let prefix = prefix.clone();
        paginate(&self.cfg().retry, move |token| {
            let prefix = prefix.clone();
            async move {
                let _permit = self.inner.permit().await;
                self.inner.wire.list_page(&prefix, recursive, token).await
            }
        })
    }

    async fn put(&self, uri: &ObjectUri, data: PutPayload) -> Result<PutInfo> {
        let cfg = self.cfg();
        multipart::put(
            &self.multipart_api(),
            &cfg.retry,
            uri,
            data.0,
            cfg.multipart_threshold,
            cfg.multipart_part_size,
        )
        .await
    }

    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>> {
        Ok(Box::new(MultipartWriter::new(
            self.multipart_api(),
            self.cfg().retry,
            uri.clone(),
            opts,
        )?))
    }

    async fn delete(&self, uri: &ObjectUri) -> Result<()> {
        retry(&self.cfg().retry, || async {
            let _permit = self.inner.permit().await;
            self.inner.wire.delete_once(uri).await
        })
        .await
    }
}
