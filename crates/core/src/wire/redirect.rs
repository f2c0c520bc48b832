//! Redirects, followed once for every backend. S3 answers a request signed for the wrong
//! region with `301 PermanentRedirect` and the bucket's region in `x-amz-bucket-region` (and
//! no `Location`); gateways such as AIStore's answer `307` with a `Location` on one of their
//! nodes. A wire reports either as `Error::Redirect` (`Moved`); [`S3Store`](crate::S3Store) then repeats the
//! attempt on a wire built for the target (`Redirects`), at most `MAX_REDIRECTS` times per
//! request. A permanent move (301, 308) is remembered per bucket, so later requests go
//! straight there; a temporary one (302, 307) is followed each time it is answered.
//!
//! What is never followed, and why (the error then says so in `refused`):
//! - from `https` to `http`: the request and its answer would cross the network in clear;
//! - to a link-local or unspecified address, or a cloud metadata host: a hostile endpoint
//!   must not turn the client into a probe of the instance's credentials service;
//! - a `Location` that is not an absolute `http(s)` URL, a region that is not a region name.
//!
//! Credentials (the signature, and a session token) go along only to the same origin
//! (scheme, host and port) or from S3 to S3 in another region; a request moved anywhere else
//! is sent unsigned, as curl and browsers drop `Authorization` on a cross-origin redirect. Only the origin of a `Location` is used: the
//! request keeps its own path and query (a gateway's redirect names the same object).

/// The logger its events go to: `sluice.core.redirect` in Python, as before the module moved
/// under `wire/` (users filter by it).
const LOG_TARGET: &str = "sluice_core::redirect";

use crate::config::{StoreConfig, check_region};
use crate::credentials::CredentialsCache;
use crate::error::{Error, Moved, Result};
use crate::wire::{BodySink, GetRequest, GetWire, Operations, Reply, Request, Wire};
use async_trait::async_trait;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use url::{Host, Url};

/// Redirects followed for one request before giving up: S3 redirects once, a gateway once;
/// more is a loop.
pub const MAX_REDIRECTS: usize = 3;

/// Wires kept for redirect targets; a gateway naming more nodes than this has the oldest
/// forgotten (their connections closed), not memory grown without bound.
const MAX_TARGETS: usize = 64;

/// The configuration of a wire that sends `from`'s requests where `moved` points, or why
/// that must not be done.
/// `bucket`: the request's, which a virtual-hosted `Location` names in its host.
pub fn target_config(
    from: &StoreConfig,
    bucket: &str,
    moved: &Moved,
) -> std::result::Result<StoreConfig, String> {
    let mut to = from.clone();
    to.endpoints.clear();
    let here = from.endpoint_url();
    if let Some(region) = &moved.region {
        check_region("x-amz-bucket-region", region).map_err(|e| e.to_string())?;
        to.region = region.clone();
        // On AWS the region is part of the host; any other store keeps its endpoint and
        // signs for the region it named.
        if is_aws(&here) {
            to.endpoint = from.endpoint.as_ref().map(|_| {
                Url::parse(&format!("https://s3.{region}.amazonaws.com")).expect("checked region")
            });
        }
    }
    let Some(location) = &moved.location else {
        return if moved.region.is_some() {
            Ok(to)
        } else {
            Err("the reply names no Location and no x-amz-bucket-region".into())
        };
    };
    let target =
        Url::parse(location).map_err(|_| "its Location is not an absolute URL".to_owned())?;
    if !matches!(target.scheme(), "http" | "https") {
        return Err("its Location is not http or https".into());
    }
    if here.scheme() == "https" && target.scheme() == "http" {
        return Err("it goes from https to http".into());
    }
    let host = target.host().ok_or("its Location names no host")?;
    if forbidden_host(&host) {
        return Err(format!(
            "{host} is a link-local, unspecified or metadata address"
        ));
    }
    // Virtual-hosted addressing puts the bucket in front of the endpoint's host again.
    let host = host.to_string();
    let host = match host.strip_prefix(&format!("{bucket}.")) {
        Some(rest) if !to.path_style => rest.to_owned(),
        _ => host,
    };
    let mut endpoint = to.endpoint_url();
    endpoint
        .set_scheme(target.scheme())
        .and_then(|_| endpoint.set_host(Some(&host)).map_err(drop))
        .and_then(|_| endpoint.set_port(target.port()))
        .map_err(|_| "its Location cannot replace the endpoint's origin".to_owned())?;
    // The same origin (scheme, host, port), or S3 itself in another region.
    let origin = |u: &Url| {
        (
            u.scheme().to_owned(),
            u.host_str().map(str::to_owned),
            u.port_or_known_default(),
        )
    };
    let trusted = origin(&here) == origin(&endpoint) || (is_aws(&here) && is_aws(&endpoint));
    if !trusted {
        to.credentials = CredentialsCache::anonymous();
    }
    to.endpoint = Some(endpoint);
    Ok(to)
}

