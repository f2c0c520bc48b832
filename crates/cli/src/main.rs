//! `sluice`: serve a test store, generate a dataset, move objects, and benchmark.

mod bench;
mod cp;
mod objects;
mod outdir;
mod output;
mod rusage;
mod serve;
mod stream;
mod uploads;

use clap::{Args, Parser, Subcommand};
use output::Failure;
use sluice_core::{ObjectStore, StoreConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Pool buffers may live in a shared-memory arena that outlives the process
/// (`SLUICE_SHM_POOL`): `sluice bench` workers and `sluice get` reuse what an earlier one left.
#[global_allocator]
static ALLOC: sluice_loader::shm::PoolAlloc = sluice_loader::shm::PoolAlloc;

#[derive(Parser, Debug)]
#[command(
    name = "sluice",
    version,
    about = "Read training data from S3-compatible storage at the speed of the network"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Log sluice's retries, resumed reads, redirects and endpoint failures (-v), and more
    /// (-vv), on stderr [default: $SLUICE_LOG, $RUST_LOG, else warnings]
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log sluice's records from this level: error, warn, info, debug or trace
    #[arg(long, global = true, conflicts_with = "verbose")]
    log_level: Option<String>,
}

/// Where and how to reach the store; each falls back to the standard AWS environment.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// Client stack: hyper, awssdk or objectstore [default: $S3_BACKEND, else hyper]
    #[arg(long)]
    pub backend: Option<String>,
    /// Endpoint URL [default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS]
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Several endpoints of one store, comma-separated: requests spread over them and avoid
    /// one that stops answering [default: $S3_ENDPOINT_URIS]
    #[arg(long, value_delimiter = ',', conflicts_with = "endpoint")]
    pub endpoints: Vec<String>,
    /// Region [default: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's, else us-east-1]
    #[arg(long)]
    pub region: Option<String>,
    /// Extra CA certificates (PEM) [default: $AWS_CA_BUNDLE]
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,
    /// AWS profile; wins over keys in the environment, as the AWS CLI's [default: $AWS_PROFILE]
    #[arg(long)]
    pub profile: Option<String>,
    /// Send unsigned requests (public buckets), no credentials looked up
    #[arg(long)]
    pub no_sign_request: bool,
}

impl StoreArgs {
    /// The store for a command on `uris` (URIs, local paths, `-`).
    pub async fn open_for(&self, uris: &[&str]) -> Result<Arc<dyn ObjectStore>, Failure> {
        let cfg = self.config_for(uris).await?;
        Ok(sluice::registry::open(self.backend.as_deref(), cfg)?)
    }

    /// As `config`, for a command on `uris`: when none of them is an `s3://` URI the work is
    /// local and looks up no AWS configuration at all (no profile files, no credentials
    /// chain, no instance metadata, whose absence would only be reported as noise).
    pub async fn config_for(&self, uris: &[&str]) -> Result<StoreConfig, Failure> {
        let s3 = |u: &&str| u.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("s3://"));
        if uris.iter().any(s3) {
            return self.config().await;
        }
        Ok(StoreConfig::new(
            None,
            sluice_core::config::DEFAULT_REGION,
            sluice_core::CredentialsCache::anonymous(),
        ))
    }

    /// The environment's configuration with this command line's overrides.
    pub async fn config(&self) -> Result<StoreConfig, Failure> {
        let mut cfg = StoreConfig::from_env_with_profile(self.profile.as_deref()).await?;
        if self.no_sign_request {
            cfg.credentials = sluice_core::CredentialsCache::anonymous();
        }
        if let Some(e) = &self.endpoint {
            cfg.set_endpoint("--endpoint", e)?;
        }
        if !self.endpoints.is_empty() {
            cfg.set_endpoints("--endpoints", self.endpoints.iter().map(String::as_str))?;
        }
        if let Some(r) = &self.region {
            cfg.set_region("--region", r)?;
        }
        if let Some(c) = &self.ca_bundle {
            cfg.ca_bundle = Some(c.clone());
        }
        Ok(cfg)
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the S3 test server (in memory, or over a directory) until interrupted
    Serve(Box<serve::ServeArgs>),
    /// Write a DLIO-style unet3d dataset of .npz records: PREFIX/train/<sub>/img_<i>_of_<N>.npz
    Gen(objects::GenArgs),
    /// List objects under a URI prefix
    Ls(objects::LsArgs),
    /// Read objects (URIs or prefixes); without -o the bytes are counted and discarded
    Get(objects::GetArgs),
    /// Upload a file
    Put(objects::PutArgs),
    /// Copy objects and files: S3 <-> local, S3 -> S3, - for stdin/stdout, --recursive,
    /// wildcards, --include/--exclude
    Cp(cp::CpArgs),
    /// Delete objects
    Rm(objects::RmArgs),
    /// Print a shell completion script: sluice completions bash > /etc/bash_completion.d/sluice
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// A/B benchmark of client stacks beside curl, on an embedded server by default: reader
    /// shapes, PUTs, small objects, metadata, mixed loads, checkpoints (`--workload`);
    /// `bench compare A.json B.json`
    Bench(Box<bench::BenchArgs>),
    /// One bench worker process (started by `sluice bench`)
    #[command(hide = true)]
    BenchWorker(bench::WorkerArgs),
    /// One request-driven bench row (started by `sluice bench`)
    #[command(hide = true)]
    BenchOps(Box<bench::OpsArgs>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = cli.log_level.as_deref().or(match cli.verbose {
        0 => None,
        1 => Some("info"),
        _ => Some("debug"),
    });
    // Quiet unless asked: warnings only.
    match sluice::logging::filter(level, "warn") {
        Ok(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init(),
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(output::EXIT_USAGE);
        }
    }
    let runtime = match sluice::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: cannot start the async runtime: {e}");
            return ExitCode::from(output::EXIT_OTHER);
        }
    };
    // The command runs as a task of the runtime, not in `block_on` on this thread: hyper's
    // connection tasks run on the runtime's workers and hand each body chunk to the future
    // that reads it, so a future polled here would be woken across threads for every chunk —
    // a futex wake and a context switch each, 15–30% of a one-core client's CPU over https
    // (perf, `sluice get -j 16`). As a task, it is woken on the worker that read the chunk.
    let command = runtime.spawn(async move {
        match cli.cmd {
            Cmd::Serve(a) => serve::run(*a).await,
            Cmd::Gen(a) => objects::generate(a).await,
            Cmd::Ls(a) => objects::ls(a).await,
            Cmd::Get(a) => objects::get(a).await,
            Cmd::Put(a) => objects::put(a).await,
            Cmd::Cp(a) => cp::cp(a).await,
            Cmd::Rm(a) if a.incomplete_uploads => uploads::abort_incomplete(a).await,
            Cmd::Rm(a) => objects::rm(a).await,
            Cmd::Bench(a) => bench::run(*a).await,
            Cmd::Completions { shell } => {
                use clap::CommandFactory;
                clap_complete::generate(
                    shell,
                    &mut Cli::command(),
                    "sluice",
                    &mut std::io::stdout(),
                );
                Ok(())
            }
            Cmd::BenchWorker(a) => bench::worker(a).await,
            Cmd::BenchOps(a) => bench::ops_worker(*a).await,
        }
    });
    let result = match runtime.block_on(command) {
        Ok(result) => result,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => {
                eprintln!("sluice: the command was cancelled: {e}");
                return ExitCode::from(output::EXIT_OTHER);
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("sluice: {f}");
            ExitCode::from(f.exit_code())
        }
    }
}
