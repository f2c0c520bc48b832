//! Exit codes, human and JSON output.

use sluice_core::Error;
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
            Failure::Store(Error::InvalidUri { .. } | Error::InvalidConfig { .. })
            | Failure::Usage(_) => EXIT_USAGE,
            Failure::Store(Error::NotFound { .. }) => EXIT_NOT_FOUND,
            Failure::Store(Error::PermissionDenied { .. }) => EXIT_DENIED,
            _ => EXIT_OTHER,
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

/// Decimal megabytes per second, as storage vendors and MLPerf quote them.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64().max(1e-9)
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

/// CPU seconds this process has used (user + system), from /proc/self/stat; `None` where
/// that file does not exist. Clock ticks are 100 per second on Linux's supported platforms.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
