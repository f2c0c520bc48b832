//! [`S3Store`]: the one [`ObjectStore`] over any [`Wire`] (request policy: retries, resumption,
//! multipart, paging, the in-flight limit and congestion control), and the limiter that
//! holds each request's permit.

use crate::config::StoreConfig;
use crate::congestion::{Congestion, CongestionStats, Kind};
use crate::error::Result;
use crate::listing::{ListOptions, paginate};
use crate::multipart::{self, MultipartWriter};
use crate::oplog::{OpLog, Outcome, Timer};
use crate::parts_in_flight::PartsWindow;
use crate::put_options::PutOptions;
use crate::resume::get_with_resume;
use crate::retry::retry;
use crate::segment::Segment;
use crate::store::{GetInfo, GetOptions, ListEntry, ObjectStore, PutInfo, PutPayload};
use crate::upload::{ObjectWriter, WriteOptions};
use crate::uri::ObjectUri;
use crate::wire::redirect::Redirects;
use crate::wire::{
    BodySink, GetRequest, GetWire, Operation, Operations, OperationsExt, Reply, Request,
};
use crate::wire::{Wire, WireFromConfig};
use async_trait::async_trait;
use futures::stream::BoxStream;
use std::sync::Arc;

/// An [`ObjectStore`] over any [`Wire`]: the one implementation of request policy. Each
/// operation is retried under the configuration's `retry` policy; GETs are resumed from the
/// first missing byte and pinned to one version by ETag (`get_with_resume`); PUTs at or
/// above `multipart_threshold` become multipart uploads that are aborted on failure;
/// listings are paged (`paginate`); and at most `max_connections` requests are in flight,
/// each holding its permit until its body has been read, fewer while the store throttles
/// (`congestion`). Clones share the wire and the limit.
#[derive(Debug)]
pub struct S3Store<W> {
    inner: Arc<Limited<W>>,
}

impl<W> Clone for S3Store<W> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<W: WireFromConfig> S3Store<W> {
    /// Builds the wire from `cfg` and the store over it.
    /// Redirects are followed on wires built the same way (see `redirect`).
    pub fn new(cfg: StoreConfig) -> Result<Self> {
        Ok(Self::with(W::from_config(cfg)?, Some(W::from_config)))
    }

    /// Builds the store from the standard AWS environment (see `StoreConfig::from_env`).
    pub async fn from_env() -> Result<Self> {
        Self::new(StoreConfig::from_env().await?)
    }
}

impl<W: Wire> S3Store<W> {
    /// The policy layer over `wire`, configured by `wire.config()`. Having no way to build
    /// wires for other endpoints, it reports redirects rather than following them.
    pub fn over(wire: W) -> Self {
        Self::with(wire, None)
    }

    fn with(wire: W, build: Option<fn(StoreConfig) -> Result<W>>) -> Self {
        let cfg = wire.config();
        let congestion = Congestion::new(cfg.max_connections, cfg.concurrency, cfg.retry);
        let log = cfg.op_log.clone();
        Self {
            inner: Arc::new(Limited {
                wire: Redirects::new(wire, build),
                congestion,
                parts: PartsWindow::adaptive(crate::upload::PARTS_MEMORY),
                log,
            }),
        }
    }

    /// The wire underneath, for calls the [`ObjectStore`] interface does not offer (tests
    /// script faults through it).
    pub fn wire(&self) -> &W {
        self.inner.wire.home()
    }

    fn cfg(&self) -> &StoreConfig {
        self.wire().config()
    }

    fn multipart_api(&self) -> Arc<dyn Operations> {
        self.inner.clone()
    }
}

/// The wire behind one permit per request in flight (`max_connections`, fewer while the
/// store throttles): over HTTP/1.1 a request holds a connection, and neither hyper's pool
/// nor the SDK's bounds them. The permit is held until the attempt's body has been read, and
/// its outcome is what `Congestion` adapts to.
#[derive(Debug)]
struct Limited<W> {
    wire: Redirects<W>,
    congestion: Congestion,
    /// The places for parts in flight its streaming uploads share (`parts_in_flight`).
    parts: Arc<PartsWindow>,
    /// Where each request's line goes (`SLUICE_OP_LOG`): here, where every attempt of every
    /// operation passes, timed from when its permit let it go.
    log: Option<Arc<OpLog>>,
}

