//! The objects: in memory, optionally written through to (and loaded from) a directory
//! laid out as `<dir>/<bucket>/<key>`.

use bytes::Bytes;
use md5::{Digest, Md5};
use sluice_core::Attributes;
use sluice_core::checksum::Crc;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use crate::listing::{self, Page};
use crate::synthetic::{self, Synthetic};

/// An object's bytes: one buffer, or the parts of a multipart upload as they arrived. Joined,
/// a 2 GiB object's parts were seconds of page faults on the server's core, and the server,
/// not the client, set the upload's rate (perf of `sluice cp` under `s3-standard`).
///
/// Under `--sink` only the length is kept: such a body has no pieces, and a GET of it is
/// refused (`is_sunk`) or answered with computed bytes (`Sink::Computed`).
#[derive(Debug, Clone, Default)]
pub struct Body {
    pieces: Vec<Bytes>,
    len: usize,
    sunk: bool,
}

impl Body {
    /// The parts of an object, in order.
    pub fn from_pieces(pieces: Vec<Bytes>) -> Self {
        let len = pieces.iter().map(Bytes::len).sum();
        Self {
            pieces,
            len,
            sunk: false,
        }
    }

    /// A body of `len` bytes that were checked and dropped (`--sink`).
    pub fn sunk(len: usize) -> Self {
        Self {
            pieces: Vec::new(),
            len,
            sunk: true,
        }
    }

    /// Whether the bytes were dropped on arrival (`--sink`), so none can be read.
    pub fn is_sunk(&self) -> bool {
        self.sunk
    }

    /// Bytes in the object.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The bytes in one buffer: a copy.
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces.concat()
    }

    /// The bytes of `range` as slices of the pieces, never a copy.
    pub fn slices(&self, range: std::ops::Range<usize>) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut at = 0;
        for p in &self.pieces {
            let (start, end) = (at, at + p.len());
            at = end;
            if end <= range.start || p.is_empty() {
                continue;
            }
            if start >= range.end {
                break;
            }
            out.push(p.slice(range.start.max(start) - start..range.end.min(end) - start));
        }
        out
    }

    fn same_bytes(&self, other: &[u8]) -> bool {
        let mut rest = other;
        self.len == other.len()
            && self.pieces.iter().all(|p| {
                let (head, tail) = rest.split_at(p.len());
                rest = tail;
                head == &p[..]
            })
    }
}

/// Equal when the bytes are, however they are cut (sunk bodies are equal to none).
impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        !self.sunk && !other.sunk && self.len == other.len && self.same_bytes(&other.to_vec())
    }
}

impl PartialEq<Vec<u8>> for Body {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.same_bytes(other)
    }
}

impl PartialEq<Bytes> for Body {
    fn eq(&self, other: &Bytes) -> bool {
        self.same_bytes(other)
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Self::from_pieces(vec![b])
    }
}

/// One object as the server holds it.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// Shared: every GET hands out slices of this, never a copy.
    pub data: Body,
    /// Quoted, as S3 sends it.
    pub etag: String,
    /// When it was written.
    pub last_modified: SystemTime,
    /// Base64 CRC64NVME of the whole object: S3 computes one for every new object and
    /// returns it to GETs of the whole object that ask (`x-amz-checksum-mode: ENABLED`),
    /// which is what SDKs validate.
    pub crc64nvme: String,
    /// What S3 stores from the PUT's headers and returns on GET and HEAD.
    pub headers: Attributes,
}

impl listing::Entry for StoredObject {
    fn size(&self) -> u64 {
        self.data.len() as u64
    }

    fn etag(&self) -> &str {
        &self.etag
    }

    fn last_modified(&self) -> SystemTime {
        self.last_modified
    }
}

/// S3's conditional write: `If-None-Match: *` (only if absent) or `If-Match: <etag>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Condition {
    /// No condition: write.
    #[default]
    None,
    /// `If-None-Match: *`: write only if the key is absent.
    Absent,
    /// `If-Match`: write only if the key holds this ETag.
    ETag(String),
}

/// Why a conditional write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The bucket or key is missing (404).
    Missing(Missing),
    /// 412: the key is taken (`If-None-Match: *`) or holds another version (`If-Match`).
    Precondition,
}

impl From<Missing> for Refused {
    fn from(m: Missing) -> Self {
        Refused::Missing(m)
    }
}

