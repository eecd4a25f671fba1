//! Documents: the hashed fields of every version, content-addressed by object hash with a
//! reference count each, stored whole or, for sessions and chats, as skip-deltas on an earlier
//! document of the same entity (`doc_delta` holds the delta codec; this file chooses bases,
//! resolves chains and keeps other entities' chains whole when one is evicted).

use super::*;
use std::sync::{Arc, Mutex};

use super::blobs::{acquire_blob, acquire_blob_after, next_seq, release_blob};
use super::codec::DocRec;
use super::doc_delta::{
    Delta, MARK, MAX_CHAIN, apply, base_hash, edits_of, hash_of, is_delta, parse, parse_head,
    tokens,
};
use crate::hash::sha256;

/// The document tables of a write transaction.
pub(crate) struct DocTables<'t> {
    /// `doc_index`.
    pub index: Table<'t, [u8; 32], (u64, u64, bool)>,
    /// `doc_data`.
    pub data: Table<'t, u64, &'static [u8]>,
    /// The `doc_index` row the last [`ensure_doc`] call created, with no reference yet: the
    /// write's first [`reference_doc`] sets its count without reading it back.
    pub fresh: Option<([u8; 32], (u64, bool))>,
    /// `meta[DOC_NUMBERS_FROM]` (0 when absent), and whether this writer raised it.
    pub numbers_from: (u64, bool),
}

impl DocTables<'_> {
    /// The number of the next new document: after `doc_data`'s last and every erased one.
    pub(crate) fn next_number(&self) -> Result<u64> {
        Ok(next_seq(&self.data)?.max(self.numbers_from.0))
    }

    /// Removes the record of document number `seq`, keeping its number from being given again
    /// when it was the last; returns the record.
    pub(crate) fn remove_record(&mut self, seq: u64) -> Result<Option<Vec<u8>>> {
        if next_seq(&self.data)? == seq.saturating_add(1) && self.numbers_from.0 <= seq {
            self.numbers_from = (seq.saturating_add(1), true);
        }
        Ok(self.data.remove(seq).db()?.map(|v| v.value().to_vec()))
    }
}

/// The bytes the new document of `object` brings (its content, and the kept raw bytes of a
/// binary file), for the put statistics.
pub(crate) struct NewDoc {
    /// Bytes of blob records written.
    pub stored: u64,
}

/// Makes sure the document of `object` exists (storing it and its content when new) and that
/// the raw `bytes`, when given for a file whose content is null, are kept under its `file_hash`.
///
/// # Errors
/// [`Error::InvalidInput`] when `bytes` do not hash to the object's `file_hash`.
pub(crate) fn ensure_doc(
    docs: &mut DocTables<'_>,
    blobs: &mut BlobTables<'_>,
    object: &crate::object::Object,
    bytes: Option<&[u8]>,
    encoded: Option<&EncodedBlob>,
    delta_base: Option<&[u8; 32]>,
    base_cache: Option<&BaseCache>,
) -> Result<NewDoc> {
    let key = object.object_hash().0;
    docs.fresh = None;
    let mut stored = 0;
    // Bytes stored as given are checked against the file hash; a record made from bytes hashed
    // as they were read (a scan's) needs no second hash, nor do the bytes a raw one holds.
    if let Some(bytes) = bytes
        && !object
            .file_hash()
            .is_some_and(|hash| encoded.is_some_and(|e| e.vouches_for(&hash.0, bytes)))
    {
        let actual = sha256(bytes);
        if object.file_hash() != Some(&actual) {
            return Err(Error::invalid_input(format!(
                "the bytes given for {} hash to {actual}, not to its file_hash {}; give the file's own bytes",
                object.id(),
                object.file_hash().map_or("null".to_string(), Hash::to_hex),
            )));
        }
    }
    let keep_bytes = bytes.filter(|_| object.content().is_none());
    let existing = docs.index.get(&key).db()?.map(|v| v.value());
    match existing {
        Some((seq, refs, file_blob)) => {
            if let (Some(bytes), false) = (keep_bytes, file_blob)
                && let Some(file_hash) = object.file_hash()
            {
                stored += acquire_blob(blobs, &file_hash.0, bytes, encoded)?.unwrap_or(0);
                docs.index.insert(&key, (seq, refs, true)).db()?;
            }
        }
        None => {
            if let (Some(content), Some(hash)) = (object.content(), object.content_hash()) {
                let previous = match delta_base {
                    Some(base) => {
                        with_doc_ref(&docs.index, &docs.data, base, |rec| Ok(rec.content_hash))?
                            .flatten()
                    }
                    None => None,
                };
                stored += match previous {
                    Some(previous) => {
                        acquire_blob_after(blobs, &hash.0, content.as_bytes(), &previous)?
                    }
                    None => acquire_blob(blobs, &hash.0, content.as_bytes(), encoded)?,
                }
                .unwrap_or(0);
            }
            let mut file_blob = false;
            if let (Some(bytes), Some(file_hash)) = (keep_bytes, object.file_hash()) {
                stored += acquire_blob(blobs, &file_hash.0, bytes, encoded)?.unwrap_or(0);
                file_blob = true;
            }
            // The object keeps its canonical fields JSON (it hashed it): no second serialising.
            // Fields the writer prepared on the same previous document hold while the delta's
            // base is still stored (an eviction since may have erased it).
            let prepared = match (delta_base, base_cache) {
                (Some(previous), Some(cache)) => match cache.take_prepared(&key, previous) {
                    Some(doc) => match doc.base {
                        Some(base) if docs.index.get(&base).db()?.is_none() => None,
                        _ => Some(doc.fields),
                    },
                    None => None,
                },
                _ => None,
            };
            let fields = match (prepared, delta_base) {
                (Some(fields), _) => fields,
                (None, Some(base)) => encode(
                    &docs.index,
                    &docs.data,
                    base,
                    base_cache,
                    object.metadata_json(),
                )?,
                (None, None) => object.metadata_json().to_string(),
            };
            let rec = DocRec {
                file_hash: object.file_hash().map(|h| h.0),
                content_hash: object.content_hash().map(|h| h.0),
                fields,
            };
            // A file's fields in a few bytes (format 5).
            let record = codec::encode_doc(&rec)?;
            let seq = docs.next_number()?;
            docs.data.insert(seq, record.as_slice()).db()?;
            docs.index.insert(&key, (seq, 0, file_blob)).db()?;
            docs.fresh = Some((key, (seq, file_blob)));
            stored += record.len() as u64;
        }
    }
    Ok(NewDoc { stored })
}

