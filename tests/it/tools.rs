//! The session tools end to end through the real `strata mcp` in session mode: every tool and
//! error path, the hash each read returns against the file's own SHA-256, descriptors across
//! restarts and forks, ids stable across restarts, the recorded tool calls with their caller,
//! the same through a daemon; and `schema/tools/` against the tools' definitions.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use strata::agent::tools::{FD_TO_FILE, READ_FD, READING_TOOLS, WRITING_TOOLS, tool_definition};

use super::mcp::Server;

pub(super) type Fallible<T> = Result<T, Box<dyn std::error::Error>>;
pub(super) type TestResult = Fallible<()>;

/// Where the tool schemas live.
const TOOL_SCHEMA_DIR: &str = "schema/tools";

/// A project tree and a store beside it.
pub(super) struct Project {
    _tmp: tempfile::TempDir,
    pub(super) tree: PathBuf,
    pub(super) store: PathBuf,
}

impl Project {
    pub(super) fn new() -> Fallible<Self> {
        let tmp = tempfile::tempdir()?;
        let tree = tmp.path().join("tree");
        let files: [(&str, &[u8]); 8] = [
            ("README.md", b"# Demo\n\nA demo tree.\n## Usage\nRun it.\n"),
            ("src/main.rs", b"fn main() {\n    println!(\"hi\");\n}\n"),
            (
                "src/lib.rs",
                b"//! Lib.\npub struct A;\nlet password = \"hunter2hunter2\";\n",
            ),
            ("notes.txt", b"one\ntwo\nthree\n"),
            ("node_modules/x.js", b"x\n"),
            (".env", b"TOKEN=secret\n"),
            ("blob.bin", b"\0\x01binary"),
            ("crlf.txt", b"a\r\nb\r\n"),
        ];
        for (rel, bytes) in files {
            let path = tree.join(rel);
            fs::create_dir_all(path.parent().ok_or("parent")?)?;
            fs::write(path, bytes)?;
        }
        let big: String = (1..=3000)
            .map(|i| format!("line {i} of the big file\n"))
            .collect();
        fs::write(tree.join("big.log"), big)?;
        let store = tmp.path().join("store");
        Ok(Project {
            _tmp: tmp,
            tree,
            store,
        })
    }

    pub(super) fn mount(&self) -> Fallible<String> {
        Ok(format!("/work={}", self.tree.to_str().ok_or("path")?))
    }

    /// `strata mcp` in session mode over this project; `extra` adds flags (`--session ID`…).
    pub(super) fn server(&self, extra: &[&str]) -> Fallible<Server> {
        let store = self.store.to_str().ok_or("path")?.to_string();
        let mount = self.mount()?;
        let mut args = vec!["--store", &store, "--mount", &mount];
        args.extend_from_slice(extra);
        Server::start(&args, &[], &self.tree)
    }

