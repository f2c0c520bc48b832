//! sluice-backend-awssdk: S3 through the official AWS SDK for Rust (aws-sdk-s3) and its own
//! hyper-1 HTTP client.
//!
//! The SDK makes one attempt per call (its retries are off); core's policy layer
//! (`S3Store`) supplies retries and mid-body resumption, as for every backend. Bodies are
//! read chunk by chunk from the SDK's `ByteStream` into the caller's segment, never buffered
//! whole. Response checksums are validated only when asked for
//! (`AWS_RESPONSE_CHECKSUM_VALIDATION=when_supported`, see `sluice_core::Checksums`).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bounded;
mod client;
mod errors;

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    ChecksumAlgorithm, ChecksumMode, ChecksumType, CompletedMultipartUpload, CompletedPart, Delete,
    ObjectIdentifier,
};
use aws_smithy_checksums::body::validate;
use bytes::Bytes;
use sluice_core::checksum::Crc;
use sluice_core::error::{error_chain, find_source};
use sluice_core::listing::{ListOptions, ListPage, Upload, UploadMarker, UploadsPage};
use sluice_core::wire::{BodySink, GetRequest, GetWire, ResponseHead};
use sluice_core::wire::{Handlers, UploadedPart};
use sluice_core::wire::{MAX_UPLOADS_PAGE, delete_refused};
use sluice_core::{
    Attributes, Error, ListEntry, ObjectMeta, ObjectUri, PutInfo, PutMode, PutOptions, Result,
    S3Store, StoreConfig, Wire, WireFromConfig,
};
use std::time::SystemTime;

/// The SDK backend's store: core's policy layer over `AwsSdkWire`.
pub type AwsSdkStore = S3Store<AwsSdkWire>;

/// One S3 call at a time through the SDK (its own retries off).
#[derive(Debug)]
pub struct AwsSdkWire {
    client: aws_sdk_s3::Client,
    cfg: StoreConfig,
}

impl WireFromConfig for AwsSdkWire {
    fn from_config(cfg: StoreConfig) -> Result<Self> {
        Ok(Self {
            client: client::build(&cfg)?,
            cfg,
        })
    }
}

impl AwsSdkWire {
    fn err<E>(&self, subject: &str, e: SdkError<E, HttpResponse>) -> Error
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        errors::map_error(subject, &self.cfg, e)
    }
}

fn length(subject: &str, what: &str, n: Option<i64>) -> Result<u64> {
    n.and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| Error::transport(subject, format!("{what} response has no Content-Length")))
}

#[async_trait]
impl GetWire for AwsSdkWire {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let subject = req.uri.to_string();
        let out = self
            .client
            .get_object()
            .bucket(req.uri.bucket())
            .key(req.uri.key())
            .set_range(req.range.map(|r| r.to_header()))
            .set_if_match(req.if_match.map(str::to_owned))
            // S3 returns a whole-object checksum only to whole-object GETs that ask.
            .set_checksum_mode(
                (self.cfg.checksums.on_download && req.range.is_none())
                    .then_some(ChecksumMode::Enabled),
            )
            .send()
            .await
            .map_err(|e| self.err(&subject, e))?;
        sink.begin(ResponseHead::from_headers(
            req.uri,
            req.range,
            length(&subject, "GET", out.content_length())?,
            out.content_range(),
            out.e_tag().map(str::to_owned),
        )?)?;
        // `ByteStream` has an inherent `next` but is not a `Stream`.
        let body = Box::pin(futures::stream::unfold(out.body, |mut b| async move {
            b.next().await.map(|chunk| (chunk, b))
        }));
        sink.drain(self.cfg.timeouts.stall, body, |e| {
            // The SDK's checksum validator fails the body's last read on a mismatch: the
            // bytes already written are wrong, so this must not be resumed.
            let mismatch = matches!(
                find_source::<validate::Error>(&e),
                Some(validate::Error::ChecksumMismatch { .. })
            );
            if mismatch {
                Error::integrity(&subject, error_chain(&e))
            } else {
                Error::transport_with(&subject, e)
            }
        })
        .await
    }
}

/// Sets every attribute on a PutObject or CreateMultipartUpload builder (two types with the
/// same setters).
macro_rules! with_attributes {
    ($builder:expr, $a:expr) => {{
        let a: &Attributes = $a;
        $builder
            .set_content_type(a.content_type.clone())
            .set_cache_control(a.cache_control.clone())
            .set_content_disposition(a.content_disposition.clone())
            .set_content_encoding(a.content_encoding.clone())
            .set_content_language(a.content_language.clone())
            .set_metadata((!a.metadata.is_empty()).then(|| {
                a.metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            }))
    }};
}

