//! The loader against the in-process test server, for every compiled backend.

use bytes::Bytes;
use sluice_core::{ObjectStore, ObjectUri};
use sluice_loader::{Dataset, Loader, LoaderOptions, OnError, Order, Sharding};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for, within};
use sluice_testserver::{DEFAULT_BUCKET, Fault, ServerOptions, TestServer};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

async fn setup(backend: &str) -> (TestServer, Arc<dyn ObjectStore>) {
    setup_with(backend, |_| {}).await
}

/// As `setup`, with the store's configuration changed by `tune` first.
async fn setup_with(
    backend: &str,
    tune: impl FnOnce(&mut sluice_core::StoreConfig),
) -> (TestServer, Arc<dyn ObjectStore>) {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let mut cfg = config_for(&server, Scheme::Http);
    tune(&mut cfg);
    let store = sluice::registry::open(Some(backend), cfg).unwrap();
    (server, store)
}

fn seed(server: &TestServer, prefix: &str, sizes: &[usize]) -> Vec<ObjectUri> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let key = format!("{prefix}{i:04}.bin");
            server.insert(
                DEFAULT_BUCKET,
                &key,
                Bytes::from(pattern::generate(&key, len)),
            );
            ObjectUri::new(DEFAULT_BUCKET, &key).unwrap()
        })
        .collect()
}

/// Small thresholds so "large" objects are split into many ranges without big test data.
fn opts() -> LoaderOptions {
    LoaderOptions {
        prefetch: Some(4),
        range_threshold: 1 << 20,
        chunk_size: Some(256 << 10),
        ..Default::default()
    }
}

/// Without a memory budget: for the tests that watch GETs alone (how sizes are learned,
/// where faults land), whatever the budget's guesses would do.
fn unbudgeted() -> LoaderOptions {
    LoaderOptions {
        memory_budget: None,
        ..opts()
    }
}

async fn drain(loader: &mut Loader) -> Vec<sluice_loader::Object> {
    let mut out = Vec::new();
    while let Some(o) = within("loader next", loader.next()).await {
        let o = o.unwrap_or_else(|e| panic!("{e}"));
        pattern::verify(o.uri.key(), 0, &o.data)
            .unwrap_or_else(|at| panic!("{}: wrong byte at {at}", o.uri));
        out.push(o);
    }
    out
}

/// Reads `ds` in input order and checks that `uris` arrive in that order with `sizes`;
/// returns the loader for its stats. `what` names the case in failures.
async fn read_in_order(
    store: &Arc<dyn ObjectStore>,
    ds: &Dataset,
    uris: &[ObjectUri],
    sizes: &[usize],
    what: &str,
) -> Loader {
    let opts = LoaderOptions {
        order: Order::Input,
        ..opts()
    };
    let mut loader = Loader::new(store.clone(), ds, opts).unwrap();
    let got = drain(&mut loader).await;
    let order: Vec<ObjectUri> = got.iter().map(|o| o.uri.clone()).collect();
    assert_eq!(order, uris, "{what}: input order kept");
    assert_eq!(
        got.iter().map(|o| o.data.len()).collect::<Vec<_>>(),
        sizes,
        "{what}"
    );
    loader
}

