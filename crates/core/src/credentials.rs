//! Credentials, resolved through aws-config's providers and cached until shortly before
//! they expire. aws-config's providers do not cache (the SDK's runtime does that), and a
//! profile provider re-reads files on every call, so backends that sign requests themselves
//! go through this cache.

use crate::error::{Error, Result};
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::RwLock;

/// Refresh this long before expiry, so a request signed now is still valid when it lands.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Where a store's credentials come from (none, for anonymous access, or an aws-config
/// provider), with the last credentials resolved kept until five minutes before they
/// expire. Clones share the cache. Every secret it hands out is registered for scrubbing
/// from error messages, and `Debug` shows only the kind of source.
#[derive(Clone)]
pub struct CredentialsCache {
    source: Source,
    cached: Arc<RwLock<Option<Credentials>>>,
}

#[derive(Clone)]
enum Source {
    /// Requests are sent unsigned (public buckets).
    Anonymous,
    Provider(SharedCredentialsProvider),
}

impl CredentialsCache {
    /// No credentials: requests are sent unsigned (public buckets); `get` returns `None`.
    pub fn anonymous() -> Self {
        Self {
            source: Source::Anonymous,
            cached: Arc::default(),
        }
    }

    /// Fixed credentials (an access key, its secret, and a session token for temporary
    /// ones), as `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` give
    /// them. They never expire here: a session token that does is not refreshed.
    pub fn from_static(
        access_key_id: &str,
        secret_access_key: &str,
        session_token: Option<String>,
    ) -> Self {
        let creds = Credentials::new(
            access_key_id,
            secret_access_key,
            session_token,
            None,
            "static",
        );
        Self::from_provider(SharedCredentialsProvider::new(creds))
    }

    /// Credentials from `provider`, whose secrets are kept out of every error message
    /// (see `error::register_secret`) — also where a backend's own stack uses `provider()`.
    pub fn from_provider(provider: SharedCredentialsProvider) -> Self {
        Self {
            source: Source::Provider(SharedCredentialsProvider::new(Redacting(provider))),
            cached: Arc::default(),
        }
    }

    /// The provider, for backends (the AWS SDK, object_store) that run their own cache.
    pub fn provider(&self) -> Option<&SharedCredentialsProvider> {
        match &self.source {
            Source::Anonymous => None,
            Source::Provider(p) => Some(p),
        }
    }

    /// Current credentials; `None` when anonymous. `subject` names what they are for, so a
    /// failure says which request could not be signed.
    pub async fn get(&self, subject: &str) -> Result<Option<Credentials>> {
        let Source::Provider(provider) = &self.source else {
            return Ok(None);
        };
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|exp| exp > SystemTime::now() + REFRESH_MARGIN)
        };
        if let Some(c) = self.cached.read().await.as_ref().filter(|c| fresh(c)) {
            return Ok(Some(c.clone()));
        }
        let mut slot = self.cached.write().await;
        if let Some(c) = slot.as_ref().filter(|c| fresh(c)) {
            return Ok(Some(c.clone()));
        }
        let creds = provider.provide_credentials().await.map_err(|e| Error::PermissionDenied {
            uri: subject.to_owned(),
            status: 0,
            code: "NoCredentials".into(),
            message: format!(
                "no usable AWS credentials (looked in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the AWS_PROFILE profile, web identity, container and instance metadata): {}",
                crate::error::error_chain(&e)
            ),
        })?;
        *slot = Some(creds.clone());
        Ok(Some(creds))
    }
}

/// A provider that registers the secrets it hands out for redaction.
#[derive(Debug)]
struct Redacting(SharedCredentialsProvider);

impl ProvideCredentials for Redacting {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(async move {
            let creds = self.0.provide_credentials().await?;
            crate::error::register_secret(creds.secret_access_key());
            if let Some(token) = creds.session_token() {
                crate::error::register_secret(token);
            }
            Ok(creds)
        })
    }
}

impl std::fmt::Debug for CredentialsCache {
    /// Never prints keys: only which kind of source is configured.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.source {
            Source::Anonymous => "anonymous",
            Source::Provider(_) => "provider",
        };
        f.debug_struct("CredentialsCache")
            .field("source", &kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn static_credentials_resolve_and_debug_hides_them() {
        let c = CredentialsCache::from_static(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI-SECRET",
            Some("TOKEN-xyz".into()),
        );
        let got = c.get("s3://b/k").await.unwrap().unwrap();
        assert_eq!(got.access_key_id(), "AKIDEXAMPLE");
        assert_eq!(got.secret_access_key(), "wJalrXUtnFEMI-SECRET");
        let dbg = format!("{c:?} {got:?}");
        assert!(
            !dbg.contains("wJalrXUtnFEMI-SECRET") && !dbg.contains("TOKEN-xyz"),
            "{dbg}"
        );
        assert!(
            CredentialsCache::anonymous()
                .get("x")
                .await
                .unwrap()
                .is_none()
        );
    }
}