    /// The `strata` CLI on this store (no daemon), its stdout as JSON.
    pub(super) fn cli(&self, args: &[&str]) -> Fallible<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--store")
            .arg(&self.store)
            .arg("--no-daemon")
            .args(args)
            .output()?;
        if !out.status.success() {
            return Err(
                format!("strata {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into(),
            );
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    pub(super) fn sha256(&self, rel: &str) -> Fallible<String> {
        let bytes = fs::read(self.tree.join(rel))?;
        Ok(strata::hash::sha256(&bytes).to_hex())
    }
}

/// A session tool's answer: its text and whether it failed.
pub(super) fn call(server: &mut Server, tool: &str, arguments: Value) -> Fallible<(String, bool)> {
    let result = server.result("tools/call", json!({"name": tool, "arguments": arguments}))?;
    let text = match result["content"].as_array().map(Vec::as_slice) {
        Some([content]) if content["type"] == "text" => {
            content["text"].as_str().ok_or("text")?.to_owned()
        }
        _ => return Err(format!("{tool} did not answer with one text content: {result}").into()),
    };
    Ok((text, result["isError"] == json!(true)))
}

pub(super) fn ok(server: &mut Server, tool: &str, arguments: Value) -> Fallible<String> {
    let (text, failed) = call(server, tool, arguments.clone())?;
    if failed {
        return Err(format!("{tool} {arguments} failed: {text}").into());
    }
    Ok(text)
}

/// The error kind of a failed call.
pub(super) fn kind(server: &mut Server, tool: &str, arguments: Value) -> Fallible<String> {
    let (text, failed) = call(server, tool, arguments.clone())?;
    if !failed {
        return Err(format!("{tool} {arguments} should fail: {text}").into());
    }
    let error: Value = serde_json::from_str(&text)?;
    Ok(error["error"].as_str().ok_or("no error kind")?.to_owned())
}

pub(super) fn header(text: &str) -> Fallible<(Value, &str)> {
    let (head, body) = text.split_once('\n').unwrap_or((text, ""));
    Ok((serde_json::from_str(head)?, body))
}

/// The session id `initialize` names in its instructions.
pub(super) fn session_of(init: &Value) -> Fallible<String> {
    let text = init["instructions"].as_str().ok_or("no instructions")?;
    let after = text
        .split("strata session ")
        .nth(1)
        .ok_or("no session id")?;
    Ok(after.split(':').next().ok_or("no session id")?.to_owned())
}

#[test]
fn tools_list_matches_schema_tools() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    let init = server.handshake()?;
    let instructions = init["instructions"].as_str().ok_or("instructions")?;
    assert!(
        instructions.contains("<file_descriptor_instructions>"),
        "{instructions}"
    );
    let listed = server.result("tools/list", json!({}))?;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .ok_or("tools")?
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let mut want = READING_TOOLS.to_vec();
    want.extend(WRITING_TOOLS);
    want.push(READ_FD);
    want.push(FD_TO_FILE);
    assert_eq!(names, want);
    let bless = std::env::var_os("STRATA_BLESS").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(TOOL_SCHEMA_DIR);
    let mut drift = Vec::new();
    for tool in listed["tools"].as_array().ok_or("tools")? {
        let name = tool["name"].as_str().ok_or("name")?;
        let path = dir.join(format!("{name}.json"));
        let want = tool_definition(name).ok_or("definition")?;
        assert_eq!(tool, &want, "tools/list gives the definition as it is");
        let text = serde_json::to_string_pretty(&want)? + "\n";
        if bless {
            fs::create_dir_all(&dir)?;
            fs::write(&path, &text)?;
        } else if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            drift.push(name.to_owned());
        }
    }
    assert!(
        drift.is_empty(),
        "{TOOL_SCHEMA_DIR}/ differs from the tools' definitions for {drift:?}; run `STRATA_BLESS=1 cargo test --test it tools`"
    );
    server.finish()?;
    // A session without descriptors lists no read_fd.
    let mut plain = project.server(&["--no-daemon", "--no-descriptors"])?;
    let init = plain.handshake()?;
    assert!(
        !init["instructions"]
            .as_str()
            .unwrap_or_default()
            .contains("file_descriptor")
    );
    assert!(!plain.tool_names()?.contains(&READ_FD.to_owned()));
    plain.finish()
}

#[test]
fn initialize_offers_the_entrypoints_excerpts_with_their_hashes() -> TestResult {
    let project = Project::new()?;
    fs::write(
        project.tree.join("AGENTS.md"),
        "Run the tests.\napi_key = \"abcd1234abcd1234\"\n",
    )?;
    fs::write(
        project.tree.join("Cargo.toml"),
        "[package]\nname = \"demo\"\n",
    )?;
    fs::write(project.tree.join("package.json"), b"\0\x01 not text")?;
    let mut server = project.server(&[])?;
    let init = server.initialize()?;
    let text = init["instructions"].as_str().ok_or("instructions")?;
    let frames: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ENTRYPOINT "))
        .collect();
    assert_eq!(frames.len(), 3, "{text}");
    for (frame, name) in frames.iter().zip(["AGENTS.md", "README.md", "Cargo.toml"]) {
        let sha = project.sha256(name)?;
        assert!(
            frame.contains(&format!("filename=\"{name}\" sha256={sha}")),
            "{frame}"
        );
    }
    assert!(
        text.contains("Run the tests.") && text.contains("# Demo"),
        "{text}"
    );
    assert!(
        !text.contains("abcd1234abcd1234"),
        "credentials are redacted: {text}"
    );
    // The excerpt's file id names the same file for the tools.
    let id = frames[1]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("fileId="))
        .ok_or("fileId")?;
    let read = ok(&mut server, "read_file", json!({"filepath": id}))?;
    assert!(read.contains("A demo tree."), "{read}");
    Ok(())
}

