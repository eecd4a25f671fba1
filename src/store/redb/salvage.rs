//! Salvage (`strata fsck --salvage NEW_DIR`): a new store made of everything a damaged store
//! still holds that verifies, and an exact account of what was lost.
//!
//! The damaged file is opened through an [`overlay::Overlay`] (never written; a truncated file
//! is padded with zeros back to the length its header records) and read under the storage
//! guard, table by table: an iteration that meets a damaged page is taken up again from the
//! other end and by lookups of the keys the log names, so one damaged page loses only what it
//! holds. The log is then replayed into a fresh store, transaction by transaction with the same
//! ids, times and origins: an op is kept when its body hashes to its digest and its document
//! and contents read back and hash right (a content lost from the store is read again from the
//! file that held it when that file still hashes to it). A transaction whose record is lost
//! stays as an empty record, so that ids keep their meaning; a lost op leaves its transaction's
//! record without it. Every record is chained anew, so the new store verifies; where nothing
//! was lost its chain equals the old one. A record whose key was damaged (found far past the
//! log's end) is put back in the one hole of the log it verifies for, or left out.
//!
//! What the tables cannot give (a truncated file lost the roots redb writes at its end; a
//! damaged header lost the commit slots) is looked for by a scan of the file's pages for the
//! leaves of the log and content tables (`scan`). A scanned row is a candidate, kept only when
//! it verifies: a log record that chains from the one before it (or that the one after it
//! chains from, or whose op bodies hash to its digests), a body that hashes to its record's
//! digest, documents and contents that hash to their names, a file whose id is the hash of its
//! path. A stale page (freed by a later commit) holds older versions of the same rows, so for
//! a transaction found twice the version that chains wins.

use super::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use redb::{Database, ReadableDatabase, ReadableTable, StorageBackend, TableHandle};

use super::codec::{DocRec, OpRec, TxHeaderRec};
use super::tables::*;
use super::{RedbStore, WriteTables, blobs};
use crate::error::{Error, Result};
use crate::hash::sha256;
use crate::store::rescue::{Loss, Rebuild, SalvageReport};

/// Runs one read of the damaged store under the guard: `None` (and the error in `failed`) when
/// it met damage.
fn try_read<T>(what: &str, f: impl FnOnce() -> Result<T>) -> std::result::Result<T, String> {
    let flag = AtomicBool::new(false);
    guard::guarded(&flag, what, f).map_err(|e| e.full_message())
}

/// Whether the store has table `def` (not when it was made before the table existed, or when
/// that cannot be told).
fn has_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    db: &dyn ReadableDatabase,
    def: redb::TableDefinition<K, V>,
) -> bool {
    try_read(&format!("opening {}", def.name()), || {
        let rtx = db.begin_read().db()?;
        Ok(!matches!(
            rtx.open_table(def),
            Err(redb::TableError::TableDoesNotExist(_))
        ))
    })
    .unwrap_or(false)
}

/// The rows of a table read as far as they can be: forward, and on damage backward from the
/// end; `Err` with what stopped a pass that did not finish.
fn read_rows<K, V, KO: Ord, VO>(
    db: &dyn ReadableDatabase,
    def: redb::TableDefinition<K, V>,
    own: impl Fn(K::SelfType<'_>, V::SelfType<'_>) -> (KO, VO) + Copy,
) -> (BTreeMap<KO, VO>, Option<String>)
where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    let mut rows = BTreeMap::new();
    let forward = try_read(&format!("reading {}", def.name()), || {
        let rtx = db.begin_read().db()?;
        let table = rtx.open_table(def).db()?;
        for entry in table.iter().db()? {
            let (k, v) = entry.db()?;
            let (k, v) = own(k.value(), v.value());
            rows.insert(k, v);
        }
        Ok(())
    });
    let Err(problem) = forward else {
        return (rows, None);
    };
    let _ = try_read(&format!("reading {} backward", def.name()), || {
        let rtx = db.begin_read().db()?;
        let table = rtx.open_table(def).db()?;
        for entry in table.iter().db()?.rev() {
            let (k, v) = entry.db()?;
            let (k, v) = own(k.value(), v.value());
            rows.insert(k, v);
        }
        Ok(())
    });
    (rows, Some(problem))
}

/// The magic number every redb file starts with.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
/// Where redb's header keeps its flags (after its 9-byte magic number).
const GOD_BYTE: u64 = 9;
/// The flag that makes a reader serve the older of the two commit slots.
const PRIMARY_UNFLUSHED: u8 = 8;

/// The damaged store, opened for reading (through an overlay: nothing reaches the file). It is
/// closed without redb's close-time commit, which on a damaged allocator state can panic.
struct Damaged(Option<Box<dyn ReadableDatabase>>);

impl Damaged {
    fn new(db: impl ReadableDatabase + 'static) -> Self {
        Damaged(Some(Box::new(db)))
    }
}

impl std::ops::Deref for Damaged {
    type Target = dyn ReadableDatabase;

    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Some(db) => &**db,
            // Only `drop` takes it, and nothing reads a value being dropped.
            None => unreachable!("a damaged store read after it was closed"),
        }
    }
}

impl Drop for Damaged {
    fn drop(&mut self) {
        if let Some(db) = self.0.take() {
            guard::close_without_writing(db);
        }
    }
}

