//! Several client hosts at once: under `mpirun`, each `sluice bench` process is one rank.
//! The ranks agree on the run (rank 0's choices are broadcast), start each row together (a
//! barrier) and send their figures to rank 0 (a gather), which prints one aggregate. MPI
//! itself does all three (the `mpi` feature, rsmpi over the system's MPI library); without
//! the feature a process launched by mpirun with more than one rank refuses to run rather
//! than print N unrelated tables.

use sluice_console::output::Failure;

/// This process's place among the ranks of one run.
pub struct Ranks {
    pub rank: usize,
    pub size: usize,
    #[cfg(feature = "mpi")]
    universe: Option<mpi::environment::Universe>,
}

/// The world size MPI launchers put in the environment (Open MPI, then MPICH/PMI, PMIx).
fn launched_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

impl Ranks {
    /// One rank of one, unless launched by an MPI launcher with more.
    pub fn init() -> Result<Ranks, Failure> {
        let single = Ranks {
            rank: 0,
            size: 1,
            #[cfg(feature = "mpi")]
            universe: None,
        };
        match launched_size() {
            None | Some(0 | 1) => Ok(single),
            Some(n) => Self::init_mpi(n),
        }
    }

    #[cfg(not(feature = "mpi"))]
    fn init_mpi(n: usize) -> Result<Ranks, Failure> {
        Err(Failure::Usage(format!(
            "launched as one of {n} MPI ranks, but this sluice was built without MPI: \
             rebuild it with `--features mpi` (needs libopenmpi-dev) to run one benchmark \
             over several ranks"
        )))
    }

    #[cfg(feature = "mpi")]
    fn init_mpi(_n: usize) -> Result<Ranks, Failure> {
        use mpi::traits::Communicator;
        // Serialized: calls come from whichever runtime thread runs the bench, one at a time.
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| Failure::Other("MPI could not be initialised".into()))?;
        let world = universe.world();
        Ok(Ranks {
            rank: usize::try_from(world.rank()).unwrap_or(0),
            size: usize::try_from(world.size()).unwrap_or(1),
            universe: Some(universe),
        })
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Waits until every rank is here.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        if let Some(u) = &self.universe {
            use mpi::traits::CommunicatorCollectives;
            u.world().barrier();
        }
    }

    /// Rank 0's `value`, on every rank.
    pub fn broadcast(&self, value: String) -> String {
        #[cfg(feature = "mpi")]
        if let Some(u) = &self.universe {
            use mpi::traits::{Communicator, Root};
            let world = u.world();
            let root = world.process_at_rank(0);
            let mut len = value.len() as u64;
            root.broadcast_into(&mut len);
            let mut buf = if self.is_root() {
                value.into_bytes()
            } else {
                vec![0u8; len as usize]
            };
            root.broadcast_into(&mut buf[..]);
            return String::from_utf8_lossy(&buf).into_owned();
        }
        value
    }

    /// Every rank's `value`, in rank order, on rank 0; nothing elsewhere.
    pub fn gather(&self, value: String) -> Vec<String> {
        #[cfg(feature = "mpi")]
        if let Some(u) = &self.universe {
            use mpi::datatype::PartitionMut;
            use mpi::traits::{Communicator, Root};
            let world = u.world();
            let root = world.process_at_rank(0);
            let bytes = value.into_bytes();
            let len = mpi::Count::try_from(bytes.len()).expect("a report under 2 GiB");
            if !self.is_root() {
                root.gather_into(&len);
                root.gather_varcount_into(&bytes[..]);
                return Vec::new();
            }
            let mut counts = vec![0 as mpi::Count; self.size];
            root.gather_into_root(&len, &mut counts[..]);
            let displs: Vec<mpi::Count> = counts
                .iter()
                .scan(0, |at, c| {
                    let d = *at;
                    *at += c;
                    Some(d)
                })
                .collect();
            let total: mpi::Count = counts.iter().sum();
            let mut buf = vec![0u8; total as usize];
            {
                let mut part = PartitionMut::new(&mut buf[..], &counts[..], &displs[..]);
                root.gather_varcount_into_root(&bytes[..], &mut part);
            }
            return counts
                .iter()
                .zip(&displs)
                .map(|(c, d)| {
                    String::from_utf8_lossy(&buf[*d as usize..(*d + *c) as usize]).into_owned()
                })
                .collect();
        }
        vec![value]
    }
}