#[async_trait]
impl Handlers for AwsSdkWire {
    fn stack(&self) -> &'static str {
        "awssdk"
    }

    async fn head_bucket(&self, bucket: &ObjectUri) -> Result<()> {
        self.client
            .head_bucket()
            .bucket(bucket.bucket())
            .send()
            .await
            .map(drop)
            .map_err(|e| self.err(&bucket.with_key("").to_string(), e))
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let s = uri.to_string();
        let out = self
            .client
            .head_object()
            .bucket(uri.bucket())
            .key(uri.key())
            .send()
            .await
            .map_err(|e| self.err(&s, e))?;
        Ok(ObjectMeta {
            uri: uri.clone(),
            size: length(&s, "HEAD", out.content_length())?,
            etag: out.e_tag().map(str::to_owned),
            last_modified: out
                .last_modified()
                .and_then(|t| SystemTime::try_from(*t).ok()),
            attributes: Attributes {
                content_type: out.content_type().map(str::to_owned),
                cache_control: out.cache_control().map(str::to_owned),
                content_disposition: out.content_disposition().map(str::to_owned),
                content_encoding: out.content_encoding().map(str::to_owned),
                content_language: out.content_language().map(str::to_owned),
                metadata: out
                    .metadata()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default(),
            },
        })
    }

    async fn put_object(
        &self,
        uri: &ObjectUri,
        data: Bytes,
        checksum: Option<Crc>,
        opts: &PutOptions,
    ) -> Result<Option<String>> {
        let s = uri.to_string();
        let put = self.client.put_object();
        let out = with_attributes!(put, &opts.attributes);
        let out = out
            .set_if_match(opts.mode.if_match().map(Into::into))
            .set_if_none_match(opts.mode.if_none_match().map(Into::into))
            .bucket(uri.bucket())
            .key(uri.key())
            .set_checksum_crc64_nvme(checksum.map(Crc::to_base64))
            .content_length(data.len() as i64)
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(|e| self.err(&s, e))?;
        Ok(out.e_tag().map(str::to_owned))
    }

    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        let s = uri.to_string();
        let create = self.client.create_multipart_upload();
        let out = with_attributes!(create, &opts.attributes)
            .bucket(uri.bucket())
            .key(uri.key())
            .set_checksum_algorithm(checksummed.then_some(ChecksumAlgorithm::Crc64Nvme))
            .set_checksum_type(checksummed.then_some(ChecksumType::FullObject))
            .send()
            .await
            .map_err(|e| self.err(&s, e))?;
        out.upload_id().map(str::to_owned).ok_or_else(|| {
            Error::transport(&s, "CreateMultipartUpload answered without an UploadId")
        })
    }

    async fn upload_part(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        part_number: u32,
        data: Bytes,
        checksum: Option<Crc>,
    ) -> Result<Option<String>> {
        let s = uri.to_string();
        let out = self
            .client
            .upload_part()
            .bucket(uri.bucket())
            .key(uri.key())
            .upload_id(upload_id)
            .part_number(part_number as i32)
            .set_checksum_crc64_nvme(checksum.map(Crc::to_base64))
            .content_length(data.len() as i64)
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(|e| self.err(&s, e))?;
        Ok(out.e_tag().map(str::to_owned))
    }

    async fn complete_multipart_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[UploadedPart],
        checksum: Option<Crc>,
        mode: &PutMode,
    ) -> Result<Option<String>> {
        let s = uri.to_string();
        let parts = parts
            .iter()
            .map(|p| {
                CompletedPart::builder()
                    .part_number(p.number as i32)
                    .e_tag(&p.etag)
                    .set_checksum_crc64_nvme(p.checksum.map(Crc::to_base64))
                    .build()
            })
            .collect();
        let out = self
            .client
            .complete_multipart_upload()
            .set_if_match(mode.if_match().map(Into::into))
            .set_if_none_match(mode.if_none_match().map(Into::into))
            .bucket(uri.bucket())
            .key(uri.key())
            .upload_id(upload_id)
            .set_checksum_crc64_nvme(checksum.map(Crc::to_base64))
            .set_checksum_type(checksum.map(|_| ChecksumType::FullObject))
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| self.err(&s, e))?;
        Ok(out.e_tag().map(str::to_owned))
    }

    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let s = uri.to_string();
        self.client
            .abort_multipart_upload()
            .bucket(uri.bucket())
            .key(uri.key())
            .upload_id(upload_id)
            .send()
            .await
            .map(drop)
            .map_err(|e| self.err(&s, e))
    }

    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let subject = prefix.to_string();
        let page = self
            .client
            .list_objects_v2()
            .bucket(prefix.bucket())
            .prefix(prefix.key())
            .set_delimiter((!opts.recursive).then(|| "/".to_owned()))
            .set_continuation_token(opts.token.clone())
            .set_max_keys(opts.max_keys.map(|m| m.min(i32::MAX as u32) as i32))
            .set_start_after(opts.start_after.clone())
            .send()
            .await
            .map_err(|e| self.err(&subject, e))?;
        let mut entries: Vec<ListEntry> = page
            .common_prefixes()
            .iter()
            .filter_map(|p| p.prefix())
            .map(|p| ListEntry::Prefix(prefix.with_key(p.to_owned())))
            .collect();
        for o in page.contents() {
            let Some(key) = o.key() else { continue };
            let uri = prefix.with_key(key.to_owned());
            let size = length(&uri.to_string(), "the listing", o.size())?;
            entries.push(ListEntry::Object(ObjectMeta {
                uri,
                size,
                etag: o.e_tag().map(str::to_owned),
                last_modified: o
                    .last_modified()
                    .and_then(|t| SystemTime::try_from(*t).ok()),
                attributes: Attributes::default(),
            }));
        }
        ListPage::new(
            &subject,
            entries,
            page.is_truncated().unwrap_or(false),
            page.next_continuation_token().map(str::to_owned),
        )
    }
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        self.client
            .delete_object()
            .bucket(uri.bucket())
            .key(uri.key())
            .send()
            .await
            .map(drop)
            .map_err(|e| self.err(&uri.to_string(), e))
    }
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let Some(first) = uris.first() else {
            return Ok(Vec::new());
        };
        let subject = first.with_key("").to_string();
        let unbuilt = |e: aws_sdk_s3::error::BuildError| Error::transport(&subject, e.to_string());
        let objects = uris
            .iter()
            .map(|u| ObjectIdentifier::builder().key(u.key()).build())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(unbuilt)?;
        let delete = Delete::builder()
            .set_objects(Some(objects))
            .quiet(true)
            .build()
            .map_err(unbuilt)?;
        let out = self
            .client
            .delete_objects()
            .bucket(first.bucket())
            .delete(delete)
            .send()
            .await
            .map_err(|e| self.err(&subject, e))?;
        Ok(out
            .errors()
            .iter()
            .map(|e| {
                let uri = first.with_key(e.key().unwrap_or_default().to_owned());
                delete_refused(
                    &uri,
                    e.code().unwrap_or_default(),
                    e.message().unwrap_or_default(),
                )
            })
            .collect())
    }
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let out = self
            .client
            .copy_object()
            .copy_source(from.copy_source())
            .bucket(to.bucket())
            .key(to.key())
            .send()
            .await
            .map_err(|e| self.err(&to.to_string(), e))?;
        let etag = out
            .copy_object_result()
            .and_then(|r| r.e_tag())
            .map(str::to_owned);
        Ok(Some(PutInfo { etag, parts: None }))
    }
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        let subject = prefix.to_string();
        let (key_marker, id_marker) = from.map(|m| (m.key, m.upload_id)).unzip();
        let out = self
            .client
            .list_multipart_uploads()
            .bucket(prefix.bucket())
            .prefix(prefix.key())
            .max_uploads(i32::try_from(MAX_UPLOADS_PAGE).unwrap_or(i32::MAX))
            .set_key_marker(key_marker)
            .set_upload_id_marker(id_marker)
            .send()
            .await
            .map_err(|e| self.err(&subject, e))?;
        let next = match (out.next_key_marker(), out.next_upload_id_marker()) {
            (Some(key), Some(id)) => Some(UploadMarker {
                key: key.to_owned(),
                upload_id: id.to_owned(),
            }),
            _ => None,
        };
        let uploads = out
            .uploads()
            .iter()
            .filter_map(|u| {
                Some(Upload {
                    uri: prefix.with_key(u.key()?.to_owned()),
                    upload_id: u.upload_id()?.to_owned(),
                    initiated: u.initiated().and_then(|t| SystemTime::try_from(*t).ok()),
                })
            })
            .collect();
        UploadsPage::new(&subject, uploads, out.is_truncated().unwrap_or(false), next)
    }
}

impl Wire for AwsSdkWire {
    fn backend(&self) -> &'static str {
        "awssdk"
    }

    fn config(&self) -> &StoreConfig {
        &self.cfg
    }
}
