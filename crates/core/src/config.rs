//! [`StoreConfig`]: everything a backend needs to reach a store, resolved from the standard
//! AWS environment so that a program configured for the AWS CLI or SDKs works unchanged.
//!
//! | setting | variables, first found wins | default |
//! |---|---|---|
//! | endpoint | `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` | AWS: `https://s3.{region}.amazonaws.com` |
//! | several endpoints of one store | `S3_ENDPOINT_URIS` (comma-separated; wins over the above) | one |
//! | one endpoint per rank | `SLUICE_PIN_ENDPOINT_BY_RANK=1`: rank `RANK` (else `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, 0) uses endpoint `rank % n` of `S3_ENDPOINT_URIS` alone | off: every rank spreads over all |
//! | region | `AWS_REGION`, `AWS_DEFAULT_REGION`, `region` of the `AWS_PROFILE` profile | `us-east-1` |
//! | credentials | `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`), the profile in `AWS_SHARED_CREDENTIALS_FILE`/`AWS_CONFIG_FILE` (default `~/.aws/credentials`, `~/.aws/config`), then aws-config's default chain (web identity, ECS, IMDS) | |
//! | CA bundle | `AWS_CA_BUNDLE` | system roots |
//! | addressing | `SLUICE_PATH_STYLE=1\|0` | path-style for custom endpoints, virtual-hosted for AWS |
//! | connect timeout | `SLUICE_CONNECT_TIMEOUT` (seconds) | 5 |
//! | first-byte timeout | `SLUICE_FIRST_BYTE_TIMEOUT` (seconds) | 30 |
//! | body stall timeout | `SLUICE_STALL_TIMEOUT` (seconds without a byte) | 20 |
//! | attempts | `SLUICE_MAX_ATTEMPTS`, `AWS_MAX_ATTEMPTS` | 10 |
//! | multipart threshold / part size | `SLUICE_MULTIPART_THRESHOLD`, `SLUICE_MULTIPART_PART_SIZE` (bytes, or `16MiB`) | 16 MiB / 16 MiB |
//! | parts in flight of uploads | `SLUICE_PARTS_IN_FLIGHT` (fixes the number per upload) | one window for a client's uploads, found while they upload from 4, within 512 MiB of parts (`parts_in_flight`) |
//! | HTTP/2 | `SLUICE_HTTP2=1` | HTTP/1.1 |
//! | requests in flight | `SLUICE_MAX_CONNECTIONS` (fixes the number) | found at run time, 16 up to 256 (`congestion`) |
//! | checksums | `AWS_REQUEST_CHECKSUM_CALCULATION`, `AWS_RESPONSE_CHECKSUM_VALIDATION` (`when_supported` \| `when_required`) | upload `when_supported` (hyper, awssdk), download `when_required` |

use crate::congestion::Concurrency;
use crate::credentials::CredentialsCache;
use crate::error::{Error, Result};
use crate::oplog::OpLog;
use crate::retry::RetryPolicy;
use crate::settings;
use aws_config::meta::credentials::CredentialsProviderChain;
use aws_config::meta::region::ProvideRegion;
use aws_config::profile::{ProfileFileCredentialsProvider, ProfileFileRegionProvider};
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Every network wait has a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect plus TLS handshake. The SDKs use 3.1 s; a loaded storage front end can be
    /// slower to accept, and a connect is retried anyway.
    pub connect: Duration,
    /// Request sent → response head. S3 can take seconds under load before the first byte.
    pub first_byte: Duration,
    /// No body byte for this long → the connection is presumed dead (retryable, resumed).
    pub stall: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(30),
            stall: Duration::from_secs(20),
        }
    }
}

