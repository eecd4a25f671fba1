//! `strata mcp` end to end: the real binary started as an MCP client starts it, spoken to in
//! newline-delimited JSON-RPC over its stdin and stdout (docs-mcp's e2e suites ported), and once
//! through the official Python MCP SDK.
//!
//! Every answer of docs mode is compared with the text the library gives in-process for the same
//! configuration, and the original's texts are spelled out for the error paths. The number of
//! servers run at once is `STRATA_MCP_PROCESSES` (default 8).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};
use std::{fs, thread};

use serde_json::{Value, json};
use strata::agent::docs::{DocsConfig, DocsLibrary, tool_definitions};

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

/// How long any one answer may take before the test fails instead of hanging.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The tools that take a file id.
const FILE_TOOLS: [&str; 4] = [
    "table_of_contents",
    "read_sections",
    "section_table_of_contents",
    "search",
];

/// A running `strata mcp` and the lines of its stdout (the session tools' tests use it too).
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Server {
    /// Starts `strata mcp ARGS…` in `cwd` with only the docs-mcp variables of `env` set.
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)], cwd: &Path) -> Fallible<Self> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command
            .arg("mcp")
            .args(args)
            .current_dir(cwd)
            .env_remove("DOCS_PATH")
            .env_remove("MAX_HEADERS")
            .env_remove("MAX_TOC_DEPTH")
            .env_remove("STRATA_STORE")
            .env_remove("STRATA_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
            next_id: 1,
        })
    }

    /// Kills the server with SIGKILL (a crash) and reaps it.
    pub(crate) fn kill(&mut self) -> Fallible<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    /// Starts a server over `dir` in docs mode, `--docs-path DIR`.
    fn docs(dir: &Path) -> Fallible<Self> {
        let dir = dir.to_str().ok_or("path")?;
        Self::start(&["--docs-path", dir], &[], Path::new("/"))
    }

    /// Writes one message.
    pub(crate) fn send(&mut self, message: &Value) -> Fallible<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{message}")?;
        stdin.flush()?;
        Ok(())
    }

    /// The next line of stdout, which must be a JSON-RPC 2.0 message.
    pub(crate) fn next_message(&mut self) -> Fallible<Value> {
        let line = self.lines.recv_timeout(ANSWER_TIMEOUT)?;
        let message: Value = serde_json::from_str(&line)
            .map_err(|e| format!("stdout carried a line that is not JSON ({e}): {line}"))?;
        if message["jsonrpc"] != "2.0" {
            return Err(format!("stdout carried a non-JSON-RPC message: {line}").into());
        }
        Ok(message)
    }

    /// Sends a request and returns the whole response with the same id.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Fallible<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let message = self.next_message()?;
            if message["id"] == id {
                return Ok(message);
            }
        }
    }

    /// Sends a request and returns its result, failing on a JSON-RPC error.
    pub(crate) fn result(&mut self, method: &str, params: Value) -> Fallible<Value> {
        let response = self.request(method, params)?;
        match response.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(format!("{method} failed: {response}").into()),
        }
    }

    /// `initialize` as docs-mcp's own tests send it; the result. No `initialized` follows.
    pub(crate) fn initialize(&mut self) -> Fallible<Value> {
        self.result(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "strata-e2e", "version": "1.0.0"},
            }),
        )
    }

    /// `initialize` followed by `notifications/initialized`.
    pub(crate) fn handshake(&mut self) -> Fallible<Value> {
        let result = self.initialize()?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(result)
    }

    /// The names `tools/list` gives, in order.
    pub(crate) fn tool_names(&mut self) -> Fallible<Vec<String>> {
        let result = self.result("tools/list", json!({}))?;
        Ok(result["tools"]
            .as_array()
            .ok_or("no tools array")?
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }

    /// Calls a tool; the result must be one text content and no error flag, as the original's.
    fn call(&mut self, tool: &str, arguments: Value) -> Fallible<String> {
        let result = self.result("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if result.get("isError").is_some() {
            return Err(format!("{tool} answered with an isError flag: {result}").into());
        }
        match result["content"].as_array().map(Vec::as_slice) {
            Some([content]) if content["type"] == "text" => Ok(content["text"]
                .as_str()
                .ok_or("text is not a string")?
                .to_owned()),
            _ => Err(format!("{tool} did not answer with one text content: {result}").into()),
        }
    }

    /// Closes stdin and waits for the process to exit; its exit status must be success.
    pub(crate) fn finish(mut self) -> Fallible<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    return Err(format!("strata mcp exited with {status}").into());
                }
                break;
            }
            if Instant::now() > deadline {
                return Err("strata mcp did not exit after stdin closed".into());
            }
            thread::sleep(Duration::from_millis(10));
        }
        // Whatever it wrote before exiting must be protocol too.
        while let Ok(line) = self.lines.try_recv() {
            let message: Value = serde_json::from_str(&line)?;
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A documentation tree: a guide with nested sections, an API reference with front matter, a
/// CRLF file, and a file in a subdirectory.
fn docs_tree() -> Fallible<(tempfile::TempDir, PathBuf)> {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("docs");
    let files: [(&str, &str); 4] = [
        (
            "api-reference.md",
            "---\ntitle: API Reference\ndescription: Every call\nkeywords: [api, rest]\n---\n\
             # API\nThe token endpoint.\n## Auth\nSend a token.\n### Refresh\nRenew it.\n\
             ## Errors\nCodes.\n",
        ),
        (
            "user-guide.md",
            "# Guide\nIntro.\n## Install\nRun it.\n### Linux\napt.\n### macOS\nbrew.\n## Use\n\
             Token usage.\n",
        ),
        (
            "README.md",
            "# Readme\r\nHello.\r\n## Token\r\nWindows lines.\r\n",
        ),
        ("sub/notes.md", "## Orphan\nNo level one.\n# Later\ntext\n"),
    ];
    for (relative, contents) in files {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().ok_or("parent")?)?;
        fs::write(path, contents)?;
    }
    Ok((tmp, root))
}

