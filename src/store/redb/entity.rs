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
    let row = t.entities().get(codec::id_key(id).as_slice()).db()?;
    match row {
        Some(row) => Ok(Some(entity_of_row(t, id, row.value())?)),
        None => Ok(None),
    }
}
