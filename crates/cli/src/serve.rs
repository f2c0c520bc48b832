//! `sluice serve`: the test server as a process.

use clap::Args;
use sluice_console::output::Failure;
use sluice_testserver::profile::{Bandwidth, FirstByteLatency};
use sluice_testserver::synthetic::Spec;
use sluice_testserver::{ServerOptions, ServiceProfile, Sink, TestServer};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// http listen address
    #[arg(long, default_value = "127.0.0.1:9000")]
    addr: SocketAddr,
    /// https listen address (TLS 1.3, CA generated at start)
    #[arg(long, default_value = "127.0.0.1:9443")]
    https_addr: SocketAddr,
    /// Serve http only
    #[arg(long)]
    no_https: bool,
    /// Keep objects in this directory (DIR/<bucket>/<key>) instead of memory alone
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long, default_value = "sluice-test-access")]
    access_key: String,
    #[arg(long, default_value = "sluice-test-secret")]
    secret_key: String,
    /// Buckets to create at start
    #[arg(long = "bucket", default_values_t = vec![sluice_testserver::DEFAULT_BUCKET.to_string()])]
    buckets: Vec<String>,
    /// Buckets that unsigned requests may read (GET, HEAD, list), as a public dataset's
    #[arg(long = "public-bucket")]
    public_buckets: Vec<String>,
    /// Write the https CA certificate here (for AWS_CA_BUNDLE)
    #[arg(long)]
    ca_out: Option<PathBuf>,
    /// Fill the first bucket with N pattern objects (no upload needed)
    #[arg(long, default_value_t = 0)]
    populate: usize,
    /// Size of each populated object (bytes, or 16MiB, 1GiB)
    #[arg(long, default_value = sluice_console::dataset::UNET3D_RECORD_SIZE, value_parser = parse_size)]
    object_size: u64,
    /// Key prefix of populated objects
    #[arg(long, default_value = "bench/")]
    prefix: String,
    /// Serve objects computed from their keys in the first bucket, nothing kept per object:
    /// TEMPLATE:COUNTxSIZE families, comma-separated (train/img_{i}_of_{n}.jpeg:1170301x322957,
    /// sizes as 146600628±68341808), or presets retinanet, unet3d, dlrm, flux[:COUNT]
    #[arg(long, value_name = "SPEC", value_parser = Spec::parse)]
    synthetic: Option<Spec>,
    /// Check what is written (checksums, lengths), then keep only its size and checksum, so
    /// that a checkpoint of any size can be written. A read of it is refused, or with
    /// --sink=computed gets bytes computed from the key, of the size written (a checkpoint's
    /// load can be measured, not its restore)
    #[arg(long, value_name = "READS", num_args = 0..=1, require_equals = true,
          default_missing_value = "refused", conflicts_with = "data_dir")]
    sink: Option<SunkReads>,
    #[command(flatten)]
    shaping: ShapingArgs,
}

/// What a read of an object written to a sinking server gets (`--sink[=READS]`).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum SunkReads {
    /// An `InvalidObjectState` error naming `--sink`.
    Refused,
    /// Bytes computed from the key, of the size written, with their own checksum.
    Computed,
}

/// How the server behaves: a named profile, then any of its values overridden. The values
/// are text here and parsed by `ServiceProfile::set`, the parser Python's `TestServer` uses.
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Service profile")]
pub struct ShapingArgs {
    /// Behave like a real store: loopback (none of the below), s3-standard, s3-express,
    /// on-prem (docs/design.md, "Service profiles", gives each value's source)
    #[arg(long, default_value = "loopback", value_parser = ServiceProfile::named)]
    profile: ServiceProfile,
    /// First-byte latency of every request: p50=30ms,p99=150ms (log-normal), 5ms (fixed),
    /// or none
    #[arg(long, value_name = "DIST", value_parser = check("first-byte-latency"))]
    first_byte_latency: Option<String>,
    /// First-byte latency of GET and HEAD (over --first-byte-latency)
    #[arg(long, value_name = "DIST", value_parser = check("get-latency"))]
    get_latency: Option<String>,
    /// First-byte latency of PUT, POST, DELETE, COPY
    #[arg(long, value_name = "DIST", value_parser = check("put-latency"))]
    put_latency: Option<String>,
    /// First-byte latency of LISTs
    #[arg(long, value_name = "DIST", value_parser = check("list-latency"))]
    list_latency: Option<String>,
    /// Requests per second per partition, answered 503 SlowDown beyond: get=5500/s,put=3500/s
    /// (a class left out is unlimited), or none
    #[arg(long, value_name = "RATES", value_parser = check("request-rate"))]
    request_rate: Option<String>,
    /// What one rate-limit bucket covers: first-segment (bucket + key up to its first /) or
    /// bucket
    #[arg(long, value_name = "RULE", value_parser = check("rate-partition"))]
    rate_partition: Option<String>,
    /// Pace each connection's GET and PUT bodies: 90MiB/s, 1Gbit/s, or none
    #[arg(long, value_name = "RATE", value_parser = check("connection-bandwidth"))]
    connection_bandwidth: Option<String>,
    /// Pace all connections together, as a node behind one link: 25Gbit/s, or none
    #[arg(long, value_name = "RATE", value_parser = check("node-bandwidth"))]
    node_bandwidth: Option<String>,
    /// Seed of the latency draws (the same seed replays the same sequence)
    #[arg(long, value_name = "N", value_parser = check("latency-seed"))]
    latency_seed: Option<String>,
    /// At exit, write what the server did (requests, throttled, bytes, latency applied) here
    /// as JSON
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
}

