//! Content addressing: blobs (bytes by SHA-256) and documents (hashed fields by object hash),
//! each stored once in append order and reference-counted.
//!
//! A blob's count is the number of documents that use it (by `content_hash`, or by `file_hash`
//! when the raw bytes of a binary file are kept) plus the number of suffix records based on it;
//! a document's count is the number of version rows that point at it. Eviction releases what it
//! unreferenced; `gc` recounts from scratch.
//!
//! A blob that starts with the bytes of the entity's previous content (a chat transcript after
//! a turn) is stored as a suffix record on an earlier blob of that chain: record `n` is based on
//! record `n & (n - 1)` (a skip-delta, as in Subversion), so reading one follows at most
//! log2(n) + 1 records, and a commit stores its own turn plus, on average, log2(n) / 2 earlier
//! ones, never the whole transcript.

use super::*;
use redb::{ReadableTable, Table};

use super::codec;
use super::tables::{BLOB_CHUNK, BLOB_CHUNK_KEY, BLOB_CHUNK_OLD};
use crate::error::{Error, Result};
use crate::hash::sha256;
use crate::store::ops::Encoded;

/// The blob tables of a write transaction.
///
/// Appends keep the stream's last chunk in memory ([`BlobTables::append`]) and write it once it
/// is full or when the tables are flushed, instead of reading and rewriting it for every record
/// (a scan appends thousands of records of a few hundred bytes to the same 4 KiB chunk). Every
/// other use of `blob_chunks` goes through [`BlobTables::data`] or [`BlobTables::parts`], which
/// write the pending chunk first; dropping the tables writes it too, so a commit (which needs
/// the tables dropped) always holds it.
pub(crate) struct BlobTables<'t> {
    /// `blob_index`.
    pub index: Table<'t, [u8; 32], (u64, u64, u64)>,
    /// `blob_chunks`, as of the last flush.
    data: Table<'t, u64, &'static [u8]>,
    /// The stream's last chunk as appends left it: its number, its bytes, and whether they
    /// differ from the table's row.
    tail: Option<(u64, Vec<u8>, bool)>,
    /// The store's chunk size ([`chunk_size`]).
    pub chunk: u64,
}

