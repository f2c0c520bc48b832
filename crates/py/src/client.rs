//! `sluice.Client` and the module-level functions that use a default client from the
//! environment.

use crate::errors::{to_py, value_error, write_error};
use crate::listing::Listing;
use crate::object::{Object, bytes_of};
use crate::runtime::{Call, PerProcess, block, call, check_owner, run};
use crate::writer::Writer;
use bytes::Bytes;
use futures::TryStreamExt;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::{
    ByteRange, Error, GetOptions, ListEntry, ObjectMeta, ObjectStore, ObjectUri, PutMode,
    PutOptions, PutPayload, StoreConfig, WriteOptions,
};
use sluice_core::{ObjectStoreExt, RangesOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

pub fn parse_uri(uri: &str) -> PyResult<ObjectUri> {
    ObjectUri::parse(uri).map_err(to_py)
}

/// A connection to one S3 endpoint through one client stack, configured from the standard
/// AWS environment (AWS_ENDPOINT_URL_S3, AWS_REGION, credentials chain, AWS_CA_BUNDLE, ...)
/// with the arguments given here taking precedence.
#[pyclass(frozen, module = "sluice", name = "Client")]
#[derive(Debug)]
pub struct Client {
    store: Arc<dyn ObjectStore>,
    write_options: WriteOptions,
    owner: u32,
    /// The `sluice.Config` it was made with.
    config: Py<PyAny>,
}

/// What a `Client` is made with: its arguments, else its `config=`'s fields.
struct Settings {
    backend: Option<String>,
    endpoint: Option<String>,
    region: Option<String>,
    ca_bundle: Option<PathBuf>,
    max_attempts: Option<u32>,
    connect_timeout: Option<f64>,
    first_byte_timeout: Option<f64>,
    endpoints: Option<Vec<String>>,
    profile: Option<String>,
    unsigned: bool,
    stall_timeout: Option<f64>,
}

impl Settings {
    /// The environment's configuration with these settings over it.
    fn store_config(&self, py: Python<'_>) -> PyResult<StoreConfig> {
        let profile = self.profile.clone();
        let mut cfg: StoreConfig = block(py, async move {
            StoreConfig::from_env_with_profile(profile.as_deref()).await
        })?;
        if self.endpoint.is_some() && self.endpoints.is_some() {
            return Err(value_error(
                "endpoints",
                "give endpoint= or endpoints=, not both",
            ));
        }
        if let Some(e) = &self.endpoint {
            cfg.set_endpoint("endpoint", e).map_err(to_py)?;
        }
        if let Some(list) = &self.endpoints {
            cfg.set_endpoints("endpoints", list.iter().map(String::as_str))
                .map_err(to_py)?;
        }
        if let Some(r) = &self.region {
            cfg.set_region("region", r).map_err(to_py)?;
        }
        if self.ca_bundle.is_some() {
            cfg.ca_bundle = self.ca_bundle.clone();
        }
        if let Some(n) = self.max_attempts {
            if n == 0 {
                return Err(value_error("max_attempts", "must be at least 1"));
            }
            cfg.retry.max_attempts = n;
        }
        if let Some(t) = self.connect_timeout {
            cfg.timeouts.connect = seconds("connect_timeout", t)?;
        }
        if let Some(t) = self.first_byte_timeout {
            cfg.timeouts.first_byte = seconds("first_byte_timeout", t)?;
        }
        if let Some(t) = self.stall_timeout {
            cfg.timeouts.stall = seconds("stall_timeout", t)?;
        }
        if self.unsigned {
            cfg.credentials = sluice_core::CredentialsCache::anonymous();
        }
        Ok(cfg)
    }

    /// These settings as a `sluice.Config` (fields left unset stay `None`).
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let kw = PyDict::new(py);
        kw.set_item("backend", &self.backend)?;
        kw.set_item("endpoint", &self.endpoint)?;
        kw.set_item("endpoints", &self.endpoints)?;
        kw.set_item("region", &self.region)?;
        kw.set_item("profile", &self.profile)?;
        kw.set_item("unsigned", self.unsigned)?;
        kw.set_item("ca_bundle", &self.ca_bundle)?;
        kw.set_item("max_attempts", self.max_attempts)?;
        kw.set_item("connect_timeout", self.connect_timeout)?;
        kw.set_item("first_byte_timeout", self.first_byte_timeout)?;
        kw.set_item("stall_timeout", self.stall_timeout)?;
        py.import("sluice._config")?
            .getattr("Config")?
            .call((), Some(&kw))
    }
}

