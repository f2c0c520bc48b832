//! The loader over core's in-memory wire: what it delivers, case by case, without sockets
//! (the same loader over HTTP and every backend: `crates/sluice/tests/loader.rs`).

use bytes::Bytes;
use sluice_core::testing::{self, MemoryWire, Op, reset};
use sluice_core::{ObjectUri, S3Store};
use sluice_loader::{Dataset, Loader, LoaderOptions, OnError, Order};
use std::sync::Arc;

type Store = S3Store<MemoryWire>;

fn store() -> Arc<Store> {
    Arc::new(S3Store::over(MemoryWire::new(testing::config())))
}

fn uri(key: &str) -> ObjectUri {
    ObjectUri::parse(&format!("s3://bkt/{key}")).unwrap()
}

/// Bytes that differ from key to key (by its last byte and length).
fn data(key: &str, len: usize) -> Bytes {
    let seed = key.bytes().last().unwrap_or(0) ^ key.len() as u8;
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Objects `d/0` … `d/{n-1}` of `len(i)` bytes each, and their dataset.
async fn dataset(s: &Store, n: usize, len: impl Fn(usize) -> usize) -> Dataset {
    for i in 0..n {
        let key = format!("d/{i:03}");
        s.wire().insert(&uri(&key), data(&key, len(i)));
    }
    Dataset::from_prefix(s, &uri("d/"), None).await.unwrap()
}

async fn drain(loader: &mut Loader) -> Vec<sluice_core::Result<sluice_loader::Object>> {
    let mut out = Vec::new();
    while let Some(o) = loader.next().await {
        out.push(o);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_arrives_once_in_order_with_its_bytes() {
    let s = store();
    let ds = dataset(&s, 20, |i| i * 1000).await;
    let opts = LoaderOptions {
        order: Order::Input,
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
    let got = drain(&mut loader).await;
    assert_eq!(got.len(), 20);
    for (i, o) in got.into_iter().enumerate() {
        let o = o.unwrap();
        let key = format!("d/{i:03}");
        assert_eq!(o.uri, uri(&key));
        assert_eq!(o.data, data(&key, i * 1000), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_object_is_read_in_ranges_that_resume_when_cut() {
    let s = store();
    let ds = dataset(&s, 1, |_| 10 << 20).await;
    s.wire().cut_bodies(1 << 20, 3);
    let opts = LoaderOptions {
        range_threshold: 4 << 20,
        chunk_size: Some(2 << 20),
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
    let got = drain(&mut loader).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap().data, data("d/000", 10 << 20));
    // Five ranges, three of them cut once and resumed.
    assert_eq!(s.wire().calls(Op::GetObject), 5 + 3);
    assert_eq!(loader.stats().retries, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_deliver_a_failed_object_is_an_error_naming_it_and_reading_goes_on() {
    let s = store();
    let ds = dataset(&s, 3, |_| 100).await;
    // More failures than the retry budget: the first object read fails for good.
    s.wire()
        .fail(Op::GetObject, testing::config().retry.max_attempts, reset);
    let opts = LoaderOptions {
        on_error: OnError::Deliver,
        order: Order::Input,
        prefetch: Some(1),
        max_requests: 1,
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
    let got = drain(&mut loader).await;
    assert_eq!(got.len(), 3);
    let e = got[0].as_ref().unwrap_err();
    assert!(e.to_string().contains("s3://bkt/d/000"), "{e}");
    assert_eq!(got[1].as_ref().unwrap().data, data("d/001", 100));
    assert_eq!(got[2].as_ref().unwrap().data, data("d/002", 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_fast_ends_the_stream_at_the_first_failure() {
    let s = store();
    let ds = dataset(&s, 3, |_| 100).await;
    s.wire().insert(&uri("d/001"), Bytes::new());
    // The listing said 100 bytes; the object is now empty: a wrong length, never retried.
    let opts = LoaderOptions {
        order: Order::Input,
        prefetch: Some(1),
        max_requests: 1,
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
    let got = drain(&mut loader).await;
    assert!(got[0].is_ok(), "{:?}", got[0]);
    assert!(got.last().unwrap().is_err(), "{got:?}");
    assert!(
        got.len() <= 2,
        "{} items after a fail-fast error",
        got.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_in_a_listing_is_read_as_the_listed_version() {
    let s = store();
    let ds = dataset(&s, 1, |_| 1000).await;
    // Replaced after listing: the loader pins the listed ETag, so it must not hand out
    // the new bytes as if they were the object it listed.
    s.wire().insert(&uri("d/000"), data("replaced", 1000));
    let mut loader = Loader::new(s.clone(), &ds, LoaderOptions::default()).unwrap();
    let got = drain(&mut loader).await;
    let e = got[0].as_ref().unwrap_err();
    assert!(e.to_string().contains("changed"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_many_returns_every_object_in_the_order_given() {
    let s = store();
    let keys = ["b", "a", "large", "a"];
    for k in ["a", "b"] {
        s.wire().insert(&uri(k), data(k, 5000));
    }
    s.wire().insert(&uri("large"), data("large", 40 << 20));
    let uris: Vec<ObjectUri> = keys.iter().map(|k| uri(k)).collect();
    let got = sluice_loader::get_many(s.clone(), uris, Some(3))
        .await
        .unwrap();
    let got: Vec<(String, Bytes)> = got
        .into_iter()
        .map(|o| (o.uri.key().to_owned(), o.data))
        .collect();
    let want: Vec<(String, Bytes)> = keys
        .iter()
        .map(|k| {
            let len = if *k == "large" { 40 << 20 } else { 5000 };
            (k.to_string(), data(k, len))
        })
        .collect();
    assert_eq!(got, want);
    // One GET each, into buffers that fit (not a chunk-sized buffer per small object).
    assert_eq!(s.wire().calls(Op::GetObject), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_many_fails_with_the_first_missing_object() {
    let s = store();
    s.wire().insert(&uri("a"), data("a", 10));
    let uris = vec![uri("a"), uri("missing")];
    let e = sluice_loader::get_many(s.clone(), uris, Some(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, sluice_core::Error::NotFound { .. }) && e.to_string().contains("missing"),
        "{e:?}"
    );
}

/// Under a budget of one and a half objects, the next object's first ranges go out while the
/// last ranges of the one before are still being read (its memory is taken range by range),
/// and never more ranges than the budget holds (with the room it keeps for one object being
/// finished): a consumer that keeps every object it takes still gets them all, whole, in
/// either order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_smaller_than_two_objects_overlaps_them_range_by_range() {
    const CHUNK: usize = 1 << 20;
    for order in [Order::Input, Order::Completion] {
        let s = Arc::new(S3Store::over(
            MemoryWire::new(testing::config()).with_latency(std::time::Duration::from_millis(100)),
        ));
        let ds = dataset(&s, 6, |_| 6 * CHUNK).await;
        let opts = LoaderOptions {
            order,
            prefetch: Some(4),
            range_threshold: 2 * CHUNK as u64,
            chunk_size: Some(CHUNK as u64),
            memory_budget: Some(9 * CHUNK as u64),
            ..LoaderOptions::default()
        };
        let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
        let got = drain(&mut loader).await;
        assert_eq!(got.len(), 6, "{order:?}");
        let mut keys: Vec<String> = Vec::new();
        for o in &got {
            let o = o.as_ref().unwrap();
            let key = o.uri.key().to_owned();
            assert_eq!(o.data, data(&key, 6 * CHUNK), "{key}, {order:?}");
            keys.push(key);
        }
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 6, "{order:?}");
        let peak = s.wire().peak_in_flight();
        assert!(
            peak > 6 && peak <= 9 + 6,
            "{order:?}: {peak} GETs at once (one object is 6 ranges, the budget 9 and one object)"
        );
    }
}

/// Objects whose sizes are unknown (no listing: the first ranged GET learns each size) are
/// held within the budget as well, range by range (7 ranges each, 9 in the budget and 7 for
/// the object being finished), and an
/// object larger than the whole budget is read alone, with all of it, rather than waiting for
/// ever (2 ranges of 4 MiB in a budget of 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_unknown_size_stay_within_the_budget() {
    const MIB: usize = 1 << 20;
    for (chunk, budget, most) in [(MIB, 9 * MIB, 9 + 7), (4 * MIB, MIB, 2)] {
        let s = Arc::new(S3Store::over(
            MemoryWire::new(testing::config()).with_latency(std::time::Duration::from_millis(50)),
        ));
        let keys: Vec<String> = (0..4).map(|i| format!("u/{i}")).collect();
        for k in &keys {
            s.wire().insert(&uri(k), data(k, 6 * MIB + 7));
        }
        let opts = LoaderOptions {
            order: Order::Input,
            prefetch: Some(4),
            range_threshold: 2 * MIB as u64,
            chunk_size: Some(chunk as u64),
            memory_budget: Some(budget as u64),
            ..LoaderOptions::default()
        };
        let ds = Dataset::from_uris(keys.iter().map(|k| uri(k)));
        let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_secs(60), drain(&mut loader))
            .await
            .expect("the loader finishes");
        assert_eq!(got.len(), keys.len(), "{chunk} in {budget}");
        for (o, k) in got.iter().zip(&keys) {
            let o = o.as_ref().unwrap();
            assert_eq!(o.data, data(k, 6 * MIB + 7), "{k}: {chunk} in {budget}");
        }
        let peak = s.wire().peak_in_flight();
        assert!(
            (1..=most).contains(&peak),
            "{chunk}-byte ranges in a {budget}-byte budget: {peak} GETs at once"
        );
    }
}

/// Objects named without sizes after others of one size were seen have their ranges planned
/// on that guess and sent at once. Each is delivered whole whatever its size against the
/// guess: smaller (its end inside a range, on a range's end, inside the first range), empty,
/// or larger than any before; and one of the guessed size costs no request beyond its ranges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_smaller_or_larger_than_the_guess_are_read_whole() {
    const MIB: usize = 1 << 20;
    const GUESS: usize = 6 * MIB + 7;
    // Each after one of the guessed size (7 ranges of 1 MiB): its own ranges at least.
    for (size, ranges) in [
        (3 * MIB + 5, 4),
        (4 * MIB, 4),
        (MIB / 2, 1),
        (0, 1),
        (9 * MIB + 3, 10),
        (GUESS, 7),
    ] {
        let s = store();
        let stats = read_unsized(&s, "g/", &[GUESS, size], 2 * MIB as u64).await;
        assert_eq!(s.wire().calls(Op::HeadObject), 0);
        // Smaller or larger costs more (416s past its end, a tail read again, the ranges
        // beyond the guess); the guessed size costs nothing more.
        if size == GUESS {
            assert_eq!(stats.requests, 7 + 7, "{size} B: {stats:?}");
        } else {
            assert!(stats.requests >= 7 + ranges, "{size} B: {stats:?}");
        }
        assert_eq!(stats.over_budget, 0, "{size} B: {stats:?}");
    }
}

/// Objects named without sizes, a little larger than one range but below the threshold (DLIO's
/// npy records: 4 MiB and a header, against 4 MiB ranges): once one size is known, each is
/// read with one GET, not a range and then its last bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_guessed_below_the_threshold_take_one_get_each() {
    const MIB: usize = 1 << 20;
    let s = store();
    read_unsized(&s, "n/", &[MIB + 128; 6], 4 * MIB as u64).await;
    // The first: a range of one chunk, then the rest; the other five: one GET each.
    assert_eq!(s.wire().calls(Op::GetObject), 2 + 5);
}

/// Objects `{prefix}{i}` of `sizes`, named by URI alone, read in input order with ranges of
/// 1 MiB from `threshold` on, under a budget whose turn admits each object once the one
/// before has learned its size (so every object after the first is read on a guess). Each is
/// checked whole, in order; returns the loader's stats.
async fn read_unsized(
    s: &Arc<Store>,
    prefix: &str,
    sizes: &[usize],
    threshold: u64,
) -> sluice_loader::StatsSnapshot {
    const MIB: u64 = 1 << 20;
    let keys: Vec<String> = (0..sizes.len()).map(|i| format!("{prefix}{i}")).collect();
    for (k, &len) in keys.iter().zip(sizes) {
        s.wire().insert(&uri(k), data(k, len));
    }
    let opts = LoaderOptions {
        order: Order::Input,
        range_threshold: threshold,
        chunk_size: Some(MIB),
        memory_budget: Some(64 * MIB),
        ..LoaderOptions::default()
    };
    let ds = Dataset::from_uris(keys.iter().map(|k| uri(k)));
    let mut loader = Loader::new(s.clone(), &ds, opts).unwrap();
    let got = drain(&mut loader).await;
    assert_eq!(got.len(), keys.len());
    for ((o, k), &len) in got.iter().zip(&keys).zip(sizes) {
        let o = o.as_ref().unwrap_or_else(|e| panic!("{k} ({len} B): {e}"));
        assert_eq!(o.uri.key(), k);
        assert!(o.data == data(k, len), "{k}: {} B, not {len}", o.data.len());
    }
    loader.stats()
}
