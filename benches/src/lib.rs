//! Criterion benches live in `benches/`; see README.

#![warn(missing_docs)]
