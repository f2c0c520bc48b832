//! `sluice serve`: the test server as a process.

use crate::output::Failure;
use clap::Args;
use sluice_testserver::{ServerOptions, TestServer};
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
    #[arg(long, default_value = UNET3D_RECORD_SIZE, value_parser = parse_size)]
    object_size: u64,
    /// Key prefix of populated objects
    #[arg(long, default_value = "bench/")]
    prefix: String,
}

/// The mean record size of MLPerf Storage's unet3d workload (bytes): the default object
/// size wherever the CLI generates or serves a dataset.
pub const UNET3D_RECORD_SIZE: &str = "146600628";

pub fn parse_size(s: &str) -> Result<u64, String> {
    sluice_core::config::parse_size(s).map_err(str::to_owned)
}

pub async fn run(a: ServeArgs) -> Result<(), Failure> {
    let opts = ServerOptions {
        http_addr: a.addr,
        https_addr: (!a.no_https).then_some(a.https_addr),
        access_key: a.access_key.clone(),
        secret_key: a.secret_key.clone(),
        buckets: a.buckets.clone(),
        data_dir: a.data_dir.clone(),
        public_buckets: a.public_buckets.clone(),
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
    println!(
        "  export AWS_ENDPOINT_URL_S3={} AWS_ACCESS_KEY_ID={} AWS_REGION=us-east-1 AWS_SECRET_ACCESS_KEY=<--secret-key>",
        server.http_endpoint(),
        a.access_key
    );
    println!("ready");
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| Failure::Other(format!("waiting for Ctrl-C: {e}")))?;
    Ok(())
}
