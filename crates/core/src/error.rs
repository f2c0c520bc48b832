//! The one public error type. Every variant names the thing at fault (a URI, an option, an
//! endpoint) so that a message read in a log or a Python traceback says what to fix.

use std::time::Duration;

/// The result of every fallible sluice call; the error is [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Boxed source error kept for `std::error::Error::source` chains.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// TCP connect and TLS handshake.
    Connect,
    /// From sending the request to the response head.
    FirstByte,
    /// No body bytes arrived for this long.
    Stall,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstByte => "first byte",
            TimeoutPhase::Stall => "body stall",
        })
    }
}

/// What kind of failure an [`Error`] is ([`Error::kind`]), without its details: what callers
/// branch on to pick an exit code, an exception class or an expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`Error::NotFound`].
    NotFound,
    /// [`Error::PermissionDenied`].
    PermissionDenied,
    /// [`Error::InvalidUri`] or `Error::InvalidConfig`: the caller's input, not the store.
    InvalidInput,
    /// [`Error::Timeout`].
    Timeout,
    /// [`Error::Transport`].
    Transport,
    /// [`Error::Service`].
    Service,
    /// [`Error::Integrity`].
    Integrity,
    /// [`Error::Redirect`].
    Redirect,
    /// [`Error::Cancelled`].
    Cancelled,
    /// [`Error::Io`].
    Io,
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// Every error sluice returns, by kind rather than by client stack: each backend maps its
/// library's errors to these variants (by type, HTTP status and S3 code), so callers and the
/// retry policy treat a failure the same whichever backend met it. `is_retryable` says which
/// kinds are transient. Text that came from a server or a library is passed through `scrub`,
/// so no message carries a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object, bucket or file does not exist (HTTP 404, `NoSuchKey`, `NoSuchBucket`, or
    /// `ENOENT`). Final: never retried.
    #[error("{uri}: not found ({code})")]
    NotFound {
        /// What was asked for.
        uri: String,
        /// The S3 error code (`NoSuchKey`, `NoSuchBucket`, `NotFound` for a HEAD, which has
        /// no body), or `ENOENT` for a file.
        code: String,
    },

    /// The request was refused (HTTP 401 or 403), no usable credentials were found, or a
    /// file could not be opened. Final: never retried.
    #[error("{uri}: permission denied: {}{code}: {message}", http_status(*status))]
    PermissionDenied {
        /// What was asked for (or, with no credentials, what they were needed for).
        uri: String,
        /// The HTTP status; 0 when no request was sent (no usable credentials, or a file).
        status: u16,
        /// The S3 error code (`AccessDenied`, `SignatureDoesNotMatch`, ...), `NoCredentials`
        /// when no credential source answered, or `EACCES` for a file.
        code: String,
        /// The server's message (scrubbed of secrets), or what failed locally.
        message: String,
    },

    /// A string that is not an `s3://`, `file://` or `direct://` URI, or whose bucket name or
    /// key S3 would refuse (see `ObjectUri::parse`).
    #[error("invalid URI {uri:?}: {reason}")]
    InvalidUri {
        /// The string as given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A setting or argument was refused (a malformed value, one outside S3's limits), or a
    /// call was made that an object no longer takes (a writer after `finish` or `abort`).
    #[error("invalid configuration {option}: {reason}")]
    InvalidConfig {
        /// What to fix: the environment variable (`AWS_REGION`), flag or argument
        /// (`--endpoint`, `part_size`) at fault, or `writer for <uri>`.
        option: String,
        /// Why it was refused.
        reason: String,
    },

    /// A network wait ran out (see [`Timeouts`](crate::Timeouts)). Retryable; a stalled body is resumed from
    /// the bytes already received.
    #[error("{uri}: {phase} timeout after {after:?}")]
    Timeout {
        /// The object being read or written.
        uri: String,
        /// Which wait ran out.
        phase: TimeoutPhase,
        /// The limit that elapsed.
        after: Duration,
    },

    /// The exchange failed below the S3 protocol: a refused or reset connection, a TLS
    /// failure, a body that ended before its Content-Length, an unusable reply. Retryable.
    #[error("{uri}: transport error: {message}")]
    Transport {
        /// The object or listing the request was for.
        uri: String,
        /// The error and its causes on one line (`error_chain`), scrubbed of secrets.
        message: String,
        /// The underlying error, for `source()` chains and classification by type
        /// (`find_source`); `None` when only text was available.
        #[source]
        source: Option<BoxError>,
    },

    /// Any other error reply from the service. Retryable when `is_retryable` says so
    /// (408, 429, 5xx and the throttling codes); final otherwise (400, 412, 416, ...).
    #[error("{uri}: HTTP {status} {code}: {message}{}", request_id.as_deref().map(|r| format!(" (request id {r})")).unwrap_or_default())]
    Service {
        /// The object, bucket or listing the request was for.
        uri: String,
        /// The HTTP status.
        status: u16,
        /// The S3 error code from the `<Error>` body, or a stand-in named after the status
        /// when there was none (`HTTP500`; `SlowDown` for a bodiless 503).
        code: String,
        /// The server's message, scrubbed of secrets and at most `MAX_SERVER_TEXT` bytes.
        message: String,
        /// S3's request id (from the body, else `x-amz-request-id`), for the store's
        /// operators.
        request_id: Option<String>,
    },

    /// The bytes cannot be trusted: a reply that does not answer exactly the range asked,
    /// a body longer than its destination, an object that changed while being read (another
    /// ETag, or a 412 on a pinned resume), a listing that repeats itself, a multipart upload
    /// whose completion cannot be confirmed, a task that panicked. Never retried: repeating
    /// the request could splice two versions of an object.
    #[error("{uri}: integrity check failed: {reason}")]
    Integrity {
        /// The object (or listing) at fault.
        uri: String,
        /// What did not hold.
        reason: String,
    },

    /// A redirect (HTTP 301, 302, 307, 308) that was not followed: the store answered that
    /// the bucket or object is served elsewhere. [`S3Store`](crate::S3Store) follows redirects it can (see
    /// `redirect`); this error says where the request was sent and, in `refused`, why that
    /// was not done. Final: never retried.
    #[error("{uri}: {moved}{}", refused.as_deref().map(|r| format!(", not followed: {r}")).unwrap_or_default())]
    Redirect {
        /// What was asked for.
        uri: String,
        /// The redirect's status and where it points.
        moved: Moved,
        /// Why it was not followed; `None` as a wire reports it, before [`S3Store`](crate::S3Store) decides.
        refused: Option<String>,
    },

    /// The operation was abandoned before its request was sent: the loader it belonged to
    /// could no longer hand out a request permit (its limit was closed).
    #[error("{uri}: cancelled")]
    Cancelled {
        /// The object that was not read.
        uri: String,
    },

    /// A local file system call failed (`file://`, `direct://`).
    #[error("{uri}: {op}: {source}")]
    Io {
        /// The file's URI.
        uri: String,
        /// The call that failed (`open`, `stat`, `read`, ...).
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A `Transport` error about `uri` with no underlying error value; `message` is
    /// scrubbed of secrets.
    pub fn transport(uri: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Transport {
            uri: uri.into(),
            message: scrub(&message.into()),
            source: None,
        }
    }

    /// A `Transport` error about `uri` caused by `source`, whose whole chain becomes the
    /// (scrubbed) message and which stays reachable through `source()`.
    pub fn transport_with(uri: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        Error::Transport {
            uri: uri.into(),
            message: scrub(&error_chain(&*source)),
            source: Some(source),
        }
    }

    /// An `InvalidConfig` error: `option` (a variable, flag or argument name) was refused
    /// for `reason`.
    pub fn config(option: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            option: option.into(),
            reason: reason.into(),
        }
    }

    /// An `Integrity` error about `uri`: `reason` says what did not hold.
    pub fn integrity(uri: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Integrity {
            uri: uri.into(),
            reason: reason.into(),
        }
    }

    /// Maps a file system error: a missing file is `NotFound`, a refused one
    /// `PermissionDenied`, anything else `Io` with the operation that failed.
    pub fn io(uri: impl Into<String>, op: &'static str, source: std::io::Error) -> Self {
        let uri = uri.into();
        match source.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound {
                uri,
                code: "ENOENT".into(),
            },
            std::io::ErrorKind::PermissionDenied => Error::PermissionDenied {
                uri,
                status: 0,
                code: "EACCES".into(),
                message: format!("{op}: {source}"),
            },
            _ => Error::Io { uri, op, source },
        }
    }

    /// Maps an S3 error response to the semantic variant. `code` is the S3 error code from
    /// the XML body (or a status-derived stand-in when a HEAD response has no body).
    pub fn from_service(
        uri: impl Into<String>,
        status: u16,
        code: impl Into<String>,
        message: impl Into<String>,
        request_id: Option<String>,
    ) -> Self {
        let (uri, code, message) = (uri.into(), scrub(&code.into()), scrub(&message.into()));
        match (status, code.as_str()) {
            (404, _) | (_, "NoSuchKey" | "NoSuchBucket") => Error::NotFound { uri, code },
            (401 | 403, _) => Error::PermissionDenied {
                uri,
                status,
                code,
                message,
            },
            _ => Error::Service {
                uri,
                status,
                code,
                message,
                request_id,
            },
        }
    }

    /// The refusal of an operation a store or client stack does not offer (`what`), about
    /// `subject`: a 501 NotImplemented, as a store that lacks an S3 operation answers.
    pub fn unsupported(subject: impl Into<String>, backend: &str, what: &str) -> Self {
        Error::from_service(
            subject,
            501,
            "NotImplemented",
            format!("the {backend} store does not support {what}"),
            None,
        )
    }

    /// The URI (or endpoint, or option) this error is about.
    pub fn subject(&self) -> &str {
        match self {
            Error::NotFound { uri, .. }
            | Error::PermissionDenied { uri, .. }
            | Error::InvalidUri { uri, .. }
            | Error::Timeout { uri, .. }
            | Error::Transport { uri, .. }
            | Error::Service { uri, .. }
            | Error::Integrity { uri, .. }
            | Error::Redirect { uri, .. }
            | Error::Cancelled { uri }
            | Error::Io { uri, .. } => uri,
            Error::InvalidConfig { option, .. } => option,
        }
    }

    /// Whether the store or its client stack does not offer the operation (501
    /// `NotImplemented`, as [`Error::unsupported`] makes it).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Error::Service { status: 501, code, .. } if code == "NotImplemented")
    }

    /// Whether a conditional request's condition failed (412 `PreconditionFailed`): a
    /// `PutMode::Create` whose key was taken, an `Update` or pinned read of another version.
    pub fn is_precondition_failed(&self) -> bool {
        matches!(self, Error::Service { status: 412, .. })
    }

    /// Whether the store asked for fewer requests (503, 429 or a throttling code): what
    /// `congestion::Congestion` backs off on. A 500 is a failure, not a request to slow down.
    pub fn is_throttle(&self) -> bool {
        match self {
            Error::Service { status, code, .. } => {
                matches!(*status, 429 | 503)
                    || matches!(
                        code.as_str(),
                        "SlowDown" | "Throttling" | "ThrottlingException" | "ServiceUnavailable"
                    )
            }
            _ => false,
        }
    }

    /// What kind of failure this is: the one map from variant to kind that the CLI's exit
    /// codes, Python's exception classes and the hostile catalogue's expectations share.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::PermissionDenied { .. } => ErrorKind::PermissionDenied,
            Error::InvalidUri { .. } | Error::InvalidConfig { .. } => ErrorKind::InvalidInput,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Transport { .. } => ErrorKind::Transport,
            Error::Service { .. } => ErrorKind::Service,
            Error::Integrity { .. } => ErrorKind::Integrity,
            Error::Redirect { .. } => ErrorKind::Redirect,
            Error::Cancelled { .. } => ErrorKind::Cancelled,
            Error::Io { .. } => ErrorKind::Io,
        }
    }

    /// The error's kind in a few words, for counting failures by kind (`sluice bench`):
    /// the kind, with the HTTP status and S3 code of a service error or the phase of a
    /// timeout, never a URI or a server's text.
    pub fn kind_label(&self) -> String {
        let kind = self.kind();
        match self {
            Error::NotFound { code, .. } => format!("{kind} {code}"),
            Error::PermissionDenied { status, code, .. } => format!("{kind} {status} {code}"),
            Error::InvalidUri { .. } => "InvalidUri".into(),
            Error::InvalidConfig { .. } => "InvalidConfig".into(),
            Error::Timeout { phase, .. } => format!("{kind} {phase}"),
            Error::Service { status, code, .. } => format!("HTTP {status} {code}"),
            Error::Io { source, .. } => format!("{kind} {:?}", source.kind()),
            _ => kind.to_string(),
        }
    }

    /// The HTTP status of the answer this error came from; `None` where no answer came (a
    /// timeout, a broken connection) or the store is not HTTP (a file).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::NotFound { code, .. } if code != "ENOENT" => Some(404),
            Error::PermissionDenied { status, .. } if *status != 0 => Some(*status),
            Error::Service { status, .. } => Some(*status),
            Error::Redirect { moved, .. } => Some(moved.status),
            _ => None,
        }
    }

    /// Whether repeating the same request may succeed. The rule, as in the AWS SDKs'
    /// standard retry mode: throttling, server errors, timeouts and broken connections
    /// (including a body cut short) are transient; every other 4xx is final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Timeout { .. } | Error::Transport { .. } => true,
            // Throttling (`is_throttle`, the one list of its codes) and the other transient
            // answers.
            Error::Service { status, code, .. } => {
                self.is_throttle()
                    || matches!(*status, 408 | 500..=599)
                    || matches!(
                        code.as_str(),
                        "RequestTimeout" | "RequestTimeTooSkewed" | "InternalError"
                        // 409: a conditional write raced another on S3's side and was not
                        // decided; S3 asks for it to be repeated.
                        | "ConditionalRequestConflict"
                    )
            }
            _ => false,
        }
    }
}

