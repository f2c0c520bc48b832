//! sluice-backend-hyper: S3 over raw hyper 1 + rustls, signed with aws-sigv4.
//!
//! The fast path. A GET's body is read from the socket straight into the caller's
//! `Segment` (`direct`: HTTP/1.1 spoken for that one request, its head parsed by hyper's own
//! parser); every other request, and GETs over HTTP/2, go through hyper, whose body frames
//! are copied once into the segment. Nothing buffers a whole body. Every wait is bounded
//! (connect, first byte, body stall), and a body cut short resumes from the first missing
//! byte through `sluice_core::get_with_resume`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod addressing;
mod buffered;
mod direct;
mod resolve;
pub mod sigv4;
mod transport;
mod xml;

use addressing::Addressing;
use async_trait::async_trait;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use sluice_core::checksum::{self, Crc};
use sluice_core::listing::{ListOptions, ListPage, Upload, UploadMarker, UploadsPage};
use sluice_core::wire::ErrorDoc;
use sluice_core::wire::MAX_UPLOADS_PAGE;
use sluice_core::wire::{BodySink, GetRequest, GetWire, ResponseHead};
use sluice_core::wire::{Handlers, UploadedPart};
use sluice_core::{
    Attributes, Error, ListEntry, ObjectMeta, ObjectUri, PutInfo, PutMode, PutOptions, Result,
    S3Store, StoreConfig, Wire, WireFromConfig,
};
use std::sync::Arc;
use transport::{Transport, header_str, read_small_body};

pub use transport::{H2_CONNECTION_WINDOW, H2_STREAM_WINDOW, READ_BUF_MAX};

/// Listing pages and multipart replies are small; bound what is read of them.
const MAX_XML_BODY: usize = 16 << 20;

/// The hyper backend's store: core's policy layer over `HyperWire`.
pub type HyperStore = S3Store<HyperWire>;

/// One S3 request at a time over hyper: signed, sent, and its answer read.
#[derive(Debug)]
pub struct HyperWire {
    transport: Transport,
    /// GETs over HTTP/1.1 read straight into the segment (`direct`); `None` with
    /// `SLUICE_DIRECT_GET=0` or HTTP/2.
    direct: Option<direct::Direct>,
    addressing: Addressing,
}

impl WireFromConfig for HyperWire {
    fn from_config(cfg: StoreConfig) -> Result<Self> {
        let addressing = Addressing::new(&cfg);
        let cfg = Arc::new(cfg);
        let tls = transport::tls_config(&cfg)?;
        let direct = (cfg.direct_get && !cfg.http2).then(|| direct::Direct::new(cfg.clone(), &tls));
        Ok(Self {
            transport: Transport::new(cfg, tls)?,
            direct,
            addressing,
        })
    }
}

impl HyperWire {
    fn cfg(&self) -> &StoreConfig {
        self.transport.config()
    }

    async fn xml_body(
        &self,
        subject: &str,
        resp: http::Response<hyper::body::Incoming>,
    ) -> Result<String> {
        let body = read_small_body(resp.into_body(), self.cfg().timeouts.stall, MAX_XML_BODY)
            .await
            .ok_or_else(|| {
                Error::transport(subject, "reading the XML response body failed or stalled")
            })?;
        String::from_utf8(body.to_vec())
            .map_err(|_| Error::transport(subject, "XML response is not UTF-8"))
    }

    /// One GET of `bucket` with query `q` whose answer is an XML document (a listing page).
    async fn bucket_xml<T: serde::de::DeserializeOwned>(
        &self,
        subject: &str,
        bucket: &str,
        q: &[(&str, &str)],
    ) -> Result<T> {
        let url = self.addressing.url(bucket, "", q);
        let resp = self
            .transport
            .send(subject, Method::GET, &url, HeaderMap::new(), Bytes::new())
            .await?;
        Self::parse_xml(subject, &self.xml_body(subject, resp).await?)
    }

    fn parse_xml<'a, T: serde::Deserialize<'a>>(subject: &str, body: &'a str) -> Result<T> {
        // S3 may answer 200 with an <Error> document (CompleteMultipartUpload does).
        if xml::is_error_document(body) {
            let e = ErrorDoc::parse(body.as_bytes());
            return Err(Error::from_service(
                subject,
                200,
                e.code,
                e.message,
                e.request_id,
            ));
        }
        xml::parse(body)
            .map_err(|e| Error::transport(subject, format!("unexpected XML from the server: {e}")))
    }
}

