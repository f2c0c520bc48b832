//! The reference row: `curl` reading the same objects one after another in one process.

use super::report::Row;
use super::server::pinned;
use crate::output::{Failure, cpu_s_per_gb, mb_per_sec};
use crate::rusage;
use sluice_core::StoreConfig;
use sluice_loader::Dataset;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

pub(super) async fn curl_row(
    endpoint: &str,
    cfg: &StoreConfig,
    keys: Option<&(String, String)>,
    dataset: &Dataset,
    total: u64,
    cpus: Option<&str>,
) -> Result<Row, Failure> {
    eprintln!("curl: 1 process, one object after another ...");
    let (ak, sk) = match keys {
        Some((a, s)) => (a.clone(), s.clone()),
        None => match cfg.credentials.get(endpoint).await? {
            Some(c) => (
                c.access_key_id().to_owned(),
                c.secret_access_key().to_owned(),
            ),
            None => (String::new(), String::new()),
        },
    };
    let ca = cfg.ca_bundle.as_deref();
    let mut cmd = pinned(cpus, Path::new("curl"));
    let region = &cfg.region;
    cmd.args([
        "--http1.1",
        "-sS",
        "--fail",
        "--aws-sigv4",
        &format!("aws:amz:{region}:s3"),
        "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD",
    ]);
    // Credentials go to curl on its standard input (`-K -`), never on its command line,
    // where any user of the machine could read them in the process list.
    cmd.args(["-K", "-"]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    let base = endpoint.trim_end_matches('/');
    for item in dataset.items() {
        cmd.args(["-o", "/dev/null"]).arg(format!(
            "{base}/{}/{}",
            item.uri.bucket(),
            item.uri.key()
        ));
    }
    let before = rusage::children();
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
    {
        use std::io::Write;
        let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
        let mut stdin = child.stdin.take().expect("stdin was piped");
        writeln!(stdin, "user = \"{}:{}\"", quote(&ak), quote(&sk))
            .map_err(|e| Failure::Other(format!("passing credentials to curl: {e}")))?;
    }
    let status = child
        .wait()
        .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
    let secs = t0.elapsed().as_secs_f64();
    if !status.success() {
        return Err(Failure::Other(format!("curl failed: {status}")));
    }
    let after = rusage::children();
    let mb = mb_per_sec(total, secs);
    Ok(Row {
        client: "curl".into(),
        processes: 1,
        prefetch: 1,
        bytes: total,
        seconds: secs,
        mb_per_s: mb,
        per_process_mb_per_s: mb,
        batch_gap_p50_ms: 0.0,
        batch_gap_max_ms: 0.0,
        cpu_s_per_gb: cpu_s_per_gb(after.cpu_seconds - before.cpu_seconds, total),
        // RUSAGE_CHILDREN's peak is the largest of every child so far, not curl's own.
        peak_rss_mb: 0.0,
        first_epoch_mb_per_s: None,
        endpoints: Vec::new(),
    })
}
