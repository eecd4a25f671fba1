//! Opening a store for reading only: no header writes and no fsync, so that `show`, `log` and the
//! other reading commands cost a lookup, not a commit (a read-write open marks the file open and
//! closed again, five fsyncs measured with strace).

use std::path::Path;

use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, WriteTransaction};

use super::{DB_FILE, Store};
use crate::error::{Error, Result};

/// The redb handle of a store: read-write, or read-only.
pub(crate) enum Db {
    /// Opened by `create`, `open` or `in_memory`: reads and writes.
    Writable(Database),
    /// Opened by [`Store::open_read_only`]: reads only.
    ReadOnly(ReadOnlyDatabase),
}

/// The error of a write attempted through a read-only handle.
#[derive(Debug)]
pub(crate) struct OpenedReadOnly;

impl std::fmt::Display for OpenedReadOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the store was opened read-only; open it with Store::open to write")
    }
}

impl Db {
    /// Begins a read transaction.
    pub(crate) fn begin_read(&self) -> Result<ReadTransaction, redb::TransactionError> {
        match self {
            Db::Writable(db) => db.begin_read(),
            Db::ReadOnly(db) => db.begin_read(),
        }
    }

    /// Begins a write transaction; refused on a read-only handle.
    pub(crate) fn begin_write(&self) -> Result<WriteTransaction, WriteRefused> {
        match self {
            Db::Writable(db) => db.begin_write().map_err(WriteRefused::Redb),
            Db::ReadOnly(_) => Err(WriteRefused::ReadOnly(OpenedReadOnly)),
        }
    }

    /// The read-write handle, for what only it can do (compaction).
    pub(crate) fn writable(&mut self) -> Option<&mut Database> {
        match self {
            Db::Writable(db) => Some(db),
            Db::ReadOnly(_) => None,
        }
    }

    /// Whether this handle only reads.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, Db::ReadOnly(_))
    }
}

/// Why a write transaction could not begin.
#[derive(Debug)]
pub(crate) enum WriteRefused {
    /// redb refused it.
    Redb(redb::TransactionError),
    /// The handle is read-only.
    ReadOnly(OpenedReadOnly),
}

impl std::fmt::Display for WriteRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteRefused::Redb(e) => e.fmt(f),
            WriteRefused::ReadOnly(e) => e.fmt(f),
        }
    }
}

impl Store {
    /// Opens the existing store in `dir` for reading only: no write to the file, so nothing to
    /// sync. A store that was not closed cleanly needs a repair, which only a read-write open
    /// makes: then this falls back to [`Store::open`].
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let path = dir.join(DB_FILE);
        if !path.exists() {
            return Store::open(dir);
        }
        let mut builder = Database::builder();
        builder.set_cache_size(super::CACHE_BYTES);
        match builder.open_read_only(&path) {
            Ok(db) => {
                let store = Store {
                    db: Db::ReadOnly(db),
                    dir: Some(dir.to_path_buf()),
                    opened: (0, 0),
                    base_cache: super::doc_delta::BaseCache::default(),
                };
                store.check_format(&path)?;
                Ok(store)
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(Error::StoreLocked {
                path,
                holder: super::lock_holder(dir),
            }),
            // Not closed cleanly (or anything else a read-only open cannot handle): the normal
            // open repairs it.
            Err(_) => Store::open(dir),
        }
    }

    /// Whether this store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.db.is_read_only()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{FilesystemSource, Object};
    use crate::store::{Op, Origin};

    #[test]
    fn a_read_only_store_reads_and_refuses_writes() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let source = FilesystemSource {
            filesystem_id: "fs".into(),
            path: "/a.txt".into(),
        };
        let object = Object::file_text(source, "a".into())?;
        let id = object.id().to_string();
        {
            let store = Store::create(tmp.path())?;
            store.transact(vec![Op::put(object.clone())], Origin::Cli)?;
        }
        let before = std::fs::read(tmp.path().join(DB_FILE)).map_err(|e| Error::io("read", e))?;
        {
            let store = Store::open_read_only(tmp.path())?;
            assert!(store.is_read_only());
            let got = store.get(&id)?.and_then(|v| v.object);
            assert_eq!(got.as_ref(), Some(&object));
            let err = store
                .transact(vec![Op::delete(id.clone())], Origin::Cli)
                .map(|_| ())
                .unwrap_err();
            assert!(err.to_string().contains("read-only"), "{err}");
            // Two readers at once are fine.
            let second = Store::open_read_only(tmp.path())?;
            assert!(second.get(&id)?.is_some());
        }
        let after = std::fs::read(tmp.path().join(DB_FILE)).map_err(|e| Error::io("read", e))?;
        assert!(before == after, "a read-only open left the file as it was");
        assert!(
            !tmp.path().join(super::super::LOCK_FILE).exists(),
            "readers write no lock file (it names the writer)"
        );
        Ok(())
    }
}