/// The secret values this process signs with (secret keys, session tokens), registered as
/// credentials are resolved: `scrub` removes them wherever they appear, even where no
/// marker announces them (a server echoing a secret in free text).
static KNOWN_SECRETS: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Secrets shorter than this are not registered: replacing them would mangle messages and
/// they are not real AWS secrets (40 characters) or tokens (hundreds).
const MIN_SECRET_LEN: usize = 12;

/// Keeps `secret` out of every error message from now on.
pub(crate) fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(|p| p.into_inner());
    if !known.iter().any(|s| s == secret) {
        // Rotated credentials: the newest few are what can still be echoed.
        if known.len() >= 16 {
            known.remove(0);
        }
        known.push(secret.to_owned());
    }
}

/// Server text kept in an error message: enough to diagnose, not a 64 MiB body on stderr.
pub(crate) const MAX_SERVER_TEXT: usize = 1024;

/// Where a secret's value follows in server or library text: a session token echoed in a
/// SignatureDoesNotMatch body's canonical request, presigned-URL query values, signatures.
const SECRET_MARKERS: &[&str] = &[
    "x-amz-security-token:",
    "x-amz-security-token=",
    "x-amz-signature=",
    "x-amz-credential=",
    "signature=",
    "<signatureprovided>",
    "<stringtosignbytes>",
];

