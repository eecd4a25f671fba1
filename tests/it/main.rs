//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.
mod store; // the bitemporal store: transactions, queries, log, evict, fsck, crashes
mod temporal; // the proptest oracle: as_of and history against a BTreeMap model
