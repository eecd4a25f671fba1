//! Tree scans on real files: any thread count, batch size and byte budget gives the same store
//! answers as a one-thread scan with the defaults, through a change and a deletion too.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use strata::object::{FilesystemSource, ObjectType, Source, sourced_identity};
use strata::{Indexer, ScanOptions, ScanSummary, Settings, Store, scan};

use crate::support::{TestResult, env_count, incompressible};

/// A small tree: text files of several sizes in nested directories, binary files, files over
/// the content limit (1 KiB here), an empty file and a duplicate.
fn make_tree(root: &Path, seed: u64) -> TestResult<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    for i in 0..40 {
        let dir = root.join(format!("d{}/e{}", i % 4, i % 3));
        fs::create_dir_all(&dir)?;
        let path = dir.join(format!("f{i}.txt"));
        let bytes: Vec<u8> = match i % 8 {
            0 => (0..next() % 3000).map(|_| (next() % 256) as u8).collect(),
            1 => Vec::new(),
            _ => (0..next() % 1500)
                .map(|n| b"fn main() { let x = 1; }\n"[n % 25])
                .collect(),
        };
        fs::write(&path, &bytes)?;
        files.push(path);
    }
    fs::copy(&files[2], root.join("dup.txt"))?;
    files.push(root.join("dup.txt"));
    Ok(files)
}

/// What the store answers for each file of the tree: its live object hash, or none.
fn answers(store: &Store, root: &Path) -> TestResult<BTreeMap<String, Option<String>>> {
    let filesystem_id = strata::resolve::machine_filesystem_id();
    let mut out = BTreeMap::new();
    let prefix = root.to_str().ok_or("not UTF-8")?;
    for path in store.indexed_paths_under(&filesystem_id, prefix)? {
        let source = Source::Filesystem(FilesystemSource {
            filesystem_id: filesystem_id.clone(),
            path: path.clone(),
        });
        let id = sourced_identity(ObjectType::File, &source)?.to_hex();
        let info = store.version_info(&id, None, None)?;
        out.insert(path, info.and_then(|i| i.object_hash).map(|h| h.to_hex()));
    }
    Ok(out)
}

/// The counts of a summary that must not depend on how the scan ran (bytes read do: a file
/// written just before a scan is read again by the racy-clean rule, by timing).
fn counts(s: &ScanSummary) -> [u64; 5] {
    [s.files, s.created, s.updated, s.unchanged, s.deleted]
}

type Answers = (BTreeMap<String, Option<String>>, [u64; 5]);

/// Scans `root` into each store with its options, and returns what each answers.
fn scan_each(root: &Path, runs: &[(&Store, &ScanOptions)]) -> TestResult<Vec<Answers>> {
    let settings = Settings {
        max_content_bytes: 1024,
        ..Settings::default()
    };
    let mut out = Vec::new();
    for (store, options) in runs {
        let indexer = Indexer::new(store, &settings)?;
        let summary = scan(&indexer, &[root.to_path_buf()], options, &mut |_| {})?;
        out.push((answers(store, root)?, counts(&summary)));
    }
    Ok(out)
}

/// Whether scans keep directory listings on the filesystem of `path`: those whose directory
/// times change with every entry (ext2/3/4, XFS, Btrfs, tmpfs, F2FS).
#[allow(
    clippy::useless_conversion,
    reason = "the statfs field's type differs by platform"
)]
fn keeps_listings(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|fs| {
        i64::try_from(fs.f_type).is_ok_and(|t| {
            [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0xF2F5_2010].contains(&t)
        })
    })
}

