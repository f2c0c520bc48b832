//! `az://container/key`: Azure Blob Storage through object_store's `MicrosoftAzure`.
//!
//! Configured from Azure's own environment: every `AZURE_*` variable object_store reads
//! (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_TOKEN`,
//! `AZURE_CLIENT_ID`/`AZURE_CLIENT_SECRET`/`AZURE_TENANT_ID`, `AZURE_STORAGE_ENDPOINT`,
//! `AZURE_STORAGE_USE_EMULATOR`, ...), and beside them the names the Azure CLI, the Azure SDKs
//! and s3dlio use: `AZURE_STORAGE_ACCOUNT`, `AZURE_STORAGE_KEY`,
//! `AZURE_STORAGE_CONNECTION_STRING` and `AZURE_BLOB_ENDPOINT_URL`. Without an account or
//! any credential the store is refused before a request is sent, naming what was looked at:
//! object_store would otherwise ask the instance metadata service, which off Azure waits for
//! a connect timeout and then fails with no word about configuration.

use crate::env::{Env, Settings};
use crate::{Client, Provider};
use object_store::azure::{AzureConfigKey, MicrosoftAzure, MicrosoftAzureBuilder};
use sluice_core::{Error, Result, StoreConfig};
use std::collections::BTreeMap;

/// Azure Blob Storage, one account.
#[derive(Debug, Clone)]
pub struct Azure {
    settings: Settings<AzureConfigKey>,
    allow_http: bool,
}

/// What a user may set to give credentials, as the refusal names them.
const CREDENTIAL_VARIABLES: &str = "AZURE_STORAGE_ACCOUNT_KEY (or AZURE_STORAGE_KEY), \
AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_TOKEN, \
AZURE_CLIENT_ID with AZURE_CLIENT_SECRET and AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, \
AZURE_USE_AZURE_CLI=true, AZURE_STORAGE_USE_EMULATOR=true (Azurite), \
AZURE_CREDENTIAL_TYPE=managed_identity (on Azure) or AZURE_SKIP_SIGNATURE=true (a public container)";

/// The settings that each give a way to authenticate (or to skip it).
const CREDENTIAL_KEYS: &[AzureConfigKey] = &[
    AzureConfigKey::AccessKey,
    AzureConfigKey::SasKey,
    AzureConfigKey::Token,
    AzureConfigKey::ClientSecret,
    AzureConfigKey::FederatedTokenFile,
    AzureConfigKey::UseAzureCli,
    AzureConfigKey::UseEmulator,
    AzureConfigKey::SkipSignature,
    AzureConfigKey::CredentialType,
    AzureConfigKey::MsiEndpoint,
    AzureConfigKey::FabricTokenServiceUrl,
];

impl Azure {
    /// Reads the configuration from `env`.
    fn from_env(env: &Env) -> Result<Self> {
        let mut settings = Settings::new();
        // Lowest first: the connection string, then the other tools' names, then object_store's.
        if let Some(cs) = env.var("AZURE_STORAGE_CONNECTION_STRING") {
            connection_string(cs, &mut settings)?;
        }
        for (alias, key) in [
            ("AZURE_STORAGE_ACCOUNT", AzureConfigKey::AccountName),
            ("AZURE_STORAGE_KEY", AzureConfigKey::AccessKey),
            ("AZURE_BLOB_ENDPOINT_URL", AzureConfigKey::Endpoint),
        ] {
            if let Some(v) = env.var(alias) {
                settings.set(key, v);
            }
        }
        for (key, value) in env.keys::<AzureConfigKey>("AZURE_") {
            settings.set(key, value);
        }
        let emulator = settings.is_true(AzureConfigKey::UseEmulator);
        let account = settings.get(AzureConfigKey::AccountName).map(str::to_owned);
        let Some(account) = account.or(emulator.then(|| "devstoreaccount1".to_owned())) else {
            return Err(Error::config(
                "AZURE_STORAGE_ACCOUNT_NAME",
                "az:// needs a storage account: set AZURE_STORAGE_ACCOUNT_NAME (or \
                 AZURE_STORAGE_ACCOUNT, or AccountName in AZURE_STORAGE_CONNECTION_STRING)",
            ));
        };
        if !CREDENTIAL_KEYS.iter().any(|k| settings.contains(*k)) {
            return Err(Error::PermissionDenied {
                uri: "az://".into(),
                status: 0,
                code: "NoCredentials".into(),
                message: format!(
                    "no Azure credentials for account {account:?}: set {CREDENTIAL_VARIABLES}"
                ),
            });
        }
        if let Some(ep) = settings.get(AzureConfigKey::Endpoint) {
            let url = account_url(ep, &account);
            settings.set(AzureConfigKey::Endpoint, &url);
        }
        let allow_http = settings
            .get(AzureConfigKey::Endpoint)
            .map_or(emulator, |ep| ep.starts_with("http://"));
        Ok(Self {
            settings,
            allow_http,
        })
    }
}

