//! The shared-memory arena under the allocator the binaries install, alone in its process
//! (the unit tests' other pool allocations would share the arena with it).

use sluice_loader::{BufferPool, shm};

#[global_allocator]
static ALLOC: shm::PoolAlloc = shm::PoolAlloc;

/// Pool buffers come from the arena and go back to it when dropped; other allocations and
/// buffers larger than the arena are the system's; the file keeps the pages for the next
/// holder of the slot.
#[test]
fn pool_buffers_live_in_the_arena_and_return_to_it() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let pool_dir = dir.path().join("pool");
    shm::set_up(&pool_dir, 64 << 20).unwrap();
    let pool = BufferPool::new(0, 0); // keeps nothing idle: a dropped buffer is freed
    let mut buf = pool.take(10 << 20);
    buf.extend_from_slice(&vec![7u8; 10 << 20]);
    assert!(shm::in_arena(buf.as_ptr()), "a pool buffer in the arena");
    let (used, file_len) = shm::usage();
    assert!(used >= 10 << 20 && file_len >= used, "{used} {file_len}");
    let plain = vec![0u8; 10 << 20];
    assert!(
        !shm::in_arena(plain.as_ptr()),
        "not the pool's: the system's"
    );
    drop(buf);
    assert_eq!(shm::usage().0, used - (10 << 20), "freed into the arena");
    let slot = std::fs::metadata(pool_dir.join("slot-0")).unwrap();
    assert_eq!(
        slot.len() as usize,
        file_len,
        "the pages stay for the next holder"
    );
    let big = pool.take(100 << 20);
    assert!(
        !shm::in_arena(big.as_ptr()),
        "larger than the arena: private memory"
    );
}
