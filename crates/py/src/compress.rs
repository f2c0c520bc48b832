//! `sluice._native.ZstdEncoder`: streamed zstd compression for the s3dlio compat module's
//! writers (`PyWriterOptions.with_compression("zstd", level)`), one standard zstd frame per
//! object, as s3dlio writes it. The GIL is released while compressing.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::io::Write;
use std::sync::Mutex;

type Encoder = zstd::stream::write::Encoder<'static, Vec<u8>>;

#[pyclass(frozen, module = "sluice", name = "ZstdEncoder")]
pub struct ZstdEncoder {
    /// `None` once finished.
    inner: Mutex<Option<Encoder>>,
}

impl std::fmt::Debug for ZstdEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdEncoder").finish_non_exhaustive()
    }
}

fn failed(e: std::io::Error) -> PyErr {
    PyValueError::new_err(format!("zstd: {e}"))
}

#[pymethods]
impl ZstdEncoder {
    /// An encoder at `level` (zstd's range: negative levels are faster, 22 the smallest).
    #[new]
    fn new(level: i32) -> PyResult<Self> {
        let range = zstd::compression_level_range();
        if !range.contains(&level) {
            return Err(PyValueError::new_err(format!(
                "compression level: {level} is outside zstd's {}..={}",
                range.start(),
                range.end()
            )));
        }
        let enc = Encoder::new(Vec::new(), level).map_err(failed)?;
        Ok(Self {
            inner: Mutex::new(Some(enc)),
        })
    }

    /// Compresses `data` (any bytes-like object); returns the compressed bytes ready so far.
    fn compress<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = crate::object::bytes_of(py, data)?;
        let out = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let enc = guard
                .as_mut()
                .ok_or_else(|| PyValueError::new_err("zstd: the encoder is finished"))?;
            enc.write_all(&data).map_err(failed)?;
            Ok::<_, PyErr>(std::mem::take(enc.get_mut()))
        })?;
        Ok(PyBytes::new(py, &out))
    }

    /// Ends the frame; returns its last bytes. The encoder takes nothing more.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let out = py.detach(|| {
            let enc = self
                .inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| PyValueError::new_err("zstd: the encoder is finished"))?;
            enc.finish().map_err(failed)
        })?;
        Ok(PyBytes::new(py, &out))
    }
}
