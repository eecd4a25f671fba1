//! Entity rows (store format 6): a file whose id is its source's identity hash keeps its source
//! once, in `entity_ids` (its filesystem by number, as in its `paths` key), and its `entities`
//! row holds its number alone; every other entity, and every row written before the store's
//! `meta[SOURCES_IN_IDS_SINCE]`, keeps the whole record in `entities` and its id in
//! `entity_ids`. Readers take either layout: [`entity_rec`] rebuilds the whole record, and
//! [`id_of_eid`] recomputes a file's id from its source.

use redb::{ReadTransaction, ReadableTable};

use super::StorageResult as _;
use super::codec::{self, EntityRec, IdStr, StoredEntity, StoredEntityId, TypeName};
use super::tables::{ENTITIES, ENTITY_IDS, FILESYSTEM_IDS};
use crate::error::{Error, Result};
use crate::object::ObjectType;

/// The tables an entity's record is read from.
pub(crate) trait EntityTables {
    /// `entities`' type.
    type Entities: ReadableTable<&'static [u8], &'static [u8]>;
    /// `entity_ids`' type.
    type Ids: ReadableTable<u64, &'static [u8]>;
    /// `entities`.
    fn entities(&self) -> &Self::Entities;
    /// `entity_ids`.
    fn entity_ids(&self) -> &Self::Ids;
    /// The filesystem id of number `n` (`filesystem_ids`), `None` when unknown.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    fn filesystem(&self, n: u32) -> Result<Option<String>>;
}

/// The entity tables of a read transaction.
pub(crate) struct ReadEntities {
    /// `entities`.
    pub(crate) entities: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    /// `entity_ids`.
    pub(crate) ids: redb::ReadOnlyTable<u64, &'static [u8]>,
    /// `filesystem_ids` (`None` in a format-4 file opened read-only, which has no numbers).
    pub(crate) filesystems: Option<redb::ReadOnlyTable<u32, &'static [u8]>>,
}

impl ReadEntities {
    /// Opens the entity tables of `rtx`.
    ///
    /// # Errors
    /// [`Error::Storage`] when redb fails.
    pub(crate) fn open(rtx: &ReadTransaction) -> Result<Self> {
        Ok(ReadEntities {
            entities: rtx.open_table(ENTITIES).db()?,
            ids: rtx.open_table(ENTITY_IDS).db()?,
            filesystems: filesystem_ids(rtx)?,
        })
    }
}

/// `filesystem_ids` of `rtx`, `None` when the file has none (format 4 read-only).
///
/// # Errors
/// [`Error::Storage`] when redb fails.
pub(crate) fn filesystem_ids(
    rtx: &ReadTransaction,
) -> Result<Option<redb::ReadOnlyTable<u32, &'static [u8]>>> {
    match rtx.open_table(FILESYSTEM_IDS) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(Error::storage("opening filesystem_ids", e)),
    }
}

/// The filesystem id of number `n` in `table`.
///
/// # Errors
/// [`Error::Storage`] when redb fails; [`Error::Corrupt`] when the stored id is malformed.
pub(crate) fn filesystem_in(
    table: Option<&impl ReadableTable<u32, &'static [u8]>>,
    n: u32,
) -> Result<Option<String>> {
    let Some(table) = table else {
        return Ok(None);
    };
    match table.get(n).db()? {
        Some(key) => Ok(Some(codec::id_of_key(key.value(), "filesystem id")?)),
        None => Ok(None),
    }
}

impl EntityTables for ReadEntities {
    type Entities = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;
    type Ids = redb::ReadOnlyTable<u64, &'static [u8]>;
    fn entities(&self) -> &Self::Entities {
        &self.entities
    }
    fn entity_ids(&self) -> &Self::Ids {
        &self.ids
    }
    fn filesystem(&self, n: u32) -> Result<Option<String>> {
        filesystem_in(self.filesystems.as_ref(), n)
    }
}

/// The filesystem id a key prefix names (a number through `filesystem_ids`, or the id itself).
///
/// # Errors
/// [`Error::Corrupt`] for an unknown number or a malformed key.
pub(crate) fn filesystem_of_key(t: &impl EntityTables, key: &[u8]) -> Result<String> {
    match codec::fs_number_of_key(key) {
        Some(n) => t.filesystem(n)?.ok_or_else(|| {
            Error::corrupt(format!(
                "an entity's source names filesystem number {n}, which filesystem_ids does not \
                 know; run `strata fsck`"
            ))
        }),
        None => codec::id_of_key(key, "the filesystem of an entity's source"),
    }
}

