//! The `strata` binary end to end on temporary trees: index, edit, delete, re-create, inspect.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::support::{TestResult, incompressible};

/// A temporary tree to index and a store beside it (outside the tree).
struct Fixture {
    _tmp: tempfile::TempDir,
    tree: PathBuf,
    store: PathBuf,
}

impl Fixture {
    fn new() -> TestResult<Self> {
        let tmp = tempfile::tempdir()?;
        let tree = fs::canonicalize(tmp.path())?.join("tree");
        let store = fs::canonicalize(tmp.path())?.join("store");
        fs::create_dir_all(&tree)?;
        Ok(Fixture {
            _tmp: tmp,
            tree,
            store,
        })
    }

    /// Writes a file and dates its mtime an hour back, so the racy-clean rule does not apply.
    fn write(&self, rel: &str, bytes: &[u8]) -> TestResult<PathBuf> {
        let path = self.tree.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, bytes)?;
        let past = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(past)?;
        Ok(path)
    }

    /// Runs `strata --store STORE args…` in the tree.
    fn run(&self, args: &[&str]) -> TestResult<Output> {
        Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&self.store)
            .args(args)
            .current_dir(&self.tree)
            .env_remove("STRATA_STORE")
            .output()?)
    }

    /// Runs a command that must succeed and returns its stdout.
    fn ok(&self, args: &[&str]) -> TestResult<String> {
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

    /// Runs a command that must fail with exit code `code` and returns its stderr.
    fn fails(&self, args: &[&str], code: i32) -> TestResult<String> {
        let output = self.run(args)?;
        assert_eq!(
            output.status.code(),
            Some(code),
            "strata {args:?}: stdout {} stderr {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8(output.stderr)?)
    }

    fn json(&self, args: &[&str]) -> TestResult<Value> {
        Ok(serde_json::from_str(&self.ok(args)?)?)
    }

    fn index(&self) -> TestResult<Value> {
        self.json(&["index", ".", "--quiet", "--json"])
    }
}

/// A validator for a schema file under `schema/`.
fn validator(relative: &str) -> TestResult<jsonschema::Validator> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schema")
        .join(relative);
    let schema: Value = serde_json::from_str(&fs::read_to_string(path)?)?;
    Ok(jsonschema::draft202012::new(&schema).map_err(|e| e.to_string())?)
}

/// Fails with every schema error of `instance`.
fn check(validator: &jsonschema::Validator, instance: &Value) -> TestResult {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{instance} does not match its schema: {errors:?}").into())
    }
}

fn count(summary: &Value, key: &str) -> u64 {
    summary[key].as_u64().unwrap_or(u64::MAX)
}

#[test]
fn index_edit_delete_recreate_and_inspect() -> TestResult {
    let f = Fixture::new()?;
    f.write("README.md", b"# hello\n")?;
    f.write("src/main.rs", b"fn main() {}\n")?;
    f.write("src/lib.rs", b"pub fn one() -> u32 { 1 }\n")?;

    let first = f.index()?;
    assert_eq!(count(&first, "created"), 3, "{first}");
    assert_eq!(count(&first, "files"), 3);

    // Unchanged tree: nothing read, nothing written.
    let again = f.index()?;
    assert_eq!(count(&again, "unchanged"), 3, "{again}");
    assert_eq!(count(&again, "bytes_read"), 0, "{again}");
    assert_eq!(again["tx_ids"].as_array().map(Vec::len), Some(0));

    // Edit one, delete one.
    f.write("src/lib.rs", b"pub fn one() -> u32 { 2 }\n")?;
    fs::remove_file(f.tree.join("src/main.rs"))?;
    let second = f.index()?;
    assert_eq!(count(&second, "updated"), 1, "{second}");
    assert_eq!(count(&second, "deleted"), 1, "{second}");
    assert_eq!(count(&second, "unchanged"), 1, "{second}");
    assert_eq!(
        count(&second, "bytes_read"),
        26,
        "only the edited file is read: {second}"
    );

    // Re-create the deleted file.
    f.write("src/main.rs", b"fn main() { println!(\"back\"); }\n")?;
    let third = f.index()?;
    assert_eq!(count(&third, "created"), 1, "{third}");

    // History of lib.rs: two versions; of main.rs: created, deleted, created.
    let lib = f.json(&["history", "src/lib.rs", "--json"])?;
    let lib = lib.as_array().ok_or("history is an array")?;
    assert_eq!(lib.len(), 2);
    let main_history = f.json(&["history", "src/main.rs", "--json"])?;
    let deleted: Vec<bool> = main_history
        .as_array()
        .ok_or("array")?
        .iter()
        .map(|v| v["deleted"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(deleted, vec![false, true, false]);

    // As-of reads: the first transaction saw the first lib.rs.
    let first_tx = first["tx_ids"][0].as_u64().ok_or("tx id")?.to_string();
    let old = f.ok(&["cat", "src/lib.rs", "--as-of-tx", &first_tx])?;
    assert_eq!(old, "pub fn one() -> u32 { 1 }\n");
    assert_eq!(f.ok(&["cat", "src/lib.rs"])?, "pub fn one() -> u32 { 2 }\n");
    let err = f.fails(
        &[
            "cat",
            "src/main.rs",
            "--as-of-tx",
            &second["tx_ids"][0].to_string(),
        ],
        2,
    )?;
    assert!(err.contains("deleted"), "{err}");

    // Diff: previous → current.
    let diff = f.ok(&["diff", "src/lib.rs"])?;
    assert!(diff.contains("-pub fn one() -> u32 { 1 }"), "{diff}");
    assert!(diff.contains("+pub fn one() -> u32 { 2 }"), "{diff}");

    // show --json prints an envelope whose hashes recompute.
    let envelope = f.json(&["show", "src/lib.rs", "--json"])?;
    let object = strata::Object::from_json(&envelope)?;
    assert_eq!(object.content(), Some("pub fn one() -> u32 { 2 }\n"));
    assert_eq!(envelope["file_type"], "rs");

    // Prefix references: the id prefix finds the same object.
    let id = envelope["xt/id"].as_str().ok_or("id")?;
    let by_prefix = f.json(&["show", &id[..10], "--json"])?;
    assert_eq!(by_prefix["xt/id"], envelope["xt/id"]);
    let by_id = f.json(&["show", &format!("id:{}", &id[..12]), "--json"])?;
    assert_eq!(by_id["xt/id"], envelope["xt/id"]);

    // Every envelope validates against its schema, at every version.
    let file_schema = validator("objects/file.schema.json")?;
    check(&file_schema, &envelope)?;
    check(
        &file_schema,
        &f.json(&["show", "src/lib.rs", "--json", "--as-of-tx", &first_tx])?,
    )?;
    check(&file_schema, &f.json(&["show", "README.md", "--json"])?)?;

    // Log and fsck; every log record validates against the record schema.
    let log = f.json(&["log", "--json"])?;
    let record_schema = validator("tx_record.schema.json")?;
    for record in log["records"].as_array().ok_or("records")? {
        check(&record_schema, record)?;
    }
    assert_eq!(log["records"].as_array().map(Vec::len), Some(3));
    let newest = f.json(&["log", "--json", "--limit", "1"])?;
    assert_eq!(newest["records"][0]["tx_id"], 3, "{newest}");
    let after_first = f.json(&["log", "--json", "--since", "1", "--limit", "1"])?;
    assert_eq!(after_first["records"][0]["tx_id"], 2, "{after_first}");
    assert!(f.ok(&["fsck"])?.starts_with("ok"));

    // ls lists the live files.
    let paths = live_paths(&f)?;
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with(f.tree.to_str().unwrap_or("?")))
    );
    Ok(())
}