/// `text` made safe for a message: the value after each secret marker replaced by `***`
/// (case-insensitively, up to the next space, `&`, `<`, `,`, `"` or line end) and at most
/// `MAX_SERVER_TEXT` bytes kept. Every error built from server or library text passes here,
/// so no backend can forget it.
pub fn scrub(text: &str) -> String {
    let known = KNOWN_SECRETS.read().unwrap_or_else(|p| p.into_inner());
    // Only what can be kept is scrubbed (a 64 KiB body of markers once took 0.4 s of CPU):
    // the part kept, and enough after it that a known secret across the cut is still
    // recognised whole, never kept in part.
    let longest = known.iter().map(String::len).max().unwrap_or(0);
    let window = floor_char_boundary(text, MAX_SERVER_TEXT + longest + 64);
    let beyond = text.len() - window;
    let text = &text[..window];
    let mut owned = None;
    for secret in known.iter() {
        let current: &str = owned.as_deref().unwrap_or(text);
        if current.contains(secret.as_str()) {
            owned = Some(current.replace(secret.as_str(), "***"));
        }
    }
    drop(known);
    let text = owned.as_deref().unwrap_or(text);
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len().min(MAX_SERVER_TEXT + 32));
    // Each marker's next place at or after `i`, searched again only once `i` passes it: one
    // scan of the text per marker in all.
    let find = |m: &str, from: usize| lower[from..].find(m).map(|at| from + at);
    let mut next: Vec<Option<usize>> = SECRET_MARKERS.iter().map(|m| find(m, 0)).collect();
    let mut i = 0;
    while i < text.len() {
        for (m, at) in SECRET_MARKERS.iter().zip(next.iter_mut()) {
            if at.is_some_and(|a| a < i) {
                *at = find(m, i);
            }
        }
        let Some((at, len)) = next
            .iter()
            .zip(SECRET_MARKERS)
            .filter_map(|(at, m)| at.map(|a| (a, m.len())))
            .min()
        else {
            out.push_str(&text[i..]);
            break;
        };
        let value_start = at + len;
        let value_end = text[value_start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '&' | '<' | ',' | '"'))
            .map_or(text.len(), |n| value_start + n);
        out.push_str(&text[i..value_start]);
        if value_end > value_start {
            out.push_str("***");
        }
        i = value_end;
    }
    if out.len() > MAX_SERVER_TEXT || beyond > 0 {
        let cut = floor_char_boundary(&out, MAX_SERVER_TEXT);
        let dropped = out.len() - cut + beyond;
        out.truncate(cut);
        out.push_str(&format!("... ({dropped} more bytes)"));
    }
    out
}

