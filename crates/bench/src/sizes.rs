//! Object sizes for the bench's workloads: one size, a list drawn from uniformly, a
//! log-uniform range, or a file of sizes; and the MLPerf Storage presets, with what their
//! accelerators ask for (`Preset::accelerators_fed`).

use sluice_console::output::Failure;
use std::path::Path;

/// Where the sizes of the objects a workload writes come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeSpec {
    /// Every object this size.
    Fixed(u64),
    /// Each object one of these, drawn uniformly (`--size 1MiB,4MiB`, `--size-dist FILE`).
    Choice(Vec<u64>),
    /// Each object drawn log-uniformly between the bounds, both included (`--size
    /// 128KiB..8MiB`): as many objects between 128 and 256 KiB as between 4 and 8 MiB, the
    /// spread warp's `--obj.randsize` gives.
    LogUniform { lo: u64, hi: u64 },
}

impl SizeSpec {
    /// `--size`: `4MiB`, `1MiB,4MiB,16MiB` or `128KiB..8MiB`.
    pub fn parse(s: &str) -> Result<Self, Failure> {
        let bad = |why: &str| Failure::Usage(format!("--size {s:?}: {why}"));
        let one = |v: &str| {
            let n = sluice_core::settings::size(v).map_err(&bad)?;
            if n == 0 {
                return Err(bad("a size of 0 bytes measures nothing"));
            }
            Ok(n)
        };
        if let Some((lo, hi)) = s.split_once("..") {
            let (lo, hi) = (one(lo)?, one(hi)?);
            if lo >= hi {
                return Err(bad("the range's low end must be below its high end"));
            }
            return Ok(Self::LogUniform { lo, hi });
        }
        let sizes = s.split(',').map(one).collect::<Result<Vec<_>, _>>()?;
        Ok(match sizes.as_slice() {
            [n] => Self::Fixed(*n),
            _ => Self::Choice(sizes),
        })
    }

    /// `--size-dist FILE`: one size per line (`#` comments and blank lines ignored), drawn
    /// uniformly, so a size listed twice is drawn twice as often.
    pub fn from_file(path: &Path) -> Result<Self, Failure> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("--size-dist {}: {e}", path.display())))?;
        let mut sizes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let n = sluice_core::settings::size(line)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    Failure::Usage(format!(
                        "--size-dist {} line {}: {line:?} is not a size above 0",
                        path.display(),
                        i + 1
                    ))
                })?;
            sizes.push(n);
        }
        match sizes.len() {
            0 => Err(Failure::Usage(format!(
                "--size-dist {}: no sizes in the file",
                path.display()
            ))),
            1 => Ok(Self::Fixed(sizes[0])),
            _ => Ok(Self::Choice(sizes)),
        }
    }

    /// One size, drawn from `rng`.
    pub fn sample(&self, rng: &mut fastrand::Rng) -> u64 {
        match self {
            Self::Fixed(n) => *n,
            Self::Choice(v) => v[rng.usize(..v.len())],
            Self::LogUniform { lo, hi } => {
                let (l, h) = ((*lo as f64).ln(), (*hi as f64).ln());
                ((l + rng.f64() * (h - l)).exp().round() as u64).clamp(*lo, *hi)
            }
        }
    }

    /// The largest size it can draw (what a writer's source buffer must hold).
    pub fn max(&self) -> u64 {
        match self {
            Self::Fixed(n) => *n,
            Self::Choice(v) => v.iter().copied().max().unwrap_or(0),
            Self::LogUniform { hi, .. } => *hi,
        }
    }
}

impl std::fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed(n) => write!(f, "{n}"),
            Self::Choice(v) => {
                let parts: Vec<String> = v.iter().map(u64::to_string).collect();
                f.write_str(&parts.join(","))
            }
            Self::LogUniform { lo, hi } => write!(f, "{lo}..{hi}"),
        }
    }
}

/// One accelerator's appetite in an MLPerf Storage training workload: DLIO's emulated
/// compute time per batch and the utilisation (AU) a run must keep to pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accelerator {
    pub name: &'static str,
    /// Seconds of emulated compute per batch (`train.computation_time`).
    pub compute_s: f64,
}

