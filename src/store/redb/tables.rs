//! Every redb table of the store and the layout of its keys and values.
//!
//! Keys are fixed-width where they can be. Write-once contents are laid out densely: their bytes
//! go in append order (documents keyed by an ascending sequence number, blobs in a chunked
//! byte stream) (append order packs redb's pages
//! full), and a small `*_index` table maps a hash to (sequence, reference count). Entities get a
//! dense `u64` number (`eid`) so that version keys are 24 fixed bytes. Entity and filesystem
//! ids in keys are `codec::id_key`s: a SHA-256 hex id takes 33 bytes instead of 64.
//!
//! To add a table (the indexer's `stat_by_dir`), define it here and open it where it is used;
//! [`create_all`] makes every table exist so that readers never meet a missing one.

use super::StorageResult as _;
use redb::{TableDefinition, WriteTransaction};

use crate::error::Result;

/// `meta`: name → value. Holds `format_version` (u32 little-endian) and running totals.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// `blob_chunks`: chunk number → [`BLOB_CHUNK`] bytes of the blob stream (the last one may be
/// shorter). Blob records (see `codec::encode_blob`) are appended to one byte stream cut into
/// chunks that fill a 4 KiB redb page each, so that the file holds about one byte per byte
/// stored whatever the blob sizes (values of 1–8 KiB stored one per row took 1.66× their size).
pub const BLOB_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("blob_chunks");
/// `blob_index`: SHA-256 of the bytes → (offset in the blob stream, record length, number of
/// documents using it).
pub const BLOB_INDEX: TableDefinition<[u8; 32], (u64, u64, u64)> =
    TableDefinition::new("blob_index");
/// Bytes per blob chunk of a store whose `meta` has no [`BLOB_CHUNK_KEY`] (every store made
/// before format 7): a 4 KiB page less more than redb's leaf header and offsets need.
pub const BLOB_CHUNK_OLD: u64 = 4032;
/// Bytes per blob chunk of a store made as format 7 or later: the most a 4 KiB leaf of one
/// `u64 → bytes` entry holds (measured: 4 080 fits, 4 084 takes a second page).
pub const BLOB_CHUNK: u64 = 4080;
/// The `meta` key of the store's blob chunk size (u64 LE; format 7): [`BLOB_CHUNK`] in a store
/// made as format 7 or later; absent, [`BLOB_CHUNK_OLD`].
pub const BLOB_CHUNK_KEY: &str = "blob_chunk_bytes";

/// `doc_data`: sequence → document record (the hashed fields, content by reference).
pub const DOC_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("doc_data");
/// `doc_index`: object hash → (sequence in `doc_data`, number of version rows using it, whether
/// the raw bytes of `file_hash` are kept as a blob).
pub const DOC_INDEX: TableDefinition<[u8; 32], (u64, u64, bool)> =
    TableDefinition::new("doc_index");

/// `entities`: entity id (`xt/id`, as `codec::id_key`: 33 bytes for a hex id) → entity record
/// (eid, type, source), or for a file named by its source (format 6) its eid alone
/// (`codec::StoredEntity`; see `entity.rs`).
pub const ENTITIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entities");
/// `entity_ids`: eid → entity id (as `codec::id_key`), the reverse of `entities`; for a file
/// named by its source (format 6), its source instead (`codec::StoredEntityId`), whose identity
/// hash is the id.
pub const ENTITY_IDS: TableDefinition<u64, &[u8]> = TableDefinition::new("entity_ids");

/// `versions`: (eid, valid_from µs, tx_id) → version record (object hash or tombstone, extras).
pub const VERSIONS: TableDefinition<(u64, i64, u64), &[u8]> = TableDefinition::new("versions");
/// `versions_by_tx`: (eid, tx_id) → (valid_from, tx_id) of the row with the greatest valid_from
/// among this entity's rows written up to and including that transaction: a prefix argmax that
/// answers "valid now as of an old transaction" with one lookup. One row per transaction that
/// wrote the entity (a ranged write's rows share it), 16 key bytes.
pub const VERSIONS_BY_TX: TableDefinition<(u64, u64), (i64, u64)> =
    TableDefinition::new("versions_by_tx");
/// `match_ops`: (eid, tx_id, op index) → (): where an entity's match ops are, for eviction (the
/// bodies of its writes are found through the op index of its version rows).
pub const MATCH_OPS: TableDefinition<(u64, u64, u32), ()> = TableDefinition::new("match_ops");

/// `tx_log`: tx_id → transaction header (tx_time, origin, op digests, chain).
pub const TX_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("tx_log");
/// `tx_ops`: (tx_id, op index) → op body; evicted bodies are removed, their digests stay.
pub const TX_OPS: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("tx_ops");