/// An Azure Storage connection string's parts (`AccountName=...;AccountKey=...;
/// BlobEndpoint=...`, as the portal and Azurite's documentation give it) as settings.
fn connection_string(cs: &str, settings: &mut Settings<AzureConfigKey>) -> Result<()> {
    let mut parts = BTreeMap::new();
    for part in cs.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            // The part is not quoted: it may be a key.
            Error::config(
                "AZURE_STORAGE_CONNECTION_STRING",
                "expected Name=value pairs separated by ';'",
            )
        })?;
        parts.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let mut set = |k: AzureConfigKey, v: &str| settings.set(k, v);
    if parts
        .get("usedevelopmentstorage")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        set(AzureConfigKey::UseEmulator, "true");
    }
    if let Some(v) = parts.get("accountname") {
        set(AzureConfigKey::AccountName, v);
    }
    if let Some(v) = parts.get("accountkey") {
        set(AzureConfigKey::AccessKey, v);
    }
    if let Some(v) = parts.get("sharedaccesssignature") {
        set(AzureConfigKey::SasKey, v);
    }
    match (parts.get("blobendpoint"), parts.get("accountname")) {
        (Some(ep), _) => set(AzureConfigKey::Endpoint, ep),
        (None, Some(account)) if parts.contains_key("endpointsuffix") => {
            let proto = parts
                .get("defaultendpointsprotocol")
                .map_or("https", String::as_str);
            let suffix = &parts["endpointsuffix"];
            set(
                AzureConfigKey::Endpoint,
                &format!("{proto}://{account}.blob.{suffix}"),
            );
        }
        _ => {}
    }
    Ok(())
}

/// The account's URL from an endpoint. object_store takes the account's own URL
/// (`https://acct.blob.core.windows.net`, or `http://127.0.0.1:10000/acct` for Azurite);
/// s3dlio's `AZURE_STORAGE_ENDPOINT` is the service's (`http://127.0.0.1:10000`) with the
/// account appended. An endpoint with no path whose host does not name the account is the
/// latter.
fn account_url(endpoint: &str, account: &str) -> String {
    let ep = endpoint.trim_end_matches('/');
    let Some((_, rest)) = ep.split_once("://") else {
        return ep.to_owned();
    };
    if rest.contains('/') || rest.starts_with(&format!("{account}.")) {
        ep.to_owned()
    } else {
        format!("{ep}/{account}")
    }
}

impl Provider for Azure {
    type Store = MicrosoftAzure;

    fn from_config(_cfg: &StoreConfig) -> Result<Self> {
        Self::from_env(&Env::process(&["AZURE_"]))
    }