/// An S3 host of AWS: `s3.amazonaws.com`, `s3.<region>.amazonaws.com`, `s3-<region>`,
/// `s3-fips`, dual-stack, with or without a bucket in front. Not any `*.amazonaws.com`: load
/// balancers, API gateways and instances there belong to whoever runs them.
fn is_aws(url: &Url) -> bool {
    let Some(rest) = url.host_str().and_then(|h| {
        h.strip_suffix(".amazonaws.com")
            .or_else(|| h.strip_suffix(".amazonaws.com.cn"))
    }) else {
        return false;
    };
    let labels: Vec<&str> = rest.split('.').collect();
    let Some(s3) = labels
        .iter()
        .position(|l| *l == "s3" || l.starts_with("s3-"))
    else {
        return false;
    };
    labels[s3 + 1..]
        .iter()
        .all(|l| *l == "dualstack" || is_region(l))
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`: letters, dashes, a number at the end.
fn is_region(label: &str) -> bool {
    let mut parts = label.split('-');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    first.len() == 2
        && first.bytes().all(|b| b.is_ascii_lowercase())
        && rest.len() >= 2
        && rest
            .last()
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && rest[..rest.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
}

/// Hosts no S3 request may be sent to: link-local (169.254.0.0/16 holds the cloud metadata
/// services), unspecified, and the metadata services' names. A name not on the list is
/// checked again by the addresses it resolves to (`refused_by_resolution`, and by the hyper
/// backend at connect time).
fn forbidden_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            matches!(
                d.as_str(),
                "metadata.google.internal"
                    | "metadata"
                    | "instance-data"
                    | "instance-data.ec2.internal"
            )
        }
        Host::Ipv4(v4) => forbidden_ip(IpAddr::V4(*v4)),
        Host::Ipv6(v6) => forbidden_ip(IpAddr::V6(*v6)),
    }
}

/// Addresses no redirected request may reach: link-local (169.254.0.0/16 and fe80::/10: the
/// metadata services of AWS, Azure, GCP, OpenStack), unspecified, broadcast, Alibaba
/// Cloud's metadata service (100.100.100.200), AWS's IPv6 one (fd00:ec2::254), and any of
/// those inside an IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`), which reach the same host.
pub fn forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4 == std::net::Ipv4Addr::new(100, 100, 100, 200)
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            let embedded = if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let o = v6.octets();
                Some(std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]))
            } else {
                // `to_ipv4` takes both ::ffff:a.b.c.d and ::a.b.c.d (but :: and ::1 too).
                v6.to_ipv4()
                    .filter(|_| !v6.is_loopback() && !v6.is_unspecified())
            };
            v6.is_unspecified()
                || (seg[0] & 0xffc0) == 0xfe80
                || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || embedded.is_some_and(|v4| forbidden_ip(IpAddr::V4(v4)))
        }
    }
}

