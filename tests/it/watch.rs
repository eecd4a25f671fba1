//! The watcher end to end: a real `strata serve --watch` process over real files. Every test
//! changes the tree as people and editors do and then waits for quiescence: the store must equal
//! the disk ([`Fixture::store_equals_disk`] compares every path's SHA-256 with the store's current
//! `file_hash`, and nothing deleted may still be current).
//!
//! `STRATA_WATCH_STORM=10000` sets the changes of the storm tests (default 600).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::support::{RawClient, RawError, TestResult, env_count, strata_at};

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// How long a test waits for the store to catch up with the disk.
const QUIESCENCE: Duration = Duration::from_secs(20);

/// A store, a watched tree beside it, and the daemon watching it.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    store: PathBuf,
    tree: PathBuf,
    daemon: Option<Child>,
}

impl Fixture {
    /// A new store and tree (with `prepare` run on the tree before the daemon starts), watched by
    /// a daemon started with `env`.
    fn new(prepare: impl FnOnce(&Path) -> TestResult, env: &[(&str, &str)]) -> TestResult<Self> {
        let tmp = tempfile::tempdir()?;
        let root = fs::canonicalize(tmp.path())?;
        let mut f = Fixture {
            store: root.join("store"),
            tree: root.join("tree"),
            root,
            _tmp: tmp,
            daemon: None,
        };
        fs::create_dir_all(&f.tree)?;
        prepare(&f.tree)?;
        f.strata(&["--no-daemon", "init"])?;
        let tree = f.tree.display().to_string();
        f.start(&["--watch", &tree], env)?;
        Ok(f)
    }

