//! The writing tools end to end through the real `strata mcp` in session mode: writes and both
//! patch forms, each answer's sha256 the base of the next write, the versions in the store at
//! once; every conflict and validation path leaving the disk and the store as they were; a batch
//! all or nothing; two writers through one daemon.

use std::fs;

use serde_json::{Value, json};

use super::mcp::Server;
use super::tools::{Fallible, Project, TestResult, call, header, ok, session_of};

/// The sha256 a read returns for `filepath` (of the whole file, from its first line).
fn read_sha(server: &mut Server, filepath: &str) -> Fallible<String> {
    let text = ok(
        server,
        "read_lines",
        json!({"filepath": filepath, "start": 1, "end": 1}),
    )?;
    Ok(header(&text)?.0["sha256"]
        .as_str()
        .ok_or("sha256")?
        .to_owned())
}

/// A writing tool's answer as JSON, and whether it was an error result.
fn write(server: &mut Server, tool: &str, args: Value) -> Fallible<(Value, bool)> {
    let (text, failed) = call(server, tool, args)?;
    Ok((serde_json::from_str(&text)?, failed))
}

/// A write that must succeed: its answer.
fn written(server: &mut Server, tool: &str, args: Value) -> Fallible<Value> {
    let (answer, failed) = write(server, tool, args.clone())?;
    if failed || answer["success"] != json!(true) {
        return Err(format!("{tool} {args} failed: {answer}").into());
    }
    Ok(answer)
}

/// The number of stored versions of `filepath`.
fn versions(server: &mut Server, filepath: &str) -> Fallible<usize> {
    let text = ok(
        server,
        "get_file_history",
        json!({"filepath": filepath, "limit": 1000}),
    )?;
    let history: Value = serde_json::from_str(&text)?;
    Ok(history["versions"].as_array().map_or(0, Vec::len))
}

/// `strata mcp` over `project` through the store's daemon (started on demand): the store's
/// path, the server, its session.
fn agent_through_a_daemon(project: &Project) -> Fallible<(String, Server, String)> {
    let store = project.store.to_str().ok_or("path")?.to_string();
    let mount = project.mount()?;
    let env = [("STRATA_IDLE_TIMEOUT", "20")];
    let mut agent = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let session = session_of(&agent.handshake()?)?;
    Ok((store, agent, session))
}

/// A refusal that must leave `rel` as it was on disk and in the store: its answer.
fn refused(
    server: &mut Server,
    project: &Project,
    rel: &str,
    tool: &str,
    args: Value,
) -> Fallible<Value> {
    let before = fs::read(project.tree.join(rel)).ok();
    let stored = versions(server, rel)?;
    let (answer, failed) = write(server, tool, args.clone())?;
    assert!(failed, "{tool} {args} is an error result: {answer}");
    assert_eq!(answer["success"], json!(false), "{answer}");
    assert_eq!(
        fs::read(project.tree.join(rel)).ok(),
        before,
        "{tool} {args} left {rel} on disk as it was"
    );
    assert_eq!(
        versions(server, rel)?,
        stored,
        "{tool} {args} left the store's versions of {rel} as they were"
    );
    Ok(answer)
}

#[test]
fn writes_and_patches_chain_on_the_returned_sha256_and_are_in_the_store_at_once() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    server.handshake()?;
    let sha = read_sha(&mut server, "notes.txt")?;
    assert_eq!(versions(&mut server, "notes.txt")?, 1);
    // write_file over it with the read hash.
    let answer = written(
        &mut server,
        "write_file",
        json!({"filepath": "notes.txt", "content": "one\ntwo\nTHREE\nfour\n", "expected_sha256": sha}),
    )?;
    let new_sha = answer["files"][0]["sha256"]
        .as_str()
        .ok_or("sha")?
        .to_owned();
    assert_eq!(new_sha, project.sha256("notes.txt")?);
    assert_eq!(answer["files"][0]["previous_sha256"], json!(sha));
    assert!(answer["diff"].as_str().unwrap_or("").contains("+THREE\n"));
    assert_eq!(
        versions(&mut server, "notes.txt")?,
        2,
        "in the store at once"
    );
    // A unified diff on the returned hash.
    let patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n THREE\n";
    let answer = written(
        &mut server,
        "apply_patch",
        json!({"filepath": "notes.txt", "patch": patch, "expected_sha256": new_sha}),
    )?;
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "one\nTWO\nTHREE\nfour\n"
    );
    let after_diff = answer["files"][0]["sha256"]
        .as_str()
        .ok_or("sha")?
        .to_owned();
    // Line operations over two files, on hashes from a write and from a read.
    let main_sha = read_sha(&mut server, "src/main.rs")?;
    let answer = written(
        &mut server,
        "apply_patch",
        json!({"batchKey": "b1", "files": [
            {"docPath": "notes.txt", "originalSha256": after_diff, "changes": [
                {"operation": "insert", "afterLine": 0, "newLines": ["zero"]},
                {"operation": "delete", "startLine": 4, "endLine": 4, "expectedOriginalLines": ["four"]}
            ]},
            {"docPath": "src/main.rs", "originalSha256": main_sha, "changes": [
                {"operation": "replace", "startLine": 2, "endLine": 2,
                 "expectedOriginalLines": ["    println!(\"hi\");"], "newLines": ["    println!(\"hello\");"]}
            ]}
        ]}),
    )?;
    assert_eq!(answer["batchKey"], "b1");
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "zero\none\nTWO\nTHREE\n"
    );
    assert_eq!(
        fs::read_to_string(project.tree.join("src/main.rs"))?,
        "fn main() {\n    println!(\"hello\");\n}\n"
    );
    assert_eq!(
        answer["files"][1]["newSha256"].as_str(),
        Some(project.sha256("src/main.rs")?.as_str())
    );
    assert_eq!(versions(&mut server, "notes.txt")?, 4);
    // A read after the writes gives the same hash: the store and the disk agree.
    assert_eq!(
        read_sha(&mut server, "notes.txt")?,
        project.sha256("notes.txt")?
    );
    assert_eq!(versions(&mut server, "notes.txt")?, 4, "not recorded twice");
    // Create, restore, rename, delete.
    written(
        &mut server,
        "write_file",
        json!({"filepath": "new/dir/made.txt", "content": "made\n"}),
    )?;
    assert_eq!(
        fs::read_to_string(project.tree.join("new/dir/made.txt"))?,
        "made\n"
    );
    let now = project.sha256("notes.txt")?;
    written(
        &mut server,
        "restore_file",
        json!({"filepath": "notes.txt", "version": 1, "expected_sha256": now}),
    )?;
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "one\ntwo\nthree\n"
    );
    assert_eq!(versions(&mut server, "notes.txt")?, 5);
    // Renames and deletions wait for a person: held, nothing changed.
    let sha = project.sha256("notes.txt")?;
    for (tool, args) in [
        (
            "rename_file",
            json!({"filepath": "notes.txt", "new_filepath": "renamed.txt", "expected_sha256": sha}),
        ),
        (
            "delete_file",
            json!({"filepath": "notes.txt", "expected_sha256": sha}),
        ),
    ] {
        let answer = refused(&mut server, &project, "notes.txt", tool, args)?;
        assert_eq!(answer["errorCode"], "APPROVAL_REQUIRED", "{answer}");
        assert!(
            answer["approval"]["token"]
                .as_str()
                .is_some_and(|t| t.starts_with("approve-"))
        );
    }
    assert!(!project.tree.join("renamed.txt").exists());
    // No temporary or rollback file is left behind.
    let left: Vec<String> = fs::read_dir(&project.tree)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(".strata-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    server.finish()
}

