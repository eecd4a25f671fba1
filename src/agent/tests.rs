//! The session tools over a real session (a store in memory, a temporary tree mounted at
//! `/work`): ids, hashes, arguments and errors, descriptors through persistence and forks, the
//! recorded tool calls. The same tools through the real `strata mcp` are `tests/it/tools.rs`.

use std::fs;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::tools::{ToolAnswer, call};
use crate::error::{Error, Result};
use crate::hash::sha256;
use crate::index::Settings;
use crate::object::{Fields, ToolStatus};
use crate::resolve::MountMapping;
use crate::session::{DescriptorOrigin, DescriptorSettings, Session, SessionOptions};
use crate::store::Store;

fn write(root: &Path, rel: &str, text: &[u8]) -> Result<()> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io("mkdir", e))?;
    }
    fs::write(&path, text).map_err(|e| Error::io("write", e))
}

/// A tree with code, docs, excluded directories, a secret, a binary file and a large file.
fn tree() -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    let root = dir.path();
    write(
        root,
        "README.md",
        b"# Demo\n\nA demo tree.\n## Usage\nRun it.\n",
    )?;
    write(
        root,
        "src/main.rs",
        b"fn main() {\n    println!(\"hi\");\n}\n",
    )?;
    write(root, "src/lib.rs", b"//! Lib.\npub struct A;\nimpl A {\n    pub fn new() -> Self { A }\n}\nlet password = \"hunter2hunter2\";\n")?;
    write(
        root,
        "docs/Guide.md",
        b"# Guide\nsee api_key = \"abcd1234abcd\"\n",
    )?;
    write(root, "api-notes.txt", b"one\ntwo\nthree\n")?;
    write(root, "node_modules/x/index.js", b"module.exports = 1;\n")?;
    write(root, ".git/config", b"[core]\n")?;
    write(root, "cache.pyc", b"\0\0")?;
    write(root, ".env", b"TOKEN=secret\n")?;
    write(root, "blob.bin", b"\0\x01\x02binary")?;
    let big: String = (1..=2000)
        .map(|i| format!("line {i} of the big file\n"))
        .collect();
    write(root, "big.log", big.as_bytes())?;
    Ok(dir)
}

fn session(store: &Store, root: &Path) -> Result<Session> {
    let root = root.to_str().ok_or_else(|| Error::invalid_input("path"))?;
    Session::create(
        store,
        &Settings::default(),
        SessionOptions {
            session_id: Some("s1".into()),
            mounts: vec![MountMapping::new("/work", root)],
            descriptors: Some(DescriptorSettings::default()),
            ..SessionOptions::default()
        },
    )
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn run(s: &mut Session, tool: &str, a: Value) -> Result<ToolAnswer> {
    let answer = call(s, tool, args(a), Some("unit-test"))?;
    s.commit()?;
    Ok(answer)
}

fn ok(s: &mut Session, tool: &str, a: Value) -> Result<String> {
    let answer = run(s, tool, a.clone())?;
    assert!(!answer.is_error, "{tool} {a} failed: {}", answer.text);
    Ok(answer.text)
}

/// The error kind of a failed call.
fn fails(s: &mut Session, tool: &str, a: Value) -> Result<String> {
    let answer = run(s, tool, a.clone())?;
    assert!(answer.is_error, "{tool} {a} should fail: {}", answer.text);
    let error: Value =
        serde_json::from_str(&answer.text).map_err(|e| Error::invalid_input(e.to_string()))?;
    Ok(error["error"].as_str().unwrap_or_default().to_string())
}

/// The JSON header line of a header-and-body answer, and the body.
fn split(text: &str) -> Result<(Value, &str)> {
    let (head, body) = text.split_once('\n').unwrap_or((text, ""));
    let head =
        serde_json::from_str(head).map_err(|e| Error::invalid_input(format!("{e}: {head}")))?;
    Ok((head, body))
}

fn json_of(text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::invalid_input(format!("{e}: {text}")))
}

