//! Which backend serves a store: chosen by cargo features at build time and by name at run
//! time (an explicit option, else `S3_BACKEND`, else `hyper`). The store [`open`] returns also
//! serves `file://` and `direct://` URIs, through the file system store, and `az://` and
//! `gs://` through object_store's Azure and GCS stores (with the `objectstore` feature), under
//! the same policy layer as `s3://`.

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use sluice_backend_fs::FsStore;
use sluice_core::wire::{Reply, Request};
use sluice_core::{
    Error, GetInfo, GetOptions, ListEntry, ObjectStore, ObjectUri, ObjectWriter, PutInfo,
    PutPayload, Result, Scheme, Segment, StoreConfig, WriteOptions,
};
use std::sync::{Arc, OnceLock};

/// Every backend sluice knows, compiled in or not.
pub const KNOWN: &[&str] = &["hyper", "awssdk", "objectstore"];

/// The backends this build contains.
pub fn compiled() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(feature = "hyper") {
        v.push("hyper");
    }
    if cfg!(feature = "awssdk") {
        v.push("awssdk");
    }
    if cfg!(feature = "objectstore") {
        v.push("objectstore");
    }
    v
}

/// The backend name to use: `explicit`, else `S3_BACKEND`, else `hyper`. Returns the name
/// and which setting chose it (for error messages).
pub fn choose(explicit: Option<&str>) -> (String, &'static str) {
    match explicit.map(str::trim).filter(|s| !s.is_empty()) {
        Some(n) => (n.to_ascii_lowercase(), "backend"),
        None => match sluice_core::settings::BACKEND.lookup(&|k| std::env::var(k).ok()) {
            Some((var, n)) => (n.trim().to_ascii_lowercase(), var),
            None => ("hyper".into(), "backend"),
        },
    }
}

/// Builds the named backend (see `choose`) over `cfg`, for `s3://` URIs; `file://` and
/// `direct://` URIs go to the file system, `az://` and `gs://` to their clouds' stores.
pub fn open(explicit: Option<&str>, cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    let (name, option) = choose(explicit);
    let s3 = build(&name, option, cfg.clone())?;
    Ok(Arc::new(SchemeRouter::new(s3, cfg)))
}

/// One store for every scheme: each call goes to the store that serves its URI's scheme.
#[derive(Debug)]
pub struct SchemeRouter {
    s3: Arc<dyn ObjectStore>,
    file: FsStore,
    direct: FsStore,
    /// The policy (timeouts, retries, limits, op-log) of the Azure and GCS stores, which are
    /// built on first use: only then is their cloud's environment read, and required.
    clouds: StoreConfig,
    az: OnceLock<Arc<dyn ObjectStore>>,
    gs: OnceLock<Arc<dyn ObjectStore>>,
}

impl SchemeRouter {
    /// Sends `s3://` URIs to `s3`, `file://` URIs to the file system through the page
    /// cache, `direct://` URIs to it with O_DIRECT, and `az://` and `gs://` to their clouds'
    /// stores under the policy of `clouds`.
    pub fn new(s3: Arc<dyn ObjectStore>, clouds: StoreConfig) -> Self {
        Self {
            s3,
            file: FsStore::file(),
            direct: FsStore::direct(),
            clouds,
            az: OnceLock::new(),
            gs: OnceLock::new(),
        }
    }

    fn pick(&self, uri: &ObjectUri) -> Result<&dyn ObjectStore> {
        let slot = match uri.scheme() {
            Scheme::S3 => return Ok(self.s3.as_ref()),
            Scheme::File => return Ok(&self.file),
            Scheme::Direct => return Ok(&self.direct),
            Scheme::Az => &self.az,
            Scheme::Gs => &self.gs,
        };
        if let Some(store) = slot.get() {
            return Ok(store.as_ref());
        }
        // A failure is not kept: the environment may be fixed before the next call.
        let store = cloud(uri.scheme(), self.clouds.clone()).map_err(|e| about(e, uri))?;
        Ok(slot.get_or_init(|| store).as_ref())
    }
}

/// The store of `az://` or `gs://` URIs: object_store's, under core's policy layer.
#[cfg(feature = "objectstore")]
fn cloud(scheme: Scheme, cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    use sluice_backend_objectstore::{Azure, Gcs, ObjectStoreWire};
    use sluice_core::S3Store;
    Ok(match scheme {
        Scheme::Az => Arc::new(S3Store::<ObjectStoreWire<Azure>>::new(cfg)?),
        _ => Arc::new(S3Store::<ObjectStoreWire<Gcs>>::new(cfg)?),
    })
}

#[cfg(not(feature = "objectstore"))]
fn cloud(scheme: Scheme, _cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    Err(Error::config(
        "backend",
        format!(
            "{} URIs are served by the objectstore backend, which is not compiled into this build (enable the cargo feature \"objectstore\"); this build serves s3://, file:// and direct://",
            scheme.prefix()
        ),
    ))
}

