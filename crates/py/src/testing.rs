//! `sluice.testing.TestServer`: sluice's S3 test server (s3s, in memory, http + https,
//! SigV4, fault injection) inside the Python process, for users' tests and ours.

use crate::errors::value_error;
use crate::runtime::{check_owner, runtime};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyDict};
use sluice_testserver::{DEFAULT_BUCKET, Fault, ServerOptions, ServiceProfile, Sink};
use std::sync::Mutex;
use std::time::Duration;

#[pyclass(frozen, module = "sluice.testing", name = "TestServer")]
#[derive(Debug)]
pub struct TestServer {
    server: Mutex<Option<sluice_testserver::TestServer>>,
    http: String,
    https: String,
    ca_bundle: String,
    access_key: String,
    secret_key: String,
    owner: u32,
}

impl TestServer {
    fn with<T>(&self, f: impl FnOnce(&sluice_testserver::TestServer) -> T) -> PyResult<T> {
        check_owner(self.owner, "sluice.testing.TestServer")?;
        let guard = self.server.lock().unwrap_or_else(|p| p.into_inner());
        let s = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("the test server was stopped"))?;
        Ok(f(s))
    }
}

#[pymethods]
impl TestServer {
    /// Starts a server on 127.0.0.1 (free ports), http and https, with one bucket
    /// ("sluice-test") and the default test credentials. `profile` makes it behave like a
    /// real store ("loopback", "s3-standard", "s3-express", "on-prem"); keywords override one
    /// value each, as `sluice serve`'s flags of the same name (first_byte_latency="p50=30ms,
    /// p99=150ms", get_latency, put_latency, list_latency, request_rate="get=5500/s",
    /// rate_partition, connection_bandwidth="90MiB/s", node_bandwidth, latency_seed).
    /// `synthetic` serves objects computed from their keys in "sluice-test", nothing kept per
    /// object ("retinanet", "unet3d:100", "train/img_{i}_of_{n}.jpeg:1000x322957", as `sluice
    /// serve --synthetic`); `sink=True` keeps only the size and checksum of what is written.
    #[new]
    #[pyo3(signature = (profile="loopback", *, synthetic=None, sink=false, **settings))]
    fn py_new(
        py: Python<'_>,
        profile: &str,
        synthetic: Option<&str>,
        sink: bool,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut shaping = ServiceProfile::named(profile).map_err(|e| value_error("profile", e))?;
        let mut given = Vec::new();
        for (k, v) in settings.into_iter().flat_map(|d| d.iter()) {
            if !v.is_none() {
                given.push((
                    k.extract::<String>()?.replace('_', "-"),
                    v.str()?.to_string(),
                ));
            }
        }
        // Applied in the order `sluice serve` applies its flags, whatever the keywords' order.
        shaping
            .set_all(given.iter().map(|(s, v)| (s.as_str(), v.as_str())))
            .map_err(|(setting, e)| value_error(&setting.replace('-', "_"), e))?;
        let synthetic = synthetic
            .map(sluice_testserver::synthetic::Spec::parse)
            .transpose()
            .map_err(|e| value_error("synthetic", e))?;
        let opts = ServerOptions {
            profile: shaping,
            synthetic,
            sink: if sink { Sink::Refuse } else { Sink::Off },
            ..ServerOptions::default()
        };
        let rt = runtime()?;
        let server = py
            .detach(|| rt.block_on(sluice_testserver::TestServer::start(opts)))
            .map_err(|e| PyRuntimeError::new_err(format!("test server did not start: {e}")))?;
        Ok(Self {
            http: server.http_endpoint(),
            https: server.https_endpoint(),
            ca_bundle: server.ca_bundle().display().to_string(),
            access_key: server.access_key().to_owned(),
            secret_key: server.secret_key().to_owned(),
            server: Mutex::new(Some(server)),
            owner: std::process::id(),
        })
    }

    /// "http://127.0.0.1:PORT"
    #[getter]
    fn endpoint(&self) -> &str {
        &self.http
    }

    /// "https://localhost:PORT", trusted through `ca_bundle`.
    #[getter]
    fn https_endpoint(&self) -> &str {
        &self.https
    }

    /// PEM file of the CA that signed the https certificate (for AWS_CA_BUNDLE).
    #[getter]
    fn ca_bundle(&self) -> &str {
        &self.ca_bundle
    }

