//! `Store`: the bitemporal, content-addressed object store on one redb file.
//!
//! Uses `object` and `hash` (and `error`).
//!
//! A store is a directory holding `store.redb` and `store.lock` (who holds it: pid, command,
//! start time; redb's own file lock is the real lock). [`Store::transact`] writes a list of
//! [`Op`]s as one transaction, all or nothing and durable on return; [`Store::as_of`] answers
//! what an entity was at a valid time as known at a transaction, with XTDB v1's semantics.
//!
//! # Layout
//! - `time`: [`Timestamp`] (UTC µs, RFC 3339) and [`TxId`].
//! - `tables`: every table and its key layout. `codec`: the only user of bincode.
//! - `blobs`: content addressing and reference counts. `temporal`: as-of, history, the write rule.
//! - `log`: op digests and the chain. `fsck`: verification, rebuild, gc.

mod blobs;
mod codec;
mod doc_delta;
mod fsck;
mod log;
mod lookup;
mod metadata;
mod readonly;
mod stat;
mod tables;
mod temporal;
mod time;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use redb::{
    Database, ReadTransaction, ReadableTable, ReadableTableMetadata, Table, WriteTransaction,
};

pub use fsck::{Finding, GcReport};
pub use log::{LoggedOp, Origin, TxRecord};
pub use metadata::{DocumentMeta, ObjectMeta};
pub use stat::{FileStat, StatEntry, StatUpdate};
pub use time::{Timestamp, TxId};

use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::object::{ContentOmitted, Fields, FilesystemSource, Object, ObjectType, Source};
use blobs::{BlobTables, DocTables};
use codec::{EntityRec, FirstRec, OpRec, TxHeaderRec, VersionRec};
use tables::*;

/// The format version of the store file this build reads and writes (1: blobs in LZ4; 2: blobs
/// in zstd; 3: compact metadata records, see docs/store.md).
pub const FORMAT_VERSION: u32 = 3;
/// The store file's name inside the store directory.
pub const DB_FILE: &str = "store.redb";
/// The informational lock file's name inside the store directory.
pub const LOCK_FILE: &str = "store.lock";
/// redb's page cache: enough for a CLI run's working set, far below redb's 1 GiB default.
pub(crate) const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Whether commits save the allocator state so that reopening after a crash is quick.
const QUICK_REPAIR: bool = true;

/// Maps any storage engine error into [`Error::Storage`].
pub(crate) trait Db<T> {
    /// The result with its error turned into [`Error::Storage`].
    fn db(self) -> Result<T>;
}

impl<T, E: std::fmt::Display> Db<T> for std::result::Result<T, E> {
    fn db(self) -> Result<T> {
        self.map_err(|e| Error::Storage(e.to_string()))
    }
}

/// When a put's version starts in valid time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ValidFrom {
    /// At the transaction's time (the default).
    #[default]
    TxTime,
    /// At the given time.
    At(Timestamp),
    /// At a file's mtime, moved into (the entity's latest valid_from, tx_time] so that a change
    /// seen late is dated when it happened and order is never broken.
    MtimeClamped(Timestamp),
}

/// A put: an object and what lives beside it on the version row.
#[derive(Clone, Debug)]
pub struct Put {
    /// The object to store.
    pub object: Object,
    /// When the version starts.
    pub valid_from: ValidFrom,
    /// When it ends (the earlier value comes back then); open when `None`.
    pub valid_to: Option<Timestamp>,
    /// The raw bytes of a file whose content is null (binary), kept as a blob under `file_hash`.
    pub bytes: Option<Vec<u8>>,
    /// The byte size of a file whose bytes were not kept.
    pub size: Option<u64>,
    /// The on-disk spelling of the path (case-insensitive mounts).
    pub spelling: Option<String>,
    /// The blob record of the content (or of the kept bytes), compressed ahead of the write: a scan
    /// compresses on its worker threads so the one thread that writes does not. `None`: the
    /// write compresses it when the blob is new.
    pub encoded: Option<EncodedBlob>,
}

impl Put {
    /// A put of `object` valid from the transaction's time on.
    pub fn new(object: Object) -> Self {
        Put {
            object,
            valid_from: ValidFrom::TxTime,
            valid_to: None,
            bytes: None,
            size: None,
            spelling: None,
            encoded: None,
        }
    }
}

/// A blob record made ahead of a write: the compressed content of an object (or its kept raw
/// bytes), keyed by the hash the object itself carries, so the two cannot disagree.
#[derive(Clone, Debug)]
pub struct EncodedBlob {
    hash: [u8; 32],
    record: Vec<u8>,
}

impl EncodedBlob {
    /// Compresses the content of `object`, or else `kept` (the raw bytes of a binary file, which
    /// must hash to its `file_hash`; the write checks that); `None` when there is neither.
    pub fn of(object: &Object, kept: Option<&[u8]>) -> Option<Self> {
        match (
            object.content(),
            object.content_hash(),
            kept,
            object.file_hash(),
        ) {
            (Some(content), Some(hash), _, _) => Some(EncodedBlob {
                hash: hash.0,
                record: codec::encode_blob(content.as_bytes()),
            }),
            (None, _, Some(bytes), Some(file_hash)) => Some(EncodedBlob {
                hash: file_hash.0,
                record: codec::encode_blob(bytes),
            }),
            _ => None,
        }
    }

    /// The record's length in bytes (what it holds in memory).
    pub fn len(&self) -> u64 {
        self.record.len() as u64
    }

    /// Whether the record is empty (it never is: a record has at least its header).
    pub fn is_empty(&self) -> bool {
        self.record.is_empty()
    }

    /// The record, if it is the one for the blob of `hash`.
    pub(crate) fn record_for(&self, hash: &[u8; 32]) -> Option<&[u8]> {
        (self.hash == *hash).then_some(self.record.as_slice())
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug)]
pub enum Op {
    /// Store a new version of an object.
    Put(Box<Put>),
    /// Mark an entity as not existing from `valid_from` (default: tx time) to `valid_to`.
    Delete {
        /// The entity id.
        entity: String,
        /// Start; the transaction's time when `None`.
        valid_from: Option<Timestamp>,
        /// End (the earlier value comes back then); open when `None`.
        valid_to: Option<Timestamp>,
    },
    /// Remove every trace of an entity but the log's digests and the eviction record.
    Evict {
        /// The entity id.
        entity: String,
    },
    /// Precondition: the entity's current object hash is `expected` (`None`: it is absent).
    Match {
        /// The entity id.
        entity: String,
        /// The expected object hash, or `None` for absent (unknown, evicted or deleted).
        expected: Option<Hash>,
    },
}

