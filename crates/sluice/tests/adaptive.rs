//! The client's controller (`core/src/congestion.rs`) and the loader's window that follows
//! it, at default settings, over real sockets to a test server that answers like a store with
//! latency: the controller must raise the requests in flight where latency bounds the rate,
//! back off where the store throttles, and never exceed its cap either way. (Its rules alone
//! are tested in paused time beside it; these check the wiring: the loader, the store, the
//! server's answers.) A test binary of its own, so no other test takes its CPU.

use sluice_core::ObjectStore;
use sluice_loader::{Dataset, Loader, LoaderOptions};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for, within};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, ServiceProfile, TestServer};
use std::sync::Arc;

const OBJECTS: usize = 2000;
const SIZE: usize = 4096;

async fn server(settings: &[(&str, &str)]) -> (TestServer, Vec<sluice_core::ObjectUri>) {
    let mut profile = ServiceProfile::loopback();
    profile.set_all(settings.iter().copied()).unwrap();
    let server = TestServer::start(ServerOptions {
        https_addr: None,
        profile,
        ..Default::default()
    })
    .await
    .unwrap();
    let uris = (0..OBJECTS)
        .map(|i| {
            let key = format!("adaptive/{i:05}.bin");
            server.insert(DEFAULT_BUCKET, &key, pattern::generate(&key, SIZE));
            sluice_core::ObjectUri::new(DEFAULT_BUCKET, &key).unwrap()
        })
        .collect();
    (server, uris)
}

/// Reads every object with a default loader; checks each one's bytes.
async fn read_all(store: &Arc<dyn ObjectStore>, uris: Vec<sluice_core::ObjectUri>) -> Loader {
    let dataset = Dataset::from_uris(uris);
    drain(Loader::new(store.clone(), &dataset, LoaderOptions::default()).unwrap()).await
}

/// Reads every object `loader` delivers; checks each one's bytes and that all came.
async fn drain(mut loader: Loader) -> Loader {
    let mut n = 0;
    while let Some(o) = within("loader next", loader.next()).await {
        let o = o.unwrap_or_else(|e| panic!("{e}"));
        pattern::verify(o.uri.key(), 0, &o.data).unwrap();
        n += 1;
    }
    assert_eq!(n, OBJECTS);
    loader
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_latency_the_defaults_send_more_requests_than_they_start_with() {
    // 20 ms a GET: at the 16 requests the controller starts with, 800 objects/s at most.
    let (server, uris) = server(&[("get-latency", "20ms")]).await;
    let store = sluice::registry::open(Some("hyper"), config_for(&server, Scheme::Http)).unwrap();
    let loader = read_all(&store, uris).await;
    let c = store.congestion().expect("an S3 client has a controller");
    assert!(c.adaptive, "{c:?}");
    assert!(
        c.limit > sluice_core::ADAPTIVE_START && c.limit <= c.max,
        "{c:?}"
    );
    assert!(c.rate > 0.0, "{c:?}");
    // The window follows the limit as the loader goes (twice it); the limit may still move
    // with the last answers, after the loader's last look (a busy machine: 128, then 64,
    // then a probe at 80 while the window stayed at 256).
    let window = loader.stats().window;
    assert!(
        window > 2 * sluice_core::ADAPTIVE_START && window <= sluice_loader::FOLLOW_MAX,
        "the window follows: {window}, {c:?}"
    );
    assert_eq!((c.throttled, c.cuts), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_store_is_sent_fewer_and_every_object_still_arrives() {
    // 300 GETs/s on the prefix, refused beyond with 503 SlowDown: the controller's growth
    // meets the throttles and backs off; the default retries deliver every object.
    let (server, uris) = server(&[("get-latency", "20ms"), ("request-rate", "get=300/s")]).await;
    let store = sluice::registry::open(Some("hyper"), config_for(&server, Scheme::Http)).unwrap();
    read_all(&store, uris).await;
    let c = store.congestion().unwrap();
    assert!(c.throttled > 0 && c.cuts > 0, "the store throttled: {c:?}");
    assert!(c.limit >= 1 && c.limit <= c.max, "{c:?}");
    let s = server.stats();
    let refused = s.throttled.get("get").copied().unwrap_or(0);
    assert_eq!(refused, c.throttled, "every refusal was counted: {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_number_is_kept() {
    let (server, uris) = server(&[("get-latency", "20ms")]).await;
    let mut cfg = config_for(&server, Scheme::Http);
    cfg.max_connections = 8;
    cfg.concurrency = sluice_core::Concurrency::Fixed;
    let store = sluice::registry::open(Some("hyper"), cfg).unwrap();
    let loader = read_all(&store, uris).await;
    let c = store.congestion().unwrap();
    assert_eq!((c.limit, c.max, c.adaptive), (8, 8, false));
    assert_eq!(loader.stats().window, sluice_loader::FOLLOW_MIN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_knows_its_objects_starts_with_as_many_requests() {
    // 2,000 listed objects of 4 KiB: the loader names its requests (as many as the cap),
    // and the fresh client starts there rather than at 16; then every object arrives.
    let (server, uris) = server(&[("get-latency", "20ms")]).await;
    let store = sluice::registry::open(Some("hyper"), config_for(&server, Scheme::Http)).unwrap();
    let dataset = Dataset::from_items(uris.into_iter().map(|uri| sluice_loader::Item {
        uri,
        size: Some(SIZE as u64),
        etag: None,
    }));
    let loader = Loader::new(store.clone(), &dataset, LoaderOptions::default()).unwrap();
    let c = store.congestion().unwrap();
    assert_eq!(c.limit, c.max, "{c:?}");
    assert_eq!(
        c.last,
        Some(sluice_core::Decision::FromJob { at: c.max }),
        "{c:?}"
    );
    drain(loader).await;
    let c = store.congestion().unwrap();
    assert_eq!((c.throttled, c.cuts), (0, 0), "{c:?}");
}
