//! Tests of strata's patches to the vendored redb (vendor/redb/PATCHED.md) through redb's own
//! API on real files: the vendored copy carries none of upstream's test suites.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

/// The width of the test tables' keys: a branch of 240-byte keys holds 16 children in a 4 KiB
/// page (8 bytes of header, 24 a child, 240 a key), so a few thousand rows make a tree of
/// several branch levels.
const WIDTH: usize = 240;

/// A table of wide fixed-width keys.
const TABLE: TableDefinition<[u8; WIDTH], &[u8]> = TableDefinition::new("t");

/// A test's outcome: redb's and proptest's errors alike.
type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// The wide key that stands for `k`: its big-endian bytes first, so that keys sort as numbers.
fn key(k: u64) -> [u8; WIDTH] {
    let mut bytes = [0u8; WIDTH];
    bytes[..8].copy_from_slice(&k.to_be_bytes());
    // The last bytes vary too, so that no key is mostly zeros.
    bytes[WIDTH - 8..].copy_from_slice(&(!k).to_be_bytes());
    bytes
}

/// A value of `len` bytes that depends on the key and on the write (`generation`).
fn value(k: u64, generation: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (k as u8) ^ generation ^ (i as u8).wrapping_mul(31))
        .collect()
}

/// One step of a history on one table.
#[derive(Debug, Clone)]
enum Step {
    /// Appends `count` keys above every key so far, each with a value of `len` bytes.
    Append { count: u64, len: usize },
    /// Inserts (or replaces) the key `at` % (greatest key + 2): anywhere, the end included.
    Insert { at: u64, len: usize },
    /// Removes the `at` % len-th key and the `run` - 1 keys after it.
    Remove { at: usize, run: usize },
    /// Removes a key that may be absent (`at` % (greatest key + 2)).
    RemoveAny { at: u64 },
    /// Commits the write transaction and checks the table in a read transaction.
    Commit,
}

/// A step: mostly appends and inserts, some removes and commits.
fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..80, 0usize..400).prop_map(|(count, len)| Step::Append { count, len }),
        4 => (any::<u64>(), 0usize..600).prop_map(|(at, len)| Step::Insert { at, len }),
        2 => (any::<usize>(), 1usize..40).prop_map(|(at, run)| Step::Remove { at, run }),
        1 => any::<u64>().prop_map(|at| Step::RemoveAny { at }),
        1 => Just(Step::Commit),
    ]
}

/// The greatest key of `model` plus one, the first key an append writes.
fn next_key(model: &BTreeMap<u64, Vec<u8>>) -> u64 {
    model.last_key_value().map_or(0, |(k, _)| k + 1)
}