#[test]
fn binary_denied_and_ignored_files() -> TestResult {
    let f = Fixture::new()?;
    let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    f.write("img.bin", &binary)?;
    f.write(".env", b"SECRET=hunter2\n")?;
    f.write(".gitignore", b"build/\n")?;
    f.write("build/out.txt", b"generated\n")?;
    let summary = f.index()?;
    assert_eq!(count(&summary, "denied"), 1, "{summary}");
    assert_eq!(count(&summary, "files"), 3, "build/ is ignored: {summary}");

    let output = f.run(&["cat", "img.bin"])?;
    assert!(output.status.success());
    assert_eq!(output.stdout, binary);
    let envelope = f.json(&["show", "img.bin", "--json"])?;
    assert_eq!(envelope["content_omitted"], "binary");
    assert_eq!(envelope["content"], Value::Null);

    let ls = f.json(&["ls", "--json"])?;
    let states: Vec<(&str, &str)> = ls
        .as_array()
        .ok_or("array")?
        .iter()
        .map(|row| {
            let path = row["path"].as_str().unwrap_or("?");
            (
                path.rsplit('/').next().unwrap_or(path),
                row["state"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert!(states.contains(&(".env", "denied")), "{states:?}");
    assert!(states.contains(&("img.bin", "binary")), "{states:?}");
    let env = f.json(&["show", ".env", "--json"])?;
    let file_schema = validator("objects/file.schema.json")?;
    check(&file_schema, &env)?;
    check(&file_schema, &envelope)?;
    assert_eq!(env["content_omitted"], "denied");
    assert_eq!(env["file_hash"], Value::Null);
    let err = f.fails(&["cat", ".env"], 2)?;
    assert!(err.contains("deny rule"), "{err}");

    // Nothing of the secret reached the store file.
    let raw = fs::read(f.store.join("store.redb"))?;
    assert!(!raw.windows(7).any(|w| w == b"hunter2"));
    Ok(())
}

#[test]
fn errors_say_what_to_do_and_change_nothing() -> TestResult {
    let f = Fixture::new()?;
    // No store anywhere: a reading command says how to make one.
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["ls"])
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .output()?;
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("strata init"));

    f.write("a.txt", b"a\n")?;
    f.index()?;
    let log_before = f.ok(&["log", "--json"])?;

    // Evict without --yes refuses and keeps everything.
    let err = f.fails(&["evict", "a.txt"], 2)?;
    assert!(err.contains("--yes"), "{err}");
    // A missing root is refused with its name.
    let err = f.fails(&["index", "no/such/dir"], 2)?;
    assert!(err.contains("no/such/dir"), "{err}");
    // Unknown references, short prefixes and bad transaction numbers.
    let err = f.fails(&["show", "nothing-here"], 2)?;
    assert!(err.contains("strata ls"), "{err}");
    let err = f.fails(&["show", "a.txt", "--as-of-tx", "99"], 2)?;
    assert!(err.contains("1 to 1"), "{err}");
    let err = f.fails(
        &["history", "a.txt", "--valid-at", "2020-01-01T00:00:00Z"],
        2,
    )?;
    assert!(err.contains("--as-of-tx"), "{err}");
    let err = f.fails(&["show", "a.txt", "--valid-at", "yesterday"], 2)?;
    assert!(err.contains("--valid-at"), "{err}");
    assert_eq!(
        f.ok(&["log", "--json"])?,
        log_before,
        "failed commands wrote nothing"
    );

    // Evict with --yes erases it from every answer; the log keeps the digests, and its records
    // still match the schema.
    f.ok(&["evict", "a.txt", "--yes"])?;
    let log = f.json(&["log", "--json"])?;
    let record_schema = validator("tx_record.schema.json")?;
    for record in log["records"].as_array().ok_or("records")? {
        check(&record_schema, record)?;
    }
    assert_eq!(log["records"][0]["ops"][0]["body"], Value::Null, "{log}");
    let err = f.fails(&["history", "a.txt"], 2)?;
    assert!(!err.is_empty());
    assert!(f.ok(&["fsck"])?.starts_with("ok"));
    Ok(())
}

#[test]
fn a_held_store_names_its_holder() -> TestResult {
    let f = Fixture::new()?;
    f.write("a.txt", b"a\n")?;
    f.index()?;
    let held = strata::Store::open(&f.store)?;
    // No daemon can start on a held store, so `ls` runs here and waits for the store: two
    // seconds here instead of the default minute, long enough to say that it waits.
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&f.store)
        .arg("ls")
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .env("STRATA_LOCK_TIMEOUT", "2")
        .output()?;
    let err = String::from_utf8(output.stderr)?;
    assert_eq!(output.status.code(), Some(2), "{err}");
    let pid = std::process::id().to_string();
    assert!(
        err.contains("waiting for the store") && err.contains("up to 2 s"),
        "says that it waits: {err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("locked"), "{err}");
    assert!(last.contains(&pid), "names the holder pid: {err}");
    drop(held);
    f.ok(&["ls"])?;
    Ok(())
}

#[test]
fn init_and_mounts() -> TestResult {
    let f = Fixture::new()?;
    let out = f.ok(&["init", "--mount", "/work=/home/me/project:ro"])?;
    assert!(out.contains("initialised"), "{out}");
    // Again, as git: reinitialised, nothing changed, exit 0; a mount not there is refused.
    let out = f.ok(&["init"])?;
    assert!(
        out.starts_with("reinitialised existing strata store"),
        "{out}"
    );
    let err = f.fails(&["init", "--mount", "/other=/srv/other"], 2)?;
    assert!(err.contains("strata mount add"), "{err}");
    f.ok(&["mount", "add", "/data=/srv/data"])?;
    let err = f.fails(&["mount", "add", "/data=/elsewhere"], 2)?;
    assert!(err.contains("mount rm"), "{err}");
    let mounts = f.json(&["mount", "ls", "--json"])?;
    assert_eq!(mounts.as_array().map(Vec::len), Some(2), "{mounts}");
    f.ok(&["mount", "rm", "/work"])?;
    let mounts = f.json(&["mount", "ls", "--json"])?;
    assert_eq!(mounts[0]["agent_prefix"], "/data");
    let err = f.fails(&["mount", "add", "relative=/x"], 2)?;
    assert!(err.contains("relative"), "{err}");
    Ok(())
}

#[test]
fn index_creates_the_default_store_and_finds_it_from_below() -> TestResult {
    let f = Fixture::new()?;
    f.write("docs/guide.md", b"guide\n")?;
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["index", "--quiet"])
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .output()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("created a new strata store"));
    assert!(f.tree.join(".strata/store.redb").exists());
    // From a subdirectory, the store above is found; the store directory itself is never indexed.
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["ls", "--json"])
        .current_dir(f.tree.join("docs"))
        .env_remove("STRATA_STORE")
        .output()?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Value = serde_json::from_slice(&output.stdout)?;
    let rows = rows.as_array().ok_or("array")?;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("docs/guide.md"))
    );
    assert!(!Path::new(rows[0]["path"].as_str().unwrap_or("")).starts_with(f.tree.join(".strata")));
    Ok(())
}

/// The paths `strata ls` lists.
fn live_paths(f: &Fixture) -> TestResult<Vec<String>> {
    let ls = f.json(&["ls", "--json"])?;
    Ok(ls
        .as_array()
        .ok_or("array")?
        .iter()
        .filter_map(|row| row["path"].as_str().map(str::to_string))
        .collect())
}

#[test]
fn a_file_replaced_by_a_directory_is_deleted() -> TestResult {
    let f = Fixture::new()?;
    f.write("notes", b"a file at first\n")?;
    f.index()?;
    fs::remove_file(f.tree.join("notes"))?;
    f.write("notes/inner.md", b"now a directory\n")?;
    let summary = f.index()?;
    assert_eq!(count(&summary, "deleted"), 1, "{summary}");
    assert_eq!(count(&summary, "created"), 1, "{summary}");
    let paths = live_paths(&f)?;
    assert_eq!(paths.len(), 1, "only notes/inner.md lives: {paths:?}");
    assert!(paths[0].ends_with("notes/inner.md"), "{paths:?}");
    Ok(())
}