#[test]
fn every_tool_answers_and_every_error_path_is_an_error_result() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    server.handshake()?;
    let listing: Value = serde_json::from_str(&ok(
        &mut server,
        "list_files",
        json!({"include_metadata": true}),
    )?)?;
    let files: Vec<(&str, &str)> = listing["files"]
        .as_array()
        .ok_or("files")?
        .iter()
        .map(|f| {
            (
                f["fileId"].as_str().unwrap_or(""),
                f["filename"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("f1", ".env"),
            ("f2", "big.log"),
            ("f3", "blob.bin"),
            ("f4", "crlf.txt"),
            ("f5", "notes.txt"),
            ("f6", "README.md"),
            ("f7", "src/lib.rs"),
            ("f8", "src/main.rs"),
        ]
    );
    let text = ok(&mut server, "read_file", json!({"filepath": "f8"}))?;
    let (head, body) = header(&text)?;
    assert_eq!(
        (head["fileId"].clone(), head["filename"].clone()),
        (json!("f8"), json!("src/main.rs"))
    );
    assert_eq!(body, "fn main() {\n    println!(\"hi\");\n}\n");
    let text = ok(
        &mut server,
        "read_lines",
        json!({"filepath": "crlf.txt", "start": 2, "end": 2}),
    )?;
    assert_eq!(header(&text)?.1, "b\r\n", "bytes as they are");
    let text = ok(
        &mut server,
        "get_excerpt",
        json!({"filepath": "/work/src/lib.rs", "max_lines": 2}),
    )?;
    assert_eq!(header(&text)?.1, "//! Lib.\npub struct A;\n");
    let text = ok(
        &mut server,
        "summarize_file",
        json!({"filepath": "README.md", "max_tokens": 100}),
    )?;
    assert!(
        text.contains("1: # Demo") && text.contains("4: ## Usage"),
        "{text}"
    );
    let found: Value =
        serde_json::from_str(&ok(&mut server, "search", json!({"query": "fn|struct"}))?)?;
    assert_eq!(found["results"][0]["fileId"], "f7");
    let history: Value = serde_json::from_str(&ok(
        &mut server,
        "get_file_history",
        json!({"filepath": "f8"}),
    )?)?;
    assert_eq!(history["total"], 1);
    fs::write(project.tree.join("src/main.rs"), "fn main() {}\n")?;
    let diff = ok(&mut server, "get_file_diff", json!({"filepath": "f8"}))?;
    assert!(diff.contains("-    println!(\"hi\");"), "{diff}");
    let big = ok(&mut server, "read_file", json!({"filepath": "big.log"}))?;
    assert!(big.starts_with("<fd_result fd=\"fd:1\""), "{}", &big[..100]);
    let page = ok(&mut server, "read_fd", json!({"fd": "fd:1", "start": 2}))?;
    assert!(page.starts_with("<fd_content fd=\"fd:1\" page=\"2\""));

    let errors: [(&str, Value, &str); 14] = [
        ("read_file", json!({}), "invalid_input"),
        ("read_file", json!({"filepath": "f0"}), "invalid_input"),
        ("read_file", json!({"filepath": "f99"}), "not_found"),
        ("read_file", json!({"filepath": "missing.rs"}), "io"),
        (
            "read_file",
            json!({"filepath": "/etc/hosts"}),
            "invalid_path",
        ),
        (
            "read_file",
            json!({"filepath": ".env"}),
            "permission_denied",
        ),
        (
            "read_file",
            json!({"filepath": "blob.bin"}),
            "invalid_input",
        ),
        (
            "read_file",
            json!({"filepath": "f8", "extra": 1}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": 5, "end": 4}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": 40, "end": 41}),
            "invalid_input",
        ),
        ("search", json!({"query": "(?<=a)b"}), "invalid_input"),
        ("list_files", json!({"pattern": "[z"}), "invalid_input"),
        (
            "get_file_history",
            json!({"filepath": "nothing/here.md"}),
            "not_found",
        ),
        (
            "get_file_diff",
            json!({"filepath": "f8", "v2": "yesterday"}),
            "invalid_input",
        ),
    ];
    for (tool, arguments, want) in errors {
        assert_eq!(
            kind(&mut server, tool, arguments.clone())?,
            want,
            "{tool} {arguments}"
        );
    }
    let (text, failed) = call(&mut server, "read_fd", json!({"fd": "fd:7"}))?;
    assert!(
        failed && text.starts_with("<fd_error type=\"not_found\" fd=\"fd:7\">"),
        "{text}"
    );
    let (text, failed) = call(&mut server, "read_fd", json!({"fd": "fd:1", "start": 99}))?;
    assert!(failed && text.contains("invalid_page"), "{text}");
    let unknown = server.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    )?;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    server.finish()
}

