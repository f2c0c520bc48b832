//! The buffer protocol through the stable ABI of every Python >= 3.9.
//!
//! The wheel is built once for the stable ABI (abi3) from Python 3.9 on. pyo3 offers
//! `__getbuffer__` and `PyBuffer` there only from Python 3.11, the version whose limited API
//! took in `Py_buffer`. But CPython accepts buffer slots in a type spec since 3.9 (bpo-40724),
//! and `Py_buffer`'s layout and the three functions declared here have not changed since
//! Python 3.0 (3.11 froze them as stable ABI). Declared here, they give `sluice.Object`
//! zero-copy views on 3.9 and 3.10 as on later versions, from the same file.

// Filling and releasing a `Py_buffer` is a C API: unsafe by nature.
#![allow(unsafe_code)]

use pyo3::ffi::{Py_ssize_t, PyObject};
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void};

/// CPython's `Py_buffer`, field for field.
#[repr(C)]
pub struct RawView {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: Py_ssize_t,
    itemsize: Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut Py_ssize_t,
    strides: *mut Py_ssize_t,
    suboffsets: *mut Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_SIMPLE`: a flat run of bytes, no format, shape or strides.
const PYBUF_SIMPLE: c_int = 0;
/// `PyBUF_WRITABLE`: the consumer wants to write.
pub const PYBUF_WRITABLE: c_int = 0x0001;

unsafe extern "C" {
    fn PyBuffer_FillInfo(
        view: *mut RawView,
        exporter: *mut PyObject,
        buf: *mut c_void,
        len: Py_ssize_t,
        readonly: c_int,
        flags: c_int,
    ) -> c_int;
    fn PyObject_GetBuffer(exporter: *mut PyObject, view: *mut RawView, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawView);
}

/// Fills `view` with a read-only view of `data`, owned by `exporter` (a new reference to it
/// goes into the view, so `exporter` outlives every view).
///
/// # Safety
///
/// `view` must be the non-null `Py_buffer` that CPython passed to a `bf_getbuffer` slot, and
/// `data` must stay allocated and unmoved as long as `exporter` lives.
pub unsafe fn export_read_only(
    exporter: &Bound<'_, PyAny>,
    view: *mut RawView,
    data: &[u8],
    flags: c_int,
) -> PyResult<()> {
    let len = Py_ssize_t::try_from(data.len())
        .map_err(|_| pyo3::exceptions::PyBufferError::new_err("object too large for a buffer"))?;
    // SAFETY: the caller's promises; PyBuffer_FillInfo only writes `view`'s fields.
    let rc = unsafe {
        PyBuffer_FillInfo(
            view,
            exporter.as_ptr(),
            data.as_ptr() as *mut c_void,
            len,
            1,
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(exporter.py()))
    }
}

/// A flat byte view of a bytes-like object, held (and the exporter's memory pinned) until
/// dropped. Tied to the attached thread: the release needs it.
pub struct LentBuffer<'py> {
    // Boxed: an exporter may keep the view's address until its release.
    view: Box<RawView>,
    _py: Python<'py>,
}

impl<'py> LentBuffer<'py> {
    /// A simple (flat, C-contiguous bytes) view of `obj`; an error if it has none.
    pub fn get(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let mut view = Box::new(RawView {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: the thread is attached (`obj` proves it) and `view` is a writable Py_buffer.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, PYBUF_SIMPLE) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Self {
            view,
            _py: obj.py(),
        })
    }

    /// The bytes, valid while `self` is.
    pub fn bytes(&self) -> &[u8] {
        let len = usize::try_from(self.view.len).unwrap_or(0);
        if len == 0 || self.view.buf.is_null() {
            return &[];
        }
        // SAFETY: a PyBUF_SIMPLE view is `len` contiguous bytes at `buf`, kept allocated by
        // the exporter until the release in `drop`.
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, len) }
    }
}

impl Drop for LentBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: the view was filled by PyObject_GetBuffer and is released once; `_py`
        // ties `self` to the attached thread.
        unsafe { PyBuffer_Release(&mut *self.view) }
    }
}
