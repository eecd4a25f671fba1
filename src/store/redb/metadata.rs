//! Metadata-only reads: a version's row and its document's fields, without reading content blobs
//! or rebuilding (and rehashing) whole objects.
//!
//! [`RedbStore::as_of`] rebuilds every object from its parts and checks that it hashes to the stored
//! object hash; that is the right default, and `fsck` checks every document the same way. A
//! caller that needs only what a metadata line shows (a session's metadata cache over thousands
//! of files) reads [`ObjectMeta`] instead: the stored object hash is taken as recorded and the
//! content is not read, so one entity costs a few table lookups and the parse of its fields.

use super::*;
use super::{ReadTables, RedbStore, TxId, entity_rec};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::object::{Fields, FilesystemSource, ObjectType, Source};

pub(in crate::store) fn parse_fields(object_type: ObjectType, json: &str) -> Result<Fields> {
    fn typed<T: serde::de::DeserializeOwned>(json: &str) -> serde_json::Result<T> {
        serde_json::from_str(json)
    }
    let parsed = match object_type {
        ObjectType::File => typed(json).map(Fields::File),
        ObjectType::Toolcall => typed(json).map(Fields::Toolcall),
        ObjectType::Chat => typed(json).map(Fields::Chat),
        ObjectType::Session => typed(json).map(Fields::Session),
        ObjectType::SystemPrompt | ObjectType::SessionConfig => {
            let value: serde_json::Value = serde_json::from_str(json)
                .map_err(|e| Error::corrupt(format!("{object_type} fields: {e}")))?;
            return Fields::from_json(object_type, value)
                .map_err(|e| Error::corrupt(format!("stored document: {e}")));
        }
    };
    parsed.map_err(|e| Error::corrupt(format!("stored {object_type} fields: {e}")))
}

impl ReadTables {
    /// The metadata of the version of `id` visible at valid time `now` as of `tx`, with its
    /// document's fields as the stored canonical JSON.
    pub(super) fn meta_at(
        &self,
        id: &str,
        now: i64,
        tx: u64,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let Some(entity) = entity_rec(self, id)? else {
            return Ok(None);
        };
        // A row naming its document by number has that document decoded and hashed to find
        // its object hash: it is kept and served, not read again (store format 8).
        let docs = docs::KeptDocs {
            stored: self.docs(),
            kept: std::cell::RefCell::new(None),
        };
        let Some((info, row)) = self.info_row_in(&docs, id, entity.eid, now, tx)? else {
            return Ok(None);
        };
        let object_type: ObjectType = entity.object_type.parse()?;
        let (document, json) = match &row.rec.object_hash {
            None => (None, None),
            Some(hash) => {
                let doc = match docs.take(hash) {
                    Some(doc) => doc,
                    None => self.version_doc(id, hash)?,
                };
                let meta = DocumentMeta {
                    file_hash: doc.file_hash.map(Hash),
                    content_hash: doc.content_hash.map(Hash),
                    fields: parse_fields(object_type, &doc.fields)?,
                };
                (Some(meta), Some(doc.fields))
            }
        };
        // The entity record is ours: its source moves out rather than being copied.
        let source = entity.source.map(|(filesystem_id, path)| {
            Source::Filesystem(FilesystemSource {
                filesystem_id: filesystem_id.0,
                path,
            })
        });
        let meta = ObjectMeta {
            info,
            object_type,
            source,
            document,
        };
        Ok(Some((meta, json)))
    }
}

/// A version's metadata with its stored fields JSON (`None` for a tombstone).
pub(super) type MetaRow = (ObjectMeta, Option<String>);

/// Ids from which [`RedbStore::metadata_many`] reads in parallel (a thread costs ~20 µs; an id
/// ~6 µs).
const PARALLEL_FROM: usize = 512;

/// Threads [`RedbStore::metadata_many`] reads with at most.
const MAX_THREADS: usize = 4;

