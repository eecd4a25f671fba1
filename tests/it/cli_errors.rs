//! The CLI's bad inputs as a table: each case's exit code and the first line of its stderr, so
//! that every message stays true and every hint names a command that works there (issue 13).
//! Also: index reporting (skips counted by kind on stderr, counts per file once), `ls` and `diff`
//! answers, and the README's tour run as written.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use crate::support::TestResult;

/// A tree `t/` with a store beside it (`store/`), a project directory with its own `.strata/`,
/// and the files and special files the cases need.
struct Bench {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    tree: PathBuf,
    store: PathBuf,
}

impl Bench {
    fn new() -> TestResult<Self> {
        let tmp = tempfile::tempdir()?;
        let root = fs::canonicalize(tmp.path())?;
        let tree = root.join("t");
        fs::create_dir_all(tree.join("sub"))?;
        let bench = Bench {
            _tmp: tmp,
            store: root.join("store"),
            tree,
            root,
        };
        Ok(bench)
    }

    /// Writes a file under the tree, its mtime an hour back (the racy-clean rule then vouches).
    fn write(&self, rel: &str, bytes: &[u8]) -> TestResult<PathBuf> {
        let path = self.tree.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, bytes)?;
        fs::File::options()
            .write(true)
            .open(&path)?
            .set_modified(SystemTime::now() - Duration::from_secs(3600))?;
        Ok(path)
    }

    /// `strata ARGS` in `dir` with the environment `env`, in this process's engine (no daemon).
    fn run_in(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> TestResult<Output> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command
            .args(args)
            .current_dir(dir)
            .env_remove("STRATA_STORE")
            .env("STRATA_NO_DAEMON", "1");
        for (key, value) in env {
            command.env(key, value);
        }
        Ok(command.output()?)
    }

    /// `strata --store STORE ARGS` in the tree.
    fn run(&self, args: &[&str]) -> TestResult<Output> {
        let store = self.store.display().to_string();
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        self.run_in(&self.tree, &all, &[])
    }

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
}

/// One bad (or once-vague) input: where it runs, its arguments and environment, the exit code
/// and a text the first line of stderr must start with and one it must contain.
struct Case {
    /// The item (for failure messages).
    item: &'static str,
    /// Run without `--store` (the store is found, or not, from the directory).
    bare: bool,
    /// The directory to run in, relative to the bench root ("" for the tree).
    dir: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    code: i32,
    starts: String,
    contains: String,
}

fn case(item: &'static str, args: &[&str], code: i32, starts: &str, contains: &str) -> Case {
    Case {
        item,
        bare: false,
        dir: "",
        args: args.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        code,
        starts: starts.to_string(),
        contains: contains.to_string(),
    }
}

/// Runs every case; returns one line per failed case.
fn run_cases(bench: &Bench, cases: &[Case]) -> TestResult<Vec<String>> {
    let mut failures = Vec::new();
    for case in cases {
        let dir = if case.dir.is_empty() {
            bench.tree.clone()
        } else {
            bench.root.join(case.dir)
        };
        let mut args: Vec<&str> = Vec::new();
        let store = bench.store.display().to_string();
        if !case.bare {
            args.extend(["--store", store.as_str()]);
        }
        args.extend(case.args.iter().map(String::as_str));
        let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let output = bench.run_in(&dir, &args, &env)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or("");
        let code = output.status.code().unwrap_or(-1);
        // No message says the same thing twice ("Permission denied: Permission denied").
        let repeats = first.matches("(os error").count() > 1;
        if code != case.code
            || !first.starts_with(&case.starts)
            || !first.contains(&case.contains)
            || repeats
        {
            failures.push(format!(
                "[{}] strata {:?}: exit {code} (want {}), first stderr line {first:?} (want it to \
                 start with {:?} and contain {:?})",
                case.item, case.args, case.code, case.starts, case.contains
            ));
        }
    }
    Ok(failures)
}