async fn prefix_dataset_reads_every_byte_without_head_and_splits_large_objects(
    backend: &'static str,
) {
    let (server, store) = setup(backend).await;
    let sizes = [0, 1, 100_000, 3 << 20, (2 << 20) + 12345, 700_000];
    let uris = seed(&server, "ds/", &sizes);
    let ds = within(
        "list",
        Dataset::from_prefix(
            store.as_ref(),
            &ObjectUri::parse("s3://sluice-test/ds/").unwrap(),
            Some(".bin"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(ds.len(), sizes.len());
    let loader = read_in_order(&store, &ds, &uris, &sizes, backend).await;
    assert_eq!(
        server.faults().heads(),
        0,
        "{backend}: listing sizes spare every HEAD"
    );
    let stats = loader.stats();
    // 3 MiB → 12 ranges, 2 MiB+ → 9 ranges, the rest one GET each.
    assert_eq!(stats.requests, 12 + 9 + 4, "{backend}: {stats:?}");
    assert_eq!(server.faults().gets(), 12 + 9 + 4);
    assert_eq!(stats.bytes, sizes.iter().sum::<usize>() as u64);
}

async fn uri_dataset_learns_sizes_from_the_first_range(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let sizes = [0, 10, 256 << 10, (3 << 20) + 1];
    let uris = seed(&server, "u/", &sizes);
    let mut loader = Loader::new(
        store.clone(),
        &Dataset::from_uris(uris.clone()),
        unbudgeted(),
    )
    .unwrap();
    let got = drain(&mut loader).await;
    let set: BTreeSet<ObjectUri> = got.iter().map(|o| o.uri.clone()).collect();
    assert_eq!(set, uris.iter().cloned().collect(), "{backend}");
    assert_eq!(server.faults().heads(), 0, "{backend}: no HEAD round trips");
    // empty: 416 then a plain GET (2); 10 B and 256 KiB: one ranged GET each. objectstore
    // asks a whole object as `bytes=0-` (so that object_store checks Content-Range), which
    // an empty object answers 416 too: one more request for it. 3 MiB+1 in 256 KiB ranges:
    // 13 when its read begins before any size is known; 10 when a smaller object's size is
    // known by then, as its first range then asks for all an unsplit object may hold (the
    // 1 MiB threshold), leaving 2 MiB+1 (9 ranges). The objects start together, so either.
    let empty_extra = u64::from(backend == "objectstore");
    let small = 2 + 1 + 1 + empty_extra;
    let requests = server.faults().requests();
    assert!(
        requests == small + 13 || requests == small + 10,
        "{backend}: {requests} requests"
    );

    // Splitting off: one plain GET per object, whatever its size.
    let before = server.faults().requests();
    let never = LoaderOptions {
        range_threshold: sluice_core::RangePlanner::NEVER,
        ..unbudgeted()
    };
    let mut loader = Loader::new(store, &Dataset::from_uris(uris), never).unwrap();
    let got = drain(&mut loader).await;
    let mut lens: Vec<usize> = got.iter().map(|o| o.data.len()).collect();
    lens.sort();
    assert_eq!(lens, sizes, "{backend}");
    assert_eq!(
        server.faults().requests() - before,
        4 + empty_extra,
        "{backend}"
    );
}

async fn shards_are_disjoint_and_complete_over_the_wire(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let uris = seed(&server, "shard/", &[1000; 23]);
    let ds = Dataset::from_uris(uris.clone());
    let mut seen = Vec::new();
    for rank in 0..2 {
        for worker in 0..3 {
            let sharding = Sharding {
                rank,
                world_size: 2,
                worker_id: worker,
                num_workers: 3,
            };
            let mut l = Loader::new(
                store.clone(),
                &ds,
                LoaderOptions {
                    sharding,
                    shuffle_seed: Some(42),
                    ..opts()
                },
            )
            .unwrap();
            seen.extend(drain(&mut l).await.into_iter().map(|o| o.uri));
        }
    }
    assert_eq!(seen.len(), uris.len(), "no object twice");
    assert_eq!(
        seen.into_iter().collect::<BTreeSet<_>>(),
        uris.into_iter().collect::<BTreeSet<_>>()
    );
}

async fn dropping_the_loader_stops_all_work(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let uris = seed(&server, "drop/", &[50_000; 40]);
    server
        .faults()
        .inject(Fault::Latency(Duration::from_millis(200)), 1000);
    let mut loader = Loader::new(
        store,
        &Dataset::from_uris(uris),
        LoaderOptions {
            prefetch: Some(4),
            max_requests: 4,
            ..opts()
        },
    )
    .unwrap();
    within("first object", loader.next())
        .await
        .unwrap()
        .unwrap();
    drop(loader);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_drop = server.faults().requests();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        server.faults().requests(),
        after_drop,
        "no request starts after the loader is dropped"
    );
    assert!(
        after_drop < 15,
        "only the requests allowed were ever sent: {after_drop}"
    );
}

/// A budget of 3 objects of 1 MiB holds 4 at once: the 3 and the one being finished.
async fn memory_budget_bounds_objects_in_flight(backend: &'static str) {
    for (budget, limit) in [(Some(3u64 << 20), 4), (None, 8)] {
        let (server, store) = setup(backend).await;
        let uris = seed(&server, "mem/", &[1 << 20; 16]);
        server
            .faults()
            .inject(Fault::Latency(Duration::from_millis(100)), 1000);
        let o = LoaderOptions {
            prefetch: Some(8),
            max_requests: 8,
            memory_budget: budget,
            range_threshold: sluice_core::RangePlanner::NEVER,
            ..opts()
        };
        let ds = Dataset::from_items(uris.iter().map(|u| sluice_loader::Item {
            uri: u.clone(),
            size: Some(1 << 20),
            etag: None,
        }));
        let mut loader = Loader::new(store, &ds, o).unwrap();
        assert_eq!(drain(&mut loader).await.len(), 16);
        let peak = server.faults().peak_concurrency();
        assert!(peak <= limit, "budget {budget:?}: {peak} requests at once");
        if budget.is_none() {
            assert!(
                peak > 4,
                "without a budget the requests allowed are used ({peak})"
            );
        }
    }
}

async fn faults_are_retried_and_counted(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let uris = seed(&server, "flaky/", &[2 << 20, 2 << 20, 500_000]);
    server.faults().inject(Fault::ResetAfter(100_000), 3);
    server.faults().inject(Fault::SlowDown, 2);
    let mut loader = Loader::new(store, &Dataset::from_uris(uris), unbudgeted()).unwrap();
    assert_eq!(drain(&mut loader).await.len(), 3);
    let s = loader.stats();
    assert_eq!(
        server.faults().fired(),
        5,
        "{backend}: every fault hit a request"
    );
    // object_store retries (and resumes bodies) inside its own client, out of our sight;
    // the outcome — every byte right — is what every backend must deliver.
    if backend == "hyper" {
        assert!(s.retries >= 5, "{s:?}");
    }
    assert!(s.latency_p99 >= s.latency_p50 && s.latency_p50 > Duration::ZERO);
}

async fn failures_fail_fast_or_are_delivered(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let mut uris = seed(&server, "mixed/", &[1000; 6]);
    uris.insert(
        2,
        ObjectUri::parse("s3://sluice-test/mixed/missing.bin").unwrap(),
    );
    let ds = Dataset::from_uris(uris);

    let mut ff = Loader::new(
        store.clone(),
        &ds,
        LoaderOptions {
            order: Order::Input,
            ..opts()
        },
    )
    .unwrap();
    let mut items = Vec::new();
    while let Some(i) = within("next", ff.next()).await {
        items.push(i);
    }
    assert_eq!(items.len(), 3, "two objects, then the error, then the end");
    let err = items.pop().unwrap().unwrap_err();
    assert!(
        err.to_string()
            .contains("s3://sluice-test/mixed/missing.bin"),
        "{err}"
    );

    let mut dl = Loader::new(
        store,
        &ds,
        LoaderOptions {
            on_error: OnError::Deliver,
            ..opts()
        },
    )
    .unwrap();
    let mut ok = 0;
    let mut errs = 0;
    while let Some(i) = within("next", dl.next()).await {
        if i.is_ok() { ok += 1 } else { errs += 1 }
    }
    assert_eq!((ok, errs), (6, 1));
    assert_eq!(dl.stats().errors, 1);
}

async fn collect_batch_fills_batches_until_the_end(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let uris = seed(&server, "batch/", &[100; 10]);
    let mut l = Loader::new(store, &Dataset::from_uris(uris), opts()).unwrap();
    let mut sizes = Vec::new();
    loop {
        let b = within("batch", l.collect_batch(4)).await;
        if b.is_empty() {
            break;
        }
        sizes.push(b.len());
    }
    assert_eq!(sizes, vec![4, 4, 2]);
    assert_eq!(l.stats().objects, 10);
}

#[test]
fn bad_options_name_the_option() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _g = rt.enter();
    let store = sluice::registry::open(
        Some("hyper"),
        sluice_core::StoreConfig::new(
            Some("http://127.0.0.1:1".parse().unwrap()),
            "us-east-1",
            sluice_core::CredentialsCache::anonymous(),
        ),
    )
    .unwrap();
    let err = Loader::new(
        store,
        &Dataset::default(),
        LoaderOptions {
            prefetch: Some(0),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("prefetch"), "{err}");
}

/// `file://` and `direct://` datasets through the same loader (router from the registry):
/// listed and unlisted, split into ranges, every byte checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_and_direct_datasets_read_every_byte() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sizes = [0usize, 1, 4097, 100_000, (3 << 20) + 5, 700_000];
    let mut paths = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let path = dir.path().join(format!("ds/{i:04}.bin"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, pattern::generate(path.to_str().unwrap(), *len)).unwrap();
        paths.push(path);
    }
    // The S3 side is never used: any endpoint will do.
    let cfg = sluice_core::StoreConfig::new(
        Some("http://127.0.0.1:1".parse().unwrap()),
        "us-east-1",
        sluice_core::CredentialsCache::anonymous(),
    );
    let store = sluice::registry::open(Some("hyper"), cfg).unwrap();
    for scheme in ["file://", "direct://"] {
        let uris: Vec<ObjectUri> = paths
            .iter()
            .map(|p| ObjectUri::parse(&format!("{scheme}{}", p.display())).unwrap())
            .collect();
        let prefix = ObjectUri::parse(&format!("{scheme}{}/ds/", dir.path().display())).unwrap();
        let listed = within(
            "list",
            Dataset::from_prefix(store.as_ref(), &prefix, Some(".bin")),
        )
        .await
        .unwrap();
        assert_eq!(listed.len(), sizes.len(), "{scheme}");
        for ds in [listed, Dataset::from_uris(uris.clone())] {
            read_in_order(&store, &ds, &uris, &sizes, scheme).await;
        }
    }
}

/// A store whose GETs panic for one key (a bug, or a reply no check foresaw) and claim an
/// impossible size for another; the rest answer 10 bytes.
#[derive(Debug)]
struct Hostile;

#[async_trait::async_trait]
impl ObjectStore for Hostile {
    fn backend(&self) -> &'static str {
        "hostile"
    }
    async fn send(
        &self,
        req: sluice_core::wire::Request<'_>,
    ) -> sluice_core::Result<sluice_core::wire::Reply> {
        unreachable!("the loader sends only GETs, not {}", req.name())
    }
    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        _: &sluice_core::GetOptions,
        dst: &mut sluice_core::Segment,
    ) -> sluice_core::Result<sluice_core::GetInfo> {
        if uri.key() == "boom" {
            panic!("hostile reply for {uri}");
        }
        dst.expect_more(10).unwrap();
        dst.write(&[7; 10]).unwrap();
        Ok(sluice_core::GetInfo {
            bytes: 10,
            object_size: Some(10),
            etag: None,
            attempts: 1,
        })
    }
    fn list(
        &self,
        _: &ObjectUri,
        _: bool,
    ) -> futures::stream::BoxStream<'_, sluice_core::Result<sluice_core::ListEntry>> {
        unreachable!()
    }
    async fn put_opts(
        &self,
        _: &ObjectUri,
        _: sluice_core::PutPayload,
        _: &sluice_core::PutOptions,
    ) -> sluice_core::Result<sluice_core::PutInfo> {
        unreachable!()
    }
    async fn writer(
        &self,
        _: &ObjectUri,
        _: sluice_core::WriteOptions,
    ) -> sluice_core::Result<Box<dyn sluice_core::ObjectWriter>> {
        unreachable!()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_fetch_or_an_impossible_size_is_an_error_never_a_short_epoch() {
    let uri = |k: &str| ObjectUri::new("bkt", k).unwrap();
    let items = vec![
        sluice_loader::Item {
            uri: uri("a"),
            size: None,
            etag: None,
        },
        sluice_loader::Item {
            uri: uri("boom"),
            size: None,
            etag: None,
        },
        // A listing that claims 2^64-1 bytes: refused, not allocated.
        sluice_loader::Item {
            uri: uri("huge"),
            size: Some(u64::MAX),
            etag: None,
        },
        sluice_loader::Item {
            uri: uri("b"),
            size: None,
            etag: None,
        },
    ];
    let ds = Dataset::from_items(items);
    let store: Arc<dyn ObjectStore> = Arc::new(Hostile);
    let deliver = LoaderOptions {
        on_error: OnError::Deliver,
        order: Order::Input,
        ..unbudgeted()
    };
    let mut loader = Loader::new(store.clone(), &ds, deliver).unwrap();
    let mut got = Vec::new();
    while let Some(r) = within("next", loader.next()).await {
        got.push(r.map(|o| o.data.len()).map_err(|e| e.to_string()));
    }
    assert_eq!(got.len(), 4, "every object delivered or failed: {got:?}");
    assert_eq!(got[0], Ok(10));
    assert!(
        matches!(&got[1], Err(e) if e.contains("s3://bkt/boom") && e.contains("panicked")),
        "{got:?}"
    );
    assert!(
        matches!(&got[2], Err(e) if e.contains("s3://bkt/huge") && e.contains("larger than any S3 object")),
        "{got:?}"
    );
    assert_eq!(got[3], Ok(10));

    // Fail-fast: the error reaches the consumer before the stream ends.
    let mut loader = Loader::new(
        store,
        &ds,
        LoaderOptions {
            order: Order::Input,
            ..opts()
        },
    )
    .unwrap();
    let mut saw_error = false;
    while let Some(r) = within("next", loader.next()).await {
        saw_error |= r.is_err();
    }
    assert!(saw_error);
}

/// A store that measures the bytes its GETs are reading at once (by their segments' sizes,
/// their ranges' lengths, or the objects' sizes).
#[derive(Debug)]
struct MeasuredGets {
    inner: Arc<dyn ObjectStore>,
    /// Each object's size: what a GET of it without a range or a sized buffer will read.
    sizes: std::collections::HashMap<ObjectUri, usize>,
    in_flight: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ObjectStore for MeasuredGets {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn send(
        &self,
        req: sluice_core::wire::Request<'_>,
    ) -> sluice_core::Result<sluice_core::wire::Reply> {
        self.inner.send(req).await
    }
    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &sluice_core::GetOptions,
        dst: &mut sluice_core::Segment,
    ) -> sluice_core::Result<sluice_core::GetInfo> {
        use std::sync::atomic::Ordering::SeqCst;
        let len = match (dst.expected_len(), opts.range.and_then(|r| r.len())) {
            (Some(n), _) => n,
            (None, Some(n)) => n as usize,
            (None, None) => self.sizes[uri],
        };
        let now = self.in_flight.fetch_add(len, SeqCst) + len;
        self.peak.fetch_max(now, SeqCst);
        let r = self.inner.get_into_with(uri, opts, dst).await;
        self.in_flight.fetch_sub(len, SeqCst);
        r
    }
    fn list(
        &self,
        prefix: &ObjectUri,
        recursive: bool,
    ) -> futures::stream::BoxStream<'_, sluice_core::Result<sluice_core::ListEntry>> {
        self.inner.list(prefix, recursive)
    }
    async fn put_opts(
        &self,
        uri: &ObjectUri,
        data: sluice_core::PutPayload,
        opts: &sluice_core::PutOptions,
    ) -> sluice_core::Result<sluice_core::PutInfo> {
        self.inner.put_opts(uri, data, opts).await
    }
    async fn writer(
        &self,
        uri: &ObjectUri,
        opts: sluice_core::WriteOptions,
    ) -> sluice_core::Result<Box<dyn sluice_core::ObjectWriter>> {
        self.inner.writer(uri, opts).await
    }
}

