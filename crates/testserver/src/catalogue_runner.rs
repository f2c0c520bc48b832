//! The bad-input catalogue's runner (`hostile_cases` holds the cases): each case played by a
//! `HostileServer` to a store, and what the store made of it judged. Test code: built with
//! the `conformance` feature only, so the wheel and the CLI do not link it.

use crate::hostile::HostileServer;
use crate::hostile_cases::{
    ACCESS_KEY, BUCKET, Case, Expect, KEY, Op, PREFIX, SECRET_KEY, SESSION_TOKEN, catalogue,
};
use futures::TryStreamExt;
use sluice_core::ObjectStoreExt;
use sluice_core::{
    ByteRange, CredentialsCache, Error, ErrorKind, ListEntry, ObjectStore, ObjectUri, RetryPolicy,
    StoreConfig, Timeouts,
};
use std::sync::Arc;
use std::time::Duration;

/// Builds the store under test from a configuration (a backend's `S3Store::new`, say).
pub type MakeStore = fn(StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>>;

/// Timeouts and retries short enough that the catalogue runs in seconds.
pub fn config(endpoint: &str) -> StoreConfig {
    let mut cfg = StoreConfig::new(
        Some(endpoint.parse().expect("an http URL")),
        "us-east-1",
        CredentialsCache::from_static(ACCESS_KEY, SECRET_KEY, Some(SESSION_TOKEN.to_owned())),
    );
    cfg.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(2),
        stall: Duration::from_secs(1),
    };
    cfg.retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
    };
    cfg
}

/// What an operation came to.
#[derive(Debug)]
pub enum Outcome {
    /// The bytes a read returned.
    Bytes(bytes::Bytes),
    /// The number of entries a listing returned.
    Listed(usize),
    /// This many entries, or an error of one of these kinds.
    ListedOr(usize, &'static [ErrorKind]),
    /// A put or head that succeeded.
    Done,
}

/// The message checks every error passes: no secret, bounded, names what it is about.
pub fn check_message(msg: &str) -> Result<(), String> {
    for secret in [SECRET_KEY, SESSION_TOKEN] {
        if msg.contains(secret) {
            return Err(format!(
                "the message shows a secret ({secret:.12}…): {msg:.300}"
            ));
        }
    }
    let lower = msg.to_ascii_lowercase();
    if lower
        .match_indices("signature=")
        .any(|(at, m)| !lower[at + m.len()..].starts_with("***"))
    {
        return Err(format!("the message shows a signature: {msg:.300}"));
    }
    if msg.len() > 4096 {
        return Err(format!("a {}-byte message: {:.300}", msg.len(), msg));
    }
    if !msg.contains(BUCKET) {
        return Err(format!("the message does not name the object: {msg}"));
    }
    Ok(())
}

/// Judges an outcome against a case's expectation.
pub fn judge(case: &Case, backend: &str, got: &Result<Outcome, Error>) -> Result<(), String> {
    let ok_bytes = |want: &[u8], b: &[u8]| {
        if b == want {
            Ok(())
        } else {
            Err(format!("read {} wrong bytes", b.len()))
        }
    };
    match (case.expect, got) {
        (Expect::Checked(_, unchecked), Ok(_)) if unchecked.contains(&backend) => Ok(()),
        (Expect::Ok(want) | Expect::OkOr(want, _), Ok(Outcome::Bytes(b))) => ok_bytes(want, b),
        (Expect::Listed(n) | Expect::ListedOr(n, _), Ok(Outcome::Listed(m))) if n == *m => Ok(()),
        (Expect::Done, Ok(Outcome::Done)) => Ok(()),
        (
            Expect::Error(kinds)
            | Expect::OkOr(_, kinds)
            | Expect::ListedOr(_, kinds)
            | Expect::Checked(kinds, _),
            Err(e),
        ) => {
            if !kinds.contains(&e.kind()) {
                return Err(format!("expected one of {kinds:?}, got {e}"));
            }
            check_message(&e.to_string())
        }
        (_, Err(e)) => Err(format!("expected {:?}, got the error {e}", case.expect)),
        (_, Ok(o)) => Err(format!("expected {:?}, got {:?}", case.expect, short(o))),
    }
}

fn short(o: &Outcome) -> String {
    match o {
        Outcome::Bytes(b) => format!("{} bytes", b.len()),
        other => format!("{other:?}"),
    }
}

/// Runs `case` against `store` (configured with [`config`] for the server playing it).
pub async fn perform(store: &dyn ObjectStore, op: Op) -> Result<Outcome, Error> {
    let uri = ObjectUri::new(BUCKET, KEY).expect("valid");
    match op {
        Op::Get => store.get(&uri, None).await.map(Outcome::Bytes),
        Op::GetRange(s, e) => {
            let r = ByteRange::new(s, e).expect("valid range");
            store.get(&uri, Some(r)).await.map(Outcome::Bytes)
        }
        Op::Head => store.head(&uri).await.map(|_| Outcome::Done),
        Op::List => {
            let prefix = ObjectUri::new(BUCKET, PREFIX).expect("valid");
            let all: Vec<_> = store.list(&prefix, true).try_collect().await?;
            // The listing with pages in flight (`Dataset::from_prefix`) meets the same
            // answers and must come to the same objects.
            let parallel = sluice_core::list_parallel(store, &prefix, 4).await?;
            let objects = all
                .iter()
                .filter(|e| matches!(e, ListEntry::Object(_)))
                .count();
            if parallel.len() != objects {
                return Err(Error::integrity(
                    prefix.to_string(),
                    format!(
                        "listed {objects} objects page by page, {} in parallel",
                        parallel.len()
                    ),
                ));
            }
            Ok(Outcome::Listed(all.len()))
        }
        Op::Put(n) => store
            .put(&uri, vec![7u8; n].into())
            .await
            .map(|_| Outcome::Done),
    }
}

/// Every case against a store made by `make`; panics with every case that failed.
pub async fn run_catalogue(make: MakeStore) {
    let mut failures = Vec::new();
    for case in catalogue() {
        let server = HostileServer::start(Arc::new(case.script))
            .await
            .expect("hostile server starts");
        let store = make(config(server.endpoint())).expect("store builds");
        let got =
            tokio::time::timeout(Duration::from_secs(30), perform(store.as_ref(), case.op)).await;
        // One line per case (shown with --nocapture): the catalogue table of the notes.
        let summary = match &got {
            Err(_) => "hang".to_owned(),
            Ok(Ok(o)) => format!("ok: {}", short(o)),
            Ok(Err(e)) => e.kind().to_string(),
        };
        println!("CATALOGUE\t{}\t{}\t{summary}", store.backend(), case.name);
        let verdict = match got {
            Err(_) => Err("no answer within 30 s (a hang)".to_owned()),
            Ok(got) => judge(&case, store.backend(), &got),
        };
        if let Err(why) = verdict {
            failures.push(format!("{}: {why}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