/// The blob chunk size of the store whose `meta` table is `meta`: `meta[BLOB_CHUNK_KEY]`, or
/// [`BLOB_CHUNK_OLD`] when absent (a store made before format 7).
///
/// # Errors
/// [`Error::Corrupt`] when the value is not 8 bytes or not a chunk size strata writes
/// ([`BLOB_CHUNK`] or [`BLOB_CHUNK_OLD`]).
pub(crate) fn chunk_size(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64> {
    let Some(value) = meta.get(BLOB_CHUNK_KEY).db()? else {
        return Ok(BLOB_CHUNK_OLD);
    };
    let size = <[u8; 8]>::try_from(value.value())
        .ok()
        .map(u64::from_le_bytes)
        .filter(|n| *n == BLOB_CHUNK || *n == BLOB_CHUNK_OLD);
    size.ok_or_else(|| {
        Error::corrupt(format!(
            "meta[{BLOB_CHUNK_KEY}] is not a chunk size strata writes ({BLOB_CHUNK} or \
             {BLOB_CHUNK_OLD}): the store is damaged; `strata fsck --repair` writes the size its \
             chunks show"
        ))
    })
}

/// The chunk size of a stream whose chunks (some of them, the first ones) are `lengths` long,
/// for a store whose `meta` does not say: [`BLOB_CHUNK`] when one is longer than
/// [`BLOB_CHUNK_OLD`], else that (a stream of one chunk reads the same with either).
pub(crate) fn infer_chunk(lengths: impl IntoIterator<Item = u64>) -> u64 {
    if lengths.into_iter().any(|len| len > BLOB_CHUNK_OLD) {
        BLOB_CHUNK
    } else {
        BLOB_CHUNK_OLD
    }
}

/// The chunk size the blob stream `data` itself shows: the length of its first chunk when a
/// second follows it (every chunk but the last is full) and that length is a chunk size strata
/// writes; `None` for a stream of one chunk or none, or a first chunk of another length.
///
/// # Errors
/// A storage error reading the first two chunks.
pub(crate) fn stream_chunk(data: &impl ReadableTable<u64, &'static [u8]>) -> Result<Option<u64>> {
    let mut lengths = Vec::with_capacity(2);
    for entry in data.iter().db()?.take(2) {
        lengths.push(entry.db()?.1.value().len() as u64);
    }
    Ok(match lengths.as_slice() {
        [first, _] if *first == BLOB_CHUNK || *first == BLOB_CHUNK_OLD => Some(*first),
        _ => None,
    })
}

/// The blob chunk size of the store `rtx` reads ([`chunk_size`]).
///
/// # Errors
/// As [`chunk_size`].
pub(crate) fn chunk_of(rtx: &redb::ReadTransaction) -> Result<u64> {
    chunk_size(&rtx.open_table(super::tables::META).db()?)
}

impl<'t> BlobTables<'t> {
    /// The blob tables of `tx`, whose store cuts its stream in chunks of `chunk` bytes.
    pub(crate) fn open(tx: &'t redb::WriteTransaction, chunk: u64) -> Result<Self> {
        Ok(BlobTables {
            index: tx.open_table(super::tables::BLOB_INDEX).db()?,
            data: tx.open_table(super::tables::BLOB_DATA).db()?,
            tail: None,
            chunk,
        })
    }

    /// `blob_chunks` with every append written, to read or change (the cached last chunk is
    /// forgotten: the caller may change it).
    ///
    /// # Errors
    /// A storage error writing the pending chunk.
    pub(crate) fn data(&mut self) -> Result<&mut Table<'t, u64, &'static [u8]>> {
        self.flush()?;
        self.tail = None;
        Ok(&mut self.data)
    }

    /// `blob_index` and `blob_chunks` with every append written (see [`BlobTables::data`]).
    ///
    /// # Errors
    /// A storage error writing the pending chunk.
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts(
        &mut self,
    ) -> Result<(
        &mut Table<'t, [u8; 32], (u64, u64, u64)>,
        &mut Table<'t, u64, &'static [u8]>,
    )> {
        self.flush()?;
        self.tail = None;
        Ok((&mut self.index, &mut self.data))
    }

    /// Appends `record` to the blob stream; returns its offset. Only full chunks are written
    /// now; the last one waits in memory for the next append or [`BlobTables::flush`].
    ///
    /// # Errors
    /// A storage error reading the last chunk or writing a full one.
    pub(crate) fn append(&mut self, record: &[u8]) -> Result<u64> {
        self.append_all(&[record])
    }

    /// Appends the record made of `parts` one after another (see [`BlobTables::append`]).
    ///
    /// # Errors
    /// A storage error reading the last chunk or writing a full one.
    pub(crate) fn append_all(&mut self, parts: &[&[u8]]) -> Result<u64> {
        let chunk = self.chunk;
        let (mut chunk_no, mut tail, mut dirty) = match self.tail.take() {
            Some(tail) => tail,
            None => match self.data.last().db()? {
                Some((k, v)) if (v.value().len() as u64) < chunk => {
                    (k.value(), v.value().to_vec(), false)
                }
                Some((k, _)) => (k.value().saturating_add(1), Vec::new(), false),
                None => (0, Vec::new(), false),
            },
        };
        // A damaged chunk key may name a chunk past any offset: appending there would wrap
        // the record's offset onto other bytes.
        let past_end = || {
            Error::corrupt(format!(
                "the blob stream's last chunk number ({chunk_no}) is past any offset; run \
                 `strata fsck`"
            ))
        };
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let offset = chunk_no
            .checked_mul(chunk)
            .and_then(|start| start.checked_add(tail.len() as u64))
            .filter(|offset| offset.checked_add(total).is_some())
            .ok_or_else(past_end)?;
        for &part in parts {
            let mut rest = part;
            while !rest.is_empty() {
                if tail.capacity() < chunk as usize {
                    tail.reserve_exact(chunk as usize - tail.len());
                }
                let room = chunk as usize - tail.len();
                let (now, later) = rest.split_at(room.min(rest.len()));
                tail.extend_from_slice(now);
                dirty = true;
                rest = later;
                if tail.len() as u64 == chunk {
                    self.data.insert(chunk_no, tail.as_slice()).db()?;
                    chunk_no += 1;
                    tail.clear();
                    dirty = false;
                }
            }
        }
        self.tail = Some((chunk_no, tail, dirty));
        Ok(offset)
    }

    /// Writes the pending last chunk of the stream, if appends changed it.
    ///
    /// # Errors
    /// A storage error writing it.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if let Some((no, bytes, dirty)) = &mut self.tail
            && *dirty
        {
            self.data.insert(*no, bytes.as_slice()).db()?;
            *dirty = false;
        }
        Ok(())
    }
}

impl Drop for BlobTables<'_> {
    /// Writes the pending chunk: the paths that commit flush first and see any error; on the
    /// others the transaction is being abandoned and what is written here does not matter.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

pub(crate) fn next_seq(data: &impl ReadableTable<u64, &'static [u8]>) -> Result<u64> {
    Ok(data.last().db()?.map_or(1, |(k, _)| k.value() + 1))
}