/// Objects named without sizes, big and small mixed, in input order under a budget smaller
/// than two of the big ones: every object arrives whole and in order (no deadlock), with one
/// GET each and no HEAD. Sizes are guessed at the largest seen: with a big object first, the
/// bytes read at once never exceed the budget; with a small one first, an object larger than
/// every one before it may read its excess over the budget, never more than that excess.
async fn memory_budget_covers_unknown_sizes_and_input_order_never_deadlocks(backend: &'static str) {
    const BUDGET: usize = 3 << 20;
    const BIG: usize = 2 << 20;
    const SMALL: usize = 300_000;
    for big_first in [true, false] {
        let (server, store) = setup(backend).await;
        let sizes: Vec<usize> = (0..24)
            .map(|i| if i % 5 == 1 { BIG } else { SMALL })
            .collect();
        let uris = seed(&server, "budget/", &sizes);
        server
            .faults()
            .inject(Fault::Latency(Duration::from_millis(20)), 1000);
        let measured = Arc::new(MeasuredGets {
            inner: store,
            sizes: uris.iter().cloned().zip(sizes.iter().copied()).collect(),
            in_flight: Default::default(),
            peak: Default::default(),
        });
        let o = LoaderOptions {
            prefetch: Some(8),
            order: Order::Input,
            memory_budget: Some(BUDGET as u64),
            range_threshold: sluice_core::RangePlanner::NEVER,
            ..opts()
        };
        // Shuffled by hand, so that the case picks what comes first.
        let mut order: Vec<usize> = (0..uris.len()).rev().collect();
        let first_big = order.iter().position(|&i| sizes[i] == BIG).unwrap();
        let first_small = order.iter().position(|&i| sizes[i] == SMALL).unwrap();
        order.swap(0, if big_first { first_big } else { first_small });
        let expected: Vec<ObjectUri> = order.iter().map(|&i| uris[i].clone()).collect();
        let ds = Dataset::from_uris(expected.clone());
        let mut loader = Loader::new(measured.clone(), &ds, o).unwrap();
        let got: Vec<ObjectUri> = drain(&mut loader)
            .await
            .into_iter()
            .map(|o| o.uri)
            .collect();
        let what = format!("{backend}, big first: {big_first}");
        assert_eq!(got, expected, "{what}: every object, in input order");
        assert_eq!(server.faults().heads(), 0, "{what}: no HEAD");
        assert_eq!(server.faults().gets(), 24, "{what}: one GET per object");
        let peak = measured.peak.load(std::sync::atomic::Ordering::SeqCst);
        let over = loader.stats().over_budget;
        if big_first {
            assert_eq!(over, 0, "{what}");
            assert!(
                (BIG..=BUDGET).contains(&peak),
                "{what}: {peak} bytes read at once under a budget of {BUDGET}"
            );
        } else {
            // Memory is counted in 64 KiB units: the guess of 300,000 B holds 320 KiB.
            assert!(over <= (BIG - SMALL) as u64, "{what}: {over} over");
        }
    }
}

