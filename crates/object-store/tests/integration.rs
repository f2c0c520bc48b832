//! object_store's own reusable suite (`object_store::integration`, its `integration`
//! feature) against the adapter on every client stack, over real sockets to sluice's test
//! server: every function of the suite, none left out.

use object_store::integration::*;
use sluice_object_store::SluiceObjectStore;
use sluice_testserver::conformance::{Scheme, config_for};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};

async fn store(backend: &str) -> (TestServer, SluiceObjectStore) {
    let server = TestServer::start(ServerOptions::default()).await.unwrap();
    let inner = sluice::open(Some(backend), config_for(&server, Scheme::Http)).unwrap();
    (server, SluiceObjectStore::new(inner, DEFAULT_BUCKET))
}

macro_rules! suite {
    ($backend:ident: $($name:ident => |$s:ident| $call:expr;)*) => {
        mod $backend {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (_server, $s) = store(stringify!($backend)).await;
                    $call.await;
                }
            )*
        }
    };
}

macro_rules! every_function {
    ($($backend:ident),*) => {
        $(
            suite! { $backend:
                put_get_delete_list_ => |s| put_get_delete_list(&s);
                put_get_attributes_ => |s| put_get_attributes(&s);
                get_opts_ => |s| get_opts(&s);
                put_opts_ => |s| put_opts(&s, true);
                stream_get_ => |s| stream_get(&s);
                list_uses_directories_correctly_ => |s| list_uses_directories_correctly(&s);
                list_with_delimiter_ => |s| list_with_delimiter(&s);
                rename_and_copy_ => |s| rename_and_copy(&s);
                copy_if_not_exists_ => |s| copy_if_not_exists(&s);
                copy_rename_nonexistent_object_ => |s| copy_rename_nonexistent_object(&s);
                multipart_ => |s| multipart(&s, &s);
                multipart_with_opts_ => |s| multipart_with_opts(&s, &s);
                multipart_put_part_out_of_order_ => |s| multipart_put_part_out_of_order(&s, &s);
                multipart_race_condition_ => |s| multipart_race_condition(&s, true);
                multipart_out_of_order_ => |s| multipart_out_of_order(&s);
                list_with_offset_exclusivity_ => |s| list_with_offset_exclusivity(&s);
                list_paginated_ => |s| list_paginated(&s, &s);
            }
        )*
    };
}

every_function!(hyper, awssdk, objectstore);

/// What the adapter refuses it names (`NotImplemented`), and writes nothing: tags, an
/// attribute S3 has no header for here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_object_is_not_found_and_unsupported_options_are_named() {
    use object_store::{
        Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, TagSet, path::Path,
    };
    let (_server, s) = store("hyper").await;
    let e = s.get(&Path::from("nope")).await.unwrap_err();
    assert!(matches!(e, object_store::Error::NotFound { .. }), "{e}");
    let mut tags = TagSet::default();
    tags.push("team", "ml");
    let tagged = PutOptions {
        tags,
        ..PutOptions::default()
    };
    let storage_class = PutOptions {
        attributes: Attributes::from_iter([(Attribute::StorageClass, "GLACIER")]),
        ..PutOptions::default()
    };
    for (opts, named) in [(tagged, "tags"), (storage_class, "StorageClass")] {
        let e = s
            .put_opts(
                &Path::from("x"),
                bytes::Bytes::from_static(b"x").into(),
                opts,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(e, object_store::Error::NotImplemented { .. })
                && e.to_string().contains(named),
            "{e}"
        );
    }
    assert!(
        s.head(&Path::from("x")).await.is_err(),
        "nothing was written"
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
    let cfg = sluice_testserver::catalogue_runner::config(server.endpoint());
    let s = SluiceObjectStore::new(sluice::open(Some("hyper"), cfg).unwrap(), "bkt");
    let e = s.get(&Path::from("k")).await.unwrap_err();
    assert!(e.to_string().contains(&(1u64 << 62).to_string()), "{e}");
}