#[test]
fn each_read_returns_the_files_sha256_and_search_and_summaries_none() -> TestResult {
    let project = Project::new()?;
    let mut server = project.server(&["--no-daemon"])?;
    server.handshake()?;
    for (rel, tool, arguments) in [
        ("src/lib.rs", "read_file", json!({"filepath": "src/lib.rs"})),
        (
            "crlf.txt",
            "read_lines",
            json!({"filepath": "crlf.txt", "start": 1, "end": 1}),
        ),
        ("README.md", "get_excerpt", json!({"filepath": "README.md"})),
    ] {
        let (head, _) = header(&ok(&mut server, tool, arguments)?)?;
        assert_eq!(head["sha256"], json!(project.sha256(rel)?), "{tool} {rel}");
    }
    let (head, _) = header(&ok(
        &mut server,
        "get_file_diff",
        json!({"filepath": "notes.txt"}),
    )?)?;
    assert_eq!(head["to"]["sha256"], json!(project.sha256("notes.txt")?));
    let history: Value = serde_json::from_str(&ok(
        &mut server,
        "get_file_history",
        json!({"filepath": "src/lib.rs"}),
    )?)?;
    assert_eq!(
        history["versions"][0]["sha256"],
        json!(project.sha256("src/lib.rs")?)
    );
    let summary = ok(
        &mut server,
        "summarize_file",
        json!({"filepath": "src/lib.rs"}),
    )?;
    let found = ok(&mut server, "search", json!({"query": "password|struct"}))?;
    for text in [&summary, &found] {
        assert!(!text.contains("sha256"), "{text}");
        assert!(!text.contains(&project.sha256("src/lib.rs")?), "{text}");
        assert!(
            !text.contains("hunter2hunter2"),
            "credentials redacted: {text}"
        );
    }
    server.finish()
}

