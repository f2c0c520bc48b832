//! Handing glibc's free heap back to the kernel, so a long-running reader's resident memory
//! follows what it holds rather than the most it ever held.
//!
//! glibc serves an allocation above its mmap threshold (128 KiB at first) with a mapping of
//! its own, unmapped at free; but each such free raises the threshold to the freed size (up
//! to 32 MiB), after which buffers of that size come from the heap and stay there when freed,
//! in whichever of the per-thread arenas served them. A loader's buffers are 64 KiB to tens of
//! MiB, allocated and freed by different threads, so the free memory kept grows in steps as
//! arenas meet new peaks: the 30-minute fault soak (`scripts/soak 30`) went 389 → 458 → 515
//! MiB, with a pool that holds the same bytes throughout. Pinning the threshold
//! (`MALLOC_MMAP_THRESHOLD_`) kept it level but makes every 4–32 MiB allocation of the whole
//! process (torch's tensors included) a fresh mapping, faulted in page by page each time.
//!
//! Instead, a thread looks at the heap every `EVERY` and, when more than `MIN_FREE` bytes of
//! it lie free, calls `malloc_trim(0)`, which returns the free pages of every arena to the
//! kernel (`MADV_DONTNEED`) and keeps the allocations where they are. The cost is one
//! `mallinfo2` walk per period and, after a trim, a page fault per reused page: at most the
//! free memory once per period. `SLUICE_MALLOC_TRIM=0` turns it off. Only on glibc; other
//! allocators manage their own.
#![allow(unsafe_code)]

/// How often the heap is looked at.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Free heap bytes worth a trim: below this, what a trim would release is small next to a
/// loader's buffers, and each released page costs a fault when it is used again.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub const MIN_FREE: usize = 64 << 20;

/// Starts the trimming thread of this process, once (again in a forked child, which does
/// not inherit it). Called when a buffer pool is made: a process that never reads through a
/// loader is left alone.
pub fn start() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::{AtomicU32, Ordering};
        /// The process whose thread runs (0: none yet).
        static STARTED_IN: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        if STARTED_IN.swap(pid, Ordering::Relaxed) == pid || !enabled() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("sluice-trim".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(EVERY);
                    trim_if_worth(MIN_FREE);
                }
            });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "no heap-trimming thread");
        }
    }
}

/// After a burst of short-lived allocations (a listing of millions: a page of `ObjectMeta`s
/// per request, folded into compact columns and freed), hands the free heap back at once if
/// more than `MIN_FREE_AFTER_BURST` lies free, rather than at the trimming thread's next
/// look, which only a loader starts.
pub fn after_burst() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if enabled() {
        trim_if_worth(MIN_FREE_AFTER_BURST);
    }
}

/// Free heap bytes worth a trim after a burst: a listing of a million keys leaves tens of
/// MiB; below this the pages are left for the next allocations.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MIN_FREE_AFTER_BURST: usize = 8 << 20;

/// `SLUICE_MALLOC_TRIM=0` (or off, false, no) turns trimming off.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn enabled() -> bool {
    crate::fresh::flag(&sluice_core::settings::MALLOC_TRIM, true)
}

/// Free bytes in glibc's heaps (every arena), and whether they were handed back: trimmed
/// when at least `min_free`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_if_worth(min_free: usize) -> (usize, bool) {
    // SAFETY: mallinfo2 only reads the allocator's statistics under its own locks.
    let free = unsafe { libc::mallinfo2() }.fordblks;
    if free < min_free {
        return (free, false);
    }
    // SAFETY: malloc_trim releases free pages under the allocator's locks; allocations stay
    // where they are.
    let released = unsafe { libc::malloc_trim(0) } == 1;
    tracing::debug!(free, released, "trimmed the heap");
    (free, released)
}
