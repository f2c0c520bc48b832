//! What to read: a list of objects, how it is shuffled and how it is split across ranks and
//! workers.

use crate::columns::Columns;
pub use crate::item::Item;
use sluice_core::{ObjectStore, ObjectUri, Result};
use std::sync::Arc;

/// What a loader reads: a list of objects in a fixed order, which each loader then
/// shuffles (per epoch) and deals out among readers (see `plan_indices`). Every reader
/// must build it in the same order for the shards to be disjoint.
///
/// Kept compact (an object costs its key's bytes and about 32 more: `columns`), and shared:
/// a clone, and each loader made from it, hold the same items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dataset {
    cols: Arc<Columns>,
}

impl Dataset {
    /// From URIs as given: no listing, no HEAD; sizes are learned while reading.
    pub fn from_uris(uris: impl IntoIterator<Item = ObjectUri>) -> Self {
        let uris = uris.into_iter();
        let mut cols = Columns::with_capacity(uris.size_hint().0);
        for uri in uris {
            cols.push(&uri, None, None);
        }
        Self::from_columns(cols)
    }

    /// From a listing of `prefix` (recursive, several pages in flight: `list_parallel_into`,
    /// each page kept compact as it comes), keeping the sizes and ETags it reports; only keys
    /// ending with `suffix` when given. Items come in key order.
    pub async fn from_prefix(
        store: &dyn ObjectStore,
        prefix: &ObjectUri,
        suffix: Option<&str>,
    ) -> Result<Self> {
        let mut cols = Columns::default();
        sluice_core::list_parallel_into(
            store,
            prefix,
            sluice_core::LIST_WORKERS,
            |part: &mut Columns, m| {
                if suffix.is_none_or(|s| m.uri.key().ends_with(s)) {
                    part.push(&m.uri, Some(m.size), m.etag.as_deref());
                }
            },
            |part| cols.append(&part),
        )
        .await?;
        let dataset = Self::from_columns(cols);
        crate::trim::after_burst();
        Ok(dataset)
    }

    /// From items as given, with whatever sizes and versions the caller already knows.
    pub fn from_items(items: impl IntoIterator<Item = Item>) -> Self {
        let items = items.into_iter();
        let mut cols = Columns::with_capacity(items.size_hint().0);
        for i in items {
            cols.push(&i.uri, i.size, i.etag.as_deref());
        }
        Self::from_columns(cols)
    }

    fn from_columns(mut cols: Columns) -> Self {
        cols.shrink_to_fit();
        Self {
            cols: Arc::new(cols),
        }
    }

    /// The `i`th item, if there are that many.
    pub fn get(&self, i: usize) -> Option<Item> {
        (i < self.len()).then(|| self.cols.item(i))
    }

    /// The `i`th item's key, if there are that many (no allocation).
    pub fn key(&self, i: usize) -> Option<&str> {
        (i < self.len()).then(|| self.cols.key(i))
    }

    /// The `i`th item's size, when known.
    pub fn size(&self, i: usize) -> Option<u64> {
        (i < self.len()).then(|| self.cols.size(i)).flatten()
    }

    /// The items, in dataset order, each built as it is reached.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Item> + '_ {
        (0..self.len()).map(|i| self.cols.item(i))
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.cols.len()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the items take on the heap (shared by every clone): what holding the dataset
    /// costs.
    pub fn heap_bytes(&self) -> usize {
        self.cols.heap_bytes()
    }
}

/// One reader's items in the order it reads them, built from the dataset one at a time, so
/// that a loader over millions of objects holds an index per object, not an `Item`.
#[derive(Debug)]
pub(crate) struct Shard {
    dataset: Dataset,
    order: std::vec::IntoIter<usize>,
}

impl Shard {
    pub(crate) fn new(dataset: &Dataset, order: Vec<usize>) -> Self {
        Self {
            dataset: dataset.clone(),
            order: order.into_iter(),
        }
    }

    /// The sizes of the items not read yet, in order (`None` where unknown).
    pub(crate) fn sizes(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        self.order.as_slice().iter().map(|&i| self.dataset.size(i))
    }
}

