//! The storage codec: the only place that knows bincode. Every stored record is one
//! record-format byte followed by the bincode (`=2.0.1`, native `Encode`/`Decode`, standard
//! config) encoding of a storage type below; the storage types are separate from the JSON types
//! of the public API, so the encoding can change here alone.
//!
//! Blob records are `[format][method][payload]`, where the method says how the payload is
//! compressed (see [`encode_blob`]): zstd for what it shrinks, raw otherwise; records written
//! with LZ4 (lz4_flex) by earlier builds still decode. A suffix record (see
//! [`encode_suffix_blob`]) holds only what a blob adds to an earlier blob it starts with.

use bincode::{Decode, Encode};

use crate::error::{Error, Result};
use crate::object::{ContentOmitted, FilesystemSource, ObjectType, Source, sourced_identity};

/// The version byte at the start of every record this build writes.
pub const RECORD_FORMAT: u8 = 1;

/// An entity or filesystem id inside a record, encoded as its [`id_key`] (a hash id in 34
/// bytes instead of 65); it reads as a `&str`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdStr(pub String);

impl std::ops::Deref for IdStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for IdStr {
    fn from(id: &str) -> Self {
        IdStr(id.to_string())
    }
}

impl From<String> for IdStr {
    fn from(id: String) -> Self {
        IdStr(id)
    }
}

impl Encode for IdStr {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        encoder: &mut E,
    ) -> std::result::Result<(), bincode::error::EncodeError> {
        id_key(&self.0).encode(encoder)
    }
}

impl<Context> Decode<Context> for IdStr {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> std::result::Result<Self, bincode::error::DecodeError> {
        let key: Vec<u8> = Decode::decode(decoder)?;
        id_of_key(&key, "id")
            .map(IdStr)
            .map_err(|e| bincode::error::DecodeError::OtherString(e.to_string()))
    }
}

bincode::impl_borrow_decode!(IdStr);

/// In JSON (op digests, the log) an id is its text, as before.
impl serde::Serialize for IdStr {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// An object type's name inside a record, encoded as one byte (its place in
/// [`ObjectType::ALL`]); it reads as a `&str`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeName(pub String);

impl std::ops::Deref for TypeName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<ObjectType> for TypeName {
    fn from(object_type: ObjectType) -> Self {
        TypeName(object_type.as_str().to_string())
    }
}

impl Encode for TypeName {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        encoder: &mut E,
    ) -> std::result::Result<(), bincode::error::EncodeError> {
        let code = ObjectType::ALL
            .iter()
            .position(|t| t.as_str() == self.0)
            .ok_or_else(|| {
                bincode::error::EncodeError::OtherString(format!("unknown type {}", self.0))
            })?;
        (code as u8).encode(encoder)
    }
}

impl<Context> Decode<Context> for TypeName {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> std::result::Result<Self, bincode::error::DecodeError> {
        let code: u8 = Decode::decode(decoder)?;
        ObjectType::ALL
            .get(code as usize)
            .map(|t| TypeName::from(*t))
            .ok_or_else(|| {
                bincode::error::DecodeError::OtherString(format!("unknown type code {code}"))
            })
    }
}

bincode::impl_borrow_decode!(TypeName);

impl serde::Serialize for TypeName {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// An entity row: its dense number, its type, and its source when it has one.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct EntityRec {
    /// The entity's dense number, the first part of its version keys.
    pub eid: u64,
    /// The object type as its name (`file`, `toolcall`, …).
    pub object_type: TypeName,
    /// (filesystem id, canonical path) for files.
    pub source: Option<(IdStr, String)>,
}

/// Why a file's content is null, in one byte (the JSON spells it `binary`, `too_large`,
/// `denied`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub enum Omitted {
    /// Not UTF-8 text.
    Binary,
    /// Above the size limit.
    TooLarge,
    /// Not readable.
    Denied,
}

impl From<ContentOmitted> for Omitted {
    fn from(reason: ContentOmitted) -> Self {
        match reason {
            ContentOmitted::Binary => Omitted::Binary,
            ContentOmitted::TooLarge => Omitted::TooLarge,
            ContentOmitted::Denied => Omitted::Denied,
        }
    }
}

impl From<Omitted> for ContentOmitted {
    fn from(reason: Omitted) -> Self {
        match reason {
            Omitted::Binary => ContentOmitted::Binary,
            Omitted::TooLarge => ContentOmitted::TooLarge,
            Omitted::Denied => ContentOmitted::Denied,
        }
    }
}

/// A version row: what the entity was from its valid_from on, as learned at its tx.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct VersionRec {
    /// The document's object hash; `None` for a tombstone.
    pub object_hash: Option<[u8; 32]>,
    /// The transaction's time in µs minus the row's valid_from (the key holds that): 0, one
    /// byte instead of nine, for the usual put valid from its transaction's time. Kept here to
    /// answer without reading the log.
    pub tx_after: i64,
    /// The index of the op that wrote the row in its transaction (the key holds the tx): how
    /// evict finds the op bodies to remove, in 1–3 bytes where an index row took 20.
    pub op: u32,
    /// Whether this row restores the earlier value at the end of a ranged put or delete.
    pub restored: bool,
    /// Byte size of a file whose bytes were not kept.
    pub size: Option<u64>,
    /// The on-disk spelling of the path on a case-insensitive mount.
    pub spelling: Option<String>,
    /// Why the content is null.
    pub content_omitted: Option<Omitted>,
}

impl VersionRec {
    /// The row op `op` of a transaction writes for `write` (its tx time not yet known: the
    /// write rule sets it).
    pub fn of_write(write: &WriteRec, op: u32) -> Self {
        VersionRec {
            object_hash: write.object_hash,
            tx_after: 0,
            op,
            restored: false,
            size: write.size,
            spelling: write.spelling.clone(),
            content_omitted: write.content_omitted,
        }
    }
}

/// The byte after the record format byte of a version row that names its document by its
/// `doc_data` sequence number (store format 8; a varint follows) instead of the `Option` tag of
/// its object hash (0: a tombstone, 1: the 32 bytes follow). Such a row does not decode as a
/// [`VersionRec`] ([`decode`] calls it damage): [`decode_version`] reads both.
pub const VERSION_BY_SEQ: u8 = 2;

/// Encodes version row `rec` naming its document by `doc_data` sequence number `seq` instead
/// of its object hash (which the row then leaves out; the reader recomputes it from the
/// document, see `docs::DocHashes`).
///
/// # Errors
/// As [`encode`].
pub fn encode_version_at(rec: &VersionRec, seq: u64) -> Result<Vec<u8>> {
    let tail = encode(&VersionRec {
        object_hash: None,
        ..rec.clone()
    })?;
    let mut out = vec![RECORD_FORMAT, VERSION_BY_SEQ];
    bincode::encode_into_std_write(seq, &mut out, config())
        .map_err(|e| Error::storage("encoding a record", e))?;
    // `tail` is the format byte, the `None` tag, then the other fields.
    out.extend_from_slice(tail.get(2..).unwrap_or_default());
    Ok(out)
}

/// Decodes a version row of either form: the record and, for a row that names its document by
/// sequence number, that number (the record's `object_hash` is then `None` until resolved).
///
/// # Errors
/// [`Error::Corrupt`] when the bytes do not decode entirely.
pub fn decode_version(bytes: &[u8], what: &str) -> Result<(VersionRec, Option<u64>)> {
    let Some(after) = bytes.strip_prefix(&[RECORD_FORMAT, VERSION_BY_SEQ]) else {
        return Ok((decode(bytes, what)?, None));
    };
    let (seq, used): (u64, usize) = bincode::decode_from_slice(after, config())
        .map_err(|e| Error::corrupt(format!("{what} does not decode: {e}")))?;
    let mut tail = vec![RECORD_FORMAT, 0];
    tail.extend_from_slice(after.get(used..).unwrap_or_default());
    Ok((decode(&tail, what)?, Some(seq)))
}

/// A document: the hashed fields of an object, content by reference, no identity.
///
/// Stored by [`encode`] (fields as their text) or [`encode_doc`] (a file's fields in a few
/// bytes, format 5); decoding reads either, and yields the text.
#[derive(Clone, Debug, PartialEq, Eq, Encode)]
pub struct DocRec {
    /// SHA-256 of the file's bytes.
    pub file_hash: Option<[u8; 32]>,
    /// SHA-256 of the content; the content itself is the blob of that hash.
    pub content_hash: Option<[u8; 32]>,
    /// The metadata fields as canonical JSON.
    pub fields: String,
}

impl<Context> Decode<Context> for DocRec {
    fn decode<D: bincode::de::Decoder<Context = Context>>(
        decoder: &mut D,
    ) -> std::result::Result<Self, bincode::error::DecodeError> {
        let file_hash = Decode::decode(decoder)?;
        let content_hash = Decode::decode(decoder)?;
        let stored: Vec<u8> = Decode::decode(decoder)?;
        let fields = if stored.first() == Some(&FIELDS_FILE) {
            fields_of_stored(&stored)?.into_owned()
        } else {
            String::from_utf8(stored).map_err(|e| bincode::error::DecodeError::Utf8 {
                inner: e.utf8_error(),
            })?
        };
        Ok(DocRec {
            file_hash,
            content_hash,
            fields,
        })
    }
}

bincode::impl_borrow_decode!(DocRec);

/// A [`DocRec`] read in place, its fields borrowed from the stored bytes: for a reader that only
/// looks at the start of the fields or at the hashes (a full session document is megabytes).
#[derive(Debug)]
pub struct DocRecRef<'a> {
    /// SHA-256 of the file's bytes (decoded to reach what follows; no reader needs it yet).
    _file_hash: Option<[u8; 32]>,
    /// SHA-256 of the content.
    pub content_hash: Option<[u8; 32]>,
    /// The metadata fields (canonical JSON, or a delta); rebuilt when stored compact.
    pub fields: std::borrow::Cow<'a, str>,
}

impl<'de, Context> bincode::BorrowDecode<'de, Context> for DocRecRef<'de> {
    fn borrow_decode<D: bincode::de::BorrowDecoder<'de, Context = Context>>(
        decoder: &mut D,
    ) -> std::result::Result<Self, bincode::error::DecodeError> {
        let file_hash = bincode::BorrowDecode::borrow_decode(decoder)?;
        let content_hash = bincode::BorrowDecode::borrow_decode(decoder)?;
        let stored: &'de [u8] = bincode::BorrowDecode::borrow_decode(decoder)?;
        Ok(DocRecRef {
            _file_hash: file_hash,
            content_hash,
            fields: fields_of_stored(stored)?,
        })
    }
}

