//! S3 error replies, read the same way whatever client stack received them: the status,
//! and the `<Error>` document's `Code`, `Message` and `RequestId` (a HEAD's error has no
//! body, so its code is named after the status). Backends that see raw responses (hyper,
//! and object_store through its HTTP-client hook) hand them here; the SDK parses its own.

use crate::error::Error;
use serde::Deserialize;

/// What is read of an error body: S3's error documents are a few hundred bytes, and a
/// hostile or broken endpoint must not make a client buffer gigabytes.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// S3's `<Error>` document.
#[derive(Debug, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct ErrorDoc {
    /// `Code`: the machine-readable error (`NoSuchKey`, `SlowDown`, ...); empty if absent.
    #[serde(default)]
    pub code: String,
    /// `Message`: the server's explanation for people; empty if absent.
    #[serde(default)]
    pub message: String,
    /// `RequestId`: what the store's operators need to find the request in their logs.
    pub request_id: Option<String>,
}

impl ErrorDoc {
    /// The document in `body`, if it is one (empty fields otherwise).
    pub fn parse(body: &[u8]) -> Self {
        std::str::from_utf8(body)
            .ok()
            .and_then(|s| quick_xml::de::from_str(s).ok())
            .unwrap_or_default()
    }
}

/// The error of a reply with `status` (4xx, 5xx) and `body` (at most `MAX_ERROR_BODY` of
/// it), about `subject`. `header_request_id`: the `x-amz-request-id` header, used when the
/// body names none.
pub fn error_reply(
    subject: &str,
    status: u16,
    body: &[u8],
    header_request_id: Option<String>,
) -> Error {
    let doc = ErrorDoc::parse(body);
    let code = if doc.code.is_empty() {
        status_code_name(status)
    } else {
        doc.code
    };
    Error::from_service(
        subject,
        status,
        code,
        doc.message,
        doc.request_id.or(header_request_id),
    )
}

/// The code S3 would have sent with `status`, for replies without a document.
fn status_code_name(status: u16) -> String {
    match status {
        404 => "NotFound".into(),
        403 => "Forbidden".into(),
        412 => "PreconditionFailed".into(),
        416 => "InvalidRange".into(),
        503 => "SlowDown".into(),
        s => format!("HTTP{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_gives_code_message_and_request_id() {
        let e = error_reply(
            "s3://b/k",
            503,
            b"<Error><Code>SlowDown</Code><Message>Reduce</Message><RequestId>r-1</RequestId></Error>",
            Some("header-id".into()),
        );
        assert!(
            matches!(&e, Error::Service { status: 503, code, request_id: Some(id), .. }
                if code == "SlowDown" && id == "r-1"),
            "{e:?}"
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn a_reply_without_document_is_named_by_its_status() {
        let e = error_reply("s3://b/k", 404, b"", Some("h".into()));
        assert!(
            matches!(&e, Error::NotFound { code, .. } if code == "NotFound"),
            "{e:?}"
        );
        let e = error_reply("s3://b/k", 500, b"not xml <", Some("h".into()));
        assert!(
            matches!(&e, Error::Service { status: 500, code, request_id: Some(id), .. }
                if code == "HTTP500" && id == "h"),
            "{e:?}"
        );
    }
}
