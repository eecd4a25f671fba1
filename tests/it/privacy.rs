//! The store keeps its owner's secrets (issue 11): the directory 0700 and its files 0600 under
//! any umask, a lock file without arguments, deny rules in every case, and another user kept
//! out (as root, through `setpriv`).

#![allow(
    clippy::print_stdout,
    reason = "the holder child reports readiness on stdout; skipped tests say why"
)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use strata::Error;
use strata::Store;

use crate::support::strata_at;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// An argument given to the holder child that must never reach its lock file.
const SECRET_ARG: &str = "--skip=hunter2-secret-token";

/// A temporary tree to index and a store beside it, in a directory others may enter (0755), so
/// that only the store's own modes keep them out.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    tree: PathBuf,
    store: PathBuf,
}

impl Fixture {
    fn new() -> Result<Self, Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let root = fs::canonicalize(tmp.path())?;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755))?;
        let tree = root.join("tree");
        fs::create_dir(&tree)?;
        fs::set_permissions(&tree, fs::Permissions::from_mode(0o755))?;
        for (name, text) in [("a.txt", "a\n"), ("notes.md", "the plan\n")] {
            let path = tree.join(name);
            fs::write(&path, text)?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644))?;
        }
        Ok(Fixture {
            store: root.join("store"),
            _tmp: tmp,
            root,
            tree,
        })
    }

    /// Runs strata through the store's daemon, as users run it: the daemon keeps the store
    /// open across commands (a command that opens the store itself compacts it on close).
    fn through_daemon(&self, args: &[&str]) -> Result<Output, Box<dyn std::error::Error>> {
        let out = strata_at(&self.store, &self.tree, args).output()?;
        if !out.status.success() {
            return Err(
                format!("strata {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into(),
            );
        }
        Ok(out)
    }

    /// Runs `strata --store STORE args…` in the tree under `umask 000`.
    fn strata(&self, args: &[&str]) -> Result<Output, Box<dyn std::error::Error>> {
        let output = Command::new("sh")
            .arg("-c")
            .arg(r#"umask 000; exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&self.store)
            .args(args)
            .current_dir(&self.tree)
            .env_remove("STRATA_STORE")
            // Each command opens the store itself, so that opening is what these tests see
            // (the daemon's socket and log are checked by the daemon's tests).
            .env("STRATA_NO_DAEMON", "1")
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "strata {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(output)
    }

    /// Starts a child process that holds the store (a `Store` opened under `umask 000`), with
    /// [`SECRET_ARG`] on its command line, and waits until it holds it.
    fn hold(&self) -> Result<Holder, Box<dyn std::error::Error>> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"umask 000; exec "$0" "$@""#)
            .arg(std::env::current_exe()?)
            .args([
                "privacy::holder_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
                SECRET_ARG,
            ])
            .env("STRATA_PRIVACY_HOLD", &self.store)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("the holder has no stdout")?;
        let holder = Holder(child);
        // libtest prints "test privacy::holder_child ... " before the child's own output.
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.ends_with("ready"));
        if !ready {
            return Err("the holder child exited before holding the store".into());
        }
        Ok(holder)
    }
}

/// A child process holding a store; killed when dropped (which leaves a stale lock file).
struct Holder(Child);