/// The first byte of a document's stored fields that are a file's `{"char_count":N,
/// "file_type":"T"}` kept as N (LEB128) and T's UTF-8 (format 5, [`encode_doc`]). Fields as text
/// start with `{` (JSON) or `\u{1}` (a delta, `doc_delta`), so this byte tells them apart.
const FIELDS_FILE: u8 = 2;
/// The start of a file's fields as canonical JSON, before its char count.
const FILE_FIELDS_HEAD: &str = "{\"char_count\":";
/// Between a file's char count and its file type in canonical JSON.
const FILE_FIELDS_MID: &str = ",\"file_type\":\"";
/// The end of a file's fields as canonical JSON, after its file type.
const FILE_FIELDS_TAIL: &str = "\"}";

/// A file's fields as canonical JSON, from its char count and file type.
fn file_fields_json(char_count: u64, file_type: &str) -> String {
    format!("{FILE_FIELDS_HEAD}{char_count}{FILE_FIELDS_MID}{file_type}{FILE_FIELDS_TAIL}")
}

/// `fields` in [`FIELDS_FILE`]'s compact form when they are a file's char count and plain file
/// type (no character JSON escapes) and rebuild byte for byte from it; `None` otherwise.
fn compact_file_fields(fields: &str) -> Option<Vec<u8>> {
    let rest = fields.strip_prefix(FILE_FIELDS_HEAD)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let char_count: u64 = rest.get(..digits)?.parse().ok()?;
    let file_type = rest
        .get(digits..)?
        .strip_prefix(FILE_FIELDS_MID)?
        .strip_suffix(FILE_FIELDS_TAIL)?;
    if file_type.chars().any(|c| c == '"' || c == '\\' || c < ' ')
        || file_fields_json(char_count, file_type) != fields
    {
        return None;
    }
    let mut out = vec![FIELDS_FILE];
    push_leb128(&mut out, char_count);
    out.extend_from_slice(file_type.as_bytes());
    Some(out)
}

/// Appends `n` in LEB128 (seven bits a byte, low first, the high bit set on all but the last).
fn push_leb128(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// The fields text of a document's stored fields: borrowed when stored as text, rebuilt from
/// [`FIELDS_FILE`]'s compact form.
fn fields_of_stored(
    stored: &[u8],
) -> std::result::Result<std::borrow::Cow<'_, str>, bincode::error::DecodeError> {
    let bad = |why: &str| bincode::error::DecodeError::OtherString(format!("file fields {why}"));
    let Some((&FIELDS_FILE, mut rest)) = stored.split_first() else {
        return std::str::from_utf8(stored)
            .map(std::borrow::Cow::Borrowed)
            .map_err(|inner| bincode::error::DecodeError::Utf8 { inner });
    };
    let mut char_count = 0u64;
    let mut shift = 0u32;
    loop {
        let Some((&byte, after)) = rest.split_first() else {
            return Err(bad("end inside the char count"));
        };
        rest = after;
        if shift > 63 || (shift == 63 && byte & 0x7e != 0) {
            return Err(bad("have a char count past 64 bits"));
        }
        char_count |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let file_type = std::str::from_utf8(rest).map_err(|_| bad("have a file type not UTF-8"))?;
    Ok(std::borrow::Cow::Owned(file_fields_json(
        char_count, file_type,
    )))
}

/// Encodes a document as [`encode`] does, but a file's fields (`{"char_count":N,
/// "file_type":"T"}`, ~36 bytes) in [`FIELDS_FILE`]'s compact form (~5 bytes): what the redb
/// store writes from format 5 on. The record format byte stays; the fields' first byte tells
/// the forms apart.
///
/// # Errors
/// [`Error::Storage`] when bincode fails (it does not for these types).
pub fn encode_doc(rec: &DocRec) -> Result<Vec<u8>> {
    #[derive(Encode)]
    struct Disk<'a> {
        file_hash: &'a Option<[u8; 32]>,
        content_hash: &'a Option<[u8; 32]>,
        fields: &'a [u8],
    }
    let compact = compact_file_fields(&rec.fields);
    encode(&Disk {
        file_hash: &rec.file_hash,
        content_hash: &rec.content_hash,
        fields: compact.as_deref().unwrap_or(rec.fields.as_bytes()),
    })
}

/// The header of one transaction in the log (stored by [`encode_header`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxHeaderRec {
    /// Transaction time in µs.
    pub tx_time: i64,
    /// Who wrote it (`indexer`, `cli`, …).
    pub origin: String,
    /// BLAKE3 digest of each op's canonical JSON, in op order.
    pub digests: Vec<[u8; 32]>,
    /// The index run this transaction belongs to (the run's first tx id); `None` outside runs.
    pub run: Option<u64>,
    /// BLAKE3(previous chain ‖ canonical JSON of the header).
    pub chain: [u8; 32],
    /// The filesystems the ops' first writes name by their place in this list (store format
    /// 8, [`encode_op_in`]); empty in a header whose ops name them in full. Not in the JSON the
    /// chain hashes: a store's own way of keeping its bodies short.
    pub filesystems: Vec<IdStr>,
}

/// A header as stored: format 1 has no run (every header written before runs existed, and
/// every header outside a run), format [`HEADER_RUN_FORMAT`] adds the run after the rest.
#[derive(Encode, Decode)]
struct HeaderDisk {
    tx_time: i64,
    origin: String,
    digests: Vec<[u8; 32]>,
    chain: [u8; 32],
}

/// The record format of a log header that names its index run (store format 4).
pub const HEADER_RUN_FORMAT: u8 = 2;
/// The record format of a log header that lists the filesystems of its ops' first writes
/// (store format 8): [`HEADER_RUN_FORMAT`]'s fields, the run optional, then the list.
pub const HEADER_FS_FORMAT: u8 = 3;

/// Encodes a log header: format 1 without a run (the same bytes as before runs existed),
/// format [`HEADER_RUN_FORMAT`] with one, format [`HEADER_FS_FORMAT`] when it lists
/// filesystems.
///
/// # Errors
/// [`Error::Storage`] when bincode fails (it does not for these types).
pub fn encode_header(header: &TxHeaderRec) -> Result<Vec<u8>> {
    let disk = HeaderDisk {
        tx_time: header.tx_time,
        origin: header.origin.clone(),
        digests: header.digests.clone(),
        chain: header.chain,
    };
    if !header.filesystems.is_empty() {
        let mut out = vec![HEADER_FS_FORMAT];
        bincode::encode_into_std_write((disk, header.run, &header.filesystems), &mut out, config())
            .map_err(|e| Error::storage("encoding a log header", e))?;
        return Ok(out);
    }
    match header.run {
        None => encode(&disk),
        Some(run) => {
            let mut out = vec![HEADER_RUN_FORMAT];
            bincode::encode_into_std_write((disk, run), &mut out, config())
                .map_err(|e| Error::storage("encoding a log header", e))?;
            Ok(out)
        }
    }
}

/// Decodes a log header of either format; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the format byte is unknown or the bytes do not decode entirely.
pub fn decode_header(bytes: &[u8], what: &str) -> Result<TxHeaderRec> {
    let mut filesystems = Vec::new();
    let (disk, run) = match bytes.split_first() {
        Some((&HEADER_FS_FORMAT, rest)) => {
            let (disk, run, listed): (HeaderDisk, Option<u64>, Vec<IdStr>) =
                whole(bincode::decode_from_slice(rest, config()), rest.len(), what)?;
            filesystems = listed;
            (disk, run)
        }
        Some((&HEADER_RUN_FORMAT, rest)) => {
            let ((disk, run), used): ((HeaderDisk, u64), usize) =
                bincode::decode_from_slice(rest, config())
                    .map_err(|e| Error::corrupt(format!("{what} does not decode: {e}")))?;
            if used != rest.len() {
                return Err(Error::corrupt(format!(
                    "{what} has {} bytes after its record",
                    rest.len() - used
                )));
            }
            (disk, Some(run))
        }
        _ => (decode::<HeaderDisk>(bytes, what)?, None),
    };
    Ok(disk.into_rec(run, filesystems))
}

impl HeaderDisk {
    /// The header these stored fields, `run` and `filesystems` make.
    fn into_rec(self, run: Option<u64>, filesystems: Vec<IdStr>) -> TxHeaderRec {
        TxHeaderRec {
            tx_time: self.tx_time,
            origin: self.origin,
            digests: self.digests,
            run,
            chain: self.chain,
            filesystems,
        }
    }
}

/// A header of [`HEADER_FS_FORMAT`] whose list of filesystems does not decode, read without it
/// (the list empty): what the chain hashes comes before the list, and each first write that
/// named a filesystem there verifies against its digest with the right one (salvage). Any
/// other header as [`decode_header`] reads it.
///
/// # Errors
/// [`Error::Corrupt`] when the fields before the list do not decode either.
pub fn decode_header_without_list(bytes: &[u8], what: &str) -> Result<TxHeaderRec> {
    let Some((&HEADER_FS_FORMAT, rest)) = bytes.split_first() else {
        return decode_header(bytes, what);
    };
    let ((disk, run), _): ((HeaderDisk, Option<u64>), usize) =
        bincode::decode_from_slice(rest, config())
            .map_err(|e| Error::corrupt(format!("{what} does not decode: {e}")))?;
    Ok(disk.into_rec(run, Vec::new()))
}

/// What the op that first writes an entity records about it.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct FirstRec {
    /// The object type's name.
    pub object_type: TypeName,
    /// (filesystem id, path) for files.
    pub source: Option<(IdStr, String)>,
}

impl FirstRec {
    /// What the first write of `object` records: its type and, for a file, its source.
    pub fn of(object: &crate::object::Object) -> Self {
        FirstRec {
            object_type: object.object_type().into(),
            source: object.source().map(|s| {
                let fs = s.as_filesystem();
                (fs.filesystem_id.as_str().into(), fs.path.clone())
            }),
        }
    }
}

/// A put of a document (or, with `object_hash: None`, a delete), its valid times resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRec {
    /// The entity id.
    pub entity: IdStr,
    /// Resolved valid_from in µs.
    pub valid_from: i64,
    /// valid_to in µs, when given.
    pub valid_to: Option<i64>,
    /// The object hash; `None` for a delete.
    pub object_hash: Option<[u8; 32]>,
    /// The entity's type and source when this op created it.
    pub first: Option<FirstRec>,
    /// Byte size of a file whose bytes were not kept.
    pub size: Option<u64>,
    /// On-disk spelling.
    pub spelling: Option<String>,
    /// Why the content is null.
    pub content_omitted: Option<Omitted>,
}