    fn build(&self, _cfg: &StoreConfig, client: Client, container: &str) -> Result<MicrosoftAzure> {
        let mut b =
            MicrosoftAzureBuilder::new().with_client_options(Client::options(self.allow_http));
        for (k, v) in self.settings.iter() {
            b = b.with_config(k, v);
        }
        b.with_container_name(container)
            .with_allow_http(self.allow_http)
            .with_http_connector(client.connector)
            .with_retry(Client::retry())
            .build()
            .map_err(|e| Error::config("azure", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(a: &Azure, k: AzureConfigKey) -> Option<&str> {
        a.settings.get(k)
    }

    #[test]
    fn the_cli_names_and_object_stores_names_both_count_object_stores_winning() {
        let a = Azure::from_env(&Env::of(&[
            ("AZURE_STORAGE_ACCOUNT", "cli"),
            ("AZURE_STORAGE_KEY", "a2V5"),
            ("AZURE_STORAGE_ACCOUNT_NAME", "native"),
        ]))
        .unwrap();
        assert_eq!(get(&a, AzureConfigKey::AccountName), Some("native"));
        assert_eq!(get(&a, AzureConfigKey::AccessKey), Some("a2V5"));
        assert!(!a.allow_http);
    }

    #[test]
    fn a_connection_string_gives_account_key_and_endpoint() {
        let a = Azure::from_env(&Env::of(&[(
            "AZURE_STORAGE_CONNECTION_STRING",
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=c2VjcmV0;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
        )]))
        .unwrap();
        assert_eq!(
            get(&a, AzureConfigKey::AccountName),
            Some("devstoreaccount1")
        );
        assert_eq!(
            get(&a, AzureConfigKey::Endpoint),
            Some("http://127.0.0.1:10000/devstoreaccount1")
        );
        assert!(a.allow_http);
        let cloud = Azure::from_env(&Env::of(&[(
            "AZURE_STORAGE_CONNECTION_STRING",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net",
        )]))
        .unwrap();
        assert_eq!(
            get(&cloud, AzureConfigKey::Endpoint),
            Some("https://acct.blob.core.windows.net")
        );
        let bad = Azure::from_env(&Env::of(&[("AZURE_STORAGE_CONNECTION_STRING", "c2VjcmV0")]))
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("AZURE_STORAGE_CONNECTION_STRING") && !bad.contains("c2VjcmV0"),
            "{bad}"
        );
    }

    #[test]
    fn a_service_endpoint_gets_the_account_appended() {
        assert_eq!(
            account_url("http://127.0.0.1:10000", "dev"),
            "http://127.0.0.1:10000/dev"
        );
        assert_eq!(
            account_url("http://127.0.0.1:10000/dev/", "dev"),
            "http://127.0.0.1:10000/dev"
        );
        assert_eq!(
            account_url("https://acct.blob.core.windows.net", "acct"),
            "https://acct.blob.core.windows.net"
        );
    }

    #[test]
    fn missing_account_or_credentials_name_what_was_looked_at() {
        let e = Azure::from_env(&Env::of(&[("AZURE_STORAGE_KEY", "a2V5")])).unwrap_err();
        assert!(e.to_string().contains("AZURE_STORAGE_ACCOUNT_NAME"), "{e}");
        let e = Azure::from_env(&Env::of(&[("AZURE_STORAGE_ACCOUNT", "acct")])).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, Error::PermissionDenied { code, .. } if code == "NoCredentials")
                && msg.contains("AZURE_STORAGE_ACCOUNT_KEY")
                && msg.contains("AZURE_STORAGE_SAS_TOKEN")
                && msg.contains("\"acct\""),
            "{msg}"
        );
        // The emulator needs neither (object_store knows Azurite's well-known account and key).
        assert!(Azure::from_env(&Env::of(&[("AZURE_STORAGE_USE_EMULATOR", "true")])).is_ok());
    }

    #[test]
    fn debug_shows_no_secret() {
        let a = Azure::from_env(&Env::of(&[
            ("AZURE_STORAGE_ACCOUNT", "acct"),
            ("AZURE_STORAGE_KEY", "c2VjcmV0"),
        ]))
        .unwrap();
        let d = format!("{a:?}");
        assert!(
            d.contains("azure_storage_account_key") && !d.contains("c2VjcmV0"),
            "{d}"
        );
    }
}
