//! The `sluice` binary against the test server: every subcommand, and bad input failing
//! fast with a specific message and exit code.

use sluice_testserver::{DEFAULT_BUCKET, ServerOptions, TestServer};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// Runs `sluice ARGS` to its end, or kills it after a minute and fails: a command that
/// waits for ever (a GET waiting for memory that never frees) fails the test, not hangs it.
fn sluice(server: &TestServer, args: &[&str]) -> Output {
    const LIMIT: Duration = Duration::from_secs(60);
    let mut child = command(server)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    // Drained while it runs, so that a full pipe cannot stop it.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            pipe.read_to_end(&mut buf).map(|_| buf)
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("sluice {args:?} still running after {LIMIT:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap().unwrap(),
        stderr: stderr.join().unwrap().unwrap(),
    }
}

/// `sluice` set up to reach `server`, and nothing else.
fn command(server: &TestServer) -> Command {
    let mut c = Command::new(BIN);
    c.env("AWS_ENDPOINT_URL_S3", server.http_endpoint())
        .env("AWS_ACCESS_KEY_ID", server.access_key())
        .env("AWS_SECRET_ACCESS_KEY", server.secret_key())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("SLUICE_MAX_ATTEMPTS", "2")
        .env("SLUICE_CONNECT_TIMEOUT", "2")
        .env_remove("AWS_PROFILE")
        .env_remove("S3_BACKEND");
    c
}

async fn server() -> TestServer {
    TestServer::start(ServerOptions::default()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_ls_get_put_rm_round_trip() {
    let s = server().await;
    let g = sluice(
        &s,
        &[
            "gen",
            "s3://sluice-test/ds/",
            "--count",
            "3",
            "--size",
            "100000",
            "--json",
        ],
    );
    assert!(g.status.success(), "{}", text(&g));

    let ls = sluice(&s, &["ls", "-r", "s3://sluice-test/ds/", "--json"]);
    assert!(ls.status.success(), "{}", text(&ls));
    // One JSON object per line.
    let listed: Vec<serde_json::Value> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let uris: Vec<&str> = listed.iter().map(|e| e["uri"].as_str().unwrap()).collect();
    assert_eq!(
        uris,
        vec![
            "s3://sluice-test/ds/train/0/img_0_of_3.npz",
            "s3://sluice-test/ds/train/0/img_1_of_3.npz",
            "s3://sluice-test/ds/train/0/img_2_of_3.npz"
        ]
    );
    assert!(
        listed
            .iter()
            .all(|e| e["size"] == 100000 && e["last_modified"].as_u64().is_some())
    );
    let human = sluice(&s, &["ls", "-r", "-H", "s3://sluice-test/ds/"]);
    assert!(text(&human).contains("97.7 KiB"), "{}", text(&human));

    let dir = tempfile::tempdir().unwrap();
    let get = sluice(
        &s,
        &[
            "get",
            "s3://sluice-test/ds/",
            "-o",
            dir.path().to_str().unwrap(),
            "--json",
        ],
    );
    assert!(get.status.success(), "{}", text(&get));
    let summary: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(summary["objects"], 3);
    assert_eq!(summary["bytes"], 300000);
    // Paths are the keys relative to the prefix asked for.
    let file = dir.path().join("train/0/img_1_of_3.npz");
    let stored = s
        .storage()
        .get(DEFAULT_BUCKET, "ds/train/0/img_1_of_3.npz")
        .unwrap();
    assert_eq!(
        std::fs::read(&file).unwrap(),
        stored.data.to_vec(),
        "written bytes equal the object"
    );

    let put = sluice(
        &s,
        &["put", file.to_str().unwrap(), "s3://sluice-test/copy.npz"],
    );
    assert!(put.status.success(), "{}", text(&put));
    assert_eq!(
        s.storage().get(DEFAULT_BUCKET, "copy.npz").unwrap().data,
        stored.data
    );

    let rm = sluice(&s, &["rm", "s3://sluice-test/copy.npz"]);
    assert!(rm.status.success(), "{}", text(&rm));
    assert!(s.storage().get(DEFAULT_BUCKET, "copy.npz").is_err());
}

/// Stores `size` bytes of the test pattern under `key`; returns its URI.
fn insert_pattern(s: &TestServer, key: &str, size: usize) -> String {
    let data = sluice_testdata::pattern::generate(key, size);
    s.insert(DEFAULT_BUCKET, key, bytes::Bytes::from(data));
    format!("s3://sluice-test/{key}")
}

/// `sluice get` cuts ranges of the memory budget ÷ twice the GETs in flight (4 to 8 MiB)
/// unless `--chunk-size` is given, and every byte arrives whichever size was chosen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_cuts_ranges_that_follow_the_gets_in_flight() {
    let s = server().await;
    let size = (40 << 20) + 3;
    let uri = insert_pattern(&s, "big/one.bin", size);
    for (args, range) in [
        (&["-j", "2"][..], 8u64 << 20),
        (&["-j", "8"][..], 4 << 20),
        (&["-j", "16", "--chunk-size", "5MiB"][..], 5 << 20),
    ] {
        let before = s.faults().gets();
        let mut all = vec![
            "get",
            "--verify",
            "--json",
            "--memory-budget",
            "64MiB",
            &uri,
        ];
        all.extend_from_slice(args);
        let out = sluice(&s, &all);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["bytes"], size as u64, "{args:?}");
        assert_eq!(summary["range_size"], range, "{args:?}: {summary}");
        let gets = s.faults().gets() - before;
        assert_eq!(gets, (size as u64).div_ceil(range), "{args:?}");
    }
}

/// `sluice get`'s GETs in flight hold their pieces within `--memory-budget` (and `-j`), and
/// a piece larger than the whole budget is read alone rather than waiting for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_keeps_its_pieces_in_flight_within_the_memory_budget() {
    for (budget, chunk, most) in [("8MiB", "2MiB", 4), ("1MiB", "4MiB", 1)] {
        let s = server().await;
        let size = (24 << 20) + 5;
        let uri = insert_pattern(&s, "budget/one.bin", size);
        // Each request waits 50 ms in the server: the GETs allowed at once are there at once.
        s.faults().inject(
            sluice_testserver::Fault::Latency(Duration::from_millis(50)),
            1000,
        );
        let out = sluice(
            &s,
            &[
                "get",
                "--verify",
                "--json",
                "-j",
                "16",
                "--memory-budget",
                budget,
                "--chunk-size",
                chunk,
                "--range-threshold",
                "1MiB",
                &uri,
            ],
        );
        assert!(out.status.success(), "{budget}: {}", text(&out));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["bytes"], size as u64, "{budget}");
        let peak = s.faults().peak_concurrency();
        assert!(
            peak <= most,
            "{budget} of {chunk} pieces: {peak} GETs at once"
        );
        assert!(
            peak >= most.min(2),
            "{budget}: {peak} GETs at once, the budget unused"
        );
    }
}

