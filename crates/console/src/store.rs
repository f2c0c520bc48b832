//! The store flags every command shares, each falling back to the standard AWS environment.

use crate::output::Failure;
use clap::Args;
use sluice_core::{ObjectStore, StoreConfig};
use std::path::PathBuf;
use std::sync::Arc;

/// Where and how to reach the store; each falls back to the standard AWS environment.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Client stack: hyper, awssdk or objectstore [default: $S3_BACKEND, else hyper]
    #[arg(long)]
    pub backend: Option<String>,
    /// Endpoint URL [default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS]
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Several endpoints of one store, comma-separated: requests spread over them and avoid
    /// one that stops answering [default: $S3_ENDPOINT_URIS]
    #[arg(long, value_delimiter = ',', conflicts_with = "endpoint")]
    pub endpoints: Vec<String>,
    /// Region [default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's, else us-east-1]
    #[arg(long)]
    pub region: Option<String>,
    /// Extra CA certificates (PEM) [default: $AWS_CA_BUNDLE]
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,
    /// AWS profile; wins over keys in the environment, as the AWS CLI's [default: $AWS_PROFILE]
    #[arg(long)]
    pub profile: Option<String>,
    /// Send unsigned requests (public buckets), no credentials looked up
    #[arg(long)]
    pub no_sign_request: bool,
    /// Write a line per request to FILE, zstd-compressed TSV (docs/oplog.md); `{pid}` in
    /// the name is the process id [default: $SLUICE_OP_LOG]
    #[arg(long, value_name = "FILE")]
    pub op_log: Option<PathBuf>,
}

impl StoreArgs {
    /// The store for a command on `uris` (URIs, local paths, `-`).
    pub async fn open_for(&self, uris: &[&str]) -> Result<Arc<dyn ObjectStore>, Failure> {
        let cfg = self.config_for(uris).await?;
        Ok(sluice::registry::open(self.backend.as_deref(), cfg)?)
    }

    /// As `config`, for a command on `uris`: when none of them is an `s3://` URI no AWS
    /// configuration is looked up at all (no profile files, no credentials chain, no instance
    /// metadata, whose absence would only be reported as noise); the settings that apply to
    /// any store (timeouts, retries, the op-log) still are, for `az://` and `gs://`.
    pub async fn config_for(&self, uris: &[&str]) -> Result<StoreConfig, Failure> {
        let s3 = |u: &&str| u.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("s3://"));
        if uris.iter().any(s3) {
            return self.config().await;
        }
        let mut cfg = StoreConfig::policy_from_env()?;
        if let Some(c) = &self.ca_bundle {
            cfg.ca_bundle = Some(c.clone());
        }
        if let Some(p) = &self.op_log {
            cfg.op_log = Some(sluice_core::oplog::OpLog::shared(p)?);
        }
        Ok(cfg)
    }

    /// The environment's configuration with this command line's overrides.
    pub async fn config(&self) -> Result<StoreConfig, Failure> {
        let mut cfg = StoreConfig::from_env_with_profile(self.profile.as_deref()).await?;
        if self.no_sign_request {
            cfg.credentials = sluice_core::CredentialsCache::anonymous();
        }
        if let Some(e) = &self.endpoint {
            cfg.set_endpoint("--endpoint", e)?;
        }
        if !self.endpoints.is_empty() {
            cfg.set_endpoints("--endpoints", self.endpoints.iter().map(String::as_str))?;
        }
        if let Some(r) = &self.region {
            cfg.set_region("--region", r)?;
        }
        if let Some(c) = &self.ca_bundle {
            cfg.ca_bundle = Some(c.clone());
        }
        if let Some(p) = &self.op_log {
            cfg.op_log = Some(sluice_core::oplog::OpLog::shared(p)?);
        }
        Ok(cfg)
    }
}