impl Op {
    /// A put of `object` at the transaction's time.
    pub fn put(object: Object) -> Self {
        Op::Put(Box::new(Put::new(object)))
    }

    /// A put of `object` valid in [`from`, `to`) (`to` open when `None`).
    pub fn put_at(object: Object, from: Timestamp, to: Option<Timestamp>) -> Self {
        let mut put = Put::new(object);
        put.valid_from = ValidFrom::At(from);
        put.valid_to = to;
        Op::Put(Box::new(put))
    }

    /// A delete of `entity` at the transaction's time.
    pub fn delete(entity: impl Into<String>) -> Self {
        Op::Delete {
            entity: entity.into(),
            valid_from: None,
            valid_to: None,
        }
    }

    /// The entity this op is about.
    pub fn entity(&self) -> &str {
        match self {
            Op::Put(put) => put.object.id(),
            Op::Delete { entity, .. } | Op::Evict { entity } | Op::Match { entity, .. } => entity,
        }
    }
}

/// What [`Store::transact`] returns: the transaction's number and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxReceipt {
    /// The new transaction's number.
    pub tx_id: TxId,
    /// Its time.
    pub tx_time: Timestamp,
}

/// One version of an entity as a query sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionInfo {
    /// The entity id.
    pub entity: String,
    /// Start of the version in valid time.
    pub valid_from: Timestamp,
    /// Start of the next version visible at the same transaction time, if any.
    pub valid_to: Option<Timestamp>,
    /// The transaction that wrote it.
    pub tx_id: TxId,
    /// That transaction's time.
    pub tx_time: Timestamp,
    /// The object hash; `None` for a tombstone (the entity does not exist then).
    pub object_hash: Option<Hash>,
    /// Whether the row restores the earlier value at the end of a ranged put or delete.
    pub restored: bool,
    /// Byte size of a file whose bytes were not kept.
    pub size: Option<u64>,
    /// On-disk spelling of the path.
    pub spelling: Option<String>,
    /// Why the content is null.
    pub content_omitted: Option<ContentOmitted>,
}

impl VersionInfo {
    /// Whether the entity does not exist in this version.
    pub fn is_tombstone(&self) -> bool {
        self.object_hash.is_none()
    }
}

/// A version and its object (`None` for a tombstone).
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    /// Times and version-row fields.
    pub info: VersionInfo,
    /// The envelope, rebuilt from entity + document + content with its hashes recomputed.
    pub object: Option<Object>,
}

/// What the store knows about an entity itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntityInfo {
    /// The entity id (`xt/id`).
    pub id: String,
    /// Its type.
    pub object_type: ObjectType,
    /// Its source, for files.
    pub source: Option<Source>,
}

/// Order of [`Store::history`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Order {
    /// Valid time ascending (then tx).
    #[default]
    ValidAsc,
    /// Valid time descending.
    ValidDesc,
    /// Transaction ascending (then valid time).
    TxAsc,
    /// Transaction descending.
    TxDesc,
}

/// What [`Store::history`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HistoryQuery {
    /// Sort order.
    pub order: Order,
    /// Include rows superseded by a later transaction at the same valid_from.
    pub with_corrections: bool,
    /// Only versions starting at or after this valid time.
    pub valid_from: Option<Timestamp>,
    /// Only versions starting before this valid time.
    pub valid_to: Option<Timestamp>,
    /// As known at this transaction (default: latest).
    pub as_of_tx: Option<TxId>,
}

/// Counts and sizes of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stats {
    /// Entities (live or tombstoned, not evicted).
    pub entities: u64,
    /// Version rows.
    pub versions: u64,
    /// Transactions.
    pub transactions: u64,
    /// Distinct blobs.
    pub blobs: u64,
    /// Distinct documents.
    pub documents: u64,
    /// Bytes of blob and document records stored.
    pub stored_bytes: u64,
    /// Bytes of content and kept file bytes given to puts, before deduplication.
    pub put_bytes: u64,
    /// Size of `store.redb` on disk (0 in memory).
    pub file_bytes: u64,
}

impl Stats {
    /// Bytes put per byte stored (above 1 when deduplication saved space).
    pub fn dedup_ratio(&self) -> f64 {
        if self.stored_bytes == 0 {
            1.0
        } else {
            self.put_bytes as f64 / self.stored_bytes as f64
        }
    }
}

/// A bitemporal object store: one redb database, held by one process at a time.
pub struct Store {
    db: readonly::Db,
    dir: Option<PathBuf>,
    /// (length, bytes allocated on disk) of `store.redb` when this handle opened it (see `Drop`).
    opened: (u64, u64),
    /// The latest session and chat documents written, the bases of their next deltas.
    base_cache: doc_delta::BaseCache,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

/// The write tables of one transaction.
pub(crate) struct W<'t> {
    meta: Table<'t, &'static str, &'static [u8]>,
    blobs: BlobTables<'t>,
    docs: DocTables<'t>,
    entities: Table<'t, &'static [u8], &'static [u8]>,
    entity_ids: Table<'t, u64, &'static [u8]>,
    versions: Table<'t, (u64, i64, u64), &'static [u8]>,
    by_tx: Table<'t, (u64, u64), (i64, u64)>,
    match_ops: Table<'t, (u64, u64, u32), ()>,
    tx_log: Table<'t, u64, &'static [u8]>,
    tx_ops: Table<'t, (u64, u32), &'static [u8]>,
    paths: Table<'t, (&'static [u8], &'static str), u64>,
    /// `paths` rows of the entities this transaction created, inserted in key order by
    /// [`W::finish`]: a scan's files arrive in no useful order, and random inserts left the
    /// table's pages 42 % full (`tools/bench --small`).
    new_paths: Vec<(Vec<u8>, String, u64)>,
    /// Match ops of this transaction on an entity absent when they applied (a session's first
    /// commit matches "absent" before its put): (entity, tx, op index), placed by
    /// [`W::end_tx`] once the transaction's writes have created what they create.
    absent_matches: Vec<(String, u64, u32)>,
    /// The entities this transaction evicted.
    evicted: std::collections::HashSet<String>,
    /// The handle's cache of delta bases (`None` when replaying the log).
    base_cache: Option<&'t doc_delta::BaseCache>,
}

