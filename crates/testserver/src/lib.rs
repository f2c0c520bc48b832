//! sluice-testserver: an S3-compatible server on the `s3s` crate, for tests, benchmarks and
//! `sluice serve`.
//!
//! - objects in memory (or loaded from and written through to a directory), served from
//!   shared `Bytes` with no per-request copy;
//! - SigV4 checked on every request (s3s's `SimpleAuth`);
//! - http and https (TLS 1.3, a CA made at start, ALPN h2 and http/1.1);
//! - fault injection per server (`Faults`): SlowDown, latency, connection reset, truncated
//!   and stalled bodies;
//! - service profiles (`profile`): first-byte latency, request-rate limits and bandwidth as
//!   the stores users read from have them (`s3-standard`, `s3-express`, `on-prem`).
//!
//! ```no_run
//! # async fn demo() {
//! let server = sluice_testserver::TestServer::start(Default::default()).await.unwrap();
//! println!("{} {}", server.http_endpoint(), server.https_endpoint());
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod access;
pub mod faults;
pub mod hostile;
mod listing;
pub mod profile;
mod s3;
pub mod storage;
pub mod synthetic;
mod tls;

#[cfg(feature = "conformance")]
pub mod catalogue_runner;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "hostile")]
pub mod hostile_cases;

pub use faults::{Fault, Faults};
pub use profile::{ServiceProfile, StatsSnapshot};
pub use storage::{Sink, Storage};

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The default bucket a server starts with.
pub const DEFAULT_BUCKET: &str = "sluice-test";
/// A bucket anyone may read without signing (GET, HEAD, list), as a public dataset's.
pub const PUBLIC_BUCKET: &str = "sluice-public";
/// The default credentials: test keys, published on purpose.
pub const DEFAULT_ACCESS_KEY: &str = "sluice-test-access";
/// The secret key the server accepts unless told another.
pub const DEFAULT_SECRET_KEY: &str = "sluice-test-secret";

/// How to start a test server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address of the plain http listener; port 0 picks a free one.
    pub http_addr: SocketAddr,
    /// Address of the https listener; `None` serves http only.
    pub https_addr: Option<SocketAddr>,
    /// The access key id the server accepts.
    pub access_key: String,
    /// The secret key the server accepts.
    pub secret_key: String,
    /// Buckets created at start.
    pub buckets: Vec<String>,
    /// Serve (and persist) objects from this directory instead of memory alone.
    pub data_dir: Option<PathBuf>,
    /// Buckets (created at start) that unsigned requests may read; everything else needs a
    /// signature.
    pub public_buckets: Vec<String>,
    /// How the server behaves: latency, rate limits, bandwidth (`loopback`: none of them).
    pub profile: ServiceProfile,
    /// Objects computed when asked, in the first of `buckets` (`synthetic`).
    pub synthetic: Option<synthetic::Spec>,
    /// Check what is written, then keep only its length and checksums: a checkpoint of any
    /// size can be written; `Sink` says what a read of it gets.
    pub sink: Sink,
}

impl Default for ServerOptions {
    fn default() -> Self {
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            http_addr: local,
            https_addr: Some(local),
            access_key: DEFAULT_ACCESS_KEY.into(),
            secret_key: DEFAULT_SECRET_KEY.into(),
            buckets: vec![DEFAULT_BUCKET.into()],
            data_dir: None,
            public_buckets: vec![PUBLIC_BUCKET.into()],
            profile: ServiceProfile::loopback(),
            synthetic: None,
            sink: Sink::Off,
        }
    }
}

/// A running server. Dropping it stops the listeners and closes open connections.
#[derive(Debug)]
pub struct TestServer {
    http: SocketAddr,
    https: Option<SocketAddr>,
    access_key: String,
    secret_key: String,
    storage: Arc<Storage>,
    faults: Arc<Faults>,
    shaper: Arc<profile::layer::Shaper>,
    /// Holds the CA PEM; removed on drop.
    ca_file: tempfile::NamedTempFile,
    tasks: JoinSet<()>,
}

