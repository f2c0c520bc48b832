//! The command lines of `sluice bench` and of the worker processes it starts.

use clap::Args;
use serde::{Deserialize, Serialize};
use sluice_console::StoreArgs;
use sluice_console::output::Failure;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub(super) cmd: Option<BenchCmd>,
    /// Workloads, each a family of rows: get (the MLPerf reader shapes), put, small, stat,
    /// list, delete, mixed, checkpoint
    #[arg(long = "workload", value_delimiter = ',', default_value = "get")]
    pub(super) workloads: Vec<String>,
    /// Replay a recorded run's op-logs (`SLUICE_OP_LOG`, all of its processes') against
    /// --uri's store, or the embedded server: one row per client stack (docs/oplog.md)
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["workloads", "existing"])]
    pub(super) replay: Vec<PathBuf>,
    /// --replay: `recorded` sends each request at its recorded offset (the recorded gaps and
    /// concurrency); `fast` sends them in order, as many in flight as the log ever had
    #[arg(long, value_enum, default_value = "recorded")]
    pub(super) pace: super::replay::Pace,
    /// Read (get) or write under this prefix of an existing store instead of an embedded
    /// server; writing workloads refuse a prefix that holds objects (--allow-existing)
    #[arg(long)]
    pub(super) uri: Option<String>,
    /// Let writing workloads use a --uri prefix that already holds objects (they write
    /// under a sub-prefix of their own and delete only what they wrote)
    #[arg(long)]
    pub(super) allow_existing: bool,
    /// small, stat, list: read the objects already under --uri (listed once, in parallel,
    /// before the clock starts) instead of writing a read set: a `sluice serve --synthetic`
    /// store of millions, say. Nothing is written; --count is then every object listed
    #[arg(long, requires = "uri")]
    pub(super) existing: bool,
    /// get: records generated on the embedded server [24]; put: keys rewritten in turn
    /// [as many as fit in 1 GiB, at most 1000]; small, stat, list, mixed: objects read
    /// [1000]; delete: objects deleted [5000]; checkpoint: checkpoints per rank [1]
    #[arg(long)]
    pub(super) count: Option<usize>,
    /// Object size: 4MiB, a list drawn from (1MiB,4MiB), or a log-uniform range
    /// (128KiB..8MiB) [each workload's own: get unet3d's 146600628, put 8MiB, small 64KiB,
    /// mixed 1MiB, stat/list/delete 1KiB, checkpoint 256MiB]
    #[arg(long, conflicts_with = "size_dist")]
    pub(super) size: Option<String>,
    /// Object sizes from a file, one per line, drawn uniformly
    #[arg(long, value_name = "FILE")]
    pub(super) size_dist: Option<PathBuf>,
    /// An MLPerf Storage workload's object size, and its accelerators-fed column: unet3d,
    /// cosmoflow, resnet50, dlrm, retinanet, flux, llama3-8b (checkpoint: 13.1 GB per rank, 8 ranks)
    #[arg(long, conflicts_with_all = ["size", "size_dist"])]
    pub(super) preset: Option<String>,
    /// get: reader shapes, processes x prefetch (a number, or auto: the loader's window
    /// follows the requests its client's controller allows)
    #[arg(long, value_delimiter = ',', default_value = "1x16,4x4,8x4,16x4")]
    pub(super) shapes: Vec<String>,
    /// Requests in flight, one row each (checkpoint: ranks, each writing its own object)
    #[arg(long, value_delimiter = ',', default_value = "16")]
    pub(super) concurrency: Vec<usize>,
    /// How long each request-driven row runs (after --warmup)
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(super) duration: std::time::Duration,
    /// Requests made before the clock starts (their figures are not counted)
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub(super) warmup: std::time::Duration,
    /// Stop each row after this many requests (or at --duration, whichever comes first)
    #[arg(long)]
    pub(super) ops: Option<u64>,
    /// Stop a row once its throughput has held within --autoterm-pct for 5 seconds
    #[arg(long)]
    pub(super) autoterm: bool,
    /// --autoterm's tolerance: each of the last 5 seconds within this percentage of their
    /// mean
    #[arg(long, default_value_t = 7.5)]
    pub(super) autoterm_pct: f64,
    /// mixed: request kinds and their weights (percent)
    #[arg(long, default_value = super::workload::DEFAULT_MIX)]
    pub(super) mix: String,
    /// End a row, and the run with exit 1, when more than this share of requests fails
    #[arg(long, default_value_t = 0.01)]
    pub(super) max_error_share: f64,
    /// Backends to compare [default: every compiled one]
    #[arg(long, value_delimiter = ',')]
    pub(super) backends: Vec<String>,
    /// get: passes over the dataset per worker; the table reports the last (buffers warm)
    #[arg(long, default_value_t = 2)]
    pub(super) epochs: u32,
    /// Skip the curl reference rows
    #[arg(long)]
    pub(super) no_curl: bool,
    /// Use the embedded server's https endpoint
    #[arg(long)]
    pub(super) https: bool,
    /// The embedded server's service profile: loopback, s3-standard, s3-express, on-prem
    /// (`sluice serve --profile`)
    #[arg(long, default_value = "loopback")]
    pub(super) server_profile: String,
    /// Put the server on CPU 0 and the clients on the other CPUs (taskset)
    #[arg(long)]
    pub(super) pin: bool,
    /// With several endpoints, each worker process (rank) uses endpoint `rank % n` alone, as
    /// DLIO assigns them, instead of spreading its requests over all
    #[arg(long)]
    pub(super) pin_endpoints: bool,
    /// Write the results (every row, its histograms, the environment) as JSON here
    #[arg(long = "json", value_name = "FILE")]
    pub(super) json_out: Option<PathBuf>,
    /// Draw each workload's figure by client and shape into this SVG (FILE-WORKLOAD.svg
    /// when several)
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCmd {
    /// Compare two runs' JSON row by row; changes beyond run-to-run noise are marked
    Compare {
        /// The baseline
        a: PathBuf,
        /// The run compared with it
        b: PathBuf,
    },
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Dataset file: one `URI<TAB>size` per line
    #[arg(long)]
    pub(super) list: PathBuf,
    /// This process's place among every reader process (over all MPI ranks)
    #[arg(long)]
    pub(super) rank: usize,
    #[arg(long)]
    pub(super) world: usize,
    #[arg(long, value_parser = parse_prefetch)]
    pub(super) prefetch: Prefetch,
    #[arg(long, default_value_t = 1)]
    pub(super) epochs: u32,
    /// Use endpoint `rank % n` of several alone
    #[arg(long)]
    pub(super) pin_endpoint: bool,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

/// A reader's prefetch: a number of objects, or `auto` (`LoaderOptions::prefetch` `None`).
/// In JSON a number or the string "auto".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prefetch {
    Fixed(usize),
    Auto(AutoWord),
}