/// Overwritten between the ranges of one read (the test server swaps the object after a
/// number of GETs): the reader gets one version whole, or an error saying the object
/// changed, never a mix — whether the version is pinned by the listing's ETag, by the first
/// range's, or only compared afterwards; one that grew since it was listed is refused, not
/// truncated to the listed size.
async fn an_object_changed_during_a_read_is_never_spliced_or_truncated(backend: &'static str) {
    let key = "change/obj.bin";
    let uri = ObjectUri::new(DEFAULT_BUCKET, key).unwrap();
    let old = Bytes::from(pattern::generate(key, 2 << 20));
    let new = Bytes::from(pattern::generate("another version", 2 << 20));
    // One request at a time, so that the swap falls between two ranges deterministically.
    let deliver = LoaderOptions {
        on_error: OnError::Deliver,
        max_requests: 1,
        ..opts()
    };
    let (server, store) = setup(backend).await;
    // The object read, or the error; its bytes are never printed (megabytes).
    let read = |ds: Dataset| {
        let mut loader = Loader::new(store.clone(), &ds, deliver.clone()).unwrap();
        async move { within("next", loader.next()).await.unwrap().map(|o| o.data) }
    };
    let failed = |r: sluice_core::Result<Bytes>, what: &str| match r {
        Ok(data) => panic!(
            "{backend}, {what}: read {} bytes, expected an error",
            data.len()
        ),
        Err(e) => e.to_string(),
    };
    let listed = || async {
        server.insert(DEFAULT_BUCKET, key, old.clone());
        let prefix = ObjectUri::new(DEFAULT_BUCKET, "change/").unwrap();
        Dataset::from_prefix(store.as_ref(), &prefix, None)
            .await
            .unwrap()
    };
    let sized_only = Dataset::from_items(vec![sluice_loader::Item {
        uri: uri.clone(),
        size: Some(2 << 20),
        etag: None,
    }]);
    // 8 ranges of 256 KiB; the swap comes after the 1st or 3rd GET.
    for (what, ds, after) in [
        ("listed", listed().await, 3),
        ("unlisted", Dataset::from_uris([uri.clone()]), 1),
        ("size without ETag", sized_only.clone(), 3),
    ] {
        server.insert(DEFAULT_BUCKET, key, old.clone());
        server.faults().replace_after_gets(key, after, new.clone());
        let msg = failed(read(ds).await, what);
        assert!(
            msg.contains("changed while being read") && msg.contains(key),
            "{backend}, {what}: {msg}"
        );
    }
    // Overwritten after the listing, before any read: the listed version is gone.
    let ds = listed().await;
    server.insert(DEFAULT_BUCKET, key, new.clone());
    let err = failed(read(ds).await, "overwritten after listing");
    assert!(err.contains("changed"), "{backend}: {err}");
    // Not overwritten: the one version, whole.
    server.faults().clear();
    server.insert(DEFAULT_BUCKET, key, old.clone());
    let whole = read(sized_only.clone()).await.map_err(|e| e.to_string());
    assert!(
        whole.as_ref() == Ok(&old),
        "{backend}: not the old version whole"
    );
    // Grown since its size was learned: refused, not truncated.
    server.insert(DEFAULT_BUCKET, key, Bytes::from(vec![1u8; 3 << 20]));
    let err = read(sized_only).await.unwrap_err();
    assert!(
        err.to_string().contains("changed while being read"),
        "{backend}: {err}"
    );
}

