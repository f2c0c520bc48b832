//! CPU time from the kernel's accounting (`getrusage`), the one CPU-time source of the CLI:
//! this process's own (`this_process`: `sluice get`, a bench worker) and that of finished
//! child processes (`children`: the bench's workers and curl, measured the same way),
//! both including the time the kernel spent on their behalf.
//!
//! `getrusage` has no safe wrapper in std; this module is the CLI's one use of `unsafe`.
#![allow(unsafe_code)]

/// Totals over every child waited for so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildUsage {
    pub cpu_seconds: f64,
}

/// User + system CPU seconds of `who`, `None` if the kernel refuses.
fn cpu_seconds(who: libc::c_int) -> Option<f64> {
    // SAFETY: `rusage` is plain data, zero is a valid bit pattern, and getrusage writes
    // only into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a live rusage; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (rc == 0).then(|| secs(ru.ru_utime) + secs(ru.ru_stime))
}

/// CPU seconds this process has used so far.
pub fn this_process() -> Option<f64> {
    cpu_seconds(libc::RUSAGE_SELF)
}

pub fn children() -> ChildUsage {
    ChildUsage {
        cpu_seconds: cpu_seconds(libc::RUSAGE_CHILDREN).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_counts_the_work_it_does() {
        let before = super::this_process().unwrap();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i * i));
        }
        std::hint::black_box(x);
        assert!(super::this_process().unwrap() > before);
    }
}
