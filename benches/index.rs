//! Indexing benches (divan): a full index of 1 000 small source-like files into a fresh store, and
//! a re-index of the same unchanged tree (stat cache only, no file read).
//!
//! Run: `cargo bench --bench index`. The tree is on the real filesystem (a temporary directory), the
//! store a real redb file beside it.

#![allow(
    clippy::expect_used,
    reason = "a benchmark program: a failed setup should stop it"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use divan::Bencher;
use divan::counter::ItemsCount;
use strata::Store;
use strata::{Indexer, ScanOptions, Settings, scan};

fn main() {
    divan::main();
}

/// Files in the tree.
const FILES: usize = 1000;

/// Writes `FILES` source-like files of 1–8 KiB in 20 directories, dated an hour back (so the
/// racy-clean rule does not force reads), and returns the tree's root.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("tree");
    let line = "    let value = store.get(&key).map_err(Error::io)?; // a line of code\n";
    let past = SystemTime::now() - Duration::from_secs(3600);
    for i in 0..FILES {
        let sub = root.join(format!("module{:02}", i % 20));
        fs::create_dir_all(&sub).expect("create a directory of the bench tree");
        let lines = 16 + (i * 7919) % 100;
        let text: String = (0..lines)
            .map(|n| format!("// file {i} line {n}\n{line}"))
            .collect();
        let path = sub.join(format!("file{i:04}.rs"));
        fs::write(&path, text).expect("write a file of the bench tree");
        fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(past))
            .expect("date a file of the bench tree");
    }
    root
}

fn index_once(store_dir: &Path, root: &Path) -> u64 {
    let store = Store::open_or_create(store_dir).expect("open the bench store");
    let settings = Settings::default();
    let indexer = Indexer::new(&store, &settings).expect("make an indexer");
    let summary = scan(
        &indexer,
        &[root.to_path_buf()],
        &ScanOptions::default(),
        &mut |_| {},
    )
    .expect("scan the bench tree");
    summary.files
}

#[divan::bench(sample_count = 10, counter = ItemsCount::new(FILES))]
fn full_index_1000_files(bencher: Bencher) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let root = tree(tmp.path());
    let mut round = 0;
    bencher
        .with_inputs(|| {
            round += 1;
            tmp.path().join(format!("store{round}"))
        })
        .bench_local_values(|store_dir| {
            let files = index_once(&store_dir, &root);
            assert_eq!(files, FILES as u64);
        });
}

#[divan::bench(sample_count = 20, counter = ItemsCount::new(FILES))]
fn unchanged_reindex_1000_files(bencher: Bencher) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let root = tree(tmp.path());
    let store_dir = tmp.path().join("store");
    index_once(&store_dir, &root);
    bencher.bench_local(|| index_once(&store_dir, &root));
}

/// The commit path alone: `FILES` files already read, hashed, compressed and planned (in the
/// setup) are committed in one transaction into a fresh store; the throughput is files and
/// content bytes committed per second.
#[divan::bench(sample_count = 10)]
fn commit_path_1000_planned_files(bencher: Bencher) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let root = tree(tmp.path());
    let mut paths: Vec<PathBuf> = Vec::new();
    for dir in fs::read_dir(&root).expect("list the bench tree") {
        for file in fs::read_dir(dir.expect("a directory").path()).expect("list a directory") {
            paths.push(file.expect("a file").path());
        }
    }
    let bytes: u64 = paths
        .iter()
        .map(|p| fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let settings = Settings::default();
    let filesystem_id = strata::resolve::machine_filesystem_id();
    let mut round = 0;
    bencher
        .counter(ItemsCount::new(paths.len()))
        .counter(divan::counter::BytesCount::new(bytes))
        .with_inputs(|| {
            round += 1;
            let store = Store::open_or_create(tmp.path().join(format!("commit{round}")))
                .expect("open the bench store");
            let indexer = Indexer::new(&store, &settings).expect("make an indexer");
            let mut ops = Vec::new();
            for path in &paths {
                let source = strata::FilesystemSource {
                    filesystem_id: filesystem_id.clone(),
                    path: path.to_string_lossy().into_owned(),
                };
                let file = fs::File::open(path).expect("open a bench file");
                let planned = indexer
                    .index_file(source, file, None)
                    .expect("plan a bench file");
                ops.extend(planned.ops);
            }
            (store, ops)
        })
        .bench_local_values(|(store, ops)| {
            store
                .transact(ops, strata::Origin::Indexer)
                .expect("commit the planned files");
            store
        });
}