#[test]
fn any_thread_count_batch_and_budget_gives_the_same_store() -> TestResult {
    let config = ProptestConfig {
        cases: env_count("STRATA_SCAN_CASES", 6)?,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    // `settle`: the tree's directories are left more than a second before the first scans, so
    // those scans keep their listings (dirs.cache) and the second scans take the listings of the
    // directories the changes left alone from there.
    let strategy = (
        1usize..=4,
        1usize..=64,
        1u64..=65_536,
        1u64..=131_072,
        any::<bool>(),
    );
    TestRunner::new(config).run(
        &strategy,
        |(threads, batch_files, batch_bytes, budget, settle)| {
            let run = || -> TestResult {
                let tmp = tempfile::tempdir()?;
                let root = fs::canonicalize(tmp.path())?;
                let tree = root.join("tree");
                let files = make_tree(&tree, 7)?;
                if settle {
                    std::thread::sleep(std::time::Duration::from_millis(2100));
                }
                // The reference: one worker, the default batches and budget.
                let reference = Store::open_or_create(root.join("reference.strata"))?;
                let one = ScanOptions {
                    threads: 1,
                    ..ScanOptions::default()
                };
                let dir = root.join("s.strata");
                let store = Store::open_or_create(&dir)?;
                let options = ScanOptions {
                    threads,
                    batch_files,
                    batch_bytes,
                    budget_bytes: budget,
                    ..ScanOptions::default()
                };
                let first = scan_each(&tree, &[(&reference, &one), (&store, &options)])?;
                drop(store);
                // Unchanged runs through a deferred handle, as `strata index` opens the store: the
                // first that writes nothing keeps the stat file (stat.cache), the next takes the
                // stat cache and the stored paths from it.
                for run in 0..2 {
                    let deferred = Store::open_deferred(&dir)?;
                    let again = scan_each(&tree, &[(&deferred, &options)])?;
                    let [files, created, updated, _, deleted] = again[0].1;
                    if again[0].0 != first[1].0
                        || [files, created, updated, deleted] != [first[1].1[0], 0, 0, 0]
                    {
                        return Err(format!(
                            "unchanged run {run}: {:?} against the first scan's {:?}",
                            again[0], first[1]
                        )
                        .into());
                    }
                }
                if settle && !dir.join("stat.cache").exists() {
                    return Err("settled files, yet no stat file was kept".into());
                }
                // Two files rewritten (one becomes binary), one deleted, one added.
                fs::write(&files[3], "changed\n")?;
                fs::write(&files[8], vec![0u8; 2048])?;
                fs::remove_file(&files[5])?;
                fs::write(tree.join("d0/new.txt"), "new\n")?;
                let deferred = Store::open_deferred(&dir)?;
                let second = scan_each(&tree, &[(&reference, &one), (&deferred, &options)])?;
                drop(deferred);
                let store = Store::open(&dir)?;
                if settle && keeps_listings(&tree) && !root.join("s.strata/dirs.cache").exists() {
                    return Err("settled directories, yet no listing was kept".into());
                }
                // The truth after the changes: a store without kept listings lists every directory.
                let fresh = Store::open_or_create(root.join("fresh.strata"))?;
                let truth = scan_each(&tree, &[(&fresh, &one)])?;
                // Live files only: the scanned store also lists the deleted one, with no version.
                let live = |answers: &Answers| -> BTreeMap<String, Option<String>> {
                    answers
                        .0
                        .iter()
                        .filter(|(_, h)| h.is_some())
                        .map(|(p, h)| (p.clone(), h.clone()))
                        .collect()
                };
                if live(&truth[0]) != live(&second[1]) {
                    return Err(format!(
                        "second scan (settled {settle}, threads {threads}): {:?} against a fresh \
                     store's {:?}",
                        second[1].0, truth[0].0
                    )
                    .into());
                }
                for (when, answers) in [("first", first), ("second", second)] {
                    if answers[0] != answers[1] {
                        return Err(format!(
                            "{when} scan, threads {threads}, batch {batch_files} files / \
                         {batch_bytes} bytes, budget {budget}: {:?} against the reference {:?}",
                            answers[1], answers[0]
                        )
                        .into());
                    }
                    let live = answers[1].0.values().filter(|h| h.is_some()).count();
                    if live != 41 {
                        return Err(format!("{when} scan: {live} live files, not 41").into());
                    }
                }
                if !store.fsck()?.is_empty() {
                    return Err("fsck found damage after the scans".into());
                }
                Ok(())
            };
            run().map_err(|e| TestCaseError::fail(format!("{e:?}")))
        },
    )?;
    Ok(())
}

/// An index beside another writer commits small batches, and the other writer's commits land
/// between them: a session commit never waits behind a commit of the whole tree.
#[test]
fn an_index_beside_another_writer_commits_small_batches_between_its_commits() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let tree = root.join("tree");
    for i in 0..1000 {
        let dir = tree.join(format!("d{}", i % 10));
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n"))?;
    }
    let store = Store::open_or_create(root.join("s.strata"))?;
    let settings = Settings::default();
    let indexing = std::sync::atomic::AtomicBool::new(true);
    let (summary, others) = std::thread::scope(|scope| -> TestResult<(ScanSummary, Vec<u64>)> {
        // The other writer: one small commit after another until the index ends.
        let writer = scope.spawn(|| -> TestResult<Vec<u64>> {
            let mut tx_ids = Vec::new();
            let mut n = 0;
            while indexing.load(std::sync::atomic::Ordering::Relaxed) || tx_ids.len() < 2 {
                n += 1;
                let object = strata::object::Object::file_text(
                    FilesystemSource {
                        filesystem_id: "other".into(),
                        path: format!("/other/{n}"),
                    },
                    format!("other {n}"),
                )?;
                let receipt =
                    store.transact(vec![strata::Op::put(object)], strata::Origin::Session)?;
                tx_ids.push(receipt.tx_id.0);
            }
            Ok(tx_ids)
        });
        while !store.others_writing(std::time::Duration::from_secs(1)) {
            std::thread::yield_now();
        }
        let indexer = Indexer::new(&store, &settings)?;
        let summary = scan(
            &indexer,
            std::slice::from_ref(&tree),
            &ScanOptions::default(),
            &mut |_| {},
        );
        indexing.store(false, std::sync::atomic::Ordering::Relaxed);
        let others = writer.join().map_err(|_| "the writer panicked")??;
        Ok((summary?, others))
    })?;
    assert_eq!(summary.created, 1000);
    // 1 000 files in batches of at most 128 (the default batch holds 4 096).
    assert!(
        summary.tx_ids.len() >= 1000 / 128,
        "{} index transactions",
        summary.tx_ids.len()
    );
    let (first, last) = (summary.tx_ids[0], summary.tx_ids[summary.tx_ids.len() - 1]);
    assert!(
        others.iter().any(|tx| (first..last).contains(tx)),
        "no other commit between the index's first ({first}) and last ({last}) transactions"
    );
    Ok(())
}

