//! The conformance suite every backend runs against this server, over http and https.
//!
//! A backend's test file calls [`crate::conformance_suite!`] with a constructor
//! `fn(StoreConfig) -> sluice_core::Result<Arc<dyn ObjectStore>>`; the macro expands one
//! `#[tokio::test]` per case and scheme. Object bytes come from `sluice_testdata::pattern`, so
//! every byte read is checked. Every operation runs under a deadline: a hang fails the test.

use crate::{DEFAULT_BUCKET, Fault, ServerOptions, TestServer};
use bytes::Bytes;
use futures::TryStreamExt;
use sluice_core::ObjectStoreExt;
use sluice_core::{
    ByteRange, CredentialsCache, Error, ListEntry, ObjectStore, ObjectUri, RetryPolicy, Segment,
    StoreConfig, Timeouts,
};
use sluice_testdata::pattern;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::catalogue_runner::MakeStore;

/// Which of the test server's listeners a case talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain http.
    Http,
    /// TLS, with the server's CA trusted.
    Https,
}

/// Timeouts short enough that the stall cases finish quickly, long enough for a debug build.
pub fn test_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(10),
        stall: Duration::from_millis(1500),
    }
}

/// Retries that recover from every injected burst in well under a second.
pub fn test_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 6,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
    }
}

/// A configuration pointing at `server` over `scheme`, with its credentials and CA.
pub fn config_for(server: &TestServer, scheme: Scheme) -> StoreConfig {
    let endpoint = match scheme {
        Scheme::Http => server.http_endpoint(),
        Scheme::Https => server.https_endpoint(),
    };
    let mut cfg = StoreConfig::new(
        Some(endpoint.parse().expect("server endpoint is a URL")),
        "us-east-1",
        CredentialsCache::from_static(server.access_key(), server.secret_key(), None),
    );
    cfg.ca_bundle = Some(server.ca_bundle().to_owned());
    cfg.timeouts = test_timeouts();
    cfg.retry = test_retry();
    cfg
}

/// Puts an object into an external store by another way than the store under test (for an
/// emulator that lacks the PUT the store sends): bucket, key, bytes.
pub type Seeder = fn(String, String, Bytes) -> futures::future::BoxFuture<'static, ()>;

/// A store the suite did not start: its endpoints, bucket and credentials (for S3; Azure's
/// and GCS's come from their clouds' environment). Each test works under a prefix of its
/// own, so runs and cases never see each other's keys.
#[derive(Debug, Clone)]
pub struct External {
    /// Whose store: `s3://`, `az://` or `gs://`.
    pub scheme: sluice_core::Scheme,
    /// How objects are seeded when not through the store under test.
    pub seeder: Option<Seeder>,
    /// Its endpoints (one per node; a spread case uses them all).
    pub endpoints: Vec<url::Url>,
    /// A bucket that exists.
    pub bucket: String,
    /// The region it signs for.
    pub region: String,
    /// The access key id.
    pub access_key: String,
    /// The secret key.
    pub secret_key: String,
}

impl External {
    /// The store named by `SLUICE_GARAGE_ENDPOINTS` (comma-separated), `SLUICE_GARAGE_BUCKET`,
    /// `SLUICE_GARAGE_REGION`, `SLUICE_GARAGE_ACCESS_KEY_ID` and
    /// `SLUICE_GARAGE_SECRET_ACCESS_KEY`, as `scripts/garage start` writes them (not the AWS
    /// variables, which other tests read); panics naming what is missing.
    pub fn garage_from_env() -> Self {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!("{name} is not set: start a cluster with scripts/garage start and source target/garage/env (scripts/test and scripts/test-garage do both)")
            })
        };
        Self {
            scheme: sluice_core::Scheme::S3,
            seeder: None,
            endpoints: var("SLUICE_GARAGE_ENDPOINTS")
                .split(',')
                .map(|u| u.parse().expect("SLUICE_GARAGE_ENDPOINTS holds URLs"))
                .collect(),
            bucket: var("SLUICE_GARAGE_BUCKET"),
            region: var("SLUICE_GARAGE_REGION"),
            access_key: var("SLUICE_GARAGE_ACCESS_KEY_ID"),
            secret_key: var("SLUICE_GARAGE_SECRET_ACCESS_KEY"),
        }
    }

    /// Container or bucket `bucket` of Azure's or GCS's store (`scheme`), configured by that
    /// cloud's environment (`scripts/emulators start` writes it), seeded by `seeder` if given.
    pub fn cloud(scheme: sluice_core::Scheme, bucket: &str, seeder: Option<Seeder>) -> Self {
        Self {
            scheme,
            seeder,
            endpoints: Vec::new(),
            bucket: bucket.to_owned(),
            region: String::new(),
            access_key: String::new(),
            secret_key: String::new(),
        }
    }

    /// A configuration for the first endpoint only (`spread = false`) or for all of them
    /// (for Azure and GCS, the policy alone).
    pub fn config(&self, spread: bool) -> StoreConfig {
        if self.scheme != sluice_core::Scheme::S3 {
            let mut cfg = StoreConfig::new(None, "us-east-1", CredentialsCache::anonymous());
            cfg.timeouts = test_timeouts();
            cfg.retry = test_retry();
            return cfg;
        }
        let mut cfg = StoreConfig::new(
            Some(self.endpoints[0].clone()),
            self.region.clone(),
            CredentialsCache::from_static(&self.access_key, &self.secret_key, None),
        );
        if spread {
            cfg.endpoints = self.endpoints.clone();
        }
        cfg.timeouts = test_timeouts();
        cfg.retry = test_retry();
        cfg
    }
}

