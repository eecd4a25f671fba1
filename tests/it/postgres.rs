//! PostgreSQL only (the generic suites run on it through `backends`): two writers on two
//! connections (gapless ids, no lost update), `LISTEN` seeing a commit, a SIGKILL of the
//! postmaster in the middle of commits (then a restart: nothing acknowledged is lost, fsck is
//! clean), bad URLs, a read-only open, the damage marker, and a streaming standby reading what
//! the primary committed. They need `STRATA_TEST_POSTGRES_URL` (skipped and said why without it,
//! failed under CI); the SIGKILL test makes a private cluster of its own and the standby test a
//! standby of the test server, both with `tools/pg-cluster`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator as _;
use strata::object::Object;
use strata::{Error, Op, Origin, PgLocation, PgOpen, Store, TxId};

use crate::backends::{flip_in_chunks, postgres, skipped};
use crate::support::{TestResult, env_count, error_of};

fn counter(n: u64) -> TestResult<Object> {
    Ok(Object::system_prompt("counter", n.to_string())?)
}

/// The counter's value now and its object hash.
fn read_counter(store: &Store) -> TestResult<(u64, Option<strata::hash::Hash>)> {
    let Some(version) = store.get_if_known("system_prompt:counter")? else {
        return Ok((0, None));
    };
    let object = version.object.ok_or("the counter was deleted")?;
    let value = object.content().ok_or("the counter has no text")?.parse()?;
    Ok((value, Some(*object.object_hash())))
}