impl WriteRec {
    /// A delete of `entity` over [`valid_from`, `valid_to`) (µs).
    pub fn delete(entity: IdStr, valid_from: i64, valid_to: Option<i64>) -> Self {
        WriteRec {
            entity,
            valid_from,
            valid_to,
            object_hash: None,
            first: None,
            size: None,
            spelling: None,
            content_omitted: None,
        }
    }

    /// The write of `put` (whose object is `object`) to entity `id` from `valid_from` (µs, as
    /// resolved), `first` when it creates the entity.
    pub fn put(
        id: &str,
        valid_from: i64,
        first: Option<FirstRec>,
        put: &super::Put,
        object: &crate::object::Object,
    ) -> Self {
        WriteRec {
            entity: id.into(),
            valid_from,
            valid_to: put.valid_to.map(super::Timestamp::as_micros),
            object_hash: Some(object.object_hash().0),
            first,
            size: put.size,
            spelling: put.spelling.clone(),
            content_omitted: object.content_omitted().map(Omitted::from),
        }
    }
}

/// The body of one op, with its valid times resolved (stored by [`encode_op`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpRec {
    /// A put or a delete.
    Write(WriteRec),
    /// An eviction of the entity.
    Evict {
        /// The entity id.
        entity: IdStr,
    },
    /// A precondition that held.
    Match {
        /// The entity id.
        entity: IdStr,
        /// The expected object hash, `None` for "absent".
        expected: Option<[u8; 32]>,
    },
}

/// An op body as stored: [`OpRec`] without what the key, the header and the source already say.
#[derive(Encode, Decode)]
enum OpDisk {
    Write {
        /// The entity id; `None` when it is the identity hash of `first.source` (a file's
        /// first write), which decoding recomputes.
        entity: Option<IdStr>,
        /// tx_time − valid_from in µs (0, one byte, for a put valid from its tx's time).
        before_tx: i64,
        /// valid_to − valid_from in µs.
        length: Option<i64>,
        object_hash: Option<[u8; 32]>,
        first: Option<FirstRec>,
        size: Option<u64>,
        spelling: Option<String>,
        content_omitted: Option<Omitted>,
    },
    Evict {
        entity: IdStr,
    },
    Match {
        entity: IdStr,
        expected: Option<[u8; 32]>,
    },
    /// A file's first write naming its filesystem by its place in the header's list (store
    /// format 8, [`encode_op_in`]): `Write`'s fields, `first` as a [`FirstIn`].
    WriteIn {
        entity: Option<IdStr>,
        before_tx: i64,
        length: Option<i64>,
        object_hash: Option<[u8; 32]>,
        first: FirstIn,
        size: Option<u64>,
        spelling: Option<String>,
        content_omitted: Option<Omitted>,
    },
}

/// A [`FirstRec`] with a source as a format-8 body keeps it: the filesystem as its place in the
/// log header's list ([`TxHeaderRec::filesystems`]), 1 byte where its id took 34.
#[derive(Encode, Decode)]
struct FirstIn {
    object_type: TypeName,
    filesystem: u32,
    path: String,
}

/// The id a file's first write implies: the identity hash of its type and source.
fn implied_id(first: &FirstRec) -> Result<Option<String>> {
    let Some((filesystem_id, path)) = &first.source else {
        return Ok(None);
    };
    let object_type: ObjectType = first.object_type.parse()?;
    if object_type != ObjectType::File {
        return Ok(None);
    }
    let source = Source::Filesystem(FilesystemSource {
        filesystem_id: filesystem_id.0.clone(),
        path: path.clone(),
    });
    Ok(Some(sourced_identity(object_type, &source)?.to_hex()))
}

/// Encodes the body of an op of a transaction at `tx_time` (µs): times as offsets, and no
/// entity id when the source implies it. The log's digests hash [`OpRec`]'s JSON, not these
/// bytes.
///
/// # Errors
/// [`Error::Storage`] when bincode fails; [`Error::InvalidInput`] for an unknown type name.
pub fn encode_op(op: &OpRec, tx_time: i64) -> Result<Vec<u8>> {
    encode(&op_disk(op, tx_time)?)
}

/// [`encode_op`] as store format 8 writes it: a first write with a source names its filesystem
/// by its place in `filesystems` (added there when new), which the transaction's log header
/// keeps ([`TxHeaderRec::filesystems`]); [`decode_op`] needs that list back.
///
/// # Errors
/// As [`encode_op`]; [`Error::InvalidInput`] past 2^32 filesystems in one transaction.
pub fn encode_op_in(op: &OpRec, tx_time: i64, filesystems: &mut Vec<IdStr>) -> Result<Vec<u8>> {
    let disk = match op_disk(op, tx_time)? {
        OpDisk::Write {
            entity,
            before_tx,
            length,
            object_hash,
            first:
                Some(FirstRec {
                    object_type,
                    source: Some((fs, path)),
                }),
            size,
            spelling,
            content_omitted,
        } => {
            let place = match filesystems.iter().position(|known| *known == fs) {
                Some(place) => place,
                None => {
                    filesystems.push(fs);
                    filesystems.len() - 1
                }
            };
            let filesystem = u32::try_from(place).map_err(|_| {
                Error::invalid_input("a transaction names more than 2^32 filesystems")
            })?;
            OpDisk::WriteIn {
                entity,
                before_tx,
                length,
                object_hash,
                first: FirstIn {
                    object_type,
                    filesystem,
                    path,
                },
                size,
                spelling,
                content_omitted,
            }
        }
        other => other,
    };
    encode(&disk)
}

/// The stored form of `op` at `tx_time`, filesystems named in full.
fn op_disk(op: &OpRec, tx_time: i64) -> Result<OpDisk> {
    Ok(match op {
        OpRec::Write(w) => {
            let implied = match &w.first {
                Some(first) => implied_id(first)?,
                None => None,
            };
            OpDisk::Write {
                entity: (implied.as_deref() != Some(&w.entity.0)).then(|| w.entity.clone()),
                before_tx: tx_time.saturating_sub(w.valid_from),
                length: w.valid_to.map(|to| to.saturating_sub(w.valid_from)),
                object_hash: w.object_hash,
                first: w.first.clone(),
                size: w.size,
                spelling: w.spelling.clone(),
                content_omitted: w.content_omitted,
            }
        }
        OpRec::Evict { entity } => OpDisk::Evict {
            entity: entity.clone(),
        },
        OpRec::Match { entity, expected } => OpDisk::Match {
            entity: entity.clone(),
            expected: *expected,
        },
    })
}

/// Decodes an op body of a transaction at `tx_time` (µs) whose log header lists
/// `filesystems` ([`TxHeaderRec::filesystems`]: a body of [`encode_op_in`] names its file's
/// filesystem by its place there); `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the bytes do not decode, a write names no entity and implies none,
/// or it names a filesystem past the list's end.
pub fn decode_op(bytes: &[u8], tx_time: i64, filesystems: &[IdStr], what: &str) -> Result<OpRec> {
    decode_op_of(bytes, tx_time, filesystems, what, None)
}

/// The place in its log header's list of filesystems that a format-8 first write
/// ([`encode_op_in`]) names; `None` for any other body, or bytes that do not decode.
pub fn op_filesystem_place(bytes: &[u8]) -> Option<u32> {
    match decode::<OpDisk>(bytes, "op").ok()? {
        OpDisk::WriteIn { first, .. } => Some(first.filesystem),
        _ => None,
    }
}

/// [`decode_op`] for a read that expects the op to write entity `expected`: a body whose entity
/// its source implies is given that id instead of computing it (a hash of the source per op
/// showed in profiles of a resume). Only for a caller that then checks the body against its
/// digest in the log, which covers the entity: a body whose source implies another entity then
/// fails that check.
///
/// # Errors
/// As [`decode_op`].
pub fn decode_op_of(
    bytes: &[u8],
    tx_time: i64,
    filesystems: &[IdStr],
    what: &str,
    expected: Option<&str>,
) -> Result<OpRec> {
    let disk = match decode::<OpDisk>(bytes, what)? {
        OpDisk::WriteIn {
            entity,
            before_tx,
            length,
            object_hash,
            first,
            size,
            spelling,
            content_omitted,
        } => {
            let fs = filesystems.get(first.filesystem as usize).ok_or_else(|| {
                Error::corrupt(format!(
                    "{what} names filesystem {} of its log header's {}",
                    first.filesystem,
                    filesystems.len()
                ))
            })?;
            OpDisk::Write {
                entity,
                before_tx,
                length,
                object_hash,
                first: Some(FirstRec {
                    object_type: first.object_type,
                    source: Some((fs.clone(), first.path)),
                }),
                size,
                spelling,
                content_omitted,
            }
        }
        other => other,
    };
    Ok(match disk {
        OpDisk::Write {
            entity,
            before_tx,
            length,
            object_hash,
            first,
            size,
            spelling,
            content_omitted,
        } => {
            let entity = match (entity, &first, expected) {
                (Some(entity), _, _) => entity,
                // A file's entity id: the digest check this caller makes covers it.
                (None, Some(first), Some(expected))
                    if first.source.is_some()
                        && first.object_type.0 == ObjectType::File.as_str() =>
                {
                    IdStr(expected.to_string())
                }
                (None, Some(first), _) => implied_id(first)
                    .map_err(|e| Error::corrupt(format!("{what}: {e}")))?
                    .map(IdStr)
                    .ok_or_else(|| Error::corrupt(format!("{what} names no entity")))?,
                (None, None, _) => {
                    return Err(Error::corrupt(format!("{what} names no entity")));
                }
            };
            let valid_from = tx_time.saturating_sub(before_tx);
            OpRec::Write(WriteRec {
                entity,
                valid_from,
                valid_to: length.map(|l| valid_from.saturating_add(l)),
                object_hash,
                first,
                size,
                spelling,
                content_omitted,
            })
        }
        OpDisk::Evict { entity } => OpRec::Evict { entity },
        OpDisk::Match { entity, expected } => OpRec::Match { entity, expected },
        OpDisk::WriteIn { .. } => {
            return Err(Error::corrupt(format!("{what} did not decode")));
        }
    })
}

