//! The module's tests, one file per job: the validator, line operations, unified diffs, and the
//! property tests over both.

mod line_ops;
mod props;
mod unified;
mod validate;
