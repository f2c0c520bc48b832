//! `.npz` files for `sluice.compat.s3dlio.generate_npz_bytes`, written by the same code as
//! the benchmark's records (`sluice_core::npz`).

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use sluice_core::npz::{Array, write};

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