/// Opens the store file at `path` through an overlay, padded back to its recorded length when
/// it was truncated: (the database, (file length, length read) when padded).
///
/// `previous`: read the commit before the latest one (redb keeps two commit slots; a reader in
/// the multi-process modes serves the older one when the header says the newer one may not be
/// flushed, which the overlay's copy of the header is made to say).
fn open_damaged(path: &Path, previous: bool) -> Result<(Damaged, Option<(u64, u64)>)> {
    let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
    let file = std::fs::File::open(path).map_err(io)?;
    // A process that holds the store (a daemon) would be writing under the read: refused.
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_err() {
        return Err(Error::StoreLocked {
            path: path.to_path_buf(),
            holder: path
                .parent()
                .map_or_else(|| "unknown holder".into(), open::lock_holder),
        });
    }
    let file_len = file.metadata().map_err(io)?.len();
    // The length the header records (a truncated file is shorter): a read-write open (its
    // writes stay in memory) names it when it refuses the file.
    let recorded = try_read("reading the header", || {
        let overlay = overlay::Overlay::new(file.try_clone().map_err(io)?, file_len).map_err(io)?;
        Database::builder()
            .create_with_backend(overlay)
            .db()
            .map(drop)
    })
    .err()
    .and_then(|e| {
        let at = e.find("layout_len=")? + 11;
        e[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u64>()
            .ok()
    });
    let len = recorded.unwrap_or(file_len).max(file_len);
    let mut last = String::new();
    // Reads past the end would poison the handle: an unknown length reads generously.
    let mut tries = vec![len];
    if recorded.is_none() {
        tries.insert(0, file_len.next_power_of_two().max(file_len));
    }
    while let Some(len) = tries.pop() {
        let overlay = || -> Result<overlay::Overlay> {
            let overlay = overlay::Overlay::new(file.try_clone().map_err(io)?, len).map_err(io)?;
            // Every redb file starts with the same magic number: a damaged one is put back.
            overlay.write(0, &REDB_MAGIC).map_err(io)?;
            if previous {
                let mut god = [0u8; 1];
                overlay.read(GOD_BYTE, &mut god).map_err(io)?;
                overlay
                    .write(GOD_BYTE, &[god[0] | PRIMARY_UNFLUSHED])
                    .map_err(io)?;
            }
            Ok(overlay)
        };
        // Read-only as a reader beside another process's writer first: it loads no allocator
        // state (a truncated file lost it, and a damaged one makes redb panic). A file not closed
        // cleanly needs redb's repair, which a read-write open makes (in memory).
        let opened = try_read("opening the damaged store", || {
            let mut builder = Database::builder();
            builder.set_cache_size(CACHE_BYTES);
            builder.set_concurrency_mode(redb::ConcurrencyMode::SingleWriter);
            builder
                .open_read_only_with_backend(overlay()?)
                .db()
                .map(Damaged::new)
        })
        .or_else(|_| {
            try_read("opening the damaged store", || {
                let mut builder = Database::builder();
                builder.set_cache_size(CACHE_BYTES);
                builder
                    .create_with_backend(overlay()?)
                    .db()
                    .map(Damaged::new)
            })
        });
        match opened {
            Ok(db) => return Ok((db, (len > file_len).then_some((file_len, len)))),
            Err(e) => {
                last = e;
            }
        }
    }
    Err(Error::corrupt(format!(
        "the storage engine cannot read even the header of {} ({last})",
        path.display()
    )))
}

/// The widest run of missing transactions an unbroken log can show between two records it
/// holds: damage loses records a page or a subtree at a time, never this many in a row. A record
/// past such a gap is one whose key was damaged (a flipped high bit makes tx 7 into tx 2^40),
/// and counting the transactions up to it one by one would not end.
const MAX_LOG_GAP: u64 = 1 << 16;

/// The last transaction of the unbroken log whose record keys are `keys` (ascending): the key
/// before the first gap wider than [`MAX_LOG_GAP`] (from 0), or 0 when there is none.
fn unbroken_last(keys: impl IntoIterator<Item = u64>) -> u64 {
    let mut last = 0;
    for key in keys {
        if key.saturating_sub(last) > MAX_LOG_GAP {
            break;
        }
        last = key;
    }
    last
}

/// What the damaged store still holds of its log.
#[derive(Default)]
struct Source {
    /// Log records by tx (`Err`: lost, with why).
    headers: BTreeMap<u64, std::result::Result<TxHeaderRec, String>>,
    /// Op bodies as stored, by (tx, op index).
    bodies: BTreeMap<(u64, u32), Vec<u8>>,
    /// Recorded evictions: (tx, op index) → evicting tx.
    evicted: HashMap<(u64, u32), u64>,
    /// The first transaction whose evictions are recorded.
    evictions_since: u64,
    /// Entities the store listed: id → path.
    entities: BTreeMap<String, Option<String>>,
    /// The entity each op wrote, as the store's version and match rows say: names the entity
    /// of an op whose body is lost.
    op_entities: HashMap<(u64, u32), String>,
    /// The entities an op may have written, as scanned version rows say through an entity
    /// number the scan found several ids for (stale rows of an older numbering beside the live
    /// ones): what names an op whose body is lost when `op_entities` cannot.
    op_candidates: HashMap<(u64, u32), BTreeSet<String>>,
    /// Tables that could not be read through, with why.
    unreadable: Vec<(&'static str, String)>,
    /// Filesystem number → its id, as `filesystem_ids` lists them (format 5).
    filesystems: HashMap<u32, String>,
    /// The blob stream's chunk size, as `meta` says or the first chunks' lengths show.
    chunk: Option<u64>,
    /// Every filesystem id the store names (log headers' lists, `filesystem_ids`): what a
    /// format-8 first write whose header's list is damaged may have named.
    known_filesystems: std::cell::OnceCell<Vec<codec::IdStr>>,
}

/// The id of the file at `path` of filesystem `filesystem_id` (its source's identity hash).
fn file_id(filesystem_id: &str, path: &str) -> Option<String> {
    let file = crate::object::Source::Filesystem(FilesystemSource {
        filesystem_id: filesystem_id.to_string(),
        path: path.to_string(),
    });
    crate::object::sourced_identity(ObjectType::File, &file)
        .ok()
        .map(|id| id.to_hex())
}

/// The filesystem id of a `paths` or `stat_cache` key prefix: its id's key, or its number's
/// (format 5) when `numbers` (`filesystem_ids`) names it.
fn filesystem_of_key(numbers: &HashMap<u32, String>, fs: &[u8]) -> Option<String> {
    match codec::fs_number_of_key(fs) {
        Some(n) => numbers.get(&n).cloned(),
        None => codec::id_of_key(fs, "filesystem id").ok(),
    }
}

impl Source {
    fn read(db: &dyn ReadableDatabase) -> Self {
        let mut source = Source {
            evictions_since: 1,
            ..Source::default()
        };
        let (raw, problem) = read_rows(db, TX_LOG, |k, v| (k, v.to_vec()));
        if let Some(problem) = problem {
            source.unreadable.push(("tx_log", problem));
        }
        for (tx, bytes) in raw {
            let what = format!("header of tx {tx}");
            // A format-8 header whose list of filesystems is damaged: read without it (the
            // chain still checks the rest; `Source::body` finds each first write's filesystem).
            let header = codec::decode_header(&bytes, &what).or_else(|e| {
                codec::decode_header_without_list(&bytes, &what).map_err(|_| e.to_string())
            });
            source.headers.insert(tx, header);
        }
        let (bodies, problem) = read_rows(db, TX_OPS, |k, v| (k, v.to_vec()));
        source.bodies = bodies;
        if let Some(problem) = problem {
            source.unreadable.push(("tx_ops", problem));
        }
        // Bodies an iteration missed, and the records of the ones that are gone, by lookup.
        let wanted: Vec<(u64, u32)> = source
            .headers
            .iter()
            .filter_map(|(tx, h)| h.as_ref().ok().map(|h| (*tx, h.digests.len() as u32)))
            .flat_map(|(tx, count)| (0..count).map(move |n| (tx, n)))
            .filter(|key| !source.bodies.contains_key(key))
            .collect();
        for (tx, n) in wanted {
            if let Ok(Some(bytes)) = try_read("reading an op body", || {
                let rtx = db.begin_read().db()?;
                let table = rtx.open_table(TX_OPS).db()?;
                Ok(table.get((tx, n)).db()?.map(|v| v.value().to_vec()))
            }) {
                source.bodies.insert((tx, n), bytes);
                continue;
            }
            if let Ok(Some(by)) = try_read("reading the record of evictions", || {
                let rtx = db.begin_read().db()?;
                let table = rtx.open_table(EVICTED_OPS).db()?;
                Ok(table.get((tx, n)).db()?.map(|v| v.value()))
            }) {
                source.evicted.insert((tx, n), by);
            }
        }
        if let Ok(Some(since)) = try_read("reading the meta table", || {
            let rtx = db.begin_read().db()?;
            let meta = rtx.open_table(META).db()?;
            match meta.get(EVICTIONS_SINCE).db()? {
                Some(_) => Ok(Some(read_counter(&meta, EVICTIONS_SINCE)?)),
                None => Ok(None),
            }
        }) {
            source.evictions_since = since;
        }
        let from_meta = try_read("reading the blob chunk size", || {
            let rtx = db.begin_read().db()?;
            let meta = rtx.open_table(META).db()?;
            match meta.get(BLOB_CHUNK_KEY).db()? {
                Some(_) => blobs::chunk_size(&meta).map(Some),
                None => Ok(None),
            }
        });
        // The chunks' own lengths win over a `meta` record that damage may have changed.
        let from_stream = try_read("reading the blob chunks' lengths", || {
            let rtx = db.begin_read().db()?;
            blobs::stream_chunk(&rtx.open_table(BLOB_DATA).db()?)
        });
        source.chunk = match (from_meta, from_stream) {
            (_, Ok(Some(seen))) => Some(seen),
            (Ok(Some(chunk)), _) => Some(chunk),
            // Without the key, or without a `meta` that reads (and no page scan may run to
            // say): format 7's chunks are longer than any before (a full one among the first
            // two, when there are two).
            _ => try_read("reading the blob chunks' lengths", || {
                let rtx = db.begin_read().db()?;
                let data = rtx.open_table(BLOB_DATA).db()?;
                let mut lengths = Vec::new();
                for entry in data.iter().db()?.take(2) {
                    lengths.push(entry.db()?.1.value().len() as u64);
                }
                Ok(blobs::infer_chunk(lengths))
            })
            .ok(),
        };
        // The names of what was lost: the entities, and the files that `paths` and the stat
        // cache list (a file's id is its source's identity hash).
        let (numbers, _) = read_rows(db, FILESYSTEM_IDS, |k: u32, v: &[u8]| (k, v.to_vec()));
        for (n, key) in numbers {
            if let Ok(id) = codec::id_of_key(&key, "filesystem id") {
                source.filesystems.insert(n, id);
            }
        }
        // `filesystems` maps the other way: the numbers a damaged `filesystem_ids` lost.
        let (numbers, _) = read_rows(db, FILESYSTEMS, |k: &[u8], v: u32| (v, k.to_vec()));
        for (n, key) in numbers {
            if !source.filesystems.contains_key(&n)
                && let Ok(id) = codec::id_of_key(&key, "filesystem id")
            {
                source.filesystems.insert(n, id);
            }
        }
        let (entities, problem) = read_rows(db, ENTITIES, |k, v| (k.to_vec(), v.to_vec()));
        if let Some(problem) = problem {
            source.unreadable.push(("entities", problem));
        }
        for (key, value) in entities {
            match (
                codec::id_of_key(&key, "entity key"),
                codec::decode_entity(&value, "entity"),
            ) {
                (Ok(id), Ok(codec::StoredEntity::Whole(rec))) => {
                    source.entities.insert(id, rec.source.map(|(_, p)| p));
                }
                // A file whose path `entity_ids` holds (format 6), named below.
                (Ok(id), Ok(codec::StoredEntity::Sourced(_))) => {
                    source.entities.entry(id).or_insert(None);
                }
                _ => {}
            }
        }
        let (ids, _) = read_rows(db, ENTITY_IDS, |k, v: &[u8]| (k, v.to_vec()));
        // A file's id by its number (format 6: its source, whose identity hash is the id).
        let ids: HashMap<u64, String> = ids
            .into_iter()
            .filter_map(
                |(eid, value)| match codec::decode_entity_id(&value, "entity id").ok()? {
                    codec::StoredEntityId::Id(id) => Some((eid, id)),
                    codec::StoredEntityId::Source { fs_key, path } => {
                        let fs = filesystem_of_key(&source.filesystems, &fs_key)?;
                        let id = codec::file_id(&fs, &path).ok()?;
                        source.entities.insert(id.clone(), Some(path));
                        Some((eid, id))
                    }
                },
            )
            .collect();
        let id_of = |eid: u64| ids.get(&eid).cloned();
        let (versions, _) = read_rows(db, VERSIONS, |k, v: &[u8]| (k, v.to_vec()));
        for ((eid, _, tx), value) in versions {
            if let (Ok(rec), Some(id)) = (codec::decode_version(&value, "version"), id_of(eid)) {
                source.op_entities.insert((tx, rec.0.op), id);
            }
        }
        let (matches, _) = read_rows(db, MATCH_OPS, |k, _: ()| (k, ()));
        for (eid, tx, n) in matches.into_keys() {
            if let Some(id) = id_of(eid) {
                source.op_entities.insert((tx, n), id);
            }
        }
        // Keyed by the whole (filesystem, path): each row's path, not one a filesystem.
        let own = |k: (&[u8], &str), _| ((k.0.to_vec(), k.1.to_string()), ());
        let mut paths: Vec<(Vec<u8>, String)> = Vec::new();
        if has_table(db, PATHS) || !has_table(db, PATHS_BY_DIR) {
            // A store before format 10: whole paths.
            let (rows, problem) = read_rows(db, PATHS, |k, _: u64| own(k, ()));
            if let Some(problem) = problem {
                source.unreadable.push(("paths", problem));
            }
            paths.extend(rows.into_keys());
        }
        let mut cached: Vec<(Vec<u8>, String)> = Vec::new();
        if has_table(db, STAT_CACHE) {
            // A store before format 9: whole paths.
            let (rows, problem) = read_rows(db, STAT_CACHE, |k, _: &[u8]| own(k, ()));
            if let Some(problem) = problem {
                source.unreadable.push(("stat_cache", problem));
            }
            cached.extend(rows.into_keys());
        }
        // Format 9's stat cache and format 10's paths: a directory number and a name, the
        // directory's path in `directory_paths` (read once, when either table is there).
        let by_dir = [has_table(db, STAT_BY_DIR), has_table(db, PATHS_BY_DIR)];
        if by_dir.contains(&true) {
            let (dirs, problem) = read_rows(db, DIRECTORY_PATHS, |n, (fs, dir): (&[u8], &str)| {
                (n, (fs.to_vec(), dir.to_string()))
            });
            if let Some(problem) = problem {
                source.unreadable.push(("directory_paths", problem));
            }
            let mut keys = Vec::new();
            if by_dir[0] {
                let (rows, problem) =
                    read_rows(db, STAT_BY_DIR, |k: &[u8], _: &[u8]| (k.to_vec(), ()));
                if let Some(problem) = problem {
                    source.unreadable.push(("stat_by_dir", problem));
                }
                keys.extend(rows.into_keys());
            }
            if by_dir[1] {
                let (rows, problem) =
                    read_rows(db, PATHS_BY_DIR, |k: &[u8], _: u64| (k.to_vec(), ()));
                if let Some(problem) = problem {
                    source.unreadable.push(("paths_by_dir", problem));
                }
                keys.extend(rows.into_keys());
            }
            for key in keys {
                if let Some((n, name)) = super::dirnum::split_row_key(&key)
                    && let Some((fs, dir)) = dirs.get(&n)
                {
                    cached.push((fs.clone(), format!("{dir}{name}")));
                }
            }
        }
        for (fs, path) in paths.into_iter().chain(cached) {
            let Some(filesystem_id) = filesystem_of_key(&source.filesystems, &fs) else {
                continue;
            };
            let file = crate::object::Source::Filesystem(FilesystemSource {
                filesystem_id,
                path: path.clone(),
            });
            // A path whose identity hash is the id names its file for sure: it wins over the
            // entities table's, whose bytes may be the damaged ones.
            if let Ok(id) = crate::object::sourced_identity(ObjectType::File, &file) {
                source.entities.insert(id.to_hex(), Some(path));
            }
        }
        source
    }

    /// Puts back log records whose keys were damaged (read past the unbroken log's end, see
    /// [`unbroken_last`]) at the transaction they verify for: a hole of the log next to a record
    /// it holds (or tx 1) where the record chains from the record before, the record after
    /// chains from it, or every op body at that tx hashes to its digests (a hole the chain
    /// names wins over one where only the bodies verify). A record with no such hole, or more
    /// than one of the kind that decides, stays where it is (and is left out as damaged). Returns
    /// the records put back, as (damaged key, tx).
    fn put_back_misplaced(&mut self) -> Vec<(u64, u64)> {
        let last = unbroken_last(self.headers.keys().copied());
        let misplaced: Vec<u64> = self
            .headers
            .range(last.saturating_add(1)..)
            .filter(|(_, h)| h.is_ok())
            .map(|(k, _)| *k)
            .collect();
        if misplaced.is_empty() {
            return Vec::new();
        }
        let held = |headers: &BTreeMap<u64, std::result::Result<TxHeaderRec, String>>, tx| {
            matches!(headers.get(&tx), Some(Ok(_)))
        };
        // Holes beside a record the log holds, tx 1, and txs with op bodies: O(records).
        let mut holes: BTreeSet<u64> = BTreeSet::from([1]);
        for (&tx, header) in self.headers.range(..=last) {
            if header.is_ok() {
                holes.extend([tx.saturating_sub(1), tx.saturating_add(1)]);
            }
        }
        holes.extend(
            self.bodies
                .keys()
                .map(|(tx, _)| *tx)
                .filter(|tx| *tx <= last),
        );
        holes.retain(|tx| *tx >= 1 && *tx <= last.saturating_add(1) && !held(&self.headers, *tx));
        let links = |from: &[u8; 32], tx: u64, h: &TxHeaderRec| {
            log::next_chain(from, tx, h).is_ok_and(|c| c == h.chain)
        };
        let mut put_back = Vec::new();
        for key in misplaced {
            let Some(Ok(record)) = self.headers.get(&key) else {
                continue;
            };
            let chains = |tx: u64| {
                let before = match tx {
                    1 => Some([0u8; 32]),
                    _ => match self.headers.get(&tx.saturating_sub(1)) {
                        Some(Ok(h)) => Some(h.chain),
                        _ => None,
                    },
                };
                let after = match self.headers.get(&tx.saturating_add(1)) {
                    Some(Ok(h)) => Some(h),
                    _ => None,
                };
                before.is_some_and(|p| links(&p, tx, record))
                    || after.is_some_and(|n| links(&record.chain, tx.saturating_add(1), n))
            };
            let bodies_verify = |tx: u64| {
                !record.digests.is_empty()
                    && (0..record.digests.len() as u32)
                        .all(|n| matches!(self.body(tx, n, record), Some(Ok(_))))
            };
            // The chain names the tx itself, so a hole it links into wins over one where only
            // the op bodies verify (the same ops may stand under two transactions).
            let only = |fits: &dyn Fn(u64) -> bool| {
                let mut found = holes.iter().copied().filter(|tx| fits(*tx));
                match (found.next(), found.next()) {
                    (Some(tx), None) => Some(Some(tx)),
                    (None, _) => None,
                    _ => Some(None),
                }
            };
            let Some(Some(tx)) = only(&chains).or_else(|| only(&bodies_verify)) else {
                continue;
            };
            if let Some(record) = self.headers.remove(&key) {
                self.headers.insert(tx, record);
                holes.remove(&tx);
                put_back.push((key, tx));
            }
        }
        put_back
    }

    /// Takes from a page scan what the tables did not give, keeping only what verifies: a log
    /// record that chains from the record before it (or that the one after it chains from,
    /// or whose bodies hash to its digests), op bodies that hash to their record's digests,
    /// evictions, and the names of files whose ids are the hashes of their paths. Returns the
    /// numbers of log records and op bodies taken.
    fn merge_scan(&mut self, scan: &scan::Scan) -> (u64, u64) {
        let (mut records, mut bodies) = (0u64, 0u64);
        let keys: std::collections::BTreeSet<u64> = self
            .headers
            .keys()
            .chain(scan.headers.keys())
            .copied()
            .collect();
        let last = unbroken_last(keys);
        let verified_bodies = |tx: u64, header: &TxHeaderRec| {
            (0..header.digests.len() as u32)
                .filter(|n| scanned_body(scan, tx, *n, header).is_some())
                .count()
        };
        let mut previous: Option<[u8; 32]> = Some([0u8; 32]);
        for tx in 1..=last {
            if let Some(Ok(header)) = self.headers.get(&tx) {
                previous = Some(header.chain);
                continue;
            }
            let Some(candidates) = scan.headers.get(&tx) else {
                previous = None;
                continue;
            };
            let links = |from: &[u8; 32], tx: u64, h: &TxHeaderRec| {
                log::next_chain(from, tx, h).is_ok_and(|c| c == h.chain)
            };
            let next: Vec<&TxHeaderRec> = scan
                .headers
                .get(&(tx + 1))
                .into_iter()
                .flatten()
                .chain(self.headers.get(&(tx + 1)).and_then(|h| h.as_ref().ok()))
                .collect();
            let chained_in = |h: &&TxHeaderRec| previous.is_some_and(|p| links(&p, tx, h));
            let chained_out = |h: &&TxHeaderRec| next.iter().any(|n| links(&h.chain, tx + 1, n));
            // The tables' next record, when they hold it, is the committed one.
            let chained_on = |h: &&TxHeaderRec| {
                let tables = self.headers.get(&(tx + 1)).and_then(|n| n.as_ref().ok());
                tables.is_some_and(|n| links(&h.chain, tx + 1, n))
            };
            // One the next record chains from first: a commit that never completed (its pages
            // written, the same tx id committed again) also chains from the record before.
            let picked = candidates
                .iter()
                .find(|h| chained_in(h) && chained_on(h))
                .or_else(|| candidates.iter().find(|h| chained_in(h) && chained_out(h)))
                .or_else(|| candidates.iter().find(chained_in))
                .or_else(|| candidates.iter().find(chained_out))
                .or_else(|| {
                    candidates
                        .iter()
                        .map(|h| (verified_bodies(tx, h), h))
                        .filter(|(verified, _)| *verified > 0)
                        .max_by_key(|(verified, _)| *verified)
                        .map(|(_, h)| h)
                });
            match picked {
                Some(header) => {
                    previous = Some(header.chain);
                    self.headers.insert(tx, Ok(header.clone()));
                    records += 1;
                }
                None => previous = None,
            }
        }
        // Bodies the tables did not give (or gave damaged), unless evicted.
        let mut taken = Vec::new();
        for (tx, header) in &self.headers {
            let Ok(header) = header else { continue };
            for n in 0..header.digests.len() as u32 {
                if matches!(self.body(*tx, n, header), Some(Ok(_)))
                    || self.evicted.contains_key(&(*tx, n))
                {
                    continue;
                }
                if let Some(bytes) = scanned_body(scan, *tx, n, header) {
                    taken.push(((*tx, n), bytes.to_vec()));
                }
            }
        }
        bodies += taken.len() as u64;
        self.bodies.extend(taken);
        // Scanned eviction records. For an op whose body is gone, the replay checks that the
        // evicting transaction holds an eviction. For one whose body a stale page still holds
        // (the eviction removed it), the record stands only when its transaction verifiably
        // evicted the entity the op wrote: then the body goes again. A leaf of another table
        // read in this shape yields records that name no such eviction.
        for (key, found) in &scan.evicted {
            if self.evicted.contains_key(key) {
                continue;
            }
            let wrote = match self.headers.get(&key.0) {
                Some(Ok(header)) => match self.body(key.0, key.1, header) {
                    Some(Ok(op)) => Some(op_entity(&op).to_string()),
                    _ => None,
                },
                _ => None,
            };
            let by = match &wrote {
                // Of several candidates, one whose transaction holds an eviction.
                None => found.iter().find(|by| self.evicts(**by)).or(found.first()),
                Some(entity) => found.iter().find(|by| self.evicts_entity(**by, entity)),
            };
            if let Some(by) = by {
                self.bodies.remove(key);
                self.evicted.insert(*key, *by);
            }
        }
        self.scanned_filesystems(scan);
        // The names of files, wherever they verify.
        let filesystems = &self.filesystems;
        let mut name = |id: String, path: Option<String>| match self.entities.get_mut(&id) {
            Some(known @ None) => *known = path,
            Some(Some(_)) => {}
            None => {
                self.entities.insert(id, path);
            }
        };
        let file_id = |filesystem_id: String, path: &str| file_id(&filesystem_id, path);
        for (key, value) in &scan.var_var {
            if let (Ok(id), Ok(codec::StoredEntity::Sourced(_))) = (
                codec::id_of_key(key, "entity key"),
                codec::decode_entity(value, "entity"),
            ) {
                // A file whose path `entity_ids` holds (format 6), named with it below.
                name(id, None);
            } else if let (Ok(id), Ok(rec)) = (
                codec::id_of_key(key, "entity key"),
                codec::decode::<codec::EntityRec>(value, "entity"),
            ) {
                match rec.source {
                    Some((fs, path)) => {
                        if file_id(fs.0, &path).as_ref() == Some(&id) {
                            name(id, Some(path));
                        }
                    }
                    None => name(id, None),
                }
            } else if !codec::is_short_entity_key(key)
                && let Some((fs, path)) = scan::split_path_key(key)
                && let Some(fs) = filesystem_of_key(filesystems, fs)
                && let Some(id) = file_id(fs, path)
            {
                name(id, Some(path.to_string()));
            }
        }
        for key in &scan.var_u64 {
            if let Some((fs, path)) = scan::split_path_key(key)
                && let Some(fs) = filesystem_of_key(filesystems, fs)
                && let Some(id) = file_id(fs, path)
            {
                name(id, Some(path.to_string()));
            }
        }
        // Entity ids by their numbers (where the scan found one id for a number), and the ops
        // the version rows say wrote them: these name the entity of an op whose body is lost.
        let mut ids: HashMap<u64, String> = scan
            .entity_ids
            .iter()
            .filter_map(|(eid, found)| match found.as_slice() {
                [id] => Some((*eid, id.clone())),
                _ => None,
            })
            .collect();
        // A file's source (format 6) names it and gives its id.
        for (eid, found) in &scan.entity_sources {
            let named: Vec<(String, &String)> = found
                .iter()
                .filter_map(|(fs, path)| {
                    let fs = filesystem_of_key(filesystems, fs)?;
                    Some((file_id(fs, path)?, path))
                })
                .collect();
            for (id, path) in &named {
                name(id.clone(), Some((*path).clone()));
            }
            if let ([(id, _)], false) = (named.as_slice(), ids.contains_key(eid)) {
                ids.insert(*eid, id.clone());
            }
        }
        for id in ids.values() {
            name(id.clone(), None);
        }
        // Every id found for a number, for the ops whose rows name it.
        let mut every: HashMap<u64, BTreeSet<String>> = HashMap::new();
        for (eid, found) in &scan.entity_ids {
            every.entry(*eid).or_default().extend(found.iter().cloned());
        }
        for (eid, found) in &scan.entity_sources {
            let named = found
                .iter()
                .filter_map(|(fs, path)| file_id(filesystem_of_key(filesystems, fs)?, path));
            every.entry(*eid).or_default().extend(named);
        }
        for (eid, tx, n) in &scan.versions {
            if let Some(id) = ids.get(eid) {
                self.op_entities
                    .entry((*tx, *n))
                    .or_insert_with(|| id.clone());
            }
            if let Some(found) = every.get(eid) {
                self.op_candidates
                    .entry((*tx, *n))
                    .or_default()
                    .extend(found.iter().cloned());
            }
        }
        for ((tx, n), found) in &scan.bodies {
            // A format-8 first write names its filesystem in its log header: without a
            // readable header it names no file here (its header would also be what verifies
            // it).
            let header = match self.headers.get(tx) {
                Some(Ok(header)) => Some(header),
                _ => None,
            };
            let listed = header.map_or(&[][..], |h| h.filesystems.as_slice());
            for bytes in found {
                let Ok(op) = codec::decode_op(bytes, 0, listed, "a scanned op") else {
                    continue;
                };
                // Under a readable record, a body that does not hash to its digest is damage:
                // what it names (a path the damage changed) is no file of the store.
                if let Some(header) = header {
                    let digest = codec::decode_op(bytes, header.tx_time, listed, "a scanned op")
                        .and_then(|op| log::op_digest(&op));
                    if !digest.is_ok_and(|d| header.digests.get(*n as usize) == Some(&d)) {
                        continue;
                    }
                }
                if let OpRec::Write(write) = &op
                    && let Some(first) = &write.first
                    && let Some((fs, path)) = &first.source
                    && file_id(fs.0.clone(), path).as_deref() == Some(&*write.entity)
                {
                    name(write.entity.0.clone(), Some(path.clone()));
                }
                self.op_entities
                    .entry((*tx, *n))
                    .or_insert_with(|| op_entity(&op).to_string());
            }
        }
        (records, bodies)
    }

    /// The filesystem numbers the tables did not give (`filesystem_ids` and `filesystems`
    /// not reached), from the scan's rows of either table: a number's one id that verifies.
    /// An id does when the log's records list that filesystem, or
    /// when a file that a scanned row of the number names (`entity_ids`, `paths`, the stat
    /// cache) has, with it, an id the store holds (its short `entities` key, or its whole id):
    /// an id is its source's hash, so a wrong filesystem makes no id the store has.
    /// Without them, the files those rows alone name (their first writes lost) had no path.
    fn scanned_filesystems(&mut self, scan: &scan::Scan) {
        let logged: HashSet<&str> = self
            .headers
            .values()
            .flatten()
            .flat_map(|h| h.filesystems.iter().map(|fs| fs.0.as_str()))
            .collect();
        let short_keys: HashSet<&[u8]> = scan
            .var_var
            .iter()
            .map(|(key, _)| key.as_slice())
            .filter(|key| codec::is_short_entity_key(key))
            .collect();
        // The paths under each numbered filesystem key the scan found.
        let mut paths: HashMap<u32, Vec<&str>> = HashMap::new();
        let keyed = scan
            .entity_sources
            .values()
            .flatten()
            .map(|(fs, path)| (fs.as_slice(), path.as_str()))
            .chain(
                scan.var_u64
                    .iter()
                    .chain(scan.var_var.iter().map(|(key, _)| key))
                    .filter_map(|key| scan::split_path_key(key)),
            );
        for (fs, path) in keyed {
            if let Some(n) = codec::fs_number_of_key(fs) {
                paths.entry(n).or_default().push(path);
            }
        }
        let mut found = Vec::new();
        for (n, ids) in &scan.filesystem_ids {
            if self.filesystems.contains_key(n) {
                continue;
            }
            let rows = paths.get(n).map_or(&[][..], Vec::as_slice);
            let verifies = |fs: &&String| {
                logged.contains(fs.as_str())
                    || rows.iter().any(|path| {
                        file_id(fs, path).is_some_and(|id| {
                            self.entities.contains_key(&id)
                                || codec::short_entity_key(&codec::id_key(&id))
                                    .is_some_and(|short| short_keys.contains(short))
                        })
                    })
            };
            // Leaves of other tables read in these shapes add candidates that do not verify.
            if let [fs] = ids.iter().filter(verifies).collect::<Vec<_>>().as_slice() {
                found.push((*n, (*fs).clone()));
            }
        }
        self.filesystems.extend(found);
    }

    /// Whether the log the tables gave lacks something a scan of the pages may still hold: a
    /// record up to the unbroken log's end that is missing or does not decode, or an op that a
    /// record lists whose body is missing or does not verify and whose eviction is not recorded.
    /// A table can read through without an error and still lack rows: a repair's commit on a
    /// file whose pages fail their checksums can write other pages over its live leaves (the
    /// damage, seemingly in what the storage engine knows of free pages, makes them look free),
    /// and the file may still hold an older copy of such a leaf.
    fn log_incomplete(&self) -> bool {
        let last = unbroken_last(self.headers.keys().copied());
        (1..=last).any(|tx| {
            let Some(Ok(header)) = self.headers.get(&tx) else {
                return true;
            };
            tx >= self.evictions_since
                && (0..header.digests.len() as u32).any(|n| {
                    !self.evicted.contains_key(&(tx, n))
                        && !matches!(self.body(tx, n, header), Some(Ok(_)))
                })
        })
    }

    /// Reports op `n` of `tx` lost with its body, naming the entity it wrote, or when no row
    /// says which for certain, each entity a scanned version row says it may have written (a
    /// file the report does not name would be a silent loss).
    fn lose_body(&self, salvage: &mut Salvage<'_>, tx: u64, n: u32) {
        let lost = format!("op {n} of tx {tx}: its body is lost");
        match (
            self.op_entities.get(&(tx, n)),
            self.op_candidates.get(&(tx, n)),
        ) {
            (Some(entity), _) => salvage.lose("op", Some(tx), Some(entity), lost),
            (None, Some(candidates)) if !candidates.is_empty() => {
                for entity in candidates {
                    salvage.lose(
                        "op",
                        Some(tx),
                        Some(entity),
                        format!(
                            "{lost}; it wrote one of {} entities that rows left in the file's \
                             pages name",
                            candidates.len()
                        ),
                    );
                }
            }
            (None, _) => salvage.lose("op", Some(tx), None, lost),
        }
        salvage.report.ops_lost += 1;
    }

    /// How much of the log reads: log records, plus op bodies.
    fn score(&self) -> usize {
        self.headers.values().filter(|h| h.is_ok()).count() + self.bodies.len()
    }

    /// The body of op `n` of `tx` under `header`, verified against its digest.
    fn body(
        &self,
        tx: u64,
        n: u32,
        header: &TxHeaderRec,
    ) -> Option<std::result::Result<OpRec, String>> {
        let bytes = self.bodies.get(&(tx, n))?;
        let verified = |filesystems: &[codec::IdStr]| {
            codec::decode_op(
                bytes,
                header.tx_time,
                filesystems,
                &format!("op {n} of tx {tx}"),
            )
            .and_then(|op| {
                let digest = log::op_digest(&op)?;
                if header.digests.get(n as usize) == Some(&digest) {
                    Ok(op)
                } else {
                    Err(Error::corrupt(format!(
                        "op {n} of tx {tx} does not hash to the digest its log record holds"
                    )))
                }
            })
        };
        let checked = verified(&header.filesystems);
        // A first write naming its filesystem by its place in the header's list (format 8,
        // outside what the chain hashes): with the list damaged, the filesystem the store
        // knows that makes it hash to its digest.
        if checked.is_err()
            && let Some(place) = codec::op_filesystem_place(bytes)
            && let Ok(place) = usize::try_from(place)
        {
            let known = self.known_filesystems.get_or_init(|| {
                let mut known: BTreeSet<codec::IdStr> = self
                    .filesystems
                    .values()
                    .map(|fs| codec::IdStr::from(fs.as_str()))
                    .collect();
                for header in self.headers.values().flatten() {
                    known.extend(header.filesystems.iter().cloned());
                }
                known.into_iter().collect()
            });
            let mut list = header.filesystems.clone();
            for fs in known {
                if list.len() <= place {
                    list.resize(place + 1, fs.clone());
                }
                list[place] = fs.clone();
                if let Ok(op) = verified(&list) {
                    return Some(Ok(op));
                }
            }
        }
        Some(checked.map_err(|e| e.to_string()))
    }

    /// Whether transaction `by` holds an eviction of `entity` whose body verifies.
    fn evicts_entity(&self, by: u64, entity: &str) -> bool {
        match self.headers.get(&by) {
            Some(Ok(header)) => (0..header.digests.len() as u32).any(|m| {
                matches!(self.body(by, m, header), Some(Ok(OpRec::Evict { entity: e })) if *e == *entity)
            }),
            _ => false,
        }
    }

    /// Whether transaction `by` holds an eviction whose body verifies.
    fn evicts(&self, by: u64) -> bool {
        match self.headers.get(&by) {
            Some(Ok(header)) => (0..header.digests.len() as u32)
                .any(|m| matches!(self.body(by, m, header), Some(Ok(OpRec::Evict { .. })))),
            _ => false,
        }
    }
}

/// A document and the contents it uses, read from the damaged store and verified.
struct DocCopy {
    rec: DocRec,
    file_blob: bool,
    contents: Vec<([u8; 32], Vec<u8>)>,
}

/// The salvage in progress: the damaged store, and what the new one received.
struct Salvage<'a> {
    /// The damaged store, when the storage engine opens it.
    db: Option<&'a dyn ReadableDatabase>,
    /// The content tables as the page scan found them, when it ran.
    scanned: Option<Database>,
    /// The damaged store's blob chunk size (the scanned tables' too).
    chunk: u64,
    /// Makes a file's object again from disk.
    rebuild: Rebuild<'a>,
    report: SalvageReport,
    /// Documents already in the new store.
    docs_done: HashSet<[u8; 32]>,
    /// Entity id → path, as the log (and the old store) name them.
    paths: HashMap<String, String>,
    contents_lost: BTreeSet<String>,
    restored: BTreeSet<String>,
}

impl Salvage<'_> {
    fn lose(&mut self, kind: &'static str, tx: Option<u64>, entity: Option<&str>, detail: String) {
        let path = entity.and_then(|e| self.paths.get(e).cloned());
        self.report.losses.push(Loss {
            kind,
            tx,
            entity: entity.map(str::to_string),
            path,
            detail,
        });
    }

    /// The document `hash` of entity `entity` with its contents, verified; contents the store
    /// lost are read from the entity's file when it still hashes to them.
    fn read_doc(
        &mut self,
        hash: &[u8; 32],
        entity: &str,
    ) -> std::result::Result<DocCopy, (&'static str, String)> {
        let (rec, file_blob) = self
            .first_read("reading a document", |db| {
                let rtx = db.begin_read().db()?;
                let index = rtx.open_table(DOC_INDEX).db()?;
                let data = rtx.open_table(DOC_DATA).db()?;
                let (rec, file_blob) = docs::read_doc(&index, &data, hash)?.ok_or_else(|| {
                    Error::corrupt(format!("document {} is missing", hex::encode(hash)))
                })?;
                verify::check_doc(hash, &rec)?;
                Ok((rec, file_blob))
            })
            .map_err(|e| ("document", e))?;
        let mut contents = Vec::new();
        let chunk = self.chunk;
        for blob in docs::doc_blobs(&rec, file_blob) {
            let read = self.first_read("reading a content", |db| {
                let rtx = db.begin_read().db()?;
                let index = rtx.open_table(BLOB_INDEX).db()?;
                let data = rtx.open_table(BLOB_DATA).db()?;
                let bytes = blobs::read_blob(&index, &data, chunk, &blob)?.ok_or_else(|| {
                    Error::corrupt(format!("content {} is missing", hex::encode(blob)))
                })?;
                verify::check_content(&blob, &bytes)?;
                Ok(bytes)
            });
            let bytes = match read {
                Ok(bytes) => bytes,
                Err(e) => match self.read_from_disk(entity, &blob) {
                    Some(bytes) => {
                        self.restored.insert(hex::encode(blob));
                        bytes
                    }
                    None => {
                        self.contents_lost.insert(hex::encode(blob));
                        return Err(("content", e));
                    }
                },
            };
            contents.push((blob, bytes));
        }
        Ok(DocCopy {
            rec,
            file_blob,
            contents,
        })
    }

    /// Runs `read` on the damaged store, then (when that fails) on what the page scan found:
    /// the first answer, or the first error.
    fn first_read<T>(
        &self,
        what: &str,
        read: impl Fn(&dyn ReadableDatabase) -> Result<T>,
    ) -> std::result::Result<T, String> {
        let mut first = None;
        let scanned = self.scanned.as_ref().map(|db| db as &dyn ReadableDatabase);
        for db in self.db.into_iter().chain(scanned) {
            match try_read(what, || read(db)) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or_else(|| format!("{what}: the store's tables do not read")))
    }

    /// The bytes of the file entity `entity` names, when it is a regular file (not a link)
    /// that hashes to `hash`.
    fn read_from_disk(&self, entity: &str, hash: &[u8; 32]) -> Option<Vec<u8>> {
        let path = Path::new(self.paths.get(entity)?);
        let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
        let bytes = is_file.then(|| std::fs::read(path).ok()).flatten()?;
        (sha256(&bytes).0 == *hash).then_some(bytes)
    }
}

