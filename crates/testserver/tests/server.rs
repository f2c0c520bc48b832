//! The server's own tests: raw HTTP requests, signed with aws-sigv4 as any S3 client signs
//! them, over real sockets.

use aws_credential_types::Credentials;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use sluice_backend_hyper::sigv4::sign_request;
use sluice_testserver::{DEFAULT_BUCKET, Fault, ServerOptions, TestServer};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: Result<Bytes, String>,
}

/// One signed request on a fresh connection (plain or TLS with the server's CA).
async fn request(
    server: &TestServer,
    tls: bool,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
    secret: Option<&str>,
) -> Reply {
    let endpoint = if tls {
        server.https_endpoint()
    } else {
        server.http_endpoint()
    };
    let authority = endpoint.split("://").nth(1).unwrap().to_owned();
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{endpoint}{path}"))
        .header("host", &authority);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Full::new(body)).unwrap();
    let creds = Credentials::new(
        server.access_key(),
        secret.unwrap_or(server.secret_key()),
        None,
        None,
        "test",
    );
    sign_request(&mut req, &creds, "us-east-1", SystemTime::now()).unwrap();
    // http1 over the wire wants origin-form.
    *req.uri_mut() = path.parse().unwrap();

    let port = authority
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let resp = if tls {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(server.ca_bundle()).unwrap();
        for cert in rustls_pemfile::certs(&mut &pem[..]) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let stream = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect("localhost".try_into().unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let (mut send, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        send.send_request(req).await.unwrap()
    } else {
        let (mut send, conn) = http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        send.send_request(req).await.unwrap()
    };
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = tokio::time::timeout(Duration::from_secs(10), resp.into_body().collect())
        .await
        .expect("body within 10 s");
    Reply {
        status,
        headers,
        body: body.map(|c| c.to_bytes()).map_err(|e| e.to_string()),
    }
}

fn path(key: &str) -> String {
    format!("/{DEFAULT_BUCKET}/{key}")
}

#[tokio::test]
async fn signed_put_then_ranged_get_over_http_and_https() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let data = Bytes::from(sluice_testdata::pattern::generate("obj", 100_000));
    let put = request(&server, false, "PUT", &path("obj"), &[], data.clone(), None).await;
    assert_eq!(put.status, 200, "{:?}", put.body);
    assert!(put.headers.contains_key("etag"));

    for tls in [false, true] {
        let get = request(&server, tls, "GET", &path("obj"), &[], Bytes::new(), None).await;
        assert_eq!(get.status, 200);
        assert_eq!(get.body.unwrap(), data);

        let r = request(
            &server,
            tls,
            "GET",
            &path("obj"),
            &[("range", "bytes=10-19")],
            Bytes::new(),
            None,
        )
        .await;
        assert_eq!(r.status, 206);
        assert_eq!(r.headers["content-range"], "bytes 10-19/100000");
        assert_eq!(r.body.unwrap(), data.slice(10..20));
    }
}

#[tokio::test]
async fn wrong_signature_is_refused() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    server.insert(DEFAULT_BUCKET, "k", &b"hello"[..]);
    let r = request(
        &server,
        false,
        "GET",
        &path("k"),
        &[],
        Bytes::new(),
        Some("wrong-secret"),
    )
    .await;
    assert_eq!(r.status, 403);
    let body = String::from_utf8(r.body.unwrap().to_vec()).unwrap();
    assert!(body.contains("SignatureDoesNotMatch"), "{body}");
}

#[tokio::test]
async fn errors_are_s3_xml_with_codes() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    server.insert(DEFAULT_BUCKET, "k", &b"hello"[..]);
    let missing = request(
        &server,
        false,
        "GET",
        &path("nope"),
        &[],
        Bytes::new(),
        None,
    )
    .await;
    assert_eq!(missing.status, 404);
    assert!(String::from_utf8_lossy(&missing.body.unwrap()).contains("<Code>NoSuchKey</Code>"));
    let past = request(
        &server,
        false,
        "GET",
        &path("k"),
        &[("range", "bytes=100-200")],
        Bytes::new(),
        None,
    )
    .await;
    assert_eq!(past.status, 416);
    let changed = request(
        &server,
        false,
        "GET",
        &path("k"),
        &[("if-match", "\"not-the-etag\"")],
        Bytes::new(),
        None,
    )
    .await;
    assert_eq!(changed.status, 412);
}

#[tokio::test]
async fn injected_faults_fire_then_clear() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    server.insert(DEFAULT_BUCKET, "k", vec![7u8; 10_000]);

    server.faults().inject(Fault::SlowDown, 1);
    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert_eq!(r.status, 503);
    assert!(String::from_utf8_lossy(&r.body.unwrap()).contains("SlowDown"));

    server.faults().inject(Fault::ResetAfter(1000), 1);
    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_err(), "body must break after the reset");

    server.faults().inject(Fault::TruncateAfter(500), 1);
    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert!(
        r.body.is_err(),
        "a body shorter than Content-Length is an error for the client"
    );

    server
        .faults()
        .inject(Fault::StallAfter(100, Duration::from_millis(300)), 1);
    let t = std::time::Instant::now();
    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert_eq!(r.body.unwrap().len(), 10_000);
    assert!(t.elapsed() >= Duration::from_millis(300));

    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert_eq!(r.body.unwrap().len(), 10_000, "faults are one-shot");
    assert_eq!(server.faults().fired(), 4);
}

#[tokio::test]
async fn data_dir_persists_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServerOptions {
        data_dir: Some(dir.path().to_owned()),
        ..Default::default()
    };
    {
        let server = TestServer::start(opts.clone()).await.unwrap();
        let put = request(
            &server,
            false,
            "PUT",
            &path("a/b.bin"),
            &[],
            Bytes::from_static(b"persisted"),
            None,
        )
        .await;
        assert_eq!(put.status, 200);
    }
    let server = TestServer::start(opts).await.unwrap();
    let get = request(
        &server,
        false,
        "GET",
        &path("a/b.bin"),
        &[],
        Bytes::new(),
        None,
    )
    .await;
    assert_eq!(get.body.unwrap(), Bytes::from_static(b"persisted"));
    // Keys that are not plain relative paths are refused, never joined into a path.
    let storage = server.storage();
    for key in [
        "../../escape",
        "a/../../../escape",
        "/abs",
        "a//b",
        "dir/",
        "a/./b",
        "nul\0",
    ] {
        let obj = sluice_testserver::storage::StoredObject::new(Bytes::from_static(b"x"));
        assert!(
            matches!(
                storage.put(DEFAULT_BUCKET, key, obj),
                Err(sluice_testserver::storage::Missing::UnsafeKey)
            ),
            "PUT {key:?}"
        );
        assert!(
            storage.delete(DEFAULT_BUCKET, key).is_err(),
            "DELETE {key:?}"
        );
    }
    assert!(!dir.path().parent().unwrap().join("escape").exists());
    assert!(!dir.path().join("escape").exists());
}
