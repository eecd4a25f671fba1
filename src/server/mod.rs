//! `server`: the tokio front ends over the engine: the JSON-RPC daemon of `strata serve` (to
//! come, as `rpc`) and the MCP stdio server of `strata mcp` ([`mcp::McpServer`]).
//!
//! Uses `engine`, `watch`, `agent` and what they use; never `cli`. Front ends only translate:
//! every answer comes from the engine or an agent tool, and nothing but protocol is written to
//! stdout.
//!
//! # Layout
//! - [`mcp`]: MCP over stdio on rmcp; docs mode (a docs-mcp drop-in) first.

pub mod mcp;
