//! Scripted faults: chosen calls of the memory wire fail with chosen errors.

use crate::error::{Error, Result};
use crate::uri::ObjectUri;
use std::collections::HashMap;
use std::sync::Mutex;

/// The calls of a wire, as faults and counters name them: the S3 operations.
pub use crate::wire::Operation as Op;

/// A 503 SlowDown, as S3 answers a burst.
pub fn slow_down(uri: &ObjectUri) -> Error {
    Error::from_service(
        uri.to_string(),
        503,
        "SlowDown",
        "Please reduce your request rate",
        None,
    )
}

/// A connection reset before any answer.
pub fn reset(uri: &ObjectUri) -> Error {
    Error::transport(uri.to_string(), "connection reset by peer")
}

type MakeError = fn(&ObjectUri) -> Error;

/// Which of the next calls of each operation fail, and how many calls were made: the
/// memory wire's faults (`MemoryWire::fail`, `MemoryWire::calls`).
#[derive(Debug, Default)]
pub(super) struct Script {
    failing: Mutex<HashMap<Op, (u32, MakeError)>>,
    calls: Mutex<HashMap<Op, u32>>,
}

impl Script {
    /// The next `times` calls of `op` fail with `error(uri)`.
    pub(super) fn fail(&self, op: Op, times: u32, error: MakeError) {
        self.failing
            .lock()
            .expect("faults lock")
            .insert(op, (times, error));
    }

    /// Calls of `op` so far.
    pub(super) fn calls(&self, op: Op) -> u32 {
        self.calls
            .lock()
            .expect("faults lock")
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// Counts a call of `op`, and fails it if the script says so.
    pub(super) fn call(&self, op: Op, uri: &ObjectUri) -> Result<()> {
        *self
            .calls
            .lock()
            .expect("faults lock")
            .entry(op)
            .or_default() += 1;
        let mut failing = self.failing.lock().expect("faults lock");
        match failing.get_mut(&op) {
            Some((times, error)) if *times > 0 => {
                *times -= 1;
                Err(error(uri))
            }
            _ => Ok(()),
        }
    }
}
