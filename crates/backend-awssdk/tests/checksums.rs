//! Download checksums, which only this backend validates today: on whole-object GETs, when
//! switched on, a mismatch is an `Integrity` error. (Upload checksums, which core computes
//! for every stack that can send them, are tested in `crates/sluice/tests/integrity.rs`.)

use bytes::Bytes;
use sluice_backend_awssdk::AwsSdkStore;
use sluice_core::ObjectStoreExt;
use sluice_core::{ByteRange, Checksums, Error, ObjectUri};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for, within};
use sluice_testserver::storage::StoredObject;
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};

async fn setup(checksums: Checksums) -> (TestServer, AwsSdkStore) {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let mut cfg = config_for(&server, Scheme::Http);
    cfg.checksums = checksums;
    let store = AwsSdkStore::new(cfg).unwrap();
    (server, store)
}

fn uri(key: &str) -> ObjectUri {
    format!("s3://{DEFAULT_BUCKET}/{key}").parse().unwrap()
}

/// Stores `data` under `key` with the CRC of different bytes: what a store that corrupted
/// the object at rest, or a flipped bit on the way, looks like to the client.
fn plant_corrupt(server: &TestServer, key: &str, data: Bytes) {
    let mut wrong = data.to_vec();
    wrong[0] ^= 1;
    let crc = StoredObject::new(Bytes::from(wrong)).crc64nvme;
    let mut obj = StoredObject::new(data);
    obj.crc64nvme = crc;
    server.storage().put(DEFAULT_BUCKET, key, obj).unwrap();
}

#[tokio::test]
async fn validation_catches_a_mismatch_only_when_on() {
    let data = Bytes::from(pattern::generate("bad", 300_000));
    let on = Checksums {
        on_upload: false,
        on_download: true,
    };
    let (server, store) = setup(on).await;
    plant_corrupt(&server, "bad", data.clone());
    let err = within("get", store.get(&uri("bad"), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Integrity { .. }), "{err}");
    assert!(err.to_string().contains("s3://sluice-test/bad"), "{err}");
    // A ranged GET carries no whole-object checksum, so there is nothing to validate.
    let part = within(
        "ranged get",
        store.get(&uri("bad"), ByteRange::new(10, 20).ok()),
    )
    .await
    .unwrap();
    assert_eq!(&part[..], &data[10..20]);

    // Off (the default): the same object is returned as stored.
    let (server, store) = setup(Checksums::default()).await;
    plant_corrupt(&server, "bad", data.clone());
    let got = within("get", store.get(&uri("bad"), None)).await.unwrap();
    assert_eq!(got, data);
}

#[tokio::test]
async fn checksummed_uploads_and_validated_downloads_round_trip() {
    let both = Checksums {
        on_upload: true,
        on_download: true,
    };
    let (_server, store) = setup(both).await;
    // Single PUT and multipart (above the 16 MiB threshold), each with core's CRC64NVME.
    for (key, len) in [("small", 100_000), ("large", 20 << 20)] {
        let data = Bytes::from(pattern::generate(key, len));
        within("put", store.put(&uri(key), data.clone().into()))
            .await
            .unwrap();
        let got = within("get", store.get(&uri(key), None)).await.unwrap();
        assert_eq!(pattern::verify(key, 0, &got), Ok(()), "{key}");
        assert_eq!(got.len(), len);
    }
}
