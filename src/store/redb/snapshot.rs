//! Metadata snapshots: the stored metadata of many entities as of one transaction, kept as one
//! record under a name (a session's entity id), so that a session's resume reads one record
//! instead of six table rows, a log body and a document per file.
//!
//! A snapshot is a cache of what [`RedbStore::metadata_many`] answers; it never decides anything
//! on its own:
//! - it names the transaction it was read at (`tx`, with that transaction's chain digest) and the
//!   valid time (`now`); a row is kept only when it is the entity's last row in valid time, so it
//!   stays the visible one until a later transaction writes the entity;
//! - a read takes a row only when no transaction after `tx` names its entity (the op bodies of
//!   those transactions are read and checked against their digests), the chain digest of `tx`
//!   is unchanged and the clock is not behind `now`; every other id is read row by row;
//! - the record carries a BLAKE3 checksum of its bytes: a record that fails it, or does not
//!   decode, is ignored (read row by row), and `fsck` reports it and compares every row with
//!   what the store answers as of `tx`.
//!
//! A session's own document (2 MB of canonical JSON for 10 000 files, stored as a delta chain)
//! has a record of its own under [`document_key`], in the same format with one row, served by
//! the same rules ([`RedbStore::document_snapshot`]): every commit writes the session entity,
//! so a record older than the last commit is read past. Rows are written in the order of the
//! ids asked and decoded borrowing the record (their texts are `Cow`s: the same bytes).
//!
//! A store made before the table existed has no snapshots and reads row by row; a resume writes
//! the first one (and the document's record, which stores of the previous build lack).

use std::borrow::Cow;
use std::collections::HashSet;

use bincode::{BorrowDecode, Encode};
use redb::ReadableTable as _;

use super::codec::{self, Omitted};
use super::metadata::{MetaRow, parse_fields};
use super::read::ReadTables;
use super::tables::META_SNAPSHOTS;
use super::{Error, ObjectMeta, RedbStore, Result, StorageResult as _, TxId, ts};
use crate::hash::Hash;
use crate::object::{Fields, FileFields, FilesystemSource, ObjectType, Source};
use crate::store::{DocumentMeta, FileView, FileViewDoc, MetaView, VersionInfo};

/// One entity's stored metadata in a snapshot: its visible version row and document fields.
/// Its texts borrow from the record when read (a resume reads 10 000 rows and keeps only some
/// of their texts); they encode as owned strings do.
#[derive(Clone, Debug, PartialEq, Eq, Encode, BorrowDecode)]
pub(super) struct SnapRow<'a> {
    id: Cow<'a, str>,
    valid_from: i64,
    tx: u64,
    tx_time: i64,
    object_hash: Option<[u8; 32]>,
    restored: bool,
    size: Option<u64>,
    spelling: Option<Cow<'a, str>>,
    content_omitted: Option<Omitted>,
    object_type: Cow<'a, str>,
    /// (filesystem id, canonical path).
    source: Option<(Cow<'a, str>, Cow<'a, str>)>,
    file_hash: Option<[u8; 32]>,
    content_hash: Option<[u8; 32]>,
    fields: SnapFields<'a>,
}

/// A document's fields in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Encode, BorrowDecode)]
enum SnapFields<'a> {
    /// A tombstone: no document.
    Tombstone,
    /// A file's fields (typed: a resume holds thousands, and parsing them was a fifth of it).
    File {
        file_type: Cow<'a, str>,
        char_count: u64,
    },
    /// Any other type's fields, as the stored canonical JSON.
    Json(Cow<'a, str>),
}

/// A snapshot record (see the module notes).
#[derive(Debug, PartialEq, Eq, Encode, BorrowDecode)]
pub(super) struct SnapshotRec<'a> {
    /// The last transaction when the rows were read.
    pub(super) tx: u64,
    /// Its chain digest (zero when the log was empty).
    pub(super) chain: [u8; 32],
    /// The valid time the rows were read at (µs).
    pub(super) now: i64,
    /// The rows, each the last in valid time of its entity.
    pub(super) rows: Vec<SnapRow<'a>>,
}