/// The blobs a document uses: its content, and its file bytes when kept and different.
pub(crate) fn doc_blobs(rec: &DocRec, file_blob: bool) -> Vec<[u8; 32]> {
    let mut out = Vec::new();
    if let Some(hash) = rec.content_hash {
        out.push(hash);
    }
    if file_blob
        && let Some(hash) = rec.file_hash
        && Some(hash) != rec.content_hash
    {
        out.push(hash);
    }
    out
}

/// Reads a document record by object hash, with whether its file bytes are kept; a delta
/// document comes back with its full fields.
///
/// # Errors
/// [`Error::Corrupt`] when the index points nowhere or the record does not decode.
pub(crate) fn read_doc(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
) -> Result<Option<(DocRec, bool)>> {
    match read_doc_raw(index, data, hash)? {
        Some((rec, file_blob)) => Ok(Some((resolved(index, data, rec)?, file_blob))),
        None => Ok(None),
    }
}

/// A document's stored record (borrowed from its table) and whether its content is a file's blob.
type StoredDoc<'t> = (redb::AccessGuard<'t, &'static [u8]>, bool);

/// The stored record of document `hash` and whether its content is a file's blob; `None` when
/// the document is not stored.
///
/// # Errors
/// [`Error::Corrupt`] when the index points at a record that is not there.
fn doc_record<'t>(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &'t impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
) -> Result<Option<StoredDoc<'t>>> {
    let Some((seq, _, file_blob)) = index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(None);
    };
    #[cfg(test)]
    count_record_read();
    let record = data.get(seq).db()?.ok_or_else(|| {
        Error::corrupt(format!(
            "document {} points at missing record {seq}",
            hex::encode(hash)
        ))
    })?;
    Ok(Some((record, file_blob)))
}

/// Reads a document record as stored (a delta document's fields stay a delta).
///
/// # Errors
/// [`Error::Corrupt`] when the index points nowhere or the record does not decode.
pub(crate) fn read_doc_raw(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
) -> Result<Option<(DocRec, bool)>> {
    let Some((record, file_blob)) = doc_record(index, data, hash)? else {
        return Ok(None);
    };
    // The label is built only on failure: this runs once per document of a session's resume.
    let rec = codec::decode(record.value(), "document").map_err(|e| match e {
        Error::Corrupt { what } => {
            Error::corrupt(what.replacen("document", &format!("document {}", hex::encode(hash)), 1))
        }
        other => other,
    })?;
    Ok(Some((rec, file_blob)))
}

