//! GET bodies read from the socket straight into the caller's segment.
//!
//! Through hyper every body byte is copied twice: by the kernel into hyper's read buffer,
//! then from there into the segment. `perf` of the s3dlio-compatible loop's warm epochs
//! against nginx put a quarter of the client's CPU in that second copy (`memmove`), as much
//! as in the kernel's own. So for the one request that carries data, a GET of an object over
//! HTTP/1.1, this backend speaks HTTP itself: it writes the signed request, parses the
//! response head with `httparse` (the parser inside hyper), and reads exactly Content-Length
//! body bytes with `read(2)` into the segment's memory (`BodySink::read_from`), as the file
//! backend does with `pread`. Everything else goes through hyper: listings, HEAD, PUT,
//! multipart, HTTP/2 (`SLUICE_HTTP2`), and any GET when `SLUICE_DIRECT_GET=0`.
//!
//! What hyper would otherwise guarantee is kept here: connections open as hyper's do (the
//! same `HttpConnector`), every wait is bounded (connect and TLS handshake, first byte, each
//! body read), a 2xx body must say its length (Content-Length, as the hyper path requires
//! too; an error answer framed otherwise, e.g. chunked, is asked again through hyper so that
//! its S3 code is read), a connection is reused only when its body was read exactly, the
//! server did not ask to close it and nothing more waits on it, and a request on a reused
//! connection the server had meanwhile closed is sent once more on a new one (hyper's
//! `retry_canceled_requests`).

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use sluice_core::error::sources;
use sluice_core::error::{Moved, is_redirect};
use sluice_core::wire::{BodySink, GetRequest, ResponseHead};
use sluice_core::wire::{MAX_ERROR_BODY, error_reply};
use sluice_core::{Error, Result, StoreConfig, TimeoutPhase};
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf};
use tokio_rustls::TlsConnector;
use tower_service::Service;

use crate::buffered::TLS_READ_BUF;

/// The most a response head may take (status line and headers); hyper's own limit is
/// about 400 KiB, S3's heads are a few hundred bytes.
const MAX_HEAD: usize = 64 << 10;
/// Headers parsed per response; more is an error, as in hyper (which allows 100).
const MAX_HEADERS: usize = 100;
/// An idle connection older than this is closed rather than reused (hyper's pool setting).
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// An open HTTP/1.1 connection and the bytes read past the last response's head.
struct Conn {
    io: Box<dyn Io>,
    /// Read buffer for response heads; `buf[..filled]` holds bytes not yet consumed.
    buf: Vec<u8>,
    filled: usize,
}

/// Where a connection goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Origin {
    tls: bool,
    host: String,
    port: u16,
}

/// The direct GET path of one client: its idle connections and how to open new ones.
pub struct Direct {
    tcp: crate::resolve::Tcp,
    tls: TlsConnector,
    cfg: Arc<StoreConfig>,
    idle: Arc<Mutex<Idle>>,
    /// How long an idle connection is kept (`IDLE_TIMEOUT`; tests shorten it).
    idle_timeout: Duration,
}

/// Idle connections by origin, oldest first, each with when it went idle.
#[derive(Default)]
struct Idle {
    conns: HashMap<Origin, Vec<(Conn, Instant)>>,
    /// A task closes connections that stay idle too long while there are any (hyper's
    /// pool does the same with its idle interval): a client that stops reading must not
    /// hold sockets (and the server's slots) open forever. Started again when it has ended
    /// (no connections left, or its runtime shut down).
    reaper: Option<tokio::task::JoinHandle<()>>,
}

impl Idle {
    /// Closes every connection idle for `timeout` or more; whether any is left.
    fn reap(&mut self, timeout: Duration) -> bool {
        for conns in self.conns.values_mut() {
            conns.retain(|(_, since)| since.elapsed() < timeout);
        }
        self.conns.retain(|_, c| !c.is_empty());
        !self.conns.is_empty()
    }
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct").finish_non_exhaustive()
    }
}

/// How a direct attempt ended.
pub enum Outcome {
    /// The answer was read (into the sink) or is the error returned.
    Done(Result<()>),
    /// An error answer whose body is not length-delimited (nothing was written to the
    /// sink): ask again through hyper, which reads any framing, to learn its S3 code.
    Unframed,
}