impl SnapRow<'_> {
    /// The row of `meta` (with its stored fields JSON), or `None` when it is not the entity's last
    /// row in valid time (another row becomes visible later without a transaction).
    pub(super) fn of(meta: &ObjectMeta, json: Option<&str>) -> Option<SnapRow<'static>> {
        if meta.info.valid_to.is_some() {
            return None;
        }
        let fields = match (&meta.document, json) {
            (None, _) => SnapFields::Tombstone,
            (Some(doc), _) if let Fields::File(f) = &doc.fields => SnapFields::File {
                file_type: Cow::Owned(f.file_type.clone()),
                char_count: f.char_count,
            },
            (Some(_), Some(json)) => SnapFields::Json(Cow::Owned(json.to_string())),
            (Some(_), None) => return None,
        };
        let info = &meta.info;
        Some(SnapRow {
            id: Cow::Owned(info.entity.clone()),
            valid_from: info.valid_from.as_micros(),
            tx: info.tx_id.0,
            tx_time: info.tx_time.as_micros(),
            object_hash: info.object_hash.map(|h| h.0),
            restored: info.restored,
            size: info.size,
            spelling: info.spelling.clone().map(Cow::Owned),
            content_omitted: info.content_omitted.map(Omitted::from),
            object_type: Cow::Owned(meta.object_type.as_str().to_string()),
            source: meta.source.as_ref().map(|Source::Filesystem(s)| {
                (
                    Cow::Owned(s.filesystem_id.clone()),
                    Cow::Owned(s.path.clone()),
                )
            }),
            file_hash: meta
                .document
                .as_ref()
                .and_then(|d| d.file_hash)
                .map(|h| h.0),
            content_hash: meta
                .document
                .as_ref()
                .and_then(|d| d.content_hash)
                .map(|h| h.0),
            fields,
        })
    }

    /// This row with texts of its own (to write it into a new record).
    fn owned(&self) -> SnapRow<'static> {
        let own = |text: &Cow<'_, str>| Cow::Owned(text.to_string());
        SnapRow {
            id: own(&self.id),
            spelling: self.spelling.as_ref().map(own),
            object_type: own(&self.object_type),
            source: self.source.as_ref().map(|(fs, path)| (own(fs), own(path))),
            fields: match &self.fields {
                SnapFields::Tombstone => SnapFields::Tombstone,
                SnapFields::File {
                    file_type,
                    char_count,
                } => SnapFields::File {
                    file_type: own(file_type),
                    char_count: *char_count,
                },
                SnapFields::Json(json) => SnapFields::Json(own(json)),
            },
            ..*self
        }
    }

    /// This row as a [`FileView`] borrowing it, when it is a file's version or tombstone with
    /// a filesystem source (`None` for any other row).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when its type is unknown (as [`SnapRow::into_meta`]).
    fn file_view(&self) -> Result<Option<FileView<'_>>> {
        let document = match &self.fields {
            SnapFields::Tombstone => None,
            SnapFields::File {
                file_type,
                char_count,
            } => Some(FileViewDoc {
                file_type,
                char_count: *char_count,
                file_hash: self.file_hash.map(Hash),
            }),
            SnapFields::Json(_) => return Ok(None),
        };
        let Some((filesystem_id, path)) = &self.source else {
            return Ok(None);
        };
        let _: ObjectType = self.object_type.parse()?;
        Ok(Some(FileView {
            entity: &self.id,
            filesystem_id,
            path,
            spelling: self.spelling.as_deref(),
            content_omitted: self.content_omitted.map(Into::into),
            document,
        }))
    }

    /// The metadata this row holds, as [`RedbStore::metadata_many`] answers it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when its type is unknown or its fields do not parse.
    fn into_meta(self) -> Result<ObjectMeta> {
        self.into_meta_row().map(|(meta, _)| meta)
    }

    /// The metadata this row holds with its fields JSON where the row keeps it (`None` for a
    /// tombstone and for a file's typed fields).
    ///
    /// # Errors
    /// As [`SnapRow::into_meta`].
    fn into_meta_row(self) -> Result<MetaRow> {
        let object_type: ObjectType = self.object_type.parse()?;
        let mut kept = None;
        let document = match self.fields {
            SnapFields::Tombstone => None,
            SnapFields::File {
                file_type,
                char_count,
            } => Some(Fields::File(FileFields {
                file_type: file_type.into_owned(),
                char_count,
            })),
            SnapFields::Json(json) => {
                let fields = parse_fields(object_type, &json)?;
                kept = Some(json.into_owned());
                Some(fields)
            }
        }
        .map(|fields| DocumentMeta {
            file_hash: self.file_hash.map(Hash),
            content_hash: self.content_hash.map(Hash),
            fields,
        });
        let meta = ObjectMeta {
            info: VersionInfo {
                entity: self.id.into_owned(),
                valid_from: ts(self.valid_from),
                valid_to: None,
                tx_id: TxId(self.tx),
                tx_time: ts(self.tx_time),
                object_hash: self.object_hash.map(Hash),
                restored: self.restored,
                size: self.size,
                spelling: self.spelling.map(Cow::into_owned),
                content_omitted: self.content_omitted.map(Into::into),
            },
            object_type,
            source: self.source.map(|(filesystem_id, path)| {
                Source::Filesystem(FilesystemSource {
                    filesystem_id: filesystem_id.into_owned(),
                    path: path.into_owned(),
                })
            }),
            document,
        };
        Ok((meta, kept))
    }
}

/// `rec` encoded, with its BLAKE3 checksum after it.
pub(super) fn encode(rec: &SnapshotRec<'_>) -> Result<Vec<u8>> {
    let mut bytes = codec::encode(rec)?;
    let sum = blake3::hash(&bytes);
    bytes.extend_from_slice(sum.as_bytes());
    Ok(bytes)
}

/// The record in `bytes`, checked against its checksum.
///
/// # Errors
/// [`Error::Corrupt`] when the checksum fails or the record does not decode.
pub(super) fn decode(bytes: &[u8]) -> Result<SnapshotRec<'_>> {
    let Some(body_len) = bytes.len().checked_sub(32) else {
        return Err(Error::corrupt(
            "a metadata snapshot is shorter than its checksum",
        ));
    };
    let (body, sum) = bytes.split_at(body_len);
    if blake3::hash(body).as_bytes() != sum {
        return Err(Error::corrupt(
            "a metadata snapshot does not match its checksum",
        ));
    }
    codec::decode_borrowed(body, "metadata snapshot")
}