/// The library strata's server should be serving for `args` and `env`.
fn library(args: &[&str], env: &[(&str, &str)]) -> DocsLibrary {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    DocsLibrary::open(DocsConfig::from_args_and_env(args, |name| {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }))
}

/// The calls that exercise every tool's successful paths on [`docs_tree`].
fn tool_calls() -> Vec<(&'static str, Value)> {
    vec![
        ("list_documentation_files", json!({})),
        ("table_of_contents", json!({"fileId": "f1"})),
        ("table_of_contents", json!({"fileId": "f2"})),
        ("table_of_contents", json!({"fileId": "f4"})),
        (
            "read_sections",
            json!({"fileId": "f1", "section_ids": ["1/1", "1/1/1", "1/2"]}),
        ),
        (
            "read_sections",
            json!({"fileId": "f2", "section_ids": ["1/1"]}),
        ),
        ("read_sections", json!({"fileId": "f3", "section_ids": []})),
        (
            "section_table_of_contents",
            json!({"fileId": "f3", "section_ids": ["1", "1/1"]}),
        ),
        ("search", json!({"query": "token"})),
        ("search", json!({"query": "  renew.*  ", "fileId": "f1"})),
        ("search", json!({"query": "a/b"})),
        (
            "search",
            json!({"query": "nothing matches this", "fileId": "f2"}),
        ),
    ]
}