/// What a response head says, copied out of the parse buffer.
#[derive(Debug, Default)]
struct Head {
    status: u16,
    /// Bytes of the head (status line to the blank line).
    len: usize,
    content_length: Option<u64>,
    /// Transfer-Encoding was present (chunked or other): the body is not length-delimited.
    transfer_encoding: bool,
    /// The server closes the connection after this response (HTTP/1.0, `Connection: close`).
    close: bool,
    etag: Option<String>,
    content_range: Option<String>,
    location: Option<String>,
    bucket_region: Option<String>,
    request_id: Option<String>,
    /// The whole object's CRC64NVME (`x-amz-checksum-crc64nvme`), as sent.
    checksum: Option<String>,
}

impl Direct {
    pub fn new(cfg: Arc<StoreConfig>, tls: &rustls::ClientConfig) -> Self {
        let mut tls = tls.clone();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            tcp: crate::resolve::tcp_connector(&cfg),
            tls: TlsConnector::from(Arc::new(tls)),
            cfg,
            idle: Arc::default(),
            idle_timeout: IDLE_TIMEOUT,
        }
    }

    /// One GET attempt: `req` (signed, with its Host header) sent on a pooled or new
    /// connection, its answer read into `sink`. `subject` names the object in errors.
    pub async fn get(
        &self,
        subject: &str,
        get: &GetRequest<'_>,
        req: &Request<()>,
        sink: &mut BodySink<'_>,
    ) -> Outcome {
        let origin = match origin(subject, req) {
            Ok(o) => o,
            Err(e) => return Outcome::Done(Err(e)),
        };
        let wire = serialize(req);
        let first_byte = self.cfg.timeouts.first_byte;
        let sent = tokio::time::timeout(first_byte, self.exchange(subject, req, &origin, &wire));
        let sent = sent.await;
        let (mut conn, head) = match sent {
            Err(_) => {
                return Outcome::Done(Err(Error::Timeout {
                    uri: subject.to_owned(),
                    phase: TimeoutPhase::FirstByte,
                    after: first_byte,
                }));
            }
            Ok(Err(e)) => return Outcome::Done(Err(e)),
            Ok(Ok(got)) => got,
        };
        if (200..300).contains(&head.status) {
            // Not reused after another 2xx: its framing is not one this path reads.
            if let Err(e) = ResponseHead::check_status(get.uri, head.status) {
                return Outcome::Done(Err(e));
            }
            let result = self.body(subject, get, &mut conn, &head, sink).await;
            if result.is_ok() && !head.close {
                self.put_back(origin, conn);
            }
            return Outcome::Done(result);
        }
        if head.transfer_encoding && !is_redirect(head.status) {
            return Outcome::Unframed;
        }
        Outcome::Done(Err(self.error(subject, req, conn, &head, origin).await))
    }

    /// Sends `wire` and reads the response head, on an idle connection if there is one,
    /// else (or when the idle one turns out closed by the server) on a new one.
    async fn exchange(
        &self,
        subject: &str,
        req: &Request<()>,
        origin: &Origin,
        wire: &[u8],
    ) -> Result<(Conn, Head)> {
        if let Some(mut conn) = self.take_idle(origin) {
            match send_and_read_head(&mut conn, wire).await {
                Ok(Some(head)) => return Ok((conn, head)),
                // Closed before a byte of the answer: the server had dropped the idle
                // connection. The request was not answered; send it again on a new one.
                Ok(None) => {}
                Err(e) if is_disconnect(&e) => {}
                Err(e) => return Err(self.io_error(subject, "reading the response", e)),
            }
        }
        let mut conn = self.connect(subject, req, origin).await?;
        match send_and_read_head(&mut conn, wire).await {
            Ok(Some(head)) => Ok((conn, head)),
            Ok(None) => Err(self.io_error(
                subject,
                "reading the response",
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before a response",
                ),
            )),
            Err(e) => Err(self.io_error(subject, "reading the response", e)),
        }
    }

    /// A new connection to `origin`, opened by hyper-util's connector (the address of
    /// `req`'s URL), with TLS when it is https; all within the connect timeout.
    async fn connect(&self, subject: &str, req: &Request<()>, origin: &Origin) -> Result<Conn> {
        let limit = self.cfg.timeouts.connect;
        let timed_out = || Error::Timeout {
            uri: subject.to_owned(),
            phase: TimeoutPhase::Connect,
            after: limit,
        };
        let mut tcp = self.tcp.clone();
        let opened = tokio::time::timeout(limit, async {
            let tcp = tcp
                .call(req.uri().clone())
                .await
                .map_err(io::Error::other)?
                .into_inner();
            let io: Box<dyn Io> = if origin.tls {
                let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                // rustls reads 4 KiB at a time: serve those reads from 256 KiB socket reads
                // (the reason is at `buffered`).
                let tcp = BufReader::with_capacity(TLS_READ_BUF, tcp);
                Box::new(self.tls.connect(name, tcp).await?)
            } else {
                Box::new(tcp)
            };
            io::Result::Ok(io)
        })
        .await
        .map_err(|_| timed_out())?;
        let io = opened.map_err(|e| {
            let timed = sources(&e).any(|s| {
                s.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
            });
            if timed {
                timed_out()
            } else {
                self.io_error(subject, "connecting", e)
            }
        })?;
        Ok(Conn {
            io,
            buf: vec![0; 4096],
            filled: 0,
        })
    }

    /// Reads the body of a 2xx answer into `sink`: first what came with the head, then
    /// straight from the socket, exactly Content-Length bytes, each read bounded by the
    /// stall timeout.
    async fn body(
        &self,
        subject: &str,
        get: &GetRequest<'_>,
        conn: &mut Conn,
        head: &Head,
        sink: &mut BodySink<'_>,
    ) -> Result<()> {
        // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3): a body sent chunked
        // with a length beside it must not be read as that many raw bytes.
        let expected = head
            .content_length
            .filter(|_| !head.transfer_encoding)
            .ok_or_else(|| Error::transport(subject, "response has no Content-Length"))?;
        sink.begin(
            ResponseHead::from_headers(
                get.uri,
                get.range,
                expected,
                head.content_range.as_deref(),
                head.etag.clone(),
            )?
            .with_checksum(head.checksum.as_deref()),
        )?;
        let mut received = 0u64;
        // Body bytes that arrived with the head.
        let early = (conn.filled as u64).min(expected) as usize;
        if early > 0 {
            sink.write(&conn.buf[..early])?;
            received += early as u64;
        }
        if conn.filled > early {
            // More than the body: the server does not frame as it says. Never reuse this.
            return Err(Error::transport(
                subject,
                format!(
                    "the server sent more than the {expected} bytes its Content-Length declares"
                ),
            ));
        }
        conn.filled = 0;
        let stall = self.cfg.timeouts.stall;
        while received < expected {
            let want = usize::try_from(expected - received).unwrap_or(usize::MAX);
            let read = tokio::time::timeout(stall, sink.read_from(&mut conn.io, want)).await;
            let n = match read {
                Err(_) => {
                    return Err(Error::Timeout {
                        uri: subject.to_owned(),
                        phase: TimeoutPhase::Stall,
                        after: stall,
                    });
                }
                Ok(Err(e)) => return Err(self.io_error(subject, "reading the body", e)),
                Ok(Ok(n)) => n,
            };
            if n == 0 {
                return Err(Error::transport(
                    subject,
                    format!("body ended after {received} of {expected} bytes"),
                ));
            }
            received += n as u64;
        }
        Ok(())
    }

    /// The error an answer other than 2xx means: a redirect with where it points, else the
    /// S3 error its body (when short and length-delimited) names.
    async fn error(
        &self,
        subject: &str,
        req: &Request<()>,
        mut conn: Conn,
        head: &Head,
        origin: Origin,
    ) -> Error {
        if is_redirect(head.status) {
            let url = url::Url::parse(&req.uri().to_string()).ok();
            return Moved::error(
                subject,
                head.status,
                url.as_ref(),
                head.location.as_deref(),
                head.bucket_region.as_deref(),
            );
        }
        let body = match head.content_length {
            Some(len) if !head.transfer_encoding && len <= MAX_ERROR_BODY as u64 => {
                let stall = self.cfg.timeouts.stall;
                match tokio::time::timeout(stall, read_exact_body(&mut conn, len as usize)).await {
                    Ok(Ok(body)) => {
                        if !head.close {
                            self.put_back(origin, conn);
                        }
                        body
                    }
                    _ => Bytes::new(),
                }
            }
            _ => Bytes::new(),
        };
        error_reply(subject, head.status, &body, head.request_id.clone())
    }

    fn take_idle(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let conns = idle.conns.get_mut(origin)?;
        // The newest first: the likeliest to be still open at the server.
        while let Some((mut conn, since)) = conns.pop() {
            if since.elapsed() < self.idle_timeout && is_quiet(&mut conn) {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for the next request, unless the server has sent anything more on it
    /// (bytes no request asked for, which must never be read as the next answer) or closed it.
    /// A full pool closes its oldest connection (the likeliest to be closed by the server
    /// soon) to keep this one.
    fn put_back(&self, origin: Origin, mut conn: Conn) {
        if conn.filled > 0 || !is_quiet(&mut conn) {
            return;
        }
        // No reaping here: the reaper task does it every half timeout, and `take_idle`
        // skips what has expired. (Reaping on every return read the clock once per idle
        // connection per request: 3% of a 128 KiB GET's CPU with 64 connections.)
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let conns = idle.conns.entry(origin).or_default();
        if conns.len() >= self.cfg.max_connections.max(1) {
            conns.remove(0);
        }
        conns.push((conn, Instant::now()));
        if idle.reaper.as_ref().is_none_or(|r| r.is_finished()) {
            idle.reaper = self.start_reaper();
        }
    }

    /// Starts the task that reaps idle connections until none is left (or the client is
    /// gone); `None` outside a runtime (`put_back` tries again).
    fn start_reaper(&self) -> Option<tokio::task::JoinHandle<()>> {
        let rt = tokio::runtime::Handle::try_current().ok()?;
        let (idle, timeout) = (Arc::downgrade(&self.idle), self.idle_timeout);
        Some(rt.spawn(async move {
            loop {
                tokio::time::sleep(timeout / 2).await;
                let Some(idle) = idle.upgrade() else { return };
                let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
                if !idle.reap(timeout) {
                    // Under the lock: the next `put_back` sees no reaper and starts one.
                    idle.reaper = None;
                    return;
                }
            }
        }))
    }

    fn io_error(&self, subject: &str, doing: &str, e: io::Error) -> Error {
        let endpoint = self.cfg.endpoint_url();
        Error::Transport {
            uri: subject.to_owned(),
            message: sluice_core::error::scrub(&format!("{doing}: {e} (endpoint {endpoint})")),
            source: Some(Box::new(e)),
        }
    }
}

/// The connection's scheme, host and port, from the request's URL.
fn origin(subject: &str, req: &Request<()>) -> Result<Origin> {
    let uri = req.uri();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        other => {
            return Err(Error::InvalidUri {
                uri: subject.to_owned(),
                reason: format!("cannot GET over scheme {other:?}"),
            });
        }
    };
    let host = uri.host().ok_or_else(|| Error::InvalidUri {
        uri: subject.to_owned(),
        reason: format!("request URL {uri} has no host"),
    })?;
    // An IPv6 literal comes bracketed; connect and SNI want it bare.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    Ok(Origin { tls, host, port })
}

/// The request head as it goes on the wire (a GET has no body).
fn serialize(req: &Request<()>) -> Vec<u8> {
    debug_assert_eq!(req.method(), Method::GET);
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut out = Vec::with_capacity(1024);
    out.extend_from_slice(b"GET ");
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    write_headers(&mut out, req.headers());
    out.extend_from_slice(b"\r\n");
    out
}

fn write_headers(out: &mut Vec<u8>, headers: &HeaderMap) {
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Writes the request and reads one final response head (skipping 1xx interim ones).
/// `Ok(None)`: the connection ended before any byte of an answer.
async fn send_and_read_head(conn: &mut Conn, wire: &[u8]) -> io::Result<Option<Head>> {
    conn.io.write_all(wire).await?;
    conn.io.flush().await?;
    let mut answered = false;
    loop {
        if conn.filled > 0 {
            answered = true;
            if let Some(head) = parse_head(&conn.buf[..conn.filled])? {
                conn.buf.copy_within(head.len..conn.filled, 0);
                conn.filled -= head.len;
                // 100 Continue, 103 Early Hints: a final answer follows.
                if (100..200).contains(&head.status) && head.status != 101 {
                    continue;
                }
                return Ok(Some(head));
            }
        }
        if conn.filled == conn.buf.len() {
            if conn.buf.len() >= MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("response head larger than {MAX_HEAD} bytes"),
                ));
            }
            conn.buf.resize((conn.buf.len() * 2).min(MAX_HEAD), 0);
        }
        let n = conn.io.read(&mut conn.buf[conn.filled..]).await?;
        if n == 0 {
            if answered {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the response head",
                ));
            }
            return Ok(None);
        }
        conn.filled += n;
    }
}

