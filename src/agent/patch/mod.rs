//! `patch`: the agent's writing tools' pure core: line operations (seed 002), unified diffs
//! (seed 001), conflicts, and the SHA-256 a write must quote.
//!
//! Uses nothing outside itself (siblings only, through `super::`): it reads no file and writes
//! none; `agent::write` does, around it.
//!
//! # Layout
//! Lowest first; each uses only those before it:
//! - `text`: the line model (lines keep their own endings; a `\r` before `\n` is the ending).
//! - [`hash`]: [`sha256_hex`] of a whole file, and [`check_sha256_hex`] of a quoted one.
//! - [`conflict`]: [`Conflict`] (`stale_buffer | overlapping_edits | patch_mismatch`), the current
//!   hash, and [`conflict_diff`] from what the agent saw to what is there.
//! - [`request`]: [`WritePatchRequest`], seed 002's arguments read leniently from JSON
//!   ([`parse_request`]), the original's [`ErrorCode`]s, and [`Failure`].
//! - [`mod@validate`]: [`validate()`], the original's validator and messages plus order and
//!   overlap, into a [`Batch`] of typed [`LineOp`]s.
//! - [`line_ops`]: [`apply_batch`], the batch applied bottom-up, all or nothing.
//! - [`response`]: [`WritePatchResponse`], the result as data, with the request echoed.
//! - [`unified`]: [`apply_unified`], a unified diff parsed strictly and applied with its context
//!   checked exactly.
//!
//! # Flow of `apply_patch` (seed 002's line operations, `workspace_write_patch`)
//! [`parse_request`] → [`validate()`] → the engine reads each file's current text (a pushed
//! unsaved copy first) → [`apply_batch`] → the engine writes every file or none →
//! [`WritePatchResponse`]. Every failure is a [`Failure`] (code and message); a stale hash or a
//! mismatch also gives a [`Conflict`] ([`ApplyError::conflict`]).
//!
//! The rules for order and overlap are in [`mod@validate`]'s docs, those for line endings in
//! [`line_ops`]'s and [`unified`]'s.

pub mod conflict;
pub mod hash;
pub mod line_ops;
pub mod request;
pub mod response;
pub mod unified;
pub mod validate;

mod text;

pub use conflict::{Conflict, ConflictKind, LineMismatch, conflict_diff};
pub use hash::{InvalidHash, check_sha256_hex, same_sha256, sha256_hex};
pub use line_ops::{
    AppliedFile, ApplyError, BatchError, ChangeMismatch, Current, apply_batch, apply_file,
};
pub use request::{Change, ErrorCode, Failure, FilePatch, WritePatchRequest, parse_request};
pub use response::{FileResult, WritePatchResponse};
pub use unified::{
    Applied, Hunk, HunkLine, LineKind, MalformedPatch, PatchMismatch, UnifiedError, UnifiedPatch,
    apply_unified, parse_unified,
};
pub use validate::{Batch, FileEdit, LineChange, LineOp, validate};

#[cfg(test)]
mod tests;
