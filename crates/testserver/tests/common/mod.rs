//! Raw S3 requests for the server's tests: signed with aws-sigv4 as any S3 client signs them,
//! each on a fresh connection.

use aws_credential_types::Credentials;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use sluice_backend_hyper::sigv4::sign_request;
use sluice_testserver::{DEFAULT_BUCKET, TestServer};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[allow(dead_code)] // each test binary reads what it needs
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Result<Bytes, String>,
}

/// One signed request on a fresh connection (plain or TLS with the server's CA).
pub async fn request(
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

pub fn path(key: &str) -> String {
    format!("/{DEFAULT_BUCKET}/{key}")
}
