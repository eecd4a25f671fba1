//! The store: transactions, bitemporal queries (XTDB's range table), content addressing, the
//! log and its chain, evict, fsck, gc, locking and crashes, through the public API and real
//! files and processes.

use std::time::Duration;

use strata::hash::sha256;
use strata::object::{FilesystemSource, Object};
use strata::{Error, Hash};
use strata::{
    HistoryQuery, Op, Order, Origin, Put, Store, Timestamp, TxId, ValidFrom, VersionInfo,
};

use crate::backends::{
    ChildMode, DurableFactory, StoreFactory, backend_tests, redb_on_disk, spawn_child,
};
use crate::support::{TestResult, env_count, error_of, incompressible};

fn t(text: &str) -> TestResult<Timestamp> {
    Ok(text.parse()?)
}

fn day(d: u32) -> TestResult<Timestamp> {
    t(&format!("2019-11-{d:02}T00:00:00Z"))
}

fn prompt(sid: &str, text: &str) -> TestResult<Object> {
    Ok(Object::system_prompt(sid, text.into())?)
}

fn file(path: &str, text: &str) -> TestResult<Object> {
    Ok(Object::file_text(
        FilesystemSource {
            filesystem_id: "fs1".into(),
            path: path.into(),
        },
        text.into(),
    )?)
}

fn content_of(store: &Store, info: &VersionInfo) -> TestResult<Option<String>> {
    let v = store
        .as_of(&info.entity, Some(info.valid_from), Some(info.tx_id))?
        .ok_or("no version visible")?;
    let content = v.object.map(|o| o.content().map(str::to_string));
    Ok(content.map(|c| c.ok_or("no content")).transpose()?)
}

#[test]
fn put_get_round_trips_envelopes_and_content() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path().join(".strata"))?;
    let text = file("/src/a.rs", "fn main() {}\n")?;
    let bin_bytes = vec![0xff, 0, 1, 2, 0xfe];
    let bin = Object::file_bytes(
        FilesystemSource {
            filesystem_id: "fs1".into(),
            path: "/img/x.png".into(),
        },
        bin_bytes.clone(),
    )?;
    let mut put_bin = Put::new(bin.clone());
    put_bin.bytes = Some(bin_bytes.clone());
    put_bin.spelling = Some("/IMG/x.png".into());
    let r1 = store.transact(
        vec![Op::put(text.clone()), Op::Put(Box::new(put_bin))],
        Origin::Cli,
    )?;
    assert_eq!(r1.tx_id, TxId(1));
    let got = store.get(text.id())?.ok_or("no current version")?;
    assert_eq!(got.object.as_ref(), Some(&text));
    assert_eq!(got.info.valid_from, r1.tx_time);
    assert_eq!(got.info.valid_to, None);
    let got_bin = store.get(bin.id())?.ok_or("no current version")?;
    assert_eq!(got_bin.object.as_ref(), Some(&bin));
    assert_eq!(got_bin.info.spelling.as_deref(), Some("/IMG/x.png"));
    assert_eq!(
        store.content(bin.file_hash().ok_or("no file_hash")?)?,
        Some(bin_bytes)
    );
    assert_eq!(
        store
            .content(text.content_hash().ok_or("no content_hash")?)?
            .ok_or("no stored content")?,
        b"fn main() {}\n"
    );
    let r2 = store.transact(vec![Op::put(file("/src/a.rs", "v2")?)], Origin::Indexer)?;
    assert_eq!(r2.tx_id, TxId(2));
    assert!(r2.tx_time > r1.tx_time);
    // As of tx 1 the old content is what the store knew.
    let old = store
        .as_of(text.id(), None, Some(TxId(1)))?
        .ok_or("no version visible")?;
    assert_eq!(
        old.object.ok_or("a tombstone")?.content(),
        Some("fn main() {}\n")
    );
    let e = store.entity(text.id())?;
    assert_eq!(e.source, text.source().cloned());
    assert_eq!(store.live_entities()?.len(), 2);
    assert!(store.fsck()?.is_empty());
    Ok(())
}

#[test]
fn a_thousand_versions_sharing_content_store_it_once() -> TestResult {
    let store = Store::in_memory()?;
    let ops = (0..1000)
        .map(|i| {
            Ok(Op::put(file(
                &format!("/many/{i}.txt"),
                "same bytes everywhere",
            )?))
        })
        .collect::<TestResult<Vec<Op>>>()?;
    store.transact(ops, Origin::Indexer)?;
    let stats = store.stats()?;
    assert_eq!(stats.entities, 1000);
    assert_eq!(stats.blobs, 1);
    assert_eq!(stats.documents, 1);
    assert!(stats.dedup_ratio() > 100.0, "{stats:?}");
    Ok(())
}

/// XTDB v1's `test-put-delete-range-semantics`, case by case: (value or delete, start, end)
/// per transaction, then the visible history as (valid_from, tx index, value).
/// Deviation: a row that restores the earlier value at a range's end carries the writing
/// transaction (XTDB stamps the restored row's own); every as-of answer is the same.
fn xtdb_put_delete_range_semantics(backend: &dyn StoreFactory) -> TestResult {
    type Tx = (Option<&'static str>, u32, Option<u32>);
    type Row = (u32, usize, Option<&'static str>);
    let cases: Vec<(&str, Vec<Tx>, Vec<Row>)> = vec![
        (
            "ranged put",
            vec![(Some("26"), 26, Some(29))],
            vec![(26, 0, Some("26")), (29, 0, None)],
        ),
        (
            "re-instates the previous value at the end of the range",
            vec![(Some("25"), 25, None), (Some("26"), 26, Some(29))],
            vec![
                (25, 0, Some("25")),
                (26, 1, Some("26")),
                (29, 1, Some("25")),
            ],
        ),
        (
            "delete a range",
            vec![(Some("25"), 25, None), (None, 26, Some(29))],
            vec![(25, 0, Some("25")), (26, 1, None), (29, 1, Some("25"))],
        ),
        (
            "override a range",
            vec![
                (Some("25"), 25, Some(27)),
                (None, 25, Some(27)),
                (Some("26"), 26, Some(29)),
            ],
            vec![
                (25, 1, None),
                (26, 2, Some("26")),
                (27, 2, Some("26")),
                (29, 2, None),
            ],
        ),
        (
            "merge a range",
            vec![(Some("25"), 25, Some(27)), (Some("26"), 26, Some(29))],
            vec![
                (25, 0, Some("25")),
                (26, 1, Some("26")),
                (27, 1, Some("26")),
                (29, 1, None),
            ],
        ),
        (
            "does not override the value at end-vt if there is one there",
            vec![
                (Some("25"), 25, None),
                (Some("29"), 29, None),
                (Some("26"), 26, Some(29)),
            ],
            vec![
                (25, 0, Some("25")),
                (26, 2, Some("26")),
                (29, 1, Some("29")),
            ],
        ),
        (
            "re-instates 28 at the end of the range",
            vec![
                (Some("25"), 25, None),
                (Some("28"), 28, None),
                (Some("26"), 26, Some(29)),
            ],
            vec![
                (25, 0, Some("25")),
                (26, 2, Some("26")),
                (28, 2, Some("26")),
                (29, 2, Some("28")),
            ],
        ),
        (
            "26.1 overwrites the full range",
            vec![
                (Some("28"), 28, None),
                (Some("26"), 26, Some(29)),
                (Some("26.1"), 26, None),
            ],
            vec![
                (26, 2, Some("26.1")),
                (28, 2, Some("26.1")),
                (29, 1, Some("28")),
            ],
        ),
        (
            "27 overrides the latter half of the range",
            vec![
                (Some("25"), 25, None),
                (Some("26"), 26, Some(29)),
                (Some("27"), 27, None),
            ],
            vec![
                (25, 0, Some("25")),
                (26, 1, Some("26")),
                (27, 2, Some("27")),
                (29, 1, Some("25")),
            ],
        ),
        (
            "27 still overrides the latter half of the range",
            vec![
                (Some("25"), 25, None),
                (Some("28"), 28, None),
                (Some("26"), 26, Some(29)),
                (Some("27"), 27, None),
            ],
            vec![
                (25, 0, Some("25")),
                (26, 2, Some("26")),
                (27, 3, Some("27")),
                (28, 3, Some("27")),
                (29, 2, Some("28")),
            ],
        ),
    ];
    for (name, txs, expected) in cases {
        let store = backend.fresh()?;
        let id = "system_prompt:ivan";
        let mut receipts = Vec::new();
        for (value, start, end) in txs {
            let op = match value {
                Some(v) => Op::put_at(prompt("ivan", v)?, day(start)?, end.map(day).transpose()?),
                None => Op::Delete {
                    entity: id.into(),
                    valid_from: Some(day(start)?),
                    valid_to: end.map(day).transpose()?,
                },
            };
            receipts.push(store.transact(vec![op], Origin::Cli)?);
        }
        let history = store.history(id, HistoryQuery::default())?;
        let got = history
            .iter()
            .map(|v| Ok((v.valid_from, v.tx_id, content_of(&store, v)?)))
            .collect::<TestResult<Vec<(Timestamp, TxId, Option<String>)>>>()?;
        let want = expected
            .iter()
            .map(|(d, tx, v)| Ok((day(*d)?, receipts[*tx].tx_id, v.map(String::from))))
            .collect::<TestResult<Vec<(Timestamp, TxId, Option<String>)>>>()?;
        assert_eq!(got, want, "{name}");
        assert!(store.fsck()?.is_empty(), "{name}");
    }
    Ok(())
}
backend_tests!(xtdb_put_delete_range_semantics: redb_in_memory, redb_on_disk, postgres);

fn corrections_are_hidden_unless_asked_and_invisible_before_their_tx(
    backend: &dyn StoreFactory,
) -> TestResult {
    let store = backend.fresh()?;
    let id = "system_prompt:s";
    let r1 = store.transact(
        vec![Op::put_at(prompt("s", "a")?, day(1)?, None)],
        Origin::Cli,
    )?;
    let r2 = store.transact(
        vec![Op::put_at(prompt("s", "b")?, day(1)?, None)],
        Origin::Cli,
    )?;
    let plain = store.history(id, HistoryQuery::default())?;
    assert_eq!(plain.len(), 1);
    assert_eq!(plain[0].tx_id, r2.tx_id);
    let all = store.history(
        id,
        HistoryQuery {
            with_corrections: true,
            order: Order::TxDesc,
            ..HistoryQuery::default()
        },
    )?;
    assert_eq!(
        all.iter().map(|v| v.tx_id).collect::<Vec<_>>(),
        vec![r2.tx_id, r1.tx_id]
    );
    let before = store
        .as_of(id, Some(day(2)?), Some(r1.tx_id))?
        .ok_or("no version visible")?;
    assert_eq!(before.object.ok_or("a tombstone")?.content(), Some("a"));
    let before_any = store.as_of(id, Some(day(2)?), Some(TxId(0)))?;
    assert!(before_any.is_none());
    Ok(())
}
backend_tests!(corrections_are_hidden_unless_asked_and_invisible_before_their_tx: redb_in_memory, postgres);

fn bad_input_gets_precise_errors(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    let unknown = error_of(store.get("toolcall:nope"))?;
    assert!(matches!(unknown, Error::NotFound { .. }), "{unknown}");
    assert!(unknown.to_string().contains("toolcall:nope"));
    for op in [
        Op::delete("toolcall:nope"),
        Op::Evict {
            entity: "toolcall:nope".into(),
        },
    ] {
        let err = error_of(store.transact(vec![op], Origin::Cli))?;
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
    }
    assert!(
        store
            .history("toolcall:nope", HistoryQuery::default())
            .is_err()
    );

    let empty = error_of(store.transact(vec![], Origin::Cli))?;
    assert!(empty.to_string().contains("at least one op"), "{empty}");
    let twice = error_of(store.transact(
        vec![Op::put(prompt("s", "a")?), Op::put(prompt("s", "b")?)],
        Origin::Cli,
    ))?;
    assert!(twice.to_string().contains("system_prompt:s"), "{twice}");
    assert!(twice.to_string().contains("two ops"), "{twice}");

    for bad in ["1969-12-31T23:59:59.999999Z", "+10000-01-01T00:00:00Z"] {
        let err = error_of(bad.parse::<Timestamp>())?;
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert!(err.to_string().contains("1970"), "{err}");
    }
    assert!(Timestamp::from_micros(-1).is_err());

    let backwards = error_of(store.transact(
        vec![Op::put_at(prompt("s", "a")?, day(5)?, Some(day(5)?))],
        Origin::Cli,
    ))?;
    assert!(backwards.to_string().contains("not after"), "{backwards}");

    let bin = Object::file_bytes(
        FilesystemSource {
            filesystem_id: "fs1".into(),
            path: "/b.bin".into(),
        },
        vec![0xff, 1],
    )?;
    let mut put = Put::new(bin);
    put.bytes = Some(vec![0xff, 2]);
    let wrong = error_of(store.transact(vec![Op::Put(Box::new(put))], Origin::Cli))?;
    assert!(wrong.to_string().contains("file_hash"), "{wrong}");

    // Nothing of the failed transactions was written.
    assert_eq!(store.stats()?.transactions, 0);
    assert_eq!(store.stats()?.blobs, 0);
    Ok(())
}
backend_tests!(bad_input_gets_precise_errors: redb_in_memory, postgres);

fn a_failed_match_aborts_the_whole_transaction(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    let a = prompt("a", "one")?;
    store.transact(
        vec![
            Op::Match {
                entity: a.id().into(),
                expected: None,
            },
            Op::put(a.clone()),
        ],
        Origin::Session,
    )?;
    let stale = Hash([9; 32]);
    let err = error_of(store.transact(
        vec![
            Op::put(prompt("b", "two")?),
            Op::Match {
                entity: a.id().into(),
                expected: Some(stale),
            },
        ],
        Origin::Session,
    ))?;
    match &err {
        Error::Conflict {
            entity,
            expected,
            actual,
        } => {
            assert_eq!(entity, a.id());
            assert_eq!(expected, &stale.to_hex());
            assert_eq!(actual, &a.object_hash().to_hex());
        }
        other => panic!("{other}"),
    }
    assert!(store.get("system_prompt:b").is_err(), "b must not exist");
    store.transact(
        vec![
            Op::Match {
                entity: a.id().into(),
                expected: Some(*a.object_hash()),
            },
            Op::put(prompt("a", "two")?),
        ],
        Origin::Session,
    )?;
    // A type clash on an id is a conflict too.
    let clash = Object::session(strata::object::SessionFields {
        session_id: "x".into(),
        chat_ref: "chat:x".into(),
        system_prompt_ref: "system_prompt:x".into(),
        session_index: Default::default(),
        metadata_pool: Default::default(),
        active_set: Default::default(),
        pinned_set: Default::default(),
    })?;
    store.transact(vec![Op::put(clash)], Origin::Session)?;
    Ok(())
}
backend_tests!(a_failed_match_aborts_the_whole_transaction: redb_in_memory, postgres);

/// An eviction before a put of the same content in one transaction: the eviction releases the
/// content (no document used it any more), the put's document needs it again.
fn an_eviction_before_a_put_of_the_same_content_keeps_it(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    store.transact(vec![Op::put(prompt("a", "shared")?)], Origin::Cli)?;
    let b = prompt("b", "shared")?;
    store.transact(
        vec![
            Op::Evict {
                entity: "system_prompt:a".into(),
            },
            Op::put(b.clone()),
        ],
        Origin::Cli,
    )?;
    assert_eq!(store.fsck()?, vec![]);
    let hash = b.content_hash().ok_or("a prompt has content")?;
    assert!(store.content(hash)?.is_some(), "b's content stays");
    assert!(store.get("system_prompt:b")?.is_some());
    Ok(())
}
backend_tests!(an_eviction_before_a_put_of_the_same_content_keeps_it: redb_in_memory, postgres);

/// A group of requests: each gets its own tx id in order, and one that fails (a match
/// conflict, after a request before it wrote) changes nothing, its new content included,
/// while the ones after it commit and see what the ones before wrote.
fn a_group_commits_each_request_or_nothing_of_it(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    let x = prompt("x", "one")?;
    let lost = prompt("lost", "a content only the failed request has")?;
    let request = |ops| strata::TxRequest {
        ops,
        origin: Origin::Cli,
        stat: None,
    };
    let results = store.transact_group(vec![
        request(vec![Op::put(x.clone())]),
        request(vec![
            Op::put(lost.clone()),
            Op::Match {
                entity: x.id().into(),
                expected: None,
            },
        ]),
        request(vec![
            Op::Match {
                entity: x.id().into(),
                expected: Some(*x.object_hash()),
            },
            Op::put(prompt("x", "two")?),
        ]),
    ]);
    let ids: Vec<Option<u64>> = results
        .iter()
        .map(|r| {
            r.as_ref()
                .ok()
                .and_then(|receipt| receipt.map(|r| r.tx_id.0))
        })
        .collect();
    assert_eq!(ids, vec![Some(1), None, Some(2)], "{results:?}");
    assert!(
        matches!(&results[1], Err(Error::Conflict { .. })),
        "{:?}",
        results[1]
    );
    assert!(store.get("system_prompt:lost").is_err(), "nothing of it");
    let hash = lost.content_hash().ok_or("a prompt has content")?;
    assert_eq!(store.content(hash)?, None, "its content went too");
    assert_eq!(store.fsck()?, vec![]);
    Ok(())
}
backend_tests!(a_group_commits_each_request_or_nothing_of_it: redb_in_memory, redb_on_disk, postgres);

fn mtime_clamped_stays_between_the_previous_version_and_tx_time(
    backend: &dyn StoreFactory,
) -> TestResult {
    let store = backend.fresh()?;
    let f1 = file("/m.txt", "1")?;
    let mut put = Put::new(f1.clone());
    put.valid_from = ValidFrom::MtimeClamped(Timestamp::saturating_from_micros(-5_000_000));
    store.transact(vec![Op::Put(Box::new(put))], Origin::Watcher)?;
    let v1 = store.get(f1.id())?.ok_or("no current version")?.info;
    assert_eq!(v1.valid_from, Timestamp::MIN);

    let mut put = Put::new(file("/m.txt", "2")?);
    put.valid_from = ValidFrom::MtimeClamped(t("2020-01-01T00:00:00Z")?);
    store.transact(vec![Op::Put(Box::new(put))], Origin::Watcher)?;
    let mut put = Put::new(file("/m.txt", "3")?);
    put.valid_from = ValidFrom::MtimeClamped(t("2019-01-01T00:00:00Z")?);
    store.transact(vec![Op::Put(Box::new(put))], Origin::Watcher)?;
    let v3 = store.get(f1.id())?.ok_or("no current version")?.info;
    assert_eq!(
        v3.valid_from,
        t("2020-01-01T00:00:00.000001Z")?,
        "after the previous"
    );
    let mut put = Put::new(file("/m.txt", "4")?);
    put.valid_from = ValidFrom::MtimeClamped(t("9999-01-01T00:00:00Z")?);
    let r4 = store.transact(vec![Op::Put(Box::new(put))], Origin::Watcher)?;
    let v4 = store.get(f1.id())?.ok_or("no current version")?.info;
    assert_eq!(v4.valid_from, r4.tx_time, "never after tx time");
    let history = store.history(f1.id(), HistoryQuery::default())?;
    assert_eq!(history.len(), 4);
    assert_eq!(history[2].valid_to, Some(r4.tx_time));
    Ok(())
}
backend_tests!(mtime_clamped_stays_between_the_previous_version_and_tx_time: redb_in_memory, postgres);

fn log_records_ops_and_the_chain_survives_eviction(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    let keep = file("/keep.txt", "shared")?;
    let gone = file("/gone.txt", "shared")?;
    let secret = file("/gone2.txt", "secret only here")?;
    store.transact(
        vec![Op::put(keep.clone()), Op::put(gone.clone())],
        Origin::Indexer,
    )?;
    store.transact(vec![Op::put(secret.clone())], Origin::Indexer)?;
    store.transact(vec![Op::delete(gone.id())], Origin::Watcher)?;
    let head_before = store.chain_head()?.ok_or("an empty store")?;
    let log = store.log(None, 100)?;
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].origin, Origin::Indexer);
    assert_eq!(log[0].ops[1].kind(), Some("put"));
    assert_eq!(log[0].ops[1].entity(), Some(gone.id()));
    assert_eq!(
        log[0].ops[0].body.as_ref().ok_or("no op body")?["type"],
        "file"
    );
    assert_eq!(log[2].ops[0].kind(), Some("delete"));
    assert_eq!(log[2].chain, head_before.1);
    assert_eq!(store.log(Some(TxId(1)), 1)?[0].tx_id, TxId(2));

    store.evict(gone.id(), Origin::Cli)?;
    store.evict(secret.id(), Origin::Cli)?;
    for tx in 0..=5 {
        for id in [gone.id(), secret.id()] {
            assert!(matches!(
                store.as_of(id, None, Some(TxId(tx))),
                Err(Error::NotFound { .. })
            ));
        }
    }
    assert!(store.entity_ids_by_path("fs1", "/gone.txt")?.is_empty());
    assert_eq!(
        store.content(secret.content_hash().ok_or("no content_hash")?)?,
        None
    );
    assert!(
        store
            .content(keep.content_hash().ok_or("no content_hash")?)?
            .is_some()
    );
    let log = store.log(None, 100)?;
    assert!(log[0].ops[1].body.is_none(), "evicted body gone");
    assert!(log[0].ops[0].body.is_some());
    assert!(log[2].ops[0].body.is_none());
    assert_eq!(log[3].ops[0].kind(), Some("evict"));
    let json = serde_json::to_string(&log.iter().map(|r| r.to_json()).collect::<Vec<_>>())?;
    assert!(!json.contains("secret only here"));
    assert!(!json.contains("/gone2.txt"), "no path of an evicted entity");
    assert_eq!(
        log[2].chain, head_before.1,
        "earlier chain values unchanged"
    );
    assert_eq!(store.fsck()?, vec![]);
    // The raw file keeps nothing of the evicted content once redb reuses the pages; the
    // tables certainly do not.
    store.fsck_rebuild()?;
    assert_eq!(store.fsck()?, vec![]);
    assert!(store.get(gone.id()).is_err());
    assert_eq!(
        store
            .get(keep.id())?
            .ok_or("no current version")?
            .object
            .as_ref(),
        Some(&keep)
    );
    Ok(())
}
backend_tests!(log_records_ops_and_the_chain_survives_eviction: redb_on_disk, postgres);

