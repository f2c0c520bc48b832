//! object_store's errors as ours, by type: error replies and whole-object answers come
//! from our HTTP-client hook (`http`), transport failures are object_store's `HttpError`
//! (with hyper-util's connect error below a connect timeout), and what is left is a reply
//! that object_store itself read and refused.

use crate::http::{ErrorReply, WholeObject};
use object_store::client::{HttpError, HttpErrorKind};
use sluice_core::error::{Moved, is_redirect};
use sluice_core::error::{error_chain, find_source};
use sluice_core::wire::error_reply;
use sluice_core::{Error, ObjectUri, TimeoutPhase, Timeouts};

/// What a reply object_store refused means (one it received, with a success status, and
/// found inconsistent: a range other than the one asked, missing headers, unreadable XML).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// For a GET the bytes would land at the wrong offsets: never retried.
    Integrity,
    /// Elsewhere, as a reply cut or garbled in transit: retried.
    Transport,
}

/// A 200 to a ranged GET (see `http::WholeObject`).
pub fn whole_object(e: &object_store::Error) -> bool {
    find_source::<WholeObject>(e).is_some()
}

/// A 416: the range asked for is not in the object (`bytes=0-` of an empty one).
pub fn range_not_satisfiable(e: &object_store::Error) -> bool {
    find_source::<ErrorReply>(e).is_some_and(|r| r.status == 416)
}

pub fn map_error(
    uri: &ObjectUri,
    timeouts: &Timeouts,
    e: object_store::Error,
    refused: Refused,
) -> Error {
    let u = uri.to_string();
    if let Some(r) = find_source::<ErrorReply>(&e) {
        if is_redirect(r.status) {
            // reqwest resolved and followed every Location it could.
            return Moved::error(
                &u,
                r.status,
                None,
                r.location.as_deref(),
                r.region.as_deref(),
            );
        }
        let e = error_reply(&u, r.status, &r.body, r.request_id.clone());
        return match e {
            // Azure's answer to a PUT with `If-None-Match: *` whose blob exists: S3 and GCS
            // answer 412, which is what `PutMode::Create` promises.
            Error::Service {
                status: 409,
                ref code,
                ..
            } if code == "BlobAlreadyExists" => {
                Error::from_service(u, 412, "PreconditionFailed", e.to_string(), None)
            }
            e => e,
        };
    }
    if whole_object(&e) {
        return Error::integrity(u, WholeObject.to_string());
    }
    if let Some(h) = find_source::<HttpError>(&e) {
        if h.kind() == HttpErrorKind::Timeout {
            // reqwest reports a connect timeout as a timeout too; hyper-util's connect
            // error below it says which phase it was.
            let connect = find_source::<hyper_util::client::legacy::Error>(&e)
                .is_some_and(|c| c.is_connect());
            let (phase, after) = if connect {
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
        // Refused, reset, cut off: the request never got a whole answer.
        return Error::transport(u, error_chain(&e));
    }
    // Our credential chain, called by object_store before sending.
    if find_source::<Error>(&e).is_some() {
        return Error::transport(u, error_chain(&e));
    }
    // What object_store read from a reply's body rather than its status: an Azure batch
    // delete's answer for one key.
    match &e {
        object_store::Error::NotFound { .. } => {
            return Error::NotFound {
                uri: u,
                code: "NotFound".into(),
            };
        }
        object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => {
            return Error::from_service(u, 412, "PreconditionFailed", error_chain(&e), None);
        }
        object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. } => {
            return Error::unsupported(u, "objectstore", &error_chain(&e));
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            return Error::from_service(u, 403, "AccessDenied", error_chain(&e), None);
        }
        _ => {}
    }
    match refused {
        Refused::Integrity => Error::integrity(u, error_chain(&e)),
        Refused::Transport => Error::transport(u, error_chain(&e)),
    }
}