#[test]
fn every_conflict_and_validation_path_changes_nothing() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    server.handshake()?;
    let sha = read_sha(&mut server, "notes.txt")?;
    let p = &project;
    let s = &mut server;
    // A hash of the wrong length, one that is not hex.
    let answer = refused(
        s,
        p,
        "notes.txt",
        "write_file",
        json!({"filepath": "notes.txt", "content": "x", "expected_sha256": "abc"}),
    )?;
    assert_eq!(answer["errorCode"], "VALIDATION_FAILED");
    assert!(
        answer["errorMessage"]
            .as_str()
            .unwrap_or("")
            .contains("expected 64 hex characters, got 3")
    );
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"files": [{"docPath": "notes.txt", "originalSha256": "abc", "changes": [
            {"operation": "delete", "startLine": 1, "endLine": 1}]}]}),
    )?;
    assert_eq!(
        answer["errorMessage"],
        "File 'notes.txt' originalSha256 must be a 64-character SHA256 hex string."
    );
    // The file changed since the read: stale_buffer, the current hash and a diff.
    fs::write(project.tree.join("notes.txt"), "one\ntwo\nthree\nfour\n")?;
    let answer = refused(
        s,
        p,
        "notes.txt",
        "write_file",
        json!({"filepath": "notes.txt", "content": "mine\n", "expected_sha256": sha}),
    )?;
    assert_eq!(answer["errorCode"], "CONFLICT");
    assert_eq!(answer["conflict"]["kind"], "stale_buffer");
    assert_eq!(
        answer["conflict"]["current_sha256"].as_str(),
        Some(p.sha256("notes.txt")?.as_str())
    );
    assert!(
        answer["conflict"]["diff"]
            .as_str()
            .unwrap_or("")
            .contains("+four\n"),
        "{answer}"
    );
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": [
            {"operation": "delete", "startLine": 1, "endLine": 1}]}]}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "stale_buffer");
    let patch = "@@ -1,1 +1,1 @@\n-one\n+ONE\n";
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"filepath": "notes.txt", "patch": patch, "expected_sha256": sha}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "stale_buffer");
    // Creating a file that exists.
    let answer = refused(
        s,
        p,
        "notes.txt",
        "write_file",
        json!({"filepath": "notes.txt", "content": "x"}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "stale_buffer");
    // Now on the current hash: mismatches, order, overlap, range past the end.
    let sha = read_sha(s, "notes.txt")?;
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": [
            {"operation": "replace", "startLine": 2, "endLine": 2,
             "expectedOriginalLines": ["TWO"], "newLines": ["2"]}]}]}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "patch_mismatch");
    assert_eq!(answer["conflict"]["mismatch"]["line"], 2);
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"filepath": "notes.txt", "patch": "@@ -2,1 +2,1 @@\n-TWO\n+2\n"}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "patch_mismatch", "{answer}");
    for changes in [
        // Out of order.
        json!([{"operation": "delete", "startLine": 3, "endLine": 3},
               {"operation": "delete", "startLine": 1, "endLine": 1}]),
        // Overlapping.
        json!([{"operation": "delete", "startLine": 1, "endLine": 2},
               {"operation": "replace", "startLine": 2, "endLine": 3, "newLines": ["x"]}]),
    ] {
        let answer = refused(
            s,
            p,
            "notes.txt",
            "apply_patch",
            json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": changes}]}),
        )?;
        assert_eq!(answer["errorCode"], "VALIDATION_FAILED", "{answer}");
    }
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": [
            {"operation": "delete", "startLine": 4, "endLine": 9}]}]}),
    )?;
    assert_eq!(answer["errorCode"], "VALIDATION_FAILED", "{answer}");
    // A patch that cannot be read.
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"filepath": "notes.txt", "patch": "not a diff"}),
    )?;
    assert_eq!(answer["errorCode"], "VALIDATION_FAILED", "{answer}");
    // A batch is all or nothing: the second file's mismatch keeps the first unchanged.
    let main_sha = read_sha(s, "src/main.rs")?;
    let before_main = fs::read(p.tree.join("src/main.rs"))?;
    let answer = refused(
        s,
        p,
        "notes.txt",
        "apply_patch",
        json!({"files": [
            {"docPath": "notes.txt", "originalSha256": sha, "changes": [
                {"operation": "insert", "afterLine": 0, "newLines": ["top"]}]},
            {"docPath": "src/main.rs", "originalSha256": main_sha, "changes": [
                {"operation": "delete", "startLine": 1, "endLine": 1, "expectedOriginalLines": ["nope"]}]}
        ]}),
    )?;
    assert_eq!(answer["conflict"]["kind"], "patch_mismatch");
    assert_eq!(fs::read(p.tree.join("src/main.rs"))?, before_main);
    // Binary files, denied files, paths out of the mount: errors, nothing written.
    let blob = fs::read(p.tree.join("blob.bin"))?;
    let (answer, failed) = write(
        s,
        "apply_patch",
        json!({"filepath": "blob.bin", "patch": "@@ -1 +1 @@\n-a\n+b\n"}),
    )?;
    assert!(
        failed && answer["errorCode"] == "VALIDATION_FAILED",
        "{answer}"
    );
    assert_eq!(fs::read(p.tree.join("blob.bin"))?, blob);
    let (answer, failed) = write(
        s,
        "write_file",
        json!({"filepath": ".env", "content": "TOKEN=mine\n"}),
    )?;
    assert!(failed && answer["error"] == "permission_denied", "{answer}");
    assert_eq!(fs::read_to_string(p.tree.join(".env"))?, "TOKEN=secret\n");
    let (answer, failed) = write(
        s,
        "write_file",
        json!({"filepath": "../escape.txt", "content": "x"}),
    )?;
    assert!(failed && answer["error"] == "invalid_path", "{answer}");
    assert!(!p.tree.join("../escape.txt").exists());
    let outside = tempfile::tempdir()?;
    std::os::unix::fs::symlink(outside.path(), p.tree.join("link"))?;
    let (answer, failed) = write(
        s,
        "write_file",
        json!({"filepath": "link/out.txt", "content": "x"}),
    )?;
    assert!(failed && answer["error"] == "invalid_path", "{answer}");
    assert!(!outside.path().join("out.txt").exists());
    server.finish()
}

