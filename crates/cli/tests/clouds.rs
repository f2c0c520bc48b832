//! `sluice cp/ls/get/rm` on `az://` (Azurite) and `gs://` (fake-gcs-server), as a user runs
//! them with the emulators' variables set (`scripts/emulators start`; scripts/test does it).
//! fake-gcs-server refuses object_store's PUT (see crates/sluice/tests/clouds.rs), so on
//! `gs://` the objects are put through its JSON API and the CLI lists, reads and deletes them.

use std::path::Path;
use std::process::{Command, Output};

mod common;
use common::text;

const BIN: &str = env!("CARGO_BIN_EXE_sluice");

fn sluice(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    assert!(out.status.success(), "sluice {args:?}: {}", text(&out));
    out
}

fn bucket() -> String {
    std::env::var("SLUICE_CLOUD_BUCKET").expect(
        "SLUICE_CLOUD_BUCKET is not set: scripts/emulators start, then source target/emulators/env",
    )
}

/// A prefix of this test's own.
fn prefix(scheme: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{scheme}{}/cli-{}-{nanos}/", bucket(), std::process::id())
}

fn write_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    // 9 MiB + 1 is above the multipart threshold (8 MiB): a block list on Azure.
    let files = vec![
        (
            "big.bin".to_owned(),
            sluice_testdata::pattern::generate("big", (9 << 20) + 1),
        ),
        ("sub/a.txt".to_owned(), b"hello".to_vec()),
    ];
    for (rel, data) in &files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    files
}

fn read_back(out: &Path, files: &[(String, Vec<u8>)]) {
    for (rel, data) in files {
        let got = std::fs::read(out.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(got == *data, "{rel}: the bytes read back differ");
    }
}

fn listed(prefix: &str) -> String {
    String::from_utf8(sluice(&["ls", "-r", prefix]).stdout).unwrap()
}

/// `files` under `prefix` as a user sees them: `ls -r` names each with its size, `get -o`
/// into `dir/out` gives their bytes back, and `rm -r` leaves nothing.
fn list_read_and_remove(prefix: &str, files: &[(String, Vec<u8>)], dir: &Path) {
    let ls = listed(prefix);
    for (rel, data) in files {
        let line = format!("{}  {prefix}{rel}", data.len());
        assert!(
            ls.lines().any(|l| l.trim_start() == line),
            "{line:?} in {ls}"
        );
    }
    let out = dir.join("out");
    sluice(&["get", "-o", out.to_str().unwrap(), prefix]);
    read_back(&out, files);
    sluice(&["rm", "-r", prefix]);
    assert_eq!(listed(prefix).trim(), "", "nothing left under {prefix}");
}

#[test]
fn copy_list_get_and_remove_on_azure() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_tree(&dir.path().join("src"));
    let p = prefix("az://");
    let src = format!("{}/", dir.path().join("src").display());
    sluice(&["cp", "-r", &src, &p]);
    list_read_and_remove(&p, &files, dir.path());
}

#[test]
fn list_get_and_remove_on_gcs() {
    let p = prefix("gs://");
    let base = std::env::var("SLUICE_FAKE_GCS_URL").expect("SLUICE_FAKE_GCS_URL is set");
    let dir = tempfile::tempdir().unwrap();
    let files = write_tree(&dir.path().join("src"));
    let (_, under) = p.split_once(&format!("gs://{}/", bucket())).unwrap();
    for (rel, _) in &files {
        let name = format!("{under}{rel}").replace('/', "%2F");
        let url = format!(
            "{base}/upload/storage/v1/b/{}/o?uploadType=media&name={name}",
            bucket()
        );
        let src = format!("@{}", dir.path().join("src").join(rel).display());
        let o = Command::new("curl")
            .args([
                "-sf",
                "-o",
                "/dev/null",
                "-X",
                "POST",
                "--data-binary",
                &src,
                &url,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "seeding {rel}: {}", text(&o));
    }
    list_read_and_remove(&p, &files, dir.path());
}