impl Client {
    pub fn store(&self) -> PyResult<Arc<dyn ObjectStore>> {
        check_owner(self.owner, "sluice.Client")?;
        Ok(self.store.clone())
    }

    /// A client from the environment, with `backend` and a `sluice.Config`'s settings over it.
    pub fn from_config(
        py: Python<'_>,
        backend: Option<String>,
        config: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::new(
            py, backend, None, None, None, None, None, None, None, None, None, None, config,
        )
    }

    /// How this client's streaming uploads cut parts (SLUICE_MULTIPART_PART_SIZE).
    pub fn write_options(&self) -> WriteOptions {
        self.write_options.clone()
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (backend=None, endpoint=None, region=None, ca_bundle=None, max_attempts=None, connect_timeout=None, first_byte_timeout=None, endpoints=None, profile=None, unsigned=None, stall_timeout=None, config=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        py: Python<'_>,
        backend: Option<String>,
        endpoint: Option<String>,
        region: Option<String>,
        ca_bundle: Option<PathBuf>,
        max_attempts: Option<u32>,
        connect_timeout: Option<f64>,
        first_byte_timeout: Option<f64>,
        endpoints: Option<Vec<String>>,
        profile: Option<String>,
        unsigned: Option<bool>,
        stall_timeout: Option<f64>,
        config: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // Arguments given here win over the `config`'s (a `sluice.Config`), which win over
        // the environment.
        let from = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            match &config {
                Some(c) => Ok(Some(c.getattr(name)?).filter(|v| !v.is_none())),
                None => Ok(None),
            }
        };
        macro_rules! pick {
            ($arg:ident) => {
                match $arg {
                    Some(v) => Some(v),
                    None => from(stringify!($arg))?
                        .map(|v| v.extract())
                        .transpose()
                        .map_err(|e| value_error(concat!("config.", stringify!($arg)), e))?,
                }
            };
        }
        // endpoint= and endpoints= are one choice: either given here wins over both of the
        // config's.
        let (endpoint, endpoints) = if endpoint.is_some() || endpoints.is_some() {
            (endpoint, endpoints)
        } else {
            (pick!(endpoint), pick!(endpoints))
        };
        let s = Settings {
            backend: pick!(backend),
            endpoint,
            region: pick!(region),
            ca_bundle: pick!(ca_bundle),
            max_attempts: pick!(max_attempts),
            connect_timeout: pick!(connect_timeout),
            first_byte_timeout: pick!(first_byte_timeout),
            endpoints,
            profile: pick!(profile),
            unsigned: pick!(unsigned).unwrap_or(false),
            stall_timeout: pick!(stall_timeout),
        };
        let cfg = s.store_config(py)?;
        let write_options = WriteOptions::from_config(&cfg);
        let store = sluice::registry::open(s.backend.as_deref(), cfg).map_err(to_py)?;
        Ok(Self {
            store,
            write_options,
            owner: std::process::id(),
            config: s.to_python(py)?.unbind(),
        })
    }

    /// The settings this client was made with, as a `sluice.Config` (what it pickles as).
    #[getter]
    fn config(&self, py: Python<'_>) -> Py<PyAny> {
        self.config.clone_ref(py)
    }