#[test]
fn paths_match_whole_segments() -> TestResult {
    let store = Store::in_memory()?;
    let ops = [
        "/a/b",
        "/a/b/c.txt",
        "/a/b/d/e.txt",
        "/a/bc.txt",
        "/a/b-x/f.txt",
        "/z.txt",
    ]
    .iter()
    .map(|p| Ok(Op::put(file(p, p)?)))
    .collect::<TestResult<Vec<Op>>>()?;
    store.transact(ops, Origin::Indexer)?;
    let paths = |prefix: &str| -> TestResult<Vec<String>> {
        store
            .entity_ids_by_path("fs1", prefix)?
            .iter()
            .map(|id| match store.entity(id)?.source.ok_or("no source")? {
                strata::Source::Filesystem(fs) => Ok(fs.path),
            })
            .collect()
    };
    assert_eq!(paths("/a/b")?, vec!["/a/b", "/a/b/c.txt", "/a/b/d/e.txt"]);
    assert_eq!(paths("/a/b/")?, vec!["/a/b", "/a/b/c.txt", "/a/b/d/e.txt"]);
    assert_eq!(paths("/")?.len(), 6);
    assert!(store.entity_ids_by_path("other", "/")?.is_empty());
    Ok(())
}

fn rebuild_from_the_log_gives_the_same_answers(backend: &dyn StoreFactory) -> TestResult {
    let store = backend.fresh()?;
    for i in 0..20u32 {
        let ops = vec![
            Op::put_at(prompt("r", &format!("v{}", i % 7))?, day(1 + i % 9)?, None),
            Op::put_at(
                file(&format!("/r/{}.md", i % 4), &format!("{i}"))?,
                day(2)?,
                Some(day(20 - i % 5)?),
            ),
        ];
        store.transact(ops, Origin::Indexer)?;
    }
    store.transact(vec![Op::delete("system_prompt:r")], Origin::Cli)?;
    let ids: Vec<String> = store.live_entities()?.into_iter().map(|e| e.id).collect();
    let snapshot = |store: &Store| -> TestResult<Vec<String>> {
        let mut out = Vec::new();
        for id in ids.iter().map(String::as_str).chain(["system_prompt:r"]) {
            out.push(format!(
                "{:?}",
                store.history(
                    id,
                    HistoryQuery {
                        with_corrections: true,
                        ..Default::default()
                    }
                )?
            ));
            for tx in 0..22 {
                for d in 0..22 {
                    let v = store.as_of(id, Some(day(d + 1)?), Some(TxId(tx)))?;
                    out.push(format!("{v:?}"));
                }
            }
        }
        Ok(out)
    };
    let before = snapshot(&store)?;
    store.fsck_rebuild()?;
    assert_eq!(snapshot(&store)?, before);
    assert_eq!(store.fsck()?, vec![]);
    Ok(())
}
backend_tests!(rebuild_from_the_log_gives_the_same_answers: redb_in_memory, redb_on_disk, postgres);

#[test]
fn gc_sweeps_what_no_version_references() -> TestResult {
    let store = Store::in_memory()?;
    store.transact(vec![Op::put(prompt("g", "kept")?)], Origin::Cli)?;
    assert_eq!(store.gc()?, Default::default());
    store.transact(vec![Op::put(prompt("h", "evicted")?)], Origin::Cli)?;
    store.evict("system_prompt:h", Origin::Cli)?;
    assert_eq!(store.stats()?.blobs, 1, "evict swept its own content");
    assert_eq!(store.gc()?.blobs_removed, 0);
    Ok(())
}

/// A bit flipped on disk inside raw bytes a put kept: fsck names that blob, and only it.
fn a_flipped_byte_in_a_blob_is_found_by_fsck(backend: &dyn DurableFactory) -> TestResult {
    let place = tempfile::tempdir()?;
    // Incompressible bytes, so that they are stored as given.
    let mut bytes: Vec<u8> = (0..100u32)
        .flat_map(|i| sha256(&i.to_le_bytes()).0)
        .collect();
    bytes[0] = 0xff; // not UTF-8: kept as raw bytes
    let bin = Object::file_bytes(
        FilesystemSource {
            filesystem_id: "fs1".into(),
            path: "/blob.bin".into(),
        },
        bytes.clone(),
    )?;
    {
        let store = backend.open(place.path())?;
        let mut put = Put::new(bin.clone());
        put.bytes = Some(bytes.clone());
        store.transact(vec![Op::Put(Box::new(put))], Origin::Cli)?;
        assert!(store.fsck()?.is_empty());
    }
    backend.corrupt(place.path(), &bytes[1000..1064])?;
    let store = backend.open(place.path())?;
    let findings = store.fsck()?;
    // The blob, named with the file it holds, and the storage engine's own page checksum.
    let kinds: Vec<&str> = findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, backend.damage_findings(), "{findings:?}");
    assert_eq!(
        findings[0].subject,
        bin.file_hash().ok_or("no file_hash")?.to_hex()
    );
    assert_eq!(findings[0].path.as_deref(), Some("/blob.bin"));
    assert_eq!(findings[0].entity.as_deref(), Some(bin.id()));
    assert_eq!(findings[0].tx, Some(1));
    assert_eq!(findings[0].repair, "strata fsck --repair");
    Ok(())
}
backend_tests!(a_flipped_byte_in_a_blob_is_found_by_fsck: redb_on_disk, postgres);

const META: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");

/// Sets the store file's format version in `dir` to `version`.
pub(crate) fn set_format_version(dir: &std::path::Path, version: u32) -> TestResult {
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_write()?;
    tx.open_table(META)?
        .insert("format_version", version.to_le_bytes().as_slice())?;
    tx.commit()?;
    Ok(())
}

/// The store file's format version in `dir`.
fn format_version(dir: &std::path::Path) -> TestResult<u32> {
    use redb::ReadableDatabase;
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_read()?;
    let value = tx
        .open_table(META)?
        .get("format_version")?
        .ok_or("no version")?;
    Ok(u32::from_le_bytes(value.value().try_into()?))
}

#[test]
fn a_format_3_store_is_read_as_it_is_and_marked_format_10_when_opened_to_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    {
        let store = Store::create(dir.path())?;
        store.transact(
            vec![Op::put(Object::system_prompt("p", "be brief".into())?)],
            Origin::Cli,
        )?;
    }
    set_format_version(dir.path(), 3)?;
    {
        let store = Store::open_read_only(dir.path())?;
        assert_eq!(store.log(None, 10)?.len(), 1);
    }
    assert_eq!(format_version(dir.path())?, 3, "a reader changes nothing");
    {
        // Opened to write at the first write: a store that wrote nothing is left as it was,
        // and its first write marks it.
        let store = Store::open_deferred(dir.path())?;
        assert_eq!(store.log(None, 10)?.len(), 1);
    }
    assert_eq!(
        format_version(dir.path())?,
        3,
        "a deferred store that wrote nothing"
    );
    {
        let store = Store::open_deferred(dir.path())?;
        store.transact(
            vec![Op::put(Object::system_prompt("q", "be kind".into())?)],
            Origin::Cli,
        )?;
    }
    assert_eq!(format_version(dir.path())?, strata::FORMAT_VERSION);
    set_format_version(dir.path(), 3)?;
    let store = Store::open(dir.path())?;
    assert_eq!(store.log(None, 10)?.len(), 2);
    drop(store);
    assert_eq!(format_version(dir.path())?, strata::FORMAT_VERSION);
    assert_eq!(strata::FORMAT_VERSION, 10);
    Ok(())
}

