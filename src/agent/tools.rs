//! The session tools as one table: their definitions (name, description, JSON Schema of the
//! arguments, as MCP lists them and `schema/tools/` keeps them) and [`call`], which runs one,
//! turns a large output into a descriptor, and records the call in the session.
//!
//! Output formats: tools that give file content (`read_file`, `read_lines`, `get_excerpt`,
//! `summarize_file`, `get_file_diff`) answer with one line of compact JSON (the header: fileId,
//! filename, sha256 where the tool reads content, counts), a line break, then the text as it is,
//! so that a descriptor's pages and line reads fall on the text's own lines. The others
//! (`list_files`, `search`, `get_file_history`) answer with JSON whose array has one entry per
//! line. A failed call answers `{"error": kind, "message": …}` (kinds as [`Error::kind`] names
//! them) and is recorded with status `fail`.

use serde_json::{Map, Value, json};

use super::descriptors;
use super::{history, read, search, summary, write};
use crate::error::{Error, Result};
use crate::index::ApprovalMode;
use crate::object::ToolStatus;
use crate::session::{Session, ToolcallInput};

/// `list_files`.
pub const LIST_FILES: &str = "list_files";
/// `read_file`.
pub const READ_FILE: &str = "read_file";
/// `read_lines`.
pub const READ_LINES: &str = "read_lines";
/// `get_excerpt`.
pub const GET_EXCERPT: &str = "get_excerpt";
/// `search`.
pub const SEARCH: &str = "search";
/// `summarize_file`.
pub const SUMMARIZE_FILE: &str = "summarize_file";
/// `get_file_history`.
pub const GET_FILE_HISTORY: &str = "get_file_history";
/// `get_file_diff`.
pub const GET_FILE_DIFF: &str = "get_file_diff";
/// `read_fd` (listed when the session has descriptors).
pub const READ_FD: &str = "read_fd";
/// `fd_to_file` (listed when the session has descriptors).
pub const FD_TO_FILE: &str = "fd_to_file";
/// `write_file`.
pub const WRITE_FILE: &str = "write_file";
/// `apply_patch` (a unified diff, or seed 002's line operations).
pub const APPLY_PATCH: &str = "apply_patch";
/// `delete_file`.
pub const DELETE_FILE: &str = "delete_file";
/// `rename_file`.
pub const RENAME_FILE: &str = "rename_file";
/// `restore_file`.
pub const RESTORE_FILE: &str = "restore_file";

/// The writing tools, listed after the reading tools.
pub const WRITING_TOOLS: [&str; 5] = [
    WRITE_FILE,
    APPLY_PATCH,
    DELETE_FILE,
    RENAME_FILE,
    RESTORE_FILE,
];

/// The reading tools, in the order `tools/list` gives them (`read_fd` follows when the session
/// has descriptors).
pub const READING_TOOLS: [&str; 8] = [
    LIST_FILES,
    READ_FILE,
    READ_LINES,
    GET_EXCERPT,
    SEARCH,
    SUMMARIZE_FILE,
    GET_FILE_HISTORY,
    GET_FILE_DIFF,
];

/// Whether `tool` only reads (one of [`READING_TOOLS`]): its record may be answered before its
/// commit is durable. `read_fd` is not among them (extracting makes a new descriptor).
pub fn is_read_only(tool: &str) -> bool {
    READING_TOOLS.contains(&tool)
}

/// What one tool produced before it is recorded: the text and the entity ids of the files it
/// read.
#[derive(Clone, Debug, Default)]
pub struct ToolOutput {
    /// The answer.
    pub text: String,
    /// The file entities the call read (its `file_refs`).
    pub file_refs: Vec<String>,
}

impl ToolOutput {
    /// An output touching no file.
    pub fn new(text: String) -> Self {
        ToolOutput {
            text,
            file_refs: Vec::new(),
        }
    }

    /// The same output, touching file entity `id` too.
    pub fn touching(mut self, id: String) -> Self {
        if !self.file_refs.contains(&id) {
            self.file_refs.push(id);
        }
        self
    }
}

/// The answer to one tool call, as the agent gets it.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ToolAnswer {
    /// The text: the output, a descriptor's `<fd_result>` in its place, or the error.
    pub text: String,
    /// Whether the call failed (MCP's `isError`).
    pub is_error: bool,
    /// The id the call was recorded under.
    pub call_id: String,
}

/// One line of compact JSON (`header`), a line break, then `body` as it is.
pub(crate) fn header_and_body(header: &Value, body: &str) -> String {
    let mut text = header.to_string();
    text.push('\n');
    text.push_str(body);
    text
}