fn ids_by_name(listing: &Value) -> Vec<(String, String)> {
    listing["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    (
                        f["fileId"].as_str().unwrap_or_default().to_string(),
                        f["filename"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ids_follow_the_first_listing_and_are_never_reused() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let listing = json_of(&ok(&mut s, "list_files", json!({}))?)?;
    let names: Vec<String> = ids_by_name(&listing).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names,
        [
            ".env",
            "api-notes.txt",
            "big.log",
            "blob.bin",
            "docs/Guide.md",
            "README.md",
            "src/lib.rs",
            "src/main.rs"
        ],
        "excludes hidden, docs-mcp's order (case-insensitive first)"
    );
    assert_eq!(ids_by_name(&listing)[0].0, "f1");
    assert_eq!(listing["files"][7]["path"], "/work/src/main.rs");
    // Stable across calls, a reload and a pattern.
    let again = json_of(&ok(&mut s, "list_files", json!({"pattern": "*.rs"}))?)?;
    assert_eq!(
        ids_by_name(&again),
        [
            ("f7".into(), "src/lib.rs".into()),
            ("f8".into(), "src/main.rs".into())
        ]
    );
    let mut s = Session::load(&store, &Settings::default(), "s1")?;
    // A new file gets the next id; a deleted one keeps its id, which is not given again.
    write(dir.path(), "aaa.md", b"new\n")?;
    fs::remove_file(dir.path().join("api-notes.txt")).map_err(|e| Error::io("rm", e))?;
    let listing = json_of(&ok(
        &mut s,
        "list_files",
        json!({"include_metadata": true}),
    )?)?;
    let pairs = ids_by_name(&listing);
    assert!(pairs.contains(&("f9".into(), "aaa.md".into())), "{pairs:?}");
    assert!(!pairs.iter().any(|(id, _)| id == "f2"), "{pairs:?}");
    assert_eq!(listing["files"][0]["denied"], true, "{listing}");
    assert_eq!(listing["files"][0]["size"], 13);
    assert_eq!(fails(&mut s, "read_file", json!({"filepath": "f2"}))?, "io");
    // A node_modules file read by name gets the next id too.
    let text = ok(
        &mut s,
        "read_file",
        json!({"filepath": "node_modules/x/index.js"}),
    )?;
    assert_eq!(split(&text)?.0["fileId"], "f10");
    Ok(())
}

#[test]
fn every_read_of_content_returns_the_files_sha256_and_summaries_none() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let disk = |rel: &str| -> Result<String> {
        Ok(sha256(&fs::read(dir.path().join(rel)).map_err(|e| Error::io("read", e))?).to_hex())
    };
    let main = disk("src/main.rs")?;
    let text = ok(&mut s, "read_file", json!({"filepath": "src/main.rs"}))?;
    let (head, body) = split(&text)?;
    assert_eq!(
        (
            head["sha256"].as_str(),
            head["fileId"].as_str(),
            head["filename"].as_str()
        ),
        (Some(main.as_str()), Some("f8"), Some("src/main.rs"))
    );
    assert_eq!(body, "fn main() {\n    println!(\"hi\");\n}\n");
    let text = ok(
        &mut s,
        "read_lines",
        json!({"filepath": "f8", "start": 2, "end": 9}),
    )?;
    let (head, body) = split(&text)?;
    assert_eq!(head["sha256"], main.as_str());
    assert_eq!(
        (
            head["start"].as_i64(),
            head["end"].as_i64(),
            head["total_lines"].as_i64()
        ),
        (Some(2), Some(3), Some(3))
    );
    assert_eq!(body, "    println!(\"hi\");\n}\n");
    let text = ok(
        &mut s,
        "get_excerpt",
        json!({"filepath": "/work/docs/Guide.md", "max_lines": 5}),
    )?;
    let (head, body) = split(&text)?;
    assert_eq!(head["sha256"], disk("docs/Guide.md")?.as_str());
    assert_eq!(
        body, "# Guide\nsee api_key = \"[REDACTED]\"\n",
        "excerpts are redacted"
    );
    let text = ok(&mut s, "get_file_diff", json!({"filepath": "src/main.rs"}))?;
    assert_eq!(split(&text)?.0["to"]["sha256"], main.as_str());
    let history = json_of(&ok(&mut s, "get_file_history", json!({"filepath": "f8"}))?)?;
    assert_eq!(history["versions"][0]["sha256"], main.as_str());
    // read_file keeps credentials as they are; summaries and search results carry no hash.
    let lib = ok(&mut s, "read_file", json!({"filepath": "src/lib.rs"}))?;
    assert!(lib.contains("hunter2hunter2"));
    let summary = ok(&mut s, "summarize_file", json!({"filepath": "src/lib.rs"}))?;
    assert!(
        !summary.contains("sha256") && !summary.contains("hunter2hunter2"),
        "{summary}"
    );
    assert!(summary.contains("2: pub struct A;"), "{summary}");
    let found = ok(&mut s, "search", json!({"query": "password|println"}))?;
    assert!(
        !found.contains("sha256") && !found.contains("hunter2hunter2"),
        "{found}"
    );
    Ok(())
}