const BY_TX: redb::TableDefinition<(u64, u64), (i64, u64)> =
    redb::TableDefinition::new("versions_by_tx");
const VERSIONS: redb::TableDefinition<(u64, i64, u64), &[u8]> =
    redb::TableDefinition::new("versions");

/// The number of rows of `versions` and of `versions_by_tx` in the store file in `dir`.
fn version_rows(dir: &std::path::Path) -> TestResult<(u64, u64)> {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_read()?;
    Ok((
        tx.open_table(VERSIONS)?.len()?,
        tx.open_table(BY_TX)?.len()?,
    ))
}

const FILESYSTEMS: redb::TableDefinition<&[u8], u32> = redb::TableDefinition::new("filesystems");
const FILESYSTEM_IDS: redb::TableDefinition<u32, &[u8]> =
    redb::TableDefinition::new("filesystem_ids");
pub(crate) const PATHS: redb::TableDefinition<(&[u8], &str), u64> =
    redb::TableDefinition::new("paths");
pub(crate) const STAT_CACHE: redb::TableDefinition<(&[u8], &str), &[u8]> =
    redb::TableDefinition::new("stat_cache");

/// Makes the store in `dir` write format 4's rows: a `versions_by_tx` row for every write (the
/// `meta` key that tells from which transaction on format 5 omits some is removed), long
/// `paths` and `stat_cache` keys for filesystem `fs` (registered as keeping them, number 0), and
/// whole entity rows (format 5's too: the key of format 6's is removed).
fn write_format_4_rows(dir: &std::path::Path, fs: &str) -> TestResult {
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_write()?;
    tx.open_table(META)?.remove("by_tx_first_omitted_since")?;
    tx.open_table(META)?
        .remove("file_sources_in_entity_ids_since")?;
    let mut key = vec![1u8];
    key.extend_from_slice(fs.as_bytes());
    tx.open_table(FILESYSTEMS)?.insert(key.as_slice(), 0)?;
    tx.commit()?;
    Ok(())
}

pub(crate) const STAT_BY_DIR: redb::TableDefinition<&[u8], &[u8]> =
    redb::TableDefinition::new("stat_by_dir");
pub(crate) const DIRECTORIES: redb::TableDefinition<(&[u8], &str), u32> =
    redb::TableDefinition::new("directories");
pub(crate) const DIRECTORY_PATHS: redb::TableDefinition<u32, (&[u8], &str)> =
    redb::TableDefinition::new("directory_paths");

/// The directory number and name of a `stat_by_dir` key (format 9: LEB128, then the name).
fn split_stat_key(key: &[u8]) -> TestResult<(u32, String)> {
    let mut n = 0u32;
    for (i, byte) in key.iter().enumerate() {
        n |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((n, String::from_utf8(key[i + 1..].to_vec())?));
        }
    }
    Err("a stat_by_dir key without a name".into())
}

pub(crate) const PATHS_BY_DIR: redb::TableDefinition<&[u8], u64> =
    redb::TableDefinition::new("paths_by_dir");

/// Copies the rows of `from`, keyed by directory number and name, into `to`, keyed by
/// (filesystem key, whole path), and deletes `from`: the layout before formats 9 and 10.
fn to_whole_paths<V: redb::Value + 'static>(
    dir: &std::path::Path,
    from: redb::TableDefinition<&'static [u8], V>,
    to: redb::TableDefinition<(&'static [u8], &'static str), V>,
) -> TestResult {
    use redb::ReadableTable;
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_write()?;
    {
        let rows = tx.open_table(from)?;
        let dirs = tx.open_table(DIRECTORY_PATHS)?;
        let mut old = tx.open_table(to)?;
        for entry in rows.iter()? {
            let (key, value) = entry?;
            let (n, name) = split_stat_key(key.value())?;
            let dir = dirs.get(n)?.ok_or("no directory")?;
            let (fs, path) = dir.value();
            old.insert((fs, format!("{path}{name}").as_str()), value.value())?;
        }
    }
    tx.delete_table(from)?;
    tx.commit()?;
    Ok(())
}

/// Gives the store file in `dir` the stat cache and paths of a store before format 9: their
/// rows keyed by (filesystem key, whole path) in `stat_cache` and `paths`, and no directory
/// tables.
pub(crate) fn write_old_stat_cache(dir: &std::path::Path) -> TestResult {
    write_old_paths(dir)?;
    to_whole_paths(dir, STAT_BY_DIR, STAT_CACHE)?;
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_write()?;
    tx.delete_table(DIRECTORIES)?;
    tx.delete_table(DIRECTORY_PATHS)?;
    tx.commit()?;
    Ok(())
}

/// Gives the store file in `dir` the paths of a store before format 10: rows keyed by
/// (filesystem key, whole path) in `paths`, and no `paths_by_dir` (the directory tables stay,
/// for the stat cache's rows).
pub(crate) fn write_old_paths(dir: &std::path::Path) -> TestResult {
    to_whole_paths(dir, PATHS_BY_DIR, PATHS)
}

/// Removes the filesystem tables from the store file in `dir`, as a format-4 file has none, and
/// gives it the whole-path stat cache of a store before format 9.
fn drop_filesystem_tables(dir: &std::path::Path) -> TestResult {
    write_old_stat_cache(dir)?;
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_write()?;
    tx.delete_table(FILESYSTEMS)?;
    tx.delete_table(FILESYSTEM_IDS)?;
    tx.commit()?;
    Ok(())
}

/// The first bytes (the key tags) of the filesystem keys of the paths (`paths` before format
/// 10, `paths_by_dir`'s directories' from format 10 on) and of the stat cache
/// (`stat_cache`'s keys before format 9, `stat_by_dir`'s directories' from format 9 on).
fn fs_key_tags(dir: &std::path::Path) -> TestResult<(Vec<u8>, Vec<u8>)> {
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_read()?;
    let mut paths = Vec::new();
    if let Ok(table) = tx.open_table(PATHS) {
        for entry in table.iter()? {
            paths.push(entry?.0.value().0[0]);
        }
    }
    if let (Ok(rows), Ok(dirs)) = (tx.open_table(PATHS_BY_DIR), tx.open_table(DIRECTORY_PATHS)) {
        for entry in rows.iter()? {
            let (n, _) = split_stat_key(entry?.0.value())?;
            paths.push(dirs.get(n)?.ok_or("no directory")?.value().0[0]);
        }
    }
    let mut cache = Vec::new();
    if let Ok(table) = tx.open_table(STAT_CACHE) {
        for entry in table.iter()? {
            cache.push(entry?.0.value().0[0]);
        }
    }
    if let (Ok(rows), Ok(dirs)) = (tx.open_table(STAT_BY_DIR), tx.open_table(DIRECTORY_PATHS)) {
        for entry in rows.iter()? {
            let (n, _) = split_stat_key(entry?.0.value())?;
            cache.push(dirs.get(n)?.ok_or("no directory")?.value().0[0]);
        }
    }
    Ok((paths, cache))
}

/// A stat cache update of `files` on filesystem `fs`.
fn stat_of(fs: &str, files: &[&Object]) -> TestResult<strata::StatUpdate> {
    let mut puts = Vec::new();
    for object in files {
        let source = object.source().ok_or("no source")?.as_filesystem();
        puts.push((
            source.path.clone(),
            strata::StatEntry {
                stat: strata::FileStat {
                    size: 2,
                    mtime_ns: 1,
                    ctime_ns: 1,
                    inode: 1,
                },
                file_hash: *object.file_hash().ok_or("no file hash")?,
                scan_start_ns: 0,
            },
        ));
    }
    Ok(strata::StatUpdate {
        filesystem_id: fs.to_string(),
        puts,
        removes: Vec::new(),
    })
}

/// What the store says of paths `paths` on `fs`: the entity there, the listing, the stat cache.
fn path_answers(store: &Store, fs: &str, paths: &[&str]) -> TestResult<String> {
    let mut out = String::new();
    for path in paths {
        out += &format!("{path}: {:?}\n", store.entity_at_path(fs, path)?);
    }
    out += &format!("{:?}\n", store.paths_under(fs, "/")?);
    let mut cache: Vec<String> = store.stat_cache(fs, "/")?.into_keys().collect();
    cache.sort();
    out += &format!("{cache:?}");
    Ok(out)
}

/// The contents visible now of `ids`, and of each as of tx 2 (valid now), and each history's
/// (valid_from, tx).
fn answers(store: &Store, ids: &[&str]) -> TestResult<Vec<String>> {
    let mut out = Vec::new();
    for id in ids {
        let now = store.as_of(id, None, None)?;
        let old = store.as_of(id, None, Some(TxId(2)))?;
        let history = store.history(id, HistoryQuery::default())?;
        out.push(format!(
            "{id}: {:?} / {:?} / {:?}",
            now.and_then(|v| v.object)
                .map(|o| o.content().map(str::to_string)),
            old.and_then(|v| v.object)
                .map(|o| o.content().map(str::to_string)),
            history
                .iter()
                .map(|v| (v.valid_from, v.tx_id))
                .collect::<Vec<_>>()
        ));
    }
    Ok(out)
}

#[test]
fn a_format_4_store_is_read_as_it_is_and_written_in_format_5_after_its_last_tx() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    drop(Store::create(path)?);
    write_format_4_rows(path, "fs1")?;
    let (a, b, c, e) = (
        file("/a.rs", "a1")?,
        file("/b.rs", "b1")?,
        prompt("p", "p1")?,
        file("/e.rs", "e1")?,
    );
    let d = file("/d.rs", "d1")?;
    let ids = [a.id(), b.id(), c.id(), e.id(), d.id()].map(str::to_string);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    {
        // Format 4's layout: one versions_by_tx row for every write, a ranged put's too.
        let store = Store::open(path)?;
        let stat = stat_of("fs1", &[&b, &e])?;
        store.transact_with_stat(vec![Op::put(a), Op::put(b), Op::put(e)], Origin::Cli, stat)?;
        store.transact(vec![Op::put_at(c, day(1)?, Some(day(5)?))], Origin::Cli)?;
        store.transact(vec![Op::put(file("/a.rs", "a2")?)], Origin::Cli)?;
    }
    // a: 2 rows, b: 1, e: 1, c: 2 (the put and the tombstone at its end); 5 (eid, tx) writes.
    assert_eq!(version_rows(path)?, (6, 5));
    // fs1's keys are its id's (tag 1, a text id), as format 4 wrote them.
    assert_eq!(fs_key_tags(path)?, (vec![1; 3], vec![1; 2]));
    drop_filesystem_tables(path)?;
    set_format_version(path, 4)?;
    let fs1_paths = ["/a.rs", "/b.rs", "/d.rs", "/e.rs"];
    let (before, before_paths) = {
        let store = Store::open_read_only(path)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        (
            answers(&store, &ids[..4])?,
            path_answers(&store, "fs1", &fs1_paths)?,
        )
    };
    assert_eq!(format_version(path)?, 4, "a reader changes nothing");
    {
        let store = Store::open(path)?;
        assert_eq!(answers(&store, &ids[..4])?, before);
        assert_eq!(path_answers(&store, "fs1", &fs1_paths)?, before_paths);
        // Format 5's rows from tx 4 on: d's only write has no versions_by_tx row; b's second
        // write adds its own (b's first, format 4, has its row). fs1 keeps its long keys; a
        // new filesystem gets a number.
        let stat = stat_of("fs1", &[&d])?;
        store.transact_with_stat(vec![Op::put(d)], Origin::Cli, stat)?;
        let b2 = file("/b.rs", "b2")?;
        let stat = stat_of("fs1", &[&b2])?;
        store.transact_with_stat(vec![Op::put(b2)], Origin::Cli, stat)?;
        let other = Object::file_text(
            FilesystemSource {
                filesystem_id: "fs2".into(),
                path: "/a.rs".into(),
            },
            "other".into(),
        )?;
        let stat = stat_of("fs2", &[&other])?;
        store.transact_with_stat(vec![Op::put(other.clone())], Origin::Cli, stat)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        assert_eq!(
            store.entity_at_path("fs2", "/a.rs")?.as_deref(),
            Some(other.id())
        );
        assert_eq!(store.stat_cache("fs2", "/")?.len(), 1);
    }
    // fs1: long keys (tag 1); fs2: a number (tag 2).
    let (mut paths, mut cache) = fs_key_tags(path)?;
    paths.sort();
    cache.sort();
    assert_eq!((paths, cache), (vec![1, 1, 1, 1, 2], vec![1, 1, 1, 2]));
    assert_eq!(version_rows(path)?, (9, 6));
    {
        // d's second write adds its first write's row and its own.
        let store = Store::open(path)?;
        let d2 = file("/d.rs", "d2")?;
        let stat = stat_of("fs1", &[&d2])?;
        store.transact_with_stat(vec![Op::put(d2)], Origin::Cli, stat)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    }
    assert_eq!(version_rows(path)?, (10, 8));
    assert_eq!(format_version(path)?, strata::FORMAT_VERSION);
    assert_eq!(strata::FORMAT_VERSION, 10);
    let store = Store::open(path)?;
    let after = answers(&store, &ids)?;
    for i in [0, 2, 3] {
        assert_eq!(after[i], before[i]);
    }
    assert!(after[1].contains("\"b2\""), "{}", after[1]);
    assert!(after[4].contains("\"d2\""), "{}", after[4]);
    assert_eq!(
        store
            .as_of(ids[4], None, Some(TxId(3)))?
            .map(|v| v.info.tx_id),
        None,
        "d did not exist at tx 3"
    );
    // A rebuild writes format 5's rows from the first tx on: e's only write loses its row.
    store.fsck_rebuild()?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    assert_eq!(answers(&store, &ids)?, after);
    drop(store);
    assert_eq!(version_rows(path)?, (10, 7));
    Ok(())
}

/// Makes in `path` a format-4 store of the transactions `writes` (each a put of its files on
/// fs1, with their stat cache entries): long keys, every `versions_by_tx` row, no filesystem
/// tables.
fn format_4_store(path: &std::path::Path, writes: &[&[&Object]]) -> TestResult {
    drop(Store::create(path)?);
    write_format_4_rows(path, "fs1")?;
    {
        let store = Store::open(path)?;
        for files in writes {
            let ops = files.iter().map(|f| Op::put((*f).clone())).collect();
            store.transact_with_stat(ops, Origin::Cli, stat_of("fs1", files)?)?;
        }
    }
    drop_filesystem_tables(path)?;
    set_format_version(path, 4)
}

