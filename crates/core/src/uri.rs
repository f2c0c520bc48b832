//! `s3://bucket/key` URIs.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// A parsed `s3://bucket/key` URI. The bucket name is valid by construction; the key may be
/// empty (the whole bucket, as a listing prefix) and is kept exactly as given.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectUri {
    bucket: String,
    key: String,
}

impl ObjectUri {
    pub fn parse(s: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidUri {
            uri: s.to_owned(),
            reason: reason.to_owned(),
        };
        if s.is_empty() {
            return Err(invalid("empty URI; expected s3://bucket/key"));
        }
        let rest = s.strip_prefix("s3://").ok_or_else(|| {
            invalid(match s.split_once("://") {
                Some((scheme, _)) if !scheme.is_empty() => {
                    "unsupported scheme; expected s3://bucket/key"
                }
                _ => "missing s3:// scheme; expected s3://bucket/key",
            })
        })?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("missing bucket name"));
        }
        validate_bucket(bucket).map_err(|r| invalid(&format!("bucket {bucket:?}: {r}")))?;
        if key.len() > 1024 {
            return Err(invalid("key longer than 1024 bytes"));
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            key: key.to_owned(),
        })
    }

    /// Builds a URI from parts, validating the bucket name.
    pub fn new(bucket: &str, key: &str) -> Result<Self> {
        Self::parse(&format!("s3://{bucket}/{key}"))
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The same bucket with another key.
    pub fn with_key(&self, key: impl Into<String>) -> Self {
        Self {
            bucket: self.bucket.clone(),
            key: key.into(),
        }
    }
}

/// The S3 bucket naming rules that matter for addressing: 3–63 characters of lowercase
/// letters, digits, dots and hyphens, beginning and ending with a letter or digit, not
/// formatted like an IPv4 address.
fn validate_bucket(b: &str) -> std::result::Result<(), &'static str> {
    if !(3..=63).contains(&b.len()) {
        return Err("bucket names are 3 to 63 characters long");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("bucket names use only lowercase letters, digits, '.' and '-'");
    }
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !alnum(b.as_bytes()[0]) || !alnum(b.as_bytes()[b.len() - 1]) {
        return Err("bucket names begin and end with a letter or digit");
    }
    if b.contains("..") {
        return Err("bucket names have no two adjacent dots");
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
        write!(f, "s3://{}/{}", self.bucket, self.key)
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
            ("bucket/key", "missing s3://"),
            ("http://bucket/key", "unsupported scheme"),
            ("s3://", "missing bucket"),
            ("s3:///key", "missing bucket"),
            ("s3://ab/key", "3 to 63"),
            ("s3://Bucket/key", "lowercase"),
            ("s3://-bucket/key", "begin and end"),
            ("s3://a..b/key", "adjacent dots"),
            ("s3://192.168.1.1/key", "IP address"),
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

    proptest! {
        #[test]
        fn display_round_trips(bucket in "[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", key in "[a-zA-Z0-9/._ -]{0,40}") {
            let u = ObjectUri::new(&bucket, &key).unwrap();
            prop_assert_eq!(ObjectUri::parse(&u.to_string()).unwrap(), u);
        }
    }
}
