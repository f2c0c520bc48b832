//! What a write asks for beyond its bytes (per-operation parameters, as [`GetOptions`](crate::GetOptions) for
//! reads): S3's conditional writes and the headers stored with the object.
//!
//! Why conditional writes: two writers of one key (two ranks saving a checkpoint, an fsspec
//! `open(path, "xb")`, object_store's `PutMode::Create`) must not silently overwrite each
//! other. S3 has answered `If-None-Match: *` and `If-Match` on PutObject and
//! CompleteMultipartUpload since 2024 with `412 PreconditionFailed`, atomically on its side.

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What S3 puts before a user metadata name in a header.
pub(crate) const METADATA_PREFIX: &str = "x-amz-meta-";

/// When a write may replace the object under its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PutMode {
    /// Always (S3's default).
    #[default]
    Overwrite,
    /// Only if no object has the key (`If-None-Match: *`). Losing the race is a 412
    /// `PreconditionFailed` (`Error::is_precondition_failed`); nothing is written.
    Create,
    /// Only if the object's current ETag is this one (`If-Match`): a read-modify-write that
    /// loses to another writer gets a 412; a missing object a 404 (as S3 answers).
    Update(String),
}

impl PutMode {
    /// The `If-Match` value a write in this mode carries.
    pub fn if_match(&self) -> Option<&str> {
        match self {
            PutMode::Update(etag) => Some(etag),
            _ => None,
        }
    }

    /// The `If-None-Match` value a write in this mode carries.
    pub fn if_none_match(&self) -> Option<&str> {
        (*self == PutMode::Create).then_some("*")
    }

    /// The header that carries the condition (`If-None-Match: *`, `If-Match: <etag>`).
    pub fn condition_header(&self) -> Option<(&'static str, &str)> {
        let if_match = self.if_match().map(|v| ("if-match", v));
        if_match.or_else(|| self.if_none_match().map(|v| ("if-none-match", v)))
    }
}

/// The headers S3 stores with an object and returns on GET and HEAD.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Cache-Control`.
    pub cache_control: Option<String>,
    /// `Content-Disposition`.
    pub content_disposition: Option<String>,
    /// `Content-Encoding`: stored as given; sluice never decodes a body.
    pub content_encoding: Option<String>,
    /// `Content-Language`.
    pub content_language: Option<String>,
    /// User metadata, sent as `x-amz-meta-<name>: <value>`. S3 lower-cases names, so names
    /// are kept lower-case here too; values are printable ASCII (S3 would otherwise need
    /// RFC 2047 encoding, which readers disagree on).
    pub metadata: BTreeMap<String, String>,
}

impl Attributes {
    /// No attribute set: the store's defaults apply.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The standard headers as `(name, value)`, lower-case names, in a fixed order.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("content-type", &self.content_type),
            ("cache-control", &self.cache_control),
            ("content-disposition", &self.content_disposition),
            ("content-encoding", &self.content_encoding),
            ("content-language", &self.content_language),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.as_deref().map(|v| (n, v)))
    }

    /// Every attribute as the HTTP header that carries it: the standard ones, then
    /// `x-amz-meta-<name>` per metadata entry.
    pub fn to_headers(&self) -> impl Iterator<Item = (Cow<'static, str>, &str)> {
        self.headers().map(|(n, v)| (Cow::Borrowed(n), v)).chain(
            self.metadata
                .iter()
                .map(|(n, v)| (Cow::Owned(format!("{METADATA_PREFIX}{n}")), v.as_str())),
        )
    }

    /// The attributes a GET or HEAD answer's headers carry (others are ignored); values
    /// that are not text are skipped.
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Self {
        let mut a = Self::default();
        for (name, value) in headers {
            let Ok(value) = std::str::from_utf8(value) else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            match name.strip_prefix(METADATA_PREFIX) {
                Some(meta) => {
                    a.metadata.insert(meta.to_owned(), value.to_owned());
                }
                None => {
                    a.set_header(&name, value.to_owned());
                }
            }
        }
        a
    }

    /// Sets the standard header `name` (any case); false when `name` is not one of them.
    pub fn set_header(&mut self, name: &str, value: String) -> bool {
        let slot = match name.to_ascii_lowercase().as_str() {
            "content-type" => &mut self.content_type,
            "cache-control" => &mut self.cache_control,
            "content-disposition" => &mut self.content_disposition,
            "content-encoding" => &mut self.content_encoding,
            "content-language" => &mut self.content_language,
            _ => return false,
        };
        *slot = Some(value);
        true
    }

    /// Every value a header can carry, every metadata name a header name can end with;
    /// the error names the attribute at fault.
    pub fn validate(&self) -> Result<()> {
        let header_value = |s: &str| s.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b));
        for (name, value) in self.headers() {
            if !header_value(value) {
                return Err(Error::config(
                    name,
                    "is not printable ASCII, which an HTTP header needs",
                ));
            }
        }
        for (name, value) in &self.metadata {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
            if !token {
                return Err(Error::config(
                    format!("metadata {name:?}"),
                    "a metadata name is lower-case ASCII letters, digits, '-', '_' or '.'",
                ));
            }
            if !header_value(value) {
                // The value is not echoed: metadata may hold what should not be logged.
                return Err(Error::config(
                    format!("metadata {name:?}"),
                    "its value is not printable ASCII, which an HTTP header needs",
                ));
            }
        }
        Ok(())
    }
}

