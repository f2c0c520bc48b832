//! Joining a ranged read's segments: sluice's in-place `SegmentedBuffer::join` against the
//! naive way (each chunk in its own buffer, concatenated by copying).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_core::SegmentedBuffer;

const SIZE: usize = 146_600_628;
const CHUNK: usize = 8 << 20;

fn lens() -> Vec<usize> {
    (0..SIZE.div_ceil(CHUNK))
        .map(|i| CHUNK.min(SIZE - i * CHUNK))
        .collect()
}

fn assembly(c: &mut Criterion) {
    let src = vec![7u8; CHUNK];
    let mut group = c.benchmark_group("assemble-146600628");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(SIZE as u64));
    group.bench_function("segmented-join", |b| {
        b.iter(|| {
            let mut segs = SegmentedBuffer::split(lens());
            for s in &mut segs {
                let n = s.expected_len().unwrap();
                s.write(&src[..n]).unwrap();
            }
            SegmentedBuffer::join(segs).unwrap()
        })
    });
    group.bench_function("naive-concat", |b| {
        b.iter(|| {
            let chunks: Vec<Vec<u8>> = lens().into_iter().map(|n| src[..n].to_vec()).collect();
            let mut out = Vec::with_capacity(SIZE);
            for ch in &chunks {
                out.extend_from_slice(ch);
            }
            out
        })
    });
    group.finish();
}

criterion_group!(benches, assembly);
criterion_main!(benches);