/// Increments the counter with a match on what was read, again on a conflict: how many
/// conflicts it met.
fn increment(store: &Store) -> TestResult<u64> {
    let mut conflicts = 0;
    loop {
        let (value, hash) = read_counter(store)?;
        let ops = vec![
            Op::Match {
                entity: "system_prompt:counter".into(),
                expected: hash,
            },
            Op::put(counter(value + 1)?),
        ];
        match store.transact(ops, Origin::Cli) {
            Ok(_) => return Ok(conflicts),
            Err(Error::Conflict { .. }) => conflicts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Two handles (two connection pools) on one store, each incrementing a counter from its own
/// thread through match-guarded commits: every increment counts (no lost update), tx ids are
/// gapless, the chain verifies end to end, and fsck is clean.
#[test]
fn two_writers_on_two_connections_lose_no_update() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let per_writer = u64::from(env_count("STRATA_PG_WRITES", 40)?);
    let location = backend.fresh(&format!("w_{}", std::process::id()))?;
    let first = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let second = Store::postgres(location.clone(), None, PgOpen::Open)?;
    let writers: Vec<_> = [first.clone(), second]
        .into_iter()
        .map(|store| {
            std::thread::spawn(move || -> TestResult<u64> {
                let mut conflicts = 0;
                for _ in 0..per_writer {
                    conflicts += increment(&store)?;
                }
                Ok(conflicts)
            })
        })
        .collect();
    let mut conflicts = 0;
    for writer in writers {
        conflicts += writer.join().map_err(|_| "a writer panicked")??;
    }
    let (value, _) = read_counter(&first)?;
    assert_eq!(value, 2 * per_writer, "every increment counts");
    let log = first.log(None, usize::MAX)?;
    let ids: Vec<u64> = log.iter().map(|r| r.tx_id.0).collect();
    let gapless: Vec<u64> = (1..=2 * per_writer).collect();
    assert_eq!(
        ids, gapless,
        "one tx per increment, gapless ({conflicts} conflicts)"
    );
    assert_eq!(first.chain_head()?, log.last().map(|r| (r.tx_id, r.chain)));
    assert_eq!(first.fsck()?, vec![]);
    drop(first);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// A connection that `LISTEN`s on the store's channel hears a commit of another handle, with
/// the tx id as payload.
#[test]
fn listen_sees_a_commit() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("l_{}", std::process::id()))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let mut listener = location.connect()?;
    listener.batch_execute(&format!("LISTEN {}", location.channel()))?;
    let receipt = store.transact(vec![Op::put(counter(1)?)], Origin::Cli)?;
    let mut notifications = listener.notifications();
    let heard = notifications
        .timeout_iter(Duration::from_secs(10))
        .next()?
        .ok_or("no notification within 10 s")?;
    assert_eq!(heard.channel(), location.channel());
    assert_eq!(heard.payload(), receipt.tx_id.0.to_string());
    drop(store);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// Bad locations are refused with what to do, and nothing is made.
#[test]
fn bad_locations_are_refused() -> TestResult {
    for url in [
        "mysql://x@localhost/db",
        "postgres://x@localhost/db?schema=Bad-Name",
    ] {
        let err = error_of(PgLocation::parse(url))?;
        assert!(matches!(err, Error::InvalidInput { .. }), "{url}: {err}");
    }
    let parsed = PgLocation::parse("postgres://u:secret@h:1/db?schema=team&connect_timeout=3")?;
    assert_eq!(parsed.schema(), "team");
    assert!(
        !parsed.redacted().contains("secret"),
        "{}",
        parsed.redacted()
    );
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let missing = backend.location(&format!("m_{}", std::process::id()))?;
    let err = error_of(Store::postgres(missing, None, PgOpen::Open))?;
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    Ok(())
}

/// A private cluster in a directory of its own, stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    script: std::path::PathBuf,
}

impl Cluster {
    /// A directory for a cluster (not made yet).
    fn place() -> TestResult<Cluster> {
        let dir = tempfile::tempdir()?;
        // The cluster's unprivileged owner must reach it.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pg-cluster");
        Ok(Cluster { dir, script })
    }

    /// Makes and starts one: its URL.
    fn start() -> TestResult<(Cluster, String)> {
        let cluster = Cluster::place()?;
        let url = cluster.run("start")?;
        Ok((cluster, url))
    }

    /// Makes and starts a streaming standby of the server at `primary` (`pg_basebackup -R`) on
    /// a free loopback port: its URL; `None` (said why) when pg_basebackup is missing here.
    fn standby(primary: &str) -> TestResult<Option<(Cluster, String)>> {
        let cluster = Cluster::place()?;
        let dir = cluster.dir.path().join("c");
        // The script picks the port (a free one below the ephemeral range).
        let out = Command::new(&cluster.script)
            .args(["standby", primary])
            .arg(&dir)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {
                let url = String::from_utf8(out.stdout)?.trim().to_string();
                Ok(Some((cluster, url)))
            }
            Some(3) if std::env::var_os("CI").is_none() => {
                skipped(&format!("no standby can be made here: {stderr}"));
                Ok(None)
            }
            _ => Err(format!("tools/pg-cluster standby {primary}: {stderr}").into()),
        }
    }

    fn run(&self, command: &str) -> TestResult<String> {
        let out = Command::new(&self.script)
            .arg(command)
            .arg(self.dir.path().join("c"))
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "tools/pg-cluster {command}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    /// SIGKILLs the postmaster.
    fn kill_postmaster(&self) -> TestResult {
        let pidfile = std::fs::read_to_string(self.dir.path().join("c/data/postmaster.pid"))?;
        let pid: i32 = pidfile
            .lines()
            .next()
            .ok_or("empty pid file")?
            .trim()
            .parse()?;
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()?;
        if !status.success() {
            return Err(format!("kill -KILL {pid} failed").into());
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.run("stop");
    }
}

/// The postmaster is SIGKILLed while a writer commits in a loop; the cluster is started again:
/// every transaction acknowledged before the kill is there, the chain verifies, fsck is clean,
/// and commits go on from the next id.
#[test]
fn sigkill_of_the_postmaster_mid_commit_loses_no_acknowledged_tx() -> TestResult {
    if backends_skip()? {
        return Ok(());
    }
    let (cluster, url) = Cluster::start()?;
    let location = PgLocation::parse(&format!("{url}?schema=crash"))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, acked, stop) = (store.clone(), Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let ops = match counter(i) {
                    Ok(object) => vec![Op::put(object)],
                    Err(_) => break,
                };
                match store.transact(ops, Origin::Cli) {
                    Ok(receipt) => {
                        if let Ok(mut acked) = acked.lock() {
                            acked.push(receipt.tx_id.0);
                        }
                    }
                    // The server is down: try again a little later, as a client would.
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
    };
    let started = Instant::now();
    while acked.lock().map_err(|_| "poisoned")?.len() < 20 {
        if started.elapsed() > Duration::from_secs(30) {
            return Err("the writer acknowledged nothing in 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.kill_postmaster()?;
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    // A commit in flight when the server died fails within the connection's bounds (connect
    // timeout, TCP user timeout): the writer never hangs the test.
    let stopped = Instant::now();
    while !writer.is_finished() {
        if stopped.elapsed() > Duration::from_secs(60) {
            return Err("the writer's commit hung for 60 s after the server died".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    writer.join().map_err(|_| "the writer panicked")?;
    drop(store);
    let again = cluster.run("start")?;
    assert_eq!(again, url, "the cluster comes back at the same URL");
    let store = Store::postgres(location, None, PgOpen::Open)?;
    let acked = acked.lock().map_err(|_| "poisoned")?.clone();
    let last = *acked.last().ok_or("nothing acknowledged")?;
    let head = store
        .chain_head()?
        .ok_or("an empty store after the crash")?
        .0;
    assert!(
        head.0 >= last,
        "acknowledged tx {last} lost (head {head:?})"
    );
    let (value, _) = read_counter(&store)?;
    assert!(
        value >= acked.len() as u64,
        "counter {value} behind {} acks",
        acked.len()
    );
    let log = store.log(None, usize::MAX)?;
    assert_eq!(log.len() as u64, head.0, "gapless");
    assert_eq!(store.fsck()?, vec![]);
    let next = store.transact(vec![Op::put(counter(0)?)], Origin::Cli)?;
    assert_eq!(next.tx_id, TxId(head.0 + 1));
    Ok(())
}

/// Whether the PostgreSQL tests skip here (said why); under CI, never.
fn backends_skip() -> TestResult<bool> {
    match crate::backends::postgres_skip()? {
        Some(why) => {
            skipped(&why);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Runs the strata binary in `cwd`; (exit success, stdout, stderr).
fn strata(cwd: &Path, args: &[&str]) -> TestResult<(bool, String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(cwd)
        .env_remove("STRATA_NO_DAEMON")
        .output()?;
    Ok((
        out.status.success(),
        String::from_utf8(out.stdout)?,
        String::from_utf8(out.stderr)?,
    ))
}

/// Stops the daemon of the store in `dir`/.strata; its log shows no panic.
fn stop_daemon(dir: &Path) -> TestResult {
    let (ok, out, err) = strata(dir, &["stop"])?;
    assert!(ok, "{out}{err}");
    let log = std::fs::read_to_string(dir.join(".strata/daemon.log"))?;
    assert!(!log.contains("panicked"), "{log}");
    Ok(())
}

/// A team's set-up: two store directories (two machines) `strata init --backend` one
/// PostgreSQL store; each indexes through its own daemon; both see one log, gapless, with one
/// chain head; fsck is clean from either.
#[test]
fn two_directories_share_one_postgres_store_through_their_daemons() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("d_{}", std::process::id()))?;
    let url = location.url();
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    for (dir, file) in [(&a, "a.txt"), (&b, "b.txt")] {
        std::fs::write(dir.path().join(file), format!("{file} text\n"))?;
        let (ok, out, err) = strata(dir.path(), &["init", "--backend", &url])?;
        assert!(ok, "{out}{err}");
        let (ok, out, err) = strata(dir.path(), &["index", "."])?;
        assert!(ok, "{out}{err}");
    }
    let heads: Vec<String> = [&a, &b]
        .iter()
        .map(|dir| {
            let (ok, out, err) = strata(dir.path(), &["log"])?;
            assert!(ok, "{out}{err}");
            assert!(out.contains("\n1 ") && out.contains("\n2 "), "{out}");
            Ok(out.lines().last().unwrap_or_default().to_string())
        })
        .collect::<TestResult<_>>()?;
    assert_eq!(heads[0], heads[1], "one chain head");
    assert!(heads[0].contains("after tx 2"), "{}", heads[0]);
    for dir in [&a, &b] {
        let (ok, out, err) = strata(dir.path(), &["fsck"])?;
        assert!(ok && out.starts_with("ok"), "{out}{err}");
        stop_daemon(dir.path())?;
    }
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// A PostgreSQL store keeps no stat file beside its directory (`stat.cache`, keyed by redb's
/// file header): another directory (another machine) commits to the same store without
/// touching it. An unchanged re-index of directory A after B evicted A's file indexes it again.
#[test]
fn a_postgres_store_keeps_no_stat_file() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("s_{}", std::process::id()))?;
    let url = location.url();
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    for dir in [&a, &b] {
        let (ok, out, err) = strata(dir.path(), &["init", "--backend", &url])?;
        assert!(ok, "{out}{err}");
    }
    std::fs::write(a.path().join("a.txt"), "a text\n")?;
    let index = |dir: &Path| -> TestResult<String> {
        let (ok, out, err) = strata(dir, &["--no-daemon", "index", ".", "--json"])?;
        assert!(ok, "{out}{err}");
        Ok(out)
    };
    for _ in 0..3 {
        index(a.path())?;
    }
    assert!(!a.path().join(".strata/stat.cache").exists());
    let evicted = a.path().canonicalize()?.join("a.txt");
    let evicted = evicted.to_str().ok_or("a UTF-8 path")?;
    let (ok, out, err) = strata(b.path(), &["--no-daemon", "evict", evicted, "--yes"])?;
    assert!(ok, "{out}{err}");
    let again: serde_json::Value = serde_json::from_str(&index(a.path())?)?;
    assert_eq!(again["created"], 1, "{again}");
    assert!(!a.path().join(".strata/stat.cache").exists());
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// One line-delimited JSON-RPC connection to a daemon's socket (reads time out, never hang).
struct Socket {
    writer: std::os::unix::net::UnixStream,
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
}

impl Socket {
    fn connect(store: &Path) -> TestResult<Socket> {
        let stream = std::os::unix::net::UnixStream::connect(store.join("strata.sock"))?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Socket {
            reader: std::io::BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// The next message, or `None` when none comes within the read timeout.
    fn next(&mut self) -> TestResult<Option<serde_json::Value>> {
        use std::io::BufRead as _;
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("the daemon closed the connection".into()),
            Ok(_) => Ok(Some(serde_json::from_str(&line)?)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn subscribe(&mut self) -> TestResult {
        use std::io::Write as _;
        self.writer.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"subscribe\",\"params\":{}}\n",
        )?;
        let answer = self.next()?.ok_or("no answer to subscribe")?;
        assert_eq!(
            answer["result"],
            serde_json::json!({"subscribed": true}),
            "{answer}"
        );
        Ok(())
    }

    /// The next commit event's params.
    fn commit(&mut self) -> TestResult<serde_json::Value> {
        let heard = self.next()?.ok_or("no commit event within 20 s")?;
        assert_eq!(heard["method"], "commit", "{heard}");
        Ok(heard["params"].clone())
    }
}

/// Two processes on one database: a daemon serving store directory A hears, as commit events
/// on its subscription, the commits of a plain `strata index` process and of another daemon
/// (directory B) on the same PostgreSQL store, with their paths and sessions, each once; its own
/// commits are heard once too, in between.
#[test]
fn a_daemon_hears_other_processes_commits() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("f_{}", std::process::id()))?;
    let url = location.url();
    let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    for dir in [&a, &b] {
        let (ok, out, err) = strata(dir.path(), &["init", "--backend", &url])?;
        assert!(ok, "{out}{err}");
    }
    // A's daemon, started by a command, and a subscriber on it.
    let (ok, out, err) = strata(a.path(), &["session", "ls"])?;
    assert!(ok, "{out}{err}");
    let mut socket = Socket::connect(&a.path().join(".strata"))?;
    socket.subscribe()?;
    // A plain process (no daemon) indexes in B.
    let b_tree = std::fs::canonicalize(b.path())?;
    std::fs::write(b_tree.join("b.txt"), "from b\n")?;
    let index = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["index", "."])
        .current_dir(&b_tree)
        .env("STRATA_NO_DAEMON", "1")
        .output()?;
    assert!(index.status.success(), "{index:?}");
    let heard = socket.commit()?;
    assert_eq!(heard["tx_id"], 1, "{heard}");
    assert_eq!(heard["origin"], "indexer", "{heard}");
    let path = b_tree.join("b.txt").to_string_lossy().to_string();
    assert_eq!(heard["paths"], serde_json::json!([path]), "{heard}");
    assert_eq!(heard["changes"][0]["kind"], "created", "{heard}");
    // A's own commit, heard once.
    let (ok, out, err) = strata(a.path(), &["session", "new", "--id", "mine"])?;
    assert!(ok, "{out}{err}");
    let heard = socket.commit()?;
    assert_eq!(
        (&heard["tx_id"], &heard["sessions"]),
        (&serde_json::json!(2), &serde_json::json!(["mine"])),
        "{heard}"
    );
    // B's daemon commits a session: heard next (A's own commit was not heard twice).
    let (ok, out, err) = strata(&b_tree, &["session", "new", "--id", "theirs"])?;
    assert!(ok, "{out}{err}");
    let heard = socket.commit()?;
    assert_eq!(
        (&heard["tx_id"], &heard["sessions"]),
        (&serde_json::json!(3), &serde_json::json!(["theirs"])),
        "{heard}"
    );
    // A session B's daemon changes is read again by A's daemon, not served from its memory.
    let (ok, out, err) = strata(
        &b_tree,
        &[
            "session",
            "turn",
            "mine",
            "--role",
            "user",
            "--content",
            "hello from b",
        ],
    )?;
    assert!(ok, "{out}{err}");
    let heard = socket.commit()?;
    assert_eq!(heard["sessions"], serde_json::json!(["mine"]), "{heard}");
    let (ok, out, err) = strata(
        a.path(),
        &[
            "session",
            "turn",
            "mine",
            "--role",
            "user",
            "--content",
            "and from a",
        ],
    )?;
    assert!(ok, "{out}{err}");
    let (ok, out, err) = strata(a.path(), &["session", "show", "mine"])?;
    assert!(
        ok && out.contains("commit tx 5") && out.contains("turns 2"),
        "{out}{err}"
    );
    for dir in [a.path(), &b_tree] {
        stop_daemon(dir)?;
    }
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// The error a write through a read-only handle meets: permission denied, saying why.
fn assert_read_only_refusal<T: std::fmt::Debug>(result: strata::Result<T>) -> TestResult {
    let err = error_of(result)?;
    assert!(
        matches!(&err, Error::PermissionDenied { reason } if reason.contains("opened read-only")),
        "{err}"
    );
    Ok(())
}

/// Every write through `store` (a read-only handle) is refused, typed, and changes nothing.
fn assert_writes_refused(store: &Store) -> TestResult {
    let head = store.chain_head()?;
    assert!(store.is_read_only());
    assert_read_only_refusal(store.transact(vec![Op::put(counter(99)?)], Origin::Cli))?;
    let group = store.transact_group(vec![strata::TxRequest {
        ops: vec![Op::put(counter(98)?)],
        origin: Origin::Cli,
        stat: None,
    }]);
    for result in group {
        assert_read_only_refusal(result)?;
    }
    assert_read_only_refusal(store.evict("system_prompt:counter", Origin::Cli))?;
    assert_read_only_refusal(store.gc())?;
    assert_read_only_refusal(store.fsck_rebuild())?;
    assert_read_only_refusal(store.restore_contents(vec![]))?;
    assert_read_only_refusal(store.append_log(&[]))?;
    assert_eq!(store.chain_head()?, head, "nothing was written");
    Ok(())
}

/// A read-only open reads, refuses every write (typed, saying so) and changes nothing: it
/// makes no store where there is none, and reads an older layout without upgrading it (a
/// read-write open then does; a stale copy of the head's header is found by fsck and mended
/// by the rebuild).
#[test]
fn a_read_only_open_reads_and_refuses_writes() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("ro_{}", std::process::id()))?;
    let err = error_of(Store::postgres(location.clone(), None, PgOpen::ReadOnly))?;
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let mut sql = backend.location("public")?.connect()?;
    let made = sql.query_one(
        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
        &[&location.schema()],
    )?;
    assert_eq!(made.get::<_, i64>(0), 0, "a read-only open made nothing");
    let writer = Store::postgres(location.clone(), None, PgOpen::Create)?;
    writer.transact(vec![Op::put(counter(1)?)], Origin::Cli)?;
    let reader = Store::postgres(location.clone(), None, PgOpen::ReadOnly)?;
    assert_eq!(read_counter(&reader)?.0, 1);
    assert_writes_refused(&reader)?;
    assert_eq!(reader.fsck()?, vec![], "fsck reads");
    // The writer goes on; the reader sees its commits.
    writer.transact(vec![Op::put(counter(2)?)], Origin::Cli)?;
    assert_eq!(read_counter(&reader)?.0, 2);
    drop((writer, reader));
    // A store of layout 1 (no damage marker table): read as it is, upgraded by a writer.
    let schema = location.schema();
    sql.batch_execute(&format!(
        "DROP TABLE {schema}.strata_damage; ALTER TABLE {schema}.strata_head DROP COLUMN \
         header; UPDATE {schema}.strata_meta SET value = 1 WHERE name = 'schema_version'"
    ))?;
    let layout = |sql: &mut postgres::Client| -> TestResult<i64> {
        Ok(sql
            .query_one(
                &format!("SELECT value FROM {schema}.strata_meta WHERE name = 'schema_version'"),
                &[],
            )?
            .get(0))
    };
    let old = Store::postgres(location.clone(), None, PgOpen::ReadOnly)?;
    assert_eq!(read_counter(&old)?.0, 2);
    assert_eq!(old.damage(), None);
    assert_eq!(old.fsck()?, vec![]);
    assert_eq!(layout(&mut sql)?, 1, "a read-only open upgrades nothing");
    drop(old);
    let upgraded = Store::postgres(location.clone(), None, PgOpen::Open)?;
    assert_eq!(
        layout(&mut sql)?,
        2,
        "a read-write open upgrades the layout"
    );
    upgraded.transact(vec![Op::put(counter(3)?)], Origin::Cli)?;
    assert_eq!(upgraded.fsck()?, vec![]);
    // The head's copy of its header, stale: fsck names it, the rebuild mends it.
    sql.batch_execute(&format!(
        "UPDATE {schema}.strata_head SET header = (SELECT header FROM {schema}.strata_log WHERE \
         tx_id = 1)"
    ))?;
    let kinds: Vec<&str> = upgraded.fsck()?.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["head"]);
    upgraded.fsck_rebuild()?;
    assert_eq!(upgraded.fsck()?, vec![]);
    upgraded.transact(vec![Op::put(counter(4)?)], Origin::Cli)?;
    assert_eq!(upgraded.fsck()?, vec![]);
    drop(upgraded);
    backend.execute(&format!("DROP SCHEMA {schema} CASCADE"))?;
    Ok(())
}

/// File `/blob.bin` of incompressible bytes (stored as given, so that a test can find and flip
/// them in the chunks): the object, its bytes, and the put that stores them.
fn incompressible_file() -> TestResult<(Object, Vec<u8>, Op)> {
    let bytes: Vec<u8> = (0..100u32)
        .flat_map(|i| strata::hash::sha256(&i.to_le_bytes()).0)
        .chain([0xff])
        .collect();
    let bin = Object::file_bytes(
        strata::object::FilesystemSource {
            filesystem_id: "fs1".into(),
            path: "/blob.bin".into(),
        },
        bytes.clone(),
    )?;
    let mut put = strata::Put::new(bin.clone());
    put.bytes = Some(bytes.clone());
    Ok((bin, bytes, Op::Put(Box::new(put))))
}

/// Damage fsck finds marks the PostgreSQL store damaged for every handle (one opened before,
/// one opened after, one read-only): writes are refused, typed and pointing at the repair,
/// without a change; reads answer what verifies, and "not found" says it may be what the
/// damage lost. The repair (`restore_contents`, rebuild, a clean fsck) removes the mark and
/// writes go on.
#[test]
fn fsck_findings_mark_the_store_damaged_for_every_handle() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("dm_{}", std::process::id()))?;
    let first = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let before = Store::postgres(location.clone(), None, PgOpen::Open)?;
    // Incompressible bytes, stored as given, and a prompt that stays sound.
    let (bin, bytes, put) = incompressible_file()?;
    first.transact(vec![put, Op::put(counter(1)?)], Origin::Cli)?;
    assert_eq!(before.damage(), None);
    flip_in_chunks(&location, &bytes[1000..1064])?;
    let findings = first.fsck()?;
    let kinds: Vec<&str> = findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["blob_hash"], "{findings:?}");
    let after = Store::postgres(location.clone(), None, PgOpen::Open)?;
    let reader = Store::postgres(location.clone(), None, PgOpen::ReadOnly)?;
    let head = first.chain_head()?;
    for store in [&first, &before, &after] {
        let reason = store.damage().ok_or("the store is not marked damaged")?;
        assert!(reason.contains("fsck found 1 problems"), "{reason}");
        let err = error_of(store.transact(vec![Op::put(counter(2)?)], Origin::Cli))?;
        assert!(
            matches!(&err, Error::Corrupt { what } if what.contains("marked damaged")
                && what.contains("strata fsck --repair")),
            "{err}"
        );
        assert_eq!(read_counter(store)?.0, 1, "reads answer what verifies");
        let err = error_of(store.as_of("system_prompt:nothing", None, None))?;
        assert!(
            matches!(&err, Error::Corrupt { what } if what.contains("may be what the damage lost")),
            "{err}"
        );
    }
    assert!(reader.damage().is_some());
    assert_read_only_refusal(reader.transact(vec![Op::put(counter(2)?)], Origin::Cli))?;
    assert_eq!(first.chain_head()?, head, "nothing was written");
    // The repair: the content's bytes back, the tables rebuilt, a clean fsck.
    let hash = bin.file_hash().ok_or("no file_hash")?;
    before.restore_contents(vec![(hash.0, bytes.clone())])?;
    before.fsck_rebuild()?;
    assert_eq!(before.fsck()?, vec![]);
    for store in [&first, &after, &reader] {
        assert_eq!(store.damage(), None, "a clean fsck removes the mark");
    }
    after.transact(vec![Op::put(counter(2)?)], Origin::Cli)?;
    let again = first.as_of(bin.id(), None, None)?.and_then(|v| v.object);
    assert_eq!(again.as_ref(), Some(&bin));
    drop((first, before, after, reader));
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// A streaming standby of the test server (`pg_basebackup -R`, started on another loopback
/// port): a transaction committed through strata on the primary after the standby started is
/// read through strata opened read-only on the standby once replay reaches it, with the same
/// log and chain head; fsck is clean there, and every write is refused there, by strata
/// (typed) and, for a handle that is not read-only, by the server. A store directory pointing
/// at the standby answers the CLI's reads.
#[test]
fn a_standby_reads_a_transaction_committed_on_the_primary() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("sb_{}", std::process::id()))?;
    let primary = Store::postgres(location.clone(), None, PgOpen::Create)?;
    primary.transact(vec![Op::put(counter(1)?)], Origin::Cli)?;
    let url = std::env::var(crate::backends::POSTGRES_URL)?;
    let Some((_standby, standby_url)) = Cluster::standby(&url)? else {
        return Ok(());
    };
    // Committed after the copy was taken: only streaming replication brings it.
    let receipt = primary.transact(vec![Op::put(counter(2)?)], Origin::Cli)?;
    let sep = if standby_url.contains('?') { '&' } else { '?' };
    let on_standby = PgLocation::parse(&format!("{standby_url}{sep}schema={}", location.schema()))?;
    let replica = Store::postgres(on_standby.clone(), None, PgOpen::ReadOnly)?;
    let started = Instant::now();
    while replica.chain_head()?.map(|(tx, _)| tx) != Some(receipt.tx_id) {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the standby did not replay tx {} in 60 s (head {:?})",
                receipt.tx_id.0,
                replica.chain_head()?
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_counter(&replica)?, read_counter(&primary)?);
    assert_eq!(read_counter(&replica)?.0, 2);
    assert_eq!(replica.chain_head()?, primary.chain_head()?);
    assert_eq!(
        replica.log(None, usize::MAX)?,
        primary.log(None, usize::MAX)?
    );
    let version = replica
        .as_of("system_prompt:counter", None, Some(TxId(1)))?
        .and_then(|v| v.object)
        .ok_or("no version at tx 1")?;
    assert_eq!(version.content(), Some("1"));
    assert_eq!(replica.fsck()?, vec![]);
    assert_writes_refused(&replica)?;
    // Opened for writing, the standby itself refuses (a read-only server).
    match Store::postgres(on_standby.clone(), None, PgOpen::Open) {
        Err(e) => assert!(matches!(e, Error::Storage { .. }), "{e}"),
        Ok(store) => {
            let err = error_of(store.transact(vec![Op::put(counter(3)?)], Origin::Cli))?;
            assert!(err.full_message().contains("read-only"), "{err}");
        }
    }
    // The CLI through a store directory that points at the standby, without a daemon.
    let dir = tempfile::tempdir()?;
    let strata_dir = dir.path().join(".strata");
    std::fs::create_dir(&strata_dir)?;
    std::fs::write(
        strata_dir.join(strata::BACKEND_FILE),
        format!("{}\n", on_standby.url()),
    )?;
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["show", "system_prompt:counter", "--json"])
        .current_dir(dir.path())
        .env("STRATA_NO_DAEMON", "1")
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: serde_json::Value = serde_json::from_str(&stdout)?;
    assert_eq!(shown["content"], "2", "{stdout}");
    drop((replica, primary));
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// Reads check version rows against the log, as redb's do: with the op body that wrote the
/// latest version gone (no eviction removed it), an as-of and a history of that entity are
/// refused as corrupt, naming it; the read marks the store damaged, so writes are refused
/// too; fsck names the missing body.
#[test]
fn reads_check_version_rows_against_the_log() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("vr_{}", std::process::id()))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    store.transact(vec![Op::put(counter(1)?)], Origin::Cli)?;
    let second = store.transact(vec![Op::put(counter(2)?)], Origin::Cli)?;
    assert_eq!(store.damage(), None);
    let mut sql = location.connect()?;
    sql.execute(
        "DELETE FROM strata_ops WHERE tx_id = $1",
        &[&i64::try_from(second.tx_id.0)?],
    )?;
    for err in [
        error_of(store.as_of("system_prompt:counter", None, None))?,
        error_of(store.history("system_prompt:counter", strata::HistoryQuery::default()))?,
    ] {
        assert!(
            matches!(&err, Error::Corrupt { what } if what.contains("op 0 of tx 2 is missing")),
            "{err}"
        );
    }
    // The version of tx 1 still reads.
    let first = store
        .as_of("system_prompt:counter", None, Some(TxId(1)))?
        .and_then(|v| v.object)
        .ok_or("no version at tx 1")?;
    assert_eq!(first.content(), Some("1"));
    let reason = store.damage().ok_or("the read did not mark the store")?;
    assert!(reason.contains("a read found damage"), "{reason}");
    let err = error_of(store.transact(vec![Op::put(counter(3)?)], Origin::Cli))?;
    assert!(
        matches!(&err, Error::Corrupt { what } if what.contains("marked damaged")),
        "{err}"
    );
    let kinds: Vec<&str> = store.fsck()?.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&"log"), "{kinds:?}");
    drop(store);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// PostgreSQL's evict over a damaged document, as redb's (fix12): a file whose document record
