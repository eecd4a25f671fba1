//! Copying a store into a new store of either backend by replaying its log (`strata migrate`).
//!
//! Each log record of the original is read back ([`ReplayRecord::read`]: its header, its op
//! bodies parsed from the JSON the log shows and checked against their digests, the object
//! and kept bytes each put names, the transaction that evicted each body that is gone) and
//! appended verbatim to the copy ([`super::Backend::append_log`]): the same tx ids, times,
//! origins, index runs, digests and chain values, so the copy's chain head is the original's.
//! Engine-neutral: both backends append and both are read through [`super::Backend`].

use serde_json::Value;

use super::codec::{FirstRec, IdStr, Omitted, OpRec, TxHeaderRec, TypeName, WriteRec};
use super::log::{self, TxRecord};
use super::{Backend, Store, Timestamp, TxId};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::object::{ContentOmitted, Object};

/// Records read from the original per [`Backend::log`] call.
const READ_BATCH: usize = 64;
/// Records appended per commit of the copy, at most.
const APPEND_RECORDS: usize = 256;
/// Bytes of objects and kept bytes per commit of the copy, about (a record is never split).
const APPEND_BYTES: u64 = 32 << 20;

/// One log record of another store with what its puts need, ready for
/// [`Backend::append_log`].
#[derive(Clone, Debug)]
pub struct ReplayRecord {
    /// The transaction's number.
    pub(crate) tx: u64,
    /// Its header as the original holds it (time, origin, run, digests, chain).
    pub(crate) header: TxHeaderRec,
    /// Its ops, in order.
    pub(crate) ops: Vec<ReplayOp>,
}

/// One op of a [`ReplayRecord`].
#[derive(Clone, Debug)]
pub(crate) enum ReplayOp {
    /// A body the log keeps; a put carries the object it names and the raw bytes kept for it.
    Body {
        /// The op as the original applied it (valid times resolved).
        op: Box<OpRec>,
        /// What a put names (`None` for deletes, evicts and matches).
        put: Option<Box<PutCopy>>,
    },
    /// A body an eviction removed: only its digest stays, and which transaction evicted it.
    Evicted {
        /// The evicting transaction.
        by: u64,
    },
}

/// What a put of a [`ReplayRecord`] stores besides its op body.
#[derive(Clone, Debug)]
pub(crate) struct PutCopy {
    /// The object the put names.
    pub(crate) object: Object,
    /// The raw bytes kept for a file whose content is null.
    pub(crate) kept: Option<Vec<u8>>,
}

impl ReplayRecord {
    /// Reads `record` (from `from`'s own [`Backend::log`]) back into what an append needs: each
    /// body parsed and checked against its digest, each put's object read as of the record's
    /// transaction (with the raw bytes kept for it).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a body does not read back to its digest or a put's object is
    /// missing; [`Error::InvalidInput`] for a body evicted before the store recorded evictions
    /// (it cannot be copied op for op).
    pub fn read(from: &dyn Backend, record: &TxRecord) -> Result<Self> {
        let tx = record.tx_id.0;
        let mut ops = Vec::with_capacity(record.ops.len());
        for (n, logged) in record.ops.iter().enumerate() {
            let op = match (&logged.body, logged.evicted_by) {
                (Some(body), _) => {
                    let op = op_from_json(body)
                        .map_err(|e| Error::corrupt(format!("op {n} of tx {tx}: {e}")))?;
                    if log::op_digest(&op)? != logged.digest {
                        return Err(Error::corrupt(format!(
                            "op {n} of tx {tx} does not read back to its digest; run `strata \
                             fsck` on the original"
                        )));
                    }
                    let put = put_object(from, tx, &op)?.map(Box::new);
                    ReplayOp::Body {
                        op: Box::new(op),
                        put,
                    }
                }
                (None, Some(by)) => ReplayOp::Evicted { by: by.0 },
                (None, None) => {
                    return Err(Error::invalid_input(format!(
                        "op {n} of tx {tx} was evicted before the store recorded evictions, so \
                         the store cannot be copied op for op; `strata backup DIR` copies it as \
                         it is"
                    )));
                }
            };
            ops.push(op);
        }
        Ok(ReplayRecord {
            tx,
            header: TxHeaderRec {
                tx_time: record.tx_time.as_micros(),
                origin: record.origin.as_str().to_string(),
                digests: record.ops.iter().map(|op| op.digest).collect(),
                run: record.run.map(|run| run.0),
                chain: record.chain,
                filesystems: Vec::new(),
            },
            ops,
        })
    }

