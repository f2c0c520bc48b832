//! The profile applied to each request, in front of the S3 handlers: count it, take a token
//! from its partition's bucket, wait its first-byte latency, then either answer `SlowDown` or
//! hand it to s3s with both bodies paced.

use super::pace::{Links, Paced, Pacer};
use super::rate::RateLimiter;
use super::stats::ServiceStats;
use super::{OpClass, ServiceProfile};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use s3s::service::S3Service;
use s3s::{Body, HttpError, HttpResponse, S3Error, S3ErrorCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug)]
pub(crate) struct Shaper {
    profile: ServiceProfile,
    rng: Mutex<fastrand::Rng>,
    limiter: RateLimiter,
    /// The node's link, one clock per direction (a link is full duplex).
    node: Option<[Arc<Pacer>; 2]>,
    pub(crate) stats: Arc<ServiceStats>,
    throttle_ids: AtomicU64,
}

/// What a request is, as far as the profile cares: its class, bucket and partition key.
struct Target {
    class: OpClass,
    bucket: String,
    /// The object key, or for a LIST its `prefix` parameter.
    key: String,
}

impl Target {
    fn of(req: &Request<Incoming>) -> Self {
        let path = req.uri().path().trim_start_matches('/');
        let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
        let on_object = !key.is_empty();
        let class = match *req.method() {
            Method::GET | Method::HEAD if on_object => OpClass::Read,
            // HEAD of a bucket is a read of its metadata, not a listing.
            Method::HEAD => OpClass::Read,
            Method::GET => OpClass::List,
            _ => OpClass::Write,
        };
        let key = if class == OpClass::List {
            req.uri()
                .query()
                .and_then(|q| {
                    url::form_urlencoded::parse(q.as_bytes())
                        .find(|(k, _)| k == "prefix")
                        .map(|(_, v)| v.into_owned())
                })
                .unwrap_or_default()
        } else {
            key.to_owned()
        };
        Self {
            class,
            bucket: bucket.to_owned(),
            key,
        }
    }
}

impl Shaper {
    pub(crate) fn new(profile: ServiceProfile) -> Self {
        Self {
            rng: Mutex::new(fastrand::Rng::with_seed(profile.seed)),
            limiter: RateLimiter::new(profile.request_rate),
            node: profile
                .node_bandwidth
                .map(|b| [Arc::new(Pacer::new(b)), Arc::new(Pacer::new(b))]),
            stats: Arc::new(ServiceStats::new(&profile.name)),
            throttle_ids: AtomicU64::new(0),
            profile,
        }
    }

    /// The links of a new connection, as (upload, download): its own, and the node's that
    /// all connections share, each direction paced on its own.
    pub(crate) fn links(&self) -> (Links, Links) {
        let direction = |i: usize| Links {
            connection: self
                .profile
                .connection_bandwidth
                .map(|b| Arc::new(Pacer::new(b))),
            node: self.node.as_ref().map(|n| n[i].clone()),
        };
        (direction(0), direction(1))
    }

    pub(crate) async fn serve(
        self: Arc<Self>,
        s3: S3Service,
        (up, down): (Links, Links),
        req: Request<Incoming>,
    ) -> Result<HttpResponse, HttpError> {
        let target = Target::of(&req);
        let head = req.method() == Method::HEAD;
        self.stats.request(target.class);
        let admitted =
            self.limiter
                .admit(target.class, &target.bucket, &target.key, Instant::now());
        if let Some(latency) = self.profile.latency.of(target.class) {
            let d = latency.sample(&mut self.rng.lock().unwrap());
            self.stats.latency(target.class, d);
            tokio::time::sleep(d).await;
        }
        if !admitted {
            self.stats.throttle(target.class);
            return Ok(self.slow_down(head));
        }
        let req =
            req.map(|b| Body::http_body(Paced::new(b, up, self.stats.bytes_received.clone())));
        let mut resp = s3.call(req).await?;
        // HTTP/1.1 drops a HEAD response's body on the wire; over HTTP/2 hyper sends the
        // body s3s renders for a failed HEAD, and the peer resets the stream. Drop it here.
        if head {
            *resp.body_mut() = Body::empty();
            return Ok(resp);
        }
        Ok(resp.map(|b| Body::http_body(Paced::new(b, down, self.stats.bytes_sent.clone()))))
    }

    /// S3's answer to a request over its partition's rate: 503 with the `SlowDown` code,
    /// rendered by s3s as its handlers' errors are.
    fn slow_down(&self, head: bool) -> HttpResponse {
        let id = format!(
            "SLUICETHROTTLE{:010}",
            self.throttle_ids.fetch_add(1, Ordering::Relaxed)
        );
        let mut e =
            S3Error::with_message(S3ErrorCode::SlowDown, "Please reduce your request rate.");
        e.set_status_code(StatusCode::SERVICE_UNAVAILABLE);
        e.set_request_id(id.clone());
        let mut resp = e.to_http_response().expect("an S3 error renders as XML");
        resp.headers_mut()
            .insert("x-amz-request-id", id.parse().expect("the id is ASCII"));
        if head {
            *resp.body_mut() = Body::empty();
        }
        resp
    }
}
