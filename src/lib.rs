//! strata: a content-addressed object store with bitemporal history, embedded on redb.
//!
//! It is the memory of LLM agent runtimes: files (through mount mappings), tool calls, chats and
//! sessions become hashed objects whose every version is kept with the time it held (valid time)
//! and the time the store learned it (transaction time).
//!
//! # Brief overview
//! The principal type is the [`Engine`]: it owns a store and its live sessions and answers
//! typed requests ([`engine::Request`], one type per operation, each with its response type);
//! the CLI, the daemon ([`server`]) and Rust callers all go through it. Below it, a [`Store`] is
//! a handle on a [`Backend`] (the bitemporal store's contract; redb is the embedded default), an
//! [`Indexer`] turns files into versions, and a [`Session`] is an agent runtime's context,
//! persisted at every commit.
//!
//! # Layout
//! Modules, lowest first; a module uses only the ones below it (`.ci/layering` checks it):
//! - [`hash`]: canonical JSON (RFC 8785), SHA-256 and BLAKE3.
//! - [`object`]: the envelope types of seed 003 and their five hashes.
//! - [`resolve`]: mount mappings between agent paths and canonical paths, path checks.
//! - `store`: the [`Backend`] trait, the [`Store`] handle, the redb implementation.
//! - `index`: the one disk path, indexing files and scanning trees ([`Indexer`], [`scan`]).
//! - `session`: an agent runtime's context ([`Session`]).
//! - [`agent`]: the agent-facing tools: the session tools ([`agent::tools::call`]) with file
//!   descriptors ([`agent::fd`]), and docs mode ([`agent::docs::DocsLibrary`]).
//! - [`engine`]: typed requests and responses over all of the above ([`Engine`]).
//! - [`watch`]: the file watcher that keeps the store equal to the disk under watched roots.
//! - [`server`]: the daemon on the store's Unix socket and its client; the MCP stdio server.
//! - `error`: [`Error`], the one error type.

pub mod agent;
pub mod engine;
pub mod hash;
pub mod object;
pub mod resolve;
pub mod server;
pub mod watch;

mod error;
mod index;
mod session;
mod store;

pub use engine::{Access, Engine};
pub use error::{Error, RemoteCause, Result};
pub use hash::Hash;
pub use index::{
    Action, DenyRules, Indexer, Planned, ScanOptions, ScanProgress, ScanSummary, ScanThreads,
    Settings, SkipKind, Skipped, scan,
};
pub use object::{FilesystemSource, Object, ObjectType, Source};
pub use resolve::{FilesystemResolver, MountMapping};
pub use session::{
    ACTIVE_CONTENT, CallerSpan, Commit, DescriptorEntry, DescriptorOrigin, DescriptorSettings,
    Descriptors, END_CONTENT, FileIds, FileState, ForkOrigin, Meta, OrderedSet, PushedCopy,
    Reconciled, RenderOptions, ResumeReport, Session, SessionConfig, SessionOptions, Sets,
    ToolcallInput, Touched,
};
pub use store::{
    BACKEND_FILE, Backend, DB_FILE, DocumentMeta, EncodedBlob, EntityInfo, FORMAT_VERSION,
    FileStat, Finding, GcReport, HistoryQuery, LOCK_FILE, Listing, LoggedOp, MigrateReport,
    ObjectMeta, Op, Order, Origin, PgLocation, PgOpen, Put, ReplayRecord, StatEntry, StatUpdate,
    Stats, Store, Timestamp, TxId, TxReceipt, TxRecord, TxRequest, ValidFrom, Version, VersionInfo,
    migrate,
};

/// The README's Rust examples, compiled and run as doctests so that they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The number of cases a property test runs: `default`, or `STRATA_PROPTEST_CASES` when set.
#[cfg(test)]
pub(crate) fn proptest_cases(default: u32) -> u32 {
    std::env::var("STRATA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
