//! Session benchmarks: resume of a session of 10 000 files whose stat is unchanged, a commit that
//! adds 100 objects to such a session, and the store bytes one commit costs; beside them the two
//! baselines they are judged against on the same machine in the same run: one durable redb
//! commit of 4 KiB (the floor of any commit) and `git status --porcelain` of the same 10 000-file
//! tree (what a resume competes with). Issue 15's targets: commit ≤ 2 × the first, resume ≤ 1 ×
//! the second.
//!
//! Run: `cargo bench --bench session`. The bytes figures (per tool-call commit, per turn commit)
//! are printed once before the timings.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs
)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Map;
use strata::Settings;
use strata::Store;
use strata::object::{Role, ToolStatus};
use strata::{Session, SessionOptions, ToolcallInput};

/// The allocator the strata binary (CLI, daemon, MCP server) runs with, so that the figures are
/// those of a resume as a user runs it.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const FILES: usize = 10_000;

/// A store on disk with one session that has read `FILES` small files (mtimes an hour old, so
/// the stat cache vouches for them).
struct Fixture {
    _tmp: tempfile::TempDir,
    store: Store,
    sid: String,
}

fn fixture(files: usize) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root: PathBuf = std::fs::canonicalize(tmp.path()).unwrap().join("tree");
    let past = SystemTime::now() - Duration::from_secs(3600);
    let mut paths = Vec::with_capacity(files);
    for i in 0..files {
        let dir = root.join(format!("d{}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("f{i}.txt"));
        std::fs::write(&path, format!("file {i}\n{}\n", "x".repeat(150))).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(past)
            .unwrap();
        paths.push(path.to_string_lossy().into_owned());
    }
    let store = Store::create(tmp.path().join("store")).unwrap();
    let settings = Settings::default();
    let sid = {
        let mut session = Session::create(&store, &settings, SessionOptions::default()).unwrap();
        for chunk in paths.chunks(1000) {
            for path in chunk {
                session.read(path).unwrap();
            }
            session.commit().unwrap();
        }
        session
            .append_turn(Role::User, "start".into(), vec![])
            .unwrap();
        session.commit().unwrap();
        session.id().to_string()
    };
    Fixture {
        _tmp: tmp,
        store,
        sid,
    }
}

fn call(n: usize) -> ToolcallInput {
    ToolcallInput {
        id: None,
        tool: "grep".into(),
        args: Map::new(),
        args_display: None,
        status: ToolStatus::Ok,
        file_refs: None,
        output: format!("result {n}"),
    }
}

/// Median, mean and largest of per-commit byte counts, for the reports below.
fn spread(mut bytes: Vec<u64>) -> (u64, u64, u64) {
    bytes.sort_unstable();
    let mean = bytes.iter().sum::<u64>() / bytes.len().max(1) as u64;
    (
        bytes[bytes.len() / 2],
        mean,
        bytes.last().copied().unwrap_or(0),
    )
}

/// Store bytes (documents + contents, and the redb file) that `commits` commits of one tool call
/// each add to a session of `files` files. Over more than 64 commits, so that a scheme storing
/// a full document every so often would show it in the mean and the largest.
fn bytes_per_commit(files: usize, commits: usize) {
    let f = fixture(files);
    let settings = Settings::default();
    let mut session = Session::load(&f.store, &settings, &f.sid).unwrap();
    let before = f.store.stats().unwrap();
    let mut per_commit = Vec::new();
    for n in 0..commits {
        let at = f.store.stats().unwrap().stored_bytes;
        session.record_toolcall(call(n)).unwrap();
        session.commit().unwrap();
        per_commit.push(f.store.stats().unwrap().stored_bytes - at);
    }
    let after = f.store.stats().unwrap();
    let (median, mean, largest) = spread(per_commit);
    eprintln!(
        "session of {files} files, {commits} commits adding one tool call each: stored bytes per commit median {median}, mean {mean}, largest {largest}; redb file growth {:.0} bytes per commit",
        (after.file_bytes.saturating_sub(before.file_bytes)) as f64 / commits as f64,
    );
}

/// Store bytes one commit appending one turn (~200 characters) costs once the chat has `turns`
/// turns: the chat document is a skip-delta, its transcript (the chat's content) a suffix record.
fn bytes_per_turn_commit(turns: usize, commits: usize) {
    let f = fixture(10);
    let settings = Settings::default();
    let mut session = Session::load(&f.store, &settings, &f.sid).unwrap();
    // Hex of a multiplicative hash: text zstd cannot shrink to nothing, as it would a repetition.
    let turn = |n: usize| {
        (0..24)
            .map(|k| format!("{:08x}", ((n * 31 + k) as u32).wrapping_mul(2_654_435_761)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for n in 0..turns {
        session.append_turn(Role::User, turn(n), vec![]).unwrap();
        if n % 50 == 49 {
            session.commit().unwrap();
        }
    }
    session.commit().unwrap();
    let mut per_commit = Vec::new();
    for n in 0..commits {
        let at = f.store.stats().unwrap().stored_bytes;
        session
            .append_turn(Role::Assistant, turn(n), vec![])
            .unwrap();
        session.commit().unwrap();
        per_commit.push(f.store.stats().unwrap().stored_bytes - at);
    }
    let (median, mean, largest) = spread(per_commit);
    eprintln!(
        "chat of {turns} turns, {commits} commits appending one turn of ~200 characters: stored bytes per commit median {median}, mean {mean}, largest {largest}"
    );
}

/// Profiling aid: `SESSION_PROFILE=resume|phases|commit SESSION_PROFILE_DIR=/tmp/x` runs only
/// that operation in a loop (`SESSION_PROFILE_N` rounds, 20 by default) over a fixture kept in
/// the directory (built on first use), for `perf`; each round prints its time.
fn profile(what: &str, dir: &str) {
    let store_dir = PathBuf::from(dir).join("store");
    let sid_file = PathBuf::from(dir).join("sid");
    let (store, sid) = if sid_file.exists() {
        (
            Store::open(&store_dir).unwrap(),
            std::fs::read_to_string(&sid_file).unwrap(),
        )
    } else {
        let f = fixture(FILES);
        let sid = f.sid.clone();
        drop(f.store);
        std::fs::create_dir_all(dir).unwrap();
        // The fixture's files live in its temp dir: keep it by leaking it.
        std::fs::rename(f._tmp.path().join("store"), &store_dir).unwrap();
        std::mem::forget(f._tmp);
        std::fs::write(&sid_file, &sid).unwrap();
        (Store::open(&store_dir).unwrap(), sid)
    };
    let settings = Settings::default();
    let rounds = std::env::var("SESSION_PROFILE_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    // The commit profile loads once and commits `rounds` times: its samples are the commits'
    // (and the tool calls' recording), not the loads'.
    let mut loaded = None;
    for _ in 0..rounds {
        let t = std::time::Instant::now();
        match what {
            "phases" => {
                let session = Session::load(&store, &settings, &sid).unwrap();
                eprintln!("load {:?}", t.elapsed());
                let ids: Vec<&str> = session
                    .sets()
                    .index()
                    .ids()
                    .iter()
                    .map(String::as_str)
                    .collect();
                let t1 = std::time::Instant::now();
                let metas = store.metadata_many(&ids, None).unwrap();
                eprintln!("metadata_many {:?}", t1.elapsed());
                let t1 = std::time::Instant::now();
                for m in metas.iter().flatten() {
                    if let Some(strata::Source::Filesystem(fs)) = &m.source {
                        divan::black_box(std::fs::metadata(&fs.path).ok());
                    }
                }
                eprintln!("stat {:?}", t1.elapsed());
                let t1 = std::time::Instant::now();
                let document = session.document().unwrap();
                eprintln!("document {:?}", t1.elapsed());
                let sets = session.sets();
                eprintln!(
                    "sets: index {}, pool {}, active {}, pinned {}; document JSON {} bytes",
                    sets.index().len(),
                    sets.pool().len(),
                    sets.active().len(),
                    sets.pinned().len(),
                    document.metadata_json().len()
                );
            }
            "resume" => {
                let (_s, report) = Session::resume(&store, &settings, &sid).unwrap();
                assert_eq!(report.vouched, FILES);
            }
            _ => {
                let session =
                    loaded.get_or_insert_with(|| Session::load(&store, &settings, &sid).unwrap());
                session
                    .append_turn(Role::Assistant, "calls".into(), vec![])
                    .unwrap();
                for n in 0..100 {
                    session.record_toolcall(call(n)).unwrap();
                }
                let t = std::time::Instant::now();
                session.commit().unwrap();
                eprintln!("commit {:?}", t.elapsed());
                continue;
            }
        }
        eprintln!("{what} {:?}", t.elapsed());
    }
}

fn main() {
    if let (Ok(what), Ok(dir)) = (
        std::env::var("SESSION_PROFILE"),
        std::env::var("SESSION_PROFILE_DIR"),
    ) {
        profile(&what, &dir);
        return;
    }
    // `STRATA_BYTES_COMMITS=N` measures over N commits instead (one-off full copies amortise).
    let commits = std::env::var("STRATA_BYTES_COMMITS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(150);
    bytes_per_commit(100, commits);
    bytes_per_commit(FILES, commits);
    bytes_per_turn_commit(100, commits);
    bytes_per_turn_commit(1000, commits);
    divan::main();
}

#[divan::bench(sample_count = 30, sample_size = 1)]
fn resume_10000_unchanged_files(bencher: divan::Bencher) {
    let f = fixture(FILES);
    let settings = Settings::default();
    bencher.bench_local(|| {
        let (session, report) = Session::resume(&f.store, &settings, &f.sid).unwrap();
        assert_eq!(report.vouched, FILES);
        assert!(report.tx_id.is_none());
        divan::black_box(session.sets().index().len());
    });
}

/// The fixture's session, loaded, with a new turn for tool calls to join.
fn loaded_with_a_turn(f: &Fixture, settings: &Settings) -> Session {
    let mut session = Session::load(&f.store, settings, &f.sid).unwrap();
    session
        .append_turn(Role::Assistant, "calls".into(), vec![])
        .unwrap();
    session
}

#[divan::bench(sample_count = 30, sample_size = 1)]
fn commit_adding_100_objects_to_10000_file_session(bencher: divan::Bencher) {
    let f = fixture(FILES);
    let settings = Settings::default();
    bencher
        .with_inputs(|| {
            let mut session = loaded_with_a_turn(&f, &settings);
            for n in 0..100 {
                session.record_toolcall(call(n)).unwrap();
            }
            session
        })
        .bench_local_values(|mut session| {
            session.commit().unwrap();
            session
        });
}

/// Recording 100 tool calls (one turn) into a 10 000-file session, before its commit: each
/// record runs auto-collapse, which must not read the whole active set.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn record_100_toolcalls_in_10000_file_session(bencher: divan::Bencher) {
    let f = fixture(FILES);
    let settings = Settings::default();
    bencher
        .with_inputs(|| loaded_with_a_turn(&f, &settings))
        .bench_local_values(|mut session| {
            for n in 0..100 {
                session.record_toolcall(call(n)).unwrap();
            }
            session
        });
}

/// Baseline of a commit: one durable redb transaction writing 4 KiB into a table of a fresh
/// file, committed as strata commits (quick repair, so two-phase: two fsyncs): what any commit
/// costs at least.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn baseline_durable_redb_commit_of_4_kib(bencher: divan::Bencher) {
    const TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("baseline");
    let tmp = tempfile::tempdir().unwrap();
    let db = redb::Database::create(tmp.path().join("baseline.redb")).unwrap();
    let value = vec![7u8; 4096];
    let mut key = 0u64;
    bencher.bench_local(|| {
        key += 1;
        let mut tx = db.begin_write().unwrap();
        tx.set_quick_repair(true);
        {
            let mut table = tx.open_table(TABLE).unwrap();
            table.insert(key, value.as_slice()).unwrap();
        }
        tx.commit().unwrap();
    });
}

/// Baseline of a resume: `git status --porcelain` (a process, as a user runs it) of the
/// fixture's 10 000-file tree, committed to a repository beside it.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn baseline_git_status_of_the_10000_file_tree(bencher: divan::Bencher) {
    let f = fixture(FILES);
    let root = std::fs::canonicalize(f._tmp.path()).unwrap().join("tree");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?} failed");
        out.stdout
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    git(&["status", "--porcelain"]);
    bencher.bench_local(|| {
        let out = git(&["status", "--porcelain"]);
        assert!(out.is_empty());
    });
}