    #[getter]
    fn bucket(&self) -> &'static str {
        DEFAULT_BUCKET
    }

    #[getter]
    fn access_key(&self) -> &str {
        &self.access_key
    }

    #[getter]
    fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// The AWS environment variables that point a client at this server.
    #[pyo3(signature = (https=false))]
    fn env<'py>(&self, py: Python<'py>, https: bool) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let ep = if https { &self.https } else { &self.http };
        d.set_item("AWS_ENDPOINT_URL_S3", ep)?;
        d.set_item("AWS_REGION", "us-east-1")?;
        d.set_item("AWS_ACCESS_KEY_ID", &self.access_key)?;
        d.set_item("AWS_SECRET_ACCESS_KEY", &self.secret_key)?;
        d.set_item("AWS_CA_BUNDLE", &self.ca_bundle)?;
        Ok(d)
    }

    /// Stores `data` (bytes-like) under `key` without a request.
    #[pyo3(signature = (key, data, bucket=None))]
    fn insert(
        &self,
        py: Python<'_>,
        key: &str,
        data: &Bound<'_, PyAny>,
        bucket: Option<&str>,
    ) -> PyResult<()> {
        let bytes = crate::object::bytes_of(py, data)?;
        self.with(|s| s.insert(bucket.unwrap_or(DEFAULT_BUCKET), key, bytes))
    }

    /// Stores `count` objects of `size` deterministic bytes (see `pattern`) named
    /// `{prefix}obj_{i:05}.bin`; returns their URIs.
    #[pyo3(signature = (prefix, count, size))]
    fn fill(
        &self,
        py: Python<'_>,
        prefix: &str,
        count: usize,
        size: usize,
    ) -> PyResult<Vec<String>> {
        let keys: Vec<String> = (0..count)
            .map(|i| format!("{prefix}obj_{i:05}.bin"))
            .collect();
        self.with(|s| {
            py.detach(|| {
                for k in &keys {
                    s.insert(
                        DEFAULT_BUCKET,
                        k,
                        sluice_testdata::pattern::generate(k, size),
                    );
                }
            })
        })?;
        Ok(keys
            .iter()
            .map(|k| format!("s3://{DEFAULT_BUCKET}/{k}"))
            .collect())
    }

    /// Makes the next `count` requests fail: kind is "slowdown" (503), "internal" (500),
    /// "latency" (wait `seconds`), "reset" (GET body cut after `after_bytes`), "truncate"
    /// (body ends early) or "stall" (no bytes for `seconds` after `after_bytes`).
    #[pyo3(signature = (kind, count=1, after_bytes=0, seconds=0.0))]
    fn inject(&self, kind: &str, count: u64, after_bytes: u64, seconds: f64) -> PyResult<()> {
        let d = Duration::try_from_secs_f64(seconds)
            .map_err(|_| value_error("seconds", "must be a non-negative number"))?;
        let fault = match kind {
            "slowdown" => Fault::SlowDown,
            "internal" => Fault::InternalError,
            "latency" => Fault::Latency(d),
            "reset" => Fault::ResetAfter(after_bytes),
            "truncate" => Fault::TruncateAfter(after_bytes),
            "stall" => Fault::StallAfter(after_bytes, d),
            k => {
                return Err(value_error(
                    "kind",
                    format!(
                        "{k:?} is not one of slowdown, internal, latency, reset, truncate, stall"
                    ),
                ));
            }
        };
        self.with(|s| s.faults().inject(fault, count))
    }

    fn clear_faults(&self) -> PyResult<()> {
        self.with(|s| s.faults().clear())
    }

    /// Requests served so far (all operations).
    #[getter]
    fn requests(&self) -> PyResult<u64> {
        self.with(|s| s.faults().requests())
    }

    #[getter]
    fn gets(&self) -> PyResult<u64> {
        self.with(|s| s.faults().gets())
    }

    #[getter]
    fn heads(&self) -> PyResult<u64> {
        self.with(|s| s.faults().heads())
    }

    /// What the server did: {"profile", "requests": {"get", "put", "list"}, "throttled": {...},
    /// "bytes_sent", "bytes_received", "first_byte_latency_ms": {class: {"count", "p50",
    /// "p90", "p99", "max"}}} (latency only for the classes the profile delays).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(|s| s.stats())?;
        let d = PyDict::new(py);
        d.set_item("profile", &s.profile)?;
        d.set_item("requests", s.requests.into_py_dict(py)?)?;
        d.set_item("throttled", s.throttled.into_py_dict(py)?)?;
        d.set_item("bytes_sent", s.bytes_sent)?;
        d.set_item("bytes_received", s.bytes_received)?;
        let lat = PyDict::new(py);
        for (class, p) in &s.first_byte_latency_ms {
            let pd = PyDict::new(py);
            pd.set_item("count", p.count)?;
            for (name, v) in [
                ("p50", p.p50),
                ("p90", p.p90),
                ("p99", p.p99),
                ("max", p.max),
            ] {
                pd.set_item(name, v)?;
            }
            lat.set_item(class, pd)?;
        }
        d.set_item("first_byte_latency_ms", lat)?;
        Ok(d)
    }

    /// Stops listening.
    fn stop(&self) {
        if let Some(mut s) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            s.shutdown();
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.stop();
    }
}