#[test]
fn bad_arguments_and_files_are_clear_failures_that_are_recorded() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let cases = [
        (
            "read_lines",
            json!({"filepath": "f8", "start": 0, "end": 1}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": 3, "end": 2}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": 9, "end": 9}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": "1", "end": 2}),
            "invalid_input",
        ),
        (
            "read_lines",
            json!({"filepath": "f8", "start": 1}),
            "invalid_input",
        ),
        (
            "read_file",
            json!({"filepath": "f8", "page": 2}),
            "invalid_input",
        ),
        ("read_file", json!({"filepath": "f0"}), "invalid_input"),
        ("read_file", json!({"filepath": "f999"}), "not_found"),
        ("read_file", json!({"filepath": "missing.txt"}), "io"),
        (
            "read_file",
            json!({"filepath": "/etc/passwd"}),
            "invalid_path",
        ),
        (
            "read_file",
            json!({"filepath": "../outside"}),
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
        ("read_file", json!({}), "invalid_input"),
        ("search", json!({"query": "a(?=b)"}), "invalid_input"),
        ("search", json!({"query": ""}), "invalid_input"),
        (
            "search",
            json!({"query": "x", "max_results": 5000}),
            "invalid_input",
        ),
        ("list_files", json!({"pattern": "a["}), "invalid_input"),
        (
            "get_file_diff",
            json!({"filepath": "f8", "v1": "latest"}),
            "invalid_input",
        ),
        (
            "get_file_diff",
            json!({"filepath": "f8", "v1": 7}),
            "invalid_input",
        ),
        ("read_fd", json!({"fd": "fd:9"}), ""),
    ];
    for (tool, a, kind) in cases {
        let answer = run(&mut s, tool, a.clone())?;
        assert!(answer.is_error, "{tool} {a}: {}", answer.text);
        if !kind.is_empty() {
            let error = json_of(&answer.text)?;
            assert_eq!(error["error"], kind, "{tool} {a}: {}", answer.text);
        }
        let recorded = store
            .get(&answer.call_id)?
            .and_then(|v| v.object)
            .ok_or_else(|| Error::not_found("call"))?;
        let Fields::Toolcall(fields) = recorded.fields() else {
            return Err(Error::invariant("not a tool call"));
        };
        assert_eq!(
            (fields.tool.as_str(), fields.status),
            (tool, ToolStatus::Fail)
        );
        assert_eq!(serde_json::Value::Object(fields.args.clone()), a);
    }
    assert!(
        fails(&mut s, "read_fd", json!({"fd": "fd:9"})).is_err(),
        "read_fd answers XML, not JSON"
    );
    // An unknown tool is refused before anything is recorded.
    let before = s.sets().index().len();
    assert!(call(&mut s, "no_such_tool", Map::new(), None).is_err());
    assert_eq!(s.sets().index().len(), before);
    // The caller is kept in the configuration, outside the tool call's hashes.
    assert_eq!(s.config().callers.len(), 1);
    assert_eq!(s.config().callers[0].caller, "unit-test");
    Ok(())
}

