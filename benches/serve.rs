//! The daemon's benchmarks (`strata serve`), on a store in a temporary directory:
//!
//! 0. The disk's floor: `fdatasync` of a 4 KiB write, p50 and p99 (a durable commit waits for
//!    one; on a busy disk it bounds commits/s more than the CPU).
//! 1. `show` of a small file: an in-process engine call, through the socket (a connected
//!    [`Client`]), and a CLI process (through the daemon, and with `--no-daemon`): p50, p99.
//! 2. A small read through the socket (that `show`) against the protocol's floor (`handshake`).
//! 3. The write workload: 16 clients, each with its own session of 100 files, each doing a tool
//!    call then a turn (two commits) for 10 s: commits/s, p50/p99 latency of one commit.
//! 4. The same beside an `index` of a large tree, with a `show` every 10 ms, when
//!    `STRATA_BENCH_CORPUS` names one (e.g. `python3 tools/corpus/gen.py /tmp/corpus --preset
//!    large`).
//!
//! Run: `cargo bench --bench serve` (release). Environment: `STRATA_BENCH_SECONDS` (10),
//! `STRATA_BENCH_CLIENTS` (16), `STRATA_BENCH_CORPUS` (none), `TMPDIR` (where the store goes),
//! `STRATA_BENCH_STRATA` (the `strata` binary the daemon runs: this build's by default).
//! Figures go to stdout; nothing is asserted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime};

use strata::engine::{
    Access, AsOf, Engine, IndexRequest, SessionNewRequest, SessionReadRequest,
    SessionToolcallRequest, SessionTurnRequest, ShowRequest,
};
use strata::object::ToolStatus;
use strata::server::client::Client;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");
const FILES_PER_SESSION: usize = 100;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// p50 and p99 of `samples`, in milliseconds.
fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    (at(0.50), at(0.99))
}

fn report(what: &str, samples: &mut [Duration]) {
    let (p50, p99) = percentiles(samples);
    println!(
        "{what:<48} n={:<6} p50 {p50:>8.3} ms  p99 {p99:>8.3} ms",
        samples.len()
    );
}

fn time<T>(n: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(f());
            started.elapsed()
        })
        .collect()
}

