//! Content addressing: blobs (bytes by SHA-256) and documents (hashed fields by object hash),
//! each stored once in append order and reference-counted.
//!
//! A blob's count is the number of documents that use it (by `content_hash`, or by `file_hash`
//! when the raw bytes of a binary file are kept); a document's count is the number of version
//! rows that point at it. Eviction releases what it unreferenced; `gc` recounts from scratch.

use redb::{ReadableTable, Table};

use super::Db as _;
use super::codec::{self, DocRec};
use super::tables::BLOB_CHUNK;
use crate::error::{Error, Result};
use crate::hash::{Hash, sha256};

/// The blob tables of a write transaction.
pub(crate) struct BlobTables<'t> {
    /// `blob_index`.
    pub index: Table<'t, [u8; 32], (u64, u64, u64)>,
    /// `blob_chunks`.
    pub data: Table<'t, u64, &'static [u8]>,
}

/// The document tables of a write transaction.
pub(crate) struct DocTables<'t> {
    /// `doc_index`.
    pub index: Table<'t, [u8; 32], (u64, u64, bool)>,
    /// `doc_data`.
    pub data: Table<'t, u64, &'static [u8]>,
}

fn next_seq(data: &impl ReadableTable<u64, &'static [u8]>) -> Result<u64> {
    Ok(data.last().db()?.map_or(1, |(k, _)| k.value() + 1))
}

/// Appends `record` to the blob stream; returns its offset.
fn append(chunks: &mut Table<'_, u64, &'static [u8]>, record: &[u8]) -> Result<u64> {
    let last = chunks
        .last()
        .db()?
        .map(|(k, v)| (k.value(), v.value().to_vec()));
    let (mut chunk_no, mut tail) = match last {
        Some((no, bytes)) if (bytes.len() as u64) < BLOB_CHUNK => (no, bytes),
        Some((no, _)) => (no + 1, Vec::new()),
        None => (0, Vec::new()),
    };
    let offset = chunk_no * BLOB_CHUNK + tail.len() as u64;
    let mut rest = record;
    while !rest.is_empty() {
        let room = BLOB_CHUNK as usize - tail.len();
        let (now, later) = rest.split_at(room.min(rest.len()));
        tail.extend_from_slice(now);
        chunks.insert(chunk_no, tail.as_slice()).db()?;
        rest = later;
        if tail.len() as u64 == BLOB_CHUNK {
            chunk_no += 1;
            tail.clear();
        }
    }
    Ok(offset)
}

/// Reads `len` bytes at `offset` of the blob stream; `None` when a chunk is missing or short.
fn read_range(
    chunks: &impl ReadableTable<u64, &'static [u8]>,
    offset: u64,
    len: u64,
) -> Result<Option<Vec<u8>>> {
    let mut out = Vec::with_capacity(len as usize);
    if len == 0 {
        return Ok(Some(out));
    }
    let first = offset / BLOB_CHUNK;
    let last = (offset + len - 1) / BLOB_CHUNK;
    for no in first..=last {
        let Some(chunk) = chunks.get(no).db()? else {
            return Ok(None);
        };
        let bytes = chunk.value();
        let start = if no == first {
            (offset % BLOB_CHUNK) as usize
        } else {
            0
        };
        let want = (len as usize - out.len()).min(BLOB_CHUNK as usize - start);
        let Some(piece) = bytes.get(start..start + want) else {
            return Ok(None);
        };
        out.extend_from_slice(piece);
    }
    Ok(Some(out))
}

/// Overwrites `len` bytes at `offset` with zeros, dropping chunks that become all zero (except
/// the last, which the next append extends).
fn erase_range(chunks: &mut Table<'_, u64, &'static [u8]>, offset: u64, len: u64) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let last_no = chunks.last().db()?.map_or(0, |(k, _)| k.value());
    let first = offset / BLOB_CHUNK;
    let last = (offset + len - 1) / BLOB_CHUNK;
    for no in first..=last {
        let Some(mut bytes) = chunks.get(no).db()?.map(|v| v.value().to_vec()) else {
            continue;
        };
        let chunk_start = no * BLOB_CHUNK;
        let from = offset.max(chunk_start) - chunk_start;
        let to = (offset + len).min(chunk_start + BLOB_CHUNK) - chunk_start;
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
    encoded: Option<&super::EncodedBlob>,
) -> Result<Option<u64>> {
    let existing = t.index.get(hash).db()?.map(|v| v.value());
    match existing {
        Some((offset, len, refs)) => {
            t.index.insert(hash, (offset, len, refs + 1)).db()?;
            Ok(None)
        }
        None => {
            let record = match encoded.and_then(|e| e.record_for(hash)) {
                Some(record) => record.to_vec(),
                None => codec::encode_blob(bytes),
            };
            let offset = append(&mut t.data, &record)?;
            t.index
                .insert(hash, (offset, record.len() as u64, 1))
                .db()?;
            Ok(Some(record.len() as u64))
        }
    }
}