/// The most a record's decoding may claim (bincode allocates a container's claimed length
/// before reading it): a damaged length, or bytes that were never a record (salvage's page
/// scan), fail to decode instead of aborting the process on an impossible allocation.
const DECODE_LIMIT: usize = 1 << 30;

fn config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<DECODE_LIMIT>,
> {
    bincode::config::standard().with_limit::<DECODE_LIMIT>()
}

/// Encodes a storage record with its format byte.
///
/// # Errors
/// [`Error::Storage`] when bincode fails (it does not for these types).
pub fn encode<T: Encode>(value: &T) -> Result<Vec<u8>> {
    let mut out = vec![RECORD_FORMAT];
    bincode::encode_into_std_write(value, &mut out, config())
        .map_err(|e| Error::storage("encoding a record", e))?;
    Ok(out)
}

/// [`decode`] borrowing from `bytes` (a [`DocRecRef`]): the same checks, no copies.
///
/// # Errors
/// As [`decode`].
pub fn decode_borrowed<'a, T: bincode::BorrowDecode<'a, ()>>(
    bytes: &'a [u8],
    what: &str,
) -> Result<T> {
    let rest = record_body(bytes, what)?;
    whole(
        bincode::borrow_decode_from_slice(rest, config()),
        rest.len(),
        what,
    )
}

/// Decodes a storage record; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the format byte is unknown or the bytes do not decode entirely.
pub fn decode<T: Decode<()>>(bytes: &[u8], what: &str) -> Result<T> {
    let rest = record_body(bytes, what)?;
    whole(bincode::decode_from_slice(rest, config()), rest.len(), what)
}

/// The bytes of a storage record after its format byte, checked to be this build's format.
fn record_body<'a>(bytes: &'a [u8], what: &str) -> Result<&'a [u8]> {
    match bytes.split_first() {
        Some((&RECORD_FORMAT, rest)) => Ok(rest),
        Some((other, _)) => Err(Error::corrupt(format!(
            "{what} has record format {other}, this strata reads {RECORD_FORMAT}"
        ))),
        None => Err(Error::corrupt(format!("{what} is empty"))),
    }
}

/// The value bincode decoded from a record body of `len` bytes, refused unless it used them all.
fn whole<T>(
    decoded: std::result::Result<(T, usize), bincode::error::DecodeError>,
    len: usize,
    what: &str,
) -> Result<T> {
    let (value, used) =
        decoded.map_err(|e| Error::corrupt(format!("{what} does not decode: {e}")))?;
    if used != len {
        return Err(Error::corrupt(format!(
            "{what} has {} bytes after its record",
            len - used
        )));
    }
    Ok(value)
}

/// Key tag of an id that is a SHA-256 in lowercase hex: the 32 bytes follow.
const ID_HASH: u8 = 0;
/// Key tag of any other id: its UTF-8 follows.
const ID_TEXT: u8 = 1;

/// An entity or filesystem id as stored in keys: a 64-character lowercase hex id (file entities,
/// filesystem ids) as a tag byte and its 32 bytes, anything else as a tag byte and its UTF-8.
/// Hex ids keep their order among themselves (hex digits sort like the nibbles they spell).
pub fn id_key(id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(33.max(id.len() + 1));
    let is_hash = id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if is_hash {
        let nibble = |digit: u8| match digit {
            b'a'..=b'f' => digit - b'a' + 10,
            _ => digit - b'0',
        };
        out.push(ID_HASH);
        for pair in id.as_bytes().chunks_exact(2) {
            if let [high, low] = pair {
                out.push(nibble(*high) << 4 | nibble(*low));
            }
        }
    } else {
        out.push(ID_TEXT);
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// Key tag of a filesystem number (store format 5, `redb/fsnum.rs`): its LEB128 follows.
const FS_NUMBER: u8 = 2;

/// The key prefix of the filesystem numbered `n` in `paths` and `stat_cache` keys: a tag byte
/// and `n` in LEB128 (2–6 bytes where the filesystem's [`id_key`] takes 33).
pub fn fs_number_key(n: u32) -> Vec<u8> {
    let mut out = vec![FS_NUMBER];
    push_leb128(&mut out, u64::from(n));
    out
}

/// The filesystem number of a key prefix made by [`fs_number_key`]; `None` for any other key.
pub fn fs_number_of_key(key: &[u8]) -> Option<u32> {
    let (&tag, rest) = key.split_first()?;
    if tag != FS_NUMBER {
        return None;
    }
    let mut n = 0u64;
    for (i, &byte) in rest.iter().enumerate() {
        if i >= 5 {
            return None;
        }
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (i + 1 == rest.len())
                .then(|| u32::try_from(n).ok())
                .flatten();
        }
    }
    None
}

/// The key of an id that is not a hash (and of every such id that starts with `prefix`).
pub fn text_id_key(prefix: &str) -> Vec<u8> {
    let mut out = vec![ID_TEXT];
    out.extend_from_slice(prefix.as_bytes());
    out
}

/// The id spelled by a key of [`id_key`]; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the key has an unknown tag, a hash of the wrong length or text that
/// is not UTF-8.
pub fn id_of_key(key: &[u8], what: &str) -> Result<String> {
    match key.split_first() {
        Some((&ID_HASH, bytes)) if bytes.len() == 32 => Ok(crate::hash::to_hex(bytes)),
        Some((&ID_TEXT, text)) => std::str::from_utf8(text)
            .map(str::to_string)
            .map_err(|_| Error::corrupt(format!("{what} is not UTF-8"))),
        _ => Err(Error::corrupt(format!("{what} is not a stored id"))),
    }
}

/// Bytes of a short `entities` key (store format 8): a hash id's tag and the first 11 bytes of
/// its hash, where its [`id_key`] takes 33. Only a file named by its source has one (its id is
/// its source's identity hash, so a reader checks the key against the source in `entity_ids`);
/// a second file whose id starts with the same 88 bits keeps the whole key.
pub const SHORT_ENTITY_KEY: usize = 12;

/// The short `entities` key of the id whose [`id_key`] is `key`: `None` for an id that is not a
/// hash (its whole key is kept).
pub fn short_entity_key(key: &[u8]) -> Option<&[u8]> {
    match key.split_first() {
        Some((&ID_HASH, hash)) if hash.len() == 32 => key.get(..SHORT_ENTITY_KEY),
        _ => None,
    }
}

/// Whether `key` is a short `entities` key ([`SHORT_ENTITY_KEY`]), whose id is its row's source's
/// identity hash.
pub fn is_short_entity_key(key: &[u8]) -> bool {
    key.len() == SHORT_ENTITY_KEY && key.first() == Some(&ID_HASH)
}

/// The record format byte of a file's entity row whose source is in `entity_ids` (store format
/// 6): the row is this byte and the entity number (bincode varint), 2–5 bytes where the whole
/// [`EntityRec`] with its source took ~90.
pub const ENTITY_SOURCED: u8 = 2;

/// An `entities` row as stored: the whole record (every row before store format 6, and the
/// rows of entities that are not files named by their source), or a file's number alone, its
/// source being in `entity_ids`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredEntity {
    /// The whole record.
    Whole(EntityRec),
    /// A file whose id is its source's identity hash, by number; the source is in `entity_ids`.
    Sourced(u64),
}

/// Encodes the `entities` row of a file whose source `entity_ids` holds (store format 6).
///
/// # Errors
/// [`Error::Storage`] when bincode fails.
pub fn encode_sourced_entity(eid: u64) -> Result<Vec<u8>> {
    let mut out = vec![ENTITY_SOURCED];
    bincode::encode_into_std_write(eid, &mut out, config())
        .map_err(|e| Error::storage("encoding an entity row", e))?;
    Ok(out)
}

/// Decodes an `entities` row of either layout; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the bytes decode as neither.
pub fn decode_entity(bytes: &[u8], what: &str) -> Result<StoredEntity> {
    match bytes.split_first() {
        Some((&ENTITY_SOURCED, rest)) => Ok(StoredEntity::Sourced(whole(
            bincode::decode_from_slice(rest, config()),
            rest.len(),
            what,
        )?)),
        _ => decode(bytes, what).map(StoredEntity::Whole),
    }
}

/// The tag of an `entity_ids` value that holds a file's source (store format 6) instead of its
/// id's [`id_key`] (tags 0 and 1): the id is the source's identity hash.
const ID_SOURCE: u8 = 3;

/// An `entity_ids` value as stored: an entity id, or a file's source whose identity hash is its
/// id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredEntityId {
    /// The id.
    Id(String),
    /// A file's source: its filesystem as the key prefix of its `paths` row (a number, or the
    /// filesystem's [`id_key`]) and its path.
    Source {
        /// The filesystem's key prefix (`redb/fsnum.rs`).
        fs_key: Vec<u8>,
        /// The canonical path.
        path: String,
    },
}

/// Encodes the `entity_ids` value of a file's source: a tag byte, then the filesystem key and
/// the path (bincode).
///
/// # Errors
/// [`Error::Storage`] when bincode fails.
pub fn encode_entity_source(fs_key: &[u8], path: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(fs_key.len() + path.len() + 4);
    out.push(ID_SOURCE);
    bincode::encode_into_std_write((fs_key, path), &mut out, config())
        .map_err(|e| Error::storage("encoding an entity source", e))?;
    Ok(out)
}

/// Decodes an `entity_ids` value of either kind; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the bytes are neither an id key nor a source.
pub fn decode_entity_id(bytes: &[u8], what: &str) -> Result<StoredEntityId> {
    match bytes.split_first() {
        Some((&ID_SOURCE, rest)) => {
            let (fs_key, path): (Vec<u8>, String) =
                whole(bincode::decode_from_slice(rest, config()), rest.len(), what)?;
            Ok(StoredEntityId::Source { fs_key, path })
        }
        _ => id_of_key(bytes, what).map(StoredEntityId::Id),
    }
}

/// The id of a file at `path` on filesystem `filesystem_id`: its source's identity hash.
///
/// # Errors
/// Never in practice (canonicalisation of the source).
pub fn file_id(filesystem_id: &str, path: &str) -> Result<String> {
    let source = Source::Filesystem(FilesystemSource {
        filesystem_id: filesystem_id.to_string(),
        path: path.to_string(),
    });
    Ok(sourced_identity(ObjectType::File, &source)?.to_hex())
}

