//! `sluice.aio`'s awaitables: a call's future is spawned on the tokio runtime and its outcome
//! completes an asyncio future through the loop's `call_soon_threadsafe`, so no thread waits
//! per call and the event loop polls nothing. Cancelling the asyncio future aborts the task,
//! which drops its request and frees its buffers. A call made where no loop runs raises at
//! once; a loop closed before the answer arrives is left alone (nothing can await it).

use crate::client::{Client, objects_of, stat_dict};
use crate::listing::{Entry, Listing};
use crate::object::Object;
use crate::runtime::{Call, runtime};
use crate::writer::{Writer, info_dict};
use futures::FutureExt;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::panic::AssertUnwindSafe;

/// An asyncio future of the running loop that `call`'s outcome completes, made a Python
/// object by `map` (under the GIL, on a runtime thread).
fn awaitable<'py, T: Send + 'static>(
    py: Python<'py>,
    call: Call<T>,
    map: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let (lp, fut) = (event_loop.unbind(), future.clone().unbind());
    let task = runtime()?.spawn(async move {
        // A panic is the call's failure, never a future left pending.
        let out = AssertUnwindSafe(call).catch_unwind().await;
        Python::attach(|py| {
            let outcome = match out {
                Ok(r) => r.and_then(|v| map(py, v)),
                Err(_) => Err(PyRuntimeError::new_err("I/O task failed: it panicked")),
            };
            let (ok, value) = match outcome {
                Ok(v) => (true, v),
                Err(e) => (false, e.into_value(py).into_any()),
            };
            if let Ok(complete) = complete(py) {
                // A closed loop refuses the callback: nothing can await its future any more.
                let _ = lp.call_method1(py, "call_soon_threadsafe", (complete, fut, ok, value));
            }
        });
    });
    future.call_method1("add_done_callback", (Abort(task.abort_handle()),))?;
    Ok(future)
}

/// `awaitable` of a value Python can take as it is.
fn awaitable_of<'py, T>(py: Python<'py>, call: Call<T>) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    awaitable(py, call, |py, v| v.into_py_any(py))
}

/// The done callback of a call's asyncio future: once it is done (answered, or cancelled),
/// its task has nothing left to do; aborting a finished task is a no-op.
#[pyclass(frozen)]
struct Abort(tokio::task::AbortHandle);

#[pymethods]
impl Abort {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.0.abort();
    }
}

/// Sets a call's outcome on its future, on the loop's thread, unless it was cancelled.
#[pyfunction]
fn aio_complete(future: &Bound<'_, PyAny>, ok: bool, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if future.call_method0("done")?.is_truthy()? {
        return Ok(());
    }
    let how = if ok { "set_result" } else { "set_exception" };
    future.call_method1(how, (value,))?;
    Ok(())
}

fn complete(py: Python<'_>) -> PyResult<Py<PyAny>> {
    static COMPLETE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    COMPLETE
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(wrap_pyfunction!(aio_complete, py)?.into_any().unbind())
        })
        .map(|f| f.clone_ref(py))
}

#[pyfunction]
fn aio_get<'py>(py: Python<'py>, client: &Client, uri: String) -> PyResult<Bound<'py, PyAny>> {
    let call = client.get_call(&uri)?;
    awaitable(py, call, move |py, data| {
        Object::new(uri, data).into_py_any(py)
    })
}

#[pyfunction]
#[pyo3(signature = (client, uri, offset, length=None, etag=None))]
fn aio_get_range<'py>(
    py: Python<'py>,
    client: &Client,
    uri: String,
    offset: u64,
    length: Option<u64>,
    etag: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let call = client.get_range_call(&uri, offset, length, etag)?;
    awaitable(py, call, move |py, data| {
        Object::new(uri, data).into_py_any(py)
    })
}

#[pyfunction]
#[pyo3(signature = (client, uri, ranges, coalesce=None, etag=None))]
fn aio_get_ranges<'py>(
    py: Python<'py>,
    client: &Client,
    uri: String,
    ranges: Vec<(i64, i64)>,
    coalesce: Option<u64>,
    etag: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let call = client.get_ranges_call(&uri, ranges, coalesce, etag)?;
    awaitable(py, call, move |py, parts| {
        objects_of(&uri, parts).into_py_any(py)
    })
}

