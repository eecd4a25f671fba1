//! The writing tools (issue 18): `write_file`, `apply_patch` (a unified diff, or seed 002's line
//! operations over several files), `delete_file`, `rename_file`, `restore_file`, `fd_to_file`.
//!
//! Every write quotes the SHA-256 of the whole file a reading tool returned (none to create a
//! file) and goes through [`Session::write_files`]: checked, written all or nothing through
//! temporary files and renames, and recorded as new versions through the index's one disk path
//! in the call's own commit. A refusal (`VALIDATION_FAILED`, `CONFLICT` with seed 001's conflict
//! type, the current hash and a diff from what the agent saw) is the tool's answer, never an
//! error thrown, and changes nothing on disk or in the store but the recorded call.
//!
//! Answers are JSON: `success`, `errorCode`, `errorMessage` (null on success), `conflict` when
//! there is one; on success each file's `fileId`, `filename`, `sha256` (the base for the next
//! write), `previous_sha256`, `lines_changed` and `action`, and the diff written.

use serde_json::{Map, Value, json};

use super::args::Args;
use super::files::{FileRef, resolve};
use super::history::{stored_version, text_with_hash};
use super::patch::{
    ApplyError, Conflict, Current, ErrorCode, Failure, WritePatchRequest, WritePatchResponse,
    apply_batch, apply_unified, check_sha256_hex, conflict_diff, parse_request, sha256_hex,
    validate,
};
use super::tools::ToolOutput;
use crate::error::{Error, Result};
use crate::session::{DiskText, FileWrite, Session, Stale, Touched};

/// The answer of a writing tool: its text, whether it succeeded, the files it touched.
pub(crate) struct WriteAnswer {
    pub output: ToolOutput,
    pub success: bool,
}

impl WriteAnswer {
    fn refused(failure: Failure, conflict: Option<Conflict>) -> Self {
        let mut answer = json!({
            "success": false,
            "errorCode": failure.error_code,
            "errorMessage": failure.error_message,
        });
        if let Some(conflict) = conflict {
            answer["conflict"] = json!(conflict);
        }
        WriteAnswer {
            output: ToolOutput::new(answer.to_string()),
            success: false,
        }
    }

    fn validation(message: impl Into<String>) -> Self {
        Self::refused(Failure::validation(message), None)
    }
}

/// One file about to be written: what the agent named, the text it saw, the new content.
struct Planned {
    file: FileRef,
    expected: Option<String>,
    old_text: Option<String>,
    new_text: Option<String>,
    lines_changed: usize,
}

/// A stale file as the conflict the agent gets: the current hash and a diff from what it saw
/// (the stored version with the quoted hash; nothing for a file it meant to create).
fn stale_conflict(session: &Session, stale: &Stale, expected: Option<&str>) -> Result<Conflict> {
    let now = stale.current.as_ref();
    let seen = match expected {
        // The agent saw what is there (a pushed copy it read): nothing to show between them.
        Some(hash) if now.is_some_and(|c| c.sha256.eq_ignore_ascii_case(hash)) => {
            now.and_then(|c| c.text.clone())
        }
        Some(hash) => text_with_hash(session, &stale.agent_path, hash)?,
        None => Some(String::new()),
    };
    let current = now.and_then(|c| c.text.clone()).unwrap_or_default();
    let mut conflict = match stale.pushed_by {
        Some(_) => Conflict::overlapping_edits(seen.as_deref(), &current, &stale.agent_path),
        None => Conflict::stale_buffer(seen.as_deref(), &current, &stale.agent_path),
    };
    conflict.current_sha256 = stale
        .current
        .as_ref()
        .map(|c| c.sha256.clone())
        .unwrap_or_default();
    Ok(conflict)
}