/// Whether the entity `id` that `first` creates is a file named by its source (its id is the
/// source's identity hash): such an entity's row can leave the source to `entity_ids`.
///
/// # Errors
/// [`Error::InvalidInput`] for an unknown type name.
pub fn sourced_file(id: &str, first: &FirstRec) -> Result<bool> {
    Ok(implied_id(first)?.as_deref() == Some(id))
}

/// Blob payload stored as given.
const METHOD_RAW: u8 = 0;
/// Blob payload compressed with LZ4 (block format, uncompressed size prepended); read only.
const METHOD_LZ4: u8 = 1;
/// Blob payload compressed as one zstd frame (its header holds the uncompressed size).
const METHOD_ZSTD: u8 = 2;
/// zstd's level for blobs. Measured on 20 000 slices of 1–8 KiB of Rust sources: LZ4 0.386 of
/// the bytes, zstd 1 0.275, zstd 3 0.269, zstd 6 0.254 at twice the time of 3. Level 1: level 3
/// was a quarter of a full index's CPU (issue 15's profile) for 2 % fewer bytes.
const ZSTD_LEVEL: i32 = 1;
/// Blobs at least this long are probed first: when their first [`PROBE`] bytes do not shrink by
/// an eighth, the blob is stored raw without compressing the rest (random or already
/// compressed bytes cost a full zstd pass for nothing).
const PROBE_AT: usize = 256 * 1024;
/// The length of the probe of a long blob.
const PROBE: usize = 64 * 1024;
/// Blobs that start as a compressed format does ([`compressed_format`]) and are longer than
/// this are probed on their first [`SIGNED_PROBE`] bytes, whatever their length: the `--real`
/// bench tree's 542 `.gz` files under [`PROBE_AT`] (8.1 MB, 7.1 MB of it in the 155 past this
/// length) were all compressed whole, and 541 did not shrink.
const SIGNED_PROBE_AT: usize = 8 * 1024;
/// The length of the probe of a blob in a compressed format.
const SIGNED_PROBE: usize = 4 * 1024;
/// The first bytes of formats whose data is already compressed (gzip with deflate, PNG, JPEG,
/// GIF, xz, bzip2, zstd, 7z, WOFF2). Zip is not among them: its entries may be stored as is.
const COMPRESSED_SIGNATURES: [&[u8]; 9] = [
    &[0x1f, 0x8b, 0x08],
    &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a],
    &[0xff, 0xd8, 0xff],
    b"GIF8",
    &[0xfd, b'7', b'z', b'X', b'Z', 0x00],
    b"BZh",
    &[0x28, 0xb5, 0x2f, 0xfd],
    &[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c],
    b"wOF2",
];
/// The largest blob a zstd record may claim to decode to (a corrupt header must not make us
/// allocate without bound).
const MAX_BLOB: u64 = 1 << 40;

thread_local! {
    /// One zstd compression context per thread: making a new one per blob tripled the time.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// One zstd decompression context per thread.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Inputs up to this long are compressed into the thread's [`FRAME`] buffer, and only the frame
/// is copied out (at most about this much stays allocated per thread).
const FRAME_BUFFER_MAX: usize = 256 * 1024;

thread_local! {
    /// Where a thread's zstd writes the frames of inputs up to [`FRAME_BUFFER_MAX`]: a buffer of
    /// zstd's bound per blob, most of it never written, cost an allocation and fresh pages.
    static FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `head` followed by `bytes` compressed as one zstd frame, in a buffer of exactly that length
/// (records wait in memory until their commit: room past the frame would wait with them). The
/// frame is written into the thread's [`FRAME`] buffer (a fresh one for a long input) and
/// copied once, if `keep` says yes to its length. `None` when it does not, or when zstd fails
/// (it does not on memory input).
fn zstd_compress_after(
    head: &[u8],
    bytes: &[u8],
    keep: impl FnOnce(usize) -> bool,
) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        let compressor = slot.as_mut()?;
        let compress = |frame: &mut Vec<u8>| -> Option<Vec<u8>> {
            frame.clear();
            frame.reserve(zstd::zstd_safe::compress_bound(bytes.len()));
            let len = compressor.compress_to_buffer(bytes, frame).ok()?;
            if !keep(len) {
                return None;
            }
            let mut out = Vec::with_capacity(head.len() + frame.len());
            out.extend_from_slice(head);
            out.extend_from_slice(frame);
            Some(out)
        };
        if bytes.len() <= FRAME_BUFFER_MAX {
            FRAME.with(|frame| compress(&mut frame.borrow_mut()))
        } else {
            compress(&mut Vec::new())
        }
    })
}

fn zstd_decompress(payload: &[u8], what: &str) -> Result<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(payload)
        .ok()
        .flatten()
        .filter(|n| *n <= MAX_BLOB)
        .ok_or_else(|| Error::corrupt(format!("{what} has no valid zstd frame header")))?;
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(
                zstd::bulk::Decompressor::new()
                    .map_err(|e| Error::storage("making a zstd context", e))?,
            );
        }
        let Some(d) = slot.as_mut() else {
            return Err(Error::invariant("no zstd context"));
        };
        let out = d
            .decompress(payload, size as usize)
            .map_err(|e| Error::corrupt(format!("{what} does not decompress: {e}")))?;
        if out.len() as u64 != size {
            return Err(Error::corrupt(format!(
                "{what} decompresses to {} bytes, its header says {size}",
                out.len()
            )));
        }
        Ok(out)
    })
}

/// A blob record whose bytes are another blob's bytes followed by a suffix: the way a chat
/// transcript grows. Its header is `[format][METHOD_SUFFIX][seq: u32 LE][len: u64 LE][base hash]`,
/// then the suffix as `[method][payload]` like a whole blob.
const METHOD_SUFFIX: u8 = 3;
/// Bytes of a suffix record before its suffix's method byte.
pub const SUFFIX_HEADER: usize = 2 + 4 + 8 + 32;

/// A blob record decoded: whole bytes, or a suffix on a base blob.
#[derive(Debug, PartialEq, Eq)]
pub enum BlobRecord {
    /// The blob's bytes.
    Whole(Vec<u8>),
    /// The blob is the bytes of blob `base` followed by `suffix`.
    Suffix {
        /// The record's place in its chain of suffixes (1 on a whole blob).
        seq: u32,
        /// The whole blob's length in bytes.
        len: u64,
        /// SHA-256 of the base blob.
        base: [u8; 32],
        /// The bytes after the base's.
        suffix: Vec<u8>,
    },
}

/// What the first [`SUFFIX_HEADER`] bytes of a blob record say about it, without its payload.
#[derive(Debug, PartialEq, Eq)]
pub struct BlobHeader {
    /// The record's place in its chain of suffixes: 0 for a whole blob.
    pub seq: u32,
    /// The base blob of a suffix record.
    pub base: Option<[u8; 32]>,
    /// The whole blob's length in bytes, when the header says it (suffix records, zstd frames).
    pub len: Option<u64>,
}

/// Encodes a suffix record: the blob of `len` bytes that are those of blob `base` followed by
/// `suffix`, number `seq` in its chain.
pub fn encode_suffix_blob(seq: u32, len: u64, base: &[u8; 32], suffix: &[u8]) -> Vec<u8> {
    let inner = encode_blob(suffix);
    let mut out = Vec::with_capacity(SUFFIX_HEADER + inner.len() - 1);
    out.push(RECORD_FORMAT);
    out.push(METHOD_SUFFIX);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(base);
    out.extend_from_slice(&inner[1..]);
    out
}

/// Reads the header of a blob record from its first bytes (at most [`SUFFIX_HEADER`] are
/// needed; a whole record also works); `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the header is unknown or truncated.
pub fn blob_header(prefix: &[u8], what: &str) -> Result<BlobHeader> {
    match prefix {
        [RECORD_FORMAT, METHOD_SUFFIX, rest @ ..] if rest.len() >= SUFFIX_HEADER - 2 => {
            let (seq, rest) = rest.split_at(4);
            let (len, rest) = rest.split_at(8);
            let mut base = [0u8; 32];
            base.copy_from_slice(&rest[..32]);
            Ok(BlobHeader {
                seq: u32::from_le_bytes(seq.try_into().unwrap_or_default()),
                base: Some(base),
                len: Some(u64::from_le_bytes(len.try_into().unwrap_or_default())),
            })
        }
        [RECORD_FORMAT, METHOD_SUFFIX, ..] => Err(Error::corrupt(format!("{what} is truncated"))),
        [RECORD_FORMAT, METHOD_ZSTD, payload @ ..] => Ok(BlobHeader {
            seq: 0,
            base: None,
            len: zstd::zstd_safe::get_frame_content_size(payload)
                .ok()
                .flatten(),
        }),
        [RECORD_FORMAT, METHOD_RAW | METHOD_LZ4, ..] => Ok(BlobHeader {
            seq: 0,
            base: None,
            len: None,
        }),
        [format, method, ..] => Err(Error::corrupt(format!(
            "{what} has record format {format} and method {method}, which this strata does not read"
        ))),
        _ => Err(Error::corrupt(format!("{what} is truncated"))),
    }
}

/// The length of the blob a record holds, from the record's first bytes `prefix` (at most
/// [`SUFFIX_HEADER`] are needed) and its whole length `record_len`, without its payload: a raw
/// record's payload length, an LZ4 or zstd record's stated uncompressed size, a suffix record's
/// whole length. `None` when the header does not say (a zstd frame without a usable size); the
/// caller then reads the record. Nothing here checks the payload against what the header says:
/// reading the record does (and fsck).
///
/// # Errors
/// [`Error::Corrupt`] when the header is unknown or truncated.
pub fn blob_len(prefix: &[u8], record_len: u64, what: &str) -> Result<Option<u64>> {
    let header = blob_header(prefix, what)?;
    Ok(match prefix {
        [RECORD_FORMAT, METHOD_RAW, ..] => Some(record_len.saturating_sub(2)),
        [RECORD_FORMAT, METHOD_LZ4, a, b, c, d, ..] => {
            Some(u64::from(u32::from_le_bytes([*a, *b, *c, *d])))
        }
        [RECORD_FORMAT, METHOD_LZ4, ..] => None,
        _ => header.len.filter(|n| *n <= MAX_BLOB),
    })
}

/// Decodes a blob record, whole or suffix; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the header is unknown or the payload does not decompress.
pub fn decode_blob_record(record: &[u8], what: &str) -> Result<BlobRecord> {
    let header = blob_header(record, what)?;
    match header.base {
        Some(base) => {
            let mut inner = vec![RECORD_FORMAT];
            inner.extend_from_slice(record.get(SUFFIX_HEADER..).unwrap_or_default());
            Ok(BlobRecord::Suffix {
                seq: header.seq,
                len: header.len.unwrap_or_default(),
                base,
                suffix: decode_blob(&inner, what)?,
            })
        }
        None => decode_blob(record, what).map(BlobRecord::Whole),
    }
}