/// `evicted_ops`: (tx_id, op index) of an op body an eviction removed → the evicting tx_id.
/// The log keeps only the digest of an evicted body; this tells a body evicted on purpose from
/// one lost to damage. A store made before the table existed records evictions from the
/// transaction `meta[EVICTIONS_SINCE]` names on (a missing body of an earlier transaction may
/// have been evicted unrecorded).
pub const EVICTED_OPS: TableDefinition<(u64, u32), u64> = TableDefinition::new("evicted_ops");
/// The `meta` key of the first transaction whose evictions `evicted_ops` records (u64 LE).
pub const EVICTIONS_SINCE: &str = "evictions_recorded_since";

/// The `meta` key of the first transaction from which an entity's first write, when it writes
/// one version row, has no `versions_by_tx` row (u64 LE; format 5): 1 in a store made as format
/// 5, the first transaction after the upgrade in a format-4 store (its earlier writes keep
/// theirs). Absent: every write has its row. See `temporal::latest_at`.
pub const BY_TX_OMITTED_SINCE: &str = "by_tx_first_omitted_since";

/// The `meta` key of the first transaction from which a file created with an id that is its
/// source's identity hash keeps its source once, in `entity_ids`, and a number alone in
/// `entities` (u64 LE; store format 6, `entity.rs`): 1 in a store made as format 6 or rebuilt,
/// the first transaction after the upgrade in an older store (its earlier entities keep their
/// whole rows). Absent: every entity has its whole row.
pub const SOURCES_IN_IDS_SINCE: &str = "file_sources_in_entity_ids_since";

/// The `meta` key of the first transaction whose op bodies this store wrote as format 8 does
/// (u64 LE): a file's first write names its filesystem by its place in the log header's list
/// (`codec::encode_op_in`). 1 in a store made as format 8, the first transaction after the
/// upgrade in an older store. Bodies and headers say their own form, so readers do not need
/// it; it tells where a store's shorter bodies begin. Absent: every body names it in full.
pub const FS_IN_HEADERS_SINCE: &str = "filesystems_in_headers_since";

/// The `meta` key of the first transaction from which a file named by its source (format 6's
/// `entities` row of its number alone) is keyed in `entities` by its short key,
/// `codec::SHORT_ENTITY_KEY` bytes of its id's 33 (u64 LE; store format 8, `entity.rs`): 1 in a
/// store made as format 8 or rebuilt, the first transaction after the upgrade in an older store.
/// Absent: every row has its whole key.
pub const SHORT_ENTITY_KEYS_SINCE: &str = "short_entity_keys_since";

/// The `meta` key of the first transaction from which a file's version rows name their
/// document by its `doc_data` sequence number instead of its object hash (u64 LE; store format
/// 8, `codec::VERSION_BY_SEQ`): 1 in a store made as format 8 or rebuilt, the first transaction
/// after the upgrade in an older store. Rows say their own form, so readers do not need it;
/// fsck's replay writes by it. Absent: every row holds its hash.
pub const DOC_SEQS_SINCE: &str = "version_doc_numbers_since";

/// The `meta` keys saying from which transaction the rows a reader must tell apart start
/// (formats 5, 6 and 8): every writer and fsck's replay read them, and a rebuild, which writes
/// every row anew, sets each to 1.
pub const ROW_FORMAT_SINCE_KEYS: [&str; 4] = [
    BY_TX_OMITTED_SINCE,
    SOURCES_IN_IDS_SINCE,
    SHORT_ENTITY_KEYS_SINCE,
    DOC_SEQS_SINCE,
];

/// The `meta` key of the least `doc_data` number a new document may take (u64 LE), set when
/// the document with the greatest number is erased: a number is never given to a second
/// document, so a version row left naming an erased one (a file's rows name theirs by number,
/// store format 8) never reads as another. Absent: `doc_data`'s last number plus one (old
/// builds ignore the key).
pub const DOC_NUMBERS_FROM: &str = "doc_numbers_from";

/// The `meta` key of the least directory number a new directory may take (u64 LE), set when a
/// write frees the greatest number (its directory lost its last `stat_by_dir` and `paths_by_dir`
/// row): a number is never given to a second directory, so a stale or damaged row naming a
/// freed one never reads as another directory's file. Absent: `directory_paths`' last number plus one (old builds
/// ignore the key).
pub const DIR_NUMBERS_FROM: &str = "dir_numbers_from";