fn stale_message(stale: &Stale, expected: Option<&str>) -> String {
    if let Some(by) = &stale.pushed_by {
        let who = if by.is_empty() { "a runtime" } else { by };
        return format!(
            "File '{}' has unsaved changes pushed by {who} (SHA-256 {}); the agent may not write it until they are saved or withdrawn. Reading it shows them.",
            stale.agent_path,
            stale.current.as_ref().map_or("", |c| c.sha256.as_str())
        );
    }
    match (&stale.current, expected) {
        (Some(now), Some(quoted)) => format!(
            "File '{}' has changed since it was read: the quoted SHA-256 is {quoted} but the file's is now {}. Read it again and make the changes on what it holds now.",
            stale.agent_path, now.sha256
        ),
        (Some(now), None) => format!(
            "File '{}' already exists (SHA-256 {}); quote its sha256 from a reading tool to overwrite it.",
            stale.agent_path, now.sha256
        ),
        (None, Some(_)) => format!(
            "File '{}' does not exist any more; give no sha256 to create it.",
            stale.agent_path
        ),
        (None, None) => format!("File '{}' does not exist.", stale.agent_path),
    }
}

/// Writes `planned` (all or nothing) and answers: the files' new hashes, or the conflict.
fn write_all(session: &mut Session, planned: Vec<Planned>) -> Result<WriteAnswer> {
    let touched = match write_planned(session, &planned)? {
        Ok(touched) => touched,
        Err((failure, conflict)) => return Ok(WriteAnswer::refused(failure, conflict)),
    };
    let mut files = Vec::new();
    let mut output = ToolOutput::new(String::new());
    let mut diff = String::new();
    for (mut p, t) in planned.into_iter().zip(touched) {
        p.file.number(session)?;
        let old = p.old_text.as_deref().unwrap_or("");
        let new = p.new_text.as_deref().unwrap_or("");
        diff.push_str(&conflict_diff(old, new, &p.file.filename));
        files.push(json!({
            "fileId": p.file.file_id(),
            "filename": p.file.filename,
            "sha256": p.new_text.as_ref().map(|t| sha256_hex(t.as_bytes())),
            "previous_sha256": p.expected,
            "lines_changed": p.lines_changed,
            "action": t.action,
        }));
        output = output.touching(t.id);
    }
    output.text = json!({
        "success": true,
        "errorCode": null,
        "errorMessage": null,
        "files": files,
        "diff": diff,
    })
    .to_string();
    Ok(WriteAnswer {
        output,
        success: true,
    })
}

/// Writes `planned` (all or nothing): what indexing did per file, or the conflict (the disk
/// changed since the file was read).
fn write_planned(
    session: &mut Session,
    planned: &[Planned],
) -> Result<std::result::Result<Vec<Touched>, Refusal>> {
    let writes: Vec<FileWrite> = planned
        .iter()
        .map(|p| FileWrite {
            agent_path: p.file.agent_path.clone(),
            expected_sha256: p.expected.clone(),
            content: p.new_text.clone().map(String::into_bytes),
        })
        .collect();
    match session.write_files(writes)? {
        Ok(touched) => Ok(Ok(touched)),
        Err(stale) => {
            let expected = planned[stale.index].expected.clone();
            let conflict = stale_conflict(session, &stale, expected.as_deref())?;
            let failure = Failure::new(
                ErrorCode::Conflict,
                stale_message(&stale, expected.as_deref()),
            );
            Ok(Err((failure, Some(conflict))))
        }
    }
}

/// The quoted hash `name`, checked for its form: `Ok(None)` when not given.
fn quoted_hash(args: &Args<'_>, name: &str) -> Result<std::result::Result<Option<String>, String>> {
    let Some(hash) = args.string(name)? else {
        return Ok(Ok(None));
    };
    Ok(match check_sha256_hex(hash.trim()) {
        Ok(()) => Ok(Some(hash.trim().to_ascii_lowercase())),
        Err(e) => Err(format!("{name} is {e}")),
    })
}