    /// Bytes of content this record carries (objects and kept bytes), about.
    fn weight(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                ReplayOp::Body { put, .. } => {
                    put.as_ref().map_or(0, |put| {
                        put.object.content().map_or(0, |c| c.len() as u64)
                            + put.kept.as_ref().map_or(0, |k| k.len() as u64)
                    }) + 256
                }
                ReplayOp::Evicted { .. } => 8,
            })
            .sum()
    }

    /// Checks that this record is the next one of a log whose head is transaction `head` with
    /// chain value `chain` and time `time` (`None`: the log is empty).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when its tx id, chain value or time does not follow the head, or
    /// it has not one op per digest.
    pub(crate) fn check_follows(
        &self,
        head: u64,
        chain: &[u8; 32],
        time: Option<i64>,
    ) -> Result<()> {
        let tx = self.tx;
        if tx != head + 1 {
            return Err(Error::invalid_input(format!(
                "tx {tx} of the copied log does not follow this store's head (tx {head}); a \
                 copy goes into an empty store"
            )));
        }
        if self.ops.len() != self.header.digests.len() {
            return Err(Error::invalid_input(format!(
                "tx {tx} of the copied log has {} ops for {} digests",
                self.ops.len(),
                self.header.digests.len()
            )));
        }
        if time.is_some_and(|time| self.header.tx_time <= time) {
            return Err(Error::invalid_input(format!(
                "tx {tx} of the copied log is not later than the one before it"
            )));
        }
        if log::next_chain(chain, tx, &self.header)? != self.header.chain {
            return Err(Error::invalid_input(format!(
                "tx {tx} of the copied log does not chain from this store's head; a copy goes \
                 into an empty store"
            )));
        }
        Ok(())
    }
}

/// The object a put op names, read from `from` as of its transaction `tx`, and the raw bytes
/// kept for it; `None` for other ops.
fn put_object(from: &dyn Backend, tx: u64, op: &OpRec) -> Result<Option<PutCopy>> {
    let OpRec::Write(write) = op else {
        return Ok(None);
    };
    let Some(hash) = write.object_hash else {
        return Ok(None);
    };
    let at = Timestamp::saturating_from_micros(write.valid_from);
    let object = from
        .as_of(&write.entity, Some(at), Some(TxId(tx)))?
        .and_then(|version| version.object)
        .filter(|object| object.object_hash().0 == hash)
        .ok_or_else(|| {
            Error::corrupt(format!(
                "the object {} that tx {tx} put for {} is not in the store; run `strata fsck` \
                 on the original",
                hex::encode(hash),
                &*write.entity
            ))
        })?;
    let kept = match (object.content(), object.file_hash()) {
        (None, Some(file_hash)) => from.content(file_hash)?,
        _ => None,
    };
    Ok(Some(PutCopy { object, kept }))
}

/// The string field `key` of an op body.
fn text<'a>(body: &'a Value, key: &str) -> Result<&'a str> {
    body.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_input(format!("its body has no string {key:?}")))
}

/// The time field `key` of an op body, in µs (`None` when null and `nullable`).
fn micros(body: &Value, key: &str) -> Result<Option<i64>> {
    match body.get(key) {
        Some(Value::Null) => Ok(None),
        Some(Value::String(time)) => Ok(Some(time.parse::<Timestamp>()?.as_micros())),
        _ => Err(Error::invalid_input(format!(
            "its body has no time {key:?}"
        ))),
    }
}

/// A 32-byte hash written in hex.
fn hash_of(hex_text: &str) -> Result<[u8; 32]> {
    Ok(hex_text.parse::<Hash>()?.0)
}

