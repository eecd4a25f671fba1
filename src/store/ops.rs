//! What a transaction is made of: [`Op`]s (put, delete, evict, match), a [`Put`]'s parts, and the
//! [`TxReceipt`] a written transaction returns.

use super::codec;
use super::time::{Timestamp, TxId};
use crate::hash::Hash;
use crate::object::Object;

/// Refuses a put of `object` over an entity stored as another type (`stored_type`): two
/// objects of different types can never share an id, so the put is a conflict.
pub(crate) fn check_same_type(object: &Object, stored_type: &str) -> crate::error::Result<()> {
    if stored_type == object.object_type().as_str() {
        return Ok(());
    }
    Err(crate::error::Error::Conflict {
        entity: object.id().to_string(),
        expected: format!("a {}", object.object_type()),
        actual: format!("a {stored_type} with this id"),
    })
}

/// When a put's version starts in valid time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ValidFrom {
    /// At the transaction's time (the default).
    #[default]
    TxTime,
    /// At the given time.
    At(Timestamp),
    /// At a file's mtime, moved into (the entity's latest valid_from, tx_time] so that a change
    /// seen late is dated when it happened and order is never broken.
    MtimeClamped(Timestamp),
}

/// A put: an object and what lives beside it on the version row.
#[derive(Clone, Debug)]
pub struct Put {
    /// The object to store.
    pub object: Object,
    /// When the version starts.
    pub valid_from: ValidFrom,
    /// When it ends (the earlier value comes back then); open when `None`.
    pub valid_to: Option<Timestamp>,
    /// The raw bytes of a file whose content is null (binary), kept as a blob under `file_hash`
    /// and checked against it; `None` keeps those `encoded` holds, if any (see [`Put::kept_bytes`]).
    pub bytes: Option<Vec<u8>>,
    /// The byte size of a file whose bytes were not kept.
    pub size: Option<u64>,
    /// The on-disk spelling of the path (case-insensitive mounts).
    pub spelling: Option<String>,
    /// The blob record of the content (or of the kept bytes), compressed ahead of the write: a scan
    /// compresses on its worker threads so the one thread that writes does not. `None`: the
    /// write compresses it when the blob is new.
    pub encoded: Option<EncodedBlob>,
}

impl Put {
    /// A put of `object` valid from the transaction's time on.
    pub fn new(object: Object) -> Self {
        Put {
            object,
            valid_from: ValidFrom::TxTime,
            valid_to: None,
            bytes: None,
            size: None,
            spelling: None,
            encoded: None,
        }
    }

    /// The raw bytes the write keeps beside the object: `bytes` when set, else those the
    /// `encoded` record holds (a scan's binary file whose bytes did not compress).
    pub fn kept_bytes(&self) -> Option<&[u8]> {
        self.bytes
            .as_deref()
            .or_else(|| self.encoded.as_ref().and_then(EncodedBlob::bytes))
    }
}

/// A blob record made ahead of a write: the compressed content of an object (or its kept raw
/// bytes), keyed by the hash the object itself carries, so the two cannot disagree. Bytes that
/// do not compress are not copied into a raw record: the writer appends them after the header.
/// Bytes hashed where they were read that do not compress are moved into the record, which
/// keeps them unchanged until the write stores them.
#[derive(Clone, Debug)]
pub struct EncodedBlob {
    hash: [u8; 32],
    /// The compressed record; `None` when the blob is stored raw.
    record: Option<Vec<u8>>,
    /// Whether the bytes the record was made from were hashed where they were read (their
    /// SHA-256 is `hash`), so that a write stores the record without hashing them again.
    read_hashed: bool,
    /// For a raw record of bytes hashed where they were read: those bytes, owned here (nothing
    /// outside can change them), so that a write given these very bytes stores them unhashed.
    raw: Option<Vec<u8>>,
}

/// What an [`EncodedBlob`] holds for a blob.
pub(crate) enum Encoded<'a> {
    /// The whole record, compressed.
    Record(&'a [u8]),
    /// A raw record: [`codec::RAW_HEADER`] then the blob's own bytes.
    Raw,
}

impl EncodedBlob {
    /// Compresses the content of `object`, or else `kept` (the raw bytes of a binary file);
    /// `None` when there is neither, or when `kept` does not hash to the object's `file_hash`
    /// (the write stores this record, not the bytes it is given: without one, it compresses
    /// the bytes it is given, which it checks).
    pub fn of(object: &Object, kept: Option<&[u8]>) -> Option<Self> {
        let kept = match object.content() {
            Some(_) => kept,
            None => kept.filter(|bytes| object.file_hash() == Some(&crate::hash::sha256(bytes))),
        };
        Self::make(object, kept, false)
    }