    /// Runs `strata --store STORE args…`, which must succeed; its stdout.
    fn strata(&self, args: &[&str]) -> TestResult<String> {
        let output = strata_at(&self.store, &self.root, args).output()?;
        if !output.status.success() {
            return Err(format!(
                "strata {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    /// Starts `strata serve args…` with `env` and waits until its watcher is ready.
    fn start(&mut self, args: &[&str], env: &[(&str, &str)]) -> TestResult {
        let log = fs::File::options()
            .create(true)
            .append(true)
            .open(self.root.join("serve.log"))?;
        let mut command = Command::new(STRATA);
        command
            .arg("--store")
            .arg(&self.store)
            .arg("serve")
            .args(args)
            .env_remove("STRATA_STORE")
            .env_remove("STRATA_NO_DAEMON")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (name, value) in env {
            command.env(name, value);
        }
        self.daemon = Some(command.spawn()?);
        let ready = eventually(Duration::from_secs(30), || {
            Ok(self
                .rpc("status", json!({}))
                .is_ok_and(|s| s["watch"]["ready"] == json!(true)))
        })?;
        if !ready {
            return Err(format!("the watcher was not ready in 30 s: {}", self.log()).into());
        }
        Ok(())
    }

    fn log(&self) -> String {
        fs::read_to_string(self.root.join("serve.log")).unwrap_or_default()
    }

    /// SIGKILL of the daemon.
    fn kill(&mut self) -> TestResult {
        if let Some(mut child) = self.daemon.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// One request on a new connection: its result.
    fn rpc(&self, method: &str, params: Value) -> TestResult<Value> {
        let mut raw = Raw::connect(&self.store.join("strata.sock"))?;
        Ok(raw.result(method, params)?)
    }

    /// What the store holds as current under the tree: path → file hash (hex).
    fn store_files(&self) -> TestResult<BTreeMap<String, String>> {
        let mut raw = Raw::connect(&self.store.join("strata.sock"))?;
        let rows = raw.result("ls", json!({"prefix": self.tree.display().to_string()}))?;
        let mut files = BTreeMap::new();
        for row in rows.as_array().ok_or("ls answers an array")? {
            let path = row["path"].as_str().ok_or("a row without a path")?;
            // Deleted between the listing and now (the watcher is still at work): not current.
            let Ok(shown) = raw.result("show", json!({"reference": row["id"]})) else {
                continue;
            };
            let hash = shown["object"]["file_hash"]
                .as_str()
                .unwrap_or("none")
                .trim_start_matches("sha256:")
                .to_string();
            files.insert(path.to_string(), hash);
        }
        Ok(files)
    }

    /// Every regular file on disk under the tree: path → SHA-256 (hex).
    fn disk_files(&self) -> TestResult<BTreeMap<String, String>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.tree.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    stack.push(entry.path());
                } else if kind.is_file() {
                    let Ok(bytes) = fs::read(entry.path()) else {
                        continue;
                    };
                    files.insert(
                        entry.path().display().to_string(),
                        hex(&Sha256::digest(&bytes)),
                    );
                }
            }
        }
        Ok(files)
    }

    /// Waits for quiescence: the store equals the disk (or says how they differ at the end).
    fn store_equals_disk(&self) -> TestResult {
        let deadline = Instant::now() + QUIESCENCE;
        loop {
            let disk = self.disk_files()?;
            let store = self.store_files()?;
            if disk == store {
                return Ok(());
            }
            if Instant::now() > deadline {
                let missing: Vec<_> = disk
                    .iter()
                    .filter(|(p, h)| store.get(*p) != Some(h))
                    .take(10)
                    .collect();
                let stale: Vec<_> = store
                    .iter()
                    .filter(|(p, h)| disk.get(*p) != Some(h))
                    .take(10)
                    .collect();
                return Err(format!(
                    "after {QUIESCENCE:?} the store differs from the disk ({} files on disk, {} \
                     current in the store)\non disk, not so in the store: {missing:?}\nin the \
                     store, not so on disk: {stale:?}\nstatus: {}\nlog: {}",
                    disk.len(),
                    store.len(),
                    self.rpc("status", json!({})).unwrap_or_default(),
                    self.log()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = self.rpc("stop", json!({}));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Polls `check` every 20 ms for up to `timeout`.
fn eventually(timeout: Duration, mut check: impl FnMut() -> TestResult<bool>) -> TestResult<bool> {
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

/// A client on the daemon's raw socket (reads time out after 30 s).
struct Raw;

impl Raw {
    fn connect(socket: &Path) -> Result<RawClient, RawError> {
        RawClient::connect(socket, Duration::from_secs(30))
    }
}

/// Writes `text` to `path`, making its directories.
fn put(path: &Path, text: &str) -> TestResult {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)?;
    Ok(())
}

#[test]
fn every_kind_of_change_reaches_the_store() -> TestResult {
    let f = Fixture::new(
        |tree| {
            put(&tree.join("keep.txt"), "keep\n")?;
            put(&tree.join("edit.txt"), "before\n")?;
            put(&tree.join("gone.txt"), "gone\n")?;
            put(&tree.join("old-name.txt"), "renamed\n")?;
            put(&tree.join("dir/inner.txt"), "inner\n")?;
            put(&tree.join("leaving/a.txt"), "a\n")?;
            put(&tree.join("leaving/sub/b.txt"), "b\n")?;
            put(&tree.join("swap"), "a file first\n")?;
            put(&tree.join("target/x.o"), "ignored\n")?;
            put(&tree.join(".gitignore"), "target/\n")?;
            Ok(())
        },
        &[],
    )?;
    f.store_equals_disk_ignoring("target")?;
    let t = &f.tree;
    // Create, modify, delete, rename a file.
    put(&t.join("new.txt"), "new\n")?;
    fs::write(t.join("edit.txt"), "after, longer\n")?;
    fs::remove_file(t.join("gone.txt"))?;
    fs::rename(t.join("old-name.txt"), t.join("new-name.txt"))?;
    // mkdir -p a/b/c && echo x > a/b/c/f
    fs::create_dir_all(t.join("a/b/c"))?;
    fs::write(t.join("a/b/c/f"), "x\n")?;
    // An editor's atomic save: write a temporary file, rename it over the original.
    fs::write(t.join(".keep.txt.swp"), "kept, saved\n")?;
    fs::rename(t.join(".keep.txt.swp"), t.join("keep.txt"))?;
    // Rename a directory; move one out of the tree and another in.
    fs::rename(t.join("dir"), t.join("dir2"))?;
    fs::rename(t.join("leaving"), f.root.join("outside"))?;
    put(&f.root.join("incoming/deep/c.txt"), "c\n")?;
    fs::rename(f.root.join("incoming"), t.join("arrived"))?;
    // Ignored files stay out.
    put(&t.join("target/y.o"), "ignored too\n")?;
    f.store_equals_disk_ignoring("target")?;
    // A file replaced by a directory, and back.
    fs::remove_file(t.join("swap"))?;
    put(&t.join("swap/now-a-dir.txt"), "inside\n")?;
    f.store_equals_disk_ignoring("target")?;
    fs::remove_dir_all(t.join("swap"))?;
    fs::write(t.join("swap"), "a file again\n")?;
    // Files inside a directory renamed after the rename are seen under the new name.
    fs::write(t.join("dir2/later.txt"), "later\n")?;
    f.store_equals_disk_ignoring("target")?;
    // An edit of a .gitignore re-evaluates its directory: target/ is no longer ignored.
    fs::write(t.join(".gitignore"), "# nothing ignored now\n")?;
    f.store_equals_disk()?;
    let status = f.rpc("status", json!({}))?;
    assert_eq!(status["watch"]["errors"], json!(0), "{status}");
    assert!(status["watch"]["watches"].as_u64() >= Some(5), "{status}");
    Ok(())
}

impl Fixture {
    /// [`Fixture::store_equals_disk`] with the ignored top-level directory `ignored` out of the
    /// disk's side (moved away for the comparison and back).
    fn store_equals_disk_ignoring(&self, ignored: &str) -> TestResult {
        let aside = self.root.join("aside");
        fs::rename(self.tree.join(ignored), &aside)?;
        let outcome = self.store_equals_disk();
        fs::rename(&aside, self.tree.join(ignored))?;
        outcome
    }
}

/// `count` changes in bursts: many files, repeated writes to one file, deep trees created and
/// removed, renames. `round` makes the contents of one call differ from another's.
fn storm(tree: &Path, count: usize, round: usize) -> TestResult {
    let mut done = 0;
    let mut burst = 0;
    while done < count {
        burst += 1;
        let dir = tree.join(format!("burst{}", burst % 7));
        for i in 0..50 {
            put(
                &dir.join(format!("f{i}.txt")),
                &format!("{round} {burst} {i}\n"),
            )?;
        }
        for i in 0..20 {
            fs::write(tree.join("hot.txt"), format!("{round} {burst} write {i}\n"))?;
        }
        let deep = tree.join(format!("deep{}", burst % 3));
        let mut at = deep.clone();
        for level in 0..6 {
            at = at.join(format!("l{level}"));
            put(&at.join("leaf.txt"), &format!("{round} {burst} {level}\n"))?;
        }
        if burst % 2 == 0 {
            fs::remove_dir_all(&deep)?;
        }
        if burst % 3 == 0 && dir.exists() {
            let moved = tree.join(format!("moved{round}-{burst}"));
            fs::rename(&dir, &moved)?;
            if burst % 6 == 0 {
                fs::remove_dir_all(&moved)?;
            }
        }
        done += 50 + 20 + 6 + 2;
    }
    Ok(())
}

fn storm_size() -> TestResult<usize> {
    Ok(usize::try_from(env_count("STRATA_WATCH_STORM", 600)?)?)
}

#[test]
fn a_storm_of_changes_ends_with_the_store_equal_to_the_disk() -> TestResult {
    let f = Fixture::new(|_| Ok(()), &[])?;
    storm(&f.tree, storm_size()?, 1)?;
    f.store_equals_disk()
}

#[test]
fn a_daemon_killed_mid_storm_catches_up_when_it_restarts() -> TestResult {
    let mut f = Fixture::new(|_| Ok(()), &[])?;
    let size = storm_size()?;
    storm(&f.tree, size / 2, 1)?;
    f.kill()?;
    // Changes made while no daemon runs; the restarted daemon watches the roots of the settings.
    storm(&f.tree, size / 2, 2)?;
    f.start(&[], &[])?;
    storm(&f.tree, size / 4, 3)?;
    f.store_equals_disk()
}

#[test]
fn lost_events_of_an_overflowing_queue_are_recovered_by_a_rescan() -> TestResult {
    // Every 5th event is lost and a Rescan flagged instead, as when the kernel's queue overflows.
    let f = Fixture::new(|_| Ok(()), &[("STRATA_WATCH_OVERFLOW_EVERY", "5")])?;
    storm(&f.tree, storm_size()? / 2, 1)?;
    f.store_equals_disk()?;
    let status = f.rpc("status", json!({}))?;
    assert!(status["watch"]["rescans"].as_u64() > Some(0), "{status}");
    Ok(())
}

#[test]
fn past_the_watch_limit_directories_are_rescanned_and_the_limit_is_named() -> TestResult {
    let f = Fixture::new(
        |tree| {
            for i in 0..6 {
                put(&tree.join(format!("d{i}/f.txt")), "first\n")?;
            }
            Ok(())
        },
        &[
            ("STRATA_WATCH_LIMIT", "3"),
            ("STRATA_WATCH_RESCAN_SECONDS", "1"),
        ],
    )?;
    let status = f.rpc("status", json!({}))?;
    let watch = &status["watch"];
    assert_eq!(watch["watches"], json!(3), "{status}");
    assert_eq!(watch["unwatched_dirs"], json!(4), "{status}");
    assert_eq!(watch["limit_reached"], json!(true), "{status}");
    let said = watch["last_error"].as_str().unwrap_or_default();
    assert!(
        said.contains("fs.inotify.max_user_watches") && said.contains("sysctl"),
        "{said}"
    );
    for i in 0..6 {
        fs::write(f.tree.join(format!("d{i}/f.txt")), format!("changed {i}\n"))?;
        put(&f.tree.join(format!("d{i}/new.txt")), "new\n")?;
    }
    fs::remove_dir_all(f.tree.join("d5"))?;
    f.store_equals_disk()?;
    let human = f.strata(&["status"])?;
    assert!(human.contains("unwatched dirs"), "{human}");
    Ok(())
}

#[test]
fn index_of_a_watched_root_sees_a_change_made_just_before() -> TestResult {
    let f = Fixture::new(|tree| put(&tree.join("a.txt"), "one\n"), &[])?;
    f.store_equals_disk()?;
    for round in 0..5 {
        // Inside the debounce window: only the cookie sync makes index see it.
        fs::write(f.tree.join("a.txt"), format!("round {round}\n"))?;
        put(&f.tree.join(format!("n{round}.txt")), "new\n")?;
        let answer = f.strata(&["index", "--json", &f.tree.display().to_string()])?;
        let summary: Value = serde_json::from_str(&answer)?;
        assert_eq!(
            f.store_files()?,
            f.disk_files()?,
            "index returned before the store held the change: {summary}"
        );
        // Answered from the watcher's state: only the paths seen changing were looked at.
        assert!(summary["files"].as_u64() <= Some(2), "{summary}");
    }
    Ok(())
}

#[test]
fn a_subscriber_by_path_gets_one_change_per_committed_file() -> TestResult {
    let f = Fixture::new(|tree| put(&tree.join("sub/a.txt"), "one\n"), &[])?;
    let mut raw = Raw::connect(&f.store.join("strata.sock"))?;
    raw.result(
        "subscribe",
        json!({"paths": [f.tree.join("sub").display().to_string()]}),
    )?;
    fs::write(f.tree.join("sub/a.txt"), "two\n")?;
    put(&f.tree.join("other.txt"), "not under the prefix\n")?;
    put(&f.tree.join("sub/b.txt"), "b\n")?;
    let mut seen = BTreeMap::new();
    while seen.len() < 2 {
        let message = raw.recv()?;
        assert_eq!(message["method"], json!("change"), "{message}");
        let change = &message["params"];
        let path = change["path"].as_str().ok_or("a change without a path")?;
        assert!(change["tx"].as_u64().is_some() && change["entity"].is_string());
        assert!(
            seen.insert(path.to_string(), change["kind"].clone())
                .is_none(),
            "one notification per change: {message}"
        );
    }
    let sub = f.tree.join("sub");
    assert_eq!(
        seen[&sub.join("a.txt").display().to_string()],
        json!("updated")
    );
    assert_eq!(
        seen[&sub.join("b.txt").display().to_string()],
        json!("created")
    );
    fs::remove_file(sub.join("b.txt"))?;
    let message = raw.recv()?;
    assert_eq!(message["params"]["kind"], json!("deleted"), "{message}");
    Ok(())
}

#[test]
fn a_live_session_shows_an_outside_edit_without_a_resume() -> TestResult {
    let f = Fixture::new(|tree| put(&tree.join("held.txt"), "abc"), &[])?;
    let held = f.tree.join("held.txt").display().to_string();
    f.rpc("session.new", json!({"id": "s1"}))?;
    f.rpc("session.read", json!({"id": "s1", "paths": [held]}))?;
    let before = f.rpc("session.render", json!({"id": "s1"}))?;
    let text = before["text"].as_str().unwrap_or_default().to_string();
    assert!(text.contains("char_count=3"), "{text}");
    fs::write(&held, "a longer text now")?;
    let shown = eventually(QUIESCENCE, || {
        let now = f.rpc("session.render", json!({"id": "s1"}))?;
        Ok(now["text"]
            .as_str()
            .is_some_and(|t| t.contains("char_count=17")))
    })?;
    assert!(shown, "the render never showed the new size");
    // The watcher changed no set and made no session commit.
    let history = f.rpc("session.history", json!({"id": "s1"}))?;
    let after = f.rpc("session.render", json!({"id": "s1"}))?;
    assert_eq!(before["tx_id"], after["tx_id"], "{history}");
    Ok(())
}

#[test]
fn a_session_file_outside_the_roots_is_watched_while_the_session_lives() -> TestResult {
    let f = Fixture::new(|_| Ok(()), &[])?;
    let outside = f.root.join("outside");
    put(&outside.join("held.txt"), "abc")?;
    put(&outside.join("neighbour.txt"), "not held")?;
    let held = outside.join("held.txt").display().to_string();
    f.rpc("session.new", json!({"id": "s2"}))?;
    f.rpc("session.read", json!({"id": "s2", "paths": [held]}))?;
    let watching = eventually(QUIESCENCE, || {
        let status = f.rpc("status", json!({}))?;
        Ok(status["watch"]["watches"].as_u64() == Some(2))
    })?;
    assert!(watching, "the held file's directory is watched");
    fs::write(&held, "a longer text now")?;
    fs::write(outside.join("neighbour.txt"), "still not held")?;
    let shown = eventually(QUIESCENCE, || {
        let now = f.rpc("session.render", json!({"id": "s2"}))?;
        Ok(now["text"]
            .as_str()
            .is_some_and(|t| t.contains("char_count=17")))
    })?;
    assert!(shown, "the render never showed the new size");
    let listed = f.strata(&["ls", &outside.display().to_string()])?;
    assert!(
        !listed.contains("neighbour"),
        "only the held file is followed: {listed}"
    );
    Ok(())
}

#[test]
fn watch_and_unwatch_keep_the_roots_in_the_settings() -> TestResult {
    let f = Fixture::new(|_| Ok(()), &[])?;
    let other = f.root.join("other");
    fs::create_dir_all(&other)?;
    let other_text = other.display().to_string();
    let added = f.strata(&["watch", "--json", &other_text])?;
    let roots: Value = serde_json::from_str(&added)?;
    assert_eq!(roots["changed"], json!([other_text]), "{roots}");
    put(&other.join("x.txt"), "x\n")?;
    let indexed = eventually(QUIESCENCE, || {
        Ok(f.strata(&["ls"])?.contains("other/x.txt"))
    })?;
    assert!(indexed, "a root added to a running daemon is watched");
    f.strata(&["unwatch", &other_text])?;
    let settings = fs::read_to_string(f.store.join("settings.toml"))?;
    assert!(!settings.contains(&other_text), "{settings}");
    assert!(
        settings.contains(&f.tree.display().to_string()),
        "{settings}"
    );
    let refused = Command::new(STRATA)
        .arg("--store")
        .arg(&f.store)
        .args(["watch", "/no/such/dir"])
        .output()?;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("/no/such/dir") && said.contains("cannot watch"),
        "{said}"
    );
    Ok(())
}

#[test]
fn a_directory_moved_out_of_the_tree_is_no_longer_watched() -> TestResult {
    let f = Fixture::new(
        |tree| {
            put(&tree.join("stay.txt"), "stay\n")?;
            put(&tree.join("leaving/a.txt"), "a\n")?;
            put(&tree.join("leaving/sub/b.txt"), "b\n")?;
            Ok(())
        },
        &[],
    )?;
    f.store_equals_disk()?;
    let watches = |f: &Fixture| -> TestResult<u64> {
        Ok(f.rpc("status", json!({}))?["watch"]["watches"]
            .as_u64()
            .ok_or("watches")?)
    };
    let before = watches(&f)?;
    let outside = f.root.join("outside");
    fs::rename(f.tree.join("leaving"), &outside)?;
    f.store_equals_disk()?;
    let dropped = eventually(QUIESCENCE, || Ok(watches(&f)? + 2 == before))?;
    assert!(
        dropped,
        "leaving/ and leaving/sub/ unwatched: {before} → {}",
        watches(&f)?
    );
    // What happens in the moved directory is no event of the tree's any more.
    let events = |f: &Fixture| -> TestResult<u64> {
        Ok(f.rpc("status", json!({}))?["watch"]["events"]
            .as_u64()
            .ok_or("events")?)
    };
    let seen = events(&f)?;
    fs::write(outside.join("a.txt"), "edited outside\n")?;
    put(&outside.join("sub/c.txt"), "c\n")?;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(events(&f)?, seen, "{}", f.log());
    f.store_equals_disk()?;
    Ok(())
}

#[test]
fn an_edit_of_the_settings_while_the_daemon_runs_is_followed_and_kept() -> TestResult {
    let f = Fixture::new(
        |tree| {
            put(&tree.join("src/main.rs"), "fn main() {}\n")?;
            put(&tree.join("build/out.txt"), "built\n")?;
            Ok(())
        },
        &[],
    )?;
    // A person adds an ignore glob by hand.
    let settings_path = f.store.join("settings.toml");
    let original = fs::read_to_string(&settings_path)?;
    assert!(original.contains("ignore = []\n"), "{original}");
    fs::write(
        &settings_path,
        original.replace("ignore = []\n", "ignore = [\"build/\"]\n"),
    )?;
    // The watcher looks at the settings every second.
    std::thread::sleep(Duration::from_millis(1500));
    put(&f.tree.join("build/later.txt"), "ignored now\n")?;
    put(&f.tree.join("src/lib.rs"), "pub fn f() {}\n")?;
    let followed = eventually(QUIESCENCE, || {
        let ls = f.strata(&["ls"])?;
        Ok(ls.contains("src/lib.rs"))
    })?;
    assert!(followed);
    std::thread::sleep(Duration::from_millis(1500));
    let ls = f.strata(&["ls"])?;
    assert!(
        !ls.contains("build/later.txt"),
        "ignored by the edited settings: {ls}"
    );
    // A change through the daemon keeps the hand edit.
    let other = f.root.join("other");
    fs::create_dir_all(&other)?;
    f.strata(&["watch", &other.display().to_string()])?;
    let settings = fs::read_to_string(&settings_path)?;
    assert!(
        settings.contains("build/"),
        "the hand edit is kept: {settings}"
    );
    assert!(
        settings.contains(&other.display().to_string()),
        "{settings}"
    );
    // Taking the glob out admits build/ again: its files are indexed and watched.
    assert!(settings.contains("ignore = [\"build/\"]\n"), "{settings}");
    fs::write(
        &settings_path,
        settings.replace("ignore = [\"build/\"]\n", "ignore = []\n"),
    )?;
    let admitted = eventually(QUIESCENCE, || {
        Ok(f.strata(&["ls"])?.contains("build/later.txt"))
    })?;
    assert!(admitted, "{}", fs::read_to_string(&settings_path)?);
    put(&f.tree.join("build/newest.txt"), "watched again\n")?;
    f.store_equals_disk()?;
    // Settings that do not parse leave the daemon as it was, and say so in its log.
    fs::write(&settings_path, "ignore = [oops\n")?;
    put(&f.tree.join("src/after.rs"), "// still watched\n")?;
    f.store_equals_disk()?;
    let status = f.rpc("status", json!({}))?;
    assert_eq!(
        status["watch"]["roots"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
    Ok(())
}
