//! Store benchmarks (divan): put throughput, `as_of` at three points over 10 / 1 000 / 100 000
//! versions, `history` of 10 000 versions, open time of a store with 1 M versions.
//!
//! `STRATA_STORE_REPORT=1 cargo bench --bench store` instead prints the one-shot measurements
//! that decided the layout: store size per byte put (100 000 contents of 1–8 KiB, incompressible
//! and source-like) and reopen time after a crash with and without redb's quick repair.
//! `STRATA_REPORT_TABLES=1` adds each table's pages and bytes per content put (and skips the
//! reopen measurements); `STRATA_REPORT_SHORT_FS=1` gives the files the filesystem id `bench`
//! instead of a 64-hex one like a real machine's (the figures of issue 3);
//! `STRATA_REPORT_BATCHES=20` puts 20 000 contents instead of 100 000; `STRATA_REPORT_QUICK=1`
//! stops after the incompressible run. `STRATA_TABLES_OF=PATH/store.redb` prints only the table
//! report of that store (per file with `STRATA_TABLES_FILES=N`).

#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program"
)]

use std::sync::OnceLock;
use std::time::Instant;

use strata::object::{FilesystemSource, Object};
use strata::{HistoryQuery, Op, Origin, Put, Store, Timestamp, TxId};

fn main() {
    if let Some(path) = std::env::var_os("STRATA_TABLES_OF") {
        let files = std::env::var("STRATA_TABLES_FILES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        table_report(std::path::Path::new(&path), files);
    } else if std::env::var_os("STRATA_STORE_REPORT").is_some() {
        report();
    } else {
        divan::main();
    }
}

/// The filesystem id of the bench's files: a SHA-256 in hex like a real machine's
/// (`resolve::machine_filesystem_id`), 33 bytes in a key or record where `bench` took 6.
/// `STRATA_REPORT_SHORT_FS=1` uses `bench` instead (the figures before this was realistic).
fn fs_id() -> String {
    if std::env::var_os("STRATA_REPORT_SHORT_FS").is_some() {
        "bench".into()
    } else {
        "5d41402abc4b2a76b9719d911017c592".repeat(2)
    }
}

fn file(path: &str, text: String) -> Object {
    Object::file_text(
        FilesystemSource {
            filesystem_id: fs_id(),
            path: path.into(),
        },
        text,
    )
    .unwrap()
}

fn ts(seconds: i64) -> Timestamp {
    Timestamp::from_micros(1_500_000_000_000_000 + seconds * 1_000_000).unwrap()
}

#[divan::bench(sample_count = 20)]
fn put_one_per_transaction(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let mut i = 0u64;
    bencher.bench_local(|| {
        i += 1;
        store
            .transact(
                vec![Op::put(file("/p.txt", format!("version {i}")))],
                Origin::Cli,
            )
            .unwrap()
    });
}

#[divan::bench(sample_count = 10, counter = divan::counter::ItemsCount::new(1000usize))]
fn put_1000_per_transaction(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let mut round = 0u64;
    bencher.bench_local(|| {
        round += 1;
        let ops = (0..1000)
            .map(|i| {
                Op::put(file(
                    &format!("/t/{i}.rs"),
                    format!("// {round} {i}\nfn f() {{}}\n"),
                ))
            })
            .collect();
        store.transact(ops, Origin::Indexer).unwrap()
    });
}

/// An in-memory store with one entity of `n` versions, one per transaction, valid times one
/// second apart.
fn versions_store(n: usize) -> &'static Store {
    static STORES: OnceLock<Vec<(usize, Store)>> = OnceLock::new();
    let stores = STORES.get_or_init(|| {
        [10, 1000, 100_000]
            .into_iter()
            .map(|n| {
                let store = Store::in_memory().unwrap();
                for i in 0..n {
                    let object = Object::system_prompt("b", format!("prompt {}", i % 100)).unwrap();
                    store
                        .transact(vec![Op::put_at(object, ts(i as i64), None)], Origin::Cli)
                        .unwrap();
                }
                (n, store)
            })
            .collect()
    });
    &stores.iter().find(|(m, _)| *m == n).unwrap().1
}

