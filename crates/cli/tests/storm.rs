//! A throttling storm: 16 `sluice get` processes, 16 requests in flight each, against a
//! server that admits 1,000 GETs a second on the prefix they all read (the `s3-standard`
//! profile's latency, its rate lowered so the storm fits a test). Each client's congestion
//! controller (`core/src/congestion.rs`) must keep the storm from feeding itself: every
//! object arrives with the default retry budget, the requests stay within 1.5x the objects,
//! and the server stays busy near its rate. Without the controller (measured when it was
//! added, 500 objects each) 1 to 3 of the 16 processes failed for lack of attempts and the
//! requests reached 2.0-2.15x the objects.
//! A test binary of its own, so no other test takes its CPU.

use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, ServiceProfile, TestServer};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_sluice");
const PROCESSES: usize = 16;
const OBJECTS: usize = 400;
const RATE: f64 = 1000.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_storm_delivers_everything_without_feeding_itself() {
    let mut profile = ServiceProfile::named("s3-standard").unwrap();
    profile.set("request-rate", "get=1000/s").unwrap();
    let server = TestServer::start(ServerOptions {
        https_addr: None,
        profile,
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..OBJECTS {
        let key = format!("storm/obj_{i:05}.bin");
        let data = sluice_testdata::pattern::generate(&key, 16 << 10);
        server.insert(DEFAULT_BUCKET, &key, data);
    }
    let endpoint = server.http_endpoint();
    let t = Instant::now();
    let outputs = tokio::task::spawn_blocking(move || {
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(BIN)
                    .args(["get", "--json", "--verify", "-j", "16", "--endpoint"])
                    .arg(&endpoint)
                    .arg(format!("s3://{DEFAULT_BUCKET}/storm/"))
                    .env("AWS_ACCESS_KEY_ID", sluice_testserver::DEFAULT_ACCESS_KEY)
                    .env(
                        "AWS_SECRET_ACCESS_KEY",
                        sluice_testserver::DEFAULT_SECRET_KEY,
                    )
                    .env("AWS_REGION", "us-east-1")
                    .env("AWS_EC2_METADATA_DISABLED", "true")
                    .env_remove("SLUICE_MAX_ATTEMPTS")
                    .env_remove("AWS_MAX_ATTEMPTS")
                    .env_remove("S3_BACKEND")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let secs = t.elapsed().as_secs_f64();

    let (mut delivered, mut seen_by_clients) = (0, 0);
    for out in &outputs {
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "a reader failed: {text}");
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let run = lines.iter().find(|v| v.get("objects").is_some()).unwrap();
        assert_eq!(run["objects"], OBJECTS, "every object, verified");
        delivered += OBJECTS;
        let control = lines.iter().find(|v| v.get("throttled").is_some()).unwrap();
        seen_by_clients += control["throttled"].as_u64().unwrap();
    }
    let stats = server.stats();
    let (requests, throttled) = (stats.requests["get"], stats.throttled["get"]);
    let admitted_per_sec = (requests - throttled) as f64 / secs;
    eprintln!(
        "{delivered} objects, {requests} GETs ({:.2}x), {throttled} throttled, {admitted_per_sec:.0} admitted/s over {secs:.1} s",
        requests as f64 / delivered as f64
    );
    assert!(throttled > 0, "the load was a storm: {stats:?}");
    assert_eq!(
        seen_by_clients,
        stats.throttled.values().sum::<u64>(),
        "every SlowDown counted by the client that got it (their LISTs' too)"
    );
    assert!(
        requests as f64 <= 1.5 * delivered as f64,
        "no retry storm: {requests} GETs for {delivered} objects"
    );
    // Near the limit: the whole run, process start-up and the last stragglers included, at
    // least half the rate; never above it (plus the bucket's one-second burst).
    assert!(
        admitted_per_sec >= 0.5 * RATE && admitted_per_sec <= RATE + RATE / secs,
        "{admitted_per_sec:.0} admitted/s against {RATE}/s"
    );
}