/// Writes `bytes` at `path` dated `mtime`.
fn write_dated(path: &Path, bytes: &[u8], mtime: std::time::SystemTime) -> TestResult {
    fs::write(path, bytes)?;
    fs::File::options()
        .write(true)
        .open(path)?
        .set_modified(mtime)?;
    Ok(())
}

/// The counts of a summary: files, created, updated, unchanged, deleted.
fn tally(s: &ScanSummary) -> [u64; 5] {
    [s.files, s.created, s.updated, s.unchanged, s.deleted]
}

#[test]
fn a_rescan_finds_every_change_the_stat_cache_could_hide() -> TestResult {
    use std::time::{Duration, SystemTime};
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let tree = root.join("tree");
    fs::create_dir_all(tree.join("sub/deeper"))?;
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let names = [
        "edit.txt",
        "gone.txt",
        "old.txt",
        "size.txt",
        "samesize.txt",
        "touch.txt",
        "sub/a.txt",
        "sub/b.txt",
        "sub/deeper/c.txt",
    ];
    for name in names {
        write_dated(&tree.join(name), format!("{name}\n").as_bytes(), hour_ago)?;
    }
    // Dated ahead of any scan: the racy-clean rule never lets the cache vouch for it.
    let racy = tree.join("racy.txt");
    write_dated(
        &racy,
        b"racy\n",
        SystemTime::now() + Duration::from_secs(3600),
    )?;
    let store = Store::open_or_create(root.join("s.strata"))?;
    let indexer = Indexer::new(&store, &Settings::default())?;
    let options = ScanOptions {
        threads: 2,
        ..ScanOptions::default()
    };
    let run = || scan(&indexer, std::slice::from_ref(&tree), &options, &mut |_| {});
    let first = run()?;
    assert_eq!(tally(&first), [10, 10, 0, 0, 0], "{first:?}");
    // Unchanged: nothing written, only the racy file read again.
    let again = run()?;
    assert_eq!(tally(&again), [10, 0, 0, 10, 0], "{again:?}");
    assert!(again.tx_ids.is_empty(), "{again:?}");
    assert_eq!(again.bytes_read, 5, "{again:?}");

    // An edit with a new mtime; a deletion; a rename (mtime kept); a size change and a
    // same-size rewrite, both with their mtime put back; an mtime-only touch.
    write_dated(
        &tree.join("edit.txt"),
        b"edited\n",
        hour_ago + Duration::from_secs(60),
    )?;
    fs::remove_file(tree.join("gone.txt"))?;
    fs::rename(tree.join("old.txt"), tree.join("sub/new.txt"))?;
    write_dated(&tree.join("size.txt"), b"size.txt grew\n", hour_ago)?;
    write_dated(&tree.join("samesize.txt"), b"SAMESIZE.TXT\n", hour_ago)?;
    fs::File::options()
        .write(true)
        .open(tree.join("touch.txt"))?
        .set_modified(hour_ago + Duration::from_secs(120))?;
    let changed = run()?;
    // files: 10 - 1 gone; created: the renamed file's new path; updated: edit, size,
    // samesize; unchanged: touch (read, same bytes), racy, sub/a, sub/b, sub/deeper/c;
    // deleted: gone and the rename's old path.
    assert_eq!(tally(&changed), [9, 1, 3, 5, 2], "{changed:?}");
    let filesystem_id = strata::resolve::machine_filesystem_id();
    let mut live = Vec::new();
    for path in store.indexed_paths_under(&filesystem_id, tree.to_str().ok_or("not UTF-8")?)? {
        let source = Source::Filesystem(FilesystemSource {
            filesystem_id: filesystem_id.clone(),
            path: path.clone(),
        });
        let id = sourced_identity(ObjectType::File, &source)?.to_hex();
        let Some(info) = store.version_info(&id, None, None)? else {
            continue;
        };
        if info.object_hash.is_some() {
            live.push(
                path.strip_prefix(tree.to_str().ok_or("not UTF-8")?)
                    .unwrap_or(&path)
                    .to_string(),
            );
        }
    }
    live.sort();
    assert_eq!(
        live,
        [
            "/edit.txt",
            "/racy.txt",
            "/samesize.txt",
            "/size.txt",
            "/sub/a.txt",
            "/sub/b.txt",
            "/sub/deeper/c.txt",
            "/sub/new.txt",
            "/touch.txt",
        ]
    );
    // And then all unchanged again, the touched file vouched for by its new stat.
    let settled = run()?;
    assert_eq!(tally(&settled), [9, 0, 0, 9, 0], "{settled:?}");
    assert!(settled.tx_ids.is_empty(), "{settled:?}");
    assert_eq!(settled.bytes_read, 5, "{settled:?}");
    Ok(())
}