/// The deterministic bytes the test server's `fill` stores under `key`.
#[pyfunction]
pub fn pattern<'py>(py: Python<'py>, key: &str, length: usize) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, length, |buf| {
        sluice_testdata::pattern::fill(key, 0, buf);
        Ok(())
    })
}

/// The bad-input catalogue (`sluice_testserver::hostile_cases`) as dicts: `name`, `input`
/// (what the server does), `op` ("get", "get_range", "head", "list", "put") with `start`,
/// `end` or `size`, and `expect`: "ok" (with `data`), "listed" (with `listed`), "done",
/// "error", "ok_or_error" / "listed_or_error", or "checked" (an error, but from the backends
/// in `unchecked_backends`, which do not check this answer's checksum, any success).
#[pyfunction]
pub fn hostile_cases(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    use sluice_testserver::hostile_cases::{Expect, Op, catalogue};
    catalogue()
        .into_iter()
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("name", c.name)?;
            d.set_item("input", c.input)?;
            let op = match c.op {
                Op::Get => "get",
                Op::GetRange(s, e) => {
                    d.set_item("start", s)?;
                    d.set_item("end", e)?;
                    "get_range"
                }
                Op::Head => "head",
                Op::List => "list",
                Op::Put(n) => {
                    d.set_item("size", n)?;
                    "put"
                }
            };
            d.set_item("op", op)?;
            let expect = match c.expect {
                Expect::Ok(b) => {
                    d.set_item("data", PyBytes::new(py, b))?;
                    "ok"
                }
                Expect::OkOr(b, _) => {
                    d.set_item("data", PyBytes::new(py, b))?;
                    "ok_or_error"
                }
                Expect::Listed(n) => {
                    d.set_item("listed", n)?;
                    "listed"
                }
                Expect::ListedOr(n, _) => {
                    d.set_item("listed", n)?;
                    "listed_or_error"
                }
                Expect::Done => "done",
                Expect::Error(_) => "error",
                Expect::Checked(_, unchecked) => {
                    d.set_item("unchecked_backends", unchecked.to_vec())?;
                    "checked"
                }
            };
            d.set_item("expect", expect)?;
            Ok(d)
        })
        .collect()
}

/// A hostile responder playing one catalogue case (see `hostile_cases`).
#[pyclass(frozen, module = "sluice.testing", name = "HostileServer")]
#[derive(Debug)]
pub struct HostileServer {
    server: Mutex<Option<sluice_testserver::hostile::HostileServer>>,
    endpoint: String,
    owner: u32,
}

#[pymethods]
impl HostileServer {
    #[new]
    fn py_new(py: Python<'_>, case: &str) -> PyResult<Self> {
        let c = sluice_testserver::hostile_cases::catalogue()
            .into_iter()
            .find(|c| c.name == case)
            .ok_or_else(|| value_error("case", format!("no catalogue case named {case:?}")))?;
        let rt = runtime()?;
        let server = py
            .detach(|| {
                rt.block_on(sluice_testserver::hostile::HostileServer::start(
                    std::sync::Arc::new(c.script),
                ))
            })
            .map_err(|e| PyRuntimeError::new_err(format!("hostile server did not start: {e}")))?;
        Ok(Self {
            endpoint: server.endpoint().to_owned(),
            server: Mutex::new(Some(server)),
            owner: std::process::id(),
        })
    }

    #[getter]
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The environment a client needs for this case: the endpoint, the catalogue's secret
    /// credentials (which must never show up in a message) and short timeouts and retries.
    fn env<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use sluice_testserver::hostile_cases::{ACCESS_KEY, SECRET_KEY, SESSION_TOKEN};
        let d = PyDict::new(py);
        for (k, v) in [
            ("AWS_ENDPOINT_URL_S3", self.endpoint.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_SESSION_TOKEN", SESSION_TOKEN),
            ("SLUICE_CONNECT_TIMEOUT", "2"),
            ("SLUICE_FIRST_BYTE_TIMEOUT", "2"),
            ("SLUICE_STALL_TIMEOUT", "1"),
            ("SLUICE_MAX_ATTEMPTS", "2"),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The secrets `env` holds, for checking messages.
    #[staticmethod]
    fn secrets() -> Vec<&'static str> {
        use sluice_testserver::hostile_cases::{SECRET_KEY, SESSION_TOKEN};
        vec![SECRET_KEY, SESSION_TOKEN]
    }

    fn stop(&self) -> PyResult<()> {
        check_owner(self.owner, "sluice.testing.HostileServer")?;
        drop(self.server.lock().unwrap_or_else(|p| p.into_inner()).take());
        Ok(())
    }
}
