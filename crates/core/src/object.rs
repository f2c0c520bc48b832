//! What an object is and what operations on one take and return: the data types the store
//! trait, the wires and the multipart and resume logic share (a leaf: it depends on no
//! module that uses it).

use crate::put_options::Attributes;
use crate::range::ByteRange;
use crate::uri::ObjectUri;
use bytes::Bytes;
use std::time::SystemTime;

/// S3's largest object (5 TiB). A size above it, from a header or a listing, is not a
/// fact about an object but a broken or hostile reply, and is refused before any allocation.
pub const MAX_OBJECT_SIZE: u64 = 5 << 40;

/// What HEAD or a listing says about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object.
    pub uri: ObjectUri,
    /// Its size in bytes (at most `MAX_OBJECT_SIZE`).
    pub size: u64,
    /// The version's ETag as the store sent it (S3 quotes it), when it sent one; give it as
    /// `GetOptions::if_match` to read exactly this version.
    pub etag: Option<String>,
    /// When the object was last written, when the store said.
    pub last_modified: Option<SystemTime>,
    /// The headers stored with it (HEAD only: a listing does not carry them).
    pub attributes: Attributes,
}

/// One entry of a listing: an object, or (with a delimiter) a common prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEntry {
    /// An object, with what the listing says about it (no HEAD needed).
    Object(ObjectMeta),
    /// A "directory": every key under `uri` (ending with the delimiter).
    Prefix(ObjectUri),
}

impl ListEntry {
    /// The object's URI, or the prefix's.
    pub fn uri(&self) -> &ObjectUri {
        match self {
            ListEntry::Object(m) => &m.uri,
            ListEntry::Prefix(u) => u,
        }
    }
}

/// The result of a GET into a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetInfo {
    /// Bytes written into the segment by this call.
    pub bytes: u64,
    /// The whole object's size, when the response said (Content-Range or Content-Length).
    pub object_size: Option<u64>,
    /// The version read: the pinned `GetOptions::if_match`, else the first response's ETag
    /// (every resumption was pinned to it).
    pub etag: Option<String>,
    /// HTTP requests it took (1 unless retried or resumed).
    pub attempts: u32,
}

/// What one GET asks for beyond the object's name (per-operation parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// A part of the object; `None`: all of it.
    pub range: Option<ByteRange>,
    /// Read only this version (an ETag from a listing or an earlier response): every request
    /// and resume carries `If-Match`, and a reply for another version is an `Integrity`
    /// error ("the object changed while being read"), never bytes of two versions.
    pub if_match: Option<String>,
}

impl GetOptions {
    /// `range` of whichever version the store serves (no `If-Match` pin).
    pub fn range(range: Option<ByteRange>) -> Self {
        Self {
            range,
            if_match: None,
        }
    }
}

/// The body of a PUT. Held as `Bytes` so multipart parts are zero-copy slices of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutPayload(pub Bytes);

impl From<Bytes> for PutPayload {
    fn from(b: Bytes) -> Self {
        Self(b)
    }
}
impl From<Vec<u8>> for PutPayload {
    fn from(v: Vec<u8>) -> Self {
        Self(Bytes::from(v))
    }
}
impl From<&'static [u8]> for PutPayload {
    fn from(v: &'static [u8]) -> Self {
        Self(Bytes::from_static(v))
    }
}

/// The largest object one S3 CopyObject copies (5 GiB); larger ones need a multipart copy.
pub const MAX_COPY_SIZE: u64 = 5 << 30;

/// What a whole-object upload (`ObjectStore::put`) wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutInfo {
    /// The new object's ETag, when the store returned one.
    pub etag: Option<String>,
    /// Number of parts when uploaded as multipart; `None` for a single PUT.
    pub parts: Option<usize>,
}

/// Two ETags name the same version (S3 sends them quoted; some stores do not).
pub fn same_etag(a: &str, b: &str) -> bool {
    let bare = |t: &str| {
        t.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_owned()
    };
    bare(a) == bare(b)
}

/// What one endpoint has done so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStats {
    /// The endpoint.
    pub url: url::Url,
    /// Attempts sent to it.
    pub requests: u64,
    /// Attempts that failed to reach it (refused, reset, timed out).
    pub failures: u64,
    /// Body bytes received from it.
    pub bytes_read: u64,
    /// Body bytes sent to it (PUTs and parts).
    pub bytes_written: u64,
    /// Attempts in flight now.
    pub in_flight: usize,
    /// Whether it is being avoided now.
    pub down: bool,
}
