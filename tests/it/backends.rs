//! The backends the contract suites run on, and the child process of the crash and lock tests.
//!
//! A contract suite is a function of a factory, `fn suite(backend: &dyn StoreFactory) ->
//! TestResult` (or `&dyn DurableFactory` when its stores must outlive a process), followed by
//! one [`backend_tests!`] line that makes it a test per backend (`suite::redb_in_memory`, ...).
//! The suites: the bitemporal oracle (`temporal::store_agrees_with_the_model`); in `store`,
//! XTDB's range table (`xtdb_put_delete_range_semantics`), fsck and its rebuild
//! (`a_flipped_byte_in_a_blob_is_found_by_fsck`, `rebuild_from_the_log_gives_the_same_answers`,
//! `rebuild_gives_the_same_answers_at_extreme_clamped_and_ranged_valid_times`), the crash
//! test (`sigkill_loses_no_acknowledged_transaction`), matches
//! (`a_failed_match_aborts_the_whole_transaction`), eviction
//! (`log_records_ops_and_the_chain_survives_eviction`,
//! `evict_removes_a_match_on_absence_made_before_the_entity_existed`), corrections, bad input
//! and mtime clamping. Each runs on `postgres` too ([`Postgres`]; skipped without a server).
//!
//! To add a backend: implement [`StoreFactory`] for it here, and [`DurableFactory`] when its
//! stores survive the process that made them; give it a constructor function named as its
//! tests will be (`pub fn postgres() -> TestResult<Option<Postgres>>`: `None` when it cannot
//! run here); add it to
//! [`durable`] so that a child process can open its stores; then add its name to the
//! `backend_tests!` line of each suite.

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use strata::Result;
use strata::object::{FilesystemSource, Object};
use strata::{Op, Origin, Store};

use crate::support::TestResult;

/// Makes the stores of one backend for a contract suite.
pub trait StoreFactory {
    /// The backend's name, as its tests are named (`redb_in_memory`).
    fn name(&self) -> &'static str;

    /// A new, empty store that lives at least as long as the factory.
    ///
    /// # Errors
    /// When the backend cannot make one.
    fn fresh(&self) -> Result<Store>;
}

/// A backend whose stores outlive the process: another process can open them, and a store is
/// what reached durable storage when its process was killed.
pub trait DurableFactory: StoreFactory {
    /// The store kept at `place` (a directory the test owns: redb keeps its files there, a server
    /// backend would name its database after it), created when there is none yet.
    ///
    /// # Errors
    /// When the backend cannot open or create it (another process holds it, say).
    fn open(&self, place: &Path) -> Result<Store>;

    /// Flips one bit inside the stored copy of `stored`, bytes that a put kept verbatim (raw,
    /// incompressible), in the closed store at `place`: what a bad disk does.
    ///
    /// # Errors
    /// When `stored` is not found at `place`.
    fn corrupt(&self, place: &Path, stored: &[u8]) -> TestResult;

    /// The kinds of finding fsck reports after [`DurableFactory::corrupt`]: the damaged content,
    /// then whatever the engine's own checks add.
    fn damage_findings(&self) -> &'static [&'static str];
}

/// redb in memory: no file, no fsync, no lock.
pub struct RedbInMemory;

/// The `redb_in_memory` backend.
pub fn redb_in_memory() -> TestResult<RedbInMemory> {
    Ok(RedbInMemory)
}

impl StoreFactory for RedbInMemory {
    fn name(&self) -> &'static str {
        "redb_in_memory"
    }

    fn fresh(&self) -> Result<Store> {
        Store::in_memory()
    }
}

/// redb in files, as strata runs: each fresh store in its own directory of a temporary one.
pub struct RedbOnDisk {
    root: tempfile::TempDir,
    made: AtomicUsize,
}

/// The `redb_on_disk` backend.
pub fn redb_on_disk() -> TestResult<RedbOnDisk> {
    Ok(RedbOnDisk {
        root: tempfile::tempdir()?,
        made: AtomicUsize::new(0),
    })
}

impl StoreFactory for RedbOnDisk {
    fn name(&self) -> &'static str {
        "redb_on_disk"
    }

    fn fresh(&self) -> Result<Store> {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        Store::create(self.root.path().join(n.to_string()))
    }
}

impl DurableFactory for RedbOnDisk {
    fn open(&self, place: &Path) -> Result<Store> {
        Store::open_or_create(place)
    }

    fn corrupt(&self, place: &Path, stored: &[u8]) -> TestResult {
        let path = place.join(strata::DB_FILE);
        let mut raw = std::fs::read(&path)?;
        let at = raw
            .windows(stored.len())
            .position(|w| w == stored)
            .ok_or("the stored bytes are not in the redb file")?;
        raw[at + stored.len() / 2] ^= 0x40;
        std::fs::write(&path, raw)?;
        Ok(())
    }

