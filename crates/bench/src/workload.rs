//! What the bench can run: the workloads of `--workload` and the request kinds a mixed
//! load draws from (`--mix`).

use serde::{Deserialize, Serialize};
use sluice_console::output::Failure;

/// One family of rows in the bench's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The MLPerf reader shapes: processes × prefetch, each a DataLoader-like worker.
    Get,
    /// PUTs from memory, single or multipart by size.
    Put,
    /// GETs of many small objects: objects per second is the figure.
    Small,
    /// HEADs.
    Stat,
    /// ListObjectsV2 pages.
    List,
    /// DeleteObject of objects written before the clock starts.
    Delete,
    /// Requests drawn by weight from `--mix`, as warp's mixed.
    Mixed,
    /// One object per rank written with the streaming (multipart) writer, then read back.
    Checkpoint,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Self::Get,
        Self::Put,
        Self::Small,
        Self::Stat,
        Self::List,
        Self::Delete,
        Self::Mixed,
        Self::Checkpoint,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Put => "put",
            Self::Small => "small",
            Self::Stat => "stat",
            Self::List => "list",
            Self::Delete => "delete",
            Self::Mixed => "mixed",
            Self::Checkpoint => "checkpoint",
        }
    }

    pub fn parse(s: &str) -> Result<Self, Failure> {
        Self::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|w| w.name()).collect();
                Failure::Usage(format!(
                    "--workload {s:?}: not a workload; known: {}",
                    known.join(", ")
                ))
            })
    }

    /// The object size when `--size` is not given: warp's 10 MiB-class default for PUTs
    /// (above the 16 MiB multipart threshold would hide single PUTs), a small object for
    /// `small` and `mixed`, metadata-sized ones where only requests count.
    pub fn default_size(self) -> &'static str {
        match self {
            Self::Get => sluice_console::dataset::UNET3D_RECORD_SIZE,
            Self::Put => "8MiB",
            Self::Small => "64KiB",
            Self::Mixed => "1MiB",
            Self::Stat | Self::List | Self::Delete => "1KiB",
            Self::Checkpoint => "256MiB",
        }
    }

    /// Whether bytes or requests a second are the figure.
    pub fn moves_bytes(self) -> bool {
        matches!(self, Self::Get | Self::Put | Self::Checkpoint | Self::Mixed)
    }
}

/// One request kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Get,
    Put,
    Stat,
    List,
    Delete,
}

impl Op {
    const ALL: [Op; 5] = [Op::Get, Op::Put, Op::Stat, Op::List, Op::Delete];

    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::Stat => "stat",
            Op::List => "list",
            Op::Delete => "delete",
        }
    }
}

/// Request kinds with weights: `get=45,put=15,stat=30,delete=10` (warp's mixed default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix(Vec<(Op, u32)>);

/// warp's mixed default.
pub const DEFAULT_MIX: &str = "get=45,put=15,stat=30,delete=10";

impl Mix {
    /// One kind only.
    pub fn only(op: Op) -> Self {
        Self(vec![(op, 1)])
    }

    /// Weights are percentages: they must add up to 100, so a typo cannot silently
    /// reshape the load.
    pub fn parse(s: &str) -> Result<Self, Failure> {
        let bad = |why: String| Failure::Usage(format!("--mix {s:?}: {why}"));
        let mut out: Vec<(Op, u32)> = Vec::new();
        for part in s.split(',') {
            let (name, w) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not KIND=WEIGHT")))?;
            let op = Op::ALL
                .into_iter()
                .find(|o| o.name().eq_ignore_ascii_case(name.trim()))
                .ok_or_else(|| {
                    bad(format!(
                        "{name:?} is not a request kind (get, put, stat, list, delete)"
                    ))
                })?;
            let w: u32 = w
                .trim()
                .parse()
                .map_err(|_| bad(format!("{w:?} is not a whole-number weight")))?;
            if out.iter().any(|(o, _)| *o == op) {
                return Err(bad(format!("{} is given twice", op.name())));
            }
            if w > 0 {
                out.push((op, w));
            }
        }
        let total: u32 = out.iter().map(|(_, w)| w).sum();
        if total != 100 {
            return Err(bad(format!("the weights add up to {total}, not 100")));
        }
        if out.iter().any(|(o, _)| *o == Op::Delete) && !out.iter().any(|(o, _)| *o == Op::Put) {
            return Err(bad(
                "delete removes what the load's own PUTs wrote: give put a weight too".into(),
            ));
        }
        Ok(Self(out))
    }

    pub fn pick(&self, rng: &mut fastrand::Rng) -> Op {
        let total: u32 = self.0.iter().map(|(_, w)| w).sum();
        let mut x = rng.u32(0..total.max(1));
        for (op, w) in &self.0 {
            if x < *w {
                return *op;
            }
            x -= w;
        }
        self.0[0].0
    }

    /// Whether the load deletes (so its PUTs write keys for the deletes to take).
    pub fn deletes(&self) -> bool {
        self.0.iter().any(|(o, _)| *o == Op::Delete)
    }

    /// Whether reads of existing objects are part of the load (so a read set is needed).
    pub fn reads(&self) -> bool {
        self.0
            .iter()
            .any(|(o, _)| matches!(o, Op::Get | Op::Stat | Op::List))
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(o, w)| format!("{}={w}", o.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_by_name_and_refuse_others() {
        assert_eq!(Workload::parse("PUT").unwrap(), Workload::Put);
        let e = Workload::parse("scan").unwrap_err().to_string();
        assert!(e.contains("--workload") && e.contains("checkpoint"), "{e}");
    }

    #[test]
    fn mix_weights_must_add_up_and_are_drawn_by_weight() {
        let m = Mix::parse(DEFAULT_MIX).unwrap();
        assert_eq!(m.to_string(), DEFAULT_MIX);
        let mut rng = fastrand::Rng::with_seed(1);
        let gets = (0..10_000).filter(|_| m.pick(&mut rng) == Op::Get).count();
        assert!((4_200..4_800).contains(&gets), "{gets}");
        for (bad, says) in [
            ("get=50,put=40", "add up to 90"),
            ("get=50,scan=50", "\"scan\""),
            ("get=50,get=50", "twice"),
            ("get=x", "whole-number"),
            ("get", "KIND=WEIGHT"),
            ("get=90,delete=10", "give put a weight"),
        ] {
            let e = Mix::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--mix") && e.contains(says), "{bad}: {e}");
        }
    }
}