#[test]
fn a_file_replaced_by_a_symlink_is_deleted() -> TestResult {
    let f = Fixture::new()?;
    f.write("target.md", b"the link's target\n")?;
    f.write("notes.md", b"a regular file at first\n")?;
    f.index()?;
    fs::remove_file(f.tree.join("notes.md"))?;
    std::os::unix::fs::symlink("target.md", f.tree.join("notes.md"))?;
    let summary = f.index()?;
    assert_eq!(count(&summary, "deleted"), 1, "{summary}");
    let paths = live_paths(&f)?;
    assert_eq!(paths.len(), 1, "only target.md lives: {paths:?}");
    assert!(paths[0].ends_with("target.md"), "{paths:?}");
    Ok(())
}

/// A directory moved away and replaced by a symlink to its new place: links are not followed,
/// so the files under the old path are gone (they were kept live, never refreshed again: an
/// edit of the moved file left the old path's stale version live beside it).
#[test]
fn files_under_a_directory_replaced_by_a_symlink_are_deleted() -> TestResult {
    let f = Fixture::new()?;
    f.write("d/x.md", b"first\n")?;
    f.index()?;
    fs::rename(f.tree.join("d"), f.tree.join("e"))?;
    std::os::unix::fs::symlink("e", f.tree.join("d"))?;
    let summary = f.index()?;
    assert_eq!(count(&summary, "deleted"), 1, "{summary}");
    let paths = live_paths(&f)?;
    assert_eq!(paths.len(), 1, "only e/x.md lives: {paths:?}");
    assert!(paths[0].ends_with("e/x.md"), "{paths:?}");
    Ok(())
}

/// Skipped paths are not seen: an unreadable file is kept (it is still there), a file replaced by
/// a FIFO is deleted, a file under a directory now ignored is kept.
#[test]
fn skipped_files_are_kept_while_they_are_files() -> TestResult {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new()?;
    let locked = f.write("locked.md", b"secret\n")?;
    f.write("pipe.md", b"a file at first\n")?;
    f.write("gen/out.md", b"generated\n")?;
    f.index()?;
    f.write("locked.md", b"changed while unreadable\n")?;
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000))?;
    // As root, chmod does not deny reads: then the file is simply read again.
    let denied = fs::read(&locked).is_err();
    fs::remove_file(f.tree.join("pipe.md"))?;
    let status = Command::new("mkfifo")
        .arg(f.tree.join("pipe.md"))
        .status()?;
    assert!(status.success());
    fs::write(f.tree.join(".ignore"), b"gen/\n")?;
    let summary = f.index();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o644))?;
    let summary = summary?;
    assert_eq!(
        count(&summary, "deleted"),
        1,
        "only the FIFO's file: {summary}"
    );
    let paths = live_paths(&f)?;
    for kept in ["locked.md", "gen/out.md"] {
        assert!(paths.iter().any(|p| p.ends_with(kept)), "{kept}: {paths:?}");
    }
    assert!(!paths.iter().any(|p| p.ends_with("pipe.md")), "{paths:?}");
    if denied {
        assert!(
            summary.to_string().contains("locked.md"),
            "reported skipped: {summary}"
        );
    }
    Ok(())
}

#[test]
fn a_corrupt_store_error_says_to_run_fsck() -> TestResult {
    let f = Fixture::new()?;
    f.write("notes.md", b"hello\n")?;
    f.index()?;
    // Change the stored document's file type, so the object no longer hashes to what its
    // version says. Format 5 stores a file's fields as a tag (2), its char count (6) and its
    // file type.
    let file = f.store.join("store.redb");
    let mut raw = fs::read(&file)?;
    let needle = b"\x02\x06md";
    let mut changed = 0;
    for at in 0..raw.len().saturating_sub(needle.len()) {
        if raw[at..].starts_with(needle) {
            raw[at + needle.len() - 1] = b'x';
            changed += 1;
        }
    }
    assert!(changed > 0, "the document's fields are in the file");
    fs::write(&file, raw)?;
    let output = f.run(&["cat", "notes.md"])?;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr)?;
    assert!(stderr.contains("corrupt store"), "{stderr}");
    assert!(
        stderr.contains("`strata fsck` lists every problem"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn the_store_directory_is_never_indexed_even_as_a_root() -> TestResult {
    let f = Fixture::new()?;
    f.write("a.txt", b"a\n")?;
    // The store inside the tree, named on the command line as a root, or a directory inside it.
    let store = f.tree.join(".strata");
    let run = |args: &[&str]| -> TestResult<Output> {
        Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            .current_dir(&f.tree)
            .env_remove("STRATA_STORE")
            .output()?)
    };
    assert!(run(&["index", "--quiet"])?.status.success());
    let before = run(&["log", "--json"])?.stdout;
    for root in [".strata", ".strata/", "./.strata/../.strata"] {
        let output = run(&["index", root, "--quiet", "--json"])?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{root}: {stderr}");
        assert!(stderr.contains("store"), "{root}: {stderr}");
    }
    assert_eq!(
        run(&["log", "--json"])?.stdout,
        before,
        "nothing was written"
    );
    let ls: Value = serde_json::from_slice(&run(&["ls", "--all", "--json"])?.stdout)?;
    assert!(
        ls.as_array().ok_or("array")?.iter().all(|row| !row["path"]
            .as_str()
            .unwrap_or("")
            .starts_with(store.to_str().unwrap_or("?"))),
        "{ls}"
    );
    Ok(())
}

#[test]
fn diff_shows_a_deletion_against_dev_null() -> TestResult {
    let f = Fixture::new()?;
    f.write("gone.txt", b"one\ntwo\n")?;
    f.write("empty.txt", b"")?;
    f.index()?;
    fs::remove_file(f.tree.join("gone.txt"))?;
    fs::remove_file(f.tree.join("empty.txt"))?;
    f.index()?;
    let diff = f.ok(&["diff", "gone.txt"])?;
    assert!(diff.contains("--- a"), "{diff}");
    assert!(diff.contains("+++ /dev/null"), "{diff}");
    assert!(diff.contains("-one\n-two\n"), "{diff}");
    // An empty file deleted: no line changes, but the diff still says the file went.
    let diff = f.ok(&["diff", "empty.txt"])?;
    assert!(diff.contains("+++ /dev/null"), "{diff}");
    // And re-created: from /dev/null.
    f.write("gone.txt", b"one\ntwo\n")?;
    f.index()?;
    let diff = f.ok(&["diff", "gone.txt"])?;
    assert!(diff.contains("--- /dev/null"), "{diff}");
    assert!(diff.contains("+one\n+two\n"), "{diff}");
    Ok(())
}

#[test]
fn indexing_a_path_that_is_gone_records_its_deletion() -> TestResult {
    let f = Fixture::new()?;
    f.write("a.txt", b"a\n")?;
    f.write("dir/x.txt", b"x\n")?;
    f.write("dir/sub/y.txt", b"y\n")?;
    f.write("keep.txt", b"k\n")?;
    f.index()?;
    fs::remove_file(f.tree.join("a.txt"))?;
    fs::remove_dir_all(f.tree.join("dir"))?;
    let summary = f.json(&["index", "a.txt", "dir", "--quiet", "--json"])?;
    assert_eq!(count(&summary, "deleted"), 3, "{summary}");
    assert_eq!(count(&summary, "files"), 0, "{summary}");
    assert_eq!(count(&summary, "skipped"), 0, "{summary}");
    let ls = f.json(&["ls", "--json"])?;
    assert_eq!(ls.as_array().map(Vec::len), Some(1), "{ls}");
    // A path neither on disk nor in the store is still refused, and writes nothing.
    let log = f.ok(&["log", "--json"])?;
    let err = f.fails(&["index", "never/was"], 2)?;
    assert!(err.contains("never/was"), "{err}");
    assert_eq!(f.ok(&["log", "--json"])?, log);
    Ok(())
}

#[test]
fn show_says_why_a_denied_file_has_no_content() -> TestResult {
    let f = Fixture::new()?;
    f.write(".env", b"TOKEN=abc\n")?;
    f.index()?;
    let shown = f.ok(&["show", ".env"])?;
    let content = shown
        .lines()
        .find(|line| line.starts_with("content "))
        .ok_or("a content row")?;
    assert!(content.contains("denied"), "{shown}");
    assert!(!content.contains("[unread]"), "{shown}");
    Ok(())
}

#[test]
fn a_refused_index_creates_no_store() -> TestResult {
    let f = Fixture::new()?;
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["index", "no/such/dir", "--quiet"])
        .current_dir(&f.tree)
        .env_remove("STRATA_STORE")
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no/such/dir"), "{stderr}");
    assert!(!stderr.contains("created"), "{stderr}");
    assert!(!f.tree.join(".strata").exists(), "no store was left behind");
    Ok(())
}