/// Whether this process runs as root (which reads any file: unreadable-file cases cannot be set
/// up then).
fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn every_bad_input_says_what_is_wrong_and_what_works() -> TestResult {
    let bench = Bench::new()?;
    bench.write("a.txt", b"one\n")?;
    bench.write("bin", b"\x00\x01\x02")?;
    bench.write("sub/s.txt", b"s\n")?;
    std::os::unix::fs::symlink("a.txt", bench.tree.join("link"))?;
    let fifo = bench.tree.join("fifo");
    let status = Command::new("mkfifo").arg(&fifo).status()?;
    assert!(status.success(), "mkfifo");
    // Another store inside the tree: never indexed as content.
    let inner = bench.tree.join("inner");
    fs::create_dir_all(&inner)?;
    bench.run_in(&inner, &["init"], &[])?;
    // A project directory with its store in .strata/, and a plain file.
    let project = bench.root.join("project");
    fs::create_dir_all(&project)?;
    bench.run_in(&project, &["init"], &[])?;
    let plain = bench.root.join("plain.txt");
    fs::write(&plain, "x")?;
    fs::create_dir_all(bench.root.join("nostore"))?;

    // The first index: skips counted by kind on stderr, one line.
    let output = bench.run(&["index"])?;
    let stderr = String::from_utf8(output.stderr)?;
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let skip_line = stderr
        .lines()
        .find(|l| l.starts_with("skipped"))
        .ok_or("no skip summary")?;
    assert_eq!(
        skip_line,
        "skipped 3 paths: 1 symlink, 1 FIFO, 1 other store (--verbose lists them, -q hides this)"
    );
    let stdout = String::from_utf8(output.stdout)?;
    assert!(
        !stdout.contains("skipped /"),
        "skips are not on stdout: {stdout}"
    );
    bench.write("a.txt", b"one\ntwo\n")?;
    bench.write("bin", b"\x00\x01\x03")?;
    bench.ok(&["index", "-q"])?;
    let sid = bench.ok(&["session", "new", "--id", "sess-abcdef-0001"])?;
    assert_eq!(sid.trim(), "sess-abcdef-0001");
    bench.ok(&[
        "session",
        "turn",
        "sess-abcdef-0001",
        "--role",
        "user",
        "--content",
        "hi",
    ])?;
    let log_before = bench.ok(&["log", "--json"])?;
    let a = bench.tree.join("a.txt").display().to_string();

    let mut cases = vec![
        // Index reporting.
        case(
            "named FIFO",
            &["index", "fifo"],
            1,
            "strata: ",
            "fifo was not indexed: a FIFO",
        ),
        case(
            "named device",
            &["index", "/dev/null"],
            1,
            "strata: /dev/null was not indexed",
            "a device",
        ),
        case("-q silences skips", &["index", "-q"], 0, "", ""),
        case(
            "--verbose lists skips",
            &["index", "--verbose"],
            0,
            "skipped ",
            ": ",
        ),
        case(
            "summary by kind",
            &["index", "."],
            0,
            "skipped 3 paths: 1 symlink, 1 FIFO, 1 other store",
            "",
        ),
        case(
            "missing root",
            &["index", "no/such/dir"],
            2,
            "strata: ",
            "no/such/dir",
        ),
        // Hints that lead somewhere that works.
        case(
            "cat DIR",
            &["cat", "."],
            2,
            "strata: invalid input: . is a directory",
            "`strata ls .`",
        ),
        case(
            "cat DIR",
            &["cat", "sub"],
            2,
            "strata: invalid input: sub is a directory",
            "`strata ls sub`",
        ),
        case(
            "show outside",
            &["show", "/etc/passwd"],
            2,
            "strata: not found: /etc/passwd",
            "outside every tree the store has indexed",
        ),
        case(
            "unknown ref",
            &["show", "nothing-here"],
            2,
            "strata: invalid input: ",
            "(see `strata ls`)",
        ),
        case(
            "short prefix",
            &["show", "abc"],
            2,
            "strata: invalid input: ",
            "at least 8 hex",
        ),
        case(
            "no such prefix",
            &["show", "deadbeefdeadbeef"],
            2,
            "strata: not found: ",
            "see `strata ls`",
        ),
        // Times.
        case(
            "nanoseconds truncate",
            &[
                "show",
                "a.txt",
                "--tx-time",
                "2999-01-01T00:00:00.123456789Z",
            ],
            0,
            "",
            "",
        ),
        case(
            "far date",
            &["show", "a.txt", "--valid-at", "9999-12-31T23:59:59Z"],
            2,
            "strata: invalid input: --valid-at 9999-12-31T23:59:59Z: ",
            "outside the times strata keeps, 1970-01-01T00:00:00.000000Z to 9999-12-30T22:00:00.000000Z",
        ),
        case(
            "before 1970",
            &["show", "a.txt", "--valid-at", "1969-07-20T20:17:00Z"],
            2,
            "strata: invalid input: --valid-at",
            "outside the times strata keeps",
        ),
        case(
            "not a time",
            &["show", "a.txt", "--valid-at", "yesterday"],
            2,
            "strata: invalid input: --valid-at yesterday: ",
            "not an RFC 3339 time; write e.g. 2024-05-01T12:00:00Z",
        ),
        case(
            "negative time",
            &["ls", "--valid-at", "-5"],
            2,
            "strata: invalid input: --valid-at -5: ",
            "not an RFC 3339 time",
        ),
        case(
            "negative tx",
            &["show", "a.txt", "--as-of-tx", "-5"],
            2,
            "error: invalid value '-5' for '--as-of-tx <TX>'",
            "ids are whole numbers from 1 (`strata log` lists them)",
        ),
        case(
            "tx zero",
            &["diff", "a.txt", "0"],
            2,
            "error: invalid value '0'",
            "whole numbers from 1",
        ),
        case(
            "history --valid-at",
            &["history", "a.txt", "--valid-at", "2020-01-01T00:00:00Z"],
            2,
            "strata: invalid input: history lists the versions at every valid time",
            "use --as-of-tx or --tx-time",
        ),
        case(
            "tx too big",
            &["show", "a.txt", "--as-of-tx", "99"],
            2,
            "strata: invalid input: --as-of-tx 99: the store has transactions 1 to ",
            "",
        ),
        case(
            "diff tx too big",
            &["diff", "a.txt", "1", "99"],
            2,
            "strata: invalid input: transaction 99 does not exist",
            "1 to ",
        ),
        // Consistency.
        case(
            "session prefix",
            &["session", "show", "sess-abc"],
            0,
            "",
            "",
        ),
        case(
            "session unknown",
            &["session", "show", "zzz-no-session"],
            2,
            "strata: not found: ",
            "zzz-no-session",
        ),
        case(
            "log --since",
            &["log", "--since", "99999"],
            2,
            "strata: invalid input: --since 99999: the store has transactions 1 to ",
            "",
        ),
        case(
            "log --since -1",
            &["log", "--since", "-1"],
            2,
            "error: invalid value '-1' for '--since <TX>'",
            "not a transaction id",
        ),
        // Answers.
        case(
            "file ref checked",
            &[
                "session",
                "toolcall",
                "sess-abcdef-0001",
                "--tool",
                "t",
                "--args",
                "{}",
                "--file-ref",
                "nonsense",
                "--output",
                "/dev/null",
            ],
            2,
            "strata: invalid input: file ref \"nonsense\" names no file in the store",
            "",
        ),
        case(
            "bad args JSON",
            &[
                "session",
                "toolcall",
                "sess-abcdef-0001",
                "--tool",
                "t",
                "--args",
                "[1]",
                "--output",
                "/dev/null",
            ],
            2,
            "strata: --args must be a JSON object",
            "",
        ),
        // Already clear: keep them so.
        case(
            "evict needs --yes",
            &["evict", "a.txt"],
            2,
            "strata: ",
            "--yes",
        ),
        case(
            "unknown command",
            &["frobnicate"],
            2,
            "error: unrecognized subcommand 'frobnicate'",
            "",
        ),
        case(
            "bad mount",
            &["mount", "add", "nonsense"],
            2,
            "strata: mount \"nonsense\"",
            "",
        ),
        case(
            "deny cat",
            &[
                "show",
                "a.txt",
                "--as-of-tx",
                "1",
                "--tx-time",
                "2020-01-01T00:00:00Z",
            ],
            2,
            "error: the argument '--as-of-tx <TX>' cannot be used with '--tx-time <TIME>'",
            "",
        ),
    ];
    cases.push(Case {
        bare: true,
        dir: "nostore",
        ..case(
            "no store",
            &["ls"],
            2,
            "strata: no strata store in ",
            "run `strata init`",
        )
    });
    cases.push(Case {
        bare: true,
        ..case(
            "--store PROJECT",
            &["--store", "../project", "ls"],
            2,
            "strata: ",
            "pass --store ",
        )
    });
    cases.push(Case {
        bare: true,
        env: vec![("STRATA_STORE", plain.display().to_string())],
        ..case(
            "STRATA_STORE=<file>",
            &["ls"],
            2,
            "strata: --store (or STRATA_STORE) ",
            "is a file",
        )
    });
    cases.push(Case {
        bare: true,
        env: vec![("STRATA_STORE", plain.display().to_string())],
        ..case(
            "init on a file",
            &["init"],
            2,
            "strata: --store (or STRATA_STORE) ",
            "is a file",
        )
    });
    cases.push(Case {
        bare: true,
        dir: "project",
        ..case("init again", &["init"], 0, "", "")
    });
    cases.push(Case {
        bare: true,
        dir: "project",
        ..case(
            "init again, new mount",
            &["init", "--mount", "/w=/tmp"],
            2,
            "strata: invalid input: ",
            "add it with `strata mount add '/w=/tmp'`",
        )
    });
    cases.push(Case {
        bare: true,
        dir: "project",
        ..case(
            "init again, bad mount",
            &["init", "--mount", "nonsense"],
            2,
            "strata: mount \"nonsense\"",
            "",
        )
    });
    if !is_root() {
        // Unreadable paths (root reads everything, so only as another user).
        let locked = bench.write("locked.txt", b"secret\n")?;
        fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000))?;
        let dir = bench.root.join("closed");
        fs::create_dir_all(&dir)?;
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o000))?;
        cases.push(case(
            "unreadable file",
            &["index", "locked.txt"],
            1,
            "strata: ",
            "locked.txt was not indexed: cannot be read",
        ));
        cases.push(case(
            "unreadable file hint",
            &["show", "locked.txt"],
            2,
            "strata: not found: locked.txt",
            "make it readable",
        ));
        let read_only = bench.root.join("ro");
        fs::create_dir_all(&read_only)?;
        fs::set_permissions(
            &read_only,
            std::os::unix::fs::PermissionsExt::from_mode(0o555),
        )?;
        cases.push(Case {
            bare: true,
            ..case(
                "store that cannot be made",
                &["--store", "../ro/s", "ls"],
                2,
                "strata: ",
                "holds no strata store, and none can be created there",
            )
        });
        cases.push(case(
            "unreadable dir",
            &["index", "../closed"],
            1,
            "strata: ",
            "closed was not indexed: cannot be read",
        ));
    }
    let failures = run_cases(&bench, &cases)?;
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );

    // The refused commands wrote nothing; the index runs found nothing new.
    let log_after = bench.ok(&["log", "--json"])?;
    assert_eq!(log_before, log_after);
    // A file new since the last index (also in a new directory): indexing it is the hint, and
    // it works.
    bench.write("new.txt", b"new\n")?;
    bench.write("newdir/n.txt", b"n\n")?;
    let late = vec![
        case(
            "new dir",
            &["show", "newdir/n.txt"],
            2,
            "strata: not found: newdir/n.txt",
            "run `strata index newdir/n.txt`",
        ),
        case(
            "new file",
            &["show", "new.txt"],
            2,
            "strata: not found: new.txt",
            "run `strata index new.txt`",
        ),
    ];
    let failures = run_cases(&bench, &late)?;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    bench.ok(&["index", "new.txt"])?;
    bench.ok(&["show", "new.txt"])?;
    // The shown history of a.txt: no --valid-at in its help.
    let help = bench.ok(&["history", "--help"])?;
    assert!(!help.contains("--valid-at"), "{help}");
    assert!(bench.ok(&["show", &a])?.contains("a.txt"));
    Ok(())
}