impl<'t> W<'t> {
    fn open(tx: &'t WriteTransaction) -> Result<Self> {
        Ok(W {
            meta: tx.open_table(META).db()?,
            blobs: BlobTables {
                index: tx.open_table(BLOB_INDEX).db()?,
                data: tx.open_table(BLOB_DATA).db()?,
            },
            docs: DocTables {
                index: tx.open_table(DOC_INDEX).db()?,
                data: tx.open_table(DOC_DATA).db()?,
            },
            entities: tx.open_table(ENTITIES).db()?,
            entity_ids: tx.open_table(ENTITY_IDS).db()?,
            versions: tx.open_table(VERSIONS).db()?,
            by_tx: tx.open_table(VERSIONS_BY_TX).db()?,
            match_ops: tx.open_table(MATCH_OPS).db()?,
            tx_log: tx.open_table(TX_LOG).db()?,
            tx_ops: tx.open_table(TX_OPS).db()?,
            paths: tx.open_table(PATHS).db()?,
            new_paths: Vec::new(),
            absent_matches: Vec::new(),
            evicted: std::collections::HashSet::new(),
            base_cache: None,
        })
    }

    /// Places the match ops of transaction `tx` whose entity was absent when they applied
    /// (call after its op bodies are written): under the entity's eid when the transaction
    /// created it, nowhere when the transaction evicted it (the body goes, as evict's do), else
    /// under [`ABSENT_EID`], where an eviction of a later entity of that id finds them.
    fn end_tx(&mut self) -> Result<()> {
        for (entity, tx, n) in std::mem::take(&mut self.absent_matches) {
            if let Some(rec) = entity_rec(&self.entities, &entity)? {
                self.match_ops.insert((rec.eid, tx, n), ()).db()?;
            } else if self.evicted.contains(&entity) {
                self.tx_ops.remove((tx, n)).db()?;
            } else {
                self.match_ops.insert((ABSENT_EID, tx, n), ()).db()?;
            }
        }
        self.evicted.clear();
        Ok(())
    }

    /// Writes what the transaction's ops deferred (new `paths` rows, in key order).
    fn finish(&mut self) -> Result<()> {
        let mut rows = std::mem::take(&mut self.new_paths);
        rows.sort();
        for (fs, path, eid) in &rows {
            self.paths
                .insert((fs.as_slice(), path.as_str()), *eid)
                .db()?;
        }
        Ok(())
    }

