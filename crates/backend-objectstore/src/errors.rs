//! object_store's errors as ours. object_store keeps the HTTP status and response body only
//! in its error text for most failures, so the status and S3 code are read back from it.

use sluice_core::error::error_chain;
use sluice_core::{Error, ObjectUri, TimeoutPhase, Timeouts};

/// object_store's refusal of a 200 (the whole object) to a ranged GET.
pub fn not_partial(e: &object_store::Error) -> bool {
    error_chain(e).contains("non-partial response")
}

/// A 416: the range asked for is not in the object (`bytes=0-` of an empty one).
pub fn range_not_satisfiable(e: &object_store::Error) -> bool {
    let text = error_chain(e);
    http_status(&text) == Some(416) || text.contains("InvalidRange")
}

pub fn map_error(uri: &ObjectUri, timeouts: &Timeouts, e: object_store::Error) -> Error {
    let text = error_chain(&e);
    let u = uri.to_string();
    let code = s3_code(&text);
    // object_store's own checks of a reply against the range asked ("Requested 0..100, got
    // 0..200", a 200 to a range): the reply is wrong, as core's checks would say.
    if text.contains("non-partial response")
        || (text.contains("Requested ") && text.contains(", got "))
    {
        return Error::integrity(u, text);
    }
    if text.contains("timed out") && http_status(&text).is_none() {
        let (phase, after) = if text.contains("connect") {
            (TimeoutPhase::Connect, timeouts.connect)
        } else {
            // The client's read timeout (see `build`).
            (
                TimeoutPhase::FirstByte,
                timeouts.first_byte.max(timeouts.stall),
            )
        };
        return Error::Timeout {
            uri: u,
            phase,
            after,
        };
    }
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound {
            uri: u,
            code: code.unwrap_or_else(|| "NoSuchKey".into()),
        },
        object_store::Error::Precondition { .. } => Error::from_service(
            u,
            412,
            code.unwrap_or_else(|| "PreconditionFailed".into()),
            text,
            None,
        ),
        object_store::Error::PermissionDenied { .. } => Error::from_service(
            u,
            403,
            code.unwrap_or_else(|| "AccessDenied".into()),
            text,
            None,
        ),
        object_store::Error::Unauthenticated { .. } => Error::from_service(
            u,
            401,
            code.unwrap_or_else(|| "Unauthenticated".into()),
            text,
            None,
        ),
        _ => match http_status(&text) {
            Some(status) => {
                let code = code.unwrap_or_else(|| format!("HTTP{status}"));
                Error::from_service(u, status, code, text, None)
            }
            // No status: the request never got an answer (refused, reset, timed out).
            None => Error::transport(u, text),
        },
    }
}

/// "…status code: 503 Service Unavailable…" → 503.
fn http_status(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// The `<Code>` of an S3 XML error body quoted in the text.
fn s3_code(text: &str) -> Option<String> {
    let start = text.find("<Code>")? + "<Code>".len();
    let end = text[start..].find("</Code>")? + start;
    Some(text[start..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_code_are_recovered_from_text() {
        let t = "Generic S3 error: Server returned non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>";
        assert_eq!(http_status(t), Some(503));
        assert_eq!(s3_code(t).as_deref(), Some("SlowDown"));
        assert_eq!(http_status("connection refused"), None);
    }
}