/// `f` of document `hash` read in place, its fields borrowed from the stored record (a full
/// session document is megabytes; a caller that looks at its start or its hashes copies none of
/// it); `None` when the document is not stored.
///
/// # Errors
/// [`Error::Corrupt`] when the index points nowhere or the record does not decode; `f`'s errors.
fn with_doc_ref<T>(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
    f: impl FnOnce(codec::DocRecRef<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let Some((record, _)) = doc_record(index, data, hash)? else {
        return Ok(None);
    };
    f(codec::decode_borrowed(record.value(), "document")?).map(Some)
}

#[cfg(test)]
thread_local! {
    /// The `doc_data` records this thread has read for a reader (tests count them).
    pub(crate) static RECORD_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one read of a `doc_data` record (tests).
#[cfg(test)]
fn count_record_read() {
    RECORD_READS.with(|n| n.set(n.get() + 1));
}

/// Adds one version reference to a document; returns its sequence number in `doc_data`.
pub(crate) fn reference_doc(docs: &mut DocTables<'_>, hash: &[u8; 32]) -> Result<u64> {
    if let Some((fresh, (seq, file_blob))) = docs.fresh.take()
        && fresh == *hash
    {
        docs.index.insert(hash, (seq, 1, file_blob)).db()?;
        return Ok(seq);
    }
    let (seq, refs, file_blob) =
        docs.index
            .get(hash)
            .db()?
            .map(|v| v.value())
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "document {} is referenced but missing",
                    hex::encode(hash)
                ))
            })?;
    docs.index.insert(hash, (seq, refs + 1, file_blob)).db()?;
    Ok(seq)
}

/// The object hash of the document at a `doc_data` sequence number: what a version row that
/// names its document by number (store format 8, `codec::VERSION_BY_SEQ`) stands for.
pub(crate) trait DocHashes {
    /// The object hash of document `seq`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the document is missing or does not hash to a `doc_index` row
    /// of that number.
    fn hash_at(&self, seq: u64) -> Result<[u8; 32]>;
}

/// The document tables of a store, as [`DocHashes`]: the hash is recomputed from the record
/// (a file's fields, content hash and file hash are all it hashes) and checked against
/// `doc_index`.
pub(crate) struct StoredDocs<'a, I, D> {
    /// `doc_index`.
    pub index: &'a I,
    /// `doc_data`.
    pub data: &'a D,
}

impl<I, D> DocHashes for StoredDocs<'_, I, D>
where
    I: ReadableTable<[u8; 32], (u64, u64, bool)>,
    D: ReadableTable<u64, &'static [u8]>,
{
    fn hash_at(&self, seq: u64) -> Result<[u8; 32]> {
        Ok(self.doc_at(seq)?.0)
    }
}

impl<I, D> StoredDocs<'_, I, D>
where
    I: ReadableTable<[u8; 32], (u64, u64, bool)>,
    D: ReadableTable<u64, &'static [u8]>,
{
    /// The object hash of document `seq` with its decoded record, checked as
    /// [`DocHashes::hash_at`] checks it (the record hashes to a `doc_index` row of that number).
    ///
    /// # Errors
    /// As [`DocHashes::hash_at`].
    pub(crate) fn doc_at(&self, seq: u64) -> Result<([u8; 32], DocRec)> {
        #[cfg(test)]
        count_record_read();
        let record = self.data.get(seq).db()?.ok_or_else(|| {
            Error::corrupt(format!("a version row names missing document record {seq}"))
        })?;
        let what = format!("document record {seq}");
        let rec: DocRec = codec::decode(record.value(), &what)?;
        if is_delta(&rec.fields) {
            return Err(Error::corrupt(format!(
                "a version row names {what}, a delta, by number"
            )));
        }
        let hash = crate::object::composite_hash(
            rec.file_hash.map(Hash).as_ref(),
            rec.content_hash.map(Hash).as_ref(),
            &sha256(rec.fields.as_bytes()),
        )?
        .0;
        match self.index.get(&hash).db()?.map(|v| v.value().0) {
            Some(found) if found == seq => Ok((hash, rec)),
            _ => Err(Error::corrupt(format!(
                "{what} hashes to {}, which doc_index does not place there",
                hex::encode(hash)
            ))),
        }
    }
}

/// [`StoredDocs`] that keep the last record they decoded: a reader that goes on to serve the
/// version's document takes it from here instead of reading, decoding and hashing it again.
pub(crate) struct KeptDocs<'a, I, D> {
    /// The tables read.
    pub stored: StoredDocs<'a, I, D>,
    /// The object hash and record of the last document [`DocHashes::hash_at`] resolved.
    pub kept: std::cell::RefCell<Option<([u8; 32], DocRec)>>,
}

impl<I, D> KeptDocs<'_, I, D> {
    /// The kept record when it is document `hash`'s (checked: it hashes to `hash`, which
    /// `doc_index` places at its number); `None` otherwise.
    pub(crate) fn take(&self, hash: &[u8; 32]) -> Option<DocRec> {
        self.kept
            .take()
            .and_then(|(kept, rec)| (kept == *hash).then_some(rec))
    }
}

impl<I, D> DocHashes for KeptDocs<'_, I, D>
where
    I: ReadableTable<[u8; 32], (u64, u64, bool)>,
    D: ReadableTable<u64, &'static [u8]>,
{
    fn hash_at(&self, seq: u64) -> Result<[u8; 32]> {
        let (hash, rec) = self.stored.doc_at(seq)?;
        self.kept.replace(Some((hash, rec)));
        Ok(hash)
    }
}