    fn add_counter(&mut self, name: &str, delta: i64) -> Result<()> {
        let current = read_counter(&self.meta, name)?;
        let next = current.saturating_add_signed(delta);
        self.meta.insert(name, next.to_le_bytes().as_slice()).db()?;
        Ok(())
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

const STORED_BYTES: &str = "stored_bytes";
/// The eid under which `match_ops` keeps matches on an id no entity had (eids count from 1).
const ABSENT_EID: u64 = 0;
const PUT_BYTES: &str = "put_bytes";

fn entity_rec(
    entities: &impl ReadableTable<&'static [u8], &'static [u8]>,
    id: &str,
) -> Result<Option<EntityRec>> {
    match entities.get(codec::id_key(id).as_slice()).db()? {
        // The error's name is built only on the error path (a resume decodes 10 000 records).
        Some(v) => match codec::decode(v.value(), "entity") {
            Ok(rec) => Ok(Some(rec)),
            Err(_) => Ok(Some(codec::decode(v.value(), &format!("entity {id}"))?)),
        },
        None => Ok(None),
    }
}

fn unknown_entity(id: &str) -> Error {
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

/// Everything a writer needs to apply op bodies: shared by `transact` and `fsck_rebuild`.
impl W<'_> {
    /// Applies one resolved op body of transaction `tx` (op index `n`).
    fn apply(&mut self, tx: u64, tx_time: i64, n: u32, op: &OpRec) -> Result<()> {
        match op {
            OpRec::Write(w) => {
                let eid = match (entity_rec(&self.entities, &w.entity)?, &w.first) {
                    (Some(rec), _) => rec.eid,
                    (None, Some(first)) => self.create_entity(&w.entity, first)?,
                    (None, None) => return Err(unknown_entity(&w.entity)),
                };
                let new = VersionRec {
                    object_hash: w.object_hash,
                    tx_after: 0,
                    op: n,
                    restored: false,
                    size: w.size,
                    spelling: w.spelling.clone(),
                    content_omitted: w.content_omitted,
                };
                let rows = temporal::plan_write(
                    &self.versions,
                    eid,
                    w.valid_from,
                    w.valid_to,
                    &new,
                    tx_time,
                )?;
                for (vt, rec) in rows {
                    self.insert_row(eid, vt, tx, &rec)?;
                }
            }
            OpRec::Evict { entity } => {
                if let Some(rec) = entity_rec(&self.entities, entity)? {
                    self.evict(entity, &rec)?;
                }
                self.evicted.insert(entity.0.clone());
            }
            OpRec::Match { entity, .. } => match entity_rec(&self.entities, entity)? {
                Some(rec) => {
                    self.match_ops.insert((rec.eid, tx, n), ()).db()?;
                }
                None => self.absent_matches.push((entity.0.clone(), tx, n)),
            },
        }
        Ok(())
    }

    fn create_entity(&mut self, id: &str, first: &FirstRec) -> Result<u64> {
        let eid = self
            .entity_ids
            .last()
            .db()?
            .map_or(1, |(k, _)| k.value() + 1);
        let rec = EntityRec {
            eid,
            object_type: first.object_type.clone(),
            source: first.source.clone(),
        };
        let key = codec::id_key(id);
        self.entities
            .insert(key.as_slice(), codec::encode(&rec)?.as_slice())
            .db()?;
        self.entity_ids.insert(eid, key.as_slice()).db()?;
        if let Some((filesystem_id, path)) = &first.source {
            self.new_paths
                .push((codec::id_key(filesystem_id), path.clone(), eid));
        }
        Ok(eid)
    }

    fn insert_row(&mut self, eid: u64, vt: i64, tx: u64, rec: &VersionRec) -> Result<()> {
        if let Some(hash) = &rec.object_hash {
            blobs::reference_doc(&mut self.docs, hash)?;
        }
        self.versions
            .insert((eid, vt, tx), codec::encode(rec)?.as_slice())
            .db()?;
        let max = match self.latest_row(eid)? {
            Some((max_vt, max_tx)) if max_vt > vt => (max_vt, max_tx),
            _ => (vt, tx),
        };
        self.by_tx.insert((eid, tx), max).db()?;
        Ok(())
    }

    /// (valid_from, tx) of the latest row of entity `eid` (greatest valid time, then tx).
    pub(super) fn latest_row(&self, eid: u64) -> Result<Option<(i64, u64)>> {
        Ok(self
            .by_tx
            .range((eid, 0u64)..=(eid, u64::MAX))
            .db()?
            .next_back()
            .transpose()
            .db()?
            .map(|(_, v)| v.value()))
    }

    fn evict(&mut self, id: &str, rec: &EntityRec) -> Result<()> {
        let eid = rec.eid;
        let mut rows = Vec::new();
        for entry in self
            .versions
            .range((eid, i64::MIN, 0u64)..=(eid, i64::MAX, u64::MAX))
            .db()?
        {
            let (key, value) = entry.db()?;
            let rec: VersionRec = codec::decode(value.value(), "version record")?;
            rows.push((key.value(), rec.object_hash, rec.op));
        }
        let mut freed: u64 = 0;
        // Session and chat documents and transcripts are stored as deltas and suffixes on
        // earlier ones, which another entity's records may be based on: those are kept whole,
        // so that nothing of this entity stays behind as a base.
        let chained = matches!(
            rec.object_type.parse::<ObjectType>(),
            Ok(ObjectType::Session | ObjectType::Chat)
        );
        // The blobs of the documents only this entity uses: one may survive its release only
        // as the base of another entity's suffix records (a file whose content is a chat's
        // transcript a fork of that chat grew from), which `blobs::unbase` then takes out.
        let (mut erased_blobs, mut added) = (Vec::new(), 0u64);
        let mut uses: HashMap<[u8; 32], u64> = HashMap::new();
        for (_, hash, _) in &rows {
            if let Some(hash) = hash {
                *uses.entry(*hash).or_default() += 1;
            }
        }
        let mut erased = HashMap::new();
        for (hash, count) in uses {
            if let Some((seq, refs, file_blob)) =
                self.docs.index.get(&hash).db()?.map(|v| v.value())
                && refs <= count
            {
                erased.insert(hash, seq);
                if let Some((doc, _)) =
                    blobs::read_doc_raw(&self.docs.index, &self.docs.data, &hash)?
                {
                    erased_blobs.extend(blobs::doc_blobs(&doc, file_blob));
                }
            }
        }
        if chained {
            added += doc_delta::keep_dependents_whole(&mut self.docs, &erased)?;
        }
        // The entity's op bodies: the writes that made its rows, and its matches.
        let mut ops = std::collections::BTreeSet::new();
        for (key, hash, op) in rows {
            ops.insert((key.2, op));
            self.versions.remove(key).db()?;
            self.by_tx.remove((key.0, key.2)).db()?;
            if let Some(hash) = hash {
                freed += blobs::release_doc(&mut self.docs, &mut self.blobs, &hash)?;
            }
        }
        let mut matches = Vec::new();
        for entry in self
            .match_ops
            .range((eid, 0u64, 0u32)..=(eid, u64::MAX, u32::MAX))
            .db()?
        {
            matches.push(entry.db()?.0.value());
        }
        // Matches made while no entity had this id (eids count from 1): their bodies say which.
        for entry in self
            .match_ops
            .range((ABSENT_EID, 0u64, 0u32)..=(ABSENT_EID, u64::MAX, u32::MAX))
            .db()?
        {
            let (e, tx, n) = entry.db()?.0.value();
            let Some(header) = self.tx_log.get(tx).db()?.map(|v| v.value().to_vec()) else {
                continue;
            };
            let tx_time = codec::decode::<TxHeaderRec>(&header, "tx header")?.tx_time;
            if let Some(body) = self.tx_ops.get((tx, n)).db()?.map(|v| v.value().to_vec())
                && let OpRec::Match { entity, .. } =
                    codec::decode_op(&body, tx_time, &format!("op {n} of tx {tx}"))?
                && entity.0 == id
            {
                matches.push((e, tx, n));
            }
        }
        for (e, tx, n) in matches {
            self.match_ops.remove((e, tx, n)).db()?;
            ops.insert((tx, n));
        }
        for (tx, n) in ops {
            self.tx_ops.remove((tx, n)).db()?;
        }
        self.entities.remove(codec::id_key(id).as_slice()).db()?;
        self.entity_ids.remove(eid).db()?;
        if let Some((filesystem_id, path)) = &rec.source {
            self.paths
                .remove((codec::id_key(filesystem_id).as_slice(), path.as_str()))
                .db()?;
        }
        let (more, less) = blobs::unbase(&mut self.blobs, &erased_blobs)?;
        added += more;
        freed += less;
        self.add_counter(STORED_BYTES, added as i64 - freed as i64)?;
        Ok(())
    }

    /// The entity's current object hash (visible now as of the latest tx), `None` when absent.
    fn current_hash(&self, id: &str, now: i64) -> Result<Option<[u8; 32]>> {
        let Some(rec) = entity_rec(&self.entities, id)? else {
            return Ok(None);
        };
        Ok(
            temporal::as_of_row(&self.versions, &self.by_tx, rec.eid, now, u64::MAX)?
                .and_then(|(row, _)| row.rec.object_hash),
        )
    }

    /// Resolves a put into its op body, storing its document and contents.
    fn resolve_put(&mut self, put: &Put, tx_time: i64) -> Result<OpRec> {
        let object = &put.object;
        let id = object.id();
        let existing = entity_rec(&self.entities, id)?;
        let first = match &existing {
            Some(rec) => {
                if *rec.object_type != *object.object_type().as_str() {
                    return Err(Error::Conflict {
                        entity: id.to_string(),
                        expected: format!("a {}", object.object_type()),
                        actual: format!("a {} with this id", &*rec.object_type),
                    });
                }
                None
            }
            None => Some(FirstRec {
                object_type: object.object_type().into(),
                source: object.source().map(|s| {
                    let fs = s.as_filesystem();
                    (fs.filesystem_id.as_str().into(), fs.path.clone())
                }),
            }),
        };
        let valid_from = match put.valid_from {
            ValidFrom::TxTime => tx_time,
            ValidFrom::At(t) => t.as_micros(),
            ValidFrom::MtimeClamped(mtime) => {
                let previous = match &existing {
                    Some(rec) => self
                        .by_tx
                        .range((rec.eid, 0u64)..=(rec.eid, u64::MAX))
                        .db()?
                        .next_back()
                        .transpose()
                        .db()?
                        .map(|(_, v)| v.value().0),
                    None => None,
                };
                let floor = previous.map_or(Timestamp::MIN.as_micros(), |p| p + 1);
                mtime.as_micros().max(floor).min(tx_time)
            }
        };
        check_range(id, valid_from, put.valid_to)?;
        // Session and chat documents grow with every commit: store them as deltas.
        let delta_base = match (&existing, object.object_type()) {
            (Some(rec), ObjectType::Session | ObjectType::Chat) => self.delta_base(rec.eid)?,
            _ => None,
        };
        let stored = blobs::ensure_doc(
            &mut self.docs,
            &mut self.blobs,
            object,
            put.bytes.as_deref(),
            put.encoded.as_ref(),
            delta_base.as_ref(),
            self.base_cache,
        )?;
        if let (Some(cache), ObjectType::Session | ObjectType::Chat) =
            (self.base_cache, object.object_type())
        {
            cache.put(object.object_hash().0, object.metadata_json_shared());
        }
        let given = object.content().map_or(0, str::len) as u64
            + put
                .bytes
                .as_ref()
                .filter(|_| object.content().is_none())
                .map_or(0, |b| b.len() as u64);
        self.add_counter(PUT_BYTES, given as i64)?;
        self.add_counter(STORED_BYTES, stored.stored as i64)?;
        Ok(OpRec::Write(codec::WriteRec {
            entity: id.into(),
            valid_from,
            valid_to: put.valid_to.map(Timestamp::as_micros),
            object_hash: Some(object.object_hash().0),
            first,
            size: put.size,
            spelling: put.spelling.clone(),
            content_omitted: object.content_omitted().map(codec::Omitted::from),
        }))
    }
}

fn check_range(id: &str, from: i64, to: Option<Timestamp>) -> Result<()> {
    if let Some(to) = to
        && to.as_micros() <= from
    {
        return Err(Error::invalid_input(format!(
            "valid_to {to} of {id} is not after its valid_from {}; give an end after the start",
            ts(from)
        )));
    }
    Ok(())
}

pub(crate) fn lock_holder(dir: &Path) -> String {
    match std::fs::read_to_string(dir.join(LOCK_FILE)) {
        Ok(text) if !text.trim().is_empty() => text.trim().replace('\n', ", "),
        _ => "unknown holder".to_string(),
    }
}

fn write_lock_file(dir: &Path) -> Result<()> {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let text = format!(
        "pid={}\ncommand={}\nstarted={}\n",
        std::process::id(),
        command,
        Timestamp::now()
    );
    let path = dir.join(LOCK_FILE);
    std::fs::write(&path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

impl Store {
    /// Creates a new store in directory `dir` (made if missing).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a store already exists there; [`Error::Io`] when the
    /// directory cannot be made; [`Error::StoreLocked`] when another process holds it.
    pub fn create(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.join(DB_FILE).exists() {
            return Err(Error::invalid_input(format!(
                "a store already exists in {}; open it instead",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating store directory {}", dir.display()), e))?;
        Self::open_dir(dir, true)
    }

    /// Opens the existing store in directory `dir`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is none; [`Error::StoreLocked`] when another process holds
    /// it; [`Error::FormatVersion`] when it was written by another format version.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.join(DB_FILE).exists() {
            return Err(Error::not_found(format!(
                "store in {} (no {DB_FILE}); create one with `strata init`",
                dir.display()
            )));
        }
        Self::open_dir(dir, false)
    }

    /// Opens the store in `dir`, creating it when there is none.
    ///
    /// # Errors
    /// As [`Store::create`] and [`Store::open`].
    pub fn open_or_create(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.join(DB_FILE).exists() {
            Self::open(dir)
        } else {
            Self::create(dir)
        }
    }

    /// A store in memory (nothing on disk, no lock file): for tests and models.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn in_memory() -> Result<Self> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .db()?;
        let store = Store {
            db: readonly::Db::Writable(db),
            dir: None,
            opened: (0, 0),
            base_cache: doc_delta::BaseCache::default(),
        };
        store.init(true, Path::new(":memory:"))?;
        Ok(store)
    }

    fn open_dir(dir: &Path, create: bool) -> Result<Self> {
        let path = dir.join(DB_FILE);
        let mut builder = Database::builder();
        builder.set_cache_size(CACHE_BYTES);
        let opened = if create {
            builder.create(&path)
        } else {
            builder.open(&path)
        };
        let db = match opened {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(Error::StoreLocked {
                    path,
                    holder: lock_holder(dir),
                });
            }
            Err(e) => return Err(Error::Storage(format!("opening {}: {e}", path.display()))),
        };
        write_lock_file(dir)?;
        let store = Store {
            db: readonly::Db::Writable(db),
            dir: Some(dir.to_path_buf()),
            opened: file_size(&path),
            base_cache: doc_delta::BaseCache::default(),
        };
        store.init(create, &path)?;
        Ok(store)
    }

    fn init(&self, create: bool, path: &Path) -> Result<()> {
        if create {
            let tx = self.db.begin_write().db()?;
            tables::create_all(&tx)?;
            {
                let mut meta = tx.open_table(META).db()?;
                meta.insert("format_version", FORMAT_VERSION.to_le_bytes().as_slice())
                    .db()?;
            }
            tx.commit().db()?;
            return Ok(());
        }
        self.check_format(path)
    }

    /// Refuses a file that is not a strata store or has another format version.
    fn check_format(&self, path: &Path) -> Result<()> {
        let tx = self.db.begin_read().db()?;
        let meta = tx.open_table(META).map_err(|e| {
            Error::corrupt(format!(
                "{} has no meta table ({e}); it is not a strata store",
                path.display()
            ))
        })?;
        let found = match meta.get("format_version").db()? {
            Some(v) => {
                let bytes: [u8; 4] = v.value().try_into().map_err(|_| {
                    Error::corrupt(format!("{} has a malformed format version", path.display()))
                })?;
                u32::from_le_bytes(bytes)
            }
            None => 0,
        };
        if found != FORMAT_VERSION {
            return Err(Error::FormatVersion {
                path: path.to_path_buf(),
                found,
                supported: FORMAT_VERSION,
            });
        }
        Ok(())
    }

    /// The store directory (`None` in memory).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn begin_write(&self) -> Result<WriteTransaction> {
        let mut tx = self.db.begin_write().db()?;
        tx.set_quick_repair(QUICK_REPAIR);
        Ok(tx)
    }

    fn read(&self) -> Result<ReadTransaction> {
        self.db.begin_read().db()
    }

    /// Writes `ops` as one transaction: all or nothing, durable when this returns.
    ///
    /// Matches are checked first, against the state before the transaction.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty op list, an entity written by two ops, a valid_to not
    /// after valid_from, or bytes that do not hash to the file's `file_hash`;
    /// [`Error::NotFound`] for a delete or evict of an unknown entity; [`Error::Conflict`] when a
    /// match fails (naming expected and actual hashes) or an id is taken by another type.
    pub fn transact(&self, ops: Vec<Op>, origin: Origin) -> Result<TxReceipt> {
        self.transact_inner(ops, origin, None)
    }

    /// [`Store::transact`], plus stat cache changes written in the same redb transaction.
    fn transact_inner(
        &self,
        ops: Vec<Op>,
        origin: Origin,
        stat: Option<&StatUpdate>,
    ) -> Result<TxReceipt> {
        if ops.is_empty() {
            return Err(Error::invalid_input(
                "a transaction needs at least one op; nothing was written",
            ));
        }
        let mut written = std::collections::HashSet::new();
        for op in &ops {
            if !matches!(op, Op::Match { .. }) && !written.insert(op.entity()) {
                return Err(Error::invalid_input(format!(
                    "entity {} is written by two ops of one transaction; give one op per entity",
                    op.entity()
                )));
            }
        }
        if ops.len() > u32::MAX as usize {
            return Err(Error::invalid_input("a transaction holds at most 2^32 ops"));
        }
        let wtx = self.begin_write()?;
        let receipt = {
            let mut w = W::open(&wtx)?;
            w.base_cache = Some(&self.base_cache);
            let last = match w.tx_log.last().db()? {
                Some((k, v)) => Some((
                    k.value(),
                    codec::decode::<TxHeaderRec>(v.value(), "tx header")?,
                )),
                None => None,
            };
            let tx = last.as_ref().map_or(1, |(id, _)| id + 1);
            let prev_chain = last.as_ref().map_or([0u8; 32], |(_, h)| h.chain);
            let now = Timestamp::now().as_micros();
            let tx_time = last.as_ref().map_or(now, |(_, h)| now.max(h.tx_time + 1));
            for op in &ops {
                if let Op::Match { entity, expected } = op {
                    let actual = w.current_hash(entity, tx_time)?;
                    if actual != expected.map(|h| h.0) {
                        let show =
                            |h: Option<[u8; 32]>| h.map_or("absent".to_string(), hex::encode);
                        return Err(Error::Conflict {
                            entity: entity.clone(),
                            expected: show(expected.map(|h| h.0)),
                            actual: show(actual),
                        });
                    }
                }
            }
            let mut bodies = Vec::with_capacity(ops.len());
            // An evicted file's stat cache entry goes too, so that the next scan reads it again.
            let mut evicted_paths: Vec<(String, String)> = Vec::new();
            for (n, op) in ops.iter().enumerate() {
                let body = match op {
                    Op::Put(put) => w.resolve_put(put, tx_time)?,
                    Op::Delete {
                        entity,
                        valid_from,
                        valid_to,
                    } => {
                        if entity_rec(&w.entities, entity)?.is_none() {
                            return Err(unknown_entity(entity));
                        }
                        let from = valid_from.map_or(tx_time, Timestamp::as_micros);
                        check_range(entity, from, *valid_to)?;
                        OpRec::Write(codec::WriteRec::delete(
                            entity.as_str().into(),
                            from,
                            valid_to.map(Timestamp::as_micros),
                        ))
                    }
                    Op::Evict { entity } => {
                        let Some(rec) = entity_rec(&w.entities, entity)? else {
                            return Err(unknown_entity(entity));
                        };
                        if let Some(source) = rec.source {
                            evicted_paths.push((source.0.0, source.1));
                        }
                        OpRec::Evict {
                            entity: entity.as_str().into(),
                        }
                    }
                    Op::Match { entity, expected } => OpRec::Match {
                        entity: entity.as_str().into(),
                        expected: expected.map(|h| h.0),
                    },
                };
                let n = n as u32;
                w.apply(tx, tx_time, n, &body)?;
                w.tx_ops
                    .insert((tx, n), codec::encode_op(&body, tx_time)?.as_slice())
                    .db()?;
                bodies.push(body);
            }
            w.end_tx()?;
            let digests = bodies
                .iter()
                .map(log::op_digest)
                .collect::<Result<Vec<_>>>()?;
            let chain = log::next_chain(&prev_chain, tx, tx_time, origin.as_str(), &digests)?;
            let header = TxHeaderRec {
                tx_time,
                origin: origin.as_str().to_string(),
                digests,
                chain,
            };
            w.tx_log
                .insert(tx, codec::encode(&header)?.as_slice())
                .db()?;
            w.finish()?;
            if !evicted_paths.is_empty() {
                let mut cache = wtx.open_table(STAT_CACHE).db()?;
                for (filesystem_id, path) in &evicted_paths {
                    cache
                        .remove((codec::id_key(filesystem_id).as_slice(), path.as_str()))
                        .db()?;
                }
            }
            TxReceipt {
                tx_id: TxId(tx),
                tx_time: ts(tx_time),
            }
        };
        if let Some(stat) = stat {
            stat::apply(&wtx, stat)?;
        }
        wtx.commit().db()?;
        Ok(receipt)
    }

    /// What `id` is now (valid now, as of the latest transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when stored data fails its
    /// hashes.
    pub fn get(&self, id: &str) -> Result<Option<Version>> {
        self.as_of(id, None, None)
    }

    /// What `id` was at `valid_time` as known at transaction `tx` (defaults: now, latest).
    ///
    /// `None` when no version is visible there; a tombstone is a version with no object.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity; [`Error::Corrupt`] when stored data fails its
    /// hashes.
    pub fn as_of(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        let rtx = self.read()?;
        let r = R::open(&rtx)?;
        let entity = entity_rec(&r.entities, id)?.ok_or_else(|| unknown_entity(id))?;
        r.version_at(id, &entity, valid_time, tx)
    }

    /// Like [`Store::as_of`] without rebuilding the object: only the version's times and hashes.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn version_info(
        &self,
        id: &str,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        let rtx = self.read()?;
        let r = R::open(&rtx)?;
        let entity = entity_rec(&r.entities, id)?.ok_or_else(|| unknown_entity(id))?;
        r.info_at(id, &entity, valid_time, tx)
    }

    /// The current versions of many entities in one read transaction; unknown ids give `None`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when stored data fails its hashes.
    pub fn get_many(&self, ids: &[&str]) -> Result<Vec<Option<Version>>> {
        let rtx = self.read()?;
        let r = R::open(&rtx)?;
        ids.iter()
            .map(|id| match entity_rec(&r.entities, id)? {
                Some(entity) => r.version_at(id, &entity, None, None),
                None => Ok(None),
            })
            .collect()
    }

    /// The versions of `id` as `query` selects them.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn history(&self, id: &str, query: HistoryQuery) -> Result<Vec<VersionInfo>> {
        let rtx = self.read()?;
        let r = R::open(&rtx)?;
        let entity = entity_rec(&r.entities, id)?.ok_or_else(|| unknown_entity(id))?;
        let tx = query.as_of_tx.map_or(u64::MAX, |t| t.0);
        let from = query.valid_from.map_or(i64::MIN, Timestamp::as_micros);
        let to = query.valid_to.map_or(i64::MAX, Timestamp::as_micros);
        let rows = temporal::history_rows(
            &r.versions,
            entity.eid,
            from,
            to,
            tx,
            query.with_corrections,
        )?;
        // valid_to of a row: the next distinct valid_from visible at `tx`.
        let mut distinct: Vec<i64> = rows.iter().map(|r| r.vt).collect();
        distinct.dedup();
        let tail_end = match distinct.last() {
            Some(&last) => temporal::valid_to(&r.versions, entity.eid, last, tx)?,
            None => None,
        };
        let mut out: Vec<VersionInfo> = rows
            .iter()
            .map(|row| {
                let i = distinct.partition_point(|&v| v <= row.vt);
                let end = distinct.get(i).copied().or(tail_end);
                version_info(id, row, end)
            })
            .collect();
        match query.order {
            Order::ValidAsc => {}
            Order::ValidDesc => out.reverse(),
            Order::TxAsc => out.sort_by_key(|v| (v.tx_id, v.valid_from)),
            Order::TxDesc => {
                out.sort_by_key(|v| (v.tx_id, v.valid_from));
                out.reverse();
            }
        }
        Ok(out)
    }

    /// Up to `limit` log records after transaction `since` (from the first when `None`), oldest
    /// first.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    pub fn log(&self, since: Option<TxId>, limit: usize) -> Result<Vec<TxRecord>> {
        let rtx = self.read()?;
        let tx_log = rtx.open_table(TX_LOG).db()?;
        let tx_ops = rtx.open_table(TX_OPS).db()?;
        let start = since.map_or(0, |t| t.0.saturating_add(1));
        let mut out = Vec::new();
        for entry in tx_log.range(start..).db()?.take(limit) {
            let (key, value) = entry.db()?;
            let tx = key.value();
            let header: TxHeaderRec = codec::decode(value.value(), &format!("header of tx {tx}"))?;
            let mut ops = Vec::with_capacity(header.digests.len());
            for (n, digest) in header.digests.iter().enumerate() {
                let body = match tx_ops.get((tx, n as u32)).db()? {
                    Some(v) => Some(log::op_json(&codec::decode_op(
                        v.value(),
                        header.tx_time,
                        &format!("op {n} of tx {tx}"),
                    )?)),
                    None => None,
                };
                ops.push(LoggedOp {
                    digest: *digest,
                    body,
                });
            }
            out.push(TxRecord {
                tx_id: TxId(tx),
                tx_time: ts(header.tx_time),
                origin: Origin::from_name(&header.origin),
                ops,
                chain: header.chain,
            });
        }
        Ok(out)
    }