/// Where a test's objects live.
#[derive(Debug)]
pub enum Target {
    /// A fresh test server of ours, which can inject faults.
    Local(TestServer),
    /// Another store, under a prefix of this test's own (see `External`).
    External {
        /// The store.
        store: External,
        /// Whether the client spreads over all its endpoints.
        spread: bool,
        /// A prefix of this run's own, so runs do not see each other's keys.
        prefix: String,
    },
}

/// One test's world: where its objects live and a store built by the backend under test.
#[derive(Debug)]
pub struct Ctx {
    /// What the case talks to.
    pub target: Target,
    /// The store under test, built by `make`.
    pub store: Arc<dyn ObjectStore>,
    /// The listener used.
    pub scheme: Scheme,
    /// Builds further stores (with other settings) the way `store` was built.
    pub make: MakeStore,
}

impl Ctx {
    /// A context for one case against a fresh test server, with a store built by `make` over
    /// `scheme`.
    pub async fn new(make: MakeStore, scheme: Scheme) -> Self {
        let server = TestServer::start(ServerOptions::default())
            .await
            .expect("test server starts");
        let store = make(config_for(&server, scheme)).expect("backend builds from a valid config");
        Self {
            target: Target::Local(server),
            store,
            scheme,
            make,
        }
    }

    /// A context on `store` (through every endpoint when `spread`), under a fresh prefix
    /// named after `case`.
    pub fn external(make: MakeStore, store: External, spread: bool, case: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos();
        let prefix = format!("conformance/{case}-{}-{nanos}/", std::process::id());
        let built = make(store.config(spread)).expect("backend builds from a valid config");
        Self {
            target: Target::External {
                store,
                spread,
                prefix,
            },
            store: built,
            scheme: Scheme::Http,
            make,
        }
    }

    /// The test server, for the cases that inject faults or look inside it.
    pub fn server(&self) -> &TestServer {
        match &self.target {
            Target::Local(s) => s,
            Target::External { .. } => panic!("this case needs sluice's own test server"),
        }
    }

    /// The configuration the context's store was built from, to build variations of it.
    pub fn config(&self) -> StoreConfig {
        match &self.target {
            Target::Local(s) => config_for(s, self.scheme),
            Target::External { store, spread, .. } => store.config(*spread),
        }
    }

    /// The access key of the context's credentials.
    pub fn access_key(&self) -> &str {
        match &self.target {
            Target::Local(s) => s.access_key(),
            Target::External { store, .. } => &store.access_key,
        }
    }

    /// The URI of `key` in this case's bucket, under its prefix.
    pub fn uri(&self, key: &str) -> ObjectUri {
        match &self.target {
            Target::Local(_) => ObjectUri::new(DEFAULT_BUCKET, key).unwrap(),
            Target::External { store, prefix, .. } => ObjectUri::parse(&format!(
                "{}{}/{prefix}{key}",
                store.scheme.prefix(),
                store.bucket
            ))
            .unwrap(),
        }
    }

    /// Puts `len` pattern bytes (generated from `key`) under `key`: straight into our server,
    /// or with a PUT into another store.
    pub async fn seed(&self, key: &str, len: usize) -> Bytes {
        let data = Bytes::from(pattern::generate(key, len));
        self.seed_bytes(key, data.clone()).await;
        data
    }

    async fn seed_bytes(&self, key: &str, data: Bytes) {
        match &self.target {
            Target::Local(s) => s.insert(DEFAULT_BUCKET, key, data),
            Target::External {
                store: External {
                    seeder: Some(seed), ..
                },
                ..
            } => {
                let uri = self.uri(key);
                within(
                    "seed",
                    seed(uri.bucket().to_owned(), uri.key().to_owned(), data),
                )
                .await;
            }
            Target::External { .. } => {
                within("seed", self.store.put(&self.uri(key), data.into()))
                    .await
                    .unwrap_or_else(|e| panic!("seeding {key}: {e}"));
            }
        }
    }

    /// Seeds every key of `keys` with `data`, 32 at a time.
    pub async fn seed_all(&self, keys: impl IntoIterator<Item = String>, data: Bytes) {
        use futures::StreamExt;
        futures::stream::iter(keys)
            .for_each_concurrent(32, |k| {
                let data = data.clone();
                async move { self.seed_bytes(&k, data).await }
            })
            .await;
    }
}

/// Every operation of the suite runs under this deadline.
const DEADLINE: Duration = Duration::from_secs(60);