/// Sequence numbers and their documents' hashes held in memory: fsck's replay, whose store has
/// the checked store's `doc_index` but no `doc_data`.
impl DocHashes for HashMap<u64, [u8; 32]> {
    fn hash_at(&self, seq: u64) -> Result<[u8; 32]> {
        self.get(&seq).copied().ok_or_else(|| {
            Error::corrupt(format!("a version row names unknown document record {seq}"))
        })
    }
}

/// [`StoredDocs`] of a read transaction's tables.
pub(crate) type ReadDocs<'a> = StoredDocs<
    'a,
    redb::ReadOnlyTable<[u8; 32], (u64, u64, bool)>,
    redb::ReadOnlyTable<u64, &'static [u8]>,
>;

/// [`WriteDocs`] of a write transaction's tables (`'t`: the transaction's).
pub(crate) type WriterDocs<'a, 't> =
    WriteDocs<'a, Table<'t, [u8; 32], (u64, u64, bool)>, Table<'t, u64, &'static [u8]>>;

/// A writer's [`DocHashes`]: the `given` hashes when it has them (fsck's replay, which has no
/// `doc_data`), else [`StoredDocs`].
pub(crate) struct WriteDocs<'a, I, D> {
    /// The writer's document tables.
    pub stored: StoredDocs<'a, I, D>,
    /// Hashes by number given to the writer.
    pub given: &'a HashMap<u64, [u8; 32]>,
}

impl<I, D> DocHashes for WriteDocs<'_, I, D>
where
    I: ReadableTable<[u8; 32], (u64, u64, bool)>,
    D: ReadableTable<u64, &'static [u8]>,
{
    fn hash_at(&self, seq: u64) -> Result<[u8; 32]> {
        if self.given.is_empty() {
            self.stored.hash_at(seq)
        } else {
            self.given.hash_at(seq)
        }
    }
}

/// Decodes a version row of either form, its object hash found through `docs` when the row
/// names its document by number.
///
/// # Errors
/// [`Error::Corrupt`] when the row does not decode or its document does not resolve.
pub(crate) fn version_rec(
    bytes: &[u8],
    docs: &impl DocHashes,
    what: &str,
) -> Result<codec::VersionRec> {
    let (mut rec, seq) = codec::decode_version(bytes, what)?;
    if let Some(seq) = seq {
        rec.object_hash = Some(docs.hash_at(seq)?);
    }
    Ok(rec)
}

/// Drops one version reference to a document, deleting it (and releasing its blobs) at zero;
/// returns the bytes freed.
pub(crate) fn release_doc(
    docs: &mut DocTables<'_>,
    blobs: &mut BlobTables<'_>,
    hash: &[u8; 32],
) -> Result<u64> {
    docs.fresh = None;
    let Some((seq, refs, file_blob)) = docs.index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(0);
    };
    if refs > 1 {
        docs.index.insert(hash, (seq, refs - 1, file_blob)).db()?;
        return Ok(0);
    }
    docs.index.remove(hash).db()?;
    let record = docs.remove_record(seq)?;
    let mut freed = 0;
    if let Some(record) = record {
        freed += record.len() as u64;
        let rec: DocRec = codec::decode(&record, &format!("document {}", hex::encode(hash)))?;
        for blob in doc_blobs(&rec, file_blob) {
            freed += release_blob(blobs, &blob)?;
        }
    }
    Ok(freed)
}

/// A delta at least 1/`REBASE_FRACTION` of its full document is not stored: the full document
/// is, and starts a new chain. Without it (and [`BIG_CHANGE`]) a large early change (10 000
/// files read in a session's first commits) comes back in every delta on the chain's start, at
/// every power of two (measured: 2 MB at commits 32, 64 and 128 of a 10 000-file session, a
/// mean of 55 KB a commit; with this rule alone 427 KB each time, a mean of 18.5 KB). A growing
/// document is then stored whole about each time it has grown by a third since its last full
/// copy: a constant number of copies per doubling, amortised O(change).
const REBASE_FRACTION: usize = 4;

/// A document whose length differs from its previous version's by 1/`BIG_CHANGE` of it or more
/// is stored whole, starting a new chain that holds the change in its base.
const BIG_CHANGE: usize = 8;

/// The full fields of the latest session and chat documents this store handle wrote, by object
/// hash, so that the next delta on one does not rebuild it from its chain. An object hash fixes
/// its fields (it hashes them), so an entry is never wrong, even for a document whose
/// transaction failed; the depth of a base is always read from the store.
#[derive(Debug, Default)]
pub(crate) struct BaseCache(Mutex<Bases>, Mutex<HashMap<[u8; 32], PreparedDoc>>);

