//! Object URIs: `s3://bucket/key`, Azure Blob Storage's `az://container/key`, Google Cloud
//! Storage's `gs://bucket/key`, and local files as `file:///path` (through the page cache) or
//! `direct:///path` (O_DIRECT), the schemes s3dlio and MLPerf Storage use.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Where an object lives, and so which store serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// An S3-compatible object store.
    S3,
    /// Azure Blob Storage: `az://container/key` (the account is configuration's).
    Az,
    /// Google Cloud Storage: `gs://bucket/key`.
    Gs,
    /// A local or network file system, read through the page cache.
    File,
    /// A local or network file system, read with O_DIRECT (no page cache).
    Direct,
}

impl Scheme {
    /// The URI prefix, `s3://`, `az://`, `gs://`, `file://` or `direct://`.
    pub fn prefix(self) -> &'static str {
        match self {
            Scheme::S3 => "s3://",
            Scheme::Az => "az://",
            Scheme::Gs => "gs://",
            Scheme::File => "file://",
            Scheme::Direct => "direct://",
        }
    }

    /// Whether URIs of this scheme name a bucket (or container) of an object store, rather
    /// than a path of the file system.
    pub fn is_object_store(self) -> bool {
        matches!(self, Scheme::S3 | Scheme::Az | Scheme::Gs)
    }

    /// What the bucket is called in this store's own words, for messages.
    fn bucket_word(self) -> &'static str {
        match self {
            Scheme::Az => "container",
            _ => "bucket",
        }
    }
}

const EXPECTED: &str =
    "expected s3://bucket/key, az://container/key, gs://bucket/key, file:///path or direct:///path";

/// Other spellings of the object-store schemes, as fsspec, object_store and s3dlio accept
/// them; a URI is always shown in its canonical form.
const ALIASES: &[(&str, Scheme)] = &[
    ("s3://", Scheme::S3),
    ("az://", Scheme::Az),
    ("azure://", Scheme::Az),
    ("gs://", Scheme::Gs),
    ("gcs://", Scheme::Gs),
];

/// A parsed object URI. For an object store (`s3://`, `az://`, `gs://`) the bucket or
/// container name is valid by construction and the key may be empty (the whole bucket, as a listing prefix); for `file://` and `direct://` the bucket
/// is empty and the key is the path, absolute (`file:///data/x` → `/data/x`) or relative to
/// the working directory (`file://data/x`). Keys are kept exactly as given.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectUri {
    scheme: Scheme,
    bucket: String,
    key: String,
}

impl ObjectUri {
    /// Parses `s3://bucket/key`, `az://container/key` (or `azure://`), `gs://bucket/key` (or
    /// `gcs://`), `file://path` or `direct://path`. Errors (`Error::InvalidUri`, quoting `s`)
    /// for an empty string, another or no scheme, an empty path, a path with NUL, a bucket or
    /// container name its store would refuse, or a key longer than 1024 bytes.
    pub fn parse(s: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidUri {
            uri: s.to_owned(),
            reason: reason.to_owned(),
        };
        if s.is_empty() {
            return Err(invalid(&format!("empty URI; {EXPECTED}")));
        }
        for scheme in [Scheme::File, Scheme::Direct] {
            if let Some(path) = s.strip_prefix(scheme.prefix()) {
                if path.is_empty() {
                    return Err(invalid("missing path"));
                }
                if path.contains('\0') {
                    return Err(invalid("paths cannot contain NUL"));
                }
                return Ok(Self {
                    scheme,
                    bucket: String::new(),
                    key: path.to_owned(),
                });
            }
        }
        let (scheme, rest) = ALIASES
            .iter()
            .find_map(|(prefix, scheme)| s.strip_prefix(prefix).map(|rest| (*scheme, rest)))
            .ok_or_else(|| {
                invalid(&match s.split_once("://") {
                    Some((scheme, _)) if !scheme.is_empty() => {
                        format!("unsupported scheme; {EXPECTED}")
                    }
                    _ => format!("missing scheme; {EXPECTED}"),
                })
            })?;
        let word = scheme.bucket_word();
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid(&format!("missing {word} name")));
        }
        validate_bucket(scheme, bucket).map_err(|r| invalid(&format!("{word} {bucket:?}: {r}")))?;
        if key.len() > 1024 {
            return Err(invalid("key longer than 1024 bytes"));
        }
        Ok(Self {
            scheme,
            bucket: bucket.to_owned(),
            key: key.to_owned(),
        })
    }

    /// Builds an `s3://` URI from parts, validating the bucket name.
    pub fn new(bucket: &str, key: &str) -> Result<Self> {
        Self::parse(&format!("s3://{bucket}/{key}"))
    }

    /// Which kind of store serves it.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The bucket or container (empty for `file://` and `direct://`).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The object key (for `s3://`, possibly empty: the whole bucket), or the file's path.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// S3 CopyObject's `x-amz-copy-source` naming this object: `/bucket/key`, the key
    /// percent-encoded as in a URL path (its `/` kept).
    pub fn copy_source(&self) -> String {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        const KEEP: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'.')
            .remove(b'_')
            .remove(b'~')
            .remove(b'/');
        format!("/{}/{}", self.bucket, utf8_percent_encode(&self.key, KEEP))
    }

    /// The same scheme and bucket with another key.
    pub fn with_key(&self, key: impl Into<String>) -> Self {
        Self {
            scheme: self.scheme,
            bucket: self.bucket.clone(),
            key: key.into(),
        }
    }
}

