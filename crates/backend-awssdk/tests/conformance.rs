//! The shared conformance suite, against the in-process test server over http and https.

use sluice_backend_awssdk::AwsSdkStore;
use sluice_core::{ObjectStore, StoreConfig};
use std::sync::Arc;

fn make(cfg: StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(AwsSdkStore::new(cfg)?))
}

sluice_testserver::conformance_suite!(make);