/// The largest char boundary of `s` at or below `at` (`s.len()` when `at` is past it).
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn http_status(status: u16) -> String {
    if status == 0 {
        String::new()
    } else {
        format!("HTTP {status} ")
    }
}

/// An error and every error below it: `source()`, and the payload of an `io::Error` (whose
/// `source()` skips it). For classifying by type (`downcast_ref`), never by text.
pub fn sources<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => io
            .get_ref()
            .map(|inner| inner as &(dyn std::error::Error + 'static)),
        None => e.source(),
    })
}

/// The first error of type `T` in `err`'s chain (see `sources`).
pub fn find_source<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    sources(err).find_map(|e| e.downcast_ref::<T>())
}

/// Renders an error with its whole `source()` chain on one line: transport errors from
/// hyper say little at the top ("error sending request") and the cause below.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}

/// Whether an HTTP status is a redirect a request may follow with its method and body (not
/// 303, which asks for a GET instead; 304 Not Modified answers a conditional request).
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 307 | 308)
}

/// A redirect as a store answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// 301, 302, 307 or 308.
    pub status: u16,
    /// The `Location` header, resolved against the request's URL (scrubbed of secrets).
    pub location: Option<String>,
    /// The `x-amz-bucket-region` header.
    pub region: Option<String>,
}

