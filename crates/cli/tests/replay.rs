//! Record and replay through the binary: `--op-log` on real commands against the test
//! server, the log read back line by line, `sluice bench --replay` of it onto another prefix
//! (which it leaves as it found it), and the refusals: a prefix that holds objects, a log
//! that is not one, a log cut short.

use sluice_core::oplog::{self, Entry};
use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// `sluice` set up to reach `server`, and nothing of the machine's AWS configuration.
fn on(server: &TestServer) -> Command {
    let mut c = Command::new(BIN);
    c.env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("S3_BACKEND")
        .env_remove("SLUICE_OP_LOG")
        .env("AWS_ENDPOINT_URL_S3", server.http_endpoint())
        .env("AWS_ACCESS_KEY_ID", server.access_key())
        .env("AWS_SECRET_ACCESS_KEY", server.secret_key());
    c
}

fn run(c: &mut Command) -> Output {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{:?}: {}", c, text(&out));
    out
}

fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tsv.zst"))
        .collect();
    v.sort();
    v
}

fn listed(s: &TestServer, prefix: &str) -> Vec<String> {
    let out = run(on(s).args(["ls", "--recursive", prefix]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_replays_onto_another_prefix_and_leaves_it_as_found() {
    let s = TestServer::start(ServerOptions::default()).await.unwrap();
    for (key, size) in [("rec/train/a.bin", 300_000), ("rec/train/b.bin", 70_000)] {
        s.insert(DEFAULT_BUCKET, key, vec![7u8; size]);
    }
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("run-{pid}.tsv.zst");
    let template = template.to_str().unwrap();
    let upload = dir.path().join("up.bin");
    std::fs::write(&upload, vec![1u8; 50_000]).unwrap();
    // Three processes of one run, each its own log.
    run(on(&s)
        .args(["put", "--op-log", template])
        .arg(&upload)
        .arg("s3://sluice-test/rec/ckpt/up.bin"));
    run(on(&s).args([
        "get",
        "--op-log",
        template,
        "s3://sluice-test/rec/train/a.bin",
        "s3://sluice-test/rec/train/b.bin",
        "s3://sluice-test/rec/ckpt/up.bin",
    ]));
    run(on(&s)
        .env("SLUICE_OP_LOG", template)
        .args(["ls", "--recursive", "s3://sluice-test/rec/"]));
    let files = logs(dir.path());
    assert_eq!(files.len(), 3, "{files:?}");
    let mut all: Vec<Entry> = Vec::new();
    for f in &files {
        all.extend(oplog::read(f).unwrap());
    }
    let of = |op: &str| all.iter().filter(|e| e.op == op).collect::<Vec<_>>();
    let gets = of("GetObject");
    assert_eq!(
        gets.iter().map(|e| e.bytes).sum::<u64>(),
        420_000,
        "{gets:?}"
    );
    for g in &gets {
        assert!(g.status == 200 || g.status == 206, "{g:?}");
        assert!(g.first_byte_us.is_some_and(|f| f <= g.duration_us), "{g:?}");
        assert!(
            g.object_size.is_some() && g.attempt == 1 && g.error.is_empty(),
            "{g:?}"
        );
    }
    let puts = of("PutObject");
    assert_eq!(puts.len(), 1);
    assert_eq!((puts[0].bytes, puts[0].object_size), (50_000, Some(50_000)));
    assert_eq!(puts[0].uri, "s3://sluice-test/rec/ckpt/up.bin");
    assert_eq!(of("ListObjectsV2")[0].uri, "s3://sluice-test/rec/");

    // Replayed onto an empty prefix: every request made, the bytes read again.
    let json = dir.path().join("replay.json");
    let mut replay = on(&s);
    replay
        .args(["bench", "--replay"])
        .args(&files)
        .args([
            "--uri",
            "s3://sluice-test/other/",
            "--backends",
            "hyper,awssdk",
            "--json",
        ])
        .arg(&json);
    let out = run(&mut replay);
    assert!(text(&out).contains("replay"), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = doc["ops_rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{doc}");
    for r in rows {
        assert_eq!(r["workload"], "replay");
        let ops = &r["report"]["ops"];
        assert_eq!(ops["get"]["ok"], gets.len() as u64, "{r}");
        assert_eq!(ops["get"]["bytes"], 420_000, "{r}");
        assert_eq!(ops["put"]["ok"], 1, "{r}");
        assert_eq!(ops["list"]["ok"], 1, "{r}");
        assert!(r["latency"]["p50_ms"].is_number(), "{r}");
        assert!(r["errors"].as_object().unwrap().is_empty(), "{r}");
    }
    // It leaves the prefix as it found it, and the recorded objects as they were.
    assert!(listed(&s, "s3://sluice-test/other/").is_empty());
    assert_eq!(listed(&s, "s3://sluice-test/rec/").len(), 3);

    // A prefix that holds objects is refused, naming what is there and the way out.
    let refused = on(&s)
        .args(["bench", "--replay"])
        .args(&files)
        .args(["--uri", "s3://sluice-test/rec/"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("--allow-existing"),
        "{}",
        text(&refused)
    );

    // A log cut short, and a file that is not one: refused with the file and the line.
    let bytes = std::fs::read(&files[0]).unwrap();
    let cut = dir.path().join("cut.tsv.zst");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let other = dir.path().join("other.tsv.zst");
    std::fs::write(
        &other,
        zstd::encode_all(&b"idx\tthread\top\n"[..], 3).unwrap(),
    )
    .unwrap();
    for (f, says) in [(&cut, "cut short"), (&other, "not a sluice op-log")] {
        let out = on(&s)
            .args(["bench", "--replay"])
            .arg(f)
            .args(["--uri", "s3://sluice-test/third/"])
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(
            t.contains(says) && t.contains("line") && t.contains(&*f.to_string_lossy()),
            "{t}"
        );
    }
}