/// Reads `len` bytes at `offset` of the blob stream (cut in chunks of `chunk` bytes); `None`
/// when a chunk is missing or short.
pub(crate) fn read_range(
    chunks: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    offset: u64,
    len: u64,
) -> Result<Option<Vec<u8>>> {
    // A damaged index row may claim any length: the buffer grows with the chunks that exist
    // instead of being allocated at the claimed length first.
    let mut out = Vec::with_capacity((len as usize).min(1 << 20));
    if len == 0 {
        return Ok(Some(out));
    }
    let first = offset / chunk;
    let last = offset.saturating_add(len - 1) / chunk;
    for no in first..=last {
        let Some(row) = chunks.get(no).db()? else {
            return Ok(None);
        };
        let bytes = row.value();
        let start = if no == first {
            (offset % chunk) as usize
        } else {
            0
        };
        let want = (len as usize - out.len()).min(chunk as usize - start);
        let Some(piece) = bytes.get(start..start + want) else {
            return Ok(None);
        };
        out.extend_from_slice(piece);
    }
    Ok(Some(out))
}

/// Overwrites `len` bytes at `offset` with zeros, dropping chunks that become all zero (except
/// the last, which the next append extends).
pub(crate) fn erase_range(
    chunks: &mut Table<'_, u64, &'static [u8]>,
    chunk: u64,
    offset: u64,
    len: u64,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let last_no = chunks.last().db()?.map_or(0, |(k, _)| k.value());
    let first = offset / chunk;
    // No further than the last chunk there is: a damaged index row may claim any length.
    let last = (offset.saturating_add(len - 1) / chunk).min(last_no);
    // The chunks that are there, not every number in between: a damaged row or chunk key may
    // make the range span billions of numbers.
    let mut present = Vec::new();
    if first <= last {
        for row in chunks.range(first..=last).db()? {
            present.push(row.db()?.0.value());
        }
    }
    for no in present {
        let Some(mut bytes) = chunks.get(no).db()?.map(|v| v.value().to_vec()) else {
            continue;
        };
        let chunk_start = no.saturating_mul(chunk);
        let from = offset.max(chunk_start) - chunk_start;
        let to = offset
            .saturating_add(len)
            .min(chunk_start.saturating_add(chunk))
            .saturating_sub(chunk_start);
        let to = (to as usize).min(bytes.len());
        if let Some(range) = bytes.get_mut(from as usize..to) {
            range.fill(0);
        }
        if no != last_no && bytes.iter().all(|b| *b == 0) {
            chunks.remove(no).db()?;
        } else {
            chunks.insert(no, bytes.as_slice()).db()?;
        }
    }
    Ok(())
}

/// Adds one reference to the blob of `bytes` (hash `hash`), storing it when new; returns the
/// stored size when it was new.
pub(crate) fn acquire_blob(
    t: &mut BlobTables<'_>,
    hash: &[u8; 32],
    bytes: &[u8],
    encoded: Option<&EncodedBlob>,
) -> Result<Option<u64>> {
    let existing = t.index.get(hash).db()?.map(|v| v.value());
    match existing {
        Some((offset, len, refs)) => {
            t.index.insert(hash, (offset, len, refs + 1)).db()?;
            Ok(None)
        }
        None => {
            // A record made by the caller is appended from where it is, not copied; a raw one
            // is its header and the bytes.
            let (offset, len) = match encoded.and_then(|e| e.encoded_for(hash)) {
                Some(Encoded::Record(record)) => (t.append(record)?, record.len()),
                Some(Encoded::Raw) => {
                    (t.append_all(&[&codec::RAW_HEADER, bytes])?, bytes.len() + 2)
                }
                None => {
                    let record = codec::encode_blob(bytes);
                    (t.append(&record)?, record.len())
                }
            };
            t.index.insert(hash, (offset, len as u64, 1)).db()?;
            Ok(Some(len as u64))
        }
    }
}

/// Blobs shorter than this are stored whole even when they extend the previous content: a
/// suffix record's header (46 bytes) and the read of its base would not pay.
const MIN_SUFFIX_BASE: u64 = 256;

