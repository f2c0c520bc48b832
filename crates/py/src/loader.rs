//! `sluice.Dataset` and `sluice.Loader`: the Rust loader, iterated from Python.

use crate::client::{Client, congestion, default_client, endpoint_stats, parse_uri};
use crate::errors::{to_py, value_error};
use crate::object::Object;
use crate::runtime::block;
use crate::runtime::{SIGNAL_CHECK, check_owner, runtime};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sluice_loader::{OnError, Order, Sharding};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::runtime::Runtime;
use tokio::time::timeout;

/// The objects to read: URIs as given, or one listing of a prefix.
#[pyclass(frozen, module = "sluice", name = "Dataset")]
#[derive(Debug, Clone)]
pub struct Dataset {
    pub inner: sluice_loader::Dataset,
}

#[pymethods]
impl Dataset {
    /// From URIs as given: no listing and no HEAD requests.
    #[staticmethod]
    fn from_uris(uris: Vec<String>) -> PyResult<Self> {
        let parsed = uris
            .iter()
            .map(|u| parse_uri(u))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Self {
            inner: sluice_loader::Dataset::from_uris(parsed),
        })
    }

    /// From one recursive listing of `uri` (sizes kept), only keys ending in `suffix`, through
    /// `client` (or a client made from `config`, or the default one).
    #[staticmethod]
    #[pyo3(signature = (uri, suffix=None, client=None, config=None))]
    fn from_prefix(
        py: Python<'_>,
        uri: &str,
        suffix: Option<String>,
        client: Option<Py<Client>>,
        config: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let store = client_store(py, client, None, config)?;
        let prefix = parse_uri(uri)?;
        let inner = block(py, async move {
            sluice_loader::Dataset::from_prefix(store.as_ref(), &prefix, suffix.as_deref()).await
        })?;
        Ok(Self { inner })
    }

    /// Rebuilds a dataset from `__reduce__`'s bytes.
    #[staticmethod]
    fn _from_pickle(data: &[u8]) -> PyResult<Self> {
        let items = pickled::decode(data)
            .map(|r| {
                let (uri, size) = r.map_err(|why| value_error("Dataset pickle", why))?;
                Ok(sluice_loader::Item {
                    uri: parse_uri(uri)?,
                    size,
                    etag: None,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Self {
            inner: sluice_loader::Dataset::from_items(items),
        })
    }

    /// Pickling (spawned DataLoader workers receive the dataset this way): the URIs and the
    /// sizes a listing found, so a worker needs no listing of its own; as one bytes object,
    /// not a Python object per item.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let data = pickled::encode(&slf.get().inner);
        Ok((
            slf.get_type().getattr("_from_pickle")?,
            (PyBytes::new(slf.py(), &data),),
        ))
    }

    /// The URIs, in dataset order.
    #[getter]
    fn uris(&self) -> Vec<String> {
        self.inner.iter().map(|i| i.uri.to_string()).collect()
    }

    /// The `index`th URI (negative counts from the end).
    fn __getitem__(&self, index: isize) -> PyResult<String> {
        let len = self.inner.len() as isize;
        let i = if index < 0 { index + len } else { index };
        usize::try_from(i)
            .ok()
            .and_then(|i| self.inner.get(i))
            .map(|item| item.uri.to_string())
            .ok_or_else(|| {
                pyo3::exceptions::PyIndexError::new_err(format!(
                    "dataset index {index} out of range for {len} objects"
                ))
            })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("<sluice.Dataset {} objects>", self.inner.len())
    }
}

/// Reads a dataset (this reader's shard of it), `prefetch` objects ahead of the consumer
/// besides those its client's requests are reading (default: twice the requests its
/// client's controller finds the store answers faster with); iterate it for
/// `sluice.Object`s.
#[pyclass(frozen, module = "sluice", name = "Loader")]
#[derive(Debug)]
pub struct Loader {
    inner: Mutex<Option<sluice_loader::Loader>>,
    /// The client's store, for its per-endpoint counters.
    store: Arc<dyn sluice_core::ObjectStore>,
    rt: Arc<Runtime>,
    owner: u32,
    len: usize,
    /// What `collect_batch` took from the loader but could not hand out yet (a failure and
    /// what followed it in the batch): the next call, or `next()`, hands it out first, so
    /// every object is returned or raised exactly once.
    pending: Mutex<VecDeque<Loaded>>,
}

type Loaded = sluice_core::Result<sluice_loader::Object>;

fn to_object(o: sluice_loader::Object) -> Object {
    Object::new(o.uri.to_string(), o.data)
}

/// The store to read through: `client`'s, one made from `backend` and `config` (a
/// `sluice.Config`, e.g. rebuilt in a DataLoader worker), or the process's default client's.
fn client_store(
    py: Python<'_>,
    client: Option<Py<Client>>,
    backend: Option<&str>,
    config: Option<Bound<'_, PyAny>>,
) -> PyResult<Arc<dyn sluice_core::ObjectStore>> {
    match client {
        Some(_) if backend.is_some() || config.is_some() => Err(value_error(
            "client",
            "give client= alone, or backend= and config=, not both",
        )),
        Some(c) => c.get().store(),
        None if backend.is_none() && config.is_none() => default_client(py)?.get().store(),
        None => Client::from_config(py, backend.map(str::to_owned), config)?.store(),
    }
}

fn parse_order(order: &str) -> PyResult<Order> {
    match order {
        "completion" => Ok(Order::Completion),
        "input" => Ok(Order::Input),
        o => Err(value_error(
            "order",
            format!("{o:?} is not \"completion\" or \"input\""),
        )),
    }
}

fn parse_on_error(on_error: &str) -> PyResult<OnError> {
    match on_error {
        "raise" => Ok(OnError::FailFast),
        "deliver" => Ok(OnError::Deliver),
        o => Err(value_error(
            "on_error",
            format!("{o:?} is not \"raise\" or \"deliver\""),
        )),
    }
}

impl Loader {
    /// Waits for the next object, checking for signals every `SIGNAL_CHECK`, so Ctrl-C works
    /// even while a request stalls. `None` at the end (or once closed).
    fn next_item(&self, py: Python<'_>) -> PyResult<Option<sluice_core::Result<Object>>> {
        // Before anything held is handed out: in a forked child, those are the parent's.
        check_owner(self.owner, "sluice.Loader")?;
        if let Some(item) = self.pending().pop_front() {
            return Ok(Some(item.map(to_object)));
        }
        loop {
            let waited = self.with(py, |rt, l| {
                rt.block_on(async { timeout(SIGNAL_CHECK, l.next()).await })
            })?;
            match waited {
                None | Some(Ok(None)) => return Ok(None),
                Some(Ok(Some(item))) => return Ok(Some(item.map(to_object))),
                Some(Err(_elapsed)) => py.check_signals()?,
            }
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, VecDeque<Loaded>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `items` back in front of what is pending, in their order.
    fn hold(&self, items: Vec<Loaded>) {
        let mut pending = self.pending();
        for item in items.into_iter().rev() {
            pending.push_front(item);
        }
    }

    /// Locks the loader and runs `f` on it with the GIL released (`None` once closed).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Runtime, &mut sluice_loader::Loader) -> T + Send,
    ) -> PyResult<Option<T>> {
        check_owner(self.owner, "sluice.Loader")?;
        Ok(py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            guard.as_mut().map(|l| f(&self.rt, l))
        }))
    }
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (
        dataset, prefetch=None, order="completion", shuffle=false, seed=0, epoch=0,
        rank=None, world_size=None, worker_id=None, num_workers=None,
        backend=None, client=None, range_threshold=None, chunk_size=None,
        max_requests=None, memory_budget=Some(sluice_loader::DEFAULT_MEMORY_BUDGET), on_error="raise", reuse_buffers=true,
        config=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        dataset: &Dataset,
        prefetch: Option<usize>,
        order: &str,
        shuffle: bool,
        seed: u64,
        epoch: u64,
        rank: Option<usize>,
        world_size: Option<usize>,
        worker_id: Option<usize>,
        num_workers: Option<usize>,
        backend: Option<&str>,
        client: Option<Py<Client>>,
        range_threshold: Option<u64>,
        chunk_size: Option<u64>,
        max_requests: Option<usize>,
        memory_budget: Option<u64>,
        on_error: &str,
        reuse_buffers: bool,
        config: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let store = client_store(py, client, backend, config)?;
        let defaults = sluice_loader::LoaderOptions::default();
        let opts = sluice_loader::LoaderOptions {
            prefetch,
            order: parse_order(order)?,
            shuffle_seed: shuffle.then_some(seed),
            epoch,
            sharding: Sharding {
                rank: rank.unwrap_or(0),
                world_size: world_size.unwrap_or(1),
                worker_id: worker_id.unwrap_or(0),
                num_workers: num_workers.unwrap_or(1),
            },
            range_threshold: range_threshold.unwrap_or(defaults.range_threshold),
            chunk_size: chunk_size.or(defaults.chunk_size),
            max_requests: max_requests.unwrap_or(defaults.max_requests),
            memory_budget,
            on_error: parse_on_error(on_error)?,
            pool: None,
        };
        // The loader shares the process's pool for this window across epochs by default;
        // `reuse_buffers=False` gives this loader a pool of its own.
        let opts = if reuse_buffers {
            opts
        } else {
            opts.with_own_pool()
        };
        let rt = runtime()?;
        let loader = {
            let _in_runtime = rt.enter();
            sluice_loader::Loader::new(store.clone(), &dataset.inner, opts).map_err(to_py)?
        };
        Ok(Self {
            store,
            len: loader.len(),
            inner: Mutex::new(Some(loader)),
            pending: Mutex::default(),
            rt,
            owner: std::process::id(),
        })
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Object>> {
        self.next_item(py)?.transpose().map_err(to_py)
    }

    /// Up to `n` objects, waiting until `n` are ready or the dataset ends; `[]` at the end.
    /// A batch with a failed object returns the objects before it; the next call raises its
    /// error, and the objects after it come after that (with on_error="deliver", catch the
    /// error and call again to go on): every object is returned or raised exactly once.
    fn collect_batch(&self, py: Python<'_>, n: usize) -> PyResult<Vec<Object>> {
        if n == 0 {
            return Err(value_error("n", "must be at least 1"));
        }
        check_owner(self.owner, "sluice.Loader")?;
        let mut batch: Vec<Loaded> = {
            let mut pending = self.pending();
            let held = pending.len().min(n);
            pending.drain(..held).collect()
        };
        // A held failure ends the batch where it stands: no need to wait for more.
        while !batch.iter().any(Result::is_err) {
            // `fill_batch` is cancel-safe: what arrived before a timeout stays in `batch`.
            let waited = self.with(py, |rt, l| {
                // `timeout` needs the runtime's context: build it inside the async block.
                rt.block_on(async { timeout(SIGNAL_CHECK, l.fill_batch(&mut batch, n)).await })
            });
            let interrupted = match waited {
                Ok(None | Some(Ok(()))) => break,
                Ok(Some(Err(_elapsed))) => py.check_signals().err(),
                Err(e) => Some(e),
            };
            if let Some(e) = interrupted {
                // Ctrl-C (or an alarm) while waiting: what arrived is kept for the next call.
                self.hold(batch);
                return Err(e);
            }
        }
        if let Some(failed) = batch.iter().position(Result::is_err) {
            // What follows the failure is handed out by the next calls; the failure itself
            // now if nothing comes before it, else by the next call.
            let mut rest = batch.split_off(failed);
            if failed == 0
                && let Err(e) = rest.remove(0)
            {
                self.hold(rest);
                return Err(to_py(e));
            }
            self.hold(rest);
        }
        Ok(batch
            .into_iter()
            .map(|r| r.map(to_object).expect("only objects before the failure"))
            .collect())
    }

    /// Counters so far: objects, bytes, elapsed_s, mb_per_s, requests, retries, errors,
    /// latency_p50_ms, latency_p99_ms, batch_gap_p50_ms, batch_gap_max_ms, window (objects
    /// allowed in flight now), range_size, over_budget (the most bytes one object read beyond
    /// the memory budget: see `LoaderStats`), congestion (the client's requests in flight, as
    /// `Client.congestion()`) and endpoints (the client's per-endpoint counters).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // Through `with`: an in-flight `next()` holds the lock, so wait without the GIL.
        let stats = self.with(py, |_, l| l.stats())?;
        let d = PyDict::new(py);
        let Some(s) = stats else {
            return Ok(d);
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        d.set_item("objects", s.objects)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("elapsed_s", s.elapsed.as_secs_f64())?;
        d.set_item("mb_per_s", s.mb_per_s)?;
        d.set_item("requests", s.requests)?;
        d.set_item("retries", s.retries)?;
        d.set_item("errors", s.errors)?;
        d.set_item("latency_p50_ms", ms(s.latency_p50))?;
        d.set_item("latency_p99_ms", ms(s.latency_p99))?;
        d.set_item("batch_gap_p50_ms", ms(s.batch_gap_p50))?;
        d.set_item("batch_gap_max_ms", ms(s.batch_gap_max))?;
        d.set_item("window", s.window)?;
        d.set_item("range_size", s.range_size)?;
        d.set_item("over_budget", s.over_budget)?;
        d.set_item("congestion", congestion(py, self.store.as_ref())?)?;
        d.set_item("endpoints", endpoint_stats(py, self.store.as_ref())?)?;
        Ok(d)
    }

    /// Stops reading: requests in flight are cancelled. Objects already delivered stay valid.
    fn close(&self, py: Python<'_>) {
        // Waiting for the lock (an in-flight `next()` holds it) and dropping, which aborts the
        // loader's tasks inside the runtime, both happen without the GIL.
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            let held = std::mem::take(&mut *self.pending());
            let _in_runtime = self.rt.enter();
            drop((taken, held));
        });
    }

    /// Objects this loader delivers (its shard).
    fn __len__(&self) -> usize {
        self.len
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close(py);
    }
}

