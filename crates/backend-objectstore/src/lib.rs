//! sluice-backend-objectstore: the `ObjectStore` trait over Apache object_store's stores:
//! `AmazonS3` for `s3://` (built from the same `StoreConfig` as every backend), and
//! `MicrosoftAzure` for `az://` and `GoogleCloudStorage` for `gs://`, each configured from
//! its cloud's own environment (`azure`, `gcp`). One wire serves the three ([`Provider`]
//! says what differs).
//!
//! object_store addresses one bucket per store, so a store is built per bucket on first
//! use. Its own retries are off: core's policy layer (`S3Store`) retries, resumes bodies,
//! pages through listings and drives multipart uploads, as for every backend. Errors keep
//! the URI: object_store's are mapped to ours (see `errors`).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod aws;
mod env;
mod errors;
mod http;

pub mod attributes;
pub mod azure;
pub mod gcp;

pub use aws::Aws;
pub use azure::Azure;
pub use gcp::Gcs;

use async_trait::async_trait;
use bytes::Bytes;
use errors::{Refused, map_error, range_not_satisfiable, whole_object};
use futures::{FutureExt as _, StreamExt as _};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetRange, ObjectStore as _, ObjectStoreExt as _, PutMultipartOptions,
    RetryConfig, UpdateVersion,
};
use sluice_core::checksum::Crc;
use sluice_core::listing::{ListOptions, ListPage, UploadMarker, UploadsPage};
use sluice_core::unsupported;
use sluice_core::wire::{BodySink, GetRequest, GetWire, ResponseHead};
use sluice_core::wire::{Handlers, UploadedPart};
use sluice_core::{
    Attributes, ByteRange, Error, ListEntry, ObjectMeta, ObjectUri, PutInfo, PutMode, PutOptions,
    Result, S3Store, StoreConfig, Wire, WireFromConfig,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The object_store backend's store: core's policy layer over `ObjectStoreWire`.
pub type ObjectStoreBackend = S3Store<ObjectStoreWire>;

/// What differs between the object stores one wire speaks to: the store object_store builds
/// for a bucket, from what configuration.
pub trait Provider: Sized + Send + Sync + std::fmt::Debug + 'static {
    /// object_store's client of one bucket (or container).
    type Store: object_store::ObjectStore + MultipartStore + PaginatedListStore;

    /// Reads what the store needs beyond `cfg` (its cloud's environment), refusing here,
    /// before any request, what is missing.
    fn from_config(cfg: &StoreConfig) -> Result<Self>;

    /// Builds the client of `bucket`, sending through `client`.
    fn build(&self, cfg: &StoreConfig, client: Client, bucket: &str) -> Result<Self::Store>;

    /// Whether object_store deletes a batch as one request per key (each key's error its
    /// own) rather than as S3's one DeleteObjects (whose error is the whole request's).
    const ONE_REQUEST_PER_KEY: bool = true;

    /// Whether a whole object is asked for as `bytes=0-`, so that a part of it answered as
    /// the whole is caught by its Content-Range (S3 gateways; see `get_object`). Azure and
    /// GCS answer an unranged GET with the object: asked plainly, an empty one costs no 416
    /// and no second request.
    const WHOLE_AS_RANGE: bool = false;
}

/// How every store's HTTP client is built: ours (`http::Connector`), with object_store's own
/// retries off (core's policy layer retries, as for every backend).
#[derive(Debug)]
pub struct Client {
    connector: http::Connector,
}

impl Client {
    /// object_store's options: plain http allowed only for an `http://` endpoint. No
    /// whole-request timeout: it would cut off large bodies on slow links; the body's stall
    /// timeout is enforced per chunk in `get_object`.
    fn options(allow_http: bool) -> ClientOptions {
        ClientOptions::new().with_allow_http(allow_http)
    }

    /// One attempt per call.
    fn retry() -> RetryConfig {
        RetryConfig {
            max_retries: 0,
            ..Default::default()
        }
    }
}

/// One request at a time through an object_store store (its own retries off): `AmazonS3`
/// unless `P` says otherwise.
#[derive(Debug)]
pub struct ObjectStoreWire<P: Provider = Aws> {
    cfg: StoreConfig,
    provider: P,
    /// The HTTP client's settings, the CA bundle parsed once.
    http: http::Settings,
    stores: Arc<Mutex<HashMap<String, Arc<P::Store>>>>,
}

