//! `Object`: the envelope types of seed 003 §1 and the five hashes of §2.
//!
//! Uses `hash` (and `error`).
//!
//! Every object is an envelope (`xt/id`, `type`, `source`, `identity_hash`), four hashes
//! (`file_hash`, `content_hash`, `metadata_hash`, `object_hash`), a `content` and the fields of its
//! type. The constructors compute every hash from the fields, the fields are private, and parsing
//! an envelope from JSON recomputes the hashes and refuses one that disagrees, so an [`Object`]
//! whose hashes do not match its fields cannot exist.
//!
//! The store keeps an object in two parts: the entity (id, type, source) and the document (the
//! hashed fields: `file_hash`, `content`, and the type's metadata fields as JSON).
//! [`Object::from_parts`] joins them again and recomputes the hashes.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::hash::{Hash, canonical_json, sha256, sha256_json};

/// The five kinds of object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectType {
    /// A file reached through a filesystem source.
    File,
    /// One tool call of an agent: its arguments, status and output.
    Toolcall,
    /// The chat of a session: its turns.
    Chat,
    /// The system prompt of a session.
    SystemPrompt,
    /// A session: its sets of objects and its references to chat and system prompt.
    Session,
}

impl ObjectType {
    /// Every type, in a fixed order.
    pub const ALL: [ObjectType; 5] = [
        ObjectType::File,
        ObjectType::Toolcall,
        ObjectType::Chat,
        ObjectType::SystemPrompt,
        ObjectType::Session,
    ];

    /// The type's name as JSON spells it (`file`, `toolcall`, `chat`, `system_prompt`, `session`).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::File => "file",
            ObjectType::Toolcall => "toolcall",
            ObjectType::Chat => "chat",
            ObjectType::SystemPrompt => "system_prompt",
            ObjectType::Session => "session",
        }
    }

    /// Whether objects of this type belong in session sets (files and tool calls) rather than being
    /// infrastructure (chat, system prompt, session).
    pub fn is_content(self) -> bool {
        matches!(self, ObjectType::File | ObjectType::Toolcall)
    }
}

impl fmt::Display for ObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ObjectType {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        ObjectType::ALL
            .into_iter()
            .find(|t| t.as_str() == text)
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "unknown object type {text:?}: expected file, toolcall, chat, system_prompt or session"
                ))
            })
    }
}

/// Where a file lives: a filesystem (by id) and a canonical path on it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
// Unknown keys are refused: the source is hashed into the identity, so a key dropped silently
// would let two different source objects claim one identity.
#[serde(deny_unknown_fields)]
pub struct FilesystemSource {
    /// The filesystem's id (SHA-256 hex of a machine id, or an id a runtime gives).
    #[serde(rename = "filesystemId")]
    pub filesystem_id: String,
    /// The canonical path on that filesystem: absolute and normalised.
    pub path: String,
}

/// The source an object is bound to; today only filesystems.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A file on a filesystem; JSON `{"type":"filesystem","filesystemId":…,"path":…}`.
    Filesystem(FilesystemSource),
}

impl Source {
    /// The filesystem source inside.
    pub fn as_filesystem(&self) -> &FilesystemSource {
        match self {
            Source::Filesystem(fs) => fs,
        }
    }
}

/// Why a file's `content` is null although the file has bytes; informational, outside every hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentOmitted {
    /// The bytes are not UTF-8 text; they are kept as a blob keyed by `file_hash`.
    Binary,
    /// The file is over the content size limit; no bytes are kept.
    TooLarge,
    /// A deny rule (secrets) forbids storing anything of the file's bytes.
    Denied,
}

impl ContentOmitted {
    /// The reason as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentOmitted::Binary => "binary",
            ContentOmitted::TooLarge => "too_large",
            ContentOmitted::Denied => "denied",
        }
    }
}

/// Whether a tool call succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and returned its output.
    Ok,
    /// The tool failed; its output is the error.
    Fail,
}

impl ToolStatus {
    /// The status as JSON spells it (`ok`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Fail => "fail",
        }
    }
}

/// Who speaks a chat turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The system (instructions).
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's answer.
    Tool,
}

impl Role {
    /// The role as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        match text {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            _ => Err(Error::invalid_input(format!(
                "unknown role {text:?}: expected system, user, assistant or tool"
            ))),
        }
    }
}

