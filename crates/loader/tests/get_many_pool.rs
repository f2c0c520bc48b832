//! `get_many`'s memory: the process's capped pool. A test binary of its own, as that pool is
//! one per process and the other `get_many` tests would draw from it concurrently.

use bytes::Bytes;
use sluice_core::testing::{self, MemoryWire};
use sluice_core::{ObjectStore, ObjectUri, S3Store};
use std::collections::BTreeSet;
use std::sync::Arc;

fn uri(key: &str) -> ObjectUri {
    ObjectUri::parse(&format!("s3://bkt/{key}")).unwrap()
}

fn data(key: &str, len: usize) -> Bytes {
    let seed = key.bytes().last().unwrap_or(0);
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// The objects of one call land in the memory an earlier call's objects gave back (the
/// process's capped pool), not in fresh pages, and so does a single range (`get_one`);
/// what stays idle is within the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_many_reuses_the_memory_of_earlier_calls_within_its_cap() {
    let s = Arc::new(S3Store::over(MemoryWire::new(testing::config())));
    let keys: Vec<String> = (0..8).map(|i| format!("reuse{i}")).collect();
    for k in &keys {
        s.wire().insert(&uri(k), data(k, 300_000));
    }
    let uris: Vec<ObjectUri> = keys.iter().map(|k| uri(k)).collect();
    let first = sluice_loader::get_many(s.clone(), uris.clone(), Some(4))
        .await
        .unwrap();
    let before: BTreeSet<usize> = first.iter().map(|o| o.data.as_ptr() as usize).collect();
    drop(first);
    let pool = sluice_loader::BufferPool::for_get_many();
    assert!(pool.idle_bytes() >= 8 * 300_000, "{}", pool.idle_bytes());
    assert!(pool.idle_bytes() <= sluice_loader::pool::GET_MANY_IDLE);
    let second = sluice_loader::get_many(s.clone(), uris, Some(4))
        .await
        .unwrap();
    for (o, k) in second.iter().zip(&keys) {
        assert_eq!(o.data, data(k, 300_000));
    }
    let reused = second
        .iter()
        .filter(|o| before.contains(&(o.data.as_ptr() as usize)))
        .count();
    assert_eq!(
        reused, 8,
        "every object of the second call in memory of the first"
    );
    drop(second);

    // A single range, as Python's get_range asks it, lands in that memory too.
    let range = sluice_core::ByteRange::new(1000, 201_000).unwrap();
    let opts = sluice_core::GetOptions::range(Some(range));
    let got = sluice_loader::get_one(
        &(s.clone() as Arc<dyn ObjectStore>),
        &uri(&keys[3]),
        &opts,
        Some(200_000),
    )
    .await
    .unwrap();
    assert_eq!(got, data(&keys[3], 300_000).slice(1000..201_000));
    assert!(
        before.contains(&(got.as_ptr() as usize)),
        "a range in memory of the first call"
    );
    assert!(pool.idle_bytes() <= sluice_loader::pool::GET_MANY_IDLE);
}
