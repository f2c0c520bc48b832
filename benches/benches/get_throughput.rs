//! GET throughput per backend against the in-process test server (http, loopback):
//! 1 MiB, 16 MiB and one unet3d record (146,600,628 B), read whole into a reused segment.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice_core::ObjectStoreExt;
use sluice_core::{ObjectUri, Segment};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{Scheme, config_for};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};
use std::time::Instant;

fn get_throughput(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(TestServer::start(ServerOptions::default()))
        .unwrap();
    let sizes = [
        ("1MiB", 1usize << 20),
        ("16MiB", 16 << 20),
        ("unet3d-146600628", 146_600_628),
    ];
    for (name, len) in sizes {
        server.insert(DEFAULT_BUCKET, name, pattern::generate(name, len));
    }
    let mut group = c.benchmark_group("get");
    group.sample_size(10);
    for backend in sluice::registry::compiled() {
        let _guard = rt.enter();
        let store =
            sluice::registry::open(Some(backend), config_for(&server, Scheme::Http)).unwrap();
        for (name, len) in sizes {
            let uri = ObjectUri::new(DEFAULT_BUCKET, name).unwrap();
            group.throughput(Throughput::Bytes(len as u64));
            group.bench_with_input(BenchmarkId::new(backend, name), &len, |b, &len| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (store, uri) = (store.clone(), uri.clone());
                    async move {
                        // One segment reused across iterations: the measurement is the
                        // transfer, not page-faulting fresh memory.
                        let mut seg = Segment::exact(len);
                        let t = Instant::now();
                        for _ in 0..iters {
                            seg.reset();
                            store.get_into(&uri, None, &mut seg).await.unwrap();
                        }
                        t.elapsed()
                    }
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, get_throughput);
criterion_main!(benches);
