//! What queries answer: versions, entities, history selections, counts, and what `fsck` and `gc`
//! report.

use std::fmt;

use super::time::{Timestamp, TxId};
use crate::hash::Hash;
use crate::object::{ContentOmitted, Fields, Object, ObjectType, Source};

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

/// Order of [`super::Backend::history`].
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

impl Order {
    /// Puts `versions`, listed in valid-time order, in this order.
    pub(crate) fn arrange(self, versions: &mut [VersionInfo]) {
        match self {
            Order::ValidAsc => {}
            Order::ValidDesc => versions.reverse(),
            Order::TxAsc => versions.sort_by_key(|v| (v.tx_id, v.valid_from)),
            Order::TxDesc => {
                versions.sort_by_key(|v| (v.tx_id, v.valid_from));
                versions.reverse();
            }
        }
    }
}

/// What [`super::Backend::history`] lists.
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

/// What `ls` lists of one file ([`super::Backend::listings`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The version visible at the listing's valid time and transaction.
    pub info: VersionInfo,
    /// How many versions the store knew then ([`Listing::history_query`]).
    pub versions: u64,
    /// The version's byte size ([`super::Backend::version_sizes`]).
    pub size: Option<u64>,
}

impl Listing {
    /// The history a listing at (`valid_time`, `tx`) counts: as known at `tx`, and under a
    /// valid time the versions that had begun by then.
    pub fn history_query(valid_time: Option<Timestamp>, tx: Option<TxId>) -> HistoryQuery {
        HistoryQuery {
            as_of_tx: tx,
            valid_to: valid_time.map(Timestamp::next),
            ..HistoryQuery::default()
        }
    }
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

/// What a version of an entity is, without its content: for metadata lines and caches.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectMeta {
    /// The version row (times, object hash as stored, size, spelling, content_omitted).
    pub info: VersionInfo,
    /// The entity's type.
    pub object_type: ObjectType,
    /// Its source, for files.
    pub source: Option<Source>,
    /// The version's document; `None` for a tombstone.
    pub document: Option<DocumentMeta>,
}

/// One answer of [`super::Backend::metadata_latest_each`]: a file's version or tombstone with
/// its texts borrowed from the backend's record (what a session's cache keeps of it), or any
/// other answer whole.
#[derive(Debug)]
pub enum MetaView<'a> {
    /// A version of a file with a filesystem source, or its tombstone.
    File(FileView<'a>),
    /// Any other answer, as [`super::Backend::metadata_many`] gives it.
    Whole(Box<ObjectMeta>),
}

/// A file's stored metadata, borrowed: the fields of an [`ObjectMeta`] a session's cache keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileView<'a> {
    /// The entity id.
    pub entity: &'a str,
    /// The source's filesystem id.
    pub filesystem_id: &'a str,
    /// The source's canonical path.
    pub path: &'a str,
    /// The on-disk spelling recorded on the version (case-insensitive mounts).
    pub spelling: Option<&'a str>,
    /// Why the content is null, if it is.
    pub content_omitted: Option<ContentOmitted>,
    /// The file's fields and hash; `None` for a tombstone.
    pub document: Option<FileViewDoc<'a>>,
}

/// The document part of a [`FileView`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileViewDoc<'a> {
    /// `file_type`.
    pub file_type: &'a str,
    /// `char_count`.
    pub char_count: u64,
    /// `file_hash` (`None` for a stub).
    pub file_hash: Option<Hash>,
}

/// The document of a version as stored: hashes and typed fields, no content.
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentMeta {
    /// `file_hash` (files that were read).
    pub file_hash: Option<Hash>,
    /// `content_hash` (`None` when the content is null).
    pub content_hash: Option<Hash>,
    /// The typed metadata fields.
    pub fields: Fields,
}

impl ObjectMeta {
    /// Whether the entity does not exist in this version.
    pub fn is_tombstone(&self) -> bool {
        self.document.is_none()
    }
}

/// Parses stored fields JSON of an `object_type` document straight into [`Fields`].
/// One problem `fsck` found, precise enough to locate it and to repair it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// What kind of problem. Contents: `blob_hash`, `blob_unreadable`, `blob_missing`,
    /// `blob_refs`, `blob_overlap`; documents: `doc_hash`, `doc_unreadable`, `doc_missing`,
    /// `doc_missing_content`, `doc_orphan`, `doc_refs`; the log: `log_gap`, `chain`,
    /// `header_unreadable`, `op_unreadable`, `op_digest`, `op_orphan`, `op_missing`; a derived
    /// table that disagrees with the log's replay: its name (`entities`, `entity_ids`,
    /// `versions`, `versions_by_tx`, `match_ops`, `paths`, `evicted_ops`), `replay`,
    /// `entity_id`; `meta_since` (a `meta` key saying from which transaction a format's rows
    /// begin, whose value damage made no number); `stat_cache`; `directories` (the stat cache's
    /// directory numbers, in `directories` and `directory_paths`, that do not lead back to each
    /// other); `meta_snapshot` (a metadata snapshot that fails its checksum or disagrees with the
    /// store); `lookup` (a row iteration finds but a lookup does not);
    /// `unreadable` (a table the storage engine cannot read); `checksum` (pages that fail the
    /// storage engine's own checksums).
    pub kind: &'static str,
    /// What it is about (a hash, an entity, a tx, a table).
    pub subject: String,
    /// What is wrong.
    pub detail: String,
    /// The entity it affects, when one is known.
    pub entity: Option<String>,
    /// The path of that entity (files), when known.
    pub path: Option<String>,
    /// The transaction (the version's, or the log record's) it affects, when known.
    pub tx: Option<u64>,
    /// The command that repairs it.
    pub repair: &'static str,
}

/// A finding of `kind` about `subject` with no known entity yet, naming the command that
/// repairs it.
pub(crate) fn finding(
    kind: &'static str,
    subject: impl Into<String>,
    detail: impl Into<String>,
) -> Finding {
    Finding {
        kind,
        subject: subject.into(),
        detail: detail.into(),
        entity: None,
        path: None,
        tx: None,
        repair: super::damage::repair_for(kind),
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.subject, self.detail)?;
        match (&self.path, &self.entity) {
            (Some(path), _) => write!(f, "; affects {path:?}")?,
            (None, Some(entity)) => write!(f, "; affects {entity}")?,
            (None, None) => {}
        }
        if let Some(tx) = self.tx {
            write!(f, " (tx {tx})")?;
        }
        write!(f, "; repair: {}", self.repair)
    }
}

/// What `gc` removed, and the damage that made it keep what it could not prove unused.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GcReport {
    /// Documents no version referenced.
    pub documents_removed: u64,
    /// Blobs no document referenced.
    pub blobs_removed: u64,
    /// Bytes of records removed.
    pub bytes_freed: u64,
    /// Reference counts that were wrong and were fixed.
    pub counts_fixed: u64,
    /// Version rows and documents found damaged (each names `strata fsck --repair`): what
    /// they may use was kept, and nothing at all was removed when a row's document is unknown.
    pub damaged: Vec<Finding>,
    /// Set when zeroing the store file's free pages after gc failed (gc itself committed): why,
    /// and that `strata gc` again finishes that scrub (the `scrub.pending` note stays).
    pub scrub_pending: Option<String>,
}
