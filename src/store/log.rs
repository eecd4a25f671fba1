//! The transaction log: op bodies as canonical JSON, their BLAKE3 digests, and the chain.
//!
//! Each op's digest is BLAKE3 of its canonical JSON (RFC 8785, times as RFC 3339 strings with
//! microseconds). A record header is `{tx_id, tx_time, origin, ops: [digest hex…]}` and
//! `chain = BLAKE3(previous chain ‖ canonical JSON of the header)` from 32 zero bytes. None of it
//! depends on the storage codec, and eviction removes bodies but keeps digests, so the chain
//! still verifies.

use std::fmt;

use serde_json::{Map, Value, json};

use super::codec::{OpRec, TxHeaderRec};
use super::time::{Timestamp, TxId};
use crate::error::Result;
use crate::hash::{blake3, blake3_concat, canonical_json};

/// Who wrote a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The indexer (a scan or an explicit index command).
    Indexer,
    /// The indexer, writing one of the several transactions of an index run: `None` for the
    /// run's first transaction (its own id becomes the run's), else the run's first tx id. The
    /// log spells it `indexer` and records the run in the header.
    IndexRun(Option<TxId>),
    /// The watcher daemon.
    Watcher,
    /// A session commit of an agent runtime.
    Session,
    /// A command line invocation.
    Cli,
    /// Anything else, named freely.
    Other(String),
}

impl Origin {
    /// The origin as the log spells it.
    pub fn as_str(&self) -> &str {
        match self {
            Origin::Indexer | Origin::IndexRun(_) => "indexer",
            Origin::Watcher => "watcher",
            Origin::Session => "session",
            Origin::Cli => "cli",
            Origin::Other(name) => name,
        }
    }

    /// The index run a transaction numbered `tx` joins with this origin: its own id for a run's
    /// first transaction, the run's first id for the others, `None` outside runs.
    pub fn run_of(&self, tx: TxId) -> Option<TxId> {
        match self {
            Origin::IndexRun(None) => Some(tx),
            Origin::IndexRun(Some(first)) => Some(*first),
            _ => None,
        }
    }

