//! The `sluice._native` extension module; the `sluice` package re-exports it (see
//! `python/sluice/__init__.py`). Every call that waits on the network or copies object
//! bytes releases the GIL.

#![warn(missing_docs)]

mod aio;
mod buffer;
mod client;
mod compress;
mod errors;
mod listing;
mod loader;
mod logging;
mod npz;
mod object;
mod parquet;
mod runtime;
mod testing;
mod writer;

use pyo3::prelude::*;

/// Pool buffers may live in a shared-memory arena that outlives the process
/// (`SLUICE_SHM_POOL`); every other allocation is the system allocator's.
#[global_allocator]
static ALLOC: sluice_loader::shm::PoolAlloc = sluice_loader::shm::PoolAlloc;

/// Closes the op-log's open frame (`SLUICE_OP_LOG`), so that every line logged so far is
/// readable; `sluice._oplog` calls it at exit.
#[pyfunction]
fn finish_op_log(py: Python<'_>) {
    py.detach(sluice_core::oplog::finish_all);
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::install()?;
    m.add_class::<client::Client>()?;
    m.add_class::<object::Object>()?;
    m.add_class::<object::BytesView>()?;
    m.add_class::<compress::ZstdEncoder>()?;
    m.add_function(wrap_pyfunction!(object::bytes_view, m)?)?;
    m.add_function(wrap_pyfunction!(object::empty_view, m)?)?;
    m.add_class::<loader::Dataset>()?;
    m.add_class::<loader::Loader>()?;
    m.add_class::<testing::TestServer>()?;
    m.add_class::<testing::HostileServer>()?;
    m.add_class::<writer::Writer>()?;
    m.add_class::<listing::Entry>()?;
    m.add_class::<listing::Listing>()?;
    m.add("S3Error", m.py().get_type::<errors::S3Error>())?;
    m.add_function(wrap_pyfunction!(client::get, m)?)?;
    m.add_function(wrap_pyfunction!(client::get_range, m)?)?;
    m.add_function(wrap_pyfunction!(client::get_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(client::get_many, m)?)?;
    m.add_function(wrap_pyfunction!(client::list, m)?)?;
    m.add_function(wrap_pyfunction!(client::list_objects, m)?)?;
    m.add_function(wrap_pyfunction!(logging::_next_log, m)?)?;
    m.add_function(wrap_pyfunction!(client::stat, m)?)?;
    m.add_function(wrap_pyfunction!(client::default_endpoint_stats, m)?)?;
    m.add_function(wrap_pyfunction!(client::settings, m)?)?;
    m.add_function(wrap_pyfunction!(client::buffer_pools, m)?)?;
    m.add_function(wrap_pyfunction!(client::exists, m)?)?;
    m.add_function(wrap_pyfunction!(client::put, m)?)?;
    m.add_function(wrap_pyfunction!(client::delete, m)?)?;
    m.add_function(wrap_pyfunction!(client::writer, m)?)?;
    m.add_function(wrap_pyfunction!(testing::pattern, m)?)?;
    m.add_function(wrap_pyfunction!(testing::hostile_cases, m)?)?;
    m.add_function(wrap_pyfunction!(npz::write_npz, m)?)?;
    m.add_function(wrap_pyfunction!(npz::random_npz, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::set_runtime_threads, m)?)?;
    m.add_function(wrap_pyfunction!(finish_op_log, m)?)?;
    parquet::register(m)?;
    aio::register(m)?;
    m.add("backends", sluice::registry::compiled())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
