//! A process that used its shared-memory arena forks (a DataLoader's fork workers after the
//! parent read through the pool): the child must never see its own new memory through the
//! buffers it inherited, its frees must be honoured, and nothing it drops may stay resident.
//! Alone in its process: the arena is per process, and the child must be the only fork.
#![allow(unsafe_code)]

use sluice_loader::{BufferPool, shm};

#[global_allocator]
static ALLOC: shm::PoolAlloc = shm::PoolAlloc;

const INHERITED: usize = 16 << 20;
const PLAIN: usize = 64 << 20;
const ROUNDS: usize = 20;

/// What the child checks, each failure its own exit status (so the parent can say which).
#[repr(i32)]
#[derive(Debug, Clone, Copy)]
enum ChildFailure {
    PlainOverlapsInherited = 10,
    PoolOverlapsInherited = 11,
    PoolBufferNotInOwnArena = 12,
    FreesNotHonoured = 13,
    SlotGrew = 14,
    Resident = 15,
    InheritedReadable = 16,
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn overlaps(a: *const u8, a_len: usize, b: *const u8, b_len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    a < b + b_len && b < a + a_len
}

/// The child's part: allocates, fills and frees, pool and plain memory, round after round.
fn child(inherited: *const u8, pool_dir: &std::path::Path) -> ChildFailure {
    // As a DataLoader worker with SLUICE_SHM_POOL set: its own slot in the same directory.
    if shm::set_up(pool_dir, 256 << 20).is_err() {
        return ChildFailure::PoolBufferNotInOwnArena;
    }
    let pool = BufferPool::new(0, 0); // keeps nothing idle: every drop is a free
    let rss_before = rss_bytes();
    for _ in 0..ROUNDS {
        let plain = vec![0x55u8; PLAIN];
        if overlaps(plain.as_ptr(), PLAIN, inherited, INHERITED) {
            return ChildFailure::PlainOverlapsInherited;
        }
        let mut buf = pool.take(INHERITED);
        buf.resize(INHERITED, 0x55);
        if overlaps(buf.as_ptr(), INHERITED, inherited, INHERITED) {
            return ChildFailure::PoolOverlapsInherited;
        }
        if !shm::in_arena(buf.as_ptr()) || shm::usage().0 < INHERITED {
            return ChildFailure::PoolBufferNotInOwnArena;
        }
    }
    let (used, file_len) = shm::usage();
    if used != 0 {
        return ChildFailure::FreesNotHonoured;
    }
    if file_len > 2 * INHERITED {
        return ChildFailure::SlotGrew;
    }
    // 20 rounds of 64 MiB dropped: none of it may still be resident.
    if rss_bytes() > rss_before + 2 * PLAIN {
        return ChildFailure::Resident;
    }
    // The module's promise for a buffer the parent handed down: a fault, never other bytes.
    // SAFETY: the read may fault, which is what is asserted (the process dies of SIGSEGV).
    let _ = unsafe { std::ptr::read_volatile(inherited) };
    ChildFailure::InheritedReadable
}

#[test]
fn a_forked_child_never_aliases_its_parents_arena() {
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let pool_dir = dir.path().join("pool");
    shm::set_up(&pool_dir, 256 << 20).unwrap();
    let pool = BufferPool::new(0, 0);
    let mut parents = pool.take(INHERITED);
    parents.resize(INHERITED, 0xAA);
    let parents = parents.freeze();
    assert!(
        shm::in_arena(parents.as_ptr()),
        "the parent's buffer is pooled"
    );

    // SAFETY: the child only allocates, frees and reads memory, then leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let failure = child(parents.as_ptr(), &pool_dir);
        // SAFETY: leaves the child at once, without running the harness's exit handlers.
        unsafe { libc::_exit(failure as i32) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV,
        "the child should have faulted reading an inherited buffer; it {}",
        if libc::WIFEXITED(status) {
            format!(
                "exited with {} (see ChildFailure)",
                libc::WEXITSTATUS(status)
            )
        } else {
            format!("died of signal {}", libc::WTERMSIG(status))
        }
    );
    assert!(
        parents.iter().all(|&b| b == 0xAA),
        "the parent's bytes are its own"
    );
}