#[test]
fn initialize_is_answered_without_initialized_and_lists_the_five_tools() -> TestResult {
    let (_tmp, root) = docs_tree()?;
    let mut server = Server::docs(&root)?;
    let init = server.initialize()?;
    assert_eq!(
        init["serverInfo"],
        json!({"name": "documentation-server", "version": "1.0.0"})
    );
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    // No notifications/initialized: the tools answer all the same.
    let tools = server.result("tools/list", json!({}))?;
    let expected: Vec<Value> = tool_definitions();
    assert_eq!(tools["tools"], Value::Array(expected), "{tools}");
    assert_eq!(
        server.tool_names()?,
        [
            "list_documentation_files",
            "table_of_contents",
            "read_sections",
            "section_table_of_contents",
            "search"
        ]
    );
    let list: Value = serde_json::from_str(&server.call("list_documentation_files", json!({}))?)?;
    assert_eq!(list[0]["fileId"], "f1");
    assert_eq!(list[0]["title"], "API Reference");
    server.finish()
}

#[test]
fn every_tool_answers_with_the_librarys_text() -> TestResult {
    let (_tmp, root) = docs_tree()?;
    let dir = root.to_str().ok_or("path")?;
    let expected = library(&["--docs-path", dir], &[]);
    let mut server = Server::docs(&root)?;
    server.handshake()?;
    for (tool, arguments) in tool_calls() {
        let text = server.call(tool, arguments.clone())?;
        assert_eq!(
            text,
            expected.call_tool(tool, &arguments).text,
            "{tool} {arguments}"
        );
    }
    // A few of the original's shapes, spelled out.
    let list: Value = serde_json::from_str(&server.call("list_documentation_files", json!({}))?)?;
    let names: Vec<&str> = list
        .as_array()
        .ok_or("array")?
        .iter()
        .filter_map(|f| f["filename"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "api-reference.md",
            "README.md",
            "sub/notes.md",
            "user-guide.md"
        ]
    );
    assert_eq!(list[0]["description"], "Every call");
    let toc = server.call("table_of_contents", json!({"fileId": "f4"}))?;
    assert!(
        toc.contains(r#""id":"1/1/1","title":"Linux","level":3"#),
        "{toc}"
    );
    let notes = server.call("table_of_contents", json!({"fileId": "f3"}))?;
    assert!(notes.contains(r#""id":"0/1","title":"Orphan""#), "{notes}");
    let read = server.call(
        "read_sections",
        json!({"fileId": "f2", "section_ids": ["1/1"]}),
    )?;
    assert_eq!(
        read,
        "{\"fileId\":\"f2\",\"filename\":\"README.md\",\"sections\":[{\"title\":\"Token\",\
         \"content\":\"## Token\\r\\nWindows lines.\\r\\n\"}]}"
    );
    let search = server.call("search", json!({"query": "a/b"}))?;
    assert_eq!(search, r#"{"query":"a\\/b","results":[]}"#); // regex.source, as JSON
    server.finish()
}

#[test]
fn every_error_path_gives_the_originals_text() -> TestResult {
    let (_tmp, root) = docs_tree()?;
    let dir = root.to_str().ok_or("path")?;
    let expected = library(&["--docs-path", dir], &[]);
    let mut server = Server::docs(&root)?;
    server.handshake()?;
    let mut check = |tool: &str, arguments: Value| -> Fallible<String> {
        let text = server.call(tool, arguments.clone())?;
        assert_eq!(
            text,
            expected.call_tool(tool, &arguments).text,
            "{tool} {arguments}"
        );
        Ok(text)
    };
    for tool in FILE_TOOLS {
        for id in ["invalid", "f", "f-1", "file1", "f0"] {
            let arguments = match tool {
                "search" => json!({"query": "token", "fileId": id}),
                "table_of_contents" => json!({"fileId": id}),
                _ => json!({"fileId": id, "section_ids": ["1"]}),
            };
            assert_eq!(
                check(tool, arguments)?,
                format!(
                    "The file ID '{id}' is invalid. File IDs must be in the format 'f' followed \
                     by a number (e.g., 'f1', 'f2'). Use the list_documentation_files tool to see \
                     all valid file IDs."
                )
            );
        }
        let arguments = match tool {
            "search" => json!({"query": "token", "fileId": "f99"}),
            "table_of_contents" => json!({"fileId": "f99"}),
            _ => json!({"fileId": "f99", "section_ids": ["1"]}),
        };
        assert_eq!(
            check(tool, arguments)?,
            "The file ID 'f99' was not found. Use the list_documentation_files tool to see all \
             available files and their IDs."
        );
    }
    for tool in ["read_sections", "section_table_of_contents"] {
        assert_eq!(
            check(
                tool,
                json!({"fileId": "f4", "section_ids": ["999/999/999"]})
            )?,
            "The sections [999/999/999] were not found in 'user-guide.md'. Use the \
             table_of_contents tool to see all available section IDs in this file."
        );
        assert_eq!(
            check(tool, json!({"fileId": "f4"}))?,
            "The section_ids parameter must be an array of section identifiers. Use the \
             table_of_contents tool first to get valid section IDs."
        );
    }
    assert_eq!(
        check(
            "section_table_of_contents",
            json!({"fileId": "f4", "section_ids": []})
        )?,
        "The section_ids parameter must be an array of section identifiers. Use the \
         table_of_contents tool first to get valid section IDs."
    );
    assert_eq!(
        check("table_of_contents", json!({}))?,
        "The fileId parameter is required. Use the list_documentation_files tool to see available \
         files and their IDs."
    );
    for query in [json!(""), json!("   "), Value::Null] {
        assert_eq!(
            check("search", json!({"query": query}))?,
            "The 'query' parameter is required and cannot be empty. Please provide a valid value."
        );
    }
    let bad = check("search", json!({"query": "(unclosed"}))?;
    assert!(
        bad.starts_with(
            "Invalid regular expression pattern: Invalid regular expression: /(unclosed/is: "
        ),
        "{bad}"
    );
    for pattern in ["token(?=s)", "(?<!a)token", "(t)oken\\1"] {
        let text = check("search", json!({"query": pattern}))?;
        assert!(
            text.starts_with("Invalid regular expression pattern: "),
            "{text}"
        );
        assert!(text.contains("linear time"), "{text}");
    }
    assert_eq!(
        check("no_such_tool", json!({}))?,
        "The tool 'no_such_tool' is not recognized. Use the tools/list command to see all \
         available tools."
    );
    // A call with no arguments object at all is a call with empty arguments.
    let bare = server.result("tools/call", json!({"name": "table_of_contents"}))?;
    assert_eq!(
        bare["content"][0]["text"],
        "The fileId parameter is required. Use the list_documentation_files tool to see available \
         files and their IDs."
    );
    server.finish()
}

#[test]
fn ids_are_stable_across_calls_and_restarts_and_a_missing_path_gives_an_empty_list() -> TestResult {
    let (tmp, root) = docs_tree()?;
    let mut first = Server::docs(&root)?;
    first.handshake()?;
    let listing = first.call("list_documentation_files", json!({}))?;
    assert_eq!(listing, first.call("list_documentation_files", json!({}))?);
    first.finish()?;
    let mut second = Server::docs(&root)?;
    second.handshake()?;
    assert_eq!(listing, second.call("list_documentation_files", json!({}))?);
    second.finish()?;

    let mut missing = Server::docs(&tmp.path().join("does-not-exist"))?;
    missing.handshake()?;
    assert_eq!(missing.call("list_documentation_files", json!({}))?, "[]");
    assert_eq!(
        missing.call("search", json!({"query": "x"}))?,
        r#"{"query":"x","results":[]}"#
    );
    missing.finish()
}

#[test]
fn same_named_files_in_two_directories_get_distinct_ids() -> TestResult {
    let tmp = tempfile::tempdir()?;
    for (dir, text) in [("one", "# One\n"), ("two", "# Two\n")] {
        fs::create_dir_all(tmp.path().join(dir))?;
        fs::write(tmp.path().join(dir).join("guide.md"), text)?;
    }
    let mut server = Server::start(&["-d", "one", "-d", "two"], &[], tmp.path())?;
    server.handshake()?;
    let list: Value = serde_json::from_str(&server.call("list_documentation_files", json!({}))?)?;
    assert_eq!(
        list,
        json!([
            {"fileId": "f1", "filename": "guide.md", "title": "guide", "size": "6b", "sourceDirectory": "one"},
            {"fileId": "f2", "filename": "guide.md", "title": "guide", "size": "6b", "sourceDirectory": "two"},
        ])
    );
    let toc = server.call("table_of_contents", json!({"fileId": "f2"}))?;
    assert!(toc.contains("\"title\":\"Two\""), "{toc}");
    server.finish()
}

#[test]
fn command_line_beats_environment_beats_defaults_and_unknown_flags_are_ignored() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // Twelve level-2 sections under one level-1 section, each with two level-3 ones.
    let mut deep = String::from("# Top\n");
    for i in 0..12 {
        deep.push_str(&format!("## S{i}\ntext\n### A{i}\nx\n### B{i}\ny\n"));
    }
    for dir in ["docs", "env", "cli"] {
        fs::create_dir_all(tmp.path().join(dir))?;
        fs::write(tmp.path().join(dir).join(format!("{dir}.md")), &deep)?;
    }
    let cwd = tmp.path();
    // Runs the server; checks its table of contents against a library configured literally.
    let run = |args: &[&str], env: &[(&str, &str)], dir: &str, max_headers, max_toc_depth| {
        let mut server = Server::start(args, env, cwd)?;
        server.handshake()?;
        let list = server.call("list_documentation_files", json!({}))?;
        let toc = server.call("table_of_contents", json!({"fileId": "f1"}))?;
        server.finish()?;
        assert!(
            list.contains(&format!("\"filename\":\"{dir}.md\"")),
            "{list}"
        );
        let config = DocsConfig {
            documentation_paths: vec![cwd.join(dir).to_string_lossy().into_owned()],
            max_headers,
            max_toc_depth,
        };
        let expected = DocsLibrary::open(config);
        assert_eq!(
            toc,
            expected
                .call_tool("table_of_contents", &json!({"fileId": "f1"}))
                .text
        );
        let toc: Value = serde_json::from_str(&toc)?;
        Fallible::Ok(toc["sections"].as_array().ok_or("sections")?.len())
    };
    let env = [
        ("DOCS_PATH", "env"),
        ("MAX_HEADERS", "5"),
        ("MAX_TOC_DEPTH", "2"),
    ];
    // Defaults: DOCS_PATH set but blank asks for docs mode over ./docs; 25 headers, depth 3.
    assert_eq!(run(&[], &[("DOCS_PATH", "")], "docs", 25, 3)?, 25);
    // The environment beats the defaults: depth 2, and phase 1 shows level 2 past 5 headers.
    assert_eq!(run(&[], &env, "env", 5, 2)?, 13);
    // The command line beats the environment; unknown flags and stray words are ignored.
    let args = [
        "--verbose",
        "-d",
        "cli",
        "--max-toc-depth",
        "3",
        "--max-headers",
        "40",
        "stray",
    ];
    assert_eq!(run(&args, &env, "cli", 40, 3)?, 37);
    // Flag by flag: what the command line leaves unset comes from the environment.
    assert_eq!(
        run(&["--max-headers", "40", "--unknown=1"], &env, "env", 40, 2)?,
        13
    );
    Ok(())
}

#[test]
fn without_docs_path_it_serves_a_sessions_tools_instead() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // A ./docs directory does not turn docs mode on: only --docs-path or DOCS_PATH do. Without
    // them the server is in session mode (tests/it/tools.rs), over the store it finds or makes.
    fs::create_dir_all(tmp.path().join("docs"))?;
    fs::write(tmp.path().join("docs/a.md"), "# A\n")?;
    let mut server = Server::start(&["--no-daemon"], &[], tmp.path())?;
    let init = server.handshake()?;
    assert_eq!(init["serverInfo"]["name"], "strata");
    assert_eq!(
        server.tool_names()?.first().map(String::as_str),
        Some("list_files")
    );
    let call = server.request(
        "tools/call",
        json!({"name": "list_documentation_files", "arguments": {}}),
    )?;
    assert!(call["error"]["message"].is_string(), "{call}");
    server.finish()?;
    assert!(tmp.path().join(".strata").exists());
    // Docs mode's flags without --docs-path are refused, naming the flag.
    let mut refused = Server::start(&["--max-headers", "3"], &[], tmp.path())?;
    assert!(refused.initialize().is_err());
    Ok(())
}

#[test]
fn a_client_that_leaves_at_once_or_sends_garbage_ends_it_quietly() -> TestResult {
    let (_tmp, root) = docs_tree()?;
    Server::docs(&root)?.finish()?;
    let mut server = Server::docs(&root)?;
    server.send(&json!("not a request"))?;
    let stdin = server.stdin.as_mut().ok_or("stdin")?;
    writeln!(stdin, "{{ this is not json")?;
    server.finish()
}

#[test]
fn many_servers_at_once_all_answer() -> TestResult {
    let count: usize = std::env::var("STRATA_MCP_PROCESSES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let (_tmp, root) = docs_tree()?;
    let dir = root.to_str().ok_or("path")?;
    let expected = library(&["--docs-path", dir], &[]);
    let want: Vec<String> = tool_calls()
        .into_iter()
        .map(|(tool, arguments)| expected.call_tool(tool, &arguments).text)
        .collect();
    let servers: Vec<Server> = (0..count)
        .map(|_| Server::docs(&root))
        .collect::<Fallible<_>>()?;
    let handles: Vec<_> = servers
        .into_iter()
        .map(|mut server| {
            thread::spawn(move || -> Result<Vec<String>, String> {
                let run = || -> Fallible<Vec<String>> {
                    server.handshake()?;
                    let texts = tool_calls()
                        .into_iter()
                        .map(|(tool, arguments)| server.call(tool, arguments))
                        .collect::<Fallible<Vec<_>>>()?;
                    server.finish()?;
                    Ok(texts)
                };
                run().map_err(|e| e.to_string())
            })
        })
        .collect();
    for handle in handles {
        let texts = handle.join().map_err(|_| "a client thread panicked")??;
        assert_eq!(texts, want);
    }
    Ok(())
}

/// What the Python SDK test does when it cannot run: says why on stderr, past the test harness's
/// capture so that it shows in every run, and passes.
fn skip(reason: &str) -> TestResult {
    writeln!(
        std::io::stderr(),
        "SKIPPED python_sdk_client_lists_and_calls_every_tool: {reason}"
    )?;
    Ok(())
}

/// Whether pip's output says the package index could not be reached.
fn index_unreachable(output: &str) -> bool {
    [
        "NewConnectionError",
        "Failed to establish a new connection",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Network is unreachable",
        "Max retries exceeded",
        "ProxyError",
        "ConnectTimeout",
        "No matching distribution found for mcp",
        "Could not fetch URL",
    ]
    .iter()
    .any(|needle| output.contains(needle))
}

/// Where the Python SDK's virtualenv lives: `STRATA_TEST_MCP_VENV` when set, else the user's cache
/// (`$XDG_CACHE_HOME` or `~/.cache`, under `strata-tests/`), so that a fresh clone or a new target
/// directory does not download the SDK again; the target's temp directory when there is no home.
fn mcp_venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STRATA_TEST_MCP_VENV") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")));
    match cache {
        Some(cache) => cache.join("strata-tests").join("mcp-python-sdk"),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-python-sdk"),
    }
}

