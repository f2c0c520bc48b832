//! The direct GET path's connection handling, against a plain HTTP/1.1 responder on a real
//! socket: connections are kept and reused, and one the server closed while idle costs no
//! attempt (the request goes again on a new connection), and one on which the server sent
//! bytes nobody asked for is never read again.

use sluice_backend_hyper::HyperStore;
use sluice_core::ObjectStoreExt;
use sluice_core::{CredentialsCache, ObjectUri, RetryPolicy, StoreConfig};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BODY: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// Answers every GET on a connection with `BODY` (keep-alive), and after `per_conn`
/// answers closes the connection; with `unasked`, a moment after each answer it sends a
/// second, unrequested answer of the same length. Counts connections and requests.
struct Responder {
    endpoint: String,
    conns: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

async fn responder(per_conn: usize, unasked: Option<&'static [u8]>) -> Responder {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let conns = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (c, r) = (conns.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let (sock, _) = listener.accept().await.unwrap();
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(sock, per_conn, unasked, r.clone()));
        }
    });
    Responder {
        endpoint,
        conns,
        requests,
    }
}

async fn serve(
    mut sock: TcpStream,
    per_conn: usize,
    unasked: Option<&'static [u8]>,
    requests: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    for _ in 0..per_conn {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut chunk = [0; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buf.drain(..end);
        requests.fetch_add(1, Ordering::SeqCst);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"e\"\r\n\r\n",
            BODY.len()
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        sock.write_all(BODY).await.unwrap();
        if let Some(other) = unasked {
            tokio::time::sleep(Duration::from_millis(5)).await;
            sock.write_all(head.as_bytes()).await.unwrap();
            sock.write_all(other).await.unwrap();
        }
    }
    // Closed while the client holds the connection idle.
}

fn store(endpoint: &str) -> HyperStore {
    let mut cfg = StoreConfig::new(
        Some(endpoint.parse().unwrap()),
        "us-east-1",
        CredentialsCache::from_static("AKIDTEST", "secret-test-key", None),
    );
    // One attempt: a request lost to an idle close must be sent again without a retry.
    cfg.retry = RetryPolicy {
        max_attempts: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
    };
    assert!(cfg.direct_get, "the direct path is the default");
    HyperStore::new(cfg).unwrap()
}

#[tokio::test]
async fn sequential_gets_share_one_connection() {
    let r = responder(usize::MAX, None).await;
    let s = store(&r.endpoint);
    let uri = ObjectUri::new("bkt", "k").unwrap();
    for _ in 0..5 {
        assert_eq!(&s.get(&uri, None).await.unwrap()[..], BODY);
    }
    assert_eq!(r.requests.load(Ordering::SeqCst), 5);
    assert_eq!(
        r.conns.load(Ordering::SeqCst),
        1,
        "the connection was reused"
    );
}

#[tokio::test]
async fn a_connection_closed_while_idle_costs_no_attempt() {
    let r = responder(1, None).await;
    let s = store(&r.endpoint);
    let uri = ObjectUri::new("bkt", "k").unwrap();
    for i in 0..3 {
        let got = s.get(&uri, None).await;
        assert_eq!(&got.expect("read on a new connection")[..], BODY, "GET {i}");
        // Let the server's close reach the client's idle connection.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(r.requests.load(Ordering::SeqCst), 3);
    assert_eq!(r.conns.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn bytes_nobody_asked_for_are_never_taken_as_the_next_answer() {
    const WRONG: &[u8] = b"ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210";
    assert_eq!(WRONG.len(), BODY.len());
    let r = responder(usize::MAX, Some(WRONG)).await;
    let s = store(&r.endpoint);
    let uri = ObjectUri::new("bkt", "k").unwrap();
    for i in 0..3 {
        assert_eq!(&s.get(&uri, None).await.unwrap()[..], BODY, "GET {i}");
        // The unasked answer arrives while the connection is idle.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert_eq!(
        r.conns.load(Ordering::SeqCst),
        3,
        "a connection with unread bytes is not reused"
    );
}
