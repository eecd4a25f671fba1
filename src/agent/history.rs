//! `get_file_history` and `get_file_diff`: a file's versions from the bitemporal store.
//!
//! A file's versions are numbered 1, 2, … in the order the store learned them (transaction
//! order), tombstones and stubs included, so a number keeps naming the same version. `current`
//! is the file as it is on disk now, read through the session (a change is indexed as it would
//! be by any read, and becomes the next version when the session commits).

use serde_json::{Map, Value, json};

use super::args::Args;
use super::files::resolve;
use super::read::read_text;
use super::tools::{ToolOutput, header_and_body, json_lines};
use crate::error::{Error, Result};
use crate::object::{ObjectType, Source, sourced_identity};
use crate::session::Session;
use crate::store::{HistoryQuery, Order, TxId, VersionInfo};

/// The default of `get_file_history`'s `limit` (seed 001).
pub const HISTORY_LIMIT: usize = 10;

/// The lines of context around each change (seed 001).
pub const DIFF_CONTEXT: usize = 3;

/// The entity id of the file at agent path `agent_path` in `session`.
fn entity_of(session: &Session, agent_path: &str) -> Result<String> {
    let resolved = session.resolver().resolve(agent_path)?;
    let source = Source::Filesystem(crate::object::FilesystemSource {
        filesystem_id: resolved.filesystem_id,
        path: resolved.canonical_path,
    });
    Ok(sourced_identity(ObjectType::File, &source)?.to_hex())
}

/// The stored versions of entity `id`, oldest first (none when the store never saw it).
fn versions(session: &Session, id: &str) -> Result<Vec<VersionInfo>> {
    let query = HistoryQuery {
        order: Order::TxAsc,
        ..HistoryQuery::default()
    };
    match session.store().history(id, query) {
        Err(Error::NotFound { .. }) => Ok(Vec::new()),
        other => other,
    }
}

/// A stored version of a file: its number (1-based), text (`None`: a tombstone, a stub or
/// content not stored) and SHA-256.
pub(crate) struct StoredVersion {
    pub number: usize,
    pub text: Option<String>,
    pub sha256: Option<String>,
}

/// Version `number` (1-based) of the file at `agent_path`; `None` when it has no such version.
pub(crate) fn stored_version(
    session: &Session,
    agent_path: &str,
    number: usize,
) -> Result<Option<StoredVersion>> {
    let id = entity_of(session, agent_path)?;
    let all = versions(session, &id)?;
    version_of(session, &id, &all, number)
}

fn version_of(
    session: &Session,
    id: &str,
    all: &[VersionInfo],
    number: usize,
) -> Result<Option<StoredVersion>> {
    let Some(info) = number.checked_sub(1).and_then(|i| all.get(i)) else {
        return Ok(None);
    };
    let object = session
        .store()
        .as_of(id, None, Some(TxId(info.tx_id.0)))?
        .and_then(|v| v.object);
    Ok(Some(StoredVersion {
        number,
        text: object
            .as_ref()
            .and_then(|o| o.content().map(str::to_string)),
        sha256: object.and_then(|o| o.file_hash().map(|h| h.to_hex())),
    }))
}

/// The newest stored text of the file at `agent_path` whose SHA-256 is `sha256`: what the agent
/// saw when it quoted that hash (`None` when the store never held it).
pub(crate) fn text_with_hash(
    session: &Session,
    agent_path: &str,
    sha256: &str,
) -> Result<Option<String>> {
    let id = entity_of(session, agent_path)?;
    let all = versions(session, &id)?;
    for number in (1..=all.len()).rev() {
        if let Some(version) = version_of(session, &id, &all, number)?
            && version
                .sha256
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case(sha256.trim()))
        {
            return Ok(version.text);
        }
    }
    Ok(None)
}

/// `get_file_history(filepath, limit = 10)`: the versions, newest first, as JSON.
pub(crate) fn get_file_history(
    session: &mut Session,
    args: &Map<String, Value>,
) -> Result<ToolOutput> {
    let args = Args::new("get_file_history", args, &["filepath", "limit"])?;
    let filepath = args.required_string("filepath")?;
    let limit = args.count("limit", HISTORY_LIMIT)?;
    let mut file = resolve(session, filepath)?;
    let id = entity_of(session, &file.agent_path)?;
    let all = versions(session, &id)?;
    if all.is_empty() && file.n == 0 {
        return Err(Error::not_found(format!(
            "{filepath}: the store has no version of it; read it first"
        )));
    }
    file.number(session)?;
    let store = session.store();
    let sizes = store.version_sizes(&id, &all)?;
    let mut entries = Vec::new();
    for (number, (info, size)) in all.iter().zip(sizes).enumerate().rev().take(limit) {
        let meta = store.metadata(&id, Some(info.tx_id))?;
        let document = meta.as_ref().and_then(|m| m.document.as_ref());
        let state = if info.is_tombstone() {
            "deleted"
        } else if let Some(reason) = info.content_omitted {
            reason.as_str()
        } else if document.and_then(|d| d.file_hash).is_none() {
            "unread"
        } else {
            "text"
        };
        entries.push(json!({
            "version": number + 1,
            "tx_id": info.tx_id.0,
            "tx_time": info.tx_time.to_rfc3339(),
            "valid_from": info.valid_from.to_rfc3339(),
            "sha256": document.and_then(|d| d.file_hash).map(|h| h.to_hex()),
            "size": size,
            "state": state,
        }));
    }
    let header = json!({
        "fileId": file.file_id(),
        "filename": file.filename,
        "total": all.len(),
    });
    let mut output = ToolOutput::new(json_lines(&header, "versions", &entries));
    if !all.is_empty() {
        output = output.touching(id);
    }
    Ok(output)
}