/// Awaits `f`, failing the case (naming `what`) if it takes longer than the suite's limit: a hang is a failure, not a stuck run.
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {DEADLINE:?} (a hang)"),
    }
}

fn assert_pattern(key: &str, offset: u64, data: &[u8]) {
    if let Err(at) = pattern::verify(key, offset, data) {
        panic!("{key}: wrong byte at offset {at}");
    }
}

/// Objects of 0 bytes, 1 byte, 5 MiB and 64 MiB written and read back byte for byte, and
/// HEAD's size and ETag for each.
pub async fn round_trip_sizes(ctx: Ctx) {
    for (key, len) in [
        ("empty", 0usize),
        ("one", 1),
        ("five-mib", 5 << 20),
        ("sixty-four-mib", 64 << 20),
    ] {
        let uri = ctx.uri(key);
        let data = Bytes::from(pattern::generate(key, len));
        within("put", ctx.store.put(&uri, data.into()))
            .await
            .unwrap_or_else(|e| panic!("put {key}: {e}"));
        let got = within("get", ctx.store.get(&uri, None))
            .await
            .unwrap_or_else(|e| panic!("get {key}: {e}"));
        assert_eq!(got.len(), len, "{key}");
        assert_pattern(key, 0, &got);
        let meta = within("head", ctx.store.head(&uri)).await.unwrap();
        assert_eq!(meta.size, len as u64, "{key}");
        assert!(meta.etag.is_some(), "{key}: HEAD gives an ETag");
        assert_eq!(meta.uri, uri);
    }
}

/// A read into a fixed-length segment fills it exactly; a segment of the wrong length is an
/// `Integrity` error, for a counting segment too.
pub async fn get_into_fixed_segment(ctx: Ctx) {
    let data = ctx.seed("fixed", 3 << 20).await;
    let uri = ctx.uri("fixed");
    let mut seg = Segment::exact(data.len());
    let info = within("get_into", ctx.store.get_into(&uri, None, &mut seg))
        .await
        .unwrap();
    assert_eq!(info.bytes, data.len() as u64);
    assert_eq!(info.object_size, Some(data.len() as u64));
    assert_eq!(seg.freeze().unwrap(), data);

    // A segment of the wrong size is an integrity error, never a silent short or long read.
    let mut small = Segment::exact(data.len() - 1);
    let err = within("get_into short", ctx.store.get_into(&uri, None, &mut small))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Integrity { .. }), "{err}");

    // A counting segment (a reader that discards the bytes, as `sluice get` without `-o`)
    // is held to the same length, and keeps nothing.
    let mut counted = Segment::counting(data.len());
    let info = within(
        "get_into counting",
        ctx.store.get_into(&uri, None, &mut counted),
    )
    .await
    .unwrap();
    assert_eq!(info.bytes, data.len() as u64);
    assert!(counted.is_complete(), "{} bytes counted", counted.written());
    assert_eq!(counted.as_slice(), None);
    let mut long = Segment::counting(data.len() + 1);
    let err = within(
        "get_into counting long",
        ctx.store.get_into(&uri, None, &mut long),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Integrity { .. }), "{err}");
}

/// Ranged reads (the first byte, the last, a middle range, an open end) give the right bytes
/// and the object's size; a range that starts past the end is `416 InvalidRange`.
pub async fn ranged_reads(ctx: Ctx) {
    let len = 1_000_003u64;
    ctx.seed("ranged", len as usize).await;
    let uri = ctx.uri("ranged");
    for r in [
        ByteRange::new(0, 1).unwrap(),
        ByteRange::new(len - 1, len).unwrap(),
        ByteRange::new(4096, 700_001).unwrap(),
        ByteRange::from_offset(999_000),
    ] {
        let got = within("ranged get", ctx.store.get(&uri, Some(r)))
            .await
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        let want = r.end().unwrap_or(len) - r.start();
        assert_eq!(got.len() as u64, want, "{r}");
        assert_pattern("ranged", r.start(), &got);

        let mut seg = Segment::exact(want as usize);
        let info = within(
            "ranged get_into",
            ctx.store.get_into(&uri, Some(r), &mut seg),
        )
        .await
        .unwrap();
        assert_eq!(
            info.object_size,
            Some(len),
            "{r}: the object's size comes from Content-Range"
        );
        assert_pattern("ranged", r.start(), seg.as_slice().expect("a kept segment"));
    }
    let err = within(
        "past the end",
        ctx.store
            .get(&uri, Some(ByteRange::new(len, len + 10).unwrap())),
    )
    .await
    .unwrap_err();
    match &err {
        Error::Service {
            status: 416, code, ..
        } => assert_eq!(code, "InvalidRange"),
        other => panic!("past-the-end range: want 416 InvalidRange, got {other}"),
    }
    assert!(err.to_string().contains(&uri.to_string()), "{err}");
}