/// The fault soak: over 10 seeds, every backend, ranges on and off, a burst of faults drawn
/// at random (resets and truncations mid-body, stalls shorter and longer than the stall
/// timeout, SlowDown, 500s) about one per request; every object arrives and every byte is
/// checked against its pattern.
async fn fault_soak_every_byte_right_over_ten_seeds(backend: &'static str) {
    const FAULTS: u32 = 12;
    let sizes = [100_000, 700_000, 1 << 20, 3 << 20, 5_000, 2 << 20];
    for round in 0..10u64 {
        for ranges in [true, false] {
            // Every fault may land on the retries of one object (its resumes do not earn
            // attempts back), so the store gets one attempt more than a round has faults:
            // a read that fails here is a resume that went wrong, never bad luck.
            let (server, store) =
                setup_with(backend, |cfg| cfg.retry.max_attempts = FAULTS + 1).await;
            let uris = seed(&server, &format!("soak{round}/"), &sizes);
            let o = LoaderOptions {
                range_threshold: if ranges {
                    512 << 10
                } else {
                    sluice_core::RangePlanner::NEVER
                },
                chunk_size: Some(256 << 10),
                shuffle_seed: Some(round),
                ..opts()
            };
            let ds = if round % 2 == 0 {
                Dataset::from_uris(uris.clone())
            } else {
                let prefix = ObjectUri::new(DEFAULT_BUCKET, &format!("soak{round}/")).unwrap();
                Dataset::from_prefix(store.as_ref(), &prefix, None)
                    .await
                    .unwrap()
            };
            // Armed after the listing: the reads are what is soaked.
            let mut rng = fastrand::Rng::with_seed(round);
            let mut long_stall = false;
            for _ in 0..FAULTS {
                let at = rng.u64(1_000..200_000);
                let fault = match rng.u8(0..6) {
                    0 => Fault::ResetAfter(at),
                    1 => Fault::TruncateAfter(at),
                    2 => Fault::StallAfter(at, Duration::from_millis(rng.u64(50..300))),
                    // Longer than the stall timeout (once a round: each costs 1.5 s):
                    // the read gives up and resumes.
                    3 if !long_stall => {
                        long_stall = true;
                        Fault::StallAfter(at, Duration::from_millis(1_800))
                    }
                    4 => Fault::SlowDown,
                    5 => Fault::InternalError,
                    _ => Fault::ResetAfter(at),
                };
                server.faults().inject(fault, 1);
            }
            let mut loader = Loader::new(store, &ds, o).unwrap();
            let mut got = Vec::new();
            while let Some(o) = within("soak next", loader.next()).await {
                let o =
                    o.unwrap_or_else(|e| panic!("seed {round}, {backend}, ranges {ranges}: {e}"));
                pattern::verify(o.uri.key(), 0, &o.data).unwrap_or_else(|at| {
                    panic!("seed {round}, {backend}: {} wrong at byte {at}", o.uri)
                });
                got.push(o.uri);
            }
            assert_eq!(
                got.len(),
                sizes.len(),
                "seed {round}, {backend}, ranges {ranges}"
            );
            let fired = server.faults().fired();
            assert!(
                fired >= 8,
                "seed {round}, {backend}: only {fired} faults fired"
            );
        }
    }
}