    /// The latest transaction and the chain value after it (`None` in an empty store).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the header does not decode.
    pub fn chain_head(&self) -> Result<Option<(TxId, [u8; 32])>> {
        let rtx = self.read()?;
        let tx_log = rtx.open_table(TX_LOG).db()?;
        match tx_log.last().db()? {
            Some((k, v)) => {
                let header: TxHeaderRec = codec::decode(v.value(), "tx header")?;
                Ok(Some((TxId(k.value()), header.chain)))
            }
            None => Ok(None),
        }
    }

    /// What the store knows about entity `id` itself.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown entity.
    pub fn entity(&self, id: &str) -> Result<EntityInfo> {
        let rtx = self.read()?;
        let entities = rtx.open_table(ENTITIES).db()?;
        let rec = entity_rec(&entities, id)?.ok_or_else(|| unknown_entity(id))?;
        entity_info(id, &rec)
    }

    /// The ids of the file entities on `filesystem_id` at `prefix` or below it (whole path
    /// segments: `/a/b` matches `/a/b` and `/a/b/c`, not `/a/bc`), in path order.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn entity_ids_by_path(&self, filesystem_id: &str, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .paths_under(filesystem_id, prefix)?
            .into_iter()
            .map(|(_, id)| id)
            .collect())
    }

    /// The bytes stored under `hash` (a `content_hash`, or the `file_hash` of kept raw bytes).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the record does not decode.
    pub fn content(&self, hash: &Hash) -> Result<Option<Vec<u8>>> {
        let rtx = self.read()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        let data = rtx.open_table(BLOB_DATA).db()?;
        blobs::read_blob(&index, &data, &hash.0)
    }

    /// Every entity that exists now (its current version is not a tombstone), in id order.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    pub fn live_entities(&self) -> Result<Vec<EntityInfo>> {
        let rtx = self.read()?;
        let r = R::open(&rtx)?;
        let now = r.now()?;
        let mut out = Vec::new();
        for entry in r.entities.iter().db()? {
            let (key, value) = entry.db()?;
            let id = codec::id_of_key(key.value(), "entity key")?;
            let rec: EntityRec = codec::decode(value.value(), &format!("entity {id}"))?;
            let live = temporal::as_of_row(&r.versions, &r.by_tx, rec.eid, now, u64::MAX)?
                .is_some_and(|(row, _)| row.rec.object_hash.is_some());
            if live {
                out.push(entity_info(&id, &rec)?);
            }
        }
        // Keys put hex ids before the others; callers get id order.
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Counts and sizes.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub fn stats(&self) -> Result<Stats> {
        let rtx = self.read()?;
        let meta = rtx.open_table(META).db()?;
        let file_bytes = match &self.dir {
            Some(dir) => std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len()),
            None => 0,
        };
        Ok(Stats {
            entities: rtx.open_table(ENTITIES).db()?.len().db()?,
            versions: rtx.open_table(VERSIONS).db()?.len().db()?,
            transactions: rtx.open_table(TX_LOG).db()?.len().db()?,
            blobs: rtx.open_table(BLOB_INDEX).db()?.len().db()?,
            documents: rtx.open_table(DOC_INDEX).db()?.len().db()?,
            stored_bytes: read_counter(&meta, STORED_BYTES)?,
            put_bytes: read_counter(&meta, PUT_BYTES)?,
            file_bytes,
        })
    }
}

