//! Upload checksums end to end: a proxy between client and test server flips one byte in
//! the body of every PUT (what a bad NIC, link or middlebox does), and the test server
//! checks the CRC64NVME the client sent, as S3 does. Every stack that sends checksums gets
//! the store's refusal (400 BadDigest) instead of a stored object with a wrong byte; the
//! one that cannot (object_store) is shown storing the wrong bytes.

use bytes::Bytes;
use sluice_core::ObjectStoreExt;
use sluice_core::{Error, ObjectStore, ObjectUri, StoreConfig};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for, within};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A proxy to `upstream` that flips the middle byte of every PUT body it forwards. Returns
/// its address and the count of bodies it corrupted.
async fn corrupting_proxy(upstream: std::net::SocketAddr) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let flipped = Arc::new(AtomicUsize::new(0));
    let count = flipped.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            tokio::spawn(relay(client, server, count.clone()));
        }
    });
    (format!("http://{addr}"), flipped)
}

/// Copies answers back as they are; requests go one by one, head as is, body (by its
/// Content-Length) with one byte flipped when it is a PUT's.
async fn relay(client: TcpStream, server: TcpStream, flipped: Arc<AtomicUsize>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 64 << 10];
            match from_client.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 64 << 10];
            match from_client.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let mut request: Vec<u8> = buf.drain(..head_end + len).collect();
        if head.starts_with("put ") && len > 0 {
            request[head_end + len / 2] ^= 0x01;
            flipped.fetch_add(1, Ordering::Relaxed);
        }
        if to_server.write_all(&request).await.is_err() {
            return;
        }
    }
}

async fn setup(
    backend: &str,
    checksums: bool,
) -> (TestServer, Arc<dyn ObjectStore>, Arc<AtomicUsize>) {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let upstream = server
        .http_endpoint()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let (proxy, flipped) = corrupting_proxy(upstream).await;
    let mut cfg: StoreConfig = config_for(&server, Scheme::Http);
    cfg.set_endpoint("proxy", &proxy).unwrap();
    cfg.checksums.on_upload = checksums;
    cfg.multipart_threshold = 5 << 20;
    cfg.multipart_part_size = 5 << 20;
    let store = sluice::registry::open(Some(backend), cfg).unwrap();
    (server, store, flipped)
}

fn uri(key: &str) -> ObjectUri {
    ObjectUri::new(DEFAULT_BUCKET, key).unwrap()
}

/// A single PUT and a multipart upload (three parts), each corrupted on the way.
async fn put_both(store: &dyn ObjectStore) -> [sluice_core::Result<()>; 2] {
    let small = Bytes::from(pattern::generate("small", 100_000));
    let large = Bytes::from(pattern::generate("large", 12 << 20));
    [
        within("put", store.put(&uri("small"), small.into()))
            .await
            .map(drop),
        within("multipart put", store.put(&uri("large"), large.into()))
            .await
            .map(drop),
    ]
}

/// The store's refusal of a body that does not match what was sent with it: the CRC
/// (BadDigest), or for the AWS SDK, which also signs each body's SHA-256, possibly that
/// first (s3s names it in an IncompleteBody; S3 says XAmzContentSHA256Mismatch).
fn refused_as_corrupt(r: &sluice_core::Result<()>) -> bool {
    matches!(r, Err(Error::Service { status: 400, code, message, .. })
        if code == "BadDigest" || message.contains("Sha256Mismatch"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_flipped_on_the_way_up_is_refused_by_the_store() {
    for backend in ["hyper", "awssdk"] {
        let (server, store, flipped) = setup(backend, true).await;
        let results = put_both(store.as_ref()).await;
        assert!(
            results.iter().all(refused_as_corrupt),
            "{backend}: {results:?}"
        );
        assert!(
            flipped.load(Ordering::Relaxed) >= 2,
            "{backend}: the proxy corrupted"
        );
        for key in ["small", "large"] {
            assert!(
                server.storage().get(DEFAULT_BUCKET, key).is_err(),
                "{backend}: {key} was stored with a wrong byte"
            );
        }
        let left: Vec<_> =
            futures::TryStreamExt::try_collect::<Vec<_>>(store.list_uploads(&uri("")))
                .await
                .unwrap();
        assert!(
            left.is_empty(),
            "{backend}: the failed upload was aborted: {left:?}"
        );
    }
}

/// Without checksums (switched off, or a stack that cannot send them) the same corruption
/// is stored: this is what the checksum is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_checksums_the_wrong_bytes_are_stored() {
    for (backend, checksums) in [("hyper", false), ("objectstore", true)] {
        let (server, store, _) = setup(backend, checksums).await;
        let results = put_both(store.as_ref()).await;
        assert!(results.iter().all(Result::is_ok), "{backend}: {results:?}");
        let stored = server.storage().get(DEFAULT_BUCKET, "small").unwrap();
        assert_ne!(
            &stored.data.to_vec()[..],
            &pattern::generate("small", 100_000)[..],
            "{backend}: the proxy did flip a byte"
        );
    }
}

/// Stores `data` under `key` with the CRC64NVME of other bytes (one flipped): what a store
/// whose copy rotted, or a body changed on the way down, looks like to the client.
fn plant_corrupt(server: &TestServer, key: &str, data: &Bytes) {
    use sluice_testserver::storage::StoredObject;
    let mut other = data.to_vec();
    other[data.len() / 2] ^= 1;
    let mut obj = StoredObject::new(data.clone());
    obj.crc64nvme = StoredObject::new(Bytes::from(other)).crc64nvme;
    server.storage().put(DEFAULT_BUCKET, key, obj).unwrap();
}

/// Download checksums (`AWS_RESPONSE_CHECKSUM_VALIDATION=when_supported`): a whole-object
/// GET whose bytes do not give the store's CRC64NVME is an `Integrity` error naming the
/// object, on the direct path, through hyper's, and through the AWS SDK; a sound object
/// reads as usual, and with validation off (the default) nothing is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_object_read_is_checked_against_the_stores_crc_when_asked() {
    let data = Bytes::from(pattern::generate("crc", 300_000));
    for (backend, direct_get) in [("hyper", true), ("hyper", false), ("awssdk", true)] {
        let server = TestServer::start(ServerOptions::default()).await.unwrap();
        server.insert(DEFAULT_BUCKET, "sound", data.clone());
        plant_corrupt(&server, "rotten", &data);
        let open = |on_download: bool| {
            let mut cfg = config_for(&server, Scheme::Http);
            cfg.direct_get = direct_get;
            cfg.checksums.on_download = on_download;
            sluice::registry::open(Some(backend), cfg).unwrap()
        };
        let (checked, unchecked) = (open(true), open(false));
        let what = format!("{backend} (direct {direct_get})");
        let sound = within("get", checked.get(&uri("sound"), None))
            .await
            .unwrap();
        assert_eq!(sound, data, "{what}");
        let err = within("get", checked.get(&uri("rotten"), None))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Integrity { .. }) && err.to_string().contains("rotten"),
            "{what}: {err}"
        );
        let as_stored = within("get", unchecked.get(&uri("rotten"), None))
            .await
            .unwrap();
        assert_eq!(
            as_stored, data,
            "{what}: off, the object is returned as stored"
        );
    }
}