/// Ops after the snapshot's transaction read at most: one per this many ids asked, and at least
/// [`MIN_OPS`] (past it, reading row by row costs less than finding what they wrote).
const IDS_PER_OP: usize = 4;

/// Ops after the snapshot's transaction read at least (a few session commits).
const MIN_OPS: usize = 256;

/// Ids a read may miss in a snapshot before it makes a new one.
fn refresh_after(ids: usize) -> usize {
    (ids / 16).max(64)
}

impl ReadTables {
    /// The last transaction and its chain digest (0 and zeros for an empty log).
    fn head(&self) -> Result<(u64, [u8; 32])> {
        match self.tx_log.last().db()? {
            Some((k, _)) => {
                let tx = k.value();
                Ok((tx, self.log.header(tx)?.chain))
            }
            None => Ok((0, [0; 32])),
        }
    }

    /// Whether snapshot `s` may serve a read at valid time `now` with log head `head`: read at
    /// or before both, and its transaction's chain digest is still the log's.
    fn snapshot_fits(&self, s: &SnapshotRec, now: i64, head: u64) -> bool {
        let chain_fits = match s.tx {
            0 => s.chain == [0; 32],
            tx => self.log.header(tx).is_ok_and(|h| h.chain == s.chain),
        };
        s.now <= now && s.tx <= head && chain_fits
    }

    /// The entities the transactions after `since` write, or `None` when they hold more than
    /// `limit` ops or an op body is gone (evicted: its entity cannot be told).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a header or an op body fails its checks.
    fn written_since(&self, since: u64, limit: usize) -> Result<Option<HashSet<String>>> {
        let mut out = HashSet::new();
        let mut ops = 0usize;
        for entry in self.tx_log.range(since.saturating_add(1)..).db()? {
            let (k, _) = entry.db()?;
            let tx = k.value();
            let header = self.log.header(tx)?;
            ops += header.digests.len();
            if ops > limit {
                return Ok(None);
            }
            for n in 0..header.digests.len() {
                let n = u32::try_from(n)
                    .map_err(|_| Error::corrupt(format!("tx {tx} lists too many ops")))?;
                let Some(op) = self.log.body(tx, n, &header, None)? else {
                    return Ok(None);
                };
                let entity = match op {
                    codec::OpRec::Write(w) => w.entity,
                    codec::OpRec::Evict { entity } | codec::OpRec::Match { entity, .. } => entity,
                };
                out.insert(entity.0);
            }
        }
        Ok(Some(out))
    }
}

/// What takes the answers of [`RedbStore::metadata_snapshot_each`] one by one.
pub(super) type Each<'a> = dyn FnMut(usize, MetaView<'_>) -> Result<()> + 'a;

/// What [`RedbStore::metadata_snapshot_each`] found.
pub(super) struct Answer {
    /// The metadata of each id asked, in order.
    pub(super) metas: Vec<Option<ObjectMeta>>,
    /// A new record for the name, when the old one was missing, stale or missed many ids.
    pub(super) refresh: Option<SnapshotRec<'static>>,
    /// Ids the snapshot answered.
    pub(super) hits: usize,
    /// Whether the answers went to the caller's `each` (`metas` is then empty).
    pub(super) handed: bool,
}

/// What [`RedbStore::document_snapshot`] found.
pub(super) struct DocAnswer {
    /// The metadata and fields JSON of the id asked, as [`RedbStore::metadata_with_json`]
    /// answers them.
    pub(super) found: Option<MetaRow>,
    /// A new record for [`document_key`], when the old one did not serve the read.
    pub(super) refresh: Option<SnapshotRec<'static>>,
    /// Whether the record served the read.
    pub(super) hit: bool,
}

/// The key of the snapshot of entity `id`'s own document (a session's document, 2 MB for
/// 10 000 files, whose delta chain and hash check a resume then skips). Beside the rows
/// snapshot named `id` in the same table: a session id holds no space, so no session's rows
/// snapshot is named so.
pub(super) fn document_key(id: &str) -> String {
    format!("{id} document")
}

impl RedbStore {
    /// The bytes of the snapshot stored under `name` (decoded with [`decode`], borrowing
    /// them), `None` when there is none (or no table: a store made before snapshots).
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(super) fn snapshot_bytes(
        rtx: &redb::ReadTransaction,
        name: &str,
    ) -> Result<Option<redb::AccessGuard<'static, &'static [u8]>>> {
        let table = match rtx.open_table(META_SNAPSHOTS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(Error::storage("opening meta_snapshots", e)),
        };
        table.get(name).db()
    }

    /// [`RedbStore::metadata_snapshot_each`] without `each`: the answers collected.
    ///
    /// # Errors
    /// As [`RedbStore::metadata_snapshot_each`].
    #[cfg(test)]
    pub(super) fn metadata_snapshot(&self, name: &str, ids: &[&str]) -> Result<Answer> {
        self.metadata_snapshot_each(name, ids, None)
    }