#[test]
fn large_outputs_become_descriptors_that_survive_reload_and_fork() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let answer = run(&mut s, "read_file", json!({"filepath": "big.log"}))?;
    assert!(
        answer.text.starts_with("<fd_result fd=\"fd:1\" pages=\""),
        "{}",
        &answer.text[..200]
    );
    // The tool call keeps the whole output; the descriptor refers to it instead of copying it.
    let recorded = store
        .get(&answer.call_id)?
        .and_then(|v| v.object)
        .ok_or_else(|| Error::not_found("call"))?;
    let output = recorded.content().unwrap_or_default().to_string();
    assert!(output.ends_with("line 2000 of the big file\n"));
    let entry = s
        .descriptors()
        .and_then(|d| d.table.get("fd:1"))
        .cloned()
        .ok_or_else(|| Error::not_found("fd:1"))?;
    assert_eq!(
        entry.origin,
        DescriptorOrigin::Toolcall {
            id: answer.call_id.clone(),
            start: 0,
            end: output.len()
        }
    );
    let page2 = ok(&mut s, "read_fd", json!({"fd": "fd:1", "start": 2}))?;
    assert!(
        page2.starts_with("<fd_content fd=\"fd:1\" page=\"2\""),
        "{page2}"
    );
    // An extraction refers to the same tool call, narrower.
    let extracted = ok(
        &mut s,
        "read_fd",
        json!({"fd": "fd:1", "mode": "line", "start": 10, "count": 2, "extract_to_new_fd": true}),
    )?;
    assert!(extracted.contains("new_fd=\"fd:2\""), "{extracted}");
    let Some(DescriptorOrigin::Toolcall { id, start, end }) = s
        .descriptors()
        .and_then(|d| d.table.get("fd:2"))
        .map(|e| e.origin.clone())
    else {
        return Err(Error::invariant("fd:2 is not a reference"));
    };
    assert_eq!(id, answer.call_id);
    assert_eq!(
        &output[start..end],
        "line 9 of the big file\nline 10 of the big file\n"
    );
    // Output of read_fd itself is never wrapped; ids are never reused.
    let all = ok(&mut s, "read_fd", json!({"fd": "fd:1", "read_all": true}))?;
    assert!(all.starts_with("<fd_content fd=\"fd:1\" page=\"all\""));
    // A resumed session reads its old descriptors.
    let mut resumed = Session::load(&store, &Settings::default(), "s1")?;
    let again = ok(
        &mut resumed,
        "read_fd",
        json!({"fd": "fd:2", "read_all": true}),
    )?;
    assert!(
        again.contains("\nline 9 of the big file\nline 10 of the big file\n\n</fd_content>"),
        "{again}"
    );
    // A fork inherits them, and parent and child then number on their own.
    let mut child = Session::fork(
        &store,
        &Settings::default(),
        "s1",
        None,
        Some("child".into()),
    )?;
    let from_child = ok(&mut child, "read_fd", json!({"fd": "fd:1", "start": 2}))?;
    assert_eq!(from_child, page2);
    assert!(
        run(&mut child, "read_file", json!({"filepath": "big.log"}))?
            .text
            .contains("fd=\"fd:3\"")
    );
    assert!(
        run(&mut resumed, "read_file", json!({"filepath": "big.log"}))?
            .text
            .contains("fd=\"fd:3\"")
    );
    assert_eq!(
        child.file_ids().len(),
        resumed.file_ids().len(),
        "the fork keeps the ids"
    );
    Ok(())
}

#[test]
fn a_session_without_descriptors_gives_outputs_whole_and_no_read_fd() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let root = dir
        .path()
        .to_str()
        .ok_or_else(|| Error::invalid_input("path"))?;
    let mut s = Session::create(
        &store,
        &Settings::default(),
        SessionOptions {
            mounts: vec![MountMapping::new("/work", root)],
            ..SessionOptions::default()
        },
    )?;
    let text = ok(&mut s, "read_file", json!({"filepath": "big.log"}))?;
    assert!(text.ends_with("line 2000 of the big file\n"));
    assert!(call(&mut s, "read_fd", args(json!({"fd": "fd:1"})), None).is_err());
    assert!(!super::tool_names(&s).contains(&"read_fd"));
    Ok(())
}

#[test]
fn search_finds_lines_by_id_order_within_max_results() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let found = json_of(&ok(
        &mut s,
        "search",
        json!({"query": "^#+ ", "max_results": 2}),
    )?)?;
    assert_eq!(found["matches"], 3);
    assert_eq!(found["shown"], 2);
    assert_eq!(found["truncated"], true);
    assert_eq!(found["results"][0]["fileId"], "f5");
    assert_eq!(
        found["results"][0]["matches"][0],
        json!({"line": 1, "text": "# Guide"})
    );
    assert_eq!(found["results"][1]["matches"][0]["text"], "# Demo");
    let one = json_of(&ok(
        &mut s,
        "search",
        json!({"query": "DEMO", "filepath": "README.md", "case_insensitive": true}),
    )?)?;
    assert_eq!(one["results"][0]["fileId"], "f6");
    let none = json_of(&ok(
        &mut s,
        "search",
        json!({"query": "nothing here", "filepath": "f6"}),
    )?)?;
    assert_eq!(none["results"][0]["matches"], json!([]));
    let rs = json_of(&ok(
        &mut s,
        "search",
        json!({"query": "fn ", "pattern": "*.rs"}),
    )?)?;
    assert_eq!(rs["results"].as_array().map(Vec::len), Some(2));
    // The files with results are discovered, not read: pooled, not active.
    let listed = s.file_ids().path_of(5).unwrap_or_default().to_string();
    assert_eq!(listed, "/work/docs/Guide.md");
    let secret = json_of(&ok(&mut s, "search", json!({"query": "TOKEN"}))?)?;
    assert_eq!(
        secret["results"],
        json!([]),
        "denied files are never searched"
    );
    Ok(())
}