#[test]
fn descriptors_and_ids_survive_restarts_and_pass_to_forks_and_calls_are_recorded() -> TestResult {
    let project = Project::new()?;
    let mut first = project.server(&["--no-daemon"])?;
    let session = session_of(&first.handshake()?)?;
    ok(&mut first, "list_files", json!({}))?;
    let big = ok(&mut first, "read_file", json!({"filepath": "big.log"}))?;
    assert!(big.contains("fd=\"fd:1\""));
    let page3 = ok(&mut first, "read_fd", json!({"fd": "fd:1", "start": 3}))?;
    first.finish()?;
    // A new file between runs gets the next id; the old ids stay.
    fs::write(project.tree.join("aaa.txt"), "new\n")?;
    let mut again = project.server(&["--no-daemon", "--session", &session])?;
    assert_eq!(session_of(&again.handshake()?)?, session);
    assert_eq!(
        ok(&mut again, "read_fd", json!({"fd": "fd:1", "start": 3}))?,
        page3
    );
    let listing: Value = serde_json::from_str(&ok(&mut again, "list_files", json!({}))?)?;
    assert_eq!(listing["files"][0]["fileId"], "f1");
    assert_eq!(
        listing["files"][8],
        json!({"fileId": "f9", "filename": "aaa.txt", "path": "/work/aaa.txt"})
    );
    again.finish()?;
    // The recorded calls: arguments, status, files, and the client's name outside the hashes.
    let shown = project.cli(&["session", "show", &session, "--json"])?;
    let callers = &shown["config"]["callers"];
    assert_eq!(callers[0]["caller"], "strata-e2e", "{shown}");
    let calls: Vec<&str> = shown["session_index"]
        .as_array()
        .ok_or("index")?
        .iter()
        .filter_map(Value::as_str)
        .filter(|id| id.starts_with("toolcall:"))
        .collect();
    assert_eq!(calls.len(), 5, "{shown}");
    let read = project.cli(&["show", calls[1], "--json"])?;
    assert_eq!(read["tool"], "read_file");
    assert_eq!(read["status"], "ok");
    assert_eq!(read["args"], json!({"filepath": "big.log"}));
    assert!(
        read["content"]
            .as_str()
            .unwrap_or("")
            .ends_with("line 3000 of the big file\n"),
        "the whole output is kept"
    );
    assert_eq!(read["file_refs"].as_array().map(Vec::len), Some(1));
    // A fork reads its parent's descriptors and ids.
    let forked = project.cli(&["session", "fork", &session, "--json"])?;
    let child = forked["session_id"].as_str().ok_or("child id")?;
    let mut fork = project.server(&["--no-daemon", "--session", child])?;
    fork.handshake()?;
    assert_eq!(
        ok(&mut fork, "read_fd", json!({"fd": "fd:1", "start": 3}))?,
        page3
    );
    let text = ok(
        &mut fork,
        "read_lines",
        json!({"filepath": "f9", "start": 1, "end": 1}),
    )?;
    assert_eq!(header(&text)?.1, "new\n");
    fork.finish()
}

#[test]
fn through_a_daemon_two_servers_share_the_store() -> TestResult {
    let project = Project::new()?;
    let env = [("STRATA_IDLE_TIMEOUT", "20")];
    let store = project.store.to_str().ok_or("path")?.to_string();
    let mount = project.mount()?;
    let mut a = Server::start(&["--store", &store, "--mount", &mount], &env, &project.tree)?;
    let session = session_of(&a.handshake()?)?;
    let mut b = Server::start(
        &["--store", &store, "--session", &session],
        &env,
        &project.tree,
    )?;
    b.handshake()?;
    let from_a = ok(
        &mut a,
        "read_lines",
        json!({"filepath": "src/main.rs", "start": 1, "end": 1}),
    )?;
    let from_b = ok(
        &mut b,
        "read_lines",
        json!({"filepath": "f8", "start": 1, "end": 1}),
    )?;
    assert_eq!(from_a, from_b);
    a.finish()?;
    b.finish()?;
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&project.store)
        .arg("stop")
        .output()?;
    let socket = project.store.join("strata.sock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while socket.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!socket.exists(), "the daemon stopped");
    Ok(())
}

/// The user input the paging tests give: 101 characters, white space first (the preview strips
/// it), and the reference the turn holds instead at `max_input_chars = 100` (a preview of
/// `min(150, 100 / 20) = 5` characters).
fn large_user_input() -> (String, String) {
    let input = format!("  ab {}", "y".repeat(96));
    let message = "<fd:1 preview=\"ab...\" type=\"user_input\" size=\"101\">\nThis large user input \
                   has been stored in file descriptor fd:1. Use read_fd(fd=\"fd:1\") to access \
                   the content.";
    (input, message.to_string())
}

