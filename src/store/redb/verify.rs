//! What every read checks before it serves something: a document against its object hash, a
//! content against its hash, a version row against the op body that wrote it (and that body
//! against its digest in the log), a `paths` row against its entity's source, and a missing op
//! body against the record of evictions.
//!
//! These checks cost a few lookups and a hash per row served; `fsck` checks every table as a
//! whole (`fsck.rs`).

use super::*;
use redb::ReadOnlyTable;

use std::sync::Arc;

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
    headers: HashMap<u64, Arc<TxHeaderRec>>,
    digests: usize,
}

/// Headers decoded by earlier reads of this process, each with the stored bytes it was decoded
/// from: a read serves one only when the bytes it reads now are the same (so never a header of
/// another store or store state, and a header damaged since decodes, and fails, again). A
/// listing reads each file in its own read transaction, which would otherwise decode the same
/// large header once per file.
#[derive(Default)]
struct SharedHeaders {
    headers: HashMap<u64, (Arc<[u8]>, Arc<TxHeaderRec>)>,
    digests: usize,
}

impl SharedHeaders {
    /// Digests held at most (32 bytes each, and their bytes again): past it the cache starts
    /// again empty.
    const MAX_DIGESTS: usize = 1 << 17;

    /// The process's cache (a poisoned lock is taken over: entries are only inserted whole).
    fn get() -> std::sync::MutexGuard<'static, SharedHeaders> {
        static SHARED: std::sync::OnceLock<std::sync::Mutex<SharedHeaders>> =
            std::sync::OnceLock::new();
        SHARED
            .get_or_init(std::sync::Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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

    /// The header of transaction `tx`, decoded once per read and served again to later reads
    /// while its stored bytes are the same ([`SharedHeaders`]).
    pub(super) fn header(&self, tx: u64) -> Result<Arc<TxHeaderRec>> {
        if let Some(header) = self.headers.borrow().headers.get(&tx) {
            return Ok(Arc::clone(header));
        }
        let bytes = self.tx_log.get(tx).db()?.ok_or_else(|| {
            Error::corrupt(format!(
                "the log has no record of tx {tx}, which the store's tables refer to; run \
                 `strata fsck`"
            ))
        })?;
        self.decoded(tx, bytes.value(), || format!("header of tx {tx}"))
    }

    /// The header of the log's last transaction (`None` when the log is empty), cached as
    /// [`LogTables::header`]; `tx header` names it in an error.
    pub(super) fn last_header(&self) -> Result<Option<Arc<TxHeaderRec>>> {
        let Some((key, bytes)) = self.tx_log.last().db()? else {
            return Ok(None);
        };
        let tx = key.value();
        if let Some(header) = self.headers.borrow().headers.get(&tx) {
            return Ok(Some(Arc::clone(header)));
        }
        self.decoded(tx, bytes.value(), || "tx header".to_string())
            .map(Some)
    }

    /// Header `bytes` of transaction `tx` decoded (or the same bytes' header from an earlier
    /// read), kept for this read; `what` names it in an error.
    fn decoded(
        &self,
        tx: u64,
        bytes: &[u8],
        what: impl FnOnce() -> String,
    ) -> Result<Arc<TxHeaderRec>> {
        let shared = match SharedHeaders::get().headers.get(&tx) {
            Some((stored, header)) if **stored == *bytes => Some(Arc::clone(header)),
            _ => None,
        };
        let header = match shared {
            Some(header) => header,
            None => {
                let header = Arc::new(codec::decode_header(bytes, &what())?);
                let mut shared = SharedHeaders::get();
                if shared.digests + header.digests.len() > SharedHeaders::MAX_DIGESTS {
                    *shared = SharedHeaders::default();
                }
                if let Some((_, old)) = shared
                    .headers
                    .insert(tx, (Arc::from(bytes), Arc::clone(&header)))
                {
                    shared.digests -= old.digests.len();
                }
                shared.digests += header.digests.len();
                header
            }
        };
        let mut cache = self.headers.borrow_mut();
        if cache.digests + header.digests.len() > HeaderCache::MAX_DIGESTS {
            *cache = HeaderCache::default();
        }
        cache.digests += header.digests.len();
        cache.headers.insert(tx, Arc::clone(&header));
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

    fn put_file(store: &RedbStore, path: &str, text: &str) -> Result<()> {
        let file = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            text.into(),
        )?;
        store.transact(vec![Op::put(file)], Origin::Cli)?;
        Ok(())
    }

    fn header_of(store: &RedbStore, tx: u64) -> Result<Arc<TxHeaderRec>> {
        let rtx = store.read()?;
        LogTables::open(&rtx)?.header(tx)
    }

    /// A header decoded by an earlier read is not served for another store's transaction of
    /// the same number, nor after that transaction's stored record changed in the same handle:
    /// a damaged record fails as it does in a fresh process.
    #[test]
    fn a_header_decoded_before_is_served_only_for_the_same_bytes() -> Result<()> {
        let one = RedbStore::in_memory()?;
        let two = RedbStore::in_memory()?;
        put_file(&one, "/a/one.rs", "one\n")?;
        put_file(&two, "/a/two.rs", "two\n")?;
        put_file(&two, "/a/three.rs", "three\n")?;
        let first = header_of(&one, 1)?;
        let second = header_of(&two, 1)?;
        assert_ne!(first.digests, second.digests);
        assert_eq!(header_of(&one, 1)?.digests, first.digests);
        // A later transaction of the same handle is read as written.
        put_file(&one, "/a/four.rs", "four\n")?;
        assert_eq!(header_of(&one, 1)?.digests, first.digests);
        assert_ne!(header_of(&one, 2)?.digests, first.digests);
        // Tx 1's record rewritten: first with another valid header, then damaged.
        let mut other = (*second).clone();
        other.chain = [7; 32];
        for bytes in [codec::encode_header(&other)?, vec![0xff; 9]] {
            let wtx = one.begin_write()?;
            wtx.open_table(TX_LOG)
                .db()?
                .insert(1u64, bytes.as_slice())
                .db()?;
            wtx.commit().db()?;
            let fresh = codec::decode_header(&bytes, "header of tx 1");
            match (header_of(&one, 1), fresh) {
                (Ok(read), Ok(fresh)) => assert_eq!(*read, fresh),
                (Err(read), Err(fresh)) => assert_eq!(read.to_string(), fresh.to_string()),
                (read, fresh) => {
                    return Err(Error::invariant(format!(
                        "read {read:?}, decoded {fresh:?}"
                    )));
                }
            }
        }
        Ok(())
    }
}