const ID: &str = "system_prompt:b";

#[divan::bench(args = [10, 1000, 100_000])]
fn as_of_now_now(bencher: divan::Bencher, n: usize) {
    let store = versions_store(n);
    bencher.bench(|| store.version_info(ID, None, None).unwrap());
}

#[divan::bench(args = [10, 1000, 100_000])]
fn as_of_valid_now_old_tx(bencher: divan::Bencher, n: usize) {
    let store = versions_store(n);
    let old = TxId((n / 10).max(1) as u64);
    bencher.bench(|| store.version_info(ID, None, Some(old)).unwrap());
}

#[divan::bench(args = [10, 1000, 100_000])]
fn as_of_old_valid_now_tx(bencher: divan::Bencher, n: usize) {
    let store = versions_store(n);
    let old = ts((n / 10) as i64);
    bencher.bench(|| store.version_info(ID, Some(old), None).unwrap());
}

#[divan::bench(args = [10, 1000, 100_000])]
fn as_of_with_object(bencher: divan::Bencher, n: usize) {
    let store = versions_store(n);
    bencher.bench(|| store.as_of(ID, None, None).unwrap());
}

#[divan::bench(sample_count = 20)]
fn history_of_10_000_versions(bencher: divan::Bencher) {
    static STORE: OnceLock<Store> = OnceLock::new();
    let store = STORE.get_or_init(|| {
        let store = Store::in_memory().unwrap();
        for i in 0..10_000 {
            let object = Object::system_prompt("h", format!("prompt {}", i % 100)).unwrap();
            store
                .transact(vec![Op::put_at(object, ts(i), None)], Origin::Cli)
                .unwrap();
        }
        store
    });
    bencher.bench(|| {
        store
            .history("system_prompt:h", HistoryQuery::default())
            .unwrap()
    });
}

/// A store directory with `entities × versions` versions, 1 000 puts per transaction.
fn big_store(entities: usize, versions: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    for v in 0..versions {
        for chunk in (0..entities).collect::<Vec<_>>().chunks(1000) {
            let ops = chunk
                .iter()
                .map(|e| {
                    let object =
                        Object::system_prompt(&format!("e{e}"), format!("v{}", v % 50)).unwrap();
                    Op::put_at(object, ts(v as i64), None)
                })
                .collect();
            store.transact(ops, Origin::Indexer).unwrap();
        }
    }
    dir
}

#[divan::bench(args = [10_000, 1_000_000], sample_count = 10)]
fn open_store(bencher: divan::Bencher, versions: usize) {
    static DIRS: OnceLock<Vec<(usize, tempfile::TempDir)>> = OnceLock::new();
    let dirs = DIRS.get_or_init(|| {
        vec![
            (10_000, big_store(1000, 10)),
            (1_000_000, big_store(1000, 1000)),
        ]
    });
    let dir = &dirs.iter().find(|(n, _)| *n == versions).unwrap().1;
    bencher.bench(|| Store::open(dir.path()).unwrap());
}

/// Source-like text: all `.rs` files under ~/.cargo/registry/src, concatenated.
fn source_corpus() -> Vec<u8> {
    let mut out = Vec::new();
    let root = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo/registry/src");
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(bytes) = std::fs::read(&path)
            {
                out.extend_from_slice(&bytes);
                if out.len() > 64 << 20 {
                    return out;
                }
            }
        }
    }
    out
}