/// Adds one reference to the blob of `bytes` (hash `hash`) like [`acquire_blob`], storing it as
/// a suffix record when it starts with the bytes of a blob on the chain of `previous` (the
/// content of the entity's previous version); returns the stored size when it was new.
///
/// # Errors
/// [`Error::Corrupt`] when the chain of `previous` does not read.
pub(crate) fn acquire_blob_after(
    t: &mut BlobTables<'_>,
    hash: &[u8; 32],
    bytes: &[u8],
    previous: &[u8; 32],
) -> Result<Option<u64>> {
    if t.index.get(hash).db()?.is_some() {
        return acquire_blob(t, hash, bytes, None);
    }
    // A blob an eighth or more longer than the previous one starts a new chain: a large growth
    // stays out of every later suffix on the chain's start (see `doc_delta::BIG_CHANGE`).
    let previous_len = header_of(t, previous)?.and_then(|h| h.len);
    if previous_len.is_none_or(|len| (bytes.len() as u64).abs_diff(len) * 8 >= bytes.len() as u64) {
        return acquire_blob(t, hash, bytes, None);
    }
    let Some((base, seq, base_len)) = suffix_base(t, previous)? else {
        return acquire_blob(t, hash, bytes, None);
    };
    // A suffix of a quarter or more of the blob starts a new chain with the whole blob, as
    // `doc_delta` does with documents.
    let fits = base_len >= MIN_SUFFIX_BASE
        && (base_len as usize) <= bytes.len()
        && (bytes.len() - base_len as usize) * 4 < bytes.len()
        && sha256(&bytes[..base_len as usize]).0 == base;
    if !fits {
        return acquire_blob(t, hash, bytes, None);
    }
    let record =
        codec::encode_suffix_blob(seq, bytes.len() as u64, &base, &bytes[base_len as usize..]);
    let offset = t.append(&record)?;
    t.index
        .insert(hash, (offset, record.len() as u64, 1))
        .db()?;
    let (b_offset, b_len, b_refs) = t
        .index
        .get(&base)
        .db()?
        .map(|v| v.value())
        .ok_or_else(|| Error::corrupt(format!("blob {} vanished", hex::encode(base))))?;
    t.index.insert(&base, (b_offset, b_len, b_refs + 1)).db()?;
    Ok(Some(record.len() as u64))
}

/// The base for the next record of the chain whose latest blob is `previous`: (base hash, the
/// new record's number, the base's length). Record `n` is based on record `n & (n - 1)`, which
/// is always on the chain of record `n - 1`. `None` when `previous` is not stored or its chain is
/// as long as a `u32` counts.
fn suffix_base(
    t: &mut BlobTables<'_>,
    previous: &[u8; 32],
) -> Result<Option<([u8; 32], u32, u64)>> {
    let Some(mut header) = header_of(t, previous)? else {
        return Ok(None);
    };
    let Some(seq) = header.seq.checked_add(1) else {
        return Ok(None);
    };
    let target = seq & (seq - 1);
    let mut at = *previous;
    while header.seq > target {
        let Some(base) = header.base else {
            return Ok(None);
        };
        at = base;
        let Some(next) = header_of(t, &at)? else {
            return Err(Error::corrupt(format!(
                "blob {} is based on missing blob {}",
                hex::encode(previous),
                hex::encode(at)
            )));
        };
        // Numbers fall along a chain; a corrupted record could make a cycle.
        if next.seq >= header.seq {
            return Err(Error::corrupt(format!(
                "the chain of suffix records of blob {} does not descend at blob {}; run strata fsck",
                hex::encode(previous),
                hex::encode(at)
            )));
        }
        header = next;
    }
    if header.seq != target {
        return Ok(None);
    }
    let len = match header.len {
        Some(len) => len,
        None => {
            let chunk = t.chunk;
            let (index, data) = t.parts()?;
            read_blob(&*index, &*data, chunk, &at)?.map_or(0, |b| b.len() as u64)
        }
    };
    Ok(Some((at, seq, len)))
}

/// The header of the record of blob `hash`; `None` when it is not stored.
fn header_of(t: &mut BlobTables<'_>, hash: &[u8; 32]) -> Result<Option<codec::BlobHeader>> {
    let chunk = t.chunk;
    let (index, data) = t.parts()?;
    let Some((offset, len, _)) = index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(None);
    };
    record_header(&*data, chunk, hash, offset, len).map(Some)
}

/// The header of the blob record of `hash` at (`offset`, `len`), read without its payload.
///
/// # Errors
/// [`Error::Corrupt`] when the range is missing or the header is unknown.
pub(crate) fn record_header(
    data: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    hash: &[u8; 32],
    offset: u64,
    len: u64,
) -> Result<codec::BlobHeader> {
    let (prefix, what) = record_prefix(data, chunk, hash, offset, len)?;
    let mut header = codec::blob_header(&prefix, &what)?;
    if header.len.is_none() && prefix.get(1) == Some(&0) {
        // A raw record: its payload is the bytes.
        header.len = Some(len.saturating_sub(2));
    }
    Ok(header)
}