/// Encodes a blob: `[format][method][payload]`. The payload is zstd-compressed when that saves
/// at least an eighth of the bytes (source text: about 0.27 of its size), else stored raw
/// (binary and already-compressed files cost two bytes more than their size).
pub fn encode_blob(bytes: &[u8]) -> Vec<u8> {
    compress_blob(bytes).unwrap_or_else(|| {
        let mut out = Vec::with_capacity(bytes.len() + 2);
        out.extend_from_slice(&RAW_HEADER);
        out.extend_from_slice(bytes);
        out
    })
}

/// The header of a raw blob record: the record is these two bytes and then the blob's.
pub const RAW_HEADER: [u8; 2] = [RECORD_FORMAT, METHOD_RAW];

/// The record [`encode_blob`] makes of `bytes` when it compresses them; `None` when it would
/// store them raw ([`RAW_HEADER`] and the bytes), which a writer appends without building it.
pub fn compress_blob(bytes: &[u8]) -> Option<Vec<u8>> {
    let shrinks =
        |compressed: usize, len: usize| compressed > 0 && compressed + compressed / 7 <= len;
    let probe = if bytes.len() >= PROBE_AT {
        PROBE
    } else if bytes.len() > SIGNED_PROBE_AT && compressed_format(bytes) {
        SIGNED_PROBE
    } else {
        0
    };
    let probe_fails =
        probe > 0 && zstd_compress_after(&[], &bytes[..probe], |len| shrinks(len, probe)).is_none();
    if probe_fails {
        return None;
    }
    zstd_compress_after(&[RECORD_FORMAT, METHOD_ZSTD], bytes, |frame| {
        shrinks(frame, bytes.len())
    })
}

/// Whether `bytes` start as a format whose data is already compressed
/// ([`COMPRESSED_SIGNATURES`]): such a blob is probed before zstd reads all of it.
fn compressed_format(bytes: &[u8]) -> bool {
    COMPRESSED_SIGNATURES
        .iter()
        .any(|signature| bytes.starts_with(signature))
}

/// Decodes a whole blob record into its bytes; `what` names it for the error.
///
/// # Errors
/// [`Error::Corrupt`] when the header is unknown, the payload does not decompress, or the
/// record is a suffix record (which [`decode_blob_record`] reads).
pub fn decode_blob(record: &[u8], what: &str) -> Result<Vec<u8>> {
    match record {
        [RECORD_FORMAT, METHOD_RAW, payload @ ..] => Ok(payload.to_vec()),
        [RECORD_FORMAT, METHOD_ZSTD, payload @ ..] => zstd_decompress(payload, what),
        [RECORD_FORMAT, METHOD_LZ4, a, b, c, d, ..] => {
            let bytes = lz4_flex::decompress_size_prepended(&record[2..])
                .map_err(|e| Error::corrupt(format!("{what} does not decompress: {e}")))?;
            // lz4_flex takes the prepended size as a bound only: bytes shorter than the header
            // says (which `ls` gives as the size) are damage.
            let stated = u32::from_le_bytes([*a, *b, *c, *d]);
            if bytes.len() as u64 != u64::from(stated) {
                return Err(Error::corrupt(format!(
                    "{what} decompresses to {} bytes, its header says {stated}",
                    bytes.len()
                )));
            }
            Ok(bytes)
        }
        [RECORD_FORMAT, METHOD_LZ4, ..] => Err(Error::corrupt(format!("{what} is truncated"))),
        [format, method, ..] => Err(Error::corrupt(format!(
            "{what} has record format {format} and method {method}, which this strata does not read"
        ))),
        _ => Err(Error::corrupt(format!("{what} is truncated"))),
    }
}

/// A stat cache entry: the stat seen when a file was last read, its hash, and when that scan began.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct StatRec {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub inode: u64,
    /// SHA-256 of the bytes read.
    pub file_hash: [u8; 32],
    /// Start of the recording scan, ns since the epoch.
    pub scan_start_ns: i64,
}

