//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.

// Canonical JSON properties (proptest): round trip, fixed point, key order, unsafe integers.
mod canonical;
// The strata binary end to end: index, edit, inspect, errors.
mod cli;
// The mount resolver: mappings, path checks, symlinks, properties.
mod resolve;
// `strata mcp` over stdio: docs mode's tools, errors, configuration, many servers, Python SDK.
mod mcp;
// The layering check of .ci/layering, on this tree and on copies with bad imports.
mod layering;
// The JSON Schemas of schema/objects/ against the envelopes strata prints.
mod schema;
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
