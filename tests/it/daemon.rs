//! The daemon (`strata serve`) end to end, with real processes and sockets: the protocol on the
//! raw socket and every kind of bad input, peers of another user, the lifecycle (a second
//! daemon, a stale socket, `stop`, SIGTERM, idleness, `status`), many CLI processes at once,
//! readers beside an index, and SIGKILL under a write load.
//!
//! Every daemon a test starts ends with it: [`Daemon`] stops its own on drop, and an
//! auto-started one exits within a second of its socket disappearing with the test's temporary
//! directory.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use strata::engine::{Access, Engine, FsckRequest, LogRequest};
use strata::server::client::Client;

use crate::support::{RawClient, RawError, incompressible, strata_at};

type Res<T> = Result<T, Box<dyn std::error::Error>>;
type TestResult = Res<()>;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A store in a temporary directory, a tree beside it, and the commands to reach them.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    store: PathBuf,
    tree: PathBuf,
}

impl Fixture {
    /// A new empty store (made in this process, so no daemon runs yet).
    fn new() -> Res<Self> {
        let tmp = tempfile::tempdir()?;
        let root = fs::canonicalize(tmp.path())?;
        let f = Fixture {
            store: root.join("store"),
            tree: root.join("tree"),
            root,
            _tmp: tmp,
        };
        fs::create_dir_all(&f.tree)?;
        f.ok(&["--no-daemon", "init"])?;
        Ok(f)
    }

    fn socket(&self) -> PathBuf {
        self.store.join("strata.sock")
    }

    /// `strata --store STORE args…` in the tree, through the daemon (whatever the environment
    /// of the test run says).
    fn command(&self, args: &[&str]) -> Command {
        strata_at(&self.store, &self.tree, args)
    }

    fn run(&self, args: &[&str]) -> Res<Output> {
        Ok(self.command(args).output()?)
    }

