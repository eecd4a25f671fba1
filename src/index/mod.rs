//! `Indexer`: turns files into planned store operations (seed 003 §4) and scans whole trees.
//!
//! Uses `store`, `resolve`, `object`, `hash`.
//!
//! [`Indexer::index_file`], [`Indexer::discover_file`] and [`Indexer::index_deletion`] plan ops and
//! return them without writing: a tree scan batches thousands into one transaction, a session puts
//! them into its own commit. Deny rules apply inside them, for every caller: a denied file becomes
//! a stub with `content_omitted: "denied"` and nothing of its bytes is read or stored.

mod budget;
mod dirstat;
mod disk;
mod listings;
mod read;
mod rules;
mod scan;
mod scancache;
mod settings;
mod statfile;
mod tree;
mod walk;

use std::io::Read;

pub use dirstat::DirStat;
pub use disk::{Look, LookRules, Presence, StatChange, look, presence, presence_all, record};
pub use read::{Body, Reading, classify, read_stream};
pub use rules::DenyRules;
pub use scan::{ScanOptions, ScanProgress, ScanSummary, ScanThreads, Skipped, extra_ignore, scan};
pub use settings::{ApprovalMode, DescriptorSettings, SETTINGS_FILE, Settings, WritePolicy};
pub use walk::SkipKind;
pub use walk::{walk_builder, write_temp_pid};

use crate::error::{Error, Result};
use crate::object::{ContentOmitted, FilesystemSource, Object};
use crate::store::{EncodedBlob, Op, Put, Store, Timestamp, ValidFrom};

/// What indexing did to an entity.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A new entity, or one that was deleted before.
    Created,
    /// A new version: other bytes, or a stub read for the first time.
    Updated,
    /// Nothing to write.
    Unchanged,
    /// A tombstone: the file is gone.
    Deleted,
}

/// The outcome of planning one file: its entity id, what happens, and the ops to commit.
#[derive(Debug)]
pub struct Planned {
    /// The file's entity id (its identity hash).
    pub id: String,
    /// What committing `ops` does.
    pub action: Action,
    /// The ops to commit (empty when unchanged).
    pub ops: Vec<Op>,
    /// Bytes read from the file while planning.
    pub bytes_read: u64,
}

/// A file read and turned into its object, ready to compare with the store: the part of indexing
/// that needs no store, so a scan does it on its worker threads.
#[derive(Debug)]
pub struct Prepared {
    /// The file's object.
    pub object: Object,
    /// The raw bytes to keep beside it (binary files) when `encoded` does not hold them.
    kept_bytes: Option<Vec<u8>>,
    /// The byte size of a file whose bytes are not kept (too large).
    pub size: Option<u64>,
    /// Bytes read from the file.
    pub bytes_read: u64,
    /// The content's blob record, compressed here rather than in the writing thread (it holds
    /// the raw bytes of a binary file that does not compress).
    encoded: Option<EncodedBlob>,
}

impl Prepared {
    /// Turns what was read at `source` into its object: text, binary (bytes kept) or too large.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the source does not make a valid file object.
    pub fn new(source: FilesystemSource, reading: Reading) -> Result<Self> {
        let bytes_read = reading.size;
        let (object, kept_bytes, size) = match reading.body {
            Body::Text(text) => (
                Object::file_text_hashed(source, text, reading.file_hash)?,
                None,
                None,
            ),
            Body::Binary(bytes) => (
                Object::file_omitted(source, Some(reading.file_hash), ContentOmitted::Binary)?,
                Some(bytes),
                None,
            ),
            Body::TooLarge => (
                Object::file_omitted(source, Some(reading.file_hash), ContentOmitted::TooLarge)?,
                None,
                Some(reading.size),
            ),
        };
        // The reading's hash is that of its bytes: the write need not hash them again.
        let (encoded, kept_bytes) = EncodedBlob::of_read(&object, kept_bytes);
        Ok(Prepared {
            object,
            kept_bytes,
            size,
            bytes_read,
            encoded,
        })
    }

    /// The raw bytes to keep beside the object (a binary file's); `None` for other files.
    pub fn kept_bytes(&self) -> Option<&[u8]> {
        self.kept_bytes
            .as_deref()
            .or_else(|| self.encoded.as_ref().and_then(EncodedBlob::bytes))
    }

    /// The blob record made here for the content or the kept bytes, if any.
    pub fn encoded(&self) -> Option<&EncodedBlob> {
        self.encoded.as_ref()
    }

    /// The object and the raw bytes to keep beside it, taken out of this.
    pub fn into_object_and_bytes(self) -> (Object, Option<Vec<u8>>) {
        let bytes = match self.kept_bytes {
            Some(bytes) => Some(bytes),
            None => self.encoded.and_then(EncodedBlob::into_bytes),
        };
        (self.object, bytes)
    }
}