#[test]
fn a_refused_session_new_creates_no_store() -> TestResult {
    let f = Fixture::new()?;
    for args in [
        &["session", "new", "--mount", "relative=/x"][..],
        &["session", "new", "--system-prompt", "no-such-prompt.md"][..],
        &["session", "new", "--id", "a\tb"][..],
        &["session", "new", "--default-filesystem", " "][..],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            .current_dir(&f.tree)
            .env_remove("STRATA_STORE")
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("created"), "{args:?}: {stderr}");
        assert!(
            !f.tree.join(".strata").exists(),
            "{args:?} left a store behind"
        );
    }
    Ok(())
}

#[test]
fn human_output_quotes_paths_with_control_characters() -> TestResult {
    let f = Fixture::new()?;
    f.write("two\nlines.txt", b"x\n")?;
    f.write("plain name.txt", b"y\n")?;
    f.index()?;
    let ls = f.ok(&["ls"])?;
    assert_eq!(
        ls.lines().count(),
        3,
        "a header and one line per file: {ls}"
    );
    assert!(ls.contains("  \"two\\nlines.txt\""), "{ls}");
    assert!(
        ls.contains("  plain name.txt\n"),
        "ordinary names stay as they are: {ls}"
    );
    let history = f.ok(&["history", "two\nlines.txt"])?;
    assert!(
        history.lines().next().is_some_and(|l| l.contains("\\n")),
        "{history}"
    );
    // JSON keeps the path exactly.
    let rows = f.json(&["ls", "--json"])?;
    assert!(rows.as_array().ok_or("array")?.iter().any(|r| {
        r["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/two\nlines.txt"))
    }));
    Ok(())
}

#[test]
fn an_index_run_is_one_log_row_and_a_read_inside_it_says_so() -> TestResult {
    let f = Fixture::new()?;
    // Over the 32 MiB a batch holds: the run commits at least two transactions.
    for n in 0..4u64 {
        f.write(&format!("big{n}.bin"), &incompressible(11 << 20, n + 1))?;
    }
    f.write("a.txt", b"a\n")?;
    let summary = f.index()?;
    let txs: Vec<u64> = summary["tx_ids"]
        .as_array()
        .ok_or("tx_ids")?
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(txs.len() >= 2, "{summary}");
    let (first, last) = (txs[0], txs[txs.len() - 1]);
    let log = f.json(&["log", "--json"])?;
    let records = log["records"].as_array().ok_or("records")?;
    assert_eq!(records.len(), txs.len(), "{log}");
    for record in records {
        assert_eq!(record["run"].as_u64(), Some(first), "{record}");
    }
    // The human log: one row for the run, one per transaction with --each.
    let grouped = f.ok(&["log"])?;
    let row = format!("{first}-{last} ");
    assert!(grouped.contains(&row), "{grouped}");
    assert!(
        grouped.contains(&format!("indexer run {first} ({} txs)", txs.len())),
        "{grouped}"
    );
    assert_eq!(
        grouped.lines().count(),
        3,
        "header, run, chain head: {grouped}"
    );
    let each = f.ok(&["log", "--each"])?;
    assert_eq!(each.lines().count(), 2 + txs.len(), "{each}");
    // A later run of one transaction is a plain row, and carries no run-wide note.
    f.write("a.txt", b"b\n")?;
    let again = f.index()?;
    let single = again["tx_ids"][0].as_u64().ok_or("a tx")?;
    let log = f.json(&["log", "--json", "--since", &last.to_string()])?;
    assert_eq!(log["records"][0]["run"].as_u64(), Some(single), "{log}");
    // Reading inside the run says so on stderr; at its end, or after, it does not.
    let inside = f.run(&["ls", "--as-of-tx", &first.to_string()])?;
    assert!(inside.status.success());
    let note = String::from_utf8(inside.stderr)?;
    assert!(
        note.contains(&format!("inside index run {first}"))
            && note.contains(&format!("--as-of-tx {last} sees the whole run")),
        "{note}"
    );
    for tx in [last, single] {
        let whole = f.run(&["show", "a.txt", "--as-of-tx", &tx.to_string()])?;
        assert!(whole.status.success(), "{whole:?}");
        assert_eq!(String::from_utf8(whole.stderr)?, "", "as of tx {tx}");
    }
    // The run headers chain: fsck is clean, also after a rebuild from the log.
    f.ok(&["fsck"])?;
    f.ok(&["fsck", "--rebuild"])?;
    Ok(())
}

#[test]
fn an_unchanged_reindex_without_a_daemon_leaves_the_store_file_as_it_was() -> TestResult {
    let f = Fixture::new()?;
    f.write("a.txt", b"a\n")?;
    f.write("sub/b.txt", b"b\n")?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    assert_eq!(count(&index()?, "created"), 2);
    let file = f.store.join("store.redb");
    let before = fs::read(&file)?;
    let again = index()?;
    assert_eq!(count(&again, "unchanged"), 2, "{again}");
    assert!(
        fs::read(&file)? == before,
        "nothing to write: the store was opened to write at no point"
    );
    // A change is written, and read back by the next command.
    f.write("a.txt", b"edited\n")?;
    let changed = index()?;
    assert_eq!(count(&changed, "updated"), 1, "{changed}");
    assert_eq!(f.ok(&["--no-daemon", "cat", "a.txt"])?, "edited\n");
    assert!(fs::read(&file)? != before);
    assert!(
        !f.store.join("store.lock").exists(),
        "the writer's lock file went with it"
    );
    Ok(())
}

/// The counts of an index summary: files, created, updated, unchanged, deleted.
fn tally(summary: &Value) -> [u64; 5] {
    ["files", "created", "updated", "unchanged", "deleted"].map(|key| count(summary, key))
}

