//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.

// Canonical JSON and hash vectors of schema/vectors.json, recomputed with strata.
mod vectors;

// The JSON Schemas of schema/objects/ against the envelopes strata prints.
mod schema;

// Canonical JSON properties (proptest): round trip, fixed point, key order, unsafe integers.
mod canonical;