/// An `entity_ids` row with its filesystem named.
enum IdRow {
    /// An entity id.
    Id(String),
    /// A file's source: (filesystem id, path).
    Source(String, String),
}

/// What `entity_ids` holds for entity number `eid`, its filesystem named: an id, or a file's
/// source (filesystem id, path); `None` when the number is unknown.
///
/// # Errors
/// [`Error::Corrupt`] when the value does not decode or names an unknown filesystem.
fn stored_id(t: &impl EntityTables, eid: u64) -> Result<Option<IdRow>> {
    let Some(value) = t.entity_ids().get(eid).db()? else {
        return Ok(None);
    };
    Ok(Some(
        match codec::decode_entity_id(value.value(), "entity id in entity_ids")? {
            StoredEntityId::Id(id) => IdRow::Id(id),
            StoredEntityId::Source { fs_key, path } => {
                IdRow::Source(filesystem_of_key(t, &fs_key)?, path)
            }
        },
    ))
}

/// The id of entity number `eid` (a file's stored in format 6 is recomputed from its source);
/// `None` when the number is unknown.
///
/// # Errors
/// [`Error::Corrupt`] when the value does not decode or names an unknown filesystem.
pub(crate) fn id_of_eid(t: &impl EntityTables, eid: u64) -> Result<Option<String>> {
    Ok(match stored_id(t, eid)? {
        None => None,
        Some(IdRow::Id(id)) => Some(id),
        Some(IdRow::Source(fs, path)) => Some(codec::file_id(&fs, &path)?),
    })
}

/// The whole record of the entity whose `entities` row is `row` (id `id`).
///
/// # Errors
/// [`Error::Corrupt`] when a row does not decode, or a file's `entity_ids` row is missing or
/// names another entity.
pub(crate) fn entity_of_row(t: &impl EntityTables, id: &str, row: &[u8]) -> Result<EntityRec> {
    let stored = match codec::decode_entity(row, "entity") {
        Ok(stored) => stored,
        Err(_) => codec::decode_entity(row, &format!("entity {id}"))?,
    };
    match stored {
        StoredEntity::Whole(rec) => Ok(rec),
        StoredEntity::Sourced(eid) => {
            // Not rehashed here (a read of many entities would hash each source): fsck
            // compares both rows with the ones the log makes.
            match stored_id(t, eid)? {
                Some(IdRow::Source(fs, path)) => Ok(EntityRec {
                    eid,
                    object_type: TypeName::from(ObjectType::File),
                    source: Some((IdStr(fs), path)),
                }),
                _ => Err(Error::corrupt(format!(
                    "entity {id} keeps its source under number {eid} in entity_ids, which does \
                     not hold it; run `strata fsck`"
                ))),
            }
        }
    }
}

/// The whole record of entity `id`, `None` when the store does not know it.
///
/// # Errors
/// As [`entity_of_row`].
pub(crate) fn entity_rec(t: &impl EntityTables, id: &str) -> Result<Option<EntityRec>> {
    Ok(entity_row(t, id)?.map(|(_, rec)| rec))
}

/// The `entities` key of entity `id` (its whole [`codec::id_key`], or from store format 8 a
/// file's short key, `codec::SHORT_ENTITY_KEY`) and its whole record; `None` when the store does
/// not know it. A short key's row is the entity's when the source `entity_ids` holds for it
/// hashes to `id`; a hash id is looked for among the keys that start with its short key (one
/// B-tree seek, as a lookup of the whole key).
///
/// # Errors
/// As [`entity_of_row`].
pub(crate) fn entity_row(t: &impl EntityTables, id: &str) -> Result<Option<(Vec<u8>, EntityRec)>> {
    let full = codec::id_key(id);
    let Some(short) = codec::short_entity_key(&full) else {
        return match t.entities().get(full.as_slice()).db()? {
            Some(row) => {
                let rec = entity_of_row(t, id, row.value())?;
                Ok(Some((full, rec)))
            }
            None => Ok(None),
        };
    };
    for entry in t.entities().range(short..).db()? {
        let (key, value) = entry.db()?;
        let key = key.value();
        if !key.starts_with(short) {
            break;
        }
        if key == full.as_slice() {
            return Ok(Some((full.clone(), entity_of_row(t, id, value.value())?)));
        }
        if key.len() == short.len() {
            let rec = entity_of_row(t, id, value.value())?;
            if source_id(&rec)?.as_deref() == Some(id) {
                return Ok(Some((key.to_vec(), rec)));
            }
        }
    }
    Ok(None)
}