impl Holder {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mode(path: &Path) -> Result<u32, Box<dyn std::error::Error>> {
    Ok(fs::metadata(path)?.mode() & 0o7777)
}

/// Asserts the store directory is 0700 and every entry in it a 0600 file; returns their names.
fn assert_private(store: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let dir_mode = mode(store)?;
    assert_eq!(dir_mode, 0o700, "{}: mode {dir_mode:o}", store.display());
    let mut names = Vec::new();
    for entry in fs::read_dir(store)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_mode = mode(&entry.path())?;
        assert_eq!(file_mode, 0o600, "{name}: mode {file_mode:o}");
        // The daemon's files (its socket, its log, the lock it holds) come and go with it:
        // private like the rest, not listed.
        if name == "strata.sock" {
            use std::os::unix::fs::FileTypeExt;
            assert!(entry.file_type()?.is_socket(), "{name} is a socket");
            continue;
        }
        assert!(entry.file_type()?.is_file(), "{name} is a plain file");
        if name != "daemon.log" {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[test]
fn the_store_is_private_under_a_permissive_umask() -> TestResult {
    let f = Fixture::new()?;
    // The control: under this umask a file is made world-writable.
    let control = f.root.join("control");
    Command::new("sh")
        .arg("-c")
        .arg(r#"umask 000; : > "$0""#)
        .arg(&control)
        .status()?;
    assert_eq!(mode(&control)?, 0o666, "umask 000 reaches the child");

    f.strata(&["init", "--mount", "/work=/home/me/project"])?;
    assert_eq!(assert_private(&f.store)?, ["settings.toml", "store.redb"]);
    f.strata(&["index", "."])?;
    assert_eq!(assert_private(&f.store)?, ["settings.toml", "store.redb"]);
    f.strata(&["session", "new"])?;
    f.strata(&["mount", "add", "/data=/srv/data"])?;
    assert_eq!(assert_private(&f.store)?, ["settings.toml", "store.redb"]);

    // A store created by `index` (no init) and a missing parent: the store is private, the
    // parent made as the umask says.
    let nested = f.root.join("new/parent/store");
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 000; exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&nested)
        .args(["index", "."])
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .output()?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(assert_private(&nested)?, ["store.redb"]);
    assert_eq!(mode(&f.root.join("new/parent"))?, 0o777);
    Ok(())
}

#[test]
fn a_store_made_loose_by_an_older_strata_is_tightened_when_opened() -> TestResult {
    let f = Fixture::new()?;
    f.strata(&["init"])?;
    f.strata(&["index", "."])?;
    fs::set_permissions(&f.store, fs::Permissions::from_mode(0o755))?;
    for name in ["store.redb", "settings.toml"] {
        fs::set_permissions(f.store.join(name), fs::Permissions::from_mode(0o644))?;
    }
    // An older strata's stale lock file, with a secret on its command line.
    let stale =
        "pid=1\ncommand=strata session turn --content hunter2\nstarted=2025-01-01T00:00:00Z\n";
    fs::write(f.store.join("store.lock"), stale)?;
    fs::set_permissions(
        f.store.join("store.lock"),
        fs::Permissions::from_mode(0o644),
    )?;
    // A read-only command is enough, and it says nothing about it.
    let out = f.strata(&["ls"])?;
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_private(&f.store)?;
    Ok(())
}

#[test]
fn a_held_store_locks_without_arguments() -> TestResult {
    let f = Fixture::new()?;
    f.strata(&["init"])?;
    let holder = f.hold()?;
    let lock_path = f.store.join("store.lock");
    let lock_mode = mode(&lock_path)?;
    assert_eq!(
        lock_mode, 0o600,
        "the lock file under umask 000: {lock_mode:o}"
    );
    assert_private(&f.store)?;

    let lock = fs::read_to_string(&lock_path)?;
    let keys: Vec<&str> = lock
        .lines()
        .map(|line| line.split_once('=').map_or(line, |(key, _)| key))
        .collect();
    assert_eq!(keys, ["pid", "program", "started"], "{lock}");
    assert!(lock.contains(&format!("pid={}\n", holder.pid())), "{lock}");
    let exe = std::env::current_exe()?;
    let program = exe.file_name().ok_or("no file name")?.to_string_lossy();
    assert!(lock.contains(&format!("program={program}\n")), "{lock}");
    for leaked in ["hunter2", "--exact", "holder_child", "/"] {
        assert!(
            !lock.contains(leaked),
            "{leaked:?} in the lock file: {lock}"
        );
    }

    // The holder's description in the error: pid and program, no arguments.
    match Store::open(&f.store) {
        Err(Error::StoreLocked { holder: named, .. }) => {
            assert!(named.contains(&format!("pid={}", holder.pid())), "{named}");
            assert!(named.contains(&format!("program={program}")), "{named}");
            assert!(!named.contains("hunter2"), "{named}");
        }
        other => return Err(format!("expected StoreLocked, got {other:?}").into()),
    }

    // Killed: the stale lock keeps no arguments either, and never blocks.
    drop(holder);
    let stale = fs::read_to_string(&lock_path)?;
    assert!(!stale.contains("hunter2"), "{stale}");
    drop(Store::open(&f.store)?);
    Ok(())
}

/// Not a test by itself: the body of the holder child of [`Fixture::hold`], run only when
/// `STRATA_PRIVACY_HOLD` names a store. It opens the store, says `ready` and waits to be killed.
#[test]
fn holder_child() -> TestResult {
    let Some(dir) = std::env::var_os("STRATA_PRIVACY_HOLD") else {
        return Ok(());
    };
    let _store = Store::open(&dir)?;
    println!("ready");
    std::thread::sleep(Duration::from_secs(60));
    Ok(())
}

#[test]
fn denied_names_in_every_case_are_stored_without_content() -> TestResult {
    let f = Fixture::new()?;
    let secrets = [
        "prod.env",
        "PROD.ENV",
        ".ENV",
        ".Env.Local",
        "ID_RSA",
        "Id_Ed25519",
        "Secret.PEM",
        "server.KEY",
    ];
    for name in secrets {
        fs::write(f.tree.join(name), "hunter2\n")?;
    }
    f.strata(&["index", "."])?;
    let out = f.strata(&["ls", "--json"])?;
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let state = |name: &str| {
        listed.as_array().and_then(|rows| {
            rows.iter()
                .find(|row| {
                    row["path"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(&format!("/{name}")))
                })
                .and_then(|row| row["state"].as_str())
        })
    };
    for name in secrets {
        assert_eq!(state(name), Some("denied"), "{name}: {listed}");
    }
    assert_ne!(state("a.txt"), Some("denied"), "{listed}");
    let raw = fs::read(f.store.join("store.redb"))?;
    assert!(
        !raw.windows(7).any(|w| w == b"hunter2"),
        "a denied file's bytes reached the store file"
    );
    Ok(())
}

/// Runs `program args…` as uid and gid 65534 (nobody) with no supplementary groups.
fn as_nobody(program: &str, args: &[&Path]) -> std::io::Result<Output> {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", program])
        .args(args)
        .output()
}

#[test]
fn another_user_can_read_nothing_of_the_store() -> TestResult {
    if rustix::process::geteuid().as_raw() != 0 {
        println!(
            "skipped another_user_can_read_nothing_of_the_store: it needs root, to run commands \
             as another user (uid 65534) with setpriv; run the tests as root to check it"
        );
        return Ok(());
    }
    let f = Fixture::new()?;
    f.strata(&["init"])?;
    f.strata(&["index", "."])?;
    let _holder = f.hold()?;
    // The control: another user reads the tree beside the store.
    let public = f.tree.join("notes.md");
    let control = match as_nobody("cat", &[&public]) {
        Ok(out) => out,
        Err(e) => {
            println!("skipped another_user_can_read_nothing_of_the_store: setpriv: {e}");
            return Ok(());
        }
    };
    if !control.status.success() {
        println!(
            "skipped another_user_can_read_nothing_of_the_store: uid 65534 cannot read {} \
             ({}); its parent directories must let others in (set TMPDIR)",
            public.display(),
            String::from_utf8_lossy(&control.stderr).trim()
        );
        return Ok(());
    }
    assert_eq!(control.stdout, b"the plan\n");

    let names = assert_private(&f.store)?;
    assert_eq!(names, ["settings.toml", "store.lock", "store.redb"]);
    let listing = as_nobody("ls", &[&f.store])?;
    assert_denied("listing the store directory", &listing);
    for name in &names {
        let read = as_nobody("cat", &[&f.store.join(name)])?;
        assert_denied(name, &read);
    }
    Ok(())
}

fn assert_denied(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: another user succeeded");
    assert!(out.stdout.is_empty(), "{what}: another user read something");
    assert!(stderr.contains("Permission denied"), "{what}: {stderr}");
}

/// The symlink rule at every entry point: a symlink named explicitly (to `strata index`, to a
/// session read without mounts) is followed within its directory and never out of it.
#[test]
fn a_named_symlink_out_of_its_directory_is_refused_everywhere() -> crate::support::TestResult {
    use strata::engine::{Access, Engine, IndexRequest, SessionNewRequest, SessionReadRequest};
    let tmp = tempfile::tempdir()?;
    let base = fs::canonicalize(tmp.path())?;
    let (tree, outside, store) = (base.join("tree"), base.join("outside"), base.join("store"));
    fs::create_dir_all(&tree)?;
    fs::create_dir_all(&outside)?;
    fs::write(outside.join("secret"), "not for the store\n")?;
    fs::write(tree.join("real.txt"), "inside\n")?;
    std::os::unix::fs::symlink(outside.join("secret"), tree.join("out-link"))?;
    std::os::unix::fs::symlink("real.txt", tree.join("in-link"))?;
    let engine = Engine::open(&store, Access::Create)?;
    let path = |name: &str| tree.join(name).display().to_string();
    let err = crate::support::error_of(engine.call(IndexRequest {
        paths: vec![path("out-link")],
        cwd: None,
        threads: None,
    }))?;
    assert!(err.to_string().contains("symlink"), "{err}");
    let indexed = engine.call(IndexRequest {
        paths: vec![path("in-link")],
        cwd: None,
        threads: None,
    })?;
    assert_eq!(
        indexed.created, 1,
        "a link within its directory is followed"
    );
    engine.call(SessionNewRequest {
        id: Some("s".into()),
        system_prompt: "p".into(),
        ..SessionNewRequest::default()
    })?;
    let err = crate::support::error_of(engine.call(SessionReadRequest {
        id: "s".into(),
        paths: vec![path("out-link")],
    }))?;
    assert!(err.to_string().contains("symlink"), "{err}");
    let secret = outside.join("secret").display().to_string();
    let ls = engine.call(strata::engine::LsRequest {
        prefix: Some(base.display().to_string()),
        all: true,
        ..strata::engine::LsRequest::default()
    })?;
    let listed = serde_json::to_string(&ls)?;
    assert!(!listed.contains(&secret), "{listed}");
    Ok(())
}

/// `strata evict` is how a secret indexed by mistake is erased: after it and `strata gc`, the
/// secret's bytes are nowhere in the store file, not even in the free pages left by the
/// copy-on-write of the pages that held it (those kept it whole: the zeroed chunk is a new
/// copy of the page).
#[test]
fn an_evicted_secret_is_nowhere_in_the_store_file() -> TestResult {
    let fx = Fixture::new()?;
    let secret = "password=ZQXJ-SECRET-4491-marker";
    fs::write(fx.tree.join("creds.txt"), format!("{secret}\n"))?;
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    let file = fx.store.join("store.redb");
    let holds = |bytes: &[u8]| bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
    assert!(holds(&fs::read(&file)?), "the secret was stored");
    // Through the daemon, as users run it: it keeps the store open across the commands (a
    // command that opens the store itself compacts it on close, which may happen to reuse
    // the pages).
    fx.through_daemon(&["evict", "creds.txt", "--yes"])?;
    fx.through_daemon(&["gc"])?;
    let after_gc = fs::read(&file)?;
    fx.through_daemon(&["stop"])?;
    assert!(
        !holds(&after_gc),
        "the secret's bytes stay in the store file"
    );
    assert!(
        !holds(&fs::read(&file)?),
        "the secret's bytes are back after the daemon stopped"
    );
    let fsck = fx.strata(&["fsck"])?;
    assert!(fsck.status.success());
    let notes = fx.strata(&["cat", "notes.md"])?;
    assert_eq!(String::from_utf8_lossy(&notes.stdout), "the plan\n");
    Ok(())
}

/// The scrub after an eviction fills the free pages it finds, and no more: evicting a few files
/// one after another through the daemon leaves the store file about the size it was (each scrub
/// took more pages than were free, so redb grew the file, and the next scrub filled that growth
/// too: the file doubled at every evict).
#[test]
fn evictions_do_not_grow_the_store_file() -> TestResult {
    let fx = Fixture::new()?;
    for n in 0..6 {
        fs::write(
            fx.tree.join(format!("secret{n}.txt")),
            format!("token {n} ZQXJ\n"),
        )?;
    }
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    let file = fx.store.join("store.redb");
    fx.through_daemon(&["evict", "secret0.txt", "--yes"])?;
    let first = fs::metadata(&file)?.len();
    for n in 1..6 {
        fx.through_daemon(&["evict", &format!("secret{n}.txt"), "--yes"])?;
    }
    let last = fs::metadata(&file)?.len();
    fx.through_daemon(&["stop"])?;
    assert!(
        last <= first + first / 4,
        "the store file grew from {first} to {last} bytes over five evictions"
    );
    let fsck = fx.strata(&["fsck"])?;
    assert!(fsck.status.success());
    Ok(())
}

/// Evicted secrets of several sizes (a few bytes, a page, 100 KiB, 3 MiB over many blob chunks,
/// incompressible so that they are stored as they are), read through the daemon before (their
/// pages in its cache), leave no fragment of 48 bytes in any file of the store directory once
/// evicted (the scrub's own spare pages, filled last, once held a page of the 3 MiB one).
#[test]
fn evicted_secrets_of_every_size_leave_no_fragment() -> TestResult {
    let fx = Fixture::new()?;
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (seed >> 33) as u8
            })
            .collect()
    };
    let secrets = [
        ("tiny.txt", b"password=ZQXJ-tiny-7781-marker\n".to_vec()),
        ("page.bin", random(4096)),
        ("mid.bin", random(100 * 1024)),
        ("big.bin", random(3 * 1024 * 1024)),
    ];
    for (name, bytes) in &secrets {
        fs::write(fx.tree.join(name), bytes)?;
    }
    fs::write(fx.tree.join("notes.md"), "the plan\n")?;
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    for (name, _) in &secrets {
        fx.through_daemon(&["cat", name])?;
    }
    for (name, _) in &secrets {
        fx.through_daemon(&["evict", name, "--yes"])?;
    }
    fx.through_daemon(&["gc"])?;
    let mut leaks = Vec::new();
    for entry in fs::read_dir(&fx.store)? {
        let path = entry?.path();
        let Ok(data) = fs::read(&path) else { continue };
        for (name, bytes) in &secrets {
            let width = 16.min(bytes.len());
            let needles: std::collections::HashSet<&[u8]> = if bytes.len() < 64 {
                std::iter::once(&bytes[..]).collect()
            } else {
                bytes.windows(width).step_by(32).collect()
            };
            let width = if bytes.len() < 64 { bytes.len() } else { width };
            if data.windows(width).any(|w| needles.contains(w)) {
                leaks.push(format!("{name} in {}", path.display()));
            }
        }
    }
    fx.through_daemon(&["stop"])?;
    assert!(leaks.is_empty(), "evicted bytes left: {leaks:?}");
    let fsck = fx.strata(&["fsck"])?;
    assert!(fsck.status.success());
    Ok(())
}