/// `header`'s fields and, under `key`, the array `entries`, one entry per line.
pub(crate) fn json_lines(header: &Value, key: &str, entries: &[Value]) -> String {
    let mut text = String::from("{");
    if let Value::Object(map) = header {
        for (name, value) in map {
            text.push_str(&Value::String(name.clone()).to_string());
            text.push(':');
            text.push_str(&value.to_string());
            text.push(',');
        }
    }
    text.push_str(&Value::String(key.to_string()).to_string());
    text.push_str(":[");
    for (i, entry) in entries.iter().enumerate() {
        text.push_str(if i == 0 { "\n" } else { ",\n" });
        text.push_str(&entry.to_string());
    }
    if !entries.is_empty() {
        text.push('\n');
    }
    text.push_str("]}");
    text
}

/// The error answer for `error`: `{"error": kind, "message": text}`.
pub fn error_text(error: &Error) -> String {
    json!({"error": error.kind(), "message": error.to_string()}).to_string()
}

/// Whether `error` is the tool's answer (bad arguments, a missing or refused file) rather than a
/// failure of strata (a damaged store), which ends the request instead.
fn is_tool_error(error: &Error) -> bool {
    matches!(
        error,
        Error::NotFound { .. }
            | Error::InvalidInput { .. }
            | Error::InvalidPath { .. }
            | Error::PermissionDenied { .. }
            | Error::Conflict { .. }
            | Error::Io { .. }
    )
}

/// The tools `session` offers, in order: the reading tools, the writing tools, then `read_fd`
/// when it has descriptors.
pub fn tool_names(session: &Session) -> Vec<&'static str> {
    let mut names = READING_TOOLS.to_vec();
    names.extend(WRITING_TOOLS);
    if session.descriptors().is_some() {
        names.push(READ_FD);
        names.push(FD_TO_FILE);
    }
    names
}

/// Runs tool `tool` with `args` on `session` and records the call (a toolcall object with the
/// arguments, the status, the files read and the whole output) as a change of the session, to
/// be committed by the caller. An output longer than the session's `max_direct_output_chars`
/// is answered with a descriptor (the recorded output stays whole). `caller` (an MCP client's
/// name) is kept in the session's configuration, outside every hash.
///
/// # Errors
/// [`Error::InvalidInput`] for a tool the session does not offer, or a read-only view (nothing
/// is recorded then); store errors. A tool's own failures (bad arguments, a missing file) are
/// answers with `is_error`, recorded with status `fail`.
pub fn call(
    session: &mut Session,
    tool: &str,
    args: Map<String, Value>,
    caller: Option<&str>,
) -> Result<ToolAnswer> {
    call_as(session, tool, args, caller, false)
}

/// Runs the call a person approved with `token` (see [`super::approval`]) as the agent made it,
/// and records it as [`call`] does; it applies only if the file still has the quoted hash.
///
/// # Errors
/// [`Error::NotFound`] for an unknown or used token; [`Error::InvalidInput`] for an expired one;
/// as [`call`].
pub fn approve(session: &mut Session, token: &str, caller: Option<&str>) -> Result<ToolAnswer> {
    session.file_ids_mut()?;
    let (tool, args) = super::approval::take(session, token)?;
    call_as(session, &tool, args, caller, true)
}

