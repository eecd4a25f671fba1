//! What every read checks before it serves something: a document against its object hash, a
//! content against its hash, a version row against the op body that wrote it (and that body
//! against its digest in the log), a `paths` row against its entity's source, and a missing op
//! body against the record of evictions.
//!
//! These checks cost a few lookups and a hash per row served; `fsck` checks every table as a
//! whole (`fsck.rs`).

use super::*;
use redb::ReadOnlyTable;

use super::codec::{DocRec, OpRec};
use crate::hash::{Hash, sha256};
use crate::object::composite_hash;

/// The log tables a read checks rows against.
pub(crate) struct LogTables {
    pub(super) tx_log: ReadOnlyTable<u64, &'static [u8]>,
    pub(super) tx_ops: ReadOnlyTable<(u64, u32), &'static [u8]>,
    /// `None` in a store made before `evicted_ops` and not written since.
    pub(super) evicted: Option<ReadOnlyTable<(u64, u32), u64>>,
    /// The first transaction whose evictions `evicted` records.
    pub(super) since: u64,
    /// Headers decoded so far in this read (a header lists every op's digest, so rows of one
    /// large transaction would otherwise decode the same header once each).
    headers: std::cell::RefCell<HeaderCache>,
}

/// Decoded log headers by tx id, holding at most [`HeaderCache::MAX_DIGESTS`] digests in all.
#[derive(Default)]
struct HeaderCache {
    headers: HashMap<u64, std::rc::Rc<TxHeaderRec>>,
    digests: usize,
}

impl HeaderCache {
    /// Digests held at most (32 bytes each): past it the cache starts again empty.
    const MAX_DIGESTS: usize = 1 << 20;
}

impl LogTables {
    pub(super) fn open(rtx: &ReadTransaction) -> Result<Self> {
        let meta = rtx.open_table(META).db()?;
        let evicted = match rtx.open_table(EVICTED_OPS) {
            Ok(table) => Some(table),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(Error::storage("opening evicted_ops", e)),
        };
        let since = match meta.get(EVICTIONS_SINCE).db()? {
            Some(_) => read_counter(&meta, EVICTIONS_SINCE)?,
            None => u64::MAX,
        };
        Ok(LogTables {
            tx_log: rtx.open_table(TX_LOG).db()?,
            tx_ops: rtx.open_table(TX_OPS).db()?,
            evicted,
            since,
            headers: std::cell::RefCell::default(),
        })
    }

    /// Whether the missing body of op `n` of transaction `tx` was evicted (rather than lost):
    /// recorded in `evicted_ops`, or older than the record.
    pub(super) fn body_evicted(&self, tx: u64, n: u32) -> Result<bool> {
        if tx < self.since {
            return Ok(true);
        }
        match &self.evicted {
            Some(table) => Ok(table.get((tx, n)).db()?.is_some()),
            None => Ok(true),
        }
    }

    /// The transaction that evicted the body of op `n` of transaction `tx`, when recorded.
    pub(super) fn evicted_by(&self, tx: u64, n: u32) -> Result<Option<u64>> {
        match &self.evicted {
            Some(table) => Ok(table.get((tx, n)).db()?.map(|v| v.value())),
            None => Ok(None),
        }
    }

    /// The header of transaction `tx` (decoded once per read).
    pub(super) fn header(&self, tx: u64) -> Result<std::rc::Rc<TxHeaderRec>> {
        if let Some(header) = self.headers.borrow().headers.get(&tx) {
            return Ok(std::rc::Rc::clone(header));
        }
        let bytes = self.tx_log.get(tx).db()?.ok_or_else(|| {
            Error::corrupt(format!(
                "the log has no record of tx {tx}, which the store's tables refer to; run \
                 `strata fsck`"
            ))
        })?;
        let header = std::rc::Rc::new(codec::decode_header(
            bytes.value(),
            &format!("header of tx {tx}"),
        )?);
        let mut cache = self.headers.borrow_mut();
        if cache.digests + header.digests.len() > HeaderCache::MAX_DIGESTS {
            *cache = HeaderCache::default();
        }
        cache.digests += header.digests.len();
        cache.headers.insert(tx, std::rc::Rc::clone(&header));
        Ok(header)
    }

