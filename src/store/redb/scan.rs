//! The page scan of a damaged store file (salvage): redb B-tree leaves read outside redb, for
//! when the tables cannot be reached through their roots. redb writes new roots at the end of
//! the file, so a truncated file has usually lost them; a damaged header has lost the commit
//! slots that point at them.
//!
//! Every 4 KiB-aligned page whose first byte marks a leaf is read in each key and value shape
//! the store's tables use (fixed or variable widths, see `tables`). Every entry that lays out
//! sensibly is a *candidate*: the page may be stale (freed by a later commit, so it holds an
//! older version of its rows) or not a leaf of that table at all. Nothing here is trusted:
//! salvage keeps a candidate only when it verifies. A log record must chain, or its op bodies
//! must hash to its digests. A body must hash to the digest its record holds. Documents and
//! contents must hash to their names, and a file's id must be the hash of its path.
//!
//! redb's leaf (`tree_store/btree_base.rs`, redb 4): byte 0 is the page type (1: leaf), bytes
//! 2..4 the number of entries (u16 LE). Then, when keys are variable, one u32 LE end offset per
//! key; when values are variable, one per value. Then the keys, then the values. Offsets count
//! from the page's start. Fixed-width integers are little-endian, and a tuple of fixed-width
//! elements is their concatenation.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use redb::Database;

use super::codec::{self, DocRec, TxHeaderRec};
use super::tables::{BLOB_CHUNK, BLOB_CHUNK_KEY, BLOB_DATA, BLOB_INDEX, DOC_DATA, DOC_INDEX, META};
use super::{StorageResult as _, blobs, docs, verify};
use crate::error::Result;

/// redb's page type byte of a leaf.
const LEAF: u8 = 1;
/// The grain pages are looked for at.
const PAGE: usize = 4096;
/// The longest leaf read: a leaf with a large value spans a higher-order page.
const MAX_LEAF: usize = 1 << 20;
/// How much of the file is read at once (plus [`MAX_LEAF`] past it).
const WINDOW: usize = 32 << 20;
/// Transaction ids, sequences and chunk numbers beyond this are not plausible.
const MAX_ID: u64 = 1 << 53;

/// Candidate rows found in leaf pages, by the table they may belong to.
#[derive(Default)]
pub(super) struct Scan {
    /// `tx_log`: tx → log records that decode.
    pub(super) headers: BTreeMap<u64, Vec<TxHeaderRec>>,
    /// `tx_ops`: (tx, op index) → op bodies as stored.
    pub(super) bodies: BTreeMap<(u64, u32), Vec<Vec<u8>>>,
    /// `evicted_ops`: (tx, op index) → evicting tx.
    pub(super) evicted: HashMap<(u64, u32), Vec<u64>>,
    /// `doc_data`: sequence → document records that decode.
    pub(super) doc_data: BTreeMap<u64, Vec<Vec<u8>>>,
    /// `doc_index`: object hash → (sequence, references, file bytes kept).
    pub(super) doc_index: HashMap<[u8; 32], Vec<(u64, u64, bool)>>,
    /// `blob_chunks`: chunk number → chunk bytes.
    pub(super) chunks: BTreeMap<u64, Vec<Vec<u8>>>,
    /// `blob_index`: content hash → (offset, length, references).
    pub(super) blob_index: HashMap<[u8; 32], Vec<(u64, u64, u64)>>,
    /// `entity_ids`: eid → entity ids (hash ids only: 33 bytes as `codec::id_key`).
    pub(super) entity_ids: HashMap<u64, Vec<String>>,
    /// `entity_ids` of files named by their source (format 6): eid → (filesystem key, path).
    pub(super) entity_sources: HashMap<u64, Vec<(Vec<u8>, String)>>,
    /// `filesystem_ids` (number → id) and `filesystems` (id → number): filesystem number →
    /// the ids found for it.
    pub(super) filesystem_ids: HashMap<u32, Vec<String>>,
    /// `versions`: (eid, tx, op index) of each row that decodes.
    pub(super) versions: Vec<(u64, u64, u32)>,
    /// `entities` and `stat_cache`: variable key → variable value.
    pub(super) var_var: Vec<(Vec<u8>, Vec<u8>)>,
    /// `paths`: variable key → eid.
    pub(super) var_u64: Vec<Vec<u8>>,
    /// Leaf pages seen.
    pub(super) leaves: usize,
}

