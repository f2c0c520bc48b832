//! Rust log records into Python's `logging`. A tracing layer turns each record that passes
//! the filter (`SLUICE_LOG`, `RUST_LOG`, else sluice's notable events and every warning) into
//! a short message on a bounded queue, never touching Python from the runtime's threads; a
//! Python daemon thread (`sluice._logging`) takes them off with the GIL released while it
//! waits and logs each to `logging.getLogger("sluice.<crate>.<module>")`. When nothing drains
//! the queue it fills, and further records are dropped rather than blocking a request.

use pyo3::prelude::*;
use std::fmt::Write as _;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Records waiting for the Python thread.
const QUEUE: usize = 4096;

/// Level (Python's numbers), target, message.
type Record = (u8, String, String);

/// One process's queue. A forked child gets a new one: the parent's receiver may have been
/// locked by its waiting thread at the fork, and a copied lock has no owner to release it.
struct Queue {
    pid: u32,
    tx: SyncSender<Record>,
    rx: Mutex<Receiver<Record>>,
}

static CURRENT: Mutex<Option<Arc<Queue>>> = Mutex::new(None);

fn queue() -> Arc<Queue> {
    let pid = std::process::id();
    let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    match &*current {
        Some(q) if q.pid == pid => q.clone(),
        _ => {
            let (tx, rx) = sync_channel(QUEUE);
            let q = Arc::new(Queue {
                pid,
                tx,
                rx: Mutex::new(rx),
            });
            *current = Some(q.clone());
            q
        }
    }
}

/// Installs the forwarding layer as the process's subscriber (once; a subscriber another
/// extension installed first is left alone). A malformed SLUICE_LOG / RUST_LOG is reported
/// as a ValueError naming it.
pub fn install() -> PyResult<()> {
    let filter =
        sluice::logging::filter(None, sluice::logging::EVENTS).map_err(crate::errors::to_py)?;
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(Forward)
        .try_init();
    Ok(())
}

struct Forward;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Forward {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let level = match *meta.level() {
            tracing::Level::ERROR => 40,
            tracing::Level::WARN => 30,
            tracing::Level::INFO => 20,
            _ => 10,
        };
        let mut text = Text::default();
        event.record(&mut text);
        let _ = queue()
            .tx
            .try_send((level, meta.target().to_owned(), text.finish()));
    }
}

/// "message key=value key=value".
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Text {
    fn finish(self) -> String {
        if self.fields.is_empty() {
            self.message
        } else {
            format!("{}:{}", self.message, self.fields)
        }
    }
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

/// The next record, waiting up to `timeout` seconds without the GIL: (level, target,
/// message), or None. For `sluice._logging`'s thread.
#[pyfunction]
pub fn _next_log(py: Python<'_>, timeout: f64) -> Option<Record> {
    let wait = Duration::from_secs_f64(timeout.clamp(0.0, 60.0));
    py.detach(|| {
        let q = queue();
        let rx = q.rx.lock().unwrap_or_else(|p| p.into_inner());
        // Timed out, or (never: the sender is static) disconnected.
        rx.recv_timeout(wait).ok()
    })
}
