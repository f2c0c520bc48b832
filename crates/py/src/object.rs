//! `sluice.Object`: one object's bytes, exposed through the buffer protocol over the
//! loader's memory. `memoryview(obj)` and `numpy.frombuffer(obj)` copy nothing; the memory
//! returns to the loader's pool when the last Python reference (and every view) is gone.

// The buffer protocol is a C API: filling a `Py_buffer` is unsafe by nature.
#![allow(unsafe_code)]

use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};
use std::ffi::c_int;

/// Any C-contiguous bytes-like object (bytes, bytearray, memoryview, a numpy array of any
/// dtype) as `Bytes` to upload. A `bytes` object is shared, not copied: it is immutable, so
/// nothing the caller does later can change what is sent (a copy of a 146 MB object into
/// fresh memory cost a third of `sluice.put`'s time, docs/benchmarks.md). Anything else is
/// copied, with the GIL released, since its owner may change it once the call returns.
pub fn bytes_of(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = data.cast_exact::<PyBytes>() {
        let (ptr, len) = (b.as_bytes().as_ptr() as usize, b.as_bytes().len());
        return Ok(Bytes::from_owner(SharedBytes {
            _object: b.clone().unbind(),
            addr: ptr,
            len,
        }));
    }
    let copy = with_lent_bytes(data, |lent| Ok(py.detach(|| lent.to_vec())))?;
    Ok(Bytes::from(copy))
}

/// Runs `f` on the bytes of a contiguous bytes-like object (bytes, bytearray, memoryview,
/// numpy array), lent for the call: they stay allocated (and, for bytearray and numpy,
/// unresizable) until `f` returns. Whatever `f` does with them must end before it returns.
pub fn with_lent_bytes<R>(
    data: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u8]) -> PyResult<R>,
) -> PyResult<R> {
    let not_bytes = |_| {
        crate::errors::value_error(
            "data",
            "must be a contiguous bytes-like object (bytes, bytearray, memoryview, numpy array)",
        )
    };
    let flat = PyMemoryView::from(data)
        .and_then(|m| m.call_method1("cast", ("B",)))
        .map_err(not_bytes)?;
    let buf = PyBuffer::<u8>::get(&flat).map_err(not_bytes)?;
    // SAFETY: `buf` holds a buffer view until after `f` returns, which keeps the exporter's
    // memory allocated and (for bytearray and numpy) unresizable; `cast("B")` made it a flat,
    // C-contiguous run of `len_bytes` bytes. As with numpy's GIL-free copies, a caller that
    // mutates the data from another thread meanwhile gets a torn copy.
    let lent = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) };
    let r = f(lent);
    drop(buf);
    r
}

/// A `bytes` object's contents, held by a reference to it (dropped without the GIL, pyo3
/// defers the decrement) with the address and length of its immutable storage.
struct SharedBytes {
    _object: Py<PyBytes>,
    addr: usize,
    len: usize,
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: a `bytes` object's storage is inline, never moves and never changes, and
        // `_object` keeps the object alive as long as this.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

#[pyclass(frozen, subclass, module = "sluice", name = "Object")]
#[derive(Debug)]
pub struct Object {
    uri: String,
    data: Bytes,
}

impl Object {
    pub fn new(uri: String, data: Bytes) -> Self {
        Self { uri, data }
    }
}

/// s3dlio's name for its zero-copy result (`isinstance(x, s3dlio.BytesView)`, its repr):
/// an `Object` over the same bytes, so everything an `Object` does it does, without a copy.
#[pyclass(frozen, extends = Object, module = "sluice.compat.s3dlio", name = "BytesView")]
#[derive(Debug)]
pub struct BytesView;

#[pymethods]
impl BytesView {
    fn __repr__(slf: &Bound<'_, Self>) -> String {
        format!("BytesView({} bytes)", slf.as_super().get().data.len())
    }
}

/// `obj` as a `BytesView` sharing its bytes (the compat module's results).
#[pyfunction]
pub fn bytes_view(py: Python<'_>, obj: &Bound<'_, Object>) -> PyResult<Py<BytesView>> {
    let o = obj.get();
    let init = PyClassInitializer::from(Object::new(o.uri.clone(), o.data.clone()))
        .add_subclass(BytesView);
    Py::new(py, init)
}

/// An empty `BytesView` named `uri`: s3dlio 0.10's `get_range(uri, offset, 0)`, answered
/// without a request.
#[pyfunction]
pub fn empty_view(py: Python<'_>, uri: String) -> PyResult<Py<BytesView>> {
    Py::new(
        py,
        PyClassInitializer::from(Object::new(uri, Bytes::new())).add_subclass(BytesView),
    )
}

#[pymethods]
impl Object {
    /// The object's `s3://bucket/key`.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The number of bytes (s3dlio's name; `len(obj)` is the same).
    #[getter]
    fn byte_count(&self) -> usize {
        self.data.len()
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }

    /// A copy as `bytes`; the GIL is released while copying.
    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = &self.data;
        PyBytes::new_with(py, data.len(), |dst| {
            py.detach(|| dst.copy_from_slice(data));
            Ok(())
        })
    }

    /// A copy as `bytes` (s3dlio's BytesView name for `bytes(obj)`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.__bytes__(py)
    }

    /// A read-only `memoryview` of the bytes, without a copy (as `memoryview(obj)`).
    fn memoryview<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyMemoryView>> {
        PyMemoryView::from(slf.as_any())
    }

    fn __repr__(&self) -> String {
        format!("<sluice.Object {} ({} bytes)>", self.uri, self.data.len())
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer view to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "sluice.Object is read-only (copy it with bytearray(obj) to modify)",
            ));
        }
        let data = &slf.get().data;
        let len = ffi::Py_ssize_t::try_from(data.len())
            .map_err(|_| PyBufferError::new_err("object too large for a buffer"))?;
        // SAFETY: `view` is non-null and owned by the caller; the bytes live as long as this
        // object, and PyBuffer_FillInfo stores a new reference to it in `view.obj`, so they
        // outlive the view. `Bytes` never moves its data, so the pointer stays valid.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr() as *mut std::ffi::c_void,
                len,
                1,
                flags,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(slf.py()))
        }
    }
}