/// The headers of a GET: its range, and the version it must still be.
/// A GET's headers: its range, the version it is pinned to, and for a whole-object GET with
/// download checksums on, the request for the store's full-object CRC (checked by core).
fn get_headers(subject: &str, req: &GetRequest<'_>, checksums: bool) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    if checksums && req.range.is_none() {
        headers.insert("x-amz-checksum-mode", HeaderValue::from_static("ENABLED"));
    }
    if let Some(r) = req.range {
        headers.insert(
            http::header::RANGE,
            HeaderValue::from_str(&r.to_header()).expect("range header is ASCII"),
        );
    }
    if let Some(tag) = req.if_match {
        headers.insert(
            http::header::IF_MATCH,
            HeaderValue::from_str(tag)
                .map_err(|_| Error::integrity(subject, "ETag is not a valid header value"))?,
        );
    }
    Ok(headers)
}

/// The headers that carry a body's checksum (`sluice_core::checksum`), as the AWS SDKs send
/// them: the value, and which algorithm made it.
fn checksum_headers(checksum: Option<Crc>) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Some(crc) = checksum {
        let value = HeaderValue::from_str(&crc.to_base64()).expect("base64 is a header value");
        h.insert(checksum::HEADER, value);
        let algorithm = HeaderValue::from_static(checksum::ALGORITHM);
        h.insert("x-amz-sdk-checksum-algorithm", algorithm);
    }
    h
}

/// The attributes as headers (`Attributes::validate` has checked they are header values).
fn add_attributes(headers: &mut HeaderMap, subject: &str, attributes: &Attributes) -> Result<()> {
    for (name, value) in attributes.to_headers() {
        let bad = |e: &dyn std::fmt::Display| {
            Error::config(format!("{name} of {subject}"), e.to_string())
        };
        let n = http::HeaderName::try_from(name.as_ref()).map_err(|e| bad(&e))?;
        headers.insert(n, HeaderValue::from_str(value).map_err(|e| bad(&e))?);
    }
    Ok(())
}

/// `If-None-Match: *` or `If-Match: <etag>` for a conditional write.
fn add_condition(headers: &mut HeaderMap, subject: &str, mode: &PutMode) -> Result<()> {
    if let Some((name, value)) = mode.condition_header() {
        let value = HeaderValue::from_str(value)
            .map_err(|e| Error::config(format!("{name} of {subject}"), e.to_string()))?;
        headers.insert(name, value);
    }
    Ok(())
}

fn parse_u64(h: &HeaderMap, name: &str) -> Option<u64> {
    header_str(h, name).and_then(|v| v.parse().ok())
}

#[async_trait]
impl GetWire for HyperWire {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let subject = req.uri.to_string();
        let url = self.addressing.object(req.uri, &[]);
        if let Some(direct) = &self.direct {
            let signed = self
                .transport
                .signed(
                    &subject,
                    Method::GET,
                    &url,
                    get_headers(&subject, req, self.cfg().checksums.on_download)?,
                    (),
                )
                .await?;
            match direct.get(&subject, req, &signed, sink).await {
                direct::Outcome::Done(result) => return result,
                direct::Outcome::Unframed => {} // asked again through hyper, below
            }
        }
        let headers = get_headers(&subject, req, self.cfg().checksums.on_download)?;
        let resp = self
            .transport
            .send(&subject, Method::GET, &url, headers, Bytes::new())
            .await?;
        ResponseHead::check_status(req.uri, resp.status().as_u16())?;
        let h = resp.headers();
        let content_length = parse_u64(h, "content-length")
            .ok_or_else(|| Error::transport(&subject, "response has no Content-Length"))?;
        sink.begin(
            ResponseHead::from_headers(
                req.uri,
                req.range,
                content_length,
                header_str(h, "content-range"),
                header_str(h, "etag").map(str::to_owned),
            )?
            .with_checksum(header_str(h, checksum::HEADER)),
        )?;

        let body = http_body_util::BodyDataStream::new(resp.into_body());
        sink.drain(self.cfg().timeouts.stall, body, |e| {
            Error::transport_with(&subject, e)
        })
        .await
    }
}