/// Plans index operations against one store, with the store's deny rules and content limit.
#[derive(Debug)]
pub struct Indexer {
    store: Store,
    deny: DenyRules,
    max_content_bytes: u64,
}

impl Indexer {
    /// An indexer over `store` with the deny rules and content limit of `settings`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a deny glob of the settings does not parse.
    pub fn new(store: &Store, settings: &Settings) -> Result<Self> {
        Ok(Indexer {
            store: store.clone(),
            deny: settings.deny_rules()?,
            max_content_bytes: settings.max_content_bytes,
        })
    }

    /// The store this indexer plans against.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The deny rules in force.
    pub fn deny_rules(&self) -> &DenyRules {
        &self.deny
    }

    /// The content limit in bytes.
    pub fn max_content_bytes(&self) -> u64 {
        self.max_content_bytes
    }

    /// The rules a look at canonical `path` follows: this indexer's deny rules and content limit,
    /// and the stat cache entry `cached` of the path (`None`: read whatever the stat).
    pub fn look_rules<'a>(&'a self, cached: Option<&'a crate::store::StatEntry>) -> LookRules<'a> {
        LookRules {
            deny: &self.deny,
            max_content_bytes: self.max_content_bytes,
            cached,
        }
    }

    /// Turns what one look at the file of `source` saw into the ops to commit: a tombstone
    /// for a file that is gone, a denied stub, nothing for a file the stat cache vouched for, or
    /// a new version dated by its mtime (clamped) for a file read.
    ///
    /// # Errors
    /// [`Error::Io`] for a look that could not read the file (callers decide what that means
    /// first); store errors from looking up the current version.
    pub fn plan_look(&self, source: FilesystemSource, look: Look) -> Result<Planned> {
        match look {
            Look::Gone(_) => self.index_deletion(source),
            Look::Unreadable(err) => Err(Error::io(format!("reading {}", source.path), err)),
            Look::Denied => self.plan_denied(source),
            Look::Vouched(_) => Ok(Planned {
                id: crate::object::sourced_identity(
                    crate::object::ObjectType::File,
                    &crate::object::Source::Filesystem(source),
                )?
                .to_hex(),
                action: Action::Unchanged,
                ops: Vec::new(),
                bytes_read: 0,
            }),
            Look::Read { reading, stat, .. } => {
                let mtime = Timestamp::saturating_from_micros(stat.mtime_ns / 1000);
                self.plan_prepared(Prepared::new(source, reading)?, Some(mtime))
            }
        }
    }

    /// Plans a full index of the file at `source` whose bytes `reader` streams: created when the
    /// entity has no live version, updated when its bytes differ or it was a stub, else unchanged.
    /// `mtime` dates the version ("mtime, clamped"); `None` dates it at the transaction.
    /// A denied file is not read at all.
    ///
    /// # Errors
    /// [`Error::Io`] when reading fails; store errors from looking up the current version.
    pub fn index_file(
        &self,
        source: FilesystemSource,
        reader: impl Read,
        mtime: Option<Timestamp>,
    ) -> Result<Planned> {
        if self.deny.is_denied(&source.path) {
            return self.plan_denied(source);
        }
        let path = source.path.clone();
        let reading = read_stream(reader, self.max_content_bytes)
            .map_err(|e| Error::io(format!("reading {path}"), e))?;
        self.plan_reading(source, reading, mtime)
    }

    /// Plans a full index from bytes already read (by a parallel scan).
    ///
    /// # Errors
    /// Store errors from looking up the current version.
    pub fn plan_reading(
        &self,
        source: FilesystemSource,
        reading: Reading,
        mtime: Option<Timestamp>,
    ) -> Result<Planned> {
        if self.deny.is_denied(&source.path) {
            return self.plan_denied(source);
        }
        self.plan_prepared(Prepared::new(source, reading)?, mtime)
    }

    /// Plans a full index of a file already turned into an object (by a scan's worker thread):
    /// compares it with the entity's current version and returns the put, if one is needed.
    ///
    /// # Errors
    /// Store errors from looking up the current version.
    pub fn plan_prepared(&self, prepared: Prepared, mtime: Option<Timestamp>) -> Result<Planned> {
        let Prepared {
            object,
            kept_bytes,
            size,
            bytes_read,
            encoded,
        } = prepared;
        let current = self.current_hash(object.id())?;
        let action = match current {
            None => Action::Created,
            Some(hash) if hash == *object.object_hash() => Action::Unchanged,
            Some(_) => Action::Updated,
        };
        let id = object.id().to_string();
        let ops = if action == Action::Unchanged {
            Vec::new()
        } else {
            let mut put = Put::new(object);
            put.valid_from = mtime.map_or(ValidFrom::TxTime, ValidFrom::MtimeClamped);
            put.bytes = kept_bytes;
            put.size = size;
            put.encoded = encoded;
            vec![Op::Put(Box::new(put))]
        };
        Ok(Planned {
            id,
            action,
            ops,
            bytes_read,
        })
    }