/// `paths`: (filesystem id as `codec::id_key`, canonical path) → eid of the file there (8
/// fixed bytes where the 33-byte id took 37; `entity_ids` turns it into the id). Stores before
/// format 10 only: the upgrade moves its rows into [`PATHS_BY_DIR`] and deletes it, and a
/// store made as format 10 has none.
pub const PATHS: TableDefinition<(&[u8], &str), u64> = TableDefinition::new("paths");

/// `paths_by_dir`: a file's directory number and name, as in [`STAT_BY_DIR`] → eid of the file
/// there; the files' paths from store format 10 on (`dirnum.rs`), where [`PATHS`] held the
/// filesystem key and the whole path.
pub const PATHS_BY_DIR: TableDefinition<&[u8], u64> = TableDefinition::new("paths_by_dir");

/// `stat_cache`: (filesystem id as `codec::id_key`, canonical path) → stat record
/// (`codec::StatRec`): what the indexer saw when it last read the file, so that an unchanged
/// file is not read again. Stores before format 9 only: the upgrade moves its rows into
/// [`STAT_BY_DIR`] and deletes it, and a store made as format 9 has none.
pub const STAT_CACHE: TableDefinition<(&[u8], &str), &[u8]> = TableDefinition::new("stat_cache");

/// `stat_by_dir`: a file's directory number (`dirnum::number_prefix`, LEB128) followed by its
/// name (the canonical path after its last `/`) → stat record (`codec::StatRec`); the stat
/// cache from store format 9 on (`dirnum.rs`), where [`STAT_CACHE`] held the whole path.
pub const STAT_BY_DIR: TableDefinition<&[u8], &[u8]> = TableDefinition::new("stat_by_dir");

/// `directories`: (filesystem key as in `paths`, a directory's canonical path with its
/// trailing `/`) → the directory's number (store format 9, `dirnum.rs`), shared by
/// [`STAT_BY_DIR`] and [`PATHS_BY_DIR`] (format 10).
pub const DIRECTORIES: TableDefinition<(&[u8], &str), u32> = TableDefinition::new("directories");
/// `directory_paths`: directory number → (filesystem key, directory path), the reverse of
/// [`DIRECTORIES`].
pub const DIRECTORY_PATHS: TableDefinition<u32, (&[u8], &str)> =
    TableDefinition::new("directory_paths");

/// `filesystems`: filesystem id (as `codec::id_key`) → its number (store format 5,
/// `fsnum.rs`): the `paths` and `stat_cache` keys of a numbered filesystem carry
/// `codec::fs_number_key` instead of the id; number `fsnum::LONG_KEYS` (0) keeps the id (a
/// filesystem a format-4 file already held).
pub const FILESYSTEMS: TableDefinition<&[u8], u32> = TableDefinition::new("filesystems");
/// `filesystem_ids`: filesystem number → filesystem id (as `codec::id_key`), the reverse of
/// `filesystems`.
pub const FILESYSTEM_IDS: TableDefinition<u32, &[u8]> = TableDefinition::new("filesystem_ids");

/// `meta_snapshots`: name (a session's entity id) → metadata snapshot record (`snapshot.rs`:
/// the stored metadata of many entities as of one transaction, with a BLAKE3 checksum), so that
/// a session's resume reads one record instead of a few rows per file. Only a cache: a store
/// made before the table existed, or a damaged record, reads row by row.
pub const META_SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("meta_snapshots");

/// Creates every table that does not exist yet.
///
/// # Errors
/// [`crate::Error::Storage`] when redb fails.
pub fn create_all(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(META).db()?;
    tx.open_table(BLOB_DATA).db()?;
    tx.open_table(BLOB_INDEX).db()?;
    tx.open_table(DOC_DATA).db()?;
    tx.open_table(DOC_INDEX).db()?;
    tx.open_table(ENTITIES).db()?;
    tx.open_table(ENTITY_IDS).db()?;
    tx.open_table(VERSIONS).db()?;
    tx.open_table(VERSIONS_BY_TX).db()?;
    tx.open_table(MATCH_OPS).db()?;
    tx.open_table(TX_LOG).db()?;
    tx.open_table(TX_OPS).db()?;
    tx.open_table(EVICTED_OPS).db()?;
    tx.open_table(PATHS_BY_DIR).db()?;
    tx.open_table(STAT_BY_DIR).db()?;
    tx.open_table(DIRECTORIES).db()?;
    tx.open_table(DIRECTORY_PATHS).db()?;
    tx.open_table(META_SNAPSHOTS).db()?;
    tx.open_table(FILESYSTEMS).db()?;
    tx.open_table(FILESYSTEM_IDS).db()?;
    Ok(())
}
