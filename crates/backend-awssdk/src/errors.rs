//! The SDK's errors as ours, keeping the status, S3 error code and request id.

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::RequestId;
use sluice_core::error::{Moved, is_redirect};
use sluice_core::error::{error_chain, find_source};
use sluice_core::{Error, StoreConfig, TimeoutPhase};

pub fn map_error<E>(uri: &str, cfg: &StoreConfig, e: SdkError<E, HttpResponse>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let timeouts = &cfg.timeouts;
    let request_id = e.request_id().map(str::to_owned);
    match e {
        // A success status the SDK could not read (a listing that is not XML, a number out
        // of range): the reply is broken, not an S3 error.
        SdkError::ServiceError(ref ctx) if ctx.raw().status().is_success() => {
            let status = ctx.raw().status().as_u16();
            Error::integrity(
                uri,
                format!("unreadable HTTP {status} reply: {}", error_chain(&e)),
            )
        }
        SdkError::ServiceError(ref ctx) if is_redirect(ctx.raw().status().as_u16()) => {
            let h = ctx.raw().headers();
            Moved::error(
                uri,
                ctx.raw().status().as_u16(),
                Some(&cfg.endpoint_url()),
                h.get("location"),
                h.get("x-amz-bucket-region"),
            )
        }
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status().as_u16();
            let err = ctx.err();
            // HEAD errors carry no body, so no code: fall back to the status.
            let code = err
                .code()
                .map_or_else(|| format!("HTTP{status}"), str::to_owned);
            let message = err.message().unwrap_or_default().to_owned();
            Error::from_service(uri, status, code, message, request_id)
        }
        SdkError::DispatchFailure(d) if d.is_timeout() => {
            // The connect timeout wraps the connector, whose failures hyper-util reports as
            // connect errors; the read timeout wraps the whole request and is not one.
            let connect = d.as_connector_error().is_some_and(|c| {
                find_source::<hyper_util::client::legacy::Error>(c).is_some_and(|h| h.is_connect())
            });
            let (phase, after) = if connect {
                (TimeoutPhase::Connect, timeouts.connect)
            } else {
                (TimeoutPhase::FirstByte, timeouts.first_byte)
            };
            Error::Timeout {
                uri: uri.to_owned(),
                phase,
                after,
            }
        }
        SdkError::TimeoutError(_) => Error::Timeout {
            uri: uri.to_owned(),
            phase: TimeoutPhase::FirstByte,
            after: timeouts.first_byte,
        },
        // The request could not be built: nothing was sent and retrying cannot help.
        SdkError::ConstructionFailure(_) => Error::InvalidUri {
            uri: uri.to_owned(),
            reason: error_chain(&e),
        },
        // Refused, reset, unparseable reply: retryable.
        other => Error::transport(uri, error_chain(&other)),
    }
}
