//! `az://` and `gs://` against their clouds' emulators, started by `scripts/emulators`
//! (Azurite, and fake-gcs-server), through the router every user gets
//! (`sluice::registry::open`): the conformance cases that apply to a store that is not S3,
//! and the Loader reading a prefix. The stores are configured as a user's would be, from the
//! variables `scripts/emulators start` writes (`AZURE_STORAGE_CONNECTION_STRING`,
//! `STORAGE_EMULATOR_HOST`).
//!
//! Not run here, and why:
//! - the cases of `NEEDS_TEST_SERVER` (faults injected by our own server);
//! - `bad_credentials_are_permission_denied` and `unreachable_endpoint_fails_fast`: they build
//!   a store with other S3 credentials or endpoint; an Azure or GCS store takes those from
//!   the environment (its refusal without credentials is a unit test of
//!   sluice-backend-objectstore);
//! - on fake-gcs-server, every case that writes through the store (`round_trip_sizes`,
//!   `multipart_put`, `delete_removes`, `copy_on_the_server`, `conditional_writes`,
//!   `attributes_round_trip`): it refuses the XML API's PUT that object_store sends (400
//!   "invalid uploadType": it takes only signed-URL PUTs), so objects are seeded through its
//!   JSON upload API and only reads, listings, HEAD and deletes are checked on it.

use bytes::Bytes;
use futures::future::BoxFuture;
use sluice_core::{ObjectStore, ObjectStoreExt as _, ObjectUri, Result, Scheme, StoreConfig};
use sluice_loader::{Dataset, Loader, LoaderOptions};
use sluice_testdata::pattern;
use sluice_testserver::conformance::{self as c, External, within};
use std::sync::Arc;

fn store(cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    sluice::registry::open(Some("objectstore"), cfg)
}

fn bucket() -> String {
    std::env::var("SLUICE_CLOUD_BUCKET").expect(
        "SLUICE_CLOUD_BUCKET is not set: start the emulators with scripts/emulators start and source target/emulators/env (scripts/test does both)",
    )
}

/// An upload through fake-gcs-server's JSON API (its XML API refuses object_store's PUT).
fn fake_gcs_seed(bucket: String, key: String, data: Bytes) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let base = std::env::var("SLUICE_FAKE_GCS_URL").expect("SLUICE_FAKE_GCS_URL is set");
        let name = utf8_percent_encode(&key, NON_ALPHANUMERIC);
        let url = format!("{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}");
        let r = reqwest::Client::new()
            .post(url)
            .body(data)
            .send()
            .await
            .unwrap_or_else(|e| panic!("seeding gs://{bucket}/{key}: {e}"));
        assert!(
            r.status().is_success(),
            "seeding gs://{bucket}/{key}: {}",
            r.status()
        );
    })
}

fn azure(case: &str) -> c::Ctx {
    c::Ctx::external(
        store,
        External::cloud(Scheme::Az, &bucket(), None),
        false,
        case,
    )
}

fn gcs(case: &str) -> c::Ctx {
    let ext = External::cloud(Scheme::Gs, &bucket(), Some(fake_gcs_seed));
    c::Ctx::external(store, ext, false, case)
}

macro_rules! cases {
    ($modname:ident, $ctx:ident; $($case:ident),*) => {
        mod $modname {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    c::$case($ctx(stringify!($case))).await;
                }
            )*
        }
    };
}

cases!(azurite, azure;
    round_trip_sizes, get_into_fixed_segment, ranged_reads, head_and_not_found,
    listing_paginates_and_groups, multipart_put, delete_removes, delete_many_in_batches,
    copy_on_the_server, conditional_writes);

/// `attributes_round_trip` less its multipart half: object_store's Azure multipart upload
/// takes no attributes, so such a write is refused as unsupported (501, never retried)
/// before a part is sent, where the case expects the attributes kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_attributes_single_put_kept_multipart_refused() {
    use sluice_core::WriteOptions;
    let ctx = azure("attributes");
    let opts = c::attributes_kept_by_put(&ctx).await;

    let mut w_opts = WriteOptions::from_config(&ctx.config());
    w_opts.set_part_size(5 << 20);
    w_opts.put = opts;
    let multi = ctx.uri("attrs/multi");
    let written = async {
        let mut w = ctx.store.writer(&multi, w_opts).await?;
        w.write(Bytes::from(vec![7u8; (5 << 20) + 1])).await?;
        w.finish().await
    };
    let e = within("multipart with attributes", written)
        .await
        .unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    let gone = within("head", ctx.store.head(&multi)).await.unwrap_err();
    assert!(
        matches!(gone, sluice_core::Error::NotFound { .. }),
        "nothing written: {gone}"
    );
}

cases!(fake_gcs, gcs;
    get_into_fixed_segment, ranged_reads, head_and_not_found, listing_paginates_and_groups,
    delete_many_in_batches);

/// The Loader over a listed prefix: every byte of every object, large ones in ranges.
async fn loader_reads_a_prefix(ctx: c::Ctx) {
    let sizes = [0usize, 1, 100_000, 3 << 20, 700_000];
    for (i, len) in sizes.iter().enumerate() {
        ctx.seed(&format!("ds/{i:04}.bin"), *len).await;
    }
    let prefix: ObjectUri = ctx.uri("ds/");
    let ds = within(
        "list",
        Dataset::from_prefix(ctx.store.as_ref(), &prefix, Some(".bin")),
    )
    .await
    .unwrap();
    assert_eq!(ds.len(), sizes.len(), "{prefix}");
    let opts = LoaderOptions {
        prefetch: Some(4),
        range_threshold: 1 << 20,
        chunk_size: Some(256 << 10),
        ..Default::default()
    };
    let mut loader = Loader::new(ctx.store.clone(), &ds, opts).unwrap();
    let mut got = Vec::new();
    while let Some(o) = within("loader next", loader.next()).await {
        let o = o.unwrap_or_else(|e| panic!("{e}"));
        // Seeded with the pattern of its key under the case's prefix.
        let (_, name) = o.uri.key().rsplit_once("/ds/").expect("under the prefix");
        pattern::verify(&format!("ds/{name}"), 0, &o.data)
            .unwrap_or_else(|at| panic!("{}: wrong byte at {at}", o.uri));
        got.push((o.uri.key().to_owned(), o.data.len()));
    }
    got.sort();
    let want: Vec<(String, usize)> = sizes
        .iter()
        .enumerate()
        .map(|(i, len)| (ctx.uri(&format!("ds/{i:04}.bin")).key().to_owned(), *len))
        .collect();
    assert_eq!(got, want);
    // The 3 MiB object came in 256 KiB ranges, the rest in one GET each.
    assert_eq!(loader.stats().requests, 12 + 4, "{:?}", loader.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loader_reads_an_azure_prefix() {
    loader_reads_a_prefix(azure("loader")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loader_reads_a_gcs_prefix() {
    loader_reads_a_prefix(gcs("loader")).await;
}