/// A backup of a format-4 store read by this build (opened read-only, never upgraded) is a copy
/// fsck finds sound: its long `paths` keys are read as they are, and the copy reopens and
/// answers as the store does.
#[test]
fn a_backup_of_a_format_4_store_is_sound() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    let (a, b, a2) = (
        file("/a.rs", "a1")?,
        file("/b.rs", "b1")?,
        file("/a.rs", "a2")?,
    );
    let ids = [a.id(), b.id()].map(str::to_string);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    format_4_store(path, &[&[&a, &b], &[&a2]])?;
    let copy = tempfile::tempdir()?;
    let copy = copy.path().join("copy");
    let (before, before_paths) = {
        let store = Store::open_read_only(path)?;
        let report = store.backup(&copy)?;
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        (
            answers(&store, &ids)?,
            path_answers(&store, "fs1", &["/a.rs", "/b.rs"])?,
        )
    };
    let store = Store::open(&copy)?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    assert_eq!(answers(&store, &ids)?, before);
    assert_eq!(
        path_answers(&store, "fs1", &["/a.rs", "/b.rs"])?,
        before_paths
    );
    Ok(())
}

/// A deferred store over a format-4 file with files and stat entries reads their long keys,
/// and its first write upgrades the file: the old files keep their keys, a new one on the same
/// filesystem too, and fsck finds the store sound.
#[test]
fn a_deferred_store_upgrades_a_format_4_store_with_files_at_its_first_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    let (a, b) = (file("/a.rs", "a1")?, file("/b.rs", "b1")?);
    format_4_store(path, &[&[&a, &b]])?;
    let paths = ["/a.rs", "/b.rs", "/c.rs"];
    let before = path_answers(&Store::open_read_only(path)?, "fs1", &paths)?;
    {
        let store = Store::open_deferred(path)?;
        assert_eq!(path_answers(&store, "fs1", &paths)?, before);
        let (a2, c) = (file("/a.rs", "a2")?, file("/c.rs", "c1")?);
        let stat = stat_of("fs1", &[&a2, &c])?;
        store.transact_with_stat(vec![Op::put(a2), Op::put(c.clone())], Origin::Cli, stat)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        assert_eq!(
            store.entity_at_path("fs1", "/c.rs")?.as_deref(),
            Some(c.id())
        );
        assert_eq!(store.stat_cache("fs1", "/")?.len(), 3);
        assert!(
            store
                .as_of(a.id(), None, None)?
                .and_then(|v| v.object)
                .is_some_and(|o| o.content() == Some("a2"))
        );
    }
    assert_eq!(format_version(path)?, strata::FORMAT_VERSION);
    assert_eq!(fs_key_tags(path)?, (vec![1; 3], vec![1; 3]));
    let store = Store::open(path)?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    Ok(())
}

/// Every bitemporal answer of entities written every way (a first write of one row or two,
/// two writes in one transaction, writes at earlier valid times, corrections, deletes,
/// evictions and writes after them), as of every transaction and valid time, with format 5's
/// rows (some `versions_by_tx` rows omitted).
fn bitemporal_answers(store: &Store, ids: &[&str], txs: u64) -> TestResult<Vec<String>> {
    let mut out = Vec::new();
    for id in ids {
        for tx in 1..=txs + 1 {
            let mut line = format!("{id} @tx{tx}:");
            for d in [None, Some(1), Some(2), Some(3), Some(4), Some(5), Some(6)] {
                let vt = d.map(day).transpose()?;
                let answer = match store.version_info(id, vt, Some(TxId(tx))) {
                    Ok(v) => format!("{:?}", v.map(|v| (v.tx_id, v.object_hash))),
                    Err(e) => format!("error {}", e.kind()),
                };
                line += &format!(" {answer}");
            }
            let history = store.history(
                id,
                HistoryQuery {
                    with_corrections: true,
                    as_of_tx: Some(TxId(tx)),
                    ..HistoryQuery::default()
                },
            );
            let history = match history {
                Ok(h) => format!(
                    "{:?}",
                    h.iter()
                        .map(|v| (
                            v.valid_from == v.tx_time,
                            v.tx_id,
                            v.object_hash,
                            v.valid_to.is_some()
                        ))
                        .collect::<Vec<_>>()
                ),
                Err(e) => format!("error {}", e.kind()),
            };
            line += &format!(" / {history}");
            out.push(line);
        }
    }
    Ok(out)
}

/// Format 5's omitted `versions_by_tx` rows answer as format 4's full rows do, for writes of
/// every kind: a store writing format 4's rows and one writing format 5's, given the same
/// transactions, answer the same as of every transaction and valid time, before and after a
/// rebuild.
#[test]
fn format_5_rows_answer_as_format_4_rows_for_every_kind_of_write() -> TestResult {
    let (four, five) = (tempfile::tempdir()?, tempfile::tempdir()?);
    drop(Store::create(four.path())?);
    write_format_4_rows(four.path(), "fs1")?;
    drop(Store::create(five.path())?);
    let ids: Vec<String> = ["/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"]
        .iter()
        .map(|p| file(p, "x").map(|o| o.id().to_string()))
        .collect::<TestResult<_>>()?;
    let id = |p: &str| -> TestResult<String> { Ok(file(p, "x")?.id().to_string()) };
    let txs: Vec<Vec<Op>> = vec![
        vec![
            // One row at an earlier valid time; one row now; two rows (a range).
            Op::put_at(file("/a", "a1")?, day(3)?, None),
            Op::put(file("/b", "b1")?),
            Op::put_at(file("/c", "c1")?, day(2)?, Some(day(4)?)),
            // Two writes in the first transaction: now twice; now, then earlier.
            Op::put(file("/d", "d1")?),
            Op::put(file("/e", "e1")?),
        ],
        vec![
            // Second writes in the first one's commit (a group): now; at an earlier time.
            Op::put(file("/d", "d2")?),
            Op::put_at(file("/e", "e2")?, day(1)?, None),
        ],
        vec![
            // A write at an earlier valid time; a correction of a past range.
            Op::put_at(file("/a", "a2")?, day(1)?, None),
            Op::put_at(file("/b", "b2")?, day(2)?, Some(day(3)?)),
            Op::put(file("/f", "f1")?),
            Op::put_at(file("/h", "h1")?, day(5)?, None),
        ],
        vec![Op::Evict { entity: id("/f")? }],
        vec![Op::put(file("/f", "f2")?), Op::put(file("/g", "g1")?)],
        vec![
            Op::put_at(file("/h", "h2")?, day(5)?, None),
            Op::delete(id("/b")?),
        ],
        vec![Op::put_at(file("/c", "c2")?, day(3)?, None)],
        // An eviction and a first write again in one commit (a group).
        vec![Op::Evict { entity: id("/g")? }],
        vec![Op::put(file("/g", "g2")?)],
    ];
    for dir in [four.path(), five.path()] {
        let store = Store::open(dir)?;
        let group = txs[..2]
            .iter()
            .map(|ops| strata::TxRequest {
                ops: ops.clone(),
                origin: Origin::Cli,
                stat: None,
            })
            .collect();
        for receipt in store.transact_group(group) {
            receipt?;
        }
        let last = txs.len() - 2;
        for ops in &txs[2..last] {
            store.transact(ops.clone(), Origin::Cli)?;
        }
        let group = txs[last..]
            .iter()
            .map(|ops| strata::TxRequest {
                ops: ops.clone(),
                origin: Origin::Cli,
                stat: None,
            })
            .collect();
        for receipt in store.transact_group(group) {
            receipt?;
        }
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    }
    let n = txs.len() as u64;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let want = bitemporal_answers(&Store::open_read_only(four.path())?, &ids, n)?;
    let (rows_four, rows_five) = (version_rows(four.path())?, version_rows(five.path())?);
    assert!(rows_five.1 < rows_four.1, "{rows_four:?} {rows_five:?}");
    assert_eq!(
        bitemporal_answers(&Store::open_read_only(five.path())?, &ids, n)?,
        want
    );
    let store = Store::open(five.path())?;
    assert_eq!(bitemporal_answers(&store, &ids, n)?, want);
    store.fsck_rebuild()?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    assert_eq!(bitemporal_answers(&store, &ids, n)?, want);
    drop(store);
    // The store of format 4's rows, rebuilt, has format 5's and answers the same.
    let store = Store::open(four.path())?;
    store.fsck_rebuild()?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    assert_eq!(bitemporal_answers(&store, &ids, n)?, want);
    drop(store);
    assert_eq!(version_rows(four.path())?, version_rows(five.path())?);
    Ok(())
}

#[test]
fn fsck_finds_a_versions_by_tx_row_format_5_does_not_write_and_one_it_lacks() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    let (one, two) = (file("/one.rs", "1")?, file("/two.rs", "2a")?);
    {
        let store = Store::create(path)?;
        store.transact(vec![Op::put(one), Op::put(two)], Origin::Cli)?;
        store.transact(vec![Op::put(file("/two.rs", "2b")?)], Origin::Cli)?;
        assert!(store.fsck()?.is_empty());
    }
    // one: 1 row, no by_tx row; two: 2 rows, 2 by_tx rows.
    assert_eq!(version_rows(path)?, (3, 2));
    type ByTxRow = ((u64, u64), (i64, u64));
    let rows = |dir: &std::path::Path| -> TestResult<Vec<ByTxRow>> {
        use redb::{ReadableDatabase, ReadableTable};
        let db = redb::Database::open(dir.join("store.redb"))?;
        let tx = db.begin_read()?;
        let table = tx.open_table(BY_TX)?;
        let mut out = Vec::new();
        for entry in table.iter()? {
            let (k, v) = entry?;
            out.push((k.value(), v.value()));
        }
        Ok(out)
    };
    let by_tx = rows(path)?;
    let ((two_eid, first_tx), first) = by_tx[0];
    // Lacking: two's first write's row.
    {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        tx.open_table(BY_TX)?.remove((two_eid, first_tx))?;
        tx.commit()?;
    }
    {
        let store = Store::open(path)?;
        let findings = store.fsck()?;
        assert!(
            findings.iter().any(|f| f.kind == "versions_by_tx"),
            "{findings:?}"
        );
    }
    // Extra: a row for one's only write (format 5 writes none), two's put back.
    let one_eid = if two_eid == 1 { 2 } else { 1 };
    {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        {
            let mut table = tx.open_table(BY_TX)?;
            table.insert((two_eid, first_tx), first)?;
            let (_, (vt, _)) = by_tx[0];
            table.insert((one_eid, first_tx), (vt, first_tx))?;
        }
        tx.commit()?;
    }
    let store = Store::open(path)?;
    let findings = store.fsck()?;
    let kinds: Vec<&str> = findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["versions_by_tx"], "{findings:?}");
    assert_eq!(findings[0].tx, Some(first_tx), "{findings:?}");
    Ok(())
}

#[test]
fn fsck_finds_filesystem_numbers_that_disagree_with_each_other_or_with_the_rows() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    {
        let store = Store::create(path)?;
        store.transact(vec![Op::put(file("/a.rs", "a")?)], Origin::Cli)?;
        assert!(store.fsck()?.is_empty());
        assert_eq!(
            store.entity_at_path("fs1", "/a.rs")?.as_deref(),
            Some(file("/a.rs", "a")?.id())
        );
    }
    // fs1 has number 1: its paths key is the tag 2 and 1.
    assert_eq!(fs_key_tags(path)?.0, vec![2]);
    let fs1 = {
        let mut key = vec![1u8];
        key.extend_from_slice(b"fs1");
        key
    };
    let kinds = |path: &std::path::Path| -> TestResult<Vec<&'static str>> {
        let store = Store::open(path)?;
        Ok(store.fsck()?.iter().map(|f| f.kind).collect())
    };
    // Number 1 named as another filesystem's: the two tables disagree.
    {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        tx.open_table(FILESYSTEM_IDS)?
            .insert(1, b"\x01fs9".as_slice())?;
        tx.commit()?;
    }
    assert!(kinds(path)?.contains(&"filesystems"), "{:?}", kinds(path)?);
    // fs1 renumbered 2 in both tables: they agree, but the rows keyed by number 1 are not the
    // ones the log makes through them.
    {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        {
            let mut ids = tx.open_table(FILESYSTEM_IDS)?;
            ids.remove(1)?;
            ids.insert(2, fs1.as_slice())?;
            tx.open_table(FILESYSTEMS)?.insert(fs1.as_slice(), 2)?;
        }
        tx.commit()?;
    }
    let found = kinds(path)?;
    assert!(!found.contains(&"filesystems"), "{found:?}");
    assert!(found.contains(&"paths"), "{found:?}");
    Ok(())
}

/// `fsck --repair` (a rebuild) repairs the filesystem numbers fsck finds disagreeing, as its
/// findings say it does: a number `filesystem_ids` names for another filesystem, or lost from
/// it (where the next filesystem would get the same number).
#[test]
fn a_rebuild_repairs_filesystem_numbers_that_disagree() -> TestResult {
    let other = |path: &str| -> TestResult<Object> {
        Ok(Object::file_text(
            FilesystemSource {
                filesystem_id: "fs2".into(),
                path: path.into(),
            },
            "other".into(),
        )?)
    };
    for lost in [false, true] {
        let dir = tempfile::tempdir()?;
        let path = dir.path();
        let a = file("/a.rs", "a")?;
        Store::create(path)?.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        {
            let db = redb::Database::open(path.join("store.redb"))?;
            let tx = db.begin_write()?;
            {
                let mut ids = tx.open_table(FILESYSTEM_IDS)?;
                match lost {
                    true => drop(ids.remove(1)?),
                    false => drop(ids.insert(1, b"\x01fs9".as_slice())?),
                }
            }
            tx.commit()?;
        }
        let store = Store::open(path)?;
        let found: Vec<&str> = store.fsck()?.iter().map(|f| f.kind).collect();
        assert!(found.contains(&"filesystems"), "{found:?}");
        store.fsck_rebuild()?;
        assert!(store.fsck()?.is_empty(), "lost {lost}: {:?}", store.fsck()?);
        // A new filesystem gets a number of its own.
        let b = other("/a.rs")?;
        store.transact(vec![Op::put(b.clone())], Origin::Cli)?;
        assert!(store.fsck()?.is_empty(), "lost {lost}: {:?}", store.fsck()?);
        assert_eq!(
            store.entity_at_path("fs1", "/a.rs")?.as_deref(),
            Some(a.id())
        );
        assert_eq!(
            store.entity_at_path("fs2", "/a.rs")?.as_deref(),
            Some(b.id())
        );
    }
    Ok(())
}

#[test]
fn a_format_5_store_made_before_filesystem_numbers_keeps_its_long_keys() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    drop(Store::create(path)?);
    write_format_4_rows(path, "fs1")?;
    let a = file("/a.rs", "a")?;
    Store::open(path)?.transact(vec![Op::put(a.clone())], Origin::Cli)?;
    drop_filesystem_tables(path)?;
    set_format_version(path, 5)?;
    let store = Store::open(path)?;
    store.transact(vec![Op::put(file("/b.rs", "b")?)], Origin::Cli)?;
    assert_eq!(
        store.entity_at_path("fs1", "/a.rs")?.as_deref(),
        Some(a.id())
    );
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    drop(store);
    assert_eq!(fs_key_tags(path)?.0, vec![1, 1]);
    Ok(())
}

const ENTITIES: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("entities");
const ENTITY_IDS: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("entity_ids");

