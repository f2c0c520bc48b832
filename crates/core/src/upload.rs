//! Streaming uploads: an [`ObjectWriter`] takes bytes as they are produced (a checkpoint being
//! serialised) and sends them on in parts, so memory stays bounded by
//! `part_size × (max_in_flight + 1)` whatever the object's size. S3 stores implement it
//! with `multipart::MultipartWriter`; the file system store with a temporary file.

use crate::checksum::Pieces;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::put_options::PutOptions;

/// Parts a client's streaming uploads ([`ObjectWriter`]) start with at first, all together:
/// each is a buffer of `part_size` held until its answer. From here the search goes up
/// while more pay, or down while fewer do as well (`parts_in_flight`), within
/// [`PARTS_MEMORY`]; the client's later uploads start where the last search held.
pub const PART_CONCURRENCY: usize = 4;
/// Memory the streaming uploads of one client (an `S3Store` and its clones, all its writers
/// at once) may hold in parts in flight: 32 parts of the default 16 MiB. Against S3, whose
/// connections each carry a capped rate and answer a PUT tens of milliseconds after its
/// last byte, each part in flight adds most of one connection's rate, so 32 reach a few
/// gigabytes a second from one process (docs/benchmarks.md, "Why the defaults"); a node saving
/// checkpoints from 8 ranks holds at most 4 GiB in parts, and only where they paid
/// (`parts_in_flight`).
pub const PARTS_MEMORY: u64 = 512 << 20;
/// Parts an upload of bytes already in memory (`put`, `sluice.put`) may have in flight: they
/// are slices of the caller's buffer, so more cost no memory, and the client's controller
/// (`congestion`) sends only as many as the store answers faster with. 64 connections at
/// S3's per-connection rate are more than one process's network.
pub(crate) const PARTS_FROM_MEMORY: usize = 64;
use async_trait::async_trait;
use bytes::Bytes;

/// S3's smallest part (every part but the last).
pub(crate) const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// S3's largest part.
pub(crate) const MAX_PART_SIZE: u64 = 5 * 1024 * 1024 * 1024;
/// S3's limit on parts in one upload.
pub const MAX_PARTS: u32 = 10_000;

/// How a streaming upload cuts and sends its parts, and the object it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// Bytes per part (the last may be shorter): 5 MiB to 5 GiB.
    pub part_size: u64,
    /// Most parts uploading at once; a write waits while this many are in flight. When
    /// `adaptive`, the most of this size the client's window holds ([`PARTS_MEMORY`]).
    pub max_in_flight: usize,
    /// Take places for parts in the client's one window (`parts_in_flight`), shared with
    /// its other uploads and searched for within [`PARTS_MEMORY`], rather than holding
    /// `max_in_flight` of this writer's own. Writers other than S3's multipart hold
    /// `max_in_flight`.
    pub adaptive: bool,
    /// Abort the upload (delete its parts) when the writer is dropped unfinished — a
    /// Ctrl-C, an exception in the producer. Off keeps the parts for a later resume.
    pub abort_on_drop: bool,
    /// Send each part's and the whole object's CRC64NVME for the store to check
    /// (`StoreConfig::checksums.on_upload`; see `checksum`).
    pub checksums: bool,
    /// The condition on `finish` and the attributes of the object.
    pub put: PutOptions,
}

impl WriteOptions {
    /// The part size of `cfg` (SLUICE_MULTIPART_PART_SIZE), its parts in flight
    /// (SLUICE_PARTS_IN_FLIGHT, else searched for) and its upload checksums.
    pub fn from_config(cfg: &StoreConfig) -> Self {
        let mut o = Self::with_part_size(cfg.multipart_part_size);
        o.checksums = cfg.checksums.on_upload;
        if let Some(n) = cfg.parts_in_flight {
            o.set_max_in_flight(n);
        }
        o
    }

