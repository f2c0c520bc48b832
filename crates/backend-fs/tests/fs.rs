//! The file system store over real files, for `file://` and `direct://` alike: each case
//! runs once per scheme (the `cases!` macro below), in a fresh directory on the disk of the
//! build (O_DIRECT needs a real file system; tmpfs refuses it).

use bytes::Bytes;
use futures::TryStreamExt;
use sluice_backend_fs::FsStore;
use sluice_core::ObjectStoreExt;
use sluice_core::{
    ByteRange, Error, ListEntry, ObjectStore, ObjectUri, PutPayload, Scheme, Segment,
};
use sluice_testdata::pattern;
use std::path::Path;

struct Ctx {
    dir: tempfile::TempDir,
    store: FsStore,
    scheme: Scheme,
}

impl Ctx {
    fn new(scheme: Scheme) -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let store = match scheme {
            Scheme::Direct => FsStore::direct(),
            _ => FsStore::file(),
        };
        Self { dir, store, scheme }
    }

    fn uri(&self, rel: &str) -> ObjectUri {
        let path = self.dir.path().join(rel);
        ObjectUri::parse(&format!("{}{}", self.scheme.prefix(), path.display())).unwrap()
    }

    /// Writes `len` pattern bytes (named by `rel`) directly to the file `rel`.
    fn seed(&self, rel: &str, len: usize) -> Vec<u8> {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let data = pattern::generate(rel, len);
        std::fs::write(path, &data).unwrap();
        data
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

async fn round_trip_sizes(ctx: Ctx) {
    for (name, len) in [
        ("empty", 0usize),
        ("one", 1),
        ("five-mib-minus-one", (5 << 20) - 1),
        ("five-mib-plus-one", (5 << 20) + 1),
        ("twenty-mib", 20 << 20),
    ] {
        let uri = ctx.uri(&format!("rt/{name}"));
        let data = Bytes::from(pattern::generate(name, len));
        let info = ctx.store.put(&uri, PutPayload(data.clone())).await.unwrap();
        assert!(info.etag.is_some());
        let got = ctx.store.get(&uri, None).await.unwrap();
        assert_eq!(got.len(), len, "{name}");
        assert!(got == data, "{name}: bytes differ");
        assert_eq!(ctx.store.head(&uri).await.unwrap().size, len as u64);
    }
    // Atomic puts leave no temporary files behind.
    assert_eq!(
        files_in(&ctx.dir.path().join("rt")),
        [
            "empty",
            "five-mib-minus-one",
            "five-mib-plus-one",
            "one",
            "twenty-mib"
        ]
    );
}

async fn ranged_reads_any_alignment(ctx: Ctx) {
    let len = (9 << 20) + 123;
    let data = ctx.seed("r/obj", len);
    let uri = ctx.uri("r/obj");
    for (start, end) in [
        (0u64, 1u64),
        (1, 4095),
        (4095, 4097),
        (4096, 8192),
        (1000, (4 << 20) + 17),
        ((8 << 20) + 5, len as u64),
        (len as u64 - 1, len as u64 + 100), // clipped at the end, as S3 does
    ] {
        let got = ctx
            .store
            .get(&uri, Some(ByteRange::new(start, end).unwrap()))
            .await
            .unwrap();
        let want = &data[start as usize..(end as usize).min(len)];
        assert!(got == want, "{start}..{end}: bytes differ");
    }
    let tail = ctx
        .store
        .get(&uri, Some(ByteRange::from_offset(len as u64 - 10)))
        .await
        .unwrap();
    assert!(tail == data[len - 10..]);
    // Into a fixed segment, as the loader reads parallel ranges.
    let mut seg = Segment::exact(5000);
    let info = ctx
        .store
        .get_into(&uri, Some(ByteRange::with_len(7, 5000).unwrap()), &mut seg)
        .await
        .unwrap();
    assert_eq!((info.bytes, info.object_size), (5000, Some(len as u64)));
    assert!(seg.freeze().unwrap() == data[7..5007]);
}

async fn range_past_the_end_is_invalid_range(ctx: Ctx) {
    ctx.seed("p/small", 100);
    let err = ctx
        .store
        .get(&ctx.uri("p/small"), Some(ByteRange::from_offset(100)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Service { status: 416, code, .. } if code == "InvalidRange"),
        "{err}"
    );
    assert!(err.to_string().contains("p/small"), "{err}");
}

async fn missing_files_and_directories_are_not_found(ctx: Ctx) {
    ctx.seed("d/sub/x", 3);
    for rel in ["d/nope", "d/sub"] {
        let uri = ctx.uri(rel);
        let err = ctx.store.head(&uri).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{rel}: {err}");
        assert!(err.to_string().contains(rel), "names the path: {err}");
        let err = ctx.store.get(&uri, None).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{rel}: {err}");
    }
}

async fn listing_follows_s3_rules(ctx: Ctx) {
    for rel in [
        "ds/img_1.npz",
        "ds/img_10.npz",
        "ds/img_2.npz",
        "ds/sub/a",
        "ds/sub/deeper/b",
        "other/z",
    ] {
        ctx.seed(rel, 10);
    }
    // A put in progress elsewhere is invisible.
    std::fs::write(ctx.dir.path().join("ds/.img_3.npz.sluice-tmp.1.2"), b"x").unwrap();
    let keys = |entries: Vec<ListEntry>| -> Vec<String> {
        let base = ctx.uri("").key().to_owned();
        entries
            .iter()
            .map(|e| {
                let k = e.uri().key().strip_prefix(&base).unwrap().to_owned();
                match e {
                    ListEntry::Prefix(_) => format!("{k} (prefix)"),
                    ListEntry::Object(m) => {
                        assert_eq!(m.size, 10);
                        k
                    }
                }
            })
            .collect()
    };
    let all: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("ds/"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        keys(all),
        [
            "ds/img_1.npz",
            "ds/img_10.npz",
            "ds/img_2.npz",
            "ds/sub/a",
            "ds/sub/deeper/b"
        ]
    );
    let top: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("ds/"), false)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        keys(top),
        [
            "ds/img_1.npz",
            "ds/img_10.npz",
            "ds/img_2.npz",
            "ds/sub/ (prefix)"
        ]
    );
    let partial: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("ds/img_1"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys(partial), ["ds/img_1.npz", "ds/img_10.npz"]);
    let none: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("absent/"), true)
        .try_collect()
        .await
        .unwrap();
    assert!(none.is_empty());
    // Listed URIs keep the scheme and read back.
    let first = ctx
        .store
        .list(&ctx.uri("ds/"), true)
        .try_next()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.uri().scheme(), ctx.scheme);
    assert_eq!(ctx.store.get(first.uri(), None).await.unwrap().len(), 10);
}