/// One entry of a chat: who spoke, what, and the tool calls made during it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Who spoke.
    pub role: Role,
    /// What was said.
    pub content: String,
    /// Ids of the tool calls recorded during this turn, in order; omitted when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolcall_refs: Option<Vec<String>>,
}

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
    pub turns: Vec<Turn>,
    /// The session the chat belongs to (`session:{sid}`).
    pub session_ref: String,
    /// The number of turns.
    pub turn_count: u64,
    /// Every tool call id of every turn, in order.
    pub toolcall_refs: Vec<String>,
}

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
    pub session_index: Vec<String>,
    /// The objects whose metadata line the context shows.
    pub metadata_pool: Vec<String>,
    /// The objects whose content the context shows, in activation order.
    pub active_set: Vec<String>,
    /// The objects protected from auto-collapse.
    pub pinned_set: Vec<String>,
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
        }
    }

    /// The fields as the JSON object that `metadata_hash` hashes (absent optional fields omitted).
    pub fn to_json(&self) -> Value {
        let value = match self {
            Fields::File(f) => serde_json::to_value(f),
            Fields::Toolcall(f) => serde_json::to_value(f),
            Fields::Chat(f) => serde_json::to_value(f),
            Fields::SystemPrompt => Ok(json!({})),
            Fields::Session(f) => serde_json::to_value(f),
        };
        // Serialising these plain structs into a `Value` cannot fail: every key is a string and
        // every value is JSON already.
        value.unwrap_or_else(|_| json!({}))
    }

    /// The canonical JSON (JCS) text of [`Fields::to_json`]: what `metadata_hash` hashes and the
    /// store keeps. A session's fields (arrays of ids, growing with the session) are written
    /// directly, without building a JSON value; the others go through [`canonical_json`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a value holds an integer beyond ±2^53.
    pub fn canonical_json(&self) -> Result<String> {
        match self {
            Fields::Session(f) => Ok(session_canonical_json(f)),
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
            ObjectType::SystemPrompt => &[],
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

/// Appends `text` as a JCS string: quoted, `"` and `\\` escaped, U+0008/0009/000A/000C/000D as
/// `\b \t \n \f \r`, other controls below U+0020 as `\u00xx` (lowercase hex), the rest
/// literal (RFC 8785 §3.2.2.2, ECMAScript's `JSON.stringify`).
pub(crate) fn push_jcs_string(out: &mut String, text: &str) {
    out.push('"');
    let mut from = 0;
    for (i, b) in text.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x09 => "\\t",
            0x0a => "\\n",
            0x0c => "\\f",
            0x0d => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        from = i + 1;
    }
    out.push_str(&text[from..]);
    out.push('"');
}

/// The length in bytes of `text` as a JCS string (what [`push_jcs_string`] appends).
pub(crate) fn jcs_string_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The inside of the JCS array of `items` (the strings joined by commas, no brackets).
fn jcs_list_inner(items: &[String]) -> String {
    let mut out = String::with_capacity(items.iter().map(|s| s.len() + 3).sum());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_jcs_string(&mut out, item);
    }
    out
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

/// The canonical JSON of a session's fields from its parts: its keys in JCS order (sorted by
/// UTF-16 code units; all ASCII here), each value a string or an array of strings.
pub(crate) fn session_json_of_parts(p: &SessionJsonParts<'_>) -> String {
    let sets = p.session_index.len() + p.metadata_pool.len() + p.active_set.len();
    let mut out = String::with_capacity(sets + p.pinned_set.len() + 256);
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

/// One object: envelope, hashes, content and type-specific fields, always consistent.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    id: String,
    source: Option<Source>,
    identity_hash: Hash,
    file_hash: Option<Hash>,
    content: Option<String>,
    content_hash: Option<Hash>,
    fields: Fields,
    /// The canonical JSON of `fields` (what `metadata_hash` hashes), kept so that the store
    /// writes it without serialising the fields again; shared by clones.
    metadata_json: Arc<str>,
    metadata_hash: Hash,
    object_hash: Hash,
    content_omitted: Option<ContentOmitted>,
}

/// `identity_hash` of a sourced object: H(JCS({type, source})).
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn sourced_identity(object_type: ObjectType, source: &Source) -> Result<Hash> {
    sha256_json(&json!({ "type": object_type, "source": source }))
}

/// `identity_hash` of an object without a source: H(JCS({type, "xt/id": id})).
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn assigned_identity(object_type: ObjectType, id: &str) -> Result<Hash> {
    sha256_json(&json!({ "type": object_type, "xt/id": id }))
}

/// `object_hash`: H(JCS({file_hash, content_hash, metadata_hash})), nulls written as `null`.
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn composite_hash(
    file_hash: Option<&Hash>,
    content_hash: Option<&Hash>,
    metadata_hash: &Hash,
) -> Result<Hash> {
    sha256_json(&json!({
        "file_hash": file_hash,
        "content_hash": content_hash,
        "metadata_hash": metadata_hash,
    }))
}

/// A file's `file_type`: the lowercase extension of the last path segment without the dot, or
/// `text` when it has none (`.gitignore` and `file.` have none).
pub fn file_type_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match std::path::Path::new(name).extension() {
        Some(ext) if !ext.is_empty() => ext.to_string_lossy().to_lowercase(),
        _ => "text".to_string(),
    }
}

