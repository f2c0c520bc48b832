//! Exit codes, human and JSON output.

use sluice_core::{Error, ErrorKind};
use std::fmt;
use std::time::Duration;

pub const EXIT_USAGE: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;
pub const EXIT_DENIED: u8 = 4;
pub const EXIT_OTHER: u8 = 1;

/// Why a command failed; the exit code follows the kind.
#[derive(Debug)]
pub enum Failure {
    Store(Error),
    Usage(String),
    Other(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => EXIT_USAGE,
            Failure::Other(_) => EXIT_OTHER,
            Failure::Store(e) => match e.kind() {
                ErrorKind::InvalidInput => EXIT_USAGE,
                ErrorKind::NotFound => EXIT_NOT_FOUND,
                ErrorKind::PermissionDenied => EXIT_DENIED,
                _ => EXIT_OTHER,
            },
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Store(e) => write!(f, "{e}"),
            Failure::Usage(s) | Failure::Other(s) => f.write_str(s),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Store(e)
    }
}

/// Bytes in a decimal megabyte and gigabyte, as storage vendors and MLPerf quote rates.
pub const MB: f64 = 1e6;
pub const GB: f64 = 1e9;

/// Decimal megabytes per second.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    mb_per_sec(bytes, elapsed.as_secs_f64())
}

/// Decimal megabytes per second over `secs` seconds (an instant counts as a nanosecond).
pub fn mb_per_sec(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / MB / secs.max(1e-9)
}

/// CPU seconds per decimal gigabyte moved.
pub fn cpu_s_per_gb(cpu_seconds: f64, bytes: u64) -> f64 {
    cpu_seconds / (bytes as f64 / GB).max(1e-9)
}

/// A progress bar on stderr (hidden when stderr is not a terminal or with --json).
pub fn progress(total: u64, bytes: bool, hidden: bool) -> indicatif::ProgressBar {
    if hidden {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total);
    let template = if bytes {
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {per_sec} eta {eta}"
    };
    pb.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
    pb
}

/// `n` bytes in binary units with one decimal (`1.5 MiB`), bytes below 1 KiB.
pub fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}
