//! `RedbStore`: the [`Backend`] on one redb file.
//!
//! Uses `object` and `hash` (and `error`), and the engine-neutral parts of `store`.
//!
//! # Layout
//! - `open`: create, open, open read-only, in memory; the format check and the lock file.
//!   `overlay`: a backend that reads a store file and keeps writes in memory (fsck's integrity
//!   check, salvage). `salvage`: a new store from what a damaged one still verifies; `scan`:
//!   its scan of the file's pages for leaves the tables cannot reach. `backup`: a verified copy
//!   of one read transaction.
//! - `tables`: every table and its key layout.
//! - `write`: the write tables of a transaction and `transact`. `evict`: erasing an entity.
//!   `append`: another store's log records appended verbatim (migrate).
//! - `read`: the read tables of a query and the queries. `metadata`: metadata-only reads.
//!   `lookup`: paths, ids and prefixes.
//! - `blobs`: contents, content-addressed, with reference counts and suffix records.
//! - `docs`: documents (the hashed fields) by object hash, sessions' and chats' as skip-deltas;
//!   `doc_delta`: the delta codec itself (no tables). `temporal`: as-of, history, the write rule.
//! - `snapshot`: metadata snapshots (one record holding many entities' metadata as of one
//!   transaction, for a session's resume).
//! - `stat`: the stat cache table. `fsck`: verification (every table against the log's replay
//!   and the content tables). `maintain`: evict, rebuild, gc. `verify`: what every read
//!   checks before serving (documents, contents, version rows against the log).

mod append;
mod backup;
mod blobs;
mod dirnum;
mod doc_delta;
mod docs;
mod entity;
mod evict;
mod fsck;
mod fsnum;
pub(crate) mod guard;
mod lookup;
mod maintain;
mod metadata;
mod open;
mod overlay;
mod read;
mod repack;
mod salvage;
mod scan;
mod snapshot;
mod stat;
mod tables;
mod temporal;
mod verify;
// Tests of strata's patches to the vendored redb, through redb's own API.
#[cfg(test)]
mod vendored;
mod write;

// What the PostgreSQL backend shares with this one: op checks, entity and field decoding, the
// document and content checks.
pub(in crate::store) use metadata::parse_fields;
pub(in crate::store) use read::{assemble, entity_info, sized_blob};
pub(in crate::store) use verify::{check_content, check_doc};
pub(in crate::store) use write::{check_ops, check_range};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, Table, WriteTransaction};

use super::TxRequest;
use super::codec::{self, EntityRec, FirstRec, OpRec, TxHeaderRec, VersionRec};
use super::log::{self, LoggedOp, Origin, TxRecord};
use super::{
    Backend, DB_FILE, DocumentMeta, EncodedBlob, EntityInfo, FORMAT_VERSION, Finding, GcReport,
    HistoryQuery, LOCK_FILE, Listing, MetaView, ObjectMeta, Op, Put, StatEntry, StatUpdate, Stats,
    Timestamp, TxId, TxReceipt, ValidFrom, Version, VersionInfo,
};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::object::{ContentOmitted, Fields, FilesystemSource, Object, ObjectType, Source};
use blobs::BlobTables;
use docs::DocTables;
use entity::{EntityTables, ReadEntities, entity_rec};
use open::Handle;
use read::ReadTables;
use tables::*;
use write::WriteTables;

/// redb's page cache: enough for a CLI run's working set, far below redb's 1 GiB default.
pub(crate) const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Whether commits save the allocator state so that reopening after a crash is quick.
const QUICK_REPAIR: bool = true;

/// Maps any storage engine error into [`Error::Storage`].
pub(crate) trait StorageResult<T> {
    /// The result with its error turned into [`Error::Storage`].
    fn db(self) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> StorageResult<T>
    for std::result::Result<T, E>
{
    fn db(self) -> Result<T> {
        self.map_err(|e| {
            if let Some(full) = full_write(&e) {
                Error::io(STORE_FULL, full)
            } else if reports_damage(&e) {
                Error::corrupt(format!(
                    "the store file is damaged: the storage engine reports \"{e}\"; run `strata \
                     fsck` to see what is affected"
                ))
            } else {
                Error::storage("redb", e)
            }
        })
    }
}

/// The context of the error a write that found no room for the store file reports.
pub(crate) const STORE_FULL: &str = "the store file could not be written: the disk is full, or a \
     disk quota or the file size limit was reached; free space (or raise the limit) and run the \
     command again: what was committed before is kept";

/// The error of a call refused because an earlier write found no room.
fn store_full() -> Error {
    Error::io(
        STORE_FULL,
        std::io::Error::from(std::io::ErrorKind::StorageFull),
    )
}

/// Whether `error` is the damage error `.db()` makes of redb's `PreviousIo` (the handle
/// refuses every call after an I/O error).
fn is_latched(error: &Error) -> bool {
    matches!(error, Error::Corrupt { what }
        if what.contains(&redb::StorageError::PreviousIo.to_string()))
}

/// Whether `error` is the one a write that found no room reports ([`STORE_FULL`]).
pub(crate) fn is_store_full(error: &Error) -> bool {
    matches!(error, Error::Io { context, source } if context == STORE_FULL && is_full(source))
}

/// Whether an I/O error says there is no room: no space on the device, a quota, the file size
/// limit (`ulimit -f`).
fn is_full(io: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        io.kind(),
        ErrorKind::StorageFull | ErrorKind::FileTooLarge | ErrorKind::QuotaExceeded
    )
}

/// The I/O error of a redb error that says a write found no room, else `None`.
fn full_write(error: &dyn std::any::Any) -> Option<std::io::Error> {
    use redb::StorageError;
    let storage = if let Some(e) = error.downcast_ref::<StorageError>() {
        Some(e)
    } else if let Some(redb::TableError::Storage(e)) = error.downcast_ref() {
        Some(e)
    } else if let Some(redb::TransactionError::Storage(e)) = error.downcast_ref() {
        Some(e)
    } else if let Some(redb::CommitError::Storage(e)) = error.downcast_ref() {
        Some(e)
    } else if let Some(redb::DatabaseError::Storage(e)) = error.downcast_ref() {
        Some(e)
    } else if let Some(redb::CompactionError::Storage(e)) = error.downcast_ref() {
        Some(e)
    } else {
        None
    };
    let io = match (storage, error.downcast_ref::<redb::Error>()) {
        (Some(StorageError::Io(io)), _) | (None, Some(redb::Error::Io(io))) => io,
        _ => return None,
    };
    is_full(io).then(|| copy_io(io))
}

