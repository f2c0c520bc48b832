//! What a loader hands its consumer: each [`Object`], and the places in the window and the
//! memory budget it holds until it is taken.

use bytes::Bytes;
use sluice_core::{ObjectUri, Result};
use tokio::sync::OwnedSemaphorePermit;

/// One delivered object. `data` shares the loader's memory; it returns to the pool when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct Object {
    /// The object read.
    pub uri: ObjectUri,
    /// All of its bytes, of one version.
    pub data: Bytes,
}

/// An item travelling to the consumer with the slots it holds: they free up when the
/// consumer takes it.
pub(crate) struct Delivery {
    pub(crate) item: Result<Object>,
    /// `None` only for the error that ends a driver that failed itself.
    pub(crate) _slot: Option<OwnedSemaphorePermit>,
    pub(crate) _memory: Option<OwnedSemaphorePermit>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("item", &self.item)
            .finish_non_exhaustive()
    }
}