    /// [`EncodedBlob::of`] for an object made from bytes read and hashed in one pass (an
    /// [`crate::index::Prepared`] of a [`crate::index::Reading`], whose `file_hash` is the
    /// SHA-256 of the bytes it holds): the write then stores the record of `kept` without
    /// hashing `kept` again (a sixth of a scan's writing thread, for binary files). Bytes that
    /// do not compress move into the record (the write stores them from there); the bytes it
    /// did not take come back.
    pub(crate) fn of_read(
        object: &Object,
        kept: Option<Vec<u8>>,
    ) -> (Option<Self>, Option<Vec<u8>>) {
        let mut encoded = Self::make(object, kept.as_deref(), true);
        match (&mut encoded, kept) {
            (Some(e), Some(bytes)) if e.record.is_none() && object.content().is_none() => {
                e.raw = Some(bytes);
                (encoded, None)
            }
            (_, kept) => (encoded, kept),
        }
    }

    fn make(object: &Object, kept: Option<&[u8]>, read_hashed: bool) -> Option<Self> {
        match (
            object.content(),
            object.content_hash(),
            kept,
            object.file_hash(),
        ) {
            (Some(content), Some(hash), _, _) => Some(EncodedBlob {
                hash: hash.0,
                record: codec::compress_blob(content.as_bytes()),
                read_hashed,
                raw: None,
            }),
            (None, _, Some(bytes), Some(file_hash)) => Some(EncodedBlob {
                hash: file_hash.0,
                record: codec::compress_blob(bytes),
                read_hashed,
                raw: None,
            }),
            _ => None,
        }
    }

    /// The bytes the record holds in memory beyond the file's own (a raw record: its header).
    pub fn len(&self) -> u64 {
        self.record.as_ref().map_or(2, |r| r.len() as u64)
    }

    /// Whether the record is empty (it never is: a record has at least its header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The raw bytes this record holds: bytes hashed where they were read that did not
    /// compress; `None` for any other record.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.raw.as_deref()
    }

    /// The raw bytes this record holds, taken out of it (see [`EncodedBlob::bytes`]).
    pub(crate) fn into_bytes(self) -> Option<Vec<u8>> {
        self.raw
    }

    /// Whether a write may store this record as the blob of `hash` without hashing the `bytes`
    /// it is given: it was made from bytes hashed where they were read, and it is compressed,
    /// or it is raw (the write stores the bytes given) and `bytes` are the very bytes it holds
    /// (any other buffer, even an equal copy, is hashed).
    pub(crate) fn vouches_for(&self, hash: &[u8; 32], bytes: &[u8]) -> bool {
        // The record owns `raw` and is borrowed for this call: a slice with its address and
        // length is those bytes, which nothing could change since they were hashed.
        self.read_hashed
            && self.hash == *hash
            && (self.record.is_some()
                || self
                    .raw
                    .as_deref()
                    .is_some_and(|raw| std::ptr::eq(raw, bytes)))
    }

    /// What is encoded for the blob of `hash`, if this is the record for it.
    pub(crate) fn encoded_for(&self, hash: &[u8; 32]) -> Option<Encoded<'_>> {
        (self.hash == *hash).then(|| match &self.record {
            Some(record) => Encoded::Record(record),
            None => Encoded::Raw,
        })
    }

    /// The record for the blob of `hash` whose bytes are `bytes`, if this is the one for it.
    pub(crate) fn record_for<'a>(
        &'a self,
        hash: &[u8; 32],
        bytes: &[u8],
    ) -> Option<std::borrow::Cow<'a, [u8]>> {
        Some(match self.encoded_for(hash)? {
            Encoded::Record(record) => record.into(),
            Encoded::Raw => [codec::RAW_HEADER.as_slice(), bytes].concat().into(),
        })
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug)]
pub enum Op {
    /// Store a new version of an object.
    Put(Box<Put>),
    /// Mark an entity as not existing from `valid_from` (default: tx time) to `valid_to`.
    Delete {
        /// The entity id.
        entity: String,
        /// Start; the transaction's time when `None`.
        valid_from: Option<Timestamp>,
        /// End (the earlier value comes back then); open when `None`.
        valid_to: Option<Timestamp>,
    },
    /// Remove every trace of an entity but the log's digests and the eviction record.
    Evict {
        /// The entity id.
        entity: String,
    },
    /// Precondition: the entity's current object hash is `expected` (`None`: it is absent).
    Match {
        /// The entity id.
        entity: String,
        /// The expected object hash, or `None` for absent (unknown, evicted or deleted).
        expected: Option<Hash>,
    },
}