/// The head at the start of `buf` once it is complete; `Ok(None)` while it is not.
fn parse_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not an HTTP response: {e}"),
            ));
        }
    };
    let mut head = Head {
        status: resp.code.unwrap_or_default(),
        len,
        close: resp.version != Some(1),
        ..Head::default()
    };
    let text = |v: &[u8]| String::from_utf8_lossy(v).trim().to_owned();
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).ok().map(str::trim);
            let n = v
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("invalid Content-Length {:?}", text(h.value)),
                    )
                })?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "conflicting Content-Length headers",
                ));
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.transfer_encoding = true;
        } else if name.eq_ignore_ascii_case("connection") {
            let v = text(h.value).to_ascii_lowercase();
            if v.split(',').any(|t| t.trim() == "close") {
                head.close = true;
            }
        } else if name.eq_ignore_ascii_case("etag") {
            head.etag = Some(text(h.value));
        } else if name.eq_ignore_ascii_case("content-range") {
            head.content_range = Some(text(h.value));
        } else if name.eq_ignore_ascii_case("location") {
            head.location = Some(text(h.value));
        } else if name.eq_ignore_ascii_case("x-amz-bucket-region") {
            head.bucket_region = Some(text(h.value));
        } else if name.eq_ignore_ascii_case("x-amz-request-id") {
            head.request_id = Some(text(h.value));
        } else if name.eq_ignore_ascii_case(sluice_core::checksum::HEADER) {
            head.checksum = Some(text(h.value));
        }
    }
    Ok(Some(head))
}