#[test]
fn two_writers_through_one_daemon_one_wins_the_other_gets_stale_buffer() -> TestResult {
    let project = Project::new()?;
    let env = [("STRATA_IDLE_TIMEOUT", "20")];
    let store = project.store.to_str().ok_or("path")?.to_string();
    let mount = project.mount()?;
    let mut a = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let session = session_of(&a.handshake()?)?;
    let mut b = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let other = session_of(&b.handshake()?)?;
    assert_ne!(session, other);
    let sha = read_sha(&mut a, "notes.txt")?;
    assert_eq!(read_sha(&mut b, "notes.txt")?, sha);
    let patch = |to: &str| {
        json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": [
            {"operation": "replace", "startLine": 1, "endLine": 1,
             "expectedOriginalLines": ["one"], "newLines": [to]}]}]})
    };
    let (first, first_failed) = write(&mut a, "apply_patch", patch("A"))?;
    let (second, second_failed) = write(&mut b, "apply_patch", patch("B"))?;
    assert!(!first_failed && second_failed, "{first} {second}");
    assert_eq!(second["conflict"]["kind"], "stale_buffer");
    assert_eq!(
        second["conflict"]["current_sha256"].as_str(),
        Some(project.sha256("notes.txt")?.as_str())
    );
    assert!(
        second["conflict"]["diff"]
            .as_str()
            .unwrap_or("")
            .contains("+A\n"),
        "{second}"
    );
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "A\ntwo\nthree\n"
    );
    let history: Value = serde_json::from_str(&ok(
        &mut b,
        "get_file_history",
        json!({"filepath": "notes.txt"}),
    )?)?;
    assert_eq!(history["versions"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        history["versions"][0]["sha256"].as_str(),
        Some(project.sha256("notes.txt")?.as_str())
    );
    a.finish()?;
    b.finish()?;
    std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&project.store)
        .arg("stop")
        .output()?;
    Ok(())
}

/// A client of the daemon's socket: what a person's tool (not the agent) sends.
struct Person {
    writer: std::os::unix::net::UnixStream,
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
}

impl Person {
    fn connect(project: &Project) -> Fallible<Self> {
        let stream = std::os::unix::net::UnixStream::connect(project.store.join("strata.sock"))?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(20)))?;
        Ok(Person {
            reader: std::io::BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// `agent.approve`: the response message.
    fn approve(&mut self, session: &str, token: &str) -> Fallible<Value> {
        use std::io::{BufRead as _, Write as _};
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "agent.approve",
            "params": {"session": session, "token": token, "caller": "a person"}});
        self.writer.write_all(format!("{request}\n").as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        Ok(serde_json::from_str(&line)?)
    }
}