/// The file as the agent's reads show it now: the runtime's unsaved copy when one stands (with
/// who pushed it when that is another party: empty when unnamed), else the disk's.
fn seen_now(session: &mut Session, file: &FileRef) -> Result<Option<(DiskText, Option<String>)>> {
    let disk = session.disk_file(&file.agent_path)?;
    let sha = disk.as_ref().map(|d| d.sha256.clone());
    Ok(
        match session.standing_copy(&file.agent_path, sha.as_deref()) {
            Some(copy) => {
                let other = (!copy.pushed_by(session.writing_caller()))
                    .then(|| copy.by.clone().unwrap_or_default());
                Some((copy.as_disk_text(), other))
            }
            None => disk.map(|d| (d, None)),
        },
    )
}

/// Why a write is refused before it is tried: a validation failure, or a conflict.
type Refusal = (Failure, Option<Conflict>);

/// The current text of a file about to be patched: the base the patch is checked against (the
/// runtime's unsaved copy while one stands; another party's refuses the patch).
fn text_now(
    session: &mut Session,
    file: &FileRef,
    quoted: Option<&str>,
) -> Result<std::result::Result<DiskText, Refusal>> {
    Ok(match seen_now(session, file)? {
        None => Err((
            Failure::validation(format!(
                "File '{}' does not exist; write_file creates files.",
                file.filename
            )),
            None,
        )),
        Some((now, Some(by))) => {
            let stale = Stale {
                index: 0,
                agent_path: file.agent_path.clone(),
                current: Some(now),
                pushed_by: Some(by),
            };
            let conflict = stale_conflict(session, &stale, quoted)?;
            Err((
                Failure::new(ErrorCode::Conflict, stale_message(&stale, quoted)),
                Some(conflict),
            ))
        }
        Some((now, None)) if now.text.is_none() => Err((
            Failure::validation(format!(
                "File '{}' is binary (not UTF-8 text); it cannot be patched.",
                file.filename
            )),
            None,
        )),
        Some((now, None)) => Ok(now),
    })
}

/// `write_file(filepath, content, expected_sha256?)`: the whole file; with a hash the file must
/// still have it, without one it must not exist.
pub(crate) fn write_file(session: &mut Session, args: &Map<String, Value>) -> Result<WriteAnswer> {
    let OneFile {
        file,
        body: content,
        expected,
    } = match one_file(session, "write_file", args, "content")? {
        Ok(one) => one,
        Err(refused) => return Ok(refused),
    };
    let old_text = match &expected {
        Some(_) => seen_now(session, &file)?.and_then(|(d, _)| d.text),
        None => None,
    };
    let lines_changed = similar::TextDiff::from_lines(old_text.as_deref().unwrap_or(""), content)
        .iter_all_changes()
        .filter(|c| c.tag() != similar::ChangeTag::Equal)
        .count();
    write_all(
        session,
        vec![Planned {
            file,
            expected,
            old_text,
            new_text: Some(content.to_string()),
            lines_changed,
        }],
    )
}

/// What a single-file tool (`write_file`, `apply_patch`'s unified form) was given: the file,
/// its body argument (`content`, `patch`) and the quoted hash.
struct OneFile<'a> {
    file: FileRef,
    body: &'a str,
    expected: Option<String>,
}

/// Reads the arguments `filepath`, `body` and `expected_sha256` of `tool` (nothing else is
/// allowed) and resolves the file; a malformed hash is the validation answer.
fn one_file<'a>(
    session: &mut Session,
    tool: &'a str,
    args: &'a Map<String, Value>,
    body: &str,
) -> Result<std::result::Result<OneFile<'a>, WriteAnswer>> {
    let args = Args::new(tool, args, &["filepath", body, "expected_sha256"])?;
    let filepath = args.required_string("filepath")?;
    let body = args.required_string(body)?;
    let expected = match quoted_hash(&args, "expected_sha256")? {
        Ok(hash) => hash,
        Err(message) => return Ok(Err(WriteAnswer::validation(message))),
    };
    let file = resolve(session, filepath)?;
    Ok(Ok(OneFile {
        file,
        body,
        expected,
    }))
}