#[test]
fn index_counts_each_file_once_and_deletions_apart() -> TestResult {
    let bench = Bench::new()?;
    bench.write("a.txt", b"a\n")?;
    bench.write("sub/s.txt", b"s\n")?;
    bench.write("sub/t.txt", b"t\n")?;
    let first = bench.ok(&["index", "-q", ".", "sub", "sub/s.txt", "a.txt"])?;
    assert!(
        first.starts_with("indexed 3 files in "),
        "overlapping roots count each file once: {first}"
    );
    assert!(
        first.contains(": 3 created, 0 updated, 0 unchanged, 0 deleted"),
        "{first}"
    );
    fs::remove_file(bench.tree.join("sub/t.txt"))?;
    let second = bench.ok(&["index", "-q"])?;
    assert!(second.contains("indexed 2 files in "), "{second}");
    assert!(
        second.contains(": 0 created, 0 updated, 2 unchanged, 1 deleted"),
        "{second}"
    );
    // The file deleted before is neither unchanged nor deleted again.
    let third = bench.ok(&["index", "-q"])?;
    assert!(
        third.contains(": 0 created, 0 updated, 2 unchanged, 0 deleted"),
        "{third}"
    );
    // --json is pretty, as every other command's.
    let json = bench.ok(&["index", "-q", "--json"])?;
    assert!(json.starts_with("{\n  \""), "{json}");
    let gc = bench.ok(&["gc", "--json"])?;
    assert!(gc.starts_with("{\n  \""), "{gc}");
    Ok(())
}

