//! The oracle: random sequences of put / put-with-end / delete / delete-with-end / correction /
//! evict against a plain `BTreeMap` model; every `as_of` (each valid time × each tx) and every
//! `history` must agree, before and after `fsck_rebuild`, and `fsck` must stay clean. Two of
//! the entities are files named by their sources (store format 8's short keys, header lists
//! and version rows by document number), which share a document when their contents agree.
//!
//! A contract suite (see `backends`): it runs on every backend. `STRATA_ORACLE_CASES` sets the
//! number of random histories (default 64, a few seconds; 2000 for a thorough run).

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use strata::Error;
use strata::object::Object;
use strata::{HistoryQuery, Op, Origin, Store, Timestamp, TxId};

use crate::backends::{StoreFactory, backend_tests};
use crate::support::{TestResult, env_count};

const ENTITIES: usize = 3;
const MAX_VT: i64 = 10;

#[derive(Clone, Debug)]
enum MOp {
    Put {
        e: usize,
        v: u8,
        from: i64,
        to: Option<i64>,
    },
    Delete {
        e: usize,
        from: i64,
        to: Option<i64>,
    },
    /// A put at the valid_from of an existing row (picked by index), or at 1 when none.
    Correction {
        e: usize,
        v: u8,
        pick: usize,
    },
    Evict {
        e: usize,
    },
}

impl MOp {
    fn entity(&self) -> usize {
        match self {
            MOp::Put { e, .. }
            | MOp::Delete { e, .. }
            | MOp::Correction { e, .. }
            | MOp::Evict { e } => *e,
        }
    }
}

/// (valid_from, tx) → (value or tombstone, restored?)
type Rows = BTreeMap<(i64, u64), (Option<u8>, bool)>;

#[derive(Default)]
struct Model {
    entities: Vec<Option<Rows>>,
    last_tx: u64,
}

/// For each valid_from, the row of the greatest tx ≤ `tx`.
fn visible(rows: &Rows, tx: u64) -> BTreeMap<i64, (u64, Option<u8>, bool)> {
    let mut out = BTreeMap::new();
    for (&(vt, t), &(v, r)) in rows {
        if t <= tx {
            out.insert(vt, (t, v, r));
        }
    }
    out
}

fn model_write(rows: &mut Rows, tx: u64, start: i64, end: Option<i64>, value: Option<u8>) {
    let vis = visible(rows, u64::MAX);
    let mut new = vec![(start, value, false)];
    match end {
        Some(end) => {
            for (&vt, _) in vis.range(start + 1..end) {
                new.push((vt, value, false));
            }
            match vis.range(..=end).next_back() {
                Some((&vt, _)) if vt == end => {}
                Some((_, &(_, v, _))) => new.push((end, v, true)),
                None => new.push((end, None, true)),
            }
        }
        None => {
            if let Some((_, &(vtx, vv, _))) = vis.range(..=start).next_back() {
                for (&vt, &(t, v, r)) in vis.range(start + 1..) {
                    if t != vtx || v != vv || r {
                        break;
                    }
                    new.push((vt, value, false));
                }
            }
        }
    }
    for (vt, v, r) in new {
        rows.insert((vt, tx), (v, r));
    }
}

/// Valid time `vt` in seconds after the epoch (the model's times, 0 to 13, are all in range).
fn ts(vt: i64) -> Timestamp {
    Timestamp::saturating_from_micros(vt * 1_000_000)
}

/// Entity `e`'s id: entities 0 and 1 are files (a format-8 store keys them by their short
/// `entities` keys, names their filesystem in their first write's log header and their
/// documents by number in their version rows; the same content at both paths is one document,
/// and an evicted document's number is taken again), the others system prompts.
fn id(e: usize) -> String {
    match (e, object(e, 0)) {
        (0 | 1, Ok(file)) => file.id().to_string(),
        _ => format!("system_prompt:e{e}"),
    }
}

