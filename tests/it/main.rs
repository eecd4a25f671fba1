//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.

// Canonical JSON properties (proptest): round trip, fixed point, key order, unsafe integers.
mod canonical;
// The strata binary end to end: index, edit, inspect, errors.
mod cli;
// The daemon with real processes and sockets: protocol, bad input, lifecycle, concurrency, SIGKILL.
mod daemon;
// Store privacy: modes under any umask, the lock file, deny rules in every case, another uid.
mod privacy;
// The mount resolver: mappings, path checks, symlinks, properties.
mod resolve;
// The layering check of .ci/layering, on this tree and on copies with bad imports.
mod layering;
// The JSON Schemas of schema/objects/ against the envelopes strata prints.
mod schema;
// The JSON Schemas of schema/rpc/: no drift from the types, one pair per method, real responses valid.
mod rpc_schema;
// Sessions: triggers, sets, activation, render, resume, views, forks, deltas, CLI.
mod session;
// Review: session reads through links out of a mount, kept JSON after loads and forks.
mod session_review;
// The bitemporal store: transactions, queries, log, evict, fsck, crashes.
mod store;
// The proptest oracle: as_of and history against a BTreeMap model.
mod temporal;
// Canonical JSON and hash vectors of schema/vectors.json, recomputed with strata.
mod vectors;
