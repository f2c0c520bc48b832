//! SigV4 signing of raw HTTP requests with the `aws-sigv4` crate, the way the AWS SDK signs
//! S3: `UNSIGNED-PAYLOAD` (hashing a 140 MiB body would cost more than sending it), no
//! double percent-encoding, no path normalisation (S3 keys may contain `//` and `..`).

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use sluice_core::{Error, Result};
use std::time::SystemTime;

/// Adds `Authorization`, `x-amz-date`, `x-amz-content-sha256` (and the session token) to `req`.
pub fn sign_request<B>(
    req: &mut http::Request<B>,
    creds: &Credentials,
    region: &str,
    now: SystemTime,
) -> Result<()> {
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let identity = Identity::from(creds.clone());
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| Error::config("signing", e.to_string()))?
        .into();
    let uri = req.uri().to_string();
    let headers = req
        .headers()
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v)));
    let signable = SignableRequest::new(
        req.method().as_str(),
        uri.as_str(),
        headers,
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| Error::config("signing", format!("cannot sign request to {uri}: {e}")))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| Error::config("signing", format!("cannot sign request to {uri}: {e}")))?
        .into_parts();
    instructions.apply_to_request_http1x(req);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_authorization_without_leaking_the_secret() {
        let mut req = http::Request::get("http://127.0.0.1:9000/bucket/key")
            .header("host", "127.0.0.1:9000")
            .body(())
            .unwrap();
        let creds = Credentials::new(
            "AKIDEXAMPLE",
            "super-secret-key",
            Some("session-tok".into()),
            None,
            "t",
        );
        sign_request(&mut req, &creds, "us-east-1", SystemTime::UNIX_EPOCH).unwrap();
        let h = req.headers();
        let auth = h["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/19700101/us-east-1/s3/aws4_request"
            ),
            "{auth}"
        );
        assert_eq!(h["x-amz-content-sha256"], "UNSIGNED-PAYLOAD");
        assert_eq!(h["x-amz-security-token"], "session-tok");
        assert!(!format!("{h:?}").contains("super-secret-key"));
    }
}