fn object(e: usize, v: u8) -> strata::Result<Object> {
    if e < 2 {
        return Object::file_text(
            strata::object::FilesystemSource {
                filesystem_id: "ab".repeat(32),
                path: format!("/e{e}"),
            },
            format!("v{v}"),
        );
    }
    Object::system_prompt(&format!("e{e}"), format!("v{v}"))
}

fn op_strategy() -> impl Strategy<Value = MOp> {
    let e = 0..ENTITIES;
    prop_oneof![
        3 => (e.clone(), 0u8..4, 0..MAX_VT).prop_map(|(e, v, from)| MOp::Put { e, v, from, to: None }),
        2 => (e.clone(), 0u8..4, 0..MAX_VT, 1..4i64).prop_map(|(e, v, from, len)| MOp::Put { e, v, from, to: Some(from + len) }),
        1 => (e.clone(), 0..MAX_VT).prop_map(|(e, from)| MOp::Delete { e, from, to: None }),
        1 => (e.clone(), 0..MAX_VT, 1..4i64).prop_map(|(e, from, len)| MOp::Delete { e, from, to: Some(from + len) }),
        2 => (e.clone(), 0u8..4, 0..8usize).prop_map(|(e, v, pick)| MOp::Correction { e, v, pick }),
        1 => e.prop_map(|e| MOp::Evict { e }),
    ]
}

/// The model value `v` of a version whose content is `v{v}`; `None` for a tombstone.
fn content(version: &strata::Version) -> Result<Option<u8>, TestCaseError> {
    let Some(object) = &version.object else {
        return Ok(None);
    };
    let text = object
        .content()
        .ok_or(TestCaseError::fail("a prompt without content"))?;
    let value = text
        .strip_prefix('v')
        .ok_or(TestCaseError::fail(format!("content {text:?}")))?;
    Ok(Some(value.parse()?))
}

fn check(store: &Store, model: &Model) -> Result<(), TestCaseError> {
    for e in 0..ENTITIES {
        let id = id(e);
        let Some(rows) = &model.entities[e] else {
            for tx in 0..=model.last_tx + 1 {
                let got = store.as_of(&id, Some(ts(3)), Some(TxId(tx)));
                prop_assert!(
                    matches!(got, Err(Error::NotFound { .. })),
                    "{id} should be unknown at tx {tx}: {got:?}"
                );
            }
            prop_assert!(store.history(&id, HistoryQuery::default()).is_err());
            continue;
        };
        for tx in 0..=model.last_tx + 1 {
            let vis = visible(rows, tx);
            for vt in 0..=MAX_VT + 3 {
                let got = store.as_of(&id, Some(ts(vt)), Some(TxId(tx)))?;
                let want = vis.range(..=vt).next_back();
                match (got, want) {
                    (None, None) => {}
                    (Some(got), Some((&wvt, &(wtx, wv, wr)))) => {
                        let wend = vis.range(wvt + 1..).next().map(|(&v, _)| ts(v));
                        prop_assert_eq!(
                            (
                                got.info.valid_from,
                                got.info.tx_id,
                                content(&got)?,
                                got.info.restored,
                                got.info.valid_to
                            ),
                            (ts(wvt), TxId(wtx), wv, wr, wend),
                            "as_of {} vt {} tx {}",
                            id,
                            vt,
                            tx
                        );
                    }
                    (got, want) => prop_assert!(
                        false,
                        "as_of {id} vt {vt} tx {tx}: got {got:?}, want {want:?}"
                    ),
                }
            }
            let history = store.history(
                &id,
                HistoryQuery {
                    as_of_tx: Some(TxId(tx)),
                    ..HistoryQuery::default()
                },
            )?;
            let got: Vec<(Timestamp, TxId)> =
                history.iter().map(|v| (v.valid_from, v.tx_id)).collect();
            let want: Vec<(Timestamp, TxId)> = vis
                .iter()
                .map(|(&vt, &(t, _, _))| (ts(vt), TxId(t)))
                .collect();
            prop_assert_eq!(got, want, "history of {} at tx {}", id, tx);
        }
        let all = store.history(
            &id,
            HistoryQuery {
                with_corrections: true,
                ..HistoryQuery::default()
            },
        )?;
        let got: Vec<(Timestamp, TxId, bool)> = all
            .iter()
            .map(|v| (v.valid_from, v.tx_id, v.object_hash.is_none()))
            .collect();
        let want: Vec<(Timestamp, TxId, bool)> = rows
            .iter()
            .map(|(&(vt, t), &(v, _))| (ts(vt), TxId(t), v.is_none()))
            .collect();
        prop_assert_eq!(got, want, "history with corrections of {}", id);
    }
    Ok(())
}

