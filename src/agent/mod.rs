//! `agent`: the agent-facing tools (seeds 000, 001, 002, 004) as plain functions over a
//! session, which the engine and the MCP server expose.
//!
//! Uses `session`, `index`, `store`, `resolve`, `object`, `hash` and `error`; never `engine`,
//! `watch`, `server` or `cli`.
//!
//! The principal entry is [`tools::call`]: it runs one tool on a session, answers a large
//! output with a file descriptor, and records the call as a toolcall object of the session.
//!
//! # Layout
//! - [`docs`]: docs mode (`strata mcp --docs-path DIR`), a drop-in for docs-mcp's five tools
//!   over a directory of Markdown files; it needs no store.
//! - [`tools`]: the session tools' table (definitions, dispatch, recording, output formats).
//! - `files`: walking a session's mounts, file ids, what a `filepath` names. `args`: strict
//!   JSON arguments.
//! - `read`: `list_files`, `read_file`, `read_lines`, `get_excerpt`. `search`: `search`.
//!   `summary`: `summarize_file`. `history`: `get_file_history`, `get_file_diff`. `write`:
//!   `write_file`, `apply_patch`, `delete_file`, `rename_file`, `restore_file`.
//!   [`redact`]: credential redaction for excerpts, summaries and snippets.
//! - [`entrypoints`](mod@entrypoints): the excerpts of AGENTS.md, the README and manifests offered when a session
//!   starts.
//! - [`fd`]: file descriptors (seed 004), the pure core: paging, `read_fd`, the original's XML.
//!   [`descriptors`]: descriptors over a session (the live table, wrapping, persistence).
//! - [`approval`]: tokens for the writes that need a person (delete, rename).
//! - [`pushed`](mod@pushed): a runtime's unsaved copies of files (seed 002's client copy
//!   precedence): push and withdraw.
//! - [`patch`]: the writing tools' pure core (seed 002's line operations, seed 001's unified
//!   diffs, validation, conflicts).

pub mod approval;
mod args;
pub mod audit;
pub mod descriptors;
pub mod docs;
pub mod entrypoints;
pub mod fd;
mod files;
mod history;
pub mod patch;
pub mod pushed;
mod read;
pub mod redact;
mod search;
mod summary;
pub mod tools;
mod write;

#[cfg(test)]
mod tests;

pub use audit::{AuditEntry, AuditFile, audit};
pub use entrypoints::{Entrypoint, entrypoints};
pub use files::DEFAULT_EXCLUDES;
pub use pushed::{PushedFile, push, withdraw};
pub use read::{CHARS_PER_TOKEN, EXCERPT_LINES, tokens};
pub use summary::{SUMMARY_TOKENS, outline};
pub use tools::{
    ToolAnswer, ToolOutput, approve, call, tool_definition, tool_definitions, tool_names,
};