/// Why a redirect to `cfg`'s endpoint is refused by the addresses its host name resolves
/// to, if it is. A name that does not resolve is left to fail at connect time.
async fn refused_by_resolution(cfg: &StoreConfig) -> Option<String> {
    let url = cfg.endpoint_url();
    let Some(Host::Domain(name)) = url.host() else {
        return None;
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let lookup = tokio::net::lookup_host((name, port));
    let addrs = tokio::time::timeout(cfg.timeouts.connect, lookup)
        .await
        .ok()?
        .ok()?;
    let bad = addrs.map(|a| a.ip()).find(|ip| forbidden_ip(*ip))?;
    Some(format!(
        "{name} resolves to {bad}, a link-local, unspecified or metadata address"
    ))
}

/// A wire that follows redirects (see the module): the home wire, and wires built on demand
/// for the targets redirects name.
#[derive(Debug)]
pub(crate) struct Redirects<W> {
    home: Arc<W>,
    /// Builds a wire for a target; `None` (a store made `over` a given wire): redirects are
    /// reported, not followed.
    build: Option<fn(StoreConfig) -> Result<W>>,
    /// Buckets a permanent redirect moved, and the wire that reaches each now.
    moved: Mutex<HashMap<String, Arc<W>>>,
    /// Wires built for targets, by endpoint, region and whether they sign.
    targets: Mutex<HashMap<(String, String, bool), Arc<W>>>,
}

impl<W: Wire> Redirects<W> {
    pub(crate) fn new(home: W, build: Option<fn(StoreConfig) -> Result<W>>) -> Self {
        Self {
            home: Arc::new(home),
            build,
            moved: Mutex::default(),
            targets: Mutex::default(),
        }
    }

    pub(crate) fn home(&self) -> &W {
        &self.home
    }

    /// The wire for `bucket`'s requests: where a permanent redirect moved it, else home.
    fn route(&self, bucket: &str) -> Arc<W> {
        let moved = self.moved.lock().unwrap_or_else(|p| p.into_inner());
        moved.get(bucket).unwrap_or(&self.home).clone()
    }

    /// The wire to repeat a request on that `from` answered with a redirect (`err`), or the
    /// error, saying why it is not followed.
    async fn follow(&self, from: &W, bucket: &str, err: Error, hops: &mut usize) -> Result<Arc<W>> {
        let Error::Redirect {
            uri,
            moved,
            refused: None,
        } = err
        else {
            return Err(err);
        };
        let refuse = |why: String| Error::Redirect {
            uri: uri.clone(),
            moved: moved.clone(),
            refused: Some(why),
        };
        let Some(build) = self.build else {
            return Err(refuse("this store follows no redirects".into()));
        };
        *hops += 1;
        if *hops > MAX_REDIRECTS {
            return Err(refuse(format!("more than {MAX_REDIRECTS} redirects")));
        }
        let mut cfg = target_config(from.config(), bucket, &moved).map_err(refuse)?;
        if let Some(why) = refused_by_resolution(&cfg).await {
            return Err(refuse(why));
        }
        // The name may resolve elsewhere by the time a connection opens (DNS rebinding):
        // a backend that resolves by itself checks every address again then.
        cfg.refuse_metadata_addresses = true;
        let key = (
            cfg.endpoint_url().to_string(),
            cfg.region.clone(),
            cfg.credentials.provider().is_some(),
        );
        let wire = {
            let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
            match targets.get(&key) {
                Some(w) => w.clone(),
                None => {
                    let w = Arc::new(build(cfg)?);
                    if targets.len() >= MAX_TARGETS {
                        targets.clear();
                    }
                    targets.insert(key, w.clone());
                    w
                }
            }
        };
        tracing::info!(target: LOG_TARGET, uri = %uri, %moved, "following redirect");
        if moved.is_permanent() {
            let mut buckets = self.moved.lock().unwrap_or_else(|p| p.into_inner());
            buckets.insert(bucket.to_owned(), wire.clone());
        }
        Ok(wire)
    }
}

#[async_trait]
impl<W: Wire> GetWire for Redirects<W> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        // A redirect is an answer without a body: the same sink takes the target's answer,
        // checked, as it is only safe while nothing has begun in it.
        let bucket = req.uri.bucket();
        let mut w = self.route(bucket);
        let mut hops = 0;
        loop {
            match w.get_object(req, sink).await {
                Err(e @ Error::Redirect { refused: None, .. }) if sink.head().is_none() => {
                    w = self.follow(&w, bucket, e, &mut hops).await?;
                }
                done => break done,
            }
        }
    }
}

