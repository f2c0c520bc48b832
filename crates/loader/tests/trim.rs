//! The heap trimmer hands glibc's free heap back to the kernel (a process of its own, so
//! no other test's allocations move the resident figure).
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use sluice_loader::trim::{MIN_FREE, trim_if_worth};

const MIB: usize = 1 << 20;

/// This process's resident bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn freed_heap_memory_goes_back_to_the_kernel() {
    // A freed 24 MiB mapping raises glibc's mmap threshold, as a loader's freed buffer
    // does; the 16 MiB blocks after it come from the heap. Each is followed by a small
    // allocation that stays, so freeing the blocks leaves holes the heap cannot give back
    // by shrinking: they stay resident until trimmed.
    drop(std::hint::black_box(vec![1u8; 24 * MIB]));
    let mut blocks = Vec::new();
    let mut pins = Vec::new();
    for i in 0..16u8 {
        blocks.push(vec![i + 1; 16 * MIB]);
        pins.push(vec![i; 4096]);
    }
    drop(blocks);
    let before = rss();
    let (free, released) = trim_if_worth(MIN_FREE);
    let after = rss();
    eprintln!("free {free}, RSS {before} -> {after}");
    assert!(free >= 200 * MIB, "free heap {free}");
    assert!(released, "malloc_trim released nothing");
    assert!(
        after + 200 * MIB <= before,
        "RSS {before} -> {after} after trimming {free} free bytes"
    );
    assert!(pins.iter().enumerate().all(|(i, p)| p[0] == i as u8));
    // Below the bar: nothing done.
    assert!(!trim_if_worth(usize::MAX).1);
}