/// The length of `text` in UTF-16 code units, as JavaScript's `string.length` counts it.
pub fn utf16_len(text: &str) -> u64 {
    // One UTF-16 unit per character, two for a character beyond the BMP: count the bytes that
    // start a character, plus the lead bytes of 4-byte sequences (0xF0 and up). A plain byte loop
    // that the compiler vectorises; the char loop took 6% of a tree scan.
    text.as_bytes()
        .iter()
        .map(|&b| u64::from((b & 0xC0) != 0x80) + u64::from(b >= 0xF0))
        .sum()
}

/// The chat transcript: one `role: content` block per turn, blank-line separated.
pub fn transcript(turns: &[Turn]) -> String {
    let blocks: Vec<String> = turns
        .iter()
        .map(|turn| format!("{}: {}", turn.role.as_str(), turn.content))
        .collect();
    blocks.join("\n\n")
}

/// Checks that an assigned id is usable: not empty, no control characters, at most 1024 bytes.
fn check_assigned_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_input(
            "object id is empty; give a non-empty id",
        ));
    }
    if id.len() > 1024 {
        return Err(Error::invalid_input(format!(
            "object id is {} bytes long; ids are at most 1024 bytes",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "object id {id:?} contains a control character"
        )));
    }
    Ok(())
}

impl Object {
    /// Builds any object from its parts, computing every hash; the other constructors call this.
    ///
    /// `id` is ignored for sourced objects (their `xt/id` is their identity hash) and required for
    /// the others. A file needs a source, every other type must have none.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the parts do not make a valid object of their type (a file
    /// without a source, a `char_count` that disagrees with the content, an integer beyond ±2^53…).
    pub fn from_parts(
        id: Option<&str>,
        source: Option<Source>,
        file_hash: Option<Hash>,
        content: Option<String>,
        fields: Fields,
        content_omitted: Option<ContentOmitted>,
    ) -> Result<Self> {
        Self::assemble(
            id,
            source,
            file_hash,
            content,
            None,
            fields,
            content_omitted,
            None,
        )
    }