#[async_trait]
impl<W: Wire> Operations for Redirects<W> {
    /// Sent to the request's bucket's wire, and again to each redirect's target (a copy to
    /// its destination's: it is followed as that bucket moved).
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        let bucket = req.bucket();
        let mut w = self.route(bucket);
        let mut hops = 0;
        loop {
            match w.send(req.clone()).await {
                Err(e @ Error::Redirect { refused: None, .. }) => {
                    w = self.follow(&w, bucket, e, &mut hops).await?;
                }
                done => break done,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn moved(status: u16, location: Option<&str>, region: Option<&str>) -> Moved {
        Moved {
            status,
            location: location.map(str::to_owned),
            region: region.map(str::to_owned),
        }
    }

    fn signed() -> StoreConfig {
        let mut c = testing::config();
        c.credentials =
            CredentialsCache::from_static("AKIAREDIRECTTEST", "secret-key-0123456789", None);
        c
    }

    fn cfg(endpoint: &str) -> StoreConfig {
        let mut c = signed();
        c.set_endpoint("test", endpoint).unwrap();
        c
    }

    #[test]
    fn a_region_move_signs_for_the_region_and_keeps_a_custom_endpoint() {
        let to = target_config(
            &cfg("http://127.0.0.1:9000"),
            "b",
            &moved(301, None, Some("eu-west-1")),
        )
        .unwrap();
        assert_eq!(to.region, "eu-west-1");
        assert_eq!(to.endpoint_url().as_str(), "http://127.0.0.1:9000/");
        assert!(to.credentials.provider().is_some(), "still signed");
    }

    #[test]
    fn a_region_move_on_aws_goes_to_the_regions_endpoint_signed() {
        let to = target_config(
            &cfg("https://s3.us-east-1.amazonaws.com"),
            "b",
            &moved(301, None, Some("eu-west-1")),
        )
        .unwrap();
        assert_eq!(
            to.endpoint_url().as_str(),
            "https://s3.eu-west-1.amazonaws.com/"
        );
        assert!(to.credentials.provider().is_some());
    }

    #[test]
    fn a_location_moves_the_origin_and_keeps_the_endpoints_path() {
        let to = target_config(
            &cfg("http://gw:8080/s3"),
            "b",
            &moved(307, Some("http://gw:9090/s3/b/k?pid=1"), None),
        )
        .unwrap();
        assert_eq!(to.endpoint_url().as_str(), "http://gw:9090/s3");
        assert!(
            to.credentials.provider().is_none(),
            "another port: unsigned"
        );
        let to = target_config(
            &cfg("http://gw:8080"),
            "b",
            &moved(307, Some("https://node2:9090/b/k"), None),
        )
        .unwrap();
        assert_eq!(to.endpoint_url().as_str(), "https://node2:9090/");
        assert!(
            to.credentials.provider().is_none(),
            "another host: unsigned"
        );
    }

    #[test]
    fn a_virtual_hosted_location_loses_its_bucket_label() {
        let mut from = signed();
        from.endpoint = None;
        from.path_style = false;
        let to = target_config(
            &from,
            "b",
            &moved(
                301,
                Some("https://b.s3.eu-west-1.amazonaws.com/k"),
                Some("eu-west-1"),
            ),
        )
        .unwrap();
        assert_eq!(
            to.endpoint_url().as_str(),
            "https://s3.eu-west-1.amazonaws.com/"
        );
        assert!(to.credentials.provider().is_some(), "AWS to AWS: signed");
    }

    #[test]
    fn credentials_go_only_to_the_same_origin_or_s3_itself() {
        let signed = |from: &str, location: &str| {
            target_config(&cfg(from), "b", &moved(307, Some(location), None))
                .unwrap()
                .credentials
                .provider()
                .is_some()
        };
        assert!(signed("http://gw:8080", "http://gw:8080/b/k"));
        assert!(
            !signed("http://gw:8080", "http://gw:9999/b/k"),
            "another port"
        );
        assert!(
            !signed("http://gw:8080", "http://other:8080/b/k"),
            "another host"
        );
        assert!(signed(
            "https://s3.us-east-1.amazonaws.com",
            "https://s3.eu-west-1.amazonaws.com/b/k"
        ));
        assert!(signed(
            "https://s3.amazonaws.com",
            "https://s3.dualstack.eu-west-1.amazonaws.com/b/k"
        ));
        for elsewhere in [
            "https://s3-evil-1.us-east-1.elb.amazonaws.com/b/k",
            "https://abc.execute-api.us-east-1.amazonaws.com/b/k",
            "https://ec2-1-2-3-4.compute-1.amazonaws.com/b/k",
        ] {
            assert!(
                !signed("https://s3.us-east-1.amazonaws.com", elsewhere),
                "{elsewhere}"
            );
        }
    }

    #[test]
    fn addresses_that_reach_a_metadata_service_are_forbidden_in_every_spelling() {
        for bad in [
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "::",
        ] {
            assert!(forbidden_ip(bad.parse().unwrap()), "{bad}");
        }
        for fine in [
            "127.0.0.1",
            "::1",
            "10.0.0.5",
            "64:ff9b::8.8.8.8",
            "2001:db8::1",
        ] {
            assert!(!forbidden_ip(fine.parse().unwrap()), "{fine}");
        }
    }

    #[test]
    fn dangerous_or_unusable_targets_are_refused_with_the_reason() {
        let https = cfg("https://store:443");
        for (m, why) in [
            (
                moved(307, Some("https://[fd00:ec2::254]/b/k"), None),
                "metadata",
            ),
            (moved(301, Some("http://store/b/k"), None), "https to http"),
            (
                moved(301, Some("https://169.254.169.254/latest"), None),
                "link-local",
            ),
            (
                moved(301, Some("https://[fe80::1]/b/k"), None),
                "link-local",
            ),
            (
                moved(301, Some("https://[::ffff:169.254.169.254]/"), None),
                "link-local",
            ),
            (moved(301, Some("https://0.0.0.0/b/k"), None), "link-local"),
            (
                moved(301, Some("https://metadata.google.internal/"), None),
                "metadata",
            ),
            // Other spellings of the same hosts, and Alibaba Cloud's metadata service.
            (
                moved(307, Some("https://instance-data/x"), None),
                "metadata",
            ),
            (
                moved(307, Some("https://[::a9fe:a9fe]/x"), None),
                "metadata",
            ),
            (
                moved(307, Some("https://[64:ff9b::a9fe:a9fe]/x"), None),
                "metadata",
            ),
            (
                moved(307, Some("https://100.100.100.200/x"), None),
                "metadata",
            ),
            (moved(301, Some("ftp://store/b/k"), None), "not http"),
            (moved(301, Some("not a url"), None), "absolute URL"),
            (moved(301, None, Some("evil.com/x")), "not a region"),
            (moved(301, None, None), "no Location"),
        ] {
            let e = target_config(&https, "b", &m).unwrap_err();
            assert!(e.contains(why), "{m}: {e}");
        }
    }

    #[test]
    fn the_message_says_where_and_why_not() {
        let e = Error::Redirect {
            uri: "s3://b/k".into(),
            moved: moved(301, Some("http://169.254.169.254/"), None),
            refused: Some("it is link-local".into()),
        };
        assert_eq!(
            e.to_string(),
            "s3://b/k: HTTP 301 redirect to http://169.254.169.254/, not followed: it is link-local"
        );
        assert!(!e.is_retryable());
    }
}