/// (length, bytes allocated on disk) of a file; (0, 0) when it cannot be read.
fn file_size(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or((0, 0), |m| (m.len(), m.blocks() * 512))
}

impl Drop for Store {
    /// Compacts the file after a large write, then removes the lock file.
    ///
    /// redb grows a file below 4 GiB by doubling it, so after a large write the file's length is
    /// up to twice the pages in use (100 000 incompressible contents: 1 028 MiB long, 560 MiB
    /// used). `Database::compact` moves the last pages into free ones and truncates the file
    /// (there is no public way to make redb grow by less). It costs about 25 ms even when there
    /// is little to move (several two-phase commits), which doubled the time of a small
    /// re-index; so it runs only when the file grew and the bytes allocated on disk grew by at
    /// least an eighth since the handle opened it. After a small write the file may be up to
    /// twice as long as its content, in a sparse tail that takes no disk space; the next large
    /// write compacts it. Best effort: a failure leaves a longer file, never a wrong one.
    fn drop(&mut self) {
        if let Some(dir) = &self.dir
            && !self.db.is_read_only()
        {
            let (len, allocated) = file_size(&dir.join(DB_FILE));
            let (opened_len, opened_allocated) = self.opened;
            if len > opened_len
                && allocated >= opened_allocated + opened_allocated / 8
                && let Some(db) = self.db.writable()
            {
                let _ = db.compact();
            }
            // Best effort: a lock file left behind is only informational.
            let _ = std::fs::remove_file(dir.join(LOCK_FILE));
        }
    }
}