/// A store's own deny glob that parses but cannot be compiled (alternatives nested past the
/// regex parser's limit) is refused by name when the settings load, and the refused index loses
/// nothing: with the glob fixed, the next index records the change.
#[test]
fn a_deny_glob_that_cannot_be_compiled_is_refused_by_name() -> TestResult {
    let bench = Bench::new()?;
    bench.write("a.txt", b"a\n")?;
    bench.ok(&["index", "-q"])?;
    bench.write("a.txt", b"a\nb\n")?;
    let nested = format!("secret{}x{}", "{a,".repeat(300), "}".repeat(300));
    let settings = bench.store.join("settings.toml");
    let kept = fs::read_to_string(&settings).unwrap_or_default();
    fs::write(&settings, format!("deny = [\"{nested}\"]\n{kept}"))?;
    let refused = bench.run(&["index", "-q"])?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("cannot be compiled") && stderr.contains("settings.toml"),
        "{stderr}"
    );
    fs::write(&settings, format!("deny = [\"*.secret\"]\n{kept}"))?;
    let second = bench.ok(&["index", "-q"])?;
    assert!(
        second.contains(": 0 created, 1 updated, 0 unchanged, 0 deleted"),
        "{second}"
    );
    Ok(())
}

#[test]
fn ls_and_diff_answer_as_git_would() -> TestResult {
    let bench = Bench::new()?;
    bench.write("a.txt", b"one\n")?;
    bench.write("bin", b"\x00\x01\x02")?;
    bench.write("sub/s.txt", b"s\n")?;
    bench.ok(&["index", "-q"])?;
    bench.write("a.txt", b"one\ntwo\n")?;
    bench.write("bin", b"\x00\x01\x03")?;
    bench.ok(&["index", "-q"])?;
    // An unrelated later transaction: diff's TO label is the version's, not the store's latest.
    bench.write("sub/s.txt", b"s2\n")?;
    bench.ok(&["index", "-q"])?;

    let ls = bench.ok(&["ls"])?;
    let lines: Vec<&str> = ls.lines().collect();
    assert_eq!(
        lines
            .first()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["SIZE", "VERSIONS", "LAST", "CHANGE", "STATE", "PATH"]),
        "{ls}"
    );
    assert!(lines.iter().any(|l| l.ends_with("text    a.txt")), "{ls}");
    assert!(lines.iter().any(|l| l.ends_with("binary  bin")), "{ls}");
    assert!(lines.iter().any(|l| l.ends_with("sub/s.txt")), "{ls}");
    assert!(
        !ls.contains(&bench.tree.display().to_string()),
        "relative paths: {ls}"
    );
    // From a subdirectory, paths outside it stay absolute.
    let sub = bench.run_in(
        &bench.tree.join("sub"),
        &["--store", &bench.store.display().to_string(), "ls"],
        &[],
    )?;
    let sub = String::from_utf8(sub.stdout)?;
    assert!(sub.lines().any(|l| l.ends_with("  s.txt")), "{sub}");
    assert!(
        sub.contains(&bench.tree.join("a.txt").display().to_string()),
        "{sub}"
    );

    // Under --valid-at, only the versions begun by then are counted.
    let history: serde_json::Value =
        serde_json::from_str(&bench.ok(&["history", "a.txt", "--json"])?)?;
    let first = history[0]["valid_from"].as_str().ok_or("valid_from")?;
    let then: serde_json::Value =
        serde_json::from_str(&bench.ok(&["ls", "a.txt", "--valid-at", first, "--json"])?)?;
    assert_eq!(then[0]["versions"], 1, "{then}");
    let now: serde_json::Value = serde_json::from_str(&bench.ok(&["ls", "a.txt", "--json"])?)?;
    assert_eq!(now[0]["versions"], 2, "{now}");

    let diff = bench.ok(&["diff", "a.txt"])?;
    let name = bench.tree.join("a.txt").display().to_string();
    assert!(
        diff.starts_with(&format!("--- a{name} (tx 1)\n+++ b{name} (tx 2)\n")),
        "{diff}"
    );
    let bin = bench.tree.join("bin").display().to_string();
    assert_eq!(
        bench.ok(&["diff", "bin"])?,
        format!("Binary files a{bin} (tx 1) and b{bin} (tx 2) differ\n")
    );
    Ok(())
}