#[test]
fn a_scan_of_a_deferred_store_writes_nothing_for_an_unchanged_tree_and_every_change_otherwise()
-> TestResult {
    use std::time::{Duration, SystemTime};
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let tree = root.join("tree");
    fs::create_dir_all(tree.join("sub"))?;
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for name in ["a.txt", "b.txt", "gone.txt", "sub/c.txt"] {
        write_dated(&tree.join(name), format!("{name}\n").as_bytes(), hour_ago)?;
    }
    let dir = root.join("s.strata");
    let options = ScanOptions {
        threads: 2,
        ..ScanOptions::default()
    };
    let run = |store: &Store| -> TestResult<ScanSummary> {
        let indexer = Indexer::new(store, &Settings::default())?;
        Ok(scan(
            &indexer,
            std::slice::from_ref(&tree),
            &options,
            &mut |_| {},
        )?)
    };
    let first = run(&Store::open_or_create(&dir)?)?;
    assert_eq!(tally(&first), [4, 4, 0, 0, 0], "{first:?}");
    let file = dir.join("store.redb");
    let before = fs::read(&file)?;
    let again = run(&Store::open_deferred(&dir)?)?;
    assert_eq!(tally(&again), [4, 0, 0, 4, 0], "{again:?}");
    assert!(
        fs::read(&file)? == before,
        "an unchanged tree left the store file as it was"
    );

    // An edit, a new file, a deletion: the scan opens the file to write at its commit.
    write_dated(
        &tree.join("a.txt"),
        b"edited\n",
        hour_ago + Duration::from_secs(60),
    )?;
    write_dated(&tree.join("sub/new.txt"), b"new\n", hour_ago)?;
    fs::remove_file(tree.join("gone.txt"))?;
    let store = Store::open_deferred(&dir)?;
    let changed = run(&store)?;
    assert_eq!(tally(&changed), [4, 1, 1, 2, 1], "{changed:?}");
    assert_eq!(changed.tx_ids.len(), 1, "{changed:?}");
    drop(store);
    // What the store answers is what a fresh index of the tree answers (and the gone file
    // has no live version).
    let live = |store: &Store| -> TestResult<BTreeMap<String, Option<String>>> {
        let mut all = answers(store, &tree)?;
        all.retain(|_, hash| hash.is_some());
        Ok(all)
    };
    let fresh = Store::open_or_create(root.join("fresh.strata"))?;
    run(&fresh)?;
    let store = Store::open_read_only(&dir)?;
    assert_eq!(live(&store)?, live(&fresh)?);
    assert_eq!(live(&store)?.len(), 4);
    drop(store);
    let settled = run(&Store::open_deferred(&dir)?)?;
    assert_eq!(tally(&settled), [4, 0, 0, 4, 0], "{settled:?}");

    // Many changes in batches of one file: the writer thread opens the file to write while
    // the walk, the planner's reads and the listing of stored paths go on.
    for n in 0..40 {
        write_dated(
            &tree.join(format!("sub/more{n}.txt")),
            format!("{n}\n").as_bytes(),
            hour_ago,
        )?;
    }
    write_dated(
        &tree.join("b.txt"),
        b"b again\n",
        hour_ago + Duration::from_secs(60),
    )?;
    let store = Store::open_deferred(&dir)?;
    let indexer = Indexer::new(&store, &Settings::default())?;
    let one_by_one = ScanOptions {
        threads: 2,
        batch_files: 1,
        ..ScanOptions::default()
    };
    let many = scan(
        &indexer,
        std::slice::from_ref(&tree),
        &one_by_one,
        &mut |_| {},
    )?;
    assert_eq!(tally(&many), [44, 40, 1, 3, 0], "{many:?}");
    assert!(many.tx_ids.len() >= 40, "{many:?}");
    drop(indexer);
    drop(store);
    let fresh = Store::open_or_create(root.join("fresh2.strata"))?;
    run(&fresh)?;
    let store = Store::open_read_only(&dir)?;
    assert_eq!(live(&store)?, live(&fresh)?);
    assert_eq!(store.fsck()?, Vec::new());
    Ok(())
}