impl Op {
    /// A put of `object` at the transaction's time.
    pub fn put(object: Object) -> Self {
        Op::Put(Box::new(Put::new(object)))
    }

    /// A put of `object` valid in [`from`, `to`) (`to` open when `None`).
    pub fn put_at(object: Object, from: Timestamp, to: Option<Timestamp>) -> Self {
        let mut put = Put::new(object);
        put.valid_from = ValidFrom::At(from);
        put.valid_to = to;
        Op::Put(Box::new(put))
    }

    /// A delete of `entity` at the transaction's time.
    pub fn delete(entity: impl Into<String>) -> Self {
        Op::Delete {
            entity: entity.into(),
            valid_from: None,
            valid_to: None,
        }
    }

    /// The entity this op is about.
    pub fn entity(&self) -> &str {
        match self {
            Op::Put(put) => put.object.id(),
            Op::Delete { entity, .. } | Op::Evict { entity } | Op::Match { entity, .. } => entity,
        }
    }
}

/// One transaction of a group commit: its ops (possibly none, for a stat cache change alone),
/// who writes it, and the stat cache changes written with it.
#[derive(Clone, Debug)]
pub struct TxRequest {
    /// The ops; none when only the stat cache changes.
    pub ops: Vec<Op>,
    /// Who writes it.
    pub origin: super::Origin,
    /// Stat cache changes written in the same commit.
    pub stat: Option<super::StatUpdate>,
}

/// What [`super::Store::transact`] returns: the transaction's number and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxReceipt {
    /// The new transaction's number.
    pub tx_id: TxId,
    /// Its time.
    pub tx_time: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::sha256;

    /// A raw record of bytes hashed where they were read holds them and vouches for them only:
    /// a copy, even an equal one, or a part is hashed by the write; a record made by a caller
    /// never vouches for raw bytes, and a compressed one of read bytes always does (and leaves
    /// the bytes with the caller).
    #[test]
    fn a_raw_record_vouches_only_for_the_bytes_it_holds() -> crate::error::Result<()> {
        let source = crate::object::FilesystemSource {
            filesystem_id: "ab".repeat(32),
            path: "/r.bin".into(),
        };
        let random: Vec<u8> = (0..2000u32)
            .flat_map(|i| sha256(&i.to_le_bytes()).0)
            .collect();
        let hash = sha256(&random).0;
        let object = Object::file_bytes(source.clone(), random.clone())?;
        let (read, left) = EncodedBlob::of_read(&object, Some(random.clone()));
        assert!(left.is_none());
        let read = read.ok_or_else(|| crate::error::Error::not_found("a record"))?;
        assert!(read.record.is_none());
        let held = read.bytes().unwrap_or_default();
        assert_eq!(held, random.as_slice());
        assert!(read.vouches_for(&hash, held));
        assert!(!read.vouches_for(&hash, &random));
        assert!(!read.vouches_for(&hash, &held[1..]));
        assert!(!read.vouches_for(&hash, &held[..held.len() - 1]));
        let mut put = Put::new(object.clone());
        put.encoded = Some(read.clone());
        assert_eq!(put.kept_bytes(), Some(random.as_slice()));
        // A clone holds its own copy, which it vouches for, and not the original's.
        assert!(put.encoded.as_ref().is_some_and(|e| {
            let bytes = put.kept_bytes().unwrap_or_default();
            e.vouches_for(&hash, bytes) && !read.vouches_for(&hash, bytes)
        }));
        put.bytes = Some(random.clone());
        assert!(
            put.encoded
                .as_ref()
                .is_some_and(|e| !e.vouches_for(&hash, put.kept_bytes().unwrap_or_default()))
        );
        let given = EncodedBlob::of(&object, Some(&random));
        assert!(given.as_ref().is_some_and(|e| e.bytes().is_none()));
        assert!(
            !given
                .as_ref()
                .is_some_and(|e| e.vouches_for(&hash, &random))
        );
        let text: Vec<u8> = (0..2000u32)
            .flat_map(|i| format!("line {i}\0").into_bytes())
            .collect();
        let object = Object::file_bytes(source, text.clone())?;
        let (compressed, left) = EncodedBlob::of_read(&object, Some(text.clone()));
        assert_eq!(left, Some(text.clone()));
        let hash = sha256(&text).0;
        assert!(compressed.as_ref().is_some_and(|e| e.record.is_some()));
        assert!(compressed.as_ref().is_some_and(|e| e.bytes().is_none()));
        assert!(
            compressed
                .as_ref()
                .is_some_and(|e| e.vouches_for(&hash, &[]))
        );
        Ok(())
    }
}
