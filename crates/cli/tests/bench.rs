//! `sluice bench`'s request-driven workloads through the binary: every workload's row for
//! every backend and curl, run control (--autoterm, failures), a store's keys left as they
//! were, `bench compare`, bad input, and MPI ranks merged into one table.

use serde_json::Value;
use sluice_testserver::synthetic::Spec;
use sluice_testserver::{ServerOptions, ServiceProfile, TestServer};
use std::path::Path;
use std::process::Command;

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// `sluice` with no AWS configuration from the machine.
fn bare() -> Command {
    let mut c = Command::new(BIN);
    c.env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("S3_BACKEND");
    c
}

/// `sluice` set up to reach `server`.
fn on(server: &TestServer) -> Command {
    let mut c = bare();
    c.env("AWS_ENDPOINT_URL_S3", server.http_endpoint())
        .env("AWS_ACCESS_KEY_ID", server.access_key())
        .env("AWS_SECRET_ACCESS_KEY", server.secret_key())
        .env("SLUICE_MAX_ATTEMPTS", "2");
    c
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn rows<'a>(doc: &'a Value, workload: &str) -> Vec<&'a Value> {
    doc["ops_rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["workload"] == workload)
        .collect()
}

#[test]
fn every_workload_has_a_row_per_backend_with_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let (j, svg) = (dir.path().join("b.json"), dir.path().join("b.svg"));
    let out = bare()
        .args([
            "bench",
            "--workload",
            "put,small,stat,list,delete,mixed,checkpoint",
            "--duration",
            "1s",
            "--concurrency",
            "2",
            "--size",
            "64KiB",
            "--json",
        ])
        .arg(&j)
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for col in ["req/s", "CPU-us/req", "p99.9 ms", "ttfb p99", "failed"] {
        assert!(stdout.contains(col), "column {col}: {stdout}");
    }
    let doc = json(&j);
    for w in [
        "put",
        "small",
        "stat",
        "list",
        "delete",
        "mixed",
        "checkpoint write",
        "checkpoint read",
    ] {
        let rs = rows(&doc, w);
        for backend in ["hyper", "awssdk", "objectstore"] {
            let r = rs
                .iter()
                .find(|r| r["client"] == backend)
                .unwrap_or_else(|| panic!("no {w} row for {backend}: {stdout}"));
            assert!(r["req_per_s"].as_f64().unwrap() > 0.0, "{w} {backend}: {r}");
            assert!(r["latency"]["p50_ms"].as_f64().unwrap() > 0.0, "{r}");
            assert!(
                r["latency"]["max_ms"].as_f64() >= r["latency"]["p99_ms"].as_f64(),
                "{r}"
            );
            assert_eq!(
                r["report"]["ops"].as_object().unwrap().len() > 1,
                w == "mixed"
            );
            let failed: u64 = r["errors"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            assert_eq!(failed, 0, "{w} {backend}: {r}");
            assert!(r["peak_rss_mb"].as_f64().unwrap() > 0.0);
            assert!(r["cpu_us_per_req"].as_f64().unwrap() > 0.0);
        }
        // curl can make GETs and PUTs.
        assert_eq!(
            rs.iter().any(|r| r["client"] == "curl"),
            w == "put" || w == "small",
            "{w}"
        );
    }
    for r in rows(&doc, "small") {
        assert!(
            r["ttfb"]["p50_ms"].as_f64().unwrap() > 0.0,
            "GETs time their first byte: {r}"
        );
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.0);
    }
    for r in rows(&doc, "put") {
        assert!(r["ttfb"].is_null(), "a PUT has no first body byte: {r}");
        assert!(r["cpu_s_per_gb"].as_f64().unwrap() > 0.0);
    }
    for r in rows(&doc, "stat") {
        assert!(r["cpu_s_per_gb"].is_null(), "no bytes, no CPU per GB: {r}");
    }
    for r in rows(&doc, "mixed") {
        for op in ["get", "put", "stat", "delete"] {
            assert!(
                r["report"]["ops"][op]["ok"].as_u64().unwrap() > 0,
                "{op}: {r}"
            );
        }
    }
    // Two ranks, one 64 KiB checkpoint each, written and read back whole.
    for phase in ["checkpoint write", "checkpoint read"] {
        for r in rows(&doc, phase) {
            let bytes: u64 = r["report"]["ops"]
                .as_object()
                .unwrap()
                .values()
                .map(|o| o["bytes"].as_u64().unwrap())
                .sum();
            assert_eq!(bytes, 2 * 65536, "{phase}: {r}");
        }
    }
    let env = &doc["environment"];
    assert!(
        env["kernel"].as_str().is_some_and(|k| !k.is_empty()),
        "{env}"
    );
    assert!(env["server"].as_str().unwrap().contains("loopback"));
    for w in ["put", "small", "mixed", "checkpoint-read"] {
        let p = dir.path().join(format!("b-{w}.svg"));
        let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(s.starts_with("<svg") && s.contains("hyper"), "{w}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_store_the_bench_leaves_every_other_key_and_deletes_its_own() {
    let s = TestServer::start(ServerOptions::default()).await.unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), b"not the bench's").unwrap();
    let keep = on(&s)
        .arg("put")
        .arg(file.path())
        .arg("s3://sluice-test/mine/keep")
        .output()
        .unwrap();
    assert!(keep.status.success(), "{}", text(&keep));
    let args = [
        "bench",
        "--uri",
        "s3://sluice-test/mine/",
        "--workload",
        "put,small,delete,mixed,checkpoint",
        "--duration",
        "1s",
        "--concurrency",
        "2",
        "--size",
        "4KiB",
        "--count",
        "20",
        "--backends",
        "hyper",
    ];
    let refused = on(&s).args(args).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let msg = text(&refused);
    assert!(
        msg.contains("--uri") && msg.contains("mine/keep") && msg.contains("--allow-existing"),
        "{msg}"
    );
    let ran = on(&s).args(args).arg("--allow-existing").output().unwrap();
    assert!(ran.status.success(), "{}", text(&ran));
    assert!(text(&ran).contains("curl"), "{}", text(&ran));
    let ls = on(&s)
        .args(["ls", "--recursive", "s3://sluice-test/"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success(), "{}", text(&ls));
    assert!(listed.contains("mine/keep"), "{listed}");
    assert_eq!(
        listed.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "everything the bench wrote is gone: {listed}"
    );
}

