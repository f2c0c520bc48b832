//! The shared conformance suite for the object_store backend, over http and https.

use sluice_backend_objectstore::ObjectStoreBackend;
use sluice_core::{ObjectStore, StoreConfig};
use std::sync::Arc;

fn make(cfg: StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(ObjectStoreBackend::new(cfg)?))
}

sluice_testserver::conformance_suite!(make);
