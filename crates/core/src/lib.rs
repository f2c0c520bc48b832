//! sluice-core: the pieces every sluice backend and the loader share.
//!
//! A backend only turns one request into bytes. Everything that decides *which* requests to
//! make and what to do when they fail lives here, once: URIs, configuration from the standard
//! AWS environment, the error type, retry classification and backoff, resumption of
//! interrupted bodies, range planning and zero-copy assembly of ranged reads.

#![warn(missing_docs)]

pub mod checksum;
pub mod config;
pub mod congestion;
pub mod credentials;
pub mod error;
pub mod listing;
pub mod multipart;
pub mod object;
pub mod put_options;
pub mod range;
pub mod redirect;
pub mod reply;
pub mod resume;
pub mod retry;
pub mod s3store;
pub mod segment;
pub mod spread;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;
pub mod upload;
pub mod uri;
pub mod wire;

pub use config::{Checksums, StoreConfig, Timeouts};
pub use congestion::CongestionStats;
pub use credentials::CredentialsCache;
pub use error::{Error, ErrorKind, Result, TimeoutPhase};
pub use put_options::{Attributes, PutMode, PutOptions};
pub use range::{ByteRange, RangePlanner};
pub use resume::{BodySink, GetAttempt, GetRequest, ResponseHead, get_with_resume};
pub use retry::RetryPolicy;
pub use s3store::S3Store;
pub use segment::{Segment, SegmentError, SegmentedBuffer};
pub use spread::Spread;
pub use store::EndpointStats;
pub use store::{
    GetInfo, GetOptions, ListEntry, MAX_COPY_SIZE, ObjectMeta, ObjectStore, PutInfo, PutPayload,
};
pub use upload::{ObjectWriter, WriteInfo, WriteOptions};
pub use uri::{ObjectUri, Scheme};
pub use wire::{Wire, WireFromConfig};