/// `apply_patch`: a unified diff (`filepath`, `patch`, `expected_sha256?`) or seed 002's line
/// operations (`files: [{docPath, originalSha256, changes}]`, with `batchLabel`, `batchKey`).
pub(crate) fn apply_patch(session: &mut Session, args: &Map<String, Value>) -> Result<WriteAnswer> {
    if args.contains_key("files") || !args.contains_key("patch") {
        return apply_line_ops(session, args);
    }
    let OneFile {
        file,
        body: patch,
        expected,
    } = match one_file(session, "apply_patch", args, "patch")? {
        Ok(one) => one,
        Err(refused) => return Ok(refused),
    };
    let now = match text_now(session, &file, expected.as_deref())? {
        Ok(now) => now,
        Err((failure, conflict)) => return Ok(WriteAnswer::refused(failure, conflict)),
    };
    let text = now.text.clone().unwrap_or_default();
    if let Some(quoted) = &expected
        && *quoted != now.sha256
    {
        let stale = Stale {
            index: 0,
            agent_path: file.agent_path.clone(),
            current: Some(now),
            pushed_by: None,
        };
        let conflict = stale_conflict(session, &stale, Some(quoted))?;
        let failure = Failure::new(ErrorCode::Conflict, stale_message(&stale, Some(quoted)));
        return Ok(WriteAnswer::refused(failure, Some(conflict)));
    }
    let applied = match apply_unified(&text, patch) {
        Ok(applied) => applied,
        Err(e) => {
            let conflict = e.conflict(&text, &file.filename);
            let message = format!("File '{}': {e}", file.filename);
            return Ok(WriteAnswer::refused(
                Failure::new(e.code(), message),
                conflict,
            ));
        }
    };
    write_all(
        session,
        vec![Planned {
            file,
            expected: Some(now.sha256),
            old_text: Some(text),
            new_text: Some(applied.text),
            lines_changed: applied.lines_changed,
        }],
    )
}

/// Seed 002's line operations: parsed and validated as the original does (its messages, the
/// first failure wins, plus order and overlap), applied bottom-up to every file or none.
fn apply_line_ops(session: &mut Session, args: &Map<String, Value>) -> Result<WriteAnswer> {
    let value = Value::Object(args.clone());
    let request = match parse_request(Some(&value)) {
        Ok(request) => request,
        Err(failure) => return Ok(response(WritePatchResponse::failed(None, failure), false)),
    };
    let batch = match validate(request.as_ref()) {
        Ok(batch) => batch,
        Err(failure) => {
            return Ok(response(
                WritePatchResponse::failed(request.as_ref(), failure),
                false,
            ));
        }
    };
    let request: WritePatchRequest = request.unwrap_or_default();
    let mut files = Vec::with_capacity(batch.files.len());
    let mut texts = Vec::with_capacity(batch.files.len());
    let mut hashes = Vec::with_capacity(batch.files.len());
    for edit in &batch.files {
        let file = resolve(session, &edit.doc_path)?;
        let now = match text_now(session, &file, Some(&edit.original_sha256))? {
            Ok(now) => now,
            Err((failure, conflict)) => return Ok(batch_refused(&request, failure, conflict)),
        };
        texts.push(now.text.unwrap_or_default());
        hashes.push(now.sha256);
        files.push(file);
    }
    let current: Vec<Current<'_>> = texts
        .iter()
        .zip(&hashes)
        .map(|(text, sha256)| Current { text, sha256 })
        .collect();
    let applied = match apply_batch(&batch, &current) {
        Ok(applied) => applied,
        Err(e) => {
            let current = &texts[e.file];
            let seen = match &e.error {
                ApplyError::Stale { expected, .. } => {
                    text_with_hash(session, &files[e.file].agent_path, expected)?
                }
                _ => None,
            };
            let conflict = e.error.conflict(current, seen.as_deref());
            return Ok(batch_refused(&request, e.error.failure(), conflict));
        }
    };
    let planned: Vec<Planned> = files
        .into_iter()
        .zip(&batch.files)
        .zip(&applied)
        .zip(texts)
        .map(|(((file, edit), applied), text)| Planned {
            file,
            expected: Some(edit.original_sha256.clone()),
            old_text: Some(text),
            new_text: Some(applied.text.clone()),
            lines_changed: applied.lines_changed,
        })
        .collect();
    let touched = match write_planned(session, &planned)? {
        Ok(touched) => touched,
        // The disk changed between the check and the write: the same conflict, in the
        // original's shape.
        Err((failure, conflict)) => return Ok(batch_refused(&request, failure, conflict)),
    };
    let mut answer = response(WritePatchResponse::applied(&request, &applied), true);
    for (mut p, t) in planned.into_iter().zip(touched) {
        p.file.number(session)?;
        answer.output = answer.output.touching(t.id);
    }
    Ok(answer)
}

