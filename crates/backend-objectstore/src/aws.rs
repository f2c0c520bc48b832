//! `s3://` through object_store's `AmazonS3`, configured from the same `StoreConfig` (and so
//! the same AWS environment and credential chain) as every other backend.

use crate::{Client, Provider};
use async_trait::async_trait;
use object_store::CredentialProvider;
use object_store::aws::{AmazonS3, AmazonS3Builder, AwsCredential};
use sluice_core::{CredentialsCache, Error, Result, StoreConfig};
use std::sync::Arc;

/// Amazon S3 and the stores that speak its API.
#[derive(Debug)]
pub struct Aws;

/// Our credentials cache as object_store's provider, so both stacks see the same chain.
#[derive(Debug)]
struct Credentials(CredentialsCache);

#[async_trait]
impl CredentialProvider for Credentials {
    type Credential = AwsCredential;
    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let c = self
            .0
            .get("object_store")
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        let c = c.ok_or_else(|| object_store::Error::Generic {
            store: "S3",
            source: "anonymous access has no credentials".into(),
        })?;
        Ok(Arc::new(AwsCredential {
            key_id: c.access_key_id().to_owned(),
            secret_key: c.secret_access_key().to_owned(),
            token: c.session_token().map(str::to_owned),
        }))
    }
}

impl Provider for Aws {
    type Store = AmazonS3;
    const ONE_REQUEST_PER_KEY: bool = false;
    const WHOLE_AS_RANGE: bool = true;

    fn from_config(_cfg: &StoreConfig) -> Result<Self> {
        Ok(Aws)
    }

    fn build(&self, cfg: &StoreConfig, client: Client, bucket: &str) -> Result<AmazonS3> {
        let http = cfg.endpoint_url().scheme() == "http";
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(&cfg.region)
            .with_virtual_hosted_style_request(!cfg.path_style)
            .with_allow_http(http)
            .with_unsigned_payload(true)
            .with_client_options(Client::options(http))
            .with_http_connector(client.connector)
            .with_retry(Client::retry());
        if let Some(ep) = &cfg.endpoint {
            b = b.with_endpoint(ep.as_str().trim_end_matches('/'));
        }
        b = match cfg.credentials.provider() {
            Some(_) => b.with_credentials(Arc::new(Credentials(cfg.credentials.clone()))),
            None => b.with_skip_signature(true),
        };
        b.build()
            .map_err(|e| Error::config("object_store", e.to_string()))
    }
}
