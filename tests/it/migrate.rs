//! `strata migrate`: a store copied redb → PostgreSQL → redb by replaying its log answers every
//! as-of and history query of its history as the original does, with the same log and chain
//! head, and fsck finds nothing in any of the three; a target that holds anything, a bad URL
//! and a missing `--dir` are refused and change nothing. The library round trip and the real
//! binary's. They need `STRATA_TEST_POSTGRES_URL` (skipped and said why without it).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use strata::object::{FilesystemSource, Object};
use strata::{
    Error, HistoryQuery, Op, Order, Origin, PgOpen, Put, Store, Timestamp, TxId, ValidFrom,
};

use crate::backends::postgres;
use crate::support::{TestResult, error_of};

fn at(seconds: i64) -> TestResult<Timestamp> {
    Ok(Timestamp::from_micros(
        1_700_000_000_000_000 + seconds * 1_000_000,
    )?)
}

fn source(path: &str) -> FilesystemSource {
    FilesystemSource {
        filesystem_id: "cd".repeat(32),
        path: path.into(),
    }
}

/// A history with every kind of op: puts (a ranged one with kept bytes, size and spelling), an
/// update, a ranged delete, a correction of the past, matches (one on an entity that does not
/// exist yet), an eviction of an entity with a match on it, one of an entity made after a match
/// on its absence, and index runs. The ids every op named.
fn write_history(store: &Store) -> TestResult<BTreeSet<String>> {
    let text = |body: &str| Object::file_text(source("/a.txt"), body.into());
    let bytes = vec![0xff, 0, 1, 2];
    let mut binary = Put::new(Object::file_bytes(source("/b.bin"), bytes.clone())?);
    binary.bytes = Some(bytes);
    binary.valid_from = ValidFrom::At(at(1)?);
    binary.valid_to = Some(at(50)?);
    binary.size = Some(4);
    binary.spelling = Some("/B.bin".into());
    let prompt = Object::system_prompt("p", "be brief".into())?;
    let first = store.transact(
        vec![
            Op::put_at(text("one\n")?, at(0)?, None),
            Op::Put(Box::new(binary)),
            Op::put(prompt.clone()),
        ],
        Origin::IndexRun(None),
    )?;
    store.transact(
        vec![Op::put(text("two\n")?)],
        Origin::IndexRun(Some(first.tx_id)),
    )?;
    let a = text("two\n")?.id().to_string();
    store.transact(
        vec![
            Op::Delete {
                entity: a.clone(),
                valid_from: Some(at(3)?),
                valid_to: Some(at(4)?),
            },
            Op::Match {
                entity: prompt.id().to_string(),
                expected: Some(*prompt.object_hash()),
            },
            Op::Match {
                entity: "system_prompt:later".into(),
                expected: None,
            },
        ],
        Origin::Cli,
    )?;
    store.transact(
        vec![Op::put_at(text("corrected\n")?, at(2)?, Some(at(3)?))],
        Origin::Session,
    )?;
    let later = Object::system_prompt("later", "made after a match on its absence".into())?;
    store.transact(vec![Op::put(later.clone())], Origin::Watcher)?;
    store.evict(prompt.id(), Origin::Cli)?;
    store.transact(vec![Op::put(text("three\n")?)], Origin::Indexer)?;
    store.evict(later.id(), Origin::Other("tidy".into()))?;
    store.transact(
        vec![Op::put(Object::system_prompt("q", "stay".into())?)],
        Origin::Cli,
    )?;
    let mut ids = BTreeSet::new();
    for record in store.log(None, 1000)? {
        ids.extend(
            record
                .ops
                .iter()
                .filter_map(|op| op.entity().map(str::to_string)),
        );
    }
    ids.insert(prompt.id().to_string());
    ids.insert(later.id().to_string());
    Ok(ids)
}