/// The naming rules of each store that matter for addressing. S3: 3–63 characters of
/// lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit,
/// not formatted like an IPv4 address. Azure containers: 3–63 lowercase letters, digits and
/// hyphens, no two hyphens together. GCS: as S3, with underscores, and up to 222 characters
/// when dotted.
fn validate_bucket(scheme: Scheme, b: &str) -> std::result::Result<(), &'static str> {
    let max = match scheme {
        Scheme::Gs if b.contains('.') => 222,
        _ => 63,
    };
    if !(3..=max).contains(&b.len()) {
        return Err(match scheme {
            Scheme::Az => "container names are 3 to 63 characters long",
            Scheme::Gs => "bucket names are 3 to 63 characters long (222 with dots)",
            _ => "bucket names are 3 to 63 characters long",
        });
    }
    let allowed = |c: u8| match scheme {
        Scheme::Az => c == b'-',
        Scheme::Gs => c == b'.' || c == b'-' || c == b'_',
        _ => c == b'.' || c == b'-',
    };
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || allowed(c))
    {
        return Err(match scheme {
            Scheme::Az => "container names use only lowercase letters, digits and '-'",
            Scheme::Gs => "bucket names use only lowercase letters, digits, '.', '-' and '_'",
            _ => "bucket names use only lowercase letters, digits, '.' and '-'",
        });
    }
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !alnum(b.as_bytes()[0]) || !alnum(b.as_bytes()[b.len() - 1]) {
        return Err(match scheme {
            Scheme::Az => "container names begin and end with a letter or digit",
            _ => "bucket names begin and end with a letter or digit",
        });
    }
    if b.contains("..") {
        return Err("bucket names have no two adjacent dots");
    }
    if b.contains("--") && scheme == Scheme::Az {
        return Err("container names have no two adjacent hyphens");
    }
    if b.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("bucket names are not IP addresses");
    }
    Ok(())
}

impl FromStr for ObjectUri {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl fmt::Display for ObjectUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            s if s.is_object_store() => write!(f, "{}{}/{}", s.prefix(), self.bucket, self.key),
            other => write!(f, "{}{}", other.prefix(), self.key),
        }
    }
}

