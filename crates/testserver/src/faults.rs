//! Fault injection, switchable per test: each armed fault fires on the next `count`
//! matching requests, then disarms itself.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer `503 SlowDown` instead of serving the request (any operation).
    SlowDown,
    /// Answer `500 InternalError` (any operation).
    InternalError,
    /// Wait this long before answering (any operation).
    Latency(Duration),
    /// GET: send this many body bytes, then abort the connection.
    ResetAfter(u64),
    /// GET: send this many body bytes, then end the body cleanly although Content-Length
    /// promised more.
    TruncateAfter(u64),
    /// GET: send this many body bytes, then send nothing for `Duration`, then the rest.
    StallAfter(u64, Duration),
}

impl Fault {
    fn is_body_fault(&self) -> bool {
        matches!(
            self,
            Fault::ResetAfter(_) | Fault::TruncateAfter(_) | Fault::StallAfter(..)
        )
    }
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    remaining: u64,
}

/// The switchboard one server consults. Cheap when nothing is armed (one uncontended lock).
#[derive(Debug, Default)]
pub struct Faults {
    armed: Mutex<Vec<Armed>>,
    requests: AtomicU64,
    gets: AtomicU64,
    heads: AtomicU64,
    fired: AtomicU64,
    active: AtomicU64,
    peak: AtomicU64,
    replacement: Mutex<Option<Replacement>>,
}

/// An overwrite due after a number of GETs of one key (see `Faults::replace_after_gets`).
#[derive(Debug)]
struct Replacement {
    key: String,
    gets_left: u64,
    data: bytes::Bytes,
}

/// Marks one request as being served; see `Faults::peak_concurrency`.
#[derive(Debug)]
pub(crate) struct ActiveGuard<'a>(&'a Faults);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Faults {
    /// Arms `fault` for the next `count` requests it applies to.
    pub fn inject(&self, fault: Fault, count: u64) {
        self.armed.lock().unwrap().push(Armed {
            fault,
            remaining: count,
        });
    }

    /// Disarms everything.
    pub fn clear(&self) {
        self.armed.lock().unwrap().clear();
        *self.replacement.lock().unwrap() = None;
    }

    /// Overwrites `key` with `data` once `gets` GETs of it have been answered (the last of
    /// them still with the old version): an object replaced between the ranges of one read.
    pub fn replace_after_gets(&self, key: &str, gets: u64, data: bytes::Bytes) {
        *self.replacement.lock().unwrap() = Some(Replacement {
            key: key.to_owned(),
            gets_left: gets,
            data,
        });
    }

    /// The new data for `key` when the GET being answered is the last before the overwrite.
    pub(crate) fn replacement_due(&self, key: &str) -> Option<bytes::Bytes> {
        let mut slot = self.replacement.lock().unwrap();
        let r = slot.as_mut().filter(|r| r.key == key)?;
        r.gets_left = r.gets_left.saturating_sub(1);
        if r.gets_left > 0 {
            return None;
        }
        slot.take().map(|r| r.data)
    }

    fn take(&self, body: bool) -> Option<Fault> {
        let mut armed = self.armed.lock().unwrap();
        let pos = armed
            .iter()
            .position(|a| a.fault.is_body_fault() == body && a.remaining > 0)?;
        armed[pos].remaining -= 1;
        let fault = armed[pos].fault;
        if armed[pos].remaining == 0 {
            armed.remove(pos);
        }
        self.fired.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }

    /// Counts a request as in service until the guard drops (the handler returns).
    pub(crate) fn enter(&self) -> ActiveGuard<'_> {
        let now = self.active.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        ActiveGuard(self)
    }

    /// The most requests that were in their handlers at once (latency faults included).
    pub fn peak_concurrency(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// A request-phase fault for this request, if one is armed.
    pub(crate) fn on_request(&self) -> Option<Fault> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.take(false)
    }

    /// A body fault for this GET, if one is armed.
    pub(crate) fn on_get_body(&self) -> Option<Fault> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.take(true)
    }

    pub(crate) fn on_head(&self) {
        self.heads.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests that reached the store (after authentication).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
    /// GET requests the server has seen.
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::Relaxed)
    }
    /// HEAD requests the server has seen.
    pub fn heads(&self) -> u64 {
        self.heads.load(Ordering::Relaxed)
    }
    /// Faults that fired so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_fire_count_times_and_by_phase() {
        let f = Faults::default();
        f.inject(Fault::SlowDown, 2);
        f.inject(Fault::ResetAfter(10), 1);
        assert_eq!(f.on_get_body(), Some(Fault::ResetAfter(10)));
        assert_eq!(f.on_get_body(), None);
        assert_eq!(f.on_request(), Some(Fault::SlowDown));
        assert_eq!(f.on_request(), Some(Fault::SlowDown));
        assert_eq!(f.on_request(), None);
        assert_eq!(f.fired(), 3);
    }
}