/// An I/O error of the same errno (or kind) as `io` (they are not `Clone`).
fn copy_io(io: &std::io::Error) -> std::io::Error {
    io.raw_os_error()
        .map_or_else(|| io.kind().into(), std::io::Error::from_raw_os_error)
}

/// `error`, a write that found no room, again: for each request of a group it failed.
fn store_full_again(error: &Error) -> Error {
    match error {
        Error::Io { source, .. } => Error::io(STORE_FULL, copy_io(source)),
        _ => store_full(),
    }
}

/// Whether a redb error says the file is damaged: a page that fails its checks (redb returns
/// `Corrupted` where a debug build panics), a read past the file's end (a damaged page number),
/// the I/O error such a read leaves latched in the handle (`PreviousIo`: every later call gets
/// it; corruption seed 116), or a table whose stored definition is not the one strata opens it
/// with (strata never changes a table's types).
fn reports_damage(error: &dyn std::any::Any) -> bool {
    use redb::{StorageError, TableError};
    let storage = |e: &StorageError| match e {
        StorageError::Corrupted(_) | StorageError::PreviousIo => true,
        StorageError::Io(io) => io.kind() == std::io::ErrorKind::UnexpectedEof,
        _ => false,
    };
    let table = |e: &TableError| match e {
        TableError::Storage(e) => storage(e),
        // Every table exists from the store's creation (`tables::create_all`; the one a format
        // 3 store may lack, `evicted_ops`, is opened without this mapping): a missing one is a
        // damaged name in redb's table tree.
        TableError::TableDoesNotExist(_)
        | TableError::TableTypeMismatch { .. }
        | TableError::TypeDefinitionChanged { .. }
        | TableError::TableIsMultimap(_)
        | TableError::TableIsNotMultimap(_) => true,
        _ => false,
    };
    if let Some(e) = error.downcast_ref::<StorageError>() {
        storage(e)
    } else if let Some(e) = error.downcast_ref::<TableError>() {
        table(e)
    } else if let Some(redb::TransactionError::Storage(e)) = error.downcast_ref() {
        storage(e)
    } else if let Some(redb::CommitError::Storage(e)) = error.downcast_ref() {
        storage(e)
    } else if let Some(redb::DatabaseError::Storage(e)) = error.downcast_ref() {
        storage(e)
    } else if let Some(redb::CompactionError::Storage(e)) = error.downcast_ref() {
        storage(e)
    } else if let Some(e) = error.downcast_ref::<redb::Error>() {
        matches!(
            e,
            redb::Error::Corrupted(_)
                | redb::Error::PreviousIo
                | redb::Error::TableDoesNotExist(_)
                | redb::Error::TableTypeMismatch { .. }
                | redb::Error::TypeDefinitionChanged { .. }
                | redb::Error::TableIsMultimap(_)
                | redb::Error::TableIsNotMultimap(_)
        )
    } else {
        false
    }
}

/// The lazy commits of a handle (`Durability::None`): a reopen closes the handle without
/// writing, which loses those not yet made durable.
#[derive(Default)]
pub(crate) struct LazyCommits {
    /// Set before a lazy commit, cleared by a durable one.
    unsynced: std::sync::atomic::AtomicBool,
    /// How many reopens lost lazy commits.
    lost: std::sync::atomic::AtomicU64,
}