/// A flag's value parser: the value as given, once `ServiceProfile::set` accepts it.
fn check(setting: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |v: &str| {
        ServiceProfile::loopback().set(setting, v)?;
        Ok(v.to_owned())
    }
}

impl ShapingArgs {
    /// The profile with every flag given applied over its preset.
    pub fn profile(&self) -> ServiceProfile {
        let mut p = self.profile.clone();
        let given = [
            ("first-byte-latency", &self.first_byte_latency),
            ("get-latency", &self.get_latency),
            ("put-latency", &self.put_latency),
            ("list-latency", &self.list_latency),
            ("request-rate", &self.request_rate),
            ("rate-partition", &self.rate_partition),
            ("connection-bandwidth", &self.connection_bandwidth),
            ("node-bandwidth", &self.node_bandwidth),
            ("latency-seed", &self.latency_seed),
        ];
        p.set_all(
            given
                .into_iter()
                .filter_map(|(s, v)| Some((s, v.as_deref()?))),
        )
        .expect("checked when the flags were parsed");
        p
    }
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    sluice_core::settings::size(s).map_err(str::to_owned)
}

pub async fn run(a: ServeArgs) -> Result<(), Failure> {
    let profile = a.shaping.profile();
    let sink = match a.sink {
        None => Sink::Off,
        Some(SunkReads::Refused) => Sink::Refuse,
        Some(SunkReads::Computed) => Sink::Computed,
    };
    let opts = ServerOptions {
        http_addr: a.addr,
        https_addr: (!a.no_https).then_some(a.https_addr),
        access_key: a.access_key.clone(),
        secret_key: a.secret_key.clone(),
        buckets: a.buckets.clone(),
        data_dir: a.data_dir.clone(),
        public_buckets: a.public_buckets.clone(),
        profile: profile.clone(),
        synthetic: a.synthetic.clone(),
        sink,
    };
    let server = TestServer::start(opts)
        .await
        .map_err(|e| Failure::Other(format!("cannot start the server: {e}")))?;
    if let Some(p) = &a.ca_out {
        std::fs::copy(server.ca_bundle(), p)
            .map_err(|e| Failure::Other(format!("cannot write --ca-out {}: {e}", p.display())))?;
    }
    let bucket = a
        .buckets
        .first()
        .cloned()
        .unwrap_or_else(|| sluice_testserver::DEFAULT_BUCKET.into());
    for i in 0..a.populate {
        let key = format!("{}obj_{i:05}.bin", a.prefix);
        server.insert(
            &bucket,
            &key,
            sluice_testdata::pattern::generate(&key, a.object_size as usize),
        );
    }
    let ca = a
        .ca_out
        .clone()
        .unwrap_or_else(|| server.ca_bundle().to_owned());
    println!("sluice test server");
    println!("  http   {}", server.http_endpoint());
    if !a.no_https {
        println!(
            "  https  {}  (CA {})",
            server.https_endpoint(),
            ca.display()
        );
    }
    println!(
        "  bucket s3://{bucket}/  ({} objects populated under {})",
        a.populate, a.prefix
    );
    if let Some(spec) = &a.synthetic {
        println!("  synthetic s3://{bucket}/  {spec}");
    }
    if sink.drops() {
        let reads = if sink == Sink::Computed {
            "; reads get computed bytes"
        } else {
            ""
        };
        println!("  sink   writes are checked, then only their sizes and checksums kept{reads}");
    }
    println!(
        "  export AWS_ENDPOINT_URL_S3={} AWS_ACCESS_KEY_ID={} AWS_REGION=us-east-1 AWS_SECRET_ACCESS_KEY=<--secret-key>",
        server.http_endpoint(),
        a.access_key
    );
    if profile.is_shaping() {
        println!("  profile {}", describe(&profile));
    }
    // Watched before "ready" is printed: a stop sent as soon as it is read still reports.
    let stopped = watch_stop()?;
    println!("ready");
    stopped.await;
    let stats = server.stats();
    eprint!("{stats}");
    if let Some(path) = &a.shaping.stats_json {
        let json = serde_json::to_string_pretty(&stats).expect("stats serialise");
        std::fs::write(path, json + "\n").map_err(|e| {
            Failure::Other(format!("cannot write --stats-json {}: {e}", path.display()))
        })?;
    }
    Ok(())
}

/// Ends at Ctrl-C (SIGINT) or SIGTERM (what `kill`, `timeout` and `scripts/netlab down`
/// send); both are watched from the call on.
fn watch_stop() -> Result<impl std::future::Future<Output = ()>, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    let watch =
        |kind, name| signal(kind).map_err(|e| Failure::Other(format!("cannot watch {name}: {e}")));
    let mut term = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut int = watch(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// One line naming what the profile does.
fn describe(p: &ServiceProfile) -> String {
    let lat = |l: Option<FirstByteLatency>| match l {
        Some(l) => format!("p50 {:?} p99 {:?}", l.p50(), l.p99()),
        None => "none".into(),
    };
    let rate = |r: Option<f64>| r.map_or("unlimited".into(), |r| format!("{r}/s"));
    let bw = |b: Option<Bandwidth>| {
        b.map_or("unpaced".into(), |b| {
            format!("{:.1} MB/s", b.as_bytes_per_sec() / 1e6)
        })
    };
    format!(
        "{}: latency get {}, put {}, list {}; rate get {} put {} per {:?}; connection {}, node {}",
        p.name,
        lat(p.latency.get),
        lat(p.latency.put),
        lat(p.latency.list),
        rate(p.request_rate.get),
        rate(p.request_rate.put),
        p.request_rate.partition,
        bw(p.connection_bandwidth),
        bw(p.node_bandwidth),
    )
}
