//! `Client.list_objects`: a listing read page by page as Python iterates, so the first
//! entries come after one request and a bucket of millions of keys never sits in memory.

use crate::runtime::block;
use crate::runtime::{check_owner, runtime};
use pyo3::prelude::*;
use sluice_core::{Error, ListEntry, ObjectStore, ObjectUri};
use std::sync::Arc;
use std::time::UNIX_EPOCH;
use tokio::sync::{Mutex, mpsc};

/// Entries read ahead of the consumer: one S3 page.
const AHEAD: usize = 1000;

/// One entry of a listing: an object, or (not recursive) a common prefix.
#[pyclass(frozen, module = "sluice", name = "ListEntry")]
#[derive(Debug)]
pub struct Entry {
    /// `s3://bucket/key` (a prefix ends in "/").
    #[pyo3(get)]
    uri: String,
    /// The key (or prefix) within the bucket.
    #[pyo3(get)]
    key: String,
    /// Bytes; `None` for a prefix.
    #[pyo3(get)]
    size: Option<u64>,
    /// The ETag as the store sent it; `None` for a prefix or when none was sent.
    #[pyo3(get)]
    etag: Option<String>,
    /// Seconds since the epoch (as `stat`'s), when the store said.
    #[pyo3(get)]
    last_modified: Option<f64>,
}

#[pymethods]
impl Entry {
    /// A common prefix ("directory") rather than an object.
    #[getter]
    fn is_prefix(&self) -> bool {
        self.size.is_none()
    }

    fn __repr__(&self) -> String {
        match self.size {
            Some(n) => format!("<sluice.ListEntry {} size={n}>", self.uri),
            None => format!("<sluice.ListEntry {} (prefix)>", self.uri),
        }
    }
}

impl From<ListEntry> for Entry {
    fn from(e: ListEntry) -> Self {
        match e {
            ListEntry::Object(m) => Entry {
                uri: m.uri.to_string(),
                key: m.uri.key().to_owned(),
                size: Some(m.size),
                etag: m.etag,
                last_modified: m
                    .last_modified
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64()),
            },
            ListEntry::Prefix(u) => Entry {
                uri: u.to_string(),
                key: u.key().to_owned(),
                size: None,
                etag: None,
                last_modified: None,
            },
        }
    }
}

/// The iterator `list_objects` returns. A task on the runtime pages through the listing
/// (retried and checked by core) into a bounded channel; `__next__` takes what has arrived
/// in one go (up to a page) and serves it from here, so the runtime is entered once per
/// batch, not once per entry. Dropping the iterator stops the task.
#[pyclass(module = "sluice", name = "Listing")]
#[derive(Debug)]
pub struct Listing {
    rx: Arc<Mutex<Pending>>,
    ready: std::collections::VecDeque<sluice_core::Result<ListEntry>>,
    owner: u32,
}

/// What a listing's task has sent and not yet been handed out.
#[derive(Debug)]
struct Pending {
    entries: mpsc::Receiver<sluice_core::Result<ListEntry>>,
    /// An error received after entries that went out first (`next_batch_call`).
    failed: Option<Error>,
}

impl Listing {
    pub fn start(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectUri,
        recursive: bool,
    ) -> PyResult<Self> {
        let rx = {
            let rt = runtime()?;
            let _in_runtime = rt.enter();
            sluice_core::spawn_list(store, prefix, recursive, AHEAD)
        };
        Ok(Self {
            rx: Arc::new(Mutex::new(Pending {
                entries: rx,
                failed: None,
            })),
            ready: Default::default(),
            owner: std::process::id(),
        })
    }
}

impl Listing {
    /// The next entries as they arrive, at most a page's worth (`AHEAD`); none at the end.
    /// An error ends the batch it is in: entries before it come first, it comes next.
    pub(crate) fn next_batch_call(&mut self) -> PyResult<crate::runtime::Call<Vec<ListEntry>>> {
        check_owner(self.owner, "sluice.Listing")?;
        if !self.ready.is_empty() {
            // What the blocking iterator received and has not handed out comes first.
            let mut entries = Vec::new();
            while let Some(e) = self.ready.pop_front() {
                match e {
                    Ok(e) => entries.push(e),
                    Err(err) if entries.is_empty() => {
                        return Ok(Box::pin(async move { Err(crate::errors::to_py(err)) }));
                    }
                    Err(err) => {
                        self.ready.push_front(Err(err));
                        break;
                    }
                }
            }
            return Ok(Box::pin(async move { Ok(entries) }));
        }
        let rx = self.rx.clone();
        Ok(Box::pin(async move {
            let mut rx = rx.lock().await;
            if let Some(err) = rx.failed.take() {
                return Err(crate::errors::to_py(err));
            }
            let mut batch = Vec::new();
            rx.entries.recv_many(&mut batch, AHEAD).await;
            let mut entries = Vec::with_capacity(batch.len());
            for e in batch {
                match e {
                    Ok(e) => entries.push(e),
                    Err(err) if entries.is_empty() => return Err(crate::errors::to_py(err)),
                    // The entries before it first; the error on the next call (the listing's
                    // task ends after its first error, so nothing follows it).
                    Err(err) => rx.failed = Some(err),
                }
            }
            Ok(entries)
        }))
    }
}

#[pymethods]
impl Listing {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    // `&mut self`: a second thread iterating the same listing at once gets Python's
    // "already borrowed" error, never a lock held across the GIL's release.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Entry>> {
        check_owner(self.owner, "sluice.Listing")?;
        let ready = &mut self.ready;
        if ready.is_empty() {
            let rx = self.rx.clone();
            let batch = block(py, async move {
                let mut rx = rx.lock().await;
                // An error an async batch left for the next call (`next_batch_call`).
                if let Some(err) = rx.failed.take() {
                    return Ok(vec![Err(err)]);
                }
                let mut batch = Vec::new();
                rx.entries.recv_many(&mut batch, AHEAD).await;
                Ok::<_, Error>(batch)
            })?;
            ready.extend(batch);
        }
        match ready.pop_front() {
            None => Ok(None),
            Some(e) => e.map(|e| Some(e.into())).map_err(crate::errors::to_py),
        }
    }
}