#[test]
fn autoterm_ends_a_steady_run_and_compare_marks_real_changes() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let out = bare()
        .args([
            "bench",
            "--workload",
            "stat",
            "--duration",
            "60s",
            "--autoterm",
            "--autoterm-pct",
            "95",
            "--count",
            "10",
            "--backends",
            "hyper,objectstore",
            "--json",
        ])
        .arg(&a)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc = json(&a);
    for r in rows(&doc, "stat") {
        assert_eq!(r["report"]["stopped"], "autoterm", "{r}");
        let secs = r["report"]["seconds"].as_f64().unwrap();
        assert!((5.0..30.0).contains(&secs), "stopped at {secs} s");
        assert!(r["report"]["per_second"].as_array().unwrap().len() >= 5);
    }
    assert!(text(&out).contains("steady (--autoterm)"), "{}", text(&out));

    // B: the hyper row twice as fast in every second; objectstore's unchanged.
    let mut doc_b = doc.clone();
    for r in doc_b["ops_rows"].as_array_mut().unwrap() {
        if r["client"] == "hyper" {
            let per: Vec<Value> = r["report"]["per_second"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v.as_f64().unwrap() * 2.0).into())
                .collect();
            r["report"]["per_second"] = per.into();
            r["req_per_s"] = (r["req_per_s"].as_f64().unwrap() * 2.0).into();
        }
    }
    let b = dir.path().join("b.json");
    std::fs::write(&b, serde_json::to_vec(&doc_b).unwrap()).unwrap();
    let cmp = bare()
        .args(["bench", "compare"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{}", text(&cmp));
    let t = String::from_utf8_lossy(&cmp.stdout);
    let line = |client: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("stat {client} ")))
            .unwrap_or_else(|| panic!("{client}: {t}"))
            .to_owned()
    };
    assert!(
        line("hyper").contains("+100.0%") && line("hyper").contains('*'),
        "{t}"
    );
    assert!(
        line("objectstore").contains("+0.0%") && !line("objectstore").contains('*'),
        "{t}"
    );
    assert!(t.contains("standard error"), "the rule is stated: {t}");

    std::fs::write(&b, "{\"not\": \"a bench\"}").unwrap();
    let bad = bare()
        .args(["bench", "compare"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("b.json"), "{}", text(&bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_failures_end_the_run_with_exit_1_and_the_figures_so_far() {
    let mut profile = ServiceProfile::named("loopback").unwrap();
    profile.set("request-rate", "get=20/s").unwrap();
    let s = TestServer::start(ServerOptions {
        profile,
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    let out = on(&s)
        .env("SLUICE_MAX_ATTEMPTS", "1")
        .args([
            "bench",
            "--uri",
            "s3://sluice-test/t/",
            "--workload",
            "small",
            "--size",
            "1KiB",
            "--count",
            "20",
            "--duration",
            "20s",
            "--concurrency",
            "4",
            "--backends",
            "hyper",
            "--no-curl",
        ])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("HTTP 503 SlowDown"), "failures by kind: {t}");
    assert!(t.contains("more than 1% of requests failed"), "{t}");
    assert!(t.contains("too many requests failed"), "{t}");
    assert!(t.contains("p99 ms"), "the figures so far are printed: {t}");
}

/// `--existing`: small, stat and list read a synthetic store's objects, found by one listing,
/// with no failure and nothing written; a writing workload is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_reads_what_is_there_and_writes_nothing() {
    let s = TestServer::start(ServerOptions {
        synthetic: Some(Spec::parse("train/img_{i}.jpeg:5000x2KiB").unwrap()),
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("b.json");
    let out = on(&s)
        .args([
            "bench",
            "--uri",
            "s3://sluice-test/train/",
            "--existing",
            "--workload",
            "small,stat,list",
            "--duration",
            "1s",
            "--concurrency",
            "4",
            "--backends",
            "hyper",
            "--json",
        ])
        .arg(&j)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc = json(&j);
    for w in ["small", "stat", "list"] {
        let r = rows(&doc, w)[0];
        assert_eq!(r["client"], "hyper");
        assert!(r["req_per_s"].as_f64().unwrap() > 0.0, "{w}: {r}");
        let failed: u64 = r["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(failed, 0, "{w}: {r}");
    }
    // A GET's bytes are the listed size, 2 KiB, for sluice and for curl alike.
    for r in rows(&doc, "small") {
        let get = &r["report"]["ops"]["get"];
        assert!(get["ok"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(
            get["bytes"].as_u64().unwrap(),
            2048 * get["ok"].as_u64().unwrap(),
            "{r}"
        );
    }
    assert!(rows(&doc, "small").iter().any(|r| r["client"] == "curl"));
    let ls = on(&s)
        .args(["ls", "--recursive", "s3://sluice-test/"])
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&ls.stdout).lines().count();
    assert_eq!(n, 5000, "nothing written beside the synthetic objects");
    let refused = on(&s)
        .args(["bench", "--uri", "s3://sluice-test/train/", "--existing"])
        .args(["--workload", "put", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("--existing") && text(&refused).contains("put writes"),
        "{}",
        text(&refused)
    );
}

#[test]
fn bad_bench_input_exits_2_naming_the_flag() {
    for (args, says) in [
        (
            &["--workload", "scan"][..],
            &["--workload", "\"scan\"", "checkpoint"][..],
        ),
        (
            &["--workload", "put", "--size", "0"],
            &["--size", "0 bytes"],
        ),
        (
            &["--workload", "put", "--size", "8MiB..1MiB"],
            &["--size", "low end"],
        ),
        (
            &["--workload", "mixed", "--mix", "get=50,put=10"],
            &["--mix", "add up to 60"],
        ),
        (
            &["--workload", "put", "--duration", "0s"],
            &["--duration", "above 0"],
        ),
        (
            &["--workload", "put", "--concurrency", "0"],
            &["--concurrency"],
        ),
        (
            &["--workload", "get", "--preset", "bert"],
            &["--preset", "\"bert\""],
        ),
        (
            &["--workload", "put", "--max-error-share", "2"],
            &["--max-error-share"],
        ),
        (
            &["--workload", "get", "--size", "1KiB..2KiB"],
            &["--size", "one size"],
        ),
        (
            &["--workload", "put", "--server-profile", "fast"],
            &["--server-profile", "fast"],
        ),
        (
            &["--workload", "checkpoint", "--preset", "llama3-8b"],
            &["--preset", "does not fit", "--uri"],
        ),
    ] {
        let out = bare().arg("bench").args(args).output().unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {t}");
        for s in says {
            assert!(t.contains(s), "{args:?} should say {s:?}: {t}");
        }
    }
}

/// `mpirun -np 2 sluice bench`: the ranks run each row together against rank 0's embedded
/// server and rank 0 prints one table of their sum.
#[cfg(feature = "mpi")]
#[test]
fn mpirun_ranks_print_one_aggregate() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("m.json");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", BIN])
        .args([
            "bench",
            "--workload",
            "small,put",
            "--size",
            "16KiB",
            "--count",
            "50",
            "--duration",
            "1s",
            "--concurrency",
            "2",
            "--backends",
            "hyper",
            "--no-curl",
            "--json",
        ])
        .arg(&j)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("mpirun (Open MPI: apt install openmpi-bin) runs");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("CPU-us/req").count(),
        1,
        "one table: {stdout}"
    );
    let doc = json(&j);
    assert_eq!(doc["environment"]["ranks"], 2);
    for w in ["small", "put"] {
        let r = rows(&doc, w)[0];
        assert_eq!(r["report"]["ranks"], 2, "{r}");
        assert!(r["req_per_s"].as_f64().unwrap() > 0.0);
    }
    assert!(stdout.contains("2 ranks together"), "{stdout}");
}
