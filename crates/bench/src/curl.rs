//! The reference rows: `curl` reading the same objects one after another in one process
//! (`curl_row`, beside the reader shapes), and curl making the GETs and PUTs of `small` and
//! `put` with `--parallel` (`curl_ops_row`), each transfer's time from its `-w` line.

use super::args::Prefetch;
use super::latency::Latency;
use super::ops::{OpStats, OpsReport, Stopped};
use super::report::Row;
use super::server::pinned;
use super::workload::Op;
use sluice_console::output::{Failure, cpu_s_per_gb, mb_per_sec};
use sluice_console::rusage;
use sluice_core::{ObjectUri, StoreConfig};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Where curl sends its requests and how it signs them.
pub(super) struct CurlTarget<'a> {
    pub endpoint: &'a str,
    pub cfg: &'a StoreConfig,
    pub keys: Option<&'a (String, String)>,
    pub cpus: Option<&'a str>,
}

/// One transfer of a curl run: a URL, and the file it uploads (PUT) or none (GET).
struct Transfer {
    url: String,
    upload: Option<PathBuf>,
}

/// What one transfer's `-w` line says.
struct Written {
    status: u16,
    total: Duration,
    first_byte: Duration,
    bytes: u64,
}

/// The `-w` format: one line per transfer, parsed by `Written::parse`.
const WRITE_OUT: &str =
    "%{http_code} %{time_total} %{time_starttransfer} %{size_download} %{size_upload}\\n";

impl Written {
    fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let secs = |s: &str| s.parse::<f64>().ok().map(Duration::from_secs_f64);
        let (down, up): (u64, u64) = (f.get(3)?.parse().ok()?, f.get(4)?.parse().ok()?);
        Some(Self {
            status: f.first()?.parse().ok()?,
            total: secs(f.get(1)?)?,
            first_byte: secs(f.get(2)?)?,
            bytes: down.max(up),
        })
    }
}

impl CurlTarget<'_> {
    fn url(&self, uri: &ObjectUri) -> String {
        format!(
            "{}/{}/{}",
            self.endpoint.trim_end_matches('/'),
            uri.bucket(),
            uri.key()
        )
    }

    /// Runs one curl process over `transfers`, `parallel` at once; returns each transfer's
    /// `-w` line, the wall time and the CPU time it used.
    async fn run(
        &self,
        transfers: &[Transfer],
        parallel: usize,
    ) -> Result<(Vec<Written>, f64, f64), Failure> {
        let (ak, sk) = match self.keys {
            Some((a, s)) => (a.clone(), s.clone()),
            None => match self.cfg.credentials.get(self.endpoint).await? {
                Some(c) => (
                    c.access_key_id().to_owned(),
                    c.secret_access_key().to_owned(),
                ),
                None => (String::new(), String::new()),
            },
        };
        let mut cmd = pinned(self.cpus, Path::new("curl"));
        let region = &self.cfg.region;
        cmd.args([
            "--http1.1",
            "-sS",
            "--no-progress-meter",
            "--aws-sigv4",
            &format!("aws:amz:{region}:s3"),
            "-H",
            "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "-w",
            WRITE_OUT,
        ]);
        if parallel > 1 {
            cmd.args(["--parallel", "--parallel-immediate", "--parallel-max"])
                .arg(parallel.to_string());
        }
        if let Some(ca) = &self.cfg.ca_bundle {
            cmd.arg("--cacert").arg(ca);
        }
        // Credentials and URLs go to curl on its standard input (`-K -`), never on its
        // command line, where any user of the machine could read the keys in the process
        // list (and a long URL list would meet the argument limit).
        cmd.args(["-K", "-"]);
        let before = rusage::children();
        let t0 = Instant::now();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
        let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
        let mut config = format!("user = \"{}:{}\"\n", quote(&ak), quote(&sk));
        for t in transfers {
            config.push_str(&format!(
                "url = \"{}\"\noutput = \"/dev/null\"\n",
                quote(&t.url)
            ));
            if let Some(f) = &t.upload {
                config.push_str(&format!(
                    "upload-file = \"{}\"\n",
                    quote(&f.to_string_lossy())
                ));
            }
        }
        let mut stdin = child.stdin.take().expect("stdin was piped");
        // Written from a thread: curl starts transferring (and writing -w lines) before it
        // has read a long config, and both pipes must keep moving.
        let feeder = std::thread::spawn(move || stdin.write_all(config.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| Failure::Other(format!("running curl: {e}")))?;
        let secs = t0.elapsed().as_secs_f64();
        feeder
            .join()
            .map_err(|_| Failure::Other("feeding curl's config failed".into()))?
            .map_err(|e| Failure::Other(format!("passing the config to curl: {e}")))?;
        if !out.status.success() {
            return Err(Failure::Other(format!("curl failed: {}", out.status)));
        }
        let lines: Vec<Written> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(Written::parse)
            .collect();
        let cpu = rusage::children().cpu_seconds - before.cpu_seconds;
        Ok((lines, secs, cpu))
    }
}