/// A virtualenv with the official MCP SDK (made and `pip install mcp`ed on the first run, reused
/// after; delete it to take a newer SDK); `Err` with a reason when it cannot be made. It is made
/// beside its place and renamed into it, so that test runs at once never see half of one.
fn python_with_mcp() -> Result<PathBuf, String> {
    let venv = mcp_venv_dir();
    let python = venv.join("bin").join("python");
    let has_mcp = |python: &Path| {
        Command::new(python)
            .args(["-c", "import mcp"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has_mcp(&python) {
        return Ok(python);
    }
    let parent = venv
        .parent()
        .ok_or("the virtualenv has no parent directory")?;
    fs::create_dir_all(parent).map_err(|e| format!("cannot make {} ({e})", parent.display()))?;
    let building = parent.join(format!("mcp-python-sdk.{}", std::process::id()));
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&building)
        .output()
        .map_err(|e| format!("python3 cannot run ({e})"))?;
    if !made.status.success() {
        return Err(format!(
            "python3 -m venv failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    // `python -m pip`: the venv's own pip script names its path in its first line.
    let pip = Command::new(building.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--timeout", "20", "--retries", "1", "mcp"])
        .output()
        .map_err(|e| format!("pip cannot run ({e})"))?;
    if !pip.status.success() {
        let _ = fs::remove_dir_all(&building);
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&pip.stdout),
            String::from_utf8_lossy(&pip.stderr)
        );
        if index_unreachable(&output) {
            return Err(format!(
                "the package index cannot be reached, so `pip install mcp` failed: {}",
                output.lines().last().unwrap_or_default()
            ));
        }
        panic!("pip install mcp failed:\n{output}");
    }
    // A venv left without the SDK (an interrupted run) is replaced; one another run has just
    // put in place is kept, and this one removed.
    if venv.exists() && !has_mcp(&python) {
        let _ = fs::remove_dir_all(&venv);
    }
    if fs::rename(&building, &venv).is_err() {
        let _ = fs::remove_dir_all(&building);
    }
    if has_mcp(&python) {
        Ok(python)
    } else {
        Err(format!(
            "no MCP SDK in {} after installing it",
            venv.display()
        ))
    }
}

#[test]
fn python_sdk_client_lists_and_calls_every_tool() -> TestResult {
    let python = match python_with_mcp() {
        Ok(python) => python,
        Err(reason) => return skip(&reason),
    };
    let (_tmp, root) = docs_tree()?;
    let dir = root.to_str().ok_or("path")?;
    let expected = library(&["--docs-path", dir], &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp_client/docs_client.py");
    // legacy: the initialize handshake docs-mcp's clients use; auto: the SDK's default.
    for mode in ["legacy", "auto"] {
        let output = Command::new(&python)
            .arg(&script)
            .args([env!("CARGO_BIN_EXE_strata"), dir, mode])
            .output()?;
        assert!(
            output.status.success(),
            "the Python client failed ({mode}):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout)?;
        assert_eq!(report["server"], "documentation-server", "{report}");
        assert_eq!(
            report["tools"],
            json!([
                "list_documentation_files",
                "table_of_contents",
                "read_sections",
                "section_table_of_contents",
                "search"
            ])
        );
        let calls = [
            ("list", "list_documentation_files", json!({})),
            ("toc", "table_of_contents", json!({"fileId": "f1"})),
            (
                "read",
                "read_sections",
                json!({"fileId": "f1", "section_ids": ["1/1"]}),
            ),
            (
                "section_toc",
                "section_table_of_contents",
                json!({"fileId": "f1", "section_ids": ["1"]}),
            ),
            ("search", "search", json!({"query": "token"})),
            (
                "search_file",
                "search",
                json!({"query": "token", "fileId": "f2"}),
            ),
            (
                "invalid_id",
                "table_of_contents",
                json!({"fileId": "file1"}),
            ),
            ("bad_regex", "search", json!({"query": "(unclosed"})),
        ];
        for (label, tool, arguments) in calls {
            assert_eq!(
                report["calls"][label],
                expected.call_tool(tool, &arguments).text,
                "{mode} {label}"
            );
            assert_eq!(report["is_error"][label], false, "{mode} {label}");
        }
    }
    Ok(())
}