/// Everything a backend needs to reach a store: where (endpoint, region, addressing), as
/// whom (credentials), and the policy of every request (timeouts, retries, multipart sizes,
/// connections). `from_env` resolves it as the AWS CLI and SDKs do (variables and defaults
/// in the `config` module's table); `new` gives the defaults for a known endpoint. Front
/// ends may then override single settings (`set_region`, `set_endpoint`). `Debug` never
/// shows a secret.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The S3 endpoint (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`). `None`: AWS's regional
    /// endpoint (see `endpoint_url`).
    pub endpoint: Option<Url>,
    /// Every endpoint of a store served by several (`S3_ENDPOINT_URIS`, comma-separated, the
    /// variable DLIO and mlpstorage set): requests spread over them by least outstanding
    /// requests, and one that refuses or times out is avoided for a while (`spread`). Empty
    /// for a single endpoint; when set, `endpoint` is its first.
    pub endpoints: Vec<Url>,
    /// The region requests are signed for, and on AWS part of the endpoint's host name
    /// (default `us-east-1`). `from_env` and `set_region` accept only what `check_region`
    /// does.
    pub region: String,
    /// Where signing credentials come from, cached until shortly before they expire;
    /// `CredentialsCache::anonymous()` sends unsigned requests (public buckets).
    pub credentials: CredentialsCache,
    /// PEM file of extra trust roots (AWS_CA_BUNDLE).
    pub ca_bundle: Option<PathBuf>,
    /// `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`.
    pub path_style: bool,
    /// Bounds on each network wait (`SLUICE_CONNECT_TIMEOUT`, `SLUICE_FIRST_BYTE_TIMEOUT`,
    /// `SLUICE_STALL_TIMEOUT`).
    pub timeouts: Timeouts,
    /// Attempts and backoff for every request (`SLUICE_MAX_ATTEMPTS`, else
    /// `AWS_MAX_ATTEMPTS`; see `RetryPolicy::default` for the defaults and why).
    pub retry: RetryPolicy,
    /// PUTs at or above this size, in bytes, are multipart uploads
    /// (`SLUICE_MULTIPART_THRESHOLD`, default `DEFAULT_MULTIPART_THRESHOLD`).
    pub multipart_threshold: u64,
    /// Bytes per part of a multipart upload, the last part shorter
    /// (`SLUICE_MULTIPART_PART_SIZE`, default `DEFAULT_MULTIPART_PART_SIZE`). From the
    /// environment it must be at least S3's 5 MiB minimum part size.
    pub multipart_part_size: u64,
    /// Parts each streaming upload sends at once (`SLUICE_PARTS_IN_FLIGHT`). `None`, the
    /// default: one window for all the client's uploads, found from the rate their parts
    /// are answered at (`parts_in_flight`), within `upload::PARTS_MEMORY`.
    pub parts_in_flight: Option<usize>,
    /// Use HTTP/2 (when the server offers it by ALPN); HTTP/1.1 otherwise.
    pub http2: bool,
    /// The hyper backend reads GET bodies from the socket straight into the destination
    /// buffer instead of through hyper's read buffer (`SLUICE_DIRECT_GET`, default on; see
    /// the backend's `direct` module for why and what it covers).
    pub direct_get: bool,
    /// Upper bound on open connections (and so on requests in flight) per client
    /// (`SLUICE_MAX_CONNECTIONS`, default `DEFAULT_MAX_CONNECTIONS`).
    pub max_connections: usize,
    /// Whether requests in flight are found at run time up to `max_connections` (the
    /// default) or held at it (`SLUICE_MAX_CONNECTIONS` set): see `congestion`.
    pub concurrency: Concurrency,
    /// End-to-end checksums: on upload by default, on download off (see [`Checksums`]).
    pub checksums: Checksums,
    /// Set on the configuration of a wire built for a redirect's target: every address a
    /// connection of it resolves to is checked against `redirect::forbidden_ip` when it
    /// opens (the hyper backend), not only when the redirect was followed.
    pub refuse_metadata_addresses: bool,
    /// Where a line for each request goes (`SLUICE_OP_LOG`; `oplog`): the process's log,
    /// shared by every client of the process.
    pub op_log: Option<Arc<OpLog>>,
}

/// End-to-end checksums beyond what TLS already protects, named after the AWS SDKs'
/// `AWS_REQUEST_CHECKSUM_CALCULATION` / `AWS_RESPONSE_CHECKSUM_VALIDATION` settings.
///
/// On upload, on by default (`when_supported`, as the SDKs): every PUT and part carries its
/// CRC64NVME and a multipart object its whole CRC, which the store checks (`checksum`),
/// for a few per cent of the upload's CPU. The hyper and awssdk backends send them;
/// object_store can send only SHA-256, which costs more than the upload itself.
///
/// On download, off by default (`when_required`), where the SDKs default to
/// `when_supported`: the loader reads large objects as ranged GETs, for which S3 returns no
/// whole-object checksum, so validation only ever covers small objects; and validating
/// costs a CRC pass over every byte on the one core a client process may have (measured in
/// the awssdk note). The hyper backend (checked by core, `resume::get_with_resume`) and the
/// awssdk backend (by the SDK) validate; object_store does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checksums {
    /// Send a CRC of each uploaded body (`when_supported`).
    pub on_upload: bool,
    /// Check the object's CRC, when the store returns one, on whole-object GETs.
    pub on_download: bool,
}