    /// A client pickles as its `config`: unpickled in another process (a DataLoader worker,
    /// say), it is a new client there, with its own connections.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Py<PyAny>,))> {
        let make = py.import("sluice._config")?.getattr("_client")?;
        Ok((make, (self.config.clone_ref(py),)))
    }

    /// The client stack in use: "hyper", "awssdk" or "objectstore".
    #[getter]
    fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// What each endpoint has served, for a client made with `endpoints=` (or with
    /// S3_ENDPOINT_URIS set); empty otherwise.
    fn endpoint_stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        endpoint_stats(py, self.store.as_ref())
    }

    /// The requests in flight this client allows now and what set them ({"limit", "max",
    /// "adaptive", "rate", "throttled", "cuts", "last"}); None for a client of local files
    /// only.
    fn congestion<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        congestion(py, self.store.as_ref())
    }

    /// The whole object.
    fn get(&self, py: Python<'_>, uri: &str) -> PyResult<Object> {
        let data = run(py, self.get_call(uri)?)?;
        Ok(Object::new(uri.to_owned(), data))
    }

    /// `length` bytes from `offset` (to the end when `length` is None); with `etag`, of that
    /// version only (`If-Match`: another version is an integrity error, not its bytes).
    #[pyo3(signature = (uri, offset, length=None, etag=None))]
    fn get_range(
        &self,
        py: Python<'_>,
        uri: &str,
        offset: u64,
        length: Option<u64>,
        etag: Option<String>,
    ) -> PyResult<Object> {
        let data = run(py, self.get_range_call(uri, offset, length, etag)?)?;
        Ok(Object::new(uri.to_owned(), data))
    }

    /// Each `(start, end)` byte range of the object (end exclusive), in the order given, as
    /// zero-copy `Object`s: ranges at most `coalesce` bytes apart (default 1 MiB) read by
    /// one request, all requests at once, all of one version (`etag`, else the first
    /// answer's). A range past the end is clipped to it; one that starts at or past the end,
    /// a negative or a reversed one is an error naming it.
    #[pyo3(signature = (uri, ranges, coalesce=None, etag=None))]
    fn get_ranges(
        &self,
        py: Python<'_>,
        uri: &str,
        ranges: Vec<(i64, i64)>,
        coalesce: Option<u64>,
        etag: Option<String>,
    ) -> PyResult<Vec<Object>> {
        let parts = run(py, self.get_ranges_call(uri, ranges, coalesce, etag)?)?;
        Ok(objects_of(uri, parts))
    }

    /// Every object, `max_in_flight` at a time (None: as many as the client's controller
    /// finds the store answers faster with), returned in the order given.
    #[pyo3(signature = (uris, max_in_flight=None))]
    fn get_many(
        &self,
        py: Python<'_>,
        uris: Vec<String>,
        max_in_flight: Option<usize>,
    ) -> PyResult<Vec<Object>> {
        let objects = run(py, self.get_many_call(&uris, max_in_flight)?)?;
        Ok(uris
            .into_iter()
            .zip(objects)
            .map(|(u, data)| Object::new(u, data))
            .collect())
    }

    /// URIs under `uri` (a prefix). Not recursive: objects directly under it and the
    /// sub-prefixes, ending in "/".
    #[pyo3(signature = (uri, recursive=false))]
    fn list(&self, py: Python<'_>, uri: &str, recursive: bool) -> PyResult<Vec<String>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        if recursive {
            // Every key: several pages in flight, in key order.
            return block(py, async move {
                let mut uris = Vec::new();
                sluice_core::list_parallel_into(
                    store.as_ref(),
                    &u,
                    sluice_core::LIST_WORKERS,
                    |part: &mut Vec<String>, m| part.push(m.uri.to_string()),
                    |part| uris.extend(part),
                )
                .await
                .map(|()| uris)
            });
        }
        let entries: Vec<ListEntry> =
            block(py, async move { store.list(&u, false).try_collect().await })?;
        Ok(entries.iter().map(|e| e.uri().to_string()).collect())
    }

    /// The entries under `uri` (a prefix) as an iterator that lists page by page while you
    /// iterate: `ListEntry`s with `uri`, `key`, `size`, `etag`, `last_modified`; not
    /// recursive, sub-prefixes come as entries with `is_prefix` (and `size` None).
    #[pyo3(signature = (uri, recursive=false))]
    fn list_objects(&self, _py: Python<'_>, uri: &str, recursive: bool) -> PyResult<Listing> {
        Listing::start(self.store()?, parse_uri(uri)?, recursive)
    }

    /// {"uri", "size", "etag", "last_modified" (seconds since the epoch, or None)}.
    fn stat<'py>(&self, py: Python<'py>, uri: &str) -> PyResult<Bound<'py, PyDict>> {
        let meta = run(py, self.head_call(uri)?)?;
        stat_dict(py, uri, meta)
    }

    /// Whether the object exists (HEAD; other failures raise).
    fn exists(&self, py: Python<'_>, uri: &str) -> PyResult<bool> {
        run(py, self.exists_call(uri)?)
    }

    /// Uploads any bytes-like object (multipart at/above SLUICE_MULTIPART_THRESHOLD).
    /// Returns the ETag. `mode="create"` writes only if the key is free (S3's
    /// `If-None-Match: *`; `FileExistsError` if not); `if_match=etag` only over that version
    /// (`S3Error` with code `PreconditionFailed` if it changed).
    #[pyo3(signature = (uri, data, *, mode="overwrite", if_match=None))]
    fn put(
        &self,
        py: Python<'_>,
        uri: &str,
        data: &Bound<'_, PyAny>,
        mode: &str,
        if_match: Option<String>,
    ) -> PyResult<Option<String>> {
        run(py, self.put_call(py, uri, data, mode, if_match)?)
    }

    /// A streaming upload: `write` chunks, then `close` (or `abort`). Parts of `part_size`
    /// bytes (default SLUICE_MULTIPART_PART_SIZE) upload while you write, `max_in_flight` at
    /// a time (not set: as many as pay, in one window for all the client's uploads); dropped
    /// unfinished, the upload is aborted when `abort_on_drop`.
    #[pyo3(signature = (uri, part_size=None, max_in_flight=None, abort_on_drop=true, mode="overwrite"))]
    pub fn writer(
        &self,
        py: Python<'_>,
        uri: &str,
        part_size: Option<u64>,
        max_in_flight: Option<usize>,
        abort_on_drop: bool,
        mode: &str,
    ) -> PyResult<Writer> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        let mut opts = self.write_options.clone();
        opts.put.mode = put_mode(mode, None)?;
        if let Some(p) = part_size {
            opts.set_part_size(p);
        }
        if let Some(m) = max_in_flight {
            opts.set_max_in_flight(m);
        }
        opts.abort_on_drop = abort_on_drop;
        let create = opts.put.mode.clone();
        let w = block(py, async move { store.writer(&u, opts).await })?;
        Ok(Writer::new(uri.to_owned(), w, create))
    }

    /// Deletes the object (deleting a missing key succeeds, as on S3).
    fn delete(&self, py: Python<'_>, uri: &str) -> PyResult<()> {
        run(py, self.delete_call(uri)?)
    }

    fn __repr__(&self) -> String {
        format!("<sluice.Client backend={}>", self.store.backend())
    }
}

