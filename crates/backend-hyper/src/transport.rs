//! The HTTP client: pooled hyper 1 connections over rustls, bounded waits, request signing,
//! and S3 error responses turned into `sluice_core::Error`.

use crate::resolve::tcp_connector;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_core::error::{Moved, is_redirect};
use sluice_core::error::{error_chain, sources};
use sluice_core::wire::{MAX_ERROR_BODY, error_reply};
use sluice_core::{Error, Result, StoreConfig, TimeoutPhase};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::buffered::BufferedConnector;

/// HTTP/2 flow-control windows, sized for bandwidth × delay: 25 Gbit/s × 5 ms ≈ 16 MiB per
/// stream, and four streams' worth per connection. hyper's defaults (64 KiB … 5 MiB) cap
/// one stream at window ÷ RTT: 5 MiB per millisecond of round trip.
pub const H2_STREAM_WINDOW: u32 = 16 << 20;
/// The connection's window: four streams' worth (see `H2_STREAM_WINDOW`).
pub const H2_CONNECTION_WINDOW: u32 = 64 << 20;

/// Largest read hyper issues on a connection (its adaptive strategy grows up to this).
/// Throughput does not decide it; the client's CPU does. Every byte is copied by the kernel
/// into this buffer, and 16 connections × 1 MiB buffers spread that copy over more memory
/// than a core's L2 holds; much smaller, a first pass fills the socket's backlog. Reads
/// seldom bring more than ~100 KB anyway (docs/benchmarks.md, "Why the defaults").
pub const READ_BUF_MAX: usize = 256 << 10;

#[derive(Debug, Clone)]
pub struct Transport {
    client: Client<HttpsConnector<BufferedConnector>, Full<Bytes>>,
    cfg: Arc<StoreConfig>,
}