/// The body of a `<fd_content>` answer.
fn fd_body(text: &str) -> Fallible<&str> {
    let body = text.split_once(">\n").ok_or("no fd_content body")?.1;
    Ok(body
        .rsplit_once("\n</fd_content>")
        .ok_or("no fd_content end")?
        .0)
}

/// Seed 004's user-input paging through the engine: only a user turn longer than
/// `max_input_chars` (settings.toml's `[file_descriptor]`) becomes a descriptor, exactly
/// `max_input_chars` stays whole, the turn holds the original's reference (without upstream's
/// `<fd:fd:1`), the descriptor (source `user_input`) reads back whole after a reopen and in a
/// fork; off by default, off with `descriptors: false`; a setting of 0 refuses the session.
#[test]
fn large_user_input_is_paged_when_configured_and_survives_reopen_and_fork() -> TestResult {
    use strata::engine::{
        Access, AgentCallRequest, AgentToolsRequest, Engine, SessionForkRequest, SessionLsRequest,
        SessionNewRequest, SessionShowRequest, SessionTurnRequest,
    };
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("store");
    let engine = Engine::open(&dir, Access::Create)?;
    let turn = |engine: &Engine, sid: &str, role: &str, content: &str| {
        engine.call(SessionTurnRequest {
            id: sid.into(),
            role: role.into(),
            content: content.into(),
            toolcall_refs: Vec::new(),
        })
    };
    let read_all = |engine: &Engine, sid: &str, fd: &str| -> Fallible<String> {
        let answer = engine
            .call(AgentCallRequest {
                session: sid.into(),
                tool: "read_fd".into(),
                args: json!({"fd": fd, "read_all": true})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                caller: None,
            })?
            .answer;
        if answer.is_error {
            return Err(answer.text.into());
        }
        Ok(fd_body(&answer.text)?.to_string())
    };
    let (input, message) = large_user_input();
    // Off by default: the input stays in the turn whole.
    engine.call(SessionNewRequest {
        id: Some("plain".into()),
        ..SessionNewRequest::default()
    })?;
    assert_eq!(
        turn(&engine, "plain", "user", &input.repeat(100))?.paged,
        None
    );
    // Configured in settings.toml, which the engine follows without a restart.
    fs::write(
        dir.join("settings.toml"),
        "[file_descriptor]\npage_user_input = true\nmax_input_chars = 100\n",
    )?;
    engine.call(SessionNewRequest {
        id: Some("s1".into()),
        ..SessionNewRequest::default()
    })?;
    let at_limit = format!("  ab {}", "y".repeat(95));
    let whole = turn(&engine, "s1", "user", &at_limit)?;
    assert_eq!(whole.paged, None, "exactly max_input_chars is not paged");
    let long_answer = "z".repeat(500);
    assert_eq!(turn(&engine, "s1", "assistant", &long_answer)?.paged, None);
    let paged = turn(&engine, "s1", "user", &input)?;
    let paged_input = paged.paged.ok_or("the 101-character input is not paged")?;
    assert_eq!(paged_input.fd, "fd:1");
    assert_eq!(paged_input.message, message);
    assert_eq!(read_all(&engine, "s1", "fd:1")?, input);
    let shown = engine.call(SessionShowRequest {
        id: "s1".into(),
        as_of_tx: None,
    })?;
    let contents: Vec<&str> = shown.turns.iter().map(|t| t.content.as_str()).collect();
    assert_eq!(contents, [&at_limit, &long_answer, &message]);
    let table = &shown
        .config
        .descriptors
        .as_ref()
        .ok_or("descriptors")?
        .table;
    assert_eq!(table["fd:1"].source, "user_input");
    let tools = engine.call(AgentToolsRequest {
        session: "s1".into(),
    })?;
    let instructions = tools.instructions.ok_or("no instructions")?;
    assert!(
        instructions.contains("<fd_user_input_instructions>"),
        "{instructions}"
    );
    // A session made without descriptors pages nothing.
    engine.call(SessionNewRequest {
        id: Some("none".into()),
        descriptors: Some(false),
        ..SessionNewRequest::default()
    })?;
    assert_eq!(turn(&engine, "none", "user", &input)?.paged, None);
    drop(engine);
    // Reopened: the descriptor reads back; a fork reads it and numbers its own from fd:2.
    let engine = Engine::open(&dir, Access::ReadWrite)?;
    assert_eq!(read_all(&engine, "s1", "fd:1")?, input);
    engine.call(SessionForkRequest {
        id: "s1".into(),
        as_of_tx: None,
        new_id: Some("child".into()),
    })?;
    assert_eq!(read_all(&engine, "child", "fd:1")?, input);
    let second = turn(&engine, "child", "user", &format!("{input}!"))?;
    assert_eq!(second.paged.map(|p| p.fd).as_deref(), Some("fd:2"));
    // A setting of 0 is refused, naming it and the file, and no session is made.
    fs::write(
        dir.join("settings.toml"),
        "[file_descriptor]\nmax_input_chars = 0\n",
    )?;
    let before = engine.call(SessionLsRequest {})?;
    let refused = engine.call(SessionNewRequest {
        id: Some("zero".into()),
        ..SessionNewRequest::default()
    });
    let text = refused
        .err()
        .ok_or("a zero setting was accepted")?
        .to_string();
    assert!(
        text.contains("max_input_chars") && text.contains("settings.toml"),
        "{text}"
    );
    assert_eq!(engine.call(SessionLsRequest {})?, before);
    Ok(())
}

