//! A hostile HTTP responder: it reads each request and answers whatever its script says —
//! any status, headers and body, a body cut short, a drip, silence, bytes that are not HTTP
//! — so that clients can be tried against a broken gateway, a wrong proxy or an attacker on
//! the path. The script sees every request (and its number), so it can answer a resume
//! differently from the first GET, or repeat a listing token forever.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A request as the responder read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The HTTP method (`GET`, `PUT`, ...).
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// The value of header `name` (case-insensitive), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The value of query parameter `name` (undecoded).
    pub fn query(&self, name: &str) -> Option<&str> {
        let (_, q) = self.target.split_once('?')?;
        q.split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// One answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Status line, these headers (plus `Connection: close`), this body; nothing is added:
    /// a Content-Length that disagrees with the body is sent as given.
    Send {
        /// The status code.
        status: u16,
        /// The headers, as given.
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// As `Send`, but only the first `sent` body bytes, then the connection closes.
    Cut {
        /// The status code.
        status: u16,
        /// The headers, as given.
        headers: Vec<(String, String)>,
        /// The whole body, of which only `sent` bytes go out.
        body: Vec<u8>,
        /// How many body bytes are sent before the close.
        sent: usize,
    },
    /// As `Send`, one body byte every `every`.
    Drip {
        /// The status code.
        status: u16,
        /// The headers, as given.
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
        /// The pause before each byte.
        every: Duration,
    },
    /// Reads the request and never answers.
    Hang,
    /// These bytes, whatever they are, then close.
    Raw(Vec<u8>),
}

impl Reply {
    /// `status` with a body and its true Content-Length.
    pub fn with_body(status: u16, headers: &[(&str, &str)], body: impl Into<Vec<u8>>) -> Self {
        let body = body.into();
        let mut h: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if !h
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        {
            h.push(("Content-Length".into(), body.len().to_string()));
        }
        Reply::Send {
            status,
            headers: h,
            body,
        }
    }

    /// An S3 error document.
    pub fn s3_error(status: u16, code: &str, message: &str) -> Self {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><RequestId>hostile-1</RequestId></Error>"
        );
        Self::with_body(status, &[("Content-Type", "application/xml")], body)
    }
}

/// How a hostile server answers: given what it saw and the request's number on the connection, the reply.
pub type Script = Arc<dyn Fn(&Seen, usize) -> Reply + Send + Sync>;

/// The responder; stops (and drops every connection) when dropped.
pub struct HostileServer {
    endpoint: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for HostileServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostileServer")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Requests larger than this (head) are cut off: the responder is a test tool.
const MAX_HEAD: usize = 64 * 1024;

impl HostileServer {
    /// Listens on 127.0.0.1 (a free port); `script(request, n)` answers the `n`th request
    /// (from 0, over all connections).
    pub async fn start(script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let accept = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((sock, _)) = listener.accept().await {
                let (script, seen) = (script.clone(), seen2.clone());
                conns.spawn(serve(sock, script, seen));
                while conns.try_join_next().is_some() {}
            }
        });
        Ok(Self {
            endpoint,
            seen,
            accept,
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every request read so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves one connection: one request, the script's answer, then close (clients reconnect
/// for the next request, so the script sees every request in order).
async fn serve(mut sock: TcpStream, script: Script, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    let Some(req) = read_request(&mut sock, &mut buf).await else {
        return;
    };
    let n = {
        let mut s = seen.lock().unwrap();
        s.push(req.clone());
        s.len() - 1
    };
    if answer(&mut sock, script(&req, n)).await.is_ok() {
        let _ = sock.shutdown().await;
    }
}

/// Reads a request head and its Content-Length body (discarded). `None` on EOF or garbage.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Seen> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let mut chunk = [0u8; 8192];
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let req = Seen {
        method,
        target,
        headers,
    };
    buf.drain(..head_end);
    // The body, so that the client finishes sending before it reads the answer.
    let mut want: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .ok()?;
    }
    let have = want.min(buf.len());
    buf.drain(..have);
    want -= have;
    let mut chunk = vec![0u8; 64 * 1024];
    while want > 0 {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        want = want.saturating_sub(n);
    }
    Some(req)
}

fn head_bytes(status: u16, headers: &[(String, String)]) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {status} Hostile\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("Connection: close\r\n\r\n");
    h.into_bytes()
}

async fn answer(sock: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Send {
            status,
            headers,
            body,
        } => {
            sock.write_all(&head_bytes(status, &headers)).await?;
            sock.write_all(&body).await
        }
        Reply::Cut {
            status,
            headers,
            body,
            sent,
        } => {
            sock.write_all(&head_bytes(status, &headers)).await?;
            sock.write_all(&body[..sent.min(body.len())]).await
        }
        Reply::Drip {
            status,
            headers,
            body,
            every,
        } => {
            sock.write_all(&head_bytes(status, &headers)).await?;
            for b in body {
                tokio::time::sleep(every).await;
                sock.write_all(&[b]).await?;
            }
            Ok(())
        }
        Reply::Hang => {
            std::future::pending::<()>().await;
            Ok(())
        }
        Reply::Raw(bytes) => sock.write_all(&bytes).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_as_scripted_and_records_requests() {
        let server = HostileServer::start(Arc::new(|req: &Seen, n| {
            Reply::with_body(200, &[], format!("{n} {} {:?}", req.method, req.query("a")))
        }))
        .await
        .unwrap();
        let addr = server.endpoint().trim_start_matches("http://").to_owned();
        for i in 0..2 {
            let mut s = TcpStream::connect(&addr).await.unwrap();
            s.write_all(b"GET /b/k?a=1&x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.starts_with("HTTP/1.1 200"), "{out}");
            assert!(out.ends_with(&format!("{i} GET Some(\"1\")")), "{out}");
        }
        let seen = server.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].header("HOST"), Some("h"));
        assert_eq!(seen[0].query("x"), Some(""));
    }
}
