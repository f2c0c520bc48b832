//! The S3 operations, implemented over `Storage` with `Faults` consulted on every request.

use crate::faults::{Fault, Faults};
use crate::listing::After;
use crate::storage::{Body, Condition, Missing, Part, Refused, Storage, StoredObject, Upload};
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use sluice_core::Attributes;
use sluice_core::checksum::Crc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const FLUSH_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// S3's page size limit for ListObjectsV2.
const MAX_KEYS: usize = 1000;

#[derive(Debug, Clone)]
pub struct MemoryS3 {
    pub(crate) storage: Arc<Storage>,
    pub(crate) faults: Arc<Faults>,
    next_upload: Arc<AtomicU64>,
}

impl MemoryS3 {
    pub fn new(storage: Arc<Storage>, faults: Arc<Faults>) -> Self {
        Self {
            storage,
            faults,
            next_upload: Arc::default(),
        }
    }

    async fn request_fault(&self) -> S3Result<()> {
        let _active = self.faults.enter();
        match self.faults.on_request() {
            Some(Fault::SlowDown) => Err(s3_error!(
                SlowDown,
                "Please reduce your request rate (injected)"
            )),
            Some(Fault::InternalError) => Err(s3_error!(InternalError, "injected internal error")),
            Some(Fault::Latency(d)) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn missing(m: Missing, bucket: &str, key: &str) -> S3Error {
    match m {
        Missing::Bucket => S3Error::with_message(
            S3ErrorCode::NoSuchBucket,
            format!("bucket {bucket} does not exist"),
        ),
        Missing::Key => S3Error::with_message(
            S3ErrorCode::NoSuchKey,
            format!("key {key} does not exist in bucket {bucket}"),
        ),
        Missing::UnsafeKey => S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("key {key:?} is not a safe file path under the server's --data-dir"),
        ),
        Missing::Synthetic => S3Error::with_message(
            S3ErrorCode::AccessDenied,
            format!(
                "{key} in bucket {bucket} is a synthetic object (--synthetic): it cannot be replaced or deleted"
            ),
        ),
    }
}

fn checksum_wanted(mode: &Option<ChecksumMode>) -> bool {
    mode.as_ref()
        .is_some_and(|m| m.as_str().eq_ignore_ascii_case(ChecksumMode::ENABLED))
}

fn full_object() -> ChecksumType {
    ChecksumType::from_static(ChecksumType::FULL_OBJECT)
}

/// The headers an input carries for the object (PutObject, CreateMultipartUpload and
/// CopyObject have the same fields), as sluice's `Attributes`, the one type for them.
macro_rules! headers_of {
    ($i:expr) => {
        Attributes {
            content_type: $i.content_type.clone(),
            cache_control: $i.cache_control.clone(),
            content_disposition: $i.content_disposition.clone(),
            content_encoding: $i.content_encoding.clone(),
            content_language: $i.content_language.clone(),
            metadata: $i
                .metadata
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
        }
    };
}

/// Fills a GetObject or HeadObject output's header fields from what the object keeps.
macro_rules! with_headers {
    ($out:expr, $h:expr) => {{
        let h: &Attributes = $h;
        let mut out = $out;
        out.content_type = h.content_type.clone();
        out.cache_control = h.cache_control.clone();
        out.content_disposition = h.content_disposition.clone();
        out.content_encoding = h.content_encoding.clone();
        out.content_language = h.content_language.clone();
        out.metadata = (!h.metadata.is_empty()).then(|| {
            h.metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        out
    }};
}

/// A PUT's or Complete's `If-Match`/`If-None-Match`. S3 takes only `*` in `If-None-Match`
/// on writes.
fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<Condition> {
    match (if_match, if_none_match) {
        (None, None) => Ok(Condition::None),
        (None, Some(ETagCondition::Any)) => Ok(Condition::Absent),
        (Some(ETagCondition::ETag(e)), None) => Ok(Condition::ETag(e.value().to_owned())),
        (Some(ETagCondition::Any), None) => Err(s3_error!(
            NotImplemented,
            "If-Match: * is not supported on writes"
        )),
        (None, Some(_)) => Err(s3_error!(
            NotImplemented,
            "If-None-Match on a write takes only *"
        )),
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidRequest,
            "If-Match and If-None-Match together on one write"
        )),
    }
}

fn refused(r: Refused, bucket: &str, key: &str) -> S3Error {
    match r {
        Refused::Missing(m) => missing(m, bucket, key),
        Refused::Precondition => S3Error::with_message(
            S3ErrorCode::PreconditionFailed,
            format!("At least one of the pre-conditions you specified did not hold ({key})"),
        ),
    }
}

fn etag(quoted: &str) -> ETag {
    ETag::Strong(quoted.trim_matches('"').to_owned())
}

/// As S3: bytes whose CRC64NVME (`crc`, taken once as they arrived) does not match the one
/// sent with them are refused, 400 BadDigest (a value that is not one is 400 InvalidRequest).
fn check_crc(sent: Option<&str>, crc: Crc) -> S3Result<()> {
    let Some(sent) = sent else { return Ok(()) };
    let value = Crc::parse_base64(sent).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "x-amz-checksum-crc64nvme is not a CRC64NVME value"
        )
    })?;
    if value != crc.crc {
        return Err(s3_error!(
            BadDigest,
            "The CRC64NVME you specified did not match the calculated checksum."
        ));
    }
    Ok(())
}