/// A refused line-operation batch in the original's shape: the conflict when there is one.
fn batch_refused(
    request: &WritePatchRequest,
    failure: Failure,
    conflict: Option<Conflict>,
) -> WriteAnswer {
    let answer = match conflict {
        Some(conflict) => WritePatchResponse::conflict(request, failure.error_message, conflict),
        None => WritePatchResponse::failed(Some(request), failure),
    };
    response(answer, false)
}

fn response(response: WritePatchResponse, success: bool) -> WriteAnswer {
    WriteAnswer {
        output: ToolOutput::new(json!(response).to_string()),
        success,
    }
}

/// `delete_file(filepath, expected_sha256)`: the file, if it still has the quoted hash; the
/// store keeps its versions and records a tombstone.
pub(crate) fn delete_file(session: &mut Session, args: &Map<String, Value>) -> Result<WriteAnswer> {
    let args = Args::new("delete_file", args, &["filepath", "expected_sha256"])?;
    let filepath = args.required_string("filepath")?;
    let expected = match quoted_hash(&args, "expected_sha256")? {
        Ok(Some(hash)) => hash,
        Ok(None) => {
            return Ok(WriteAnswer::validation(
                "expected_sha256 is required: quote the sha256 a reading tool returned for the file to delete",
            ));
        }
        Err(message) => return Ok(WriteAnswer::validation(message)),
    };
    let file = resolve(session, filepath)?;
    let old_text = seen_now(session, &file)?.and_then(|(d, _)| d.text);
    let lines_changed = old_text.as_deref().map_or(0, super::read::line_count);
    write_all(
        session,
        vec![Planned {
            file,
            expected: Some(expected),
            old_text,
            new_text: None,
            lines_changed,
        }],
    )
}

/// `rename_file(filepath, new_filepath, expected_sha256)`: one batch that creates the new path
/// (which must not exist) and deletes the old one.
pub(crate) fn rename_file(session: &mut Session, args: &Map<String, Value>) -> Result<WriteAnswer> {
    let args = Args::new(
        "rename_file",
        args,
        &["filepath", "new_filepath", "expected_sha256"],
    )?;
    let filepath = args.required_string("filepath")?;
    let new_filepath = args.required_string("new_filepath")?;
    let expected = match quoted_hash(&args, "expected_sha256")? {
        Ok(Some(hash)) => hash,
        Ok(None) => {
            return Ok(WriteAnswer::validation(
                "expected_sha256 is required: quote the sha256 a reading tool returned for the file to rename",
            ));
        }
        Err(message) => return Ok(WriteAnswer::validation(message)),
    };
    let from = resolve(session, filepath)?;
    let to = resolve(session, new_filepath)?;
    let now = match text_now(session, &from, Some(&expected))? {
        Ok(now) => now,
        Err((failure, conflict)) => return Ok(WriteAnswer::refused(failure, conflict)),
    };
    let text = now.text.unwrap_or_default();
    write_all(
        session,
        vec![
            Planned {
                file: to,
                expected: None,
                old_text: None,
                new_text: Some(text.clone()),
                lines_changed: 0,
            },
            Planned {
                file: from,
                expected: Some(expected),
                old_text: Some(text),
                new_text: None,
                lines_changed: 0,
            },
        ],
    )
}

