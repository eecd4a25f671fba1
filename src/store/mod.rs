//! `Store`: the bitemporal, content-addressed object store, behind the [`Backend`] seam.
//!
//! Uses `object` and `hash` (and `error`).
//!
//! [`Backend`] is the store's contract: transactions of [`Op`]s (all or nothing, durable on
//! return), as-of queries with XTDB v1's semantics, history, the hash-chained log, contents,
//! evict, gc and fsck, and the stat cache the indexer keeps beside them. [`Store`] is a cheap,
//! cloneable handle on one backend (`Arc<dyn Backend>`): what sessions, the indexer and the
//! engine hold. The embedded implementation is redb's (`redb/`): a store is a directory holding
//! `store.redb` and `store.lock` (who holds it: pid, program, start time; redb's own file lock
//! is the real lock), the directory 0700 and its files 0600. redb types appear nowhere outside
//! `redb/`.
//!
//! # Layout
//! - `ops`: what a transaction is made of. `answers`: what queries return. `stat`: stat cache
//!   entries. `time`: [`Timestamp`] (UTC µs, RFC 3339) and [`TxId`].
//! - `log`: origins, op digests and the chain (engine-neutral). `codec`: the only user of
//!   bincode (record encodings).
//! - `damage`: the damage marker beside the store file (`store.damaged`): writes refused until
//!   repaired.
//! - `rescue`: what salvage and backup answer. `migrate`: a copy into either backend by
//!   replaying the log record for record ([`Backend::append_log`]).
//! - `private`: the store directory's modes (0700, files 0600, whatever the umask); every file
//!   strata makes in a store directory is made there.
//! - `postgres/`: the PostgreSQL implementation (a schema of a database shared by a team's
//!   machines; the same log, chain and codec).
//! - `redb/`: the redb implementation (tables, blobs and documents, deltas, the bitemporal write
//!   rule, evict, fsck).

mod answers;
mod codec;
pub mod damage;
mod group;
mod log;
mod migrate;
mod ops;
mod postgres;
pub(crate) mod private;
mod redb;
mod rescue;
mod rule;
mod stat;
mod time;

use std::path::Path;
use std::sync::Arc;

pub use answers::{
    DocumentMeta, EntityInfo, FileView, FileViewDoc, Finding, GcReport, HistoryQuery, Listing,
    MetaView, ObjectMeta, Order, Stats, Version, VersionInfo,
};
pub use log::{LoggedOp, Origin, TxRecord};
pub use migrate::{MigrateReport, ReplayRecord, migrate};
pub use ops::{EncodedBlob, Op, Put, TxReceipt, TxRequest, ValidFrom};
pub use postgres::{PgListener, PgLocation, PgOpen};
pub use rescue::{BackupReport, Rebuild, SalvageReport};
pub use stat::{FileStat, StatEntry, StatUpdate};
pub use time::{Timestamp, TxId};

use crate::error::{Error, Result};
use crate::hash::Hash;

/// The number of cores this process may use, asked of the system once per process (the
/// standard library reads the cgroup's quota files on every ask, ~0.2-0.4 ms); 1 if unknown.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The format version of the store file this build reads and writes (1: blobs in LZ4; 2: blobs
/// in zstd; 3: compact metadata records; 4: log headers may name their index run; 5: leaner
/// metadata rows, see docs/store.md "format 5"; 6: a file's source once, in `entity_ids`; 7:
/// blob chunks of 4 080 bytes in new stores, the size in `meta`; 8: a first write's filesystem
/// named once per transaction, in its log header; 9: the stat cache keyed by directory number
/// and file name; 10: the files' paths keyed so too).
pub const FORMAT_VERSION: u32 = 10;
/// The store file's name inside the store directory.
pub const DB_FILE: &str = "store.redb";
/// The file in a store directory that says the store lives in PostgreSQL: its URL (with
/// `schema=`), 0600 since a URL may hold a password. A directory holds it or [`DB_FILE`].
pub const BACKEND_FILE: &str = "store.backend";
/// The informational lock file's name inside the store directory.
pub const LOCK_FILE: &str = "store.lock";

/// The `entity` of the [`Error::Conflict`] that refuses the first write of a store opened to
/// write at its first write ([`Store::open_deferred`]) when another process committed after it
/// was opened: nothing was written, and planning again from the store as it is then succeeds.
pub(crate) const WRITTEN_MEANWHILE: &str = "the store";