#[test]
fn the_stat_cache_kept_beside_the_store_never_hides_a_change() -> TestResult {
    let f = Fixture::new()?;
    let index = |root: &str| f.json(&["--no-daemon", "index", root, "--quiet", "--json"]);
    f.write("keep.txt", b"keep\n")?;
    f.write("dir/a.txt", b"aaaa\n")?;
    f.write("dir/b.txt", b"bbbb\n")?;
    f.write("dir/sub/c.txt", b"cccc\n")?;
    assert_eq!(tally(&index(".")?), [4, 4, 0, 0, 0]);
    // The first scan wrote: no stat file yet. An unchanged run that writes nothing keeps one.
    let file = f.store.join("stat.cache");
    assert!(!file.exists());
    assert_eq!(tally(&index(".")?), [4, 0, 0, 4, 0]);
    let kept = fs::read(&file)?;
    // Taken from the file: nothing read, the file left as it was.
    let again = index(".")?;
    assert_eq!(tally(&again), [4, 0, 0, 4, 0]);
    assert_eq!(count(&again, "bytes_read"), 0);
    assert_eq!(fs::read(&file)?, kept);

    // A file's bytes changed without changing its size, its mtime put back (within the second
    // of the last run): found through the file's entry.
    f.write("dir/a.txt", b"AAAA\n")?;
    assert_eq!(tally(&index(".")?), [4, 0, 1, 3, 0]);
    assert_eq!(tally(&index(".")?), [4, 0, 0, 4, 0]);
    let kept = fs::read(&file)?;

    // Another process's write to the store (an eviction, which drops the file's stat cache row
    // and knows nothing of the stat file): the file no longer holds the store's state, and the
    // evicted file is indexed again although its entry there still vouches for it.
    f.ok(&["--no-daemon", "evict", "dir/b.txt", "--yes"])?;
    assert_eq!(tally(&index(".")?), [4, 1, 0, 3, 0]);
    // The same with the stale file put back after the write.
    f.ok(&["--no-daemon", "evict", "dir/b.txt", "--yes"])?;
    fs::write(&file, &kept)?;
    assert_eq!(tally(&index(".")?), [4, 1, 0, 3, 0]);
    assert_eq!(tally(&index(".")?), [4, 0, 0, 4, 0]);
    assert_eq!(tally(&index(".")?), [4, 0, 0, 4, 0]);
    assert!(f.ok(&["--no-daemon", "ls"])?.contains("dir/b.txt"));

    // A damaged or truncated file is no file: the tables are read, and the file written afresh.
    let kept = fs::read(&file)?;
    let mut damaged = kept.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    fs::write(&file, &damaged)?;
    f.write("dir/sub/c.txt", b"CCCC\n")?;
    assert_eq!(tally(&index(".")?), [4, 0, 1, 3, 0]);
    fs::write(&file, &kept[..kept.len() / 2])?;
    assert_eq!(tally(&index(".")?), [4, 0, 0, 4, 0]);
    assert_eq!(fs::read(&file)?.len(), kept.len(), "written afresh");

    // Other roots: the tables answer for them (and the file is kept for them from then on).
    assert_eq!(tally(&index("dir")?), [3, 0, 0, 3, 0]);
    assert_eq!(tally(&index("dir")?), [3, 0, 0, 3, 0]);
    fs::remove_file(f.tree.join("keep.txt"))?;
    assert_eq!(tally(&index(".")?), [3, 0, 0, 3, 1]);
    assert_eq!(tally(&index(".")?), [3, 0, 0, 3, 0]);
    f.ok(&["--no-daemon", "fsck"])?;
    Ok(())
}

/// The stat file marks the files its run found vouched for and not denied, so that a run under
/// the same deny rules asks them no more: a deny rule added since, or a file that run never met
/// (ignored then), is asked again.
#[test]
fn the_stat_file_spares_no_deny_rule_it_was_not_checked_under() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    let settings = |text: &str| fs::write(f.store.join("settings.toml"), text);
    for name in ["a.txt", "b.txt", "c.txt"] {
        f.write(name, name.as_bytes())?;
    }
    assert_eq!(tally(&index()?), [3, 3, 0, 0, 0]);
    assert_eq!(tally(&index()?), [3, 0, 0, 3, 0]);
    let file = f.store.join("stat.cache");
    assert!(file.exists());
    // A deny rule added, nothing written to the store since the file was kept: denied at once.
    settings("deny = [\"a.txt\"]\n")?;
    assert_eq!(count(&index()?, "denied"), 1);
    // b.txt ignored and denied at once: the run that keeps the file (it writes nothing) does
    // not meet it, so its entry is not marked checked under these rules.
    settings("ignore = [\"b.txt\"]\ndeny = [\"a.txt\", \"b.txt\"]\n")?;
    let db = f.store.join("store.redb");
    index()?;
    let before = fs::read(&db)?;
    index()?;
    assert!(fs::read(&db)? == before, "an unchanged re-index wrote");
    assert!(file.exists());
    // Ignored no more, under the same deny rules: the file's entry vouches for b.txt, and it is
    // denied all the same.
    settings("deny = [\"a.txt\", \"b.txt\"]\n")?;
    let summary = index()?;
    assert_eq!(count(&summary, "denied"), 2, "{summary}");
    assert_eq!(count(&index()?, "denied"), 2);
    f.ok(&["--no-daemon", "fsck"])?;
    Ok(())
}

/// A run that keeps the stat file leaves out the stored paths it found deleted before (gone, and
/// tombstoned in that state of the store), so later runs neither stat them nor look them up; a
/// stored path without a stat cache entry still on disk (a denied file's stub, its file now
/// ignored) stays, and its deletion is seen.
#[test]
fn the_stat_file_leaves_out_only_the_paths_deleted_before() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    let has = |bytes: &[u8], name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
    for name in ["a.txt", "c.txt", ".env"] {
        f.write(name, name.as_bytes())?;
    }
    assert_eq!(count(&index()?, "denied"), 1);
    fs::remove_file(f.tree.join("c.txt"))?;
    assert_eq!(count(&index()?, "deleted"), 1);
    // .env is stored (as a stub) without a stat cache entry; ignored now, it stays on disk.
    fs::write(f.store.join("settings.toml"), "ignore = [\".env\"]\n")?;
    let db = f.store.join("store.redb");
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    let before = fs::read(&db)?;
    let kept = fs::read(f.store.join("stat.cache"))?;
    assert!(!has(&kept, b"c.txt"), "a path deleted before is kept");
    // (Its whole path: the deny globs in the file's key name `.env` too.)
    assert!(
        has(&kept, b"/.env"),
        "a stored path still on disk is left out"
    );
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    assert!(fs::read(&db)? == before, "an unchanged re-index wrote");
    // Deleted while ignored: a deletion all the same.
    fs::remove_file(f.tree.join(".env"))?;
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 1]);
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    f.ok(&["--no-daemon", "fsck"])?;
    Ok(())
}

/// Through runs that take the stat file (each change follows two unchanged runs, the second
/// from the file): a path deleted, recreated and deleted again, a rename to a name that sorts
/// before every other, a directory replaced by a file, and one replaced by a symlink are each
/// seen once, and the runs after them are unchanged.
#[test]
fn the_stat_file_misses_no_recreation_rename_or_replaced_directory() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    let file = f.store.join("stat.cache");
    let settle = |files: u64| -> TestResult {
        for _ in 0..2 {
            let summary = index()?;
            let unchanged = files - count(&summary, "skipped");
            assert_eq!(tally(&summary), [files, 0, 0, unchanged, 0], "{summary}");
        }
        assert!(file.exists());
        Ok(())
    };
    f.write("p.txt", b"pppp\n")?;
    f.write("d/x.txt", b"xxxx\n")?;
    f.write("d/y.txt", b"yyyy\n")?;
    f.write("e/z.txt", b"zzzz\n")?;
    f.write("e/w.txt", b"wwww\n")?;
    assert_eq!(tally(&index()?), [5, 5, 0, 0, 0]);
    settle(5)?;
    fs::remove_file(f.tree.join("p.txt"))?;
    assert_eq!(tally(&index()?), [4, 0, 0, 4, 1]);
    settle(4)?;
    f.write("p.txt", b"PPPP\n")?;
    assert_eq!(tally(&index()?), [5, 1, 0, 4, 0]);
    settle(5)?;
    fs::remove_file(f.tree.join("p.txt"))?;
    assert_eq!(tally(&index()?), [4, 0, 0, 4, 1]);
    settle(4)?;
    // A rename within its directory, to a name before the others in bytes.
    fs::rename(f.tree.join("d/y.txt"), f.tree.join("d/-y.txt"))?;
    assert_eq!(tally(&index()?), [4, 1, 0, 3, 1]);
    settle(4)?;
    // A directory replaced by a file of its name.
    fs::remove_dir_all(f.tree.join("d"))?;
    f.write("d", b"dddd\n")?;
    assert_eq!(tally(&index()?), [3, 1, 0, 2, 2]);
    settle(3)?;
    // A directory replaced by a symlink to a directory of the same files.
    fs::rename(f.tree.join("e"), f.tree.join("e2"))?;
    std::os::unix::fs::symlink(f.tree.join("e2"), f.tree.join("e"))?;
    let summary = index()?;
    assert_eq!(count(&summary, "deleted"), 2, "{summary}");
    settle(count(&summary, "files"))?;
    let listed = f.ok(&["--no-daemon", "ls"])?;
    assert!(
        !listed.contains("e/z.txt") && listed.contains("e2/z.txt"),
        "{listed}"
    );
    f.ok(&["--no-daemon", "fsck"])?;
    Ok(())
}