/// A recursive walk (what `sluice rm -r` deletes) never leaves the tree through a link to a
/// directory; a link to a file is the file; naming the link walks through it.
async fn walks_stay_in_the_tree(ctx: Ctx) {
    ctx.seed("tree/own", 4);
    let outside = ctx.seed("elsewhere/victim", 6);
    ctx.seed("target-file", 7);
    std::os::unix::fs::symlink(
        ctx.dir.path().join("elsewhere"),
        ctx.dir.path().join("tree/dirlink"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        ctx.dir.path().join("target-file"),
        ctx.dir.path().join("tree/filelink"),
    )
    .unwrap();
    let keys = |entries: Vec<ListEntry>| -> Vec<String> {
        let base = ctx.uri("").key().to_owned();
        let key = |e: &ListEntry| e.uri().key().strip_prefix(&base).unwrap().to_owned();
        entries.iter().map(key).collect()
    };
    let all: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("tree/"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys(all.clone()), ["tree/filelink", "tree/own"]);
    // What rm -r does: delete every object the walk found.
    for e in &all {
        ctx.store.delete(e.uri()).await.unwrap();
    }
    assert_eq!(
        std::fs::read(ctx.dir.path().join("elsewhere/victim")).unwrap(),
        outside
    );
    assert_eq!(
        std::fs::read(ctx.dir.path().join("target-file"))
            .unwrap()
            .len(),
        7,
        "the link went, not its file"
    );
    assert_eq!(files_in(&ctx.dir.path().join("tree")), ["dirlink"]);
    let top: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("tree/"), false)
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(&top[..], [ListEntry::Prefix(p)] if p.key().ends_with("tree/dirlink/")));
    let through: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("tree/dirlink/"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(keys(through), ["tree/dirlink/victim"]);
}

