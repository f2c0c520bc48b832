//! `sluice.Writer`: a streaming upload from Python (checkpoints). Each `write` hands its bytes
//! to the store's writer, which uploads parts while Python produces the next ones; memory
//! stays within `part_size × (max_in_flight + 1)` plus the chunk being written, or, when
//! `max_in_flight` is not set, within the client's one window of parts for all its uploads
//! (512 MiB) plus a part per writer.

use crate::errors::write_error;
use crate::object::{bytes_of, with_lent_bytes};
use crate::runtime::check_owner;
use crate::runtime::{block, block_lent, block_map};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sluice_core::{ObjectWriter, PutMode, WriteInfo};
use std::sync::Arc;
use tokio::sync::Mutex;

#[pyclass(frozen, module = "sluice", name = "Writer")]
#[derive(Debug)]
pub struct Writer {
    uri: String,
    inner: Arc<Mutex<Box<dyn ObjectWriter>>>,
    owner: u32,
    /// What `close` asks of the key (a taken one fails `mode="create"`).
    mode: PutMode,
}

impl Writer {
    pub fn new(uri: String, inner: Box<dyn ObjectWriter>, mode: PutMode) -> Self {
        Self {
            uri,
            inner: Arc::new(Mutex::new(inner)),
            owner: std::process::id(),
            mode,
        }
    }

    fn inner(&self) -> PyResult<Arc<Mutex<Box<dyn ObjectWriter>>>> {
        check_owner(self.owner, "sluice.Writer")?;
        Ok(self.inner.clone())
    }
}

/// The calls of `sluice.aio`'s writer: bytes owned by the call (bytes shared, anything else
/// copied, since a coroutine cannot lend them across an await).
impl Writer {
    pub(crate) fn write_call(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<crate::runtime::Call<usize>> {
        let inner = self.inner()?;
        let payload = bytes_of(py, data)?;
        Ok(Box::pin(async move {
            let n = payload.len();
            let r = inner.lock_owned().await.write(payload).await;
            r.map(|()| n).map_err(crate::errors::to_py)
        }))
    }

    pub(crate) fn close_call(&self) -> PyResult<crate::runtime::Call<WriteInfo>> {
        let inner = self.inner()?;
        let mode = self.mode.clone();
        Ok(Box::pin(async move {
            let r = inner.lock_owned().await.finish().await;
            r.map_err(|e| write_error(e, &mode))
        }))
    }

    pub(crate) fn abort_call(&self) -> PyResult<crate::runtime::Call<()>> {
        let inner = self.inner()?;
        Ok(Box::pin(async move {
            let r = inner.lock_owned().await.abort().await;
            r.map_err(crate::errors::to_py)
        }))
    }
}

pub fn info_dict<'py>(
    py: Python<'py>,
    uri: &str,
    info: &WriteInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("uri", uri)?;
    d.set_item("total_bytes", info.total_bytes)?;
    d.set_item("parts", info.parts)?;
    d.set_item("etag", info.etag.as_deref())?;
    Ok(d)
}

#[pymethods]
impl Writer {
    /// Appends a bytes-like object; returns its length. Waits (without the GIL) while
    /// `max_in_flight` parts are uploading (when not set: while the client's uploads fill
    /// their window of parts).
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let inner = self.inner()?;
        if data.is_exact_instance_of::<PyBytes>() {
            // Immutable: shared by the parts, not copied (`bytes_of`).
            let payload = bytes_of(py, data)?;
            let n = payload.len();
            block(
                py,
                async move { inner.lock_owned().await.write(payload).await },
            )?;
            return Ok(n);
        }
        // Anything else (torch.save writes memoryviews of its tensors) is lent for the call:
        // the writer copies it into part buffers it uses again, not into fresh memory.
        with_lent_bytes(data, |lent| {
            block_lent(py, async { inner.lock().await.write_slice(lent).await })?;
            Ok(lent.len())
        })
    }

    /// Uploads what remains and makes the object visible: {"uri", "total_bytes", "parts", "etag"}.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = self.inner()?;
        let finish = async move { inner.lock_owned().await.finish().await };
        let info = block_map(py, finish, |e| write_error(e, &self.mode))?;
        info_dict(py, &self.uri, &info)
    }

    /// Discards everything written; nothing is left in the store.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let inner = self.inner()?;
        block(py, async move { inner.lock_owned().await.abort().await })
    }

    /// Bytes accepted so far.
    #[getter]
    fn bytes_written(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = self.inner()?;
        block(
            py,
            async move { Ok(inner.lock_owned().await.bytes_written()) },
        )
    }

    #[getter]
    pub fn uri(&self) -> &str {
        &self.uri
    }

    fn __repr__(&self) -> String {
        format!("<sluice.Writer {}>", self.uri)
    }
}
