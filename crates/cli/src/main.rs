//! `sluice`: serve a test store, generate a dataset, move objects, and benchmark.

mod cp;
mod objects;
mod outdir;
mod serve;
mod stream;
mod uploads;

use clap::{Parser, Subcommand};
use sluice_console::output;
use std::process::ExitCode;

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
    #[cfg(feature = "bench")]
    /// A/B benchmark of client stacks beside curl, on an embedded server by default: reader
    /// shapes, PUTs, small objects, metadata, mixed loads, checkpoints (`--workload`);
    /// `bench compare A.json B.json`
    Bench(Box<sluice_bench::BenchArgs>),
    /// One bench worker process (started by `sluice bench`)
    #[cfg(feature = "bench")]
    #[command(hide = true)]
    BenchWorker(sluice_bench::WorkerArgs),
    /// One request-driven bench row (started by `sluice bench`)
    #[cfg(feature = "bench")]
    #[command(hide = true)]
    BenchOps(Box<sluice_bench::OpsArgs>),
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
            #[cfg(feature = "bench")]
            Cmd::Bench(a) => sluice_bench::run(*a).await,
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
            #[cfg(feature = "bench")]
            Cmd::BenchWorker(a) => sluice_bench::worker(a).await,
            #[cfg(feature = "bench")]
            Cmd::BenchOps(a) => sluice_bench::ops_worker(*a).await,
        }
    });
    let result = runtime.block_on(command);
    // Whatever the outcome, the op-log's last lines are written (`SLUICE_OP_LOG`).
    sluice_core::oplog::finish_all();
    let result = match result {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn long_flags(cmd: &clap::Command, out: &mut Vec<String>) {
        out.extend(
            cmd.get_arguments()
                .filter_map(|a| a.get_long().map(|l| format!("--{l}"))),
        );
        for sub in cmd.get_subcommands() {
            long_flags(sub, out);
        }
    }

    /// The settings table names the flags, and the flags of the store are the table's.
    #[test]
    fn every_setting_flag_is_a_flag_and_every_store_flag_a_setting() {
        use clap::{Args, CommandFactory};
        let mut flags = Vec::new();
        long_flags(&Cli::command(), &mut flags);
        let table: Vec<&str> = sluice_core::settings::ALL
            .iter()
            .filter_map(|s| s.info().flag)
            .collect();
        for flag in &table {
            if *flag == "--pin-endpoints" && !cfg!(feature = "bench") {
                continue;
            }
            assert!(
                flags.iter().any(|f| f == flag),
                "{flag} is no flag of sluice"
            );
        }
        let store = sluice_console::StoreArgs::augment_args(clap::Command::new("store"));
        for arg in store.get_arguments().filter_map(|a| a.get_long()) {
            let flag = format!("--{arg}");
            assert!(
                table.contains(&flag.as_str()),
                "{flag} is not in the settings table"
            );
        }
    }
}