    /// [`Object::from_parts`] with the content's hash already known, so it is not computed twice.
    /// Every caller passes either `None` or the SHA-256 of `content`, and either `None` or the
    /// canonical JSON of `fields` as `metadata_json`.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of an object plus two values its callers may already know"
    )]
    fn assemble(
        id: Option<&str>,
        source: Option<Source>,
        file_hash: Option<Hash>,
        content: Option<String>,
        content_hash: Option<Hash>,
        fields: Fields,
        content_omitted: Option<ContentOmitted>,
        metadata_json: Option<String>,
    ) -> Result<Self> {
        let object_type = fields.object_type();
        let (id, identity_hash) = match (&source, object_type) {
            (Some(source), ObjectType::File) => {
                let identity = sourced_identity(object_type, source)?;
                if let Some(given) = id
                    && given != identity.to_hex()
                {
                    return Err(Error::invalid_input(format!(
                        "file id {given} is not the identity hash of its source ({identity})"
                    )));
                }
                (identity.to_hex(), identity)
            }
            (None, ObjectType::File) => {
                return Err(Error::invalid_input(
                    "a file object needs a filesystem source",
                ));
            }
            (Some(_), _) => {
                return Err(Error::invalid_input(format!(
                    "a {object_type} object has no source; only files are sourced"
                )));
            }
            (None, _) => {
                let id = id.ok_or_else(|| {
                    Error::invalid_input(format!("a {object_type} object needs an id"))
                })?;
                check_assigned_id(id)?;
                (id.to_string(), assigned_identity(object_type, id)?)
            }
        };
        let content_hash = match (content_hash, content.as_deref()) {
            (Some(known), Some(_)) => Some(known),
            (_, text) => text.map(|c| sha256(c.as_bytes())),
        };
        Self::check_fields(
            object_type,
            &id,
            file_hash.as_ref(),
            content.as_deref(),
            content_hash.as_ref(),
            &fields,
            content_omitted,
        )?;
        let metadata_json: Arc<str> = match metadata_json {
            Some(json) => {
                debug_assert_eq!(
                    Some(json.as_str()),
                    fields.canonical_json().ok().as_deref(),
                    "assemble given JSON that is not the fields' canonical JSON"
                );
                json.into()
            }
            None => fields.canonical_json()?.into(),
        };
        let metadata_hash = sha256(metadata_json.as_bytes());
        let object_hash =
            composite_hash(file_hash.as_ref(), content_hash.as_ref(), &metadata_hash)?;
        Ok(Object {
            id,
            source,
            identity_hash,
            file_hash,
            content,
            content_hash,
            fields,
            metadata_json,
            metadata_hash,
            object_hash,
            content_omitted,
        })
    }

    /// Checks the rules that tie fields to content for each type.
    fn check_fields(
        object_type: ObjectType,
        id: &str,
        file_hash: Option<&Hash>,
        content: Option<&str>,
        content_hash: Option<&Hash>,
        fields: &Fields,
        content_omitted: Option<ContentOmitted>,
    ) -> Result<()> {
        if object_type != ObjectType::File {
            if file_hash.is_some() {
                return Err(Error::invalid_input(format!(
                    "a {object_type} object has no file_hash; only files do"
                )));
            }
            if content_omitted.is_some() {
                return Err(Error::invalid_input(format!(
                    "a {object_type} object cannot omit its content"
                )));
            }
        }
        match fields {
            Fields::File(f) => {
                let expected = content.map_or(0, utf16_len);
                if f.char_count != expected {
                    return Err(Error::invalid_input(format!(
                        "char_count {} disagrees with the content's {expected} UTF-16 units",
                        f.char_count
                    )));
                }
                if content.is_some() {
                    if file_hash != content_hash {
                        return Err(Error::invalid_input(
                            "a text file's file_hash must be the hash of its content",
                        ));
                    }
                    if content_omitted.is_some() {
                        return Err(Error::invalid_input(
                            "content_omitted is only for files whose content is null",
                        ));
                    }
                }
                if content_omitted == Some(ContentOmitted::Denied) && file_hash.is_some() {
                    return Err(Error::invalid_input(
                        "a denied file keeps no hash of its bytes",
                    ));
                }
            }
            Fields::Toolcall(f) => {
                if content.is_none() {
                    return Err(Error::invalid_input(
                        "a toolcall's content (its output) is a string, not null",
                    ));
                }
                if f.tool.is_empty() {
                    return Err(Error::invalid_input("a toolcall needs a tool name"));
                }
                // Wrapped so that a refused integer is named by its envelope path ($.args.…).
                sha256_json(&json!({ "args": f.args }))?;
            }
            Fields::Chat(f) => {
                if f.turn_count != f.turns.len() as u64 {
                    return Err(Error::invalid_input(format!(
                        "turn_count {} disagrees with the {} turns",
                        f.turn_count,
                        f.turns.len()
                    )));
                }
                let refs: Vec<&String> = f
                    .turns
                    .iter()
                    .flat_map(|t| t.toolcall_refs.iter().flatten())
                    .collect();
                if refs.len() != f.toolcall_refs.len()
                    || refs.iter().zip(&f.toolcall_refs).any(|(a, b)| *a != b)
                {
                    return Err(Error::invalid_input(
                        "a chat's toolcall_refs must be its turns' toolcall_refs in order",
                    ));
                }
                if content != Some(transcript(&f.turns).as_str()) {
                    return Err(Error::invalid_input(
                        "a chat's content must be the transcript of its turns",
                    ));
                }
                if !id.starts_with("chat:") {
                    return Err(Error::invalid_input(format!(
                        "chat id {id:?} must be chat:{{session id}}"
                    )));
                }
            }
            Fields::SystemPrompt => {
                if content.is_none() {
                    return Err(Error::invalid_input(
                        "a system prompt's content is a string, not null",
                    ));
                }
            }
            Fields::Session(f) => {
                if content.is_some() {
                    return Err(Error::invalid_input("a session's content is null"));
                }
                if id != format!("session:{}", f.session_id) {
                    return Err(Error::invalid_input(format!(
                        "session id {id:?} must be session:{}",
                        f.session_id
                    )));
                }
            }
        }
        Ok(())
    }

    /// A file whose bytes are `text`: content, `file_hash` and `content_hash` all from the text.
    ///
    /// # Errors
    /// Never for a well-formed source; see [`Object::from_parts`].
    pub fn file_text(source: FilesystemSource, text: String) -> Result<Self> {
        let file_hash = sha256(text.as_bytes());
        Object::file_text_hashed(source, text, file_hash)
    }

    /// [`Object::file_text`] for a caller that has just hashed the text itself (the indexer hashes
    /// every file as it reads it), so that a file is hashed once.
    ///
    /// The caller guarantees `file_hash` is the SHA-256 of `text`; debug builds check it.
    ///
    /// # Errors
    /// Never for a well-formed source; see [`Object::from_parts`].
    pub(crate) fn file_text_hashed(
        source: FilesystemSource,
        text: String,
        file_hash: Hash,
    ) -> Result<Self> {
        debug_assert_eq!(
            file_hash,
            sha256(text.as_bytes()),
            "file_text_hashed given a wrong hash"
        );
        let fields = Fields::File(FileFields {
            file_type: file_type_of(&source.path),
            char_count: utf16_len(&text),
        });
        Object::assemble(
            None,
            Some(Source::Filesystem(source)),
            Some(file_hash),
            Some(text),
            Some(file_hash),
            fields,
            None,
            None,
        )
    }

    /// A file given as raw bytes: text when they are UTF-8 without a NUL byte (as the indexer and
    /// git decide), else a binary file with null content.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn file_bytes(source: FilesystemSource, bytes: Vec<u8>) -> Result<Self> {
        if bytes.contains(&0) {
            let file_hash = sha256(&bytes);
            return Object::file_omitted(source, Some(file_hash), ContentOmitted::Binary);
        }
        match String::from_utf8(bytes) {
            Ok(text) => Object::file_text(source, text),
            Err(err) => {
                let file_hash = sha256(err.as_bytes());
                Object::file_omitted(source, Some(file_hash), ContentOmitted::Binary)
            }
        }
    }

    /// A file whose content is null for `reason`; `file_hash` is the hash of its bytes when known
    /// (binary, too large) and `None` when denied.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn file_omitted(
        source: FilesystemSource,
        file_hash: Option<Hash>,
        reason: ContentOmitted,
    ) -> Result<Self> {
        let fields = Fields::File(FileFields {
            file_type: file_type_of(&source.path),
            char_count: 0,
        });
        Object::from_parts(
            None,
            Some(Source::Filesystem(source)),
            file_hash,
            None,
            fields,
            Some(reason),
        )
    }

    /// A stub: a file known by path only (null content and hashes, `char_count` 0).
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn file_stub(source: FilesystemSource) -> Result<Self> {
        let fields = Fields::File(FileFields {
            file_type: file_type_of(&source.path),
            char_count: 0,
        });
        Object::from_parts(
            None,
            Some(Source::Filesystem(source)),
            None,
            None,
            fields,
            None,
        )
    }

    /// A tool call with the runtime's id, its fields and its output as content.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn toolcall(id: &str, fields: ToolcallFields, output: String) -> Result<Self> {
        Object::from_parts(
            Some(id),
            None,
            None,
            Some(output),
            Fields::Toolcall(fields),
            None,
        )
    }

    /// The chat of session `session_id` with these turns; derives `turn_count`, `toolcall_refs`
    /// and the transcript.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn chat(session_id: &str, turns: Vec<Turn>) -> Result<Self> {
        let toolcall_refs = turns
            .iter()
            .flat_map(|t| t.toolcall_refs.iter().flatten().cloned())
            .collect();
        let content = transcript(&turns);
        let fields = ChatFields {
            session_ref: format!("session:{session_id}"),
            turn_count: turns.len() as u64,
            turns,
            toolcall_refs,
        };
        Object::from_parts(
            Some(&format!("chat:{session_id}")),
            None,
            None,
            Some(content),
            Fields::Chat(fields),
            None,
        )
    }

    /// The system prompt of session `session_id`.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn system_prompt(session_id: &str, content: String) -> Result<Self> {
        Object::from_parts(
            Some(&format!("system_prompt:{session_id}")),
            None,
            None,
            Some(content),
            Fields::SystemPrompt,
            None,
        )
    }

    /// A session object from its fields (its id is `session:{session_id}`).
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn session(fields: SessionFields) -> Result<Self> {
        let id = format!("session:{}", fields.session_id);
        Object::from_parts(Some(&id), None, None, None, Fields::Session(fields), None)
    }

    /// [`Object::session`] with the fields' canonical JSON already known (a session keeps its
    /// sets' JSON between commits): `json` must be what [`Fields::canonical_json`] gives for
    /// these fields (debug builds check it).
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub(crate) fn session_with_json(fields: SessionFields, json: String) -> Result<Self> {
        let id = format!("session:{}", fields.session_id);
        Object::assemble(
            Some(&id),
            None,
            None,
            None,
            None,
            Fields::Session(fields),
            None,
            Some(json),
        )
    }

    /// The entity id (`xt/id`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The canonical JSON of the fields: the text `metadata_hash` is the SHA-256 of.
    pub fn metadata_json(&self) -> &str {
        &self.metadata_json
    }

    /// The canonical JSON of the fields, shared (the store keeps it as a delta base).
    pub fn metadata_json_shared(&self) -> Arc<str> {
        Arc::clone(&self.metadata_json)
    }

    /// The object's type.
    pub fn object_type(&self) -> ObjectType {
        self.fields.object_type()
    }

    /// The source, for files.
    pub fn source(&self) -> Option<&Source> {
        self.source.as_ref()
    }

    /// `identity_hash`.
    pub fn identity_hash(&self) -> &Hash {
        &self.identity_hash
    }

    /// `file_hash`: the hash of the file's bytes, files only, null for stubs and denied files.
    pub fn file_hash(&self) -> Option<&Hash> {
        self.file_hash.as_ref()
    }

    /// `content`, or `None` when null.
    pub fn content(&self) -> Option<&str> {
        self.content.as_deref()
    }

    /// `content_hash`, null iff content is null.
    pub fn content_hash(&self) -> Option<&Hash> {
        self.content_hash.as_ref()
    }

    /// The type-specific fields.
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// `metadata_hash`.
    pub fn metadata_hash(&self) -> &Hash {
        &self.metadata_hash
    }

    /// `object_hash`: the composite of `file_hash`, `content_hash` and `metadata_hash`.
    pub fn object_hash(&self) -> &Hash {
        &self.object_hash
    }

    /// Why a file's content is null, when it is null for a reason.
    pub fn content_omitted(&self) -> Option<ContentOmitted> {
        self.content_omitted
    }

    /// Whether this is a file stub: a file with no `file_hash` (never read, or denied).
    pub fn is_stub(&self) -> bool {
        self.object_type() == ObjectType::File && self.file_hash.is_none()
    }

    /// The envelope as JSON with the seed's field names, every hash included.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("xt/id".into(), json!(self.id));
        map.insert("type".into(), json!(self.object_type()));
        map.insert("source".into(), json!(self.source));
        map.insert("identity_hash".into(), json!(self.identity_hash));
        map.insert("file_hash".into(), json!(self.file_hash));
        map.insert("content_hash".into(), json!(self.content_hash));
        map.insert("metadata_hash".into(), json!(self.metadata_hash));
        map.insert("object_hash".into(), json!(self.object_hash));
        map.insert("content".into(), json!(self.content));
        if let Value::Object(fields) = self.fields.to_json() {
            map.extend(fields);
        }
        if let Some(reason) = self.content_omitted {
            map.insert("content_omitted".into(), json!(reason));
        }
        Value::Object(map)
    }

    /// Parses an envelope printed by [`Object::to_json`], recomputing every hash.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a field is missing or malformed, and when a stated hash
    /// disagrees with the one computed from the fields (naming the field).
    pub fn from_json(value: &Value) -> Result<Self> {
        let map = value
            .as_object()
            .ok_or_else(|| Error::invalid_input("an envelope is a JSON object"))?;
        let get = |key: &str| map.get(key).unwrap_or(&Value::Null);
        let object_type: ObjectType = get("type")
            .as_str()
            .ok_or_else(|| Error::invalid_input("envelope has no \"type\""))?
            .parse()?;
        let id = get("xt/id").as_str();
        let source: Option<Source> = serde_json::from_value(get("source").clone())
            .map_err(|e| Error::invalid_input(format!("envelope source: {e}")))?;
        let parse_hash = |key: &str| -> Result<Option<Hash>> {
            match get(key) {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.parse()?)),
                other => Err(Error::invalid_input(format!(
                    "{key} must be a hash or null, found {other}"
                ))),
            }
        };
        let file_hash = parse_hash("file_hash")?;
        let content = match get("content") {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => {
                return Err(Error::invalid_input(format!(
                    "content must be a string or null, found {other}"
                )));
            }
        };
        let content_omitted: Option<ContentOmitted> =
            serde_json::from_value(get("content_omitted").clone())
                .map_err(|e| Error::invalid_input(format!("content_omitted: {e}")))?;
        let mut fields = Map::new();
        for name in Fields::names(object_type) {
            if let Some(v) = map.get(*name) {
                fields.insert((*name).to_string(), v.clone());
            }
        }
        let known: &[&str] = &[
            "xt/id",
            "type",
            "source",
            "identity_hash",
            "file_hash",
            "content_hash",
            "metadata_hash",
            "object_hash",
            "content",
            "content_omitted",
        ];
        if let Some(extra) = map.keys().find(|k| {
            !known.contains(&k.as_str()) && !Fields::names(object_type).contains(&k.as_str())
        }) {
            return Err(Error::invalid_input(format!(
                "envelope field {extra:?} is not a field of a {object_type}"
            )));
        }
        let fields = Fields::from_json(object_type, Value::Object(fields))?;
        let object = Object::from_parts(id, source, file_hash, content, fields, content_omitted)?;
        for (key, computed) in [
            ("identity_hash", Some(object.identity_hash)),
            ("content_hash", object.content_hash),
            ("metadata_hash", Some(object.metadata_hash)),
            ("object_hash", Some(object.object_hash)),
        ] {
            let stated = parse_hash(key)?;
            if stated != computed {
                return Err(Error::invalid_input(format!(
                    "{key} {} disagrees with the fields, which hash to {}",
                    stated.map_or("null".into(), |h| h.to_hex()),
                    computed.map_or("null".into(), |h| h.to_hex()),
                )));
            }
        }
        Ok(object)
    }
}