/// The files of store directory `from` (no subdirectory, lock or socket) copied into `to`,
/// without the stat file (nothing when there is no store yet).
fn copy_store_without_stat_file(from: &Path, to: &Path) -> TestResult {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    if !from.exists() {
        return Ok(());
    }
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if ["store.lock", "strata.sock", "stat.cache"]
            .iter()
            .any(|skipped| name == *skipped)
        {
            continue;
        }
        if entry.file_type()?.is_file() {
            fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// The stat file stands for the stat cache and the stored paths: each index run answers as the
/// same run on a copy of the store without the file (which reads the tables), and leaves the
/// same files listed, whatever changed between runs that wrote nothing to the store (the
/// settings' ignore and deny globs, files removed or changed while ignored or denied).
#[test]
fn an_index_run_answers_the_same_with_the_stat_file_as_without_it() -> TestResult {
    let f = Fixture::new()?;
    let copy = f.store.with_file_name("copy");
    let index_both = |from_file: bool| -> TestResult<[u64; 5]> {
        copy_store_without_stat_file(&f.store, &copy)?;
        let args = ["--no-daemon", "index", ".", "--quiet", "--json"];
        let output = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&copy)
            .args(args)
            .current_dir(&f.tree)
            .env_remove("STRATA_STORE")
            .output()?;
        assert!(output.status.success(), "{output:?}");
        let without: Value = serde_json::from_slice(&output.stdout)?;
        assert_eq!(f.store.join("stat.cache").exists(), from_file);
        let with = f.json(&args)?;
        assert_eq!(tally(&with), tally(&without));
        for key in ["skipped", "denied", "ignored"] {
            assert_eq!(with.get(key), without.get(key), "{key}");
        }
        let listed = |store: &Path| -> TestResult<Vec<String>> {
            let output = Command::new(env!("CARGO_BIN_EXE_strata"))
                .arg("--store")
                .arg(store)
                .args(["--no-daemon", "ls"])
                .current_dir(&f.tree)
                .env_remove("STRATA_STORE")
                .output()?;
            assert!(output.status.success(), "{output:?}");
            // Each listed file without the time of its last change (each run's own).
            Ok(String::from_utf8(output.stdout)?
                .lines()
                .map(|line| {
                    let mut words: Vec<&str> = line.split_whitespace().collect();
                    if words.len() > 2 {
                        words.remove(2);
                    }
                    words.join(" ")
                })
                .collect::<Vec<_>>())
        };
        assert_eq!(listed(&f.store)?, listed(&copy)?);
        Ok(tally(&with))
    };
    let settings = |text: &str| fs::write(f.store.join("settings.toml"), text);
    for name in ["a.txt", "b.txt", "dir/c.txt", "dir/d.txt", "dir/e.txt"] {
        f.write(name, name.as_bytes())?;
    }
    assert_eq!(index_both(false)?, [5, 5, 0, 0, 0]);
    assert_eq!(index_both(false)?, [5, 0, 0, 5, 0]);
    assert_eq!(index_both(true)?, [5, 0, 0, 5, 0]);
    // Stored files now ignored or denied: neither deleted nor read.
    settings("ignore = [\"c.txt\"]\ndeny = [\"**/d.txt\"]\n")?;
    index_both(true)?;
    index_both(true)?;
    // Changed and removed while ignored or denied.
    f.write("dir/c.txt", b"changed while ignored")?;
    fs::remove_file(f.tree.join("dir/d.txt"))?;
    index_both(true)?;
    index_both(fs::metadata(f.store.join("stat.cache")).is_ok())?;
    // The globs gone again.
    settings("")?;
    index_both(fs::metadata(f.store.join("stat.cache")).is_ok())?;
    index_both(fs::metadata(f.store.join("stat.cache")).is_ok())?;
    assert_eq!(
        index_both(fs::metadata(f.store.join("stat.cache")).is_ok())?,
        [4, 0, 0, 4, 0]
    );
    Ok(())
}

/// An unchanged re-index after a file was deleted writes nothing: the deleted path, still
/// among the store's paths (its history), has no stat cache entry left to remove. Each such run
/// committed that removal again (18 fdatasyncs a run, for ever), so the stat file was never
/// kept again either.
#[test]
fn an_unchanged_index_after_a_deletion_writes_nothing() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    f.write("a.txt", b"a\n")?;
    f.write("b.txt", b"b\n")?;
    assert_eq!(tally(&index()?), [2, 2, 0, 0, 0]);
    fs::remove_file(f.tree.join("b.txt"))?;
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 1]);
    let db = f.store.join("store.redb");
    let before = fs::read(&db)?;
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    assert!(fs::read(&db)? == before, "an unchanged re-index wrote");
    // That run kept the stat file, and the next takes it.
    let kept = fs::read(f.store.join("stat.cache"))?;
    assert_eq!(tally(&index()?), [1, 0, 0, 1, 0]);
    assert!(fs::read(&db)? == before, "an unchanged re-index wrote");
    assert_eq!(fs::read(f.store.join("stat.cache"))?, kept);
    Ok(())
}

#[test]
fn directory_listings_kept_between_index_runs_never_hide_a_change() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    f.write(".gitignore", b"ignored.txt\n")?;
    f.write("ignored.txt", b"not indexed at first\n")?;
    f.write("keep.txt", b"keep\n")?;
    f.write("dir/a.txt", b"aaaa\n")?;
    f.write("dir/b.txt", b"bbbb\n")?;
    f.write("dir/sub/c.txt", b"cccc\n")?;
    f.write("gone/f.txt", b"ffff\n")?;
    // Directories changed less than a second before a scan starts are listed again and not
    // kept: let these settle so that the runs below take them from the cache.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(tally(&index()?), [6, 6, 0, 0, 0]);
    let cache = f.store.join("dirs.cache");
    let kept = fs::read(&cache)?;
    assert!(!kept.is_empty());
    // Nothing changed: every listing held, so the cache is not written again.
    assert_eq!(tally(&index()?), [6, 0, 0, 6, 0]);
    assert_eq!(fs::read(&cache)?, kept);

    // Changes that leave every directory's stamp as it was: an ignore file rewritten in place
    // (the file it ignored is now indexed) and a file's bytes changed without changing its
    // size, its mtime put back, within the second of the last run.
    f.write(".gitignore", b"xgnored.txt\n")?;
    f.write("dir/a.txt", b"AAAA\n")?;
    assert_eq!(tally(&index()?), [7, 1, 2, 4, 0]);
    assert_eq!(
        fs::read(&cache)?,
        kept,
        "every listing was taken from the cache"
    );

    // Entries added, removed and renamed in directories that were kept; a directory made and
    // one removed.
    f.write("dir/new.txt", b"new\n")?;
    fs::remove_file(f.tree.join("dir/b.txt"))?;
    fs::rename(f.tree.join("dir/sub/c.txt"), f.tree.join("dir/sub/d.txt"))?;
    f.write("dir/fresh/e.txt", b"eeee\n")?;
    fs::remove_dir_all(f.tree.join("gone"))?;
    assert_eq!(tally(&index()?), [7, 3, 0, 4, 3]);
    assert_eq!(tally(&index()?), [7, 0, 0, 7, 0]);
    let ls = f.ok(&["--no-daemon", "ls"])?;
    for live in [
        "dir/new.txt",
        "dir/sub/d.txt",
        "dir/fresh/e.txt",
        "ignored.txt",
    ] {
        assert!(ls.contains(live), "{live} in {ls}");
    }

    // A damaged cache is no cache: every directory is listed, and the cache written afresh.
    fs::write(&cache, b"strata-dirs-v1\n\0 damaged")?;
    f.write("dir/sub/late.txt", b"late\n")?;
    assert_eq!(tally(&index()?), [8, 1, 0, 7, 0]);
    assert_ne!(fs::read(&cache)?, b"strata-dirs-v1\n\0 damaged");
    Ok(())
}