/// A store's refusal to be built (no credentials), about the URI that needed it.
fn about(e: Error, uri: &ObjectUri) -> Error {
    match e {
        Error::PermissionDenied {
            status,
            code,
            message,
            ..
        } => Error::PermissionDenied {
            uri: uri.to_string(),
            status,
            code,
            message,
        },
        e => e,
    }
}

#[async_trait]
// A forwarding wrapper: no method may fall back to the trait's default.
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for SchemeRouter {
    /// The S3 backend's name (the file system store is the same whatever the backend).
    fn backend(&self) -> &'static str {
        self.s3.backend()
    }

    fn endpoint_stats(&self) -> Vec<sluice_core::EndpointStats> {
        self.s3.endpoint_stats()
    }

    fn congestion(&self) -> Option<sluice_core::CongestionStats> {
        self.s3.congestion()
    }

    fn expect_requests(&self, requests: usize) {
        self.s3.expect_requests(requests);
    }

    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        self.pick(uri)?.get_into_with(uri, opts, dst).await
    }

    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>> {
        match self.pick(prefix) {
            Ok(store) => store.list(prefix, recursive),
            Err(e) => futures::stream::once(async { Err(e) }).boxed(),
        }
    }

    async fn put_opts(
        &self,
        uri: &ObjectUri,
        data: PutPayload,
        opts: &sluice_core::PutOptions,
    ) -> Result<PutInfo> {
        self.pick(uri)?.put_opts(uri, data, opts).await
    }

    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>> {
        self.pick(uri)?.writer(uri, opts).await
    }

    /// None when the URI's store cannot be built: its next call says why.
    fn multipart(&self, uri: &ObjectUri) -> Option<sluice_core::Multipart> {
        self.pick(uri).ok()?.multipart(uri)
    }

    /// To the store of the object the request names (an empty batch, to the S3 store). A
    /// copy between schemes is the caller's to make, through itself.
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        if let Request::CopyObject { from, to } = &req
            && from.scheme() != to.scheme()
        {
            return Ok(Reply::Copied(None));
        }
        let store = match req.uri() {
            Some(uri) => self.pick(uri)?,
            None => self.s3.as_ref(),
        };
        store.send(req).await
    }
}

/// The policy layer over wire `W`: spread over the endpoints when the configuration lists
/// them (`S3_ENDPOINT_URIS`, `--endpoints`; counted per endpoint even if there is one), else
/// straight to the one.
#[cfg(any(feature = "hyper", feature = "awssdk", feature = "objectstore"))]
fn s3<W: sluice_core::WireFromConfig>(cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    use sluice_core::{S3Store, Spread};
    Ok(if !cfg.endpoints.is_empty() {
        Arc::new(S3Store::<Spread<W>>::new(cfg)?)
    } else {
        Arc::new(S3Store::<W>::new(cfg)?)
    })
}

// Without any S3 backend compiled in, `cfg` has nothing to build.
#[cfg_attr(
    not(any(feature = "hyper", feature = "awssdk", feature = "objectstore")),
    allow(unused_variables)
)]
fn build(name: &str, option: &str, cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    let available = compiled().join(", ");
    match name {
        #[cfg(feature = "hyper")]
        "hyper" => s3::<sluice_backend_hyper::HyperWire>(cfg),
        #[cfg(feature = "awssdk")]
        "awssdk" => s3::<sluice_backend_awssdk::AwsSdkWire>(cfg),
        #[cfg(feature = "objectstore")]
        "objectstore" => s3::<sluice_backend_objectstore::ObjectStoreWire>(cfg),
        n if KNOWN.contains(&n) => Err(Error::config(
            option,
            format!(
                "backend {n:?} is not compiled into this build (enable the cargo feature {n:?}); available: {available}"
            ),
        )),
        n => Err(Error::config(
            option,
            format!("unknown backend {n:?}; available: {available}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::CredentialsCache;

    fn cfg() -> StoreConfig {
        StoreConfig::new(
            Some("http://127.0.0.1:1".parse().unwrap()),
            "us-east-1",
            CredentialsCache::anonymous(),
        )
    }

    #[test]
    fn unknown_names_list_what_is_available() {
        let err = build("nope", "S3_BACKEND", cfg()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("S3_BACKEND")
                && msg.contains("\"nope\"")
                && msg.contains("available: hyper"),
            "{msg}"
        );
    }

    #[test]
    fn known_but_absent_backends_say_how_to_get_them() {
        for name in KNOWN.iter().filter(|n| !compiled().contains(n)) {
            let msg = build(name, "backend", cfg()).unwrap_err().to_string();
            assert!(msg.contains("not compiled"), "{msg}");
        }
        assert_eq!(build("hyper", "backend", cfg()).unwrap().backend(), "hyper");
    }
}