fn entity_info(id: &str, rec: &EntityRec) -> Result<EntityInfo> {
    Ok(EntityInfo {
        id: id.to_string(),
        object_type: rec.object_type.parse()?,
        source: rec.source.as_ref().map(|(filesystem_id, path)| {
            Source::Filesystem(FilesystemSource {
                filesystem_id: filesystem_id.0.clone(),
                path: path.clone(),
            })
        }),
    })
}

/// The read tables a query uses.
pub(crate) struct R {
    meta: redb::ReadOnlyTable<&'static str, &'static [u8]>,
    entities: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    versions: redb::ReadOnlyTable<(u64, i64, u64), &'static [u8]>,
    by_tx: redb::ReadOnlyTable<(u64, u64), (i64, u64)>,
    tx_log: redb::ReadOnlyTable<u64, &'static [u8]>,
    blob_index: redb::ReadOnlyTable<[u8; 32], (u64, u64, u64)>,
    blob_data: redb::ReadOnlyTable<u64, &'static [u8]>,
    doc_index: redb::ReadOnlyTable<[u8; 32], (u64, u64, bool)>,
    doc_data: redb::ReadOnlyTable<u64, &'static [u8]>,
}

impl R {
    fn open(tx: &ReadTransaction) -> Result<Self> {
        Ok(R {
            meta: tx.open_table(META).db()?,
            entities: tx.open_table(ENTITIES).db()?,
            versions: tx.open_table(VERSIONS).db()?,
            by_tx: tx.open_table(VERSIONS_BY_TX).db()?,
            tx_log: tx.open_table(TX_LOG).db()?,
            blob_index: tx.open_table(BLOB_INDEX).db()?,
            blob_data: tx.open_table(BLOB_DATA).db()?,
            doc_index: tx.open_table(DOC_INDEX).db()?,
            doc_data: tx.open_table(DOC_DATA).db()?,
        })
    }