/// The directories the store file in `store` numbers (`directories`, format 9), sorted, after
/// checking that `directory_paths` gives them back.
fn numbered_directories(store: &Path) -> TestResult<Vec<String>> {
    use crate::store::{DIRECTORIES, DIRECTORY_PATHS};
    use redb::{ReadableDatabase, ReadableTable};
    let db = redb::Database::open(store.join("store.redb"))?;
    let rtx = db.begin_read()?;
    let mut dirs = Vec::new();
    for row in rtx.open_table(DIRECTORIES)?.iter()? {
        dirs.push(row?.0.value().1.to_string());
    }
    let mut back = Vec::new();
    for row in rtx.open_table(DIRECTORY_PATHS)?.iter()? {
        back.push(row?.1.value().1.to_string());
    }
    back.sort();
    assert_eq!(dirs, back);
    Ok(dirs)
}

/// A directory deleted or renamed in the tree keeps its number while the store lists its
/// deleted files (from store format 10 their paths are keyed by it too, and a deleted file
/// keeps its history), the new name gets a number, a directory made again takes its old one
/// and its files answer, and fsck is clean after each run. (Evicting a directory's last file
/// frees it: `dirnum::tests`.)
#[test]
fn deleted_and_renamed_directories_keep_their_numbers_while_paths_use_them() -> TestResult {
    let f = Fixture::new()?;
    let index = || f.json(&["--no-daemon", "index", ".", "--quiet", "--json"]);
    let root = f.tree.to_str().ok_or("tree path")?.to_string();
    let dir = |rel: &str| format!("{root}/{rel}");
    f.write("top.txt", b"top\n")?;
    f.write("build/out.o", b"object\n")?;
    f.write("build/tmp/x.o", b"x\n")?;
    f.write("old/name.txt", b"renamed\n")?;
    f.write("parent/own.txt", b"own\n")?;
    f.write("parent/child/kept.txt", b"kept\n")?;
    assert_eq!(tally(&index()?), [6, 6, 0, 0, 0]);
    assert_eq!(
        numbered_directories(&f.store)?,
        [
            dir(""),
            dir("build/"),
            dir("build/tmp/"),
            dir("old/"),
            dir("parent/"),
            dir("parent/child/")
        ]
    );
    fs::remove_dir_all(f.tree.join("build"))?;
    fs::rename(f.tree.join("old"), f.tree.join("new"))?;
    fs::remove_file(f.tree.join("parent/own.txt"))?;
    let summary = index()?;
    assert_eq!(count(&summary, "deleted"), 4, "{summary}");
    let all = [
        dir(""),
        dir("build/"),
        dir("build/tmp/"),
        dir("new/"),
        dir("old/"),
        dir("parent/"),
        dir("parent/child/"),
    ];
    assert_eq!(numbered_directories(&f.store)?, all);
    assert!(f.ok(&["--no-daemon", "fsck"])?.starts_with("ok"));
    // Made again: its old number, and its file answers.
    f.write("build/out.o", b"object again\n")?;
    assert_eq!(count(&index()?, "files"), 4);
    assert_eq!(numbered_directories(&f.store)?, all);
    assert_eq!(
        f.ok(&["--no-daemon", "cat", "build/out.o"])?,
        "object again\n"
    );
    let again = index()?;
    assert_eq!(count(&again, "unchanged"), 4, "{again}");
    assert!(f.ok(&["--no-daemon", "fsck"])?.starts_with("ok"));
    Ok(())
}

/// Git's global excludes apply to scans: the file `core.excludesFile` names in a git config file
/// (any case of the section and key; another section's key is not it), else `$XDG_CONFIG_HOME/git/ignore`; with neither (a config file that
/// does not name the key) nothing is excluded. Each case indexes into a store of its own, with
/// the config files of the test's own home.
#[test]
fn git_global_excludes_apply_from_the_config_or_the_default_file() -> TestResult {
    let f = Fixture::new()?;
    f.write("a.txt", b"a\n")?;
    f.write("b.skipme", b"b\n")?;
    let home = f.tree.with_file_name("home");
    let xdg = f.tree.with_file_name("xdg");
    fs::create_dir_all(&home)?;
    fs::create_dir_all(xdg.join("git"))?;
    let system = home.join("system-gitconfig");
    fs::write(&system, "[user]\n\tname = nobody\n")?;
    let files_with = |store: &str, global: Option<&Path>| -> TestResult<u64> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command
            .arg("--store")
            .arg(f.tree.with_file_name(store))
            .args(["--no-daemon", "index", ".", "--quiet", "--json"])
            .current_dir(&f.tree)
            .env_remove("STRATA_STORE")
            .env_remove("GIT_CONFIG_GLOBAL")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", &xdg)
            .env("GIT_CONFIG_SYSTEM", &system);
        if let Some(global) = global {
            command.env("GIT_CONFIG_GLOBAL", global);
        }
        let output = command.output()?;
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary: Value = serde_json::from_slice(&output.stdout)?;
        Ok(count(&summary, "files"))
    };
    let files = |store: &str| files_with(store, None);
    // No config file names the key and no default file: nothing excluded.
    fs::write(home.join(".gitconfig"), "[core]\n\tautocrlf = false\n")?;
    assert_eq!(files("s1")?, 2);
    // Named in ~/.gitconfig, in another case.
    let excludes = home.join("global-excludes");
    fs::write(&excludes, "*.skipme\n")?;
    fs::write(
        home.join(".gitconfig"),
        format!("[core]\n\tExcludesFile = {}\n", excludes.display()),
    )?;
    assert_eq!(files("s2")?, 1);
    // Named in the system file only.
    fs::write(home.join(".gitconfig"), "[core]\n\tautocrlf = false\n")?;
    fs::write(
        &system,
        format!("[core]\n\texcludesfile = {}\n", excludes.display()),
    )?;
    assert_eq!(files("s3")?, 1);
    // Named nowhere: the default file under $XDG_CONFIG_HOME.
    fs::write(&system, "[user]\n\tname = nobody\n")?;
    fs::write(xdg.join("git/ignore"), "*.skipme\n")?;
    assert_eq!(files("s4")?, 1);
    fs::remove_file(xdg.join("git/ignore"))?;
    assert_eq!(files("s5")?, 2);
    // Named in $XDG_CONFIG_HOME/git/config under another section: not `core.excludesFile`, so
    // git excludes nothing (the `ignore` crate read the key in any section), and strata neither.
    fs::write(
        xdg.join("git/config"),
        format!("[user]\n\tEXCLUDESFILE = {}\n", excludes.display()),
    )?;
    assert_eq!(files("s6")?, 2);
    fs::write(
        xdg.join("git/config"),
        format!("[Core]\n\tEXCLUDESFILE = {}\n", excludes.display()),
    )?;
    assert_eq!(files("s6b")?, 1);
    fs::remove_file(xdg.join("git/config"))?;
    // Named in the file $GIT_CONFIG_GLOBAL names.
    let global = home.join("global-gitconfig");
    fs::write(
        &global,
        format!("[core]\n\texcludesFile = {}\n", excludes.display()),
    )?;
    assert_eq!(files_with("s7", Some(&global))?, 1);
    assert_eq!(files("s8")?, 2);
    Ok(())
}