impl Default for Checksums {
    fn default() -> Self {
        Self {
            on_upload: true,
            on_download: false,
        }
    }
}

/// The region when neither the environment (`AWS_REGION`, `AWS_DEFAULT_REGION`) nor the
/// `AWS_PROFILE` profile names one.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The most requests in flight the controller may reach (`congestion`): S3's 5,500 GETs/s
/// per prefix at its ~40 ms mean first-byte latency is ~220 in flight (Little's law). It
/// opens a connection only for a request it sends, so a store that saturates at 16 never
/// sees more.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// S3's smallest allowed part (except the last) is 5 MiB; 16 MiB keeps a 140 MiB object to
/// nine parts while each part still streams at full speed.
pub(crate) const DEFAULT_MULTIPART_THRESHOLD: u64 = 16 * 1024 * 1024;
/// Bytes per multipart part unless configured: 16 MiB, for the reasons given at
/// `DEFAULT_MULTIPART_THRESHOLD`.
pub const DEFAULT_MULTIPART_PART_SIZE: u64 = 16 * 1024 * 1024;
const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;

impl StoreConfig {
    /// A configuration for `endpoint` (or AWS when `None`) with defaults everywhere else.
    pub fn new(
        endpoint: Option<Url>,
        region: impl Into<String>,
        credentials: CredentialsCache,
    ) -> Self {
        Self {
            path_style: endpoint.is_some(),
            endpoint,
            endpoints: Vec::new(),
            region: region.into(),
            credentials,
            ca_bundle: None,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            multipart_part_size: DEFAULT_MULTIPART_PART_SIZE,
            parts_in_flight: None,
            http2: false,
            direct_get: true,
            refuse_metadata_addresses: false,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            concurrency: Concurrency::Adaptive,
            checksums: Checksums::default(),
            op_log: None,
        }
    }

    /// Resolves the configuration from the process environment and the shared AWS files.
    pub async fn from_env() -> Result<Self> {
        Self::from_env_source(&|k| std::env::var(k).ok()).await
    }

    /// As `from_env`, with `profile` (when given) in place of `AWS_PROFILE`, and winning over
    /// static keys in the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`), as the AWS CLI's `--profile` does.
    pub async fn from_env_with_profile(profile: Option<&str>) -> Result<Self> {
        const STATIC_KEYS: [&str; 3] = [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ];
        let profile = profile.map(str::to_owned);
        let lookup = move |k: &str| match &profile {
            Some(p) if k == "AWS_PROFILE" => Some(p.clone()),
            Some(_) if STATIC_KEYS.contains(&k) => None,
            _ => std::env::var(k).ok(),
        };
        Self::from_env_source(&lookup).await
    }