/// A budget of a few objects, fewer requests than the window: everything is still read (no
/// request permit or piece of memory is held by an object waiting for another).
async fn a_small_budget_and_two_requests_still_read_everything(backend: &'static str) {
    let (server, store) = setup(backend).await;
    let uris = seed(&server, "two/", &[300_000; 40]);
    server
        .faults()
        .inject(Fault::Latency(Duration::from_millis(5)), 1000);
    let o = LoaderOptions {
        prefetch: Some(16),
        max_requests: 2,
        memory_budget: Some(1 << 20),
        range_threshold: sluice_core::RangePlanner::NEVER,
        ..opts()
    };
    let mut loader = Loader::new(store, &Dataset::from_uris(uris), o).unwrap();
    assert_eq!(drain(&mut loader).await.len(), 40, "{backend}");
}

/// Objects named by URI under the default budget: one GET each and no HEAD, small or split
/// into ranges (their further ranges asked once the first answer names the size); and small
/// ones are not admitted one answer at a time (under 100 ms of latency, many GETs are out at
/// once).
async fn uris_are_read_with_gets_alone(backend: &'static str) {
    // 64 requests allowed from the start: the client's controller is not what is watched.
    let (server, store) = setup_with(backend, |cfg| {
        cfg.max_connections = 64;
        cfg.concurrency = sluice_core::Concurrency::Fixed;
    })
    .await;
    let small = seed(&server, "get-only/", &[20_000; 200]);
    server
        .faults()
        .inject(Fault::Latency(Duration::from_millis(100)), 1000);
    let o = LoaderOptions {
        prefetch: Some(64),
        ..LoaderOptions::default()
    };
    let mut loader = Loader::new(store.clone(), &Dataset::from_uris(small), o).unwrap();
    assert_eq!(drain(&mut loader).await.len(), 200);
    assert_eq!(server.faults().heads(), 0, "{backend}: no HEAD");
    assert_eq!(server.faults().gets(), 200, "{backend}: one GET per object");
    let peak = server.faults().peak_concurrency();
    assert!(peak >= 32, "{backend}: only {peak} GETs at once");

    let (server, store) = setup(backend).await;
    let size = (3 << 20) + 1;
    let big = seed(&server, "ranges/", &[size; 3]);
    let mut loader = Loader::new(store, &Dataset::from_uris(big), opts()).unwrap();
    assert_eq!(drain(&mut loader).await.len(), 3);
    assert_eq!(server.faults().heads(), 0, "{backend}: no HEAD");
    // 256 KiB ranges: 13 per object, the first of them the GET that learned the size.
    assert_eq!(server.faults().gets(), 3 * 13, "{backend}");
    assert_eq!(loader.stats().over_budget, 0, "{backend}");
}