impl StoredObject {
    /// An object from a single PUT: its ETag is the MD5 of its bytes.
    pub fn new(data: Bytes) -> Self {
        let crc = Crc::of(&data);
        Self::new_with_crc(data, crc)
    }

    /// As `new`, with the CRC64NVME already taken of the bytes (to check the one sent).
    pub fn new_with_crc(data: Bytes, crc: Crc) -> Self {
        let etag = format!("\"{}\"", hex::encode(Md5::digest(&data)));
        Self::with_crc(data.into(), etag, crc)
    }

    /// An object of `data` whose ETag is `etag` (a copy's, say).
    pub fn with_etag(data: impl Into<Body>, etag: String) -> Self {
        let data = data.into();
        let crc = Crc::of_parts(data.pieces().iter().map(|p| Crc::of(p)));
        Self::with_crc(data, etag, crc)
    }

    /// An object of `data`, whose ETag is `etag` and CRC64NVME `crc` (taken as its parts
    /// arrived).
    pub fn with_crc(data: Body, etag: String, crc: Crc) -> Self {
        Self {
            crc64nvme: crc.to_base64(),
            data,
            etag,
            last_modified: SystemTime::now(),
            headers: Attributes::default(),
        }
    }

    /// An object of `len` bytes computed from `key` (the synthetic store's pattern, slices of
    /// its table, no copy), with their CRC64NVME.
    fn computed(key: &str, len: u64, etag: String, last_modified: SystemTime) -> Self {
        let data = Body::from_pieces(synthetic::slices(key, 0..len));
        Self {
            last_modified,
            ..Self::with_crc(data, etag, synthetic::crc(key, len))
        }
    }

    /// The object, with `headers` kept to return on GET and HEAD.
    pub fn with_headers(mut self, headers: Attributes) -> Self {
        self.headers = headers;
        self
    }
}

/// A part of a multipart upload.
#[derive(Debug, Clone)]
pub struct Part {
    /// Its bytes.
    pub data: Bytes,
    /// Quoted, as S3 sends it.
    pub etag: String,
    /// Its CRC64NVME, taken as it arrived, so that Complete combines CRCs rather than reading
    /// the object again.
    pub crc: Crc,
}

/// A multipart upload in progress.
#[derive(Debug, Default)]
pub struct Upload {
    /// Its bucket.
    pub bucket: String,
    /// Its key.
    pub key: String,
    /// Parts uploaded so far, by number.
    pub parts: BTreeMap<i32, Part>,
    /// When CreateMultipartUpload made it (`None` only in `Default`).
    pub initiated: Option<std::time::SystemTime>,
    /// The headers CreateMultipartUpload carried, for the object Complete makes.
    pub headers: Attributes,
}

fn write_pieces(path: &Path, pieces: &[Bytes]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path)?;
    pieces.iter().try_for_each(|p| f.write_all(p))
}

/// Every bucket and object, in memory or written through to a directory; and the synthetic
/// objects of one bucket, computed when asked (`synthetic`).
#[derive(Debug, Default)]
pub struct Storage {
    buckets: RwLock<HashMap<String, BTreeMap<String, StoredObject>>>,
    pub(crate) uploads: std::sync::Mutex<HashMap<String, Upload>>,
    dir: Option<PathBuf>,
    synthetic: Option<SyntheticBucket>,
    /// Keep only the length and checksums of what is written (`--sink`), and what a read of
    /// it gets.
    pub(crate) sink: Sink,
}

/// Whether a server keeps what is written (`--sink`), and if not, what a read of it gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sink {
    /// Writes are kept and read back.
    #[default]
    Off,
    /// Only the length and checksums of a write are kept; a read of it is refused, naming
    /// `--sink` (`InvalidObjectState`).
    Refuse,
    /// As `Refuse`, but a read gets bytes computed from the key (the synthetic store's
    /// pattern) of the length written, with their own CRC: a checkpoint of any size can be
    /// saved and loaded, not restored.
    Computed,
}

impl Sink {
    /// Whether written bytes are dropped.
    pub fn drops(self) -> bool {
        self != Sink::Off
    }
}

/// The bucket that holds the synthetic objects, and when they were "written".
#[derive(Debug)]
struct SyntheticBucket {
    bucket: String,
    objects: Synthetic,
    modified: SystemTime,
}

