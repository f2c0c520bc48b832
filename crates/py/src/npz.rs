//! `.npz` files for `sluice.compat.s3dlio.generate_npz_bytes`, written by the same code as
//! the benchmark's records (`sluice_testdata::npz`).

use crate::errors::value_error;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use sluice_testdata::npz::{Array, write};
use sluice_testdata::pattern;

/// An .npz as numpy.savez writes it, of `arrays`: (name, dtype descr, shape, content in C
/// order) each. The content must already be `shape`'s worth of `descr` elements.
#[pyfunction]
pub fn write_npz(
    py: Python<'_>,
    arrays: Vec<(String, String, Vec<usize>, PyBackedBytes)>,
) -> Bound<'_, PyBytes> {
    let out = py.detach(|| {
        let arrays: Vec<Array<'_>> = arrays
            .iter()
            .map(|(name, descr, shape, data)| Array {
                name,
                descr,
                shape,
                data,
            })
            .collect();
        write(&arrays)
    });
    PyBytes::new(py, &out)
}

/// An .npz of DLIO's records as s3dlio generates them: `x` of exactly `shape` elements of
/// `descr` (`itemsize` bytes each), filled with incompressible pseudo-random bytes (the same
/// on every call), and `y`, `num_samples` int64 zeros. Incompressible matters: a store that
/// compresses would otherwise look faster than it is.
#[pyfunction]
pub fn random_npz<'py>(
    py: Python<'py>,
    shape: Vec<usize>,
    descr: &str,
    itemsize: usize,
    num_samples: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let len = shape
        .iter()
        .try_fold(itemsize, |acc, d| acc.checked_mul(*d))
        .ok_or_else(|| {
            value_error(
                "shape",
                format!("{shape:?} of {itemsize}-byte elements overflows"),
            )
        })?;
    let y_len = num_samples
        .checked_mul(8)
        .ok_or_else(|| value_error("num_samples", "too large"))?;
    let out = py.detach(|| {
        let mut x = vec![0u8; len];
        pattern::fill("sluice-npz", 0, &mut x);
        let y = vec![0u8; y_len];
        let y_shape = [num_samples];
        write(&[
            Array {
                name: "x",
                descr,
                shape: &shape,
                data: &x,
            },
            Array {
                name: "y",
                descr: "<i8",
                shape: &y_shape,
                data: &y,
            },
        ])
    });
    Ok(PyBytes::new(py, &out))
}
