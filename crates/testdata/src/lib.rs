//! sluice-testdata: the data sluice's tests, benchmarks and `sluice gen` write.
//!
//! `pattern`: object bytes that are a pure function of (key, offset), so any byte of any
//! range can be verified without a copy. `npz`: NumPy `.npz` files and DLIO-style records.
//! Kept out of `sluice-core`, which a reader links: it needs neither, nor `zip`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod npz;
pub mod pattern;