/// The layout of each entity of the store file in `dir`, in eid order: the format byte of its
/// `entities` row (1 whole, 2 a file's number alone) and the tag of its `entity_ids` value (0
/// a hash id, 1 a text id, 3 a file's source).
fn entity_layouts(dir: &std::path::Path) -> TestResult<Vec<(u8, u8)>> {
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_read()?;
    let mut rows = std::collections::BTreeMap::new();
    for entry in tx.open_table(ENTITY_IDS)?.iter()? {
        let (eid, value) = entry?;
        rows.insert(eid.value(), (0, value.value()[0]));
    }
    for entry in tx.open_table(ENTITIES)?.iter()? {
        let (_, value) = entry?;
        let value = value.value();
        // Either layout: the eid follows the format byte (a bincode varint, one byte < 251).
        let eid = u64::from(value[1]);
        rows.entry(eid).or_insert((0, 0)).0 = value[0];
    }
    Ok(rows.into_values().collect())
}

/// What the store says of entities `ids`: `entity` (type and source) and whether each exists.
fn entity_answers(store: &Store, ids: &[&str]) -> TestResult<Vec<String>> {
    let mut out = Vec::new();
    for id in ids {
        out.push(format!("{:?}", store.entity(id)?));
    }
    let mut live: Vec<String> = store
        .live_entities()?
        .into_iter()
        .map(|e| format!("{e:?}"))
        .collect();
    live.sort();
    out.extend(live);
    Ok(out)
}

#[test]
fn a_format_5_store_is_read_as_it_is_and_keeps_new_files_sources_once_after_its_last_tx()
-> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    drop(Store::create(path)?);
    {
        // Format 5's entity rows: whole, the id in entity_ids.
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        tx.open_table(META)?
            .remove("file_sources_in_entity_ids_since")?;
        tx.commit()?;
    }
    let (a, b, c) = (
        file("/a.rs", "a1")?,
        file("/b.rs", "b1")?,
        prompt("p", "p1")?,
    );
    let (d, e) = (file("/d.rs", "d1")?, file("/e.rs", "e1")?);
    let ids = [a.id(), b.id(), c.id(), d.id(), e.id()].map(str::to_string);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let fs1_paths = ["/a.rs", "/b.rs", "/d.rs", "/e.rs"];
    {
        let store = Store::open(path)?;
        let stat = stat_of("fs1", &[&a, &b])?;
        store.transact_with_stat(vec![Op::put(a), Op::put(b)], Origin::Cli, stat)?;
        store.transact(vec![Op::put(c)], Origin::Cli)?;
    }
    assert_eq!(entity_layouts(path)?, [(1, 0), (1, 0), (1, 1)]);
    set_format_version(path, 5)?;
    let (before, before_entities, before_paths) = {
        let store = Store::open_read_only(path)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        (
            answers(&store, &ids[..3])?,
            entity_answers(&store, &ids[..3])?,
            path_answers(&store, "fs1", &fs1_paths)?,
        )
    };
    assert_eq!(format_version(path)?, 5, "a reader changes nothing");
    // A backup of the format-5 file read as it is keeps its layout and is sound.
    let copy = tempfile::tempdir()?;
    let copy = copy.path().join("copy");
    {
        let store = Store::open_read_only(path)?;
        let report = store.backup(&copy)?;
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }
    assert_eq!(entity_layouts(&copy)?, [(1, 0), (1, 0), (1, 1)]);
    {
        let store = Store::open(path)?;
        assert_eq!(answers(&store, &ids[..3])?, before);
        assert_eq!(entity_answers(&store, &ids[..3])?, before_entities);
        assert_eq!(path_answers(&store, "fs1", &fs1_paths)?, before_paths);
        // Format 6's rows from tx 3 on: d and e keep their sources once; a's second write and
        // an evict of b leave the old rows as they were (b's go).
        let stat = stat_of("fs1", &[&d, &e])?;
        store.transact_with_stat(vec![Op::put(d), Op::put(e)], Origin::Cli, stat)?;
        let a2 = file("/a.rs", "a2")?;
        let stat = stat_of("fs1", &[&a2])?;
        store.transact_with_stat(vec![Op::put(a2)], Origin::Cli, stat)?;
        store.evict(ids[1], Origin::Cli)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    }
    assert_eq!(format_version(path)?, strata::FORMAT_VERSION);
    assert_eq!(strata::FORMAT_VERSION, 10);
    assert_eq!(entity_layouts(path)?, [(1, 0), (1, 1), (2, 3), (2, 3)]);
    let store = Store::open(path)?;
    // e goes too: its rows of format 6.
    store.evict(ids[4], Origin::Cli)?;
    let d2 = file("/d.rs", "d2")?;
    let stat = stat_of("fs1", &[&d2])?;
    store.transact_with_stat(vec![Op::put(d2)], Origin::Cli, stat)?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    let live = [ids[0], ids[2], ids[3]];
    let after = answers(&store, &live)?;
    let after_entities = entity_answers(&store, &live)?;
    let after_paths = path_answers(&store, "fs1", &fs1_paths)?;
    assert!(after[0].contains("\"a2\""), "{}", after[0]);
    assert_eq!(after[1], before[2]);
    assert!(after[2].contains("\"d2\""), "{}", after[2]);
    assert!(after_entities[2].contains("/d.rs"), "{after_entities:?}");
    assert!(after_paths.contains(ids[3]), "{after_paths}");
    drop(store);
    assert_eq!(entity_layouts(path)?, [(1, 0), (1, 1), (2, 3)]);
    let store = Store::open(path)?;
    // A rebuild writes format 6's rows from the first tx on: a's keeps its source once too.
    store.fsck_rebuild()?;
    assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    assert_eq!(answers(&store, &live)?, after);
    assert_eq!(entity_answers(&store, &live)?, after_entities);
    drop(store);
    let mut layouts = entity_layouts(path)?;
    layouts.sort();
    assert_eq!(layouts, [(1, 1), (2, 3), (2, 3)]);
    let store = Store::open(path)?;
    // The same paths and listing (a rebuild empties the stat cache, the last line).
    let rebuilt = path_answers(&store, "fs1", &fs1_paths)?;
    assert_eq!(
        rebuilt.rsplit_once('\n').map(|(paths, _)| paths),
        after_paths.rsplit_once('\n').map(|(paths, _)| paths)
    );
    Ok(())
}

/// fsck compares both entity tables with the rows the log makes: an `entity_ids` row lost or
/// one too many, and an entity row of the other layout, are findings; a rebuild repairs them.
#[test]
fn fsck_finds_an_entity_row_too_many_too_few_or_of_the_other_layout() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    let (one, two) = (file("/one.rs", "1")?, file("/two.rs", "2")?);
    let ids = [one.id().to_string(), two.id().to_string()];
    Store::create(path)?.transact(vec![Op::put(one), Op::put(two)], Origin::Cli)?;
    assert_eq!(entity_layouts(path)?, [(2, 3), (2, 3)]);
    let edit = |f: &dyn Fn(&redb::WriteTransaction) -> TestResult| -> TestResult {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        f(&tx)?;
        tx.commit()?;
        Ok(())
    };
    let kinds = || -> TestResult<Vec<&'static str>> {
        let store = Store::open(path)?;
        let mut kinds: Vec<&str> = store.fsck()?.iter().map(|f| f.kind).collect();
        kinds.dedup();
        store.fsck_rebuild()?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        Ok(kinds)
    };
    // Too few: entity 1's source lost; its reads fail as damage.
    edit(&|tx| {
        tx.open_table(ENTITY_IDS)?.remove(1)?;
        Ok(())
    })?;
    {
        let store = Store::open(path)?;
        let err = store.entity(&ids[0]).err().ok_or("read without a source")?;
        assert_eq!(err.kind(), "corrupt", "{err}");
    }
    assert!(kinds()?.contains(&"entity_ids"));
    // Too many: a number no entity has.
    edit(&|tx| {
        tx.open_table(ENTITY_IDS)?
            .insert(9, [3u8, 2, 2, 1, 2, b'/', b'x'].as_slice())?;
        Ok(())
    })?;
    assert_eq!(kinds()?, ["entity_ids"]);
    // The other layout: two's whole row (format 5's) where the log makes format 6's, taken
    // from a store that writes format 5's rows.
    let five = tempfile::tempdir()?;
    drop(Store::create(five.path())?);
    write_format_4_rows(five.path(), "fs0")?;
    Store::open(five.path())?.transact(
        vec![
            Op::put(file("/one.rs", "1")?),
            Op::put(file("/two.rs", "2")?),
        ],
        Origin::Cli,
    )?;
    let (key, whole) = {
        use redb::{ReadableDatabase, ReadableTable};
        let db = redb::Database::open(five.path().join("store.redb"))?;
        let tx = db.begin_read()?;
        let table = tx.open_table(ENTITIES)?;
        let mut found = None;
        for entry in table.iter()? {
            let (k, v) = entry?;
            if v.value()[1] == 2 {
                found = Some((k.value().to_vec(), v.value().to_vec()));
            }
        }
        found.ok_or("no entity 2")?
    };
    assert_eq!(whole[0], 1, "a whole row");
    edit(&|tx| {
        tx.open_table(ENTITIES)?
            .insert(key.as_slice(), whole.as_slice())?;
        Ok(())
    })?;
    {
        // The whole row reads as it says.
        let store = Store::open(path)?;
        assert!(format!("{:?}", store.entity(&ids[1])?).contains("/two.rs"));
    }
    assert_eq!(kinds()?, ["entities"]);
    Ok(())
}

const BLOB_CHUNKS: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("blob_chunks");

/// The lengths of the blob chunks of the store file in `dir`, and its `meta` chunk size.
fn blob_chunks(dir: &std::path::Path) -> TestResult<(Vec<usize>, Option<u64>)> {
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(dir.join("store.redb"))?;
    let tx = db.begin_read()?;
    let mut lengths = Vec::new();
    for entry in tx.open_table(BLOB_CHUNKS)?.iter()? {
        lengths.push(entry?.1.value().len());
    }
    let size = match tx.open_table(META)?.get("blob_chunk_bytes")? {
        Some(v) => Some(u64::from_le_bytes(v.value().try_into()?)),
        None => None,
    };
    Ok((lengths, size))
}

/// Whether every chunk but the last is `size` bytes long (and the last no longer).
fn chunks_of(lengths: &[usize], size: usize) -> bool {
    match lengths.split_last() {
        Some((last, full)) => *last <= size && full.iter().all(|l| *l == size),
        None => true,
    }
}

/// `len` characters of text that zstd hardly shrinks (hex of a hash chain), from `seed`.
fn long_text(seed: u32, len: usize) -> String {
    let mut out = String::new();
    let mut h = sha256(&seed.to_le_bytes()).0;
    while out.len() < len {
        out.push_str(&hex::encode(h));
        h = sha256(&h).0;
    }
    out.truncate(len);
    out
}

/// The content of `id` visible now.
fn content_now(store: &Store, id: &str) -> TestResult<Option<String>> {
    Ok(store
        .as_of(id, None, None)?
        .and_then(|v| v.object)
        .and_then(|o| o.content().map(str::to_string)))
}

#[test]
fn a_new_store_cuts_its_blob_stream_in_4080_byte_chunks() -> TestResult {
    let dir = tempfile::tempdir()?;
    let a = file("/a.rs", &long_text(1, 30_000))?;
    {
        let store = Store::create(dir.path())?;
        store.transact(vec![Op::put(a.clone())], Origin::Cli)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
    }
    let (lengths, size) = blob_chunks(dir.path())?;
    assert_eq!(size, Some(4080));
    assert!(
        lengths.len() >= 3 && chunks_of(&lengths, 4080),
        "{lengths:?}"
    );
    let store = Store::open(dir.path())?;
    assert_eq!(content_now(&store, a.id())?.as_deref(), a.content());
    Ok(())
}

/// A store made before format 7 keeps its 4 032-byte chunks: it is read, written, evicted
/// from, backed up and rebuilt with them, and fsck finds a chunk of the wrong length.
#[test]
fn a_format_6_store_keeps_its_4032_byte_blob_chunks() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path();
    drop(Store::create(path)?);
    {
        // Format 6's stream: no chunk size in `meta`.
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        tx.open_table(META)?.remove("blob_chunk_bytes")?;
        tx.commit()?;
    }
    let (a, b, c) = (
        file("/a.rs", &long_text(1, 20_000))?,
        file("/b.rs", &long_text(2, 20_000))?,
        file("/c.rs", &long_text(3, 9_000))?,
    );
    Store::open(path)?.transact(vec![Op::put(a.clone()), Op::put(b.clone())], Origin::Cli)?;
    set_format_version(path, 6)?;
    let (lengths, size) = blob_chunks(path)?;
    assert_eq!(size, None);
    assert!(
        lengths.len() >= 4 && chunks_of(&lengths, 4032),
        "{lengths:?}"
    );
    {
        let store = Store::open_read_only(path)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        assert_eq!(content_now(&store, a.id())?.as_deref(), a.content());
    }
    assert_eq!(format_version(path)?, 6, "a reader changes nothing");
    let copy = tempfile::tempdir()?;
    let copy = copy.path().join("copy");
    {
        let store = Store::open_read_only(path)?;
        let report = store.backup(&copy)?;
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }
    assert_eq!(blob_chunks(&copy)?, (lengths, None));
    assert_eq!(
        content_now(&Store::open(&copy)?, b.id())?.as_deref(),
        b.content()
    );
    {
        let store = Store::open(path)?;
        store.transact(vec![Op::put(c.clone())], Origin::Cli)?;
        store.evict(a.id(), Origin::Cli)?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        assert_eq!(content_now(&store, b.id())?.as_deref(), b.content());
        assert_eq!(content_now(&store, c.id())?.as_deref(), c.content());
        store.fsck_rebuild()?;
        assert!(store.fsck()?.is_empty(), "{:?}", store.fsck()?);
        assert_eq!(content_now(&store, c.id())?.as_deref(), c.content());
    }
    assert_eq!(format_version(path)?, strata::FORMAT_VERSION);
    let (lengths, size) = blob_chunks(path)?;
    assert_eq!(size, None);
    assert!(chunks_of(&lengths, 4032), "{lengths:?}");
    // A chunk of the wrong length: fsck names it.
    {
        let db = redb::Database::open(path.join("store.redb"))?;
        let tx = db.begin_write()?;
        {
            use redb::ReadableTable;
            let mut chunks = tx.open_table(BLOB_CHUNKS)?;
            let first = chunks
                .first()?
                .map(|(k, v)| (k.value(), v.value().to_vec()));
            let (no, mut bytes) = first.ok_or("no chunk")?;
            bytes.truncate(4000);
            chunks.insert(no, bytes.as_slice())?;
        }
        tx.commit()?;
    }
    let store = Store::open(path)?;
    let kinds: Vec<&str> = store.fsck()?.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&"blob_chunk"), "{kinds:?}");
    Ok(())
}