/// The MLPerf Storage workloads, as their DLIO configs (mlcommons/storage,
/// `configs/dlio/workload/*.yaml`) define them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Preset {
    Unet3d,
    Cosmoflow,
    Resnet50,
    Dlrm,
    /// retinanet (MLPerf Storage v3.0): 1,170,301 JPEG files of 322,957 bytes, one sample
    /// each (`sluice serve --synthetic retinanet` serves them).
    Retinanet,
    /// flux (MLPerf Storage v3.0, open division): 4,296 parquet files of 288 samples of
    /// 2,164,832 bytes.
    Flux,
    /// llama3-8b's checkpoint: 105 GB (15 GB model + 90 GB optimizer state, fp16/fp32) over
    /// 8 ranks, one object per rank.
    Llama3_8b,
}

impl Preset {
    pub fn parse(s: &str) -> Result<Self, Failure> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "unet3d" => Self::Unet3d,
            "cosmoflow" => Self::Cosmoflow,
            "resnet50" => Self::Resnet50,
            "dlrm" => Self::Dlrm,
            "retinanet" => Self::Retinanet,
            "flux" => Self::Flux,
            "llama3-8b" => Self::Llama3_8b,
            _ => {
                return Err(Failure::Usage(format!(
                    "--preset {s:?}: not a preset; known: unet3d, cosmoflow, resnet50, dlrm, \
                     retinanet, flux, llama3-8b"
                )));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unet3d => "unet3d",
            Self::Cosmoflow => "cosmoflow",
            Self::Resnet50 => "resnet50",
            Self::Dlrm => "dlrm",
            Self::Retinanet => "retinanet",
            Self::Flux => "flux",
            Self::Llama3_8b => "llama3-8b",
        }
    }

    /// Bytes of one stored object: a sample file (unet3d: `record_length_bytes`), a
    /// TFRecord or parquet file of `num_samples_per_file` records, or one rank's share of
    /// the checkpoint.
    pub fn object_size(self) -> u64 {
        match self {
            Self::Unet3d => 146_600_628,
            Self::Cosmoflow => 2_828_486,
            Self::Resnet50 => 1_251 * 114_660,
            Self::Dlrm => 4_718_592 * 761,
            Self::Retinanet => 322_957,
            Self::Flux => 288 * 2_164_832,
            Self::Llama3_8b => 105_000_000_000 / 8,
        }
    }

    /// Ranks writing a checkpoint (the closed division's minimum for the model).
    pub fn checkpoint_ranks(self) -> Option<usize> {
        (self == Self::Llama3_8b).then_some(8)
    }

    /// (bytes of one sample, samples per batch, minimum AU, accelerators with a config).
    fn training(self) -> Option<(f64, f64, f64, &'static [Accelerator])> {
        match self {
            // unet3d_h100.yaml: 0.323 s; unet3d_b200.yaml: 0.162 s (H100's halved, as the
            // file says).
            Self::Unet3d => Some((
                146_600_628.0,
                7.0,
                0.90,
                &[
                    Accelerator {
                        name: "H100",
                        compute_s: 0.323,
                    },
                    Accelerator {
                        name: "B200",
                        compute_s: 0.162,
                    },
                ],
            )),
            // cosmoflow_h100.yaml; no B200 config exists.
            Self::Cosmoflow => Some((
                2_828_486.0,
                1.0,
                0.70,
                &[Accelerator {
                    name: "H100",
                    compute_s: 0.0035,
                }],
            )),
            // resnet50_h100.yaml; no B200 config exists.
            Self::Resnet50 => Some((
                114_660.07,
                400.0,
                0.90,
                &[Accelerator {
                    name: "H100",
                    compute_s: 0.224,
                }],
            )),
            // dlrm_b200.yaml (parquet; the H100 config is a different dataset).
            Self::Dlrm => Some((
                761.0,
                16_384.0,
                0.70,
                &[Accelerator {
                    name: "B200",
                    compute_s: 0.000_375,
                }],
            )),
            // retinanet_b200.yaml (MLPerf Storage v3.0).
            Self::Retinanet => Some((
                322_957.0,
                24.0,
                0.85,
                &[Accelerator {
                    name: "B200",
                    compute_s: 0.04755,
                }],
            )),
            // flux_b200.yaml (MLPerf Storage v3.0, 288 samples a file).
            Self::Flux => Some((
                2_164_832.0,
                48.0,
                0.90,
                &[Accelerator {
                    name: "B200",
                    compute_s: 1.35,
                }],
            )),
            Self::Llama3_8b => None,
        }
    }

    /// For each accelerator with a config: how many this read rate keeps at or above the
    /// workload's minimum AU. DLIO's AU is compute time over run time; with reads
    /// overlapping compute, a step stays within `compute / AU` while the accelerator gets
    /// `batch × sample bytes × AU / compute` bytes per second, so the rate feeds
    /// `rate / that` of them.
    pub fn accelerators_fed(self, mb_per_s: f64) -> Vec<(&'static str, u64)> {
        let Some((sample, batch, au, accs)) = self.training() else {
            return Vec::new();
        };
        accs.iter()
            .map(|a| {
                let need = batch * sample * au / a.compute_s;
                (a.name, (mb_per_s * 1e6 / need).floor() as u64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_each_form_and_refuse_nonsense() {
        assert_eq!(SizeSpec::parse("4MiB").unwrap(), SizeSpec::Fixed(4 << 20));
        assert_eq!(
            SizeSpec::parse("1KiB,2KiB").unwrap(),
            SizeSpec::Choice(vec![1024, 2048])
        );
        assert_eq!(
            SizeSpec::parse("128KiB..8MiB").unwrap(),
            SizeSpec::LogUniform {
                lo: 128 << 10,
                hi: 8 << 20
            }
        );
        for bad in ["", "0", "8MiB..1MiB", "1MiB..1MiB", "lots", "1KiB,,2KiB"] {
            let e = SizeSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--size"), "{bad}: {e}");
        }
    }

    #[test]
    fn log_uniform_stays_in_range_and_spreads_by_octave() {
        let spec = SizeSpec::parse("1KiB..1MiB").unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let draws: Vec<u64> = (0..20_000).map(|_| spec.sample(&mut rng)).collect();
        assert!(draws.iter().all(|n| (1024..=1 << 20).contains(n)));
        // Ten octaves, ~10% each: the lowest and the highest both get their share.
        let low = draws.iter().filter(|n| **n < 2048).count();
        let high = draws.iter().filter(|n| **n >= 512 << 10).count();
        for c in [low, high] {
            assert!((1_500..2_500).contains(&c), "{low} {high}");
        }
    }

    #[test]
    fn a_size_file_is_read_with_comments_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sizes");
        std::fs::write(&p, "# sizes\n4KiB\n\n1MiB # big\n").unwrap();
        assert_eq!(
            SizeSpec::from_file(&p).unwrap(),
            SizeSpec::Choice(vec![4096, 1 << 20])
        );
        std::fs::write(&p, "4KiB\nhuge\n").unwrap();
        let e = SizeSpec::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("huge"), "{e}");
    }

    #[test]
    fn accelerators_fed_follow_dlio_rule() {
        // One H100 on unet3d needs 7 × 146.6 MB × 0.9 / 0.323 s ≈ 2,859 MB a second.
        let fed = Preset::Unet3d.accelerators_fed(2_900.0);
        assert_eq!(fed, vec![("H100", 1), ("B200", 0)]);
        assert_eq!(
            Preset::Unet3d.accelerators_fed(6_000.0),
            vec![("H100", 2), ("B200", 1)]
        );
        // cosmoflow: 2.83 MB × 0.7 / 3.5 ms ≈ 566 MB a second per H100.
        assert_eq!(
            Preset::Cosmoflow.accelerators_fed(1_200.0),
            vec![("H100", 2)]
        );
        // retinanet: 24 × 322,957 B × 0.85 / 47.55 ms ≈ 139 MB a second (505 files) per B200.
        assert_eq!(
            Preset::Retinanet.accelerators_fed(1_000.0),
            vec![("B200", 7)]
        );
        // flux: 48 × 2.16 MB × 0.9 / 1.35 s ≈ 69 MB a second per B200.
        assert_eq!(Preset::Flux.accelerators_fed(700.0), vec![("B200", 10)]);
        assert!(Preset::Llama3_8b.accelerators_fed(1e6).is_empty());
        assert!(
            Preset::parse("bert")
                .unwrap_err()
                .to_string()
                .contains("--preset")
        );
    }
}