fn token_of(answer: &Value) -> Fallible<String> {
    Ok(answer["approval"]["token"]
        .as_str()
        .ok_or("no token")?
        .to_owned())
}

#[test]
fn a_person_approves_deletions_and_renames_once_before_the_token_expires() -> TestResult {
    let project = Project::new()?;
    let env = [
        ("STRATA_IDLE_TIMEOUT", "20"),
        ("STRATA_APPROVAL_TTL_SECS", "3"),
    ];
    let store = project.store.to_str().ok_or("path")?.to_string();
    let mount = project.mount()?;
    let mut agent = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let session = session_of(&agent.handshake()?)?;
    let mut person = Person::connect(&project)?;
    let sha = read_sha(&mut agent, "notes.txt")?;
    // A rename, approved: one batch that creates the new path and deletes the old one.
    let (held, _) = write(
        &mut agent,
        "rename_file",
        json!({"filepath": "notes.txt", "new_filepath": "sub/renamed.txt", "expected_sha256": sha}),
    )?;
    let token = token_of(&held)?;
    assert!(
        project.tree.join("notes.txt").exists(),
        "held: nothing changed"
    );
    let approved = person.approve(&session, &token)?;
    assert_eq!(approved["result"]["is_error"], json!(false), "{approved}");
    assert!(!project.tree.join("notes.txt").exists());
    assert_eq!(
        fs::read_to_string(project.tree.join("sub/renamed.txt"))?,
        "one\ntwo\nthree\n"
    );
    // A token is used once.
    let again = person.approve(&session, &token)?;
    assert_eq!(again["error"]["data"]["kind"], "not_found", "{again}");
    // A deletion approved after the file changed: stale_buffer, nothing deleted.
    let (held, _) = write(
        &mut agent,
        "delete_file",
        json!({"filepath": "sub/renamed.txt", "expected_sha256": sha}),
    )?;
    fs::write(project.tree.join("sub/renamed.txt"), "changed\n")?;
    let approved = person.approve(&session, &token_of(&held)?)?;
    assert_eq!(approved["result"]["is_error"], json!(true), "{approved}");
    let answer: Value = serde_json::from_str(approved["result"]["text"].as_str().ok_or("text")?)?;
    assert_eq!(answer["conflict"]["kind"], "stale_buffer", "{answer}");
    assert!(project.tree.join("sub/renamed.txt").exists());
    // An expired token changes nothing.
    let now = project.sha256("sub/renamed.txt")?;
    let (held, _) = write(
        &mut agent,
        "delete_file",
        json!({"filepath": "sub/renamed.txt", "expected_sha256": now}),
    )?;
    std::thread::sleep(std::time::Duration::from_millis(3200));
    let late = person.approve(&session, &token_of(&held)?)?;
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("expired"),
        "{late}"
    );
    assert!(project.tree.join("sub/renamed.txt").exists());
    // In time: deleted, and the store has the tombstone.
    let (held, _) = write(
        &mut agent,
        "delete_file",
        json!({"filepath": "sub/renamed.txt", "expected_sha256": now}),
    )?;
    let approved = person.approve(&session, &token_of(&held)?)?;
    assert_eq!(approved["result"]["is_error"], json!(false), "{approved}");
    assert!(!project.tree.join("sub/renamed.txt").exists());
    let history: Value = serde_json::from_str(&ok(
        &mut agent,
        "get_file_history",
        json!({"filepath": "sub/renamed.txt"}),
    )?)?;
    assert_eq!(history["versions"][0]["state"], "deleted", "{history}");
    drop(person);
    agent.finish()?;
    std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&project.store)
        .arg("stop")
        .output()?;
    Ok(())
}

#[test]
fn strata_session_approve_runs_a_held_deletion_once() -> TestResult {
    let project = Project::new()?;
    let (store, mut agent, session) = agent_through_a_daemon(&project)?;
    let sha = read_sha(&mut agent, "notes.txt")?;
    let (held, _) = write(
        &mut agent,
        "delete_file",
        json!({"filepath": "notes.txt", "expected_sha256": sha}),
    )?;
    let token = token_of(&held)?;
    assert!(
        project.tree.join("notes.txt").exists(),
        "held: nothing changed"
    );
    let approve = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["--store", &store, "session", "approve", &session, &token])
            .output()
    };
    let first = approve()?;
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(!project.tree.join("notes.txt").exists());
    // A token is used once: the second approval is refused and says why.
    let second = approve()?;
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&token) || stderr.contains("token"),
        "{stderr}"
    );
    agent.finish()?;
    std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--store", &store, "stop"])
        .output()?;
    Ok(())
}

