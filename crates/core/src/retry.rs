//! Retry: exponential backoff with full jitter, and one loop that applies it.
//!
//! Which errors are worth retrying is `Error::is_retryable`; how long to wait and how often
//! is this policy. Backends call `retry` for request-level operations and
//! `resume::get_with_resume` for bodies, so no backend writes its own loop.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// How often and how patiently a request is repeated: at most `max_attempts` in all, with
/// a jittered exponential wait before each retry (`backoff`). Only errors that
/// `Error::is_retryable` calls transient are repeated (`may_retry`); the same budget covers
/// resuming a broken body. Default: 10 attempts, waits from 50 ms doubling to a 5 s cap
/// (the `Default` impl says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (AWS_MAX_ATTEMPTS semantics). At least 1.
    pub max_attempts: u32,
    /// Backoff ceiling before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Upper bound of any single backoff.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Ten attempts, 50 ms doubling to a 5 s cap. More attempts than the SDKs' standard mode
    /// (3) because a training epoch that dies on a brief SlowDown burst loses hours, while a
    /// retry costs milliseconds; the jittered cap keeps a fleet of readers from stampeding.
    fn default() -> Self {
        Self {
            max_attempts: 10,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub const fn none() -> Self {
        Self {
            max_attempts: 1,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
        }
    }

    /// "Full jitter" backoff before retry number `retry` (0-based): uniform in
    /// `0..=min(max_delay, base_delay * 2^retry)`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(fastrand::u64(0..=nanos))
    }

    /// Whether another attempt is allowed after `attempts_made` failed ones. A yes is
    /// counted (`retry_counts`): every retry of the crate is decided here.
    pub fn may_retry(&self, err: &Error, attempts_made: u32) -> bool {
        let yes = err.is_retryable() && attempts_made < self.max_attempts;
        if yes {
            count_retry(err);
        }
        yes
    }
}

/// Retries decided in this process, by `Error::kind_label` of the failure retried.
static RETRIES: std::sync::Mutex<BTreeMap<String, u64>> = std::sync::Mutex::new(BTreeMap::new());

fn count_retry(err: &Error) {
    let mut m = RETRIES.lock().unwrap_or_else(|p| p.into_inner());
    *m.entry(err.kind_label()).or_default() += 1;
}

/// The retries this process has made so far, by the kind of failure that caused them (for
/// benchmarks and diagnostics; a retry is rare, so one lock per retry costs nothing).
pub fn retry_counts() -> BTreeMap<String, u64> {
    RETRIES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Runs `op` until it succeeds, fails with a final error, or the attempts run out.
pub(crate) async fn retry<T, F, Fut>(policy: &RetryPolicy, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        match crate::oplog::as_attempt(attempts, op()).await {
            Ok(v) => return Ok(v),
            Err(e) if policy.may_retry(&e, attempts) => {
                tracing::info!(error = %e, attempts, "retrying");
                tokio::time::sleep(policy.backoff(attempts - 1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn backoff_is_bounded_by_the_doubling_ceiling() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(100),
        };
        for _ in 0..200 {
            assert!(p.backoff(0) <= Duration::from_millis(10));
            assert!(p.backoff(2) <= Duration::from_millis(40));
            assert!(p.backoff(30) <= Duration::from_millis(100));
        }
    }

    #[tokio::test]
    async fn retries_transient_errors_until_success_and_stops_on_final() {
        let p = RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        };
        let calls = AtomicU32::new(0);
        let out = retry(&p, || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(Error::transport("u", "reset"))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        let calls = AtomicU32::new(0);
        let out: Result<()> = retry(&p, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::from_service("u", 403, "AccessDenied", "no", None))
        })
        .await;
        assert!(matches!(out, Err(Error::PermissionDenied { .. })));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "final errors are not retried"
        );

        let calls = AtomicU32::new(0);
        let out: Result<()> = retry(&p, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::transport("u", "reset"))
        })
        .await;
        assert!(out.is_err());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            4,
            "the budget is the total attempt count"
        );
    }
}
