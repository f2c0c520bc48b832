//! `sluice.Object`: one object's bytes, exposed through the buffer protocol over the
//! loader's memory. `memoryview(obj)` and `numpy.frombuffer(obj)` copy nothing; the memory
//! returns to the loader's pool when the last Python reference (and every view) is gone.

// The buffer protocol is a C API: filling a `Py_buffer` is unsafe by nature.
#![allow(unsafe_code)]

use crate::buffer::{self, LentBuffer, RawView};
use bytes::Bytes;
use pyo3::exceptions::PyBufferError;
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
    // `cast("B")` made it a flat, C-contiguous run of bytes. As with numpy's GIL-free
    // copies, a caller that mutates the data from another thread meanwhile gets a torn copy.
    let buf = LentBuffer::get(&flat).map_err(not_bytes)?;
    f(buf.bytes())
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
}

// `Object`'s buffer protocol, declared by hand (see `crate::buffer` for why): one more
// `#[pymethods]`-like item set for the class, holding the `bf_getbuffer` slot. Subclasses
// (`BytesView`) inherit it. pyo3's `impl_` items are its macros' interface, pinned with
// pyo3's minor version in the workspace.
pyo3::inventory::submit! {
    <Object as pyo3::impl_::pyclass::PyClassImpl>::Inventory::new(
        pyo3::impl_::pyclass::PyClassItems {
            methods: &[],
            slots: &[pyo3::ffi::PyType_Slot {
                slot: pyo3::ffi::Py_bf_getbuffer,
                pfunc: object_getbuffer as GetBufferProc as *mut std::ffi::c_void,
            }],
        },
    )
}

type GetBufferProc = unsafe extern "C" fn(*mut pyo3::ffi::PyObject, *mut RawView, c_int) -> c_int;

/// The `bf_getbuffer` slot: a read-only view of the object's bytes, without a copy.
unsafe extern "C" fn object_getbuffer(
    slf: *mut pyo3::ffi::PyObject,
    view: *mut RawView,
    flags: c_int,
) -> c_int {
    // SAFETY: CPython calls a slot on an attached thread.
    let py = unsafe { Python::assume_attached() };
    let export = || -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer view to fill"));
        }
        if flags & buffer::PYBUF_WRITABLE != 0 {
            return Err(PyBufferError::new_err(
                "sluice.Object is read-only (copy it with bytearray(obj) to modify)",
            ));
        }
        // SAFETY: `slf` is a live instance of the type (or a subclass) that has this slot.
        let any = unsafe { Bound::from_borrowed_ptr(py, slf) };
        let obj = any.cast::<Object>()?;
        // SAFETY: `view` is CPython's, non-null; the bytes are `Bytes`, which never move and
        // live as long as the object, which the view references.
        unsafe { buffer::export_read_only(&any, view, &obj.get().data, flags) }
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(export)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            e.restore(py);
            -1
        }
        Err(_) => {
            PyBufferError::new_err("sluice.Object: a bug while exporting its buffer").restore(py);
            -1
        }
    }
}