/// A dataset as pickled: per item, the URI's length (u32, little-endian), the URI, then 0
/// for a size not known or 1 and the size (u64, little-endian).
mod pickled {
    pub(super) fn encode(d: &sluice_loader::Dataset) -> Vec<u8> {
        let mut out = Vec::new();
        for item in d.iter() {
            let uri = item.uri.to_string();
            // A URI is at most a bucket, a scheme and S3's 1,024-byte key, or a path.
            let len = u32::try_from(uri.len()).expect("a URI shorter than 4 GiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(uri.as_bytes());
            match item.size {
                Some(size) => {
                    out.push(1);
                    out.extend_from_slice(&size.to_le_bytes());
                }
                None => out.push(0),
            }
        }
        out
    }

    /// The (URI, size) pairs, or why the bytes are not a pickled dataset.
    pub(super) fn decode(
        mut data: &[u8],
    ) -> impl Iterator<Item = Result<(&str, Option<u64>), String>> {
        std::iter::from_fn(move || {
            if data.is_empty() {
                return None;
            }
            let mut take = |n: usize| -> Result<&[u8], String> {
                if data.len() < n {
                    return Err(format!("truncated: {} bytes left, {n} needed", data.len()));
                }
                let (head, rest) = data.split_at(n);
                data = rest;
                Ok(head)
            };
            let item = (|| {
                let len = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
                let uri = std::str::from_utf8(take(len as usize)?)
                    .map_err(|e| format!("a URI is not UTF-8: {e}"))?;
                let size = match take(1)?[0] {
                    0 => None,
                    1 => Some(u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"))),
                    b => return Err(format!("a size flag of {b}, not 0 or 1")),
                };
                Ok((uri, size))
            })();
            if item.is_err() {
                data = &[];
            }
            Some(item)
        })
    }
}
