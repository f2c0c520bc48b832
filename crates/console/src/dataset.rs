//! DLIO-style datasets: `sluice gen` writes one, `sluice bench` seeds its runs with one.

use crate::output::{Failure, progress};
use bytes::Bytes;
use futures::StreamExt;
use sluice_core::{ObjectStore, ObjectStoreExt, ObjectUri};
use std::sync::Arc;

/// The mean record size of MLPerf Storage's unet3d workload (bytes): the default object
/// size wherever the CLI generates or serves a dataset.
pub const UNET3D_RECORD_SIZE: &str = "146600628";

/// `train/<sub>/img_<i>_of_<N>.npz` keys under `prefix`, DLIO's layout.
pub fn dataset_keys(prefix: &str, count: usize, per_folder: usize) -> Vec<String> {
    let prefix = if prefix.is_empty() || prefix.ends_with('/') {
        prefix.to_owned()
    } else {
        format!("{prefix}/")
    };
    let width = count.saturating_sub(1).max(1).to_string().len();
    (0..count)
        .map(|i| {
            format!(
                "{prefix}train/{:0width$}/img_{i}_of_{count}.npz",
                i / per_folder.max(1)
            )
        })
        .collect()
}

/// Writes `count` DLIO-style records of `size` bytes under `base`, `jobs` at a time;
/// returns the bytes written.
pub async fn write_dataset(
    store: Arc<dyn ObjectStore>,
    base: &ObjectUri,
    count: usize,
    size: u64,
    jobs: usize,
    quiet: bool,
) -> Result<u64, Failure> {
    let keys = dataset_keys(base.key(), count, 1000);
    let pb = progress(count as u64, false, quiet);
    let size = usize::try_from(size)
        .map_err(|_| Failure::Usage(format!("--size {size} does not fit in memory")))?;
    let mut puts = futures::stream::iter(keys)
        .map(|key| {
            let store = store.clone();
            let uri = base.with_key(key);
            tokio::spawn(async move {
                let k = uri.key().to_owned();
                let record =
                    tokio::task::spawn_blocking(move || sluice_testdata::npz::record(&k, size))
                        .await
                        .map_err(|e| Failure::Other(format!("generating a record failed: {e}")))?;
                let n = record.len() as u64;
                store.put(&uri, Bytes::from(record).into()).await?;
                Ok::<u64, Failure>(n)
            })
        })
        .buffer_unordered(jobs.max(1));
    let mut bytes = 0;
    while let Some(r) = puts.next().await {
        bytes += r.map_err(|e| Failure::Other(format!("an upload task failed: {e}")))??;
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_layout_matches_dlio() {
        let k = dataset_keys("data", 3, 2);
        assert_eq!(
            k,
            vec![
                "data/train/0/img_0_of_3.npz",
                "data/train/0/img_1_of_3.npz",
                "data/train/1/img_2_of_3.npz"
            ]
        );
    }
}