/// Two `strata index` runs of one tree at once, each opened to write at its first write: the
/// one that writes second read the store before the other wrote, so its first write is refused
/// and the scan plans again from the store as it is. Every file ends with one version, created
/// by one run and unchanged for the other.
#[test]
fn two_deferred_index_runs_at_once_write_each_file_once() -> TestResult {
    use strata::engine::{Access, Apply, Engine, IndexRequest};
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let tree = root.join("tree");
    let files = make_tree(&tree, 7)?;
    let dir = root.join("s.strata");
    drop(Store::create(&dir)?);
    let request = || IndexRequest {
        paths: vec![tree.to_string_lossy().into_owned()],
        cwd: None,
        threads: Some(2),
    };
    // Both read the empty store before either writes.
    let first = Engine::open(&dir, Access::CreateDeferred)?;
    let second = Engine::open(&dir, Access::CreateDeferred)?;
    let other = std::thread::spawn({
        let request = request();
        move || request.apply(&second).map_err(|e| e.to_string())
    });
    let mine = request().apply(&first)?;
    drop(first);
    let theirs = other.join().map_err(|_| "the other run panicked")??;
    let created = mine.created + theirs.created;
    assert_eq!(created as usize, files.len(), "{mine:?} {theirs:?}");
    assert_eq!(
        (mine.unchanged + theirs.unchanged) as usize,
        files.len(),
        "{mine:?} {theirs:?}"
    );
    let store = Store::open_read_only(&dir)?;
    assert_eq!(store.fsck()?, Vec::new());
    let fresh = Store::open_or_create(root.join("fresh.strata"))?;
    let indexer = Indexer::new(&fresh, &Settings::default())?;
    scan(
        &indexer,
        std::slice::from_ref(&tree),
        &ScanOptions::default(),
        &mut |_| {},
    )?;
    assert_eq!(answers(&store, &tree)?, answers(&fresh, &tree)?);
    Ok(())
}