    /// [`RedbStore::metadata_many`] of `ids` as of the latest transaction, taking what it can
    /// from the snapshot named `name` (see the module notes); the answers are the same. When the
    /// snapshot was missing, damaged, stale or missed many ids, the answer's `refresh` holds a
    /// new one for [`RedbStore::put_snapshot`]. With `each`, when the snapshot serves every id
    /// (lined up, nothing written since), the answers are handed to it instead: files borrowed
    /// from the record ([`MetaView::File`]), nothing collected; the answer's `metas` is then
    /// empty and its `handed` set.
    ///
    /// # Errors
    /// As [`RedbStore::metadata_many`]; `each`'s errors. A damaged snapshot is not an error: it
    /// is read past.
    pub(super) fn metadata_snapshot_each(
        &self,
        name: &str,
        ids: &[&str],
        each: Option<&mut Each<'_>>,
    ) -> Result<Answer> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let now = r.now()?;
        let (head, chain) = r.head()?;
        let bytes = Self::snapshot_bytes(&rtx, name).ok().flatten();
        let snapshot = bytes
            .as_ref()
            .and_then(|bytes| decode(bytes.value()).ok())
            .filter(|s| r.snapshot_fits(s, now, head));
        let usable = match snapshot {
            Some(s) => r
                .written_since(s.tx, (ids.len() / IDS_PER_OP).max(MIN_OPS))?
                .map(|written| (s.rows, written)),
            None => None,
        };
        drop(r);
        let (rows, written) = usable.unwrap_or_default();
        let served = |row: &SnapRow| !written.contains(row.id.as_ref());
        // `slots[n]`: the row that serves `ids[n]`. A refresh writes the rows in the order of
        // the ids asked, so they mostly line up one for one and need no map.
        let lined_up =
            rows.len() == ids.len() && rows.iter().zip(ids).all(|(row, id)| row.id == *id);
        if lined_up && !ids.is_empty() && written.is_empty() {
            // Every row serves its id (nothing was written since): the answer is the rows in
            // order, with no slot vector between them, nothing missed and nothing to refresh.
            let hits = rows.len();
            let handed = each.is_some();
            let mut metas = Vec::new();
            if let Some(each) = each {
                for (n, row) in rows.into_iter().enumerate() {
                    match row.file_view()? {
                        Some(view) => each(n, MetaView::File(view))?,
                        None => each(n, MetaView::Whole(Box::new(row.into_meta()?)))?,
                    }
                }
            } else {
                // Sized first: a collect through `Result` would grow it by doubling, copying
                // megabytes of answers.
                metas.reserve_exact(rows.len());
                for row in rows {
                    metas.push(Some(row.into_meta()?));
                }
            }
            return Ok(Answer {
                hits,
                metas,
                refresh: None,
                handed,
            });
        }
        let slots: Vec<Option<SnapRow>> = if lined_up {
            rows.into_iter()
                .map(|row| served(&row).then_some(row))
                .collect()
        } else {
            let mut at: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
            at.reserve(rows.len());
            for (n, row) in rows.iter().enumerate() {
                if served(row) {
                    at.insert(row.id.as_ref(), n);
                }
            }
            // Each row serves the first id that names it.
            let mut taken = vec![false; rows.len()];
            let positions: Vec<Option<usize>> = ids
                .iter()
                .map(|id| {
                    let n = *at.get(id)?;
                    (!std::mem::replace(&mut taken[n], true)).then_some(n)
                })
                .collect();
            drop(at);
            let mut rows: Vec<Option<SnapRow>> = rows.into_iter().map(Some).collect();
            positions
                .into_iter()
                .map(|n| n.and_then(|n| rows.get_mut(n).and_then(Option::take)))
                .collect()
        };
        let hits = slots.iter().flatten().count();
        let missed: Vec<usize> = (0..ids.len()).filter(|&n| slots[n].is_none()).collect();
        let refresh = hits == 0 && !ids.is_empty() || missed.len() > refresh_after(ids.len());
        let mut fresh: Vec<Option<SnapRow>> = Vec::new();
        if refresh {
            fresh.resize_with(ids.len(), || None);
        }
        let mut metas: Vec<Option<ObjectMeta>> = Vec::with_capacity(ids.len());
        for (n, slot) in slots.into_iter().enumerate() {
            match slot {
                Some(row) => {
                    if let Some(kept) = fresh.get_mut(n) {
                        *kept = Some(row.owned());
                    }
                    metas.push(Some(row.into_meta()?));
                }
                None => metas.push(None),
            }
        }
        let missed_ids: Vec<&str> = missed.iter().map(|&n| ids[n]).collect();
        let read = self.read_rows(&rtx, &missed_ids, now, u64::MAX)?;
        for (n, found) in missed.into_iter().zip(read) {
            if let Some((meta, json)) = found {
                if let Some(kept) = fresh.get_mut(n) {
                    *kept = SnapRow::of(&meta, json.as_deref());
                }
                metas[n] = Some(meta);
            }
        }
        // In the order of the ids asked (see `lined_up`).
        let fresh: Vec<SnapRow> = fresh.into_iter().flatten().collect();
        Ok(Answer {
            metas,
            handed: false,
            refresh: refresh.then_some(SnapshotRec {
                tx: head,
                chain,
                now,
                rows: fresh,
            }),
            hits,
        })
    }

    /// [`RedbStore::metadata_with_json`] of `id` as of the latest transaction, taken from the
    /// snapshot of its document (the record under [`document_key`]) when that serves it: the
    /// record fits the log (as a rows snapshot must), no transaction after it writes `id`, and
    /// its row keeps the fields JSON. The answer is the same; `refresh` holds a new record when
    /// the old one did not serve and the current row can be kept (see [`SnapRow::of`]).
    ///
    /// # Errors
    /// As [`RedbStore::metadata_with_json`]. A damaged record is not an error: it is read past.
    pub(super) fn document_snapshot(&self, id: &str) -> Result<DocAnswer> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let now = r.now()?;
        let (head, chain) = r.head()?;
        let bytes = Self::snapshot_bytes(&rtx, &document_key(id)).ok().flatten();
        let snapshot = bytes
            .as_ref()
            .and_then(|bytes| decode(bytes.value()).ok())
            .filter(|s| r.snapshot_fits(s, now, head));
        if let Some(s) = snapshot
            && let Some(written) = r.written_since(s.tx, MIN_OPS)?
            && !written.contains(id)
            && let Some(row) = s.rows.into_iter().find(|row| row.id == id)
            && !matches!(row.fields, SnapFields::File { .. })
        {
            return Ok(DocAnswer {
                found: Some(row.into_meta_row()?),
                refresh: None,
                hit: true,
            });
        }
        let found = r.meta_at(id, now, u64::MAX)?;
        let refresh = found
            .as_ref()
            .and_then(|(meta, json)| SnapRow::of(meta, json.as_deref()))
            .filter(|row| !matches!(row.fields, SnapFields::File { .. }))
            .map(|row| SnapshotRec {
                tx: head,
                chain,
                now,
                rows: vec![row],
            });
        Ok(DocAnswer {
            found,
            refresh,
            hit: false,
        })
    }

    /// Stores snapshot `rec` under `name` (in its own write transaction, no store transaction).
    /// Not on a read-only or damaged store, nor on a deferred one that has not written yet (it
    /// would open the file to write): a snapshot is only a cache.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(super) fn put_snapshot(&self, name: &str, rec: &SnapshotRec<'_>) -> Result<()> {
        if self.reads_only_now() || self.damaged.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let bytes = encode(rec)?;
        let wtx = self.begin_write()?;
        {
            let mut table = wtx.open_table(META_SNAPSHOTS).db()?;
            table.insert(name, bytes.as_slice()).db()?;
        }
        wtx.commit().db()?;
        Ok(())
    }
}