#[test]
fn a_renamed_file_is_dated_by_the_rename() -> TestResult {
    let bench = Bench::new()?;
    bench.write("old.txt", b"x\n")?;
    bench.ok(&["index", "-q"])?;
    fs::rename(bench.tree.join("old.txt"), bench.tree.join("new.txt"))?;
    bench.ok(&["index", "-q"])?;
    let history: serde_json::Value =
        serde_json::from_str(&bench.ok(&["history", "new.txt", "--json"])?)?;
    let old: serde_json::Value =
        serde_json::from_str(&bench.ok(&["history", "old.txt", "--json"])?)?;
    let new_from = history[0]["valid_from"].as_str().ok_or("valid_from")?;
    let old_gone = old[1]["valid_from"].as_str().ok_or("old's tombstone")?;
    let old_from = old[0]["valid_from"].as_str().ok_or("old's valid_from")?;
    // The new name begins when the rename happened, not at the file's (older) mtime.
    assert!(new_from > old_from, "{new_from} vs {old_from}");
    assert!(new_from <= old_gone, "{new_from} vs {old_gone}");
    Ok(())
}

/// The `$` lines of the README from its tour to the Python client, with the exit code each must
/// have: 2 when the output shown under it is a `strata:` error, else 0.
fn tour_commands() -> TestResult<Vec<(String, i32)>> {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))?;
    let start = readme
        .find("## A five-minute tour")
        .ok_or("the README has no tour")?;
    let end = readme[start..]
        .find("**Python**")
        .ok_or("the README's tour has no end")?;
    let lines: Vec<&str> = readme[start..start + end].lines().collect();
    let mut commands = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(command) = line.strip_prefix("$ ") {
            let fails = lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("strata: "));
            commands.push((command.to_string(), if fails { 2 } else { 0 }));
        }
    }
    Ok(commands)
}