/// Every as-of answer (each id, at each valid time the log names and now, as of each
/// transaction and the latest) and every history (each order, with and without corrections, as
/// of each transaction), as text: two stores answer alike when these are equal.
fn answers(store: &Store, ids: &BTreeSet<String>) -> TestResult<Vec<String>> {
    let log = store.log(None, 1000)?;
    let mut times: BTreeSet<Option<Timestamp>> = BTreeSet::from([None]);
    for record in &log {
        times.insert(Some(record.tx_time));
        for op in &record.ops {
            for key in ["valid_from", "valid_to"] {
                if let Some(time) = op
                    .body
                    .as_ref()
                    .and_then(|b| b.get(key))
                    .and_then(|t| t.as_str())
                {
                    times.insert(Some(time.parse()?));
                }
            }
        }
    }
    let txs: Vec<Option<TxId>> = std::iter::once(None)
        .chain(log.iter().map(|r| Some(r.tx_id)))
        .collect();
    let show = |result: strata::Result<String>| match result {
        Ok(text) => text,
        Err(Error::NotFound { .. }) => "not found".to_string(),
        Err(e) => format!("error {e}"),
    };
    let mut out = Vec::new();
    for id in ids {
        for tx in &txs {
            for time in &times {
                out.push(format!(
                    "{id} {time:?} {tx:?}: {}",
                    show(store.as_of(id, *time, *tx).map(|v| format!("{v:?}")))
                ));
            }
            for order in [Order::ValidAsc, Order::TxDesc] {
                for with_corrections in [false, true] {
                    let query = HistoryQuery {
                        order,
                        with_corrections,
                        as_of_tx: *tx,
                        ..HistoryQuery::default()
                    };
                    out.push(format!(
                        "{id} {query:?}: {}",
                        show(store.history(id, query).map(|h| format!("{h:?}")))
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// Library round trip: redb → PostgreSQL → redb, the same answers, log and chain head, fsck
/// clean on all three; then a copy into a store that is not empty is refused, changing nothing.
#[test]
fn redb_to_postgres_to_redb_answers_alike() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let dirs = tempfile::tempdir()?;
    let original = Store::create(dirs.path().join("original"))?;
    let ids = write_history(&original)?;
    let location = backend.fresh(&format!("m_lib_{}", std::process::id()))?;
    let middle = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let report = strata::migrate(&original, &middle)?;
    assert_eq!(report.head, original.chain_head()?);
    assert_eq!(report.transactions, 9);
    assert!(
        report.evicted_ops >= 4,
        "the prompt's put and match, the absent match, later's put: {report:?}"
    );
    let back = Store::create(dirs.path().join("back"))?;
    let again = strata::migrate(&middle, &back)?;
    assert_eq!(again, report);
    let expected = answers(&original, &ids)?;
    assert!(
        expected.iter().any(|a| a.contains("not found")) && expected.len() > 500,
        "the corpus has evicted entities and many answers"
    );
    for (name, copy) in [("postgres", &middle), ("redb again", &back)] {
        assert_eq!(copy.chain_head()?, original.chain_head()?, "{name}");
        assert_eq!(copy.log(None, 1000)?, original.log(None, 1000)?, "{name}");
        let got = answers(copy, &ids)?;
        for (a, b) in expected.iter().zip(&got) {
            assert_eq!(a, b, "{name}");
        }
        assert_eq!(got.len(), expected.len(), "{name}");
        let file_hash = strata::hash::sha256(&[0xff, 0, 1, 2]);
        assert_eq!(
            copy.content(&file_hash)?,
            Some(vec![0xff, 0, 1, 2]),
            "{name}: the kept bytes"
        );
    }
    for store in [&original, &middle, &back] {
        assert_eq!(store.fsck()?, Vec::new());
    }
    drop(back);
    let back = Store::open(dirs.path().join("back"))?;
    assert_eq!(back.fsck()?, Vec::new());
    // Into a store that holds transactions: refused, nothing written.
    let head = middle.chain_head()?;
    let e = error_of(strata::migrate(&original, &middle))?;
    assert!(
        matches!(&e, Error::InvalidInput { reason } if reason.contains("not empty")),
        "{e}"
    );
    assert_eq!(middle.chain_head()?, head);
    // A record that does not follow the head: refused by the backend itself.
    let record = original.log(None, 1)?;
    let replay = strata::ReplayRecord::read(&*original, &record[0])?;
    for store in [&middle, &back] {
        let e = error_of(store.append_log(std::slice::from_ref(&replay)))?;
        assert!(
            matches!(&e, Error::InvalidInput { reason } if reason.contains("does not follow")),
            "{e}"
        );
        assert_eq!(store.chain_head()?, head);
    }
    drop(middle);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// Runs the strata binary in `cwd` (no daemon): (success, stdout, stderr).
fn strata(cwd: &Path, args: &[&str]) -> TestResult<(bool, String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(cwd)
        .env("STRATA_NO_DAEMON", "1")
        .env_remove("STRATA_STORE")
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

/// Runs a command that must succeed against the store in `store`; its stdout.
fn ok(cwd: &Path, store: &Path, args: &[&str]) -> TestResult<String> {
    let store = store.to_string_lossy();
    let mut all = vec!["--store", &*store];
    all.extend_from_slice(args);
    let (ok, out, err) = strata(cwd, &all)?;
    if !ok {
        return Err(format!("strata {all:?} failed: {out}{err}").into());
    }
    Ok(out)
}

/// `text` with the random nonces of a render's content fences taken out.
fn without_nonces(text: &str) -> String {
    let mut parts = text.split("nonce=");
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        out.push_str("nonce=…");
        out.push_str(part.trim_start_matches(|c: char| c.is_ascii_hexdigit()));
    }
    out
}

/// The real binary: a store indexed three times (an edit, a deletion), with a session and an
/// eviction, goes redb → PostgreSQL → redb with `strata migrate`; log, histories, shows, ls,
/// the session and the mounts read alike from all three, and fsck is clean on each. Then the
/// bad targets: each refused with a clear message, nothing made or changed.
#[test]
fn strata_migrate_round_trips_through_postgres() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let tmp = tempfile::tempdir()?;
    let tree = tmp.path().join("tree");
    std::fs::create_dir(&tree)?;
    let original = tree.join(".strata");
    let via = tmp.path().join("via-postgres");
    let back = tmp.path().join("back");
    let location = backend.fresh(&format!("m_cli_{}", std::process::id()))?;
    let url = location.url();
    strata(&tree, &["init"])?;
    ok(&tree, &original, &["mount", "add", "/data=/srv/data"])?;
    std::fs::write(tree.join("a.txt"), "alpha\n")?;
    std::fs::write(tree.join("b.txt"), "beta\n")?;
    std::fs::write(tree.join("c.bin"), [0u8, 159, 146, 150, 0, 1])?;
    ok(&tree, &original, &["index", "."])?;
    std::fs::write(tree.join("a.txt"), "alpha, edited\n")?;
    // An hour old, so that the stat cache entry the next index records vouches for it (a file
    // changed in the second its scan began is read again, git's racy-clean rule).
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(tree.join("a.txt"))?
        .set_modified(hour_ago)?;
    ok(&tree, &original, &["index", "."])?;
    std::fs::remove_file(tree.join("b.txt"))?;
    ok(&tree, &original, &["index", "."])?;
    let session = ok(&tree, &original, &["session", "new"])?;
    let session = session.trim();
    ok(
        &tree,
        &original,
        &[
            "session",
            "turn",
            session,
            "--role",
            "user",
            "--content",
            "hello",
        ],
    )?;
    ok(&tree, &original, &["session", "read", session, "a.txt"])?;
    ok(
        &tree,
        &original,
        &[
            "session",
            "turn",
            session,
            "--role",
            "assistant",
            "--content",
            "hi",
        ],
    )?;
    ok(&tree, &original, &["evict", "c.bin", "--yes"])?;

    let out = ok(
        &tree,
        &original,
        &["migrate", "--to", &url, "--dir", &via.to_string_lossy()],
    )?;
    assert!(
        out.contains("the copy verifies")
            && out.contains("the original's")
            && out.contains("and 1 stat cache entries"),
        "{out}"
    );
    assert!(via.join(strata::BACKEND_FILE).exists());
    let out = ok(
        &tree,
        &via,
        &["migrate", "--to", &back.to_string_lossy(), "--json"],
    )?;
    let json: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(json["findings"], serde_json::json!([]), "{out}");
    assert!(
        json["evicted_ops"].as_u64().is_some_and(|n| n >= 1),
        "{out}"
    );
    assert_eq!(json["stat_entries"], 1, "{out}");
    assert!(back.join(strata::DB_FILE).exists());

    let reads: Vec<Vec<&str>> = vec![
        vec!["log", "--json"],
        vec!["log", "--each"],
        vec!["history", "a.txt", "--json"],
        vec!["history", "a.txt", "--corrections", "--by-tx"],
        vec!["history", "a.txt", "--as-of-tx", "2", "--json"],
        vec!["history", "b.txt", "--json"],
        vec!["show", "a.txt", "--json"],
        vec!["cat", "a.txt"],
        vec!["diff", "a.txt"],
        vec!["ls", "--all", "--json"],
        vec!["session", "show", session],
        vec!["session", "history", session, "--json"],
        vec!["session", "render", session, "--as-of-tx", "6"],
        vec!["mount", "ls", "--json"],
    ];
    for args in &reads {
        let want = without_nonces(&ok(&tree, &original, args)?);
        for copy in [&via, &back] {
            let got = without_nonces(&ok(&tree, copy, args)?);
            assert_eq!(got, want, "{args:?} on {}", copy.display());
        }
    }
    for store in [&original, &via, &back] {
        let out = ok(&tree, store, &["fsck"])?;
        assert!(out.starts_with("ok"), "{}: {out}", store.display());
    }

    // Bad targets: refused, nothing made, nothing changed.
    let log_of = |store: &Path| ok(&tree, store, &["log", "--json"]);
    let before = log_of(&back)?;
    let nowhere = tmp.path().join("nowhere");
    let nowhere_arg = nowhere.to_string_lossy().to_string();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full)?;
    std::fs::write(full.join("notes"), "mine")?;
    let original_arg = original.to_string_lossy().to_string();
    let back_arg = back.to_string_lossy().to_string();
    let full_arg = full.to_string_lossy().to_string();
    let refusals: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--to", &back_arg], "already holds a strata store"),
        (vec!["--to", &original_arg], "already holds a strata store"),
        (vec!["--to", &full_arg], "is not empty"),
        (
            vec!["--to", &url, "--dir", &nowhere_arg],
            "already holds a strata store with",
        ),
        (vec!["--to", &url], "give --dir NEW_DIR"),
        (
            vec!["--to", "mysql://db/x", "--dir", &nowhere_arg],
            "is not a PostgreSQL URL",
        ),
        (
            vec![
                "--to",
                "postgres://strata@127.0.0.1:1/x?schema=Bad-Name",
                "--dir",
                &nowhere_arg,
            ],
            "schema \"Bad-Name\"",
        ),
        (
            vec!["--to", &nowhere_arg, "--dir", &full_arg],
            "--dir is for a PostgreSQL target",
        ),
    ];
    for (args, why) in refusals {
        let mut all = vec!["--store", &original_arg, "migrate"];
        all.extend_from_slice(&args);
        let (success, out, err) = strata(&tree, &all)?;
        assert!(!success, "{args:?} was accepted: {out}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!nowhere.exists(), "{args:?} made {nowhere_arg}");
    }
    assert_eq!(log_of(&back)?, before);
    assert_eq!(log_of(&via)?, before);
    assert_eq!(std::fs::read_dir(&full)?.count(), 1);

    // The stat cache came along: the next index of each reads no file and changes nothing.
    std::fs::remove_file(tree.join("c.bin"))?;
    for store in [&original, &via, &back] {
        let out = ok(&tree, store, &["index", ".", "--json"])?;
        let summary: serde_json::Value = serde_json::from_str(&out)?;
        let counts = ["unchanged", "created", "updated", "deleted", "bytes_read"]
            .map(|key| summary[key].as_u64());
        assert_eq!(
            counts,
            [1, 0, 0, 0, 0].map(Some),
            "{}: {out}",
            store.display()
        );
    }
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}
