//! Test doubles for the policy layer and the loader, without sockets (feature `test-util`):
//! `MemoryWire`, a [`Wire`](crate::Wire) over objects in memory that answers as S3 does (ranges, If-Match,
//! pages, multipart ETags), cuts bodies short and fails chosen calls with chosen errors. As
//! in mountpoint-s3-client, the double is deterministic and the faults are scripted per test.

mod faults;
mod memory;

pub use faults::{Op, reset, slow_down};
pub use memory::MemoryWire;

use crate::config::StoreConfig;
use crate::credentials::CredentialsCache;
use crate::retry::RetryPolicy;
use std::time::Duration;

/// A configuration for the doubles: defaults, with retries that back off for at most a
/// few milliseconds so a test of ten attempts takes no time.
pub fn config() -> StoreConfig {
    let mut cfg = StoreConfig::new(
        Some("http://memory.invalid".parse().expect("a valid URL")),
        "us-east-1",
        CredentialsCache::anonymous(),
    );
    cfg.retry = RetryPolicy {
        max_attempts: 5,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
    };
    cfg
}