/// `fsck`'s check of every metadata snapshot: its checksum and decoding, its transaction's
/// chain digest, and each row a read would serve (its entity not written since) against what
/// the store answers for its entity as of that transaction at that valid time.
///
/// # Errors
/// [`Error::Storage`] when redb fails to iterate the table.
pub(super) fn check_all(rtx: &redb::ReadTransaction) -> Result<Vec<crate::store::Finding>> {
    use crate::store::answers::finding;
    let table = match rtx.open_table(META_SNAPSHOTS) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(Error::storage("opening meta_snapshots", e)),
    };
    let r = ReadTables::open(rtx)?;
    let mut out = Vec::new();
    for entry in table.iter().db()? {
        let (key, value) = entry.db()?;
        let name = key.value().to_string();
        let problem = |detail: String| finding("meta_snapshot", name.clone(), detail);
        let rec = match decode(value.value()) {
            Ok(rec) => rec,
            Err(e) => {
                out.push(problem(e.to_string()));
                continue;
            }
        };
        let head = r.head()?.0;
        if !r.snapshot_fits(&rec, i64::MAX, head) {
            out.push(problem(format!(
                "it was read at tx {}, whose log record is not the one it names",
                rec.tx
            )));
            continue;
        }
        // Rows of entities written since are never served (an eviction since may have removed
        // what they summarise): only the others are compared.
        let written = match r.written_since(rec.tx, usize::MAX) {
            Ok(Some(written)) => written,
            Ok(None) => continue,
            Err(e) => {
                out.push(problem(format!(
                    "the log after tx {} cannot be read: {e}",
                    rec.tx
                )));
                continue;
            }
        };
        for row in rec
            .rows
            .iter()
            .filter(|row| !written.contains(row.id.as_ref()))
        {
            let stored = match r.meta_at(&row.id, rec.now, rec.tx) {
                Ok(stored) => stored,
                Err(e) => {
                    out.push(problem(format!("the store cannot read {}: {e}", row.id)));
                    continue;
                }
            };
            let agrees = stored
                .as_ref()
                .and_then(|(meta, json)| SnapRow::of(meta, json.as_deref()))
                .is_some_and(|current| current == *row);
            if !agrees {
                out.push(crate::store::Finding {
                    entity: Some(row.id.to_string()),
                    ..problem(format!(
                        "its row of {} is not what the store holds as of tx {}",
                        row.id, rec.tx
                    ))
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Object, ToolStatus, ToolcallFields};
    use crate::store::{Op, Origin, Timestamp};

    const NAME: &str = "session:s";

    fn file(k: usize, text: &str) -> Result<Object> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: format!("/p/{k}.rs"),
            },
            text.into(),
        )
    }

    fn call(k: usize, text: &str) -> Result<Object> {
        Object::toolcall(
            &format!("toolcall:{k}"),
            ToolcallFields {
                tool: "grep".into(),
                args: serde_json::Map::new(),
                args_display: None,
                status: ToolStatus::Ok,
                chat_ref: "chat:s".into(),
                file_refs: None,
            },
            text.into(),
        )
    }

    /// The ids the checks ask for: every file and call the tests write, and one never written.
    fn ids() -> Result<Vec<String>> {
        let mut ids: Vec<String> = (0..4)
            .map(|k| Ok(file(k, "")?.id().to_string()))
            .collect::<Result<_>>()?;
        ids.extend((0..2).map(|k| format!("toolcall:{k}")));
        ids.push("toolcall:never".into());
        Ok(ids)
    }

    /// [`RedbStore::metadata_snapshot_each`] of `ids` answers as a read row by row, handed over
    /// one by one (a file's borrowed fields too) or collected; returns whether it handed them.
    fn answers_handed(store: &RedbStore, ids: &[&str]) -> Result<bool> {
        let rows = store.metadata_many(ids, None)?;
        let mut handed = vec![false; ids.len()];
        let each = store.metadata_snapshot_each(
            NAME,
            ids,
            Some(&mut |n, view| {
                let row = rows[n]
                    .as_ref()
                    .ok_or_else(|| Error::invariant("an answer for a missing id"))?;
                handed[n] = true;
                match view {
                    MetaView::Whole(meta) => assert_eq!(*meta, *row),
                    MetaView::File(file) => {
                        let doc = row.document.as_ref();
                        let fields = doc.map(|d| match &d.fields {
                            Fields::File(f) => Some((f.file_type.as_str(), f.char_count)),
                            _ => None,
                        });
                        assert_eq!(
                            (
                                file.entity,
                                Some((file.filesystem_id, file.path)),
                                file.spelling,
                                file.content_omitted,
                                file.document
                                    .map(|d| (Some((d.file_type, d.char_count)), d.file_hash)),
                            ),
                            (
                                row.info.entity.as_str(),
                                row.source.as_ref().map(|Source::Filesystem(s)| (
                                    s.filesystem_id.as_str(),
                                    s.path.as_str()
                                )),
                                row.info.spelling.as_deref(),
                                row.info.content_omitted,
                                fields.map(|f| (f, doc.and_then(|d| d.file_hash))),
                            )
                        );
                    }
                }
                Ok(())
            }),
        )?;
        let expected: Vec<bool> = rows.iter().map(Option::is_some).collect();
        if each.handed {
            assert_eq!(handed, expected);
        } else {
            assert_eq!(each.metas, rows);
        }
        Ok(each.handed)
    }

    /// The snapshot read answers what the row-by-row read does; returns its hits.
    fn same_answers(store: &RedbStore, refresh: bool) -> Result<usize> {
        let ids = ids()?;
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let answer = store.metadata_snapshot(NAME, &ids)?;
        let rows = store.metadata_many(&ids, None)?;
        assert_eq!(answer.metas, rows);
        answers_handed(store, &ids)?;
        if refresh && let Some(rec) = &answer.refresh {
            store.put_snapshot(NAME, rec)?;
        }
        // Each id's own document read through its snapshot answers as a read row by row.
        for id in &ids {
            let doc = store.document_snapshot(id)?;
            assert_eq!(doc.found, store.metadata_with_json(id, None)?, "{id}");
            if refresh && let Some(rec) = &doc.refresh {
                store.put_snapshot(&document_key(id), rec)?;
            }
        }
        Ok(answer.hits)
    }

    /// Whether the document snapshot of `id` served the read (no new record was asked for).
    fn document_served(store: &RedbStore, id: &str) -> Result<bool> {
        let doc = store.document_snapshot(id)?;
        assert_eq!(doc.found, store.metadata_with_json(id, None)?, "{id}");
        if let Some(rec) = &doc.refresh {
            store.put_snapshot(&document_key(id), rec)?;
        }
        Ok(doc.hit)
    }

    fn stored_bytes(store: &RedbStore) -> Result<Vec<u8>> {
        stored_bytes_at(store, NAME)
    }

    fn stored_bytes_at(store: &RedbStore, key: &str) -> Result<Vec<u8>> {
        let rtx = store.read()?;
        let table = rtx.open_table(META_SNAPSHOTS).db()?;
        let bytes = table.get(key).db()?.ok_or_else(|| Error::not_found(key))?;
        Ok(bytes.value().to_vec())
    }

    fn store_bytes(store: &RedbStore, bytes: &[u8]) -> Result<()> {
        store_bytes_at(store, NAME, bytes)
    }

    fn store_bytes_at(store: &RedbStore, key: &str, bytes: &[u8]) -> Result<()> {
        let wtx = store.begin_write()?;
        wtx.open_table(META_SNAPSHOTS)
            .db()?
            .insert(key, bytes)
            .db()?;
        wtx.commit().db()?;
        Ok(())
    }

    fn snapshot_findings(store: &RedbStore) -> Vec<crate::store::Finding> {
        store
            .fsck()
            .into_iter()
            .filter(|f| f.kind == "meta_snapshot")
            .collect()
    }

    #[derive(Clone, Debug)]
    enum Step {
        Put(usize, u8),
        PutAt(usize, u8, i64, Option<i64>),
        Call(usize, u8),
        Delete(usize),
        DeleteRange(usize, i64, i64),
        Evict(usize),
        Refresh,
        Check,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let k = 0..4usize;
        // Valid times an hour or more from now, so that the clock's progress during a case
        // never moves one across `now`.
        let hours = -3i64..4;
        prop_oneof![
            (k.clone(), any::<u8>()).prop_map(|(k, t)| Step::Put(k, t)),
            (
                k.clone(),
                any::<u8>(),
                hours.clone(),
                proptest::option::of(1i64..3)
            )
                .prop_map(|(k, t, from, len)| Step::PutAt(
                    k,
                    t,
                    from,
                    len.map(|l| from + l)
                )),
            (0..2usize, any::<u8>()).prop_map(|(k, t)| Step::Call(k, t)),
            k.clone().prop_map(Step::Delete),
            (k.clone(), hours, 1i64..3).prop_map(|(k, from, len)| Step::DeleteRange(
                k,
                from,
                from + len
            )),
            k.prop_map(Step::Evict),
            Just(Step::Refresh),
            Just(Step::Check),
        ]
    }

    fn run(store: &RedbStore, step: &Step) -> Result<()> {
        let at = |hours: i64| {
            Timestamp::saturating_from_micros(Timestamp::now().as_micros() + hours * 3_600_000_000)
        };
        let op = match step {
            Step::Put(k, t) => Op::put(file(*k, &format!("v{t}"))?),
            Step::PutAt(k, t, from, to) => {
                Op::put_at(file(*k, &format!("at{t}"))?, at(*from), to.map(at))
            }
            Step::Call(k, t) => Op::put(call(*k, &format!("out{t}"))?),
            Step::Delete(k) => Op::delete(file(*k, "")?.id()),
            Step::DeleteRange(k, from, to) => Op::Delete {
                entity: file(*k, "")?.id().to_string(),
                valid_from: Some(at(*from)),
                valid_to: Some(at(*to)),
            },
            Step::Evict(k) => Op::Evict {
                entity: file(*k, "")?.id().to_string(),
            },
            Step::Refresh => return same_answers(store, true).map(drop),
            Step::Check => return same_answers(store, false).map(drop),
        };
        // A write the store refuses (a delete of an unknown entity) changes nothing.
        let _ = store.transact(vec![op], Origin::Cli);
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("STRATA_SNAPSHOT_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(48)
        ))]
        /// Whatever the history (puts now, in the past and the future, ranged puts and deletes,
        /// evictions) and wherever snapshots were taken, a read through the snapshot answers what
        /// a read row by row does, and fsck finds every snapshot sound.
        #[test]
        fn snapshot_reads_answer_as_row_by_row(steps in proptest::collection::vec(step(), 1..24)) {
            let store = RedbStore::in_memory()?;
            for step in &steps {
                run(&store, step)?;
            }
            same_answers(&store, true)?;
            same_answers(&store, false)?;
            proptest::prop_assert_eq!(snapshot_findings(&store), vec![]);
        }
    }

    #[test]
    fn a_fresh_snapshot_serves_every_stable_row_and_a_later_write_only_its_entity() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let ops = (0..4).map(|k| Ok(Op::put(file(k, "a")?)));
        store.transact(ops.collect::<Result<_>>()?, Origin::Cli)?;
        store.transact(
            vec![Op::put(call(0, "x")?), Op::put(call(1, "y")?)],
            Origin::Cli,
        )?;
        assert_eq!(same_answers(&store, true)?, 0, "no snapshot yet");
        assert_eq!(same_answers(&store, false)?, 6, "four files, two calls");
        store.transact(vec![Op::put(file(2, "b")?)], Origin::Cli)?;
        assert_eq!(
            same_answers(&store, false)?,
            5,
            "the file written since is read"
        );
        assert_eq!(snapshot_findings(&store), vec![]);
        Ok(())
    }

    /// Many ids: in the order the snapshot was written (lined up), in another order (found by
    /// id), with an entity written since, with an unknown id among them; each time what a read
    /// row by row answers.
    #[test]
    fn many_rows_answer_as_row_by_row_in_any_order() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let n = 2085;
        let ops = (0..n).map(|k| Ok(Op::put(file(k, &format!("{k}"))?)));
        store.transact(ops.collect::<Result<_>>()?, Origin::Cli)?;
        let mut ids: Vec<String> = (0..n)
            .map(|k| Ok(file(k, "")?.id().to_string()))
            .collect::<Result<_>>()?;
        let check = |ids: &[String]| -> Result<Answer> {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let answer = store.metadata_snapshot(NAME, &ids)?;
            assert_eq!(answer.metas, store.metadata_many(&ids, None)?);
            Ok(answer)
        };
        let first = check(&ids)?;
        assert_eq!(first.hits, 0);
        store.put_snapshot(
            NAME,
            first
                .refresh
                .as_ref()
                .ok_or_else(|| Error::invariant("no refresh"))?,
        )?;
        assert_eq!(check(&ids)?.hits, n, "lined up");
        let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
        assert!(answers_handed(&store, &asked)?, "lined up: handed over");
        store.transact(vec![Op::put(file(n / 2, "changed")?)], Origin::Cli)?;
        assert_eq!(check(&ids)?.hits, n - 1, "one written since");
        let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
        assert!(
            !answers_handed(&store, &asked)?,
            "one written since: collected"
        );
        ids.reverse();
        assert_eq!(check(&ids)?.hits, n - 1, "found by id");
        ids.insert(n / 3, "toolcall:never".into());
        assert_eq!(check(&ids)?.hits, n - 1, "an unknown id among them");
        Ok(())
    }

    #[test]
    fn a_document_snapshot_serves_until_its_entity_is_written() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.transact(
            vec![Op::put(call(0, "x")?), Op::put(file(0, "a")?)],
            Origin::Cli,
        )?;
        // A store without the record (one made before it) reads the row and writes one.
        assert!(!document_served(&store, "toolcall:0")?);
        assert!(document_served(&store, "toolcall:0")?);
        // Another entity written since: still served.
        store.transact(vec![Op::put(file(1, "b")?)], Origin::Cli)?;
        assert!(document_served(&store, "toolcall:0")?);
        // The entity written since: not trusted, read again (a new version).
        store.transact(vec![Op::put(call(0, "y")?)], Origin::Cli)?;
        assert!(!document_served(&store, "toolcall:0")?);
        assert!(document_served(&store, "toolcall:0")?);
        // Deleted since: the tombstone is read, and kept in turn.
        store.transact(vec![Op::delete("toolcall:0")], Origin::Cli)?;
        assert!(!document_served(&store, "toolcall:0")?);
        assert!(document_served(&store, "toolcall:0")?);
        // A file's fields are kept typed, without their JSON: never a document record.
        let file_id = file(0, "")?.id().to_string();
        assert!(!document_served(&store, &file_id)?);
        assert!(!document_served(&store, &file_id)?);
        assert!(!document_served(&store, "toolcall:never")?);
        assert_eq!(snapshot_findings(&store), vec![]);
        Ok(())
    }

    #[test]
    fn a_damaged_or_false_document_snapshot_is_read_past_and_named_by_fsck() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.transact(vec![Op::put(call(0, "x")?)], Origin::Cli)?;
        assert!(!document_served(&store, "toolcall:0")?);
        let key = document_key("toolcall:0");
        let good = stored_bytes_at(&store, &key)?;
        let put = |bytes: &[u8]| store_bytes_at(&store, &key, bytes);
        let mut bad = good.clone();
        bad[good.len() / 2] ^= 0x10;
        put(&bad)?;
        assert!(!document_served(&store, "toolcall:0")?, "a damaged record");
        put(&bad)?;
        let found = snapshot_findings(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].detail.contains("checksum"), "{found:?}");
        // A record whose checksum holds but whose row the store does not hold.
        let mut rec = decode(&good)?;
        rec.rows[0].size = Some(12345);
        put(&encode(&rec)?)?;
        let found = snapshot_findings(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].entity.as_deref(), Some("toolcall:0"));
        Ok(())
    }

    #[test]
    fn a_snapshot_after_an_eviction_is_read_past() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.transact(
            vec![Op::put(file(0, "a")?), Op::put(file(1, "a")?)],
            Origin::Cli,
        )?;
        same_answers(&store, true)?;
        // The eviction names its entity; the bodies it removes are older than the snapshot.
        store.evict(file(0, "")?.id(), Origin::Cli)?;
        assert_eq!(same_answers(&store, false)?, 1);
        store.transact(vec![Op::put(file(1, "b")?)], Origin::Cli)?;
        same_answers(&store, true)?;
        store.evict(file(1, "")?.id(), Origin::Cli)?;
        // The body of the put after the snapshot is gone: nothing tells its entity, so every id
        // is read row by row.
        assert_eq!(same_answers(&store, false)?, 0);
        Ok(())
    }

    #[test]
    fn a_damaged_snapshot_is_read_past_and_named_by_fsck() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.transact(
            vec![Op::put(file(0, "a")?), Op::put(call(0, "x")?)],
            Origin::Cli,
        )?;
        same_answers(&store, true)?;
        let good = stored_bytes(&store)?;
        for at in [0, 1, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            store_bytes(&store, &bad)?;
            assert_eq!(same_answers(&store, false)?, 0, "byte {at}");
            let found = snapshot_findings(&store);
            assert_eq!(found.len(), 1, "byte {at}: {found:?}");
            assert!(found[0].detail.contains("checksum"), "{found:?}");
        }
        store_bytes(&store, &good[..10])?;
        assert_eq!(same_answers(&store, false)?, 0);
        assert_eq!(snapshot_findings(&store).len(), 1);
        // A record whose checksum holds but whose row the store does not hold: fsck names the
        // entity. (A read would serve it: only damage the checksum catches is read past.)
        let mut rec = decode(&good)?;
        rec.rows[0].size = Some(12345);
        store_bytes(&store, &encode(&rec)?)?;
        let found = snapshot_findings(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].entity.as_deref(), Some(rec.rows[0].id.as_ref()));
        // fsck --repair's rebuild empties the table; the next read is row by row again.
        store.fsck_rebuild()?;
        assert_eq!(snapshot_findings(&store), vec![]);
        assert_eq!(same_answers(&store, false)?, 0);
        Ok(())
    }

    #[test]
    fn a_snapshot_of_a_rewritten_log_is_read_past() -> Result<()> {
        let store = RedbStore::in_memory()?;
        store.transact(vec![Op::put(file(0, "a")?)], Origin::Cli)?;
        same_answers(&store, true)?;
        let bytes = stored_bytes(&store)?;
        let mut rec = decode(&bytes)?;
        rec.chain[0] ^= 1;
        store_bytes(&store, &encode(&rec)?)?;
        assert_eq!(same_answers(&store, false)?, 0);
        assert_eq!(snapshot_findings(&store).len(), 1);
        // Read at a later valid time than now (a clock set back since): read past.
        rec.chain[0] ^= 1;
        rec.now = i64::MAX;
        store_bytes(&store, &encode(&rec)?)?;
        assert_eq!(same_answers(&store, false)?, 0);
        Ok(())
    }
}