    /// Runs a command that must succeed and returns its stdout.
    fn ok(&self, args: &[&str]) -> Res<String> {
        let output = self.run(args)?;
        if !output.status.success() {
            return Err(format!(
                "strata {args:?} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    fn json(&self, args: &[&str]) -> Res<Value> {
        Ok(serde_json::from_str(&self.ok(args)?)?)
    }

    /// Writes `count` small files under `tree/dir`.
    fn write_files(&self, dir: &str, count: usize) -> Res<()> {
        for i in 0..count {
            let sub = self.tree.join(dir).join(format!("d{:03}", i / 100));
            if i % 100 == 0 {
                fs::create_dir_all(&sub)?;
            }
            fs::write(
                sub.join(format!("f{i:05}.txt")),
                format!("file {i}\n{}\n", "x".repeat(i % 300)),
            )?;
        }
        Ok(())
    }

    /// Writes one file dated an hour back (so the racy-clean rule does not apply).
    fn write(&self, rel: &str, text: &str) -> Res<PathBuf> {
        let path = self.tree.join(rel);
        fs::write(&path, text)?;
        fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(SystemTime::now() - Duration::from_secs(3600))?;
        Ok(path)
    }
}

/// A `strata serve` this test started; stopped (SIGTERM, then SIGKILL) when dropped.
struct Daemon {
    child: Child,
    pid: u32,
    log: PathBuf,
}

impl Daemon {
    /// Starts `strata serve args…` on the fixture's store and waits until it answers.
    fn start(f: &Fixture, args: &[&str]) -> Res<Daemon> {
        Daemon::start_with(f, args, &[])
    }

    fn start_with(f: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Res<Daemon> {
        let log = f.root.join("serve.log");
        let err = fs::File::options().create(true).append(true).open(&log)?;
        let mut command = f.command(&["serve"]);
        command.args(args).stdout(Stdio::null()).stderr(err);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn()?;
        let mut daemon = Daemon {
            pid: child.id(),
            child,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = daemon.child.try_wait()? {
                return Err(format!(
                    "strata serve exited ({status}) before it answered: {}",
                    fs::read_to_string(&daemon.log).unwrap_or_default()
                )
                .into());
            }
            if let Ok(mut raw) = Raw::connect(&f.socket())
                && let Ok(answer) = raw.call("handshake", json!({"protocol": "1.0"}))
                && answer["result"]["pid"] == json!(daemon.pid)
            {
                return Ok(daemon);
            }
            if Instant::now() > deadline {
                return Err("strata serve did not answer within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, signal: rustix::process::Signal) -> Res<()> {
        let pid = rustix::process::Pid::from_raw(i32::try_from(self.pid)?)
            .ok_or("a daemon without a pid")?;
        rustix::process::kill_process(pid, signal)?;
        Ok(())
    }

    /// Waits up to `timeout` for the daemon to exit.
    fn wait(&mut self, timeout: Duration) -> Res<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(
                    format!("the daemon (pid {}) did not exit in {timeout:?}", self.pid).into(),
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) -> Res<()> {
        self.signal(rustix::process::Signal::KILL)?;
        self.wait(Duration::from_secs(10))?;
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.signal(rustix::process::Signal::TERM);
            if self.wait(Duration::from_secs(10)).is_err() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// A client on the daemon's raw socket (reads time out after 20 s).
struct Raw;

impl Raw {
    fn connect(socket: &Path) -> Result<RawClient, RawError> {
        RawClient::connect(socket, Duration::from_secs(20))
    }
}

/// A thread that commits turns "turn 0", "turn 1", … to session s1 through the socket until
/// `stop`, sending the time of each acknowledgement to `acks`; it answers how many it made.
fn turn_writer(
    socket: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
    acks: Option<mpsc::Sender<Instant>>,
) -> std::thread::JoinHandle<Result<u64, String>> {
    std::thread::spawn(move || -> Result<u64, String> {
        let mut raw = Raw::connect(&socket).map_err(|e| e.to_string())?;
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            raw.result(
                "session.turn",
                json!({"id": "s1", "role": "user", "content": format!("turn {n}")}),
            )
            .map_err(|e| e.to_string())?;
            if let Some(acks) = &acks {
                acks.send(Instant::now()).map_err(|e| e.to_string())?;
            }
            n += 1;
        }
        Ok(n)
    })
}

/// The error code of a response (`None` when it is a result).
fn code(response: &Value) -> Option<i64> {
    response["error"]["code"].as_i64()
}

/// The resident memory of process `pid` in KiB.
fn rss_kib(pid: u32) -> Res<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS in /proc/PID/status")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("a VmRSS line without a value")?
        .parse()?)
}

/// Polls `check` every 20 ms for up to `timeout`.
fn eventually(timeout: Duration, mut check: impl FnMut() -> Res<bool>) -> Res<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        if check()? {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// The protocol on the raw socket.

#[test]
fn handshake_and_a_call_on_a_private_socket() -> TestResult {
    let f = Fixture::new()?;
    let daemon = Daemon::start(&f, &[])?;
    let meta = fs::metadata(f.socket())?;
    assert!(meta.file_type().is_socket());
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "the socket's mode"
    );

    let mut raw = Raw::connect(&f.socket())?;
    let shake = raw.result("handshake", json!({"protocol": "1.0", "client": "test"}))?;
    assert_eq!(shake["protocol"], "1.0");
    assert_eq!(shake["pid"], json!(daemon.pid));
    assert!(
        shake["server"]
            .as_str()
            .unwrap_or_default()
            .starts_with("strata "),
        "{shake}"
    );

    // A client of another major version is refused, clearly, and may still talk.
    let refused = raw.call("handshake", json!({"protocol": "2.0", "client": "future"}))?;
    assert_eq!(code(&refused), Some(-32009), "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("protocol 1.0") && message.contains("2.0"),
        "{message}"
    );
    assert_eq!(refused["error"]["data"]["kind"], "protocol_version");

    // A call, and its effect seen by another.
    let created = raw.result("session.new", json!({"id": "s1"}))?;
    assert!(created["tx_id"].as_u64().is_some(), "{created}");
    let mut other = Raw::connect(&f.socket())?;
    assert_eq!(other.result("session.ls", json!({}))?, json!(["s1"]));
    Ok(())
}

#[test]
fn bad_input_gets_an_error_and_the_daemon_serves_others() -> TestResult {
    let f = Fixture::new()?;
    let daemon = Daemon::start_with(&f, &[], &[("STRATA_MAX_MESSAGE_BYTES", "4096")])?;
    let mut bad = Raw::connect(&f.socket())?;
    let mut good = Raw::connect(&f.socket())?;
    good.result("session.new", json!({"id": "s1"}))?;

    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":20,"method":"show","params":{{"reference":"{}"}}}}"#,
        "x".repeat(10_000)
    );
    let cases: Vec<(&str, String, i64)> = vec![
        ("invalid JSON", "{\"jsonrpc\": \"2.0\", \"id\": 1,".into(), -32700),
        ("not UTF-8 JSON", "\u{1}\u{2}".into(), -32700),
        ("an array", "[1, 2, 3]".into(), -32600),
        ("a string", "\"session.ls\"".into(), -32600),
        ("a number", "42".into(), -32600),
        ("no jsonrpc member", r#"{"id": 2, "method": "session.ls"}"#.into(), -32600),
        ("no method", r#"{"jsonrpc": "2.0", "id": 3}"#.into(), -32600),
        (
            "an unknown method",
            r#"{"jsonrpc": "2.0", "id": 4, "method": "no.such"}"#.into(),
            -32601,
        ),
        (
            "missing params",
            r#"{"jsonrpc": "2.0", "id": 5, "method": "show"}"#.into(),
            -32602,
        ),
        (
            "a missing param",
            r#"{"jsonrpc": "2.0", "id": 6, "method": "session.turn", "params": {"id": "s1", "role": "user"}}"#.into(),
            -32602,
        ),
        (
            "a wrongly typed param",
            r#"{"jsonrpc": "2.0", "id": 7, "method": "show", "params": {"reference": 5}}"#.into(),
            -32602,
        ),
        (
            "positional params",
            r#"{"jsonrpc": "2.0", "id": 8, "method": "show", "params": ["a"]}"#.into(),
            -32602,
        ),
        (
            "an unknown param",
            r#"{"jsonrpc": "2.0", "id": 9, "method": "session.turn", "params": {"id": "s1", "role": "user", "content": "x", "bogus": 1}}"#.into(),
            -32602,
        ),
        ("an oversized message", huge, -32600),
    ];
    for (what, line, expected) in &cases {
        bad.send(line)?;
        let answer = bad.recv()?;
        assert_eq!(code(&answer), Some(*expected), "{what}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{what}: an error without a message");
        if *expected == -32600 && what.contains("oversized") {
            assert!(message.contains("4096"), "{what}: {message}");
        }
        // The others are served all along.
        assert_eq!(
            good.result("session.ls", json!({}))?,
            json!(["s1"]),
            "after {what}"
        );
    }
    // The connection that sent all that is served too.
    assert_eq!(bad.result("session.ls", json!({}))?, json!(["s1"]));

    // Half-sent messages, then disconnects: a short one, and one over the limit.
    for partial in [
        br#"{"jsonrpc": "2.0", "id": 1, "method": "session.tu"#.to_vec(),
        vec![b'x'; 100_000],
    ] {
        let mut half = UnixStream::connect(f.socket())?;
        half.write_all(&partial)?;
        drop(half);
    }
    assert_eq!(good.result("session.ls", json!({}))?, json!(["s1"]));
    let settled = eventually(Duration::from_secs(5), || {
        Ok(good.result("status", json!({}))?["clients"] == json!(2))
    })?;
    assert!(settled, "the half-sent clients are still counted");
    assert!(daemon.child.id() > 0);
    Ok(())
}

#[test]
fn a_thousand_idle_connections_cost_little() -> TestResult {
    let f = Fixture::new()?;
    let daemon = Daemon::start(&f, &[])?;
    let mut probe = Raw::connect(&f.socket())?;
    probe.result("session.new", json!({"id": "s1"}))?;
    let before = rss_kib(daemon.pid)?;
    let idle: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(f.socket()))
        .collect::<Result<_, _>>()?;
    let all_in = eventually(Duration::from_secs(20), || {
        Ok(probe.result("status", json!({}))?["clients"] == json!(1001))
    })?;
    assert!(all_in, "the daemon did not accept 1 000 connections");
    let started = Instant::now();
    assert_eq!(probe.result("session.ls", json!({}))?, json!(["s1"]));
    let mut fresh = Raw::connect(&f.socket())?;
    fresh.result("handshake", json!({"protocol": "1.0"}))?;
    let answered = started.elapsed();
    let after = rss_kib(daemon.pid)?;
    println!(
        "1 000 idle connections: RSS {before} KiB -> {after} KiB; a call and a new client \
         answered in {answered:?}"
    );
    assert!(
        answered < Duration::from_secs(2),
        "slow with idle clients: {answered:?}"
    );
    assert!(
        after < before + 64 * 1024,
        "1 000 idle connections took {} KiB",
        after.saturating_sub(before)
    );
    drop(idle);
    let gone = eventually(Duration::from_secs(10), || {
        Ok(probe.result("status", json!({}))?["clients"] == json!(2))
    })?;
    assert!(gone, "closed connections are still counted");
    Ok(())
}

/// Runs `program args…` as uid and gid 65534 (nobody) with no supplementary groups.
fn as_nobody(program: &str, args: &[&str]) -> std::io::Result<Output> {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", program])
        .args(args)
        .output()
}

/// A Python that another user may run: the system's (a pyenv shim under /root is not).
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A client in Python: connects, sends `session.ls`, prints the answer's line, or
/// `connect ERRNO` when the connection is refused.
const PEER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect", e.errno)
    sys.exit(0)
s.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "session.ls"}\n')
print(s.makefile().readline().strip())
"#;

/// Asserts both refusals of another user: at connect time by the filesystem (the store
/// directory is 0700, the socket 0600: EACCES), and, with the filesystem opened up for the
/// test, by the daemon itself (`SO_PEERCRED`: a JSON-RPC error -32004 naming the uid).
#[test]
fn a_peer_of_another_user_is_refused() -> TestResult {
    let name = "a_peer_of_another_user_is_refused";
    if rustix::process::geteuid().as_raw() != 0 {
        println!(
            "skipped {name}: it needs root, to connect as another user (uid 65534) with \
             setpriv; run the tests as root to check it"
        );
        return Ok(());
    }
    let f = Fixture::new()?;
    // Test-only: let others traverse the temporary directory, so the store's own modes are
    // what stands in their way.
    fs::set_permissions(&f.root, fs::Permissions::from_mode(0o711))?;
    let root = f.root.display().to_string();
    let control = match as_nobody(
        python(),
        &["-c", "import os, sys; os.stat(sys.argv[1])", &root],
    ) {
        Ok(out) => out,
        Err(e) => {
            println!("skipped {name}: setpriv {}: {e}", python());
            return Ok(());
        }
    };
    if !control.status.success() {
        println!(
            "skipped {name}: uid 65534 cannot reach {root} ({}); its parents must let others in \
             (set TMPDIR)",
            String::from_utf8_lossy(&control.stderr).trim()
        );
        return Ok(());
    }
    let _daemon = Daemon::start(&f, &[])?;
    let socket = f.socket().display().to_string();

    let out = as_nobody(python(), &["-c", PEER, &socket])?;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "connect 13",
        "another user connected through the store's modes: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    fs::set_permissions(&f.store, fs::Permissions::from_mode(0o711))?;
    fs::set_permissions(f.socket(), fs::Permissions::from_mode(0o666))?;
    let out = as_nobody(python(), &["-c", PEER, &socket])?;
    fs::set_permissions(&f.store, fs::Permissions::from_mode(0o700))?;
    fs::set_permissions(f.socket(), fs::Permissions::from_mode(0o600))?;
    let line = String::from_utf8_lossy(&out.stdout);
    let answer: Value = serde_json::from_str(line.trim())
        .map_err(|e| format!("{e}: {line} {}", String::from_utf8_lossy(&out.stderr)))?;
    assert_eq!(code(&answer), Some(-32004), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("uid 65534"), "{message}");

    // Its own user is still served.
    let mut raw = Raw::connect(&f.socket())?;
    raw.result("session.ls", json!({}))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The lifecycle.

#[test]
fn a_second_daemon_is_refused_naming_the_first() -> TestResult {
    let f = Fixture::new()?;
    let first = Daemon::start(&f, &[])?;
    let second = f.run(&["serve"])?;
    assert!(!second.status.success(), "a second daemon started");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!("pid {}", first.pid)) && stderr.contains("started"),
        "{stderr}"
    );
    // The first serves on.
    Raw::connect(&f.socket())?.result("session.ls", json!({}))?;
    Ok(())
}

#[test]
fn a_stale_socket_is_replaced_by_the_next_command_and_daemon() -> TestResult {
    let f = Fixture::new()?;
    let mut killed = Daemon::start(&f, &[])?;
    killed.kill()?;
    assert!(f.socket().exists(), "SIGKILL left no socket to test with");

    // The next command starts a daemon of its own.
    assert_eq!(f.ok(&["session", "ls"])?, "");
    let status = f.json(&["status", "--json"])?;
    assert_ne!(status["pid"], json!(killed.pid));
    assert!(status["pid"].as_u64().is_some(), "{status}");
    f.ok(&["stop"])?;

    // And so does the next daemon.
    let mut killed = Daemon::start(&f, &[])?;
    killed.kill()?;
    let next = Daemon::start(&f, &[])?;
    assert_ne!(next.pid, killed.pid);
    Raw::connect(&f.socket())?.result("session.ls", json!({}))?;
    Ok(())
}

/// How a daemon is asked to stop.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Command,
    Sigterm,
}

/// Stops a daemon while an `index` is in flight: the index finishes and is answered, the
/// socket goes, the daemon exits 0.
fn stops_after_the_request_in_flight(how: Stop) -> TestResult {
    let f = Fixture::new()?;
    f.write_files("big", 1500)?;
    let mut daemon = Daemon::start(&f, &[])?;
    let mut indexer = Raw::connect(&f.socket())?;
    let tree = f.tree.display().to_string();
    indexer.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "index", "params": {"paths": [tree], "cwd": tree}})
            .to_string(),
    )?;
    let mut probe = Raw::connect(&f.socket())?;
    let in_flight = eventually(Duration::from_secs(10), || {
        Ok(probe.result("status", json!({}))?["in_flight"].as_u64() >= Some(1))
    })?;
    assert!(in_flight, "the index was never in flight");
    drop(probe);
    let stopper = match how {
        Stop::Command => Some(f.command(&["stop"]).stdout(Stdio::piped()).spawn()?),
        Stop::Sigterm => {
            daemon.signal(rustix::process::Signal::TERM)?;
            None
        }
    };
    let answer = indexer.recv()?;
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(
        answer["result"]["created"].as_u64() >= Some(1500),
        "{how:?}: the index in flight was not answered: {answer}"
    );
    let status = daemon.wait(Duration::from_secs(20))?;
    assert!(status.success(), "{how:?}: the daemon exited {status}");
    assert!(!f.socket().exists(), "{how:?}: the socket stayed");
    if let Some(stopper) = stopper {
        let out = stopper.wait_with_output()?;
        assert!(out.status.success());
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains(&format!(
                "stopped the daemon of {} (pid {})",
                f.store.display(),
                daemon.pid
            )),
            "{said}"
        );
    }
    // What it answered is in the store.
    assert!(
        f.ok(&["--no-daemon", "ls"])?
            .contains("big/d000/f00000.txt")
    );
    Ok(())
}