/// Writes document `hash` (whole, with its contents) into the new store's tables.
fn write_doc(w: &mut WriteTables<'_>, hash: &[u8; 32], copy: &DocCopy) -> Result<u64> {
    let mut stored = 0;
    for (blob, bytes) in &copy.contents {
        stored += blobs::acquire_blob(&mut w.blobs, blob, bytes, None)?.unwrap_or(0);
    }
    let record = codec::encode(&copy.rec)?;
    let seq = w.docs.next_number()?;
    w.docs.data.insert(seq, record.as_slice()).db()?;
    w.docs.index.insert(hash, (seq, 0, copy.file_blob)).db()?;
    Ok(stored + record.len() as u64)
}

impl RedbStore {
    /// Salvages the store in `dir` (one the storage engine may not open) into a new store in
    /// `new_dir`: every transaction, op, document and content that still verifies, and the
    /// settings file; returns what was kept and what was lost, and the new store's fsck.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `new_dir` holds a store or is `dir`;
    /// [`Error::StoreLocked`] when a process holds the damaged store; [`Error::Corrupt`] when
    /// not even its header reads; storage errors of the new store.
    pub fn salvage(dir: &Path, new_dir: &Path, rebuild: Rebuild<'_>) -> Result<SalvageReport> {
        guard::quiet_panics();
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Err(Error::not_found(format!(
                "store in {} (no {DB_FILE}); give the directory of the damaged store",
                dir.display()
            )));
        }
        let same = match (std::fs::canonicalize(dir), std::fs::canonicalize(new_dir)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return Err(Error::invalid_input(
                "the salvaged store must go to a new directory, not over the damaged one",
            ));
        }
        // A store whose header does not read (its commit slots damaged, or truncated to less
        // than a header) is read by the page scan alone.
        let (mut db, padded, mut source, refusal) = match open_damaged(&path, false) {
            Ok((db, padded)) => {
                let source = Source::read(&*db);
                (Some(db), padded, source, None)
            }
            Err(e @ Error::Corrupt { .. }) => {
                let source = Source {
                    evictions_since: 1,
                    ..Source::default()
                };
                (None, None, source, Some(e))
            }
            Err(e) => return Err(e),
        };
        let mut previous = false;
        if db.is_some()
            && !source.unreadable.is_empty()
            && let Ok((older, _)) = open_damaged(&path, true)
        {
            let other = Source::read(&*older);
            if other.score() > source.score() {
                (db, source, previous) = (Some(older), other, true);
            }
        }
        // What the tables do not give is looked for in the file's pages.
        let mut scanned = None;
        let mut chunk = source.chunk;
        let mut found = (0, 0);
        if db.is_none()
            || padded.is_some()
            || previous
            || !source.unreadable.is_empty()
            || source.log_incomplete()
        {
            let io = |e: std::io::Error| Error::io(format!("reading {}", path.display()), e);
            let file = std::fs::File::open(&path).map_err(io)?;
            let len = file.metadata().map_err(io)?.len();
            let mut scan = scan::Scan::file(&file, len).map_err(io)?;
            found = source.merge_scan(&scan);
            if let Some(refusal) = &refusal
                && source.headers.is_empty()
                && source.entities.is_empty()
            {
                return Err(Error::corrupt(format!(
                    "nothing can be salvaged from {}: {}, and a scan of its pages found no log \
                     record and no file either",
                    path.display(),
                    refusal.full_message()
                )));
            }
            chunk = chunk.or(Some(scan.chunk()));
            scanned = try_read("reading the contents the scan found", || {
                scan.contents(chunk.unwrap_or(BLOB_CHUNK_OLD))
            })
            .ok();
        }
        for (key, tx) in source.put_back_misplaced() {
            tracing::info!("salvage: the log record under damaged key {key} verifies as tx {tx}");
        }
        let target = RedbStore::create(new_dir)?;
        let mut salvage = Salvage {
            db: db.as_deref(),
            scanned,
            chunk: chunk.unwrap_or(BLOB_CHUNK_OLD),
            rebuild,
            report: SalvageReport {
                padded,
                ..SalvageReport::default()
            },
            docs_done: HashSet::new(),
            paths: HashMap::new(),
            contents_lost: BTreeSet::new(),
            restored: BTreeSet::new(),
        };
        if let Some(refusal) = &refusal {
            salvage.lose(
                "table",
                None,
                None,
                format!(
                    "store: {}; everything kept was found by a scan of its pages ({} log \
                     records, {} op bodies taken)",
                    refusal.full_message(),
                    found.0,
                    found.1
                ),
            );
        }
        if previous {
            let last = unbroken_last(source.headers.keys().copied());
            salvage.lose(
                "commit",
                None,
                None,
                format!(
                    "the latest commit does not read; salvaged the one before it (up to tx \
                     {last}, with what a scan of the file's pages found after it)"
                ),
            );
        }
        for (table, problem) in &source.unreadable {
            salvage.lose(
                "table",
                None,
                None,
                format!("{table} could not be read through (what it held past the damage was looked up key by key and in a scan of the file's pages): {problem}"),
            );
        }
        for (id, path) in &source.entities {
            if let Some(path) = path {
                salvage.paths.insert(id.clone(), path.clone());
            }
        }
        target.replay_salvaged(&source, &mut salvage)?;
        let mut report = salvage.report;
        report.contents_lost = salvage.contents_lost.into_iter().collect();
        report.restored = salvage.restored.into_iter().collect();
        let kept = target.entity_ids()?;
        report.entities = kept.len() as u64;
        // Entities the old store listed, or that lost ops wrote, which the new one lacks.
        let mut lost: BTreeMap<String, Option<String>> = source.entities.clone();
        for loss in &report.losses {
            if let (Some(entity), "op") = (&loss.entity, loss.kind) {
                lost.entry(entity.clone())
                    .or_insert_with(|| loss.path.clone());
            }
        }
        let evicted = finally_evicted(&source);
        report.entities_lost = lost
            .into_iter()
            .filter(|(id, _)| !kept.contains(id) && !evicted.contains(id))
            .collect();
        report.head = target.chain_head()?;
        let settings = dir.join("settings.toml");
        if settings.exists() {
            let text = std::fs::read(&settings)
                .map_err(|e| Error::io(format!("reading {}", settings.display()), e))?;
            crate::store::private::write_file(&new_dir.join("settings.toml"), &text)?;
        }
        report.findings = target.fsck();
        target.settle_damage(&report.findings)?;
        Ok(report)
    }

    /// Every entity id the store holds (deleted ones too).
    fn entity_ids(&self) -> Result<HashSet<String>> {
        let rtx = self.read()?;
        let entities = ReadEntities::open(&rtx)?;
        let mut out = HashSet::new();
        for entry in entities.entities.iter().db()? {
            let (key, value) = entry.db()?;
            out.insert(super::entity::id_of_row(
                &entities,
                key.value(),
                value.value(),
            )?);
        }
        Ok(out)
    }

    /// Replays what `source` holds of the log into this (new, empty) store.
    fn replay_salvaged(&self, source: &Source, salvage: &mut Salvage<'_>) -> Result<()> {
        let last = unbroken_last(source.headers.keys().copied());
        for tx in source.headers.keys().filter(|tx| **tx > last) {
            // The damaged key stays in the text only: as the loss's `tx` it would be an
            // integer past 2^53 in `--json`, which JavaScript clients cannot hold exactly.
            salvage.lose(
                "tx",
                None,
                None,
                format!(
                    "a log record under tx {tx}, past a gap of more than {MAX_LOG_GAP} \
                     transactions after tx {last}: its key is damaged; left out"
                ),
            );
        }
        // The entity each op wrote, by tx, for the transactions whose records are lost.
        let wrote_by_tx: BTreeMap<(u64, u32), &String> =
            source.op_entities.iter().map(|(k, id)| (*k, id)).collect();
        let wtx = self.begin_write()?;
        {
            let mut w = WriteTables::open(&wtx)?;
            w.meta
                .insert(
                    EVICTIONS_SINCE,
                    source.evictions_since.to_le_bytes().as_slice(),
                )
                .db()?;
            let mut chain = [0u8; 32];
            let mut previous_time: Option<i64> = None;
            let mut stored = 0u64;
            for tx in 1..=last {
                let header = match source.headers.get(&tx) {
                    Some(Ok(header)) => header.clone(),
                    lost => {
                        let why = match lost {
                            Some(Err(e)) => e.clone(),
                            _ => "the log has no record of it".to_string(),
                        };
                        salvage.lose(
                            "tx",
                            Some(tx),
                            None,
                            format!("its log record is lost ({why}); kept as an empty record"),
                        );
                        salvage.report.txs_lost.push(tx);
                        // What the store's rows say it wrote.
                        for (&(_, n), id) in wrote_by_tx.range((tx, 0)..=(tx, u32::MAX)) {
                            salvage.lose(
                                "op",
                                Some(tx),
                                Some(id),
                                format!("op {n} of tx {tx}: lost with its log record"),
                            );
                        }
                        // Between its neighbours' times.
                        let next = source
                            .headers
                            .range(tx + 1..)
                            .find_map(|(_, h)| h.as_ref().ok().map(|h| h.tx_time));
                        let time = match (previous_time, next) {
                            (Some(p), Some(n)) => (p + 1).min(n),
                            (Some(p), None) => p + 1,
                            (None, Some(n)) => n,
                            (None, None) => Timestamp::now().as_micros(),
                        };
                        TxHeaderRec {
                            tx_time: time,
                            origin: "salvage".to_string(),
                            digests: Vec::new(),
                            run: None,
                            chain: [0u8; 32],
                            filesystems: Vec::new(),
                        }
                    }
                };
                let mut digests = Vec::new();
                // The filesystems of the kept bodies' first writes, in the new record (format 8).
                let mut filesystems = Vec::new();
                for n in 0..header.digests.len() as u32 {
                    let new_n = digests.len() as u32;
                    let digest = header.digests[n as usize];
                    match source.body(tx, n, &header) {
                        Some(Ok(op)) => {
                            if let Some(why) =
                                self.place(&mut w, salvage, tx, &header, new_n, &op, &mut stored)?
                            {
                                let entity = op_entity(&op);
                                salvage.lose(
                                    "op",
                                    Some(tx),
                                    Some(entity),
                                    format!("op {n} of tx {tx}: {why}"),
                                );
                                salvage.report.ops_lost += 1;
                                continue;
                            }
                            w.tx_ops
                                .insert(
                                    (tx, new_n),
                                    codec::encode_op_in(&op, header.tx_time, &mut filesystems)?
                                        .as_slice(),
                                )
                                .db()?;
                            digests.push(digest);
                            salvage.report.ops += 1;
                        }
                        Some(Err(e)) => {
                            let entity = source.op_entities.get(&(tx, n)).map(String::as_str);
                            salvage.lose("op", Some(tx), entity, e);
                            salvage.report.ops_lost += 1;
                        }
                        None => {
                            let by = source.evicted.get(&(tx, n)).copied();
                            if let Some(by) = by.filter(|by| *by >= tx && source.evicts(*by)) {
                                // Evicted on purpose: the digest stays, and the record of it.
                                w.evicted_ops.insert((tx, new_n), by).db()?;
                                digests.push(digest);
                            } else if tx < source.evictions_since {
                                // Before evictions were recorded: evicted, unrecorded.
                                digests.push(digest);
                            } else {
                                source.lose_body(salvage, tx, n);
                            }
                        }
                    }
                }
                w.end_tx()?;
                w.finish()?;
                // The same header (its index run kept), chained from the salvaged record before.
                let mut record = TxHeaderRec {
                    tx_time: header.tx_time,
                    origin: header.origin.clone(),
                    digests,
                    run: header.run,
                    chain: [0u8; 32],
                    filesystems,
                };
                record.chain = log::next_chain(&chain, tx, &record)?;
                chain = record.chain;
                w.tx_log
                    .insert(tx, codec::encode_header(&record)?.as_slice())
                    .db()?;
                previous_time = Some(header.tx_time);
                salvage.report.txs += 1;
            }
            w.add_counter(STORED_BYTES, stored as i64)?;
        }
        wtx.commit().db()?;
        salvage.report.contents = {
            let rtx = self.read()?;
            rtx.open_table(BLOB_INDEX).db()?.len().db()?
        };
        Ok(())
    }

    /// Applies verified op `op` (index `n` in the new record of `tx`), copying the document it
    /// puts; `Some(why)` when it cannot be kept. The caller stores its body.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        w: &mut WriteTables<'_>,
        salvage: &mut Salvage<'_>,
        tx: u64,
        header: &TxHeaderRec,
        n: u32,
        op: &OpRec,
        stored: &mut u64,
    ) -> Result<Option<String>> {
        if let OpRec::Write(write) = op {
            if let Some(first) = &write.first
                && let Some((_, path)) = &first.source
            {
                salvage.paths.insert(write.entity.0.clone(), path.clone());
            }
            if write.first.is_none() && entity_rec(&*w, &write.entity)?.is_none() {
                return Ok(Some(
                    "the op that created its entity was lost, so this version has no entity".into(),
                ));
            }
            if let Some(hash) = write.object_hash
                && !salvage.docs_done.contains(&hash)
            {
                match salvage.read_doc(&hash, &write.entity) {
                    Ok(copy) => {
                        *stored += write_doc(w, &hash, &copy)?;
                        salvage.docs_done.insert(hash);
                    }
                    Err(("document", why)) => {
                        // The file may still make the same object: then its document is back.
                        let rebuilt = salvage
                            .paths
                            .get(&*write.entity)
                            .and_then(|path| (salvage.rebuild)(path))
                            .filter(|(object, _)| {
                                object.object_hash().0 == hash && object.id() == &*write.entity
                            });
                        let Some((object, bytes)) = rebuilt else {
                            salvage.lose("document", Some(tx), Some(&write.entity), why);
                            return Ok(Some("its document is lost".into()));
                        };
                        let made = docs::ensure_doc(
                            &mut w.docs,
                            &mut w.blobs,
                            &object,
                            bytes.as_deref(),
                            None,
                            None,
                            None,
                        )?;
                        *stored += made.stored;
                        salvage.docs_done.insert(hash);
                        salvage.restored.insert(hex::encode(hash));
                    }
                    Err((kind, why)) => {
                        salvage.lose(kind, Some(tx), Some(&write.entity), why);
                        return Ok(Some(format!("its {kind} is lost")));
                    }
                }
            }
        }
        w.apply(tx, header.tx_time, n, op)?;
        Ok(None)
    }
}