#[test]
fn history_and_diff_number_the_stored_versions() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    ok(&mut s, "read_file", json!({"filepath": "api-notes.txt"}))?;
    write(dir.path(), "api-notes.txt", b"one\n2\nthree\n")?;
    let diff = ok(&mut s, "get_file_diff", json!({"filepath": "f2"}))?;
    let (head, body) = split(&diff)?;
    assert_eq!(head["from"]["version"], 1);
    assert_eq!(head["to"]["version"], "current");
    assert_eq!(head["changed"], true);
    assert!(body.contains("-two\n+2\n"), "{body}");
    let history = json_of(&ok(
        &mut s,
        "get_file_history",
        json!({"filepath": "f2", "limit": 1}),
    )?)?;
    assert_eq!(history["total"], 2);
    assert_eq!(history["versions"].as_array().map(Vec::len), Some(1));
    assert_eq!(history["versions"][0]["version"], 2);
    let back = ok(
        &mut s,
        "get_file_diff",
        json!({"filepath": "f2", "v1": 2, "v2": 1}),
    )?;
    assert!(split(&back)?.1.contains("-2\n+two\n"));
    let same = ok(
        &mut s,
        "get_file_diff",
        json!({"filepath": "f2", "v1": "current"}),
    )?;
    assert_eq!(split(&same)?.0["changed"], false);
    Ok(())
}

/// The number of cases of the write batch property (`STRATA_PROPTEST_CASES` raises it).
fn write_cases() -> u32 {
    crate::proptest_cases(16)
}

/// The entity id of file `rel` (under `/work`).
fn entity_of(s: &Session, rel: &str) -> Result<String> {
    let resolved = s.resolver().resolve(&format!("/work/{rel}"))?;
    Ok(crate::object::sourced_identity(
        crate::object::ObjectType::File,
        &crate::object::Source::Filesystem(crate::object::FilesystemSource {
            filesystem_id: resolved.filesystem_id,
            path: resolved.canonical_path,
        }),
    )?
    .to_hex())
}

