//! One object a loader reads, as a dataset hands it out.

use sluice_core::ObjectUri;

/// One object to read; `size` when a listing told us, and the
/// listing's `etag`, which pins every request for the object to the version listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The object.
    pub uri: ObjectUri,
    /// Its size in bytes, when known. `None`: learned from the first response (no HEAD);
    /// a memory budget counts it at the largest size seen until then.
    pub size: Option<u64>,
    /// The version to read. `None`: whichever version the first response serves, which
    /// then pins the rest of the read.
    pub etag: Option<String>,
}

impl Item {
    /// An object known by name only: size and version are learned while reading.
    pub fn new(uri: ObjectUri) -> Self {
        Self {
            uri,
            size: None,
            etag: None,
        }
    }
}
