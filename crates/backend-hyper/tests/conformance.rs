//! The shared conformance suite, against the in-process test server over http and https.

use sluice_backend_hyper::HyperStore;
use sluice_core::{ObjectStore, StoreConfig};
use std::sync::Arc;

fn make(cfg: StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(HyperStore::new(cfg)?))
}

sluice_testserver::conformance_suite!(make);

/// HTTP/2 (negotiated by ALPN over TLS) when asked for: the same suite over https.
fn make_h2(mut cfg: StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>> {
    cfg.http2 = true;
    make(cfg)
}

sluice_testserver::conformance_suite!(@scheme https_h2, Https, make_h2);
