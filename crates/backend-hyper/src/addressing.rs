//! Where a request goes: path-style or virtual-hosted URLs, S3 key encoding, query strings.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sluice_core::{ObjectUri, StoreConfig};
use url::Url;

/// RFC 3986 unreserved characters stay; everything else is escaped. This is also SigV4's
/// canonical form, so what we send is what gets signed.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// Keys keep their `/` separators readable (S3 and SigV4 treat them literally in paths).
const KEY: &AsciiSet = &STRICT.remove(b'/');

#[derive(Debug, Clone)]
pub struct Addressing {
    endpoint: Url,
    path_style: bool,
}

impl Addressing {
    pub fn new(cfg: &StoreConfig) -> Self {
        Self {
            endpoint: cfg.endpoint_url(),
            path_style: cfg.path_style,
        }
    }

    /// The URL of `bucket`/`key` with `query` pairs (values escaped here).
    pub fn url(&self, bucket: &str, key: &str, query: &[(&str, &str)]) -> String {
        let scheme = self.endpoint.scheme();
        let host = self.endpoint.host_str().unwrap_or("localhost");
        let port = self
            .endpoint
            .port()
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        let base_path = self.endpoint.path().trim_end_matches('/');
        let key = utf8_percent_encode(key, KEY);
        let mut url = if self.path_style {
            format!("{scheme}://{host}{port}{base_path}/{bucket}/{key}")
        } else {
            format!("{scheme}://{bucket}.{host}{port}{base_path}/{key}")
        };
        for (i, (k, v)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(k);
            if !v.is_empty() || !matches!(*k, "uploads" | "delete") {
                url.push('=');
                url.extend(utf8_percent_encode(v, STRICT));
            }
        }
        url
    }

    pub fn object(&self, uri: &ObjectUri, query: &[(&str, &str)]) -> String {
        self.url(uri.bucket(), uri.key(), query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::CredentialsCache;

    fn addressing(endpoint: &str, path_style: bool) -> Addressing {
        let mut cfg = StoreConfig::new(
            Some(endpoint.parse().unwrap()),
            "us-east-1",
            CredentialsCache::anonymous(),
        );
        cfg.path_style = path_style;
        Addressing::new(&cfg)
    }

    #[test]
    fn path_and_virtual_styles() {
        let uri = ObjectUri::parse("s3://bkt/dir/a b+c.npz").unwrap();
        assert_eq!(
            addressing("http://127.0.0.1:9000", true).object(&uri, &[]),
            "http://127.0.0.1:9000/bkt/dir/a%20b%2Bc.npz"
        );
        assert_eq!(
            addressing("https://s3.example.com", false).object(&uri, &[]),
            "https://bkt.s3.example.com/dir/a%20b%2Bc.npz"
        );
        assert_eq!(
            addressing("http://h:1/prefix/", true).object(&uri, &[]),
            "http://h:1/prefix/bkt/dir/a%20b%2Bc.npz"
        );
    }

    #[test]
    fn query_values_are_strictly_escaped() {
        let a = addressing("http://h", true);
        assert_eq!(
            a.url(
                "b",
                "",
                &[("list-type", "2"), ("prefix", "x/y z"), ("delimiter", "/")]
            ),
            "http://h/b/?list-type=2&prefix=x%2Fy%20z&delimiter=%2F"
        );
        assert_eq!(a.url("b", "k", &[("uploads", "")]), "http://h/b/k?uploads");
    }
}
