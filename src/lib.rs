//! strata: a content-addressed object store with bitemporal history, embedded on redb.
//!
//! It is the memory of LLM agent runtimes: files (through mount mappings), tool calls, chats and
//! sessions become hashed objects whose every version is kept with the time it held (valid time)
//! and the time the store learned it (transaction time).
//!
//! # Layout
//! Modules, lowest first; a module uses only the ones listed before it in its own docs, and
//! nothing imports a module above it:
//! - [`hash`]: canonical JSON (RFC 8785), SHA-256 and BLAKE3.
//! - [`object`]: the envelope types of seed 003 and their five hashes.
//! - [`resolve`]: mount mappings between agent paths and canonical paths, path checks.
//! - [`store`]: the bitemporal object store on redb ([`Store`]).
//! - [`index`]: indexing files and scanning trees into the store ([`index::Indexer`]).
//! - [`session`]: an agent runtime's context, persisted at every commit ([`session::Session`]).
//! - [`agent`]: the agent-facing tools; first docs mode ([`agent::docs::DocsLibrary`]).
//! - [`server`]: the tokio front ends; first the MCP stdio server ([`server::mcp::McpServer`]).
//! - `error`: [`Error`], the one error type.

pub mod agent;
pub mod engine;
pub mod hash;
pub mod index;
pub mod object;
pub mod resolve;
pub mod server;
pub mod session;
pub mod store;

mod error;

pub use error::{Error, Result};
pub use hash::Hash;
pub use object::{FilesystemSource, Object, ObjectType, Source};
pub use resolve::{FilesystemResolver, MountMapping};
pub use store::{Op, Origin, Store, Timestamp, TxId, TxReceipt};

/// The README's Rust examples, compiled and run as doctests so that they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
