//! sluice errors as Python exceptions: the built-in class that fits, so `except
//! FileNotFoundError` works, and `S3Error` (an `OSError`) with the service's details.

use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyOSError, PyPermissionError, PyTimeoutError,
    PyValueError,
};
use pyo3::prelude::*;
use sluice_core::{Error, ErrorKind, PutMode};

pyo3::create_exception!(
    sluice,
    S3Error,
    PyOSError,
    "An S3 request failed: `status` (HTTP status or None), `code` (S3 error code, or Transport / Integrity), `request_id` and `uri`."
);

pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match (e.kind(), &e) {
        (ErrorKind::NotFound, _) => PyFileNotFoundError::new_err(msg),
        (ErrorKind::PermissionDenied, _) => PyPermissionError::new_err(msg),
        (ErrorKind::InvalidInput, _) => PyValueError::new_err(msg),
        (ErrorKind::Timeout, _) => PyTimeoutError::new_err(msg),
        // A file system error keeps its errno, as Python's own would.
        (_, Error::Io { source, .. }) => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, msg)),
            None => PyOSError::new_err(msg),
        },
        _ => s3_error(&e, msg),
    }
}

/// `S3Error`, its `code` the S3 error code of a service error, else the kind's name
/// (Transport, Integrity, Redirect, Cancelled).
fn s3_error(e: &Error, msg: String) -> PyErr {
    let (status, code, request_id) = match e {
        Error::Service {
            status,
            code,
            request_id,
            ..
        } => (Some(*status), code.clone(), request_id.clone()),
        Error::Redirect { moved, .. } => (Some(moved.status), e.kind().to_string(), None),
        _ => (None, e.kind().to_string(), None),
    };
    let uri = e.subject().to_owned();
    Python::attach(|py| {
        let err = S3Error::new_err(msg);
        let v = err.value(py);
        // Setting attributes on a fresh exception cannot fail.
        let _ = v.setattr("status", status);
        let _ = v.setattr("code", code);
        let _ = v.setattr("request_id", request_id);
        let _ = v.setattr("uri", uri);
        err
    })
}

/// A write's error: a `PutMode::Create` that found its key taken is `FileExistsError`, as
/// `open(path, "x")` raises it; the rest as `to_py`.
pub fn write_error(e: Error, mode: &PutMode) -> PyErr {
    if *mode == PutMode::Create && e.is_precondition_failed() {
        return PyFileExistsError::new_err(format!(
            "{}: the object exists (mode \"create\")",
            e.subject()
        ));
    }
    to_py(e)
}

pub fn value_error(option: &str, reason: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{option}: {reason}"))
}