/// One side of a diff: its label, its text, its hash.
struct Side {
    version: Value,
    label: String,
    text: String,
    sha256: Option<String>,
}

/// Version `number` (1-based) of entity `id`, as a side named `filename`.
fn stored_side(
    session: &Session,
    id: &str,
    all: &[VersionInfo],
    number: usize,
    filename: &str,
) -> Result<Side> {
    let info = number
        .checked_sub(1)
        .and_then(|i| all.get(i))
        .ok_or_else(|| {
            Error::invalid_input(format!(
                "get_file_diff: {filename} has versions 1 to {}, not {number}; get_file_history lists them",
                all.len()
            ))
        })?;
    let version = session
        .store()
        .as_of(id, None, Some(TxId(info.tx_id.0)))?
        .and_then(|v| v.object);
    let (text, sha256) = match &version {
        None => (String::new(), None),
        Some(object) => (
            match (object.content(), object.content_omitted()) {
                (Some(text), _) => text.to_string(),
                (None, Some(reason)) => format!("[content not stored: {}]\n", reason.as_str()),
                (None, None) => "[unread]\n".to_string(),
            },
            object.file_hash().map(|h| h.to_hex()),
        ),
    };
    let label = if version.is_some() {
        format!("a/{filename} (version {number})")
    } else {
        "/dev/null".to_string()
    };
    Ok(Side {
        version: json!(number),
        label,
        text,
        sha256,
    })
}

/// `v1`/`v2` as given: `current`, or a version number.
enum Pick {
    Current,
    Version(usize),
}

fn pick(text: Option<String>, name: &str) -> Result<Option<Pick>> {
    let Some(text) = text else {
        return Ok(None);
    };
    if text.eq_ignore_ascii_case("current") {
        return Ok(Some(Pick::Current));
    }
    match text.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(Pick::Version(n))),
        _ => Err(Error::invalid_input(format!(
            "get_file_diff: {name} must be a version number (from 1) or \"current\", got {text:?}"
        ))),
    }
}

/// `get_file_diff(filepath, v1?, v2 = "current")`: a JSON header line and a unified diff with
/// three lines of context. Without `v1`, the older side is the version before `v2` (for
/// `current`: the latest stored version when the file changed since, else the one before it).
pub(crate) fn get_file_diff(
    session: &mut Session,
    args: &Map<String, Value>,
) -> Result<ToolOutput> {
    let args = Args::new("get_file_diff", args, &["filepath", "v1", "v2"])?;
    let filepath = args.required_string("filepath")?;
    let v1 = pick(args.number_or_string("v1")?, "v1")?;
    let v2 = pick(args.number_or_string("v2")?, "v2")?.unwrap_or(Pick::Current);
    let file = resolve(session, filepath)?;
    let id = entity_of(session, &file.agent_path)?;
    let all = versions(session, &id)?;
    let mut entity: Option<String> = None;
    let mut current = |session: &mut Session| -> Result<Side> {
        let read = read_text(session, filepath)?;
        entity = Some(read.entity.clone());
        Ok(Side {
            version: json!("current"),
            label: format!("b/{} (current)", read.filename),
            sha256: Some(read.sha256),
            text: read.text,
        })
    };
    let new = match v2 {
        Pick::Current => current(session)?,
        Pick::Version(n) => stored_side(session, &id, &all, n, &file.filename)?,
    };
    let old = match v1 {
        Some(Pick::Current) => current(session)?,
        Some(Pick::Version(n)) => stored_side(session, &id, &all, n, &file.filename)?,
        None => {
            let before = match v2 {
                Pick::Version(n) => n - 1,
                Pick::Current => {
                    let latest_hash = all
                        .last()
                        .and_then(|_| {
                            stored_side(session, &id, &all, all.len(), &file.filename).ok()
                        })
                        .and_then(|s| s.sha256);
                    if latest_hash.is_some() && latest_hash == new.sha256 {
                        all.len() - 1
                    } else {
                        all.len()
                    }
                }
            };
            if before == 0 {
                Side {
                    version: Value::Null,
                    label: "/dev/null".to_string(),
                    text: String::new(),
                    sha256: None,
                }
            } else {
                stored_side(session, &id, &all, before, &file.filename)?
            }
        }
    };
    let new_label = if matches!(new.version, Value::Number(_)) {
        new.label.replacen("a/", "b/", 1)
    } else {
        new.label.clone()
    };
    let diff = similar::TextDiff::from_lines(&old.text, &new.text)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(&old.label, &new_label)
        .to_string();
    // The read of `current` may have numbered it; else the store knows it (a version was read).
    let mut file = file;
    file.n = session.file_ids().id_of(&file.agent_path).unwrap_or(0);
    file.number(session)?;
    let file_id = file.file_id();
    let header = json!({
        "fileId": file_id,
        "filename": file.filename,
        "from": {"version": old.version, "sha256": old.sha256},
        "to": {"version": new.version, "sha256": new.sha256},
        "changed": old.text != new.text,
    });
    let mut output = ToolOutput::new(header_and_body(&header, &diff));
    if let Some(entity) = entity {
        output = output.touching(entity);
    } else if !all.is_empty() {
        output = output.touching(id);
    }
    Ok(output)
}