    /// As `from_env`, with variables looked up through `env` (tests pass a map).
    pub async fn from_env_source(env: &(dyn Fn(&str) -> Option<String> + Sync)) -> Result<Self> {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        // Every setting's value first, so a bad one is named whatever else is set.
        settings::check(&get)?;
        let value = |s: &settings::Setting<String>| s.lookup(&get);

        let endpoint = match value(&settings::ENDPOINT) {
            Some((var, v)) => Some(parse_endpoint(var, &v)?),
            None => None,
        };
        let endpoints = match value(&settings::ENDPOINTS) {
            Some((var, v)) => parse_endpoints(var, v.split(','))?,
            None => Vec::new(),
        };
        let endpoint = endpoints.first().cloned().or(endpoint);

        let profile = value(&settings::PROFILE).map_or_else(|| "default".into(), |(_, p)| p);
        let files = profile_files(&get);
        let region = match value(&settings::REGION) {
            Some((_, r)) => r,
            None => ProfileFileRegionProvider::builder()
                .profile_files(files.clone())
                .profile_name(&profile)
                .build()
                .region()
                .await
                .map(|r| r.to_string())
                .unwrap_or_else(|| DEFAULT_REGION.into()),
        };
        let credentials = match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(ak), Some(sk)) => {
                CredentialsCache::from_static(&ak, &sk, get("AWS_SESSION_TOKEN"))
            }
            (Some(_), None) => {
                return Err(Error::config(
                    "AWS_SECRET_ACCESS_KEY",
                    "is not set but AWS_ACCESS_KEY_ID is",
                ));
            }
            (None, Some(_)) => {
                return Err(Error::config(
                    "AWS_ACCESS_KEY_ID",
                    "is not set but AWS_SECRET_ACCESS_KEY is",
                ));
            }
            (None, None) => {
                let from_profile = ProfileFileCredentialsProvider::builder()
                    .profile_files(files)
                    .profile_name(&profile)
                    .build();
                // The region is known by now: without it the chain looks one up again, last
                // from instance metadata, whose absence off EC2 is a multi-line WARN.
                let rest =
                    aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                        .profile_name(&profile)
                        .region(aws_config::Region::new(region.clone()))
                        .build()
                        .await;
                CredentialsCache::from_provider(SharedCredentialsProvider::new(
                    CredentialsProviderChain::first_try("Profile", from_profile)
                        .or_else("DefaultChain", rest),
                ))
            }
        };

        check_region(settings::REGION.info.env[0], &region)?;
        let mut cfg = Self::new(endpoint, region, credentials);
        cfg.endpoints = endpoints;
        if settings::PIN_ENDPOINT_BY_RANK.read(&get)? == Some(true) {
            let rank = ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"]
                .into_iter()
                .find_map(|var| get(var).map(|v| (var, v)))
                .map(|(var, v)| {
                    v.trim().parse::<usize>().map_err(|_| {
                        Error::config(var, format!("expected a rank (0, 1, ...), got {v:?}"))
                    })
                })
                .transpose()?
                .unwrap_or(0);
            cfg.pin_endpoint(rank);
        }
        cfg.ca_bundle = value(&settings::CA_BUNDLE).map(|(_, p)| PathBuf::from(p));
        if let Some(b) = settings::PATH_STYLE.read(&get)? {
            cfg.path_style = b;
        }
        cfg.apply_policy(&get)?;
        Ok(cfg)
    }

    /// The settings of `from_env` that are not S3's (timeouts, retries, part sizes, limits,
    /// checksums, the op-log), with no endpoint and no credentials: the policy an Azure or
    /// GCS store is built under when no `s3://` URI is in the work.
    pub fn policy_from_env() -> Result<Self> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        settings::check(&get)?;
        let mut cfg = Self::new(None, DEFAULT_REGION, CredentialsCache::anonymous());
        cfg.apply_policy(&get)?;
        Ok(cfg)
    }

    fn apply_policy(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        let cfg = self;
        let value = |s: &settings::Setting<String>| s.lookup(get);
        if let Some(d) = settings::CONNECT_TIMEOUT.read(get)? {
            cfg.timeouts.connect = d;
        }
        if let Some(d) = settings::FIRST_BYTE_TIMEOUT.read(get)? {
            cfg.timeouts.first_byte = d;
        }
        if let Some(d) = settings::STALL_TIMEOUT.read(get)? {
            cfg.timeouts.stall = d;
        }
        if let Some(n) = settings::MAX_ATTEMPTS.read(get)? {
            cfg.retry.max_attempts = n;
        }
        if let Some(n) = settings::MULTIPART_THRESHOLD.read(get)? {
            cfg.multipart_threshold = n;
        }
        if let Some(n) = settings::MULTIPART_PART_SIZE.read(get)? {
            if n < MIN_PART_SIZE {
                return Err(Error::config(
                    settings::MULTIPART_PART_SIZE.info.env[0],
                    format!("{n} is below S3's 5 MiB minimum part size"),
                ));
            }
            cfg.multipart_part_size = n;
        }
        cfg.parts_in_flight = settings::PARTS_IN_FLIGHT.read(get)?;
        if let Some((_, path)) = value(&settings::OP_LOG) {
            cfg.op_log = Some(OpLog::shared(Path::new(&path))?);
        }
        if let Some(b) = settings::HTTP2.read(get)? {
            cfg.http2 = b;
        }
        if let Some(b) = settings::DIRECT_GET.read(get)? {
            cfg.direct_get = b;
        }
        if let Some(n) = settings::MAX_CONNECTIONS.read(get)? {
            cfg.max_connections = n;
            cfg.concurrency = Concurrency::Fixed;
        }
        if let Some(b) = settings::UPLOAD_CHECKSUMS.read(get)? {
            cfg.checksums.on_upload = b;
        }
        if let Some(b) = settings::DOWNLOAD_CHECKSUMS.read(get)? {
            cfg.checksums.on_download = b;
        }
        Ok(())
    }

    /// Sets the region from `option` (a CLI flag, a Python argument), checked as
    /// `check_region` does.
    pub fn set_region(&mut self, option: &str, region: &str) -> Result<()> {
        check_region(option, region)?;
        self.region = region.to_owned();
        Ok(())
    }

    /// Points at `url` alone, given by `option` (a flag or argument name, for errors), with
    /// path-style addressing as for any custom endpoint. A URL that is not `http://` or
    /// `https://` with a host, or that carries a user name or password, is an
    /// `InvalidConfig` error naming `option` (and never echoing the password).
    pub fn set_endpoint(&mut self, option: &str, url: &str) -> Result<()> {
        self.endpoint = Some(parse_endpoint(option, url)?);
        // One endpoint given: not also the environment's list.
        self.endpoints.clear();
        self.path_style = true;
        Ok(())
    }

    /// Spreads requests over `urls` (given by `option`, for errors), each checked as by
    /// `set_endpoint`; the first is also `endpoint`. Empty entries are skipped; none at all is
    /// an error.
    pub fn set_endpoints<'a>(
        &mut self,
        option: &str,
        urls: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let endpoints = parse_endpoints(option, urls)?;
        self.endpoint = endpoints.first().cloned();
        self.endpoints = endpoints;
        self.path_style = true;
        Ok(())
    }

    /// Keeps only endpoint `rank % n` of several (`endpoints`), as DLIO assigns its ranks to
    /// a store's nodes: each process talks to one node, and the job to all of them. The list
    /// keeps that one, so what it served is still counted per endpoint. Nothing changes
    /// without a list.
    pub fn pin_endpoint(&mut self, rank: usize) {
        if !self.endpoints.is_empty() {
            let one = self.endpoints[rank % self.endpoints.len()].clone();
            self.endpoint = Some(one.clone());
            self.endpoints = vec![one];
        }
    }

    /// The PEM bytes of `ca_bundle` (AWS_CA_BUNDLE), read once per store built.
    pub fn read_ca_bundle(&self) -> Result<Option<Vec<u8>>> {
        self.ca_bundle
            .as_ref()
            .map(|path| {
                std::fs::read(path).map_err(|e| {
                    Error::config(
                        "AWS_CA_BUNDLE",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })
            })
            .transpose()
    }

    /// The endpoint requests go to: the configured one, or AWS's for the region.
    pub fn endpoint_url(&self) -> Url {
        self.endpoint.clone().unwrap_or_else(|| {
            Url::parse(&format!("https://s3.{}.amazonaws.com", self.region))
                .expect("region forms a valid host")
        })
    }
}