/// A deterministic generator (xorshift).
fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn size_report(name: &str, make: impl Fn(usize, &mut u64) -> (Object, Option<Vec<u8>>, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15;
    let mut put = 0usize;
    let start = Instant::now();
    let batches: usize = std::env::var("STRATA_REPORT_BATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    for batch in 0..batches {
        let mut ops = Vec::new();
        for i in 0..1000 {
            let (object, bytes, len) = make(batch * 1000 + i, &mut state);
            put += len;
            let mut p = Put::new(object);
            p.bytes = bytes;
            ops.push(Op::Put(Box::new(p)));
        }
        store.transact(ops, Origin::Indexer).unwrap();
    }
    let elapsed = start.elapsed();
    let long = std::fs::metadata(dir.path().join("store.redb"))
        .unwrap()
        .len();
    let closing = Instant::now();
    drop(store);
    let closing = closing.elapsed();
    let meta = std::fs::metadata(dir.path().join("store.redb")).unwrap();
    let size = meta.len();
    let on_disk = std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
    println!(
        "{name}: {} contents, {:.1} MiB put, store.redb {:.1} MiB long ({:.1} MiB allocated), ratio {:.3} ({:.3} allocated), {:.1} s to write, {:.2} s to close (file {:.1} MiB long before)",
        batches * 1000,
        put as f64 / 1048576.0,
        size as f64 / 1048576.0,
        on_disk as f64 / 1048576.0,
        size as f64 / put as f64,
        on_disk as f64 / put as f64,
        elapsed.as_secs_f64(),
        closing.as_secs_f64(),
        long as f64 / 1048576.0
    );
    println!(
        "  store.redb beyond the bytes put: {:.0} B/file",
        (size as f64 - put as f64) / (batches * 1000) as f64
    );
    if std::env::var_os("STRATA_REPORT_TABLES").is_some() {
        table_report(&dir.path().join("store.redb"), batches * 1000);
    }
}

/// Per-table space of a store file, straight from redb, per file put when `files` > 0:
/// `space` is what the table takes (its pages, with the large pages of values above 4 KiB),
/// `stored` the keys' and values' own bytes, `overhead` redb's per-page and per-entry bytes
/// (headers, offsets, branch keys), `room` the unused bytes in its pages, `pages` its leaves and
/// branches (a leaf of a large value is one higher-order page), `fill` (stored + overhead) /
/// space. The next line sums every table but `blob_chunks` (the contents): the metadata per
/// file. The last lines say what the file holds besides the tables: redb's own pages (the
/// allocator state, the table of tables; the header page apart) and the free pages a compaction
/// did not give back.
fn table_report(path: &std::path::Path, files: usize) {
    use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};
    let db = redb::Database::open(path).unwrap();
    let rtx = db.begin_read().unwrap();
    let per = |bytes: u64| {
        if files > 0 {
            format!("{:.1}", bytes as f64 / files as f64)
        } else {
            format!("{bytes}")
        }
    };
    let fill = |used: u64, space: u64| {
        if space > 0 {
            format!("{:.0} %", 100.0 * used as f64 / space as f64)
        } else {
            "-".to_string()
        }
    };
    let unit = if files > 0 { "B/file" } else { "B" };
    println!(
        "  | table | space {unit} | stored {unit} | overhead {unit} | room {unit} | pages (leaf + branch) | fill |"
    );
    println!("  | --- | --- | --- | --- | --- | --- | --- |");
    let mut meta = (0u64, 0u64, 0u64, 0u64);
    let mut tables_space = 0u64;
    for table in rtx.list_tables().unwrap() {
        let name = table.name().to_string();
        let stats = rtx.open_untyped_table(table).unwrap().stats().unwrap();
        let pages = (stats.leaf_pages() + stats.branch_pages()) * 4096;
        let space =
            pages.max(stats.stored_bytes() + stats.metadata_bytes() + stats.fragmented_bytes());
        let used = stats.stored_bytes() + stats.metadata_bytes();
        tables_space += space;
        if name != "blob_chunks" {
            meta.0 += space;
            meta.1 += stats.stored_bytes();
            meta.2 += stats.metadata_bytes();
            meta.3 += stats.fragmented_bytes();
        }
        if space == 0 {
            continue;
        }
        println!(
            "  | {name} | {} | {} | {} | {} | {} + {} | {} |",
            per(space),
            per(stats.stored_bytes()),
            per(stats.metadata_bytes()),
            per(stats.fragmented_bytes()),
            stats.leaf_pages(),
            stats.branch_pages(),
            fill(used, space)
        );
    }
    println!(
        "  | all but blob_chunks (metadata) | {} | {} | {} | {} | | {} |",
        per(meta.0),
        per(meta.1),
        per(meta.2),
        per(meta.3),
        fill(meta.1 + meta.2, meta.0)
    );
    drop(rtx);
    let wtx = db.begin_write().unwrap();
    let stats = wtx.stats().unwrap();
    let page = stats.page_size() as u64;
    let allocated = stats.allocated_pages() * page;
    let length = std::fs::metadata(path).map_or(0, |m| m.len());
    println!(
        "  whole file: {} allocated pages ({:.1} MiB), {:.1} MiB stored, {:.1} MiB metadata, {:.1} MiB fragmented",
        stats.allocated_pages(),
        allocated as f64 / 1048576.0,
        stats.stored_bytes() as f64 / 1048576.0,
        stats.metadata_bytes() as f64 / 1048576.0,
        stats.fragmented_bytes() as f64 / 1048576.0
    );
    // The file's first page is redb's header, which no allocator counts.
    let free = length.saturating_sub(allocated).saturating_sub(page);
    println!(
        "  besides the tables: redb's own pages {} {unit} (and its one header page), free pages {} \
         {unit} ({} of them), file {length} B",
        per(allocated.saturating_sub(tables_space)),
        per(free),
        free / page
    );
}