/// Drops one reference to a blob, erasing it at zero; returns the bytes freed.
pub(crate) fn release_blob(t: &mut BlobTables<'_>, hash: &[u8; 32]) -> Result<u64> {
    let Some((offset, len, refs)) = t.index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(0);
    };
    if refs > 1 {
        t.index.insert(hash, (offset, len, refs - 1)).db()?;
        return Ok(0);
    }
    t.index.remove(hash).db()?;
    erase_blob(t, offset, len)?;
    Ok(len)
}

/// Erases a blob's record from the stream (its index row is the caller's).
pub(crate) fn erase_blob(t: &mut BlobTables<'_>, offset: u64, len: u64) -> Result<()> {
    erase_range(&mut t.data, offset, len)
}

/// Reads a blob's bytes.
///
/// # Errors
/// [`Error::Corrupt`] when the index points past the stream or the record does not decode.
pub(crate) fn read_blob(
    index: &impl ReadableTable<[u8; 32], (u64, u64, u64)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
) -> Result<Option<Vec<u8>>> {
    let Some((offset, len, _)) = index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(None);
    };
    read_at(data, hash, offset, len).map(Some)
}

/// Reads and decodes the blob record of `hash` at (`offset`, `len`).
///
/// # Errors
/// [`Error::Corrupt`] when the range is missing or the record does not decode.
pub(crate) fn read_at(
    data: &impl ReadableTable<u64, &'static [u8]>,
    hash: &[u8; 32],
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    let record = read_range(data, offset, len)?.ok_or_else(|| {
        Error::corrupt(format!(
            "blob {} points at bytes {offset}..{} of the blob stream, which are missing",
            hex::encode(hash),
            offset + len
        ))
    })?;
    codec::decode_blob(&record, &format!("blob {}", hex::encode(hash)))
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
    encoded: Option<&super::EncodedBlob>,
    delta_base: Option<&[u8; 32]>,
    base_cache: Option<&super::doc_delta::BaseCache>,
) -> Result<NewDoc> {
    let key = object.object_hash().0;
    let mut stored = 0;
    if let Some(bytes) = bytes {
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
                stored += acquire_blob(blobs, &hash.0, content.as_bytes(), encoded)?.unwrap_or(0);
            }
            let mut file_blob = false;
            if let (Some(bytes), Some(file_hash)) = (keep_bytes, object.file_hash()) {
                stored += acquire_blob(blobs, &file_hash.0, bytes, encoded)?.unwrap_or(0);
                file_blob = true;
            }
            // The object keeps its canonical fields JSON (it hashed it): no second serialising.
            let fields = match delta_base {
                Some(base) => super::doc_delta::encode(
                    &docs.index,
                    &docs.data,
                    base,
                    base_cache,
                    object.metadata_json(),
                )?,
                None => object.metadata_json().to_string(),
            };
            let rec = DocRec {
                file_hash: object.file_hash().map(|h| h.0),
                content_hash: object.content_hash().map(|h| h.0),
                fields,
            };
            let record = codec::encode(&rec)?;
            let seq = next_seq(&docs.data)?;
            docs.data.insert(seq, record.as_slice()).db()?;
            docs.index.insert(&key, (seq, 0, file_blob)).db()?;
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
        Some((rec, file_blob)) => Ok(Some((
            super::doc_delta::resolved(index, data, rec)?,
            file_blob,
        ))),
        None => Ok(None),
    }
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
    let Some((seq, _, file_blob)) = index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(None);
    };
    let record = data.get(seq).db()?.ok_or_else(|| {
        Error::corrupt(format!(
            "document {} points at missing record {seq}",
            hex::encode(hash)
        ))
    })?;
    let rec = codec::decode(record.value(), &format!("document {}", hex::encode(hash)))?;
    Ok(Some((rec, file_blob)))
}

/// Adds one version reference to a document.
pub(crate) fn reference_doc(docs: &mut DocTables<'_>, hash: &[u8; 32]) -> Result<()> {
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
    Ok(())
}

/// Drops one version reference to a document, deleting it (and releasing its blobs) at zero;
/// returns the bytes freed.
pub(crate) fn release_doc(
    docs: &mut DocTables<'_>,
    blobs: &mut BlobTables<'_>,
    hash: &[u8; 32],
) -> Result<u64> {
    let Some((seq, refs, file_blob)) = docs.index.get(hash).db()?.map(|v| v.value()) else {
        return Ok(0);
    };
    if refs > 1 {
        docs.index.insert(hash, (seq, refs - 1, file_blob)).db()?;
        return Ok(0);
    }
    docs.index.remove(hash).db()?;
    let record = docs.data.remove(seq).db()?.map(|v| v.value().to_vec());
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