#[test]
fn fd_to_file_writes_a_descriptor_as_a_recorded_write() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    server.handshake()?;
    let big = ok(&mut server, "read_file", json!({"filepath": "big.log"}))?;
    assert!(big.contains("fd=\"fd:1\""), "{big}");
    let whole = fs::read_to_string(project.tree.join("big.log"))?;
    let done = ok(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:1", "file_path": "out/copy.log"}),
    )?;
    assert!(done.contains("success=\"true\""), "{done}");
    let copy = fs::read_to_string(project.tree.join("out/copy.log"))?;
    assert!(
        copy.ends_with(&whole),
        "the descriptor's content is written"
    );
    let done = ok(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:1", "file_path": "out/copy.log", "mode": "append"}),
    )?;
    assert!(done.contains("mode=\"append\""), "{done}");
    assert_eq!(
        fs::read_to_string(project.tree.join("out/copy.log"))?,
        format!("{copy}{copy}")
    );
    // In the store at once, as any write.
    let history: Value = serde_json::from_str(&ok(
        &mut server,
        "get_file_history",
        json!({"filepath": "out/copy.log"}),
    )?)?;
    assert_eq!(
        history["versions"].as_array().map(Vec::len),
        Some(2),
        "{history}"
    );
    assert_eq!(
        history["versions"][0]["sha256"].as_str(),
        Some(project.sha256("out/copy.log")?.as_str())
    );
    // The original's refusals.
    let (text, failed) = call(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:1", "file_path": "out/copy.log", "exist_ok": false}),
    )?;
    assert!(failed && text.contains("type=\"file_exists\""), "{text}");
    let (text, failed) = call(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:1", "file_path": "missing.log", "create": false}),
    )?;
    assert!(failed && text.contains("type=\"file_not_found\""), "{text}");
    assert!(!project.tree.join("missing.log").exists());
    let (text, failed) = call(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:1", "file_path": ".env"}),
    )?;
    assert!(failed && text.contains("type=\"write_error\""), "{text}");
    assert_eq!(
        fs::read_to_string(project.tree.join(".env"))?,
        "TOKEN=secret\n"
    );
    let (text, failed) = call(
        &mut server,
        "fd_to_file",
        json!({"fd": "fd:9", "file_path": "x.log"}),
    )?;
    assert!(failed && text.contains("type=\"not_found\""), "{text}");
    server.finish()
}

/// The rounds of the crash test (`STRATA_CRASH_ROUNDS` raises them, e.g. to 1000).
fn crash_rounds() -> usize {
    std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

#[test]
fn sigkill_during_writes_leaves_each_file_old_or_new_and_the_store_agrees_after_restart()
-> TestResult {
    let project = Project::new()?;
    let content = |round: usize| -> String {
        (0..10_000)
            .map(|l| format!("round {round} line {l}\n"))
            .collect()
    };
    let names = ["a.txt", "b.txt"];
    for name in names {
        fs::write(project.tree.join(name), content(0))?;
    }
    let mut session: Option<String> = None;
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut new_rounds = 0;
    for round in 1..=crash_rounds() {
        let extra: Vec<&str> = match &session {
            Some(id) => vec!["--no-daemon", "--session", id],
            None => vec!["--no-daemon"],
        };
        let mut server = project.server(&extra)?;
        let init = server.handshake()?;
        session.get_or_insert(session_of(&init)?);
        // What each file may hold now: what the last rounds wrote or tried to write.
        let mut allowed: Vec<Vec<String>> = Vec::new();
        let mut files = Vec::new();
        for name in names {
            let now = fs::read_to_string(project.tree.join(name))?;
            files.push(
                json!({"docPath": name, "originalSha256": project.sha256(name)?,
                "changes": [{"operation": "replace", "startLine": 1, "endLine": 10000,
                    "newLines": content(round).lines().collect::<Vec<_>>()}]}),
            );
            allowed.push(vec![now, content(round)]);
        }
        // The store agrees with the disk after the last crash.
        for name in names {
            assert_eq!(read_sha(&mut server, name)?, project.sha256(name)?);
            let history: Value = serde_json::from_str(&ok(
                &mut server,
                "get_file_history",
                json!({"filepath": name, "limit": 1}),
            )?)?;
            assert_eq!(
                history["versions"][0]["sha256"].as_str(),
                Some(project.sha256(name)?.as_str()),
                "round {round}: {name}'s latest stored version is the file on disk"
            );
        }
        server.send(
            &json!({"jsonrpc": "2.0", "id": 9999, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"files": files}}}),
        )?;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(std::time::Duration::from_micros(seed % 300_000));
        server.kill()?;
        for (name, allowed) in names.iter().zip(&allowed) {
            let now = fs::read_to_string(project.tree.join(name))?;
            if now == allowed[1] {
                new_rounds += 1;
            }
            assert!(
                allowed.contains(&now),
                "round {round}: {name} holds neither its old nor its new content ({} bytes)",
                now.len()
            );
        }
    }
    eprintln!(
        "{new_rounds} of {} files written before the kill",
        crash_rounds() * names.len()
    );
    Ok(())
}