    fn damage_findings(&self) -> &'static [&'static str] {
        // The content, and redb's own page checksum.
        &["blob_hash", "checksum"]
    }
}

/// The environment variable naming the PostgreSQL server the `postgres` backend's tests use
/// (`tools/pg-cluster start DIR` makes a private one and prints its URL).
pub const POSTGRES_URL: &str = "STRATA_TEST_POSTGRES_URL";

/// PostgreSQL: each fresh store a schema of its own in the database of `STRATA_TEST_POSTGRES_URL`,
/// dropped with the factory.
pub struct Postgres {
    url: String,
    made: std::sync::Mutex<Vec<String>>,
}

/// Why the PostgreSQL tests cannot run here (`None` when they can). Under CI (`CI` set) a
/// missing URL is an error, not a skip.
///
/// # Errors
/// When `CI` is set and the URL is not.
pub fn postgres_skip() -> TestResult<Option<String>> {
    if std::env::var_os(POSTGRES_URL).is_some() {
        return Ok(None);
    }
    let why = format!(
        "{POSTGRES_URL} is unset: the PostgreSQL tests need a server (tools/pg-cluster start DIR \
         prints a URL)"
    );
    if std::env::var_os("CI").is_some() {
        return Err(format!("under CI {why}").into());
    }
    Ok(Some(why))
}

/// The `postgres` backend (`None`, said on stderr, when there is no server to test against).
pub fn postgres() -> TestResult<Option<Postgres>> {
    if let Some(why) = postgres_skip()? {
        skipped(&why);
        return Ok(None);
    }
    Ok(Some(Postgres {
        url: std::env::var(POSTGRES_URL)?,
        made: std::sync::Mutex::default(),
    }))
}

/// Says on stderr that a test was skipped and why.
#[allow(clippy::print_stderr)]
pub fn skipped(why: &str) {
    eprintln!("skipped: {why}");
}

impl Postgres {
    /// The location of the store named `schema` on the test server.
    pub fn location(&self, schema: &str) -> Result<strata::PgLocation> {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        strata::PgLocation::parse(&format!("{}{sep}schema={schema}", self.url))
    }

    /// A schema name no other test (of this or another process) uses.
    fn unique(&self, stem: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("t_{stem}_{}_{n}_{nanos}", std::process::id());
        if let Ok(mut made) = self.made.lock() {
            made.push(name.clone());
        }
        name
    }

    /// The schema a test directory `place` names (the same in every process).
    fn schema_of(place: &Path) -> String {
        let digest = strata::hash::sha256(place.to_string_lossy().as_bytes()).to_hex();
        format!("p_{}", &digest[..24])
    }

    /// The location of store `schema` on the test server, with no store there (a schema left by
    /// an earlier run is dropped).
    pub fn fresh(&self, schema: &str) -> TestResult<strata::PgLocation> {
        let location = self.location(schema)?;
        self.execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))?;
        Ok(location)
    }

    /// Runs `sql` on the test server.
    pub fn execute(&self, sql: &str) -> TestResult {
        let mut client = self.location("public")?.connect()?;
        client.batch_execute(sql)?;
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let made = self.made.lock().map(|m| m.clone()).unwrap_or_default();
        if !made.is_empty() {
            let sql: String = made
                .iter()
                .map(|s| format!("DROP SCHEMA IF EXISTS {s} CASCADE;"))
                .collect();
            let _ = self.execute(&sql);
        }
    }
}

impl StoreFactory for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn fresh(&self) -> Result<Store> {
        let schema = self.unique("s");
        Store::postgres(self.location(&schema)?, None, strata::PgOpen::Create)
    }
}

impl DurableFactory for Postgres {
    fn open(&self, place: &Path) -> Result<Store> {
        let schema = Self::schema_of(place);
        Store::postgres(self.location(&schema)?, None, strata::PgOpen::OpenOrCreate)
    }

    fn corrupt(&self, place: &Path, stored: &[u8]) -> TestResult {
        let schema = Self::schema_of(place);
        flip_in_chunks(&self.location(&schema)?, stored)
    }

    fn damage_findings(&self) -> &'static [&'static str] {
        &["blob_hash"]
    }
}

/// Flips one bit in every content chunk of the PostgreSQL store at `location` that holds
/// `stored` (bytes a put kept verbatim): what a bad disk does.
///
/// # Errors
/// When no chunk holds them.
pub fn flip_in_chunks(location: &strata::PgLocation, stored: &[u8]) -> TestResult {
    let mut client = location.connect()?;
    let mut flipped = 0;
    for row in client.query("SELECT hash, n, data FROM strata_chunks", &[])? {
        let (hash, n, mut data): (Vec<u8>, i32, Vec<u8>) = (row.get(0), row.get(1), row.get(2));
        if let Some(at) = data.windows(stored.len()).position(|w| w == stored) {
            data[at + stored.len() / 2] ^= 0x40;
            client.execute(
                "UPDATE strata_chunks SET data = $3 WHERE hash = $1 AND n = $2",
                &[&hash, &n, &data],
            )?;
            flipped += 1;
        }
    }
    if flipped == 0 {
        return Err("the stored bytes are in no content chunk".into());
    }
    Ok(())
}