/// Exactly `len` body bytes (what came with the head, then from the socket).
async fn read_exact_body(conn: &mut Conn, len: usize) -> io::Result<Bytes> {
    let early = conn.filled.min(len);
    let mut body = conn.buf[..early].to_vec();
    conn.buf.copy_within(early..conn.filled, 0);
    conn.filled -= early;
    if conn.filled > 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "more bytes than the Content-Length",
        ));
    }
    let mut rest = vec![0; len - early];
    conn.io.read_exact(&mut rest).await?;
    body.extend_from_slice(&rest);
    Ok(body.into())
}

/// Nothing waits to be read on an idle connection: no bytes, no end of stream, no error.
/// One read polled without waiting (its waker does nothing; the next real read registers
/// its own).
fn is_quiet(conn: &mut Conn) -> bool {
    let mut probe = [0u8; 1];
    let mut buf = ReadBuf::new(&mut probe);
    let mut cx = Context::from_waker(Waker::noop());
    matches!(
        Pin::new(&mut conn.io).poll_read(&mut cx, &mut buf),
        Poll::Pending
    )
}

/// The server closed or reset the connection (as it may an idle one at any moment).
fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// `n` connections to a local listener, and the server's ends (to see which close).
    async fn conns(n: usize) -> (Vec<Conn>, Vec<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mut clients, mut servers) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let c = TcpStream::connect(addr).await.unwrap();
            servers.push(listener.accept().await.unwrap().0);
            clients.push(Conn {
                io: Box::new(c),
                buf: vec![0; 16],
                filled: 0,
            });
        }
        (clients, servers)
    }

    /// Whether the client closed the server's end `s` (seen within 5 s).
    async fn closed(s: &mut TcpStream) -> bool {
        let mut b = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await;
        matches!(read, Ok(Ok(0)))
    }

    fn direct(max_connections: usize, idle_timeout: Duration) -> (Direct, Origin) {
        let mut cfg = StoreConfig::new(
            Some("http://127.0.0.1:1".parse().unwrap()),
            "us-east-1",
            sluice_core::CredentialsCache::anonymous(),
        );
        cfg.max_connections = max_connections;
        let tls = crate::transport::tls_config(&cfg).unwrap();
        let mut d = Direct::new(Arc::new(cfg), &tls);
        d.idle_timeout = idle_timeout;
        let origin = Origin {
            tls: false,
            host: "127.0.0.1".into(),
            port: 1,
        };
        (d, origin)
    }

    #[tokio::test]
    async fn a_full_pool_closes_its_oldest_connection_to_keep_the_new_one() {
        let (d, origin) = direct(2, IDLE_TIMEOUT);
        let (clients, mut servers) = conns(3).await;
        for c in clients {
            d.put_back(origin.clone(), c);
        }
        assert!(closed(&mut servers[0]).await, "the oldest is closed");
        // The newest is taken first, and it is the last one put back.
        let mut newest = d.take_idle(&origin).expect("kept");
        newest.io.write_all(b"n").await.unwrap();
        let mut b = [0u8; 1];
        servers[2].read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"n");
        assert!(d.take_idle(&origin).is_some() && d.take_idle(&origin).is_none());
    }

    #[tokio::test]
    async fn connections_idle_too_long_are_closed_without_another_request() {
        let (d, origin) = direct(8, Duration::from_millis(100));
        let (clients, mut servers) = conns(2).await;
        for c in clients {
            d.put_back(origin.clone(), c);
        }
        for s in &mut servers {
            assert!(closed(s).await, "an idle connection is reaped");
        }
        let idle = d.idle.lock().unwrap();
        let stopped = idle.reaper.is_none();
        assert!(
            idle.conns.is_empty() && stopped,
            "the reaper stops when none is left"
        );
    }

    #[test]
    fn a_head_is_read_once_complete_and_its_fields_kept() {
        let raw = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nETag: \"abc\"\r\nContent-Range: bytes 0-9/100\r\nx-amz-request-id: R1\r\n\r\n0123";
        assert!(parse_head(&raw[..30]).unwrap().is_none(), "partial");
        let head = parse_head(raw).unwrap().expect("complete");
        assert_eq!(head.status, 206);
        assert_eq!(head.len, raw.len() - 4);
        assert_eq!(head.content_length, Some(10));
        assert_eq!(head.etag.as_deref(), Some("\"abc\""));
        assert_eq!(head.content_range.as_deref(), Some("bytes 0-9/100"));
        assert_eq!(head.request_id.as_deref(), Some("R1"));
        assert!(!head.close && !head.transfer_encoding);
    }

    #[test]
    fn lengths_that_cannot_be_trusted_are_refused() {
        for bad in [
            "Content-Length: abc\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: 18446744073709551616\r\n",
            "Content-Length: 10\r\nContent-Length: 11\r\n",
        ] {
            let raw = format!("HTTP/1.1 200 OK\r\n{bad}\r\n");
            let e = parse_head(raw.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bad:?}: {e}");
        }
        let same_twice = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(
            parse_head(same_twice).unwrap().unwrap().content_length,
            Some(10)
        );
    }

    #[test]
    fn closing_and_unframed_answers_are_recognised() {
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.close, "HTTP/1.0 closes");
        let h = parse_head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.close);
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.transfer_encoding && h.content_length.is_none());
        assert!(parse_head(b"SSH-2.0-OpenSSH_9.6\r\n").is_err());
    }

    #[test]
    fn the_request_head_carries_every_header() {
        let req = Request::get("http://127.0.0.1:9000/b/k%20x?partNumber=1")
            .header("host", "127.0.0.1:9000")
            .header("range", "bytes=0-9")
            .body(())
            .unwrap();
        let wire = String::from_utf8(serialize(&req)).unwrap();
        assert_eq!(
            wire,
            "GET /b/k%20x?partNumber=1 HTTP/1.1\r\nhost: 127.0.0.1:9000\r\nrange: bytes=0-9\r\n\r\n"
        );
        let o = origin("s3://b/k", &req).unwrap();
        assert_eq!((o.tls, o.host.as_str(), o.port), (false, "127.0.0.1", 9000));
        let v6 = Request::get("https://[::1]/b/k").body(()).unwrap();
        let o = origin("s3://b/k", &v6).unwrap();
        assert_eq!((o.tls, o.host.as_str(), o.port), (true, "::1", 443));
    }
}
