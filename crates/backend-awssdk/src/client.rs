//! The SDK client, built from our `StoreConfig` rather than from aws-config's loader, so
//! that every backend reads the same environment the same way.

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    StalledStreamProtectionConfig,
};
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};
use sluice_core::{Error, Result, StoreConfig};

pub fn build(cfg: &StoreConfig) -> Result<aws_sdk_s3::Client> {
    let mut trust = TrustStore::default();
    if let Some(pem) = cfg.read_ca_bundle()? {
        trust = trust.with_pem_certificate(pem);
    }
    let tls = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| Error::config("AWS_CA_BUNDLE", format!("unusable trust store: {e}")))?;
    // The SDK's own hyper-1 client. TCP_NODELAY is its default. Its TLS connector always
    // offers h2 and http/1.1 by ALPN (aws-smithy-http-client 1.5 has no switch), so over
    // https a server that prefers h2 gets HTTP/2 whatever SLUICE_HTTP2 says; S3 itself
    // speaks only HTTP/1.1.
    let http = aws_smithy_http_client::Builder::new()
        .pool_max_idle_per_host(cfg.max_connections)
        .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(tls)
        .build_https();

    let when = |on: bool| {
        if on {
            (
                RequestChecksumCalculation::WhenSupported,
                ResponseChecksumValidation::WhenSupported,
            )
        } else {
            (
                RequestChecksumCalculation::WhenRequired,
                ResponseChecksumValidation::WhenRequired,
            )
        }
    };
    let mut b = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(cfg.region.clone()))
        .http_client(http)
        .force_path_style(cfg.path_style)
        // One retry budget for every backend: core's `retry` and `get_with_resume` wrap
        // each call, so the SDK makes exactly one attempt per call.
        .retry_config(RetryConfig::disabled())
        // `read_timeout` is the SDK's time to the response head, our first-byte timeout.
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(cfg.timeouts.connect)
                .read_timeout(cfg.timeouts.first_byte)
                .build(),
        )
        // Body stalls are bounded per chunk by our own stall timeout, as in the other
        // backends, so that a stall is the same `Timeout` error whichever stack is in use.
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        // Core computes the upload checksums (`sluice_core::checksum`) and passes them in;
        // the SDK adds its own only where an operation requires one (DeleteObjects).
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(when(cfg.checksums.on_download).1)
        .interceptor(crate::bounded::BoundErrorBodies);
    if let Some(ep) = &cfg.endpoint {
        b = b.endpoint_url(ep.as_str().trim_end_matches('/'));
    }
    b = match cfg.credentials.provider() {
        Some(p) => b.credentials_provider(p.clone()),
        // Anonymous: unsigned requests, for public buckets.
        None => b.allow_no_auth(),
    };
    Ok(aws_sdk_s3::Client::from_conf(b.build()))
}
