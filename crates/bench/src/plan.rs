//! The bench's command line, checked whole before anything starts: a bad flag is exit 2
//! with a message that names it, never a failure halfway through a run.

use super::args::{BenchArgs, Prefetch, parse_shape};
use super::sizes::{Preset, SizeSpec};
use super::workload::{Mix, Workload};
use sluice_console::output::Failure;

pub(super) struct Plan {
    pub workloads: Vec<Workload>,
    pub backends: Vec<String>,
    pub shapes: Vec<(usize, Prefetch)>,
    pub preset: Option<Preset>,
    pub mix: Mix,
    sizes: Option<SizeSpec>,
    count: Option<usize>,
    concurrency: Vec<usize>,
}

/// put's keys, when `--count` is not given, hold at most this many bytes: the embedded
/// server keeps objects in memory.
const PUT_BYTES: u64 = 1 << 30;

impl Plan {
    pub fn new(a: &BenchArgs) -> Result<Self, Failure> {
        let mut workloads = Vec::new();
        for w in &a.workloads {
            let w = Workload::parse(w)?;
            if !workloads.contains(&w) {
                workloads.push(w);
            }
        }
        let shapes = a
            .shapes
            .iter()
            .map(|s| parse_shape(s))
            .collect::<Result<_, _>>()?;
        let compiled = sluice::registry::compiled();
        let backends: Vec<String> = if a.backends.is_empty() {
            compiled.iter().map(|s| s.to_string()).collect()
        } else {
            a.backends.clone()
        };
        for b in &backends {
            if !compiled.contains(&b.as_str()) {
                return Err(usage(
                    "--backends",
                    format!(
                        "backend {b:?} is not in this build; available: {}",
                        compiled.join(", ")
                    ),
                ));
            }
        }
        let preset = a.preset.as_deref().map(Preset::parse).transpose()?;
        let sizes = match (&a.size, &a.size_dist, preset) {
            (Some(s), _, _) => Some(SizeSpec::parse(s)?),
            (_, Some(f), _) => Some(SizeSpec::from_file(f)?),
            (_, _, Some(p)) => Some(SizeSpec::Fixed(p.object_size())),
            _ => None,
        };
        if a.concurrency.contains(&0) {
            return Err(usage(
                "--concurrency",
                "0 requests in flight make none".into(),
            ));
        }
        if a.count == Some(0) {
            return Err(usage("--count", "must be at least 1".into()));
        }
        if a.duration.is_zero() {
            return Err(usage("--duration", "must be above 0".into()));
        }
        if a.ops == Some(0) {
            return Err(usage("--ops", "must be at least 1".into()));
        }
        if !(a.autoterm_pct > 0.0 && a.autoterm_pct < 100.0) {
            return Err(usage(
                "--autoterm-pct",
                format!("{} is not a percentage between 0 and 100", a.autoterm_pct),
            ));
        }
        if !(0.0..=1.0).contains(&a.max_error_share) {
            return Err(usage(
                "--max-error-share",
                format!("{} is not a share between 0 and 1", a.max_error_share),
            ));
        }
        if a.pin && super::server::which("taskset").is_none() {
            return Err(Failure::Usage("--pin needs `taskset` (util-linux)".into()));
        }
        sluice_testserver::ServiceProfile::named(&a.server_profile)
            .map_err(|e| usage("--server-profile", e))?;
        let mix = Mix::parse(&a.mix)?;
        if let Some(w) = workloads.iter().find(|w| {
            a.existing
                && !matches!(
                    w,
                    Workload::Get | Workload::Small | Workload::Stat | Workload::List
                )
        }) {
            return Err(usage(
                "--existing",
                format!(
                    "{} writes; only get, small, stat and list read what is there",
                    w.name()
                ),
            ));
        }
        let plan = Self {
            workloads,
            backends,
            shapes,
            preset,
            mix,
            sizes,
            count: a.count,
            concurrency: a.concurrency.clone(),
        };
        if plan.workloads.contains(&Workload::Get) {
            plan.get_size()?;
        }
        if plan.workloads.contains(&Workload::Checkpoint) && a.uri.is_none() {
            plan.check_checkpoint_fits()?;
        }
        Ok(plan)
    }

    /// The objects a workload writes or reads.
    pub fn sizes(&self, w: Workload) -> Result<SizeSpec, Failure> {
        match &self.sizes {
            Some(s) => Ok(s.clone()),
            None => SizeSpec::parse(w.default_size()),
        }
    }

    /// get generates records of one size.
    pub fn get_size(&self) -> Result<u64, Failure> {
        match self.sizes(Workload::Get)? {
            SizeSpec::Fixed(n) => Ok(n),
            s => Err(usage(
                "--size",
                format!("{s}: the get workload generates records of one size"),
            )),
        }
    }

    /// `--concurrency`, but a checkpoint preset's ranks for checkpoint.
    pub fn concurrency(&self, w: Workload) -> Vec<usize> {
        match self.preset.and_then(Preset::checkpoint_ranks) {
            Some(r) if w == Workload::Checkpoint => vec![r],
            _ => self.concurrency.clone(),
        }
    }

    /// `--count`, else the workload's default (see `--count`'s help).
    pub fn count(&self, w: Workload, sizes: &SizeSpec, conc: usize) -> usize {
        self.count.unwrap_or(match w {
            Workload::Put => ((PUT_BYTES / sizes.max().max(1)) as usize).clamp(conc, 1000),
            Workload::Checkpoint => 1,
            // Deletes are fast: enough objects for a run of seconds on a loopback server.
            Workload::Delete => 5000,
            _ => 1000,
        })
    }

    /// The embedded server holds a checkpoint in memory: one that cannot fit is refused
    /// up front, naming what to change.
    fn check_checkpoint_fits(&self) -> Result<(), Failure> {
        let sizes = self.sizes(Workload::Checkpoint)?;
        let ranks = self
            .concurrency(Workload::Checkpoint)
            .into_iter()
            .max()
            .unwrap_or(1) as u64;
        let total = sizes.max() * ranks * self.count.unwrap_or(1) as u64;
        let avail = mem_available().unwrap_or(u64::MAX);
        if total > avail / 2 {
            return Err(usage(
                if self.preset.is_some() {
                    "--preset"
                } else {
                    "--size"
                },
                format!(
                    "a checkpoint of {:.1} GB ({ranks} ranks) does not fit in the embedded \
                     server's memory (half of the {:.1} GB available); give a smaller --size \
                     or a real store with --uri",
                    total as f64 / 1e9,
                    avail as f64 / 1e9
                ),
            ));
        }
        Ok(())
    }
}

fn usage(flag: &str, why: String) -> Failure {
    Failure::Usage(format!("{flag}: {why}"))
}

/// MemAvailable from /proc/meminfo.
fn mem_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}