/// Reopen time of a redb file of `rows` version-like rows left open (as by a crash).
fn crash_reopen(rows: u64, quick_repair: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.redb");
    let table = redb::TableDefinition::<(u64, i64, u64), &[u8]>::new("versions");
    let db = redb::Database::create(&path).unwrap();
    for chunk in 0..rows / 10_000 {
        let mut tx = db.begin_write().unwrap();
        tx.set_quick_repair(quick_repair);
        {
            let mut t = tx.open_table(table).unwrap();
            for i in 0..10_000 {
                let n = chunk * 10_000 + i;
                t.insert((n % 1000, n as i64, n), [7u8; 60].as_slice())
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    // Copy the file while the database is open: the copy needs recovery like after SIGKILL.
    let crashed = dir.path().join("crashed.redb");
    std::fs::copy(&path, &crashed).unwrap();
    drop(db);
    let start = Instant::now();
    let db = redb::Database::open(&crashed).unwrap();
    let elapsed = start.elapsed().as_secs_f64();
    drop(db);
    elapsed
}

fn report() {
    size_report(
        "incompressible (random bytes, kept as blobs)",
        |i, state| {
            let len = 1024 + (rng(state) % 7169) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| rng(state) as u8).collect();
            bytes[0] = 0xff; // never UTF-8
            let object = Object::file_bytes(
                FilesystemSource {
                    filesystem_id: fs_id(),
                    path: format!("/bin/{i}.bin"),
                },
                bytes.clone(),
            )
            .unwrap();
            (object, Some(bytes), len)
        },
    );
    if std::env::var_os("STRATA_REPORT_QUICK").is_some() {
        return; // only the incompressible run, while iterating on the metadata layout
    }
    let corpus = source_corpus();
    println!(
        "source corpus: {:.1} MiB of .rs files",
        corpus.len() as f64 / 1048576.0
    );
    size_report("source-like (1-8 KiB slices of .rs files)", |i, state| {
        let len = 1024 + (rng(state) % 7169) as usize;
        let mut at = (rng(state) as usize) % (corpus.len() - len);
        while std::str::from_utf8(&corpus[at..at + len]).is_err() {
            at += 1;
        }
        let text = format!(
            "// {i}\n{}",
            std::str::from_utf8(&corpus[at..at + len]).unwrap()
        );
        let len = text.len();
        (file(&format!("/src/{i}.rs"), text), None, len)
    });
    if std::env::var_os("STRATA_REPORT_TABLES").is_some() {
        return; // the size report only
    }
    for rows in [100_000, 1_000_000] {
        for quick in [false, true] {
            println!(
                "reopen after crash, {rows} rows, quick_repair={quick}: {:.1} ms",
                crash_reopen(rows, quick) * 1000.0
            );
        }
    }
}
