//! strata's integration tests: one binary, one module per area, all through the public API and
//! the real `strata` binary.

mod resolve; // the mount resolver: mappings, path checks, symlinks, properties