/// The stored versions of `rel` (under `/work`).
fn stored_versions(s: &Session, rel: &str) -> Result<usize> {
    let id = entity_of(s, rel)?;
    match s
        .store()
        .history(&id, crate::store::HistoryQuery::default())
    {
        Ok(versions) => Ok(versions.len()),
        Err(Error::NotFound { .. }) => Ok(0),
        Err(e) => Err(e),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(write_cases()))]

    /// A batch of line operations over several files is written whole or not at all, on disk
    /// and in the store, whether a file changed since its read, a change does not match, or a
    /// rename fails halfway (the files already swapped are put back).
    #[test]
    fn a_batch_applies_all_or_nothing(
        sizes in proptest::collection::vec(1usize..12, 2..5),
        picks in proptest::collection::vec(0usize..100, 4),
        fault in 0usize..4,
    ) {
        let outcome = (|| -> Result<()> {
            let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
            let names: Vec<String> = (0..sizes.len()).map(|i| format!("d{i}/file{i}.txt")).collect();
            for (name, n) in names.iter().zip(&sizes) {
                let text: String = (1..=*n).map(|l| format!("{name} line {l}\n")).collect();
                write(dir.path(), name, text.as_bytes())?;
            }
            let store = Store::in_memory()?;
            let mut s = session(&store, dir.path())?;
            let mut files = Vec::new();
            let mut want = Vec::new();
            for (i, (name, n)) in names.iter().zip(&sizes).enumerate() {
                let text = ok(&mut s, "read_file", json!({"filepath": name}))?;
                let head: Value = serde_json::from_str(text.lines().next().unwrap_or("{}"))
                    .map_err(|e| Error::invalid_input(e.to_string()))?;
                let line = 1 + picks[i % picks.len()] % n;
                let expected = if fault == 1 && i == picks[0] % names.len() {
                    "not this".to_string()
                } else {
                    format!("{name} line {line}")
                };
                files.push(json!({"docPath": name, "originalSha256": head["sha256"], "changes": [
                    {"operation": "replace", "startLine": line, "endLine": line,
                     "expectedOriginalLines": [expected], "newLines": ["new", "lines"]}]}));
                let mut lines: Vec<String> = (1..=*n).map(|l| format!("{name} line {l}")).collect();
                lines.splice(line - 1..line, ["new".to_string(), "lines".to_string()]);
                want.push(lines.join("\n") + "\n");
            }
            let victim = picks[1] % names.len();
            if fault == 2 {
                write(dir.path(), &names[victim], b"changed behind the agent's back\n")?;
            }
            let before: Vec<Vec<u8>> = names
                .iter()
                .map(|n| fs::read(dir.path().join(n)).map_err(|e| Error::io("read", e)))
                .collect::<Result<_>>()?;
            let versions_before: Vec<usize> =
                names.iter().map(|n| stored_versions(&s, n)).collect::<Result<_>>()?;
            if fault == 3 {
                crate::session::FAIL_SWAP_AT.with(|f| f.set(Some(victim)));
            }
            let answer = call(&mut s, "apply_patch", args(json!({"files": files})), None);
            crate::session::FAIL_SWAP_AT.with(|f| f.set(None));
            s.commit()?;
            let after: Vec<Vec<u8>> = names
                .iter()
                .map(|n| fs::read(dir.path().join(n)).map_err(|e| Error::io("read", e)))
                .collect::<Result<_>>()?;
            let versions_after: Vec<usize> =
                names.iter().map(|n| stored_versions(&s, n)).collect::<Result<_>>()?;
            let applied = matches!(&answer, Ok(a) if !a.is_error);
            assert_eq!(applied, fault == 0, "{answer:?}");
            if applied {
                for (got, want) in after.iter().zip(&want) {
                    assert_eq!(String::from_utf8_lossy(got), want.as_str());
                }
                for (a, b) in versions_after.iter().zip(&versions_before) {
                    assert_eq!(*a, b + 1, "one new version per file");
                }
            } else {
                assert_eq!(after, before, "nothing changed on disk");
                assert_eq!(versions_after, versions_before, "nothing changed in the store");
            }
            let left: Vec<_> = names
                .iter()
                .filter_map(|n| fs::read_dir(dir.path().join(n).parent()?).ok())
                .flatten()
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.contains(".strata-"))
                .collect();
            assert!(left.is_empty(), "{left:?}");
            Ok(())
        })();
        proptest::prop_assert!(outcome.is_ok(), "{outcome:?}");
    }
}

#[test]
fn writes_into_a_read_only_mount_or_over_the_content_limit_are_refused_changing_nothing()
-> Result<()> {
    let dir = tree()?;
    let ro = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
    write(ro.path(), "kept.txt", b"kept\n")?;
    let store = Store::in_memory()?;
    let root = dir
        .path()
        .to_str()
        .ok_or_else(|| Error::invalid_input("path"))?;
    let ro_root = ro
        .path()
        .to_str()
        .ok_or_else(|| Error::invalid_input("path"))?;
    let mut s = Session::create(
        &store,
        &Settings {
            max_content_bytes: 64,
            ..Settings::default()
        },
        SessionOptions {
            session_id: Some("s1".into()),
            mounts: vec![
                MountMapping::new("/work", root),
                MountMapping::new("/ro", ro_root).as_read_only(),
            ],
            ..SessionOptions::default()
        },
    )?;
    let answer = run(
        &mut s,
        "write_file",
        json!({"filepath": "/ro/new.txt", "content": "x\n"}),
    )?;
    assert!(
        answer.is_error && answer.text.contains("read-only mount"),
        "{}",
        answer.text
    );
    assert!(!ro.path().join("new.txt").exists());
    let sha = sha256(b"kept\n").to_hex();
    let answer = run(
        &mut s,
        "write_file",
        json!({"filepath": "/ro/kept.txt", "content": "x\n", "expected_sha256": sha}),
    )?;
    assert!(
        answer.is_error && answer.text.contains("read-only mount"),
        "{}",
        answer.text
    );
    assert_eq!(
        fs::read(ro.path().join("kept.txt")).map_err(|e| Error::io("read", e))?,
        b"kept\n"
    );
    let answer = run(
        &mut s,
        "write_file",
        json!({"filepath": "large.txt", "content": "y".repeat(65)}),
    )?;
    assert!(
        answer.is_error && answer.text.contains("content limit"),
        "{}",
        answer.text
    );
    assert!(!dir.path().join("large.txt").exists());
    assert!(
        s.sets()
            .index()
            .ids()
            .iter()
            .all(|id| id.starts_with("toolcall:"))
    );
    Ok(())
}