/// Any error starting or running the server.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl TestServer {
    /// Starts the server on ephemeral loopback ports (http and https), with the buckets `opts` names.
    pub async fn start(opts: ServerOptions) -> Result<Self, BoxError> {
        let mut storage = match &opts.data_dir {
            Some(_) if opts.sink.drops() => {
                return Err("a server that sinks what is written keeps no --data-dir".into());
            }
            Some(d) => Storage::with_dir(d)?,
            None => Storage::in_memory(),
        };
        if let Some(spec) = &opts.synthetic {
            let bucket = opts.buckets.first().map_or(DEFAULT_BUCKET, String::as_str);
            storage = storage.with_synthetic(bucket, synthetic::Synthetic::new(spec));
        }
        let storage = Arc::new(storage.sinking(opts.sink));
        for b in opts.buckets.iter().chain(&opts.public_buckets) {
            storage.create_bucket(b);
        }
        let faults = Arc::new(Faults::default());
        let mut builder = S3ServiceBuilder::new(s3::MemoryS3::new(storage.clone(), faults.clone()));
        builder.set_auth(SimpleAuth::from_single(
            opts.access_key.clone(),
            opts.secret_key.clone(),
        ));
        builder.set_access(access::PublicRead {
            buckets: opts.public_buckets.clone(),
        });
        let service = builder.build();

        let tls = tls::generate()?;
        let mut ca_file = tempfile::Builder::new()
            .prefix("sluice-test-ca-")
            .suffix(".pem")
            .tempfile()?;
        std::io::Write::write_all(&mut ca_file, tls.ca_pem.as_bytes())?;

        let shaper = Arc::new(profile::layer::Shaper::new(opts.profile.clone()));
        let mut tasks = JoinSet::new();
        let http_listener = listen(opts.http_addr)?;
        let http = http_listener.local_addr()?;
        tasks.spawn(accept_loop(
            http_listener,
            service.clone(),
            shaper.clone(),
            None,
        ));
        let https = match opts.https_addr {
            Some(addr) => {
                let l = listen(addr)?;
                let a = l.local_addr()?;
                tasks.spawn(accept_loop(
                    l,
                    service,
                    shaper.clone(),
                    Some(tokio_rustls::TlsAcceptor::from(tls.server_config)),
                ));
                Some(a)
            }
            None => None,
        };
        Ok(Self {
            http,
            https,
            access_key: opts.access_key,
            secret_key: opts.secret_key,
            storage,
            faults,
            shaper,
            ca_file,
            tasks,
        })
    }

    /// The http endpoint, `http://127.0.0.1:PORT`.
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http)
    }

    /// The https endpoint, by name (`localhost`) so certificate checks apply as usual.
    pub fn https_endpoint(&self) -> String {
        let a = self.https.expect("server started without https");
        format!("https://localhost:{}", a.port())
    }

    /// The access key id the server accepts.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key the server accepts.
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// PEM file of the CA that signed the https certificate (for AWS_CA_BUNDLE).
    pub fn ca_bundle(&self) -> &Path {
        self.ca_file.path()
    }

    /// The faults to arm for later requests, and the counts of requests seen.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Stores an object directly (no HTTP): for fixtures.
    pub fn insert(&self, bucket: &str, key: &str, data: impl Into<bytes::Bytes>) {
        self.storage.create_bucket(bucket);
        self.storage
            .put(bucket, key, storage::StoredObject::new(data.into()))
            .expect("bucket exists, and the key is a safe path under --data-dir");
    }

    /// What the server did so far: requests, throttled requests, bytes, latency applied.
    pub fn stats(&self) -> StatsSnapshot {
        self.shaper.stats.snapshot()
    }

    /// The objects the server holds.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Stops accepting; open connections end with their tasks.
    pub fn shutdown(&mut self) {
        self.tasks.abort_all();
    }
}

/// Connections the kernel queues for `accept` before it drops SYNs (capped by
/// `net.core.somaxconn`). tokio's `bind` asks for 128, as std does: a client opening a few
/// hundred connections at once then loses SYNs, and each waits a second for the kernel's
/// retransmit. A store's front end queues thousands.
const BACKLOG: u32 = 8192;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

async fn accept_loop(
    listener: TcpListener,
    service: s3s::service::S3Service,
    shaper: Arc<profile::layer::Shaper>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut conns = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        stream.set_nodelay(true).ok();
        let s3 = service.clone();
        let shaper = shaper.clone();
        let links = shaper.links();
        let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
            shaper.clone().serve(s3.clone(), links.clone(), req)
        });
        let tls = tls.clone();
        conns.spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let result = match tls {
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => builder.serve_connection(TokioIo::new(s), service).await,
                    Err(e) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                },
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
        // Reap finished connections so the set does not grow without bound.
        while conns.try_join_next().is_some() {}
    }
}