#[async_trait]
impl Handlers for HyperWire {
    fn stack(&self) -> &'static str {
        "hyper"
    }

    async fn head_bucket(&self, bucket: &ObjectUri) -> Result<()> {
        let s = bucket.with_key("").to_string();
        let url = self.addressing.url(bucket.bucket(), "", &[]);
        self.transport
            .send(&s, Method::HEAD, &url, HeaderMap::new(), Bytes::new())
            .await?;
        Ok(())
    }

    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[]);
        let resp = self
            .transport
            .send(&s, Method::HEAD, &url, HeaderMap::new(), Bytes::new())
            .await?;
        let h = resp.headers();
        Ok(ObjectMeta {
            uri: uri.clone(),
            size: parse_u64(h, "content-length")
                .ok_or_else(|| Error::transport(&s, "HEAD response has no Content-Length"))?,
            etag: header_str(h, "etag").map(str::to_owned),
            last_modified: header_str(h, "last-modified")
                .and_then(|v| httpdate::parse_http_date(v).ok()),
            attributes: Attributes::from_headers(h.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))),
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
        let url = self.addressing.object(uri, &[]);
        let mut headers = checksum_headers(checksum);
        add_attributes(&mut headers, &s, &opts.attributes)?;
        add_condition(&mut headers, &s, &opts.mode)?;
        let resp = self
            .transport
            .send(&s, Method::PUT, &url, headers, data)
            .await?;
        Ok(header_str(resp.headers(), "etag").map(str::to_owned))
    }

    async fn create_multipart_upload(
        &self,
        uri: &ObjectUri,
        checksummed: bool,
        opts: &PutOptions,
    ) -> Result<String> {
        let s = uri.to_string();
        let mut headers = HeaderMap::new();
        add_attributes(&mut headers, &s, &opts.attributes)?;
        if checksummed {
            let algorithm = HeaderValue::from_static(checksum::ALGORITHM);
            headers.insert("x-amz-checksum-algorithm", algorithm);
            headers.insert(
                "x-amz-checksum-type",
                HeaderValue::from_static("FULL_OBJECT"),
            );
        }
        let resp = self
            .transport
            .send(
                &s,
                Method::POST,
                &self.addressing.object(uri, &[("uploads", "")]),
                headers,
                Bytes::new(),
            )
            .await?;
        let body = self.xml_body(&s, resp).await?;
        Ok(Self::parse_xml::<xml::InitiateMultipartUploadResult>(&s, &body)?.upload_id)
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
        let n = part_number.to_string();
        let url = self
            .addressing
            .object(uri, &[("partNumber", &n), ("uploadId", upload_id)]);
        let resp = self
            .transport
            .send(&s, Method::PUT, &url, checksum_headers(checksum), data)
            .await?;
        Ok(header_str(resp.headers(), "etag").map(str::to_owned))
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
        let url = self.addressing.object(uri, &[("uploadId", upload_id)]);
        // The whole object's CRC and its type, as the SDKs send them on Complete (which has
        // no body checksum of its own: no `x-amz-sdk-checksum-algorithm`).
        let mut headers = HeaderMap::new();
        add_condition(&mut headers, &s, mode)?;
        if let Some(crc) = checksum {
            let value = HeaderValue::from_str(&crc.to_base64()).expect("base64 is a header value");
            headers.insert(checksum::HEADER, value);
            headers.insert(
                "x-amz-checksum-type",
                HeaderValue::from_static("FULL_OBJECT"),
            );
        }
        let resp = self
            .transport
            .send(
                &s,
                Method::POST,
                &url,
                headers,
                Bytes::from(xml::complete_body(parts)),
            )
            .await?;
        let body = self.xml_body(&s, resp).await?;
        Ok(Self::parse_xml::<xml::CompleteMultipartUploadResult>(&s, &body)?.etag)
    }

    async fn abort_multipart_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[("uploadId", upload_id)]);
        self.transport
            .send(&s, Method::DELETE, &url, HeaderMap::new(), Bytes::new())
            .await
            .map(drop)
    }

    async fn list_objects_v2(&self, prefix: &ObjectUri, opts: &ListOptions) -> Result<ListPage> {
        let mut q = vec![("list-type", "2"), ("prefix", prefix.key())];
        if !opts.recursive {
            q.push(("delimiter", "/"));
        }
        if let Some(t) = &opts.token {
            q.push(("continuation-token", t));
        }
        let max_keys = opts.max_keys.map(|m| m.to_string());
        if let Some(m) = &max_keys {
            q.push(("max-keys", m));
        }
        if let Some(a) = &opts.start_after {
            q.push(("start-after", a));
        }
        let subject = prefix.to_string();
        let page: xml::ListBucketResult = self.bucket_xml(&subject, prefix.bucket(), &q).await?;
        let mut entries: Vec<ListEntry> = page
            .common_prefixes
            .into_iter()
            .map(|p| ListEntry::Prefix(prefix.with_key(p.prefix)))
            .collect();
        entries.extend(page.contents.into_iter().map(|c| {
            ListEntry::Object(ObjectMeta {
                uri: prefix.with_key(c.key),
                size: c.size,
                etag: c.etag,
                last_modified: c.last_modified.as_deref().and_then(xml::parse_iso8601),
                attributes: Attributes::default(),
            })
        }));
        ListPage::new(
            &subject,
            entries,
            page.is_truncated,
            page.next_continuation_token,
        )
    }
    async fn delete_object(&self, uri: &ObjectUri) -> Result<()> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[]);
        self.transport
            .send(&s, Method::DELETE, &url, HeaderMap::new(), Bytes::new())
            .await
            .map(drop)
    }
    async fn delete_objects(&self, uris: &[ObjectUri]) -> Result<Vec<Error>> {
        let Some(first) = uris.first() else {
            return Ok(Vec::new());
        };
        let subject = first.with_key("").to_string();
        let body = xml::delete_body(uris.iter().map(ObjectUri::key));
        // S3 refuses a DeleteObjects without a digest of its body.
        let md5 = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            <md5::Md5 as md5::Digest>::digest(body.as_bytes()),
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-md5",
            HeaderValue::from_str(&md5).expect("base64 is ASCII"),
        );
        let url = self.addressing.url(first.bucket(), "", &[("delete", "")]);
        let resp = self
            .transport
            .send(&subject, Method::POST, &url, headers, Bytes::from(body))
            .await?;
        let body = self.xml_body(&subject, resp).await?;
        let result: xml::DeleteResult = Self::parse_xml(&subject, &body)?;
        Ok(result
            .error
            .into_iter()
            .map(|e| sluice_core::wire::delete_refused(&first.with_key(e.key), &e.code, &e.message))
            .collect())
    }
    async fn copy_object(&self, from: &ObjectUri, to: &ObjectUri) -> Result<Option<PutInfo>> {
        let s = to.to_string();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amz-copy-source",
            HeaderValue::from_str(&from.copy_source()).expect("an escaped copy source is ASCII"),
        );
        let url = self.addressing.object(to, &[]);
        let resp = self
            .transport
            .send(&s, Method::PUT, &url, headers, Bytes::new())
            .await?;
        // A 200 may still carry an <Error> (the copy failed after the answer began).
        let body = self.xml_body(&s, resp).await?;
        let etag = Self::parse_xml::<xml::CopyObjectResult>(&s, &body)?.etag;
        Ok(Some(PutInfo { etag, parts: None }))
    }
    async fn list_multipart_uploads(
        &self,
        prefix: &ObjectUri,
        from: Option<UploadMarker>,
    ) -> Result<UploadsPage> {
        let max = MAX_UPLOADS_PAGE.to_string();
        let mut q = vec![
            ("uploads", ""),
            ("prefix", prefix.key()),
            ("max-uploads", &max),
        ];
        if let Some(m) = &from {
            q.push(("key-marker", &m.key));
            q.push(("upload-id-marker", &m.upload_id));
        }
        let subject = prefix.to_string();
        let page: xml::ListMultipartUploadsResult =
            self.bucket_xml(&subject, prefix.bucket(), &q).await?;
        let next = match (page.next_key_marker, page.next_upload_id_marker) {
            (Some(key), Some(upload_id)) => Some(UploadMarker { key, upload_id }),
            _ => None,
        };
        let uploads = page
            .upload
            .into_iter()
            .map(|u| Upload {
                uri: prefix.with_key(u.key),
                upload_id: u.upload_id,
                initiated: u.initiated.as_deref().and_then(xml::parse_iso8601),
            })
            .collect();
        UploadsPage::new(&subject, uploads, page.is_truncated, next)
    }
}

impl Wire for HyperWire {
    fn backend(&self) -> &'static str {
        "hyper"
    }

    fn config(&self) -> &StoreConfig {
        self.transport.config()
    }
}