impl<P: Provider> WireFromConfig for ObjectStoreWire<P> {
    fn from_config(cfg: StoreConfig) -> Result<Self> {
        let roots = match cfg.read_ca_bundle()? {
            Some(pem) => reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::config("AWS_CA_BUNDLE", e.to_string()))?,
            None => Vec::new(),
        };
        let http = http::Settings {
            connect_timeout: cfg.timeouts.connect,
            read_timeout: cfg.timeouts.first_byte.max(cfg.timeouts.stall),
            max_idle_per_host: cfg.max_connections,
            http2: cfg.http2,
            roots,
        };
        let this = Self {
            provider: P::from_config(&cfg)?,
            cfg,
            http,
            stores: Arc::default(),
        };
        // Build once up front so a bad configuration fails here, not on first use.
        this.build("config-check")?;
        Ok(this)
    }
}

impl<P: Provider> ObjectStoreWire<P> {
    fn build(&self, bucket: &str) -> Result<P::Store> {
        let client = Client {
            connector: http::Connector(self.http.clone()),
        };
        self.provider.build(&self.cfg, client, bucket)
    }

    /// Maps a failed request's error (other than a GET's) to ours, naming `uri`.
    fn err<'a>(&'a self, uri: &'a ObjectUri) -> impl Fn(object_store::Error) -> Error + 'a {
        |e| map_error(uri, &self.cfg.timeouts, e, Refused::Transport)
    }

    fn store(&self, bucket: &str) -> Result<Arc<P::Store>> {
        let mut stores = self.stores.lock().expect("store map lock");
        if let Some(s) = stores.get(bucket) {
            return Ok(s.clone());
        }
        let s = Arc::new(self.build(bucket)?);
        stores.insert(bucket.to_owned(), s.clone());
        Ok(s)
    }
}

/// The object_store path naming exactly `uri`'s key. `Path::from` would percent-encode
/// characters object_store avoids (`<`, `%`, `~`, ...) into the key itself, addressing
/// another object; `Path::parse` keeps them, but drops a leading or trailing `/` (a
/// "directory marker" `a/` would become the object `a`) and refuses an empty segment, `.`,
/// `..` or a control character: such keys are refused here, by name.
fn path(uri: &ObjectUri) -> Result<Path> {
    let refuse = |why: String| Error::InvalidUri {
        uri: uri.to_string(),
        reason: format!(
            "the objectstore backend cannot name this key ({why}); hyper and awssdk can"
        ),
    };
    let p = Path::parse(uri.key()).map_err(|e| refuse(e.to_string()))?;
    if p.as_ref() != uri.key() {
        return Err(refuse(format!("object_store reads it as {:?}", p.as_ref())));
    }
    Ok(p)
}

fn meta(bucket_uri: &ObjectUri, m: object_store::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        uri: bucket_uri.with_key(m.location.to_string()),
        size: m.size,
        etag: m.e_tag,
        last_modified: Some(m.last_modified.into()),
        attributes: Attributes::default(),
    }
}

#[async_trait]
impl<P: Provider> GetWire for ObjectStoreWire<P> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let store = self.store(req.uri.bucket())?;
        // From S3 (`WHOLE_AS_RANGE`) a whole object is asked for as `bytes=0-`: object_store
        // then checks the reply's Content-Range and reports it, where an unranged GET answered
        // with a part of the object (206 bytes 0-49/100) would pass as the whole of a 50-byte
        // object.
        let asked = req.range.unwrap_or(ByteRange::from_offset(0));
        let ranged = req.range.is_some() || P::WHOLE_AS_RANGE;
        let opts = object_store::GetOptions {
            range: ranged.then(|| match asked.end() {
                Some(end) => GetRange::Bounded(asked.start()..end),
                None => GetRange::Offset(asked.start()),
            }),
            if_match: req.if_match.map(str::to_owned),
            ..Default::default()
        };
        let res = match store.get_opts(&path(req.uri)?, opts.clone()).await {
            // From byte 0, the whole object may be the answer: an empty object (S3 answers
            // `bytes=0-` with 416), or a 200 to a range, which object_store refuses and HTTP
            // allows (RFC 9110 §14.2; some gateways do it). Read it unranged, and let the
            // checks below judge it.
            Err(e)
                if asked.start() == 0
                    && (whole_object(&e) || (req.range.is_none() && range_not_satisfiable(&e))) =>
            {
                let whole = object_store::GetOptions {
                    range: None,
                    ..opts
                };
                store.get_opts(&path(req.uri)?, whole).await
            }
            r => r,
        }
        .map_err(|e| map_error(req.uri, &self.cfg.timeouts, e, Refused::Integrity))?;
        // object_store reports the range it got and the object's size; checked against the
        // request by core like every backend's headers (object_store checks less).
        let (got, size) = (res.range.clone(), res.meta.size);
        let content_range = (got != (0..size) || (req.range.is_some() && got.end > got.start))
            .then(|| format!("bytes {}-{}/{size}", got.start, got.end.saturating_sub(1)));
        sink.begin(ResponseHead::from_headers(
            req.uri,
            req.range,
            got.end - got.start,
            content_range.as_deref(),
            res.meta.e_tag.clone(),
        )?)?;
        let uri = req.uri.to_string();
        sink.drain(self.cfg.timeouts.stall, res.into_stream(), |e| {
            Error::transport_with(&uri, e)
        })
        .await
    }
}

