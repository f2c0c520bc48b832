//! CPU time of finished child processes, from the kernel's accounting
//! (`getrusage(RUSAGE_CHILDREN)`): the bench's workers and curl are measured the same way,
//! including time spent in the kernel on their behalf.
//!
//! `getrusage` has no safe wrapper in std; this module is the CLI's one use of `unsafe`.
#![allow(unsafe_code)]

/// Totals over every child waited for so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildUsage {
    pub cpu_seconds: f64,
}

pub fn children() -> ChildUsage {
    // SAFETY: `rusage` is plain data, zero is a valid bit pattern, and getrusage writes
    // only into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a live rusage; RUSAGE_CHILDREN is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    if rc != 0 {
        return ChildUsage::default();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    ChildUsage {
        cpu_seconds: secs(ru.ru_utime) + secs(ru.ru_stime),
    }
}
