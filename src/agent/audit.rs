//! The write audit (seed 001's "Logging/Audit Format"): every call of a writing tool is a
//! recorded tool call in the store's log; this reads them back, oldest first, as one entry per
//! call with its session, caller, files and their hashes before and after, and its outcome.
//!
//! Nothing is stored twice: the entries are made from the log, the tool-call objects (their
//! arguments and their answers, which carry `previous_sha256` and `sha256` per file) and the
//! sessions' configurations (which name the caller of each run of calls, outside every hash).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tools::{FD_TO_FILE, WRITING_TOOLS};
use crate::error::Result;
use crate::store::{Store, TxId};

/// One file of an audited write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditFile {
    /// The path below its mount, as the answer names it.
    pub filename: String,
    /// The file's SHA-256 before the write (`None` for a file it created).
    pub previous_sha256: Option<String>,
    /// The file's SHA-256 after it (`None` for a file it deleted).
    pub sha256: Option<String>,
}

/// One call of a writing tool, as the audit shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
    /// The transaction that recorded the call.
    pub tx_id: u64,
    /// When (RFC 3339).
    pub tx_time: String,
    /// The session that made it.
    pub session: String,
    /// The tool call's id.
    pub call_id: String,
    /// Who made it (the MCP client's name), when the session knows it.
    pub caller: Option<String>,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Whether it wrote.
    pub success: bool,
    /// Why not (`CONFLICT`, `APPROVAL_REQUIRED`, `VALIDATION_FAILED`, …), when it did not.
    pub error_code: Option<String>,
    /// The files it wrote, with their hashes before and after.
    pub files: Vec<AuditFile>,
}

/// The writes recorded after transaction `since` (all when `None`), of session `session` only
/// when given, oldest first, at most `limit`.
///
/// # Errors
/// [`crate::Error::Corrupt`] when the log or an object fails its checks.
pub fn audit(
    store: &Store,
    session: Option<&str>,
    since: Option<TxId>,
    limit: usize,
) -> Result<Vec<AuditEntry>> {
    const CHUNK: usize = 256;
    let mut entries = Vec::new();
    let mut callers: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut cursor = since;
    loop {
        let records = store.log(cursor, CHUNK)?;
        let Some(last) = records.last() else {
            break;
        };
        cursor = Some(last.tx_id);
        for record in &records {
            for op in &record.ops {
                if op.kind() != Some("put") {
                    continue;
                }
                let Some(entity) = op.entity().filter(|e| e.starts_with("toolcall:")) else {
                    continue;
                };
                let Some(object) = store
                    .as_of(entity, None, Some(record.tx_id))?
                    .and_then(|v| v.object)
                else {
                    continue;
                };
                let crate::object::Fields::Toolcall(fields) = object.fields() else {
                    continue;
                };
                if !WRITING_TOOLS.contains(&fields.tool.as_str()) && fields.tool != FD_TO_FILE {
                    continue;
                }
                let sid = fields
                    .chat_ref
                    .strip_prefix("chat:")
                    .unwrap_or(&fields.chat_ref);
                if session.is_some_and(|s| s != sid) {
                    continue;
                }
                if !callers.contains_key(sid) {
                    callers.insert(sid.to_string(), caller_spans(store, sid)?);
                }
                let caller = callers.get(sid).and_then(|spans| caller_of(spans, entity));
                let answer: Value = object
                    .content()
                    .and_then(|text| serde_json::from_str(text).ok())
                    .unwrap_or(Value::Null);
                entries.push(entry(record, sid, entity, caller, fields, &answer));
                if entries.len() >= limit {
                    return Ok(entries);
                }
            }
        }
        if records.len() < CHUNK {
            break;
        }
    }
    Ok(entries)
}

/// One entry from the call's record, fields and answer (a JSON answer of the writing tools;
/// `fd_to_file`'s XML answer gives no files).
fn entry(
    record: &crate::store::TxRecord,
    sid: &str,
    call_id: &str,
    caller: Option<String>,
    fields: &crate::object::ToolcallFields,
    answer: &Value,
) -> AuditEntry {
    let text = |v: &Value| v.as_str().map(str::to_string);
    let files = answer["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| AuditFile {
                    filename: text(&f["filename"]).unwrap_or_default(),
                    previous_sha256: text(&f["previous_sha256"]),
                    sha256: text(&f["sha256"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let success = match answer.get("success") {
        Some(success) => success.as_bool() == Some(true),
        None => fields.status == crate::object::ToolStatus::Ok,
    };
    AuditEntry {
        tx_id: record.tx_id.0,
        tx_time: record.tx_time.to_rfc3339(),
        session: sid.to_string(),
        call_id: call_id.to_string(),
        caller,
        tool: fields.tool.clone(),
        args: Value::Object(fields.args.clone()),
        success,
        error_code: text(&answer["errorCode"]),
        files,
    }
}

/// The caller spans of session `sid` as its configuration records them: (first call id, caller).
fn caller_spans(store: &Store, sid: &str) -> Result<Vec<(String, String)>> {
    let Some(config) = store.get_if_known(&format!("session_config:{sid}"))? else {
        return Ok(Vec::new());
    };
    let json: Value = config
        .object
        .as_ref()
        .and_then(|o| o.content())
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    Ok(json["callers"]
        .as_array()
        .map(|spans| {
            spans
                .iter()
                .filter_map(|span| {
                    Some((
                        span["from"].as_str()?.to_string(),
                        span["caller"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The caller of call `call_id`: the span that starts last at or before it (call ids grow with
/// time within a session).
fn caller_of(spans: &[(String, String)], call_id: &str) -> Option<String> {
    spans
        .iter()
        .filter(|(from, _)| from.as_str() <= call_id)
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, caller)| caller.clone())
}