/// object_store's low-level multipart calls, so uploads run through core's one multipart
/// loop and streaming writer like every backend's.
#[async_trait]
impl<P: Provider> Handlers for ObjectStoreWire<P> {
    fn stack(&self) -> &'static str {
        "objectstore"
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        // `head` is this same HEAD, less the attributes.
        let opts = object_store::GetOptions {
            head: true,
            ..Default::default()
        };
        let r = self
            .store(uri.bucket())?
            .get_opts(&path(uri)?, opts)
            .await
            .map_err(self.err(uri))?;
        // What S3 sends beyond our attributes (a storage class) is not the reader's concern.
        let (attributes, _) = attributes::from_object_store(&r.attributes);
        Ok(ObjectMeta {
            attributes,
            ..meta(uri, r.meta)
        })
    }
    /// object_store can send no CRC (its one checksum option is SHA-256 on every request,
    /// which costs more CPU than the upload): the checksums core passes are not sent.
    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        _checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        let opts = object_store::PutOptions {
            mode: match &opts.mode {
                PutMode::Overwrite => object_store::PutMode::Overwrite,
                PutMode::Create => object_store::PutMode::Create,
                PutMode::Update(etag) => object_store::PutMode::Update(UpdateVersion {
                    e_tag: Some(etag.clone()),
                    version: None,
                }),
            },
            attributes: attributes::to_object_store(&opts.attributes),
            ..Default::default()
        };
        let r = self
            .store(uri.bucket())?
            .put_opts(&path(uri)?, data.into(), opts)
            .await
            .map_err(self.err(uri))?;
        Ok(r.e_tag)
    }

    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        _checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        // object_store's MultipartStore has no condition on Complete (it keeps it for its
        // own copy_if_not_exists): refused before any part is sent.
        if opts.mode != PutMode::Overwrite {
            return Err(unsupported(
                "objectstore",
                uri,
                "conditional multipart uploads (PutMode::Create or Update at or above the multipart threshold)",
            ));
        }
        let opts = PutMultipartOptions {
            attributes: attributes::to_object_store(&opts.attributes),
            ..Default::default()
        };
        self.store(uri.bucket())?
            .create_multipart_opts(&path(uri)?, opts)
            .await
            .map_err(self.err(uri))
    }

    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        _checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        let id = upload_id.to_owned();
        let part = self
            .store(uri.bucket())?
            .put_part(&path(uri)?, &id, part_number as usize - 1, data.into())
            .await
            .map_err(self.err(uri))?;
        Ok(Some(part.content_id))
    }

    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        _checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        // Refused by `create_multipart_upload` already; here against a caller that skipped it.
        if *mode != PutMode::Overwrite {
            return Err(unsupported(
                "objectstore",
                uri,
                "conditional multipart uploads (PutMode::Create or Update at or above the multipart threshold)",
            ));
        }
        let parts = parts
            .iter()
            .map(|p| PartId {
                content_id: p.etag.clone(),
            })
            .collect();
        let r = self
            .store(uri.bucket())?
            .complete_multipart(&path(uri)?, &upload_id.to_owned(), parts)
            .await
            .map_err(self.err(uri))?;
        Ok(r.e_tag)
    }

    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        self.store(uri.bucket())?
            .abort_multipart(&path(uri)?, &upload_id.to_owned())
            .await
            .map_err(self.err(uri))
    }

    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let opts = PaginatedListOptions {
            delimiter: (!opts.recursive).then_some("/".into()),
            page_token: opts.token.clone(),
            max_keys: opts.max_keys.map(|m| m as usize),
            offset: opts.start_after.clone(),
            ..Default::default()
        };
        let key = (!prefix.key().is_empty()).then(|| prefix.key());
        let page = self
            .store(prefix.bucket())?
            .list_paginated(key, opts)
            .await
            .map_err(self.err(prefix))?;
        // object_store's paths drop the delimiter a common prefix ends with.
        let mut entries: Vec<ListEntry> = page
            .result
            .common_prefixes
            .into_iter()
            .map(|c| ListEntry::Prefix(prefix.with_key(format!("{c}/"))))
            .collect();
        entries.extend(
            page.result
                .objects
                .into_iter()
                .map(|m| ListEntry::Object(meta(prefix, m))),
        );
        let truncated = page.page_token.is_some();
        ListPage::new(&prefix.to_string(), entries, truncated, page.page_token)
    }
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        let r = self
            .store(uri.bucket())?
            .delete(&path(uri)?)
            .await
            .map_err(self.err(uri));
        deleted(r)
    }
    /// object_store's `delete_stream` sends one DeleteObjects per 1,000 paths and yields
    /// either one result per path (the request answered) or a single error (it did not).
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let Some(first) = uris.first() else {
            return Ok(Vec::new());
        };
        let store = self.store(first.bucket())?;
        // A key no object_store path can name is refused alone; the others are sent.
        let mut refused = Vec::new();
        let mut sent = Vec::new();
        for uri in uris {
            match path(uri) {
                Ok(p) => sent.push((uri, p)),
                Err(e) => refused.push(e),
            }
        }
        if sent.is_empty() {
            return Ok(refused);
        }
        let paths: Vec<object_store::Result<Path>> =
            sent.iter().map(|(_, p)| Ok(p.clone())).collect();
        let answer = store.delete_stream(futures::stream::iter(paths).boxed());
        // object_store unwraps the position of each refused key among the keys it sent: an
        // endpoint naming another key would panic it. That is the endpoint's fault, reported
        // as a reply that cannot be trusted, not a crash of the caller.
        let results: Vec<object_store::Result<Path>> =
            match std::panic::AssertUnwindSafe(answer.collect::<Vec<_>>())
                .catch_unwind()
                .await
            {
                Ok(r) => r,
                Err(_) => {
                    return Err(Error::integrity(
                        first.with_key("").to_string(),
                        "the DeleteObjects answer names keys that were not asked for",
                    ));
                }
            };
        // One result per key sent, each a key's refusal, when the request was answered;
        // otherwise (or for an error that is not a key's) the request failed as a whole.
        // S3 answers one DeleteObjects; Azure one batch whose keys are each answered as a
        // request; GCS one DELETE per key: their errors are the keys'.
        let per_key = |e: &object_store::Error| P::ONE_REQUEST_PER_KEY || is_key_refusal(e);
        if results.len() != sent.len()
            || results
                .iter()
                .any(|r| r.as_ref().is_err_and(|e| !per_key(e)))
        {
            let e = results.into_iter().find_map(|r| r.err());
            return Err(match e {
                Some(e) => self.err(first)(e),
                None => Error::transport(first.to_string(), "DeleteObjects answered no result"),
            });
        }
        for ((uri, _), r) in sent.iter().zip(results) {
            let Err(e) = r else { continue };
            let e = if P::ONE_REQUEST_PER_KEY {
                self.err(uri)(e)
            } else {
                key_refused(uri, &e)
            };
            if let Err(e) = deleted(Err(e)) {
                refused.push(e);
            }
        }
        Ok(refused)
    }
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        if from.bucket() != to.bucket() {
            // object_store's client is one bucket's: its CopyObject copies within it.
            return Ok(None);
        }
        self.store(to.bucket())?
            .copy(&path(from)?, &path(to)?)
            .await
            .map_err(self.err(to))?;
        // object_store's copy returns no ETag.
        Ok(Some(PutInfo {
            etag: None,
            parts: None,
        }))
    }
    /// object_store has no call for ListMultipartUploads.
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        _from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        Err(sluice_core::unsupported(
            "objectstore",
            prefix,
            "listing multipart uploads (object_store has no call for it; use S3_BACKEND=hyper or awssdk)",
        ))
    }
}