/// A client dropped in a forked child (fsspec's fork hook clears its cache of file systems,
/// and with it their clients) leaks its store: the store's connections and tasks belong to
/// the parent's runtime, whose threads do not exist in the child, and dropping them wakes
/// that runtime's scheduler, whose lock a parent thread may have held at the fork.
impl Drop for Client {
    fn drop(&mut self) {
        if std::process::id() != self.owner {
            std::mem::forget(self.store.clone());
        }
    }
}

/// The calls behind `Client`'s methods, shared by the blocking API and `sluice.aio`.
impl Client {
    pub(crate) fn get_call(&self, uri: &str) -> PyResult<Call<Bytes>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        Ok(call(async move {
            sluice_loader::get_one(&store, &u, &GetOptions::default(), None).await
        }))
    }

    pub(crate) fn get_range_call(
        &self,
        uri: &str,
        offset: u64,
        length: Option<u64>,
        etag: Option<String>,
    ) -> PyResult<Call<Bytes>> {
        let range = match length {
            None => ByteRange::from_offset(offset),
            Some(0) => return Ok(Box::pin(async { Ok(Bytes::new()) })),
            Some(n) => {
                let end = offset
                    .checked_add(n)
                    .ok_or_else(|| value_error("length", "offset + length overflows"))?;
                ByteRange::new(offset, end).map_err(to_py)?
            }
        };
        let store = self.store()?;
        let u = parse_uri(uri)?;
        let opts = GetOptions {
            range: Some(range),
            if_match: etag,
        };
        Ok(call(async move {
            sluice_loader::get_one(&store, &u, &opts, length).await
        }))
    }

    pub(crate) fn get_ranges_call(
        &self,
        uri: &str,
        ranges: Vec<(i64, i64)>,
        coalesce: Option<u64>,
        etag: Option<String>,
    ) -> PyResult<Call<Vec<Bytes>>> {
        let ranges = ranges
            .into_iter()
            .map(|(s, e)| match (u64::try_from(s), u64::try_from(e)) {
                (Ok(s), Ok(e)) if s <= e => Ok(s..e),
                _ => Err(value_error(
                    "ranges",
                    format!(
                        "({s}, {e}) is not a byte range: start and end must be 0 or more, start <= end"
                    ),
                )),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let store = self.store()?;
        let u = parse_uri(uri)?;
        let mut opts = RangesOptions {
            if_match: etag,
            ..RangesOptions::default()
        };
        if let Some(gap) = coalesce {
            opts.coalesce = gap;
        }
        Ok(call(async move {
            store.get_ranges_with(&u, &ranges, &opts).await
        }))
    }

    pub(crate) fn get_many_call(
        &self,
        uris: &[String],
        max_in_flight: Option<usize>,
    ) -> PyResult<Call<Vec<Bytes>>> {
        if max_in_flight == Some(0) {
            return Err(value_error("max_in_flight", "must be at least 1"));
        }
        let store = self.store()?;
        let parsed = uris
            .iter()
            .map(|u| parse_uri(u))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(call(async move {
            let objects = sluice_loader::get_many(store, parsed, max_in_flight).await?;
            Ok(objects.into_iter().map(|o| o.data).collect())
        }))
    }

    pub(crate) fn head_call(&self, uri: &str) -> PyResult<Call<ObjectMeta>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        Ok(call(async move { store.head(&u).await }))
    }

    pub(crate) fn exists_call(&self, uri: &str) -> PyResult<Call<bool>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        Ok(call(async move {
            match store.head(&u).await {
                Ok(_) => Ok(true),
                Err(Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }))
    }

    pub(crate) fn put_call(
        &self,
        py: Python<'_>,
        uri: &str,
        data: &Bound<'_, PyAny>,
        mode: &str,
        if_match: Option<String>,
    ) -> PyResult<Call<Option<String>>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        let opts = PutOptions {
            mode: put_mode(mode, if_match)?,
            ..PutOptions::default()
        };
        let payload = bytes_of(py, data)?;
        Ok(Box::pin(async move {
            match store.put_opts(&u, PutPayload(payload), &opts).await {
                Ok(info) => Ok(info.etag),
                Err(e) => Err(write_error(e, &opts.mode)),
            }
        }))
    }

    pub(crate) fn delete_call(&self, uri: &str) -> PyResult<Call<()>> {
        let store = self.store()?;
        let u = parse_uri(uri)?;
        Ok(call(async move { store.delete(&u).await }))
    }
}

