//! What the `sluice` command and `sluice-bench` share: the store flags, failures and their
//! exit codes, figures and progress bars, CPU accounting, and DLIO-style datasets.

pub mod dataset;
pub mod output;
pub mod rusage;
mod store;

pub use output::Failure;
pub use store::StoreArgs;
