//! `gs://bucket/key`: Google Cloud Storage through object_store's `GoogleCloudStorage`
//! (its XML API, which speaks S3's dialect).
//!
//! Configured from Google's own environment: the `GOOGLE_*` variables object_store reads
//! (`GOOGLE_APPLICATION_CREDENTIALS`, `GOOGLE_SERVICE_ACCOUNT`, `GOOGLE_SERVICE_ACCOUNT_KEY`,
//! `GOOGLE_BEARER_TOKEN`, `GOOGLE_BASE_URL`), gcloud's application-default credentials file,
//! the instance's service account on Google Compute Engine, and for an emulator the Google
//! client libraries' `STORAGE_EMULATOR_HOST` (or s3dlio's `GCS_ENDPOINT_URL`). With none of
//! these the store is refused before a request is sent, naming what was looked at: off GCE,
//! object_store would wait on the metadata server for a connect timeout and fail with no word
//! about configuration.

use crate::env::{Env, Settings};
use crate::{Client, Provider};
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder, GoogleConfigKey};
use sluice_core::{Error, Result, StoreConfig};
use std::path::PathBuf;

/// Google Cloud Storage.
#[derive(Debug, Clone)]
pub struct Gcs {
    settings: Settings<GoogleConfigKey>,
    allow_http: bool,
}

/// What a user may set to give credentials, as the refusal names them.
const CREDENTIAL_VARIABLES: &str = "GOOGLE_APPLICATION_CREDENTIALS, GOOGLE_SERVICE_ACCOUNT \
(a key file), GOOGLE_SERVICE_ACCOUNT_KEY (its JSON), GOOGLE_BEARER_TOKEN, \
STORAGE_EMULATOR_HOST (an emulator) or GOOGLE_SKIP_SIGNATURE=true (a public bucket); \
or run `gcloud auth application-default login`, or run on Google Compute Engine";

const CREDENTIAL_KEYS: &[GoogleConfigKey] = &[
    GoogleConfigKey::ServiceAccount,
    GoogleConfigKey::ServiceAccountKey,
    GoogleConfigKey::ApplicationCredentials,
    GoogleConfigKey::BearerToken,
    GoogleConfigKey::SkipSignature,
];

/// What else gives credentials: gcloud's application-default file, or this machine being a
/// GCE instance (its metadata server). Read from the machine, not the environment.
#[derive(Debug, Clone, Copy, Default)]
struct Machine {
    adc_file: bool,
    gce: bool,
}

impl Machine {
    fn read(env: &Env) -> Self {
        let adc = env
            .var("CLOUDSDK_CONFIG")
            .map(PathBuf::from)
            .or_else(|| {
                env.var("HOME")
                    .map(|h| PathBuf::from(h).join(".config/gcloud"))
            })
            .map(|d| d.join("application_default_credentials.json"));
        // What Google's own client libraries read to tell they are on GCE.
        let product = std::fs::read_to_string("/sys/class/dmi/id/product_name").unwrap_or_default();
        Self {
            adc_file: adc.is_some_and(|f| f.is_file()),
            gce: product.contains("Google"),
        }
    }
}

impl Gcs {
    fn from_env(env: &Env, machine: Machine) -> Result<Self> {
        let mut settings = Settings::new();
        // Lowest first: the emulator's and s3dlio's names, then object_store's.
        if let Some(host) = env.var("STORAGE_EMULATOR_HOST") {
            let url = if host.contains("://") {
                host.to_owned()
            } else {
                format!("http://{host}")
            };
            settings.set(GoogleConfigKey::BaseUrl, url.trim_end_matches('/'));
            // An emulator checks no credentials, but object_store asks its provider for one
            // before each PUT, DELETE and copy even with `skip_signature` (which only its
            // reads and listings honour): a fixed token keeps it off the metadata server.
            settings.set(GoogleConfigKey::BearerToken, "emulator");
        }
        if let Some(url) = env.var("GCS_ENDPOINT_URL") {
            settings.set(GoogleConfigKey::BaseUrl, url.trim_end_matches('/'));
        }
        for (key, value) in env.keys::<GoogleConfigKey>("GOOGLE_") {
            settings.set(key, value);
        }
        if !CREDENTIAL_KEYS.iter().any(|k| settings.contains(*k))
            && !machine.adc_file
            && !machine.gce
        {
            return Err(Error::PermissionDenied {
                uri: "gs://".into(),
                status: 0,
                code: "NoCredentials".into(),
                message: format!("no Google Cloud credentials: set {CREDENTIAL_VARIABLES}"),
            });
        }
        let allow_http = settings
            .get(GoogleConfigKey::BaseUrl)
            .is_some_and(|u| u.starts_with("http://"));
        Ok(Self {
            settings,
            allow_http,
        })
    }
}

impl Provider for Gcs {
    type Store = GoogleCloudStorage;

    fn from_config(_cfg: &StoreConfig) -> Result<Self> {
        let env = Env::process(&[
            "GOOGLE_",
            "STORAGE_EMULATOR_HOST",
            "GCS_ENDPOINT_URL",
            "CLOUDSDK_CONFIG",
            "HOME",
        ]);
        Self::from_env(&env, Machine::read(&env))
    }

    fn build(
        &self,
        _cfg: &StoreConfig,
        client: Client,
        bucket: &str,
    ) -> Result<GoogleCloudStorage> {
        let mut b =
            GoogleCloudStorageBuilder::new().with_client_options(Client::options(self.allow_http));
        for (k, v) in self.settings.iter() {
            b = b.with_config(k, v);
        }
        b.with_bucket_name(bucket)
            .with_http_connector(client.connector)
            .with_retry(Client::retry())
            .build()
            .map_err(|e| Error::config("gcs", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_host_gives_base_url_and_no_signing() {
        let g = Gcs::from_env(
            &Env::of(&[("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")]),
            Machine::default(),
        )
        .unwrap();
        assert_eq!(
            g.settings.get(GoogleConfigKey::BaseUrl),
            Some("http://127.0.0.1:4443")
        );
        assert!(g.settings.contains(GoogleConfigKey::BearerToken) && g.allow_http);
        // object_store's own name wins.
        let g = Gcs::from_env(
            &Env::of(&[
                ("STORAGE_EMULATOR_HOST", "http://127.0.0.1:4443/"),
                ("GOOGLE_BASE_URL", "https://gcs.example"),
            ]),
            Machine::default(),
        )
        .unwrap();
        assert_eq!(
            g.settings.get(GoogleConfigKey::BaseUrl),
            Some("https://gcs.example")
        );
        assert!(!g.allow_http);
    }

    #[test]
    fn no_credentials_names_what_was_looked_at_unless_the_machine_has_them() {
        let e = Gcs::from_env(&Env::of(&[]), Machine::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, Error::PermissionDenied { code, .. } if code == "NoCredentials")
                && msg.contains("GOOGLE_APPLICATION_CREDENTIALS")
                && msg.contains("STORAGE_EMULATOR_HOST"),
            "{msg}"
        );
        for machine in [
            Machine {
                adc_file: true,
                gce: false,
            },
            Machine {
                adc_file: false,
                gce: true,
            },
        ] {
            assert!(Gcs::from_env(&Env::of(&[]), machine).is_ok());
        }
        let key = Gcs::from_env(
            &Env::of(&[("GOOGLE_SERVICE_ACCOUNT_KEY", "{\"secret\":1}")]),
            Machine::default(),
        )
        .unwrap();
        assert!(!format!("{key:?}").contains("secret"));
    }
}