/// A scanned body of op `n` of `tx` that hashes to the digest `header` holds for it.
fn scanned_body<'s>(
    scan: &'s scan::Scan,
    tx: u64,
    n: u32,
    header: &TxHeaderRec,
) -> Option<&'s [u8]> {
    let want = header.digests.get(n as usize)?;
    scan.bodies
        .get(&(tx, n))?
        .iter()
        .map(Vec::as_slice)
        .find(|bytes| {
            codec::decode_op(bytes, header.tx_time, &header.filesystems, "a scanned op")
                .and_then(|op| log::op_digest(&op))
                .is_ok_and(|digest| digest == *want)
        })
}

/// The entity an op concerns.
fn op_entity(op: &OpRec) -> &str {
    match op {
        OpRec::Write(w) => &w.entity,
        OpRec::Evict { entity } | OpRec::Match { entity, .. } => entity,
    }
}

/// The entities whose last op in the log (as far as it reads) evicts them.
fn finally_evicted(source: &Source) -> HashSet<String> {
    let mut last: HashMap<String, bool> = HashMap::new();
    for (tx, header) in &source.headers {
        let Ok(header) = header else { continue };
        for n in 0..header.digests.len() as u32 {
            match source.body(*tx, n, header) {
                Some(Ok(OpRec::Evict { entity })) => {
                    last.insert(entity.0.clone(), true);
                }
                Some(Ok(OpRec::Write(w))) => {
                    last.insert(w.entity.0.clone(), false);
                }
                _ => {}
            }
        }
    }
    last.into_iter()
        .filter(|(_, e)| *e)
        .map(|(id, _)| id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file `/a.rs` on filesystem `fs`, holding "text".
    fn file_a() -> Result<crate::object::Object> {
        crate::object::Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a.rs".into(),
            },
            "text".into(),
        )
    }

    /// Salvages the store in `dir` into a new one (in the directory returned with it), asserting
    /// that nothing was found lost and that entity `id` holds `text`.
    fn salvage_keeps(dir: &Path, id: &str, text: &str) -> Result<(tempfile::TempDir, RedbStore)> {
        let new = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let report = RedbStore::salvage(dir, &new.path().join("new"), &|_| None)?;
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert!(
            report.contents_lost.is_empty(),
            "{:?}",
            report.contents_lost
        );
        let store = RedbStore::open(new.path().join("new"))?;
        let version = store
            .as_of(id, None, None)?
            .ok_or_else(|| Error::invariant("gone"))?;
        assert_eq!(
            version.object.and_then(|o| o.content().map(str::to_string)),
            Some(text.to_string())
        );
        Ok((new, store))
    }

    /// A new store holding `object`: its directory, and its file's path.
    fn store_of(object: crate::object::Object) -> Result<(tempfile::TempDir, PathBuf)> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        RedbStore::create(dir.path())?.transact(vec![Op::put(object)], Origin::Cli)?;
        let path = dir.path().join(DB_FILE);
        Ok((dir, path))
    }

    /// The file `/a.rs` on filesystem `fs`, holding 30 000 characters that zstd halves at most
    /// (a content of several chunks), and its text.
    fn long_file_a() -> Result<(crate::object::Object, String)> {
        let text: String = (0u32..3000)
            .map(|i| crate::hash::sha256(&i.to_le_bytes()).to_hex())
            .collect::<String>()
            .chars()
            .take(30_000)
            .collect();
        let object = crate::object::Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a.rs".into(),
            },
            text.clone(),
        )?;
        Ok((object, text))
    }

    /// A log header whose list of filesystems (store format 8, outside what the chain hashes)
    /// damage changed: the first writes that name a filesystem by its place there no longer
    /// verify against it, but one of the filesystems the store knows makes each hash to its
    /// digest, so salvage keeps them (one damaged byte does not lose every file the
    /// transaction created).
    #[test]
    fn first_writes_whose_headers_list_is_damaged_are_kept() -> Result<()> {
        for cut in [false, true] {
            first_writes_kept_under_a_damaged_list(cut)?;
        }
        Ok(())
    }

    /// [`first_writes_whose_headers_list_is_damaged_are_kept`]: the list changed, and `cut`
    /// short of its last byte.
    fn first_writes_kept_under_a_damaged_list(cut: bool) -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let b = crate::object::Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/b.rs".into(),
            },
            "b".into(),
        )?;
        let a = file_a()?;
        {
            let store = RedbStore::create(dir.path())?;
            store.transact(vec![Op::put(a.clone()), Op::put(b.clone())], Origin::Cli)?;
        }
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).db()?;
            let wtx = db.begin_write().db()?;
            {
                let mut log = wtx.open_table(TX_LOG).db()?;
                let bytes = log
                    .get(1u64)
                    .db()?
                    .map(|v| v.value().to_vec())
                    .ok_or_else(|| Error::invariant("tx 1"))?;
                let mut header = codec::decode_header(&bytes, "h")?;
                assert_eq!(header.filesystems, [codec::IdStr::from("fs")]);
                header.filesystems = vec![codec::IdStr::from("fz")];
                let mut damaged = codec::encode_header(&header)?;
                if cut {
                    // The list no longer decodes: the header reads without it.
                    damaged.pop();
                    assert!(codec::decode_header(&damaged, "h").is_err());
                }
                log.insert(1u64, damaged.as_slice()).db()?;
            }
            wtx.commit().db()?;
        }
        let new = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let report = RedbStore::salvage(dir.path(), &new.path().join("new"), &|_| None)?;
        assert_eq!(report.ops_lost, 0, "{:?}", report.losses);
        assert!(report.txs_lost.is_empty(), "{:?}", report.losses);
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        let store = RedbStore::open(new.path().join("new"))?;
        for id in [a.id(), b.id()] {
            assert!(store.as_of(id, None, None)?.is_some(), "{id}");
        }
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        Ok(())
    }

    /// With the `entities` table lost, the files that `paths` and the stat cache list are still
    /// named by their paths: a numbered filesystem's keys (format 5) as its id's.
    #[test]
    fn the_paths_and_stat_cache_of_a_numbered_filesystem_name_their_files() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let object = file_a()?;
        let id = object.id().to_string();
        {
            let store = RedbStore::create(dir.path())?;
            let update = crate::store::StatUpdate {
                filesystem_id: "fs".into(),
                puts: vec![(
                    "/a.rs".into(),
                    crate::store::StatEntry {
                        stat: crate::store::FileStat {
                            size: 4,
                            mtime_ns: 1,
                            ctime_ns: 1,
                            inode: 1,
                        },
                        file_hash: *object.file_hash().ok_or_else(|| Error::invariant("hash"))?,
                        scan_start_ns: 0,
                    },
                )],
                removes: Vec::new(),
            };
            store.transact_with_stat(vec![Op::put(object)], Origin::Cli, update)?;
        }
        let db = Database::open(dir.path().join(DB_FILE)).db()?;
        let wtx = db.begin_write().db()?;
        wtx.delete_table(ENTITIES).db()?;
        wtx.commit().db()?;
        let source = Source::read(&db);
        assert_eq!(source.entities.get(&id), Some(&Some("/a.rs".to_string())));
        // The stat cache alone (format 9: a directory number and a name) names it too.
        let wtx = db.begin_write().db()?;
        wtx.delete_table(PATHS_BY_DIR).db()?;
        wtx.delete_table(ENTITY_IDS).db()?;
        wtx.delete_table(TX_OPS).db()?;
        wtx.commit().db()?;
        let source = Source::read(&db);
        assert_eq!(source.entities.get(&id), Some(&Some("/a.rs".to_string())));
        assert!(
            source.unreadable.iter().all(|(t, _)| *t != "stat_cache"),
            "a format-9 store has no whole-path stat cache, and is not missing one"
        );
        Ok(())
    }

    /// A file's source in `entity_ids` (format 6) names it when `entities`, `paths` and the
    /// stat cache are lost, read through the tables and found by a scan of the pages.
    #[test]
    fn a_files_source_in_entity_ids_names_it() -> Result<()> {
        let object = file_a()?;
        let id = object.id().to_string();
        let (_dir, path) = store_of(object)?;
        {
            let db = Database::open(&path).db()?;
            let wtx = db.begin_write().db()?;
            wtx.delete_table(ENTITIES).db()?;
            wtx.delete_table(PATHS_BY_DIR).db()?;
            wtx.delete_table(STAT_BY_DIR).db()?;
            wtx.commit().db()?;
            let source = Source::read(&db);
            assert_eq!(source.entities.get(&id), Some(&Some("/a.rs".to_string())));
            assert!(source.op_entities.values().any(|e| *e == id));
        }
        let io = |e: std::io::Error| Error::io("reading the store", e);
        let file = std::fs::File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let scan = scan::Scan::file(&file, len).map_err(io)?;
        assert_eq!(scan.entity_sources.len(), 1);
        let mut source = Source::default();
        source.filesystems.insert(1, "fs".into());
        source.merge_scan(&scan);
        assert_eq!(source.entities.get(&id), Some(&Some("/a.rs".to_string())));
        Ok(())
    }

    /// A store made before format 7 (no chunk size in `meta`: 4 032-byte chunks) is salvaged
    /// with its chunk size, read in `meta`, or without it from the chunks' lengths, through the
    /// tables and through the page scan; the new store has 4 080-byte chunks.
    #[test]
    fn the_chunk_size_of_an_older_stream_is_read_or_found() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let (object, text) = long_file_a()?;
        let id = object.id().to_string();
        drop(RedbStore::create(dir.path())?);
        let path = dir.path().join(DB_FILE);
        {
            let db = Database::open(&path).db()?;
            let wtx = db.begin_write().db()?;
            wtx.open_table(META).db()?.remove(BLOB_CHUNK_KEY).db()?;
            wtx.commit().db()?;
        }
        RedbStore::open(dir.path())?.transact(vec![Op::put(object)], Origin::Cli)?;
        {
            let db = Database::open(&path).db()?;
            assert_eq!(Source::read(&db).chunk, Some(BLOB_CHUNK_OLD));
            let wtx = db.begin_write().db()?;
            wtx.open_table(META).db()?.remove(BLOB_CHUNK_KEY).db()?;
            wtx.commit().db()?;
            assert_eq!(
                Source::read(&db).chunk,
                Some(BLOB_CHUNK_OLD),
                "from the lengths"
            );
        }
        let io = |e: std::io::Error| Error::io("reading the store", e);
        let file = std::fs::File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut scan = scan::Scan::file(&file, len).map_err(io)?;
        assert_eq!(scan.chunk(), BLOB_CHUNK_OLD);
        let found = scan.contents(scan.chunk())?;
        let rtx = found.begin_read().db()?;
        assert_eq!(blobs::chunk_of(&rtx)?, BLOB_CHUNK_OLD);
        let (_new, store) = salvage_keeps(dir.path(), &id, &text)?;
        let rtx = store.read()?;
        assert_eq!(blobs::chunk_of(&rtx)?, BLOB_CHUNK);
        Ok(())
    }

    /// A store of 4 080-byte chunks whose `meta` table is lost (a damaged page) and whose
    /// other tables read: with no page scan to say, the chunk size comes from the chunks'
    /// lengths, not the 4 032 bytes of a store without the key, and every content is kept.
    #[test]
    fn the_chunk_size_is_found_when_meta_is_lost() -> Result<()> {
        salvage_keeps_4080_chunks_after(|wtx| {
            wtx.delete_table(META).db()?;
            Ok(())
        })
    }

    /// A page scan of a store whose tables cannot be reached (its roots lost: nothing reads
    /// through them) finds the filesystem numbers in `filesystem_ids` and `filesystems` rows,
    /// so that a file whose first write is lost is still named by its source in `entity_ids`
    /// and its `paths` row (numbered keys). A number is taken when the log lists its
    /// filesystem, or when a file named with it has a short `entities` key the scan found; an
    /// unverified one is not, nor does it hide the one that verifies.
    #[test]
    fn the_page_scan_finds_filesystem_numbers() -> Result<()> {
        let object = file_a()?;
        let id = object.id().to_string();
        let (_dir, path) = store_of(object)?;
        let io = |e: std::io::Error| Error::io("reading the store", e);
        let file = std::fs::File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let scan = scan::Scan::file(&file, len).map_err(io)?;
        for keep_log in [false, true] {
            let mut scan = scan::Scan {
                entity_sources: scan.entity_sources.clone(),
                var_u64: scan.var_u64.clone(),
                // Without the log, the short `entities` key verifies; with it, its list.
                var_var: if keep_log {
                    Vec::new()
                } else {
                    scan.var_var.clone()
                },
                headers: if keep_log {
                    scan.headers.clone()
                } else {
                    BTreeMap::new()
                },
                filesystem_ids: scan.filesystem_ids.clone(),
                ..scan::Scan::default()
            };
            // A leaf of another table read in these shapes: candidates that do not verify.
            scan.filesystem_ids.insert(9, vec!["ghost".into()]);
            scan.filesystem_ids.entry(1).or_default().push("fz".into());
            let mut source = Source::default();
            source.merge_scan(&scan);
            assert_eq!(source.filesystems.get(&1).map(String::as_str), Some("fs"));
            assert!(!source.filesystems.contains_key(&9), "unverified");
            assert_eq!(
                source.entities.get(&id),
                Some(&Some("/a.rs".to_string())),
                "keep_log {keep_log}"
            );
        }
        Ok(())
    }

    /// A store of 4 080-byte chunks holding a long file, with `damage` done to it in one write:
    /// salvage reads its chunk size as 4 080, and keeps the file.
    fn salvage_keeps_4080_chunks_after(
        damage: impl FnOnce(&redb::WriteTransaction) -> Result<()>,
    ) -> Result<()> {
        let (object, text) = long_file_a()?;
        let id = object.id().to_string();
        let (dir, path) = store_of(object)?;
        {
            let db = Database::open(&path).db()?;
            let wtx = db.begin_write().db()?;
            damage(&wtx)?;
            wtx.commit().db()?;
            assert_eq!(Source::read(&db).chunk, Some(BLOB_CHUNK));
        }
        salvage_keeps(dir.path(), &id, &text)?;
        Ok(())
    }

    /// A store of 4 080-byte chunks whose `meta` says 4 032 (damage that left a size strata
    /// writes): the chunks' lengths win, and every content is kept.
    #[test]
    fn the_chunks_lengths_win_over_a_damaged_chunk_size() -> Result<()> {
        salvage_keeps_4080_chunks_after(|wtx| {
            wtx.open_table(META)
                .db()?
                .insert(BLOB_CHUNK_KEY, BLOB_CHUNK_OLD.to_le_bytes().as_slice())
                .db()?;
            Ok(())
        })
    }

    /// A store whose `filesystem_ids` table is lost still names its filesystems, from
    /// `filesystems` (which maps the other way).
    #[test]
    fn filesystem_numbers_are_read_from_either_table() -> Result<()> {
        let (object, _) = long_file_a()?;
        let (_dir, path) = store_of(object)?;
        let db = Database::open(&path).db()?;
        let known = Source::read(&db).filesystems;
        assert!(!known.is_empty());
        let wtx = db.begin_write().db()?;
        wtx.delete_table(FILESYSTEM_IDS).db()?;
        wtx.commit().db()?;
        assert_eq!(Source::read(&db).filesystems, known);
        Ok(())
    }

    /// A `tx_ops` that reads through without an error but lacks a row the log lists (what a
    /// repair's commit on a damaged file left: another page written over the live leaf) is not
    /// the end of that op: the file's older copy of the leaf still holds its body, which
    /// verifies against its digest, so salvage scans the pages and keeps the version. Before,
    /// salvage read the tables alone (they raised no error) and lost the op.
    #[test]
    fn a_body_the_table_lost_without_an_error_is_taken_from_a_stale_page() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let edited = crate::object::Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: "/a.rs".into(),
            },
            "edited".into(),
        )?;
        let id = edited.id().to_string();
        {
            let store = RedbStore::create(dir.path())?;
            store.transact(vec![Op::put(file_a()?)], Origin::Cli)?;
            store.transact(vec![Op::put(edited)], Origin::Cli)?;
        }
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).db()?;
            let wtx = db.begin_write().db()?;
            {
                let mut ops = wtx.open_table(TX_OPS).db()?;
                assert!(ops.remove((2u64, 0u32)).db()?.is_some());
            }
            wtx.commit().db()?;
        }
        // The precondition: the row is gone from the table, and a stale page still holds it.
        let path = dir.path().join(DB_FILE);
        let (db, _) = open_damaged(&path, false)?;
        let source = Source::read(&*db);
        drop(db);
        assert!(source.unreadable.is_empty(), "{:?}", source.unreadable);
        assert!(!source.bodies.contains_key(&(2, 0)));
        let file = std::fs::File::open(&path).map_err(|e| Error::io("open", e))?;
        let len = file.metadata().map_err(|e| Error::io("len", e))?.len();
        let scan = scan::Scan::file(&file, len).map_err(|e| Error::io("scan", e))?;
        let Some(Ok(header)) = source.headers.get(&2) else {
            return Err(Error::invariant("no record of tx 2"));
        };
        assert!(scanned_body(&scan, 2, 0, header).is_some(), "no stale copy");
        let new = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let report = RedbStore::salvage(dir.path(), &new.path().join("new"), &|_| None)?;
        assert_eq!(report.ops_lost, 0, "{:?}", report.losses);
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        let store = RedbStore::open(new.path().join("new"))?;
        let version = store
            .as_of(&id, None, None)?
            .ok_or_else(|| Error::invariant("gone"))?;
        assert_eq!(version.info.tx_id, crate::store::time::TxId(2));
        assert_eq!(
            version.object.and_then(|o| o.content().map(str::to_string)),
            Some("edited".to_string())
        );
        Ok(())
    }

    /// An op whose body is lost, which only scanned version rows name through an entity number
    /// the scan found two ids for (stale rows of an older numbering beside the live ones), is
    /// reported against both: the file it wrote is named, never silently lost. Before, such an
    /// op was reported with no entity, and the file whose latest version it was went unnamed.
    #[test]
    fn a_lost_op_is_named_by_every_id_its_scanned_version_rows_may_mean() -> Result<()> {
        let mut source = chained(2, None)?;
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let scan = scan::Scan {
            versions: vec![(7, 2, 0)],
            entity_ids: HashMap::from([(7, vec![a.clone(), b.clone()])]),
            ..scan::Scan::default()
        };
        source.merge_scan(&scan);
        assert!(!source.op_entities.contains_key(&(2, 0)));
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let target = RedbStore::create(dir.path())?;
        let mut salvage = Salvage {
            db: None,
            scanned: None,
            chunk: BLOB_CHUNK,
            rebuild: &|_| None,
            report: SalvageReport::default(),
            docs_done: HashSet::new(),
            paths: HashMap::new(),
            contents_lost: BTreeSet::new(),
            restored: BTreeSet::new(),
        };
        target.replay_salvaged(&source, &mut salvage)?;
        assert_eq!(salvage.report.ops_lost, 2, "{:?}", salvage.report.losses);
        let named: Vec<(Option<u64>, Option<String>)> = salvage
            .report
            .losses
            .iter()
            .filter(|l| l.detail.starts_with("op 0 of tx 2"))
            .map(|l| (l.tx, l.entity.clone()))
            .collect();
        assert_eq!(named, [(Some(2), Some(a)), (Some(2), Some(b))]);
        Ok(())
    }

    /// A record keyed far past the others (a damaged key) ends the log there; gaps of lost
    /// records within reach do not.
    #[test]
    fn the_unbroken_log_ends_before_a_gap_no_damage_makes() {
        assert_eq!(unbroken_last([]), 0);
        assert_eq!(unbroken_last([1, 2, 3, 5, 6]), 6);
        assert_eq!(unbroken_last([2, 3, 3 + MAX_LOG_GAP]), 3 + MAX_LOG_GAP);
        assert_eq!(unbroken_last([1, 2, 6, 7 + MAX_LOG_GAP]), 6);
        assert_eq!(unbroken_last([1, 6, 16_212_958_658_533_785_601]), 6);
        assert_eq!(unbroken_last([u64::MAX]), 0);
    }

    /// A source holding the sealed, chained records of txs 1..=n, each of one op: `op` with its
    /// body stored under every tx, or (`None`) a digest of no stored body.
    fn chained(n: u64, op: Option<&OpRec>) -> Result<Source> {
        let mut source = Source::default();
        let mut chain = [0u8; 32];
        for tx in 1..=n {
            let digest = match op {
                Some(op) => log::op_digest(op)?,
                None => crate::hash::blake3_concat(&[&tx.to_le_bytes()]),
            };
            let header = log::seal_header(
                &chain,
                tx,
                1_000 + tx as i64,
                &log::Origin::Indexer,
                vec![digest],
            )?;
            chain = header.chain;
            if let Some(op) = op {
                source
                    .bodies
                    .insert((tx, 0), codec::encode_op(op, header.tx_time)?);
            }
            source.headers.insert(tx, Ok(header));
        }
        Ok(source)
    }

    /// Of two scanned records for a tx the tables lost, both chaining from the record before
    /// (one a commit that never completed: a crash after its pages were written, and the same
    /// tx id committed again), the one the next record chains from is the log's. Before, the
    /// first in the scan's order was taken, so a salvage could keep a transaction that was
    /// never committed and drop the one that was.
    #[test]
    fn a_scanned_record_the_next_one_chains_from_wins_over_one_that_only_chains_in() -> Result<()> {
        let mut source = chained(4, None)?;
        let Some(Ok(real)) = source.headers.remove(&3) else {
            return Err(Error::invariant("no record of tx 3"));
        };
        let Some(Ok(before)) = source.headers.get(&2) else {
            return Err(Error::invariant("no record of tx 2"));
        };
        let never = log::seal_header(
            &before.chain,
            3,
            5_000,
            &log::Origin::Indexer,
            vec![crate::hash::blake3_concat(&[b"never committed"])],
        )?;
        for order in [vec![never.clone(), real.clone()], vec![real.clone(), never]] {
            let mut source = chained(4, None)?;
            source.headers.remove(&3);
            let scan = scan::Scan {
                headers: BTreeMap::from([(3, order)]),
                ..scan::Scan::default()
            };
            source.merge_scan(&scan);
            match source.headers.get(&3) {
                Some(Ok(h)) => assert_eq!(h.chain, real.chain, "took a record never committed"),
                _ => return Err(Error::invariant("tx 3 not taken")),
            }
        }
        Ok(())
    }

    /// Moves the record of `tx` to a damaged key (its high bit flipped); returns that key.
    fn damage_key(source: &mut Source, tx: u64) -> u64 {
        let key = tx | 1 << 62;
        if let Some(record) = source.headers.remove(&tx) {
            source.headers.insert(key, record);
        }
        key
    }

    /// A record under a damaged key goes back to the one hole it chains into: the first, one
    /// between records, the last; it stays where it is when it verifies nowhere or in two holes.
    #[test]
    fn a_record_under_a_damaged_key_is_put_back_where_it_chains() -> Result<()> {
        for tx in [1, 3, 6] {
            let mut source = chained(6, None)?;
            let want = source.headers.clone();
            let key = damage_key(&mut source, tx);
            assert_eq!(source.put_back_misplaced(), vec![(key, tx)], "tx {tx}");
            assert_eq!(
                format!("{:?}", source.headers.keys().collect::<Vec<_>>()),
                format!("{:?}", want.keys().collect::<Vec<_>>())
            );
            assert_eq!(
                source
                    .headers
                    .get(&tx)
                    .and_then(|h| h.as_ref().ok())
                    .map(|h| h.chain),
                want.get(&tx).and_then(|h| h.as_ref().ok()).map(|h| h.chain)
            );
        }
        // Its neighbours lost too: nothing it chains with, so it stays out.
        let mut source = chained(6, None)?;
        source.headers.insert(2, Err("lost".into()));
        source.headers.remove(&4);
        let key = damage_key(&mut source, 3);
        assert_eq!(source.put_back_misplaced(), vec![]);
        assert!(source.headers.contains_key(&key));
        // A record of another log chains nowhere here.
        let mut source = chained(6, None)?;
        let mut other = chained(7, None)?;
        if let Some(Ok(h)) = other.headers.get_mut(&7) {
            h.chain = [7; 32];
        }
        source.headers.remove(&3);
        if let Some(h) = other.headers.remove(&7) {
            source.headers.insert(7 | 1 << 62, h);
        }
        assert_eq!(source.put_back_misplaced(), vec![]);
        assert!(!source.headers.contains_key(&3));
        Ok(())
    }

    /// A record that chains into one hole and whose op bodies also verify in another (the
    /// same op under two transactions) goes where it chains; with no chain, where its bodies
    /// verify.
    #[test]
    fn a_hole_the_chain_names_wins_over_one_where_only_the_bodies_verify() -> Result<()> {
        let op = OpRec::Evict {
            entity: codec::IdStr("e".repeat(64)),
        };
        // tx 3 damaged, tx 6 lost: 3 chains into its hole, its body verifies in both.
        let mut source = chained(8, Some(&op))?;
        source.headers.remove(&6);
        if let Some(Ok(h)) = source.headers.get(&3) {
            // tx 6's body was written at tx 3's time in this source, so it verifies there too.
            let body = codec::encode_op(&op, h.tx_time)?;
            source.bodies.insert((6, 0), body);
        }
        let key = damage_key(&mut source, 3);
        assert_eq!(source.put_back_misplaced(), vec![(key, 3)]);
        // Its neighbours lost too: only the bodies say where, and they say it once.
        let mut source = chained(8, Some(&op))?;
        source.headers.insert(2, Err("lost".into()));
        source.headers.remove(&4);
        let key = damage_key(&mut source, 3);
        for tx in [2, 4] {
            source.bodies.remove(&(tx, 0));
        }
        assert_eq!(source.put_back_misplaced(), vec![(key, 3)]);
        Ok(())
    }
}