    /// "Now" in valid time: the wall clock, or the latest tx time when the clock is behind it.
    fn now(&self) -> Result<i64> {
        let wall = Timestamp::now().as_micros();
        let last = match self.tx_log.last().db()? {
            Some((_, v)) => codec::decode::<TxHeaderRec>(v.value(), "tx header")?.tx_time,
            None => 0,
        };
        let _ = &self.meta;
        Ok(wall.max(last))
    }

    fn version_at(
        &self,
        id: &str,
        entity: &EntityRec,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<Version>> {
        let Some(info) = self.info_at(id, entity, valid_time, tx)? else {
            return Ok(None);
        };
        let object = match &info.object_hash {
            Some(hash) => Some(self.object(id, entity, &hash.0, info.content_omitted)?),
            None => None,
        };
        Ok(Some(Version { info, object }))
    }

    fn info_at(
        &self,
        id: &str,
        entity: &EntityRec,
        valid_time: Option<Timestamp>,
        tx: Option<TxId>,
    ) -> Result<Option<VersionInfo>> {
        let vt = match valid_time {
            Some(t) => t.as_micros(),
            None => self.now()?,
        };
        let tx = tx.map_or(u64::MAX, |t| t.0);
        Ok(self.info_row(id, entity.eid, vt, tx)?.map(|(info, _)| info))
    }

    /// The version row of entity `eid` visible at valid time `vt` as of transaction `tx`, with
    /// its info (valid_to included); `None` when nothing is visible there.
    pub(crate) fn info_row(
        &self,
        id: &str,
        eid: u64,
        vt: i64,
        tx: u64,
    ) -> Result<Option<(VersionInfo, temporal::Row)>> {
        let Some((row, is_max)) = temporal::as_of_row(&self.versions, &self.by_tx, eid, vt, tx)?
        else {
            return Ok(None);
        };
        let end = if is_max {
            None
        } else {
            temporal::valid_to(&self.versions, eid, row.vt, tx)?
        };
        Ok(Some((version_info(id, &row, end), row)))
    }

    /// The document (full fields) that a version of `id` points at by object hash `hash`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the document is missing or does not resolve.
    pub(super) fn version_doc(&self, id: &str, hash: &[u8; 32]) -> Result<codec::DocRec> {
        let (doc, _) =
            blobs::read_doc(&self.doc_index, &self.doc_data, hash)?.ok_or_else(|| {
                Error::corrupt(format!(
                    "version of {id} points at missing document {}",
                    hex::encode(hash)
                ))
            })?;
        Ok(doc)
    }

    /// Rebuilds the envelope of `id` from its entity row, document and content.
    fn object(
        &self,
        id: &str,
        entity: &EntityRec,
        hash: &[u8; 32],
        omitted: Option<ContentOmitted>,
    ) -> Result<Object> {
        let doc = self.version_doc(id, hash)?;
        let content = match &doc.content_hash {
            Some(c) => {
                let bytes =
                    blobs::read_blob(&self.blob_index, &self.blob_data, c)?.ok_or_else(|| {
                        Error::corrupt(format!(
                            "document {} points at missing content {}",
                            hex::encode(hash),
                            hex::encode(c)
                        ))
                    })?;
                Some(String::from_utf8(bytes).map_err(|_| {
                    Error::corrupt(format!("content {} is not UTF-8", hex::encode(c)))
                })?)
            }
            None => None,
        };
        let object_type: ObjectType = entity.object_type.parse()?;
        let fields_json: serde_json::Value = serde_json::from_str(&doc.fields).map_err(|e| {
            Error::corrupt(format!("fields of document {}: {e}", hex::encode(hash)))
        })?;
        let fields = Fields::from_json(object_type, fields_json)
            .map_err(|e| Error::corrupt(format!("document {}: {e}", hex::encode(hash))))?;
        let source = entity_info(id, entity)?.source;
        let object = Object::from_parts(
            Some(id),
            source,
            doc.file_hash.map(Hash),
            content,
            fields,
            omitted,
        )
        .map_err(|e| Error::corrupt(format!("object {id} cannot be rebuilt: {e}")))?;
        if object.object_hash().0 != *hash {
            return Err(Error::corrupt(format!(
                "object {id} rebuilds to object hash {}, not the stored {}",
                object.object_hash(),
                hex::encode(hash)
            )));
        }
        Ok(object)
    }
}