impl Moved {
    /// A 301 or 308: the bucket lives there from now on.
    pub fn is_permanent(&self) -> bool {
        matches!(self.status, 301 | 308)
    }

    /// The error a wire returns for a redirect reply about `subject`, with its `Location`
    /// (resolved against `base`, the request's URL, when the wire knows it) and
    /// `x-amz-bucket-region` headers.
    pub fn error(
        subject: &str,
        status: u16,
        base: Option<&url::Url>,
        location: Option<&str>,
        region: Option<&str>,
    ) -> Error {
        let location = location.map(|l| {
            let resolved = base
                .and_then(|b| b.join(l).ok())
                .map_or_else(|| l.to_owned(), String::from);
            scrub(&resolved)
        });
        Error::Redirect {
            uri: subject.to_owned(),
            moved: Moved {
                status,
                location,
                region: region.map(crate::error::scrub),
            },
            refused: None,
        }
    }
}

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {} redirect", self.status)?;
        match (&self.location, &self.region) {
            (Some(l), Some(r)) => write!(f, " to {l} (region {r})"),
            (Some(l), None) => write!(f, " to {l}"),
            (None, Some(r)) => write!(f, " to region {r}"),
            (None, None) => f.write_str(" with neither Location nor x-amz-bucket-region"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_classification_and_labels_carry_no_uri() {
        let uri = "s3://bucket/secret-path/key";
        let cases = [
            (
                Error::from_service(uri, 404, "NoSuchKey", "", None),
                ErrorKind::NotFound,
                "NotFound NoSuchKey",
            ),
            (
                Error::from_service(uri, 403, "AccessDenied", "", None),
                ErrorKind::PermissionDenied,
                "PermissionDenied 403 AccessDenied",
            ),
            (
                Error::from_service(uri, 503, "SlowDown", "", None),
                ErrorKind::Service,
                "HTTP 503 SlowDown",
            ),
            (
                Error::transport(uri, "reset"),
                ErrorKind::Transport,
                "Transport",
            ),
            (
                Error::integrity(uri, "short"),
                ErrorKind::Integrity,
                "Integrity",
            ),
            (
                Error::config("SLUICE_X", "bad"),
                ErrorKind::InvalidInput,
                "InvalidConfig",
            ),
        ];
        for (e, kind, label) in cases {
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(e.kind_label(), label);
            assert!(!e.kind_label().contains("secret-path"));
        }
    }

    #[test]
    fn sources_reach_the_payload_of_an_io_error() {
        #[derive(Debug)]
        struct Deadline;
        impl std::fmt::Display for Deadline {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("deadline has elapsed")
            }
        }
        impl std::error::Error for Deadline {}
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, Deadline);
        let top = Error::Transport {
            uri: "s3://b/k".into(),
            message: "connect".into(),
            source: Some(Box::new(io)),
        };
        let kinds: Vec<_> = sources(&top)
            .filter_map(|e| e.downcast_ref::<std::io::Error>().map(|io| io.kind()))
            .collect();
        assert_eq!(kinds, [std::io::ErrorKind::TimedOut]);
        assert!(find_source::<Deadline>(&top).is_some());
        assert!(find_source::<std::fmt::Error>(&top).is_none());
    }

    #[test]
    fn classification_follows_status_and_code() {
        let svc = |status, code: &str| Error::from_service("s3://b/k", status, code, "m", None);
        assert!(matches!(svc(404, "NoSuchKey"), Error::NotFound { .. }));
        assert!(matches!(
            svc(403, "SignatureDoesNotMatch"),
            Error::PermissionDenied { .. }
        ));
        assert!(svc(503, "SlowDown").is_retryable());
        assert!(svc(500, "InternalError").is_retryable());
        assert!(svc(429, "TooManyRequests").is_retryable());
        assert!(svc(400, "RequestTimeout").is_retryable());
        assert!(!svc(416, "InvalidRange").is_retryable());
        assert!(!svc(412, "PreconditionFailed").is_retryable());
        assert!(svc(412, "PreconditionFailed").is_precondition_failed());
        assert!(svc(409, "ConditionalRequestConflict").is_retryable());
        assert!(!svc(403, "AccessDenied").is_retryable());
        assert!(Error::transport("s3://b/k", "connection reset").is_retryable());
        assert!(!Error::integrity("s3://b/k", "short").is_retryable());
    }

    #[test]
    fn registered_secrets_are_scrubbed_wherever_they_appear() {
        register_secret("short");
        register_secret("a-registered-secret/value+0123");
        let e = Error::from_service(
            "s3://b/k",
            403,
            "SignatureDoesNotMatch",
            "echo: a-registered-secret/value+0123 and short",
            None,
        );
        assert_eq!(
            e.to_string(),
            "s3://b/k: permission denied: HTTP 403 SignatureDoesNotMatch: echo: *** and short"
        );
    }

    #[test]
    fn secrets_are_scrubbed_and_server_text_is_bounded() {
        // SignatureDoesNotMatch echoes the canonical request, session token included.
        let body = "The request signature we calculated does not match. <CanonicalRequest>GET\n/b/k\n\nhost:s3\nx-amz-security-token:FwoGZXIvYXdzEXAMPLETOKEN\n</CanonicalRequest><SignatureProvided>abc123def</SignatureProvided>";
        let e = Error::from_service("s3://b/k", 403, "SignatureDoesNotMatch", body, None);
        let msg = e.to_string();
        assert!(
            !msg.contains("FwoGZXIvYXdzEXAMPLETOKEN") && !msg.contains("abc123def"),
            "{msg}"
        );
        assert!(
            msg.contains("x-amz-security-token:***") && msg.contains("SignatureDoesNotMatch"),
            "{msg}"
        );
        let t = Error::transport(
            "s3://b/k",
            "GET https://h/b/k?X-Amz-Credential=AKIA%2F20260101&X-Amz-Signature=deadbeef&x=1 failed",
        );
        let msg = t.to_string();
        assert!(
            !msg.contains("AKIA") && !msg.contains("deadbeef") && msg.contains("x=1"),
            "{msg}"
        );
        let huge =
            Error::from_service("s3://b/k", 500, "InternalError", "x".repeat(64 << 20), None);
        assert!(huge.to_string().len() < 2 * MAX_SERVER_TEXT, "bounded");
        assert!(huge.to_string().contains("more bytes"));
        assert_eq!(scrub("plain text, no secrets"), "plain text, no secrets");
    }

    proptest::proptest! {
        #[test]
        fn scrub_never_panics_and_stays_bounded(s in "\\PC{0,3000}") {
            let out = scrub(&s);
            proptest::prop_assert!(out.len() <= MAX_SERVER_TEXT + 40);
        }
    }

    /// A body of markers, each followed by an empty value, is scrubbed in one pass over the
    /// part kept (it was quadratic in the whole body: 0.4 s of CPU for 64 KiB, hours for 4 MiB).
    #[test]
    fn scrubbing_a_body_of_markers_ends() {
        let body = "signature=&".repeat(400_000);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(scrub(&body)).unwrap());
        let out = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("scrub of a 4.4 MB body should end");
        assert!(out.starts_with("signature=&signature=&"), "{out}");
        assert!(
            out.ends_with(" more bytes)") && out.len() <= MAX_SERVER_TEXT + 40,
            "{out}"
        );
    }

    #[test]
    fn messages_name_the_subject_and_code() {
        let e = Error::from_service(
            "s3://b/k",
            503,
            "SlowDown",
            "Please reduce",
            Some("r1".into()),
        );
        let s = e.to_string();
        assert!(
            s.contains("s3://b/k")
                && s.contains("503")
                && s.contains("SlowDown")
                && s.contains("r1"),
            "{s}"
        );
        assert_eq!(e.subject(), "s3://b/k");
    }
}