/// What one PUT, multipart upload or streaming writer asks for beyond its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Whether it may replace an existing object.
    pub mode: PutMode,
    /// Headers stored with the object.
    pub attributes: Attributes,
}

impl PutOptions {
    /// Only if the key is free (`PutMode::Create`).
    pub fn create() -> Self {
        Self {
            mode: PutMode::Create,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_come_in_a_fixed_order_and_skip_unset() {
        let mut a = Attributes::default();
        assert!(a.is_empty());
        assert!(a.set_header("Content-Language", "en".into()));
        assert!(a.set_header("content-type", "text/plain".into()));
        assert!(!a.set_header("x-amz-meta-a", "b".into()));
        let h: Vec<_> = a.headers().collect();
        assert_eq!(
            h,
            [("content-type", "text/plain"), ("content-language", "en")]
        );
        assert!(!a.is_empty());
    }

    #[test]
    fn headers_round_trip() {
        let mut a = Attributes {
            cache_control: Some("max-age=60".into()),
            ..Attributes::default()
        };
        a.metadata.insert("k".into(), "v  w".into());
        let sent: Vec<(String, Vec<u8>)> = a
            .to_headers()
            .map(|(n, v)| (n.into_owned(), v.as_bytes().to_vec()))
            .chain([("etag".to_owned(), b"\"x\"".to_vec())])
            .collect();
        assert_eq!(sent[1].0, "x-amz-meta-k");
        let back = Attributes::from_headers(sent.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
        assert_eq!(back, a);
    }

    #[test]
    fn validation_names_the_attribute_at_fault() {
        let mut a = Attributes::default();
        a.metadata.insert("Upper".into(), "v".into());
        assert!(a.validate().unwrap_err().to_string().contains("\"Upper\""));
        a.metadata.clear();
        a.metadata.insert("ok".into(), "snow\u{2603}".into());
        assert!(a.validate().unwrap_err().to_string().contains("\"ok\""));
        a.metadata.clear();
        a.content_type = Some("a\nb".into());
        assert!(
            a.validate()
                .unwrap_err()
                .to_string()
                .contains("content-type")
        );
        a.content_type = Some("text/html; charset=utf-8".into());
        a.metadata
            .insert("key_with_spaces".into(), "hello   world".into());
        a.validate().unwrap();
    }

    #[test]
    fn modes_map_to_s3_condition_headers() {
        assert_eq!(PutMode::Overwrite.condition_header(), None);
        assert_eq!(
            PutMode::Create.condition_header(),
            Some(("if-none-match", "*"))
        );
        let update = PutMode::Update("\"abc\"".into());
        assert_eq!(update.condition_header(), Some(("if-match", "\"abc\"")));
    }
}
