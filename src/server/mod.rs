//! Front ends over the engine that run as servers: the JSON-RPC daemon on the store's Unix
//! socket (`strata serve`) and its client, the way the CLI and Rust callers reach it, and the
//! MCP stdio server of `strata mcp` ([`mcp::McpServer`]).
//!
//! Uses `engine`, `agent` and what they use; never `cli`. Thin adapters: every answer is an
//! engine response or an agent tool's; nothing but protocol is written to stdout.
//!
//! # Layout
//! - `protocol`: the wire format (JSON-RPC 2.0, one message per line), error codes, the
//!   daemon's own methods' results.
//! - `rpc`: the daemon (tokio): socket, peers, concurrency, shutdown, idleness.
//! - `client`: the blocking client, which starts a daemon when none answers.
//! - [`mcp`]: MCP over stdio on rmcp; docs mode (a docs-mcp drop-in) first.

pub mod client;
pub mod mcp;
pub mod protocol;
pub mod rpc;