/// The stored fields of a new document, encoded by its writer before the commit
/// ([`RedbStore::prepare_docs`]) against `previous`, the entity's latest document then.
#[derive(Debug)]
struct PreparedDoc {
    previous: [u8; 32],
    /// The delta's base, `None` when the fields are stored whole.
    base: Option<[u8; 32]>,
    fields: String,
}

/// How many prepared documents [`BaseCache`] keeps at most (one per writer waiting for a
/// commit; those of failed writes are dropped with the rest when it is full).
const PREPARED_DOCS: usize = 256;

/// The entries of a [`BaseCache`]: fields and last use by hash, and their total length.
#[derive(Debug, Default)]
struct Bases {
    entries: HashMap<[u8; 32], (Arc<String>, u64)>,
    bytes: usize,
    clock: u64,
}

/// How many documents [`BaseCache`] keeps, least recently used out first: the bases of the next
/// deltas are the latest document of each chain and the few earlier ones its skip-deltas come
/// back to (about log2 of its length), for every session a daemon's clients write at once (16
/// sessions write 32 chains, a session's and its chat's).
const CACHED_BASES: usize = 512;

/// The most bytes of fields [`BaseCache`] keeps (a long chat's fields are hundreds of KB).
const CACHED_BYTES: usize = 32 << 20;

impl BaseCache {
    /// The fields of document `hash` when cached; a hit becomes the most recent entry, so the
    /// bases that skip-deltas come back to stay.
    fn get(&self, hash: &[u8; 32]) -> Option<Arc<String>> {
        let mut bases = self.0.lock().ok()?;
        bases.clock += 1;
        let now = bases.clock;
        let entry = bases.entries.get_mut(hash)?;
        entry.1 = now;
        Some(Arc::clone(&entry.0))
    }

    /// Keeps the fields prepared for new document `hash` on `previous`.
    fn prepared(&self, hash: [u8; 32], doc: PreparedDoc) {
        if let Ok(mut docs) = self.1.lock() {
            if docs.len() >= PREPARED_DOCS {
                docs.clear();
            }
            docs.insert(hash, doc);
        }
    }

    /// The fields prepared for new document `hash` when they were encoded on `previous`.
    fn take_prepared(&self, hash: &[u8; 32], previous: &[u8; 32]) -> Option<PreparedDoc> {
        let doc = self.1.lock().ok()?.remove(hash)?;
        (doc.previous == *previous).then_some(doc)
    }

    /// Remembers the full `fields` of document `hash` as the most recent entry.
    pub(crate) fn put(&self, hash: [u8; 32], fields: Arc<String>) {
        // A poisoned lock only loses the cache: deltas then rebuild their base from the store.
        let Ok(mut bases) = self.0.lock() else {
            return;
        };
        bases.clock += 1;
        let now = bases.clock;
        let len = fields.len();
        if let Some((old, _)) = bases.entries.insert(hash, (fields, now)) {
            bases.bytes -= old.len();
        }
        bases.bytes += len;
        while bases.entries.len() > CACHED_BASES
            || (bases.bytes > CACHED_BYTES && bases.entries.len() > 1)
        {
            let Some(oldest) = bases
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(h, _)| *h)
            else {
                break;
            };
            if let Some((gone, _)) = bases.entries.remove(&oldest) {
                bases.bytes -= gone.len();
            }
        }
    }
}

/// `rec` with its fields resolved to the full canonical JSON when it is a delta.
///
/// # Errors
/// [`Error::Corrupt`] when a base is missing or a delta does not apply.
pub(crate) fn resolved(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    mut rec: DocRec,
) -> Result<DocRec> {
    if !is_delta(&rec.fields) {
        return Ok(rec);
    }
    let mut chain = vec![parse(&rec.fields)?];
    let full = loop {
        let base = base_hash(
            chain
                .last()
                .ok_or_else(|| Error::corrupt("empty delta chain"))?,
        )?;
        let (base_rec, _) = read_doc_raw(index, data, &base)?.ok_or_else(|| {
            Error::corrupt(format!("delta base {} is missing", hex::encode(base)))
        })?;
        if !is_delta(&base_rec.fields) {
            break base_rec.fields;
        }
        if chain.len() > MAX_CHAIN {
            return Err(Error::corrupt("delta chain longer than its depth limit"));
        }
        chain.push(parse(&base_rec.fields)?);
    };
    // Applied on token lists, joined once: a chain costs one pass per delta over pointers.
    let mut current = tokens(&full);
    for delta in chain.iter().rev() {
        current = apply(current, delta)?;
    }
    rec.fields = current.join(",");
    Ok(rec)
}