/// The id a file's record implies: its source's identity hash; `None` for a record without a
/// source or not a file.
///
/// # Errors
/// [`Error::InvalidInput`] when the source cannot be hashed.
fn source_id(rec: &EntityRec) -> Result<Option<String>> {
    match &rec.source {
        Some((fs, path)) if rec.object_type.0 == ObjectType::File.as_str() => {
            Ok(Some(codec::file_id(fs, path)?))
        }
        _ => Ok(None),
    }
}

/// The id of the entity whose `entities` row is (`key`, `value`): the key's own id, or for a
/// short key (store format 8) its source's identity hash, checked to start with the key.
///
/// # Errors
/// [`Error::Corrupt`] when the key is no id, or a short key's row names no source that hashes to
/// an id starting with it.
pub(crate) fn id_of_row(t: &impl EntityTables, key: &[u8], value: &[u8]) -> Result<String> {
    if !codec::is_short_entity_key(key) {
        return codec::id_of_key(key, "entity key");
    }
    let eid = match codec::decode_entity(value, "entity") {
        Ok(StoredEntity::Sourced(eid)) => eid,
        _ => {
            return Err(Error::corrupt(
                "an entity under a short key is not a file named by its source; run `strata fsck`",
            ));
        }
    };
    match id_of_eid(t, eid)? {
        Some(id) if codec::id_key(&id).starts_with(key) => Ok(id),
        _ => Err(Error::corrupt(format!(
            "the entity under short key {} has no source in entity_ids that hashes to it; \
             run `strata fsck`",
            hex::encode(key)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tables::{ENTITIES, ENTITY_IDS};
    use super::super::{DB_FILE, RedbStore};
    use super::*;
    use crate::object::{FilesystemSource, Object, ToolStatus, ToolcallFields};
    use crate::store::{Op, Origin};

    fn file(path: &str) -> Result<Object> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "ab".repeat(32),
                path: path.into(),
            },
            format!("text of {path}"),
        )
    }

    fn toolcall(id: &str) -> Result<Object> {
        Object::toolcall(
            id,
            ToolcallFields {
                tool: "grep".into(),
                args: serde_json::Map::new(),
                args_display: None,
                status: ToolStatus::Fail,
                chat_ref: "chat:s".into(),
                file_refs: None,
            },
            "no match".into(),
        )
    }

    /// The lengths of the `entities` keys, in key order.
    fn key_lengths(store: &RedbStore) -> Result<Vec<usize>> {
        let rtx = store.read()?;
        let mut out = Vec::new();
        for entry in rtx.open_table(ENTITIES).db()?.iter().db()? {
            out.push(entry.db()?.0.value().len());
        }
        Ok(out)
    }

    /// Whether every id is found, by lookup and by prefix, and listed.
    fn all_found(store: &RedbStore, ids: &[&str]) -> Result<()> {
        let live: Vec<String> = store.live_entities()?.into_iter().map(|e| e.id).collect();
        for id in ids {
            assert!(store.entity_exists(id)?, "{id}");
            assert!(store.as_of(id, None, None)?.is_some(), "{id}");
            assert!(live.iter().any(|l| l == id), "{id} in {live:?}");
            for n in [1, 8, 21, 22, 23, 30, 64] {
                let found = store.ids_with_prefix(&id[..n], 100)?;
                assert!(
                    found.iter().any(|f| f == id),
                    "{id} by {n} digits: {found:?}"
                );
                assert!(found.iter().all(|f| f.starts_with(&id[..n])), "{found:?}");
                let mut sorted = found.clone();
                sorted.sort();
                assert_eq!(found, sorted);
            }
        }
        Ok(())
    }

    /// A file named by its source gets a 12-byte key (format 8); an id sharing its first 88
    /// bits keeps its whole key, before or after it; both are found by lookup, by prefix and in
    /// the listing; a file whose short key another row holds keeps its whole key; an evict
    /// removes the row under either key; fsck and a rebuild agree.
    #[test]
    fn files_get_short_keys_and_ids_sharing_their_bits_keep_whole_ones() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = RedbStore::create(tmp.path())?;
        let (a, b, c) = (file("/a.rs")?, file("/b.rs")?, file("/c.rs")?);
        let ids = [a.id().to_string(), b.id().to_string(), c.id().to_string()];
        let twin_of =
            |id: &str, fill: char| format!("{}{}", &id[..22], fill.to_string().repeat(42));
        let (low, high) = (twin_of(&ids[0], '0'), twin_of(&ids[0], 'f'));
        store.transact(vec![Op::put(toolcall(&low)?)], Origin::Cli)?;
        store.transact(vec![Op::put(a), Op::put(toolcall(&high)?)], Origin::Cli)?;
        let mut lengths = key_lengths(&store)?;
        lengths.sort();
        assert_eq!(lengths, [SHORT_KEY, 33, 33]);
        all_found(&store, &[&ids[0], &low, &high])?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        // c's short key held by a row naming a (as a file whose id shared c's bits would).
        let short = codec::id_key(&ids[2])[..SHORT_KEY].to_vec();
        {
            let wtx = store.begin_write()?;
            {
                let rtx_eid = {
                    let entities = wtx.open_table(ENTITIES).db()?;
                    let key = codec::id_key(&ids[0])[..SHORT_KEY].to_vec();
                    let row = entities
                        .get(key.as_slice())
                        .db()?
                        .map(|v| v.value().to_vec());
                    row.ok_or_else(|| Error::invariant("a's short row"))?
                };
                let mut entities = wtx.open_table(ENTITIES).db()?;
                entities.insert(short.as_slice(), rtx_eid.as_slice()).db()?;
            }
            wtx.commit().db()?;
        }
        store.transact(vec![Op::put(b), Op::put(c)], Origin::Cli)?;
        let mut lengths = key_lengths(&store)?;
        lengths.sort();
        assert_eq!(lengths, [SHORT_KEY, SHORT_KEY, SHORT_KEY, 33, 33, 33]);
        for id in [&ids[0], &ids[1], &ids[2], &low, &high] {
            assert!(store.entity_exists(id)?, "{id}");
            assert!(store.as_of(id, None, None)?.is_some(), "{id}");
        }
        // The row (which names a file whose id does not start with its key) is damage to a
        // listing; without it, every entity is found.
        assert!(matches!(store.live_entities(), Err(Error::Corrupt { .. })));
        {
            let wtx = store.begin_write()?;
            wtx.open_table(ENTITIES)
                .db()?
                .remove(short.as_slice())
                .db()?;
            wtx.commit().db()?;
        }
        all_found(&store, &[&ids[0], &ids[1], &ids[2], &low, &high])?;
        store.evict(&ids[2], Origin::Cli)?;
        assert!(!store.entity_exists(&ids[2])?);
        assert_eq!(key_lengths(&store)?.len(), 4, "c's whole key went");
        all_found(&store, &[&ids[0], &ids[1], &low, &high])?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        store.evict(&ids[0], Origin::Cli)?;
        all_found(&store, &[&ids[1], &low, &high])?;
        assert!(!store.entity_exists(&ids[0])?);
        store.fsck_rebuild()?;
        assert!(store.fsck().is_empty(), "{:?}", store.fsck());
        all_found(&store, &[&ids[1], &low, &high])?;
        // A short key whose row names a source of another id is damage a reader names.
        {
            let wtx = store.begin_write()?;
            {
                let mut entity_ids = wtx.open_table(ENTITY_IDS).db()?;
                let eid = store_eid(&store, &ids[1])?;
                let other = codec::encode_entity_source(&codec::id_key(&"ab".repeat(32)), "/z")?;
                entity_ids.insert(eid, other.as_slice()).db()?;
            }
            wtx.commit().db()?;
        }
        assert!(matches!(store.live_entities(), Err(Error::Corrupt { .. })));
        assert!(!store.fsck().is_empty());
        drop(store);
        assert!(tmp.path().join(DB_FILE).exists());
        Ok(())
    }

    /// A lookup by prefix with a limit gives the first ids in id order when a tool call's id
    /// that shares a file's first 88 bits sorts before the file's (its whole key sorts after
    /// the file's short one).
    #[test]
    fn a_limited_prefix_lookup_gives_the_first_ids_in_id_order() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let a = file("/a.rs")?;
        let id = a.id().to_string();
        let low = format!("{}{}", &id[..22], "0".repeat(42));
        assert!(low < id);
        store.transact(vec![Op::put(a), Op::put(toolcall(&low)?)], Origin::Cli)?;
        for n in [1, 22] {
            assert_eq!(
                store.ids_with_prefix(&id[..n], 1)?,
                std::slice::from_ref(&low),
                "{n} digits"
            );
            assert_eq!(
                store.ids_with_prefix(&id[..n], 2)?,
                [low.clone(), id.clone()]
            );
        }
        Ok(())
    }

    /// The number of entity `id`.
    fn store_eid(store: &RedbStore, id: &str) -> Result<u64> {
        let rtx = store.read()?;
        let entities = ReadEntities::open(&rtx)?;
        entity_rec(&entities, id)?
            .map(|rec| rec.eid)
            .ok_or_else(|| Error::invariant("no such entity"))
    }

    const SHORT_KEY: usize = codec::SHORT_ENTITY_KEY;
}