/// A scan whose writer thread fails (the store file may grow no further: `ulimit -f`) stops with
/// that error instead of waiting for it, says the disk is full (or a limit was hit) and what to
/// do, keeps what was committed before, and does not mark the store damaged: redb's handle
/// answers `PreviousIo` after the failed write, which a read meeting it took for damage (the
/// planner's read raced the writer's error). The next run, without the limit and without
/// `strata fsck`, indexes the rest. Four failed runs, as the race went either way.
#[test]
fn a_scan_whose_writer_fails_reports_it_and_the_next_run_indexes_the_rest() -> TestResult {
    let f = Fixture::new()?;
    f.write("first.txt", b"first\n")?;
    assert_eq!(
        tally(&f.json(&["--no-daemon", "index", ".", "--quiet", "--json"])?),
        [1, 1, 0, 0, 0]
    );
    let before = (
        f.ok(&["--no-daemon", "ls"])?,
        f.ok(&["--no-daemon", "log"])?,
    );
    // 24 MiB that do not compress, in files of 1 MiB: the planner hands batches of 8 MiB to the
    // writer during the walk.
    for i in 0..24 {
        f.write(
            &format!("big/{i:02}.bin"),
            &incompressible(1 << 20, 0x9e37 + i),
        )?;
    }
    for _ in 0..4 {
        let size = fs::metadata(f.store.join("store.redb"))?.len();
        // Blocks of 512 bytes (dash) or 1 024 (bash): either way well below 24 MiB more.
        let blocks = (size + (1 << 20)) / 512;
        let output = Command::new("sh")
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -f \"$1\" && shift && exec \"$@\"")
            .arg("sh")
            .arg(blocks.to_string())
            .arg(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&f.store)
            .args(["--no-daemon", "index", ".", "--quiet", "--json"])
            .current_dir(&f.tree)
            .env_remove("STRATA_STORE")
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "the index did not fail: {stderr}");
        assert!(
            stderr.contains("the disk is full")
                && stderr.contains("free space")
                && !stderr.contains("damaged"),
            "the error does not say the disk is full and what to do: {stderr}"
        );
        let marker = f.store.join("store.damaged");
        assert!(
            !marker.exists(),
            "the store was marked damaged: {}",
            fs::read_to_string(&marker).unwrap_or_default()
        );
        // The store answers as before the failed index, and takes writes without fsck.
        assert_eq!(
            (
                f.ok(&["--no-daemon", "ls"])?,
                f.ok(&["--no-daemon", "log"])?
            ),
            before
        );
    }
    let summary = f.json(&["--no-daemon", "index", ".", "--quiet", "--json"])?;
    assert_eq!(count(&summary, "files"), 25, "{summary}");
    assert_eq!(
        count(&summary, "created") + count(&summary, "unchanged"),
        25,
        "{summary}"
    );
    assert_eq!(
        tally(&f.json(&["--no-daemon", "index", ".", "--quiet", "--json"])?),
        [25, 0, 0, 25, 0]
    );
    f.ok(&["--no-daemon", "fsck"])?;
    Ok(())
}

/// The names a store indexed, and the ones git ignores (`None` without git).
type IndexedAndIgnored = (Vec<String>, Option<Vec<String>>);

/// What sets a command's git environment to home `home` alone: no system config, no XDG
/// directory, and `$GIT_CONFIG_GLOBAL` as `global` says (unset when `None`).
fn git_home<'a>(home: &'a Path, global: Option<&'a str>) -> impl Fn(&mut Command) + 'a {
    move |command: &mut Command| {
        command
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            .env_remove("GIT_CONFIG_SYSTEM");
        if let Some(global) = global {
            command.env("GIT_CONFIG_GLOBAL", global);
        }
    }
}

/// Indexes `f`'s tree with the environment `isolate` sets and gives the names of the files the
/// index holds (sorted), and the ones of `names` that `git check-ignore` says git ignores in the
/// same environment (`None` without git).
fn indexed_and_git_ignored(
    f: &Fixture,
    isolate: &dyn Fn(&mut Command),
    names: &[&str],
) -> Result<IndexedAndIgnored, Box<dyn std::error::Error>> {
    let mut index = crate::support::strata_at(&f.store, &f.tree, &["index", "."]);
    isolate(index.env("STRATA_NO_DAEMON", "1"));
    let output = index.output()?;
    assert!(output.status.success(), "{output:?}");
    let mut ls = crate::support::strata_at(&f.store, &f.tree, &["ls", "--json"]);
    isolate(ls.env("STRATA_NO_DAEMON", "1"));
    let output = ls.output()?;
    assert!(output.status.success(), "{output:?}");
    let rows: Value = serde_json::from_slice(&output.stdout)?;
    let mut indexed: Vec<String> = rows
        .as_array()
        .ok_or("ls --json gives an array")?
        .iter()
        .filter_map(|row| row["path"].as_str())
        .filter_map(|path| path.rsplit('/').next())
        .map(str::to_string)
        .collect();
    indexed.sort_unstable();
    let mut git = Command::new("git");
    git.args(["init", "-q", "."]).current_dir(&f.tree);
    isolate(&mut git);
    if !git.status().is_ok_and(|s| s.success()) {
        return Ok((indexed, None));
    }
    let mut check = Command::new("git");
    check.arg("check-ignore").args(names).current_dir(&f.tree);
    isolate(&mut check);
    let ignored = String::from_utf8(check.output()?.stdout)?;
    Ok((indexed, Some(ignored.lines().map(str::to_string).collect())))
}

/// Git's global excludes kept in a file that `~/.gitconfig` includes (`[include] path`), as
/// shared dotfiles often do: the index leaves out what they ignore, as `git check-ignore` says
/// git does (the `ignore` crate's own search never followed includes).
#[test]
fn global_excludes_set_in_an_included_git_config_are_honoured() -> TestResult {
    let f = Fixture::new()?;
    let home = f.tree.parent().ok_or("tree has a parent")?.join("home");
    fs::create_dir_all(home.join("dots"))?;
    fs::write(
        home.join(".gitconfig"),
        "[include]\n\tpath = dots/git.inc\n",
    )?;
    fs::write(
        home.join("dots/git.inc"),
        "[core]\n\texcludesFile = ~/dots/ignore\n",
    )?;
    fs::write(home.join("dots/ignore"), "*.secret\n")?;
    f.write("kept.txt", b"kept")?;
    f.write("key.secret", b"hidden")?;
    f.write("sub/more.secret", b"hidden")?;
    let isolate = git_home(&home, None);
    let names = ["kept.txt", "key.secret", "sub/more.secret"];
    let (indexed, git_ignored) = indexed_and_git_ignored(&f, &isolate, &names)?;
    assert_eq!(indexed, ["kept.txt"]);
    // Git, in the same environment, ignores the same files.
    if let Some(git_ignored) = git_ignored {
        assert_eq!(git_ignored, ["key.secret", "sub/more.secret"]);
    }
    Ok(())
}

/// `GIT_CONFIG_GLOBAL` set empty names no file: git then reads no global config at all (not
/// `~/.gitconfig`), so an excludes file named there excludes nothing, as `git check-ignore`
/// says; strata took an empty value for an unset one and left the file out.
#[test]
fn an_empty_git_config_global_reads_no_global_config() -> TestResult {
    let f = Fixture::new()?;
    let home = f.tree.parent().ok_or("tree has a parent")?.join("home");
    fs::create_dir_all(&home)?;
    fs::write(
        home.join(".gitconfig"),
        "[core]\n\texcludesFile = ~/ignore\n",
    )?;
    fs::write(home.join("ignore"), "*.secret\n")?;
    f.write("kept.txt", b"kept")?;
    f.write("key.secret", b"not ignored")?;
    let isolate = git_home(&home, Some(""));
    let (indexed, git_ignored) =
        indexed_and_git_ignored(&f, &isolate, &["kept.txt", "key.secret"])?;
    assert_eq!(indexed, ["kept.txt", "key.secret"]);
    // Git, in the same environment, ignores neither file.
    if let Some(git_ignored) = git_ignored {
        assert!(git_ignored.is_empty(), "{git_ignored:?}");
    }
    Ok(())
}