impl Storage {
    /// Storage held in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Loads every file under `dir/<bucket>/` and writes later PUTs and DELETEs through.
    pub fn with_dir(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let s = Self {
            dir: Some(dir.to_owned()),
            ..Self::default()
        };
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let bucket = entry.file_name().to_string_lossy().into_owned();
            s.create_bucket(&bucket);
            let mut stack = vec![entry.path()];
            while let Some(d) = stack.pop() {
                for f in std::fs::read_dir(&d)? {
                    let f = f?;
                    let path = f.path();
                    if f.file_type()?.is_dir() {
                        stack.push(path);
                    } else {
                        let key = path
                            .strip_prefix(entry.path())
                            .unwrap_or(&path)
                            .to_string_lossy()
                            .replace('\\', "/");
                        let data = Bytes::from(std::fs::read(&path)?);
                        s.buckets
                            .write()
                            .unwrap()
                            .get_mut(&bucket)
                            .unwrap()
                            .insert(key, StoredObject::new(data));
                    }
                }
            }
        }
        Ok(s)
    }

    /// Serves `objects` in `bucket` (created if needed), beside what is stored there: they
    /// can be read, listed and copied, not replaced or deleted.
    pub fn with_synthetic(mut self, bucket: &str, objects: Synthetic) -> Self {
        self.create_bucket(bucket);
        self.synthetic = Some(SyntheticBucket {
            bucket: bucket.to_owned(),
            objects,
            modified: SystemTime::now(),
        });
        self
    }

    /// Keeps only the length and checksums of objects written from now on (`--sink`); `sink`
    /// says what a read of them gets.
    pub fn sinking(mut self, sink: Sink) -> Self {
        self.sink = sink;
        self
    }

    /// The synthetic objects, if `bucket` holds them.
    fn synthetic(&self, bucket: &str) -> Option<&SyntheticBucket> {
        self.synthetic.as_ref().filter(|s| s.bucket == bucket)
    }

    /// Refuses a write or delete of a synthetic object.
    fn writable(&self, bucket: &str, key: &str) -> Result<(), Missing> {
        match self.synthetic(bucket) {
            Some(s) if s.objects.contains(key) => Err(Missing::Synthetic),
            _ => Ok(()),
        }
    }

    /// Creates `bucket`; `false` if it existed.
    pub fn create_bucket(&self, bucket: &str) -> bool {
        let mut b = self.buckets.write().unwrap();
        if b.contains_key(bucket) {
            return false;
        }
        b.insert(bucket.to_owned(), BTreeMap::new());
        if let Some(dir) = &self.dir {
            std::fs::create_dir_all(dir.join(bucket)).ok();
        }
        true
    }

    /// Whether `bucket` exists.
    pub fn bucket_exists(&self, bucket: &str) -> bool {
        self.buckets.read().unwrap().contains_key(bucket)
    }

    /// The buckets, by name.
    pub fn bucket_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.buckets.read().unwrap().keys().cloned().collect();
        v.sort();
        v
    }

    /// The object at `bucket`/`key`.
    pub fn get(&self, bucket: &str, key: &str) -> Result<StoredObject, Missing> {
        let b = self.buckets.read().unwrap();
        let objs = b.get(bucket).ok_or(Missing::Bucket)?;
        if let Some(o) = objs.get(key) {
            if o.data.is_sunk() && self.sink == Sink::Computed {
                let len = o.data.len() as u64;
                return Ok(
                    StoredObject::computed(key, len, o.etag.clone(), o.last_modified)
                        .with_headers(o.headers.clone()),
                );
            }
            return Ok(o.clone());
        }
        let s = self.synthetic(bucket).ok_or(Missing::Key)?;
        let found = s.objects.get(key).ok_or(Missing::Key)?;
        Ok(StoredObject::computed(
            key, found.size, found.etag, s.modified,
        ))
    }

    /// Stores `obj` at `bucket`/`key`, replacing any object there.
    pub fn put(&self, bucket: &str, key: &str, obj: StoredObject) -> Result<(), Missing> {
        self.put_if(bucket, key, obj, &Condition::None)
            .map_err(|r| match r {
                Refused::Missing(m) => m,
                Refused::Precondition => unreachable!("no condition to fail"),
            })
    }

    /// `put` if `condition` holds, checked under the lock the write holds, as S3 decides
    /// conditional writes atomically. `If-Match` on a missing key is `NoSuchKey`, as on S3.
    pub fn put_if(
        &self,
        bucket: &str,
        key: &str,
        obj: StoredObject,
        condition: &Condition,
    ) -> Result<(), Refused> {
        self.writable(bucket, key)?;
        let mut obj = obj;
        if self.sink.drops() {
            obj.data = Body::sunk(obj.data.len());
        }
        let mut b = self.buckets.write().unwrap();
        let objs = b.get_mut(bucket).ok_or(Missing::Bucket)?;
        match (condition, objs.get(key)) {
            (Condition::None, _) | (Condition::Absent, None) => {}
            (Condition::ETag(_), None) => return Err(Missing::Key.into()),
            (Condition::ETag(want), Some(o)) if o.etag.trim_matches('"') == want => {}
            _ => return Err(Refused::Precondition),
        }
        if let Some(dir) = &self.dir {
            let path = file_path(dir, bucket, key)?;
            if let Some(p) = path.parent() {
                std::fs::create_dir_all(p).ok();
            }
            if let Err(e) = write_pieces(&path, obj.data.pieces()) {
                tracing::warn!(path = %path.display(), error = %e, "write-through failed");
            }
        }
        objs.insert(key.to_owned(), obj);
        Ok(())
    }

    /// S3 DELETE is idempotent: deleting a missing key succeeds.
    pub fn delete(&self, bucket: &str, key: &str) -> Result<(), Missing> {
        self.writable(bucket, key)?;
        let path = match &self.dir {
            Some(dir) => Some(file_path(dir, bucket, key)?),
            None => None,
        };
        let mut b = self.buckets.write().unwrap();
        b.get_mut(bucket).ok_or(Missing::Bucket)?.remove(key);
        if let Some(path) = path {
            std::fs::remove_file(path).ok();
        }
        Ok(())
    }

    /// The keys of the objects stored in `bucket` (not the synthetic ones), in order.
    pub fn keys(&self, bucket: &str) -> Result<Vec<String>, Missing> {
        let b = self.buckets.read().unwrap();
        Ok(b.get(bucket)
            .ok_or(Missing::Bucket)?
            .keys()
            .cloned()
            .collect())
    }

    /// One ListObjectsV2 page of `bucket` (see `listing::page`): the stored objects and
    /// the synthetic ones, merged in key order.
    pub(crate) fn list(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<listing::After<'_>>,
        max: usize,
    ) -> Result<Page, Missing> {
        let b = self.buckets.read().unwrap();
        let objs = b.get(bucket).ok_or(Missing::Bucket)?;
        let synthetic = self.synthetic(bucket).map(|s| (&s.objects, s.modified));
        Ok(listing::page(
            objs, synthetic, prefix, delimiter, after, max,
        ))
    }
}