fn profile_files(get: &dyn Fn(&str) -> Option<String>) -> EnvConfigFiles {
    let home = get("HOME").map(PathBuf::from);
    // A file named by its variable is the user's word: missing, it is an error naming it.
    // The files under ~/.aws are only where profiles live by default: missing, they are
    // absent, as aws-config treats its own defaults. Handed to aws-config as paths anyway,
    // a missing ~/.aws/config was a "failed to parse profile" warning per client and ended
    // the credential chain before the instance and container providers were tried.
    let file = |var: &str, name: &str| {
        get(var).map(PathBuf::from).or_else(|| {
            home.as_ref()
                .map(|h| h.join(".aws").join(name))
                .filter(|p| p.exists())
        })
    };
    let mut b = EnvConfigFiles::builder()
        .include_default_config_file(false)
        .include_default_credentials_file(false);
    let mut any = false;
    if let Some(p) = file("AWS_CONFIG_FILE", "config") {
        b = b.with_file(EnvConfigFileKind::Config, p);
        any = true;
    }
    if let Some(p) = file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        b = b.with_file(EnvConfigFileKind::Credentials, p);
        any = true;
    }
    if !any {
        // No profile files at all: an empty set (aws-config refuses a set of none).
        b = b.with_contents(EnvConfigFileKind::Config, "");
    }
    b.build()
}