    /// Parts of `part_size` bytes, as many in flight as pay within [`PARTS_MEMORY`],
    /// checksummed, aborted when dropped unfinished, written unconditionally.
    pub fn with_part_size(part_size: u64) -> Self {
        Self {
            part_size,
            max_in_flight: Self::parts_in(PARTS_MEMORY, part_size),
            adaptive: true,
            abort_on_drop: true,
            checksums: true,
            put: PutOptions::default(),
        }
    }

    /// Parts of `part_size` bytes; a searched number of parts in flight keeps to
    /// [`PARTS_MEMORY`].
    pub fn set_part_size(&mut self, part_size: u64) {
        self.part_size = part_size;
        if self.adaptive {
            self.max_in_flight = Self::parts_in(PARTS_MEMORY, part_size);
        }
    }

    /// `n` parts in flight, held: a user's number is not searched from.
    pub fn set_max_in_flight(&mut self, n: usize) {
        self.max_in_flight = n;
        self.adaptive = false;
    }

    /// Parts of `part_size` that fit in `memory`, and never fewer than [`PART_CONCURRENCY`]:
    /// those go whatever their size (`parts_in_flight`).
    pub fn parts_in(memory: u64, part_size: u64) -> usize {
        let n = memory / part_size.max(1);
        usize::try_from(n)
            .unwrap_or(usize::MAX)
            .max(PART_CONCURRENCY)
    }

    /// Checks the sizes against S3's limits, naming the option at fault.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&self.part_size) {
            return Err(Error::config(
                "part_size",
                format!(
                    "{} bytes is outside S3's part size limits ({MIN_PART_SIZE} to {MAX_PART_SIZE})",
                    self.part_size
                ),
            ));
        }
        if self.max_in_flight == 0 {
            return Err(Error::config("max_in_flight", "must be at least 1"));
        }
        Ok(())
    }
}

/// What a finished upload wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteInfo {
    /// Bytes written: the object's size.
    pub total_bytes: u64,
    /// Parts uploaded (1 for an object sent in one request).
    pub parts: u32,
    /// The new object's ETag, when the store returned one.
    pub etag: Option<String>,
}

/// An object being written. Nothing is visible under its URI before `finish` returns; after
/// an error or `abort` nothing is left behind.
#[async_trait]
pub trait ObjectWriter: Send + Sync + std::fmt::Debug {
    /// Appends `data`; waits while the parts in flight are at their limit.
    async fn write(&mut self, data: Bytes) -> Result<()>;
    /// As `write`, of bytes lent for the call only: the writer copies them (into memory of
    /// its own that it uses again, where it can), so the caller need not copy them first.
    async fn write_slice(&mut self, data: &[u8]) -> Result<()> {
        self.write(Bytes::copy_from_slice(data)).await
    }
    /// As `write`, with CRCs of `data` taken as it was produced (a tallied
    /// [`Segment`](crate::Segment)): a writer that checksums its parts combines them instead
    /// of reading the bytes again. Writers that take no checksums ignore them.
    async fn write_with_pieces(&mut self, data: Bytes, pieces: Pieces) -> Result<()> {
        let _ = pieces;
        self.write(data).await
    }
    /// Sends what remains and makes the object visible.
    async fn finish(&mut self) -> Result<WriteInfo>;
    /// Discards everything written.
    async fn abort(&mut self) -> Result<()>;
    /// Bytes accepted by `write` so far.
    fn bytes_written(&self) -> u64;
}

/// Where a writer is in its life; every call after the first three checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterState {
    /// Takes `write`, `finish` and `abort`.
    Open,
    /// `finish` succeeded: the object is visible.
    Finished,
    /// `abort` was called: what was written is discarded.
    Aborted,
    /// A call failed, or its future was dropped part-way: bytes may be missing, so the
    /// object must never be completed.
    Failed,
}

impl WriterState {
    /// `Ok` while open; otherwise an error naming the URI and the state.
    pub fn check_open(self, uri: &str) -> Result<()> {
        match self {
            WriterState::Open => Ok(()),
            s => Err(Error::config(
                format!("writer for {uri}"),
                format!(
                    "is {} and takes no more calls",
                    format!("{s:?}").to_lowercase()
                ),
            )),
        }
    }
}