#[test]
fn readme_tour_runs_as_written() -> TestResult {
    let commands = tour_commands()?;
    assert!(commands.len() >= 20, "{commands:?}");
    // One shell runs them all, so that `cd` and `SID=…` carry over, as in a terminal.
    let mut script = String::from("set -u\n");
    for (n, (command, code)) in commands.iter().enumerate() {
        script.push_str(&format!(
            "{command}\nrc=$?\nif [ $rc -ne {code} ]; then echo \"tour step {n} ({}): exit $rc, want {code}\" >&2; exit 1; fi\n",
            command.replace('"', "'")
        ));
    }
    let tmp = tempfile::tempdir()?;
    let bin = Path::new(env!("CARGO_BIN_EXE_strata"))
        .parent()
        .ok_or("binary dir")?
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(tmp.path())
        .env("PATH", path)
        .env_remove("STRATA_STORE")
        .env_remove("STRATA_NO_DAEMON")
        .env("STRATA_IDLE_TIMEOUT", "30")
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The daemon the tour started is stopped by its last step; stop it on failure too.
    let demo = tmp.path().join("demo");
    if !output.status.success() && demo.is_dir() {
        let _ = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("stop")
            .current_dir(&demo)
            .output();
    }
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // What the tour says it shows.
    assert!(
        stdout.contains("3 created, 0 updated, 0 unchanged, 0 deleted, 0 skipped, 1 denied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+    println!(\"hello, world\");"),
        "{stdout}"
    );
    assert!(stdout.contains("denied   .env"), "{stdout}");
    assert!(
        stderr.contains("a deny rule (secrets) keeps its bytes out of the store"),
        "{stderr}"
    );
    assert!(stdout.contains("stopped the daemon of "), "{stdout}");
    Ok(())
}