impl RedbStore {
    /// The metadata of the versions of `ids` valid now as known at transaction `tx` (latest when
    /// `None`), in one read transaction; `None` for an unknown id or one with no version visible
    /// there. Content is not read and objects are not rehashed (see the module notes);
    /// [`RedbStore::as_of`] and `fsck` verify.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a version points at a missing document or its fields do not parse.
    pub fn metadata_many(&self, ids: &[&str], tx: Option<TxId>) -> Result<Vec<Option<ObjectMeta>>> {
        let rtx = self.read()?;
        let now = ReadTables::open(&rtx)?.now()?;
        let rows = self.read_rows(&rtx, ids, now, tx.map_or(u64::MAX, |t| t.0))?;
        Ok(rows
            .into_iter()
            .map(|row| row.map(|(meta, _)| meta))
            .collect())
    }

    /// The metadata of each of `ids` visible at valid time `now` as of `tx`, with its stored
    /// fields JSON, read from `rtx` (in parallel when there are many).
    ///
    /// # Errors
    /// As [`RedbStore::metadata_many`].
    pub(super) fn read_rows(
        &self,
        rtx: &redb::ReadTransaction,
        ids: &[&str],
        now: i64,
        tx: u64,
    ) -> Result<Vec<Option<MetaRow>>> {
        let part = |ids: &[&str]| -> Result<Vec<Option<MetaRow>>> {
            let r = ReadTables::open(rtx)?;
            ids.iter().map(|id| r.meta_at(id, now, tx)).collect()
        };
        if ids.len() < PARALLEL_FROM {
            return part(ids);
        }
        // The core count, asked of the system once per process (`store::cores`).
        let threads = crate::store::cores();
        if threads < 2 {
            return part(ids);
        }
        // Many ids (a session's whole index): split over the cores, each part reading the same
        // snapshot. A panic of a part (a damaged page) is resumed here, under the caller's guard.
        let size = ids.len().div_ceil(threads.min(MAX_THREADS));
        std::thread::scope(|scope| {
            let parts: Vec<_> = ids
                .chunks(size)
                .map(|ids| scope.spawn(|| guard::quietly(|| part(ids))))
                .collect();
            let mut out = Vec::with_capacity(ids.len());
            for handle in parts {
                match handle.join() {
                    Ok(metas) => out.extend(metas?),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            Ok(out)
        })
    }

    /// [`RedbStore::metadata`] with the document's fields as stored (canonical JSON; `None` for a
    /// tombstone): what a loaded session keeps to append to.
    ///
    /// # Errors
    /// As [`RedbStore::metadata_many`].
    pub(crate) fn metadata_with_json(
        &self,
        id: &str,
        tx: Option<TxId>,
    ) -> Result<Option<(ObjectMeta, Option<String>)>> {
        let rtx = self.read()?;
        let r = ReadTables::open(&rtx)?;
        let now = r.now()?;
        r.meta_at(id, now, tx.map_or(u64::MAX, |t| t.0))
    }

    /// [`RedbStore::metadata_many`] for one id.
    ///
    /// # Errors
    /// As [`RedbStore::metadata_many`].
    pub fn metadata(&self, id: &str, tx: Option<TxId>) -> Result<Option<ObjectMeta>> {
        Ok(self.metadata_many(&[id], tx)?.pop().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object, ToolStatus, ToolcallFields};
    use crate::store::{Op, Origin};

    fn source(path: &str) -> FilesystemSource {
        FilesystemSource {
            filesystem_id: "fs".into(),
            path: path.into(),
        }
    }

    /// Enough ids to be read in parallel: the answers are in the order asked, unknown ids
    /// included, and each is what a read of that id alone gives.
    #[test]
    fn many_ids_read_in_parallel_answer_in_order() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let mut ops = Vec::new();
        let mut ids = Vec::new();
        for n in 0..PARALLEL_FROM + 40 {
            let file = Object::file_text(source(&format!("/p/{n}.rs")), format!("{n}\n"))?;
            ids.push(file.id().to_string());
            ops.push(Op::put(file));
            if n % 97 == 0 {
                ids.push(format!("session:unknown-{n}"));
            }
        }
        store.transact(ops, Origin::Cli)?;
        let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
        let many = store.metadata_many(&asked, None)?;
        assert_eq!(many.len(), asked.len());
        for (id, meta) in asked.iter().zip(&many) {
            let alone = store.metadata(id, None)?;
            assert_eq!(meta.is_some(), !id.starts_with("session:unknown"), "{id}");
            assert_eq!(
                meta.as_ref()
                    .map(|m| (&m.info.entity, &m.info.object_hash, &m.source)),
                alone
                    .as_ref()
                    .map(|m| (&m.info.entity, &m.info.object_hash, &m.source)),
                "{id}"
            );
        }
        Ok(())
    }

    #[test]
    fn metadata_matches_the_rebuilt_object() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let file = Object::file_text(source("/a/b.rs"), "fn main() {}\n".into())?;
        let call = Object::toolcall(
            "toolcall:1",
            ToolcallFields {
                tool: "grep".into(),
                args: serde_json::Map::new(),
                args_display: None,
                status: ToolStatus::Fail,
                chat_ref: "chat:s".into(),
                file_refs: None,
            },
            "no match".into(),
        )?;
        let file_id = file.id().to_string();
        let first = store.transact(vec![Op::put(file), Op::put(call)], Origin::Cli)?;
        let ids = [file_id.as_str(), "toolcall:1", "unknown"];
        let metas = store.metadata_many(&ids, None)?;
        for (id, meta) in ids.iter().zip(&metas).take(2) {
            let meta = meta.as_ref().ok_or_else(|| Error::not_found(*id))?;
            let version = store.get(id)?.ok_or_else(|| Error::not_found(*id))?;
            let object = version.object.ok_or_else(|| Error::not_found(*id))?;
            assert_eq!(meta.info, version.info);
            assert_eq!(meta.object_type, object.object_type());
            assert_eq!(meta.source.as_ref(), object.source());
            let doc = meta
                .document
                .as_ref()
                .ok_or_else(|| Error::not_found(*id))?;
            assert_eq!(&doc.fields, object.fields());
            assert_eq!(doc.file_hash.as_ref(), object.file_hash());
            assert_eq!(doc.content_hash.as_ref(), object.content_hash());
        }
        assert_eq!(metas[2], None);
        store.transact(vec![Op::delete(file_id.clone())], Origin::Cli)?;
        let gone = store
            .metadata(&file_id, None)?
            .ok_or_else(|| Error::not_found("tombstone"))?;
        assert!(gone.is_tombstone());
        assert_eq!(
            gone.source,
            Some(Source::Filesystem(source("/a/b.rs"))),
            "a tombstone still names its source"
        );
        let then = store
            .metadata(&file_id, Some(first.tx_id))?
            .ok_or_else(|| Error::not_found("as of the first tx"))?;
        assert!(!then.is_tombstone(), "as of the first tx the file existed");
        Ok(())
    }

    /// The metadata (and the object) of a file whose version row names its document by number
    /// reads that document's record once: the record decoded to find the row's object hash is
    /// the one served (it was read twice, once to hash it and once to serve it).
    #[test]
    fn reads_of_a_numbered_document_read_it_once() -> Result<()> {
        let store = RedbStore::in_memory()?;
        let file = Object::file_text(source("/a/once.rs"), "fn once() {}\n".into())?;
        let id = file.id().to_string();
        store.transact(vec![Op::put(file.clone())], Origin::Cli)?;
        super::docs::RECORD_READS.with(|n| n.set(0));
        let meta = store
            .metadata(&id, None)?
            .ok_or_else(|| Error::not_found(id.as_str()))?;
        let reads = super::docs::RECORD_READS.with(std::cell::Cell::get);
        assert_eq!(reads, 1, "doc_data records read for one metadata");
        let doc = meta.document.ok_or_else(|| Error::not_found("document"))?;
        assert_eq!(&doc.fields, file.fields());
        assert_eq!(doc.content_hash.as_ref(), file.content_hash());
        assert_eq!(meta.info.object_hash.as_ref(), Some(file.object_hash()));
        // So does a read of the whole object (rebuilt and rehashed from that record).
        super::docs::RECORD_READS.with(|n| n.set(0));
        let version = store.as_of(&id, None, None)?;
        assert_eq!(super::docs::RECORD_READS.with(std::cell::Cell::get), 1);
        assert_eq!(version.and_then(|v| v.object), Some(file));
        Ok(())
    }

    #[test]
    fn corrupt_fields_are_reported() {
        assert!(matches!(
            parse_fields(ObjectType::File, "{\"nope\":1}"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            parse_fields(ObjectType::SystemPrompt, "{\"x\":1}"),
            Err(Error::Corrupt { .. })
        ));
    }
}
