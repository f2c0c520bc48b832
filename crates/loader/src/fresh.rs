//! How a fresh pool buffer's memory is prepared. A first write to fresh anonymous memory
//! faults once per 4 KiB page, and the kernel zeroes each page in the fault: on a VM that can
//! cost more CPU than the copy of the bytes themselves (docs/benchmarks.md, "Why the
//! defaults").
//!
//! - **Populated in one call** (on by default; `SLUICE_POPULATE=0` turns it off): a new
//!   buffer is faulted in with one `MADV_POPULATE_WRITE` (Linux 5.14) before bytes land in
//!   it, instead of a fault per page in the middle of the receive path: fewer and cheaper
//!   faults, and a steadier CPU per GB. Buffers above `POPULATE_MAX` are left to fault as
//!   they fill: populating is synchronous, and a runtime thread must not stop for seconds.
//! - **Transparent huge pages**, on request (`SLUICE_HUGEPAGES=1`): one fault per 2 MiB. Off
//!   by default: first passes were slower with them (docs/benchmarks.md, "Why the
//!   defaults"). The free 2 MiB blocks a new process gets are the ones a VM's balloon has
//!   reported to its host, so each costs a host-side fault. On a machine without free-page reporting they may gain.
//!
//! `madvise` is a plain system call with no Rust wrapper in std, hence the `unsafe`.
#![allow(unsafe_code)]

use bytes::BytesMut;
use sluice_core::settings::{self, Setting};

/// Below this a buffer spans too few pages to matter.
const MIN_LEN: usize = 4 << 20;
/// Above this a buffer is not populated up front (about a third of a second of one core).
const POPULATE_MAX: usize = 1 << 30;

/// A switch of the settings table; unset: `default`. A value that does not parse is refused
/// when the process's client is made (`settings::check`); until then it reads as `default`.
pub(crate) fn flag(setting: &Setting<bool>, default: bool) -> bool {
    setting.from_env().ok().flatten().unwrap_or(default)
}

/// `SLUICE_HUGEPAGES=1` (or on, true, yes) asks for huge pages.
fn huge_pages() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| flag(&settings::HUGEPAGES, false))
}

/// `SLUICE_POPULATE=0` (or off, false, no) leaves new buffers to fault page by page.
fn populate() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| flag(&settings::POPULATE, true))
}

/// Prepares a buffer the pool has just allocated.
pub fn prepare(buf: &BytesMut) {
    #[cfg(target_os = "linux")]
    {
        let cap = buf.capacity();
        if cap < MIN_LEN {
            return;
        }
        // madvise needs a page-aligned start; advise the aligned interior of the allocation.
        let page = 4096usize;
        let start = buf.as_ptr() as usize;
        let aligned = start.next_multiple_of(page);
        let len = (start + cap).saturating_sub(aligned) / page * page;
        let at = aligned as *mut libc::c_void;
        // SAFETY: [aligned, aligned + len) lies inside the allocation `buf` owns (capacity
        // `cap` from `start`). MADV_HUGEPAGE only changes how the kernel backs those pages;
        // MADV_POPULATE_WRITE faults them in as a write would, leaving their contents as they
        // are (zero, or what an earlier holder of an arena page left, which is never read
        // before it is written). Failure is harmless (an older kernel: faults later).
        unsafe {
            if huge_pages() {
                libc::madvise(at, len, libc::MADV_HUGEPAGE);
            }
            if populate() && cap <= POPULATE_MAX {
                libc::madvise(at, len, libc::MADV_POPULATE_WRITE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Pages of `[ptr, ptr + len)` (page-aligned) the kernel reports resident.
    fn resident(ptr: usize, len: usize) -> usize {
        let pages = len / 4096;
        let mut vec = vec![0u8; pages];
        // SAFETY: mincore reads the page tables of a range this test owns and writes one
        // byte per page into `vec`, which has that many.
        let rc = unsafe { libc::mincore(ptr as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn a_new_buffer_is_faulted_in_before_its_first_write() {
        assert!(populate(), "this test runs without SLUICE_POPULATE=0");
        // Above glibc's largest mmap threshold (32 MiB): always a fresh mapping.
        let len = 64 << 20;
        let untouched = BytesMut::with_capacity(len);
        let start = (untouched.as_ptr() as usize).next_multiple_of(4096);
        let pages = (len - 4096) / 4096 * 4096;
        assert!(
            resident(start, pages) < pages / 4096 / 2,
            "a fresh allocation starts mostly unmapped"
        );
        prepare(&untouched);
        assert_eq!(
            resident(start, pages),
            pages / 4096,
            "every page mapped by one call"
        );
    }
}