async fn collect_body(body: Option<StreamingBlob>) -> S3Result<Bytes> {
    let Some(body) = body else {
        return Ok(Bytes::new());
    };
    let chunks: Vec<Bytes> = body.try_collect().await.map_err(|e| {
        S3Error::with_message(
            S3ErrorCode::IncompleteBody,
            format!("reading request body: {e}"),
        )
    })?;
    Ok(match chunks.len() {
        1 => chunks.into_iter().next().unwrap(),
        _ => Bytes::from(chunks.concat()),
    })
}

/// The error a faulted body yields: hyper then aborts the connection mid-body.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by fault injection")]
struct InjectedReset;

/// A response body from slices of the stored pieces: no copy, unless a fault cuts a body of
/// several pieces.
fn body_stream(pieces: Vec<Bytes>, fault: Option<Fault>) -> StreamingBlob {
    type Item = Result<Bytes, InjectedReset>;
    // A fault cuts the body at a byte: one buffer (a copy only for a multipart object).
    let one = |pieces: Vec<Bytes>| match <[Bytes; 1]>::try_from(pieces) {
        Ok([one]) => one,
        Err(pieces) => Bytes::from(pieces.concat()),
    };
    let s: std::pin::Pin<Box<dyn Stream<Item = Item> + Send + Sync>> = match fault {
        // The pause lets hyper flush the bytes sent so far before the connection ends, so the
        // client really receives the first n bytes rather than nothing.
        Some(Fault::ResetAfter(n)) => Box::pin(
            futures::stream::iter([Ok(cut(&one(pieces), n))]).chain(futures::stream::once(async {
                tokio::time::sleep(FLUSH_PAUSE).await;
                Err(InjectedReset)
            })),
        ),
        Some(Fault::TruncateAfter(n)) => Box::pin(
            futures::stream::iter([Ok(cut(&one(pieces), n))]).chain(
                futures::stream::once(tokio::time::sleep(FLUSH_PAUSE))
                    .filter_map(|()| futures::future::ready(None)),
            ),
        ),
        Some(Fault::StallAfter(n, d)) => {
            let data = one(pieces);
            let head = cut(&data, n);
            let tail = data.slice(head.len()..);
            Box::pin(
                futures::stream::iter([Ok(head)]).chain(futures::stream::once(async move {
                    tokio::time::sleep(d).await;
                    Ok(tail)
                })),
            )
        }
        _ => Box::pin(futures::stream::iter(pieces.into_iter().map(Ok))),
    };
    StreamingBlob::wrap(s.filter(|r| futures::future::ready(!matches!(r, Ok(b) if b.is_empty()))))
}

/// The first `n` bytes of `data` (all of it when shorter).
fn cut(data: &Bytes, n: u64) -> Bytes {
    data.slice(..(n.min(data.len() as u64)) as usize)
}