/// Each of `parts` as an `Object` of `uri`.
pub(crate) fn objects_of(uri: &str, parts: Vec<Bytes>) -> Vec<Object> {
    parts
        .into_iter()
        .map(|data| Object::new(uri.to_owned(), data))
        .collect()
}

/// What `stat` returns: {"uri", "size", "etag", "last_modified"}.
pub(crate) fn stat_dict<'py>(
    py: Python<'py>,
    uri: &str,
    meta: ObjectMeta,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("uri", uri)?;
    d.set_item("size", meta.size)?;
    d.set_item("etag", meta.etag)?;
    d.set_item(
        "last_modified",
        meta.last_modified
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64()),
    )?;
    Ok(d)
}

/// `store`'s requests in flight and what set them, as a `sluice.Congestion` dict; None for a
/// store of local files only.
pub fn congestion<'py>(
    py: Python<'py>,
    store: &dyn sluice_core::ObjectStore,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(c) = store.congestion() else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("limit", c.limit)?;
    d.set_item("max", c.max)?;
    d.set_item("adaptive", c.adaptive)?;
    d.set_item("rate", c.rate)?;
    d.set_item("throttled", c.throttled)?;
    d.set_item("cuts", c.cuts)?;
    d.set_item("last", c.last.map(|d| d.to_string()))?;
    Ok(Some(d))
}

/// `store`'s per-endpoint counters as `sluice.EndpointStats` dicts.
pub fn endpoint_stats<'py>(
    py: Python<'py>,
    store: &dyn sluice_core::ObjectStore,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    store
        .endpoint_stats()
        .into_iter()
        .map(|e| {
            let d = PyDict::new(py);
            d.set_item("url", e.url.as_str())?;
            d.set_item("requests", e.requests)?;
            d.set_item("failures", e.failures)?;
            d.set_item("bytes_read", e.bytes_read)?;
            d.set_item("bytes_written", e.bytes_written)?;
            d.set_item("in_flight", e.in_flight)?;
            d.set_item("down", e.down)?;
            Ok(d)
        })
        .collect()
}

/// A timeout given in seconds from Python: positive and finite.
fn seconds(option: &str, t: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(t)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| value_error(option, format!("{t} is not a positive number of seconds")))
}

static DEFAULT: PerProcess<Py<Client>> = PerProcess::new();

/// The module-level functions' client: from the environment, one per process.
pub fn default_client(py: Python<'_>) -> PyResult<Py<Client>> {
    DEFAULT
        .get_or_try_init(|| Py::new(py, Client::from_config(py, None, None)?))
        .map(|c| c.clone_ref(py))
}

macro_rules! delegate {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[pyfunction]
        $(#[$m])*
        pub fn $name(py: Python<'_>, $($arg: $ty),*) -> PyResult<$ret> {
            default_client(py)?.get().$name(py, $($arg),*)
        }
    };
}