/// A list of endpoints (`S3_ENDPOINT_URIS`, `--endpoints`): each as `parse_endpoint`, empty
/// entries skipped, at least one. s3dlio's form of an entry, `s3://host:port/bucket/`, is
/// read as s3dlio reads it: the endpoint `http://host:port` (`https` on port 443).
fn parse_endpoints<'a>(var: &str, urls: impl IntoIterator<Item = &'a str>) -> Result<Vec<Url>> {
    let urls = urls
        .into_iter()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| match u.strip_prefix("s3://") {
            Some(rest) => {
                let authority = rest.split('/').next().unwrap_or_default();
                match authority.rsplit_once(':') {
                    Some((_, port)) if port.parse::<u16>().is_ok() => {
                        let scheme = if port == "443" { "https" } else { "http" };
                        parse_endpoint(var, &format!("{scheme}://{authority}"))
                    }
                    _ => Err(Error::config(
                        var,
                        format!(
                            "{:?} names a bucket, not an endpoint (give http://host:port or s3://host:port/)",
                            redact_userinfo(u)
                        ),
                    )),
                }
            }
            None => parse_endpoint(var, u),
        })
        .collect::<Result<Vec<_>>>()?;
    if urls.is_empty() {
        return Err(Error::config(var, "names no endpoint"));
    }
    Ok(urls)
}

fn parse_endpoint(var: &str, v: &str) -> Result<Url> {
    let mut url = Url::parse(v.trim())
        .map_err(|e| Error::config(var, format!("{:?} is not a URL: {e}", redact_userinfo(v))))?;
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials in a URL end up in logs and process listings; S3 takes them signed.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        return Err(Error::config(
            var,
            format!(
                "{url} must not carry a user name or password (give credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
            ),
        ));
    }
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::config(
            var,
            format!("{v:?} must be an http:// or https:// URL with a host"),
        ));
    }
    Ok(url)
}

/// `v` with anything between `://` and an `@` replaced, for messages about a URL that
/// could not be parsed (it may still hold a password).
fn redact_userinfo(v: &str) -> String {
    match (v.find("://"), v.rfind('@')) {
        (Some(i), Some(j)) if j > i + 3 => format!("{}://***@{}", &v[..i], &v[j + 1..]),
        _ => v.to_owned(),
    }
}