impl fmt::Debug for ObjectUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectUri({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_bucket_and_key() {
        let u = ObjectUri::parse("s3://my-bucket/a/b/c.npz").unwrap();
        assert_eq!((u.bucket(), u.key()), ("my-bucket", "a/b/c.npz"));
        assert_eq!(u.to_string(), "s3://my-bucket/a/b/c.npz");
        let b = ObjectUri::parse("s3://bucket").unwrap();
        assert_eq!((b.bucket(), b.key()), ("bucket", ""));
        assert_eq!(ObjectUri::parse("s3://bucket/").unwrap().key(), "");
    }

    #[test]
    fn rejects_malformed_input_naming_it() {
        for (input, needle) in [
            ("", "empty"),
            ("bucket/key", "missing scheme"),
            ("file://", "missing path"),
            ("http://bucket/key", "unsupported scheme"),
            ("s3://", "missing bucket"),
            ("s3:///key", "missing bucket"),
            ("s3://ab/key", "3 to 63"),
            ("s3://Bucket/key", "lowercase"),
            ("s3://-bucket/key", "begin and end"),
            ("s3://a..b/key", "adjacent dots"),
            ("s3://192.168.1.1/key", "IP address"),
            ("az://", "missing container"),
            ("az://my.container/k", "letters, digits and '-'"),
            ("az://a--b/k", "adjacent hyphens"),
            ("gs://Bucket/k", "lowercase"),
            ("gs://_bucket/k", "begin and end"),
        ] {
            let err = ObjectUri::parse(input).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::InvalidUri { .. }), "{input}: {msg}");
            assert!(msg.contains(needle), "{input}: {msg}");
            assert!(
                msg.contains(&format!("{input:?}")),
                "message names the URI: {msg}"
            );
        }
    }

    #[test]
    fn file_and_direct_uris_keep_the_path_as_key() {
        let f = ObjectUri::parse("file:///data/train/a.npz").unwrap();
        assert_eq!(
            (f.scheme(), f.bucket(), f.key()),
            (Scheme::File, "", "/data/train/a.npz")
        );
        assert_eq!(f.to_string(), "file:///data/train/a.npz");
        let d = ObjectUri::parse("direct://rel/x").unwrap();
        assert_eq!((d.scheme(), d.key()), (Scheme::Direct, "rel/x"));
        assert_eq!(d.with_key("rel/y").to_string(), "direct://rel/y");
        assert_eq!(ObjectUri::parse("s3://bkt/k").unwrap().scheme(), Scheme::S3);
    }

    #[test]
    fn azure_and_gcs_uris_name_container_or_bucket_and_key() {
        let a = ObjectUri::parse("az://train-data/a/b.npz").unwrap();
        assert_eq!(
            (a.scheme(), a.bucket(), a.key()),
            (Scheme::Az, "train-data", "a/b.npz")
        );
        assert_eq!(a.to_string(), "az://train-data/a/b.npz");
        assert_eq!(
            ObjectUri::parse("azure://train-data/x")
                .unwrap()
                .to_string(),
            "az://train-data/x"
        );
        let g = ObjectUri::parse("gcs://my_bucket.v2/k").unwrap();
        assert_eq!(
            (g.scheme(), g.bucket(), g.key()),
            (Scheme::Gs, "my_bucket.v2", "k")
        );
        assert_eq!(g.to_string(), "gs://my_bucket.v2/k");
        assert_eq!(g.with_key("j").to_string(), "gs://my_bucket.v2/j");
        assert!(Scheme::Gs.is_object_store() && !Scheme::File.is_object_store());
        // Each store's own rules: S3 refuses what GCS allows.
        assert!(ObjectUri::parse("s3://my_bucket/k").is_err());
    }

    proptest! {
        #[test]
        fn display_round_trips(bucket in "[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", key in "[a-zA-Z0-9/._ -]{0,40}") {
            let u = ObjectUri::new(&bucket, &key).unwrap();
            prop_assert_eq!(ObjectUri::parse(&u.to_string()).unwrap(), u);
        }

        /// Any text, and any text after each scheme: a URI or an error, never a panic.
        #[test]
        fn parsing_never_panics(s in "\\PC{0,80}", scheme in prop::sample::select(vec!["s3://", "az://", "gs://", "gcs://", "file://", "direct://", "S3://", ""])) {
            let _ = ObjectUri::parse(&s);
            if let Err(e) = ObjectUri::parse(&format!("{scheme}{s}")) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
