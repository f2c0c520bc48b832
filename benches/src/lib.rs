//! Criterion benches live in `benches/`; see README.