/// no longer decodes, found by a read (which marks the store damaged), is evicted all the same
/// (its document goes without being read), and fsck is then clean and the mark gone; other
/// damage (a content's bytes) still refuses it; a version row that does not decode refuses the
/// evict, naming the repair, and writes nothing.
#[test]
fn evict_over_a_damaged_document_erases_it() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("ed_{}", std::process::id()))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let file = |path: &str, text: &str| {
        Object::file_text(
            strata::object::FilesystemSource {
                filesystem_id: "fs1".into(),
                path: path.into(),
            },
            text.into(),
        )
    };
    let (a, b) = (file("/a.txt", "secret a\n")?, file("/b.txt", "kept b\n")?);
    store.transact(vec![Op::put(a.clone()), Op::put(b.clone())], Origin::Cli)?;
    let mut sql = location.connect()?;
    sql.execute(
        "UPDATE strata_docs SET rec = '\\x090909'::bytea WHERE hash = $1",
        &[&a.object_hash().0.as_slice()],
    )?;
    let read = store.as_of(a.id(), None, None);
    assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
    assert!(store.damage().is_some(), "the read did not mark the store");
    store.evict(a.id(), Origin::Cli)?;
    assert_eq!(store.fsck()?, vec![]);
    assert_eq!(store.damage(), None);
    let gone = store.as_of(a.id(), None, None);
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
    let kept = store.as_of(b.id(), None, None)?.and_then(|v| v.object);
    assert_eq!(kept.as_ref(), Some(&b));

    // A content's bytes damaged: not a document's damage, the evict is refused.
    let (bin, bytes, put) = incompressible_file()?;
    store.transact(vec![put], Origin::Cli)?;
    flip_in_chunks(&location, &bytes[1000..1064])?;
    assert!(!store.fsck()?.is_empty());
    let head = store.chain_head()?;
    let err = error_of(store.evict(b.id(), Origin::Cli))?;
    assert!(
        matches!(&err, Error::Corrupt { what } if what.contains("marked damaged")),
        "{err}"
    );
    assert_eq!(store.chain_head()?, head);
    let hash = bin.file_hash().ok_or("no file_hash")?;
    store.restore_contents(vec![(hash.0, bytes)])?;
    store.fsck_rebuild()?;
    assert_eq!(store.fsck()?, vec![]);

    // A version row that does not decode: refused, naming the repair, nothing written.
    sql.execute(
        "UPDATE strata_versions SET rec = '\\xffffff'::bytea WHERE eid = (SELECT eid FROM \
         strata_entities WHERE id = $1)",
        &[&b.id().as_bytes()],
    )?;
    let head = store.chain_head()?;
    let err = error_of(store.evict(b.id(), Origin::Cli))?;
    assert!(
        matches!(&err, Error::Corrupt { what }
            if what.contains("cannot be evicted") && what.contains("fsck --repair")),
        "{err}"
    );
    assert_eq!(store.chain_head()?, head);
    // Through the binary (the engine counts the versions first): the same refusal.
    let dir = tempfile::tempdir()?;
    let strata_dir = dir.path().join(".strata");
    std::fs::create_dir(&strata_dir)?;
    std::fs::write(
        strata_dir.join(strata::BACKEND_FILE),
        format!("{}\n", location.url()),
    )?;
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["evict", b.id(), "--yes"])
        .current_dir(dir.path())
        .env("STRATA_NO_DAEMON", "1")
        .output()?;
    crate::support::assert_evict_refused_naming_repair(&out);
    assert_eq!(store.chain_head()?, head);
    drop(store);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// `ls` (and `show`, the agent history) take a raw content's size from the record length its