#[async_trait]
impl<W: Wire> GetWire for Limited<W> {
    async fn get_object(&self, req: &GetRequest<'_>, sink: &mut BodySink<'_>) -> Result<()> {
        // The bytes are known once the body is in.
        let mut permit = self.congestion.acquire(Kind::Read).await;
        let timer = self.log.as_ref().map(|_| Timer::start());
        let before = sink.written();
        let result = self.wire.get_object(req, sink).await;
        let moved = sink.written().saturating_sub(before);
        permit.moved(moved);
        permit.finish(&result);
        if let (Some(log), Some(t)) = (&self.log, timer) {
            log.record(
                &t,
                Outcome {
                    op: Operation::GetObject.name(),
                    uri: Some(req.uri),
                    range: req.range.map(|r| r.to_string()),
                    bytes: moved,
                    object_size: sink.head().and_then(|h| h.object_size),
                    first_byte: sink.began(),
                    result: result
                        .as_ref()
                        .map(|()| if req.range.is_some() { 206 } else { 200 }),
                },
            );
        }
        result
    }
}

#[async_trait]
impl<W: Wire> Operations for Limited<W> {
    /// One attempt, sent once the controller lets a request of its kind go; its body's
    /// bytes (a PUT's or a part's) count in the controller's rate.
    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        let mut permit = self.congestion.acquire(req.kind()).await;
        let bytes = req.body_len();
        let logged = self
            .log
            .as_ref()
            .map(|log| (log, Timer::start(), Logged::of(&req)));
        let result = self.wire.send(req).await;
        permit.moved(bytes);
        permit.finish(&result);
        if let Some((log, t, l)) = logged {
            let object_size = match &result {
                Ok(Reply::Meta(m)) => Some(m.size),
                _ => l.object_size,
            };
            log.record(
                &t,
                Outcome {
                    op: l.op,
                    uri: l.uri.as_ref(),
                    range: l.grouped.then(|| "/".to_owned()),
                    bytes,
                    object_size,
                    first_byte: None,
                    result: result.as_ref().map(|_| 200),
                },
            );
        }
        result
    }
}

/// What a request's op-log line needs of it, taken before it is sent (sending consumes it).
struct Logged {
    op: &'static str,
    uri: Option<ObjectUri>,
    /// A listing grouped by `/`.
    grouped: bool,
    /// A PUT's size.
    object_size: Option<u64>,
}

impl Logged {
    fn of(req: &Request<'_>) -> Self {
        Self {
            op: req.name(),
            uri: req.uri().cloned(),
            grouped: matches!(req, Request::ListObjectsV2 { opts, .. } if !opts.recursive),
            object_size: match req {
                Request::PutObject { data, .. } => Some(data.len() as u64),
                _ => None,
            },
        }
    }
}

#[async_trait]
impl<W: Wire> ObjectStore for S3Store<W> {
    fn backend(&self) -> &'static str {
        self.wire().backend()
    }

    fn endpoint_stats(&self) -> Vec<crate::object::EndpointStats> {
        self.wire().endpoint_stats()
    }

    fn congestion(&self) -> Option<CongestionStats> {
        Some(self.inner.congestion.stats())
    }

    fn expect_requests(&self, requests: usize) {
        self.inner.congestion.expect_requests(requests);
    }

    async fn get_into_with(
        &self,
        uri: &ObjectUri,
        opts: &GetOptions,
        dst: &mut Segment,
    ) -> Result<GetInfo> {
        get_with_resume(self.inner.as_ref(), &self.cfg().retry, uri, opts, dst).await
    }

    fn list(&self, prefix: &ObjectUri, recursive: bool) -> BoxStream<'_, Result<ListEntry>> {
        let prefix = prefix.clone();
        paginate(&self.cfg().retry, move |token| {
            let prefix = prefix.clone();
            async move {
                let opts = ListOptions::from(recursive, token);
                self.inner.list_objects_v2(&prefix, &opts).await
            }
        })
    }

    async fn put_opts(
        &self,
        uri: &ObjectUri,
        data: PutPayload,
        opts: &PutOptions,
    ) -> Result<PutInfo> {
        let cfg = self.cfg();
        multipart::put(
            &self.multipart_api(),
            &cfg.retry,
            uri,
            data.0,
            cfg.multipart_threshold,
            cfg.multipart_part_size,
            cfg.checksums.on_upload,
            opts,
        )
        .await
    }

    fn multipart(&self, _uri: &ObjectUri) -> Option<multipart::Multipart> {
        Some(multipart::Multipart::new(
            self.multipart_api(),
            self.cfg().retry,
        ))
    }

    async fn writer(&self, uri: &ObjectUri, opts: WriteOptions) -> Result<Box<dyn ObjectWriter>> {
        Ok(Box::new(MultipartWriter::new(
            self.multipart_api(),
            self.cfg().retry,
            uri.clone(),
            opts,
            &self.inner.parts,
        )?))
    }

    async fn send(&self, req: Request<'_>) -> Result<Reply> {
        retry(&self.cfg().retry, || self.inner.send(req.clone())).await
    }
}

