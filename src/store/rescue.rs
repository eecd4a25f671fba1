//! What the rescue operations answer: [`SalvageReport`] (a damaged store copied into a new one,
//! and what was lost) and [`BackupReport`] (a verified copy of a live store). Engine-neutral.

use super::answers::Finding;
use super::time::TxId;
use crate::object::Object;

/// One thing a salvage could not carry into the new store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// What was lost: `tx` (a whole log record), `op` (one op of a transaction), `document`,
    /// `content`, `table` (a table that could not be read at all).
    pub kind: &'static str,
    /// The transaction it belonged to, when known.
    pub tx: Option<u64>,
    /// The entity it affects, when known.
    pub entity: Option<String>,
    /// The path of that entity, when known.
    pub path: Option<String>,
    /// What was wrong.
    pub detail: String,
}

/// What a salvage made and what it lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// The length the damaged file was read at, when it was shorter (truncated): (its length,
    /// the length read).
    pub padded: Option<(u64, u64)>,
    /// Transactions in the new store (the old ids, lost ones kept as empty records).
    pub txs: u64,
    /// Ops carried over.
    pub ops: u64,
    /// Entities in the new store.
    pub entities: u64,
    /// Contents carried over.
    pub contents: u64,
    /// Contents and documents made again from the files that hold them (hashes, hex).
    pub restored: Vec<String>,
    /// Transactions whose record was lost (kept as empty records).
    pub txs_lost: Vec<u64>,
    /// Ops lost (in transactions whose record survived).
    pub ops_lost: u64,
    /// Entities the damaged store held that the new one lacks: (entity id, path).
    pub entities_lost: Vec<(String, Option<String>)>,
    /// Contents lost (hashes, hex).
    pub contents_lost: Vec<String>,
    /// Every loss, in log order.
    pub losses: Vec<Loss>,
    /// The new store's chain head.
    pub head: Option<(TxId, [u8; 32])>,
    /// What fsck finds in the new store (nothing, unless salvage itself went wrong).
    pub findings: Vec<Finding>,
}

/// What a backup made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// The copy's chain head: the last transaction it holds (the store as of that transaction).
    pub head: Option<(TxId, [u8; 32])>,
    /// The bytes of the copy's store file.
    pub bytes: u64,
    /// What fsck finds in the copy (nothing when the store was sound).
    pub findings: Vec<Finding>,
}

/// What salvage asks when a document is lost: the object (and the raw bytes kept beside it) that
/// the file at a path makes now, if the file is still there. Salvage keeps it only when its
/// object hash is the lost document's: content addressing makes that safe.
pub type Rebuild<'a> = &'a dyn Fn(&str) -> Option<(Object, Option<Vec<u8>>)>;