impl<P: Provider> Wire for ObjectStoreWire<P> {
    fn backend(&self) -> &'static str {
        "objectstore"
    }

    fn config(&self) -> &StoreConfig {
        &self.cfg
    }
}

/// A delete's outcome as S3 gives it: deleting an object that is not there succeeds. Azure
/// and GCS answer 404 for it; a missing bucket or container stays an error.
fn deleted(r: Result<()>) -> Result<()> {
    match r {
        Err(Error::NotFound { code, .. })
            if !matches!(code.as_str(), "NoSuchBucket" | "ContainerNotFound") =>
        {
            Ok(())
        }
        r => r,
    }
}

/// object_store's error type for one key of a DeleteObjects answer is private; its text is
/// `DeleteObjects request failed for key K: MESSAGE (code: CODE)`.
const KEY_REFUSAL: &str = "DeleteObjects request failed for key";

fn is_key_refusal(e: &object_store::Error) -> bool {
    sluice_core::error::error_chain(e).contains(KEY_REFUSAL)
}

/// One key of a DeleteObjects answer that the server did not delete.
fn key_refused(uri: &ObjectUri, e: &object_store::Error) -> Error {
    let text = sluice_core::error::error_chain(e);
    let code = text
        .rsplit_once("(code: ")
        .and_then(|(_, c)| c.split_once(')'))
        .map_or("DeleteFailed", |(c, _)| c);
    sluice_core::wire::delete_refused(uri, code, &text)
}
