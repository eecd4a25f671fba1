//! Each type's own fields ([`Fields`]): the input of its `metadata_hash`, and the session's
//! canonical JSON written directly from its parts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::types::*;
use crate::error::{Error, Result};
use crate::hash::{canonical_json, jcs_list_inner, push_jcs_string};

/// The fields of a file that enter its `metadata_hash`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileFields {
    /// Lowercase extension without the dot, `text` when there is none.
    pub file_type: String,
    /// Length of the content in UTF-16 code units (JavaScript's `content.length`); 0 when null.
    pub char_count: u64,
}

/// The fields of a tool call that enter its `metadata_hash`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolcallFields {
    /// The tool's name.
    pub tool: String,
    /// The arguments, a JSON object.
    pub args: Map<String, Value>,
    /// A short human rendering of the arguments; omitted (and out of the hash) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_display: Option<String>,
    /// Whether the call succeeded.
    pub status: ToolStatus,
    /// The chat the call belongs to (`chat:{sid}`).
    pub chat_ref: String,
    /// Ids of the files the call touched; omitted (and out of the hash) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_refs: Option<Vec<String>>,
}

/// The fields of a chat that enter its `metadata_hash`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatFields {
    /// The turns, oldest first.
    pub turns: ChatTurns,
    /// The session the chat belongs to (`session:{sid}`).
    pub session_ref: String,
    /// The number of turns.
    pub turn_count: u64,
    /// Every tool call id of every turn, in order.
    pub toolcall_refs: Vec<String>,
}

/// A chat's turns, shared: a chat object holds the very list its session keeps (a commit would
/// otherwise copy every turn of the chat). Change it with [`std::sync::Arc::make_mut`].
pub type ChatTurns = std::sync::Arc<Vec<Turn>>;

/// The ids of one of a session's sets, shared: a session's document holds the very lists the
/// session keeps (a commit of a 10 000-file session would otherwise copy, and then free, some
/// 30 000 ids). Change one with [`std::sync::Arc::make_mut`].
pub type SessionIds = std::sync::Arc<Vec<String>>;

/// The fields of a session that enter its `metadata_hash`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFields {
    /// The session id (a ULID strata made, or the runtime's).
    pub session_id: String,
    /// `chat:{sid}`.
    pub chat_ref: String,
    /// `system_prompt:{sid}`.
    pub system_prompt_ref: String,
    /// Every content object the session ever saw, in first-seen order (append-only).
    pub session_index: SessionIds,
    /// The objects whose metadata line the context shows.
    pub metadata_pool: SessionIds,
    /// The objects whose content the context shows, in activation order.
    pub active_set: SessionIds,
    /// The objects protected from auto-collapse.
    pub pinned_set: SessionIds,
}

/// The type-specific fields of an object: exactly what enters its `metadata_hash`.
#[derive(Clone, Debug, PartialEq)]
pub enum Fields {
    /// A file's fields.
    File(FileFields),
    /// A tool call's fields.
    Toolcall(ToolcallFields),
    /// A chat's fields.
    Chat(ChatFields),
    /// A system prompt has no fields: its `metadata_hash` is the hash of `{}`.
    SystemPrompt,
    /// A session's fields.
    Session(SessionFields),
    /// A session's configuration or file id table has no fields, as a system prompt: its
    /// `metadata_hash` is the hash of `{}` and its content is the record.
    SessionConfig,
}

impl Fields {
    /// The object type these fields belong to.
    pub fn object_type(&self) -> ObjectType {
        match self {
            Fields::File(_) => ObjectType::File,
            Fields::Toolcall(_) => ObjectType::Toolcall,
            Fields::Chat(_) => ObjectType::Chat,
            Fields::SystemPrompt => ObjectType::SystemPrompt,
            Fields::Session(_) => ObjectType::Session,
            Fields::SessionConfig => ObjectType::SessionConfig,
        }
    }

    /// The fields as the JSON object that `metadata_hash` hashes (absent optional fields omitted).
    pub fn to_json(&self) -> Value {
        let value = match self {
            Fields::File(f) => serde_json::to_value(f),
            Fields::Toolcall(f) => serde_json::to_value(f),
            Fields::Chat(f) => serde_json::to_value(f),
            Fields::SystemPrompt | Fields::SessionConfig => Ok(json!({})),
            Fields::Session(f) => serde_json::to_value(f),
        };
        // Serialising these plain structs into a `Value` cannot fail: every key is a string and
        // every value is JSON already.
        value.unwrap_or_else(|_| json!({}))
    }

    /// The canonical JSON (JCS) text of [`Fields::to_json`]: what `metadata_hash` hashes and the
    /// store keeps. A session's fields (arrays of ids, growing with the session) and a file's
    /// (one per file a scan reads) are written directly, without building a JSON value; the
    /// others go through [`canonical_json`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a value holds an integer beyond ±2^53.
    pub fn canonical_json(&self) -> Result<String> {
        match self {
            Fields::Session(f) => Ok(session_canonical_json(f)),
            Fields::File(f) if f.char_count <= crate::hash::MAX_SAFE_INTEGER => {
                Ok(file_canonical_json(f))
            }
            _ => canonical_json(&self.to_json()),
        }
    }

