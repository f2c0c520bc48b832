//! Transparent huge pages for large fresh buffers: the kernel's side of the buffer-pool
//! lever. A first write to fresh anonymous memory faults once per 4 KiB page; with
//! `MADV_HUGEPAGE` (honoured when THP is in `madvise` or `always` mode) it faults once per
//! 2 MiB, cutting the page-fault work of an object's first epoch.
//!
//! This is the workspace's one use of `unsafe` outside dependencies: `madvise` is a plain
//! system call with no Rust wrapper in std.
#![allow(unsafe_code)]

use bytes::BytesMut;

/// Below this a buffer spans too few huge pages to matter.
const MIN_LEN: usize = 4 << 20;

/// `SLUICE_HUGEPAGES=0|off` turns the advice off.
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !matches!(
            std::env::var("SLUICE_HUGEPAGES").as_deref(),
            Ok("0" | "off" | "false")
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