impl Transport {
    pub fn new(cfg: Arc<StoreConfig>, tls: rustls::ClientConfig) -> Result<Self> {
        let http = tcp_connector(&cfg);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        // HTTP/1.1 by default, even over TLS: one TCP connection per request spreads the
        // receive work over the kernel's queues and the runtime's threads, and has no
        // flow-control window to cap a stream at window/RTT. HTTP/2 multiplexes every request
        // onto one connection (one socket, one decrypting task) — opt in with SLUICE_HTTP2=1.
        let connector = if cfg.http2 {
            builder
                .enable_all_versions()
                .wrap_connector(BufferedConnector::new(http))
        } else {
            builder
                .enable_http1()
                .wrap_connector(BufferedConnector::new(http))
        };
        let mut b = Client::builder(TokioExecutor::new());
        b.pool_max_idle_per_host(cfg.max_connections)
            .pool_idle_timeout(Duration::from_secs(50))
            .http1_max_buf_size(READ_BUF_MAX);

        if cfg.http2 {
            b.http2_initial_stream_window_size(H2_STREAM_WINDOW)
                .http2_initial_connection_window_size(H2_CONNECTION_WINDOW);
        }
        Ok(Self {
            client: b.build(connector),
            cfg,
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Signs and sends one request; returns the response if its status is 2xx, else the S3
    /// error it carries. `subject` (the URI) names the request in every error.
    pub async fn send(
        &self,
        subject: &str,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>> {
        let req = self
            .signed(subject, method.clone(), url, headers, Full::new(body))
            .await?;
        let first_byte = self.cfg.timeouts.first_byte;
        let response = match tokio::time::timeout(first_byte, self.client.request(req)).await {
            Err(_) => {
                return Err(Error::Timeout {
                    uri: subject.to_owned(),
                    phase: TimeoutPhase::FirstByte,
                    after: first_byte,
                });
            }
            Ok(Err(e)) => return Err(self.request_error(subject, e)),
            Ok(Ok(r)) => r,
        };
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.error_response(subject, method, url, response).await)
    }

    /// The request, with its `Host` header and signed (unless anonymous). `subject` (the
    /// URI) names it in errors.
    pub async fn signed<B>(
        &self,
        subject: &str,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: B,
    ) -> Result<Request<B>> {
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .body(body)
            .map_err(|e| Error::InvalidUri {
                uri: subject.to_owned(),
                reason: format!("cannot form a request URL {url:?}: {e}"),
            })?;
        *req.headers_mut() = headers;
        let host = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        req.headers_mut().insert(
            http::header::HOST,
            host.parse()
                .map_err(|_| Error::config("endpoint", format!("bad host {host:?}")))?,
        );
        if let Some(creds) = self.cfg.credentials.get(subject).await? {
            crate::sigv4::sign_request(&mut req, &creds, &self.cfg.region, SystemTime::now())?;
        }
        Ok(req)
    }

    fn request_error(&self, subject: &str, e: hyper_util::client::legacy::Error) -> Error {
        // hyper-util's own connect timeout and the kernel's both end the chain in an
        // io::Error of kind TimedOut (the former displays as "deadline has elapsed").
        let timed_out = sources(&e).any(|s| {
            s.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        });
        if e.is_connect() && timed_out {
            return Error::Timeout {
                uri: subject.to_owned(),
                phase: TimeoutPhase::Connect,
                after: self.cfg.timeouts.connect,
            };
        }
        let endpoint = self.cfg.endpoint_url();
        Error::Transport {
            uri: subject.to_owned(),
            message: format!("{} (endpoint {endpoint})", error_chain(&e)),
            source: Some(Box::new(e)),
        }
    }

    /// Reads a bounded error body and maps status + S3 code to the error variants; a
    /// redirect is reported with where it points (core's `S3Store` decides whether to go).
    async fn error_response(
        &self,
        subject: &str,
        method: Method,
        url: &str,
        response: Response<Incoming>,
    ) -> Error {
        let status = response.status().as_u16();
        if is_redirect(status) {
            let h = response.headers();
            return Moved::error(
                subject,
                status,
                url::Url::parse(url).ok().as_ref(),
                header_str(h, "location"),
                header_str(h, "x-amz-bucket-region"),
            );
        }
        let request_id = header_str(response.headers(), "x-amz-request-id").map(str::to_owned);
        let body = if method == Method::HEAD {
            Bytes::new()
        } else {
            read_small_body(
                response.into_body(),
                self.cfg.timeouts.stall,
                MAX_ERROR_BODY,
            )
            .await
            .unwrap_or_default()
        };
        error_reply(subject, status, &body, request_id)
    }
}

/// Collects a small body (error XML, listing, multipart replies) of at most `limit` bytes
/// under the stall timeout.
pub async fn read_small_body(body: Incoming, stall: Duration, limit: usize) -> Option<Bytes> {
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(stall, limited.collect()).await {
        Ok(Ok(c)) => Some(c.to_bytes()),
        _ => None,
    }
}

/// A stand-in S3 code for responses without a body (HEAD).
pub fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

pub fn tls_config(cfg: &StoreConfig) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // The system store too, best effort: private CAs installed there should just work.
    for cert in rustls_native_certs::load_native_certs().certs {
        roots.add(cert).ok();
    }
    if let (Some(path), Some(pem)) = (&cfg.ca_bundle, cfg.read_ca_bundle()?) {
        let mut added = 0;
        for cert in rustls_pemfile::certs(&mut &pem[..]) {
            let cert = cert
                .map_err(|e| Error::config("AWS_CA_BUNDLE", format!("{}: {e}", path.display())))?;
            roots
                .add(cert)
                .map_err(|e| Error::config("AWS_CA_BUNDLE", format!("{}: {e}", path.display())))?;
            added += 1;
        }
        if added == 0 {
            return Err(Error::config(
                "AWS_CA_BUNDLE",
                format!("{} holds no PEM certificates", path.display()),
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config("tls", e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