/// curl reading every object of the dataset one after another.
pub(super) async fn curl_row(
    target: &CurlTarget<'_>,
    objects: &[ObjectUri],
    total: u64,
) -> Result<Row, Failure> {
    eprintln!("curl: 1 process, one object after another ...");
    let transfers: Vec<Transfer> = objects
        .iter()
        .map(|u| Transfer {
            url: target.url(u),
            upload: None,
        })
        .collect();
    let (lines, secs, cpu) = target.run(&transfers, 1).await?;
    if let Some(bad) = lines.iter().find(|w| w.status != 200) {
        return Err(Failure::Other(format!(
            "curl: a GET was answered HTTP {}",
            bad.status
        )));
    }
    let mb = mb_per_sec(total, secs);
    let mut latency = Latency::default();
    for w in &lines {
        latency.record(w.total);
    }
    Ok(Row {
        client: "curl".into(),
        processes: 1,
        prefetch: Prefetch::Fixed(1),
        bytes: total,
        seconds: secs,
        mb_per_s: mb,
        per_process_mb_per_s: mb,
        batch_gap_p50_ms: 0.0,
        batch_gap_max_ms: 0.0,
        cpu_s_per_gb: cpu_s_per_gb(cpu, total),
        // RUSAGE_CHILDREN's peak is the largest of every child so far, not curl's own.
        peak_rss_mb: 0.0,
        first_epoch_mb_per_s: None,
        endpoints: Vec::new(),
        in_flight: None,
        accelerators: Vec::new(),
        latency: None,
    }
    .with_latency(latency))
}

/// curl making `op` (GET of `objects`, or PUT of `uploads`' files to their keys), `parallel`
/// at once, each transfer timed.
pub(super) async fn curl_ops_row(
    target: &CurlTarget<'_>,
    workload: &str,
    op: Op,
    transfers: Vec<(ObjectUri, Option<PathBuf>)>,
    parallel: usize,
) -> Result<OpsReport, Failure> {
    eprintln!(
        "curl: {workload}, {} transfers, {parallel} at once ...",
        transfers.len()
    );
    let transfers: Vec<Transfer> = transfers
        .into_iter()
        .map(|(u, upload)| Transfer {
            url: target.url(&u),
            upload,
        })
        .collect();
    let (lines, secs, cpu) = target.run(&transfers, parallel).await?;
    let mut s = OpStats::default();
    for w in &lines {
        if (200..300).contains(&w.status) {
            s.ok += 1;
            s.bytes += w.bytes;
            s.latency.record(w.total);
            if op == Op::Get {
                s.ttfb.record(w.first_byte);
            }
        } else {
            *s.errors.entry(format!("HTTP {}", w.status)).or_default() += 1;
        }
    }
    Ok(OpsReport {
        workload: workload.to_owned(),
        seconds: secs,
        started_unix: Some(crate::ops::unix_now() - secs),
        ops: BTreeMap::from([(op, s)]),
        cpu_seconds: cpu,
        peak_rss_bytes: 0,
        retries: BTreeMap::new(),
        stopped: Stopped::Count,
        per_second: Vec::new(),
        ranks: 1,
    })
}