impl Serialize for Object {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str) -> FilesystemSource {
        FilesystemSource {
            filesystem_id: "abc123".into(),
            path: path.into(),
        }
    }

    #[test]
    fn file_identity_matches_the_seed() -> Result<()> {
        let file = Object::file_text(source("/tmp/test.md"), "hello world".into())?;
        assert_eq!(
            file.id(),
            "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"
        );
        assert_eq!(
            file.file_hash().map(Hash::to_hex).as_deref(),
            Some("b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9")
        );
        assert_eq!(file.file_hash(), file.content_hash());
        assert_eq!(
            file.metadata_hash(),
            &sha256(br#"{"char_count":11,"file_type":"md"}"#)
        );
        Ok(())
    }

    #[test]
    fn toolcall_identity_matches_the_seed() -> Result<()> {
        assert_eq!(
            assigned_identity(ObjectType::Toolcall, "toolcall:tc-12345")?.to_hex(),
            "8b5463dc976342ae202d19a93d6dc1bd05d3aefec8417cf67e8a929aa1667605"
        );
        Ok(())
    }

    #[test]
    fn system_prompt_metadata_is_the_empty_object() -> Result<()> {
        let prompt = Object::system_prompt("s1", "be brief".into())?;
        assert_eq!(
            prompt.metadata_hash().to_hex(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        Ok(())
    }

    #[test]
    fn file_type_and_char_count_follow_javascript() {
        assert_eq!(file_type_of("/a/b/README.MD"), "md");
        assert_eq!(file_type_of("/a/b/Makefile"), "text");
        assert_eq!(file_type_of("/a/.gitignore"), "text");
        assert_eq!(file_type_of("/a/file."), "text");
        assert_eq!(file_type_of("/a.d/file"), "text");
        assert_eq!(file_type_of("/a/x.tar.gz"), "gz");
        assert_eq!(utf16_len("héllo"), 5);
        assert_eq!(utf16_len("😀"), 2);
    }

    #[test]
    fn stubs_and_binaries_have_null_content() -> Result<()> {
        let stub = Object::file_stub(source("/x/y.rs"))?;
        assert!(stub.is_stub());
        assert_eq!(stub.content_hash(), None);
        let binary = Object::file_bytes(source("/x/y.bin"), vec![0xff, 0x00, 0xfe])?;
        assert_eq!(binary.content(), None);
        assert_eq!(binary.content_omitted(), Some(ContentOmitted::Binary));
        assert_eq!(binary.file_hash(), Some(&sha256(&[0xff, 0x00, 0xfe])));
        assert!(!binary.is_stub());
        // UTF-8 holding a NUL byte is binary, as the indexer (and git) decide: the same bytes
        // make the same object whichever way they arrive.
        let nul = Object::file_bytes(source("/x/z.dat"), b"a\0b".to_vec())?;
        assert_eq!(nul.content(), None);
        assert_eq!(nul.content_omitted(), Some(ContentOmitted::Binary));
        Ok(())
    }

    #[test]
    fn envelopes_round_trip_and_tampering_is_caught() -> Result<()> {
        let fields = ToolcallFields {
            tool: "read_file".into(),
            args: serde_json::from_value(json!({"path": "/a"}))
                .map_err(|e| Error::invalid_input(e.to_string()))?,
            args_display: None,
            status: ToolStatus::Ok,
            chat_ref: "chat:s1".into(),
            file_refs: Some(vec!["abc".into()]),
        };
        let call = Object::toolcall("toolcall:1", fields, "output".into())?;
        let json = call.to_json();
        assert!(json.get("args_display").is_none());
        assert_eq!(Object::from_json(&json)?, call);
        let mut tampered = json.clone();
        tampered["status"] = json!("fail");
        let err = Object::from_json(&tampered).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("metadata_hash"), "{err}");
        Ok(())
    }

    #[test]
    fn chat_derives_refs_and_transcript() -> Result<()> {
        let turns = vec![
            Turn {
                role: Role::User,
                content: "hi".into(),
                toolcall_refs: None,
            },
            Turn {
                role: Role::Assistant,
                content: "reading".into(),
                toolcall_refs: Some(vec!["t1".into(), "t2".into()]),
            },
        ];
        let chat = Object::chat("s1", turns)?;
        assert_eq!(chat.id(), "chat:s1");
        assert_eq!(chat.content(), Some("user: hi\n\nassistant: reading"));
        match chat.fields() {
            Fields::Chat(f) => {
                assert_eq!(f.toolcall_refs, vec!["t1", "t2"]);
                assert_eq!(f.turn_count, 2);
                assert_eq!(f.session_ref, "session:s1");
            }
            other => panic!("not a chat: {other:?}"),
        }
        assert_eq!(Object::from_json(&chat.to_json())?, chat);
        Ok(())
    }

    #[test]
    fn inconsistent_parts_are_refused() {
        let fields = Fields::File(FileFields {
            file_type: "md".into(),
            char_count: 3,
        });
        let fs = Source::Filesystem(source("/a.md"));
        assert!(
            Object::from_parts(
                None,
                Some(fs.clone()),
                None,
                Some("ab".into()),
                fields.clone(),
                None
            )
            .is_err()
        );
        assert!(Object::from_parts(None, None, None, None, fields, None).is_err());
        assert!(
            Object::from_parts(
                Some("x"),
                Some(fs),
                None,
                Some("p".into()),
                Fields::SystemPrompt,
                None
            )
            .is_err()
        );
    }

    proptest::proptest! {
        #[test]
        fn utf16_len_counts_utf16_units(text in "\\PC*") {
            let expected: u64 = text.chars().map(|c| c.len_utf16() as u64).sum();
            proptest::prop_assert_eq!(utf16_len(&text), expected);
        }
    }

    fn session_fields(ids: Vec<String>, sid: String) -> SessionFields {
        let n = ids.len();
        SessionFields {
            chat_ref: format!("chat:{sid}"),
            system_prompt_ref: format!("system_prompt:{sid}"),
            session_id: sid,
            session_index: ids.clone(),
            metadata_pool: ids[n / 3..].to_vec(),
            active_set: ids.iter().rev().take(n / 2).cloned().collect(),
            pinned_set: ids.iter().step_by(3).cloned().collect(),
        }
    }

    fn jcs_of(fields: &Fields) -> Result<String> {
        crate::hash::canonical_json(&fields.to_json())
    }

    #[test]
    fn session_canonical_json_is_jcs_on_escapes_and_non_ascii() -> Result<()> {
        let mut ids: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b"))
            .collect();
        ids.extend(
            [
                "",
                "\"",
                "\\",
                "\u{7f}",
                "\u{80}",
                "é",
                "\u{2028}",
                "\u{2029}",
                "\u{feff}",
                "😀",
                "\u{10ffff}",
                "\u{0}\u{1f}",
                "x\"y\\z\n\t",
                "日本語",
                "\u{1d11e}",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        for sid in ["s", "a\u{1}\"é😀"] {
            let fields = Fields::Session(session_fields(ids.clone(), sid.to_string()));
            assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
        }
        let empty = Fields::Session(session_fields(Vec::new(), String::new()));
        assert_eq!(empty.canonical_json()?, jcs_of(&empty)?);
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn session_canonical_json_matches_jcs(
            ids in proptest::collection::vec(proptest::prelude::any::<String>(), 0..40),
            sid in proptest::prelude::any::<String>(),
        ) {
            let fields = Fields::Session(session_fields(ids, sid));
            proptest::prop_assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
        }
    }
}