    /// The object hash of the entity's live version; `None` when it is unknown or deleted.
    fn current_hash(&self, id: &str) -> Result<Option<crate::hash::Hash>> {
        // Most files a scan plans are new: one table answers that, where a version lookup opens
        // the dozen tables of a read.
        if !self.store.entity_exists(id)? {
            return Ok(None);
        }
        match self.store.version_info(id, None, None) {
            Ok(info) => Ok(info.and_then(|info| info.object_hash)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Plans the stub of a denied file, unless the entity already is one.
    fn plan_denied(&self, source: FilesystemSource) -> Result<Planned> {
        let stub = Object::file_omitted(source, None, ContentOmitted::Denied)?;
        let action = match self.current_hash(stub.id())? {
            None => Action::Created,
            Some(hash) if hash == *stub.object_hash() => Action::Unchanged,
            Some(_) => Action::Updated,
        };
        let id = stub.id().to_string();
        let ops = if action == Action::Unchanged {
            Vec::new()
        } else {
            vec![Op::put(stub)]
        };
        Ok(Planned {
            id,
            action,
            ops,
            bytes_read: 0,
        })
    }

    /// Plans a stub for a file known by path only (seen by `ls` or `grep`): created when the entity
    /// has no live version, else unchanged; never overwrites what exists.
    ///
    /// # Errors
    /// Store errors from looking up the current version.
    pub fn discover_file(&self, source: FilesystemSource) -> Result<Planned> {
        let stub = if self.deny.is_denied(&source.path) {
            Object::file_omitted(source, None, ContentOmitted::Denied)?
        } else {
            Object::file_stub(source)?
        };
        let exists = self.current_hash(stub.id())?.is_some();
        let id = stub.id().to_string();
        if exists {
            return Ok(Planned {
                id,
                action: Action::Unchanged,
                ops: Vec::new(),
                bytes_read: 0,
            });
        }
        Ok(Planned {
            id,
            action: Action::Created,
            ops: vec![Op::put(stub)],
            bytes_read: 0,
        })
    }

    /// Plans a tombstone for a file that is gone, dated at the transaction; unchanged when the
    /// entity does not exist now.
    ///
    /// # Errors
    /// Store errors from looking up the current version.
    pub fn index_deletion(&self, source: FilesystemSource) -> Result<Planned> {
        let id = crate::object::sourced_identity(
            crate::object::ObjectType::File,
            &crate::object::Source::Filesystem(source),
        )?
        .to_hex();
        let exists = self.current_hash(&id)?.is_some();
        let (action, ops) = if exists {
            (Action::Deleted, vec![Op::delete(id.clone())])
        } else {
            (Action::Unchanged, Vec::new())
        };
        Ok(Planned {
            id,
            action,
            ops,
            bytes_read: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::sha256;
    use crate::store::Origin;

    /// A binary file's bytes that do not compress are held by the planned put's record, which
    /// vouches for them (the write stores them unhashed); a caller that replaces the put's `bytes` after planning (same
    /// length, other content) has them hashed, and the write refused.
    #[test]
    fn bytes_a_caller_gives_after_planning_are_hashed() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store = Store::create(tmp.path().join("store"))?;
        let indexer = Indexer::new(&store, &Settings::default())?;
        let random: Vec<u8> = (0..2000u32)
            .flat_map(|i| sha256(&i.to_le_bytes()).0)
            .collect();
        let plan = |path: &str| -> Result<Box<Put>> {
            let source = FilesystemSource {
                filesystem_id: "ab".repeat(32),
                path: path.into(),
            };
            let planned = indexer.index_file(source, random.as_slice(), None)?;
            match planned.ops.into_iter().next() {
                Some(Op::Put(put)) => Ok(put),
                _ => Err(Error::not_found("a put")),
            }
        };
        let mut put = plan("/replaced.bin")?;
        assert!(put.bytes.is_none());
        assert_eq!(put.kept_bytes(), Some(random.as_slice()));
        // The write stores the record's own bytes without hashing them again.
        let hash = sha256(&random).0;
        assert!(
            put.encoded
                .as_ref()
                .is_some_and(|e| e.vouches_for(&hash, put.kept_bytes().unwrap_or_default()))
        );
        let mut wrong = random.clone();
        wrong[7] ^= 1;
        put.bytes = Some(wrong);
        let err = store
            .transact(vec![Op::Put(put)], Origin::Indexer)
            .map(|_| ())
            .unwrap_err();
        assert!(
            err.to_string().contains("give the file's own bytes"),
            "{err}"
        );
        assert_eq!(store.content(&sha256(&random))?, None);
        store.transact(vec![Op::Put(plan("/kept.bin")?)], Origin::Indexer)?;
        assert_eq!(store.content(&sha256(&random))?, Some(random.clone()));
        Ok(())
    }
}