#[test]
fn leftovers_of_a_killed_write_are_swept_at_the_next_write_and_never_indexed() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    let dead = "999999999";
    let ours = std::process::id().to_string();
    // pid 1 lives: what it left is kept.
    let leftovers = [
        (format!(".api-notes.txt.strata-new-{dead}-3"), false),
        (format!(".api-notes.txt.strata-old-{ours}-1"), false),
        (".api-notes.txt.strata-new-1-2".to_string(), true),
        (format!(".other.txt.strata-new-{dead}-1"), true),
    ];
    for (name, _) in &leftovers {
        write(dir.path(), name, b"half\n")?;
    }
    let listing = ok(&mut s, "list_files", json!({"pattern": "**/*"}))?;
    assert!(!listing.contains(".strata-"), "never listed: {listing}");
    let sha = sha256(b"one\ntwo\nthree\n").to_hex();
    ok(
        &mut s,
        "write_file",
        json!({"filepath": "api-notes.txt", "content": "new\n", "expected_sha256": sha}),
    )?;
    for (name, kept) in &leftovers {
        assert_eq!(dir.path().join(name).exists(), *kept, "{name}");
    }
    assert!(crate::index::write_temp_pid(".a.strata-new-12-0") == Some(12));
    assert!(crate::index::write_temp_pid("a.strata-new-12-0").is_none());
    assert!(crate::index::write_temp_pid(".a.strata-new-x-0").is_none());
    Ok(())
}

/// A written file is recorded as the bytes it holds (the staged file's stat vouches for them
/// without a read back) and with a stat cache entry: a scan afterwards finds every written file
/// unchanged, created and patched alike.
#[test]
fn a_write_is_recorded_as_the_disk_holds_it_so_a_later_scan_finds_it_unchanged() -> Result<()> {
    let dir = tree()?;
    let store = Store::in_memory()?;
    let mut s = session(&store, dir.path())?;
    ok(
        &mut s,
        "write_file",
        json!({"filepath": "new/created.txt", "content": "created\n"}),
    )?;
    let sha = sha256(b"one\ntwo\nthree\n").to_hex();
    let change = json!({"operation": "replace", "startLine": 2, "endLine": 2,
        "expectedOriginalLines": ["two"], "newLines": ["2"]});
    ok(
        &mut s,
        "apply_patch",
        json!({"files": [{"docPath": "api-notes.txt", "originalSha256": sha, "changes": [change]}]}),
    )?;
    s.commit()?;
    let written = [
        ("new/created.txt", "created\n", 1),
        ("api-notes.txt", "one\n2\nthree\n", 1),
    ];
    for (rel, text, versions) in written {
        let on_disk = fs::read_to_string(dir.path().join(rel)).map_err(|e| Error::io(rel, e))?;
        assert_eq!(on_disk, text, "{rel}");
        assert_eq!(stored_versions(&s, rel)?, versions, "{rel}");
        let object = s.store().get(&entity_of(&s, rel)?)?.and_then(|v| v.object);
        assert_eq!(
            object.and_then(|o| o.file_hash().copied()),
            Some(sha256(text.as_bytes())),
            "{rel}: the stored version holds the written bytes"
        );
    }
    let root = fs::canonicalize(dir.path()).map_err(|e| Error::io("canonicalize", e))?;
    let indexer = crate::index::Indexer::new(&store, &Settings::default())?;
    let summary = crate::index::scan(
        &indexer,
        &[root],
        &crate::index::ScanOptions::default(),
        &mut |_| {},
    )?;
    for (rel, _, versions) in written {
        assert_eq!(stored_versions(&s, rel)?, versions, "{rel}: {summary:?}");
    }
    Ok(())
}