fn call_as(
    session: &mut Session,
    tool: &str,
    args: Map<String, Value>,
    caller: Option<&str>,
    approved: bool,
) -> Result<ToolAnswer> {
    if !tool_names(session).contains(&tool) {
        return Err(Error::invalid_input(format!(
            "unknown tool {tool:?}; this session offers {}",
            tool_names(session).join(", ")
        )));
    }
    // A view refuses before anything runs.
    session.file_ids_mut()?;
    let call_id = Session::new_toolcall_id();
    // A write the settings hold for a person waits; one they refuse is refused where each file
    // is resolved for writing, so that each tool answers it in its own form.
    let ran = match super::approval::decide(session, tool, &args) {
        (ApprovalMode::Manual, _) if !approved => {
            Ok(Ran::Held(super::approval::hold(session, tool, &args)))
        }
        _ => {
            session.set_writing_tool(Some(tool));
            session.set_writing_caller(caller);
            let ran = run(session, tool, &args);
            session.set_writing_tool(None);
            session.set_writing_caller(None);
            ran
        }
    };
    let (output, file_refs, is_error) = match ran {
        Ok(Ran::Held(text)) => (text, Vec::new(), true),
        Ok(Ran::FdWrite(answer, written)) => {
            (answer.text, written.into_iter().collect(), answer.is_error)
        }
        Ok(Ran::Output(output)) => (output.text, output.file_refs, false),
        Ok(Ran::Fd(answer)) => (answer.text, Vec::new(), answer.is_error),
        Ok(Ran::Write(answer)) => (answer.output.text, answer.output.file_refs, !answer.success),
        Err(e) if is_tool_error(&e) => (error_text(&e), Vec::new(), true),
        Err(e) => return Err(e),
    };
    let shown = if is_error {
        None
    } else {
        descriptors::wrap_output(session, tool, &call_id, &output)?
    };
    if let Some(caller) = caller {
        session.note_caller(caller, &call_id)?;
    }
    let text = shown.unwrap_or_else(|| output.clone());
    session.record_toolcall(ToolcallInput {
        id: Some(call_id.clone()),
        tool: tool.to_string(),
        args,
        args_display: None,
        status: if is_error {
            ToolStatus::Fail
        } else {
            ToolStatus::Ok
        },
        file_refs: (!file_refs.is_empty()).then_some(file_refs),
        output,
    })?;
    Ok(ToolAnswer {
        text,
        is_error,
        call_id,
    })
}

/// What a tool gave: an output, or `read_fd`'s own answer (its errors are its texts).
enum Ran {
    Output(ToolOutput),
    Fd(super::fd::FdText),
    /// A writing tool's answer: refusals (validation, conflicts) are answers, not errors.
    Write(super::write::WriteAnswer),
    /// A call held until a person approves it: the answer with the token.
    Held(String),
    /// `fd_to_file`'s answer and the file entity it wrote.
    FdWrite(super::fd::FdText, Option<String>),
}

fn run(session: &mut Session, tool: &str, args: &Map<String, Value>) -> Result<Ran> {
    let output = match tool {
        LIST_FILES => read::list_files(session, args)?,
        READ_FILE => read::read_file(session, args)?,
        READ_LINES => read::read_lines(session, args)?,
        GET_EXCERPT => read::get_excerpt(session, args)?,
        SEARCH => search::search(session, args)?,
        SUMMARIZE_FILE => summary::summarize_file(session, args)?,
        GET_FILE_HISTORY => history::get_file_history(session, args)?,
        GET_FILE_DIFF => history::get_file_diff(session, args)?,
        READ_FD => return descriptors::read_fd(session, args).map(Ran::Fd),
        FD_TO_FILE => {
            let (answer, written) = descriptors::fd_to_file(session, args)?;
            return Ok(Ran::FdWrite(answer, written));
        }
        WRITE_FILE => return write::write_file(session, args).map(Ran::Write),
        APPLY_PATCH => return write::apply_patch(session, args).map(Ran::Write),
        DELETE_FILE => return write::delete_file(session, args).map(Ran::Write),
        RENAME_FILE => return write::rename_file(session, args).map(Ran::Write),
        RESTORE_FILE => return write::restore_file(session, args).map(Ran::Write),
        other => {
            return Err(Error::invariant(format!(
                "tool {other} is listed but has no function"
            )));
        }
    };
    Ok(Ran::Output(output))
}