/// The entries of the leaf at the start of `page` read with key width `key` and value width
/// `value` (`None`: variable), when they lay out sensibly.
fn entries(page: &[u8], key: Option<usize>, value: Option<usize>) -> Option<Vec<(&[u8], &[u8])>> {
    if page.first() != Some(&LEAF) || page.len() < 4 {
        return None;
    }
    let n = u16::from_le_bytes([page[2], page[3]]) as usize;
    if n == 0 {
        return None;
    }
    let offsets = |at: usize| -> Option<Vec<usize>> {
        (0..n)
            .map(|i| {
                let b = page.get(at + 4 * i..at + 4 * i + 4)?;
                Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            })
            .collect()
    };
    let mut at = 4;
    let key_ends = match key {
        None => {
            let ends = offsets(at)?;
            at += 4 * n;
            Some(ends)
        }
        Some(_) => None,
    };
    let value_ends = match value {
        None => {
            let ends = offsets(at)?;
            at += 4 * n;
            Some(ends)
        }
        Some(_) => None,
    };
    let key_ends = match (key_ends, key) {
        (Some(ends), _) => ends,
        (None, Some(width)) => (1..=n).map(|i| at + width * i).collect(),
        (None, None) => return None,
    };
    let keys_end = *key_ends.last()?;
    let value_ends = match (value_ends, value) {
        (Some(ends), _) => ends,
        (None, Some(width)) => (1..=n).map(|i| keys_end + width * i).collect(),
        (None, None) => return None,
    };
    let mut out = Vec::with_capacity(n);
    let (mut key_at, mut value_at) = (at, keys_end);
    for (k, v) in key_ends.iter().zip(&value_ends) {
        if *k < key_at || *v < value_at || *v > page.len() || *k > keys_end {
            return None;
        }
        out.push((&page[key_at..*k], &page[value_at..*v]));
        (key_at, value_at) = (*k, *v);
    }
    // Fixed-width leaves fit one small page: anything longer is not one.
    if key.is_some() && value.is_some() && value_at > PAGE {
        return None;
    }
    Some(out)
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn hash_of(bytes: &[u8]) -> Option<[u8; 32]> {
    bytes.try_into().ok()
}

/// A `(tx, op index)` key, when plausible.
fn op_key(key: &[u8]) -> Option<(u64, u32)> {
    let (tx, n) = (u64_at(key, 0)?, u32_at(key, 8)?);
    (key.len() == 12 && tx > 0 && tx < MAX_ID && n < 1 << 20).then_some((tx, n))
}

/// A `(&[u8], &str)` key of `paths` and `stat_cache` (redb's tuple of variable-width
/// elements: the first one's length as a varint, then both), when its path can be a file's:
/// absolute (a canonical path), and not ending in `/`. Any leaf of variable keys reads in
/// `paths`' shape too, each key then led by the value offsets it does not have: `meta`'s read
/// as a filesystem id of those offsets and `blob_` and a path `chunk_bytes`, which salvage
/// named as a lost file; and a key of `directories` (format 9, same shape, a `u32` value)
/// names a directory.
pub(super) fn split_path_key(key: &[u8]) -> Option<(&[u8], &str)> {
    let (fs, path) = split_tuple_key(key)?;
    (path.starts_with('/') && !path.ends_with('/')).then_some((fs, path))
}

/// A `(&[u8], &str)` key as redb lays it out, whatever the path.
fn split_tuple_key(key: &[u8]) -> Option<(&[u8], &str)> {
    let (len, used) = match *key.first()? {
        n @ 0..=253 => (n as usize, 1),
        254 => (
            u16::from_le_bytes(key.get(1..3)?.try_into().ok()?) as usize,
            3,
        ),
        255 => (u32_at(key, 1)? as usize, 5),
    };
    let first = key.get(used..used + len)?;
    let second = std::str::from_utf8(key.get(used + len..)?).ok()?;
    Some((first, second))
}

impl Scan {
    /// Scans the file at `file` (`len` bytes of it, the rest reading as zeros) for leaves.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub(super) fn file(file: &File, len: u64) -> io::Result<Scan> {
        let mut scan = Scan::default();
        let len = len as usize;
        let mut start = 0usize;
        let mut buf = Vec::new();
        while start < len {
            let end = (start + WINDOW + MAX_LEAF).min(len);
            buf.resize(end - start, 0);
            let mut done = 0;
            while done < buf.len() {
                match file.read_at(&mut buf[done..], (start + done) as u64) {
                    Ok(0) => {
                        buf[done..].fill(0);
                        break;
                    }
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let mut at = 0;
            while at < WINDOW.min(buf.len()) {
                let page = &buf[at..(at + MAX_LEAF).min(buf.len())];
                if page[0] == LEAF {
                    scan.leaves += 1;
                    scan.page(page);
                }
                at += PAGE;
            }
            start += WINDOW;
        }
        Ok(scan)
    }

    /// Takes the candidates of one leaf page in every shape.
    fn page(&mut self, page: &[u8]) {
        // u64 → bytes: tx_log, doc_data, blob_chunks (entity_ids is not needed).
        if let Some(rows) = entries(page, Some(8), None) {
            let mut other = Vec::new();
            for (key, value) in &rows {
                let Some(k) = u64_at(key, 0).filter(|k| *k < MAX_ID) else {
                    continue;
                };
                if let Ok(header) = codec::decode_header(value, "a scanned log record") {
                    push(self.headers.entry(k).or_default(), header);
                } else if codec::decode::<DocRec>(value, "a scanned document").is_ok() {
                    push(self.doc_data.entry(k).or_default(), value.to_vec());
                } else if value.len() == 33
                    && let Ok(id) = codec::id_of_key(value, "a scanned entity id")
                {
                    push(self.entity_ids.entry(k).or_default(), id);
                } else if let Ok(codec::StoredEntityId::Source { fs_key, path }) =
                    codec::decode_entity_id(value, "a scanned entity source")
                    && (codec::fs_number_of_key(&fs_key).is_some()
                        || codec::id_of_key(&fs_key, "a scanned filesystem").is_ok())
                {
                    push(self.entity_sources.entry(k).or_default(), (fs_key, path));
                } else {
                    other.push((k, *value));
                }
            }
            // A chunk fills a page: a leaf holds one (two while the stream is tiny).
            if rows.len() <= 2 && other.len() == rows.len() {
                for (k, value) in other {
                    if value.len() as u64 <= BLOB_CHUNK {
                        push(self.chunks.entry(k).or_default(), value.to_vec());
                    }
                }
            }
        }
        if let Some(rows) = entries(page, Some(24), None) {
            for (key, value) in rows {
                if let (Some(eid), Some(tx), Ok(rec)) = (
                    u64_at(key, 0),
                    u64_at(key, 16),
                    codec::decode_version(value, "a scanned version"),
                ) && tx > 0
                    && tx < MAX_ID
                {
                    self.versions.push((eid, tx, rec.0.op));
                }
            }
        }
        if let Some(rows) = entries(page, Some(12), None) {
            for (key, value) in rows {
                if let Some(k) = op_key(key) {
                    push(self.bodies.entry(k).or_default(), value.to_vec());
                }
            }
        }
        if let Some(rows) = entries(page, Some(12), Some(8)) {
            for (key, value) in rows {
                if let (Some((tx, n)), Some(by)) = (op_key(key), u64_at(value, 0))
                    && by >= tx
                    && by < MAX_ID
                {
                    push(self.evicted.entry((tx, n)).or_default(), by);
                }
            }
        }
        if let Some(rows) = entries(page, Some(32), Some(24)) {
            for (key, value) in rows {
                let (Some(hash), Some(offset), Some(len), Some(refs)) = (
                    hash_of(key),
                    u64_at(value, 0),
                    u64_at(value, 8),
                    u64_at(value, 16),
                ) else {
                    continue;
                };
                if offset < MAX_ID && len > 0 && len < 1 << 40 && refs < 1 << 40 {
                    push(
                        self.blob_index.entry(hash).or_default(),
                        (offset, len, refs),
                    );
                }
            }
        }
        if let Some(rows) = entries(page, Some(32), Some(17)) {
            for (key, value) in rows {
                let (Some(hash), Some(seq), Some(refs), Some(&kept)) = (
                    hash_of(key),
                    u64_at(value, 0),
                    u64_at(value, 8),
                    value.get(16),
                ) else {
                    continue;
                };
                if seq < MAX_ID && refs < 1 << 40 && kept <= 1 {
                    push(
                        self.doc_index.entry(hash).or_default(),
                        (seq, refs, kept == 1),
                    );
                }
            }
        }
        if let Some(rows) = entries(page, None, None) {
            for (key, value) in rows {
                if !key.is_empty() && key.len() < PAGE && value.len() < PAGE {
                    self.var_var.push((key.to_vec(), value.to_vec()));
                }
            }
        }
        if let Some(rows) = entries(page, None, Some(8)) {
            for (key, _) in rows {
                if split_path_key(key).is_some() {
                    self.var_u64.push(key.to_vec());
                }
            }
        }
        // u32 → id (`filesystem_ids`) and id → u32 (`filesystems`): what the numbered keys of
        // `paths`, `stat_cache` and `entity_ids` stand for.
        if let Some(rows) = entries(page, Some(4), None) {
            for (key, value) in rows {
                if let (Some(n), Ok(id)) = (
                    u32_at(key, 0),
                    codec::id_of_key(value, "a scanned filesystem id"),
                ) {
                    push(self.filesystem_ids.entry(n).or_default(), id);
                }
            }
        }
        if let Some(rows) = entries(page, None, Some(4)) {
            for (key, value) in rows {
                if let (Ok(id), Some(n)) = (
                    codec::id_of_key(key, "a scanned filesystem id"),
                    u32_at(value, 0),
                ) {
                    push(self.filesystem_ids.entry(n).or_default(), id);
                }
            }
        }
    }
}

impl Scan {
    /// The chunk size of the blob stream the scan found (`blobs::infer_chunk` of every chunk's
    /// longest version).
    pub(super) fn chunk(&self) -> u64 {
        blobs::infer_chunk(
            self.chunks
                .values()
                .filter_map(|found| found.iter().map(|c| c.len() as u64).max()),
        )
    }

    /// An in-memory database of the content tables (`doc_data`, `doc_index`, `blob_chunks`,
    /// `blob_index`, and `meta`'s chunk size `chunk`) as the scan found them, for the reads that the damaged tables cannot
    /// answer: the longest version of each chunk (the stream is appended to), and for a hash
    /// with several index rows the one whose document or content verifies. The reads through it
    /// verify what they return, as every read does.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(super) fn contents(&mut self, chunk: u64) -> Result<Database> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .db()?;
        let wtx = db.begin_write().db()?;
        {
            wtx.open_table(META)
                .db()?
                .insert(BLOB_CHUNK_KEY, chunk.to_le_bytes().as_slice())
                .db()?;
            let mut chunks = wtx.open_table(BLOB_DATA).db()?;
            for (n, found) in &self.chunks {
                if let Some(longest) = found.iter().max_by_key(|c| c.len()) {
                    chunks.insert(*n, longest.as_slice()).db()?;
                }
            }
            let mut data = wtx.open_table(DOC_DATA).db()?;
            for (seq, found) in &self.doc_data {
                if let Some(first) = found.first() {
                    data.insert(*seq, first.as_slice()).db()?;
                }
            }
            let mut doc_index = wtx.open_table(DOC_INDEX).db()?;
            for (hash, found) in &self.doc_index {
                if let Some(first) = found.first() {
                    doc_index.insert(hash, first).db()?;
                }
            }
            // A row pointing past the stream, or longer than all the chunks found, is not one
            // that can be read (and would make a read allocate its length).
            let stream = self
                .chunks
                .keys()
                .next_back()
                .map_or(0, |n| n.saturating_add(1).saturating_mul(chunk));
            let found_bytes = (self.chunks.len() as u64).saturating_mul(chunk);
            let mut blob_index = wtx.open_table(BLOB_INDEX).db()?;
            for (hash, found) in &mut self.blob_index {
                found.retain(|(offset, len, _)| {
                    offset.saturating_add(*len) <= stream && *len <= found_bytes
                });
                if let Some(first) = found.first() {
                    blob_index.insert(hash, first).db()?;
                }
            }
            // Where a hash has several rows, the one that verifies (deltas and suffix records
            // are read through the others, so those are all in first).
            for (hash, found) in self.doc_index.iter().filter(|(_, f)| f.len() > 1) {
                for row in found {
                    doc_index.insert(hash, row).db()?;
                    if let Ok(Some((rec, _))) = docs::read_doc(&doc_index, &data, hash)
                        && verify::check_doc(hash, &rec).is_ok()
                    {
                        break;
                    }
                }
            }
            for (hash, found) in self.blob_index.iter().filter(|(_, f)| f.len() > 1) {
                for row in found {
                    blob_index.insert(hash, row).db()?;
                    if let Ok(Some(bytes)) = blobs::read_blob(&blob_index, &chunks, chunk, hash)
                        && verify::check_content(hash, &bytes).is_ok()
                    {
                        break;
                    }
                }
            }
        }
        wtx.commit().db()?;
        Ok(db)
    }
}

/// Adds `value` to `list` unless it is there.
fn push<T: PartialEq>(list: &mut Vec<T>, value: T) {
    if !list.contains(&value) {
        list.push(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_reads_in_its_shape_and_not_in_a_wrong_one() {
        // Two entries, u64 keys, variable values: "ab" and "cde".
        let mut page = vec![0u8; PAGE];
        page[0] = LEAF;
        page[2..4].copy_from_slice(&2u16.to_le_bytes());
        let keys_at = 4 + 8;
        let values_at = keys_at + 16;
        page[4..8].copy_from_slice(&((values_at + 2) as u32).to_le_bytes());
        page[8..12].copy_from_slice(&((values_at + 5) as u32).to_le_bytes());
        page[keys_at..keys_at + 8].copy_from_slice(&7u64.to_le_bytes());
        page[keys_at + 8..keys_at + 16].copy_from_slice(&9u64.to_le_bytes());
        page[values_at..values_at + 5].copy_from_slice(b"abcde");
        let rows = entries(&page, Some(8), None).unwrap_or_default();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, 7u64.to_le_bytes());
        assert_eq!(rows[0].1, b"ab");
        assert_eq!(rows[1].1, b"cde");
        assert!(entries(&page, None, None).is_none(), "offsets out of order");
        page[0] = 2;
        assert!(entries(&page, Some(8), None).is_none(), "a branch page");
        assert_eq!(split_path_key(b"\x02ab/x"), Some((&b"ab"[..], "/x")));
        assert_eq!(split_path_key(b"\x09ab"), None);
        assert_eq!(
            split_path_key(b"\x02ab/x/"),
            None,
            "a directory's key (directories), not a file's"
        );
        assert_eq!(
            split_path_key(b"\x05blob_chunk_bytes"),
            None,
            "a relative path is no file's"
        );
    }

    /// A chunk found under a damaged key (below `MAX_ID`, but past what a stream of u64 offsets
    /// reaches) does not overflow the stream's length, and the rows within the stream are kept.
    #[test]
    fn a_chunk_under_a_damaged_key_does_not_overflow_the_stream() -> Result<()> {
        use redb::ReadableDatabase as _;
        let record = codec::encode_blob(b"text");
        let hash = crate::hash::sha256(b"text").0;
        let mut scan = Scan::default();
        scan.chunks.insert(0, vec![record.clone()]);
        scan.chunks.insert(MAX_ID - 1, vec![vec![0; 8]]);
        scan.blob_index
            .insert(hash, vec![(0, record.len() as u64, 1)]);
        let db = scan.contents(BLOB_CHUNK)?;
        let rtx = db.begin_read().db()?;
        let index = rtx.open_table(BLOB_INDEX).db()?;
        let data = rtx.open_table(BLOB_DATA).db()?;
        assert_eq!(
            blobs::read_blob(&index, &data, BLOB_CHUNK, &hash)?.as_deref(),
            Some(b"text".as_slice())
        );
        Ok(())
    }
}
