//! The conformance suite against Garage, a distributed S3 store we did not write: a 3-node
//! cluster with replication factor 3 (`scripts/garage`), once through its first node and
//! once spread over all three (`S3_ENDPOINT_URIS`), for every backend. Runs under
//! `scripts/test-garage`, which starts the cluster and sets the variables
//! `External::garage_from_env` reads; the cases that need our own server's faults are listed
//! in `NEEDS_TEST_SERVER`.

use sluice_core::{ObjectStore, Result, StoreConfig};
use std::sync::Arc;

fn hyper(cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    sluice::registry::open(Some("hyper"), cfg)
}

fn awssdk(cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    sluice::registry::open(Some("awssdk"), cfg)
}

fn objectstore(cfg: StoreConfig) -> Result<Arc<dyn ObjectStore>> {
    sluice::registry::open(Some("objectstore"), cfg)
}

sluice_testserver::conformance_suite!(@external hyper_one_node, false, hyper);
sluice_testserver::conformance_suite!(@external hyper_three_nodes, true, hyper);
sluice_testserver::conformance_suite!(@external awssdk_one_node, false, awssdk);
sluice_testserver::conformance_suite!(@external awssdk_three_nodes, true, awssdk);
sluice_testserver::conformance_suite!(@external objectstore_one_node, false, objectstore);
sluice_testserver::conformance_suite!(@external objectstore_three_nodes, true, objectstore);