    /// The body of op `n` of transaction `tx` (header `header`), checked against its digest;
    /// `None` when it was evicted. `expected`: the entity the caller expects it to write (see
    /// [`codec::decode_op_of`]; the digest check covers it).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when it is missing without an eviction, does not decode or does not
    /// hash to its digest.
    pub(super) fn body(
        &self,
        tx: u64,
        n: u32,
        header: &TxHeaderRec,
        expected: Option<&str>,
    ) -> Result<Option<OpRec>> {
        let Some(digest) = header.digests.get(n as usize) else {
            return Err(Error::corrupt(format!(
                "op {n} of tx {tx} is past the {} ops its log record lists; run `strata fsck`",
                header.digests.len()
            )));
        };
        let Some(bytes) = self.tx_ops.get((tx, n)).db()? else {
            if self.body_evicted(tx, n)? {
                return Ok(None);
            }
            return Err(Error::corrupt(format!(
                "op {n} of tx {tx} is missing from the log and no eviction removed it; run \
                 `strata fsck`"
            )));
        };
        // The label is built only on failure: this runs once per row a resume reads.
        let op = codec::decode_op_of(
            bytes.value(),
            header.tx_time,
            &header.filesystems,
            "op",
            expected,
        )
        .map_err(|e| match e {
            Error::Corrupt { what } => {
                Error::corrupt(what.replacen("op", &format!("op {n} of tx {tx}"), 1))
            }
            other => other,
        })?;
        if log::op_digest(&op)? != *digest {
            return Err(Error::corrupt(format!(
                "op {n} of tx {tx} does not hash to the digest its log record holds; run \
                 `strata fsck`"
            )));
        }
        Ok(Some(op))
    }

    /// Checks version row `row` of entity `id`: its transaction's time, and the op body that
    /// wrote it (present, hashing to its digest, writing this entity with this row's values).
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the row when any of that fails.
    pub(super) fn check_row(&self, id: &str, row: &temporal::Row) -> Result<()> {
        let header = self.header(row.tx)?;
        let op = self.body(row.tx, row.rec.op, &header, Some(id))?;
        crate::store::rule::check_row(id, row, header.tx_time, op.as_ref())
    }
}

/// Checks a document record read under object hash `hash`: its fields, file hash and content
/// hash must hash to it (the fields are stored as the canonical JSON that was hashed).
///
/// # Errors
/// [`Error::Corrupt`] when they do not.
pub(crate) fn check_doc(hash: &[u8; 32], rec: &DocRec) -> Result<()> {
    let metadata = sha256(rec.fields.as_bytes());
    let actual = composite_hash(
        rec.file_hash.map(Hash).as_ref(),
        rec.content_hash.map(Hash).as_ref(),
        &metadata,
    )?;
    if actual.0 != *hash {
        return Err(Error::corrupt(format!(
            "document {} does not hash to its object hash (it makes {actual}); run `strata fsck`",
            hex::encode(hash)
        )));
    }
    Ok(())
}

/// Checks the bytes read for content `hash`.
///
/// # Errors
/// [`Error::Corrupt`] when they do not hash to it.
pub(crate) fn check_content(hash: &[u8; 32], bytes: &[u8]) -> Result<()> {
    let actual = sha256(bytes);
    if actual.0 != *hash {
        return Err(Error::corrupt(format!(
            "content {} does not hash to its name (its {} bytes make {actual}); run `strata \
             fsck`",
            hex::encode(hash),
            bytes.len()
        )));
    }
    Ok(())
}

/// Checks that the `paths` row (`filesystem_id`, `path`) → entity `id` (entity row `rec`)
/// agrees with the entity's own source.
///
/// # Errors
/// [`Error::Corrupt`] when the entity has another source or none.
pub(crate) fn check_path_row(
    filesystem_id: &str,
    path: &str,
    id: &str,
    rec: Option<&EntityRec>,
) -> Result<()> {
    let agrees = rec
        .and_then(|rec| rec.source.as_ref())
        .is_some_and(|(fs, p)| fs.0 == filesystem_id && p == path);
    if !agrees {
        return Err(Error::corrupt(format!(
            "the paths table maps {path:?} to entity {id}, whose own source differs; run \
             `strata fsck`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};

    /// A body whose entity its source implies is read with the id the caller expects; the digest
    /// check still catches a body that does not write that entity.
    #[test]
    fn an_expected_entity_is_checked_by_the_digest() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let file = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a/b.rs".into(),
            },
            "fn main() {}\n".into(),
        )?;
        let id = file.id().to_string();
        store.transact(vec![Op::put(file)], Origin::Cli)?;
        let rtx = store.read()?;
        let log = LogTables::open(&rtx)?;
        let header = log.header(1)?;
        let entity = |op: Option<OpRec>| match op {
            Some(OpRec::Write(w)) => Ok(w.entity.0),
            other => Err(Error::invariant(format!("not a write: {other:?}"))),
        };
        assert_eq!(entity(log.body(1, 0, &header, None)?)?, id);
        assert_eq!(entity(log.body(1, 0, &header, Some(&id))?)?, id);
        let other = "0".repeat(64);
        let err = log
            .body(1, 0, &header, Some(&other))
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("op 0 of tx 1"), "{err}");
        Ok(())
    }
}