/// Whether `err` is the refusal [`WRITTEN_MEANWHILE`] names.
pub(crate) fn is_written_meanwhile(err: &Error) -> bool {
    matches!(err, Error::Conflict { entity, .. } if entity == WRITTEN_MEANWHILE)
}

/// The bitemporal store's contract: everything the index, sessions and the engine ask of a
/// storage engine. redb implements it; a second engine (PostgreSQL) implements the same contract
/// and runs the same test suites.
///
/// Reading a version, by what the caller needs: [`Backend::as_of`] rebuilds the object from its
/// parts and checks its hashes (what `show`, `cat` and renders serve); [`Backend::version_info`]
/// reads the version row only (times, object hash); [`Backend::metadata`] and
/// [`Backend::metadata_many`] add the document's fields without reading content (metadata
/// caches). Finding entities by path: [`Backend::entity_at_path`] (one path),
/// [`Backend::paths_under`] (a subtree, with ids), [`Backend::indexed_paths_under`] (a subtree,
/// paths only, for a scan's deletions).
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The store directory (`None` in memory).
    fn dir(&self) -> Option<&Path>;

    /// Whether this handle only reads (a write is refused).
    fn is_read_only(&self) -> bool;

    /// Why the store is marked damaged (by fsck, or by a read that met damage), when it is: a
    /// listing on it may miss what the damage lost.
    fn damage(&self) -> Option<String> {
        None
    }

    /// Marks the store damaged as a read that met damage (`what`) does (tests only). Default:
    /// nothing.
    #[cfg(test)]
    fn note_damage_for_test(&self, _what: &str) {}

    /// Records that a write found no room, as a real one does (tests only): the next guarded
    /// call reopens the handle. Default: nothing.
    #[cfg(test)]
    fn note_full_write_for_test(&self) {}

    /// Writes `ops` as one transaction: all or nothing, durable when this returns. Matches are
    /// checked first, against the state before the transaction.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for an empty op list, an entity written by two ops, a
    /// valid_to not after valid_from, or bytes that do not hash to the file's `file_hash`;
    /// [`crate::Error::NotFound`] for a delete or evict of an unknown entity;
    /// [`crate::Error::Conflict`] when a match fails or an id is taken by another type.
    fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt>;

    /// Writes `ops` (when there are any) and the stat cache changes in one commit. Returns the
    /// receipt of the store transaction, or `None` when only the cache changed.
    ///
    /// # Errors
    /// As [`Backend::transact`]; on error nothing is written.
    fn transact_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>>;

    /// Writes a group of transactions as if one after another (each its own tx id, log record
    /// and result), sharing one commit where the backend can: what concurrent writers submit
    /// together costs one fsync. The default writes them one by one.
    fn transact_group(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        group
            .into_iter()
            .map(|request| match request.stat {
                Some(stat) => self.transact_with_stat(request.ops, request.origin, stat),
                None => self.transact(request.ops, request.origin).map(Some),
            })
            .collect()
    }

    /// [`Backend::transact_group`] for commits made under load (several writers at once): as
    /// durable, but the backend may leave out what only makes reopening after a crash quick
    /// (redb: its quick-repair record and second fsync); [`Backend::sync`] puts it back once the
    /// load stops. The default is [`Backend::transact_group`].
    fn transact_group_under_load(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.transact_group(group)
    }

    /// [`Backend::transact_group`] for writes that may be answered before they are durable (the
    /// records of read-only agent tool calls): the backend may skip the commit's fsync, and a
    /// crash before the next durable commit or [`Backend::sync`] may lose them, whole
    /// transactions from the last ones back, never a durable one. The default is durable.
    fn transact_group_lazily(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.transact_group(group)
    }

    /// Work a write of `ops` can do before it joins a group commit, on the writer's own thread
    /// and outside the commit's critical section; the commit uses what still holds then. The
    /// redb backend encodes session and chat documents as deltas here. Default: nothing.
    fn prepare(&self, _ops: &[Op]) {}

    /// Makes every commit written so far durable, and reopening after a crash quick (a no-op
    /// for a backend whose commits always are both).
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the storage engine fails.
    fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// How many times this handle lost lazy commits not yet made durable (a reopen after a
    /// failed write closes the handle without writing). Default: never.
    fn lazy_commits_lost(&self) -> u64 {
        0
    }

    /// What `id` was at `valid_time` as known at transaction `tx` (defaults: now, latest);
    /// `None` when no version is visible there, a tombstone is a version with no object.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity; [`crate::Error::Corrupt`] when stored
    /// data fails its hashes.
    fn as_of(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>>;

    /// What `id` is now (valid now, as of the latest transaction).
    ///
    /// # Errors
    /// As [`Backend::as_of`].
    fn get(&self, id: &str) -> Result<Option<Version>> {
        self.as_of(id, None, None)
    }

    /// Like [`Backend::as_of`] without rebuilding the object: only the version's times and
    /// hashes.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity.
    fn version_info(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>>;

    /// The current version of `id`, or `None` when no entity has that id.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when stored data fails its hashes.
    fn get_if_known(&self, id: &str) -> Result<Option<Version>>;

    /// The versions of `id` as `query` selects them.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity.
    fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<VersionInfo>>;

    /// How many versions [`Backend::history`] lists for `id` by default, where a backend can
    /// say without reading their documents (an eviction counts what it erases, also of an
    /// entity whose document is damaged).
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity.
    fn history_len(&self, id: &str) -> Result<u64> {
        Ok(self.history(id, HistoryQuery::default())?.len() as u64)
    }

    /// The byte size of each version of `versions` (all of entity `id`), in one read: the size
    /// recorded on the row, else the length of its content or kept bytes as the content's
    /// stored record says it (its header; the content is not read, decompressed or hashed);
    /// `None` for tombstones and stubs.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a document fails its hash, or a content is missing or its
    /// record's header does not decode.
    fn version_sizes(&self, id: &str, versions: &[VersionInfo]) -> Result<Vec<Option<u64>>>;

    /// What `ls` lists of each of `ids` at (`valid_time`, `tx`): the visible version
    /// ([`Backend::version_info`]), how many versions [`Listing::history_query`] counts, and its
    /// size ([`Backend::version_sizes`]); `None` when nothing is visible then, or the file is
    /// deleted then and `deleted` is false. One answer per id, in order, each that file's own
    /// (its rows damaged: [`crate::Error::Corrupt`]); a backend reads them together (redb: one
    /// read transaction). The default asks for each file in turn.
    ///
    /// # Errors
    /// Storage errors that are no one file's.
    fn listings(
        &self,
        ids: &[&str],
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
        deleted: bool,
    ) -> Result<Vec<Result<Option<Listing>>>> {
        Ok(ids
            .iter()
            .map(|id| listing_of(self, id, valid_time, tx, deleted))
            .collect())
    }

    /// Up to `limit` log records after transaction `since` (from the first when `None`), oldest
    /// first.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a record does not decode.
    fn log(&self, since: Option<TxId>, limit: usize) -> Result<Vec<TxRecord>>;

    /// Up to `limit` transactions after `since` (from the first when `None`), oldest first, each
    /// with the index run it belongs to: the log's headers without their op bodies.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a header does not decode.
    fn tx_runs(&self, since: Option<TxId>, limit: usize) -> Result<Vec<(TxId, Option<TxId>)>> {
        Ok(self
            .log(since, limit)?
            .into_iter()
            .map(|record| (record.tx_id, record.run))
            .collect())
    }

    /// The latest transaction and the chain value after it (`None` in an empty store).
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the header does not decode.
    fn chain_head(&self) -> Result<Option<(TxId, [u8; 32])>>;

    /// The latest transaction whose time is at or before `time` (`None` when there is none).
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a header does not decode.
    fn tx_at_time(&self, time: Timestamp) -> Result<Option<TxId>>;

    /// What the store knows about entity `id` itself.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity.
    fn entity(&self, id: &str) -> Result<EntityInfo>;

    /// Whether an entity has id `id` (evicted ones do not).
    ///
    /// # Errors
    /// Storage errors.
    fn entity_exists(&self, id: &str) -> Result<bool>;

    /// Up to `limit` entity ids starting with `prefix`, in id order.
    ///
    /// # Errors
    /// Storage errors.
    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>>;

    /// The file entity at canonical `path` on `filesystem_id`, if the store knows one.
    ///
    /// # Errors
    /// Storage errors.
    fn entity_at_path(&self, filesystem_id: &str, path: &str) -> Result<Option<String>>;

    /// (path, entity id) of the files on `filesystem_id` at `prefix` or below it (whole path
    /// segments: `/a/b` matches `/a/b` and `/a/b/c`, not `/a/bc`), in path order.
    ///
    /// # Errors
    /// Storage errors.
    fn paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<(String, String)>>;

    /// The paths of the files the store knows on `filesystem_id` at `prefix` or below it, in
    /// path order, deleted files included: [`Backend::paths_under`] without the entity ids.
    ///
    /// # Errors
    /// Storage errors.
    fn indexed_paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>>;

    /// Gives each of [`Backend::indexed_paths_under`] to `visit`, in no particular order (redb
    /// lists them directory by directory), without collecting them (a scan of an unchanged tree
    /// looks at every one and keeps none).
    ///
    /// # Errors
    /// Storage errors, and the first error of `visit`.
    fn for_each_indexed_path_under(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        for path in self.indexed_paths_under(filesystem_id, prefix)? {
            visit(&path)?;
        }
        Ok(())
    }

    /// The bytes stored under `hash` (a `content_hash`, or the `file_hash` of kept raw bytes).
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the record does not decode.
    fn content(&self, hash: &Hash) -> Result<Option<Vec<u8>>>;

    /// Every entity that exists now (its current version is not a tombstone), in id order.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when a record does not decode.
    fn live_entities(&self) -> Result<Vec<EntityInfo>>;

    /// The version of `id` visible at transaction `tx` (latest when `None`) as stored metadata:
    /// no content read, no object rebuilt; `None` for an unknown entity or no visible version.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the document does not decode.
    fn metadata(&self, id: &str, tx: Option<TxId>) -> Result<Option<ObjectMeta>>;

    /// [`Backend::metadata`] of many entities in one read.
    ///
    /// # Errors
    /// As [`Backend::metadata`].
    fn metadata_many(&self, ids: &[&str], tx: Option<TxId>) -> Result<Vec<Option<ObjectMeta>>>;

    /// [`Backend::metadata_many`] of `ids` as of the latest transaction, the same answers, read
    /// through the metadata snapshot named `name` where the backend keeps one (redb: one record
    /// instead of a few rows per id). With `refresh`, a missing or stale snapshot is written
    /// anew (a cache write, no transaction).
    ///
    /// # Errors
    /// As [`Backend::metadata`].
    fn metadata_latest(
        &self,
        name: &str,
        ids: &[&str],
        refresh: bool,
    ) -> Result<Vec<Option<ObjectMeta>>> {
        let _ = (name, refresh);
        self.metadata_many(ids, None)
    }

    /// [`Backend::metadata_latest`] handed to `each` id by id (its position in `ids` and its
    /// answer; ids without one are skipped), in the order of `ids`. A backend that answers from
    /// a record hands files over borrowed from it (`MetaView::File`), so a caller keeps what it
    /// needs without an [`ObjectMeta`] per file in between.
    ///
    /// # Errors
    /// As [`Backend::metadata_latest`]; `each`'s errors.
    fn metadata_latest_each(
        &self,
        name: &str,
        ids: &[&str],
        refresh: bool,
        each: &mut dyn FnMut(usize, MetaView<'_>) -> Result<()>,
    ) -> Result<()> {
        hand_over(self.metadata_latest(name, ids, refresh)?, each)
    }

    /// [`Backend::metadata`] plus the document's stored fields JSON (the kept text a session's
    /// sets resume from).
    ///
    /// # Errors
    /// As [`Backend::metadata`].
    fn metadata_with_json(
        &self,
        id: &str,
        tx: Option<TxId>,
    ) -> Result<Option<(ObjectMeta, Option<String>)>>;

    /// [`Backend::metadata_with_json`] of `id` as of the latest transaction, the same answer,
    /// read through a snapshot of that document where the backend keeps one (redb: one record
    /// instead of the document's delta chain and hash check). With `refresh`, a missing or
    /// stale snapshot is written anew (a cache write, no transaction).
    ///
    /// # Errors
    /// As [`Backend::metadata`].
    fn metadata_latest_with_json(
        &self,
        id: &str,
        refresh: bool,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let _ = refresh;
        self.metadata_with_json(id, None)
    }

    /// The stat cache entries of files on `filesystem_id` at `prefix` or below it (whole path
    /// segments), by canonical path.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when an entry does not decode.
    fn stat_cache(
        &self,
        filesystem_id: &str,
        prefix: &str,
    ) -> Result<rustc_hash::FxHashMap<String, StatEntry>>;

    /// How many stat cache entries the store holds, on every filesystem (to size a map for
    /// them); 0 when the backend cannot tell cheaply.
    ///
    /// # Errors
    /// Storage errors.
    fn stat_cache_len(&self) -> Result<u64> {
        Ok(0)
    }

    /// Bytes that name the committed state of the store's file while this handle only reads it
    /// (redb's file header: both commit slots, with their transaction ids and root checksums),
    /// for a cache kept beside the store that must answer as its tables do; `None` when the
    /// handle may write (its own commits need not be in the file yet), is damaged, or the
    /// backend has no such state. While a read-only handle is open no process can write the
    /// file (redb's exclusive-writer mode, the one every strata writer opens the file in, and
    /// the whole-file lock of older redb versions), so the state it reads is the one these
    /// bytes name.
    fn read_only_state(&self) -> Option<Vec<u8>> {
        None
    }

    /// Gives each entry of [`Backend::stat_cache`] to `visit` without building a map (a scan
    /// builds its own, with a mark per entry).
    ///
    /// # Errors
    /// As [`Backend::stat_cache`], and the first error of `visit`.
    fn for_each_stat_entry(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str, StatEntry) -> Result<()>,
    ) -> Result<()> {
        for (path, entry) in self.stat_cache(filesystem_id, prefix)? {
            visit(&path, entry)?;
        }
        Ok(())
    }

    /// Counts and sizes.
    ///
    /// # Errors
    /// Storage errors.
    fn stats(&self) -> Result<Stats>;

    /// Erases entity `id` and its whole history in one transaction.
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown entity.
    fn evict(&self, id: &str, origin: Origin) -> Result<TxReceipt>;

    /// Finishes the erasure of an [`Backend::evict`] that committed: the redb backend zeroes
    /// the store file's free pages, which keep the erased bytes until reused. A backend whose
    /// freed space is its server's business does nothing.
    ///
    /// # Errors
    /// Storage errors: the eviction stays committed, and the next gc scrubs.
    fn finish_erasure(&self) -> Result<()> {
        Ok(())
    }

    /// Verifies every content, document, version and the chain; one finding per problem.
    ///
    /// # Errors
    /// Storage errors (a problem in the data is a finding, not an error).
    fn fsck(&self) -> Result<Vec<Finding>>;

    /// Rebuilds the query tables from the log and the content tables.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the log itself does not decode.
    fn fsck_rebuild(&self) -> Result<()>;

    /// Writes each of `contents` (hash, bytes that hash to it) back as a fresh whole record and
    /// points the content index at it, keeping its reference count: a repair of contents whose
    /// stored bytes are damaged or missing. Allowed on a store marked damaged.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when bytes do not hash to their hash; storage errors.
    fn restore_contents(&self, contents: Vec<([u8; 32], Vec<u8>)>) -> Result<()>;

    /// Sweeps documents and contents that no version references and fixes reference counts.
    ///
    /// # Errors
    /// Storage errors.
    fn gc(&self) -> Result<GcReport>;

    /// Appends `records`, log records of another store read back with [`ReplayRecord::read`],
    /// verbatim and in one commit, as this store's next transactions: each keeps its tx id,
    /// time, origin, index run, op digests and chain value; its bodies are applied as the
    /// original commit applied them, with the documents and contents its puts name (matches
    /// are not checked again: they held then), and an evicted body stays evicted, by the same
    /// transaction. What `strata migrate` copies a store with. The default refuses.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when a record does not follow this store's head (tx id,
    /// time or chain value); storage errors. Nothing is written then.
    fn append_log(&self, records: &[ReplayRecord]) -> Result<()> {
        let _ = records;
        Err(crate::Error::invalid_input(
            "this storage engine cannot take another store's log; copy into redb or PostgreSQL",
        ))
    }

    /// Copies the store as one consistent snapshot into a new store in `dir` while writers go
    /// on, and verifies the copy. The default refuses: a backend that cannot copy itself says so.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when `dir` holds a store (or the backend cannot copy);
    /// storage and I/O errors.
    fn backup(&self, dir: &Path) -> Result<BackupReport> {
        Err(crate::Error::invalid_input(format!(
            "this storage engine cannot make a backup into {}; use its own backup tool",
            dir.display()
        )))
    }
}

/// Copies what still verifies of the redb store in `dir` (one the storage engine may be unable
/// to open) into a new store in `new_dir`, and says exactly what was lost; a lost document of
/// a file is made again with `rebuild` when the file still makes the same object.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when `new_dir` holds a store or is `dir`;
/// [`crate::Error::StoreLocked`] when a process holds the damaged store;
/// [`crate::Error::Corrupt`] when not even its header reads.
pub fn salvage(dir: &Path, new_dir: &Path, rebuild: Rebuild<'_>) -> Result<SalvageReport> {
    redb::RedbStore::salvage(dir, new_dir, rebuild)
}

/// Whether directory `dir` holds a store (a redb file, or a pointer to PostgreSQL).
pub fn exists(dir: &Path) -> bool {
    dir.join(DB_FILE).exists() || dir.join(BACKEND_FILE).exists()
}

/// The PostgreSQL location a store directory points at, when it holds [`BACKEND_FILE`].
///
/// # Errors
/// [`crate::Error::Io`] when the file cannot be read; [`crate::Error::InvalidInput`] when it
/// does not hold a PostgreSQL URL.
pub fn backend_of(dir: &Path) -> Result<Option<PgLocation>> {
    let path = dir.join(BACKEND_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => PgLocation::parse(text.trim()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(crate::Error::io(format!("reading {}", path.display()), e)),
    }
}

/// Opens the PostgreSQL store `dir` points at (as `mode` says), if it points at one.
fn pointed(dir: &Path, mode: PgOpen) -> Result<Option<Store>> {
    match backend_of(dir)? {
        Some(location) => Store::postgres(location, Some(dir.to_path_buf()), mode).map(Some),
        None => Ok(None),
    }
}

/// Opens a redb store with `open` under the storage guard: a damaged file that makes redb panic
/// is an [`crate::Error::Corrupt`], not a crash (and the panic prints nothing).
fn guarded_open(what: &str, open: impl FnOnce() -> Result<redb::RedbStore>) -> Result<Store> {
    redb::guard::quiet_panics();
    let damaged = std::sync::atomic::AtomicBool::new(false);
    redb::guard::guarded(&damaged, what, open)
        .map_err(|e| match e {
            // redb failed inside its open (a damaged allocator page): only salvage reads it.
            crate::Error::Corrupt { what } if !what.contains("--salvage") => {
                crate::Error::corrupt(format!(
                    "{what}; if it keeps failing, `{}` copies what still verifies into a new \
                     store",
                    damage::SALVAGE
                ))
            }
            e => e,
        })
        .map(Store::from_backend)
}

/// A handle on one store: cheap to clone, shared by the engine, its sessions and the indexer.
/// It dereferences to [`Backend`], so every query is a method call on it; its writes go
/// through group commit ([`Store::transact`]), so writers on many threads share commits.
#[derive(Clone, Debug)]
pub struct Store {
    backend: Arc<dyn Backend>,
    group: Arc<group::GroupCommit>,
}

impl std::ops::Deref for Store {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

impl Store {
    /// A handle on `backend`.
    pub fn from_backend(backend: impl Backend + 'static) -> Self {
        Store {
            backend: Arc::new(backend),
            group: Arc::default(),
        }
    }

    /// Writes `ops` as one transaction ([`Backend::transact`]), sharing the commit with other
    /// threads writing at the same time.
    ///
    /// # Errors
    /// As [`Backend::transact`].
    pub fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt> {
        let request = TxRequest {
            ops,
            origin,
            stat: None,
        };
        self.group
            .submit(&*self.backend, request, true)?
            .ok_or_else(|| crate::Error::invariant("a transaction wrote no log record"))
    }

    /// Writes `ops` and stat cache changes in one commit ([`Backend::transact_with_stat`]),
    /// sharing it with other threads writing at the same time.
    ///
    /// # Errors
    /// As [`Backend::transact_with_stat`].
    pub fn transact_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>> {
        self.submit_with_stat(ops, origin, stat, true)
    }

    /// [`Store::transact_with_stat`] answered before its commit is durable (the record of a
    /// read-only agent tool call): a crash may lose it until the next durable commit, which
    /// comes at the latest with the first write half a second after it, or [`Store::sync`].
    ///
    /// # Errors
    /// As [`Backend::transact_with_stat`].
    pub fn transact_with_stat_lazily(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>> {
        self.submit_with_stat(ops, origin, stat, false)
    }

    /// Submits `ops` and `stat` to the group commit (nothing when both are empty), answered once
    /// the commit is durable when `durable`.
    fn submit_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
        durable: bool,
    ) -> Result<Option<TxReceipt>> {
        if ops.is_empty() && stat.is_empty() {
            return Ok(None);
        }
        let request = TxRequest {
            ops,
            origin,
            stat: Some(stat),
        };
        self.group.submit(&*self.backend, request, durable)
    }

    /// Makes the lazy commits so far durable, and reopening after a crash quick again after
    /// commits made under load ([`Backend::sync`]); nothing when neither is needed.
    ///
    /// # Errors
    /// As [`Backend::sync`].
    pub fn sync(&self) -> Result<()> {
        self.group.sync(&*self.backend)
    }

    /// Whether [`Store::sync`] is due now: the last commit made under load (several writers at
    /// once) ended 100 ms ago or more, or lazy commits have waited half a second. A long-running
    /// holder of the store (the daemon) asks this on a timer.
    pub fn sync_due(&self) -> bool {
        self.group.sync_due()
    }

    /// The newest transaction a crash now would keep: the chain head, once lazy commits up to
    /// it are made durable ([`Store::sync`]); when they cannot be (a store marked damaged, a
    /// full disk), the last transaction before them.
    ///
    /// # Errors
    /// As [`Backend::chain_head`].
    pub fn durable_head(&self) -> Result<Option<TxId>> {
        // The head first: every commit up to it is made before the sync below.
        let head = self.chain_head()?.map(|(tx, _)| tx);
        if !self.has_lazy_commits() {
            return Ok(head);
        }
        let lazy_from = self.group.lazy_from();
        match self.sync() {
            Ok(()) => Ok(head),
            Err(err) => {
                tracing::warn!(error = %err, "making lazy commits durable for the durable head");
                Ok(match lazy_from {
                    Some(first) => {
                        let before = first.saturating_sub(1);
                        head.map(|TxId(tx)| TxId(tx.min(before)))
                            .filter(|TxId(tx)| *tx > 0)
                    }
                    None => head,
                })
            }
        }
    }

    /// Whether lazy commits wait for a durable one (they would be lost by a crash now).
    pub fn has_lazy_commits(&self) -> bool {
        self.group.has_lazy_commits()
    }

    /// How many times lazy commits were lost before they were made durable (the handle was
    /// reopened after a failed write): a run that committed lazily checks it did not change.
    pub fn lazy_commits_lost(&self) -> u64 {
        self.backend.lazy_commits_lost()
    }

    /// Whether an index run's batch, committed lazily, waits for a durable commit: its rows
    /// are visible to every reader of this handle, and a crash now would lose them.
    pub fn has_lazy_index_batches(&self) -> bool {
        self.group.has_lazy_index_batches()
    }

    /// How many writes wait for a commit now (the daemon's queue depth).
    pub fn queued_writes(&self) -> usize {
        self.group.queued()
    }

    /// Whether a write other than an index run's batch was submitted within `within`: an index
    /// then commits small batches, so that those writers never wait behind a large one.
    pub fn others_writing(&self, within: std::time::Duration) -> bool {
        self.group.interactive_recently(within)
    }

    /// Creates a new redb store in directory `dir` (made if missing).
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when a store already exists there; [`crate::Error::Io`]
    /// when the directory cannot be made; [`crate::Error::StoreLocked`] when another process
    /// holds it.
    pub fn create(dir: impl AsRef<Path>) -> Result<Self> {
        guarded_open("creating the store", || redb::RedbStore::create(dir))
    }

    /// Makes directory `dir` a store that lives in PostgreSQL at `location`: the store is
    /// created there unless it exists (a team's second machine joins it), and `dir` records
    /// where it lives ([`BACKEND_FILE`]).
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when `dir` holds a store already; as [`Store::postgres`].
    pub fn create_postgres(dir: impl AsRef<Path>, location: PgLocation) -> Result<Self> {
        let dir = dir.as_ref();
        if exists(dir) {
            return Err(crate::Error::invalid_input(format!(
                "{} already holds a strata store; give another directory",
                dir.display()
            )));
        }
        private::create_dir(dir)?;
        let store = Store::postgres(
            location.clone(),
            Some(dir.to_path_buf()),
            PgOpen::OpenOrCreate,
        )?;
        private::write_file(
            &dir.join(BACKEND_FILE),
            format!("{}\n", location.url()).as_bytes(),
        )?;
        Ok(store)
    }

    /// Opens the existing store in directory `dir` (redb, or the PostgreSQL store it points at).
    ///
    /// # Errors
    /// [`crate::Error::NotFound`] when there is none; [`crate::Error::StoreLocked`] when another
    /// process holds it; [`crate::Error::FormatVersion`] when another format version wrote it.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        if let Some(store) = pointed(dir.as_ref(), PgOpen::Open)? {
            return Ok(store);
        }
        guarded_open("opening the store", || redb::RedbStore::open(dir))
    }

    /// Opens the redb store in `dir`, creating it when there is none.
    ///
    /// # Errors
    /// As [`Store::create`] and [`Store::open`].
    pub fn open_or_create(dir: impl AsRef<Path>) -> Result<Self> {
        if let Some(store) = pointed(dir.as_ref(), PgOpen::Open)? {
            return Ok(store);
        }
        guarded_open("opening the store", || redb::RedbStore::open_or_create(dir))
    }

    /// Opens the existing store in `dir` to write, reading through a read-only redb handle until
    /// the first write begins (which opens the file to write then): a command that finds nothing
    /// to write, as an unchanged re-index, writes and syncs nothing. PostgreSQL opens as
    /// [`Store::open`] does. When another process committed between the open and the first
    /// write, that write is refused with nothing written (what was read may be stale); the
    /// store writes from then on, so planning again and writing again goes through.
    ///
    /// # Errors
    /// As [`Store::open`]; the first write fails with [`Error::Conflict`] as said above.
    pub fn open_deferred(dir: impl AsRef<Path>) -> Result<Self> {
        if let Some(store) = pointed(dir.as_ref(), PgOpen::Open)? {
            return Ok(store);
        }
        guarded_open("opening the store", || redb::RedbStore::open_deferred(dir))
    }

    /// Opens the existing store in `dir` for reading only: redb writes nothing to the file, so
    /// there is nothing to sync (a store that was not closed cleanly needs a repair, which only a
    /// read-write open makes: then this opens it read-write); PostgreSQL opens read-only
    /// sessions ([`PgOpen::ReadOnly`], what a standby allows). A write is refused.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        if let Some(store) = pointed(dir.as_ref(), PgOpen::ReadOnly)? {
            return Ok(store);
        }
        guarded_open("opening the store", || redb::RedbStore::open_read_only(dir))
    }

    /// Opens the PostgreSQL store at `location` (created as `mode` says); `dir` is the store
    /// directory that points at it, when there is one.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when the database cannot be reached; [`crate::Error::NotFound`]
    /// or [`crate::Error::InvalidInput`] as `mode` says; [`crate::Error::FormatVersion`] for a
    /// schema layout this build does not know.
    pub fn postgres(
        location: PgLocation,
        dir: Option<std::path::PathBuf>,
        mode: PgOpen,
    ) -> Result<Self> {
        postgres::PgStore::open(location, dir, mode).map(Store::from_backend)
    }

    /// A redb store in memory (nothing on disk, no lock file): for tests and models.
    ///
    /// # Errors
    /// [`crate::Error::Storage`] when redb fails.
    pub fn in_memory() -> Result<Self> {
        guarded_open("making a store in memory", redb::RedbStore::in_memory)
    }

    /// The ids of the file entities on `filesystem_id` at `prefix` or below it, in path order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_ids_by_path(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .paths_under(filesystem_id, prefix)?
            .into_iter()
            .map(|(_, id)| id)
            .collect())
    }
}