/// The length of the blob whose record (of blob `hash`) is at (`offset`, `len`), from the
/// record's header alone ([`codec::blob_len`]): only the chunk or two holding its first
/// [`codec::SUFFIX_HEADER`] bytes are read, nothing is decompressed or hashed. `None` when the
/// header does not say.
///
/// # Errors
/// [`Error::Corrupt`] when the range is missing or the header is unknown.
pub(crate) fn stored_len(
    data: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    hash: &[u8; 32],
    offset: u64,
    len: u64,
) -> Result<Option<u64>> {
    let (prefix, what) = record_prefix(data, chunk, hash, offset, len)?;
    codec::blob_len(&prefix, len, &what)
}

/// The first [`codec::SUFFIX_HEADER`] bytes (or fewer, all of a shorter one) of the record of
/// blob `hash` at (`offset`, `len`), and the blob named for an error.
fn record_prefix(
    data: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    hash: &[u8; 32],
    offset: u64,
    len: u64,
) -> Result<(Vec<u8>, String)> {
    let what = format!("blob {}", hex::encode(hash));
    let prefix = read_range(data, chunk, offset, len.min(codec::SUFFIX_HEADER as u64))?
        .ok_or_else(|| {
            Error::corrupt(format!(
                "{what} points at bytes {offset}..{} of the blob stream, which are missing",
                offset.saturating_add(len)
            ))
        })?;
    Ok((prefix, what))
}

/// Drops one reference to a blob, erasing it at zero (and then dropping its reference to its
/// base, for a suffix record); returns the bytes freed.
pub(crate) fn release_blob(t: &mut BlobTables<'_>, hash: &[u8; 32]) -> Result<u64> {
    let chunk = t.chunk;
    let mut freed = 0;
    let mut next = Some(*hash);
    while let Some(hash) = next.take() {
        let Some((offset, len, refs)) = t.index.get(&hash).db()?.map(|v| v.value()) else {
            break;
        };
        if refs > 1 {
            t.index.insert(&hash, (offset, len, refs - 1)).db()?;
            break;
        }
        next = record_header(t.data()?, chunk, &hash, offset, len)?.base;
        t.index.remove(&hash).db()?;
        erase_blob(t, offset, len)?;
        freed += len;
    }
    Ok(freed)
}

/// Of `candidates` (the blobs an evicted entity's documents used), those that survive only as
/// the base of suffix records (no document uses them any more) are removed: each suffix record
/// based on one is rewritten whole (same hash, same references), which drops its reference on
/// the base, so nothing of the evicted entity stays readable by its hash. Returns (bytes
/// added, bytes freed).
///
/// # Errors
/// [`Error::Corrupt`] when a record does not read.
pub(crate) fn unbase(t: &mut BlobTables<'_>, candidates: &[[u8; 32]]) -> Result<(u64, u64)> {
    let chunk = t.chunk;
    let mut left = Vec::new();
    for hash in candidates {
        if t.index.get(hash).db()?.is_some() && !left.contains(hash) {
            left.push(*hash);
        }
    }
    if left.is_empty() {
        return Ok((0, 0));
    }
    // The suffix records on each candidate (records do not say who is based on them).
    let mut dependents: std::collections::HashMap<[u8; 32], Vec<[u8; 32]>> =
        std::collections::HashMap::new();
    let mut all = Vec::new();
    for entry in t.index.iter().db()? {
        let (key, value) = entry.db()?;
        all.push((key.value(), value.value()));
    }
    for (hash, (offset, len, _)) in all {
        if let Some(base) = record_header(t.data()?, chunk, &hash, offset, len)?.base
            && left.contains(&base)
        {
            dependents.entry(base).or_default().push(hash);
        }
    }
    let (mut added, mut freed) = (0, 0);
    for base in left {
        let on_it = dependents.remove(&base).unwrap_or_default();
        // The records still based on it (an earlier release may have erased some).
        let mut live = Vec::new();
        for hash in on_it {
            let row = t.index.get(&hash).db()?.map(|v| v.value());
            if let Some((offset, len, refs)) = row
                && record_header(t.data()?, chunk, &hash, offset, len)?.base == Some(base)
            {
                live.push((hash, offset, len, refs));
            }
        }
        let Some((_, _, refs)) = t.index.get(&base).db()?.map(|v| v.value()) else {
            continue;
        };
        if live.is_empty() || refs > live.len() as u64 {
            // A document still uses it (or nothing is based on it): it stays.
            continue;
        }
        for (hash, offset, len, refs) in live {
            let (index, data) = t.parts()?;
            let bytes = read_at(&*index, &*data, chunk, &hash, offset, len)?;
            let record = codec::encode_blob(&bytes);
            let at = t.append(&record)?;
            t.index
                .insert(&hash, (at, record.len() as u64, refs))
                .db()?;
            erase_blob(t, offset, len)?;
            added += record.len() as u64;
            freed += len;
            freed += release_blob(t, &base)?;
        }
    }
    Ok((added, freed))
}

