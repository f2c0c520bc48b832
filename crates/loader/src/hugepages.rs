//! Transparent huge pages for large fresh buffers, on request. A first write to fresh
//! anonymous memory faults once per 4 KiB page; with `MADV_HUGEPAGE` (honoured when THP is in
//! `madvise` or `always` mode) it faults once per 2 MiB.
//!
//! Off by default: with THP's usual `defrag=madvise`, a fault in an advised region may stall
//! for direct compaction, and measured against nginx (24 × 146.6 MB, one client core,
//! alternating runs, README "The first pass") every first pass was slower with the advice:
//! the s3dlio-compatible loop 634–1,105 MB/s against 1,970–2,092 without, 8 processes ×
//! prefetch 4 374–669 against 931, the `Loader` 1,518–2,632 against 2,302–2,342.
//! `SLUICE_HUGEPAGES=1` asks for them (a machine with THP `defrag=defer` may gain).
//!
//! `madvise` is a plain system call with no Rust wrapper in std, hence the `unsafe`.
#![allow(unsafe_code)]

use bytes::BytesMut;

/// Below this a buffer spans too few huge pages to matter.
const MIN_LEN: usize = 4 << 20;

/// `SLUICE_HUGEPAGES=1|on|true` turns the advice on.
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        matches!(
            std::env::var("SLUICE_HUGEPAGES").as_deref(),
            Ok("1" | "on" | "true")
        )
    })
}

pub fn advise(buf: &BytesMut) {
    #[cfg(target_os = "linux")]
    {
        let cap = buf.capacity();
        if cap < MIN_LEN || !enabled() {
            return;
        }
        // madvise needs a page-aligned start; advise the aligned interior of the allocation.
        let page = 4096usize;
        let start = buf.as_ptr() as usize;
        let aligned = start.next_multiple_of(page);
        let len = (start + cap).saturating_sub(aligned) / page * page;
        // SAFETY: [aligned, aligned + len) lies inside the allocation `buf` owns (capacity
        // `cap` from `start`); MADV_HUGEPAGE only changes how the kernel backs those pages,
        // never their contents or validity, and failure is harmless (we ignore it).
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}