/// The definition of tool `name` as MCP lists it: `name`, `description`, `inputSchema`.
pub fn tool_definition(name: &str) -> Option<Value> {
    let file = json!({
        "type": "string",
        "description": "The file: its id from list_files (f1, f2, …), a path relative to the session's root (the first mount that holds it), or an absolute path under a mount."
    });
    let (description, properties, required): (&str, Value, Vec<&str>) = match name {
        LIST_FILES => (
            "List the session's files with their ids (f1, f2, …): numbered once, when the session first lists them (mounts in order, then paths case-insensitively), never renumbered. Skips .git, node_modules, __pycache__, *.pyc, .venv, venv, *.egg-info and what .gitignore and the store's ignore rules hide.",
            json!({
                "pattern": {"type": "string", "description": "A glob over paths below the root: `**/*` (default) for all, `src/*.rs` for one directory; a pattern without `/` (`*.py`) matches file names at any depth.", "default": "**/*"},
                "include_metadata": {"type": "boolean", "description": "Add size, modified time and file_type to each file (and denied: true for files the deny rules keep unread).", "default": false}
            }),
            vec![],
        ),
        READ_FILE => (
            "Read a whole file. The answer is a JSON header line (fileId, filename, sha256 of the whole file as stored: quote it to write the file later, lines, tokens ~ characters/4) and then the content exactly as in the file.",
            json!({
                "filepath": file,
                "max_tokens": {"type": "integer", "minimum": 1, "description": "Give at most this many tokens (4 characters each), cut at a line break; the header then says truncated."}
            }),
            vec!["filepath"],
        ),
        READ_LINES => (
            "Read lines start to end of a file (1-based, end inclusive; an end past the last line stops there). The answer is a JSON header line (fileId, filename, sha256 of the whole file, start, end, total_lines) and then those lines exactly as in the file.",
            json!({
                "filepath": file,
                "start": {"type": "integer", "minimum": 1, "description": "The first line, from 1."},
                "end": {"type": "integer", "minimum": 1, "description": "The last line, inclusive."}
            }),
            vec!["filepath", "start", "end"],
        ),
        GET_EXCERPT => (
            "The first lines of a file, as a preview, with credentials redacted (never a base to patch from). The answer is a JSON header line (fileId, filename, sha256, lines, total_lines, truncated) and then the lines.",
            json!({
                "filepath": file,
                "max_lines": {"type": "integer", "minimum": 1, "default": 80, "description": "At most this many lines."}
            }),
            vec!["filepath"],
        ),
        SEARCH => (
            "Search the session's files (or one file) for a regular expression (Rust regex syntax, linear time: no look-around or backreferences). Results are snippets with line numbers, credentials redacted, by file id; they carry no hash and are never a base to patch from.",
            json!({
                "query": {"type": "string", "description": "The regular expression."},
                "filepath": {"type": "string", "description": "Search only this file (an id, or a path)."},
                "pattern": {"type": "string", "description": "Search only files whose path matches this glob (as list_files' pattern)."},
                "case_insensitive": {"type": "boolean", "default": false, "description": "Ignore case."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100, "description": "At most this many matching lines, in file id order."}
            }),
            vec!["query"],
        ),
        SUMMARIZE_FILE => (
            "A deterministic outline of a file within a token budget: its size, its first lines, then its headings or definitions with line numbers. Credentials redacted; no hash (never a base to patch from).",
            json!({
                "filepath": file,
                "max_tokens": {"type": "integer", "minimum": 1, "default": 500, "description": "The budget, in tokens of 4 characters."}
            }),
            vec!["filepath"],
        ),
        GET_FILE_HISTORY => (
            "The stored versions of a file, newest first: version number, transaction, times, sha256 and size of each.",
            json!({
                "filepath": file,
                "limit": {"type": "integer", "minimum": 1, "default": 10, "description": "At most this many versions."}
            }),
            vec!["filepath"],
        ),
        GET_FILE_DIFF => (
            "A unified diff (3 lines of context) between two versions of a file: version numbers from get_file_history, or \"current\" for the file as it is now (read through the session). The answer is a JSON header line (fileId, filename, both sides' versions and sha256) and then the diff.",
            json!({
                "filepath": file,
                "v1": {"type": ["integer", "string"], "description": "The older side: a version number (default: the version before v2)."},
                "v2": {"type": ["integer", "string"], "default": "current", "description": "The newer side: a version number or \"current\"."}
            }),
            vec!["filepath"],
        ),
        WRITE_FILE => (
            "Write a whole file. To overwrite, quote expected_sha256: the sha256 a reading tool (read_file, read_lines, get_excerpt) returned; the file must still have it. Without it the file must not exist (it is created). A refusal changes nothing and says why: errorCode VALIDATION_FAILED, or CONFLICT with conflict.kind stale_buffer, the current sha256 and a diff from what you saw to what is there. On success the answer gives the new sha256, the base for the next write.",
            json!({
                "filepath": file,
                "content": {"type": "string", "description": "The whole new content."},
                "expected_sha256": {"type": "string", "description": "The sha256 of the file as you read it (64 hex characters); omit to create a new file."}
            }),
            vec!["filepath", "content"],
        ),
        APPLY_PATCH => (
            "Change files in place, in one of two forms. (1) A unified diff for one file: filepath, patch (---/+++ headers optional, @@ hunks with 3 lines of context, checked exactly), expected_sha256 optional. (2) Line operations over several files, all or nothing: files [{docPath, originalSha256, changes [{operation insert|replace|delete, afterLine (insert; 0 = top), startLine and endLine (1-based, inclusive), expectedOriginalLines, newLines}]}], changes ordered top to bottom and not overlapping, line numbers as in the file you read. The answer is JSON: success, errorCode (VALIDATION_FAILED, CONFLICT, …), errorMessage, conflict (kind stale_buffer or patch_mismatch with the first differing line, current_sha256, diff); on success each file's new sha256.",
            json!({
                "filepath": file,
                "patch": {"type": "string", "description": "Form 1: a unified diff for filepath."},
                "expected_sha256": {"type": "string", "description": "Form 1: the sha256 of the file as you read it; when given the file must still have it."},
                "batchLabel": {"type": "string", "description": "Form 2: a label for the batch, echoed."},
                "batchKey": {"type": "string", "description": "Form 2: your key for the batch, echoed."},
                "files": {
                    "type": "array",
                    "description": "Form 2: the files to change, each once.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "fileKey": {"type": "string"},
                            "docPath": {"type": "string", "description": "The file: an id (f1) or a path."},
                            "originalSha256": {"type": "string", "description": "The sha256 a reading tool returned for the file."},
                            "fileLabel": {"type": "string"},
                            "changes": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "changeKey": {"type": "string"},
                                        "operation": {"type": "string", "enum": ["insert", "replace", "delete"]},
                                        "description": {"type": "string"},
                                        "afterLine": {"type": "integer", "minimum": 0},
                                        "startLine": {"type": "integer", "minimum": 1},
                                        "endLine": {"type": "integer", "minimum": 1},
                                        "expectedOriginalLines": {"type": "array", "items": {"type": "string"}},
                                        "newLines": {"type": "array", "items": {"type": "string"}}
                                    }
                                }
                            }
                        }
                    }
                }
            }),
            vec![],
        ),
        DELETE_FILE => (
            "Delete a file that still has the quoted sha256. The store keeps its versions (restore_file brings one back).",
            json!({
                "filepath": file,
                "expected_sha256": {"type": "string", "description": "The sha256 of the file as you read it."}
            }),
            vec!["filepath", "expected_sha256"],
        ),
        RENAME_FILE => (
            "Rename a file that still has the quoted sha256 to a path that does not exist, all or nothing.",
            json!({
                "filepath": file,
                "new_filepath": {"type": "string", "description": "The new path (relative to the session's root, or absolute under a mount)."},
                "expected_sha256": {"type": "string", "description": "The sha256 of the file as you read it."}
            }),
            vec!["filepath", "new_filepath", "expected_sha256"],
        ),
        RESTORE_FILE => (
            "Write a stored version of a file (a number from get_file_history) back to disk as a new version. Quote expected_sha256 when the file exists.",
            json!({
                "filepath": file,
                "version": {"type": "integer", "minimum": 1, "description": "The version number from get_file_history."},
                "expected_sha256": {"type": "string", "description": "The sha256 of the file as it is now (omit when it does not exist)."}
            }),
            vec!["filepath", "version"],
        ),
        FD_TO_FILE => (
            "Write a file descriptor's whole content (fd:N) to a file, or append it; a write like write_file's (checked against the file as it is now, recorded), answered in the descriptor tools' XML.",
            json!({
                "fd": {"type": "string", "description": "The descriptor, e.g. fd:1."},
                "file_path": {"type": "string", "description": "The file: a path relative to the session's root, an absolute path under a mount, or an id."},
                "mode": {"type": "string", "enum": ["write", "append"], "default": "write", "description": "Replace the file's content, or add to its end."},
                "create": {"type": "boolean", "default": true, "description": "Whether a missing file may be created."},
                "exist_ok": {"type": "boolean", "default": true, "description": "Whether an existing file may be written."}
            }),
            vec!["fd", "file_path"],
        ),
        READ_FD => (
            "Read a file descriptor (fd:N) that holds a large output: by page (default), line or character, optionally into a new descriptor.",
            json!({
                "fd": {"type": "string", "description": "The descriptor, e.g. fd:1."},
                "read_all": {"type": "boolean", "default": false, "description": "Read the whole content (wins over mode, start and count)."},
                "extract_to_new_fd": {"type": "boolean", "default": false, "description": "Put what is read into a new descriptor and answer with its id."},
                "mode": {"type": "string", "enum": ["page", "line", "char"], "default": "page", "description": "How start and count are counted."},
                "start": {"type": "integer", "default": 1, "description": "The first page or line (from 1) or character (from 0)."},
                "count": {"type": "integer", "default": 1, "description": "How many pages, lines or characters."}
            }),
            vec!["fd"],
        ),
        _ => return None,
    };
    Some(json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }
    }))
}

/// The definitions of the tools `session` offers, in order.
pub fn tool_definitions(session: &Session) -> Vec<Value> {
    tool_names(session)
        .into_iter()
        .filter_map(tool_definition)
        .collect()
}
