//! PostgreSQL only (the generic suites run on it through `backends`): two writers on two
//! connections (gapless ids, no lost update), `LISTEN` seeing a commit, a SIGKILL of the
//! postmaster in the middle of commits (then a restart: nothing acknowledged is lost, fsck is
//! clean), and bad URLs. They need `STRATA_TEST_POSTGRES_URL` (skipped and said why without it,
//! failed under CI); the SIGKILL test makes a private cluster of its own with `tools/pg-cluster`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator as _;
use strata::object::Object;
use strata::{Error, Op, Origin, PgLocation, PgOpen, Store, TxId};

use crate::backends::{postgres, skipped};
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
    /// Makes and starts one: its URL.
    fn start() -> TestResult<(Cluster, String)> {
        let dir = tempfile::tempdir()?;
        // The cluster's unprivileged owner must reach it.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pg-cluster");
        let cluster = Cluster { dir, script };
        let url = cluster.run("start")?;
        Ok((cluster, url))
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
                if let Ok(receipt) = store.transact(ops, Origin::Cli)
                    && let Ok(mut acked) = acked.lock()
                {
                    acked.push(receipt.tx_id.0);
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