/// The durable backend named `name`, as a child process rebuilds it.
///
/// # Errors
/// For a name that is no durable backend.
pub fn durable(name: &str) -> TestResult<Box<dyn DurableFactory>> {
    match name {
        "redb_on_disk" => Ok(Box::new(redb_on_disk()?)),
        "postgres" => match postgres()? {
            Some(backend) => Ok(Box::new(backend)),
            None => Err("the postgres backend has no server here".into()),
        },
        other => Err(format!("no durable backend is named {other:?}").into()),
    }
}

/// A factory that may be missing here: redb's always exist; PostgreSQL's needs a server.
pub trait Available<T> {
    /// The factory, or `None` (said why already) when the backend cannot run here.
    fn available(self) -> Option<T>;
}

impl<T: StoreFactory> Available<T> for T {
    fn available(self) -> Option<T> {
        Some(self)
    }
}

impl<T: StoreFactory> Available<T> for Option<T> {
    fn available(self) -> Option<T> {
        self
    }
}

/// Instantiates contract suites: `backend_tests!(suite: a, b)` makes the tests `suite::a` and
/// `suite::b`, each calling `suite(&backends::a()?)` (a backend that cannot run here, as
/// PostgreSQL without a server, passes after saying so). The suite function is in scope where
/// the macro is used; a module and a function may share a name.
macro_rules! backend_tests {
    ($suite:ident: $($backend:ident),+ $(,)?) => {
        mod $suite {
            $(
                #[test]
                fn $backend() -> $crate::support::TestResult {
                    use $crate::backends::Available as _;
                    match $crate::backends::$backend()?.available() {
                        Some(backend) => super::$suite(&backend),
                        None => Ok(()),
                    }
                }
            )+
        }
    };
}
pub(crate) use backend_tests;

/// What a child process does: `Hold` opens the store, prints `ready` and waits; `Write` commits
/// transactions in a loop and prints `ack N` after each returns.
#[derive(Clone, Copy, Debug)]
pub enum ChildMode {
    Hold,
    Write,
}

/// The lines a child process prints.
pub type ChildLines = Lines<BufReader<ChildStdout>>;

/// Runs this test binary's ignored `backends::child_process` as a child in `mode`, on the store
/// of `backend` at `place`: the child and its stdout by line. libtest prints `test
/// backends::child_process ... ` before the child's first line.
///
/// # Errors
/// When the child cannot be started.
pub fn spawn_child(
    mode: ChildMode,
    backend: &dyn DurableFactory,
    place: &Path,
) -> TestResult<(Child, ChildLines)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "backends::child_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STRATA_TEST_CHILD", format!("{mode:?}"))
        .env("STRATA_TEST_BACKEND", backend.name())
        .env("STRATA_TEST_STORE", place)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    Ok((child, BufReader::new(stdout).lines()))
}

/// Not a test: the body of the child processes of the lock and crash tests, which run it by name
/// (see [`spawn_child`]); run without them it fails.
#[test]
#[ignore = "a helper the crash and lock tests run as their child process"]
fn child_process() -> TestResult {
    let var = |name: &str| {
        std::env::var(name).map_err(|_| {
            format!("{name} is unset: this is the child of the crash and lock tests, not a test")
        })
    };
    let (mode, backend, place) = (
        var("STRATA_TEST_CHILD")?,
        var("STRATA_TEST_BACKEND")?,
        PathBuf::from(var("STRATA_TEST_STORE")?),
    );
    let store = durable(&backend)?.open(&place)?;
    match mode.as_str() {
        "Hold" => {
            println!("ready");
            std::thread::sleep(Duration::from_secs(60));
            Ok(())
        }
        "Write" => {
            for i in 0u64.. {
                let big: String = (0..(i % 7) * 900)
                    .map(|j| char::from(b'a' + ((i + j) % 26) as u8))
                    .collect();
                let file = Object::file_text(
                    FilesystemSource {
                        filesystem_id: "fs1".into(),
                        path: format!("/crash/{}.txt", i % 50),
                    },
                    format!("{i} {big}"),
                )?;
                let prompt = Object::system_prompt("crash", format!("turn {i}"))?;
                let ops = vec![Op::put(file), Op::put(prompt)];
                let r = store.transact(ops, Origin::Other("crash-test".into()))?;
                println!("ack {}", r.tx_id.0);
            }
            Ok(())
        }
        other => Err(format!("unknown child mode {other}").into()),
    }
}