impl StatRec {
    /// The stat cache entry this record holds.
    pub fn entry(&self) -> crate::store::StatEntry {
        crate::store::StatEntry {
            stat: crate::store::FileStat {
                size: self.size,
                mtime_ns: self.mtime_ns,
                ctime_ns: self.ctime_ns,
                inode: self.inode,
            },
            file_hash: crate::hash::Hash(self.file_hash),
            scan_start_ns: self.scan_start_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header layout before index runs, as earlier builds derived it.
    #[derive(Encode)]
    struct HeaderBeforeRuns {
        tx_time: i64,
        origin: String,
        digests: Vec<[u8; 32]>,
        chain: [u8; 32],
    }

    #[test]
    fn headers_without_a_run_keep_their_bytes_and_run_headers_round_trip() -> Result<()> {
        let mut header = TxHeaderRec {
            tx_time: 1_700_000_000_000_000,
            origin: "indexer".into(),
            digests: vec![[1; 32], [2; 32]],
            run: None,
            chain: [9; 32],
            filesystems: Vec::new(),
        };
        let before = encode(&HeaderBeforeRuns {
            tx_time: header.tx_time,
            origin: header.origin.clone(),
            digests: header.digests.clone(),
            chain: header.chain,
        })?;
        assert_eq!(encode_header(&header)?, before, "format 1, byte for byte");
        assert_eq!(decode_header(&before, "h")?, header);
        header.run = Some(7);
        let with_run = encode_header(&header)?;
        assert_eq!(with_run[0], HEADER_RUN_FORMAT);
        assert_eq!(decode_header(&with_run, "h")?, header);
        let mut longer = with_run.clone();
        longer.push(0);
        assert!(
            decode_header(&longer, "h").is_err(),
            "a trailing byte is damage"
        );
        assert!(decode_header(&with_run[..with_run.len() - 1], "h").is_err());
        let mut unknown = with_run;
        unknown[0] = 9;
        assert!(decode_header(&unknown, "h").is_err());
        Ok(())
    }

    #[test]
    fn op_bodies_round_trip_and_omit_only_an_implied_id() -> Result<()> {
        let source = (IdStr::from("ab".repeat(32)), "/src/main.rs".to_string());
        let first = FirstRec {
            object_type: ObjectType::File.into(),
            source: Some(source.clone()),
        };
        let id = implied_id(&first)?.unwrap_or_default();
        let write = |entity: &str, first: Option<FirstRec>, valid_to| {
            OpRec::Write(WriteRec {
                entity: entity.into(),
                valid_from: 1_700_000_000_000_000,
                valid_to,
                object_hash: Some([3; 32]),
                first,
                size: Some(9),
                spelling: None,
                content_omitted: Some(Omitted::Binary),
            })
        };
        let tx_time = 1_700_000_000_000_123;
        let ops = [
            write(&id, Some(first.clone()), None),
            write(
                &"cd".repeat(32),
                Some(first.clone()),
                Some(1_700_000_000_500_000),
            ),
            write(&id, None, None),
            OpRec::Evict {
                entity: id.as_str().into(),
            },
            OpRec::Match {
                entity: "system_prompt:x".into(),
                expected: None,
            },
        ];
        let sizes = ops
            .iter()
            .map(|op| {
                let bytes = encode_op(op, tx_time)?;
                assert_eq!(&decode_op(&bytes, tx_time, &[], "op")?, op);
                Ok(bytes.len())
            })
            .collect::<Result<Vec<_>>>()?;
        // The implied id costs one byte; a different id (never made by a file put) is kept.
        assert!(sizes[0] + 32 < sizes[1], "{sizes:?}");
        // A write that names no entity and has no source to imply one is corrupt.
        let orphan = encode(&OpDisk::Write {
            entity: None,
            before_tx: 0,
            length: None,
            object_hash: None,
            first: None,
            size: None,
            spelling: None,
            content_omitted: None,
        })?;
        assert!(matches!(
            decode_op(&orphan, tx_time, &[], "op"),
            Err(Error::Corrupt { .. })
        ));
        let mut bad_type = encode_op(&ops[0], tx_time)?;
        let at = bad_type.len() - 1 - 1 - 1 - 2 - 1 - 12 - 1 - 33 - 1 - 1;
        assert_eq!(bad_type[at], 0, "the type byte of a file");
        bad_type[at] = 9;
        assert!(decode_op(&bad_type, tx_time, &[], "op").is_err());
        Ok(())
    }

    /// Format 8's bodies: a first write with a source names its filesystem by its place in
    /// the header's list (35 bytes fewer for a hash id), each filesystem listed once; every
    /// other op is stored as before; a place past the list is corrupt; a header with a list
    /// round-trips in its own format, and its chain JSON does not see the list.
    #[test]
    fn format_8_bodies_name_their_filesystem_in_the_header() -> Result<()> {
        let (fs1, fs2) = ("ab".repeat(32), "fs".to_string());
        let write = |fs: &str, path: &str, creates: bool| -> Result<OpRec> {
            let first = FirstRec {
                object_type: ObjectType::File.into(),
                source: Some((IdStr::from(fs), path.to_string())),
            };
            let id = implied_id(&first)?.unwrap_or_default();
            Ok(OpRec::Write(WriteRec {
                entity: id.as_str().into(),
                valid_from: 1_700_000_000_000_000,
                valid_to: None,
                object_hash: Some([3; 32]),
                first: creates.then_some(first),
                size: None,
                spelling: Some("/A.rs".into()),
                content_omitted: None,
            }))
        };
        let tx_time = 1_700_000_000_000_123;
        let ops = [
            write(&fs1, "/a.rs", true)?,
            write(&fs2, "/b.rs", true)?,
            write(&fs1, "/c.rs", true)?,
            write(&fs1, "/a.rs", false)?,
            OpRec::Match {
                entity: "system_prompt:x".into(),
                expected: Some([4; 32]),
            },
        ];
        let mut listed = Vec::new();
        let mut bodies = Vec::new();
        for op in &ops {
            bodies.push(encode_op_in(op, tx_time, &mut listed)?);
        }
        assert_eq!(listed, [IdStr(fs1.clone()), IdStr(fs2)]);
        for (op, body) in ops.iter().zip(&bodies) {
            assert_eq!(&decode_op(body, tx_time, &listed, "op")?, op);
        }
        let old = encode_op(&ops[0], tx_time)?;
        assert_eq!(bodies[0].len() + 35, old.len(), "a hash id: 35 bytes fewer");
        assert_eq!(
            bodies[3],
            encode_op(&ops[3], tx_time)?,
            "a later write as before"
        );
        assert_eq!(bodies[4], encode_op(&ops[4], tx_time)?);
        // An old body decodes with or without a list.
        assert_eq!(decode_op(&old, tx_time, &listed, "op")?, ops[0]);
        assert_eq!(decode_op(&old, tx_time, &[], "op")?, ops[0]);
        // Without its list, or past its end, a format-8 body is corrupt.
        assert!(matches!(
            decode_op(&bodies[1], tx_time, &listed[..1], "op"),
            Err(Error::Corrupt { .. })
        ));
        assert!(decode_op(&bodies[0], tx_time, &[], "op").is_err());
        let header = TxHeaderRec {
            tx_time,
            origin: "indexer".into(),
            digests: vec![[1; 32]; 5],
            run: Some(3),
            chain: [9; 32],
            filesystems: listed.clone(),
        };
        let bytes = encode_header(&header)?;
        assert_eq!(bytes[0], HEADER_FS_FORMAT);
        assert_eq!(decode_header(&bytes, "h")?, header);
        for run in [None, Some(3)] {
            let plain = TxHeaderRec {
                filesystems: Vec::new(),
                run,
                ..header.clone()
            };
            let with = TxHeaderRec {
                run,
                ..header.clone()
            };
            assert_eq!(decode_header(&encode_header(&with)?, "h")?, with);
            assert_ne!(encode_header(&plain)?[0], HEADER_FS_FORMAT);
            assert_eq!(
                crate::store::log::header_json(7, &plain),
                crate::store::log::header_json(7, &with),
                "the chain does not hash the list"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_header(&longer, "h").is_err());
        assert!(decode_header(&bytes[..bytes.len() - 1], "h").is_err());
        Ok(())
    }

    /// Both layouts of an entity row and of an `entity_ids` value read back as what they are,
    /// told apart by their first byte, and a value of neither is refused.
    #[test]
    fn entity_rows_of_either_layout_read_back() -> Result<()> {
        let whole = EntityRec {
            eid: 300,
            object_type: TypeName::from(ObjectType::File),
            source: Some((IdStr::from("fs"), "/a.rs".to_string())),
        };
        assert_eq!(
            decode_entity(&encode(&whole)?, "entity")?,
            StoredEntity::Whole(whole)
        );
        let sourced = encode_sourced_entity(300)?;
        assert_eq!(sourced[0], ENTITY_SOURCED);
        assert_eq!(sourced.len(), 4, "the format byte and a 3-byte varint");
        assert_eq!(
            decode_entity(&sourced, "entity")?,
            StoredEntity::Sourced(300)
        );
        let hash_id = "ab".repeat(32);
        assert_eq!(
            decode_entity_id(&id_key(&hash_id), "id")?,
            StoredEntityId::Id(hash_id)
        );
        assert_eq!(
            decode_entity_id(&id_key("session:x"), "id")?,
            StoredEntityId::Id("session:x".to_string())
        );
        let source = encode_entity_source(&fs_number_key(7), "/a.rs")?;
        assert_eq!(source.len(), 1 + 1 + 2 + 1 + 5);
        assert_eq!(
            decode_entity_id(&source, "id")?,
            StoredEntityId::Source {
                fs_key: fs_number_key(7),
                path: "/a.rs".to_string(),
            }
        );
        assert!(decode_entity_id(&[3, 9], "id").is_err(), "a cut source");
        assert!(decode_entity_id(&[4, 0], "id").is_err(), "an unknown tag");
        assert!(decode_entity(&[2], "entity").is_err(), "no number");
        Ok(())
    }

    /// A file's id is its source's identity hash; another id, or another type, is not sourced.
    #[test]
    fn only_a_file_named_by_its_source_is_sourced() -> Result<()> {
        let first = FirstRec {
            object_type: TypeName::from(ObjectType::File),
            source: Some((IdStr::from("fs"), "/a.rs".to_string())),
        };
        let id = file_id("fs", "/a.rs")?;
        assert!(sourced_file(&id, &first)?);
        assert!(!sourced_file("other", &first)?);
        let prompt = FirstRec {
            object_type: TypeName::from(ObjectType::SystemPrompt),
            source: None,
        };
        assert!(!sourced_file(&id, &prompt)?);
        Ok(())
    }

    #[test]
    fn a_file_documents_fields_are_stored_compact_and_read_back_byte_for_byte() -> Result<()> {
        let doc = |fields: &str| DocRec {
            file_hash: Some([1; 32]),
            content_hash: None,
            fields: fields.to_string(),
        };
        for fields in [
            r#"{"char_count":0,"file_type":"rs"}"#,
            r#"{"char_count":1234,"file_type":"bin"}"#,
            r#"{"char_count":18446744073709551615,"file_type":"tar.gz"}"#,
            r#"{"char_count":7,"file_type":"é"}"#,
            r#"{"char_count":7,"file_type":""}"#,
        ] {
            let rec = doc(fields);
            let compact = encode_doc(&rec)?;
            let plain = encode(&rec)?;
            assert!(compact.len() + 25 <= plain.len(), "{fields}: {compact:?}");
            assert_eq!(decode::<DocRec>(&compact, "d")?, rec);
            assert_eq!(
                decode::<DocRec>(&plain, "d")?,
                rec,
                "format 4's records read"
            );
            let borrowed: DocRecRef<'_> = decode_borrowed(&compact, "d")?;
            assert_eq!(borrowed.fields, fields);
            let borrowed: DocRecRef<'_> = decode_borrowed(&plain, "d")?;
            assert!(matches!(borrowed.fields, std::borrow::Cow::Borrowed(_)));
        }
        // Anything else keeps its text: other types' fields, escapes, a null type, other
        // spellings of a number, deltas.
        for fields in [
            r#"{"char_count":1,"file_type":"a\"b"}"#,
            r#"{"char_count":1,"file_type":null}"#,
            r#"{"char_count":01,"file_type":"rs"}"#,
            r#"{"char_count":1,"file_type":"rs","x":1}"#,
            r#"{"char_count":99999999999999999999,"file_type":"rs"}"#,
            "\u{1}{\"b\":\"00\"}",
            "",
        ] {
            let rec = doc(fields);
            assert_eq!(encode_doc(&rec)?, encode(&rec)?, "{fields}");
            assert_eq!(decode::<DocRec>(&encode_doc(&rec)?, "d")?, rec);
        }
        // A compact record cut short, or past 64 bits, is corrupt.
        let record = |fields: &[u8]| {
            let mut out = vec![RECORD_FORMAT, 1];
            out.extend_from_slice(&[1; 32]);
            out.extend_from_slice(&[0, fields.len() as u8]);
            out.extend_from_slice(fields);
            out
        };
        let fine = record(&[FIELDS_FILE, 0xac, 0x02, b'r', b's']);
        assert_eq!(
            decode::<DocRec>(&fine, "d")?.fields,
            r#"{"char_count":300,"file_type":"rs"}"#
        );
        let cut = record(&[FIELDS_FILE, 0xac]);
        assert!(matches!(
            decode::<DocRec>(&cut, "d"),
            Err(Error::Corrupt { .. })
        ));
        let mut long = vec![FIELDS_FILE];
        long.extend_from_slice(&[0xff; 11]);
        assert!(matches!(
            decode::<DocRec>(&record(&long), "d"),
            Err(Error::Corrupt { .. })
        ));
        Ok(())
    }

    #[test]
    fn filesystem_number_keys_read_back() {
        for n in [1, 127, 128, 300, u32::MAX - 1] {
            assert_eq!(fs_number_of_key(&fs_number_key(n)), Some(n));
        }
        assert_eq!(fs_number_of_key(&id_key("fs")), None);
        assert_eq!(fs_number_of_key(&[FS_NUMBER, 0x80]), None);
        assert_eq!(fs_number_of_key(&[FS_NUMBER, 1, 1]), None);
    }

    #[test]
    fn records_round_trip_and_bad_bytes_are_corrupt() -> Result<()> {
        let rec = VersionRec {
            object_hash: Some([7; 32]),
            tx_after: 5,
            op: 7,
            restored: false,
            size: None,
            spelling: Some("/A/b".into()),
            content_omitted: None,
        };
        let bytes = encode(&rec)?;
        assert_eq!(decode::<VersionRec>(&bytes, "v")?, rec);
        // Format 8: the document's number in place of its hash, 29 bytes fewer up to 65 535.
        assert_eq!(decode_version(&bytes, "v")?, (rec.clone(), None));
        for seq in [0u64, 250, 251, 65_535, 65_536, u64::MAX] {
            let short = encode_version_at(&rec, seq)?;
            let unhashed = VersionRec {
                object_hash: None,
                ..rec.clone()
            };
            assert_eq!(decode_version(&short, "v")?, (unhashed, Some(seq)));
            assert!(matches!(
                decode::<VersionRec>(&short, "v"),
                Err(Error::Corrupt { .. })
            ));
            if seq == 65_535 {
                assert_eq!(short.len() + 29, bytes.len());
            }
            let mut long = short.clone();
            long.push(0);
            assert!(matches!(
                decode_version(&long, "v"),
                Err(Error::Corrupt { .. })
            ));
            assert!(decode_version(short.get(..3).unwrap_or_default(), "v").is_err());
        }
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert!(matches!(
            decode::<VersionRec>(&bad, "v"),
            Err(Error::Corrupt { .. })
        ));
        bad = bytes.clone();
        bad.push(0);
        assert!(matches!(
            decode::<VersionRec>(&bad, "v"),
            Err(Error::Corrupt { .. })
        ));
        assert_eq!(decode_blob(&encode_blob(b"abc"), "b")?, b"abc");
        let hash_id = "0123456789abcdef".repeat(4);
        for id in [
            hash_id.as_str(),
            "session:x",
            "",
            "0123456789ABCDEF",
            &hash_id[..63],
        ] {
            assert_eq!(id_of_key(&id_key(id), "id")?, id);
        }
        assert_eq!(id_key(&hash_id).len(), 33);
        let digits = "00ff10a9c3".repeat(6) + "7b0e";
        assert_eq!(Ok(id_key(&digits)[1..].to_vec()), hex::decode(&digits));
        assert_eq!(id_key(&"A".repeat(64))[0], ID_TEXT);
        assert!(id_of_key(&[ID_HASH, 1, 2], "id").is_err());
        assert!(id_of_key(&[9], "id").is_err());
        assert!(id_of_key(&[ID_TEXT, 0xff], "id").is_err());
        let text = "fn main() { println!(\"hello\"); }\n".repeat(50);
        let record = encode_blob(text.as_bytes());
        assert_eq!(record[1], METHOD_ZSTD);
        assert!(record.len() < text.len() / 4);
        assert_eq!(decode_blob(&record, "b")?, text.as_bytes());
        let mut broken = record.clone();
        broken.truncate(record.len() / 2);
        assert!(matches!(
            decode_blob(&broken, "b"),
            Err(Error::Corrupt { .. })
        ));
        assert!(decode_blob(&[1], "b").is_err());
        // Records of earlier builds (LZ4) still decode.
        let mut lz4 = vec![RECORD_FORMAT, METHOD_LZ4];
        lz4.extend_from_slice(&lz4_flex::compress_prepend_size(text.as_bytes()));
        assert_eq!(decode_blob(&lz4, "b")?, text.as_bytes());
        // A zstd record whose frame header is garbage is corrupt, not a panic or a huge allocation.
        let mut garbage = vec![RECORD_FORMAT, METHOD_ZSTD];
        garbage.extend_from_slice(&[0xff; 16]);
        assert!(matches!(
            decode_blob(&garbage, "b"),
            Err(Error::Corrupt { .. })
        ));
        Ok(())
    }

    /// The frame written in place after the record's header is the one zstd's one-shot call
    /// makes of the same bytes, says its content size, and the record holds no spare room;
    /// bytes that do not shrink (probed or not) make no record.
    #[test]
    fn blobs_compress_in_place_as_the_one_shot_call_does() -> Result<()> {
        let text = "def f(x):\n    return x * 2  # éè\n".repeat(20_000);
        let random: Vec<u8> = (0..40_000u32)
            .flat_map(|i| crate::hash::sha256(&i.to_le_bytes()).0)
            .collect();
        let mut one_shot = zstd::bulk::Compressor::new(ZSTD_LEVEL)
            .map_err(|e| Error::storage("making a zstd context", e))?;
        for bytes in [
            b"".as_slice(),
            b"abc",
            &text.as_bytes()[..5000],
            text.as_bytes(),
        ] {
            let frame = one_shot
                .compress(bytes)
                .map_err(|e| Error::storage("compressing", e))?;
            let Some(record) = compress_blob(bytes) else {
                assert!(
                    frame.len() + frame.len() / 7 > bytes.len(),
                    "{}",
                    bytes.len()
                );
                continue;
            };
            assert_eq!(record[..2], [RECORD_FORMAT, METHOD_ZSTD]);
            assert_eq!(record[2..], frame[..]);
            assert_eq!(record.capacity(), record.len());
            assert_eq!(blob_header(&record, "b")?.len, Some(bytes.len() as u64));
            assert_eq!(decode_blob(&record, "b")?, bytes);
        }
        // Random bytes: probed past PROBE_AT, compressed whole below it; stored raw either way.
        assert!(random.len() >= PROBE_AT);
        assert_eq!(compress_blob(&random), None);
        assert_eq!(compress_blob(&random[..PROBE_AT / 2]), None);
        assert_eq!(encode_blob(&random)[2..], random[..]);
        Ok(())
    }

    /// A blob under [`PROBE_AT`] that starts as a compressed format is stored raw when its
    /// probe does not shrink, and reads back identical; the same signature in front of bytes
    /// that do shrink still makes a zstd record; a short one is compressed whole as before.
    #[test]
    fn blobs_in_a_compressed_format_are_probed() -> Result<()> {
        let random: Vec<u8> = (0..2_000u32)
            .flat_map(|i| crate::hash::sha256(&i.to_le_bytes()).0)
            .collect();
        let text = "def f(x):\n    return x * 2\n".repeat(2_000);
        for signature in COMPRESSED_SIGNATURES {
            let mut gz = signature.to_vec();
            gz.extend_from_slice(&random);
            assert!(gz.len() > SIGNED_PROBE_AT && gz.len() < PROBE_AT);
            assert!(compressed_format(&gz));
            assert_eq!(compress_blob(&gz), None, "{signature:?}");
            let record = encode_blob(&gz);
            assert_eq!(record[..2], RAW_HEADER);
            assert_eq!(decode_blob(&record, "b")?, gz);

            let mut shrinks = signature.to_vec();
            shrinks.extend_from_slice(text.as_bytes());
            let record = compress_blob(&shrinks).ok_or_else(|| Error::invariant("no record"))?;
            assert_eq!(record[..2], [RECORD_FORMAT, METHOD_ZSTD]);
            assert_eq!(decode_blob(&record, "b")?, shrinks);

            // The probe is what decides: incompressible first 4 KiB keep the blob raw even
            // though the rest would shrink it by far more than an eighth; the same bytes without
            // the signature are compressed whole, and so are they at SIGNED_PROBE_AT bytes.
            let mut head = signature.to_vec();
            head.extend_from_slice(&random[..SIGNED_PROBE]);
            head.extend_from_slice(text.as_bytes());
            assert_eq!(compress_blob(&head), None, "{signature:?}");
            let mut unsigned = head.clone();
            unsigned[0] = b'x';
            assert!(!compressed_format(&unsigned));
            assert!(compress_blob(&unsigned).is_some(), "{signature:?}");
            assert!(
                compress_blob(&head[..SIGNED_PROBE_AT]).is_some(),
                "{signature:?}"
            );
        }
        // Under SIGNED_PROBE_AT no probe: a short file in such a format is compressed whole, as
        // any other (here it shrinks, and is kept compressed).
        let mut short = COMPRESSED_SIGNATURES[0].to_vec();
        short.extend_from_slice(&text.as_bytes()[..SIGNED_PROBE_AT - 8]);
        assert!(compress_blob(&short).is_some());
        // Zip is not a compressed format here (its entries may be stored as is).
        assert!(!compressed_format(b"PK\x03\x04rest"));
        Ok(())
    }

    /// The length a record's first [`SUFFIX_HEADER`] bytes and its own length say is the length
    /// of the bytes it decodes to, for every record kind: raw (empty, short, incompressible),
    /// zstd (short and long), LZ4 (read only), and a suffix record (its whole length).
    #[test]
    fn a_records_header_says_the_length_it_decodes_to() -> Result<()> {
        let text = "fn main() { println!(\"é\"); }\n".repeat(5_000);
        let random: Vec<u8> = (0..20_000u32)
            .flat_map(|i| crate::hash::sha256(&i.to_le_bytes()).0)
            .collect();
        let lz4 = |bytes: &[u8]| {
            let mut record = vec![RECORD_FORMAT, METHOD_LZ4];
            record.extend(lz4_flex::compress_prepend_size(bytes));
            record
        };
        let mut records = Vec::new();
        for bytes in [
            b"".as_slice(),
            b"a",
            b"abc",
            &text.as_bytes()[..300],
            text.as_bytes(),
            &random[..3000],
            &random,
        ] {
            records.push((encode_blob(bytes), bytes.len()));
            records.push((lz4(bytes), bytes.len()));
        }
        for (record, len) in &records {
            let prefix = &record[..record.len().min(SUFFIX_HEADER)];
            assert_eq!(decode_blob(record, "b")?.len(), *len);
            assert_eq!(
                blob_len(prefix, record.len() as u64, "b")?,
                Some(*len as u64),
                "method {}",
                record[1]
            );
        }
        let suffix = encode_suffix_blob(3, 5000, &[7u8; 32], b"more");
        assert_eq!(
            blob_len(&suffix[..SUFFIX_HEADER], suffix.len() as u64, "b")?,
            Some(5000)
        );
        // A header this build does not read is damage, as a read of the record says.
        assert!(matches!(
            blob_len(&[RECORD_FORMAT, 9, 0], 3, "b"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(blob_len(&[], 0, "b"), Err(Error::Corrupt { .. })));
        Ok(())
    }

    /// An LZ4 record whose prepended size overstates its bytes (a damaged header) is damage
    /// when read, not bytes of another length: `ls` gives the size that header states
    /// ([`blob_len`]), so a read (and fsck) must refuse a header the bytes do not match.
    #[test]
    fn an_lz4_record_whose_size_is_not_its_bytes_does_not_decode() -> Result<()> {
        let bytes = b"the same words again, ".repeat(50);
        let mut record = vec![RECORD_FORMAT, METHOD_LZ4];
        record.extend(lz4_flex::compress_prepend_size(&bytes));
        assert_eq!(decode_blob(&record, "b")?, bytes);
        record[2..6].copy_from_slice(&(bytes.len() as u32 + 1000).to_le_bytes());
        assert_eq!(
            blob_len(
                &record[..record.len().min(SUFFIX_HEADER)],
                record.len() as u64,
                "b"
            )?,
            Some(bytes.len() as u64 + 1000)
        );
        let read = decode_blob(&record, "b").map(|b| b.len());
        assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
        Ok(())
    }

    #[test]
    fn suffix_records_round_trip_and_say_their_base() -> Result<()> {
        let base = [7u8; 32];
        for suffix in [b"".as_slice(), b"user: hi", "ab".repeat(3000).as_bytes()] {
            let record = encode_suffix_blob(5, 100 + suffix.len() as u64, &base, suffix);
            let header = blob_header(&record[..SUFFIX_HEADER], "b")?;
            assert_eq!(
                header,
                BlobHeader {
                    seq: 5,
                    base: Some(base),
                    len: Some(100 + suffix.len() as u64)
                }
            );
            assert_eq!(
                decode_blob_record(&record, "b")?,
                BlobRecord::Suffix {
                    seq: 5,
                    len: 100 + suffix.len() as u64,
                    base,
                    suffix: suffix.to_vec()
                }
            );
            assert!(decode_blob(&record, "b").is_err());
            assert!(blob_header(&record[..SUFFIX_HEADER - 1], "b").is_err());
        }
        let text = "fn main() {}\n".repeat(100);
        let whole = encode_blob(text.as_bytes());
        assert_eq!(blob_header(&whole, "b")?.len, Some(text.len() as u64));
        assert_eq!(blob_header(&whole, "b")?.base, None);
        assert_eq!(
            decode_blob_record(&whole, "b")?,
            BlobRecord::Whole(text.into_bytes())
        );
        Ok(())
    }
}