#[test]
fn stop_is_answered_before_the_daemon_exits() -> TestResult {
    let f = Fixture::new()?;
    for _ in 0..50 {
        let mut daemon = Daemon::start(&f, &[])?;
        let mut raw = Raw::connect(&f.socket())?;
        let answer = raw.call("stop", json!({}))?;
        assert_eq!(answer["result"], json!({"stopping": true}), "{answer}");
        assert!(daemon.wait(Duration::from_secs(10))?.success());
        assert!(!f.socket().exists());
    }
    Ok(())
}

#[test]
fn strata_stop_finishes_the_request_in_flight() -> TestResult {
    stops_after_the_request_in_flight(Stop::Command)
}

#[test]
fn sigterm_finishes_the_request_in_flight() -> TestResult {
    stops_after_the_request_in_flight(Stop::Sigterm)
}

#[test]
fn a_subscriber_hears_commits_and_neither_outlives_its_client_nor_holds_up_a_stop() -> TestResult {
    let f = Fixture::new()?;
    let mut daemon = Daemon::start(&f, &[])?;
    let mut probe = Raw::connect(&f.socket())?;
    for round in 0..2 {
        let mut listener = Raw::connect(&f.socket())?;
        assert_eq!(
            listener.result("subscribe", json!({}))?,
            json!({"subscribed": true})
        );
        let sid = format!("s{round}");
        let created = probe.result("session.new", json!({"id": sid}))?;
        let heard = listener.recv()?;
        assert_eq!(heard["method"], "commit", "{heard}");
        assert_eq!(heard["params"]["tx_id"], created["tx_id"], "{heard}");
        assert_eq!(heard["params"]["sessions"], json!([sid]), "{heard}");
        if round == 0 {
            // Gone: the daemon forgets it (no commit needed to notice).
            drop(listener);
            let forgotten = eventually(Duration::from_secs(10), || {
                Ok(probe.result("status", json!({}))?["clients"] == json!(1))
            })?;
            assert!(forgotten, "a closed subscriber is still counted");
        } else {
            // Still listening when the daemon is stopped: it exits all the same.
            let stop = f.run(&["stop"])?;
            assert!(
                stop.status.success(),
                "{}",
                String::from_utf8_lossy(&stop.stderr)
            );
            let status = daemon.wait(Duration::from_secs(10))?;
            assert!(status.success(), "{status}");
            assert!(
                listener.recv().is_err(),
                "the connection outlived the daemon"
            );
        }
    }
    Ok(())
}