#[async_trait::async_trait]
impl S3 for MemoryS3 {
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.request_fault().await?;
        if !self.storage.create_bucket(&req.input.bucket) {
            return Err(s3_error!(BucketAlreadyOwnedByYou));
        }
        Ok(S3Response::new(CreateBucketOutput::default()))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.request_fault().await?;
        if !self.storage.bucket_exists(&req.input.bucket) {
            return Err(missing(Missing::Bucket, &req.input.bucket, ""));
        }
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn list_buckets(
        &self,
        _req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        self.request_fault().await?;
        let buckets = self
            .storage
            .bucket_names()
            .into_iter()
            .map(|name| Bucket {
                name: Some(name),
                ..Default::default()
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.request_fault().await?;
        self.faults.on_head();
        let i = &req.input;
        let obj = self
            .storage
            .get(&i.bucket, &i.key)
            .map_err(|m| missing(m, &i.bucket, &i.key))?;
        let checksum_crc64nvme = checksum_wanted(&i.checksum_mode).then(|| obj.crc64nvme.clone());
        let out = HeadObjectOutput {
            checksum_type: checksum_crc64nvme.as_ref().map(|_| full_object()),
            checksum_crc64nvme,
            content_length: Some(obj.data.len() as i64),
            e_tag: Some(etag(&obj.etag)),
            last_modified: Some(obj.last_modified.into()),
            accept_ranges: Some("bytes".into()),
            ..Default::default()
        };
        Ok(S3Response::new(with_headers!(out, &obj.headers)))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.request_fault().await?;
        let i = req.input;
        let obj = self
            .storage
            .get(&i.bucket, &i.key)
            .map_err(|m| missing(m, &i.bucket, &i.key))?;
        if let Some(data) = self.faults.replacement_due(&i.key) {
            self.storage
                .put(&i.bucket, &i.key, StoredObject::new(data))
                .map_err(|m| missing(m, &i.bucket, &i.key))?;
        }
        if let Some(ETagCondition::ETag(want)) = &i.if_match
            && want.value() != obj.etag.trim_matches('"')
        {
            return Err(s3_error!(
                PreconditionFailed,
                "If-Match does not match the object's ETag"
            ));
        }
        if obj.data.is_sunk() {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidObjectState,
                format!(
                    "the bytes of {} in bucket {} were not kept: the server runs with --sink",
                    i.key, i.bucket
                ),
            ));
        }
        let total = obj.data.len() as u64;
        let checksum_crc64nvme =
            (i.range.is_none() && checksum_wanted(&i.checksum_mode)).then(|| obj.crc64nvme.clone());
        let (range, content_range) = match i.range {
            Some(r) => {
                let rr = r.check(total).map_err(|_| {
                    S3Error::with_message(
                        S3ErrorCode::InvalidRange,
                        format!("range not satisfiable for an object of {total} bytes"),
                    )
                })?;
                let cr = format!("bytes {}-{}/{total}", rr.start, rr.end - 1);
                (rr, Some(cr))
            }
            None => (0..total, None),
        };
        let data = obj.data.slices(range.start as usize..range.end as usize);
        let len = (range.end - range.start) as i64;
        let body = body_stream(data, self.faults.on_get_body());
        let out = GetObjectOutput {
            body: Some(body),
            content_length: Some(len),
            content_range,
            checksum_type: checksum_crc64nvme.as_ref().map(|_| full_object()),
            checksum_crc64nvme,
            e_tag: Some(etag(&obj.etag)),
            last_modified: Some(obj.last_modified.into()),
            accept_ranges: Some("bytes".into()),
            ..Default::default()
        };
        Ok(S3Response::new(with_headers!(out, &obj.headers)))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.request_fault().await?;
        let i = req.input;
        if !self.storage.bucket_exists(&i.bucket) {
            return Err(missing(Missing::Bucket, &i.bucket, &i.key));
        }
        let condition = write_condition(i.if_match.as_ref(), i.if_none_match.as_ref())?;
        let headers = headers_of!(i);
        let data = collect_body(i.body).await?;
        if let Some(n) = i.content_length
            && n as usize != data.len()
        {
            return Err(S3Error::with_message(
                S3ErrorCode::IncompleteBody,
                format!("Content-Length {n} but {} bytes received", data.len()),
            ));
        }
        let crc = Crc::of(&data);
        check_crc(i.checksum_crc64nvme.as_deref(), crc)?;
        let obj = StoredObject::new_with_crc(data, crc).with_headers(headers);
        let tag = etag(&obj.etag);
        self.storage
            .put_if(&i.bucket, &i.key, obj, &condition)
            .map_err(|r| refused(r, &i.bucket, &i.key))?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(tag),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.request_fault().await?;
        let i = &req.input;
        self.storage
            .delete(&i.bucket, &i.key)
            .map_err(|m| missing(m, &i.bucket, &i.key))?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    /// CopyObject within the server (any bucket to any bucket), as S3 answers it.
    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        self.request_fault().await?;
        let i = req.input;
        let CopySource::Bucket { bucket, key, .. } = &i.copy_source else {
            return Err(s3_error!(NotImplemented, "copies from access points"));
        };
        let src = self
            .storage
            .get(bucket, key)
            .map_err(|m| missing(m, bucket, key))?;
        // As S3: the source's headers, unless the request replaces them.
        let replace = i
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let headers = if replace { headers_of!(i) } else { src.headers };
        let copy = StoredObject::with_etag(src.data, src.etag).with_headers(headers);
        let out = CopyObjectResult {
            e_tag: Some(etag(&copy.etag)),
            last_modified: Some(copy.last_modified.into()),
            ..Default::default()
        };
        self.storage
            .put(&i.bucket, &i.key, copy)
            .map_err(|m| missing(m, &i.bucket, &i.key))?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(out),
            ..Default::default()
        }))
    }

    /// Bulk delete (object_store and the AWS CLI use it for single deletes too).
    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.request_fault().await?;
        let i = req.input;
        let mut deleted = Vec::with_capacity(i.delete.objects.len());
        for o in i.delete.objects {
            self.storage
                .delete(&i.bucket, &o.key)
                .map_err(|m| missing(m, &i.bucket, &o.key))?;
            deleted.push(DeletedObject {
                key: Some(o.key),
                ..Default::default()
            });
        }
        let quiet = i.delete.quiet.unwrap_or(false);
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: (!quiet).then_some(deleted),
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.request_fault().await?;
        let i = req.input;
        let max_keys = i
            .max_keys
            .map_or(MAX_KEYS, |m| (m.max(0) as usize).min(MAX_KEYS));
        let prefix = i.prefix.clone().unwrap_or_default();
        // S3 ignores an empty delimiter (s3fs sends `Delimiter=` for recursive listings).
        let delimiter = i.delimiter.as_deref().filter(|d| !d.is_empty());
        let after = match (&i.continuation_token, &i.start_after) {
            (Some(t), _) => Some(After::from_token(t).ok_or_else(|| {
                s3_error!(
                    InvalidArgument,
                    "the continuation token is not one this server gave"
                )
            })?),
            (None, Some(k)) => Some(After::Key(k)),
            (None, None) => None,
        };
        let page = self
            .storage
            .list(&i.bucket, &prefix, delimiter, after, max_keys)
            .map_err(|m| missing(m, &i.bucket, ""))?;
        let key_count = (page.objects.len() + page.prefixes.len()) as i32;
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(i.bucket),
            prefix: i.prefix,
            delimiter: i.delimiter,
            max_keys: Some(max_keys as i32),
            key_count: Some(key_count),
            continuation_token: i.continuation_token,
            is_truncated: Some(page.next.is_some()),
            next_continuation_token: page.next,
            contents: Some(
                page.objects
                    .into_iter()
                    .map(|o| Object {
                        key: Some(o.key),
                        size: Some(o.size as i64),
                        e_tag: Some(etag(&o.etag)),
                        last_modified: Some(o.last_modified.into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            common_prefixes: Some(
                page.prefixes
                    .into_iter()
                    .map(|p| CommonPrefix { prefix: Some(p) })
                    .collect(),
            ),
            start_after: i.start_after,
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.request_fault().await?;
        let i = req.input;
        if !self.storage.bucket_exists(&i.bucket) {
            return Err(missing(Missing::Bucket, &i.bucket, &i.key));
        }
        let id = format!(
            "upload-{}",
            self.next_upload.fetch_add(1, Ordering::Relaxed)
        );
        self.storage.uploads.lock().unwrap().insert(
            id.clone(),
            Upload {
                bucket: i.bucket.clone(),
                key: i.key.clone(),
                initiated: Some(std::time::SystemTime::now()),
                headers: headers_of!(i),
                ..Default::default()
            },
        );
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(i.bucket),
            key: Some(i.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.request_fault().await?;
        let i = req.input;
        let data = collect_body(i.body).await?;
        let crc = Crc::of(&data);
        check_crc(i.checksum_crc64nvme.as_deref(), crc)?;
        // A part's ETag is opaque to clients (S3 documents a multipart object's ETag as no
        // digest of its bytes): the CRC and length, 32 hex digits as an MD5's. An MD5 here
        // made the server, not the client, the bound on uploads (docs/benchmarks.md).
        let tag = format!("\"{:016x}{:016x}\"", crc.crc, crc.len);
        let mut uploads = self.storage.uploads.lock().unwrap();
        let up = uploads
            .get_mut(&i.upload_id)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        let part = Part {
            // Under --sink the part's CRC keeps its length; its bytes go.
            data: if self.storage.sink.drops() {
                Bytes::new()
            } else {
                data
            },
            etag: tag.clone(),
            crc,
        };
        up.parts.insert(i.part_number, part);
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(etag(&tag)),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        self.request_fault().await?;
        let i = req.input;
        let condition = write_condition(i.if_match.as_ref(), i.if_none_match.as_ref())?;
        let up = self
            .storage
            .uploads
            .lock()
            .unwrap()
            .remove(&i.upload_id)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        let listed = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
        if listed.is_empty() {
            return Err(s3_error!(
                MalformedXML,
                "CompleteMultipartUpload lists no parts"
            ));
        }
        let mut pieces = Vec::with_capacity(listed.len());
        let mut md5s = Vec::new();
        let mut crcs = Vec::with_capacity(listed.len());
        let mut last = 0;
        for p in &listed {
            let n = p.part_number.unwrap_or(0);
            if n <= last {
                return Err(s3_error!(InvalidPartOrder));
            }
            last = n;
            let part = up
                .parts
                .get(&n)
                .ok_or_else(|| s3_error!(InvalidPart, "part {} was not uploaded", n))?;
            if let Some(t) = &p.e_tag
                && t.value() != part.etag.trim_matches('"')
            {
                return Err(s3_error!(InvalidPart, "part {} ETag does not match", n));
            }
            check_crc(p.checksum_crc64nvme.as_deref(), part.crc)?;
            pieces.push(part.data.clone());
            crcs.push(part.crc);
            md5s.extend_from_slice(&hex::decode(part.etag.trim_matches('"')).unwrap_or_default());
        }
        // The whole object's CRC, when the client sent it: what it sent, assembled here. The
        // parts stay as they arrived (`Body`): joining them was the server's dearest step.
        let whole = Crc::of_parts(crcs);
        check_crc(i.checksum_crc64nvme.as_deref(), whole)?;
        let tag = format!("\"{}-{}\"", hex::encode(Md5::digest(&md5s)), listed.len());
        let body = if self.storage.sink.drops() {
            Body::sunk(whole.len as usize)
        } else {
            Body::from_pieces(pieces)
        };
        let obj = StoredObject::with_crc(body, tag.clone(), whole).with_headers(up.headers.clone());
        if let Err(r) = self.storage.put_if(&up.bucket, &up.key, obj, &condition) {
            // As S3: a refused Complete leaves the upload to retry or abort.
            let e = refused(r, &up.bucket, &up.key);
            let id = i.upload_id.clone();
            self.storage.uploads.lock().unwrap().insert(id, up);
            return Err(e);
        }
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(up.bucket),
            key: Some(up.key),
            e_tag: Some(etag(&tag)),
            ..Default::default()
        }))
    }

    /// Uploads in progress in a bucket under a prefix, by key then upload ID, after the
    /// markers, at most `max-uploads` (1,000 by default, as S3) to a page.
    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        self.request_fault().await?;
        let i = req.input;
        if !self.storage.bucket_exists(&i.bucket) {
            return Err(missing(Missing::Bucket, &i.bucket, ""));
        }
        let prefix = i.prefix.clone().unwrap_or_default();
        let max = i.max_uploads.map_or(1000, |m| m.clamp(1, 1000) as usize);
        let after = (
            i.key_marker.clone().unwrap_or_default(),
            i.upload_id_marker.clone().unwrap_or_default(),
        );
        let mut found: Vec<(String, String, Option<std::time::SystemTime>)> = self
            .storage
            .uploads
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, u)| u.bucket == i.bucket && u.key.starts_with(&prefix))
            .map(|(id, u)| (u.key.clone(), id.clone(), u.initiated))
            .filter(|(k, id, _)| i.key_marker.is_none() || (k, id) > (&after.0, &after.1))
            .collect();
        found.sort();
        let truncated = found.len() > max;
        found.truncate(max);
        let last = found.last().filter(|_| truncated).cloned();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(i.bucket),
            prefix: i.prefix,
            key_marker: i.key_marker,
            upload_id_marker: i.upload_id_marker,
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            next_key_marker: last.as_ref().map(|l| l.0.clone()),
            next_upload_id_marker: last.map(|l| l.1),
            uploads: Some(
                found
                    .into_iter()
                    .map(|(key, id, initiated)| MultipartUpload {
                        key: Some(key),
                        upload_id: Some(id),
                        initiated: initiated.map(Into::into),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.request_fault().await?;
        self.storage
            .uploads
            .lock()
            .unwrap()
            .remove(&req.input.upload_id)
            .ok_or_else(|| s3_error!(NoSuchUpload))?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn body_faults_cut_where_asked() {
        let data = Bytes::from(vec![1u8; 100]);
        let chunks: Vec<_> = body_stream(vec![data], Some(Fault::ResetAfter(40)))
            .collect::<Vec<_>>()
            .await;
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].as_ref().unwrap().len(), 40);
        assert!(chunks[1].is_err());
    }
}
