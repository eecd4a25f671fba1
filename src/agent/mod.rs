//! `agent`: the agent-facing tools (seeds 000, 001, 002, 004) as plain functions, which the
//! engine and the MCP server expose.
//!
//! Uses `session`, `index`, `store`, `resolve`, `object`, `hash` and `error`; never `engine`,
//! `watch`, `server` or `cli`.
//!
//! # Layout
//! - [`docs`]: docs mode (`strata mcp --docs-path DIR`), a drop-in for docs-mcp's five tools
//!   over a directory of Markdown files; it needs no store.
//! - [`fd`]: file descriptors (seed 004), the pure core: paging, `read_fd`, the original's XML.

pub mod docs;
pub mod fd;
