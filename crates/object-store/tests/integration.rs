//! object_store's own reusable suite (`object_store::integration`, its `integration`
//! feature) against the adapter, over real sockets to sluice's test server. Left out, and
//! why: `put_opts` and `copy_if_not_exists` (conditional writes, which sluice does not
//! implement: `NotImplemented`), `put_get_attributes` (object attributes), the
//! `MultipartStore` cases (a lower-level trait the adapter does not offer), and
//! `list_paginated` (a `PaginatedListStore` of its own).

use object_store::integration::*;
use sluice_object_store::SluiceObjectStore;
use sluice_testserver::conformance::{Scheme, config_for};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};

async fn store() -> (TestServer, SluiceObjectStore) {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let inner = sluice::open(Some("hyper"), config_for(&server, Scheme::Http)).unwrap();
    (server, SluiceObjectStore::new(inner, DEFAULT_BUCKET))
}

macro_rules! suite {
    ($($name:ident => |$s:ident| $call:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_server, $s) = store().await;
                $call.await;
            }
        )*
    };
}

suite! {
    put_get_delete_list_ => |s| put_get_delete_list(&s);
    get_opts_ => |s| get_opts(&s);
    stream_get_ => |s| stream_get(&s);
    list_uses_directories_correctly_ => |s| list_uses_directories_correctly(&s);
    list_with_delimiter_ => |s| list_with_delimiter(&s);
    rename_and_copy_ => |s| rename_and_copy(&s);
    copy_rename_nonexistent_object_ => |s| copy_rename_nonexistent_object(&s);
    multipart_out_of_order_ => |s| multipart_out_of_order(&s);
    list_with_offset_exclusivity_ => |s| list_with_offset_exclusivity(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_object_is_not_found_and_unsupported_modes_are_named() {
    use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, path::Path};
    let (_server, s) = store().await;
    let e = s.get(&Path::from("nope")).await.unwrap_err();
    assert!(matches!(e, object_store::Error::NotFound { .. }), "{e}");
    let e = s
        .put_opts(
            &Path::from("x"),
            bytes::Bytes::from_static(b"x").into(),
            PutOptions::from(PutMode::Create),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, object_store::Error::NotImplemented { .. }),
        "{e}"
    );
    assert!(s.to_string().contains("hyper") && s.to_string().contains(DEFAULT_BUCKET));
}

/// A HEAD that claims an object larger than any machine holds: the GET that follows fails
/// with an error naming the size, instead of aborting the process on the allocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_size_is_an_error_not_an_abort() {
    use object_store::{ObjectStoreExt, path::Path};
    use sluice_testserver::hostile::{HostileServer, Reply};
    let huge = (1u64 << 62).to_string();
    let server = HostileServer::start(std::sync::Arc::new(move |_, _| Reply::Send {
        status: 200,
        headers: vec![
            ("Content-Length".into(), huge.clone()),
            ("ETag".into(), "\"e1\"".into()),
            (
                "Last-Modified".into(),
                "Wed, 02 Dec 2026 07:00:00 GMT".into(),
            ),
        ],
        body: Vec::new(),
    }))
    .await
    .unwrap();
    let cfg = sluice_testserver::hostile_cases::config(server.endpoint());
    let s = SluiceObjectStore::new(sluice::open(Some("hyper"), cfg).unwrap(), "bkt");
    let e = s.get(&Path::from("k")).await.unwrap_err();
    assert!(e.to_string().contains(&(1u64 << 62).to_string()), "{e}");
}