/// The fields to store for a new document whose full fields are `fields`, the next of the chain
/// whose latest document is `previous`: a delta against document `n & (n - 1)` of that chain
/// (found walking back from `previous`) when that is shorter, else `fields`.
///
/// # Errors
/// [`Error::Corrupt`] when the chain does not read or a base does not resolve.
pub(crate) fn encode(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    previous: &[u8; 32],
    cache: Option<&BaseCache>,
    fields: &str,
) -> Result<String> {
    // A big change (an eighth of the document or more) starts a new chain with the full
    // document, so that it is not repeated in every delta on the old chain's start.
    let grew = cache
        .and_then(|c| c.get(previous))
        .is_some_and(|prev| fields.len().abs_diff(prev.len()) * BIG_CHANGE >= fields.len());
    if grew {
        return Ok(fields.to_string());
    }
    let Some((base, number)) = skip_base(index, data, previous)? else {
        return Ok(fields.to_string());
    };
    let base_fields: Arc<String> = match cache.and_then(|c| c.get(&base)) {
        Some(full) => full,
        None => {
            let (raw, _) = read_doc_raw(index, data, &base)?.ok_or_else(|| {
                Error::corrupt(format!("delta base {} is missing", hex::encode(base)))
            })?;
            let full = Arc::new(resolved(index, data, raw)?.fields);
            if let Some(cache) = cache {
                cache.put(base, Arc::clone(&full));
            }
            full
        }
    };
    let edits = edits_of(&base_fields, fields);
    let delta = Delta {
        b: hex::encode(base),
        d: number,
        e: edits,
    };
    let text = serde_json::to_string(&delta).map_err(|e| Error::storage("encoding a delta", e))?;
    let encoded = format!("{MARK}{text}");
    Ok(if encoded.len() < fields.len() / REBASE_FRACTION {
        encoded
    } else {
        fields.to_string()
    })
}

/// The base of the next delta after document `previous` and that delta's number: number
/// `n = previous + 1` is based on document `n & (n - 1)`, which is always on the chain of
/// `previous` (it clears the lowest set bit of `n`; the chain of `n - 1` clears its set bits one
/// by one). `None` when `previous` is not stored, its chain is as long as a `u32` counts, or the
/// chain skips the number (a store written by another rule): then a full document is stored.
fn skip_base(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    previous: &[u8; 32],
) -> Result<Option<([u8; 32], u32)>> {
    // Read in place: the full document at a chain's start is megabytes, and only whether it
    // is a delta (and a delta's head) is looked at.
    let number_of = |hash: &[u8; 32]| -> Result<Option<(u32, Option<[u8; 32]>)>> {
        with_doc_ref(index, data, hash, |raw| {
            if !is_delta(&raw.fields) {
                return Ok((0, None));
            }
            let head = parse_head(&raw.fields)?;
            Ok((head.d, Some(hash_of(&head.b)?)))
        })
    };
    let Some((mut at_number, mut base)) = number_of(previous)? else {
        return Ok(None);
    };
    let Some(number) = at_number.checked_add(1) else {
        return Ok(None);
    };
    let target = number & (number - 1);
    let mut at = *previous;
    while at_number > target {
        let Some(next) = base else {
            return Ok(None);
        };
        let Some((n, b)) = number_of(&next)? else {
            return Err(Error::corrupt(format!(
                "delta base {} is missing",
                hex::encode(next)
            )));
        };
        if n >= at_number {
            return Err(Error::corrupt(format!(
                "delta chain of {} does not descend",
                hex::encode(previous)
            )));
        }
        (at, at_number, base) = (next, n, b);
    }
    Ok((at_number == target).then_some((at, number)))
}

/// Rewrites with its full fields every delta document that is based directly on one of
/// `erased` (documents an eviction is about to remove) and is not itself among them: a document
/// is shared by object hash, so another entity's version (a fork's chat written by a raw put)
/// can use a delta whose base only the evicted entity's versions referenced, and its own later
/// deltas can be based on that entity's documents. Deltas are written after their bases, so
/// only documents from the first erased record on are read. A damaged record, or a delta whose
/// chain runs through one, is left as it is (it reads as damaged either way, and must not stop
/// the eviction of a secret). Returns the bytes added.
///
/// # Errors
/// Storage errors.
pub(crate) fn keep_dependents_whole(
    docs: &mut super::docs::DocTables<'_>,
    erased: &std::collections::HashMap<[u8; 32], u64>,
) -> Result<u64> {
    let Some(first) = erased.values().min().copied() else {
        return Ok(0);
    };
    let erased_seqs: std::collections::HashSet<u64> = erased.values().copied().collect();
    let mut rewrite = Vec::new();
    for entry in docs.data.range(first..).db()? {
        let (key, value) = entry.db()?;
        let seq = key.value();
        if erased_seqs.contains(&seq) {
            continue;
        }
        // A damaged record (one that does not decode, a delta head that does not parse) is
        // left as it is: it reads as damaged before the eviction and after it.
        let Ok(rec) = codec::decode::<DocRec>(value.value(), "document record") else {
            continue;
        };
        if !is_delta(&rec.fields) {
            continue;
        }
        let Ok(base) = parse_head(&rec.fields).and_then(|head| hash_of(&head.b)) else {
            continue;
        };
        if erased.contains_key(&base) {
            rewrite.push((seq, rec));
        }
    }
    // Resolve every one before writing any: a chain may run through another rewritten one. A
    // chain through a damaged record does not resolve, before or after: left as it is.
    let mut whole = Vec::with_capacity(rewrite.len());
    for (seq, rec) in rewrite {
        let old = codec::encode(&rec)?.len() as u64;
        let rec = match resolved(&docs.index, &docs.data, rec) {
            Ok(rec) => rec,
            Err(Error::Corrupt { .. }) => continue,
            Err(e) => return Err(e),
        };
        whole.push((seq, old, codec::encode(&rec)?));
    }
    let mut added = 0;
    for (seq, old, record) in whole {
        docs.data.insert(seq, record.as_slice()).db()?;
        added += (record.len() as u64).saturating_sub(old);
    }
    Ok(added)
}