/// The policy layer, case by case, over the in-memory wire (no sockets).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::store::ObjectStoreExt;
    use crate::testing::{self, MemoryWire, Op, reset, slow_down};
    use bytes::Bytes;
    use futures::TryStreamExt;
    use std::time::Duration;

    type Store = S3Store<MemoryWire>;

    fn store_with(cfg: StoreConfig, wire: impl FnOnce(MemoryWire) -> MemoryWire) -> Store {
        S3Store::over(wire(MemoryWire::new(cfg)))
    }

    fn store() -> Store {
        store_with(testing::config(), |w| w)
    }

    fn uri(key: &str) -> ObjectUri {
        ObjectUri::parse(&format!("s3://bkt/{key}")).unwrap()
    }

    fn data(len: usize) -> Bytes {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[tokio::test]
    async fn head_retries_a_slow_down_then_answers() {
        let s = store();
        s.wire().insert(&uri("a"), data(10));
        s.wire().fail(Op::HeadObject, 2, slow_down);
        assert_eq!(s.head(&uri("a")).await.unwrap().size, 10);
        assert_eq!(s.wire().calls(Op::HeadObject), 3);
    }

    /// Uploads in progress under a prefix, across pages, each retried page once; an abort of
    /// one gone meanwhile succeeds.
    #[tokio::test]
    async fn a_request_sent_as_a_value_gets_the_same_policy() {
        let s = store();
        s.wire().insert(&uri("a"), data(10));
        s.wire().fail(Op::HeadObject, 1, reset);
        let reply = s
            .send(Request::HeadObject { uri: &uri("a") })
            .await
            .unwrap();
        assert!(
            matches!(reply, Reply::Meta(m) if m.size == 10),
            "retried, then answered"
        );
        assert_eq!(s.wire().calls(Op::HeadObject), 2);
        let c = s.congestion().unwrap();
        assert_eq!(c.cuts, 1, "the reset went through the controller: {c:?}");
    }

    #[tokio::test]
    async fn uploads_in_progress_are_listed_page_by_page_and_aborted() {
        let s = store_with(testing::config(), |w| w.with_page_size(2));
        for key in ["ckpt/a", "ckpt/b", "ckpt/b", "ckpt/c", "ckpt/d", "other/e"] {
            s.wire()
                .create_multipart_upload(&uri(key), false, &PutOptions::default())
                .await
                .unwrap();
        }
        s.wire().fail(Op::ListMultipartUploads, 1, slow_down);
        let found: Vec<crate::Upload> = s.list_uploads(&uri("ckpt/")).try_collect().await.unwrap();
        let keys: Vec<&str> = found.iter().map(|u| u.uri.key()).collect();
        assert_eq!(keys, ["ckpt/a", "ckpt/b", "ckpt/b", "ckpt/c", "ckpt/d"]);
        assert_eq!(
            s.wire().calls(Op::ListMultipartUploads),
            4,
            "3 pages and 1 retry"
        );
        for u in &found {
            s.abort_upload(u).await.unwrap();
        }
        s.abort_upload(&found[0]).await.unwrap();
        assert_eq!(s.wire().open_uploads(), 1, "only other/e is left");
    }

    #[tokio::test]
    async fn a_missing_key_is_not_retried() {
        let s = store();
        let e = s.head(&uri("nope")).await.unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
        assert_eq!(s.wire().calls(Op::HeadObject), 1);
    }

    #[tokio::test]
    async fn the_retry_budget_bounds_attempts() {
        let s = store();
        s.wire().fail(Op::DeleteObject, 100, slow_down);
        let e = s.delete(&uri("a")).await.unwrap_err();
        assert!(matches!(e, Error::Service { status: 503, .. }), "{e:?}");
        assert_eq!(
            s.wire().calls(Op::DeleteObject),
            testing::config().retry.max_attempts
        );
    }

    #[tokio::test]
    async fn delete_many_sends_batches_of_one_bucket_and_reports_refused_keys() {
        let s = store();
        let mem = s.wire();
        let mut uris: Vec<ObjectUri> = (0..2500).map(|i| uri(&format!("k{i:04}"))).collect();
        for u in &uris {
            mem.insert(u, data(3));
        }
        let other = ObjectUri::parse("s3://other/x").unwrap();
        mem.insert(&other, data(3));
        uris.push(other.clone());
        mem.lock_key("k0007");
        s.wire().fail(Op::DeleteObjects, 1, slow_down);

        let refused = s.delete_many(&uris).await.unwrap();
        // 1000 + 1000 + 500 of `bkt`, 1 of `other`; the first batch was sent twice.
        assert_eq!(mem.delete_batches(), 4);
        assert_eq!(s.wire().calls(Op::DeleteObjects), 5);
        assert_eq!(refused.len(), 1);
        assert!(
            matches!(&refused[0], Error::PermissionDenied { uri, code, .. }
                if uri == "s3://bkt/k0007" && code == "AccessDenied"),
            "{:?}",
            refused[0]
        );
        assert!(mem.object(&uri("k0007")).is_some());
        assert!(mem.object(&uri("k0008")).is_none() && mem.object(&other).is_none());
    }

    #[tokio::test]
    async fn a_batch_failing_past_the_budget_ends_delete_many() {
        let s = store();
        s.wire().fail(Op::DeleteObjects, 100, slow_down);
        let e = s.delete_many(&[uri("a"), uri("b")]).await.unwrap_err();
        assert!(matches!(e, Error::Service { status: 503, .. }), "{e:?}");
    }

    #[tokio::test]
    async fn copy_is_made_by_the_store_and_retried() {
        let s = store();
        let want = data(1000);
        let etag = s.wire().insert(&uri("src"), want.clone());
        s.wire().fail(Op::CopyObject, 1, slow_down);
        let info = s.copy(&uri("src"), &uri("dst")).await.unwrap().unwrap();
        assert_eq!(info.etag.as_deref(), Some(etag.as_str()));
        assert_eq!(s.wire().object(&uri("dst")), Some(want));
        assert_eq!(s.wire().calls(Op::CopyObject), 2);
        let e = s.copy(&uri("nope"), &uri("dst2")).await.unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    }

    #[tokio::test]
    async fn a_cut_body_resumes_from_the_byte_reached() {
        let s = store();
        let want = data(300_000);
        s.wire().insert(&uri("a"), want.clone());
        s.wire().cut_bodies(100_000, 2);
        let mut seg = Segment::growable();
        let info = s
            .get_into_with(&uri("a"), &GetOptions::default(), &mut seg)
            .await
            .unwrap();
        assert_eq!((info.bytes, info.attempts), (300_000, 3));
        assert_eq!(seg.freeze().unwrap(), want);
    }

    #[tokio::test]
    async fn a_pinned_version_that_changed_is_an_integrity_error() {
        let s = store();
        let old = s.wire().insert(&uri("a"), data(1000));
        s.wire().insert(&uri("a"), data(2000));
        let opts = GetOptions {
            range: None,
            if_match: Some(old),
        };
        let e = s
            .get_into_with(&uri("a"), &opts, &mut Segment::growable())
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Integrity { .. }) && e.to_string().contains("changed"),
            "{e:?}"
        );
        assert_eq!(s.wire().calls(Op::GetObject), 1);
    }

    #[tokio::test]
    async fn listing_follows_pages_and_retries_a_failed_one() {
        let s = store_with(testing::config(), |w| w.with_page_size(2));
        for i in 0..7 {
            s.wire().insert(&uri(&format!("p/{i}")), data(i));
        }
        s.wire().fail(Op::ListObjectsV2, 1, reset);
        let keys: Vec<String> = s
            .list(&uri("p/"), true)
            .map_ok(|e| e.uri().key().to_owned())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(keys, (0..7).map(|i| format!("p/{i}")).collect::<Vec<_>>());
        assert_eq!(s.wire().calls(Op::ListObjectsV2), 4 + 1);
    }

    #[tokio::test]
    async fn a_put_below_the_threshold_is_one_request() {
        let s = store();
        let info = s.put(&uri("a"), data(1000).into()).await.unwrap();
        assert_eq!(info.parts, None);
        assert_eq!(s.wire().calls(Op::PutObject), 1);
        assert_eq!(s.wire().object(&uri("a")).unwrap(), data(1000));
    }

    fn multipart_config() -> StoreConfig {
        let mut cfg = testing::config();
        cfg.multipart_threshold = 5 << 20;
        cfg.multipart_part_size = 5 << 20;
        cfg
    }

    #[tokio::test]
    async fn a_put_at_the_threshold_is_multipart_with_s3s_etag() {
        let s = store_with(multipart_config(), |w| w);
        s.wire().fail(Op::UploadPart, 1, reset);
        let want = data(12 << 20);
        let info = s.put(&uri("big"), want.clone().into()).await.unwrap();
        assert_eq!(info.parts, Some(3));
        assert!(info.etag.unwrap().ends_with("-3\""));
        assert_eq!(s.wire().calls(Op::UploadPart), 3 + 1);
        assert_eq!(s.wire().object(&uri("big")).unwrap(), want);
        assert_eq!(s.wire().open_uploads(), 0);
    }

    #[tokio::test]
    async fn a_part_that_keeps_failing_aborts_the_upload() {
        let s = store_with(multipart_config(), |w| w);
        s.wire().fail(Op::UploadPart, 1000, slow_down);
        let e = s.put(&uri("big"), data(12 << 20).into()).await.unwrap_err();
        assert!(matches!(e, Error::Service { status: 503, .. }), "{e:?}");
        assert_eq!(s.wire().calls(Op::AbortMultipartUpload), 1);
        assert_eq!(s.wire().open_uploads(), 0);
        assert!(s.wire().object(&uri("big")).is_none());
    }

    #[tokio::test]
    async fn requests_in_flight_are_bounded_by_max_connections() {
        let mut cfg = testing::config();
        cfg.max_connections = 2;
        let s = store_with(cfg, |w| w.with_latency(Duration::from_millis(20)));
        for i in 0..8 {
            s.wire().insert(&uri(&format!("o{i}")), data(100));
        }
        let gets = (0..8).map(|i| {
            let s = s.clone();
            async move { s.get(&uri(&format!("o{i}")), None).await }
        });
        for got in futures::future::join_all(gets).await {
            assert_eq!(got.unwrap(), data(100));
        }
        assert_eq!(s.wire().peak_in_flight(), 2);
    }

    /// `get_ranges` (`ranges.rs`) over the policy layer: pieces, clipping, one version.
    #[allow(clippy::single_range_in_vec_init)]
    mod get_ranges {
        use crate::Concurrency;
        use crate::error::Error;
        use crate::ranges::RangesOptions;
        use crate::s3store::S3Store;
        use crate::store::ObjectStoreExt;
        use crate::testing::{self, MemoryWire, Op};
        use crate::uri::ObjectUri;
        use bytes::Bytes;
        use std::num::NonZeroU64;
        use std::time::Duration;

        fn size(n: u64) -> NonZeroU64 {
            NonZeroU64::new(n).unwrap()
        }

        fn uri() -> ObjectUri {
            ObjectUri::parse("s3://bkt/rows.parquet").unwrap()
        }

        fn data(len: usize) -> Bytes {
            (0..len).map(|i| (i * 7 % 251) as u8).collect()
        }

        fn opts(coalesce: u64, range_size: u64) -> RangesOptions {
            RangesOptions {
                coalesce,
                range_size: size(range_size),
                if_match: None,
            }
        }

        #[tokio::test]
        async fn ranges_come_back_in_order_as_slices_of_few_requests() {
            let store = S3Store::over(MemoryWire::new(testing::config()));
            let object = data(100_000);
            store.wire().insert(&uri(), object.clone());
            let asked = [
                90_000..90_100,
                10..20,
                15..40,
                7..7,
                60_000..70_000,
                99_990..100_000,
            ];
            let got = store
                .get_ranges_with(&uri(), &asked, &opts(1_000, 4_096))
                .await
                .unwrap();
            assert_eq!(got.len(), asked.len());
            for (r, b) in asked.iter().zip(&got) {
                assert_eq!(b, &object[r.start as usize..r.end as usize], "range {r:?}");
            }
            // 10..40, 90,000..90,100 and 99,990..100,000 a request each (more than 1,000
            // bytes apart); 60,000..70,000 three pieces of at most 4,096 bytes.
            assert_eq!(store.wire().calls(Op::GetObject), 6);
            // One buffer for ranges of one span: 15..40 starts 5 bytes into 10..20's.
            assert_eq!(got[2].as_ptr(), got[1].as_ptr().wrapping_add(5));
            assert!(store.get_ranges(&uri(), &[]).await.unwrap().is_empty());
        }

        #[tokio::test]
        async fn a_range_past_the_end_is_clipped_and_one_beyond_it_refused() {
            let store = S3Store::over(MemoryWire::new(testing::config()));
            let object = data(1_000);
            store.wire().insert(&uri(), object.clone());
            let got = store
                .get_ranges_with(&uri(), &[900..5_000], &opts(0, 256))
                .await
                .unwrap();
            assert_eq!(got[0], object[900..]);
            let e = store
                .get_ranges_with(&uri(), &[0..10, 990..995, 1_000..1_010], &opts(0, 256))
                .await
                .unwrap_err();
            assert!(
                e.to_string()
                    .contains("1000..1010 starts at or past the end")
                    && e.to_string().contains("1000 bytes"),
                "{e}"
            );
            // A range no machine can hold is refused before any request, never an abort.
            let e = store.get_ranges(&uri(), &[0..1 << 62]).await.unwrap_err();
            assert!(e.to_string().contains("cannot allocate"), "{e}");
            let e = store.get_ranges(&uri(), &[2_000..2_010]).await.unwrap_err();
            assert!(
                e.to_string()
                    .contains("2000..2010 starts at or past the end"),
                "{e}"
            );
        }

        /// Reads `ranges` of a 1,000-byte object one request at a time, 10 ms each, while
        /// the object is replaced by `new` between the first piece and the second: the
        /// call's outcome and the GETs sent.
        async fn replaced_between_pieces(
            ranges: &[std::ops::Range<u64>],
            new: Bytes,
        ) -> (crate::Result<Vec<Bytes>>, u32) {
            let mut cfg = testing::config();
            cfg.max_connections = 1;
            cfg.concurrency = Concurrency::Fixed;
            let store = std::sync::Arc::new(S3Store::over(
                MemoryWire::new(cfg).with_latency(Duration::from_millis(10)),
            ));
            store.wire().insert(&uri(), data(1_000));
            let read = {
                let store = store.clone();
                let ranges = ranges.to_vec();
                tokio::spawn(
                    async move { store.get_ranges_with(&uri(), &ranges, &opts(0, 256)).await },
                )
            };
            tokio::time::sleep(Duration::from_millis(15)).await;
            store.wire().insert(&uri(), new);
            (read.await.unwrap(), store.wire().calls(Op::GetObject))
        }

        #[tokio::test(start_paused = true)]
        async fn a_416_from_a_shorter_new_version_is_a_change_not_an_end() {
            // The first piece sees 1,000 bytes, the second a 416 (no ETag) from 100.
            let (got, calls) = replaced_between_pieces(&[0..10, 500..510], data(100)).await;
            let e = got.unwrap_err();
            assert!(e.to_string().contains("changed"), "{e}");
            assert_eq!(calls, 3, "read again, pinned");
        }

        #[tokio::test(start_paused = true)]
        async fn pieces_of_two_versions_are_never_joined() {
            let (got, calls) =
                replaced_between_pieces(&[0..100, 500..600], Bytes::from(vec![1u8; 1_000])).await;
            let e = got.unwrap_err();
            assert!(matches!(e, Error::Integrity { .. }), "{e}");
            // Read again pinned to the first answer's version, which is gone: the first
            // piece's 412 ends the call before the second is sent again.
            assert_eq!(calls, 3);
        }
    }
}
