//! sluice-backend-hyper: S3 over raw hyper 1 + rustls, signed with aws-sigv4.
//!
//! The fast path. A GET's body frames are copied once, straight from hyper's read buffer
//! into the caller's `Segment`; nothing buffers a whole body. Every wait is bounded
//! (connect, first byte, body stall), and a body cut short resumes from the first missing
//! byte through `sluice_core::resume`.

mod addressing;
mod buffered;
mod transport;
mod xml;

use addressing::Addressing;
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use http::{HeaderMap, HeaderValue, Method};
use sluice_core::listing::{ListPage, paginate};
use sluice_core::multipart::{self, MultipartApi, MultipartWriter};
use sluice_core::resume::{BodySink, GetAttempt, GetRequest, ResponseHead, get_with_resume};
use sluice_core::retry::retry;
use sluice_core::{
    Error, GetInfo, GetOptions, ListEntry, ObjectMeta, ObjectStore, ObjectUri, ObjectWriter,
    PutInfo, PutPayload, Result, Segment, StoreConfig, WriteOptions,
};
use std::sync::Arc;
use transport::{Transport, header_str, read_small_body};

pub use transport::{H2_CONNECTION_WINDOW, H2_STREAM_WINDOW, READ_BUF_MAX};

/// Listing pages and multipart replies are small; bound what is read of them.
const MAX_XML_BODY: usize = 16 << 20;

#[derive(Debug, Clone)]
pub struct HyperStore {
    transport: Transport,
    addressing: Addressing,
}

impl HyperStore {
    pub fn new(cfg: StoreConfig) -> Result<Self> {
        let addressing = Addressing::new(&cfg);
        Ok(Self {
            transport: Transport::new(Arc::new(cfg))?,
            addressing,
        })
    }

    /// Builds the store from the standard AWS environment (see `StoreConfig::from_env`).
    pub async fn from_env() -> Result<Self> {
        Self::new(StoreConfig::from_env().await?)
    }

    fn cfg(&self) -> &StoreConfig {
        self.transport.config()
    }

    async fn xml_body(&self, subject: &str, resp: transport::Success) -> Result<String> {
        let body = read_small_body(
            resp.response.into_body(),
            self.cfg().timeouts.stall,
            MAX_XML_BODY,
        )
        .await
        .ok_or_else(|| {
            Error::transport(subject, "reading the XML response body failed or stalled")
        })?;
        String::from_utf8(body.to_vec())
            .map_err(|_| Error::transport(subject, "XML response is not UTF-8"))
    }

    fn parse_xml<'a, T: serde::Deserialize<'a>>(subject: &str, body: &'a str) -> Result<T> {
        // S3 may answer 200 with an <Error> document (CompleteMultipartUpload does).
        if body.contains("<Error>")
            && let Ok(e) = xml::parse::<xml::ErrorDoc>(body)
        {
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

    async fn list_page(
        &self,
        prefix: &ObjectUri,
        recursive: bool,
        token: Option<&str>,
    ) -> Result<xml::ListBucketResult> {
        let mut q = vec![("list-type", "2"), ("prefix", prefix.key())];
        if !recursive {
            q.push(("delimiter", "/"));
        }
        if let Some(t) = token {
            q.push(("continuation-token", t));
        }
        let subject = prefix.to_string();
        let url = self.addressing.url(prefix.bucket(), "", &q);
        let resp = self
            .transport
            .send(&subject, Method::GET, &url, HeaderMap::new(), Bytes::new())
            .await?;
        let body = self.xml_body(&subject, resp).await?;
        Self::parse_xml(&subject, &body)
    }
}

fn parse_u64(h: &HeaderMap, name: &str) -> Option<u64> {
    header_str(h, name).and_then(|v| v.parse().ok())
}

#[async_trait]
impl GetAttempt for HyperStore {
    async fn get_attempt(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        let subject = req.uri.to_string();
        let mut headers = HeaderMap::new();
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
                    .map_err(|_| Error::integrity(&subject, "ETag is not a valid header value"))?,
            );
        }
        let url = self.addressing.object(req.uri, &[]);
        let resp = self
            .transport
            .send(&subject, Method::GET, &url, headers, Bytes::new())
            .await?;
        let h = resp.response.headers();
        let content_length = parse_u64(h, "content-length")
            .ok_or_else(|| Error::transport(&subject, "response has no Content-Length"))?;
        sink.begin(ResponseHead::from_headers(
            req.uri,
            req.range,
            content_length,
            header_str(h, "content-range"),
            header_str(h, "etag").map(str::to_owned),
        )?)?;

        let body = http_body_util::BodyDataStream::new(resp.response.into_body());
        sink.drain(self.cfg().timeouts.stall, body, |e| {
            Error::transport_with(&subject, e)
        })
        .await
    }
}