/// row states (`strata_contents.len`): a row whose length is not its record's is damage that
/// fsck finds and a read refuses, never a sound store whose sizes are wrong.
#[test]
fn a_contents_stated_length_that_is_not_its_records_is_damage() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("cl_{}", std::process::id()))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let (bin, bytes, put) = incompressible_file()?;
    store.transact(vec![put], Origin::Cli)?;
    let hash = bin.file_hash().ok_or("no file_hash")?;
    let info = store
        .version_info(bin.id(), None, None)?
        .ok_or("no version")?;
    let sizes = store.version_sizes(bin.id(), std::slice::from_ref(&info))?;
    assert_eq!(sizes, [Some(bytes.len() as u64)]);
    let mut sql = location.connect()?;
    sql.execute(
        "UPDATE strata_contents SET len = len + 1000 WHERE hash = $1",
        &[&hash.0.as_slice()],
    )?;
    let sizes = store.version_sizes(bin.id(), std::slice::from_ref(&info))?;
    assert_eq!(
        sizes,
        [Some(bytes.len() as u64 + 1000)],
        "the size its row states"
    );
    let findings = store.fsck()?;
    assert!(
        findings.iter().any(|f| f.subject == hash.to_hex()),
        "{findings:?}"
    );
    let read = store.content(hash);
    assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
    drop(store);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}

