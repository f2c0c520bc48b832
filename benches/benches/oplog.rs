//! The op-log's cost per request (`SLUICE_OP_LOG`): timing a GET, formatting its line and
//! compressing it, as the request's own thread does.

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_core::ObjectUri;
use sluice_core::oplog::{OpLog, Outcome, Timer};
use std::time::Instant;

fn record(c: &mut Criterion) {
    let path =
        std::env::temp_dir().join(format!("sluice-oplog-bench-{}.tsv.zst", std::process::id()));
    let log = OpLog::shared(&path).unwrap();
    let uris: Vec<ObjectUri> = (0..1000)
        .map(|i| {
            ObjectUri::parse(&format!("s3://bucket/unet3d/train/img_{i:04}_of_1000.npz")).unwrap()
        })
        .collect();
    let mut i = 0usize;
    c.bench_function("oplog-record-ranged-get", |b| {
        b.iter(|| {
            let t = Timer::start();
            i += 1;
            let piece = (i % 17) as u64;
            log.record(
                &t,
                Outcome {
                    op: "GetObject",
                    uri: Some(&uris[(i * 7919) % uris.len()]),
                    range: Some(format!("{}..{}", piece << 23, (piece + 1) << 23)),
                    bytes: 8 << 20,
                    object_size: Some(146_600_628),
                    first_byte: Some(Instant::now()),
                    result: Ok(206),
                },
            );
        })
    });
    log.finish_frame();
    let _ = std::fs::remove_file(log.path());
}

criterion_group!(benches, record);
criterion_main!(benches);