/// Hands each answer of `metas` to `each` whole, with its position (what
/// [`Backend::metadata_latest_each`] does with answers that were collected).
///
/// # Errors
/// `each`'s errors.
pub(crate) fn hand_over(
    metas: Vec<Option<ObjectMeta>>,
    each: &mut dyn FnMut(usize, MetaView<'_>) -> Result<()>,
) -> Result<()> {
    for (n, meta) in metas.into_iter().enumerate() {
        if let Some(meta) = meta {
            each(n, MetaView::Whole(Box::new(meta)))?;
        }
    }
    Ok(())
}

/// [`Backend::listings`] of one file through [`Backend::version_info`], [`Backend::history`]
/// and [`Backend::version_sizes`], each its own read.
///
/// # Errors
/// As those.
pub(crate) fn listing_of(
    backend: &(impl Backend + ?Sized),
    id: &str,
    valid_time: Option<Timestamp>,
    tx: Option<TxId>,
    deleted: bool,
) -> Result<Option<Listing>> {
    let Some(info) = backend.version_info(id, valid_time, tx)? else {
        return Ok(None);
    };
    if info.is_tombstone() && !deleted {
        return Ok(None);
    }
    let versions = backend
        .history(id, Listing::history_query(valid_time, tx))?
        .len() as u64;
    let size = backend
        .version_sizes(id, std::slice::from_ref(&info))?
        .pop()
        .flatten();
    Ok(Some(Listing {
        info,
        versions,
        size,
    }))
}