#[test]
fn another_format_version_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    drop(Store::create(dir.path())?);
    set_format_version(dir.path(), 99)?;
    let err = error_of(Store::open(dir.path()))?;
    assert!(
        matches!(
            err,
            Error::FormatVersion {
                found: 99,
                supported: strata::FORMAT_VERSION,
                ..
            }
        ),
        "{err}"
    );
    let missing = error_of(Store::open(dir.path().join("nope")))?;
    assert!(matches!(missing, Error::NotFound { .. }), "{missing}");
    assert!(
        Store::create(dir.path()).is_err(),
        "create refuses an existing store"
    );
    Ok(())
}

#[test]
fn a_second_process_gets_store_locked_and_a_stale_lock_never_blocks() -> TestResult {
    let dir = tempfile::tempdir()?;
    drop(Store::create(dir.path())?);
    let (mut child, lines) = spawn_child(ChildMode::Hold, &redb_on_disk()?, dir.path())?;
    let mut ready = false;
    for line in lines {
        if line?.ends_with("ready") {
            ready = true;
            break;
        }
    }
    assert!(ready, "the child never held the store");
    let err = error_of(Store::open(dir.path()))?;
    match &err {
        Error::StoreLocked { path, holder } => {
            assert_eq!(path, &dir.path().join("store.redb"));
            assert!(holder.contains(&format!("pid={}", child.id())), "{holder}");
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("store.redb"), "{err}");
    child.kill()?;
    child.wait()?;
    assert!(
        dir.path().join("store.lock").exists(),
        "stale lock file left by SIGKILL"
    );
    let store = Store::open(dir.path())?;
    let lock = std::fs::read_to_string(dir.path().join("store.lock"))?;
    assert!(
        lock.contains(&format!("pid={}", std::process::id())),
        "{lock}"
    );
    drop(store);
    Ok(())
}

/// A child process writing transactions is killed (SIGKILL) at a pseudo-random moment, twenty
/// times over one store: every transaction it acknowledged is there when the store is opened
/// again, readable at its own tx, and fsck is clean.
fn sigkill_loses_no_acknowledged_transaction(backend: &dyn DurableFactory) -> TestResult {
    let place = tempfile::tempdir()?;
    drop(backend.open(place.path())?);
    let mut acked_max = 0;
    for round in 0..20u64 {
        let (mut child, lines) = spawn_child(ChildMode::Write, backend, place.path())?;
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in lines {
                let Ok(line) = line else { break };
                if let Some(n) = line.split("ack ").nth(1) {
                    acks.push(n.parse::<u64>()?);
                }
            }
            TestResult::Ok(acks)
        });
        // A pseudo-random moment: between 30 and 230 ms after the start.
        let wait = 30 + (round * 7919 + 13) % 200;
        std::thread::sleep(Duration::from_millis(wait));
        child.kill()?;
        child.wait()?;
        let acks = reader.join().map_err(|_| "the reader thread panicked")??;
        let store = backend.open(place.path())?;
        let head = store.chain_head()?.map_or(0, |(tx, _)| tx.0);
        if let Some(&last) = acks.last() {
            assert!(
                head >= last,
                "round {round}: acknowledged tx {last} lost (head {head})"
            );
            acked_max = last;
        }
        for &tx in acks.iter().rev().take(3) {
            let record = &store.log(Some(TxId(tx - 1)), 1)?[0];
            assert_eq!(record.tx_id, TxId(tx));
            let prompt = store
                .as_of("system_prompt:crash", None, Some(TxId(tx)))?
                .ok_or("no version visible")?;
            assert!(prompt.object.is_some());
        }
        assert_eq!(store.fsck()?, vec![], "round {round}");
    }
    assert!(acked_max > 0, "the children acknowledged something");
    Ok(())
}
backend_tests!(sigkill_loses_no_acknowledged_transaction: redb_on_disk, postgres);

#[test]
fn hash_of_bytes_is_the_blob_key() -> TestResult {
    let store = Store::in_memory()?;
    let f = file("/k.txt", "key me")?;
    store.transact(vec![Op::put(f)], Origin::Cli)?;
    assert_eq!(
        store
            .content(&sha256(b"key me"))?
            .ok_or("no stored content")?,
        b"key me"
    );
    Ok(())
}

/// The size the store gives each version (`version_sizes`, from the content record's header)
/// is the length of its content read whole and checked, as before: empty, short and long text
/// (compressed, across chunks), binary kept compressed and raw, incompressible bytes stored raw
/// (short, and long enough to be probed), a chat whose transcript grows a turn at a time (suffix
/// records on redb), a file too large to keep (its size on the row), a stub and a deletion. And
/// `listings` gives each file what `version_info`, `history` and `version_sizes` give one by one.
fn version_sizes_are_the_lengths_of_the_contents_read_whole(
    backend: &dyn StoreFactory,
) -> TestResult {
    let store = backend.fresh()?;
    let source = |path: &str| FilesystemSource {
        filesystem_id: "fs1".into(),
        path: path.into(),
    };
    let long_text: String = (0..6000)
        .map(|n| format!("line {n}: the same words again\n"))
        .collect();
    let mut puts = vec![
        Op::put(file("/empty.txt", "")?),
        Op::put(file("/short.txt", "fn main() {}\n")?),
        Op::put(file("/long.txt", &long_text)?),
        Op::put(Object::file_stub(source("/stub.txt"))?),
    ];
    let binaries = [
        ("/zeros.bin", [vec![0u8; 5000], b"tail".to_vec()].concat()),
        ("/small.bin", vec![0xff, 0, 1, 2, 0xfe]),
        ("/random.bin", [vec![0u8], incompressible(3000, 7)].concat()),
        (
            "/probed.bin",
            [vec![0u8], incompressible(300 * 1024, 8)].concat(),
        ),
        // Past the signed-probe length with a gzip signature: probed on its first bytes and
        // stored raw without compressing the rest.
        (
            "/signed.gz",
            [vec![0x1f, 0x8b, 0x08], incompressible(20_000, 9)].concat(),
        ),
    ];
    for (path, bytes) in &binaries {
        let mut put = Put::new(Object::file_bytes(source(path), bytes.clone())?);
        put.bytes = Some(bytes.clone());
        puts.push(Op::Put(Box::new(put)));
    }
    let mut big = Put::new(Object::file_omitted(
        source("/big.iso"),
        Some(sha256(b"not kept")),
        strata::object::ContentOmitted::TooLarge,
    )?);
    big.size = Some(123_456_789);
    puts.push(Op::Put(Box::new(big)));
    store.transact(puts, Origin::Cli)?;
    let gone = file("/gone.txt", "soon deleted")?;
    store.transact(vec![Op::put(gone.clone())], Origin::Cli)?;
    store.transact(vec![Op::delete(gone.id())], Origin::Cli)?;
    let turns: Vec<_> = (0..24).map(chat_turn).collect();
    for k in 1..=turns.len() {
        let chat = Object::chat("sizes", turns[..k].to_vec())?;
        store.transact(vec![Op::put(chat)], Origin::Session)?;
    }

    let mut ids: Vec<String> = store
        .paths_under("fs1", "/")?
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    ids.push("chat:sizes".into());
    let mut sizes = Vec::new();
    for id in &ids {
        let history = store.history(id, HistoryQuery::default())?;
        let got = store.version_sizes(id, &history)?;
        for (info, size) in history.iter().zip(got) {
            let version = store
                .as_of(id, Some(info.valid_from), Some(info.tx_id))?
                .ok_or("no version visible")?;
            let whole = match &version.object {
                None => None,
                Some(object) => match (object.content(), object.file_hash()) {
                    (Some(content), _) => Some(content.len() as u64),
                    (None, Some(kept)) => match store.content(kept)? {
                        Some(bytes) => Some(bytes.len() as u64),
                        None => info.size,
                    },
                    (None, None) => None,
                },
            };
            assert_eq!(size, whole, "{id} at tx {}", info.tx_id.0);
            sizes.push((id.clone(), size));
        }
    }
    let expect = |id: &str| -> Vec<Option<u64>> {
        sizes
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, size)| *size)
            .collect()
    };
    let id_of = |path: &str| -> TestResult<String> {
        Ok(store
            .entity_at_path("fs1", path)?
            .ok_or("no entity there")?)
    };
    assert_eq!(expect(&id_of("/empty.txt")?), [Some(0)]);
    assert_eq!(expect(&id_of("/stub.txt")?), [None]);
    assert_eq!(expect(&id_of("/big.iso")?), [Some(123_456_789)]);
    assert_eq!(expect(&id_of("/gone.txt")?), [Some(12), None]);
    assert_eq!(expect(&id_of("/probed.bin")?), [Some(300 * 1024 + 1)]);
    assert_eq!(expect(&id_of("/signed.gz")?), [Some(20_003)]);
    assert_eq!(expect("chat:sizes").len(), turns.len());

    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    // Now, and as of past transactions and valid times (`ls --as-of`, `--valid-at`): before
    // and after the deletion, and in the chat's growth.
    let mut points = vec![(None, None)];
    for id in [id_of("/gone.txt")?, "chat:sizes".to_string()] {
        for info in store.history(&id, HistoryQuery::default())? {
            points.push((None, Some(info.tx_id)));
            points.push((Some(info.valid_from), None));
            points.push((Some(info.valid_from), Some(info.tx_id)));
        }
    }
    for (valid, tx) in points {
        for deleted in [false, true] {
            let listed = store.listings(&refs, valid, tx, deleted)?;
            for (id, listing) in ids.iter().zip(listed) {
                let one_by_one = match store.version_info(id, valid, tx)? {
                    Some(info) if deleted || !info.is_tombstone() => Some(strata::Listing {
                        versions: store
                            .history(id, strata::Listing::history_query(valid, tx))?
                            .len() as u64,
                        size: store
                            .version_sizes(id, std::slice::from_ref(&info))?
                            .pop()
                            .flatten(),
                        info,
                    }),
                    _ => None,
                };
                assert_eq!(
                    listing?, one_by_one,
                    "{id} at {valid:?} as of {tx:?}, deleted files listed: {deleted}"
                );
            }
        }
    }
    Ok(())
}
backend_tests!(version_sizes_are_the_lengths_of_the_contents_read_whole: redb_in_memory, redb_on_disk, postgres);

/// Turn `n` of a test chat: ~200 characters of hex that zstd cannot shrink to nothing.
fn chat_turn(n: usize) -> strata::object::Turn {
    strata::object::Turn {
        role: if n.is_multiple_of(2) {
            strata::object::Role::User
        } else {
            strata::object::Role::Assistant
        },
        content: (0..24)
            .map(|k| format!("{:08x}", ((n * 31 + k) as u32).wrapping_mul(2_654_435_761)))
            .collect::<Vec<_>>()
            .join(" "),
        toolcall_refs: None,
    }
}

/// (blobs, documents, stored bytes) of `store`: all zero once everything is evicted.
fn stored_counts(store: &Store) -> TestResult<(u64, u64, u64)> {
    let stats = store.stats()?;
    Ok((stats.blobs, stats.documents, stats.stored_bytes))
}

/// The content of chat `id` as of transaction `tx`.
fn transcript_at(store: &Store, id: &str, tx: TxId) -> TestResult<String> {
    let v = store
        .as_of(id, None, Some(tx))?
        .ok_or("no version visible")?;
    let object = v.object.ok_or("a tombstone")?;
    Ok(object.content().ok_or("no content")?.to_string())
}

/// A chat of `STRATA_TRANSCRIPT_TURNS` turns (default 60; 300 for a thorough run) committed a
/// turn at a time on disk, then a fork sharing its first third: a commit stores less than 15
/// turns' worth of transcript (a twentieth of the whole chat at 300 turns) however long the chat.
#[test]
fn a_growing_chat_transcript_costs_its_new_turns_not_the_whole_chat() -> TestResult {
    let count = env_count("STRATA_TRANSCRIPT_TURNS", 60)?.max(3);
    let n = usize::try_from(count)?;
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path())?;
    let turns: Vec<_> = (0..n).map(chat_turn).collect();
    let mut txs = Vec::new();
    let mut per_commit = Vec::new();
    let mut stored = store.stats()?.stored_bytes;
    for k in 1..=turns.len() {
        let chat = Object::chat("one", turns[..k].to_vec())?;
        txs.push(store.transact(vec![Op::put(chat)], Origin::Session)?.tx_id);
        let now = store.stats()?.stored_bytes;
        per_commit.push(now - stored);
        stored = now;
    }
    let whole = strata::object::transcript(&turns).len() as u64;
    let late = &mut per_commit[2 * n / 3..].to_vec();
    late.sort_unstable();
    let median = late[late.len() / 2];
    assert!(
        median * 20 * u64::from(count) < whole * 300,
        "a commit of one turn stores {median} bytes; the transcript of {n} turns is {whole}"
    );
    // Every version reads back whole, as of its own transaction.
    for (k, tx) in txs
        .iter()
        .enumerate()
        .step_by(13)
        .chain([(n - 1, &txs[n - 1])])
    {
        assert_eq!(
            transcript_at(&store, "chat:one", *tx)?,
            strata::object::transcript(&turns[..=k]),
            "version {k}"
        );
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());

    // A second chat sharing the first third of the turns shares their blobs, then diverges as
    // many turns; evicting the first chat leaves every version of the second readable, and
    // evicting both leaves nothing.
    let mut other: Vec<_> = turns[..n / 3].to_vec();
    other.extend((1000..1000 + n / 3).map(chat_turn));
    let mut other_txs = Vec::new();
    for k in 1..=other.len() {
        let chat = Object::chat("one", other[..k].to_vec())?;
        // Same session ref, another entity id: a chat of a forked session.
        other_txs.push(
            store
                .transact(vec![chat_as("chat:two", &chat)?], Origin::Session)?
                .tx_id,
        );
    }
    store.evict("chat:one", Origin::Cli)?;
    for (k, tx) in other_txs.iter().enumerate().step_by(7) {
        assert_eq!(
            transcript_at(&store, "chat:two", *tx)?,
            strata::object::transcript(&other[..=k]),
            "version {k}"
        );
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    store.evict("chat:two", Origin::Cli)?;
    assert_eq!(
        store.stats()?.blobs,
        0,
        "evict released every suffix and base"
    );
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    Ok(())
}

#[test]
fn a_big_change_starts_a_new_delta_chain_so_later_commits_stay_small() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path())?;
    let turns: Vec<_> = (0..200).map(chat_turn).collect();
    let put = |k: usize| -> TestResult<u64> {
        let before = store.stats()?.stored_bytes;
        let chat = Object::chat("big", turns[..k].to_vec())?;
        store.transact(vec![Op::put(chat)], Origin::Session)?;
        Ok(store.stats()?.stored_bytes - before)
    };
    for k in 1..=100 {
        put(k)?;
    }
    // Twenty turns at once, a sixth of the chat: stored whole (document and transcript), so that
    // the deltas of the powers of two on the old chain's start do not carry it again.
    let whole = strata::object::transcript(&turns[..120]).len() as u64;
    let big = put(120)?;
    assert!(
        big > whole,
        "the big commit stored {big} bytes; the transcript is {whole}"
    );
    let later = (121..=160).map(put).collect::<TestResult<Vec<u64>>>()?;
    let largest = later.iter().copied().max().ok_or("empty")?;
    // The largest later commit is the delta of 32 turns at the first power of two of the new
    // chain: the twenty turns of the big commit are in its base, not in that delta.
    assert!(
        largest * 3 < big,
        "a later one-turn commit stored {largest} bytes; the big one {big}"
    );
    let v = store.get("chat:big")?.ok_or("no current version")?;
    assert_eq!(
        v.object
            .ok_or("a tombstone")?
            .content()
            .ok_or("no content")?,
        strata::object::transcript(&turns[..160])
    );
    assert_eq!(store.fsck()?, vec![]);
    Ok(())
}