#[pyfunction]
#[pyo3(signature = (client, uris, max_in_flight=None))]
fn aio_get_many<'py>(
    py: Python<'py>,
    client: &Client,
    uris: Vec<String>,
    max_in_flight: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let call = client.get_many_call(&uris, max_in_flight)?;
    awaitable(py, call, move |py, parts| {
        let objects: Vec<Object> = uris
            .into_iter()
            .zip(parts)
            .map(|(u, data)| Object::new(u, data))
            .collect();
        objects.into_py_any(py)
    })
}

#[pyfunction]
fn aio_stat<'py>(py: Python<'py>, client: &Client, uri: String) -> PyResult<Bound<'py, PyAny>> {
    let call = client.head_call(&uri)?;
    awaitable(py, call, move |py, meta| {
        Ok(stat_dict(py, &uri, meta)?.into_any().unbind())
    })
}

#[pyfunction]
fn aio_exists<'py>(py: Python<'py>, client: &Client, uri: &str) -> PyResult<Bound<'py, PyAny>> {
    awaitable_of(py, client.exists_call(uri)?)
}

#[pyfunction]
#[pyo3(signature = (client, uri, data, *, mode="overwrite", if_match=None))]
fn aio_put<'py>(
    py: Python<'py>,
    client: &Client,
    uri: &str,
    data: &Bound<'py, PyAny>,
    mode: &str,
    if_match: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    awaitable_of(py, client.put_call(py, uri, data, mode, if_match)?)
}

#[pyfunction]
fn aio_delete<'py>(py: Python<'py>, client: &Client, uri: &str) -> PyResult<Bound<'py, PyAny>> {
    awaitable_of(py, client.delete_call(uri)?)
}

/// The listing's next entries as they arrive (a page's worth at most); `[]` at its end.
#[pyfunction]
fn aio_list_next<'py>(
    py: Python<'py>,
    mut listing: PyRefMut<'py, Listing>,
) -> PyResult<Bound<'py, PyAny>> {
    let call = listing.next_batch_call()?;
    awaitable(py, call, |py, batch| {
        batch
            .into_iter()
            .map(Entry::from)
            .collect::<Vec<_>>()
            .into_py_any(py)
    })
}

#[pyfunction]
fn aio_write<'py>(
    py: Python<'py>,
    writer: &Writer,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    awaitable_of(py, writer.write_call(py, data)?)
}

#[pyfunction]
fn aio_close<'py>(py: Python<'py>, writer: &Writer) -> PyResult<Bound<'py, PyAny>> {
    let uri = writer.uri().to_owned();
    awaitable(py, writer.close_call()?, move |py, info| {
        Ok(info_dict(py, &uri, &info)?.into_any().unbind())
    })
}

#[pyfunction]
fn aio_abort<'py>(py: Python<'py>, writer: &Writer) -> PyResult<Bound<'py, PyAny>> {
    awaitable_of(py, writer.abort_call()?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(aio_write, m)?)?;
    m.add_function(wrap_pyfunction!(aio_close, m)?)?;
    m.add_function(wrap_pyfunction!(aio_abort, m)?)?;
    m.add_function(wrap_pyfunction!(aio_get, m)?)?;
    m.add_function(wrap_pyfunction!(aio_get_range, m)?)?;
    m.add_function(wrap_pyfunction!(aio_get_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(aio_get_many, m)?)?;
    m.add_function(wrap_pyfunction!(aio_stat, m)?)?;
    m.add_function(wrap_pyfunction!(aio_exists, m)?)?;
    m.add_function(wrap_pyfunction!(aio_put, m)?)?;
    m.add_function(wrap_pyfunction!(aio_delete, m)?)?;
    m.add_function(wrap_pyfunction!(aio_list_next, m)?)?;
    Ok(())
}