#[test]
fn the_settings_decide_which_writes_run_wait_for_a_person_or_are_refused() -> TestResult {
    let project = Project::new()?;
    let store = project.store.to_str().ok_or("path")?.to_string();
    let strata = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&store)
            .args(args)
            .output()
    };
    assert!(strata(&["--no-daemon", "init"])?.status.success());
    let settings = project.store.join("settings.toml");
    let mut text = fs::read_to_string(&settings).unwrap_or_default();
    text.push_str(
        "\n[file_access.permissions]\nmode = \"manual\"\n\
         auto_approve_write_patterns = [\"NOTES.txt\", \"src/**\"]\n\
         auto_deny_patterns = [\"generated/**\"]\nrequire_approval = []\n",
    );
    fs::write(&settings, text)?;
    let mount = project.mount()?;
    let env = [("STRATA_IDLE_TIMEOUT", "20")];
    let mut agent = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let session = session_of(&agent.handshake()?)?;
    // An auto-approved glob (matched without regard to case): runs.
    let sha = read_sha(&mut agent, "notes.txt")?;
    written(
        &mut agent,
        "write_file",
        json!({"filepath": "notes.txt", "content": "edited\n", "expected_sha256": sha}),
    )?;
    written(
        &mut agent,
        "write_file",
        json!({"filepath": "src/new.rs", "content": "// new\n"}),
    )?;
    // A denied glob: refused, nothing written.
    let (text, failed) = call(
        &mut agent,
        "write_file",
        json!({"filepath": "generated/out.txt", "content": "x\n"}),
    )?;
    assert!(failed, "{text}");
    assert!(text.contains("auto_deny_patterns"), "{text}");
    assert!(!project.tree.join("generated").exists());
    // Anything else gets the mode: manual, held until a person approves it.
    let (held, _) = write(
        &mut agent,
        "write_file",
        json!({"filepath": "docs/guide.md", "content": "# Guide\n"}),
    )?;
    let token = token_of(&held)?;
    assert!(!project.tree.join("docs/guide.md").exists(), "held: {held}");
    let approved = strata(&["session", "approve", &session, &token])?;
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    assert_eq!(
        fs::read_to_string(project.tree.join("docs/guide.md"))?,
        "# Guide\n"
    );
    // require_approval = []: a deletion under an auto-approved glob runs at once.
    let sha = read_sha(&mut agent, "notes.txt")?;
    written(
        &mut agent,
        "delete_file",
        json!({"filepath": "notes.txt", "expected_sha256": sha}),
    )?;
    assert!(!project.tree.join("notes.txt").exists());
    // The audit: every call of a writing tool, oldest first, with its hashes and outcome.
    let audit = strata(&["audit", "--jsonl", "--session", &session])?;
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    let entries: Vec<Value> = String::from_utf8(audit.stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let tools: Vec<(&str, bool)> = entries
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or(""),
                e["success"] == json!(true),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("write_file", true),
            ("write_file", true),
            ("write_file", false),
            ("write_file", false),
            ("write_file", true),
            ("delete_file", true),
        ],
        "{entries:?}"
    );
    let first = &entries[0];
    assert_eq!(first["files"][0]["filename"], "notes.txt", "{first}");
    assert_eq!(
        first["files"][0]["previous_sha256"].as_str(),
        Some(sha256_hex(b"one\ntwo\nthree\n").as_str())
    );
    assert_eq!(
        first["files"][0]["sha256"].as_str(),
        Some(sha256_hex(b"edited\n").as_str())
    );
    assert!(
        first["caller"].is_string(),
        "the MCP client's name: {first}"
    );
    assert_eq!(
        entries[1]["files"][0]["previous_sha256"],
        Value::Null,
        "created"
    );
    assert_eq!(
        entries[3]["error_code"], "APPROVAL_REQUIRED",
        "{}",
        entries[3]
    );
    assert_eq!(entries[5]["files"][0]["sha256"], Value::Null, "deleted");
    let other = strata(&["audit", "--jsonl", "--session", "nobody"])?;
    assert!(other.status.success() && other.stdout.is_empty());
    let table = strata(&["audit"])?;
    let table = String::from_utf8(table.stdout)?;
    assert!(
        table.starts_with("TX") && table.contains("delete_file"),
        "{table}"
    );
    agent.finish()?;
    strata(&["stop"])?;
    Ok(())
}

/// SHA-256 of `bytes` in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    strata::hash::sha256(bytes).to_hex()
}

/// The copy the client-precedence tests push over notes.txt ("one\ntwo\nthree\n").
const UNSAVED: &str = "one\nTWO\nthree\n";

/// `strata --store STORE ARGS` (through the daemon), with `stdin`.
fn strata_cli(store: &str, args: &[&str], stdin: &[u8]) -> Fallible<std::process::Output> {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(store)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("stdin")?.write_all(stdin)?;
    Ok(child.wait_with_output()?)
}