impl LazyCommits {
    /// Says a durable commit succeeded: the lazy commits before it are kept.
    fn synced(&self) {
        self.unsynced
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Says the handle is closed without writing: lazy commits still pending are lost.
    pub(crate) fn closed_without_writing(&self) {
        use std::sync::atomic::Ordering;
        if self.unsynced.swap(false, Ordering::SeqCst) {
            self.lost.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A bitemporal object store on one redb database, held by one process at a time.
pub(crate) struct RedbStore {
    /// The redb handle; replaced by a fresh one after a panic inside redb ([`RedbStore::reopen`]).
    handle: std::sync::RwLock<Handle>,
    /// Whether the handle only reads (opened by [`RedbStore::open_read_only`]).
    read_only: bool,
    /// Set while a store opened to write reads through a read-only handle, until its first write
    /// transaction opens the file to write ([`RedbStore::open_deferred`]).
    deferred: std::sync::atomic::AtomicBool,
    /// The last transaction in the log when a deferred store was opened (0: none): its first
    /// write is refused when another process committed before it took the file.
    deferred_from: std::sync::atomic::AtomicU64,
    dir: Option<PathBuf>,
    /// (length, bytes allocated on disk) of `store.redb` when this handle opened it to write (see
    /// `Drop`).
    opened: std::sync::Mutex<(u64, u64)>,
    /// The latest session and chat documents written, the bases of their next deltas.
    base_cache: docs::BaseCache,
    /// Set when a call into redb panicked (a damaged page), a read found damage, fsck found a
    /// problem or the store was marked damaged when opened: writes are refused from then on.
    damaged: std::sync::atomic::AtomicBool,
    /// Why the store is damaged, for the refusal (the damage marker's first line).
    damage_reason: std::sync::Mutex<Option<String>>,
    /// Set by a panic inside redb or a write that found no room: the next guarded call first
    /// reopens the handle.
    reopen_pending: std::sync::atomic::AtomicBool,
    /// The erasures of this handle under way, which say when the scrub note may go.
    scrubs: std::sync::Mutex<maintain::ScrubLedger>,
    /// Set when a write failed for lack of room (disk full, quota, file size limit) until a
    /// write succeeds: redb answers every call with `PreviousIo` after it (and after a reopen
    /// whose repair could not write either), which is that failure and not damage.
    write_failed: std::sync::atomic::AtomicBool,
    /// Guarded writes running (calls that may commit to the file), for
    /// [`RedbStore::latched_by_full_write`].
    writes: std::sync::atomic::AtomicUsize,
    /// How many times [`RedbStore::latched_by_full_write`] waited a millisecond for a write.
    latch_waits: std::sync::atomic::AtomicU64,
    /// How many times the handle was reopened after a panic.
    reopens: std::sync::atomic::AtomicU64,
    /// Transactions of the handle still running ([`open::Live`]).
    live: std::sync::Arc<open::LiveCounts>,
    /// Lazy commits of the handle not yet made durable, and how many times a reopen lost some.
    lazy: LazyCommits,
    /// Whether opening the file took redb's full repair (a crash after a commit made under load,
    /// see [`Backend::transact_group_under_load`]) rather than its quick one.
    full_repair: bool,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("dir", &self.dir)
            .field("full_repair", &self.full_repair)
            .finish()
    }
}

fn read_counter(meta: &impl ReadableTable<&'static str, &'static [u8]>, name: &str) -> Result<u64> {
    Ok(match meta.get(name).db()? {
        Some(v) => {
            let bytes: [u8; 8] = v
                .value()
                .try_into()
                .map_err(|_| Error::corrupt(format!("meta counter {name} is not 8 bytes")))?;
            u64::from_le_bytes(bytes)
        }
        None => 0,
    })
}

/// The transaction a `meta` key says a format's rows start from; `u64::MAX` when the store
/// has no such key (none of its rows are of that format).
fn since_key(meta: &impl ReadableTable<&'static str, &'static [u8]>, key: &str) -> Result<u64> {
    Ok(match meta.get(key).db()? {
        Some(_) => read_counter(meta, key)?,
        None => u64::MAX,
    })
}

/// `meta[BY_TX_OMITTED_SINCE]`: the first transaction whose single-row first writes have no
/// `versions_by_tx` row; `u64::MAX` when absent (every write has its row).
fn by_tx_omitted_since(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64> {
    since_key(meta, BY_TX_OMITTED_SINCE)
}

/// `meta[SOURCES_IN_IDS_SINCE]`: the first transaction whose new files keep their source in
/// `entity_ids`; `u64::MAX` when absent (every entity has its whole row).
fn sources_in_ids_since(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64> {
    since_key(meta, SOURCES_IN_IDS_SINCE)
}

/// `meta[SHORT_ENTITY_KEYS_SINCE]`: the first transaction whose new files named by their source
/// get a short `entities` key; `u64::MAX` when absent (every row has its whole key).
fn short_keys_since(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64> {
    since_key(meta, SHORT_ENTITY_KEYS_SINCE)
}

/// `meta[DOC_SEQS_SINCE]`: the first transaction whose file version rows name their document
/// by number; `u64::MAX` when absent (every row holds its hash).
fn doc_seqs_since(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64> {
    since_key(meta, DOC_SEQS_SINCE)
}

const STORED_BYTES: &str = "stored_bytes";
/// The eid under which `match_ops` keeps matches on an id no entity had (eids count from 1).
const ABSENT_EID: u64 = 0;
const PUT_BYTES: &str = "put_bytes";

pub(in crate::store) fn unknown_entity(id: &str) -> Error {
    Error::not_found(format!(
        "entity {id} (it was never stored, or was evicted); check the id"
    ))
}

fn ts(micros: i64) -> Timestamp {
    Timestamp::saturating_from_micros(micros)
}

fn version_info(entity: &str, row: &temporal::Row, valid_to: Option<i64>) -> VersionInfo {
    VersionInfo {
        entity: entity.to_string(),
        valid_from: ts(row.vt),
        valid_to: valid_to.map(ts),
        tx_id: TxId(row.tx),
        tx_time: ts(row.tx_time()),
        object_hash: row.rec.object_hash.map(Hash),
        restored: row.rec.restored,
        size: row.rec.size,
        spelling: row.rec.spelling.clone(),
        content_omitted: row.rec.content_omitted.map(ContentOmitted::from),
    }
}

/// (length, bytes allocated on disk) of a file; (0, 0) when it cannot be read.
fn file_size(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or((0, 0), |m| (m.len(), m.blocks() * 512))
}

impl Drop for RedbStore {
    /// Compacts the file after a large write, then removes the lock file.
    ///
    /// redb grows a file below 4 GiB by doubling it, so after a large write the file's length is
    /// up to twice the pages in use (100 000 incompressible contents: 1 028 MiB long, 560 MiB
    /// used; a real tree's first index: 67 MB long, 49.5 MB on disk, 45 MB once compacted).
    /// `Database::compact` moves the last pages into free ones and truncates the file
    /// (there is no public way to make redb grow by less). It costs about 25 ms even when there
    /// is little to move (several two-phase commits), which doubled the time of a small
    /// re-index; so it runs only when the file grew and the bytes allocated on disk grew by at
    /// least an eighth since the handle opened it. After a small write the file may be up to
    /// twice as long as its content, in a sparse tail that takes no disk space; the next large
    /// write compacts it. Before compacting, the tables keyed by hashes and paths that are
    /// less than 85 % used are rewritten in key order (`repack`: 100 000 files, ~190 bytes a
    /// file fewer). The compaction itself runs on a handle of its own, opened once this one is
    /// closed, whose page cache holds the whole file ([`repack::compact_closed`]). Best effort:
    /// a failure leaves a longer file, never a wrong one.
    fn drop(&mut self) {
        // A deferred store that never wrote holds a read-only handle, and no lock file.
        let read_only = self.reads_only_now();
        // A handle that met damage commits nothing more, not even redb's close-time record.
        let damaged = self.damaged.load(std::sync::atomic::Ordering::SeqCst)
            || self
                .reopen_pending
                .load(std::sync::atomic::Ordering::SeqCst);
        // While a panic unwinds, redb's drop impls skip their staging (a table dropped then
        // stages nothing): a repack or compaction then would commit a wrong allocator state,
        // and damage the file. The close alone leaves it for the next open's repair.
        let unwinding = std::thread::panicking();
        // The file to compact once this handle is closed, and its bytes on disk.
        let mut compact = None;
        if let Some(dir) = &self.dir
            && !read_only
            && !damaged
            && !unwinding
        {
            let path = dir.join(DB_FILE);
            let (len, allocated) = file_size(&path);
            let (opened_len, opened_allocated) = *self
                .opened
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if len > opened_len
                && allocated >= opened_allocated + opened_allocated / 8
                && let Some(db) = self
                    .handle
                    .get_mut()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .writable()
            {
                // Best effort, and never a panic out of a drop (a damaged page). The tables keyed
                // by hashes and paths are rewritten full first (`repack`), so that compacting
                // gives their empty room back too.
                let _ = guard::guarded(&self.damaged, "repacking the store's tables", || {
                    repack::repack_sparse_tables(db).map(|_| ())
                });
                // A file whose pages fit the compaction's cache is compacted once closed, on a
                // handle whose cache holds it; a larger one gains nothing from that (each round
                // reads it from the file either way) and is compacted here, as it always was.
                if allocated <= repack::COMPACT_CACHE_MAX as u64 {
                    compact = Some((path, allocated));
                } else if !self.damaged.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = guard::guarded(&self.damaged, "compacting the store", || {
                        db.compact_with_one_phase_drains()
                            .map(|_| ())
                            .map_err(|e| Error::corrupt(e.to_string()))
                    });
                }
            }
        }
        // A repack that met damage above makes the close one without writing.
        let damaged = damaged || self.damaged.load(std::sync::atomic::Ordering::SeqCst);
        // redb records its allocator state when the database drops, and may panic there on a
        // damaged page: drop it under the guard, quietly, before the lock file goes; a damaged
        // handle without that commit.
        let handle = std::mem::replace(
            self.handle
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Handle::Closed,
        );
        if damaged {
            guard::close_without_writing(handle);
        } else {
            let closed = guard::guarded(&self.damaged, "closing the store", move || match handle {
                Handle::ReadWrite(db) => db
                    .close()
                    .map_err(|e| Error::corrupt(format!("closing the store: {e}"))),
                other => {
                    drop(other);
                    Ok(())
                }
            });
            // Only a file closed cleanly is opened again: one that would need a repair is left
            // to the next open.
            if closed.is_ok()
                && let Some((path, allocated)) = compact
            {
                let _ = guard::guarded(&self.damaged, "compacting the store", || {
                    repack::compact_closed(&path, allocated)
                });
            }
        }
        if let Some(dir) = &self.dir
            && !read_only
        {
            // Best effort: a lock file left behind is only informational.
            let _ = std::fs::remove_file(dir.join(LOCK_FILE));
        }
    }
}

impl RedbStore {
    /// Whether opening the file took redb's full repair: the process before crashed after a
    /// commit made under load, before the checkpoint that follows such commits.
    #[cfg(test)]
    pub(crate) fn full_repair_on_open(&self) -> bool {
        self.full_repair
    }
}

impl RedbStore {
    /// [`Backend::transact_group`], made durable as `mode` says.
    fn transact_group_as(
        &self,
        group: Vec<TxRequest>,
        mode: write::CommitMode,
    ) -> Vec<Result<Option<TxReceipt>>> {
        if let Err(e) = self.check_writable() {
            let message = e.to_string();
            return group
                .iter()
                .map(|_| Err(Error::corrupt(message.clone())))
                .collect();
        }
        let count = group.len();
        let lazy = matches!(mode, write::CommitMode::Lazy);
        if lazy {
            self.lazy
                .unsynced
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        match self.guarded_writing("writing a group of transactions", || {
            let results = RedbStore::transact_group(self, group, mode);
            // Said inside the guarded call, for a read that meets redb's latch meanwhile.
            if results.iter().any(|r| r.as_ref().is_err_and(is_store_full)) {
                self.note_full_write();
            } else if results.iter().all(Result::is_ok) {
                // There is room again: a later `PreviousIo` is not that failure's.
                self.write_failed
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                if !lazy {
                    self.lazy.synced();
                }
            }
            Ok(results)
        }) {
            Ok(results) => results,
            Err(e) if is_store_full(&e) => (0..count).map(|_| Err(store_full())).collect(),
            Err(e) => {
                let message = e.to_string();
                (0..count)
                    .map(|_| Err(Error::corrupt(message.clone())))
                    .collect()
            }
        }
    }

    /// Records that a write found no room: redb's `PreviousIo` from now on is that failure, and
    /// the next guarded call first reopens the handle (a daemon goes on once there is room).
    fn note_full_write(&self) {
        self.write_failed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.reopen_pending
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Runs `f` (doing `what`) under the storage guard; damage it meets (a panic inside redb, a
    /// record that fails its check) marks the store damaged.
    ///
    /// On a store marked damaged, "not found" may be what the damage lost (a row of `entities`
    /// gone): it is then an [`Error::Corrupt`] saying so, never an answer that something is
    /// absent.
    /// [`RedbStore::metadata_snapshot_each`] guarded, writing the new snapshot it asks for
    /// with `refresh`.
    ///
    /// # Errors
    /// As [`Backend::metadata_latest`].
    fn latest_answer(
        &self,
        name: &str,
        ids: &[&str],
        refresh: bool,
        each: Option<&mut snapshot::Each<'_>>,
    ) -> Result<snapshot::Answer> {
        let answer = self.guarded("reading metadata", || {
            RedbStore::metadata_snapshot_each(self, name, ids, each)
        })?;
        tracing::debug!(
            name,
            ids = ids.len(),
            hits = answer.hits,
            handed = answer.handed,
            "metadata read through a snapshot"
        );
        if refresh && let Some(rec) = &answer.refresh {
            self.guarded_writing("writing a metadata snapshot", || {
                RedbStore::put_snapshot(self, name, rec)
            })?;
        }
        Ok(answer)
    }

    fn guarded<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.guarded_call(what, false, f)
    }

    /// [`RedbStore::guarded`] for a call that may commit to the file (`f` writes): while it
    /// runs, a read meeting redb's `PreviousIo` latch waits to know whether it found no room
    /// ([`RedbStore::latched_by_full_write`]).
    fn guarded_writing<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.guarded_call(what, true, f)
    }

    /// [`RedbStore::guarded`], counted among the writes running when `writes`.
    fn guarded_call<T>(
        &self,
        what: &str,
        writes: bool,
        f: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        if self
            .reopen_pending
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            self.reopen();
            if matches!(*self.handle(), Handle::Closed) {
                if self.write_failed.load(std::sync::atomic::Ordering::SeqCst)
                    && !self.damaged.load(std::sync::atomic::Ordering::SeqCst)
                {
                    return Err(store_full());
                }
                return Err(Error::corrupt(format!(
                    "the store file is damaged: the storage engine failed, and the file could not \
                     be opened again for {what}; run `strata fsck`, and `{}` if it keeps failing",
                    crate::store::damage::SALVAGE
                )));
            }
        }
        let panics = guard::panics_caught();
        if writes {
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let result = guard::guarded(&self.damaged, what, f);
        if let Err(e) = &result
            && is_store_full(e)
        {
            // Said before this call counts as ended, for a read that met the latch meanwhile.
            self.note_full_write();
        }
        if writes {
            self.writes
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        if guard::panics_caught() != panics {
            self.reopen_pending
                .store(true, std::sync::atomic::Ordering::SeqCst);
            self.reopen();
        }
        self.settle(result)
    }

    /// What a guarded call's `result` comes to: the damage it met marks the store, and "not
    /// found" on a store marked damaged says it may be what the damage lost.
    fn settle<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            // On a store marked damaged the latch may be the damage's: damage is said.
            Err(e)
                if is_latched(&e)
                    && !self.damaged.load(std::sync::atomic::Ordering::SeqCst)
                    && self.latched_by_full_write() =>
            {
                Err(store_full())
            }
            Err(e @ Error::Corrupt { .. }) => {
                self.note_damage(&e.to_string());
                Err(e)
            }
            Err(Error::NotFound { what })
                if self.damaged.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                let reason = self
                    .damage_reason
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
                    .unwrap_or_else(|| "an earlier read found damage".into());
                Err(Error::corrupt(format!(
                    "not found: {what}; but the store is marked damaged ({reason}), so it may be \
                     what the damage lost; run `strata fsck` to see what is affected and `strata \
                     fsck --repair` to repair it"
                )))
            }
            result => result,
        }
    }

    /// Whether the handle's `PreviousIo` latch was set by a write that found no room rather than
    /// by a read through a damaged page: a write that failed so says so once its guarded call
    /// ends, which this waits for (a little while) when another write is still running (a read
    /// running beside it cannot be that write, and is not waited for).
    fn latched_by_full_write(&self) -> bool {
        use std::sync::atomic::Ordering;
        let nested = guard::depth() > 0;
        for _ in 0..2000 {
            if self.write_failed.load(Ordering::SeqCst) {
                return true;
            }
            if nested || self.writes.load(Ordering::SeqCst) == 0 {
                return false;
            }
            self.latch_waits.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.write_failed.load(Ordering::SeqCst)
    }

    /// Runs the write `f` (doing `what`) under the storage guard, refused on a damaged store.
    fn guarded_write<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let written = self.guarded_writing(what, f)?;
        // There is room again: a later `PreviousIo` is not that failure's.
        self.write_failed
            .store(false, std::sync::atomic::Ordering::SeqCst);
        // Every other write commits durably.
        self.lazy.synced();
        Ok(written)
    }

    /// Refuses a write on a store found damaged (by this handle, or before it opened).
    fn check_writable(&self) -> Result<()> {
        if !self.damaged.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let reason = self
            .damage_reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "an earlier operation found the store file damaged".into());
        Err(super::damage::refusal(&reason))
    }

    /// [`RedbStore::check_writable`] for an eviction or a gc, which also go ahead on a store
    /// marked damaged when all that fsck finds now is damaged documents (their records
    /// unreadable or missing) and the reference counts they leave: both work around such
    /// documents (d76a56c), and `strata fsck --repair` cannot restore one (the log holds object
    /// hashes, not documents), so refusing would keep a secret the user asks to erase for good.
    /// A store that fsck now finds clean has its marker cleared. Any other finding (a page, the
    /// log, a table) keeps the refusal.
    fn writable_for_erasure(&self) -> Result<()> {
        let Err(refused) = self.check_writable() else {
            return Ok(());
        };
        if self.read_only {
            return Err(refused);
        }
        let findings = RedbStore::fsck(self);
        if findings.is_empty() {
            return self.settle_damage(&findings);
        }
        let erasable = |kind: &str| {
            matches!(
                kind,
                "doc_unreadable" | "doc_missing" | "doc_missing_content" | "blob_refs" | "doc_refs"
            )
        };
        if findings.iter().all(|f| erasable(f.kind)) {
            return Ok(());
        }
        Err(refused)
    }

    /// Records that damage was met (`what`): writes are refused, and the damage marker beside
    /// the store file (written unless one is there) tells later handles.
    fn note_damage(&self, what: &str) {
        self.damaged
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut reason = self
            .damage_reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if reason.is_none() {
            *reason = Some(format!("a read found damage: {what}"));
        }
        if let Some(dir) = &self.dir
            && super::damage::reason(dir).is_none()
        {
            super::damage::mark(dir, &format!("a read found damage: {what}"), &[]);
        }
    }

    /// Takes the damage marker of the store directory into account (at open).
    fn load_damage(&self) {
        if let Some(dir) = &self.dir
            && let Some(reason) = super::damage::reason(dir)
        {
            self.damaged
                .store(true, std::sync::atomic::Ordering::SeqCst);
            *self
                .damage_reason
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
        }
    }

    /// Sets the damage state from what fsck found: marked with `findings`, or cleared.
    fn settle_damage(&self, findings: &[Finding]) -> Result<()> {
        let mut reason = self
            .damage_reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if findings.is_empty() {
            if let Some(dir) = &self.dir {
                super::damage::clear(dir)?;
            }
            self.damaged
                .store(false, std::sync::atomic::Ordering::SeqCst);
            *reason = None;
            return Ok(());
        }
        let summary = format!("fsck found {} problems", findings.len());
        if let Some(dir) = &self.dir {
            let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
            super::damage::mark(dir, &summary, &lines);
        }
        self.damaged
            .store(true, std::sync::atomic::Ordering::SeqCst);
        *reason = Some(summary);
        Ok(())
    }
}

impl Backend for RedbStore {
    fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn damage(&self) -> Option<String> {
        if !self.damaged.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        Some(
            self.damage_reason
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
                .unwrap_or_else(|| "an earlier read found damage".into()),
        )
    }

    #[cfg(test)]
    fn note_damage_for_test(&self, what: &str) {
        self.note_damage(what);
    }

    #[cfg(test)]
    fn note_full_write_for_test(&self) {
        self.note_full_write();
    }

    fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt> {
        self.guarded_write("writing a transaction", || {
            RedbStore::transact(self, ops, origin)
        })
    }

    fn transact_with_stat(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: StatUpdate,
    ) -> Result<Option<TxReceipt>> {
        self.guarded_write("writing a transaction", || {
            RedbStore::transact_with_stat(self, ops, origin, stat)
        })
    }

    fn transact_group(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.transact_group_as(group, write::CommitMode::Checkpointed)
    }

    fn transact_group_under_load(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.transact_group_as(group, write::CommitMode::UnderLoad)
    }

    fn transact_group_lazily(&self, group: Vec<TxRequest>) -> Vec<Result<Option<TxReceipt>>> {
        self.transact_group_as(group, write::CommitMode::Lazy)
    }

    fn prepare(&self, ops: &[Op]) {
        // Best effort: what fails here is done (or fails) again in the commit.
        let _ = self.guarded("preparing a write", || self.prepare_docs(ops));
    }

    fn sync(&self) -> Result<()> {
        self.check_writable()?;
        self.guarded_writing("making lazy commits durable", || {
            self.begin_write()?.commit().db()
        })?;
        self.lazy.synced();
        Ok(())
    }

    fn lazy_commits_lost(&self) -> u64 {
        self.lazy.lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn as_of(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        self.guarded("reading a version", || {
            RedbStore::as_of(self, id, valid_time, tx)
        })
    }

    fn version_info(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        self.guarded("reading a version", || {
            RedbStore::version_info(self, id, valid_time, tx)
        })
    }

    fn get_if_known(&self, id: &str) -> Result<Option<Version>> {
        self.guarded("reading a version", || RedbStore::get_if_known(self, id))
    }

    fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<VersionInfo>> {
        self.guarded("reading a history", || RedbStore::history(self, id, query))
    }

    fn history_len(&self, id: &str) -> Result<u64> {
        self.guarded("counting a history", || RedbStore::history_len(self, id))
    }

    fn version_sizes(&self, id: &str, versions: &[VersionInfo]) -> Result<Vec<Option<u64>>> {
        self.guarded("reading version sizes", || {
            RedbStore::version_sizes(self, id, versions)
        })
    }

    fn listings(
        &self,
        ids: &[&str],
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
        deleted: bool,
    ) -> Result<Vec<Result<Option<Listing>>>> {
        match self.guarded("listing files", || {
            RedbStore::listings(self, ids, valid_time, tx, deleted)
        }) {
            // Each file's answer as its own guarded read would give it.
            Ok(answers) => Ok(answers
                .into_iter()
                .map(|answer| self.settle(answer))
                .collect()),
            // The storage engine failed somewhere in the batch: each file read on its own, so
            // that the failure is that file's and the others are listed.
            Err(Error::Corrupt { .. }) => Ok(ids
                .iter()
                .map(|id| crate::store::listing_of(self, id, valid_time, tx, deleted))
                .collect()),
            Err(e) => Err(e),
        }
    }

    fn log(&self, since: Option<TxId>, limit: usize) -> Result<Vec<TxRecord>> {
        self.guarded("reading the log", || RedbStore::log(self, since, limit))
    }

    fn tx_runs(&self, since: Option<TxId>, limit: usize) -> Result<Vec<(TxId, Option<TxId>)>> {
        self.guarded("reading the log", || RedbStore::tx_runs(self, since, limit))
    }

    fn chain_head(&self) -> Result<Option<(TxId, [u8; 32])>> {
        self.guarded("reading the log", || RedbStore::chain_head(self))
    }

    fn tx_at_time(&self, time: Timestamp) -> Result<Option<TxId>> {
        self.guarded("reading the log", || RedbStore::tx_at_time(self, time))
    }

    fn entity(&self, id: &str) -> Result<EntityInfo> {
        self.guarded("reading an entity", || RedbStore::entity(self, id))
    }

    fn entity_exists(&self, id: &str) -> Result<bool> {
        self.guarded("reading an entity", || RedbStore::entity_exists(self, id))
    }

    fn ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        self.guarded("listing entity ids", || {
            RedbStore::ids_with_prefix(self, prefix, limit)
        })
    }

    fn entity_at_path(&self, filesystem_id: &str, path: &str) -> Result<Option<String>> {
        self.guarded("looking up a path", || {
            RedbStore::entity_at_path(self, filesystem_id, path)
        })
    }

    fn paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<(String, String)>> {
        self.guarded("listing paths", || {
            RedbStore::paths_under(self, filesystem_id, prefix)
        })
    }

    fn indexed_paths_under(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>> {
        self.guarded("listing paths", || {
            RedbStore::indexed_paths_under(self, filesystem_id, prefix)
        })
    }

    fn for_each_indexed_path_under(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        self.guarded("listing paths", || {
            RedbStore::for_each_indexed_path_under(self, filesystem_id, prefix, visit)
        })
    }

    fn content(&self, hash: &Hash) -> Result<Option<Vec<u8>>> {
        self.guarded("reading a content", || RedbStore::content(self, hash))
    }

    fn live_entities(&self) -> Result<Vec<EntityInfo>> {
        self.guarded("listing entities", || RedbStore::live_entities(self))
    }

    fn metadata(&self, id: &str, tx: Option<TxId>) -> Result<Option<ObjectMeta>> {
        self.guarded("reading metadata", || RedbStore::metadata(self, id, tx))
    }

    fn metadata_many(&self, ids: &[&str], tx: Option<TxId>) -> Result<Vec<Option<ObjectMeta>>> {
        self.guarded("reading metadata", || {
            RedbStore::metadata_many(self, ids, tx)
        })
    }

    fn metadata_latest(
        &self,
        name: &str,
        ids: &[&str],
        refresh: bool,
    ) -> Result<Vec<Option<ObjectMeta>>> {
        Ok(self.latest_answer(name, ids, refresh, None)?.metas)
    }

    fn metadata_latest_each(
        &self,
        name: &str,
        ids: &[&str],
        refresh: bool,
        each: &mut dyn FnMut(usize, MetaView<'_>) -> Result<()>,
    ) -> Result<()> {
        let answer = self.latest_answer(name, ids, refresh, Some(&mut *each))?;
        super::hand_over(answer.metas, each)
    }

    fn metadata_with_json(
        &self,
        id: &str,
        tx: Option<TxId>,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        self.guarded("reading metadata", || {
            RedbStore::metadata_with_json(self, id, tx)
        })
    }

    fn metadata_latest_with_json(
        &self,
        id: &str,
        refresh: bool,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let answer = self.guarded("reading metadata", || {
            RedbStore::document_snapshot(self, id)
        })?;
        tracing::debug!(id, hit = answer.hit, "document read through a snapshot");
        if refresh && let Some(rec) = &answer.refresh {
            self.guarded_writing("writing a metadata snapshot", || {
                RedbStore::put_snapshot(self, &snapshot::document_key(id), rec)
            })?;
        }
        Ok(answer.found)
    }

    fn stat_cache(
        &self,
        filesystem_id: &str,
        prefix: &str,
    ) -> Result<rustc_hash::FxHashMap<String, StatEntry>> {
        self.guarded("reading the stat cache", || {
            RedbStore::stat_cache(self, filesystem_id, prefix)
        })
    }

    fn stat_cache_len(&self) -> Result<u64> {
        self.guarded("reading the stat cache", || RedbStore::stat_cache_len(self))
    }

    fn read_only_state(&self) -> Option<Vec<u8>> {
        RedbStore::read_only_state(self)
    }

    fn for_each_stat_entry(
        &self,
        filesystem_id: &str,
        prefix: &str,
        visit: &mut dyn FnMut(&str, StatEntry) -> Result<()>,
    ) -> Result<()> {
        self.guarded("reading the stat cache", || {
            RedbStore::for_each_stat_entry(self, filesystem_id, prefix, visit)
        })
    }

    fn stats(&self) -> Result<Stats> {
        self.guarded("counting", || RedbStore::stats(self))
    }

    fn evict(&self, id: &str, origin: Origin) -> Result<TxReceipt> {
        self.writable_for_erasure()?;
        self.guarded_writing("evicting", || {
            // Owed from before the commit: a scrub that fails or is killed is still owed.
            let settling = self.begin_erasure()?;
            match RedbStore::evict(self, id, origin) {
                Ok(receipt) => {
                    settling.committed();
                    Ok(receipt)
                }
                Err(e) => {
                    settling.failed(&e);
                    Err(e)
                }
            }
        })
    }

    fn finish_erasure(&self) -> Result<()> {
        // The evicted bytes leave the file's free pages too (the erasure users ask for).
        if !self.scrub_owed() {
            return Ok(());
        }
        self.guarded_writing("zeroing the store file's free pages", || {
            self.scrub_free_pages()
        })
    }

    fn fsck(&self) -> Result<Vec<Finding>> {
        // Every check is guarded on its own inside: damage is a finding, never an error.
        let findings = RedbStore::fsck(self);
        self.settle_damage(&findings)?;
        Ok(findings)
    }

    fn fsck_rebuild(&self) -> Result<()> {
        // A repair: allowed on a damaged store.
        guard::guarded(&self.damaged, "rebuilding the query tables", || {
            RedbStore::fsck_rebuild(self)
        })?;
        // The storage engine's own repair then checks the pages and rewrites the allocator state
        // it saved when a damaged page left it disagreeing with the trees (corruption seed 114:
        // `--repair` said clean, the next `fsck` found pages failing their checksums).
        self.guarded_writing("checking the store file after the rebuild", || {
            RedbStore::repair_file_state(self)
        })
        .map(|_| ())
    }

    fn gc(&self) -> Result<GcReport> {
        self.writable_for_erasure()?;
        let (mut report, scrub) = self.guarded_writing("collecting garbage", || {
            let settling = self.begin_erasure()?;
            let Some(erasure) = settling.erasure() else {
                return Err(Error::invariant(
                    "an erasure begun without its ledger entry",
                ));
            };
            let report = match RedbStore::gc(self) {
                Ok(report) => {
                    settling.committed();
                    report
                }
                Err(e) => {
                    settling.failed(&e);
                    return Err(e);
                }
            };
            // What gc freed (an evicted secret's contents it took) leaves the free pages too,
            // and so does what an earlier erasure's unfinished scrub left; a scrub owed only
            // for the pages readers still hold gains nothing until one of them ends.
            let scrub =
                report.bytes_freed > 0 || (erasure.owed && !self.scrub_gains_nothing(erasure));
            if !scrub {
                self.no_scrub_owed(erasure)?;
            }
            Ok((report, scrub))
        })?;
        // A guarded call of its own: its failure (a full disk, damage) is noted as any call's,
        // and it does not undo the gc, which committed; the answer says the scrub is owed.
        if scrub
            && let Err(e) = self.guarded_writing("zeroing the store file's free pages", || {
                self.scrub_free_pages()
            })
        {
            report.scrub_pending = Some(format!(
                "gc committed ({} bytes freed), but zeroing the store file's free pages after it \
                 failed, so erased bytes may still be in them; `strata gc` again finishes that \
                 scrub: {}",
                report.bytes_freed,
                e.full_message()
            ));
        }
        // Damage gc met (and kept clear of) marks the store as a read meeting it would.
        if let Some(found) = report.damaged.first() {
            self.note_damage(&found.to_string());
        }
        Ok(report)
    }

    fn append_log(&self, records: &[super::ReplayRecord]) -> Result<()> {
        self.guarded_write("appending log records", || {
            RedbStore::append_log(self, records)
        })
    }

    fn backup(&self, dir: &Path) -> Result<super::rescue::BackupReport> {
        self.guarded("copying the store", || RedbStore::backup(self, dir))
    }

    fn restore_contents(&self, contents: Vec<([u8; 32], Vec<u8>)>) -> Result<()> {
        // A repair: allowed on a damaged store.
        guard::guarded(&self.damaged, "restoring contents", || {
            RedbStore::restore_contents(self, contents)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// redb's errors that say the file is damaged become `Corrupt` (pointing at fsck), others stay
    /// storage errors.
    #[test]
    fn redb_errors_that_report_damage_are_corrupt() {
        let corrupted = || redb::StorageError::Corrupted("a checksum failed".into());
        let kind =
            |result: Result<()>| result.map_or_else(|e| e.kind().to_string(), |()| "ok".into());
        let damaged: Vec<Result<()>> = vec![
            Err::<(), _>(corrupted()).db(),
            Err::<(), _>(redb::TableError::Storage(corrupted())).db(),
            Err::<(), _>(redb::TransactionError::Storage(corrupted())).db(),
            Err::<(), _>(redb::CommitError::Storage(corrupted())).db(),
            Err::<(), _>(redb::DatabaseError::Storage(corrupted())).db(),
            Err::<(), _>(redb::Error::Corrupted("x".into())).db(),
            Err::<(), _>(redb::TableError::TableDoesNotExist("t".into())).db(),
            // A read past the file's end (a damaged page number), and the error redb latches
            // after it for every later call (corruption seed 116).
            Err::<(), _>(redb::StorageError::Io(
                std::io::ErrorKind::UnexpectedEof.into(),
            ))
            .db(),
            Err::<(), _>(redb::StorageError::PreviousIo).db(),
            Err::<(), _>(redb::TableError::Storage(redb::StorageError::PreviousIo)).db(),
            Err::<(), _>(redb::Error::PreviousIo).db(),
        ];
        for result in damaged {
            let message = result
                .as_ref()
                .map_or_else(|e| e.to_string(), |()| String::new());
            assert_eq!(kind(result), "corrupt");
            assert!(message.contains("strata fsck"), "{message}");
        }
        let other: Vec<Result<()>> = vec![
            Err::<(), _>(redb::StorageError::Io(std::io::Error::other("disk"))).db(),
            Err::<(), _>(redb::TransactionError::WouldBlock).db(),
            Err::<(), _>(redb::CommitError::TransactionPoisoned).db(),
        ];
        for result in other {
            assert_eq!(kind(result), "storage");
        }
    }

    /// A write that finds no room (ENOSPC, EFBIG, EDQUOT), however redb wraps it, is an I/O
    /// error saying so and what to do, never damage.
    #[test]
    fn a_write_that_finds_no_room_says_so_and_is_not_damage() {
        use rustix::io::Errno;
        for errno in [Errno::NOSPC, Errno::FBIG, Errno::DQUOT].map(Errno::raw_os_error) {
            let io = || redb::StorageError::Io(std::io::Error::from_raw_os_error(errno));
            let results: Vec<Result<()>> = vec![
                Err::<(), _>(io()).db(),
                Err::<(), _>(redb::TableError::Storage(io())).db(),
                Err::<(), _>(redb::TransactionError::Storage(io())).db(),
                Err::<(), _>(redb::CommitError::Storage(io())).db(),
                Err::<(), _>(redb::DatabaseError::Storage(io())).db(),
                Err::<(), _>(redb::Error::Io(std::io::Error::from_raw_os_error(errno))).db(),
            ];
            for result in results {
                assert!(result.is_err());
                let Err(e) = result else { continue };
                assert!(is_store_full(&e), "{e}");
                assert_eq!(e.kind(), "io");
                let message = e.full_message();
                assert!(
                    message.contains("the disk is full") && message.contains("free space"),
                    "{message}"
                );
            }
        }
        // redb's latch is damage unless a write of this handle found no room.
        let latched = Err::<(), _>(redb::StorageError::PreviousIo).db();
        assert!(latched.as_ref().is_err_and(is_latched));
        assert!(!latched.as_ref().is_err_and(is_store_full));
    }

    /// A read meeting redb's `PreviousIo` latch after real damage (no write found the disk full)
    /// beside a long-running guarded read says damage at once: only a write running can be the
    /// full write the latch may be, so a read does not make it wait. Failed before: it waited
    /// (up to 2 s) for every guarded call running, reads too.
    #[test]
    fn a_latched_read_beside_a_long_read_says_damage_without_waiting() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| -> Result<()> {
            let store = &store;
            let long = scope.spawn(move || {
                store.guarded("listing paths", || {
                    let _ = started_tx.send(());
                    let _ = done.recv();
                    Ok(())
                })
            });
            let _ = started.recv();
            let latched: Result<()> = store.guarded("reading a page", || {
                Err::<(), _>(redb::StorageError::PreviousIo).db()
            });
            let _ = done_tx.send(());
            let err = latched.map(|()| "no error").unwrap_err();
            assert_eq!(err.kind(), "corrupt", "{err}");
            assert_eq!(
                store.latch_waits.load(std::sync::atomic::Ordering::SeqCst),
                0,
                "waited for a read"
            );
            long.join()
                .map_err(|_| Error::invariant("the long read panicked"))?
        })?;
        Ok(())
    }

    /// A read meeting the latch while a write runs waits for that write: when it then says it
    /// found no room, the read says the disk is full too, not damage.
    #[test]
    fn a_latched_read_beside_a_write_that_finds_no_room_says_so() -> Result<()> {
        use std::sync::atomic::Ordering;
        let store = RedbStore::in_memory()?;
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| -> Result<()> {
            let store = &store;
            let write = scope.spawn(move || {
                store.guarded_writing("writing a transaction", || -> Result<()> {
                    let _ = started_tx.send(());
                    // Until the read waits for this write (bounded in time, should it never: a
                    // bound in yields ran out on a loaded machine before the read got there).
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                    while store.latch_waits.load(Ordering::SeqCst) == 0
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    Err(store_full())
                })
            });
            let _ = started.recv();
            let latched: Result<()> = store.guarded("reading a page", || {
                Err::<(), _>(redb::StorageError::PreviousIo).db()
            });
            let written = write
                .join()
                .map_err(|_| Error::invariant("the write panicked"))?;
            assert!(written.as_ref().is_err_and(is_store_full), "{written:?}");
            assert!(latched.as_ref().is_err_and(is_store_full), "{latched:?}");
            assert!(store.latch_waits.load(Ordering::SeqCst) > 0);
            assert!(!store.damaged.load(Ordering::SeqCst), "marked damaged");
            Ok(())
        })
    }

    /// A `PreviousIo` on a store marked damaged says damage, even while a write that found no
    /// room is remembered: the latch may be the damage's, and the damage is what to act on.
    /// Failed before: it said the disk was full.
    #[test]
    fn a_latched_read_on_a_damaged_store_says_damage_not_full() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.note_full_write();
        store.note_damage("a page failed its checksum");
        let latched: Result<()> = store.guarded("reading a page", || {
            Err::<(), _>(redb::StorageError::PreviousIo).db()
        });
        let err = latched.map(|()| "no error").unwrap_err();
        assert!(!is_store_full(&err), "{err}");
        assert_eq!(err.kind(), "corrupt", "{err}");
        assert!(err.to_string().contains("strata fsck"), "{err}");
        Ok(())
    }
}