/// The word `auto`, as JSON spells the adaptive prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoWord {
    Auto,
}

impl Prefetch {
    pub const AUTO: Prefetch = Prefetch::Auto(AutoWord::Auto);

    /// As the loader takes it.
    pub fn window(self) -> Option<usize> {
        match self {
            Prefetch::Fixed(n) => Some(n),
            Prefetch::Auto(_) => None,
        }
    }
}

impl std::fmt::Display for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prefetch::Fixed(n) => n.fmt(f),
            Prefetch::Auto(_) => f.pad("auto"),
        }
    }
}

fn parse_prefetch(s: &str) -> Result<Prefetch, String> {
    match s.trim() {
        "auto" => Ok(Prefetch::AUTO),
        n => match n.parse() {
            Ok(n) if n > 0 => Ok(Prefetch::Fixed(n)),
            _ => Err(format!("{s:?} is not a positive number or auto")),
        },
    }
}

/// `PxQ`: P processes, each with prefetch Q (a number or `auto`).
pub(super) fn parse_shape(s: &str) -> Result<(usize, Prefetch), Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--shapes: {s:?} is not PROCESSESxPREFETCH, e.g. 4x4 or 1xauto"
        ))
    };
    let (p, f) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let p: usize = p.parse().map_err(|_| bad())?;
    let f = parse_prefetch(f).map_err(|_| bad())?;
    if p == 0 {
        return Err(bad());
    }
    Ok((p, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_reject_nonsense() {
        assert_eq!(parse_shape("4x4").unwrap(), (4, Prefetch::Fixed(4)));
        assert_eq!(parse_shape(" 16X2 ").unwrap(), (16, Prefetch::Fixed(2)));
        assert_eq!(parse_shape("1xauto").unwrap(), (1, Prefetch::AUTO));
        for bad in ["4", "0x4", "ax4", "4x0", "4xsome", ""] {
            assert!(parse_shape(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefetch_reads_back_from_json_as_written() {
        for p in [Prefetch::Fixed(16), Prefetch::AUTO] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(
                serde_json::from_str::<Prefetch>(&json).unwrap(),
                p,
                "{json}"
            );
        }
        assert_eq!(serde_json::to_string(&Prefetch::AUTO).unwrap(), "\"auto\"");
    }
}