#[test]
fn an_idle_daemon_exits() -> TestResult {
    let f = Fixture::new()?;
    let mut daemon = Daemon::start(&f, &["--idle-timeout", "1"])?;
    let status = daemon.wait(Duration::from_secs(10))?;
    assert!(status.success(), "{status}");
    assert!(!f.socket().exists());

    // An auto-started one, with STRATA_IDLE_TIMEOUT.
    let out = f
        .command(&["session", "ls"])
        .env("STRATA_IDLE_TIMEOUT", "1")
        .output()?;
    assert!(out.status.success());
    assert!(f.socket().exists(), "no daemon was started");
    let gone = eventually(Duration::from_secs(10), || Ok(!f.socket().exists()))?;
    assert!(gone, "the auto-started daemon did not exit when idle");
    Ok(())
}

#[test]
fn status_shows_the_daemon_or_says_none_runs() -> TestResult {
    let f = Fixture::new()?;
    let none = f.ok(&["status"])?;
    assert_eq!(none, format!("no daemon serves {}\n", f.store.display()));
    assert_eq!(f.ok(&["status", "--json"])?.trim(), "null");

    let daemon = Daemon::start(&f, &[])?;
    let _client = Raw::connect(&f.socket())?;
    let table = f.ok(&["status"])?;
    for row in [
        "pid",
        "clients",
        "requests",
        "last tx",
        "queued writes",
        "uptime",
    ] {
        assert!(table.contains(row), "no {row}: {table}");
    }
    assert!(table.contains(&daemon.pid.to_string()), "{table}");
    let status = f.json(&["status", "--json"])?;
    assert_eq!(status["pid"], json!(daemon.pid));
    // The idle client and the status command itself.
    assert_eq!(status["clients"], json!(2), "{status}");
    assert!(status["requests"].as_u64() >= Some(1), "{status}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Concurrency.

/// One acknowledged commit.
#[derive(Clone, Debug)]
struct Ack {
    session: String,
    tx: u64,
    /// What the session's render must hold: a tool call id or a turn's text.
    marker: String,
}

#[test]
fn twenty_processes_on_four_sessions_through_one_daemon() -> TestResult {
    let f = Fixture::new()?;
    let sessions: Vec<String> = (0..4).map(|s| format!("s{s}")).collect();
    for sid in &sessions {
        f.ok(&["session", "new", "--id", sid])?;
        f.ok(&[
            "session",
            "turn",
            sid,
            "--role",
            "user",
            "--content",
            "begin",
        ])?;
    }
    let output = f.root.join("output.txt");
    fs::write(&output, "tool output\n")?;
    // No daemon runs: the twenty race to start one.
    f.ok(&["stop"])?;

    let workers: Vec<_> = (0..20)
        .map(|p| {
            let store = f.store.clone();
            let tree = f.tree.clone();
            let output = output.clone();
            let sid = sessions[p % 4].clone();
            std::thread::spawn(move || -> Result<Vec<Ack>, String> {
                let run = |args: &[&str]| -> Result<Value, String> {
                    let out = strata_at(&store, &tree, args)
                        .arg("--json")
                        .output()
                        .map_err(|e| e.to_string())?;
                    if !out.status.success() {
                        return Err(format!(
                            "strata {args:?}: {}",
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
                };
                let mut acks = Vec::new();
                for k in 0..3 {
                    let call = format!("toolcall:p{p}k{k}");
                    let args = json!({"cmd": format!("p{p} k{k}")}).to_string();
                    let recorded = run(&[
                        "session", "toolcall", &sid, "--tool", "bash", "--args", &args, "--id",
                        &call, "--output",
                    ]
                    .into_iter()
                    .chain([output.to_str().unwrap_or_default()])
                    .collect::<Vec<_>>())?;
                    let tx = recorded["tx_id"]
                        .as_u64()
                        .ok_or("a toolcall without a tx")?;
                    acks.push(Ack {
                        session: sid.clone(),
                        tx,
                        marker: call,
                    });
                    let text = format!("p{p} k{k} done");
                    let turn = run(&[
                        "session",
                        "turn",
                        &sid,
                        "--role",
                        "assistant",
                        "--content",
                        &text,
                    ])?;
                    let tx = turn["tx_id"].as_u64().ok_or("a turn without a tx")?;
                    acks.push(Ack {
                        session: sid.clone(),
                        tx,
                        marker: text,
                    });
                }
                Ok(acks)
            })
        })
        .collect();
    let mut acks = Vec::new();
    for worker in workers {
        let mine = worker.join().map_err(|_| "a worker panicked")??;
        // Each process saw its own commits in order.
        assert!(mine.windows(2).all(|w| w[0].tx < w[1].tx), "{mine:?}");
        acks.extend(mine);
    }
    assert_eq!(acks.len(), 120);

    // One consistent order: gapless tx ids, each acknowledged commit its own record.
    let log = f.json(&["log", "--json"])?;
    let records = log["records"].as_array().ok_or("no records")?;
    let ids: Vec<u64> = records.iter().filter_map(|r| r["tx_id"].as_u64()).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "tx ids with gaps"
    );
    let mut acked: Vec<u64> = acks.iter().map(|a| a.tx).collect();
    acked.sort_unstable();
    acked.dedup();
    assert_eq!(acked.len(), 120, "two commits acknowledged with one tx id");
    assert!(acked.iter().all(|tx| ids.contains(tx)));

    let fsck = f.run(&["fsck"])?;
    assert!(
        fsck.status.success() && String::from_utf8_lossy(&fsck.stdout).starts_with("ok:"),
        "{}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    for sid in &sessions {
        let render = f.json(&["session", "render", sid, "--json"])?;
        let text = render["text"].as_str().unwrap_or_default();
        for ack in acks.iter().filter(|a| &a.session == sid) {
            assert!(
                text.contains(&ack.marker),
                "{sid} lost {}: {text}",
                ack.marker
            );
        }
    }
    // All through one daemon, which answered them all.
    let status = f.json(&["status", "--json"])?;
    assert!(status["requests"].as_u64() >= Some(120 + 4), "{status}");
    Ok(())
}

#[test]
fn readers_and_a_session_answer_while_an_index_runs() -> TestResult {
    let f = Fixture::new()?;
    f.write("small.txt", "small\n")?;
    f.ok(&["index", "small.txt"])?;
    f.ok(&["session", "new", "--id", "s1"])?;
    f.write_files("big", 8_000)?;
    let mut index = f
        .command(&["index", "big", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut probe = Raw::connect(&f.socket())?;
    let in_flight = eventually(Duration::from_secs(20), || {
        Ok(probe.result("status", json!({}))?["in_flight"].as_u64() >= Some(1))
    })?;
    assert!(in_flight, "the index was never in flight");
    let indexing = Instant::now();
    let mut timings = Vec::new();
    for args in [
        &["show", "small.txt"][..],
        &["log", "--limit", "1"],
        &["ls", "small.txt"],
        &[
            "session",
            "turn",
            "s1",
            "--role",
            "user",
            "--content",
            "during the index",
        ],
    ] {
        let started = Instant::now();
        f.ok(args)?;
        timings.push((args[0], started.elapsed()));
    }
    let still = index.try_wait()?.is_none();
    let reads_took = indexing.elapsed();
    let mut err = String::new();
    if let Some(stderr) = index.stderr.as_mut() {
        stderr.read_to_string(&mut err)?;
    }
    let done = index.wait()?;
    let index_took = indexing.elapsed();
    println!("beside an index ({index_took:?} from the first read): {timings:?}");
    assert!(done.success(), "the index failed: {err}");
    assert!(
        still,
        "the index ended before the reads did ({reads_took:?}): make the tree bigger"
    );
    for (what, took) in timings {
        assert!(
            took < Duration::from_secs(5),
            "{what} took {took:?} beside the index"
        );
    }
    let render = f.json(&["session", "render", "s1", "--json"])?;
    assert!(
        render["text"]
            .as_str()
            .unwrap_or_default()
            .contains("during the index")
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Crashes.

/// A small deterministic generator (xorshift64*), seeded from the clock unless
/// `STRATA_CRASH_SEED` says otherwise.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
    }
}

/// What one writer thread of a round brought back.
struct Round {
    acks: Vec<Ack>,
    error: Option<String>,
}

/// A client writing to its session until the connection goes: a tool call, then a turn, each
/// remembered once acknowledged.
fn writer(store: &Path, sid: &str, round: u64, client: usize, counter: &AtomicU64) -> Round {
    let mut acks = Vec::new();
    let mut connection = match Client::connect(store) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Round {
                acks,
                error: Some("no daemon answered".into()),
            };
        }
        Err(e) => {
            return Round {
                acks,
                error: Some(e.to_string()),
            };
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for k in 0.. {
        if Instant::now() > deadline {
            break;
        }
        let call = format!("toolcall:r{round}c{client}k{k}");
        let request = strata::engine::SessionToolcallRequest {
            id: sid.into(),
            tool: "bash".into(),
            args: serde_json::Map::new(),
            args_display: None,
            call_id: Some(call.clone()),
            status: strata::object::ToolStatus::Ok,
            file_refs: Vec::new(),
            output: format!("output {round} {client} {k}"),
        };
        match connection.call(request) {
            Ok(recorded) => match recorded.tx_id {
                Some(tx) => {
                    counter.fetch_add(1, Ordering::SeqCst);
                    acks.push(Ack {
                        session: sid.into(),
                        tx,
                        marker: call,
                    });
                }
                None => {
                    return Round {
                        acks,
                        error: Some(format!("tool call {call} committed nothing")),
                    };
                }
            },
            Err(e) => {
                return Round {
                    acks,
                    error: Some(format!("{e:#}")),
                };
            }
        }
        let text = format!("r{round} c{client} k{k}");
        let turn = strata::engine::SessionTurnRequest {
            id: sid.into(),
            role: "assistant".into(),
            content: text.clone(),
            toolcall_refs: Vec::new(),
        };
        match connection.call(turn) {
            Ok(appended) => {
                if let Some(tx) = appended.tx_id {
                    counter.fetch_add(1, Ordering::SeqCst);
                    acks.push(Ack {
                        session: sid.into(),
                        tx,
                        marker: text,
                    });
                }
            }
            Err(e) => {
                return Round {
                    acks,
                    error: Some(format!("{e:#}")),
                };
            }
        }
    }
    Round { acks, error: None }
}

/// Checks, in this process, that every acknowledged commit is in the store: its tx in the log
/// with the tool call's entity, and (with `render`) each session's render holding its tool
/// calls and turns; with `fsck`, that fsck (which verifies the chain) finds nothing.
fn check_acknowledged(
    store: &Path,
    acks: &[Ack],
    sessions: &[String],
    render: bool,
    fsck: bool,
) -> TestResult {
    let engine = Engine::open(store, Access::ReadWrite)?;
    if fsck {
        let fsck = engine.call(FsckRequest::default())?;
        assert!(fsck.findings.is_empty(), "fsck: {:?}", fsck.findings);
    }
    let first = acks.iter().map(|a| a.tx).min().unwrap_or(1);
    let log = engine.call(LogRequest {
        since: Some(first.saturating_sub(1)),
        limit: None,
    })?;
    let records: std::collections::HashMap<u64, String> = log
        .records
        .iter()
        .map(|r| (r.tx_id, serde_json::to_string(&r.ops).unwrap_or_default()))
        .collect();
    for ack in acks {
        let ops = records
            .get(&ack.tx)
            .ok_or_else(|| format!("acknowledged tx {} is not in the log ({ack:?})", ack.tx))?;
        if ack.marker.starts_with("toolcall:") {
            assert!(
                ops.contains(&ack.marker),
                "tx {} lacks {}",
                ack.tx,
                ack.marker
            );
        }
    }
    if render {
        for sid in sessions {
            let text = engine
                .call(strata::engine::SessionRenderRequest {
                    id: sid.clone(),
                    budget: None,
                    as_of_tx: None,
                })?
                .text;
            for ack in acks.iter().filter(|a| &a.session == sid) {
                assert!(text.contains(&ack.marker), "{sid} lost {}", ack.marker);
            }
        }
    }
    Ok(())
}

#[test]
fn sigkill_under_load_loses_no_acknowledged_commit() -> TestResult {
    let rounds: u64 = std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("crash rounds: {rounds}, STRATA_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let f = Fixture::new()?;
    let sessions: Vec<String> = (0..16).map(|c| format!("c{c}")).collect();
    {
        let _daemon = Daemon::start(&f, &[])?;
        let mut client = Client::connect(&f.store)?.ok_or("no daemon")?;
        for sid in &sessions {
            client.call(strata::engine::SessionNewRequest {
                id: Some(sid.clone()),
                ..Default::default()
            })?;
            client.call(strata::engine::SessionTurnRequest {
                id: sid.clone(),
                role: "user".into(),
                content: "begin".into(),
                toolcall_refs: Vec::new(),
            })?;
        }
    }
    let mut all = Vec::new();
    let mut lost_connections = 0;
    for round in 0..rounds {
        // Each round's daemon replaces the socket the last one's SIGKILL left.
        let mut daemon = Daemon::start(&f, &[])?;
        let (done, results) = mpsc::channel();
        let counter = Arc::new(AtomicU64::new(0));
        for (c, sid) in sessions.iter().enumerate() {
            let store = f.store.clone();
            let sid = sid.clone();
            let done = done.clone();
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                let _ = done.send(writer(&store, &sid, round, c, &counter));
            });
        }
        drop(done);
        // Under load (the first acknowledgements are in, or 5 s passed), then at a random
        // moment within 250 ms.
        eventually(Duration::from_secs(5), || {
            Ok(counter.load(Ordering::SeqCst) >= 16)
        })?;
        std::thread::sleep(Duration::from_millis(rng.next(250)));
        daemon.kill()?;
        let mut acks = Vec::new();
        for _ in &sessions {
            let result = results
                .recv_timeout(Duration::from_secs(30))
                .map_err(|_| format!("round {round}: a client hung after the daemon died"))?;
            match &result.error {
                Some(e) if e.contains("connection lost") => lost_connections += 1,
                Some(e) => {
                    return Err(format!("round {round}: a client failed otherwise: {e}").into());
                }
                None => return Err(format!("round {round}: a client outlived its daemon").into()),
            }
            acks.extend(result.acks);
        }
        // fsck reads the whole store: every round by default, every 20th of a long run.
        let fsck = round % rounds.div_ceil(20).max(1) == 0;
        let checking = Instant::now();
        check_acknowledged(&f.store, &acks, &sessions, false, fsck)?;
        println!(
            "round {round}: {} acknowledged, checked in {:?}{}",
            acks.len(),
            checking.elapsed(),
            if fsck { " with fsck" } else { "" }
        );
        all.extend(acks);
    }
    assert_eq!(lost_connections, rounds * 16);
    println!("{} acknowledged commits over {rounds} rounds", all.len());
    check_acknowledged(&f.store, &all, &sessions, true, true)?;

    // The next command works: it replaces the last round's stale socket.
    assert!(f.socket().exists());
    let head = f.json(&["log", "--limit", "1", "--json"])?;
    let last = all.iter().map(|a| a.tx).max().unwrap_or(0);
    assert!(head["head"]["tx_id"].as_u64() >= Some(last), "{head}");
    f.ok(&["stop"])?;
    Ok(())
}

/// Writers at once commit under load, without redb's quick-repair record (one fsync instead of
/// two): a SIGKILL in the middle of that load makes the next open repair the whole file (the
/// next daemon says so in its log), while a SIGKILL after the load stopped does not, since the
/// daemon checkpoints the store once its writers have been quiet for 100 ms. The data is whole
/// either way.
#[test]
fn a_crash_after_the_load_stopped_reopens_without_a_full_repair() -> TestResult {
    let f = Fixture::new()?;
    let sessions: Vec<String> = (0..8).map(|c| format!("w{c}")).collect();
    let mut daemon = Daemon::start(&f, &[])?;
    for sid in &sessions {
        f.ok(&["session", "new", "--id", sid])?;
    }
    let log = f.root.join("serve.log");
    let repairs = || -> Res<usize> {
        Ok(fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("not closed cleanly")
            .count())
    };
    // Writers on their own sessions until `stop` (or their daemon dies); the acks they counted.
    let load = |stop: Arc<std::sync::atomic::AtomicBool>, acks: Arc<AtomicU64>| {
        sessions
            .iter()
            .map(|sid| {
                let (socket, sid) = (f.socket(), sid.clone());
                let (stop, acks) = (Arc::clone(&stop), Arc::clone(&acks));
                std::thread::spawn(move || {
                    let Ok(mut raw) = Raw::connect(&socket) else {
                        return;
                    };
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let turn = json!({"id": sid, "role": "user", "content": format!("t{n}")});
                        if raw.result("session.turn", turn).is_err() {
                            return;
                        }
                        acks.fetch_add(1, Ordering::SeqCst);
                        n += 1;
                    }
                })
            })
            .collect::<Vec<_>>()
    };
    // A SIGKILL after the load stopped: no full repair.
    let (stop, acks) = (Arc::default(), Arc::new(AtomicU64::new(0)));
    let writers = load(Arc::clone(&stop), Arc::clone(&acks));
    eventually(Duration::from_secs(20), || {
        Ok(acks.load(Ordering::SeqCst) >= 200)
    })?;
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.join().map_err(|_| "a writer panicked")?;
    }
    std::thread::sleep(Duration::from_millis(600));
    daemon.kill()?;
    let before = repairs()?;
    daemon = Daemon::start(&f, &[])?;
    assert_eq!(
        repairs()?,
        before,
        "a quiet store reopened with a full repair"
    );
    // A SIGKILL under load: the next open repairs the file (tried a few times: the kill must
    // land while commits are shared, which continuous writers from 8 sessions make the rule).
    let mut repaired = false;
    for _ in 0..3 {
        let (stop, acks) = (Arc::default(), Arc::new(AtomicU64::new(0)));
        let writers = load(Arc::clone(&stop), Arc::clone(&acks));
        eventually(Duration::from_secs(20), || {
            Ok(acks.load(Ordering::SeqCst) >= 200)
        })?;
        daemon.kill()?;
        stop.store(true, Ordering::SeqCst);
        for writer in writers {
            writer.join().map_err(|_| "a writer panicked")?;
        }
        let before = repairs()?;
        daemon = Daemon::start(&f, &[])?;
        if repairs()? > before {
            repaired = true;
            break;
        }
    }
    assert!(
        repaired,
        "a SIGKILL under load never needed a full repair: the mode is not used"
    );
    let fsck = f.json(&["fsck", "--json"])?;
    assert_eq!(fsck, json!([]), "{fsck}");
    drop(daemon);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Backup.

/// `strata backup DIR` through the daemon while a client keeps committing session turns: the
/// writes go on during the copy (some are acknowledged between its start and its end), the copy
/// verifies, holds a prefix of the live log (its head's chain value is the live store's at that
/// transaction) and opens as a store of its own (restorable); a second backup into it is refused.
#[test]
fn a_backup_through_the_daemon_is_consistent_while_writes_go_on() -> TestResult {
    let f = Fixture::new()?;
    f.write_files("big", 3_000)?;
    let _daemon = Daemon::start(&f, &[])?;
    f.ok(&["index", "big", "--quiet"])?;
    f.ok(&["session", "new", "--id", "s1"])?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (acks_to, acks) = mpsc::channel::<Instant>();
    let writer = turn_writer(f.socket(), Arc::clone(&stop), Some(acks_to));
    // Some turns first, then the backup while they go on.
    let mut early = 0;
    while early < 5 {
        acks.recv_timeout(Duration::from_secs(20))?;
        early += 1;
    }
    let copy = f.root.join("copy");
    let started = Instant::now();
    let report = f.json(&["backup", copy.to_str().ok_or("path")?, "--json"])?;
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    let turns = writer.join().map_err(|_| "the writer panicked")??;
    let during = acks
        .try_iter()
        .filter(|at| *at > started && *at < ended)
        .count();
    assert!(
        during > 0,
        "no write was acknowledged during the backup ({:?}, {turns} turns): writers waited",
        ended - started
    );
    assert_eq!(report["findings"], json!([]), "{report}");
    let tx = report["head"]["tx_id"].as_u64().ok_or("no head")?;
    let chain = report["head"]["chain"].clone();
    // The copy verifies on its own, and is a prefix of the live log.
    let fsck = Command::new(STRATA)
        .args(["--no-daemon", "--store"])
        .arg(&copy)
        .arg("fsck")
        .output()?;
    assert!(fsck.status.success(), "{fsck:?}");
    let live = f.json(&["log", "--json"])?;
    let live_head = live["head"]["tx_id"].as_u64().ok_or("no live head")?;
    assert!(live_head > tx, "the writes after the backup are not in it");
    let record = live["records"]
        .as_array()
        .and_then(|records| records.iter().find(|r| r["tx_id"] == json!(tx)))
        .ok_or("the backup's head is not in the live log")?;
    assert_eq!(
        record["chain"], chain,
        "the copy is not a prefix of the live log"
    );
    // Restorable: the copy answers as a store.
    let render = Command::new(STRATA)
        .args(["--no-daemon", "--store"])
        .arg(&copy)
        .args(["session", "render", "s1"])
        .output()?;
    assert!(render.status.success(), "{render:?}");
    assert!(String::from_utf8_lossy(&render.stdout).contains("turn 0"));
    let again = f.run(&["backup", copy.to_str().ok_or("path")?])?;
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    Ok(())
}

/// fsck through the daemon while a client commits: fsck reads one snapshot (and holds writers
/// only while it reads the file's page checksums), so it finds nothing and every write is
/// acknowledged. Then the store is damaged (a byte of a content flipped while no daemon ran): the
/// daemon opens it, its fsck names the damage and marks the store, writes are refused while reads
/// still answer and the daemon keeps serving, and `fsck --repair` through the daemon re-reads
/// the content from its file, after which writes work again.
#[test]
fn fsck_through_the_daemon_beside_writers_and_on_a_damaged_store() -> TestResult {
    let f = Fixture::new()?;
    f.write_files("big", 2_000)?;
    let mut bytes: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    bytes[0] = 0xff;
    fs::write(f.tree.join("data.bin"), &bytes)?;
    f.write("notes.txt", "healthy notes\n")?;
    let daemon = Daemon::start(&f, &[])?;
    f.ok(&["index", "."])?;
    f.ok(&["session", "new", "--id", "s1"])?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = turn_writer(f.socket(), Arc::clone(&stop), None);
    for _ in 0..3 {
        let out = f.run(&["fsck"])?;
        assert!(out.status.success(), "fsck beside a writer: {out:?}");
    }
    stop.store(true, Ordering::SeqCst);
    let turns = writer.join().map_err(|_| "the writer panicked")??;
    assert!(turns > 0, "the writer never committed");
    f.ok(&["stop"])?;
    drop(daemon);

    let path = f.store.join("store.redb");
    let mut raw = fs::read(&path)?;
    let at = raw
        .windows(32)
        .position(|w| w == &bytes[100..132])
        .ok_or("the content is not in the store file")?;
    raw[at + 16] ^= 0x40;
    fs::write(&path, raw)?;
    let daemon = Daemon::start(&f, &[])?;
    let out = f.run(&["fsck"])?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("data.bin"),
        "{out:?}"
    );
    let refused = f.run(&["session", "turn", "s1", "--role", "user", "--content", "x"])?;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("strata fsck --repair"),
        "{refused:?}"
    );
    assert_eq!(f.ok(&["cat", "notes.txt"])?, "healthy notes\n");
    let status = f.json(&["status", "--json"])?;
    assert_eq!(
        status["pid"],
        json!(daemon.pid),
        "the same daemon serves: {status}"
    );
    let repaired = f.run(&["fsck", "--repair"])?;
    assert!(repaired.status.success(), "{repaired:?}");
    f.ok(&[
        "session",
        "turn",
        "s1",
        "--role",
        "user",
        "--content",
        "after the repair",
    ])?;
    f.ok(&["fsck"])?;
    Ok(())
}

/// A daemon whose write finds no room (its file size limit, set on it with `prlimit` once it
/// answers: SIGXFSZ is ignored, so the write fails with EFBIG) answers the index with the
/// full-disk error and leaves the store unmarked; once the limit is lifted, the next index
/// through the same daemon indexes everything. Before, redb's handle stayed latched: every
/// later write was "the store file is damaged" until the daemon was restarted, and the store
/// was marked damaged.
#[test]
fn a_daemon_whose_write_finds_no_room_says_so_and_writes_once_there_is_room() -> TestResult {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    let f = Fixture::new()?;
    f.write("first.txt", "first\n")?;
    f.ok(&["--no-daemon", "index", ".", "--quiet"])?;
    // 8 MiB that do not compress, in files of 1 MiB.
    fs::create_dir_all(f.tree.join("big"))?;
    for i in 0..8 {
        fs::write(
            f.tree.join(format!("big/{i:02}.bin")),
            incompressible(1 << 20, 0x9e37 + i),
        )?;
    }
    let log = f.root.join("serve.log");
    let child = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; exec \"$@\"")
        .arg("sh")
        .arg(STRATA)
        .arg("--store")
        .arg(&f.store)
        .arg("serve")
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .env_remove("STRATA_NO_DAEMON")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log)?)
        .spawn()?;
    let daemon = Daemon {
        pid: child.id(),
        child,
        log,
    };
    let answers = eventually(Duration::from_secs(30), || {
        Ok(Raw::connect(&f.socket()).is_ok_and(|mut raw| {
            raw.call("handshake", json!({"protocol": "1.0"}))
                .is_ok_and(|answer| answer["result"]["pid"] == json!(daemon.pid))
        }))
    })?;
    assert!(answers, "strata serve did not answer");
    let pid = Pid::from_raw(i32::try_from(daemon.pid)?).ok_or("a daemon without a pid")?;
    let size = fs::metadata(f.store.join("store.redb"))?.len();
    let limit = |current: Option<u64>| {
        prlimit(
            Some(pid),
            Resource::Fsize,
            Rlimit {
                current,
                maximum: None,
            },
        )
    };
    limit(Some(size + (1 << 20)))?;
    let before = f.ok(&["ls"])?;
    let out = f.run(&["index", ".", "--quiet", "--json"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the index did not fail: {stderr}");
    assert!(
        stderr.contains("the disk is full") && !stderr.contains("damaged"),
        "{stderr}"
    );
    assert!(!f.store.join("store.damaged").exists(), "marked damaged");
    assert_eq!(f.ok(&["ls"])?, before);
    limit(None)?;
    let summary = f.json(&["index", ".", "--quiet", "--json"])?;
    assert_eq!(summary["files"], json!(9), "{summary}");
    assert_eq!(summary["created"], json!(8), "{summary}");
    f.ok(&["fsck"])?;
    drop(daemon);
    Ok(())
}