/// Erases a blob's record from the stream (its index row is the caller's).
pub(crate) fn erase_blob(t: &mut BlobTables<'_>, offset: u64, len: u64) -> Result<()> {
    let chunk = t.chunk;
    erase_range(t.data()?, chunk, offset, len)
}

/// Reads a blob's bytes, following a suffix record back to its whole base.
///
/// # Errors
/// [`Error::Corrupt`] when the index points past the stream, a record does not decode or a
/// base is missing.
pub(crate) fn read_blob(
    index: &impl ReadableTable<[u8; 32], (u64, u64, u64)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    hash: &[u8; 32],
) -> Result<Option<Vec<u8>>> {
    let Some((offset, len, _)) = index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(None);
    };
    read_at(index, data, chunk, hash, offset, len).map(Some)
}

/// The longest chain of suffix records a read follows: record `n` is based on `n & (n - 1)`,
/// so a chain of `u32` numbers has at most 33 records.
const MAX_CHAIN: usize = 33;

/// Reads the blob of `hash` whose record is at (`offset`, `len`), following a suffix record
/// back to its whole base.
///
/// # Errors
/// [`Error::Corrupt`] when a range is missing, a record does not decode, a base is missing or
/// the assembled bytes are not the length the record says.
pub(crate) fn read_at(
    index: &impl ReadableTable<[u8; 32], (u64, u64, u64)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    chunk: u64,
    hash: &[u8; 32],
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    let mut suffixes: Vec<(Vec<u8>, u64)> = Vec::new();
    let (mut at, mut offset, mut len) = (*hash, offset, len);
    let whole = loop {
        let what = format!("blob {}", hex::encode(at));
        let record = read_range(data, chunk, offset, len)?.ok_or_else(|| {
            Error::corrupt(format!(
                "{what} points at bytes {offset}..{} of the blob stream, which are missing",
                offset.saturating_add(len)
            ))
        })?;
        match codec::decode_blob_record(&record, &what)? {
            codec::BlobRecord::Whole(bytes) => break bytes,
            codec::BlobRecord::Suffix {
                base,
                suffix,
                len: total,
                ..
            } => {
                if suffixes.len() >= MAX_CHAIN {
                    return Err(Error::corrupt(format!(
                        "blob {} has a chain of suffix records longer than {MAX_CHAIN}",
                        hex::encode(hash)
                    )));
                }
                suffixes.push((suffix, total));
                let (b_offset, b_len, _) =
                    index.get(&base).db()?.map(|v| v.value()).ok_or_else(|| {
                        Error::corrupt(format!(
                            "{what} is based on blob {}, which is missing",
                            hex::encode(base)
                        ))
                    })?;
                (at, offset, len) = (base, b_offset, b_len);
            }
        }
    };
    let mut bytes = whole;
    for (suffix, total) in suffixes.into_iter().rev() {
        bytes.extend_from_slice(&suffix);
        if bytes.len() as u64 != total {
            return Err(Error::corrupt(format!(
                "blob {} reassembles to {} bytes where its record says {total}",
                hex::encode(hash),
                bytes.len()
            )));
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableDatabase as _;

    /// Runs `test` on the blob tables of a write transaction on a fresh redb file, with
    /// `records` (hash, suffix record on base) appended first.
    fn with_suffix_records(
        records: &[([u8; 32], [u8; 32])],
        test: impl FnOnce(&mut BlobTables<'_>) -> Result<()>,
    ) -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = redb::Database::create(dir.path().join("t.redb")).db()?;
        let wtx = db.begin_write().db()?;
        let mut t = BlobTables::open(&wtx, BLOB_CHUNK)?;
        for (hash, base) in records {
            let record = codec::encode_suffix_blob(5, 600, base, b"more");
            let offset = t.append(&record)?;
            t.index
                .insert(hash, (offset, record.len() as u64, 1))
                .db()?;
        }
        test(&mut t)
    }

    /// The stream is the appended records one after another, whichever way its chunks went in:
    /// records of a few bytes to several chunks, the table's partial last row of an earlier
    /// commit filled up, reads in between, a flush by the commit; each append's offset is where
    /// its bytes are, and each chunk is one row.
    #[test]
    fn the_stream_is_the_records_appended_across_runs_commits_and_reads() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = redb::Database::create(dir.path().join("t.redb")).db()?;
        let mut seed = 7u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut expected = Vec::new();
        for commit in 0..3 {
            let wtx = db.begin_write().db()?;
            {
                let mut t = BlobTables::open(&wtx, BLOB_CHUNK)?;
                for n in 0..400u64 {
                    let len = match random() % 4 {
                        0 => random() % 40_000,
                        _ => random() % 900,
                    };
                    let byte = u8::try_from((commit * 400 + n) % 251).unwrap_or(0);
                    let record = vec![byte; usize::try_from(len).unwrap_or(0)];
                    let offset = t.append(&record)?;
                    assert_eq!(
                        offset,
                        expected.len() as u64,
                        "record {n} of commit {commit}"
                    );
                    expected.extend_from_slice(&record);
                    if n % 97 == 0 {
                        let data = t.data()?;
                        let got = read_range(data, BLOB_CHUNK, 0, expected.len() as u64)?;
                        assert_eq!(got.as_deref(), Some(expected.as_slice()), "read mid-way");
                    }
                }
                t.flush()?;
            }
            wtx.commit().db()?;
            let rtx = db.begin_read().db()?;
            let data = rtx.open_table(super::super::tables::BLOB_DATA).db()?;
            let got = read_range(&data, BLOB_CHUNK, 0, expected.len() as u64)?;
            assert!(
                got.as_deref() == Some(expected.as_slice()),
                "after commit {commit}"
            );
            assert_eq!(
                data.len().db()?,
                (expected.len() as u64).div_ceil(BLOB_CHUNK),
                "one row a chunk"
            );
        }
        assert!(expected.len() as u64 > 500 * BLOB_CHUNK);
        Ok(())
    }

    /// A range whose length a damaged index row claims (up to `u64::MAX` past its offset) is
    /// read and erased only as far as the chunks there are: both end at once, never overflow.
    #[test]
    fn a_damaged_length_reads_and_erases_only_the_chunks_there_are() -> Result<()> {
        with_suffix_records(&[([1u8; 32], [9u8; 32])], |t| {
            let data = t.data()?;
            assert!(
                read_range(data, BLOB_CHUNK, 0, u64::MAX)?.is_none(),
                "past the stream"
            );
            erase_range(data, BLOB_CHUNK, 0, u64::MAX)?;
            erase_range(data, BLOB_CHUNK, u64::MAX - 1, u64::MAX)?;
            let last = data.last().db()?.map(|(_, v)| v.value().to_vec());
            assert!(last.is_some_and(|bytes| bytes.iter().all(|b| *b == 0)));
            Ok(())
        })
    }

    /// A damaged chunk key far past the stream (still passing redb's checksums) makes the next
    /// append corrupt, not an offset that wraps onto other bytes, and an erase across it visits
    /// the chunks there are, not every number up to it.
    #[test]
    fn a_chunk_key_past_any_offset_is_corrupt_and_erases_stay_short() -> Result<()> {
        // The last chunk number a byte offset can reach, less one: inside the erased range.
        let far = u64::MAX / BLOB_CHUNK - 1;
        for damaged in [u64::MAX, u64::MAX / BLOB_CHUNK + 1] {
            with_suffix_records(&[([1u8; 32], [9u8; 32])], |t| {
                let data = t.data()?;
                data.insert(damaged, [7u8; 10].as_slice()).db()?;
                data.insert(far, [7u8; 10].as_slice()).db()?;
                erase_range(data, BLOB_CHUNK, 0, u64::MAX)?;
                assert!(data.get(far).db()?.is_none(), "zeroed and dropped");
                let appended = t.append(&[5u8; 100]);
                assert!(
                    matches!(&appended, Err(Error::Corrupt { what }) if what.contains("past any offset")),
                    "{damaged}: {appended:?}"
                );
                Ok(())
            })?;
        }
        Ok(())
    }

    /// A suffix record whose base is gone (a corrupted store) reads as corrupt, naming the
    /// missing base, and the next suffix on it is refused the same way: never a panic.
    #[test]
    fn a_suffix_record_with_a_missing_base_is_corrupt() -> Result<()> {
        let (a, gone) = ([1u8; 32], [9u8; 32]);
        with_suffix_records(&[(a, gone)], |t| {
            let (index, data) = t.parts()?;
            let read = read_blob(&*index, &*data, BLOB_CHUNK, &a);
            assert!(
                matches!(&read, Err(Error::Corrupt { what }) if what.contains(&hex::encode(gone)) && what.contains("missing")),
                "{read:?}"
            );
            let next = vec![b'x'; 610];
            let put = acquire_blob_after(t, &sha256(&next).0, &next, &a);
            assert!(
                matches!(&put, Err(Error::Corrupt { what }) if what.contains("missing")),
                "{put:?}"
            );
            Ok(())
        })
    }

    /// Two suffix records based on each other (a corrupted store) make the next suffix's base
    /// search report corruption instead of walking the cycle for ever.
    #[test]
    fn a_cycle_of_suffix_records_is_corrupt_not_an_endless_walk() -> Result<()> {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        with_suffix_records(&[(a, b), (b, a)], |t| {
            let next = vec![b'x'; 610];
            let result = acquire_blob_after(t, &sha256(&next).0, &next, &a);
            assert!(
                matches!(&result, Err(Error::Corrupt { what }) if what.contains("does not descend")),
                "{result:?}"
            );
            let (index, data) = t.parts()?;
            assert!(matches!(
                read_blob(&*index, &*data, BLOB_CHUNK, &a),
                Err(Error::Corrupt { .. })
            ));
            Ok(())
        })
    }

    /// Appends keep the stream's last chunk in memory: records read back whole inside the
    /// transaction (reads write the pending chunk first) and after the commit, and the chunks
    /// are laid out as when every append wrote its chunk (full chunks, then the rest).
    #[test]
    fn appended_records_read_back_before_and_after_the_commit() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = redb::Database::create(dir.path().join("t.redb")).db()?;
        let records: Vec<Vec<u8>> = [100usize, 5000, 10, 4032, 3]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 7 + j) as u8).collect())
            .collect();
        let wtx = db.begin_write().db()?;
        let mut offsets = Vec::new();
        {
            let mut t = BlobTables::open(&wtx, BLOB_CHUNK)?;
            for (i, record) in records.iter().enumerate() {
                offsets.push(t.append(record)?);
                if i == 2 {
                    // A read in the middle sees every record so far.
                    let got =
                        read_range(&*t.data()?, BLOB_CHUNK, offsets[1], records[1].len() as u64)?;
                    assert_eq!(got.as_deref(), Some(records[1].as_slice()));
                }
            }
            t.flush()?;
        }
        wtx.commit().db()?;
        let total: usize = records.iter().map(Vec::len).sum();
        assert_eq!(offsets[4] as usize, total - 3);
        let rtx = db.begin_read().db()?;
        let data = rtx.open_table(super::super::tables::BLOB_DATA).db()?;
        for (record, offset) in records.iter().zip(&offsets) {
            let got = read_range(&data, BLOB_CHUNK, *offset, record.len() as u64)?;
            assert_eq!(got.as_deref(), Some(record.as_slice()));
        }
        let last = data.last().db()?.map(|(k, v)| (k.value(), v.value().len()));
        let chunk = BLOB_CHUNK as usize;
        assert_eq!(last, Some(((total / chunk) as u64, total % chunk)));
        Ok(())
    }

    /// Dropping the tables without a flush still writes the pending chunk (a commit needs them
    /// dropped first, so it always holds it).
    #[test]
    fn a_drop_writes_the_pending_chunk() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db = redb::Database::create(dir.path().join("t.redb")).db()?;
        let wtx = db.begin_write().db()?;
        {
            let mut t = BlobTables::open(&wtx, BLOB_CHUNK)?;
            t.append(b"hello")?;
            t.append_all(&[b"wor", b"ld"])?;
        }
        wtx.commit().db()?;
        let rtx = db.begin_read().db()?;
        let data = rtx.open_table(super::super::tables::BLOB_DATA).db()?;
        assert_eq!(
            read_range(&data, BLOB_CHUNK, 0, 10)?.as_deref(),
            Some(b"helloworld".as_slice())
        );
        Ok(())
    }

    /// A blob that does not compress is stored raw from the caller's encoding (no record
    /// built): it reads back as its bytes, two bytes longer than them in the stream.
    #[test]
    fn an_incompressible_blob_is_stored_raw_and_reads_back() -> Result<()> {
        // 320 KB of SHA-256 output: nothing for zstd to find.
        let bytes: Vec<u8> = (0..10_000u32)
            .flat_map(|i| sha256(&i.to_le_bytes()).0)
            .collect();
        let object = crate::object::Object::file_bytes(
            crate::object::FilesystemSource {
                filesystem_id: "ab".repeat(32),
                path: "/r.bin".into(),
            },
            bytes.clone(),
        )?;
        let encoded = EncodedBlob::of(&object, Some(&bytes));
        let held = encoded.as_ref().map(EncodedBlob::len);
        assert_eq!(held, Some(2), "only the raw header is held");
        let hash = sha256(&bytes).0;
        with_suffix_records(&[], |t| {
            let stored = acquire_blob(t, &hash, &bytes, encoded.as_ref())?;
            assert_eq!(stored, Some(bytes.len() as u64 + 2));
            let (index, data) = t.parts()?;
            assert_eq!(
                read_blob(&*index, &*data, BLOB_CHUNK, &hash)?,
                Some(bytes.clone())
            );
            Ok(())
        })
    }
}