/// `chat` stored under the entity id `id` (a chat of a forked session, written by a raw put).
fn chat_as(id: &str, chat: &Object) -> TestResult<Op> {
    Ok(Op::Put(Box::new(Put::new(Object::from_parts(
        Some(id),
        None,
        None,
        chat.content().map(str::to_string),
        chat.fields().clone(),
        None,
    )?))))
}

#[test]
fn evicting_a_chat_leaves_nothing_of_it_when_a_fork_is_based_on_its_records() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path())?;
    let turns: Vec<_> = (0..40).map(chat_turn).collect();
    let mut parent_contents = Vec::new();
    for k in 1..=30 {
        let chat = Object::chat("p", turns[..k].to_vec())?;
        parent_contents.push(*chat.content_hash().ok_or("no content_hash")?);
        store.transact(vec![Op::put(chat)], Origin::Session)?;
    }
    // The fork starts with the parent's 30-turn chat in one put (its document and transcript
    // are the parent's), then grows on its own: its records are based on the parent's.
    let mut child = turns[..30].to_vec();
    child.extend((500..540).map(chat_turn));
    let mut child_contents = Vec::new();
    let mut child_txs = Vec::new();
    for k in 30..=child.len() {
        let chat = Object::chat("p", child[..k].to_vec())?;
        child_contents.push(*chat.content_hash().ok_or("no content_hash")?);
        child_txs.push(
            store
                .transact(vec![chat_as("chat:fork", &chat)?], Origin::Session)?
                .tx_id,
        );
    }
    store.evict("chat:p", Origin::Cli)?;
    for (k, tx) in child_txs.iter().enumerate() {
        assert_eq!(
            transcript_at(&store, "chat:fork", *tx)?,
            strata::object::transcript(&child[..30 + k]),
            "version {k} of the fork"
        );
    }
    for (k, hash) in parent_contents.iter().enumerate() {
        if !child_contents.contains(hash) {
            assert!(
                store.content(&Hash(hash.0))?.is_none(),
                "the transcript of the evicted chat's version {k} still answers"
            );
        }
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    store.fsck_rebuild()?;
    let v = store.get("chat:fork")?.ok_or("no current version")?;
    assert_eq!(
        v.object
            .ok_or("a tombstone")?
            .content()
            .ok_or("no content")?,
        strata::object::transcript(&child)
    );
    store.evict("chat:fork", Origin::Cli)?;
    assert_eq!(store.stats()?.blobs, 0);
    assert_eq!(store.fsck()?, vec![]);
    Ok(())
}

/// The entities named by the op bodies (other than evictions) the log still holds.
fn logged_entities(store: &Store) -> TestResult<Vec<String>> {
    let mut out = Vec::new();
    for record in store.log(None, usize::MAX)? {
        for op in record.ops {
            if op.kind() == Some("evict") {
                continue;
            }
            if let Some(body) = op.body {
                let entity = body["entity"].as_str().ok_or("a body without entity")?;
                out.push(entity.to_string());
            }
        }
    }
    Ok(out)
}

fn evict_removes_a_match_on_absence_made_before_the_entity_existed(
    backend: &dyn StoreFactory,
) -> TestResult {
    let store = backend.fresh()?;
    let absent = |id: &str| Op::Match {
        entity: id.into(),
        expected: None,
    };
    // A session's first commit: "absent" then the put, in one transaction.
    store.transact(
        vec![absent("system_prompt:a"), Op::put(prompt("a", "one")?)],
        Origin::Session,
    )?;
    // An absence checked in a transaction before the one that creates the entity.
    store.transact(
        vec![absent("system_prompt:b"), Op::put(prompt("x", "x")?)],
        Origin::Cli,
    )?;
    store.transact(vec![Op::put(prompt("b", "two")?)], Origin::Cli)?;
    store.transact(vec![Op::put(prompt("c", "three")?)], Origin::Cli)?;
    let kept = store
        .get("system_prompt:x")?
        .ok_or("no current version")?
        .info
        .object_hash;
    store.evict("system_prompt:a", Origin::Cli)?;
    store.evict("system_prompt:b", Origin::Cli)?;
    // A match after the evict in the evict's own transaction (checked before the ops apply).
    let c = store
        .get("system_prompt:c")?
        .ok_or("no current version")?
        .info
        .object_hash;
    store.transact(
        vec![
            Op::Evict {
                entity: "system_prompt:c".into(),
            },
            Op::Match {
                entity: "system_prompt:c".into(),
                expected: c,
            },
        ],
        Origin::Cli,
    )?;
    let logged = logged_entities(&store)?;
    assert!(
        !logged
            .iter()
            .any(|e| e.starts_with("system_prompt:") && e != "system_prompt:x"),
        "op bodies of evicted entities are left: {logged:?}"
    );
    assert_eq!(logged.iter().filter(|e| *e == "system_prompt:x").count(), 1);
    assert_eq!(
        kept,
        store
            .get("system_prompt:x")?
            .ok_or("no current version")?
            .info
            .object_hash
    );
    assert_eq!(store.fsck()?, vec![]);
    store.fsck_rebuild()?;
    assert_eq!(logged_entities(&store)?, logged);
    Ok(())
}
backend_tests!(evict_removes_a_match_on_absence_made_before_the_entity_existed: redb_on_disk, postgres);

/// Every answer the store gives about `ids`: history (with and without corrections, both
/// orders) and `version_info` at every valid time a row starts or ends (± 1 µs) and at the
/// extremes, as of every transaction; the log, paths and live entities.
fn every_answer(store: &Store, ids: &[String], now: Timestamp) -> TestResult<Vec<String>> {
    let last = store.log(None, usize::MAX)?.len() as u64;
    let mut out = vec![
        format!("{:?}", store.log(None, usize::MAX)?),
        format!("{:?}", store.entity_ids_by_path("fs1", "/")?),
        format!("{:?}", store.live_entities()?),
    ];
    let mut times = vec![Timestamp::MIN, Timestamp::MAX, now];
    for id in ids {
        for tx in 1..=last {
            for order in [
                Order::ValidAsc,
                Order::ValidDesc,
                Order::TxAsc,
                Order::TxDesc,
            ] {
                for with_corrections in [false, true] {
                    let answer = store.history(
                        id,
                        HistoryQuery {
                            order,
                            with_corrections,
                            as_of_tx: Some(TxId(tx)),
                            ..HistoryQuery::default()
                        },
                    );
                    if let Ok(rows) = &answer {
                        for row in rows {
                            times.push(row.valid_from);
                            times.extend(row.valid_to);
                        }
                    }
                    out.push(format!("{id} {tx} {order:?} {with_corrections} {answer:?}"));
                }
            }
        }
    }
    let micros: std::collections::BTreeSet<i64> = times
        .iter()
        .flat_map(|t| {
            let m = t.as_micros();
            [m - 1, m, m + 1]
        })
        .collect();
    for id in ids {
        for tx in 1..=last {
            for &m in &micros {
                let Ok(vt) = Timestamp::from_micros(m) else {
                    continue;
                };
                let answer = store.version_info(id, Some(vt), Some(TxId(tx)));
                out.push(format!("{id} {m} {tx} {answer:?}"));
            }
        }
    }
    Ok(out)
}

fn rebuild_gives_the_same_answers_at_extreme_clamped_and_ranged_valid_times(
    backend: &dyn StoreFactory,
) -> TestResult {
    let store = backend.fresh()?;
    let (min, max) = (Timestamp::MIN, Timestamp::MAX);
    let a = file("/a.rs", "a1")?;
    let (ida, idb, idc) = (
        a.id().to_string(),
        file("/b.rs", "")?.id().to_string(),
        file("/c.rs", "")?.id().to_string(),
    );
    let clamped = |object: Object, at: Timestamp| {
        let mut put = Put::new(object);
        put.valid_from = ValidFrom::MtimeClamped(at);
        Op::Put(Box::new(put))
    };
    let ops: Vec<Vec<Op>> = vec![
        vec![
            Op::put(a),
            Op::put_at(prompt("p", "p1")?, min, Some(max)),
            Op::put_at(
                file("/b.rs", "b-future")?,
                t("9999-12-30T21:59:59.999999Z")?,
                None,
            ),
        ],
        vec![
            clamped(file("/a.rs", "a2")?, min),
            Op::put_at(
                prompt("r", "r1")?,
                day(1)?,
                Some(t("9999-01-01T00:00:00Z")?),
            ),
        ],
        vec![
            Op::Delete {
                entity: ida.clone(),
                valid_from: Some(t("2000-01-01T00:00:00Z")?),
                valid_to: Some(t("2000-01-02T00:00:00Z")?),
            },
            Op::Match {
                entity: "system_prompt:q".into(),
                expected: None,
            },
            Op::put_at(prompt("q", "q1")?, max, None),
        ],
        vec![
            Op::put_at(prompt("p", "p2")?, min, None),
            clamped(file("/b.rs", "b-clamped")?, max),
        ],
        vec![
            Op::put_at(prompt("p", "p3")?, min, Some(day(2)?)),
            Op::Delete {
                entity: idb.clone(),
                valid_from: Some(max),
                valid_to: None,
            },
            Op::put(file("/c.rs", "c1")?),
        ],
        vec![
            Op::Evict {
                entity: idc.clone(),
            },
            clamped(file("/a.rs", "a3")?, t("2030-01-01T00:00:00Z")?),
        ],
        vec![Op::put(file("/c.rs", "c2")?)],
        vec![
            Op::Delete {
                entity: "system_prompt:p".into(),
                valid_from: Some(min),
                valid_to: Some(t("1970-01-01T00:00:00.000001Z")?),
            },
            Op::Evict {
                entity: "system_prompt:q".into(),
            },
        ],
        vec![Op::put_at(prompt("r", "r2")?, day(1)?, None)],
    ];
    for tx in ops {
        store.transact(tx, Origin::Cli)?;
    }
    let ids: Vec<String> = [ida, idb, idc]
        .into_iter()
        .chain(["p", "q", "r"].map(|s| format!("system_prompt:{s}")))
        .collect();
    let now = Timestamp::now();
    let before = every_answer(&store, &ids, now)?;
    assert!(matches!(
        store.version_info("system_prompt:q", None, None),
        Err(Error::NotFound { .. })
    ));
    let b_at_max = store
        .version_info(&ids[1], Some(max), None)?
        .ok_or("no version visible")?;
    assert_eq!((b_at_max.valid_from, b_at_max.object_hash), (max, None));
    let p_first = store.version_info("system_prompt:p", Some(min.next()), Some(TxId(1)));
    assert_eq!(p_first?.ok_or("no version visible")?.valid_to, Some(max));
    assert_eq!(store.fsck()?, vec![]);
    store.fsck_rebuild()?;
    let after = every_answer(&store, &ids, now)?;
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a);
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    Ok(())
}
backend_tests!(rebuild_gives_the_same_answers_at_extreme_clamped_and_ranged_valid_times: redb_in_memory, redb_on_disk, postgres);

/// Chats that share records (a fork from the end of a parent, one from the middle of its
/// rebased chain) and a file whose content is one of the parent's transcripts, evicted in
/// `order`: after each evict every other entity reads right at each of its transactions,
/// nothing only the evicted ones had answers `content()`, fsck is clean and gc has nothing to do.
fn evict_shared_chats_in_order(order: &[usize]) -> TestResult {
    let store = Store::in_memory()?;
    let turns: Vec<_> = (0..40).map(chat_turn).collect();
    // (entity, [(tx, content)])
    let mut written: Vec<(String, Vec<(TxId, String)>)> = Vec::new();
    let put = |id: &str, op: Op, content: String, written: &mut Vec<(String, Vec<_>)>| {
        let tx = store.transact(vec![op], Origin::Session)?.tx_id;
        match written.iter_mut().find(|(e, _)| e == id) {
            Some((_, list)) => list.push((tx, content)),
            None => written.push((id.to_string(), vec![(tx, content)])),
        }
        TestResult::Ok(())
    };
    // The parent: 1..=12 turns, then a jump to 20 (stored whole), then one turn at a time.
    for k in (1..=12).chain(20..=30) {
        let chat = Object::chat("p", turns[..k].to_vec())?;
        let content = chat.content().ok_or("no content")?.to_string();
        put("chat:p", Op::put(chat), content, &mut written)?;
    }
    let shared = strata::object::transcript(&turns[..10]);
    put(
        file("/t.txt", &shared)?.id(),
        Op::put(file("/t.txt", &shared)?),
        shared.clone(),
        &mut written,
    )?;
    for (name, from, extra) in [("fork", 30, 500), ("fork2", 20, 700)] {
        let mut own = turns[..from].to_vec();
        own.extend((extra..extra + 12).map(chat_turn));
        for k in from..=own.len() {
            let chat = Object::chat("p", own[..k].to_vec())?;
            let content = chat.content().ok_or("no content")?.to_string();
            let id = format!("chat:{name}");
            put(&id, chat_as(&id, &chat)?, content, &mut written)?;
        }
    }
    assert_eq!(store.fsck()?, vec![]);
    let mut evicted: Vec<usize> = Vec::new();
    for &e in order {
        let id = written[e].0.clone();
        store.evict(&id, Origin::Cli)?;
        assert!(matches!(
            store.evict(&id, Origin::Cli),
            Err(Error::NotFound { .. })
        ));
        evicted.push(e);
        let mut live_contents = std::collections::HashSet::new();
        for (k, (id, versions)) in written.iter().enumerate() {
            if evicted.contains(&k) {
                assert!(store.history(id, HistoryQuery::default()).is_err());
                continue;
            }
            for (tx, content) in versions {
                live_contents.insert(sha256(content.as_bytes()));
                let v = store
                    .as_of(id, None, Some(*tx))?
                    .ok_or("no version visible")?;
                assert_eq!(
                    v.object
                        .ok_or("a tombstone")?
                        .content()
                        .ok_or("no content")?,
                    content,
                    "{id} at {tx:?} after evicting {evicted:?}"
                );
            }
        }
        for &k in &evicted {
            for (tx, content) in &written[k].1 {
                let hash = sha256(content.as_bytes());
                if !live_contents.contains(&hash) {
                    assert!(
                        store.content(&hash)?.is_none(),
                        "{}'s content at {tx:?} answers after evicting {evicted:?}",
                        written[k].0
                    );
                }
            }
        }
        assert_eq!(store.fsck()?, vec![], "after evicting {evicted:?}");
        assert_eq!(store.gc()?, Default::default(), "after {evicted:?}");
    }
    assert_eq!(stored_counts(&store)?, (0, 0, 0));
    Ok(())
}