/// `sluice get` of objects named by URI sends nothing before their GETs: small ones are one
/// GET each, a large one's first range names its size and the rest follow; with `-o` every
/// file is whole and right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_of_named_objects_sends_no_head() {
    let s = server().await;
    let mut uris: Vec<String> = (0..20)
        .map(|i| insert_pattern(&s, &format!("named/small-{i}.bin"), 1000 + i))
        .collect();
    let big = (5 << 20) + 17;
    uris.push(insert_pattern(&s, "named/big.bin", big));
    uris.push(insert_pattern(&s, "named/empty.bin", 0));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut args = vec![
        "get",
        "--verify",
        "--json",
        "--chunk-size",
        "1MiB",
        "--range-threshold",
        "1MiB",
        "-o",
        dir.path().to_str().unwrap(),
    ];
    args.extend(uris.iter().map(String::as_str));
    let out = sluice(&s, &args);
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    let bytes = (0..20).map(|i| 1000 + i).sum::<usize>() + big;
    assert_eq!(summary["bytes"], bytes as u64, "{}", text(&out));
    assert_eq!(summary["objects"], 22, "{}", text(&out));
    assert_eq!(s.faults().heads(), 0, "no HEAD");
    // 20 small objects, 6 ranges of the big one, the empty one asked as a range (416) and
    // then whole: every request a GET.
    assert_eq!(s.faults().requests(), 20 + 6 + 2);
    let got = std::fs::read(dir.path().join("big.bin")).unwrap();
    assert_eq!(got.len(), big);
    sluice_testdata::pattern::verify("named/big.bin", 0, &got)
        .unwrap_or_else(|at| panic!("wrong byte at {at}"));
    assert_eq!(
        std::fs::read(dir.path().join("empty.bin")).unwrap().len(),
        0
    );
    assert_eq!(
        std::fs::read(dir.path().join("small-7.bin")).unwrap(),
        sluice_testdata::pattern::generate("named/small-7.bin", 1007)
    );
}