delegate!(
    /// `Client().get` on the default client.
    fn get(uri: &str) -> Object
);
delegate!(
    #[pyo3(signature = (uri, offset, length=None, etag=None))]
    fn get_range(uri: &str, offset: u64, length: Option<u64>, etag: Option<String>) -> Object
);
delegate!(
    #[pyo3(signature = (uri, ranges, coalesce=None, etag=None))]
    fn get_ranges(uri: &str, ranges: Vec<(i64, i64)>, coalesce: Option<u64>, etag: Option<String>) -> Vec<Object>
);
delegate!(
    #[pyo3(signature = (uris, max_in_flight=None))]
    fn get_many(uris: Vec<String>, max_in_flight: Option<usize>) -> Vec<Object>
);
delegate!(
    #[pyo3(signature = (uri, recursive=false))]
    fn list(uri: &str, recursive: bool) -> Vec<String>
);
delegate!(
    #[pyo3(signature = (uri, recursive=false))]
    fn list_objects(uri: &str, recursive: bool) -> Listing
);
delegate!(fn exists(uri: &str) -> bool);
delegate!(
    #[pyo3(signature = (uri, part_size=None, max_in_flight=None, abort_on_drop=true, mode="overwrite"))]
    fn writer(uri: &str, part_size: Option<u64>, max_in_flight: Option<usize>, abort_on_drop: bool, mode: &str) -> Writer
);
delegate!(fn delete(uri: &str) -> ());

#[pyfunction]
pub fn stat<'py>(py: Python<'py>, uri: &str) -> PyResult<Bound<'py, PyDict>> {
    default_client(py)?.get().stat(py, uri)
}

/// `Client().endpoint_stats` on the default client: what each endpoint of
/// S3_ENDPOINT_URIS has served this process (DataLoader workers report it from there).
#[pyfunction(name = "endpoint_stats")]
pub fn default_endpoint_stats(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    endpoint_stats(py, default_client(py)?.get().store.as_ref())
}

/// Every setting sluice reads (`sluice_core::settings::ALL`), as dicts: `name`, `env` (the
/// variables, first found wins), `flag` (the CLI's), `python` (the `Client` keyword), `default`
/// and `doc`; `docs/configuration.md` is the same table.
#[pyfunction]
pub fn settings(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    sluice_core::settings::ALL
        .iter()
        .map(|s| {
            let i = s.info();
            let d = PyDict::new(py);
            d.set_item("name", i.name)?;
            d.set_item("env", i.env.to_vec())?;
            d.set_item("flag", i.flag)?;
            d.set_item("python", i.python)?;
            d.set_item("default", i.default)?;
            d.set_item("doc", i.doc)?;
            Ok(d)
        })
        .collect()
}

/// What this process's shared buffer pools hold now, as `sluice.BufferPoolStats` dicts: the
/// memory kept touched for the next objects (idle), and what delivered objects still hold.
#[pyfunction]
pub fn buffer_pools(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    sluice_loader::BufferPool::process_pools()
        .into_iter()
        .map(|p| {
            let d = PyDict::new(py);
            d.set_item("pool", p.name)?;
            d.set_item("idle_buffers", p.idle_buffers)?;
            d.set_item("idle_bytes", p.idle_bytes)?;
            d.set_item("held_bytes", p.held_bytes)?;
            d.set_item("peak_held_bytes", p.peak_held_bytes)?;
            d.set_item("idle_cap_bytes", p.idle_cap_bytes)?;
            Ok(d)
        })
        .collect()
}

#[pyfunction]
#[pyo3(signature = (uri, data, *, mode="overwrite", if_match=None))]
pub fn put(
    py: Python<'_>,
    uri: &str,
    data: &Bound<'_, PyAny>,
    mode: &str,
    if_match: Option<String>,
) -> PyResult<Option<String>> {
    default_client(py)?.get().put(py, uri, data, mode, if_match)
}

/// A write's `mode` ("overwrite" or "create") and `if_match` as one `PutMode`.
fn put_mode(mode: &str, if_match: Option<String>) -> PyResult<PutMode> {
    match (mode, if_match) {
        ("overwrite", None) => Ok(PutMode::Overwrite),
        ("overwrite", Some(etag)) => Ok(PutMode::Update(etag)),
        ("create", None) => Ok(PutMode::Create),
        ("create", Some(_)) => Err(value_error(
            "if_match",
            "cannot be given with mode=\"create\" (a new object has no version to match)",
        )),
        (other, _) => Err(value_error(
            "mode",
            format!("{other:?} is not \"overwrite\" or \"create\""),
        )),
    }
}