/// HEAD reports the size; a missing key (HEAD and GET) and a missing bucket are `NotFound`,
/// naming the URI.
pub async fn head_and_not_found(ctx: Ctx) {
    ctx.seed("present", 1234).await;
    let meta = within("head", ctx.store.head(&ctx.uri("present")))
        .await
        .unwrap();
    assert_eq!(meta.size, 1234);
    let missing = ctx.uri("absent/key.npz");
    let named = missing.to_string();
    for err in [
        within("head missing", ctx.store.head(&missing))
            .await
            .unwrap_err(),
        within("get missing", ctx.store.get(&missing, None))
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        assert!(err.to_string().contains(&named), "names the URI: {err}");
    }
    let no_bucket =
        ObjectUri::parse(&format!("{}no-such-bucket/k", missing.scheme().prefix())).unwrap();
    let err = within("get missing bucket", ctx.store.get(&no_bucket, None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// Listing pages through more keys than one page holds and groups by `/` when not recursive.
pub async fn listing_paginates_and_groups(ctx: Ctx) {
    let n = 1_100;
    ctx.seed_all(
        (0..n).map(|i| format!("many/{i:05}")),
        Bytes::from_static(b"x"),
    )
    .await;
    ctx.seed_all(
        ["tree/a/1", "tree/a/2", "tree/b/1", "tree/top"].map(String::from),
        Bytes::from_static(b"yy"),
    )
    .await;
    let key = |u: &ObjectUri| u.key().strip_prefix(ctx.uri("").key()).unwrap().to_owned();
    let all: Vec<ListEntry> = within(
        "list recursive",
        ctx.store.list(&ctx.uri("many/"), true).try_collect(),
    )
    .await
    .unwrap();
    let keys: Vec<String> = all.iter().map(|e| key(e.uri())).collect();
    let want: Vec<String> = (0..n).map(|i| format!("many/{i:05}")).collect();
    assert_eq!(keys, want, "every key once, in order, across pages");
    assert!(
        all.iter()
            .all(|e| matches!(e, ListEntry::Object(m) if m.size == 1))
    );

    let tree: Vec<ListEntry> = within(
        "list delimited",
        ctx.store.list(&ctx.uri("tree/"), false).try_collect(),
    )
    .await
    .unwrap();
    let mut prefixes: Vec<String> = tree
        .iter()
        .filter(|e| matches!(e, ListEntry::Prefix(_)))
        .map(|e| key(e.uri()))
        .collect();
    prefixes.sort();
    let objects: Vec<String> = tree
        .iter()
        .filter(|e| matches!(e, ListEntry::Object(_)))
        .map(|e| key(e.uri()))
        .collect();
    assert_eq!(prefixes, vec!["tree/a/", "tree/b/"]);
    assert_eq!(objects, vec!["tree/top"]);

    let deep: Vec<ListEntry> = within(
        "list tree recursive",
        ctx.store.list(&ctx.uri("tree/"), true).try_collect(),
    )
    .await
    .unwrap();
    assert_eq!(deep.len(), 4);
}

/// A put above the multipart threshold goes up in parts (3 of 5 MiB for 12 MiB), reads back
/// whole and leaves no upload open.
pub async fn multipart_put(ctx: Ctx) {
    let mut cfg = ctx.config();
    cfg.multipart_threshold = 6 << 20;
    cfg.multipart_part_size = 5 << 20;
    let store = (ctx.make)(cfg).unwrap();
    let len = (12 << 20) + 17;
    let uri = ctx.uri("multi/part.bin");
    let data = Bytes::from(pattern::generate("multi/part.bin", len));
    // (the pattern depends on the name given here, not on the URI's prefix)
    let info = within("multipart put", store.put(&uri, data.into()))
        .await
        .unwrap();
    assert_eq!(info.parts, Some(3), "12 MiB in 5 MiB parts");
    let got = within("get", store.get(&uri, None)).await.unwrap();
    assert_eq!(got.len(), len);
    assert_pattern("multi/part.bin", 0, &got);
    if let Target::Local(server) = &ctx.target {
        assert!(
            server.storage().uploads.lock().unwrap().is_empty(),
            "no upload left open"
        );
    }
}

/// A delete removes the object (a later HEAD is `NotFound`); deleting it again succeeds.
pub async fn delete_removes(ctx: Ctx) {
    let uri = ctx.uri("doomed");
    within(
        "put",
        ctx.store.put(&uri, Bytes::from_static(b"bye").into()),
    )
    .await
    .unwrap();
    within("delete", ctx.store.delete(&uri)).await.unwrap();
    let err = within("head deleted", ctx.store.head(&uri))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    within("delete again", ctx.store.delete(&uri))
        .await
        .expect("deleting a missing key succeeds, as on S3");
}

/// `delete_many` over more keys than one DeleteObjects takes: every object gone, none
/// refused, in two requests (where the server can count them). Against another store, 60
/// keys: Garage (replication 3, three nodes sharing a core in CI) took longer than the tests'
/// 10 s first-byte timeout to delete 1,000; how batches are cut is the same code either way.
pub async fn delete_many_in_batches(ctx: Ctx) {
    let n = match ctx.target {
        Target::Local(_) => 1_001,
        Target::External { .. } => 60,
    };
    let keys: Vec<String> = (0..n).map(|i| format!("batch/{i:05} ü+&<x>")).collect();
    ctx.seed_all(keys.clone(), Bytes::from_static(b"x")).await;
    let uris: Vec<ObjectUri> = keys.iter().map(|k| ctx.uri(k)).collect();
    let before = match &ctx.target {
        Target::Local(s) => Some(s.faults().requests()),
        Target::External { .. } => None,
    };
    let refused = within("delete_many", ctx.store.delete_many(&uris))
        .await
        .unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    if let (Some(before), Target::Local(s)) = (before, &ctx.target) {
        assert_eq!(
            s.faults().requests() - before,
            2,
            "one request per 1,000 keys"
        );
    }
    let list = || async {
        within(
            "list after delete",
            ctx.store
                .list(&ctx.uri("batch/"), true)
                .try_collect::<Vec<ListEntry>>(),
        )
        .await
        .unwrap()
    };
    let mut left = list().await;
    if !left.is_empty() && matches!(ctx.target, Target::External { .. }) {
        // A seeding PUT that timed out on a loaded node and was retried on another can still
        // land after the delete (Garage in CI, three nodes on one core): such late writes
        // are deleted in turn, and then nothing may be left.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let late: Vec<ObjectUri> = list().await.iter().map(|e| e.uri().clone()).collect();
        let refused = within("delete late writes", ctx.store.delete_many(&late))
            .await
            .unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        left = list().await;
    }
    assert!(
        left.is_empty(),
        "{} objects left: {:?}",
        left.len(),
        left.first()
    );
}

/// `copy` makes the copy on the server: same bytes, key escaping, a missing source.
pub async fn copy_on_the_server(ctx: Ctx) {
    let data = ctx.seed("copy/src 1+ü.bin", 1 << 20).await;
    let to = ctx.uri("copy/dst/a b&c.bin");
    let info = within("copy", ctx.store.copy(&ctx.uri("copy/src 1+ü.bin"), &to))
        .await
        .unwrap();
    assert!(info.is_some(), "an S3 store copies on its side");
    assert_eq!(
        within("get copy", ctx.store.get(&to, None)).await.unwrap(),
        data
    );
    let err = within("copy missing", ctx.store.copy(&ctx.uri("copy/none"), &to))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// Wrong credentials are `PermissionDenied` on GET and HEAD, naming the URI.
pub async fn bad_credentials_are_permission_denied(ctx: Ctx) {
    ctx.seed("secret", 10).await;
    let mut cfg = ctx.config();
    cfg.credentials = CredentialsCache::from_static(ctx.access_key(), "not-the-secret", None);
    let store = (ctx.make)(cfg).unwrap();
    let err = within("get with wrong secret", store.get(&ctx.uri("secret"), None))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert!(
        err.to_string().contains(&ctx.uri("secret").to_string()),
        "{err}"
    );
    let err = within("head with wrong secret", store.head(&ctx.uri("secret")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
}

/// The bytes of a faulted read must be exactly right or the read must fail with an error.
async fn read_through_fault(
    ctx: &Ctx,
    key: &str,
    len: usize,
    fault: Fault,
    count: u64,
) -> sluice_core::Result<Bytes> {
    ctx.seed(key, len).await;
    ctx.server().faults().inject(fault, count);
    let got = within(
        &format!("get through {fault:?}"),
        ctx.store.get(&ctx.uri(key), None),
    )
    .await;
    if let Ok(b) = &got {
        assert_eq!(b.len(), len, "{fault:?}");
        assert_pattern(key, 0, b);
    }
    got
}

/// A body reset mid-way is resumed from the byte reached, for a whole object, a range and a
/// counting read alike.
pub async fn recovers_from_reset_mid_body(ctx: Ctx) {
    read_through_fault(&ctx, "reset", 4 << 20, Fault::ResetAfter(1 << 20), 2)
        .await
        .expect("resumed after two resets");
    assert!(ctx.server().faults().fired() >= 2);
    // A ranged read resumes within its range.
    ctx.server().faults().inject(Fault::ResetAfter(100_000), 1);
    let r = ByteRange::new(10, 3_000_000).unwrap();
    let got = within(
        "ranged get through reset",
        ctx.store.get(&ctx.uri("reset"), Some(r)),
    )
    .await
    .unwrap();
    assert_eq!(got.len(), 2_999_990);
    assert_pattern("reset", 10, &got);
    // A counting read resumes where its count stopped: not a byte counted twice.
    ctx.server().faults().inject(Fault::ResetAfter(100_000), 1);
    let fired = ctx.server().faults().fired();
    let mut counted = Segment::counting(2_999_990);
    within(
        "counting get through reset",
        ctx.store.get_into(&ctx.uri("reset"), Some(r), &mut counted),
    )
    .await
    .unwrap();
    assert!(counted.is_complete(), "{} counted", counted.written());
    assert!(ctx.server().faults().fired() > fired, "the reset happened");
}

/// A body cut short of its Content-Length is resumed and reads back whole.
pub async fn recovers_from_truncated_body(ctx: Ctx) {
    read_through_fault(&ctx, "truncated", 3 << 20, Fault::TruncateAfter(777_777), 1)
        .await
        .expect("a short body is re-read");
}

/// A burst of `503 SlowDown` within the retry budget is retried to success (GET and HEAD).
pub async fn recovers_from_slowdown_burst(ctx: Ctx) {
    read_through_fault(&ctx, "throttled", 100_000, Fault::SlowDown, 3)
        .await
        .expect("SlowDown is retried");
    assert_eq!(ctx.server().faults().fired(), 3);
    ctx.server().faults().inject(Fault::SlowDown, 2);
    within(
        "head through SlowDown",
        ctx.store.head(&ctx.uri("throttled")),
    )
    .await
    .expect("HEAD retries too");
}

/// SlowDown on every attempt ends, after the budget, in the `503 SlowDown` service error.
pub async fn slowdown_beyond_budget_is_a_specific_error(ctx: Ctx) {
    let err = read_through_fault(&ctx, "throttled-hard", 1000, Fault::SlowDown, 1000)
        .await
        .unwrap_err();
    match &err {
        Error::Service {
            status: 503, code, ..
        } => assert_eq!(code, "SlowDown"),
        other => panic!("want 503 SlowDown after the budget, got {other}"),
    }
}

/// A body that stalls mid-way is abandoned at the stall timeout and resumed, well before the
/// stall would have ended.
pub async fn recovers_from_stalled_body(ctx: Ctx) {
    // Stall longer than the stall timeout: the read is abandoned and resumed, not waited out.
    let stall = test_timeouts().stall * 20;
    let t = Instant::now();
    read_through_fault(
        &ctx,
        "stalled",
        2 << 20,
        Fault::StallAfter(500_000, stall),
        1,
    )
    .await
    .expect("a stalled body is resumed");
    assert!(
        t.elapsed() < stall,
        "resumed after the stall timeout, not after the stall ({:?})",
        t.elapsed()
    );
}

/// A body that stalls on every attempt ends in a `Timeout` error within a bound, not a hang.
pub async fn stall_on_every_attempt_times_out(ctx: Ctx) {
    let t = Instant::now();
    let err = read_through_fault(
        &ctx,
        "always-stalled",
        1 << 20,
        Fault::StallAfter(1000, Duration::from_secs(120)),
        1000,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(40),
        "bounded by timeouts × attempts: {:?}",
        t.elapsed()
    );
}

/// First-byte latency slows reads but fails none.
pub async fn tolerates_latency(ctx: Ctx) {
    read_through_fault(
        &ctx,
        "slow",
        10_000,
        Fault::Latency(Duration::from_millis(300)),
        2,
    )
    .await
    .expect("latency below the first-byte timeout is fine");
}

/// An endpoint nobody listens on ends in a `Transport` or `Timeout` error, promptly.
pub async fn unreachable_endpoint_fails_fast(ctx: Ctx) {
    // A port nothing listens on: connection refused, retried, then a transport error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = config_at(&ctx, &format!("http://127.0.0.1:{port}"));
    let store = (ctx.make)(cfg).unwrap();
    let err = within("get from nowhere", store.get(&ctx.uri("k"), None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Transport { .. } | Error::Timeout { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&ctx.uri("k").to_string()), "{err}");
}

/// The context's configuration pointed at another endpoint, with two attempts.
fn config_at(ctx: &Ctx, endpoint: &str) -> StoreConfig {
    let mut cfg = ctx.config();
    cfg.endpoint = Some(endpoint.parse().expect("an http URL"));
    cfg.endpoints.clear();
    cfg.retry.max_attempts = 2;
    cfg
}

/// A server that accepts connections and never answers: every call ends with an error
/// within its first-byte timeout (per attempt), never hangs.
pub async fn silent_server_times_out(ctx: Ctx) {
    let silent = crate::hostile::HostileServer::start(Arc::new(|_, _| crate::hostile::Reply::Hang))
        .await
        .unwrap();
    let mut cfg = config_at(&ctx, silent.endpoint());
    cfg.timeouts.first_byte = Duration::from_millis(700);
    let store = (ctx.make)(cfg).unwrap();
    let t = Instant::now();
    let err = within("get from a silent server", store.get(&ctx.uri("k"), None))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Transport { .. } | Error::Timeout { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&ctx.uri("k").to_string()), "{err}");
    let head = within("head on a silent server", store.head(&ctx.uri("k"))).await;
    assert!(head.is_err());
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
}

/// S3's conditional writes through `put_opts` and the streaming writer: `Create` refuses a
/// taken key with a 412 and writes nothing, `Update` needs the current ETag (a missing
/// object is `NotFound`, as S3 answers). A stack that cannot condition a multipart upload
/// refuses it (`NotImplemented`), never writes it unconditionally.
pub async fn conditional_writes(ctx: Ctx) {
    use sluice_core::{PutMode, PutOptions, WriteOptions};
    let uri = ctx.uri("cond/one");
    let put = |data: &'static [u8], mode: PutMode| {
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let store = ctx.store.clone();
        let uri = uri.clone();
        async move { within("conditional put", store.put_opts(&uri, data.into(), &opts)).await }
    };
    let first = put(b"first", PutMode::Create).await.unwrap();
    let taken = put(b"second", PutMode::Create).await.unwrap_err();
    assert!(taken.is_precondition_failed(), "{taken}");
    assert!(taken.to_string().contains("cond/one"), "{taken}");
    let stale = PutMode::Update("\"0123456789abcdef0123456789abcdef\"".into());
    let e = put(b"third", stale).await.unwrap_err();
    assert!(e.is_precondition_failed(), "{e}");
    let got = within("get", ctx.store.get(&uri, None)).await.unwrap();
    assert_eq!(&got[..], b"first", "a refused write changed nothing");
    let etag = first.etag.expect("a PUT answers with its ETag");
    put(b"fourth", PutMode::Update(etag)).await.unwrap();
    let got = within("get", ctx.store.get(&uri, None)).await.unwrap();
    assert_eq!(&got[..], b"fourth");
    let e = within(
        "update of a missing key",
        ctx.store.put_opts(
            &ctx.uri("cond/absent"),
            Bytes::from_static(b"x").into(),
            &PutOptions {
                mode: PutMode::Update("\"0123\"".into()),
                ..PutOptions::default()
            },
        ),
    )
    .await
    .unwrap_err();
    if uri.scheme() == sluice_core::Scheme::Az {
        // Azure's documented answer to If-Match on a blob that does not exist.
        assert!(e.is_precondition_failed(), "{e}");
    } else {
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
    }

    // Multipart: the condition rides on CompleteMultipartUpload.
    let mut opts = WriteOptions::from_config(&ctx.config());
    opts.set_part_size(5 << 20);
    opts.put = PutOptions::create();
    let data = Bytes::from(pattern::generate("cond/multi", (5 << 20) + 7));
    let mut w = within("writer", ctx.store.writer(&uri, opts))
        .await
        .unwrap();
    let written = async {
        w.write(data).await?;
        w.finish().await
    };
    match within("write and finish", written).await {
        Err(e) if e.is_precondition_failed() => {}
        // Refused when the upload is created, before any part is sent.
        Err(Error::Service { status: 501, .. }) if ctx.store.backend() == "objectstore" => {}
        other => panic!("a multipart Create over a taken key: {other:?}"),
    }
    let got = within("get", ctx.store.get(&uri, None)).await.unwrap();
    assert_eq!(
        &got[..],
        b"fourth",
        "the refused upload left the object alone"
    );
}

/// The first half of `attributes_round_trip`, for a store whose multipart uploads take no
/// attributes: a PUT with content headers and user metadata, which HEAD gives back as they
/// were sent. Returns the options it put with.
pub async fn attributes_kept_by_put(ctx: &Ctx) -> sluice_core::PutOptions {
    use sluice_core::{Attributes, PutOptions};
    let mut attributes = Attributes {
        content_type: Some("text/html; charset=utf-8".into()),
        cache_control: Some("max-age=604800".into()),
        content_disposition: Some("attachment; filename=\"test.html\"".into()),
        content_encoding: Some("gzip".into()),
        content_language: Some("en-US".into()),
        ..Attributes::default()
    };
    attributes.metadata.insert("owner".into(), "rank-0".into());
    attributes
        .metadata
        .insert("key_with_spaces".into(), "hello   world".into());
    let opts = PutOptions {
        attributes: attributes.clone(),
        ..PutOptions::default()
    };
    let single = ctx.uri("attrs/single");
    within(
        "put",
        ctx.store
            .put_opts(&single, Bytes::from_static(b"<p>").into(), &opts),
    )
    .await
    .unwrap();
    let head = within("head", ctx.store.head(&single)).await.unwrap();
    assert_eq!(head.attributes, attributes);
    opts
}

/// Content headers and user metadata sent with a PUT or a multipart upload come back on
/// HEAD as they were sent.
pub async fn attributes_round_trip(ctx: Ctx) {
    use sluice_core::WriteOptions;
    let opts = attributes_kept_by_put(&ctx).await;
    let attributes = opts.attributes.clone();
    let multi = ctx.uri("attrs/multi");
    let mut w_opts = WriteOptions::from_config(&ctx.config());
    w_opts.set_part_size(5 << 20);
    w_opts.put = opts;
    let mut w = within("writer", ctx.store.writer(&multi, w_opts))
        .await
        .unwrap();
    within("write", w.write(Bytes::from(vec![7u8; (5 << 20) + 1])))
        .await
        .unwrap();
    within("finish", w.finish()).await.unwrap();
    let head = within("head", ctx.store.head(&multi)).await.unwrap();
    assert_eq!(head.attributes, attributes);
}

/// The cases that need sluice's own test server, and so do not run against another store
/// (`conformance_suite!(@external ...)`): each injects a fault (a reset, a cut or stalled
/// body, a burst of SlowDown, latency) that a real store does not produce on demand, or
/// points the client at an endpoint of our making (a closed port, a silent server).
pub const NEEDS_TEST_SERVER: &[&str] = &[
    "recovers_from_reset_mid_body",
    "recovers_from_truncated_body",
    "recovers_from_slowdown_burst",
    "slowdown_beyond_budget_is_a_specific_error",
    "recovers_from_stalled_body",
    "stall_on_every_attempt_times_out",
    "tolerates_latency",
    "silent_server_times_out",
];

/// The cases another store fails by a gap of its own, each with what it does instead: they
/// run against our server only. (Garage 2.5 as `scripts/garage` builds it.)
pub const NOT_ON_GARAGE: &[(&str, &str)] = &[(
    "conditional_writes",
    "Garage 2.5 ignores If-None-Match and If-Match on PutObject: a second PutMode::Create \
     overwrites the object (200) instead of answering 412",
)];

/// Expands the suite into `#[tokio::test]`s for one backend: `conformance_suite!(make_fn);`
/// against our test server over http and https, with the hostile catalogue; or, against
/// the store `External::garage_from_env` names, `conformance_suite!(@external name, spread,
/// make_fn);` (every case but `NEEDS_TEST_SERVER`'s, through every endpoint when `spread`).
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@scheme http, Http, $make);
        $crate::conformance_suite!(@scheme https, Https, $make);

        /// The bad-input catalogue (`hostile_cases`), over plain http (the answers, not
        /// the transport, are what it tries).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn hostile_catalogue() {
            $crate::catalogue_runner::run_catalogue($make).await;
        }
    };
    (@scheme $modname:ident, $scheme:ident, $make:expr) => {
        mod $modname {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance as c;
            $crate::conformance_suite!(@cases $scheme, $make;
                round_trip_sizes, get_into_fixed_segment, ranged_reads, head_and_not_found,
                listing_paginates_and_groups, multipart_put, delete_removes,
                delete_many_in_batches, copy_on_the_server, conditional_writes,
                attributes_round_trip, bad_credentials_are_permission_denied,
                recovers_from_reset_mid_body,
                recovers_from_truncated_body, recovers_from_slowdown_burst,
                slowdown_beyond_budget_is_a_specific_error, recovers_from_stalled_body,
                stall_on_every_attempt_times_out, tolerates_latency, unreachable_endpoint_fails_fast,
                silent_server_times_out);
        }
    };
    (@external $modname:ident, $spread:expr, $make:expr) => {
        mod $modname {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance as c;
            $crate::conformance_suite!(@external_cases $spread, $make;
                round_trip_sizes, get_into_fixed_segment, ranged_reads, head_and_not_found,
                listing_paginates_and_groups, multipart_put, delete_removes,
                delete_many_in_batches, copy_on_the_server, attributes_round_trip,
                bad_credentials_are_permission_denied, unreachable_endpoint_fails_fast);
        }
    };
    (@external_cases $spread:expr, $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store = c::External::garage_from_env();
                let ctx = c::Ctx::external($make, store, $spread, stringify!($case));
                c::$case(ctx).await;
            }
        )*
    };
    (@cases $scheme:ident, $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let ctx = c::Ctx::new($make, c::Scheme::$scheme).await;
                c::$case(ctx).await;
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    /// Every case of this file is in `conformance_suite!`'s list, so no backend can miss
    /// one that was added here and forgotten there.
    #[test]
    fn every_case_is_in_the_suite() {
        let src = include_str!("conformance.rs");
        let (cases, suite) = src
            .split_once("macro_rules! conformance_suite")
            .expect("the suite macro is in this file");
        let listed = suite
            .split_once("$crate::conformance_suite!(@cases $scheme, $make;")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| list)
            .expect("the suite lists its cases");
        let listed: Vec<&str> = listed.split(',').map(str::trim).collect();
        let defined: Vec<&str> = cases
            .lines()
            .filter_map(|l| l.strip_prefix("pub async fn "))
            .filter(|l| l.contains("(ctx: Ctx)"))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert!(defined.len() >= 15, "found only {defined:?}");
        for case in &defined {
            assert!(
                listed.contains(case),
                "case {case} is not in conformance_suite!"
            );
        }
        assert_eq!(listed.len(), defined.len(), "{listed:?} vs {defined:?}");

        // And each runs against other stores unless it needs our server, and says why.
        let external = suite
            .split_once("@external_cases $spread, $make;")
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(list, _)| list)
            .expect("the external suite lists its cases");
        let external: Vec<&str> = external.split(',').map(str::trim).collect();
        let not_on_garage: Vec<&str> = super::NOT_ON_GARAGE.iter().map(|c| c.0).collect();
        for case in &defined {
            let ours_only = super::NEEDS_TEST_SERVER.contains(case) || not_on_garage.contains(case);
            assert!(
                external.contains(case) != ours_only,
                "case {case} must be either in the external suite, in NEEDS_TEST_SERVER or in NOT_ON_GARAGE"
            );
        }
    }
}