/// `cp` of one large object to a file reads its ranges in parallel (one GET at a time is one
/// connection's rate) and writes each at its offset: every byte right, one HEAD, the ranges'
/// GETs out together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_downloads_a_large_object_as_parallel_ranges() {
    let s = server().await;
    let size = (40 << 20) + 3;
    let uri = insert_pattern(&s, "down/big.bin", size);
    // Each request waits 50 ms in the server: the GETs sent together are there together.
    s.faults().inject(
        sluice_testserver::Fault::Latency(Duration::from_millis(50)),
        1000,
    );
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("big.bin");
    let out = sluice(&s, &["cp", &uri, path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let got = std::fs::read(&path).unwrap();
    assert_eq!(got.len(), size);
    sluice_testdata::pattern::verify("down/big.bin", 0, &got)
        .unwrap_or_else(|at| panic!("wrong byte at {at}"));
    // 40 MiB in ranges of at most 8 MiB: at least 6 GETs, at least 5 of them at once.
    assert!(s.faults().gets() >= 6, "{} GETs", s.faults().gets());
    let peak = s.faults().peak_concurrency();
    assert!(peak >= 5, "{peak} requests at once");
    assert_eq!(s.faults().heads(), 1, "one HEAD: the size and version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_and_direct_uris_get_put_ls_rm_and_copy_out_under_the_prefix() {
    let s = server().await;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (rel, len) in [("a.bin", 5000usize), ("sub/b.bin", (3 << 20) + 7)] {
        let path = src.join(rel);
        std::fs::write(
            &path,
            sluice_testdata::pattern::generate(path.to_str().unwrap(), len),
        )
        .unwrap();
    }
    for scheme in ["file://", "direct://"] {
        let prefix = format!("{scheme}{}/", src.display());
        let out = dir.path().join(format!("out-{}", &scheme[..4]));
        let g = sluice(
            &s,
            &["get", "--verify", &prefix, "-o", out.to_str().unwrap()],
        );
        assert!(g.status.success(), "{scheme}: {}", text(&g));
        assert!(text(&g).contains("2 objects"), "{}", text(&g));
        // Keys relative to the prefix: the copy lands under -o, not over the source.
        assert_eq!(
            std::fs::read(out.join("sub/b.bin")).unwrap(),
            std::fs::read(src.join("sub/b.bin")).unwrap()
        );
        assert_eq!(std::fs::read(out.join("a.bin")).unwrap().len(), 5000);
        let ls = sluice(&s, &["ls", "-r", &prefix]);
        assert!(
            ls.status.success() && text(&ls).contains("sub/b.bin"),
            "{}",
            text(&ls)
        );
    }
    let put_target = format!("file://{}/put/x.bin", dir.path().display());
    let p = sluice(
        &s,
        &["put", src.join("a.bin").to_str().unwrap(), &put_target],
    );
    assert!(p.status.success(), "{}", text(&p));
    assert_eq!(
        std::fs::read(dir.path().join("put/x.bin")).unwrap().len(),
        5000
    );
    let r = sluice(&s, &["rm", &put_target]);
    assert!(r.status.success(), "{}", text(&r));
    assert!(!dir.path().join("put/x.bin").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_out_refuses_keys_that_leave_the_directory() {
    let s = server().await;
    for key in [
        "p/../../escape",
        "p//etc/x",
        "p/./dot",
        "p/ok/a.bin",
        "p/dir/",
        "p/link/x",
    ] {
        s.insert(DEFAULT_BUCKET, key, b"x".to_vec());
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = dir.path().join("out");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("link")).unwrap();
    let g = sluice(
        &s,
        &["get", "s3://sluice-test/p/", "-o", out.to_str().unwrap()],
    );
    let t = text(&g);
    // Not exit 0: four of the six were not written; each is named with its reason.
    assert_eq!(g.status.code(), Some(2), "{t}");
    assert!(t.contains("4 object(s) not written"), "{t}");
    for (key, why) in [
        ("p/../../escape", "`..`"),
        ("p//etc/x", "absolute"),
        ("p/./dot", "`.`"),
        ("p/link/x", "symlink"),
    ] {
        let line = t
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key}: {t}"));
        assert!(line.contains(why), "{line}");
    }
    // The safe key is written; the marker and the rest write nothing, inside or outside.
    assert_eq!(std::fs::read(out.join("ok/a.bin")).unwrap(), b"x");
    assert!(!out.join("dir").exists());
    assert!(!dir.path().join("escape").exists() && !outside.join("x").exists());
}

/// `get -o` streams: ranges written at their offsets, arriving in any order, make each file
/// whole; a file that cannot be published is named and leaves no temporary file; a
/// corrupted range is found at its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_streams_ranges_into_files_at_their_offsets() {
    let s = server().await;
    let sizes = [
        ("big", (5 << 20) + 3),
        ("one", 1 << 20),
        ("empty", 0),
        ("blocked", 3 << 20),
    ];
    for (name, len) in sizes {
        let key = format!("st/{name}");
        s.insert(
            DEFAULT_BUCKET,
            &key,
            sluice_testdata::pattern::generate(&key, len),
        );
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir_all(dir.path().join("blocked/in-the-way")).unwrap();
    let args = [
        "get",
        "--verify",
        "--chunk-size",
        "1MiB",
        "--range-threshold",
        "1MiB",
        "-j",
        "5",
    ];
    let g = sluice(
        &s,
        &[
            &args[..],
            &["s3://sluice-test/st/", "-o", dir.path().to_str().unwrap()],
        ]
        .concat(),
    );
    let t = text(&g);
    assert_eq!(g.status.code(), Some(2), "{t}");
    assert!(
        t.contains("s3://sluice-test/st/blocked") && t.contains("1 object(s) not written"),
        "{t}"
    );
    for (name, len) in &sizes[..3] {
        let key = format!("st/{name}");
        let got = std::fs::read(dir.path().join(name)).unwrap();
        assert!(
            got == sluice_testdata::pattern::generate(&key, *len),
            "{name}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sluice-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");

    let mut bad = sluice_testdata::pattern::generate("st/big", (5 << 20) + 3);
    bad[(4 << 20) + 17] ^= 1;
    s.insert(DEFAULT_BUCKET, "st/big", bad);
    let g = sluice(&s, &[&args[..], &["s3://sluice-test/st/big"]].concat());
    assert_eq!(g.status.code(), Some(1), "{}", text(&g));
    assert!(
        text(&g).contains(&format!("offset {}", (4 << 20) + 17)),
        "{}",
        text(&g)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_verifies_pattern_objects() {
    let s = server().await;
    s.insert(
        DEFAULT_BUCKET,
        "p/a",
        sluice_testdata::pattern::generate("p/a", 3 << 20),
    );
    let ok = sluice(&s, &["get", "--verify", "s3://sluice-test/p/a"]);
    assert!(ok.status.success(), "{}", text(&ok));
    let mut bad = sluice_testdata::pattern::generate("p/b", 1000);
    bad[500] ^= 1;
    s.insert(DEFAULT_BUCKET, "p/b", bad);
    let out = sluice(&s, &["get", "--verify", "s3://sluice-test/p/b"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("s3://sluice-test/p/b") && text(&out).contains("offset 500"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_of_a_bucket_names_a_missing_one_and_prints_nothing_for_an_empty_one() {
    let s = server().await;
    for backend in ["hyper", "awssdk", "objectstore"] {
        let missing = sluice(&s, &["ls", "--backend", backend, "s3://no-such-bucket"]);
        assert_eq!(
            missing.status.code(),
            Some(3),
            "{backend}: {}",
            text(&missing)
        );
        // HeadBucket where the stack sends it; object_store's has none, and its listing's
        // answer names the bucket instead.
        let says = if backend == "objectstore" {
            "NoSuchBucket"
        } else {
            "the bucket does not exist"
        };
        assert!(
            text(&missing).contains(says),
            "{backend}: {}",
            text(&missing)
        );
        let empty = sluice(&s, &["ls", "--backend", backend, "s3://sluice-test"]);
        assert!(empty.status.success(), "{backend}: {}", text(&empty));
        assert!(empty.stdout.is_empty(), "{backend}: {}", text(&empty));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_with_specific_messages() {
    let s = server().await;
    let cases: &[(&[&str], i32, &[&str])] = &[
        (&["get", "not-a-uri"], 2, &["\"not-a-uri\"", "s3://"]),
        (&["get", "s3://Bad_Bucket/k"], 2, &["Bad_Bucket"]),
        (
            &["get", "s3://no-such-bucket/k"],
            3,
            &["s3://no-such-bucket/k", "NoSuchBucket"],
        ),
        (
            &["get", "s3://sluice-test/missing"],
            3,
            &["s3://sluice-test/missing", "NoSuchKey"],
        ),
        (
            &["ls", "s3://no-such-bucket/"],
            3,
            &["no-such-bucket", "the bucket does not exist"],
        ),
        (
            &["get", "--backend", "nope", "s3://sluice-test/k"],
            2,
            &["nope", "available: hyper"],
        ),
        (
            &[
                "get",
                "--endpoint",
                "http://127.0.0.1:9",
                "s3://sluice-test/k",
            ],
            1,
            &["s3://sluice-test/k", "127.0.0.1:9"],
        ),
        (&["bench", "--shapes", "4by4"], 2, &["4by4"]),
        (
            &["serve", "--profile", "s3-fast"],
            2,
            &["--profile", "s3-fast", "s3-standard, s3-express, on-prem"],
        ),
        (
            &["serve", "--first-byte-latency", "p50=30ms,p99=10ms"],
            2,
            &["--first-byte-latency", "below p50", "p50=30ms,p99=150ms"],
        ),
        (
            &["serve", "--get-latency", "p50=-3ms,p99=10ms"],
            2,
            &["--get-latency", "not a duration"],
        ),
        (
            &["serve", "--request-rate", "get=0/s"],
            2,
            &["--request-rate", "above zero", "get=5500/s"],
        ),
        (
            &["serve", "--connection-bandwidth", "90"],
            2,
            &["--connection-bandwidth", "no unit", "90MB/s"],
        ),
        (
            &["serve", "--rate-partition", "key"],
            2,
            &["--rate-partition", "first-segment or bucket"],
        ),
        (
            &["serve", "--synthetic", "train/img.jpeg:10x5"],
            2,
            &[
                "--synthetic",
                "neither a template with {i} nor a preset",
                "e.g.",
            ],
        ),
        (
            &["serve", "--synthetic", "a/{i}:0x5"],
            2,
            &["--synthetic", "count 0", "e.g."],
        ),
        (
            &["serve", "--synthetic", "a/{i}:10x0"],
            2,
            &["--synthetic", "is 0", "e.g."],
        ),
        (
            &["serve", "--synthetic", "a/{i}:5000000000x1"],
            2,
            &["--synthetic", "between 1 and 4294967295", "e.g."],
        ),
        (
            &["serve", "--sink", "--data-dir", "/tmp"],
            2,
            &["--sink", "--data-dir"],
        ),
    ];
    for (args, code, needles) in cases {
        let out = sluice(&s, args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {t}");
        for n in *needles {
            assert!(t.contains(n), "{args:?}: {t:?} should mention {n:?}");
        }
    }
    let denied = Command::new(BIN)
        .args(["get", "s3://sluice-test/k"])
        .env("AWS_ENDPOINT_URL_S3", s.http_endpoint())
        .env("AWS_ACCESS_KEY_ID", s.access_key())
        .env("AWS_SECRET_ACCESS_KEY", "wrong")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert_eq!(denied.status.code(), Some(4), "{}", text(&denied));
    assert!(text(&denied).contains("SignatureDoesNotMatch"));
    assert!(
        !text(&denied).contains("wrong\n"),
        "the secret is not echoed"
    );
}

/// `sluice serve` on free ports with `args`, once it printed "ready"; and its http endpoint.
fn spawn_serve(args: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--https-addr",
            "127.0.0.1:0",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut endpoint = None;
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 {
        if let Some(e) = line.trim().strip_prefix("http ") {
            endpoint = Some(e.trim().to_owned());
        }
        if line.trim() == "ready" {
            break;
        }
        line.clear();
    }
    (child, endpoint.expect("serve prints its http endpoint"))
}

/// A process's resident memory, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Ten million synthetic objects cost the server their key order (4 bytes each) and the
/// pattern's table, not their bytes: they list, read and verify.
#[test]
fn serve_holds_ten_million_synthetic_objects_in_little_memory() {
    let (mut child, endpoint) = spawn_serve(&["--synthetic", "k/{i}.bin:10000000x1KiB"]);
    let cli = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .args(["--endpoint", &endpoint])
            .env("AWS_ACCESS_KEY_ID", "sluice-test-access")
            .env("AWS_SECRET_ACCESS_KEY", "sluice-test-secret")
            .output()
            .unwrap()
    };
    let got = cli(&[
        "get",
        "--verify",
        "--json",
        "s3://sluice-test/k/9999999.bin",
    ]);
    let listed = cli(&["ls", "s3://sluice-test/k/999999"]);
    let rss = rss_bytes(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(got.status.success(), "{}", text(&got));
    let v: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(v["bytes"], 1024);
    let t = text(&listed);
    assert!(listed.status.success(), "{t}");
    // 999999 and its ten extensions 9999990..9999999, in key order.
    assert_eq!(t.lines().count(), 11, "{t}");
    assert!(t.lines().next().unwrap().contains("k/999999.bin"), "{t}");
    assert!(rss < 300 << 20, "the server holds {} MiB", rss >> 20);
}

/// `ls -r` over 200,000 keys (listed with several pages in flight) prints every key once,
/// in key order, and nothing from beside the prefix.
#[test]
fn ls_recursive_lists_every_key_in_order() {
    let (mut child, endpoint) = spawn_serve(&["--synthetic", "d/{i}.bin:200000x1,dz{i}:1x1"]);
    let listed = Command::new(BIN)
        .args(["ls", "-r", "s3://sluice-test/d/", "--endpoint", &endpoint])
        .env("AWS_ACCESS_KEY_ID", "sluice-test-access")
        .env("AWS_SECRET_ACCESS_KEY", "sluice-test-secret")
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let keys: Vec<&str> = std::str::from_utf8(&listed.stdout)
        .unwrap()
        .lines()
        .map(|l| l.rsplit("s3://sluice-test/").next().unwrap())
        .collect();
    let mut want: Vec<String> = (0..200_000).map(|i| format!("d/{i}.bin")).collect();
    want.sort();
    assert_eq!(keys.len(), want.len());
    assert!(keys.iter().zip(&want).all(|(k, w)| k == w), "key order");
}

#[test]
fn serve_answers_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.json");
    let mut args = vec!["--populate", "2", "--object-size", "1MiB"];
    args.extend(["--profile", "s3-express", "--stats-json"]);
    args.push(stats.to_str().unwrap());
    let (mut child, endpoint) = spawn_serve(&args);

    let got = Command::new(BIN)
        .args([
            "get",
            "--verify",
            "--json",
            "--endpoint",
            &endpoint,
            "s3://sluice-test/bench/",
        ])
        .env("AWS_ACCESS_KEY_ID", "sluice-test-access")
        .env("AWS_SECRET_ACCESS_KEY", "sluice-test-secret")
        .output()
        .unwrap();
    // SIGTERM, as `kill` and scripts/netlab send: the server stops cleanly and reports.
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.wait().unwrap();
    assert!(got.status.success(), "{}", text(&got));
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}");
    let v: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(v["objects"], 2);
    assert_eq!(v["bytes"], 2 << 20);
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(s["profile"], "s3-express");
    assert!(s["requests"]["get"].as_u64().unwrap() >= 2, "{s}");
    assert!(s["requests"]["list"].as_u64().unwrap() >= 1, "{s}");
    assert!(s["bytes_sent"].as_u64().unwrap() >= 2 << 20, "{s}");
    let p50 = s["first_byte_latency_ms"]["get"]["p50"].as_f64().unwrap();
    assert!(
        (0.5..20.0).contains(&p50),
        "s3-express applies single-digit ms: {s}"
    );
}

#[test]
fn bench_runs_end_to_end_and_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let svg = dir.path().join("bench.svg");
    let out = Command::new(BIN)
        .args([
            "bench", "--count", "4", "--size", "1MiB", "--shapes", "1x2,2x2", "--epochs", "2",
            "--json",
        ])
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let hyper: Vec<&serde_json::Value> = rows.iter().filter(|r| r["client"] == "hyper").collect();
    assert_eq!(hyper.len(), 2);
    for r in &hyper {
        assert_eq!(
            r["bytes"].as_u64().unwrap(),
            4 * (1 << 20),
            "the last pass read every byte of every shard: {r}"
        );
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["first_epoch_mb_per_s"].as_f64().is_some());
        // Each object of the last pass timed: 4 objects, merged over the shape's processes.
        let lat = &r["latency"];
        assert!(lat["p50_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(lat["max_ms"].as_f64() >= lat["p99_ms"].as_f64(), "{r}");
        let counted: u64 = r["latency_us"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_u64().unwrap())
            .sum();
        assert_eq!(counted, 4, "{r}");
    }
    let curl = rows.iter().find(|r| r["client"] == "curl").unwrap();
    assert!(curl["latency"]["p50_ms"].as_f64().unwrap() > 0.0, "{curl}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("2x2"),
        "the plot labels the shapes"
    );
}

/// The bad-input catalogue through the binary, for every backend: each case ends within its
/// timeouts with exit 0 and the object's size (a right answer) or a non-zero exit and a
/// message naming the object (never a panic, never exit 0 for a wrong answer), and nothing
/// printed shows a secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_catalogue_through_the_cli() {
    use sluice_testserver::hostile::HostileServer;
    use sluice_testserver::hostile_cases::{
        ACCESS_KEY, Expect, Op, SECRET_KEY, SESSION_TOKEN, catalogue,
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut failures = Vec::new();
    for backend in ["hyper", "awssdk", "objectstore"] {
        for case in catalogue() {
            let args: Vec<String> = match case.op {
                // Corruption a checksum reveals: kept (`-o`), as bytes only counted are not
                // there to check.
                Op::Get if matches!(case.expect, Expect::Checked(..)) => {
                    let out = dir.path().join(format!("{backend}-{}", case.name));
                    vec![
                        "get".into(),
                        "-o".into(),
                        out.display().to_string(),
                        "s3://bkt/k".into(),
                    ]
                }
                Op::Get => vec!["get".into(), "s3://bkt/k".into()],
                Op::List => vec!["ls".into(), "-r".into(), "s3://bkt/p/".into()],
                Op::Put(n) => {
                    let file = dir.path().join(format!("put-{n}"));
                    std::fs::write(&file, vec![7u8; n]).unwrap();
                    vec![
                        "put".into(),
                        file.display().to_string(),
                        "s3://bkt/k".into(),
                    ]
                }
                // No ranged get or stat in the CLI.
                Op::GetRange(..) | Op::Head => continue,
            };
            let server = HostileServer::start(std::sync::Arc::new(case.script))
                .await
                .unwrap();
            let t = Instant::now();
            let endpoint = server.endpoint().to_owned();
            let out = tokio::task::spawn_blocking(move || {
                Command::new(BIN)
                    .args(&args)
                    .env("S3_BACKEND", backend)
                    .env("AWS_ENDPOINT_URL_S3", endpoint)
                    .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
                    .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
                    .env("AWS_SESSION_TOKEN", SESSION_TOKEN)
                    .env("AWS_REGION", "us-east-1")
                    .env("AWS_EC2_METADATA_DISABLED", "true")
                    .env("SLUICE_MAX_ATTEMPTS", "2")
                    .env("SLUICE_CONNECT_TIMEOUT", "2")
                    .env("SLUICE_FIRST_BYTE_TIMEOUT", "2")
                    .env("SLUICE_STALL_TIMEOUT", "1")
                    .env_remove("AWS_PROFILE")
                    .stdin(Stdio::null())
                    .output()
                    .expect("sluice runs")
            })
            .await
            .unwrap();
            let all = text(&out);
            let code = out.status.code();
            println!("CATALOGUE\tcli-{backend}\t{}\texit {code:?}", case.name);
            let ok_expected = match case.expect {
                Expect::Ok(_) | Expect::Listed(_) | Expect::Done => Some(true),
                Expect::Error(_) => Some(false),
                Expect::OkOr(..) | Expect::ListedOr(..) => None,
                Expect::Checked(_, unchecked) => Some(unchecked.contains(&backend)),
            };
            let mut why = Vec::new();
            if t.elapsed() > Duration::from_secs(40) {
                why.push(format!("took {:?}", t.elapsed()));
            }
            if code == Some(101) || all.contains("panicked") {
                why.push("panicked".into());
            }
            if all.contains(SECRET_KEY) || all.contains(SESSION_TOKEN) {
                why.push("printed a secret".into());
            }
            match (ok_expected, code) {
                (Some(true), Some(0)) | (None, Some(0)) => {
                    // Unchecked corruption may come back at any length.
                    let whole = !matches!(case.expect, Expect::Checked(..));
                    if matches!(case.op, Op::Get) && whole && !all.contains("100 bytes") {
                        why.push("exit 0 without the 100 bytes".into());
                    }
                }
                (Some(false) | None, Some(c)) if c != 0 => {
                    if !all.contains("s3://bkt/") {
                        why.push("the error does not name the object".into());
                    }
                }
                _ => why.push(format!(
                    "exit {code:?} where {:?} was expected",
                    case.expect
                )),
            }
            if !why.is_empty() {
                failures.push(format!(
                    "{backend} {}: {} — {:.300}",
                    case.name,
                    why.join(", "),
                    all
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A listing that claims an impossible size: `get` of the prefix fails naming what is at
/// fault, never aborts and never exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_of_a_listing_with_an_impossible_size_fails_clearly() {
    use sluice_testserver::hostile::HostileServer;
    use sluice_testserver::hostile_cases::catalogue;
    let case = catalogue()
        .into_iter()
        .find(|c| c.name == "listing_size_u64_max")
        .unwrap();
    let server = HostileServer::start(std::sync::Arc::new(case.script))
        .await
        .unwrap();
    for backend in ["hyper", "awssdk", "objectstore"] {
        let endpoint = server.endpoint().to_owned();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(BIN)
                .args(["get", "s3://bkt/p/"])
                .env("S3_BACKEND", backend)
                .env("AWS_ENDPOINT_URL_S3", endpoint)
                .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
                .env("AWS_SECRET_ACCESS_KEY", "secret")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env_remove("AWS_PROFILE")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let t = text(&out);
        assert!(
            !out.status.success() && out.status.code() != Some(101),
            "{backend}: {t}"
        );
        // The object refused when read, or (awssdk, which parses sizes as i64) the listing.
        assert!(t.contains("s3://bkt/p/"), "{backend}: {t}");
    }
}

/// Two test servers over one directory (one store, two nodes) holding `objects`: written
/// through the first, and the second started after, as a server reads the directory when it
/// starts.
async fn two_nodes(objects: Vec<(String, Vec<u8>)>) -> (tempfile::TempDir, TestServer, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let opts = || ServerOptions {
        data_dir: Some(dir.path().to_owned()),
        ..ServerOptions::default()
    };
    let a = TestServer::start(opts()).await.unwrap();
    for (key, data) in objects {
        a.insert(DEFAULT_BUCKET, &key, data);
    }
    let b = TestServer::start(opts()).await.unwrap();
    (dir, a, b)
}

/// `--endpoints`: two servers over one directory (one store, two nodes) and a third
/// endpoint where nothing listens. Every object is read and verified, both live nodes
/// serve, and the refusing one costs only retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_spreads_over_endpoints_and_goes_around_a_dead_one() {
    let (_dir, a, b) = two_nodes(
        (0..8)
            .map(|i| {
                let key = format!("m/{i}");
                let data = sluice_testdata::pattern::generate(&key, 300_000 + i);
                (key, data)
            })
            .collect(),
    )
    .await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let endpoints = format!("{},{dead},{}", a.http_endpoint(), b.http_endpoint());
    let out = sluice(
        &a,
        &[
            "get",
            "--verify",
            "--json",
            "--endpoints",
            &endpoints,
            "s3://sluice-test/m/",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // One JSON line per endpoint, in the order given.
    let per: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("endpoint").is_some())
        .collect();
    assert_eq!(per.len(), 3, "{}", text(&out));
    let total: u64 = (0..8).map(|i| 300_000 + i).sum();
    assert_eq!(
        per[0]["bytes_read"].as_u64().unwrap() + per[2]["bytes_read"].as_u64().unwrap(),
        total
    );
    assert_eq!(per[1]["bytes_read"].as_u64(), Some(0));
    assert!(per[1]["failures"].as_u64().unwrap() >= 1, "{per:?}");
    assert!(
        a.faults().gets() > 0 && b.faults().gets() > 0,
        "both live nodes serve: {} and {} GETs",
        a.faults().gets(),
        b.faults().gets()
    );
    assert_eq!(a.faults().gets() + b.faults().gets(), 8);
}

/// `bench --uri --endpoints`: two servers over one directory. Spread, each worker's requests
/// go to both and the row's per-endpoint bytes add up to what was read; with
/// `--pin-endpoints`, rank r uses endpoint r % 2 alone, so each serves one rank's shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_counts_per_endpoint_and_pins_ranks() {
    let size = 1 << 20;
    let (dir, a, b) = two_nodes(
        (0..4)
            .map(|i| (format!("d/{i}"), vec![i as u8; size]))
            .collect(),
    )
    .await;
    let endpoints = format!("{},{}", a.http_endpoint(), b.http_endpoint());
    let run = |pin: bool| {
        let json = dir.path().join(format!("bench-{pin}.json"));
        let mut args = vec![
            "bench",
            "--uri",
            "s3://sluice-test/d/",
            "--endpoints",
            &endpoints,
            "--no-curl",
            "--shapes",
            "2x2",
            "--epochs",
            "1",
            "--backends",
            "hyper",
            "--json",
        ];
        let path = json.to_str().unwrap().to_owned();
        args.push(&path);
        if pin {
            args.push("--pin-endpoints");
        }
        let out = sluice(&a, &args);
        assert!(out.status.success(), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let per = v["rows"][0]["endpoints"].as_array().unwrap().clone();
        (per, text(&out))
    };
    let (spread, out) = run(false);
    assert_eq!(spread.len(), 2, "{out}");
    let read: Vec<u64> = spread
        .iter()
        .map(|e| e["bytes_read"].as_u64().unwrap())
        .collect();
    assert_eq!(read.iter().sum::<u64>(), 4 * size as u64, "{spread:?}");
    assert!(
        read.iter().all(|&r| r > 0),
        "both serve when spread: {spread:?}"
    );
    assert!(
        out.contains("endpoint http://127.0.0.1"),
        "the table names the endpoints: {out}"
    );

    let (pinned, out) = run(true);
    assert_eq!(pinned.len(), 2, "{out}");
    for e in &pinned {
        assert_eq!(
            e["bytes_read"].as_u64(),
            Some(2 * size as u64),
            "one rank's shard each: {pinned:?}"
        );
    }
}

/// `-v` shows sluice's retries on stderr; quiet by default; a bad `--log-level` is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_logs_retries_and_a_bad_level_is_named() {
    let s = server().await;
    s.insert(DEFAULT_BUCKET, "logged", vec![1u8; 1000]);
    s.faults().inject(sluice_testserver::Fault::SlowDown, 1);
    let out = sluice(&s, &["-v", "get", "s3://sluice-test/logged"]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    // The GET is the first request: its retry is logged as the GET's resumption.
    assert!(
        (err.contains("retrying") || err.contains("resuming GET")) && err.contains("SlowDown"),
        "{err}"
    );

    s.faults().inject(sluice_testserver::Fault::SlowDown, 1);
    let out = sluice(&s, &["get", "s3://sluice-test/logged"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("retrying"),
        "{}",
        text(&out)
    );

    let out = sluice(&s, &["--log-level", "loud", "ls", "s3://sluice-test/"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--log-level") && text(&out).contains("loud"),
        "{}",
        text(&out)
    );
}

fn cp_json(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// `cp` both ways, recursive, wildcards and filters, no-clobber, dry runs, and a key that
/// cannot be a local file name; every byte compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_copies_both_ways_with_wildcards_filters_and_no_clobber() {
    let s = server().await;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub/deeper")).unwrap();
    let files = [
        ("a.npz", 6 << 20),
        ("b.txt", 10),
        ("sub/c.npz", 0),
        ("sub/deeper/d.npz", 123_457),
    ];
    for (name, len) in files {
        std::fs::write(
            src.join(name),
            sluice_testdata::pattern::generate(name, len),
        )
        .unwrap();
    }
    // One file up, one back.
    let one = sluice(
        &s,
        &[
            "cp",
            src.join("a.npz").to_str().unwrap(),
            "s3://sluice-test/cp/one.npz",
        ],
    );
    assert!(one.status.success(), "{}", text(&one));
    let back = dir.path().join("one.npz");
    let got = sluice(
        &s,
        &["cp", "s3://sluice-test/cp/one.npz", back.to_str().unwrap()],
    );
    assert!(got.status.success(), "{}", text(&got));
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(src.join("a.npz")).unwrap()
    );

    // A directory up and down again, as JSON lines.
    let up = sluice(
        &s,
        &[
            "cp",
            "-r",
            "--json",
            src.to_str().unwrap(),
            "s3://sluice-test/cp/tree/",
        ],
    );
    assert!(up.status.success(), "{}", text(&up));
    let lines = cp_json(&up);
    assert_eq!(lines.len(), 4);
    assert!(lines.iter().all(|l| l["status"] == "copied"), "{lines:?}");
    let down = dir.path().join("down");
    let got = sluice(
        &s,
        &[
            "cp",
            "-r",
            "s3://sluice-test/cp/tree/",
            down.to_str().unwrap(),
        ],
    );
    assert!(got.status.success(), "{}", text(&got));
    for (name, _) in files {
        assert_eq!(
            std::fs::read(down.join(name)).unwrap(),
            std::fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }

    // S3 to S3 is copied by the server: no object's bytes come through (no GET).
    let gets = s.faults().gets();
    let copied = sluice(
        &s,
        &[
            "cp",
            "-r",
            "--json",
            "s3://sluice-test/cp/tree/",
            "s3://sluice-test/cp/copy/",
        ],
    );
    assert!(copied.status.success(), "{}", text(&copied));
    assert_eq!(cp_json(&copied).len(), 4);
    assert_eq!(s.faults().gets(), gets, "a server-side copy reads nothing");
    for (name, _) in files {
        let obj = s.storage().get(DEFAULT_BUCKET, &format!("cp/copy/{name}"));
        assert_eq!(
            obj.unwrap().data,
            std::fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }

    // A wildcard with an exclusion; a dry run writes nothing.
    let only = dir.path().join("only");
    let args = [
        "cp",
        "--json",
        "--exclude",
        "sub/deeper/*",
        "s3://sluice-test/cp/tree/*.npz",
    ];
    let dry = sluice(
        &s,
        &[&args[..], &["--dry-run", only.to_str().unwrap()]].concat(),
    );
    assert!(dry.status.success(), "{}", text(&dry));
    assert_eq!(cp_json(&dry).len(), 2);
    assert!(!only.exists(), "a dry run copies nothing");
    let got = sluice(&s, &[&args[..], &[only.to_str().unwrap()]].concat());
    let mut copied: Vec<String> = cp_json(&got)
        .iter()
        .map(|l| l["destination"].as_str().unwrap().to_owned())
        .collect();
    copied.sort();
    let want: Vec<String> = ["a.npz", "sub/c.npz"]
        .iter()
        .map(|n| format!("file://{}/{n}", only.display()))
        .collect();
    assert_eq!(copied, want);

    // --no-clobber leaves what exists.
    std::fs::write(only.join("a.npz"), b"mine").unwrap();
    let again = sluice(
        &s,
        &[
            "cp",
            "-n",
            "--json",
            "s3://sluice-test/cp/tree/a.npz",
            only.join("a.npz").to_str().unwrap(),
        ],
    );
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(cp_json(&again)[0]["status"], "skipped (exists)");
    assert_eq!(std::fs::read(only.join("a.npz")).unwrap(), b"mine");

    // A key that is no safe file name fails alone; the rest is copied; the exit says so.
    s.insert(DEFAULT_BUCKET, "cp/bad/ok", b"fine".to_vec());
    s.insert(DEFAULT_BUCKET, "cp/bad/x/../../escape", b"no".to_vec());
    s.insert(DEFAULT_BUCKET, "cp/bad/link/f", b"no".to_vec());
    let bad = dir.path().join("bad");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, bad.join("link")).unwrap();
    let got = sluice(
        &s,
        &[
            "cp",
            "-r",
            "s3://sluice-test/cp/bad/",
            bad.to_str().unwrap(),
        ],
    );
    assert_eq!(got.status.code(), Some(1), "{}", text(&got));
    let t = text(&got);
    assert!(
        t.contains("..") && t.contains("symlink") && t.contains("2 of 3"),
        "{t}"
    );
    assert_eq!(std::fs::read(bad.join("ok")).unwrap(), b"fine");
    assert!(!dir.path().join("escape").exists());
    assert!(
        !elsewhere.join("f").exists(),
        "nothing written through the symlink"
    );

    // A prefix without --recursive is named.
    let got = sluice(
        &s,
        &["cp", "s3://sluice-test/cp/tree/", bad.to_str().unwrap()],
    );
    assert_eq!(got.status.code(), Some(2), "{}", text(&got));
    assert!(text(&got).contains("--recursive"), "{}", text(&got));
}

/// `cp FILE URI` of a file of many parts: each part goes with the CRC taken as the file was
/// read, which the server checks (400 BadDigest on a mismatch), as it checks the whole
/// object's at Complete; part sizes that divide the read chunk and ones that do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_of_a_file_sends_each_part_with_the_crc_taken_as_it_was_read() {
    let s = server().await;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("big.bin");
    let data = sluice_testdata::pattern::generate("cp/big", (37 << 20) + 3);
    std::fs::write(&path, &data).unwrap();
    for part in ["5MiB", "7MiB"] {
        let key = format!("cp/big-{part}");
        let up = command(&s)
            .args([
                "cp",
                path.to_str().unwrap(),
                &format!("s3://sluice-test/{key}"),
            ])
            .env("SLUICE_MULTIPART_THRESHOLD", "5MiB")
            .env("SLUICE_MULTIPART_PART_SIZE", part)
            .env("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
            .output()
            .unwrap();
        assert!(up.status.success(), "{part}: {}", text(&up));
        let stored = s.storage().get(DEFAULT_BUCKET, &key).unwrap();
        assert!(
            stored.data == data,
            "{part}: the object is the file's bytes"
        );
    }
}

/// `cp - URI` reads stdin into one object (streamed, multipart when large); `cp URI -`
/// writes it to stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_pipes_stdin_and_stdout() {
    use std::io::Write;
    let s = server().await;
    let data = sluice_testdata::pattern::generate("piped", (17 << 20) + 3);
    let mut child = Command::new(BIN)
        .args(["cp", "-", "s3://sluice-test/piped.bin"])
        .env("AWS_ENDPOINT_URL_S3", s.http_endpoint())
        .env("AWS_ACCESS_KEY_ID", s.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s.secret_key())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("SLUICE_MULTIPART_PART_SIZE", "5MiB")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let up = child.wait_with_output().unwrap();
    assert!(up.status.success(), "{}", text(&up));
    let down = sluice(&s, &["cp", "s3://sluice-test/piped.bin", "-"]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(down.stdout == data, "stdout carries the object's bytes");
    let many = sluice(&s, &["cp", "-r", "s3://sluice-test/", "-"]);
    assert_eq!(many.status.code(), Some(2), "{}", text(&many));
}

/// `rm -r` deletes everything under a prefix (a dry run nothing), one JSON line each, in
/// DeleteObjects requests of 1,000 keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_recursive_with_a_dry_run_first() {
    let s = server().await;
    let n = 2_030;
    for i in 0..n {
        s.insert(DEFAULT_BUCKET, &format!("gone/{i}"), vec![0u8; 10]);
    }
    s.insert(DEFAULT_BUCKET, "kept", vec![0u8; 10]);
    let dry = sluice(
        &s,
        &["rm", "-r", "--dry-run", "--json", "s3://sluice-test/gone/"],
    );
    assert!(dry.status.success(), "{}", text(&dry));
    assert_eq!(cp_json(&dry).len(), n);
    assert!(cp_json(&dry).iter().all(|l| l["status"] == "would delete"));
    let keys = || s.storage().keys(DEFAULT_BUCKET).unwrap();
    assert_eq!(keys().len(), n + 1, "a dry run deletes nothing");
    let before = s.faults().requests();
    let out = sluice(&s, &["rm", "-r", "s3://sluice-test/gone/"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(keys(), vec!["kept".to_string()]);
    // 3 listing pages and 3 DeleteObjects, not one request per object.
    assert_eq!(s.faults().requests() - before, 6);
}

/// Shell completions name the subcommands; `--no-sign-request` reads a public bucket with
/// no credentials at all; `--profile` wins over keys in the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_unsigned_requests_and_profiles() {
    let out = Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("complete") && script.contains("cp") && script.contains("bench"));

    let s = server().await;
    s.insert("sluice-public", "open/x", b"public".to_vec());
    s.insert(DEFAULT_BUCKET, "private/x", b"private".to_vec());
    let anon = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .args(["--no-sign-request", "--endpoint", &s.http_endpoint()])
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap()
    };
    let got = anon(&["cp", "s3://sluice-public/open/x", "-"]);
    assert!(got.status.success(), "{}", text(&got));
    assert_eq!(got.stdout, b"public");
    let denied = anon(&["cp", "s3://sluice-test/private/x", "-"]);
    assert_eq!(denied.status.code(), Some(4), "{}", text(&denied));

    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("credentials");
    std::fs::write(
        &creds,
        format!(
            "[training]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            s.access_key(),
            s.secret_key()
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("config"), "").unwrap();
    let with = |profile: Option<&str>| {
        let mut c = Command::new(BIN);
        c.args([
            "ls",
            "s3://sluice-test/private/",
            "--endpoint",
            &s.http_endpoint(),
        ])
        .env("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG")
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret-wrong-secret")
        .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
        .env("AWS_CONFIG_FILE", dir.path().join("config"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
        if let Some(p) = profile {
            c.args(["--profile", p]);
        }
        c.output().unwrap()
    };
    assert_eq!(
        with(None).status.code(),
        Some(4),
        "the environment's wrong keys"
    );
    let ok = with(Some("training"));
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("private/x"));
}

/// `sluice rm -r file:///tree/` is a local operation: it looks up no AWS configuration (no
/// connection to the instance metadata service, no warning about its absence or about
/// missing profile files), and never deletes outside the tree through a symlinked directory.
#[test]
fn a_local_rm_stays_local_and_inside_its_tree() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(tree.join("sub/own"), b"mine").unwrap();
    std::fs::write(elsewhere.join("victim"), b"keep").unwrap();
    std::os::unix::fs::symlink(&elsewhere, tree.join("link")).unwrap();
    // A stand-in metadata service: any connection to it is a lookup that should not be.
    let imds = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    imds.set_nonblocking(true).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let uri = format!("file://{}/", tree.display());
    let out = Command::new(BIN)
        .args(["rm", "-r", &uri])
        .env("HOME", &home)
        .env(
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            format!("http://{}", imds.local_addr().unwrap()),
        )
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_CONFIG_FILE")
        .env_remove("AWS_SHARED_CREDENTIALS_FILE")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("deleted") && t.contains("sub/own"), "{t}");
    assert!(
        !t.contains("WARN"),
        "a local rm warns about AWS configuration: {t}"
    );
    assert!(
        imds.accept().is_err(),
        "a local rm connected to the instance metadata service"
    );
    assert_eq!(std::fs::read(elsewhere.join("victim")).unwrap(), b"keep");
    assert!(!tree.join("sub/own").exists());

    // A prefix that is not a directory: what starts with it goes, its neighbours stay.
    std::fs::create_dir_all(tree.join("pre1")).unwrap();
    for f in ["pre1/x", "pre2.txt", "other"] {
        std::fs::write(tree.join(f), b"f").unwrap();
    }
    let out = Command::new(BIN)
        .args(["rm", "-r", &format!("file://{}/pre", tree.display())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!tree.join("pre1/x").exists() && !tree.join("pre2.txt").exists());
    assert!(tree.join("other").exists());
}

/// A writer killed with SIGKILL mid-upload leaves no object, only its multipart upload,
/// which `rm --incomplete-uploads` lists (every stack that can) and aborts, sparing it while
/// it is younger than `--older-than`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_mid_upload_leaves_only_an_upload_that_rm_aborts() {
    use std::io::Write;
    let s = server().await;
    let prefix = "s3://sluice-test/ckpt/";
    let mut writer = command(&s)
        .args(["cp", "-", "s3://sluice-test/ckpt/model.pt"])
        .env("SLUICE_MULTIPART_THRESHOLD", "5MiB")
        .env("SLUICE_MULTIPART_PART_SIZE", "5MiB")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    stdin.write_all(&vec![7u8; 12 << 20]).unwrap(); // two parts' worth: the upload has begun
    let listed = |backend: &str| {
        let out = sluice(
            &s,
            &[
                "rm",
                "--incomplete-uploads",
                "--dry-run",
                "--json",
                "--backend",
                backend,
                prefix,
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let t = Instant::now();
    while listed("hyper") == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the upload never began"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    writer.kill().unwrap(); // SIGKILL: no destructor, no abort
    writer.wait().unwrap();
    drop(stdin);

    let ls = sluice(&s, &["ls", "-r", prefix]);
    assert!(
        ls.status.success() && ls.stdout.is_empty(),
        "an object is visible: {}",
        text(&ls)
    );
    assert_eq!(listed("awssdk"), 1, "listed through the AWS SDK too");
    let young = sluice(
        &s,
        &["rm", "--incomplete-uploads", "--older-than", "1h", prefix],
    );
    assert!(
        young.status.success() && young.stdout.is_empty(),
        "{}",
        text(&young)
    );
    assert_eq!(listed("hyper"), 1, "spared while younger than --older-than");

    let out = sluice(&s, &["rm", "--incomplete-uploads", "--json", prefix]);
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["status"], "aborted");
    assert_eq!(lines[0]["uri"], "s3://sluice-test/ckpt/model.pt");
    assert_eq!(listed("hyper"), 0, "nothing left");

    // A client stack that cannot list uploads says so, naming itself.
    let no = sluice(
        &s,
        &[
            "rm",
            "--incomplete-uploads",
            "--backend",
            "objectstore",
            prefix,
        ],
    );
    assert!(
        !no.status.success() && text(&no).contains("objectstore"),
        "{}",
        text(&no)
    );
}

/// `az://` and `gs://` with none of their clouds' configuration: refused before any request,
/// naming what to set (no emulator needed; `tests/clouds.rs` runs them against one).
#[test]
fn azure_and_gcs_without_configuration_say_what_to_set() {
    let home = tempfile::tempdir().unwrap();
    let run = |uri: &str, env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(["ls", uri]).env("HOME", home.path());
        for (k, _) in std::env::vars() {
            if k.starts_with("AZURE_") || k.starts_with("GOOGLE_") || k == "STORAGE_EMULATOR_HOST" {
                c.env_remove(k);
            }
        }
        c.envs(env.iter().copied());
        let out = c.output().unwrap();
        assert!(!out.status.success(), "{uri}: {}", text(&out));
        text(&out)
    };
    let msg = run("az://train/x/", &[]);
    assert!(msg.contains("AZURE_STORAGE_ACCOUNT_NAME"), "{msg}");
    let msg = run("az://train/x/", &[("AZURE_STORAGE_ACCOUNT", "acct")]);
    assert!(
        msg.contains("az://train/x/")
            && msg.contains("AZURE_STORAGE_ACCOUNT_KEY")
            && msg.contains("AZURE_STORAGE_CONNECTION_STRING"),
        "{msg}"
    );
    let msg = run("gs://bkt/x/", &[]);
    assert!(
        msg.contains("gs://bkt/x/")
            && msg.contains("GOOGLE_APPLICATION_CREDENTIALS")
            && msg.contains("STORAGE_EMULATOR_HOST"),
        "{msg}"
    );
    let msg = run("ftp://bkt/x", &[]);
    assert!(
        msg.contains("az://container/key") && msg.contains("gs://bucket/key"),
        "{msg}"
    );
}
