//! The server's own tests: raw HTTP requests, signed with aws-sigv4 as any S3 client signs
//! them, over real sockets.

mod common;

use bytes::Bytes;
use common::{Reply, path, request};
use sluice_testserver::{DEFAULT_BUCKET, Fault, ServerOptions, TestServer};
use std::time::Duration;

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

/// S3's conditional writes, empty delimiter and stored headers, as raw requests (what
/// s3fs and object_store send): each answer as S3 gives it.
#[tokio::test]
async fn conditional_writes_empty_delimiter_and_headers_behave_as_on_s3() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    async fn put(server: &TestServer, key: &str, headers: &[(&str, &str)]) -> Reply {
        let body = Bytes::from_static(b"v1");
        request(server, false, "PUT", &path(key), headers, body, None).await
    }
    let absent = [("if-none-match", "*")];
    assert_eq!(put(&server, "c", &absent).await.status, 200);
    let again = put(&server, "c", &absent).await;
    assert_eq!(again.status, 412);
    assert!(String::from_utf8_lossy(&again.body.unwrap()).contains("PreconditionFailed"));
    let other = [("if-match", "\"other\"")];
    assert_eq!(put(&server, "c", &other).await.status, 412);
    assert_eq!(put(&server, "missing", &other).await.status, 404);
    // The ETag of "v1", as the first PUT stored it.
    let etag = {
        use md5::{Digest, Md5};
        format!("\"{}\"", hex::encode(Md5::digest(b"v1")))
    };
    assert_eq!(put(&server, "c", &[("if-match", &etag)]).await.status, 200);

    let with_headers = put(
        &server,
        "h",
        &[
            ("content-type", "text/html; charset=utf-8"),
            ("cache-control", "max-age=60"),
            ("x-amz-meta-owner", "rank 0"),
        ],
    )
    .await;
    assert_eq!(with_headers.status, 200);
    let head = request(&server, false, "HEAD", &path("h"), &[], Bytes::new(), None).await;
    assert_eq!(head.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(head.headers["cache-control"], "max-age=60");
    assert_eq!(head.headers["x-amz-meta-owner"], "rank 0");

    server.insert(DEFAULT_BUCKET, "d/e/f", &b"x"[..]);
    let list = request(
        &server,
        false,
        "GET",
        &format!("/{DEFAULT_BUCKET}?list-type=2&prefix=d%2F&delimiter="),
        &[],
        Bytes::new(),
        None,
    )
    .await;
    let body = String::from_utf8(list.body.unwrap().to_vec()).unwrap();
    assert!(body.contains("<Key>d/e/f</Key>"), "{body}");
    assert!(!body.contains("<CommonPrefixes>"), "{body}");
}

/// The listener queues thousands of connections, not std's 128: a client that opens a few
/// hundred at once would otherwise lose SYNs, each then waiting a second for the kernel's
/// retransmit (`ss` shows a listening socket's backlog as its Send-Q).
#[tokio::test]
async fn the_listener_queues_thousands_of_connections() {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let port = server
        .http_endpoint()
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let out = std::process::Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2) runs");
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let backlog: u32 = line
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no listening socket in {line:?}"));
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(backlog, somaxconn.min(8192), "{line}");
    assert!(backlog > 128, "{line}");
}
