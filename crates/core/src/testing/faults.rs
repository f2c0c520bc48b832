//! `Faulty`: a wire whose chosen calls fail with chosen errors.

use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::uri::ObjectUri;
use crate::wire::{BodySink, GetRequest, GetWire, Operations, Reply, Request, Wire};
use async_trait::async_trait;
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

/// `inner`, except that the next calls of an operation fail as scripted (`fail`). Every call
/// is counted, failed or not (`calls`).
#[derive(Debug)]
pub struct Faulty<W> {
    inner: W,
    script: Mutex<HashMap<Op, (u32, MakeError)>>,
    calls: Mutex<HashMap<Op, u32>>,
}

impl<W> Faulty<W> {
    /// `inner` with no faults scripted yet.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            script: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    /// The wrapped wire (to insert objects, read its counters).
    pub fn inner(&self) -> &W {
        &self.inner
    }

    /// The next `times` calls of `op` fail with `error(uri)` instead of reaching `inner`.
    pub fn fail(&self, op: Op, times: u32, error: MakeError) {
        self.script
            .lock()
            .expect("faults lock")
            .insert(op, (times, error));
    }

    /// Calls of `op` so far.
    pub fn calls(&self, op: Op) -> u32 {
        self.calls
            .lock()
            .expect("faults lock")
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// Counts a call of `op`, and fails it if the script says so.
    fn call(&self, op: Op, uri: &ObjectUri) -> Result<()> {
        *self
            .calls
            .lock()
            .expect("faults lock")
            .entry(op)
            .or_default() += 1;
        let mut script = self.script.lock().expect("faults lock");
        match script.get_mut(&op) {
            Some((times, error)) if *times > 0 => {
                *times -= 1;
                Err(error(uri))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait]
// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> GetWire for Faulty<W> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        self.call(Op::GetObject, req.uri)?;
        self.inner.get_object(req, sink).await
    }
}

#[async_trait]
impl<W: Wire> Operations for Faulty<W> {
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        // A batch's fault names its first object; an empty batch is never scripted.
        if let Some(uri) = req.uri() {
            self.call(req.operation(), uri)?;
        }
        self.inner.send(req).await
    }
}

// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl<W: Wire> Wire for Faulty<W> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn config(&self) -> &StoreConfig {
        self.inner.config()
    }

    fn endpoint_stats(&self) -> Vec<crate::object::EndpointStats> {
        self.inner.endpoint_stats()
    }
}