    /// The origin named `name` (a free-form one when it is none of the known names).
    pub fn from_name(name: &str) -> Self {
        match name {
            "indexer" => Origin::Indexer,
            "watcher" => Origin::Watcher,
            "session" => Origin::Session,
            "cli" => Origin::Cli,
            other => Origin::Other(other.to_string()),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One op of a logged transaction: its digest always, its body unless it was evicted.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedOp {
    /// BLAKE3 of the op's canonical JSON.
    pub digest: [u8; 32],
    /// The op as the JSON that was hashed; `None` when the entity was evicted since.
    pub body: Option<Value>,
    /// The transaction that evicted the body, when it is gone and the store recorded which
    /// (a redb store made before evictions were recorded does not know).
    pub evicted_by: Option<TxId>,
}

impl LoggedOp {
    /// The op's kind (`put`, `delete`, `evict`, `match`), when the body is kept.
    pub fn kind(&self) -> Option<&str> {
        self.body.as_ref()?.get("op")?.as_str()
    }

    /// The op's entity id, when the body is kept.
    pub fn entity(&self) -> Option<&str> {
        self.body.as_ref()?.get("entity")?.as_str()
    }
}

/// One transaction as the log holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct TxRecord {
    /// The transaction's number.
    pub tx_id: TxId,
    /// When the store committed it.
    pub tx_time: Timestamp,
    /// Who wrote it.
    pub origin: Origin,
    /// The index run it belongs to (the run's first tx id), `None` outside runs.
    pub run: Option<TxId>,
    /// Its ops in order.
    pub ops: Vec<LoggedOp>,
    /// The chain value after this record.
    pub chain: [u8; 32],
}

impl TxRecord {
    /// The record as JSON: the header fields (`run` only in a run), `chain` in hex, and
    /// `ops` as {digest, body}.
    pub fn to_json(&self) -> Value {
        let mut record = json!({
            "tx_id": self.tx_id.0,
            "tx_time": self.tx_time,
            "origin": self.origin.as_str(),
            "chain": hex::encode(self.chain),
            "ops": self.ops.iter().map(|op| json!({
                "digest": hex::encode(op.digest),
                "body": op.body,
            })).collect::<Vec<_>>(),
        });
        if let (Some(run), Value::Object(map)) = (self.run, &mut record) {
            map.insert("run".into(), json!(run.0));
        }
        record
    }
}

fn time(micros: i64) -> Value {
    json!(Timestamp::saturating_from_micros(micros).to_string())
}

/// The JSON of an op body: what its digest hashes.
pub(crate) fn op_json(op: &OpRec) -> Value {
    let mut map = Map::new();
    match op {
        OpRec::Write(w) => {
            let kind = if w.object_hash.is_some() {
                "put"
            } else {
                "delete"
            };
            map.insert("op".into(), json!(kind));
            map.insert("entity".into(), json!(w.entity));
            map.insert("valid_from".into(), time(w.valid_from));
            map.insert("valid_to".into(), w.valid_to.map_or(Value::Null, time));
            if let Some(hash) = &w.object_hash {
                map.insert("object_hash".into(), json!(hex::encode(hash)));
            }
            if let Some(first) = &w.first {
                map.insert("type".into(), json!(first.object_type));
                if let Some((filesystem_id, path)) = &first.source {
                    map.insert(
                        "source".into(),
                        json!({"type": "filesystem", "filesystemId": filesystem_id, "path": path}),
                    );
                }
            }
            if let Some(size) = w.size {
                map.insert("size".into(), json!(size));
            }
            if let Some(spelling) = &w.spelling {
                map.insert("spelling".into(), json!(spelling));
            }
            if let Some(reason) = w.content_omitted {
                let reason = crate::object::ContentOmitted::from(reason);
                map.insert("content_omitted".into(), json!(reason.as_str()));
            }
        }
        OpRec::Evict { entity } => {
            map.insert("op".into(), json!("evict"));
            map.insert("entity".into(), json!(entity));
        }
        OpRec::Match { entity, expected } => {
            map.insert("op".into(), json!("match"));
            map.insert("entity".into(), json!(entity));
            map.insert("expected".into(), json!(expected.map(hex::encode)));
        }
    }
    Value::Object(map)
}

/// BLAKE3 of the canonical JSON of an op body.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when a number is beyond ±2^53 (a size over 8 PiB).
pub(crate) fn op_digest(op: &OpRec) -> Result<[u8; 32]> {
    Ok(blake3(op_canonical_json(op)?.as_bytes()))
}

/// The canonical JSON (RFC 8785) of an op body, written directly in JCS key order: the same
/// text as `canonical_json(&op_json(op))` (proptested), without building a JSON value and
/// sorting it (a commit of 100 tool calls spent about 1 ms on that).
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the size is beyond 2^53 (a file over 8 PiB).
pub(crate) fn op_canonical_json(op: &OpRec) -> Result<String> {
    use crate::hash::push_jcs_string as push;
    let time = |out: &mut String, micros: i64| {
        push(out, &Timestamp::saturating_from_micros(micros).to_string());
    };
    let mut out = String::with_capacity(320);
    match op {
        OpRec::Write(w) => {
            // Keys in JCS order: content_omitted, entity, object_hash, op, size, source,
            // spelling, type, valid_from, valid_to.
            out.push('{');
            if let Some(reason) = w.content_omitted {
                out.push_str("\"content_omitted\":");
                push(
                    &mut out,
                    crate::object::ContentOmitted::from(reason).as_str(),
                );
                out.push(',');
            }
            out.push_str("\"entity\":");
            push(&mut out, &w.entity);
            if let Some(hash) = &w.object_hash {
                out.push_str(",\"object_hash\":\"");
                crate::hash::push_hex(&mut out, hash);
                out.push('"');
            }
            out.push_str(if w.object_hash.is_some() {
                ",\"op\":\"put\""
            } else {
                ",\"op\":\"delete\""
            });
            if let Some(size) = w.size {
                if size > crate::hash::MAX_SAFE_INTEGER {
                    return Err(crate::Error::invalid_input(format!(
                        "size {size} is beyond 2^53 and cannot be canonicalised"
                    )));
                }
                out.push_str(",\"size\":");
                out.push_str(&size.to_string());
            }
            if let Some((filesystem_id, path)) = w.first.as_ref().and_then(|f| f.source.as_ref()) {
                out.push_str(",\"source\":{\"filesystemId\":");
                push(&mut out, filesystem_id);
                out.push_str(",\"path\":");
                push(&mut out, path);
                out.push_str(",\"type\":\"filesystem\"}");
            }
            if let Some(spelling) = &w.spelling {
                out.push_str(",\"spelling\":");
                push(&mut out, spelling);
            }
            if let Some(first) = &w.first {
                out.push_str(",\"type\":");
                push(&mut out, &first.object_type);
            }
            out.push_str(",\"valid_from\":");
            time(&mut out, w.valid_from);
            out.push_str(",\"valid_to\":");
            match w.valid_to {
                Some(to) => time(&mut out, to),
                None => out.push_str("null"),
            }
            out.push('}');
        }
        OpRec::Evict { entity } => {
            out.push_str("{\"entity\":");
            push(&mut out, entity);
            out.push_str(",\"op\":\"evict\"}");
        }
        OpRec::Match { entity, expected } => {
            out.push_str("{\"entity\":");
            push(&mut out, entity);
            match expected {
                Some(hash) => {
                    out.push_str(",\"expected\":\"");
                    crate::hash::push_hex(&mut out, hash);
                    out.push('"');
                }
                None => out.push_str(",\"expected\":null"),
            }
            out.push_str(",\"op\":\"match\"}");
        }
    }
    Ok(out)
}

/// The header JSON that the chain hashes: `run` is there only for a transaction of an index
/// run, so every header written before runs existed hashes as it did.
pub(crate) fn header_json(tx_id: u64, header: &TxHeaderRec) -> Value {
    let mut json = json!({
        "tx_id": tx_id,
        "tx_time": time(header.tx_time),
        "origin": header.origin,
        "ops": header.digests.iter().map(hex::encode).collect::<Vec<_>>(),
    });
    if let (Some(run), Value::Object(map)) = (header.run, &mut json) {
        map.insert("run".into(), json!(run));
    }
    json
}

/// The chain after `header` (of transaction `tx_id`): BLAKE3(previous ‖ canonical JSON of the
/// header). Its own `chain` field is not read.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the tx id or the run is beyond 2^53.
pub(crate) fn next_chain(
    previous: &[u8; 32],
    tx_id: u64,
    header: &TxHeaderRec,
) -> Result<[u8; 32]> {
    let header = canonical_json(&header_json(tx_id, header))?;
    Ok(blake3_concat(&[previous, header.as_bytes()]))
}

/// The sealed header of transaction `tx_id` (its chain value computed from `previous`): what
/// every backend stores in its log.
///
/// # Errors
/// [`crate::Error::InvalidInput`] when the tx id is beyond 2^53.
pub(crate) fn seal_header(
    previous: &[u8; 32],
    tx_id: u64,
    tx_time: i64,
    origin: &Origin,
    digests: Vec<[u8; 32]>,
) -> Result<TxHeaderRec> {
    let mut header = TxHeaderRec {
        tx_time,
        origin: origin.as_str().to_string(),
        digests,
        run: origin.run_of(TxId(tx_id)).map(|run| run.0),
        chain: [0; 32],
        filesystems: Vec::new(),
    };
    header.chain = next_chain(previous, tx_id, &header)?;
    Ok(header)
}

#[cfg(test)]
mod tests {
    use crate::hash::Hash;
    use crate::object::{FilesystemSource, Object};
    use crate::store::{Op, Put, Store, Timestamp, ValidFrom};

    use super::*;

    fn at(seconds: i64) -> Result<Timestamp> {
        Timestamp::from_micros(1_700_000_000_000_000 + seconds * 1_000_000)
    }

    /// The digests of these ops were recorded before the storage codec of op bodies changed:
    /// the log hashes canonical JSON, so no codec change may move them.
    #[test]
    fn op_digests_do_not_depend_on_the_storage_codec() -> Result<()> {
        let store = Store::in_memory()?;
        let source = |path: &str| FilesystemSource {
            filesystem_id: "ab".repeat(32),
            path: path.into(),
        };
        let text = Object::file_text(source("/a.txt"), "hello".into())?;
        let bytes = vec![0xff, 0, 1];
        let binary_object = Object::file_bytes(source("/b.bin"), bytes.clone())?;
        let mut binary = Put::new(binary_object.clone());
        binary.bytes = Some(bytes);
        binary.valid_from = ValidFrom::At(at(1)?);
        binary.valid_to = Some(at(5)?);
        binary.size = Some(3);
        binary.spelling = Some("/B.bin".into());
        let prompt = Object::system_prompt("p", "be brief".into())?;
        store.transact(
            vec![
                Op::put_at(text.clone(), at(0)?, None),
                Op::Put(Box::new(binary)),
                Op::put_at(prompt.clone(), at(2)?, None),
            ],
            Origin::Cli,
        )?;
        store.transact(
            vec![
                Op::Delete {
                    entity: text.id().to_string(),
                    valid_from: Some(at(3)?),
                    valid_to: Some(at(4)?),
                },
                Op::Match {
                    entity: prompt.id().to_string(),
                    expected: Some(*prompt.object_hash()),
                },
                Op::Match {
                    entity: "nobody".into(),
                    expected: None::<Hash>,
                },
            ],
            Origin::Cli,
        )?;
        store.evict(prompt.id(), Origin::Cli)?;
        let before_evict = store.log(None, 10)?;
        // A ranged put writes a restoring row too; evicting finds its body through either.
        store.evict(binary_object.id(), Origin::Cli)?;
        let log = store.log(None, 10)?;
        let digests: Vec<String> = log
            .iter()
            .flat_map(|tx| tx.ops.iter().map(|op| hex::encode(op.digest)))
            .collect();
        let bodies: Vec<Option<Value>> = log
            .iter()
            .flat_map(|tx| tx.ops.iter().map(|op| op.body.clone()))
            .collect();
        for (body, digest) in bodies.iter().zip(&digests) {
            if let Some(body) = body {
                assert_eq!(
                    hex::encode(blake3(canonical_json(body)?.as_bytes())),
                    *digest
                );
            }
        }
        let entity = |i: usize| bodies[i].as_ref().and_then(|b| b.get("entity")).cloned();
        assert_eq!(entity(0), Some(Value::from(text.id())));
        assert_eq!(entity(3), Some(Value::from(text.id())));
        assert!(bodies[1].is_none(), "evicted bodies are gone");
        assert!(
            bodies[2].is_none() && bodies[4].is_none(),
            "the match op's too"
        );
        assert!(bodies[0].is_some() && bodies[3].is_some() && bodies[5].is_some());
        assert_eq!(digests[..7], GOLDEN);
        assert!(before_evict[0].ops[1].body.is_some());
        assert!(store.fsck()?.is_empty());
        store.fsck_rebuild()?;
        assert!(store.fsck()?.is_empty());
        assert_eq!(store.log(None, 10)?, log);
        Ok(())
    }

    #[test]
    fn a_run_is_hashed_into_the_chain_and_its_absence_hashes_as_before() -> Result<()> {
        let digests = vec![[4u8; 32]];
        let plain = seal_header(
            &[0; 32],
            5,
            1_700_000_000_000_000,
            &Origin::Indexer,
            digests.clone(),
        )?;
        assert_eq!(plain.run, None);
        // The chain rule before runs: the header JSON has no `run` key.
        let before = canonical_json(&json!({
            "tx_id": 5,
            "tx_time": "2023-11-14T22:13:20.000000Z",
            "origin": "indexer",
            "ops": [hex::encode([4u8; 32])],
        }))?;
        assert_eq!(plain.chain, blake3_concat(&[&[0; 32], before.as_bytes()]));
        let first = seal_header(
            &[0; 32],
            5,
            1_700_000_000_000_000,
            &Origin::IndexRun(None),
            digests.clone(),
        )?;
        assert_eq!(first.run, Some(5), "a run's first transaction names itself");
        assert_ne!(
            first.chain, plain.chain,
            "the run is in what the chain hashes"
        );
        let next = seal_header(
            &first.chain,
            6,
            1_700_000_000_000_001,
            &Origin::IndexRun(Some(TxId(5))),
            digests,
        )?;
        assert_eq!(next.run, Some(5));
        assert_eq!(next_chain(&first.chain, 6, &next)?, next.chain);
        Ok(())
    }

    const GOLDEN: [&str; 7] = [
        "bc605360b813676a42b8ffd25096343e28ba9f6602bad1572933cfacab6b8fd7",
        "31d560d241be02d932e51265364f9cf6d53e08220319862e53113062ab143a96",
        "a2b03bfefa13cab9bab961a08f57a47e92cf000becb551b9a39e1ffe50523b27",
        "95186330bffcaf37b8bf577debc350b7b741549c2285541dd77dcee58a5b12b0",
        "d648016e1ba8bc3bd12e21ff8ba78d602ceebb56255828bc92f13ce91e2728ff",
        "ef24401f9c4865910f4da27c55f92921cd5ddc1e9c05b7c3163862ee9e2875c5",
        "6451cb97e028058ab7c40a736d5eb3af1a3115a3c0777d010132a48f2395a3c0",
    ];

    fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex("[a-z/\"\\\\\u{0}-\u{1f}\u{7f}é\u{2028}\u{1F600} .:]{0,12}")
            .unwrap_or_else(|_| unreachable!("a valid regex"))
    }

    proptest::proptest! {
        /// The directly written op JSON is exactly the JCS text of the op's JSON value.
        #[test]
        fn op_canonical_json_is_jcs_of_op_json(
            kind in 0u8..3,
            entity in any_text(),
            valid_from in 0i64..253_402_300_799_000_000,
            valid_to in proptest::option::of(0i64..253_402_300_799_000_000),
            object_hash in proptest::option::of(proptest::array::uniform32(0u8..)),
            first in proptest::option::of((0usize..6, proptest::option::of((any_text(), any_text())))),
            size in proptest::option::of(proptest::prop_oneof![0u64..1_000_000, (1u64 << 53) - 2..(1u64 << 53) + 2]),
            spelling in proptest::option::of(any_text()),
            omitted in proptest::option::of(0usize..3),
        ) {
            use crate::object::{ContentOmitted, ObjectType};
            use crate::store::codec::{FirstRec, IdStr, TypeName};
            let types = [ObjectType::File, ObjectType::Toolcall, ObjectType::Chat, ObjectType::SystemPrompt, ObjectType::Session, ObjectType::SessionConfig];
            let reasons = [ContentOmitted::Binary, ContentOmitted::TooLarge, ContentOmitted::Denied];
            let op = match kind {
                0 => OpRec::Write(crate::store::codec::WriteRec {
                    entity: IdStr(entity),
                    valid_from,
                    valid_to,
                    object_hash,
                    first: first.map(|(t, source)| FirstRec {
                        object_type: TypeName::from(types[t]),
                        source: source.map(|(fs, path)| (IdStr(fs), path)),
                    }),
                    size,
                    spelling,
                    content_omitted: omitted.map(|r| reasons[r].into()),
                }),
                1 => OpRec::Evict { entity: IdStr(entity) },
                _ => OpRec::Match { entity: IdStr(entity), expected: object_hash },
            };
            let slow = canonical_json(&op_json(&op));
            let fast = op_canonical_json(&op);
            match (slow, fast) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(_), Err(_)) => {}
                (a, b) => proptest::prop_assert!(false, "{:?} against {:?}", a, b),
            }
        }
    }
}
