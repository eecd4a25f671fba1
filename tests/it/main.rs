//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.

mod cli;
mod resolve;
mod session; // sessions: triggers, sets, activation, render, resume, views, forks, CLI // the mount resolver: mappings, path checks, symlinks, properties
mod store; // the bitemporal store: transactions, queries, log, evict, fsck, crashes // the strata binary end to end: index, edit, inspect, errors
