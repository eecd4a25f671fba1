//! Front ends over the engine that run as servers: the JSON-RPC daemon on the store's Unix
//! socket (`strata serve`) and its client, the way the CLI and Rust callers reach it.
//!
//! Uses `engine` (and `store`, `error` below it). Thin adapters: every answer is an engine
//! response; nothing here builds one.
//!
//! # Layout
//! - `protocol`: the wire format (JSON-RPC 2.0, one message per line), error codes, the
//!   daemon's own methods' results.
//! - `rpc`: the daemon (tokio): socket, peers, concurrency, shutdown, idleness.
//! - `client`: the blocking client, which starts a daemon when none answers.

pub mod client;
pub mod protocol;
pub mod rpc;