fn strata(store: &Path) -> Command {
    // `STRATA_BENCH_STRATA` runs another build's binary (an A/B of two builds).
    let binary = std::env::var_os("STRATA_BENCH_STRATA").unwrap_or_else(|| STRATA.into());
    let mut command = Command::new(binary);
    command
        .arg("--store")
        .arg(store)
        .env_remove("STRATA_NO_DAEMON")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Starts `strata serve` and waits until it answers.
fn start_daemon(store: &Path) -> Child {
    let child = strata(store).arg("serve").spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Client::connect(store).unwrap().is_none() {
        assert!(Instant::now() < deadline, "the daemon did not answer");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn stop_daemon(store: &Path, mut child: Child) {
    let status = strata(store).arg("stop").status().unwrap();
    assert!(status.success());
    child.wait().unwrap();
}

/// A tree of `sessions` directories of 100 small files, mtimes an hour old.
fn tree(root: &Path, sessions: usize) -> Vec<Vec<String>> {
    let past = SystemTime::now() - Duration::from_secs(3600);
    (0..sessions)
        .map(|s| {
            let dir = root.join(format!("s{s:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            (0..FILES_PER_SESSION)
                .map(|i| {
                    let path = dir.join(format!("f{i:03}.txt"));
                    std::fs::write(&path, format!("file {s} {i}\n{}\n", "x".repeat(120))).unwrap();
                    std::fs::File::options()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_modified(past)
                        .unwrap();
                    path.display().to_string()
                })
                .collect()
        })
        .collect()
}

/// Where a write load sends its requests.
enum Target<'a> {
    /// The daemon of this store.
    Daemon(&'a Path),
    /// An engine in this process.
    Engine(&'a Engine),
}

/// A connection to a [`Target`].
enum Conn<'a> {
    Client(Client),
    Engine(&'a Engine),
}

impl Conn<'_> {
    fn call<R: strata::engine::Apply>(&mut self, request: R) -> strata::Result<R::Response> {
        match self {
            Conn::Client(client) => client.call(request),
            Conn::Engine(engine) => engine.call(request),
        }
    }
}

/// One client's loop: a tool call then a turn on its session for `seconds`; the latency of
/// each commit.
fn write_load(target: &Target<'_>, sid: &str, start: &Barrier, seconds: f64) -> Vec<Duration> {
    let mut client = match target {
        Target::Daemon(store) => Conn::Client(Client::connect(store).unwrap().unwrap()),
        Target::Engine(engine) => Conn::Engine(engine),
    };
    let mut latencies = Vec::new();
    start.wait();
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let mut k = 0u64;
    while Instant::now() < until {
        let started = Instant::now();
        let recorded = client
            .call(SessionToolcallRequest {
                id: sid.into(),
                tool: "bash".into(),
                args: serde_json::Map::new(),
                args_display: Some(format!("step {k}")),
                call_id: None,
                status: ToolStatus::Ok,
                file_refs: Vec::new(),
                output: format!("output of step {k}\n"),
            })
            .unwrap();
        assert!(recorded.tx_id.is_some());
        latencies.push(started.elapsed());
        let started = Instant::now();
        let turn = client
            .call(SessionTurnRequest {
                id: sid.into(),
                role: "assistant".into(),
                content: format!("step {k} done"),
                toolcall_refs: Vec::new(),
            })
            .unwrap();
        assert!(turn.tx_id.is_some());
        latencies.push(started.elapsed());
        k += 1;
    }
    latencies
}

/// Runs the write workload on every session at once; prints commits/s and latencies.
fn workload(what: &str, target: &Target<'_>, sessions: &[String], seconds: f64) {
    let start = Barrier::new(sessions.len() + 1);
    let (began, mut all) = std::thread::scope(|scope| {
        let threads: Vec<_> = sessions
            .iter()
            .map(|sid| scope.spawn(|| write_load(target, sid, &start, seconds)))
            .collect();
        start.wait();
        let began = Instant::now();
        let all: Vec<Duration> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        (began, all)
    });
    let elapsed = began.elapsed().as_secs_f64();
    println!(
        "{what}: {} commits in {elapsed:.1} s = {:.0} commits/s",
        all.len(),
        all.len() as f64 / elapsed
    );
    report(&format!("{what}: one commit"), &mut all);
}

/// A session per client, named `{prefix}{n}`, that has read its 100 files and has a turn.
fn sessions(engine: &Engine, prefix: &str, files: &[Vec<String>]) -> Vec<String> {
    files
        .iter()
        .enumerate()
        .map(|(c, paths)| {
            let sid = format!("{prefix}{c:02}");
            engine
                .call(SessionNewRequest {
                    id: Some(sid.clone()),
                    ..SessionNewRequest::default()
                })
                .unwrap();
            engine
                .call(SessionReadRequest {
                    id: sid.clone(),
                    paths: paths.clone(),
                })
                .unwrap();
            engine
                .call(SessionTurnRequest {
                    id: sid.clone(),
                    role: "user".into(),
                    content: "begin".into(),
                    toolcall_refs: Vec::new(),
                })
                .unwrap();
            sid
        })
        .collect()
}

/// 200 timed `fdatasync`s, each after a 4 KiB write into a file in `dir`.
fn fsync_floor(dir: &Path) -> Vec<Duration> {
    use std::io::{Seek, SeekFrom, Write};
    let path = dir.join("fsync-floor");
    let mut file = std::fs::File::create(&path).unwrap();
    let page = [7u8; 4096];
    let samples = (0..200)
        .map(|i| {
            file.seek(SeekFrom::Start((i % 16) * 4096)).unwrap();
            file.write_all(&page).unwrap();
            let started = Instant::now();
            file.sync_data().unwrap();
            started.elapsed()
        })
        .collect();
    drop(file);
    std::fs::remove_file(&path).unwrap();
    samples
}

fn main() {
    let seconds: f64 = env_or("STRATA_BENCH_SECONDS", 10.0);
    let clients: usize = env_or("STRATA_BENCH_CLIENTS", 16);
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let store = root.join("store");
    let files = tree(&root.join("tree"), clients);
    let small = files[0][0].clone();
    println!(
        "strata serve benchmark: {clients} clients, {seconds} s, store in {}",
        root.display()
    );

    // The machine's floor for a durable commit: what an fsync costs here now (a commit
    // cannot be answered sooner; on a busy disk it bounds commits/s more than the CPU does).
    let mut fsyncs = fsync_floor(&root);
    report("fdatasync of a 4 KiB write (the disk's floor)", &mut fsyncs);

    // The sessions, and the in-process figures, before any daemon holds the store.
    let engine = Engine::open(&store, Access::Create).unwrap();
    // Fresh sessions for each load, so that each starts with chats of the same length.
    let in_process_sessions = sessions(&engine, "e", &files);
    let daemon_sessions = sessions(&engine, "d", &files);
    let index_sessions = sessions(&engine, "i", &files);
    let show = || ShowRequest {
        reference: small.clone(),
        cwd: None,
        as_of: AsOf::default(),
    };
    let mut in_process = time(2000, || engine.call(show()).unwrap());
    report("show (small file), in-process engine call", &mut in_process);
    workload(
        "write load in-process (one engine, no socket)",
        &Target::Engine(&engine),
        &in_process_sessions,
        seconds,
    );
    drop(engine);

    let daemon = start_daemon(&store);
    let mut client = Client::connect(&store).unwrap().unwrap();
    let mut socket = time(5000, || client.call(show()).unwrap());
    let mut floor = time(5000, || client.handshake("bench").unwrap());
    let mut cli = time(100, || {
        assert!(
            strata(&store)
                .arg("show")
                .arg(&small)
                .status()
                .unwrap()
                .success()
        );
    });
    report("show (small file) through the socket", &mut socket);
    report("handshake through the socket (the floor)", &mut floor);
    report("show (small file), CLI process via the daemon", &mut cli);
    drop(client);

    workload(
        "write load through the daemon",
        &Target::Daemon(&store),
        &daemon_sessions,
        seconds,
    );

    if let Some(corpus) = std::env::var_os("STRATA_BENCH_CORPUS").map(PathBuf::from) {
        let indexer_store = store.clone();
        let corpus_text = corpus.display().to_string();
        let indexer = std::thread::spawn(move || {
            let mut client = Client::connect(&indexer_store).unwrap().unwrap();
            let started = Instant::now();
            let summary = client
                .call(IndexRequest {
                    paths: vec![corpus_text],
                    cwd: None,
                    threads: None,
                })
                .unwrap();
            (started.elapsed(), summary)
        });
        // Let the scan get under way.
        std::thread::sleep(Duration::from_secs(1));
        // A reader beside the index and the writers: `show` every 10 ms.
        let reading = std::sync::atomic::AtomicBool::new(true);
        let mut reads = std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut client = Client::connect(&store).unwrap().unwrap();
                let mut latencies = Vec::new();
                while reading.load(std::sync::atomic::Ordering::Relaxed) {
                    let started = Instant::now();
                    client.call(show()).unwrap();
                    latencies.push(started.elapsed());
                    std::thread::sleep(Duration::from_millis(10));
                }
                latencies
            });
            workload(
                "write load through the daemon beside an index",
                &Target::Daemon(&store),
                &index_sessions,
                seconds,
            );
            reading.store(false, std::sync::atomic::Ordering::Relaxed);
            reader.join().unwrap()
        });
        report("show (small file) beside the index and writers", &mut reads);
        let (took, summary) = indexer.join().unwrap();
        println!(
            "the index of {} took {:.1} s: {}",
            corpus.display(),
            took.as_secs_f64(),
            serde_json::to_string(&summary).unwrap()
        );
    } else {
        println!("(no STRATA_BENCH_CORPUS: the write load beside an index is skipped)");
    }

    stop_daemon(&store, daemon);
    let mut no_daemon = time(50, || {
        assert!(
            strata(&store)
                .arg("--no-daemon")
                .arg("show")
                .arg(&small)
                .status()
                .unwrap()
                .success()
        );
    });
    report("show (small file), CLI process --no-daemon", &mut no_daemon);
}