/// An evict whose scrub fails after the eviction committed (a child under `ulimit -f`, and the
/// scrub's first pass grows the file past it) succeeds (exit 0: the evict committed) with a
/// warning that says so and that `strata gc` finishes the scrub; the note it leaves in the store
/// directory makes the next gc scrub, though it frees nothing, and the secret is then gone. A
/// gc whose scrub fails says so too, and its JSON answer names the scrub still owed
/// (`scrub_pending`). Before, both exited 2 (failure) though they had committed.
#[test]
fn a_failed_scrub_says_the_evict_committed_and_gc_finishes_it() -> TestResult {
    let fx = Fixture::new()?;
    let secret = "password=ZQXJ-SCRUB-FAILS-5120-marker";
    fs::write(fx.tree.join("creds.txt"), format!("{secret}\n"))?;
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    let file = fx.store.join("store.redb");
    // strata `args` with files of at most `limit` bytes. bash's `ulimit -f` counts KiB.
    // SIGXFSZ is ignored so that a write past the limit fails with EFBIG, and the child writes
    // to pipes (under the limit too).
    let limited = |limit: u64, args: &[&str]| {
        Command::new("bash")
            .arg("-c")
            .arg(r#"trap '' XFSZ; ulimit -f "$0" && exec "$@""#)
            .arg((limit / 1024).to_string())
            .arg(env!("CARGO_BIN_EXE_strata"))
            .args(["--store", &fx.store.display().to_string()])
            .args(args)
            .current_dir(&fx.tree)
            .env_remove("STRATA_STORE")
            .env("STRATA_NO_DAEMON", "1")
            .stdin(Stdio::null())
            .output()
    };
    let len = fs::metadata(&file)?.len();
    // Room for one growth of the file (redb doubles it): the evict's commit takes it when it
    // needs pages, and the scrub's first pass fills the free pages and grows the file again.
    let out = limited(3 * len, &["evict", "creds.txt", "--yes"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the evict committed but failed: {stderr}"
    );
    assert!(
        stderr.contains("warning")
            && stderr.contains("committed")
            && stderr.contains("`strata gc` finishes"),
        "the warning does not say the evict committed and what finishes it: {stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("evicted"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        fx.store.join("scrub.pending").exists(),
        "no note of the scrub owed"
    );
    let cat = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--store",
            &fx.store.display().to_string(),
            "cat",
            "creds.txt",
        ])
        .current_dir(&fx.tree)
        .env_remove("STRATA_STORE")
        .env("STRATA_NO_DAEMON", "1")
        .output()?;
    assert!(!cat.status.success(), "the evicted file still reads");
    let fsck = fx.strata(&["fsck"])?;
    assert!(fsck.status.success());
    // A gc whose scrub fails the same way (the file may not double again) says that gc
    // committed and that gc again finishes the scrub; the note stays.
    let len = fs::metadata(&file)?.len();
    let out = limited(len + len / 2, &["gc", "--json"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gc committed but failed: {stderr}");
    assert!(
        stderr.contains("warning")
            && stderr.contains("gc committed")
            && stderr.contains("`strata gc` again finishes"),
        "{stderr}"
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert!(
        answer["scrub_pending"]
            .as_str()
            .is_some_and(|note| note.contains("`strata gc` again finishes")),
        "{answer}"
    );
    assert!(fx.store.join("scrub.pending").exists(), "the note went");
    fx.strata(&["gc"])?;
    assert!(
        !fx.store.join("scrub.pending").exists(),
        "the note stayed after gc's scrub"
    );
    let holds = |bytes: &[u8]| bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
    assert!(!holds(&fs::read(&file)?), "the secret stayed after gc");
    let notes = fx.strata(&["cat", "notes.md"])?;
    assert_eq!(String::from_utf8_lossy(&notes.stdout), "the plan\n");
    Ok(())
}

/// SIGKILL at a random point of an evict of the real binary (its commit and, mostly, its scrub),
/// run by the command itself and by the daemon (`strata serve`, killed): the store opens again
/// and fsck finds it clean; the evict committed or not, as a whole (the secret reads whole, or
/// not at all); a committed one whose scrub ran to the end (no `scrub.pending`) left no fragment
/// of the secret in any file of the store directory, and after `strata gc` (which finishes a
/// scrub the kill cut short) none is left either way. Rounds alternate the two ways;
/// `STRATA_CRASH_ROUNDS` raises them (default 6), `STRATA_CRASH_SEED` repeats a run.
#[test]
fn sigkill_during_an_evicts_scrub_leaves_it_whole_or_not_at_all() -> TestResult {
    let rounds: u64 = std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("scrub kill rounds: {rounds}, STRATA_CRASH_SEED={seed}");
    let mut state = seed;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut outcomes: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for round in 0..rounds {
        let by_daemon = round % 2 == 1;
        let fx = Fixture::new()?;
        for n in 0..200 {
            fs::write(fx.tree.join(format!("f{n}.txt")), format!("file {n}\n"))?;
        }
        let secret: Vec<u8> = (0..100 * 1024).map(|_| (next() >> 24) as u8).collect();
        let decoy: Vec<u8> = (0..100 * 1024).map(|_| (next() >> 24) as u8).collect();
        fs::write(fx.tree.join("secret.bin"), &secret)?;
        fs::write(fx.tree.join("decoy.bin"), &decoy)?;
        fx.strata(&["init"])?;
        fx.strata(&["index", "."])?;
        let command = |args: &[&str]| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_strata"));
            c.arg("--store")
                .arg(&fx.store)
                .args(args)
                .current_dir(&fx.tree)
                .env_remove("STRATA_STORE")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if !by_daemon {
                c.env("STRATA_NO_DAEMON", "1");
            }
            c
        };
        let mut daemon = if by_daemon {
            let child = command(&["serve"]).spawn()?;
            let started = std::time::Instant::now();
            while !fx.store.join("strata.sock").exists() {
                if started.elapsed() > Duration::from_secs(30) {
                    return Err("strata serve made no socket in 30 s".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(50));
            Some(child)
        } else {
            None
        };
        // The decoy's evict, whole: how long an evict takes here.
        let started = std::time::Instant::now();
        let status = command(&["evict", "decoy.bin", "--yes"]).status()?;
        assert!(status.success(), "round {round}: the decoy's evict failed");
        let took = started.elapsed();
        let mut evict = command(&["evict", "secret.bin", "--yes"]).spawn()?;
        // Half the kills early (the open and the commit), half anywhere up to past the end.
        let span = took.as_micros() as u64;
        let span = if next() % 2 == 0 {
            span / 8
        } else {
            span * 3 / 2
        };
        let delay = next() % (span + 1);
        std::thread::sleep(Duration::from_micros(delay));
        match &mut daemon {
            Some(daemon) => {
                daemon.kill()?;
                daemon.wait()?;
                evict.wait()?;
                // A client killed before it reached the daemon starts one of its own, which
                // then runs the evict: stopped (its close is a clean one) before the checks.
                let _ = command(&["stop"]).status()?;
            }
            None => {
                evict.kill()?;
                evict.wait()?;
            }
        }
        let fsck = fx
            .strata(&["fsck"])
            .map_err(|e| format!("round {round}: {e}"))?;
        assert!(fsck.status.success());
        let read = command(&["cat", "secret.bin"])
            .env("STRATA_NO_DAEMON", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()?;
        let stderr = String::from_utf8_lossy(&read.stderr);
        let committed = if read.status.success() {
            assert!(
                read.stdout == secret,
                "round {round}: the secret reads changed"
            );
            false
        } else {
            assert!(
                stderr.contains("not found"),
                "round {round}: the secret neither reads nor is gone: {stderr}"
            );
            true
        };
        let owed = fx.store.join("scrub.pending").exists();
        let fragments = || -> Result<Vec<String>, Box<dyn std::error::Error>> {
            let needles: std::collections::HashSet<&[u8]> =
                secret.windows(16).step_by(32).collect();
            let mut found = Vec::new();
            for entry in fs::read_dir(&fx.store)? {
                let path = entry?.path();
                let Ok(data) = fs::read(&path) else { continue };
                if data.windows(16).any(|w| needles.contains(w)) {
                    found.push(path.display().to_string());
                }
            }
            Ok(found)
        };
        let outcome = match (committed, owed) {
            (false, _) => "not committed",
            (true, true) => "committed, scrub cut short",
            (true, false) => {
                let left = fragments()?;
                assert!(
                    left.is_empty(),
                    "round {round}: the scrub ran to the end and left the secret in {left:?}"
                );
                "committed and scrubbed"
            }
        };
        println!("round {round} (daemon: {by_daemon}, kill at {delay} µs of {took:?}): {outcome}");
        *outcomes.entry(outcome).or_default() += 1;
        fx.strata(&["gc"])
            .map_err(|e| format!("round {round}: {e}"))?;
        assert!(!fx.store.join("scrub.pending").exists(), "round {round}");
        if committed {
            let left = fragments()?;
            assert!(
                left.is_empty(),
                "round {round}: after gc the secret is in {left:?}"
            );
        }
        let notes = fx.strata(&["cat", "notes.md"])?;
        assert_eq!(String::from_utf8_lossy(&notes.stdout), "the plan\n");
    }
    println!("{outcomes:?}");
    Ok(())
}

/// Evicting a file whose version row does not decode, through the real binary (the engine
/// counts the versions before it evicts): refused, naming `strata fsck --repair`, as the
/// store's evict says; after the repair the evict goes through.
#[test]
fn evict_of_a_file_whose_version_row_does_not_decode_names_the_repair() -> TestResult {
    const VERSIONS: redb::TableDefinition<(u64, i64, u64), &[u8]> =
        redb::TableDefinition::new("versions");
    let fx = Fixture::new()?;
    fs::write(fx.tree.join("creds.txt"), "password=VERSION-ROW-GONE\n")?;
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    {
        use redb::ReadableTable;
        let db = redb::Database::open(fx.store.join("store.redb"))?;
        let tx = db.begin_write()?;
        {
            let mut table = tx.open_table(VERSIONS)?;
            let keys: Vec<(u64, i64, u64)> = table
                .iter()?
                .map(|row| row.map(|(k, _)| k.value()))
                .collect::<Result<_, _>>()?;
            assert!(!keys.is_empty());
            for key in keys {
                table.insert(key, [0xffu8, 0xff, 0xff].as_slice())?;
            }
        }
        tx.commit()?;
    }
    let out = strata_at(&fx.store, &fx.tree, &["evict", "creds.txt", "--yes"])
        .env("STRATA_NO_DAEMON", "1")
        .output()?;
    crate::support::assert_evict_refused_naming_repair(&out);
    fx.strata(&["fsck", "--repair"])?;
    fx.strata(&["evict", "creds.txt", "--yes"])?;
    fx.strata(&["fsck"])?;
    Ok(())
}

/// A scrub left owed (`scrub.pending`: an evict's scrub killed or failed) is finished when the
/// daemon starts, not only by the next gc: the note goes, fsck is clean.
#[test]
fn the_daemon_finishes_an_owed_scrub_as_it_starts() -> TestResult {
    let fx = Fixture::new()?;
    fs::write(fx.tree.join("a.txt"), "alpha\n")?;
    fx.strata(&["init"])?;
    fx.strata(&["index", "."])?;
    let note = fx.store.join("scrub.pending");
    fs::write(&note, "owed\n")?;
    let out = strata_at(&fx.store, &fx.tree, &["ls"]).output()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stop = strata_at(&fx.store, &fx.tree, &["stop"]).output()?;
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(!note.exists(), "the daemon left the owed scrub");
    fx.strata(&["fsck"])?;
    Ok(())
}
