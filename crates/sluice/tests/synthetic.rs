//! The synthetic store (`sluice serve --synthetic`) read through each of sluice's client
//! stacks over real sockets: its objects list, read, range and check (CRC64NVME, ETag) as
//! stored ones do, beside stored ones in the same bucket, and refuse to be replaced; and a
//! sinking server (`--sink`) takes uploads of any size, checked, and says why it cannot
//! give their bytes back, or (`--sink=computed`) gives computed bytes of their size.

use bytes::Bytes;
use futures::TryStreamExt;
use sluice_core::{ByteRange, Error, ListEntry, ObjectStore, ObjectStoreExt, ObjectUri};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for, within};
use sluice_testserver::synthetic::Spec;
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, Sink, TestServer};
use std::sync::Arc;

fn uri(key: &str) -> ObjectUri {
    ObjectUri::new(DEFAULT_BUCKET, key).unwrap()
}

fn open(server: &TestServer, backend: &str) -> Arc<dyn ObjectStore> {
    let mut cfg = config_for(server, Scheme::Http);
    cfg.checksums.on_download = true;
    sluice::registry::open(Some(backend), cfg).unwrap()
}

async fn list(store: &dyn ObjectStore, prefix: &str, recursive: bool) -> Vec<ListEntry> {
    within("list", store.list(&uri(prefix), recursive).try_collect())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_objects_list_read_and_check_as_stored_ones_do() {
    let spec = "t/img_{i}_of_{n}.jpeg:2500x300000, u/{i}.npz:4x1MiB±300KiB";
    let server = TestServer::start(ServerOptions {
        synthetic: Some(Spec::parse(spec).unwrap()),
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    let stored = Bytes::from(pattern::generate("t/stored", 1000));
    server.insert(DEFAULT_BUCKET, "t/stored", stored.clone());
    let mut want: Vec<String> = (0..2500)
        .map(|i| format!("t/img_{i}_of_2500.jpeg"))
        .chain(["t/stored".to_owned()])
        .collect();
    want.sort();

    for backend in ["hyper", "awssdk", "objectstore"] {
        let store = open(&server, backend);
        let listed = list(store.as_ref(), "t/", true).await;
        let keys: Vec<&str> = listed.iter().map(|e| e.uri().key()).collect();
        assert_eq!(
            keys, want,
            "{backend}: every key once, in order, over 3 pages"
        );

        let top = list(store.as_ref(), "", false).await;
        let top: Vec<&str> = top.iter().map(|e| e.uri().key()).collect();
        assert_eq!(top, ["t/", "u/"], "{backend}: a delimiter listing");

        for entry in list(store.as_ref(), "u/", true).await {
            let ListEntry::Object(meta) = entry else {
                panic!("{backend}: a prefix under u/");
            };
            let key = meta.uri.key().to_owned();
            // Whole: checked against the server's CRC64NVME (`on_download`).
            let body = within("get", store.get(&meta.uri, None)).await.unwrap();
            assert_eq!(body.len() as u64, meta.size, "{backend} {key}");
            assert_eq!(pattern::verify(&key, 0, &body), Ok(()), "{backend} {key}");
            let head = within("head", store.head(&meta.uri)).await.unwrap();
            assert_eq!((head.size, &head.etag), (meta.size, &meta.etag), "{key}");
            let range = ByteRange::new(1000, 300_000).unwrap();
            let part = within("range", store.get(&meta.uri, Some(range)))
                .await
                .unwrap();
            assert_eq!(part, body.slice(1000..300_000), "{backend} {key}");
        }
        let got = within("get", store.get(&uri("t/stored"), None)).await;
        assert_eq!(
            got.unwrap(),
            stored,
            "{backend}: the stored object beside them"
        );

        let key = "t/img_7_of_2500.jpeg";
        let refused = within("put", store.put(&uri(key), Bytes::from_static(b"x").into())).await;
        assert!(
            matches!(&refused, Err(Error::PermissionDenied { status: 403, code, message, .. })
                if code == "AccessDenied" && message.contains("synthetic")),
            "{backend}: {refused:?}"
        );
        let refused = within("delete", store.delete(&uri(key))).await;
        assert!(
            refused.is_err(),
            "{backend}: a synthetic object was deleted"
        );
        assert!(within("head", store.head(&uri(key))).await.is_ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sinking_server_takes_checked_uploads_and_keeps_their_sizes() {
    let server = TestServer::start(ServerOptions {
        sink: Sink::Refuse,
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    let store = open(&server, "hyper");
    for (key, len) in [("small", 100_000), ("large", 40 << 20)] {
        let data = Bytes::from(pattern::generate(key, len));
        within("put", store.put(&uri(key), data.into()))
            .await
            .unwrap();
        let head = within("head", store.head(&uri(key))).await.unwrap();
        assert_eq!(head.size, len as u64, "{key}");
        let read = within("get", store.get(&uri(key), None)).await;
        assert!(
            matches!(&read, Err(Error::PermissionDenied { code, message, .. })
                if code == "InvalidObjectState" && message.contains("--sink")),
            "{key}: {read:?}"
        );
    }
    let held: usize = ["small", "large"]
        .iter()
        .map(|k| {
            server
                .storage()
                .get(DEFAULT_BUCKET, k)
                .unwrap()
                .data
                .pieces()
                .len()
        })
        .sum();
    assert_eq!(held, 0, "no bytes kept");
}

/// A checkpoint's load from a sink: every stack reads back the size written, whole and in
/// ranges, and the bytes (checked against their CRC by the client) are the synthetic
/// pattern's for that key, not what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_computes_reads_gives_back_bytes_of_the_size_written() {
    let server = TestServer::start(ServerOptions {
        sink: Sink::Computed,
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    for backend in ["hyper", "awssdk", "objectstore"] {
        let store = open(&server, backend);
        let key = format!("ckpt/{backend}.pt");
        let len = (24 << 20) + 12_345;
        let written = Bytes::from(vec![7u8; len]);
        within("put", store.put(&uri(&key), written.into()))
            .await
            .unwrap();
        // Whole: checked against the server's CRC64NVME of the computed bytes (`on_download`).
        let read = within("get", store.get(&uri(&key), None)).await.unwrap();
        assert_eq!(read.len(), len, "{backend}");
        assert_eq!(pattern::verify(&key, 0, &read), Ok(()), "{backend}");
        let range = ByteRange::new(5 << 20, 6 << 20).unwrap();
        let part = within("range", store.get(&uri(&key), Some(range)))
            .await
            .unwrap();
        assert_eq!(part, read.slice(5 << 20..6 << 20), "{backend}: a range");
        let head = within("head", store.head(&uri(&key))).await.unwrap();
        assert_eq!(head.size, len as u64, "{backend}");
    }
}