/// Left to follow (`chunk_size: None`), ranges are the memory budget ÷ twice the requests the
/// client allows: more requests, smaller ranges, the same memory.
async fn ranges_follow_the_requests_the_client_allows(backend: &'static str) {
    for (connections, range) in [(2, 8 << 20), (8, 4 << 20)] {
        let (server, store) = setup_with(backend, |cfg| {
            cfg.max_connections = connections;
            cfg.concurrency = sluice_core::Concurrency::Fixed;
        })
        .await;
        let size = (20 << 20) + 1;
        let uris = seed(&server, "follow/", &[size]);
        let o = LoaderOptions {
            chunk_size: None,
            memory_budget: Some(64 << 20),
            ..opts()
        };
        let mut loader = Loader::new(store, &Dataset::from_uris(uris), o).unwrap();
        assert_eq!(drain(&mut loader).await.len(), 1);
        let stats = loader.stats();
        let what = format!("{backend}, {connections} connections: {stats:?}");
        assert_eq!(stats.range_size, range, "{what}");
        assert_eq!(stats.requests, (size as u64).div_ceil(range), "{what}");
        assert_eq!(server.faults().gets(), stats.requests, "{what}");
    }
}

/// Each case above once per backend compiled in, as its own test (`hyper::case`,
/// `awssdk::case`, ...), so a failure names its backend and the others still run.
macro_rules! per_backend {
    ($($case:ident),* $(,)?) => {
        #[cfg(feature = "hyper")]
        per_backend!(@in hyper, "hyper"; $($case),*);
        #[cfg(feature = "awssdk")]
        per_backend!(@in awssdk, "awssdk"; $($case),*);
        #[cfg(feature = "objectstore")]
        per_backend!(@in objectstore, "objectstore"; $($case),*);
    };
    (@in $m:ident, $name:literal; $($case:ident),*) => {
        mod $m {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case($name).await
                }
            )*
        }
    };
}

per_backend!(
    prefix_dataset_reads_every_byte_without_head_and_splits_large_objects,
    uri_dataset_learns_sizes_from_the_first_range,
    shards_are_disjoint_and_complete_over_the_wire,
    dropping_the_loader_stops_all_work,
    memory_budget_bounds_objects_in_flight,
    faults_are_retried_and_counted,
    failures_fail_fast_or_are_delivered,
    collect_batch_fills_batches_until_the_end,
    memory_budget_covers_unknown_sizes_and_input_order_never_deadlocks,
    an_object_changed_during_a_read_is_never_spliced_or_truncated,
    fault_soak_every_byte_right_over_ten_seeds,
    a_small_budget_and_two_requests_still_read_everything,
    uris_are_read_with_gets_alone,
    ranges_follow_the_requests_the_client_allows,
);