    /// Parses the metadata fields of an object of type `object_type` from their JSON object.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a field is missing, unknown, or of the wrong type.
    pub fn from_json(object_type: ObjectType, value: Value) -> Result<Self> {
        fn parse<T: serde::de::DeserializeOwned>(kind: ObjectType, value: Value) -> Result<T> {
            serde_json::from_value(value)
                .map_err(|e| Error::invalid_input(format!("{kind} fields: {e}")))
        }
        Ok(match object_type {
            ObjectType::File => Fields::File(parse(object_type, value)?),
            ObjectType::Toolcall => Fields::Toolcall(parse(object_type, value)?),
            ObjectType::Chat => Fields::Chat(parse(object_type, value)?),
            ObjectType::SystemPrompt => {
                match &value {
                    Value::Object(map) if map.is_empty() => {}
                    _ => {
                        return Err(Error::invalid_input(
                            "system_prompt fields: a system prompt has no metadata fields, expected {}",
                        ));
                    }
                }
                Fields::SystemPrompt
            }
            ObjectType::Session => Fields::Session(parse(object_type, value)?),
            ObjectType::SessionConfig => {
                match &value {
                    Value::Object(map) if map.is_empty() => {}
                    _ => {
                        return Err(Error::invalid_input(
                            "session_config fields: a session's configuration has no metadata fields, expected {}",
                        ));
                    }
                }
                Fields::SessionConfig
            }
        })
    }

    /// The names of the fields that enter `metadata_hash` for `object_type` (seed 003 §2's table).
    pub fn names(object_type: ObjectType) -> &'static [&'static str] {
        match object_type {
            ObjectType::File => &["file_type", "char_count"],
            ObjectType::Toolcall => &[
                "tool",
                "args",
                "args_display",
                "status",
                "chat_ref",
                "file_refs",
            ],
            ObjectType::Chat => &["turns", "session_ref", "turn_count", "toolcall_refs"],
            ObjectType::SystemPrompt | ObjectType::SessionConfig => &[],
            ObjectType::Session => &[
                "session_id",
                "chat_ref",
                "system_prompt_ref",
                "session_index",
                "metadata_pool",
                "active_set",
                "pinned_set",
            ],
        }
    }
}

/// The parts of a session's canonical JSON: its three strings, and each set as the inside of
/// its JCS array (the ids as JCS strings joined by commas, no brackets), so that a session can
/// keep those between commits and only append to them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionJsonParts<'a> {
    /// The session id (raw, not yet a JSON string).
    pub session_id: &'a str,
    /// `chat:{sid}` (raw).
    pub chat_ref: &'a str,
    /// `system_prompt:{sid}` (raw).
    pub system_prompt_ref: &'a str,
    /// The inside of the session index's array.
    pub session_index: &'a str,
    /// The inside of the metadata pool's array.
    pub metadata_pool: &'a str,
    /// The inside of the active set's array.
    pub active_set: &'a str,
    /// The inside of the pinned set's array.
    pub pinned_set: &'a str,
}

/// `len` rounded up to the next of eight steps per power of two (at most an eighth more). A
/// session's document grows by a little each commit and the store keeps the latest ones as delta
/// bases: buffers of one class fit the next documents once freed (when the allocator keeps
/// them mapped), where exact sizes never do, and a fresh buffer of megabytes costs a page fault
/// per 4 KiB on its first write (a fifth of a 10 000-file session's commit before; still about
/// a twentieth).
fn size_class(len: usize) -> usize {
    let step = (len.next_power_of_two() / 16).max(1);
    len.div_ceil(step) * step
}

/// The canonical JSON of a session's fields from its parts: its keys in JCS order (sorted by
/// UTF-16 code units; all ASCII here), each value a string or an array of strings.
pub(crate) fn session_json_of_parts(p: &SessionJsonParts<'_>) -> String {
    let sets = p.session_index.len() + p.metadata_pool.len() + p.active_set.len();
    let mut out = String::with_capacity(size_class(sets + p.pinned_set.len() + 256));
    out.push_str("{\"active_set\":[");
    out.push_str(p.active_set);
    out.push_str("],\"chat_ref\":");
    push_jcs_string(&mut out, p.chat_ref);
    out.push_str(",\"metadata_pool\":[");
    out.push_str(p.metadata_pool);
    out.push_str("],\"pinned_set\":[");
    out.push_str(p.pinned_set);
    out.push_str("],\"session_id\":");
    push_jcs_string(&mut out, p.session_id);
    out.push_str(",\"session_index\":[");
    out.push_str(p.session_index);
    out.push_str("],\"system_prompt_ref\":");
    push_jcs_string(&mut out, p.system_prompt_ref);
    out.push('}');
    out
}

/// The canonical JSON of a session's fields, written directly. Equal to
/// `canonical_json(&Fields::Session(f).to_json())` byte for byte (tested).
/// A file's fields as JCS, `{"char_count":N,"file_type":"…"}` (keys in JCS order), written
/// directly: through a JSON value they were 2 % of a full index's CPU. `char_count` must be a
/// safe integer (the caller checks; JCS refuses a larger one).
fn file_canonical_json(f: &FileFields) -> String {
    let count = f.char_count.to_string();
    let mut out = String::with_capacity(30 + count.len() + f.file_type.len());
    out.push_str("{\"char_count\":");
    out.push_str(&count);
    out.push_str(",\"file_type\":");
    push_jcs_string(&mut out, &f.file_type);
    out.push('}');
    out
}

fn session_canonical_json(f: &SessionFields) -> String {
    session_json_of_parts(&SessionJsonParts {
        session_id: &f.session_id,
        chat_ref: &f.chat_ref,
        system_prompt_ref: &f.system_prompt_ref,
        session_index: &jcs_list_inner(&f.session_index),
        metadata_pool: &jcs_list_inner(&f.metadata_pool),
        active_set: &jcs_list_inner(&f.active_set),
        pinned_set: &jcs_list_inner(&f.pinned_set),
    })
}
