//! The command lines of `sluice bench` and of the worker processes it starts.

use crate::StoreArgs;
use crate::output::Failure;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Read this existing prefix instead of starting a server and generating a dataset
    #[arg(long)]
    pub(super) uri: Option<String>,
    /// Records to generate on the embedded server
    #[arg(long, default_value_t = 24)]
    pub(super) count: usize,
    /// Size of each generated record (unet3d's mean: 146600628)
    #[arg(long, default_value = crate::serve::UNET3D_RECORD_SIZE, value_parser = crate::serve::parse_size)]
    pub(super) size: u64,
    /// Reader shapes, processes x prefetch
    #[arg(long, value_delimiter = ',', default_value = "1x16,4x4,8x4,16x4")]
    pub(super) shapes: Vec<String>,
    /// Backends to compare [default: every compiled one]
    #[arg(long, value_delimiter = ',')]
    pub(super) backends: Vec<String>,
    /// Passes over the dataset per worker; the table reports the last (buffers warm)
    #[arg(long, default_value_t = 2)]
    pub(super) epochs: u32,
    /// Skip the curl reference row
    #[arg(long)]
    pub(super) no_curl: bool,
    /// Use the embedded server's https endpoint
    #[arg(long)]
    pub(super) https: bool,
    /// Put the server on CPU 0 and the clients on the other CPUs (taskset)
    #[arg(long)]
    pub(super) pin: bool,
    /// With several endpoints, each worker process (rank) uses endpoint `rank % n` alone, as
    /// DLIO assigns them, instead of spreading its requests over all
    #[arg(long)]
    pub(super) pin_endpoints: bool,
    /// Write the results as JSON here
    #[arg(long = "json", value_name = "FILE")]
    pub(super) json_out: Option<PathBuf>,
    /// Draw throughput by shape and backend into this SVG
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Dataset file: one `URI<TAB>size` per line
    #[arg(long)]
    pub(super) list: PathBuf,
    #[arg(long)]
    pub(super) rank: usize,
    #[arg(long)]
    pub(super) world: usize,
    #[arg(long)]
    pub(super) prefetch: usize,
    #[arg(long, default_value_t = 1)]
    pub(super) epochs: u32,
    /// Use endpoint `rank % n` of several alone
    #[arg(long)]
    pub(super) pin_endpoint: bool,
    #[command(flatten)]
    pub(super) store: StoreArgs,
}

/// `PxQ`: P processes, each with prefetch Q.
pub(super) fn parse_shape(s: &str) -> Result<(usize, usize), Failure> {
    let bad = || {
        Failure::Usage(format!(
            "--shapes: {s:?} is not PROCESSESxPREFETCH, e.g. 4x4"
        ))
    };
    let (p, f) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let (p, f): (usize, usize) = (p.parse().map_err(|_| bad())?, f.parse().map_err(|_| bad())?);
    if p == 0 || f == 0 {
        return Err(bad());
    }
    Ok((p, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_reject_nonsense() {
        assert_eq!(parse_shape("4x4").unwrap(), (4, 4));
        assert_eq!(parse_shape(" 16X2 ").unwrap(), (16, 2));
        for bad in ["4", "0x4", "ax4", "4x0", ""] {
            assert!(parse_shape(bad).is_err(), "{bad}");
        }
    }
}