/// A FIFO is no object: not listed, and a read of it fails at once instead of blocking.
async fn fifos_are_not_objects(ctx: Ctx) {
    ctx.seed("pipes/file", 3);
    let fifo = ctx.dir.path().join("pipes/fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let listed: Vec<ListEntry> = ctx
        .store
        .list(&ctx.uri("pipes/"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let fifo_uri = ctx.uri("pipes/fifo");
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        ctx.store.get(&fifo_uri, None),
    );
    let err = read
        .await
        .expect("a read of a FIFO must not block")
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound { .. }) && err.to_string().contains("regular file"),
        "{err}"
    );
    let err = ctx.store.head(&ctx.uri("pipes/fifo")).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

async fn delete_removes_and_missing_is_fine(ctx: Ctx) {
    ctx.seed("del/x", 5);
    let uri = ctx.uri("del/x");
    ctx.store.delete(&uri).await.unwrap();
    assert!(matches!(
        ctx.store.head(&uri).await,
        Err(Error::NotFound { .. })
    ));
    ctx.store.delete(&uri).await.unwrap();
}

async fn overwrite_replaces_whole(ctx: Ctx) {
    let uri = ctx.uri("ow/obj");
    ctx.store
        .put(&uri, PutPayload::from(vec![1u8; 1000]))
        .await
        .unwrap();
    let before = ctx.store.head(&uri).await.unwrap();
    ctx.store
        .put(&uri, PutPayload::from(vec![2u8; 10]))
        .await
        .unwrap();
    let after = ctx.store.head(&uri).await.unwrap();
    assert_eq!(after.size, 10);
    assert_ne!(before.etag, after.etag, "the version tag changes");
    assert_eq!(ctx.store.get(&uri, None).await.unwrap(), vec![2u8; 10]);
}

async fn put_to_a_directory_path_is_refused(ctx: Ctx) {
    let uri = ctx.uri("dir/");
    let err = ctx
        .store
        .put(&uri, PutPayload::from(vec![1u8]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("dir/"), "{err}");
}

async fn streamed_writes_appear_whole_on_finish(ctx: Ctx) {
    let uri = ctx.uri("w/ckpt.pt");
    let opts = sluice_core::WriteOptions {
        part_size: 5 << 20,
        max_in_flight: 2,
        adaptive: false,
        abort_on_drop: true,
        checksums: false,
        put: Default::default(),
    };
    let mut w = ctx.store.writer(&uri, opts.clone()).await.unwrap();
    let data = pattern::generate("ckpt", 3 << 20);
    for chunk in data.chunks(1 << 20) {
        w.write(Bytes::copy_from_slice(chunk)).await.unwrap();
        assert!(
            matches!(ctx.store.head(&uri).await, Err(Error::NotFound { .. })),
            "invisible before finish"
        );
    }
    let info = w.finish().await.unwrap();
    assert_eq!(info.total_bytes, data.len() as u64);
    assert!(ctx.store.get(&uri, None).await.unwrap() == data);
    assert_eq!(files_in(&ctx.dir.path().join("w")), ["ckpt.pt"]);

    // Aborted and dropped writers leave nothing behind.
    let mut w = ctx
        .store
        .writer(&ctx.uri("w/aborted"), opts.clone())
        .await
        .unwrap();
    w.write(Bytes::from_static(b"partial")).await.unwrap();
    w.abort().await.unwrap();
    let mut w = ctx.store.writer(&ctx.uri("w/dropped"), opts).await.unwrap();
    w.write(Bytes::from_static(b"partial")).await.unwrap();
    drop(w);
    assert_eq!(files_in(&ctx.dir.path().join("w")), ["ckpt.pt"]);
}

/// `PutMode::Create` is a link that fails on a taken name (a 412, as S3 answers), for a put
/// and a streamed write; what a file cannot keep (attributes, an ETag condition) is refused,
/// and nothing is written.
async fn create_only_writes_and_refused_options(ctx: Ctx) {
    use sluice_core::{PutMode, PutOptions, WriteOptions};
    let uri = ctx.uri("c/once");
    let create = PutOptions::create();
    ctx.store
        .put_opts(&uri, Bytes::from_static(b"first").into(), &create)
        .await
        .unwrap();
    let e = ctx
        .store
        .put_opts(&uri, Bytes::from_static(b"second").into(), &create)
        .await
        .unwrap_err();
    assert!(e.is_precondition_failed(), "{e}");
    let opts = WriteOptions {
        part_size: 5 << 20,
        max_in_flight: 1,
        adaptive: false,
        abort_on_drop: true,
        checksums: false,
        put: create,
    };
    let mut w = ctx.store.writer(&uri, opts).await.unwrap();
    w.write(Bytes::from_static(b"third")).await.unwrap();
    let e = w.finish().await.unwrap_err();
    assert!(e.is_precondition_failed(), "{e}");
    assert_eq!(&ctx.store.get(&uri, None).await.unwrap()[..], b"first");
    let mut with_type = PutOptions::default();
    with_type.attributes.content_type = Some("text/plain".into());
    let update = PutOptions {
        mode: PutMode::Update("\"x\"".into()),
        ..PutOptions::default()
    };
    for refused in [with_type, update] {
        let e = ctx
            .store
            .put_opts(
                &ctx.uri("c/other"),
                Bytes::from_static(b"x").into(),
                &refused,
            )
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Service { status: 501, .. }), "{e}");
    }
    assert!(matches!(
        ctx.store.head(&ctx.uri("c/other")).await,
        Err(Error::NotFound { .. })
    ));
    // No temporary file is left beside the object.
    let left: Vec<_> = ctx
        .store
        .list(&ctx.uri("c/"), true)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod file {
            use super::*;
            $(#[tokio::test] async fn $case() { super::$case(Ctx::new(Scheme::File)).await })*
        }
        mod direct {
            use super::*;
            $(#[tokio::test] async fn $case() { super::$case(Ctx::new(Scheme::Direct)).await })*
        }
    };
}

cases!(
    round_trip_sizes,
    ranged_reads_any_alignment,
    range_past_the_end_is_invalid_range,
    missing_files_and_directories_are_not_found,
    listing_follows_s3_rules,
    walks_stay_in_the_tree,
    fifos_are_not_objects,
    delete_removes_and_missing_is_fine,
    overwrite_replaces_whole,
    put_to_a_directory_path_is_refused,
    streamed_writes_appear_whole_on_finish,
    create_only_writes_and_refused_options,
);

#[tokio::test]
async fn direct_on_tmpfs_says_to_use_file() {
    // /dev/shm is tmpfs on Linux, which refuses O_DIRECT.
    let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
        return;
    };
    let path = dir.path().join("x");
    std::fs::write(&path, b"abc").unwrap();
    let uri = ObjectUri::parse(&format!("direct://{}", path.display())).unwrap();
    match FsStore::direct().get(&uri, None).await {
        // Some kernels (6.6+) accept O_DIRECT on tmpfs.
        Ok(b) => assert_eq!(b, &b"abc"[..]),
        Err(e) => assert!(e.to_string().contains("file://"), "{e}"),
    }
}

#[tokio::test]
async fn uris_of_another_scheme_are_refused() {
    let err = FsStore::file()
        .head(&ObjectUri::parse("s3://bucket/k").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUri { .. }), "{err}");
}