/// A region is part of the host name and of the signature: `[a-z0-9-]+`, nothing that could
/// change the host a request goes to (`evil.com/`) or break a header (`us east`).
pub(crate) fn check_region(option: &str, region: &str) -> Result<()> {
    let ok = !region.is_empty()
        && region.len() <= 64
        && region
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::config(
            option,
            format!(
                "{region:?} is not a region name (lowercase letters, digits and '-', such as us-east-1)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    async fn resolve(vars: &[(&str, &str)]) -> Result<StoreConfig> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // HOME points nowhere so the developer's own ~/.aws never leaks into a test.
        let lookup = move |k: &str| {
            map.get(k)
                .cloned()
                .or_else(|| (k == "HOME").then(|| "/nonexistent-home".into()))
        };
        StoreConfig::from_env_source(&lookup).await
    }

    #[tokio::test]
    async fn regions_and_endpoints_that_could_redirect_or_leak_are_refused() {
        let creds = [("AWS_ACCESS_KEY_ID", "ak"), ("AWS_SECRET_ACCESS_KEY", "sk")];
        for region in ["us east", "evil.com/", "US-EAST-1", "a\nb"] {
            let err = resolve(&[creds[0], creds[1], ("AWS_REGION", region)])
                .await
                .unwrap_err();
            assert!(
                matches!(err, Error::InvalidConfig { .. }),
                "{region:?}: {err}"
            );
            assert!(err.to_string().contains("AWS_REGION"), "{err}");
        }
        let mut cfg = resolve(&creds).await.unwrap();
        assert!(cfg.set_region("--region", "evil.com/").is_err());
        cfg.set_region("--region", "eu-central-1").unwrap();
        assert_eq!(cfg.region, "eu-central-1");

        let err = resolve(&[
            creds[0],
            creds[1],
            ("AWS_ENDPOINT_URL", "http://user:hunter2@minio:9000"),
        ])
        .await
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("AWS_ENDPOINT_URL") && msg.contains("user name or password"),
            "{msg}"
        );
        assert!(
            !msg.contains("hunter2"),
            "the password is not echoed: {msg}"
        );
        let err = cfg
            .set_endpoint("--endpoint", "http://u:hunter2@[bad")
            .unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[tokio::test]
    async fn s3_endpoint_uris_lists_every_endpoint_and_names_a_bad_one() {
        let c = resolve(&[
            ("AWS_ENDPOINT_URL_S3", "http://single:9000"),
            (
                "S3_ENDPOINT_URIS",
                "http://n1:9000, http://n2:9000,,http://n3:9000",
            ),
            ("AWS_ACCESS_KEY_ID", "ak"),
            ("AWS_SECRET_ACCESS_KEY", "sk"),
        ])
        .await
        .unwrap();
        let hosts: Vec<_> = c.endpoints.iter().filter_map(|u| u.host_str()).collect();
        assert_eq!(hosts, ["n1", "n2", "n3"]);
        assert_eq!(c.endpoint.as_ref().unwrap().host_str(), Some("n1"));
        assert!(c.path_style);
        let s3dlio_style = resolve(&[(
            "S3_ENDPOINT_URIS",
            "s3://10.0.0.1:9000/bkt/,s3://n2:443/bkt/",
        )])
        .await
        .unwrap();
        let urls: Vec<&str> = s3dlio_style.endpoints.iter().map(Url::as_str).collect();
        assert_eq!(urls, ["http://10.0.0.1:9000/", "https://n2/"]);
        let e = resolve(&[("S3_ENDPOINT_URIS", "s3://just-a-bucket/")])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("S3_ENDPOINT_URIS") && e.contains("names a bucket"),
            "{e}"
        );
        let e = resolve(&[("S3_ENDPOINT_URIS", "http://n1:9000,ftp//nope")])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("S3_ENDPOINT_URIS") && e.contains("nope"), "{e}");
        let mut cfg = c.clone();
        let e = cfg.set_endpoints("--endpoints", [" ", ""]).unwrap_err();
        assert!(e.to_string().contains("--endpoints"), "{e}");
    }

    #[tokio::test]
    async fn a_rank_can_be_pinned_to_one_endpoint() {
        let three = (
            "S3_ENDPOINT_URIS",
            "http://n0:9000,http://n1:9000,http://n2:9000",
        );
        let pin = ("SLUICE_PIN_ENDPOINT_BY_RANK", "1");
        for (rank, host) in [("0", "n0"), ("4", "n1"), ("5", "n2")] {
            let c = resolve(&[three, pin, ("RANK", rank)]).await.unwrap();
            let hosts: Vec<_> = c.endpoints.iter().filter_map(Url::host_str).collect();
            assert_eq!(hosts, [host], "rank {rank}: one endpoint");
            assert_eq!(c.endpoint_url().host_str(), Some(host), "rank {rank}");
        }
        let mpi = resolve(&[three, pin, ("OMPI_COMM_WORLD_RANK", "2")])
            .await
            .unwrap();
        assert_eq!(mpi.endpoint_url().host_str(), Some("n2"));
        let unpinned = resolve(&[three, ("RANK", "1")]).await.unwrap();
        assert_eq!(unpinned.endpoints.len(), 3, "off by default");
        let e = resolve(&[three, pin, ("RANK", "first")]).await.unwrap_err();
        assert!(
            e.to_string().contains("RANK") && e.to_string().contains("first"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn service_specific_endpoint_wins_and_path_style_follows() {
        let c = resolve(&[
            ("AWS_ENDPOINT_URL", "http://general:9000"),
            ("AWS_ENDPOINT_URL_S3", "http://s3only:9000"),
            ("AWS_ACCESS_KEY_ID", "ak"),
            ("AWS_SECRET_ACCESS_KEY", "sk"),
        ])
        .await
        .unwrap();
        assert_eq!(c.endpoint.as_ref().unwrap().host_str(), Some("s3only"));
        assert!(c.path_style);
        assert_eq!(c.region, "us-east-1");
        let aws = resolve(&[
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
        ])
        .await
        .unwrap();
        assert!(!aws.path_style);
        assert_eq!(
            aws.endpoint_url().as_str(),
            "https://s3.eu-west-1.amazonaws.com/"
        );
    }

    #[tokio::test]
    async fn region_falls_back_through_default_region_and_profile() {
        let c = resolve(&[
            ("AWS_DEFAULT_REGION", "ap-south-1"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
        ])
        .await
        .unwrap();
        assert_eq!(c.region, "ap-south-1");

        let dir = std::env::temp_dir().join(format!("sluice-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("config");
        let creds = dir.join("credentials");
        std::fs::write(&config, "[profile train]\nregion = eu-central-1\n").unwrap();
        std::fs::write(
            &creds,
            "[train]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = profile-secret\n",
        )
        .unwrap();
        let c = resolve(&[
            ("AWS_PROFILE", "train"),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
            ("AWS_SHARED_CREDENTIALS_FILE", creds.to_str().unwrap()),
        ])
        .await
        .unwrap();
        assert_eq!(c.region, "eu-central-1");
        let got = c.credentials.get("test").await.unwrap().unwrap();
        assert_eq!(got.access_key_id(), "AKIAPROFILE");
        assert_eq!(got.secret_access_key(), "profile-secret");
        std::fs::remove_dir_all(dir).ok();
    }

    /// A home with ~/.aws/credentials and no ~/.aws/config (what `aws configure` leaves on
    /// some machines): the missing file is absent, not an error that ends the chain.
    #[tokio::test]
    async fn a_missing_default_config_file_is_absent_not_an_error() {
        let home = std::env::temp_dir().join(format!("sluice-home-{}", std::process::id()));
        std::fs::create_dir_all(home.join(".aws")).unwrap();
        std::fs::write(
            home.join(".aws/credentials"),
            "[default]\naws_access_key_id = AKIAHOME\naws_secret_access_key = home-secret\n",
        )
        .unwrap();
        let c = resolve(&[("HOME", home.to_str().unwrap())]).await.unwrap();
        assert_eq!(c.region, "us-east-1");
        let got = c.credentials.get("test").await.unwrap().unwrap();
        assert_eq!(got.access_key_id(), "AKIAHOME");
        std::fs::remove_dir_all(home).ok();
    }

    #[tokio::test]
    async fn overrides_parse_and_bad_values_name_the_variable() {
        let c = resolve(&[
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
            ("SLUICE_STALL_TIMEOUT", "2.5"),
            ("SLUICE_CONNECT_TIMEOUT", "500ms"),
            ("AWS_MAX_ATTEMPTS", "3"),
            ("SLUICE_MULTIPART_THRESHOLD", "32MiB"),
            ("SLUICE_HTTP2", "1"),
            ("SLUICE_DIRECT_GET", "off"),
            ("AWS_CA_BUNDLE", "/tmp/ca.pem"),
            ("AWS_RESPONSE_CHECKSUM_VALIDATION", "WHEN_SUPPORTED"),
            ("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required"),
        ])
        .await
        .unwrap();
        assert_eq!(
            c.checksums,
            Checksums {
                on_upload: false,
                on_download: true
            }
        );
        assert_eq!(c.timeouts.stall, Duration::from_millis(2500));
        assert_eq!(c.timeouts.connect, Duration::from_millis(500));
        assert_eq!(c.retry.max_attempts, 3);
        assert_eq!(c.multipart_threshold, 32 << 20);
        assert!(c.http2);
        assert!(!c.direct_get);
        assert_eq!(
            c.ca_bundle.as_deref(),
            Some(std::path::Path::new("/tmp/ca.pem"))
        );

        for (var, val) in [
            ("SLUICE_STALL_TIMEOUT", "soon"),
            ("SLUICE_MAX_ATTEMPTS", "0"),
            ("SLUICE_MULTIPART_PART_SIZE", "1MiB"),
            ("AWS_ENDPOINT_URL", "ftp://x"),
            ("SLUICE_HTTP2", "maybe"),
            ("AWS_REQUEST_CHECKSUM_CALCULATION", "always"),
        ] {
            let err = resolve(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "b"),
                (var, val),
            ])
            .await
            .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidConfig { option, .. } if option == var),
                "{var}: {err}"
            );
        }
        let err = resolve(&[("AWS_ACCESS_KEY_ID", "a")]).await.unwrap_err();
        assert!(err.to_string().contains("AWS_SECRET_ACCESS_KEY"), "{err}");
    }

    #[tokio::test]
    async fn debug_never_shows_secrets() {
        let c = resolve(&[
            ("AWS_ACCESS_KEY_ID", "AKIA123"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-value"),
            ("AWS_SESSION_TOKEN", "tok-secret"),
        ])
        .await
        .unwrap();
        let d = format!("{c:?}");
        assert!(
            !d.contains("very-secret-value") && !d.contains("tok-secret"),
            "{d}"
        );
    }
}