fn run(store: &Store, txs: Vec<Vec<MOp>>) -> Result<(), TestCaseError> {
    let mut model = Model {
        entities: vec![None; ENTITIES],
        last_tx: 0,
    };
    for tx_ops in txs {
        let mut seen = Vec::new();
        let mut ops = Vec::new();
        let mut writes: Vec<MOp> = Vec::new();
        let mut expect_not_found = false;
        for op in tx_ops {
            if seen.contains(&op.entity()) {
                continue;
            }
            seen.push(op.entity());
            let e = op.entity();
            let exists = model.entities[e].is_some();
            let op = match op {
                MOp::Correction { e, v, pick } => {
                    let from = model.entities[e]
                        .as_ref()
                        .and_then(|rows| {
                            let keys: Vec<i64> = rows.keys().map(|k| k.0).collect();
                            keys.get(pick % keys.len().max(1)).copied()
                        })
                        .unwrap_or(1);
                    MOp::Put {
                        e,
                        v,
                        from,
                        to: None,
                    }
                }
                other => other,
            };
            ops.push(match &op {
                MOp::Put { e, v, from, to } => Op::put_at(object(*e, *v)?, ts(*from), to.map(ts)),
                MOp::Delete { e, from, to } => {
                    expect_not_found |= !exists;
                    Op::Delete {
                        entity: id(*e),
                        valid_from: Some(ts(*from)),
                        valid_to: to.map(ts),
                    }
                }
                MOp::Evict { e } => {
                    expect_not_found |= !exists;
                    Op::Evict { entity: id(*e) }
                }
                MOp::Correction { .. } => unreachable!(),
            });
            writes.push(op);
        }
        let result = store.transact(ops, Origin::Other("oracle".into()));
        if expect_not_found {
            prop_assert!(matches!(result, Err(Error::NotFound { .. })), "{result:?}");
            continue;
        }
        let receipt = result?;
        model.last_tx += 1;
        prop_assert_eq!(receipt.tx_id, TxId(model.last_tx));
        let tx = model.last_tx;
        for op in writes {
            match op {
                MOp::Put { e, v, from, to } => model_write(
                    model.entities[e].get_or_insert_with(Rows::new),
                    tx,
                    from,
                    to,
                    Some(v),
                ),
                MOp::Delete { e, from, to } => model_write(
                    model.entities[e].get_or_insert_with(Rows::new),
                    tx,
                    from,
                    to,
                    None,
                ),
                MOp::Evict { e } => model.entities[e] = None,
                MOp::Correction { .. } => unreachable!(),
            }
        }
    }
    check(store, &model)?;
    prop_assert_eq!(store.fsck()?, vec![]);
    store.fsck_rebuild()?;
    check(store, &model)?;
    prop_assert_eq!(store.fsck()?, vec![]);
    Ok(())
}

/// The oracle on `backend`: `STRATA_ORACLE_CASES` random histories, each on a fresh store.
fn store_agrees_with_the_model(backend: &dyn StoreFactory) -> TestResult {
    let config = ProptestConfig {
        // Each case makes a schema on a PostgreSQL server: fewer by default there.
        cases: env_count(
            "STRATA_ORACLE_CASES",
            if backend.name() == "postgres" { 16 } else { 64 },
        )?,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let histories = prop::collection::vec(prop::collection::vec(op_strategy(), 1..3), 1..9);
    TestRunner::new(config).run(&histories, |txs| run(&backend.fresh()?, txs))?;
    Ok(())
}
backend_tests!(store_agrees_with_the_model: redb_in_memory, postgres);