/// The same through the real processes: `strata session turn` pages a large user input of an
/// MCP session (settings.toml configures it), `strata mcp` reads it with `read_fd` after a
/// restart and in a fork made by `strata session fork`.
#[test]
fn a_user_turn_paged_by_the_cli_is_read_over_mcp_in_the_session_and_its_fork() -> TestResult {
    let project = Project::new()?;
    let mut first = project.server(&["--no-daemon"])?;
    let session = session_of(&first.handshake()?)?;
    first.finish()?;
    fs::write(
        project.store.join("settings.toml"),
        "[file_descriptor]\npage_user_input = true\nmax_input_chars = 100\n",
    )?;
    // The session was made before the setting: its own settings stay (off).
    let (input, message) = large_user_input();
    let user_turn = |sid: &str| {
        project.cli(&[
            "session",
            "turn",
            sid,
            "--role",
            "user",
            "--content",
            &input,
            "--json",
        ])
    };
    let before = user_turn(&session)?;
    assert_eq!(before.get("paged"), None, "{before}");
    let mut second = project.server(&["--no-daemon"])?;
    let paging = session_of(&second.handshake()?)?;
    second.finish()?;
    let turned = user_turn(&paging)?;
    assert_eq!(turned["paged"], json!({"fd": "fd:1", "message": message}));
    let mut again = project.server(&["--no-daemon", "--session", &paging])?;
    let init = again.handshake()?;
    assert!(
        init["instructions"]
            .as_str()
            .unwrap_or("")
            .contains("<fd_user_input_instructions>"),
        "{init}"
    );
    let read_all = |server: &mut Server| -> Fallible<String> {
        let all = ok(server, "read_fd", json!({"fd": "fd:1", "read_all": true}))?;
        Ok(fd_body(&all)?.to_string())
    };
    assert_eq!(read_all(&mut again)?, input);
    again.finish()?;
    let forked = project.cli(&["session", "fork", &paging, "--json"])?;
    let child = forked["session_id"].as_str().ok_or("child id")?;
    let mut fork = project.server(&["--no-daemon", "--session", child])?;
    fork.handshake()?;
    assert_eq!(read_all(&mut fork)?, input);
    fork.finish()
}