/// The op body the log shows as `body` (`log::op_json`'s JSON) as the store applied it.
///
/// # Errors
/// [`Error::InvalidInput`] naming the field that is missing or malformed.
pub(crate) fn op_from_json(body: &Value) -> Result<OpRec> {
    let entity = IdStr(text(body, "entity")?.to_string());
    match text(body, "op")? {
        kind @ ("put" | "delete") => {
            let object_hash = match kind {
                "put" => Some(hash_of(text(body, "object_hash")?)?),
                _ => None,
            };
            let first = match body.get("type").and_then(Value::as_str) {
                Some(object_type) => Some(FirstRec {
                    object_type: TypeName(object_type.to_string()),
                    source: match body.get("source") {
                        Some(source) => Some((
                            IdStr(text(source, "filesystemId")?.to_string()),
                            text(source, "path")?.to_string(),
                        )),
                        None => None,
                    },
                }),
                None => None,
            };
            let content_omitted = match body.get("content_omitted").and_then(Value::as_str) {
                Some(reason) => Some(Omitted::from(match reason {
                    "binary" => ContentOmitted::Binary,
                    "too_large" => ContentOmitted::TooLarge,
                    "denied" => ContentOmitted::Denied,
                    other => {
                        return Err(Error::invalid_input(format!(
                            "its content_omitted {other:?} is none of binary, too_large, denied"
                        )));
                    }
                })),
                None => None,
            };
            Ok(OpRec::Write(WriteRec {
                entity,
                valid_from: micros(body, "valid_from")?
                    .ok_or_else(|| Error::invalid_input("its valid_from is null"))?,
                valid_to: micros(body, "valid_to")?,
                object_hash,
                first,
                size: body.get("size").and_then(Value::as_u64),
                spelling: body
                    .get("spelling")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                content_omitted,
            }))
        }
        "evict" => Ok(OpRec::Evict { entity }),
        "match" => Ok(OpRec::Match {
            entity,
            expected: match body.get("expected") {
                Some(Value::String(hash)) => Some(hash_of(hash)?),
                _ => None,
            },
        }),
        other => Err(Error::invalid_input(format!("unknown op {other:?}"))),
    }
}

/// What [`migrate`] copied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrateReport {
    /// The copy's chain head: the original's when the copy began (`None`: it was empty).
    pub head: Option<(TxId, [u8; 32])>,
    /// Log records copied.
    pub transactions: u64,
    /// Op bodies copied.
    pub ops: u64,
    /// Evicted bodies (digests only) copied.
    pub evicted_ops: u64,
    /// Stat cache entries copied (so the copy's next index reads no unchanged file); none
    /// when the original committed while it was copied.
    pub stat_entries: u64,
}

/// Copies the log of `from`, up to its head when this begins, into `to`, a store with an empty
/// log (of either backend), record by record: documents and contents with the puts that name
/// them. Commits made to `from` meanwhile are not copied.
///
/// # Errors
/// [`Error::InvalidInput`] when `to` holds transactions; as [`ReplayRecord::read`] and
/// [`Backend::append_log`]; [`Error::Corrupt`] when the copy's head is not the original's.
pub fn migrate(from: &Store, to: &Store) -> Result<MigrateReport> {
    if let Some((tx, _)) = to.chain_head()? {
        return Err(Error::invalid_input(format!(
            "the target store is not empty (its log ends at tx {}); give a new one",
            tx.0
        )));
    }
    let head = from.chain_head()?;
    let mut report = MigrateReport {
        head,
        ..MigrateReport::default()
    };
    let Some((last, _)) = head else {
        return Ok(report);
    };
    let mut since: Option<TxId> = None;
    let (mut batch, mut weight) = (Vec::new(), 0u64);
    while since.map_or(0, |t| t.0) < last.0 {
        let records = from.log(since, READ_BATCH)?;
        if records.is_empty() {
            return Err(Error::corrupt(format!(
                "the log ends before its head, tx {}; run `strata fsck` on the original",
                last.0
            )));
        }
        for record in records.iter().take_while(|r| r.tx_id <= last) {
            let replay = ReplayRecord::read(&**from, record)?;
            for op in &replay.ops {
                match op {
                    ReplayOp::Body { .. } => report.ops += 1,
                    ReplayOp::Evicted { .. } => report.evicted_ops += 1,
                }
            }
            weight += replay.weight();
            batch.push(replay);
            report.transactions += 1;
            if batch.len() >= APPEND_RECORDS || weight >= APPEND_BYTES {
                to.append_log(&std::mem::take(&mut batch))?;
                weight = 0;
            }
            since = Some(record.tx_id);
        }
    }
    if !batch.is_empty() {
        to.append_log(&batch)?;
    }
    let copied = to.chain_head()?;
    if copied != head {
        return Err(Error::corrupt(format!(
            "the copy's chain head {} is not the original's {}",
            show(copied),
            show(head)
        )));
    }
    report.stat_entries = copy_stat_cache(from, to, head)?;
    Ok(report)
}

