//! sluice-core: the pieces every sluice backend and the loader share.
//!
//! A backend only turns one request into bytes. Everything that decides *which* requests to
//! make and what to do when they fail lives here, once: URIs, configuration from the standard
//! AWS environment, the error type, retry classification and backoff, resumption of
//! interrupted bodies, range planning and zero-copy assembly of ranged reads.

#![warn(missing_docs, unreachable_pub)]

pub mod checksum;
pub mod config;
mod congestion;
mod credentials;
pub mod error;
mod in_flight;
pub mod listing;
mod multipart;
mod object;
pub mod oplog;
mod parallel_list;
mod part_buffers;
mod parts_in_flight;
mod put_options;
mod range;
mod ranges;
mod reply;
mod resume;
mod retry;
mod s3store;
mod segment;
pub mod settings;
mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
mod upload;
mod uri;
pub mod wire;

pub use config::{Checksums, StoreConfig, Timeouts};
pub use congestion::{ADAPTIVE_START, Concurrency, CongestionStats, Decision};
pub use credentials::CredentialsCache;
pub use error::{Error, ErrorKind, Result, TimeoutPhase};
pub use listing::{ListOptions, ListPage, Upload};
pub use multipart::Multipart;
pub use object::{EndpointStats, MAX_OBJECT_SIZE, same_etag};
pub use parallel_list::{LIST_WORKERS, list_parallel, list_parallel_into};
pub use put_options::{Attributes, PutMode, PutOptions};
pub use range::{
    ByteRange, FOLLOW_MAX_RANGE, FOLLOW_MIN_RANGE, RangePlanner, RangeSize, split_ranges,
};
pub use ranges::{DEFAULT_COALESCE, RangesOptions, RangesPlan, gap_within};
pub use resume::{changed, get_with_resume};
pub use retry::{RetryPolicy, retry_counts};
pub use s3store::S3Store;
pub use segment::{Segment, SegmentError, SegmentedBuffer};
pub use store::{
    GetInfo, GetOptions, ListEntry, MAX_COPY_SIZE, ObjectMeta, ObjectStore, ObjectStoreExt,
    PutInfo, PutPayload, spawn_list, unsupported,
};
pub use upload::{
    MAX_PARTS, ObjectWriter, PART_CONCURRENCY, PARTS_MEMORY, WriteInfo, WriteOptions, WriterState,
};
pub use uri::{ObjectUri, Scheme};
pub use wire::spread::Spread;
pub use wire::{Wire, WireFromConfig};