/// Checks that `table` holds exactly `model`: every get (and a few absent keys), full
/// iteration forward and backward, and the ranges `ranges` (fractions of the key space).
fn check_table(
    table: &impl ReadableTable<[u8; WIDTH], &'static [u8]>,
    model: &BTreeMap<u64, Vec<u8>>,
    ranges: &[(u64, u64, bool)],
) -> TestResult {
    assert_eq!(table.len()?, model.len() as u64);
    for (k, v) in model {
        let got = table.get(key(*k))?;
        assert_eq!(
            got.as_ref().map(|g| g.value()),
            Some(v.as_slice()),
            "key {k}"
        );
        if !model.contains_key(&(k + 1)) {
            assert!(table.get(key(k + 1))?.is_none(), "absent key {}", k + 1);
        }
    }
    let forward: Vec<(u64, Vec<u8>)> = table
        .iter()?
        .map(|row| row.map(|(k, v)| (number(&k.value()), v.value().to_vec())))
        .collect::<Result<_, _>>()?;
    let expected: Vec<(u64, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(forward, expected, "forward iteration");
    let backward: Vec<u64> = table
        .iter()?
        .rev()
        .map(|row| row.map(|(k, _)| number(&k.value())))
        .collect::<Result<_, _>>()?;
    let expected_backward: Vec<u64> = model.keys().rev().copied().collect();
    assert_eq!(backward, expected_backward, "backward iteration");
    let span = next_key(model) + 1;
    for &(a, b, inclusive) in ranges {
        let (low, high) = (a % span, b % span);
        let (low, high) = (low.min(high), low.max(high));
        let end = if inclusive {
            Bound::Included(high)
        } else {
            Bound::Excluded(high)
        };
        let expected: Vec<u64> = model
            .range((Bound::Included(low), end))
            .map(|(k, _)| *k)
            .collect();
        let wide_end = match end {
            Bound::Included(h) => Bound::Included(key(h)),
            Bound::Excluded(h) => Bound::Excluded(key(h)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let got: Vec<u64> = table
            .range::<[u8; WIDTH]>((Bound::Included(key(low)), wide_end))?
            .map(|row| row.map(|(k, _)| number(&k.value())))
            .collect::<Result<_, _>>()?;
        assert_eq!(got, expected, "range {low}..{end:?}");
        let got_back: Vec<u64> = table
            .range::<[u8; WIDTH]>((Bound::Included(key(low)), wide_end))?
            .rev()
            .map(|row| row.map(|(k, _)| number(&k.value())))
            .collect::<Result<_, _>>()?;
        let expected_back: Vec<u64> = expected.into_iter().rev().collect();
        assert_eq!(got_back, expected_back, "range {low}..{end:?} backward");
    }
    Ok(())
}

/// The number a wide key stands for.
fn number(k: &[u8; WIDTH]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&k[..8]);
    u64::from_be_bytes(bytes)
}

/// Runs `steps` on a fresh database file against a `BTreeMap`, checking the table after every
/// commit, after a reopen and after a compaction, and with redb's `check_integrity`.
fn run(steps: &[Step], ranges: &[(u64, u64, bool)]) -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.redb");
    let mut db = Database::create(&path)?;
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut generation = 0u8;
    let mut write = db.begin_write()?;
    for step in steps {
        generation = generation.wrapping_add(1);
        match *step {
            Step::Append { count, len } => {
                let mut table = write.open_table(TABLE)?;
                let first = next_key(&model);
                for k in first..first + count {
                    let v = value(k, generation, len);
                    table.insert(key(k), v.as_slice())?;
                    model.insert(k, v);
                }
            }
            Step::Insert { at, len } => {
                let k = at % (next_key(&model) + 1);
                let v = value(k, generation, len);
                let old = write
                    .open_table(TABLE)?
                    .insert(key(k), v.as_slice())?
                    .map(|g| g.value().to_vec());
                assert_eq!(old, model.insert(k, v), "insert {k}");
            }
            Step::Remove { at, run } => {
                if model.is_empty() {
                    continue;
                }
                let keys: Vec<u64> = model
                    .keys()
                    .copied()
                    .skip(at % model.len())
                    .take(run)
                    .collect();
                let mut table = write.open_table(TABLE)?;
                for k in keys {
                    let old = table.remove(key(k))?.map(|g| g.value().to_vec());
                    assert_eq!(old, model.remove(&k), "remove {k}");
                }
            }
            Step::RemoveAny { at } => {
                let k = at % (next_key(&model) + 1);
                let old = write
                    .open_table(TABLE)?
                    .remove(key(k))?
                    .map(|g| g.value().to_vec());
                assert_eq!(old, model.remove(&k), "remove {k}");
            }
            Step::Commit => {
                write.open_table(TABLE)?;
                write.commit()?;
                let read = db.begin_read()?;
                check_table(&read.open_table(TABLE)?, &model, ranges)?;
                write = db.begin_write()?;
            }
        }
    }
    check_table(&write.open_table(TABLE)?, &model, ranges)?;
    write.commit()?;
    assert!(db.check_integrity()?, "check_integrity repaired the file");
    drop(db);
    let mut db = Database::open(&path)?;
    assert!(
        db.check_integrity()?,
        "check_integrity repaired the reopened file"
    );
    let read = db.begin_read()?;
    check_table(&read.open_table(TABLE)?, &model, ranges)?;
    drop(read);
    // Compaction finds the pages to move by reading the branches only, naming each leaf by its
    // parent at the leftmost leaf's depth (strata's patch): on a tree shaped by any mix of
    // splits and merges, every row stays.
    db.compact()?;
    assert!(
        db.check_integrity()?,
        "check_integrity repaired the compacted file"
    );
    let read = db.begin_read()?;
    check_table(&read.open_table(TABLE)?, &model, ranges)?;
    Ok(())
}

/// The number of cases of the model property (`STRATA_PROPTEST_CASES` raises it).
fn cases() -> u32 {
    crate::proptest_cases(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Appends, inserts anywhere, removes and commits in any mix leave the table answering as
    /// a `BTreeMap` does, and the file passes redb's integrity check.
    #[test]
    fn a_table_answers_as_a_btreemap_after_appends_inserts_and_removes(
        steps in proptest::collection::vec(step(), 1..120),
        ranges in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 4),
    ) {
        let outcome = run(&steps, &ranges);
        prop_assert!(outcome.is_ok(), "{outcome:?}");
    }
}

/// A long append: a few thousand rows in ascending order, then more after a commit and some
/// removes, the case the branch packing patch changes most.
#[test]
fn a_long_append_with_removes_answers_as_a_btreemap() -> TestResult {
    let mut steps = vec![
        Step::Append {
            count: 1500,
            len: 20,
        },
        Step::Commit,
    ];
    steps.push(Step::Remove { at: 700, run: 300 });
    steps.push(Step::Append {
        count: 1500,
        len: 300,
    });
    steps.push(Step::Insert {
        at: 12_345,
        len: 10,
    });
    steps.push(Step::Commit);
    steps.push(Step::Remove { at: 0, run: 2000 });
    run(
        &steps,
        &[(0, u64::MAX, true), (1000, 2500, false), (2999, 3001, true)],
    )
}

/// Keys appended in ascending order over several commits leave the table's branch pages
/// packed (strata's patch: a branch that gains a child at the rightmost end keeps all but the
/// last two children) where an even split left them about half full.
#[test]
fn appended_keys_leave_branch_pages_packed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Database::create(dir.path().join("t.redb"))?;
    let mut next = 0u64;
    for _ in 0..8 {
        let write = db.begin_write()?;
        {
            let mut table = write.open_table(TABLE)?;
            for _ in 0..500 {
                table.insert(key(next), [7u8].as_slice())?;
                next += 1;
            }
        }
        write.commit()?;
    }
    let read = db.begin_read()?;
    let stats = read.open_table(TABLE)?.stats()?;
    // Packed, a branch that splits keeps 15 of its 16 children (the last one and the new one
    // go to the new page), so each level holds its children in 15-child pages; an even split
    // leaves about 9 in each, and 31 branch pages here instead of 20.
    let mut packed = 0;
    let mut level = stats.leaf_pages();
    while level > 1 {
        level = level.div_ceil(15);
        packed += level;
    }
    assert!(
        stats.branch_pages() <= packed + 1,
        "{} branch pages over {} leaves, packed would be {packed}",
        stats.branch_pages(),
        stats.leaf_pages()
    );
    Ok(())
}