impl WriteTables<'_> {
    /// The object hash of the latest version (greatest valid time, then tx) of entity `eid`, the
    /// base of its next delta document; `None` when it has none or it is a tombstone.
    pub(super) fn delta_base(&self, eid: u64) -> Result<Option<[u8; 32]>> {
        delta_base_of(&self.versions, &self.doc_hashes(), &self.by_tx, eid)
    }
}

/// [`WriteTables::delta_base`] on any tables.
fn delta_base_of(
    versions: &impl ReadableTable<(u64, i64, u64), &'static [u8]>,
    docs: &impl DocHashes,
    by_tx: &impl ReadableTable<(u64, u64), (i64, u64)>,
    eid: u64,
) -> Result<Option<[u8; 32]>> {
    let latest = super::temporal::latest_at(versions, by_tx, eid, u64::MAX)?;
    let Some((vt, tx)) = latest else {
        return Ok(None);
    };
    match versions.get((eid, vt, tx)).db()? {
        Some(v) => Ok(version_rec(v.value(), docs, "version record")?.object_hash),
        None => Ok(None),
    }
}

impl RedbStore {
    /// Encodes the new session, chat and session configuration documents of `ops` as the
    /// commit would (a delta on the entity's latest document, [`encode`]), in a read
    /// transaction of the writer's own, and keeps them for the commit: the group commit's leader
    /// then only checks that the entity's latest document is still the one encoded on.
    ///
    /// # Errors
    /// Storage errors and damage met reading the tables.
    pub(super) fn prepare_docs(&self, ops: &[Op]) -> Result<()> {
        let mut puts = ops
            .iter()
            .filter_map(|op| match op {
                Op::Put(put)
                    if matches!(
                        put.object.object_type(),
                        ObjectType::Session | ObjectType::Chat | ObjectType::SessionConfig
                    ) =>
                {
                    Some(put)
                }
                _ => None,
            })
            .peekable();
        if puts.peek().is_none() {
            return Ok(());
        }
        let rtx = self.read()?;
        let entities = ReadEntities::open(&rtx)?;
        let versions = rtx.open_table(VERSIONS).db()?;
        let by_tx = rtx.open_table(VERSIONS_BY_TX).db()?;
        let index = rtx.open_table(DOC_INDEX).db()?;
        let data = rtx.open_table(DOC_DATA).db()?;
        for put in puts {
            let object = &put.object;
            let key = object.object_hash().0;
            if index.get(&key).db()?.is_some() {
                continue;
            }
            let Some(rec) = entity_rec(&entities, object.id())? else {
                continue;
            };
            let docs = StoredDocs {
                index: &index,
                data: &data,
            };
            let Some(previous) = delta_base_of(&versions, &docs, &by_tx, rec.eid)? else {
                continue;
            };
            let fields = encode(
                &index,
                &data,
                &previous,
                Some(&self.base_cache),
                object.metadata_json(),
            )?;
            let base = if is_delta(&fields) {
                Some(hash_of(&parse_head(&fields)?.b)?)
            } else {
                None
            };
            self.base_cache.prepared(
                key,
                PreparedDoc {
                    previous,
                    base,
                    fields,
                },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Role, Turn};

    fn chat(turns: usize) -> Result<Object> {
        let turns = (0..turns)
            .map(|n| Turn {
                role: if n % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                content: format!("turn {n} {}", "words ".repeat(20)),
                toolcall_refs: None,
            })
            .collect();
        Object::chat("c", turns)
    }

    #[test]
    fn a_document_prepared_on_an_older_version_is_encoded_again_at_its_commit() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(tmp.path())?;
        for k in 1..=20 {
            store.transact(vec![Op::put(chat(k)?)], Origin::Session)?;
        }
        // Prepared on version 20; version 21 is committed first.
        let late = vec![Op::put(chat(22)?)];
        store.prepare_docs(&late)?;
        let hash = match &late[0] {
            Op::Put(put) => put.object.object_hash().0,
            _ => return Err(Error::invariant("not a put")),
        };
        assert!(
            store
                .base_cache
                .1
                .lock()
                .is_ok_and(|d| d.contains_key(&hash))
        );
        let at_21 = store.transact(vec![Op::put(chat(21)?)], Origin::Session)?;
        store.transact(late, Origin::Session)?;
        // Stored as encoded on version 21, not as prepared on 20.
        {
            let rtx = store.read()?;
            let index = rtx.open_table(DOC_INDEX).db()?;
            let data = rtx.open_table(DOC_DATA).db()?;
            let stored = read_doc_raw(&index, &data, &hash)?
                .ok_or_else(|| Error::not_found("document"))?
                .0
                .fields;
            let on_21 = encode(
                &index,
                &data,
                &chat(21)?.object_hash().0,
                None,
                chat(22)?.metadata_json(),
            )?;
            assert!(is_delta(&on_21), "{on_21}");
            assert_eq!(stored, on_21);
        }
        // Prepared on the latest version: used as it is.
        let next = vec![Op::put(chat(23)?)];
        store.prepare_docs(&next)?;
        store.transact(next, Origin::Session)?;
        assert!(store.base_cache.1.lock().is_ok_and(|d| d.is_empty()));
        let read = |tx: Option<TxId>| -> Result<String> {
            let version = store
                .as_of("chat:c", None, tx)?
                .ok_or_else(|| Error::not_found("chat"))?;
            let object = version.object.ok_or_else(|| Error::not_found("object"))?;
            Ok(object.metadata_json().to_string())
        };
        assert_eq!(read(Some(at_21.tx_id))?, chat(21)?.metadata_json());
        assert_eq!(read(None)?, chat(23)?.metadata_json());
        assert_eq!(store.fsck(), vec![]);
        Ok(())
    }

    /// A binary file's put with a compressed record made from bytes hashed as they were read
    /// (a scan's) is stored without a second hash; bytes stored raw, or given with a record
    /// made by a caller, are still checked against the file hash.
    #[test]
    fn only_a_compressed_record_of_read_bytes_skips_the_bytes_check() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(tmp.path())?;
        let source = |path: &str| crate::object::FilesystemSource {
            filesystem_id: "ab".repeat(32),
            path: path.into(),
        };
        let put = |path: &str, bytes: &[u8], given: Vec<u8>, read: bool| -> Result<Op> {
            let object = Object::file_bytes(source(path), bytes.to_vec())?;
            let mut put = Put::new(object);
            put.encoded = if read {
                EncodedBlob::of_read(&put.object, Some(bytes.to_vec())).0
            } else {
                EncodedBlob::of(&put.object, Some(bytes))
            };
            put.bytes = Some(given);
            Ok(Op::Put(Box::new(put)))
        };
        // Compressible binary bytes (a NUL in each line), and bytes that do not compress.
        let compressible: Vec<u8> = (0..2000u32)
            .flat_map(|i| format!("line {i}\0").into_bytes())
            .collect();
        let random: Vec<u8> = (0..2000u32)
            .flat_map(|i| sha256(&i.to_le_bytes()).0)
            .collect();
        store.transact(
            vec![put("/a.bin", &compressible, compressible.clone(), true)?],
            Origin::Indexer,
        )?;
        assert_eq!(
            store.content(&sha256(&compressible))?,
            Some(compressible.clone())
        );
        for (path, bytes, read) in [
            ("/raw.bin", &random, true),
            ("/given.bin", &compressible, false),
        ] {
            let mut wrong = bytes.clone();
            wrong[1] ^= 1;
            let err = store
                .transact(vec![put(path, bytes, wrong, read)?], Origin::Indexer)
                .map(|_| ())
                .unwrap_err();
            assert!(
                err.to_string().contains("give the file's own bytes"),
                "{err}"
            );
        }
        store.transact(
            vec![put("/raw.bin", &random, random.clone(), true)?],
            Origin::Indexer,
        )?;
        assert_eq!(store.content(&sha256(&random))?, Some(random.clone()));
        // A record a caller compressed from other bytes than the file's is no record: the
        // write stores the file's own bytes it is given (and checks them), not the record.
        let mut other = compressible.clone();
        other[3] ^= 1;
        let object = Object::file_bytes(source("/other.bin"), compressible.clone())?;
        assert!(EncodedBlob::of(&object, Some(&other)).is_none());
        let mut mixed = Put::new(object);
        mixed.encoded = EncodedBlob::of(&mixed.object, Some(&other));
        mixed.bytes = Some(compressible.clone());
        let fresh = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let fresh = RedbStore::create(fresh.path())?;
        fresh.transact(vec![Op::Put(Box::new(mixed))], Origin::Indexer)?;
        assert_eq!(
            fresh.content(&sha256(&compressible))?,
            Some(compressible.clone())
        );
        Ok(())
    }
}