/// `listings` on PostgreSQL (one snapshot for a chunk of files): a file whose version row does
/// not decode is that file's damage, as its own read says, and the files before and after it
/// are listed as their own reads list them.
#[test]
fn a_damaged_row_in_a_listing_is_that_files_alone() -> TestResult {
    let Some(backend) = postgres()? else {
        return Ok(());
    };
    let location = backend.fresh(&format!("ld_{}", std::process::id()))?;
    let store = Store::postgres(location.clone(), None, PgOpen::Create)?;
    let files: Vec<Object> = (0..3)
        .map(|n| {
            Object::file_text(
                strata::object::FilesystemSource {
                    filesystem_id: "fs1".into(),
                    path: format!("/f{n}.txt"),
                },
                format!("file {n}\n"),
            )
        })
        .collect::<Result<_, _>>()?;
    store.transact(files.iter().cloned().map(Op::put).collect(), Origin::Cli)?;
    let ids: Vec<&str> = files.iter().map(Object::id).collect();
    let healthy = store.listings(&ids, None, None, false)?;
    let mut sql = location.connect()?;
    sql.execute(
        "UPDATE strata_versions SET rec = '\\xffffff'::bytea WHERE eid = (SELECT eid FROM \
         strata_entities WHERE id = $1)",
        &[&ids[1].as_bytes()],
    )?;
    let listed = store.listings(&ids, None, None, false)?;
    assert_eq!(listed.len(), 3);
    let mut listed = listed.into_iter();
    let mut healthy = healthy.into_iter();
    for n in 0..3 {
        let (got, was) = (
            listed.next().ok_or("short")?,
            healthy.next().ok_or("short")?,
        );
        if n == 1 {
            assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
            let own = store.version_info(ids[1], None, None);
            assert!(matches!(own, Err(Error::Corrupt { .. })), "{own:?}");
        } else {
            assert_eq!(got?, was?);
        }
    }
    drop(store);
    backend.execute(&format!("DROP SCHEMA {} CASCADE", location.schema()))?;
    Ok(())
}