/// How many writes a [`CountingFile`] was asked for: one call per page, or one per run.
#[derive(Debug, Default)]
struct WriteCounts {
    writes: std::sync::atomic::AtomicUsize,
    vectored: std::sync::atomic::AtomicUsize,
    syncs: std::sync::atomic::AtomicUsize,
}

impl WriteCounts {
    /// Writes and vectored writes so far.
    fn get(&self) -> (usize, usize) {
        (
            self.writes.load(std::sync::atomic::Ordering::Relaxed),
            self.vectored.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// A file backend that counts its callers' writes into counts the test shares.
#[derive(Debug)]
struct CountingFile {
    file: redb::backends::FileBackend,
    counts: std::sync::Arc<WriteCounts>,
}

impl redb::StorageBackend for CountingFile {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        self.file.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        self.counts
            .syncs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        self.counts
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.file.write(offset, data)
    }
    fn write_vectored(
        &self,
        offset: u64,
        parts: &[&[u8]],
    ) -> std::result::Result<(), std::io::Error> {
        self.counts
            .vectored
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.file.write_vectored(offset, parts)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        self.file.close()
    }
}

/// A new empty file at `path`, open to read and write, for a backend.
fn empty_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// An append-only table of 4 000-byte values, as strata's blob stream.
const CHUNKS: TableDefinition<u64, &[u8]> = TableDefinition::new("chunks");

/// A new file at `path` of `rows` 4 000-byte rows of which two thirds were then removed (the
/// rows left: every third key).
fn two_thirds_removed(
    path: &std::path::Path,
    rows: u64,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let db = Database::create(path)?;
    let tx = db.begin_write()?;
    {
        let mut table = tx.open_table(CHUNKS)?;
        for k in 0..rows {
            table.insert(k, value(k, 3, 4_000).as_slice())?;
        }
    }
    tx.commit()?;
    let tx = db.begin_write()?;
    {
        let mut table = tx.open_table(CHUNKS)?;
        for k in (0..rows).filter(|k| k % 3 != 0) {
            table.remove(k)?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Compacts a file with two thirds of its 4 000-byte rows removed, opened through a
/// [`CountingFile`], with one-phase drains or redb's own two-phase ones: the file's length
/// and its syncs afterwards.
fn compacted(
    path: &std::path::Path,
    one_phase: bool,
) -> std::result::Result<(u64, usize), Box<dyn std::error::Error>> {
    two_thirds_removed(path, 1_500)?;
    let counts = std::sync::Arc::new(WriteCounts::default());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut db = Database::builder().create_with_backend(CountingFile {
        file: redb::backends::FileBackend::new(file)?,
        counts: counts.clone(),
    })?;
    let compacted = if one_phase {
        db.compact_with_one_phase_drains()?
    } else {
        db.compact()?
    };
    assert!(compacted);
    let syncs = counts.syncs.load(std::sync::atomic::Ordering::Relaxed);
    drop(db);
    let mut db = Database::open(path)?;
    assert!(db.check_integrity()?, "check_integrity repaired the file");
    let rtx = db.begin_read()?;
    let table = rtx.open_table(CHUNKS)?;
    assert_eq!(table.len()?, 500);
    for k in (0..1_500u64).filter(|k| k % 3 == 0) {
        let got = table.get(k)?.map(|v| v.value().to_vec());
        assert_eq!(got, Some(value(k, 3, 4_000)), "row {k}");
    }
    Ok((std::fs::metadata(path)?.len(), syncs))
}

/// strata's patch: a compaction whose page-freeing commits are one-phase leaves the same file
/// as redb's own (the same length, every row) with fewer syncs.
#[test]
fn a_compaction_with_one_phase_drains_leaves_the_same_file_with_fewer_syncs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (two_len, two_syncs) = compacted(&dir.path().join("two.redb"), false)?;
    let (one_len, one_syncs) = compacted(&dir.path().join("one.redb"), true)?;
    assert_eq!(one_len, two_len);
    assert!(
        one_syncs < two_syncs,
        "{one_syncs} syncs with one-phase drains, {two_syncs} with two-phase ones"
    );
    Ok(())
}

/// What of the writes since the last sync a power loss at a sync keeps.
#[derive(Clone, Copy, Debug)]
enum Torn {
    None,
    All,
    HeaderOnly,
    AllButHeader,
    Even,
    Odd,
}

/// One write or length change not yet synced.
#[derive(Debug)]
enum Unsynced {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// A file backend that keeps the image a power loss would leave: every sync makes the writes
/// before it durable, and at sync number `crash_at` the power goes (that sync fails, the writes
/// since the last one land as `torn` says, and nothing after it reaches the disk).
#[derive(Debug)]
struct PowerLoss {
    file: redb::backends::FileBackend,
    durable: std::sync::Mutex<Vec<u8>>,
    unsynced: std::sync::Mutex<Vec<Unsynced>>,
    syncs: std::sync::atomic::AtomicUsize,
    crash_at: usize,
    torn: Torn,
    crashed: std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

impl PowerLoss {
    fn dead(&self) -> bool {
        self.crashed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    fn apply(image: &mut Vec<u8>, op: &Unsynced) {
        match op {
            Unsynced::Write(offset, data) => {
                let start = *offset as usize;
                if image.len() < start + data.len() {
                    image.resize(start + data.len(), 0);
                }
                image[start..start + data.len()].copy_from_slice(data);
            }
            Unsynced::SetLen(len) => image.resize(*len as usize, 0),
        }
    }
}

impl redb::StorageBackend for PowerLoss {
    fn len(&self) -> std::result::Result<u64, std::io::Error> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), std::io::Error> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), std::io::Error> {
        if self.dead() {
            return Err(std::io::Error::other("the power is off"));
        }
        self.unsynced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Unsynced::SetLen(len));
        self.file.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), std::io::Error> {
        if self.dead() {
            return Err(std::io::Error::other("the power is off"));
        }
        let n = self.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let mut unsynced = self
            .unsynced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut durable = self
            .durable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if n == self.crash_at {
            let mut image = durable.clone();
            for (i, op) in unsynced.iter().enumerate() {
                let header = matches!(op, Unsynced::Write(0, _) | Unsynced::SetLen(_));
                let lands = match self.torn {
                    Torn::None => false,
                    Torn::All => true,
                    Torn::HeaderOnly => header,
                    Torn::AllButHeader => !header,
                    Torn::Even => i % 2 == 0,
                    Torn::Odd => i % 2 == 1,
                };
                if lands {
                    Self::apply(&mut image, op);
                }
            }
            *self
                .crashed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(image);
            return Err(std::io::Error::other("the power went"));
        }
        for op in unsynced.drain(..) {
            Self::apply(&mut durable, &op);
        }
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), std::io::Error> {
        if self.dead() {
            return Err(std::io::Error::other("the power is off"));
        }
        self.unsynced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Unsynced::Write(offset, data.to_vec()));
        self.file.write(offset, data)
    }
    fn close(&self) -> std::result::Result<(), std::io::Error> {
        self.file.close()
    }
}

/// Runs `work` on a copy of the file `source` (in `dir`) opened through a [`PowerLoss`] backend,
/// the power lost at each of its syncs in turn (the opening's too) with the unsynced writes
/// landing in each of several ways, and calls `check` on each file a crash leaves (its path and
/// which crash it was). Returns how many syncs were made without a power loss.
fn at_every_power_loss(
    dir: &std::path::Path,
    source: &std::path::Path,
    work: &dyn Fn(Database),
    check: &mut dyn FnMut(&std::path::Path, &str) -> TestResult,
) -> std::result::Result<usize, Box<dyn std::error::Error>> {
    let run = |crash_at: usize,
               torn: Torn|
     -> std::result::Result<Option<Vec<u8>>, Box<dyn std::error::Error>> {
        let path = dir.join("live.redb");
        std::fs::copy(source, &path)?;
        let bytes = std::fs::read(&path)?;
        let crashed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        let power = PowerLoss {
            file: redb::backends::FileBackend::new(file)?,
            durable: std::sync::Mutex::new(bytes),
            unsynced: std::sync::Mutex::new(Vec::new()),
            syncs: std::sync::atomic::AtomicUsize::new(0),
            crash_at,
            torn,
            crashed: crashed.clone(),
        };
        // Opening syncs too; a power loss there leaves the file as it was.
        if let Ok(db) = Database::builder().create_with_backend(power) {
            work(db);
        }
        Ok(crashed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take())
    };
    let mut crash_at = 1;
    loop {
        let mut reached = false;
        for torn in [
            Torn::None,
            Torn::All,
            Torn::HeaderOnly,
            Torn::AllButHeader,
            Torn::Even,
            Torn::Odd,
        ] {
            let image = run(crash_at, torn)?;
            let Some(image) = image else { continue };
            reached = true;
            let path = dir.join("crashed.redb");
            std::fs::write(&path, &image)?;
            check(&path, &format!("power lost at sync {crash_at}, {torn:?}"))?;
        }
        if !reached {
            return Ok(crash_at - 1);
        }
        crash_at += 1;
    }
}

/// A compaction (with one-phase drains or two-phase ones) of a file with two thirds of its
/// rows removed, the power lost at each of its syncs in turn with the unsynced writes landing
/// in each of several ways: the file a crash leaves opens (repaired) with every row, and checks
/// clean. Returns how many syncs the compaction made.
fn compaction_survives_power_loss(
    dir: &std::path::Path,
    one_phase: bool,
) -> std::result::Result<usize, Box<dyn std::error::Error>> {
    let source = dir.join("source.redb");
    two_thirds_removed(&source, 300)?;
    let work = |mut db: Database| {
        let _ = if one_phase {
            db.compact_with_one_phase_drains()
        } else {
            db.compact()
        };
    };
    at_every_power_loss(dir, &source, &work, &mut |path, crash| {
        let what = format!("one-phase {one_phase}, {crash}");
        let mut db = Database::open(path).map_err(|e| format!("{what}: {e}"))?;
        assert!(db.check_integrity()?, "{what}: check_integrity repaired");
        let rtx = db.begin_read()?;
        let table = rtx.open_table(CHUNKS)?;
        assert_eq!(table.len()?, 100, "{what}");
        for k in (0..300u64).filter(|k| k % 3 == 0) {
            let got = table.get(k)?.map(|v| v.value().to_vec());
            assert_eq!(got, Some(value(k, 3, 4_000)), "{what}: row {k}");
        }
        Ok(())
    })
}

/// strata's patch: a compaction whose page-freeing commits are one-phase, the power lost at
/// any of its syncs with any part of the unsynced writes on disk, leaves a file that opens with
/// every row, as redb's own two-phase drains do.
#[test]
fn a_compaction_with_one_phase_drains_survives_power_loss_at_every_sync() -> TestResult {
    let two = compaction_survives_power_loss(tempfile::tempdir()?.path(), false)?;
    let one = compaction_survives_power_loss(tempfile::tempdir()?.path(), true)?;
    assert!(
        one > 2 && two > one,
        "{one} syncs one-phase, {two} two-phase"
    );
    Ok(())
}

#[test]
fn a_commit_writes_its_adjacent_pages_in_runs_that_read_back() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("runs.redb");
    let file = empty_file(&path)?;
    let counts = std::sync::Arc::new(WriteCounts::default());
    let db = Database::builder().create_with_backend(CountingFile {
        file: redb::backends::FileBackend::new(file)?,
        counts: counts.clone(),
    })?;
    let before = counts.get();
    let tx = db.begin_write()?;
    {
        let mut table = tx.open_table(CHUNKS)?;
        for k in 0..2_000u64 {
            table.insert(k, value(k, 7, 4_000).as_slice())?;
        }
    }
    tx.commit()?;
    let after = counts.get();
    let (writes, runs) = (after.0 - before.0, after.1 - before.1);
    // ~2 000 leaves and their branches, written as a few runs rather than a write each.
    assert!(
        writes + runs < 200,
        "{writes} writes and {runs} runs for a commit of ~2 000 pages"
    );
    drop(db);
    let db = Database::open(&path)?;
    let rtx = db.begin_read()?;
    let table = rtx.open_table(CHUNKS)?;
    assert_eq!(table.len()?, 2_000);
    for k in 0..2_000u64 {
        let got = table.get(k)?.map(|v| v.value().to_vec());
        assert_eq!(got, Some(value(k, 7, 4_000)), "chunk {k}");
    }
    Ok(())
}

#[test]
fn a_vectored_write_of_more_parts_than_one_call_takes_is_their_concatenation() -> TestResult {
    use redb::StorageBackend;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("file");
    let file = empty_file(&path)?;
    let backend = redb::backends::FileBackend::new(file)?;
    // 2 500 parts (IOV_MAX is 1 024) of uneven lengths, some empty, from an odd offset.
    let parts: Vec<Vec<u8>> = (0..2_500u64)
        .map(|i| value(i, 3, (i as usize * 37) % 600))
        .collect();
    let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let offset = 4_097;
    backend.set_len(offset)?;
    backend.write_vectored(offset, &slices)?;
    let whole = parts.concat();
    let mut back = vec![0u8; whole.len()];
    backend.read(offset, &mut back)?;
    assert!(back == whole, "the file holds the parts' concatenation");
    backend.close()?;
    Ok(())
}

#[test]
fn a_vectored_write_where_off_t_cannot_reach_fails_as_a_write_does() -> TestResult {
    use redb::StorageBackend;
    let dir = tempfile::tempdir()?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("file"))?;
    let backend = redb::backends::FileBackend::new(file)?;
    // Past what a 64-bit off_t names (past 2 GiB, a 32-bit one's, on 32-bit glibc): the vectored
    // write takes `write`'s path (std's pwrite64) instead of refusing the offset itself.
    let offset = 1u64 << 63;
    let part = [7u8; 16];
    let plain = backend.write(offset, &part);
    let vectored = backend.write_vectored(offset, &[&part, &part]);
    let (Err(plain), Err(vectored)) = (plain, vectored) else {
        return Err("a write past i64::MAX succeeded".into());
    };
    assert_eq!(
        vectored.raw_os_error(),
        plain.raw_os_error(),
        "{vectored} against {plain}"
    );
    backend.close()?;
    Ok(())
}

/// The parts [`a_vectored_write_cut_short_by_the_file_size_limit_fails_leaving_a_prefix`] writes.
fn short_write_parts() -> Vec<Vec<u8>> {
    (0..8u64).map(|i| value(i, 5, 1_000)).collect()
}

#[test]
fn a_vectored_write_cut_short_by_the_file_size_limit_fails_leaving_a_prefix() -> TestResult {
    use redb::StorageBackend;
    let parts = short_write_parts();
    let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    if let Some(path) = std::env::var_os("STRATA_TEST_SHORT_WRITE_FILE") {
        // The child, under `ulimit -f`: the first pwritev stops at the limit, inside a part; the
        // next one, from there, fails with EFBIG.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        let backend = redb::backends::FileBackend::new(file)?;
        let result = backend.write_vectored(0, &slices);
        assert_eq!(result.map_err(|e| e.raw_os_error()), Err(Some(27)), "EFBIG");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("file");
    std::fs::write(&path, b"")?;
    let exe = std::env::current_exe()?;
    // 9 blocks: 4 608 bytes where a block is 512 bytes (dash), 9 216 where it is 1 024 (bash).
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 9 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args([
            "--exact",
            "store::redb::vendored::a_vectored_write_cut_short_by_the_file_size_limit_fails_leaving_a_prefix",
            "--test-threads",
            "1",
        ])
        .env("STRATA_TEST_SHORT_WRITE_FILE", &path)
        // Pipes, not the parent's stdout: when that is a regular file (a CI log) larger than
        // the limit, the child's first line of output fails with EFBIG and it panics.
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()?;
    assert!(
        child.status.success(),
        "the child under ulimit -f: {}\n{}{}",
        child.status,
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    let written = std::fs::read(&path)?;
    let whole = parts.concat();
    assert!(
        !written.is_empty() && written.len() < whole.len() && written.len() % 1_000 != 0,
        "{} bytes written, a limit inside a part",
        written.len()
    );
    assert!(
        written[..] == whole[..written.len()],
        "the file holds a prefix of the parts"
    );
    Ok(())
}

/// The rows of a `blob_index` table.
type BlobRows = Vec<([u8; 32], (u64, u64, u64))>;

/// A file whose `blob_index` holds `rows` rows of random keys (a table the repack rewrites),
/// closed; and those rows.
fn random_blob_index(
    path: &std::path::Path,
    rows: u64,
) -> std::result::Result<BlobRows, Box<dyn std::error::Error>> {
    use super::tables::BLOB_INDEX;
    let db = Database::create(path)?;
    let tx = db.begin_write()?;
    super::tables::create_all(&tx)?;
    {
        let mut table = tx.open_table(BLOB_INDEX)?;
        for i in 0..rows {
            table.insert(crate::hash::sha256(&i.to_le_bytes()).0, (i, i * 2, 1))?;
        }
    }
    tx.commit()?;
    db.close()?;
    let db = Database::open(path)?;
    blob_rows(&db)
}

/// The rows of `blob_index` in `db`, in key order.
fn blob_rows(db: &Database) -> std::result::Result<BlobRows, Box<dyn std::error::Error>> {
    let rtx = db.begin_read()?;
    let table = rtx.open_table(super::tables::BLOB_INDEX)?;
    let mut out = Vec::new();
    for row in table.iter()? {
        let (k, v) = row?;
        out.push((k.value(), v.value()));
    }
    Ok(out)
}

/// The store handle's close after a large write (`RedbStore`'s drop): the repack's commit (not
/// synced), then either the close (a file the compaction reopens) or a compaction on the handle
/// and the close (a larger file), the power lost at each sync in turn with the unsynced writes
/// landing in each of several ways: the file a crash leaves opens with every row and checks
/// clean. Returns how many syncs the close made.
fn repack_and_close_survive_power_loss(
    dir: &std::path::Path,
    compact_on_handle: bool,
) -> std::result::Result<usize, Box<dyn std::error::Error>> {
    let source = dir.join("source.redb");
    let rows = random_blob_index(&source, 3_000)?;
    let same_rows = |path: &std::path::Path, what: &str| -> TestResult {
        let mut db = Database::open(path).map_err(|e| format!("{what}: {e}"))?;
        assert!(db.check_integrity()?, "{what}: check_integrity repaired");
        let got = blob_rows(&db)?;
        assert!(got == rows, "{what}: {} rows of {}", got.len(), rows.len());
        Ok(())
    };
    // Without a power loss: the repack rewrites the table, and the closed file checks clean
    // with every row.
    {
        let path = dir.join("closed.redb");
        std::fs::copy(&source, &path)?;
        let mut db = Database::open(&path)?;
        assert_eq!(
            super::repack::repack_sparse_tables(&db)?,
            vec!["blob_index"]
        );
        if compact_on_handle {
            assert!(db.compact_with_one_phase_drains()?);
        }
        db.close()?;
        same_rows(&path, "the closed file")?;
    }
    let work = |mut db: Database| {
        let _ = super::repack::repack_sparse_tables(&db);
        if compact_on_handle {
            let _ = db.compact_with_one_phase_drains();
        }
        let _ = db.close();
    };
    at_every_power_loss(dir, &source, &work, &mut |path, crash| {
        same_rows(
            path,
            &format!("compaction on the handle {compact_on_handle}, {crash}"),
        )
    })
}

/// The repack's commit is not synced (the close's makes it durable): a power loss at any sync
/// of the close that follows it, with any part of the unsynced writes on disk, leaves a file
/// that opens with every row.
#[test]
fn a_repack_then_the_close_survives_power_loss_at_every_sync() -> TestResult {
    let syncs = repack_and_close_survive_power_loss(tempfile::tempdir()?.path(), false)?;
    assert!(syncs > 0, "{syncs} syncs");
    let syncs = repack_and_close_survive_power_loss(tempfile::tempdir()?.path(), true)?;
    assert!(syncs > 2, "{syncs} syncs");
    Ok(())
}