impl Iterator for Shard {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        self.order.next().map(|i| self.dataset.cols.item(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.order.size_hint()
    }
}

impl ExactSizeIterator for Shard {}

/// Which part of the dataset this reader takes: the dataset is cut into
/// `world_size × num_workers` disjoint shards, dealt round-robin after the shuffle, as
/// PyTorch's `DistributedSampler` does (see `plan_indices`). Default: one reader, all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sharding {
    /// This process's rank in distributed training, below `world_size`.
    pub rank: usize,
    /// Ranks reading the dataset; at least 1.
    pub world_size: usize,
    /// This reader's worker (a data-loader worker process) within its rank, below
    /// `num_workers`.
    pub worker_id: usize,
    /// Workers per rank; at least 1.
    pub num_workers: usize,
}

impl Default for Sharding {
    fn default() -> Self {
        Self {
            rank: 0,
            world_size: 1,
            worker_id: 0,
            num_workers: 1,
        }
    }
}

impl Sharding {
    /// Checks that `world_size` and `num_workers` are at least 1 and that `rank` and
    /// `worker_id` are below them; the error names the field at fault.
    pub fn validate(&self) -> Result<()> {
        let bad = |option: &str, reason: String| Err(sluice_core::Error::config(option, reason));
        if self.world_size == 0 {
            return bad("world_size", "must be at least 1".into());
        }
        if self.rank >= self.world_size {
            return bad(
                "rank",
                format!(
                    "rank {} is not below world_size {}",
                    self.rank, self.world_size
                ),
            );
        }
        if self.num_workers == 0 {
            return bad("num_workers", "must be at least 1".into());
        }
        if self.worker_id >= self.num_workers {
            return bad(
                "worker_id",
                format!(
                    "worker_id {} is not below num_workers {}",
                    self.worker_id, self.num_workers
                ),
            );
        }
        Ok(())
    }

    /// Shard number among `world_size × num_workers`.
    fn index(&self) -> usize {
        self.rank * self.num_workers + self.worker_id
    }

    fn count(&self) -> usize {
        self.world_size * self.num_workers
    }
}

/// The indices this reader visits for `epoch`: the whole dataset is permuted identically on
/// every rank (same seed and epoch), then dealt round-robin, so shards are disjoint and
/// together complete, whatever the shuffle — DistributedSampler's rule.
pub fn plan_indices(
    len: usize,
    shuffle_seed: Option<u64>,
    epoch: u64,
    sharding: Sharding,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    if let Some(seed) = shuffle_seed {
        fastrand::Rng::with_seed(seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .shuffle(&mut order);
    }
    let (me, n) = (sharding.index(), sharding.count());
    order
        .into_iter()
        .enumerate()
        .filter(|(pos, _)| pos % n == me)
        .map(|(_, i)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn shards_are_disjoint_and_complete(len in 0usize..500, world in 1usize..5, workers in 1usize..5, seed in proptest::option::of(any::<u64>()), epoch in 0u64..4) {
            let mut seen = vec![0u32; len];
            for rank in 0..world {
                for worker in 0..workers {
                    let s = Sharding { rank, world_size: world, worker_id: worker, num_workers: workers };
                    for i in plan_indices(len, seed, epoch, s) {
                        seen[i] += 1;
                    }
                }
            }
            prop_assert!(seen.iter().all(|&c| c == 1));
        }
    }

    #[test]
    fn shuffle_is_seeded_and_changes_per_epoch() {
        let s = Sharding::default();
        let a = plan_indices(100, Some(7), 0, s);
        assert_eq!(
            a,
            plan_indices(100, Some(7), 0, s),
            "same seed and epoch, same order"
        );
        assert_ne!(
            a,
            plan_indices(100, Some(7), 1, s),
            "a new permutation each epoch"
        );
        assert_ne!(a, (0..100).collect::<Vec<_>>());
        assert_eq!(plan_indices(5, None, 3, s), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn invalid_sharding_names_the_option() {
        let e = Sharding {
            rank: 2,
            world_size: 2,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("rank"), "{e}");
    }
}