#[async_trait]
impl MultipartApi for HyperStore {
    async fn head_object(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        ObjectStore::head(self, uri).await
    }

    async fn put_object(&self, uri: &ObjectUri, data: Bytes) -> Result<Option<String>> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[]);
        let resp = self
            .transport
            .send(&s, Method::PUT, &url, HeaderMap::new(), data)
            .await?;
        Ok(header_str(resp.response.headers(), "etag").map(str::to_owned))
    }

    async fn create_upload(&self, uri: &ObjectUri) -> Result<String> {
        let s = uri.to_string();
        let resp = self
            .transport
            .send(
                &s,
                Method::POST,
                &self.addressing.object(uri, &[("uploads", "")]),
                HeaderMap::new(),
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
    ) -> Result<Option<String>> {
        let s = uri.to_string();
        let n = part_number.to_string();
        let url = self
            .addressing
            .object(uri, &[("partNumber", &n), ("uploadId", upload_id)]);
        let resp = self
            .transport
            .send(&s, Method::PUT, &url, HeaderMap::new(), data)
            .await?;
        Ok(header_str(resp.response.headers(), "etag").map(str::to_owned))
    }

    async fn complete_upload(
        &self,
        uri: &ObjectUri,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<Option<String>> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[("uploadId", upload_id)]);
        let resp = self
            .transport
            .send(
                &s,
                Method::POST,
                &url,
                HeaderMap::new(),
                Bytes::from(xml::complete_body(parts)),
            )
            .await?;
        let body = self.xml_body(&s, resp).await?;
        Ok(Self::parse_xml::<xml::CompleteMultipartUploadResult>(&s, &body)?.etag)
    }

    async fn abort_upload(&self, uri: &ObjectUri, upload_id: &str) -> Result<()> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[("uploadId", upload_id)]);
        self.transport
            .send(&s, Method::DELETE, &url, HeaderMap::new(), Bytes::new())
            .await
            .map(drop)
    }
}

#[async_trait]
impl ObjectStore for HyperStore {
    fn backend(&self) -> &'static str {
        "hyper"
    }

    async fn head(&self, uri: &ObjectUri) -> Result<ObjectMeta> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[]);
        retry(&self.cfg().retry, || async {
            let resp = self
                .transport
                .send(&s, Method::HEAD, &url, HeaderMap::new(), Bytes::new())
                .await?;
            let h = resp.response.headers();
            Ok(ObjectMeta {
                uri: uri.clone(),
                size: parse_u64(h, "content-length")
                    .ok_or_else(|| Error::transport(&s, "HEAD response has no Content-Length"))?,
                etag: header_str(h, "etag").map(str::to_owned),
                last_modified: header_str(h, "last-modified")
                    .and_then(|v| httpdate::parse_http_date(v).ok()),
            })
        })
        .await
    }

    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        get_with_resume(self, &self.cfg().retry, uri, opts, dst).await
    }

    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>> {
        let prefix = prefix.clone();
        paginate(&self.cfg().retry, move |token| {
            let prefix = prefix.clone();
            async move {
                let page = self.list_page(&prefix, recursive, token.as_deref()).await?;
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
                    })
                }));
                ListPage::new(
                    &prefix.to_string(),
                    entries,
                    page.is_truncated,
                    page.next_continuation_token,
                )
            }
        })
    }

    async fn put(&self, uri: &ObjectUri, data: PutPayload) -> Result<PutInfo> {
        let cfg = self.cfg();
        let api: Arc<dyn MultipartApi> = Arc::new(self.clone());
        multipart::put(
            &api,
            &cfg.retry,
            uri,
            data.0,
            cfg.multipart_threshold,
            cfg.multipart_part_size,
        )
        .await
    }

    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>> {
        let api: Arc<dyn MultipartApi> = Arc::new(self.clone());
        Ok(Box::new(MultipartWriter::new(
            api,
            self.cfg().retry,
            uri.clone(),
            opts,
        )?))
    }

    async fn delete(&self, uri: &ObjectUri) -> Result<()> {
        let s = uri.to_string();
        let url = self.addressing.object(uri, &[]);
        retry(&self.cfg().retry, || async {
            self.transport
                .send(&s, Method::DELETE, &url, HeaderMap::new(), Bytes::new())
                .await
                .map(drop)
        })
        .await
    }
}