/// A SIGKILL in the middle of `strata index` (whose batches are committed without an fsync
/// until the index ends, or half a second has passed) loses nothing an index that returned
/// wrote: the store opens, checks clean and answers for that index's files as before, and the
/// next index finishes what the killed ones began.
#[test]
fn sigkill_during_an_index_loses_nothing_an_index_that_returned_wrote() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let dir = root.join("s.strata");
    let strata = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_strata"));
        command
            .arg("--no-daemon")
            .arg("--store")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    };
    let done = root.join("done");
    make_tree(&done, 3)?;
    assert!(strata().arg("index").arg(&done).status()?.success());
    let before = answers(&Store::open(&dir)?, &done)?;
    assert_eq!(before.len(), 41);
    // Several batches of 8 MiB: 1 600 files of 16 KiB that do not compress.
    let big = root.join("big");
    for i in 0..1600 {
        let sub = big.join(format!("d{}", i % 16));
        fs::create_dir_all(&sub)?;
        fs::write(
            sub.join(format!("f{i}.bin")),
            incompressible(16 * 1024, 0x9e37 + i),
        )?;
    }
    for round in 0..env_count("STRATA_CRASH_ROUNDS", 4)? {
        let mut child = strata().arg("index").arg(&big).spawn()?;
        std::thread::sleep(std::time::Duration::from_millis(
            150 + (u64::from(round) * 7919) % 900,
        ));
        child.kill()?;
        child.wait()?;
        let store = Store::open(&dir)?;
        assert_eq!(store.fsck()?, vec![], "round {round}");
        assert_eq!(answers(&store, &done)?, before, "round {round}");
    }
    assert!(strata().arg("index").arg(&big).status()?.success());
    let store = Store::open(&dir)?;
    assert_eq!(store.fsck()?, vec![]);
    let live = answers(&store, &big)?
        .values()
        .filter(|h| h.is_some())
        .count();
    assert_eq!(live, 1600);
    assert_eq!(answers(&store, &done)?, before);
    Ok(())
}