/// Stat cache entries written per commit of the copy.
const STAT_BATCH: usize = 4096;

/// Copies the indexer's stat cache of every filesystem the original's live files are on into
/// `to`, whose log ends at `head`: how many entries. An entry is written in the commit of the
/// version it vouches for (or later, for a file found unchanged), so when the original's head
/// is still `head` after the cache was read, every entry read vouches for a version the copy
/// holds; when it moved, nothing is copied (the copy's next index reads every file once).
fn copy_stat_cache(from: &Store, to: &Store, head: Option<(TxId, [u8; 32])>) -> Result<u64> {
    let filesystems: std::collections::BTreeSet<String> = from
        .live_entities()?
        .into_iter()
        .filter_map(|entity| entity.source)
        .map(|source| source.as_filesystem().filesystem_id.clone())
        .collect();
    let mut caches = Vec::new();
    for filesystem_id in filesystems {
        let mut entries: Vec<(String, super::StatEntry)> =
            from.stat_cache(&filesystem_id, "/")?.into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        caches.push((filesystem_id, entries));
    }
    if from.chain_head()? != head {
        return Ok(0);
    }
    let mut copied = 0;
    for (filesystem_id, entries) in caches {
        for batch in entries.chunks(STAT_BATCH) {
            let update = super::StatUpdate {
                filesystem_id: filesystem_id.clone(),
                puts: batch.to_vec(),
                removes: Vec::new(),
            };
            to.transact_with_stat(Vec::new(), super::Origin::Indexer, update)?;
            copied += batch.len() as u64;
        }
    }
    Ok(copied)
}

fn show(head: Option<(TxId, [u8; 32])>) -> String {
    head.map_or("(empty)".to_string(), |(tx, chain)| {
        format!("tx {} {}", tx.0, hex::encode(chain))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::FilesystemSource;
    use crate::store::{Op, Origin, Put, ValidFrom};

    /// Every kind of op body reads back from its JSON to the same op (so the same digest).
    #[test]
    fn op_bodies_read_back_from_their_json() -> Result<()> {
        let store = Store::in_memory()?;
        let source = |path: &str| FilesystemSource {
            filesystem_id: "ab".repeat(32),
            path: path.into(),
        };
        let at = |s: i64| Timestamp::from_micros(1_700_000_000_000_000 + s * 1_000_000);
        let text = Object::file_text(source("/a.txt"), "hello".into())?;
        let bytes = vec![0xff, 0, 1];
        let mut binary = Put::new(Object::file_bytes(source("/b.bin"), bytes.clone())?);
        binary.bytes = Some(bytes);
        binary.valid_from = ValidFrom::At(at(1)?);
        binary.valid_to = Some(at(5)?);
        binary.size = Some(3);
        binary.spelling = Some("/B.bin".into());
        let prompt = Object::system_prompt("p", "be brief".into())?;
        store.transact(
            vec![
                Op::put(text.clone()),
                Op::Put(Box::new(binary)),
                Op::put(prompt.clone()),
            ],
            Origin::IndexRun(None),
        )?;
        store.transact(
            vec![
                Op::Delete {
                    entity: text.id().to_string(),
                    valid_from: Some(at(3)?),
                    valid_to: None,
                },
                Op::Match {
                    entity: prompt.id().to_string(),
                    expected: Some(*prompt.object_hash()),
                },
                Op::Match {
                    entity: "nobody".into(),
                    expected: None,
                },
            ],
            Origin::Cli,
        )?;
        store.evict(prompt.id(), Origin::Cli)?;
        let log = store.log(None, 10)?;
        let mut bodies = 0;
        for record in &log {
            let replay = ReplayRecord::read(&*store, record)?;
            for (op, logged) in replay.ops.iter().zip(&record.ops) {
                if let ReplayOp::Body { op, .. } = op {
                    assert_eq!(log::op_digest(op)?, logged.digest);
                    bodies += 1;
                }
            }
        }
        assert_eq!(bodies, 5, "two bodies went with the prompt");
        assert!(op_from_json(&serde_json::json!({"op": "push", "entity": "x"})).is_err());
        assert!(op_from_json(&serde_json::json!({"op": "put", "entity": "x"})).is_err());
        Ok(())
    }
}