/// `restore_file(filepath, version, expected_sha256?)`: the file back to a stored version (a
/// number from `get_file_history`), as a new write (the history keeps every version).
pub(crate) fn restore_file(
    session: &mut Session,
    args: &Map<String, Value>,
) -> Result<WriteAnswer> {
    let args = Args::new(
        "restore_file",
        args,
        &["filepath", "version", "expected_sha256"],
    )?;
    let filepath = args.required_string("filepath")?;
    let version = args.required_integer("version")?;
    let expected = match quoted_hash(&args, "expected_sha256")? {
        Ok(hash) => hash,
        Err(message) => return Ok(WriteAnswer::validation(message)),
    };
    let file = resolve(session, filepath)?;
    let number = usize::try_from(version).unwrap_or(0);
    let Some(stored) = stored_version(session, &file.agent_path, number)? else {
        return Ok(WriteAnswer::validation(format!(
            "File '{}' has no stored version {version}; get_file_history lists them.",
            file.filename
        )));
    };
    let Some(text) = stored.text else {
        return Ok(WriteAnswer::validation(format!(
            "Version {} of '{}' holds no text (a deletion, an unread stub, a binary or too large file); restore another version.",
            stored.number, file.filename
        )));
    };
    // As write_file: over an existing file only with the hash the agent read.
    let old_text = seen_now(session, &file)?.and_then(|(n, _)| n.text);
    let lines_changed = similar::TextDiff::from_lines(old_text.as_deref().unwrap_or(""), &text)
        .iter_all_changes()
        .filter(|c| c.tag() != similar::ChangeTag::Equal)
        .count();
    write_all(
        session,
        vec![Planned {
            file,
            expected,
            old_text,
            new_text: Some(text),
            lines_changed,
        }],
    )
}

/// Writes `content` to `filepath` for `fd_to_file` (seed 004), or appends it: a write like the
/// others (the session's paths, mounts and deny rules, all or nothing, recorded), based on the
/// file as it is now, since the original quotes no hash. Returns the file's size afterwards and
/// its entity id, or the reason for the agent.
pub(crate) fn write_for_fd(
    session: &mut Session,
    filepath: &str,
    content: &str,
    append: bool,
) -> Result<std::result::Result<(u64, String), String>> {
    let file = match resolve(session, filepath) {
        Ok(file) => file,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let now = match seen_now(session, &file) {
        Ok(now) => now.map(|(now, _)| now),
        Err(e) => return Ok(Err(e.to_string())),
    };
    let new_text = match (&now, append) {
        (Some(now), true) => match &now.text {
            Some(text) => format!("{text}{content}"),
            None => {
                return Ok(Err(format!(
                    "{filepath} is binary; text cannot be appended"
                )));
            }
        },
        _ => content.to_string(),
    };
    let size = new_text.len() as u64;
    let expected = now.map(|n| n.sha256);
    let writes = vec![FileWrite {
        agent_path: file.agent_path.clone(),
        expected_sha256: expected.clone(),
        content: Some(new_text.into_bytes()),
    }];
    match session.write_files(writes) {
        Ok(Ok(touched)) => {
            let mut file = file;
            file.number(session)?;
            Ok(Ok((
                size,
                touched.into_iter().next().map(|t| t.id).unwrap_or_default(),
            )))
        }
        Ok(Err(stale)) => Ok(Err(stale_message(&stale, expected.as_deref()))),
        Err(
            e @ (Error::InvalidPath { .. }
            | Error::PermissionDenied { .. }
            | Error::Io { .. }
            | Error::InvalidInput { .. }),
        ) => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}

/// Whether a file exists at `filepath` for `fd_to_file` (false for a path that names nothing).
pub(crate) fn exists_for_fd(session: &mut Session, filepath: &str) -> bool {
    resolve(session, filepath)
        .and_then(|file| session.disk_file(&file.agent_path))
        .is_ok_and(|now| now.is_some())
}