#[test]
fn evicting_chats_sharing_records_and_a_file_sharing_a_transcript_in_every_order() -> TestResult {
    let mut orders: Vec<Vec<usize>> = vec![vec![]];
    for _ in 0..4 {
        let mut next = Vec::new();
        for o in &orders {
            for e in (0..4).filter(|e| !o.contains(e)) {
                let mut longer = o.clone();
                longer.push(e);
                next.push(longer);
            }
        }
        orders = next;
    }
    for order in orders {
        evict_shared_chats_in_order(&order)?;
    }
    Ok(())
}

#[test]
fn evicting_a_file_whose_content_is_only_a_base_of_a_fork_removes_that_content() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path())?;
    let turns: Vec<_> = (0..20).map(chat_turn).collect();
    for k in 1..=12 {
        let chat = Object::chat("p", turns[..k].to_vec())?;
        store.transact(vec![Op::put(chat)], Origin::Session)?;
    }
    // A file holding the parent's 10-turn transcript, and a fork from the parent's 11 turns,
    // whose transcripts are suffix records on the parent's, the 11-turn one on the 10-turn one.
    let shared = strata::object::transcript(&turns[..10]);
    let text = file("/t.txt", &shared)?;
    let file_id = text.id().to_string();
    store.transact(vec![Op::put(text)], Origin::Cli)?;
    let mut own = turns[..11].to_vec();
    own.extend((900..906).map(chat_turn));
    let mut fork = Vec::new();
    for k in 11..=own.len() {
        let chat = Object::chat("p", own[..k].to_vec())?;
        let tx = store
            .transact(vec![chat_as("chat:fork", &chat)?], Origin::Session)?
            .tx_id;
        fork.push((tx, strata::object::transcript(&own[..k])));
    }
    store.evict("chat:p", Origin::Cli)?;
    assert_eq!(store.fsck()?, vec![]);
    store.evict(&file_id, Origin::Cli)?;
    assert!(
        store.content(&sha256(shared.as_bytes()))?.is_none(),
        "the evicted file's content answers as the base of the fork's transcripts"
    );
    for (tx, content) in &fork {
        let v = store
            .as_of("chat:fork", None, Some(*tx))?
            .ok_or("no version visible")?;
        assert_eq!(
            v.object
                .ok_or("a tombstone")?
                .content()
                .ok_or("no content")?,
            content,
            "at {tx:?}"
        );
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    Ok(())
}

#[test]
fn a_fork_keeps_growing_after_its_parent_chat_is_evicted() -> TestResult {
    let dir = tempfile::tempdir()?;
    let turns: Vec<_> = (0..30).map(chat_turn).collect();
    let mut own = turns.clone();
    own.extend((300..340).map(chat_turn));
    let mut fork = Vec::new();
    {
        let store = Store::create(dir.path())?;
        for k in 1..=30 {
            let chat = Object::chat("p", turns[..k].to_vec())?;
            store.transact(vec![Op::put(chat)], Origin::Session)?;
        }
        let mut grow = |range: std::ops::RangeInclusive<usize>| {
            for k in range {
                let chat = Object::chat("p", own[..k].to_vec())?;
                let tx = store
                    .transact(vec![chat_as("chat:fork", &chat)?], Origin::Session)?
                    .tx_id;
                fork.push((tx, k));
            }
            TestResult::Ok(())
        };
        grow(30..=45)?;
        store.evict("chat:p", Origin::Cli)?;
        grow(46..=60)?;
        assert_eq!(store.fsck()?, vec![]);
    }
    let store = Store::open(dir.path())?;
    for k in 61..=70 {
        let chat = Object::chat("p", own[..k].to_vec())?;
        let tx = store
            .transact(vec![chat_as("chat:fork", &chat)?], Origin::Session)?
            .tx_id;
        fork.push((tx, k));
    }
    for (tx, k) in &fork {
        let v = store
            .as_of("chat:fork", None, Some(*tx))?
            .ok_or("no version visible")?;
        assert_eq!(
            v.object
                .ok_or("a tombstone")?
                .content()
                .ok_or("no content")?,
            strata::object::transcript(&own[..*k]),
            "{k} turns"
        );
    }
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.gc()?, Default::default());
    store.evict("chat:fork", Origin::Cli)?;
    assert_eq!(stored_counts(&store)?, (0, 0, 0));
    Ok(())
}

#[test]
fn a_fork_commit_and_the_evict_of_its_parent_in_one_transaction() -> TestResult {
    for fork_first in [true, false] {
        let store = Store::in_memory()?;
        let turns: Vec<_> = (0..33).map(chat_turn).collect();
        let mut own = turns[..31].to_vec();
        own.extend((400..410).map(chat_turn));
        for k in 1..=33 {
            let chat = Object::chat("p", turns[..k].to_vec())?;
            store.transact(vec![Op::put(chat)], Origin::Session)?;
        }
        let mut fork = Vec::new();
        for k in 31..own.len() {
            let chat = Object::chat("p", own[..k].to_vec())?;
            let tx = store
                .transact(vec![chat_as("chat:fork", &chat)?], Origin::Session)?
                .tx_id;
            fork.push((tx, k));
        }
        let last = Object::chat("p", own.clone())?;
        let evict = Op::Evict {
            entity: "chat:p".into(),
        };
        let ops = if fork_first {
            vec![chat_as("chat:fork", &last)?, evict]
        } else {
            vec![evict, chat_as("chat:fork", &last)?]
        };
        let tx = store.transact(ops, Origin::Session)?.tx_id;
        fork.push((tx, own.len()));
        for (tx, k) in &fork {
            let v = store
                .as_of("chat:fork", None, Some(*tx))?
                .ok_or("no version visible")?;
            assert_eq!(
                v.object
                    .ok_or("a tombstone")?
                    .content()
                    .ok_or("no content")?,
                strata::object::transcript(&own[..*k]),
                "{k} turns, fork first: {fork_first}"
            );
        }
        for k in 1..=33 {
            let hash = sha256(strata::object::transcript(&turns[..k]).as_bytes());
            if k < 31 {
                assert!(store.content(&hash)?.is_none(), "{k} turns");
            }
        }
        assert_eq!(store.fsck()?, vec![], "fork first: {fork_first}");
        assert_eq!(store.gc()?, Default::default());
    }
    Ok(())
}

/// (tx, turn numbers) of each version of a chat or file.
type Versions = Vec<(TxId, Vec<usize>)>;

/// Random commits, forks (one chat put as another's next version), big jumps and evicts of
/// three chats sharing records, a few hundred steps over fixed seeds: every live chat reads right
/// at each of its transactions, fsck stays clean, gc has nothing to do.
#[test]
fn random_commits_forks_and_evicts_of_chats_sharing_records() -> TestResult {
    // Seed 51 evicts a file whose content only a fork's suffix records still hold.
    for seed in (1..=7u64).chain([51]) {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let store = Store::in_memory()?;
        // Each chat's turn numbers now and its versions (tx, turn numbers).
        let mut chats: Vec<Option<(Vec<usize>, Versions)>> = vec![None, None, None];
        let mut fresh = 1000;
        // The turns of every version of an evicted chat.
        let mut gone: Vec<Vec<usize>> = Vec::new();
        // A file whose content is a chat's transcript of the moment: (tx, turns) per version.
        let mut text_file: Option<Versions> = None;
        let path = file("/t.txt", "")?.id().to_string();
        for step in 0..60 {
            if next(6) == 0 {
                let f = next(3) as usize;
                match (&text_file, &chats[f]) {
                    (Some(_), _) if next(2) == 0 => {
                        store.evict(&path, Origin::Cli)?;
                        gone.extend(text_file.take().into_iter().flatten().map(|v| v.1));
                    }
                    (_, Some((turns, _))) => {
                        let text = strata::object::transcript(
                            &turns.iter().map(|n| chat_turn(*n)).collect::<Vec<_>>(),
                        );
                        let tx = store
                            .transact(vec![Op::put(file("/t.txt", &text)?)], Origin::Cli)?
                            .tx_id;
                        text_file
                            .get_or_insert_with(Vec::new)
                            .push((tx, turns.clone()));
                    }
                    _ => {}
                }
            }
            let e = next(3) as usize;
            let id = format!("chat:c{e}");
            let kind = next(10);
            let turns: Option<Vec<usize>> = match (kind, &chats[e]) {
                (0..=1, Some(_)) => {
                    store.evict(&id, Origin::Cli)?;
                    if let Some((_, versions)) = chats[e].take() {
                        gone.extend(versions.into_iter().map(|(_, turns)| turns));
                    }
                    None
                }
                (2..=3, _) => {
                    // A fork of another chat: its current chat as this one's next version (the
                    // same document and transcript), which later commits grow on.
                    let f = next(3) as usize;
                    let mut base = chats[f].as_ref().map(|c| c.0.clone()).unwrap_or_default();
                    if base.is_empty() {
                        fresh += 1;
                        base.push(fresh);
                    }
                    Some(base)
                }
                (4, _) => {
                    let mut turns = chats[e].as_ref().map(|c| c.0.clone()).unwrap_or_default();
                    for _ in 0..8 {
                        fresh += 1;
                        turns.push(fresh);
                    }
                    Some(turns)
                }
                _ => {
                    let mut turns = chats[e].as_ref().map(|c| c.0.clone()).unwrap_or_default();
                    fresh += 1;
                    turns.push(fresh);
                    Some(turns)
                }
            };
            if let Some(turns) = turns {
                let chat = Object::chat("x", turns.iter().map(|n| chat_turn(*n)).collect())?;
                let tx = store
                    .transact(vec![chat_as(&id, &chat)?], Origin::Session)?
                    .tx_id;
                let entry = chats[e].get_or_insert_with(|| (Vec::new(), Vec::new()));
                entry.0 = turns.clone();
                entry.1.push((tx, turns));
            }
            for (k, chat) in chats.iter().enumerate() {
                let Some((_, versions)) = chat else { continue };
                for (tx, turns) in versions {
                    let v = store
                        .as_of(&format!("chat:c{k}"), None, Some(*tx))?
                        .ok_or("no version visible")?;
                    let want: Vec<_> = turns.iter().map(|n| chat_turn(*n)).collect();
                    assert_eq!(
                        v.object
                            .ok_or("a tombstone")?
                            .content()
                            .ok_or("no content")?,
                        strata::object::transcript(&want),
                        "seed {seed} step {step}: chat {k} at {tx:?}"
                    );
                }
            }
            for (tx, turns) in text_file.iter().flatten() {
                let v = store
                    .as_of(&path, None, Some(*tx))?
                    .ok_or("no version visible")?;
                let want: Vec<_> = turns.iter().map(|n| chat_turn(*n)).collect();
                assert_eq!(
                    v.object
                        .ok_or("a tombstone")?
                        .content()
                        .ok_or("no content")?,
                    strata::object::transcript(&want),
                    "seed {seed} step {step}: the file at {tx:?}"
                );
            }
            for turns in &gone {
                let live = chats
                    .iter()
                    .flatten()
                    .map(|(_, versions)| versions)
                    .chain(text_file.iter())
                    .any(|versions| versions.iter().any(|(_, t)| t == turns));
                let text = strata::object::transcript(
                    &turns.iter().map(|n| chat_turn(*n)).collect::<Vec<_>>(),
                );
                if !live {
                    assert!(
                        store.content(&sha256(text.as_bytes()))?.is_none(),
                        "seed {seed} step {step}: an evicted transcript answers"
                    );
                }
            }
            assert_eq!(store.fsck()?, vec![], "seed {seed} step {step}");
        }
        assert_eq!(store.gc()?, Default::default(), "seed {seed}");
        store.fsck_rebuild()?;
        for (k, chat) in chats.iter().enumerate() {
            for (tx, turns) in chat.iter().flat_map(|c| &c.1) {
                let v = store.as_of(&format!("chat:c{k}"), None, Some(*tx))?;
                let want: Vec<_> = turns.iter().map(|n| chat_turn(*n)).collect();
                assert_eq!(
                    v.ok_or("no version visible")?
                        .object
                        .ok_or("a tombstone")?
                        .content()
                        .ok_or("no content")?,
                    strata::object::transcript(&want),
                    "seed {seed} after rebuild: chat {k} at {tx:?}"
                );
            }
        }
        assert_eq!(store.fsck()?, vec![], "seed {seed} after rebuild");
        assert_eq!(store.gc()?, Default::default(), "seed {seed}");
        if text_file.is_some() {
            store.evict(&path, Origin::Cli)?;
        }
        for (e, chat) in chats.iter().enumerate() {
            if chat.is_some() {
                store.evict(&format!("chat:c{e}"), Origin::Cli)?;
            }
        }
        assert_eq!(stored_counts(&store)?, (0, 0, 0), "seed {seed}");
    }
    Ok(())
}

/// Two deferred stores (two `strata index` runs) plan from the same state: x is new to both.
/// The first to write takes the file; the second waits for it at its first write, and since
/// the log moved after it read, that write is refused with nothing written (before, it would
/// have applied its stale plan: x written twice). Its handle writes now, so planning again
/// sees x.
#[test]
fn a_deferred_store_does_not_apply_a_plan_made_before_another_writer_wrote() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().to_path_buf();
    drop(Store::create(&path)?);
    let (a, b) = (Store::open_deferred(&path)?, Store::open_deferred(&path)?);
    let x = file("/x.rs", "x")?;
    assert!(a.get_if_known(x.id())?.is_none());
    assert!(b.get_if_known(x.id())?.is_none());
    let planned = x.clone();
    let second = std::thread::spawn(move || {
        // Its first write waits for `a`'s read-only handle, then for `a`'s writes.
        let written = b.transact(vec![Op::put(planned)], Origin::Cli);
        (b, written)
    });
    std::thread::sleep(Duration::from_millis(200));
    a.transact(vec![Op::put(x.clone())], Origin::Cli)?;
    drop(a);
    let (b, written) = second.join().map_err(|_| "the second run panicked")?;
    match written {
        Err(strata::Error::Conflict { actual, .. }) => {
            assert!(
                actual.contains("another process wrote meanwhile"),
                "{actual}"
            );
        }
        other => panic!("the stale plan was not refused: {other:?}"),
    }
    // Planned again, from the store as it is: x is known, and a write goes through.
    assert!(b.get_if_known(x.id())?.is_some());
    let y = file("/y.rs", "y")?;
    b.transact(vec![Op::put(y.clone())], Origin::Cli)?;
    assert_eq!(b.fsck()?, Vec::new());
    drop(b);
    let store = Store::open_read_only(&path)?;
    assert_eq!(
        store.history(x.id(), HistoryQuery::default())?.len(),
        1,
        "x written once"
    );
    assert_eq!(store.history(y.id(), HistoryQuery::default())?.len(), 1);
    Ok(())
}