/// What a lookup did not find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// No such bucket.
    Bucket,
    /// No such key.
    Key,
    /// A key that is not a safe relative file path, refused with `--data-dir`.
    UnsafeKey,
    /// A synthetic object, which cannot be replaced or deleted.
    Synthetic,
}

/// Where `key` lives under `dir`: only keys that are plain relative paths (no `..` or `.`
/// segment, no empty segment, no leading `/`, no NUL, not a directory marker), so that no
/// request can write or delete outside the directory.
fn file_path(dir: &Path, bucket: &str, key: &str) -> Result<PathBuf, Missing> {
    let unsafe_key = key.is_empty()
        || key.starts_with('/')
        || key.contains('\0')
        || key
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..");
    if unsafe_key {
        return Err(Missing::UnsafeKey);
    }
    Ok(dir.join(bucket).join(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_in_pieces_slices_any_range_as_one_buffer_would() {
        let whole: Vec<u8> = (0..100u8).collect();
        let cuts = [0, 7, 7, 40, 99, 100];
        let pieces = cuts
            .windows(2)
            .map(|w| Bytes::copy_from_slice(&whole[w[0]..w[1]]))
            .collect();
        let body = Body::from_pieces(pieces);
        assert_eq!(body.len(), 100);
        assert_eq!(body, whole);
        for start in 0..100 {
            for end in start + 1..=100 {
                let got: Vec<u8> = body.slices(start..end).concat();
                assert_eq!(got, &whole[start..end], "{start}..{end}");
            }
        }
        assert!(body.slices(3..5).len() == 1, "within one piece: one slice");
        assert_ne!(body, Body::from(Bytes::from(vec![0u8; 100])));
    }
}