/// Seed 002's client copy precedence through the real processes: a copy pushed with `strata
/// session push` (through the daemon) is what `strata mcp`'s reads return; the agent's writes
/// over another party's copy get `overlapping_edits` (the copy's hash, a diff from what the agent
/// saw) and change nothing; once the user saves it, it goes and writes run; a copy pushed under
/// the agent's own caller name is the base its write builds on; withdrawing gives the disk back;
/// bad pushes and withdrawals are clear errors that change nothing.
#[test]
fn a_pushed_copy_is_read_and_blocks_other_writes_until_saved_or_withdrawn() -> TestResult {
    let project = Project::new()?;
    let (store, mut agent, session) = agent_through_a_daemon(&project)?;
    let disk_sha = read_sha(&mut agent, "notes.txt")?;
    let copy_sha = sha256_hex(UNSAVED.as_bytes());
    let push = |caller: &str, stdin: &[u8], path: &str| {
        strata_cli(
            &store,
            &[
                "session",
                "push",
                &session,
                path,
                "--content",
                "-",
                "--caller",
                caller,
                "--json",
            ],
            stdin,
        )
    };
    let pushed = push("editor", UNSAVED.as_bytes(), "notes.txt")?;
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let answer: Value = serde_json::from_slice(&pushed.stdout)?;
    assert_eq!(answer["sha256"], json!(copy_sha), "{answer}");
    assert_eq!(answer["standing"], json!(true));
    // Reads return the copy, with its hash.
    let read = ok(&mut agent, "read_file", json!({"filepath": "notes.txt"}))?;
    let (head, body) = header(&read)?;
    assert_eq!(
        (head["sha256"].as_str(), body),
        (Some(copy_sha.as_str()), UNSAVED)
    );
    // Writes over another party's copy: overlapping_edits, with or without the copy's hash.
    let line_patch = |sha: &str, from: &str, to: &str| {
        json!({"files": [{"docPath": "notes.txt", "originalSha256": sha, "changes": [
            {"operation": "replace", "startLine": 1, "endLine": 1,
             "expectedOriginalLines": [from], "newLines": [to]}]}]})
    };
    let over = refused(
        &mut agent,
        &project,
        "notes.txt",
        "apply_patch",
        line_patch(&copy_sha, "one", "ONE"),
    )?;
    assert_eq!(over["errorCode"], "CONFLICT", "{over}");
    assert_eq!(over["conflict"]["kind"], "overlapping_edits", "{over}");
    assert_eq!(over["conflict"]["current_sha256"], json!(copy_sha));
    assert!(
        over["errorMessage"]
            .as_str()
            .unwrap_or("")
            .contains("editor"),
        "{over}"
    );
    let stale_view = refused(
        &mut agent,
        &project,
        "notes.txt",
        "write_file",
        json!({"filepath": "notes.txt", "content": "x\n", "expected_sha256": disk_sha}),
    )?;
    assert_eq!(stale_view["conflict"]["kind"], "overlapping_edits");
    let diff = stale_view["conflict"]["diff"].as_str().unwrap_or("");
    assert!(
        diff.contains("-two\n") && diff.contains("+TWO\n"),
        "{stale_view}"
    );
    // Bad input: each a clear error, nothing changed (no commit, the copy as it was).
    let commits = || -> Fallible<usize> {
        let history = strata_cli(&store, &["session", "history", &session, "--json"], b"")?;
        let history: Value = serde_json::from_slice(&history.stdout)?;
        Ok(history["commits"].as_array().map_or(0, Vec::len))
    };
    let before = commits()?;
    for (stdin, path, expected) in [
        (&b"x\n"[..], "/elsewhere/notes.txt", "outside"),
        (&b"\xff\xfe not text"[..], "notes.txt", "not UTF-8"),
        (&b"TOKEN=other\n"[..], ".env", "deny"),
    ] {
        let out = push("editor", stdin, path)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "pushing {path} is refused");
        assert!(stderr.contains(expected), "{path}: {stderr}");
        assert_eq!(commits()?, before, "pushing {path} committed nothing");
    }
    let read = ok(&mut agent, "read_file", json!({"filepath": "notes.txt"}))?;
    assert_eq!(header(&read)?.1, UNSAVED, "the copy stands as it was");
    // The user saves the copy: it goes, and the agent writes again.
    fs::write(project.tree.join("notes.txt"), UNSAVED)?;
    assert_eq!(read_sha(&mut agent, "notes.txt")?, copy_sha);
    let shown = strata_cli(&store, &["session", "show", &session, "--json"], b"")?;
    let shown: Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(shown["config"].get("pushed"), None, "{shown}");
    written(
        &mut agent,
        "apply_patch",
        line_patch(&copy_sha, "one", "ONE"),
    )?;
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "ONE\nTWO\nthree\n"
    );
    // A copy pushed under the agent's own caller name is the base its write builds on; the
    // write supersedes it.
    let saved_sha = read_sha(&mut agent, "notes.txt")?;
    let own = "ONE\nTWO\nthree\nfour\n";
    assert!(
        push("strata-e2e", own.as_bytes(), "notes.txt")?
            .status
            .success()
    );
    let own_sha = sha256_hex(own.as_bytes());
    assert_eq!(read_sha(&mut agent, "notes.txt")?, own_sha);
    let stale = refused(
        &mut agent,
        &project,
        "notes.txt",
        "apply_patch",
        line_patch(&saved_sha, "ONE", "1"),
    )?;
    assert_eq!(stale["conflict"]["kind"], "stale_buffer", "{stale}");
    assert_eq!(stale["conflict"]["current_sha256"], json!(own_sha));
    written(&mut agent, "apply_patch", line_patch(&own_sha, "ONE", "1"))?;
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "1\nTWO\nthree\nfour\n"
    );
    // Withdrawn: the disk again; withdrawing what no copy stands for is refused.
    assert!(push("editor", b"draft\n", "notes.txt")?.status.success());
    assert_eq!(read_sha(&mut agent, "notes.txt")?, sha256_hex(b"draft\n"));
    let withdraw = || strata_cli(&store, &["session", "withdraw", &session, "notes.txt"], b"");
    let out = withdraw()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        read_sha(&mut agent, "notes.txt")?,
        project.sha256("notes.txt")?
    );
    let before = commits()?;
    let again = withdraw()?;
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("pushed copy"), "{stderr}");
    assert_eq!(commits()?, before);
    agent.finish()?;
    strata_cli(&store, &["stop"], b"")?;
    Ok(())
}

/// Client copy precedence through the engine's requests: the copy is kept with the session (a
/// reopened engine and a fork read it), a copy equal to the disk does not stand, an unnamed
/// pusher is always another party, and every bad request (neither or both of text and base64,
/// bad base64, non-UTF-8 bytes, a read-only mount, a path outside the mounts, an unknown session,
/// withdrawing what stands for nothing) is a typed error that commits nothing.
#[test]
fn pushed_copies_through_the_engine_persist_pass_to_forks_and_refuse_bad_input() -> TestResult {
    use strata::engine::{
        Access, AgentCallRequest, AgentPushRequest, AgentWithdrawRequest, Engine,
        SessionForkRequest, SessionHistoryRequest, SessionNewRequest, SessionShowRequest,
    };
    use strata::resolve::MountMapping;
    let project = Project::new()?;
    let tree = project.tree.to_str().ok_or("path")?;
    let ro = project.tree.join("src");
    let engine = Engine::open(&project.store, Access::Create)?;
    engine.call(SessionNewRequest {
        id: Some("s1".into()),
        mounts: vec![
            MountMapping::new("/work", tree),
            MountMapping::new("/ro", ro.to_str().ok_or("path")?).as_read_only(),
        ],
        ..SessionNewRequest::default()
    })?;
    let push = |engine: &Engine, filepath: &str, text: Option<&str>, base64: Option<&str>| {
        engine.call(AgentPushRequest {
            session: "s1".into(),
            filepath: filepath.into(),
            text: text.map(str::to_string),
            base64: base64.map(str::to_string),
            caller: None,
        })
    };
    let call = |engine: &Engine, sid: &str, tool: &str, args: Value| -> Fallible<(Value, String)> {
        let answer = engine
            .call(AgentCallRequest {
                session: sid.into(),
                tool: tool.into(),
                args: args.as_object().cloned().unwrap_or_default(),
                caller: Some("agent".into()),
            })?
            .answer;
        let (head, body) = header(&answer.text).unwrap_or((Value::Null, ""));
        let head = if head.is_null() {
            serde_json::from_str(&answer.text)?
        } else {
            head
        };
        Ok((head, body.to_string()))
    };
    let commits = |engine: &Engine| -> Fallible<usize> {
        Ok(engine
            .call(SessionHistoryRequest { id: "s1".into() })?
            .commits
            .len())
    };
    // The same bytes as the disk: nothing unsaved, nothing stands.
    let same = push(&engine, "notes.txt", Some("one\ntwo\nthree\n"), None)?;
    assert!(!same.file.standing);
    let kept = push(&engine, "notes.txt", None, Some("b25lCnR3bwo="))?; // "one\ntwo\n"
    assert!(kept.file.standing);
    assert_eq!(kept.file.sha256, sha256_hex(b"one\ntwo\n"));
    assert_eq!(kept.file.path, "/work/notes.txt");
    // Bad requests: typed errors, no commit.
    let before = commits(&engine)?;
    let bad = [
        push(&engine, "notes.txt", None, None).err(),
        push(&engine, "notes.txt", Some("a"), Some("YQ==")).err(),
        push(&engine, "notes.txt", None, Some("not base64!")).err(),
        push(&engine, "notes.txt", None, Some("//79")).err(), // ff fe fd
        push(&engine, "/ro/main.rs", Some("x"), None).err(),
        push(&engine, "/nowhere/a.txt", Some("x"), None).err(),
        push(&engine, "missing.txt", Some("x"), None).err(),
        engine
            .call(AgentWithdrawRequest {
                session: "s1".into(),
                filepath: "README.md".into(),
            })
            .err(),
    ];
    let kinds: Vec<String> = bad
        .iter()
        .map(|e| match e {
            Some(strata::Error::InvalidInput { .. }) => "input".to_string(),
            Some(strata::Error::InvalidPath { .. }) => "path".to_string(),
            Some(strata::Error::NotFound { .. }) => "not_found".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "input",
            "input",
            "input",
            "input",
            "path",
            "path",
            "path",
            "not_found"
        ],
        "{bad:?}"
    );
    assert!(
        bad[3]
            .as_ref()
            .is_some_and(|e| e.to_string().contains("not UTF-8")),
        "{bad:?}"
    );
    assert_eq!(commits(&engine)?, before, "no bad request committed");
    let (head, body) = call(
        &engine,
        "s1",
        "read_lines",
        json!({"filepath": "notes.txt", "start": 1, "end": 3}),
    )?;
    assert_eq!(
        (head["sha256"].as_str(), body.as_str()),
        (Some(kept.file.sha256.as_str()), "one\ntwo\n")
    );
    // Unnamed pusher: another party's copy whoever writes.
    let (refused_write, _) = call(
        &engine,
        "s1",
        "write_file",
        json!({"filepath": "notes.txt", "content": "z\n", "expected_sha256": kept.file.sha256}),
    )?;
    assert_eq!(
        refused_write["conflict"]["kind"], "overlapping_edits",
        "{refused_write}"
    );
    assert_eq!(
        fs::read_to_string(project.tree.join("notes.txt"))?,
        "one\ntwo\nthree\n"
    );
    drop(engine);
    // Reopened, and in a fork: the copy still stands.
    let engine = Engine::open(&project.store, Access::ReadWrite)?;
    let shown = engine.call(SessionShowRequest {
        id: "s1".into(),
        as_of_tx: None,
    })?;
    assert_eq!(shown.config.pushed.len(), 1);
    engine.call(SessionForkRequest {
        id: "s1".into(),
        as_of_tx: None,
        new_id: Some("child".into()),
    })?;
    for sid in ["s1", "child"] {
        let (_, body) = call(&engine, sid, "read_file", json!({"filepath": "notes.txt"}))?;
        assert_eq!(body, "one\ntwo\n", "{sid}");
    }
    let withdrawn = engine.call(AgentWithdrawRequest {
        session: "s1".into(),
        filepath: "README.md".into(),
    });
    // No copy stands for README.md.
    assert!(matches!(withdrawn, Err(strata::Error::NotFound { .. })));
    let withdrawn = engine.call(AgentWithdrawRequest {
        session: "s1".into(),
        filepath: "/work/notes.txt".into(),
    })?;
    assert_eq!(withdrawn.file.sha256, kept.file.sha256);
    let (_, body) = call(&engine, "s1", "read_file", json!({"filepath": "notes.txt"}))?;
    assert_eq!(body, "one\ntwo\nthree\n");
    let (_, body) = call(
        &engine,
        "child",
        "read_file",
        json!({"filepath": "notes.txt"}),
    )?;
    assert_eq!(body, "one\ntwo\n", "the fork's copy is its own");
    Ok(())
}
