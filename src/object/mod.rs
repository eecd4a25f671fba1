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
//!
//! # Layout
//! - `types`: the kinds of object and the small types of their fields. `fields`: each type's
//!   own fields (the metadata hash's input). `identity`: identity hashes and derived values.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

mod fields;
mod identity;
mod types;

pub use fields::{
    ChatFields, ChatTurns, Fields, FileFields, SessionFields, SessionIds, ToolcallFields,
};
pub(crate) use fields::{SessionJsonParts, session_json_of_parts};
pub use identity::{
    assigned_identity, composite_hash, file_type_of, sourced_identity, transcript, utf16_len,
};
use identity::{check_assigned_id, is_transcript};
pub use types::{ContentOmitted, FilesystemSource, ObjectType, Role, Source, ToolStatus, Turn};

use crate::error::{Error, Result};
use crate::hash::{Hash, sha256, sha256_json};

/// The canonical JSON of an object's fields that its caller already built, with its SHA-256
/// when that is known too.
struct GivenJson {
    json: Arc<String>,
    hash: Option<Hash>,
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
    /// writes it without serialising the fields again; shared by clones. An `Arc<String>`, not an
    /// `Arc<str>`: the text moves in without a copy (a session document is megabytes).
    metadata_json: Arc<String>,
    metadata_hash: Hash,
    object_hash: Hash,
    content_omitted: Option<ContentOmitted>,
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
        metadata_json: Option<GivenJson>,
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
        let (metadata_json, known_hash) = match metadata_json {
            Some(given) => {
                debug_assert_eq!(
                    Some(given.json.as_str()),
                    fields.canonical_json().ok().as_deref(),
                    "assemble given JSON that is not the fields' canonical JSON"
                );
                (given.json, given.hash)
            }
            None => (Arc::new(fields.canonical_json()?), None),
        };
        let metadata_hash = match known_hash {
            Some(hash) => {
                debug_assert_eq!(
                    hash,
                    sha256(metadata_json.as_bytes()),
                    "assemble given a hash that is not the JSON's"
                );
                hash
            }
            None => sha256(metadata_json.as_bytes()),
        };
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
                if !content.is_some_and(|c| is_transcript(&f.turns, c)) {
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
            Fields::SessionConfig => {
                if content.is_none() {
                    return Err(Error::invalid_input(
                        "a session configuration's content is a string, not null",
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

    /// A file at `path` on filesystem `fs` holding "text" (tests only).
    ///
    /// # Errors
    /// As [`Object::file_text`].
    #[cfg(test)]
    pub(crate) fn text_at(path: &str) -> Result<Self> {
        Object::file_text(
            FilesystemSource {
                filesystem_id: "fs".into(),
                path: path.into(),
            },
            "text".into(),
        )
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
            turns: turns.into(),
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

    /// [`Object::chat`] with the fields' canonical JSON and the transcript already known (a
    /// session keeps them between commits): `json` must be what [`Fields::canonical_json`] gives
    /// for these turns (debug builds check it) and `transcript` their transcript (checked).
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub(crate) fn chat_with_json(
        session_id: &str,
        turns: fields::ChatTurns,
        json: String,
        transcript: String,
    ) -> Result<Self> {
        let toolcall_refs = turns
            .iter()
            .flat_map(|t| t.toolcall_refs.iter().flatten().cloned())
            .collect();
        let fields = ChatFields {
            session_ref: format!("session:{session_id}"),
            turn_count: turns.len() as u64,
            turns,
            toolcall_refs,
        };
        Object::assemble(
            Some(&format!("chat:{session_id}")),
            None,
            None,
            Some(transcript),
            None,
            Fields::Chat(fields),
            None,
            Some(GivenJson {
                json: Arc::new(json),
                hash: None,
            }),
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

    /// A session's own record `id` (`session_config:{sid}`, `session_files:{sid}`) holding
    /// `content`.
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub fn session_config(id: &str, content: String) -> Result<Self> {
        Object::from_parts(
            Some(id),
            None,
            None,
            Some(content),
            Fields::SessionConfig,
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

    /// [`Object::session`] with the fields' canonical JSON and its SHA-256 already known (a
    /// session keeps its sets' JSON between commits and hashes only what changed): `json` must
    /// be what [`Fields::canonical_json`] gives for these fields and `hash` its SHA-256 (debug
    /// builds check both).
    ///
    /// # Errors
    /// See [`Object::from_parts`].
    pub(crate) fn session_with_json(
        fields: SessionFields,
        json: Arc<String>,
        hash: Hash,
    ) -> Result<Self> {
        let id = format!("session:{}", fields.session_id);
        Object::assemble(
            Some(&id),
            None,
            None,
            None,
            None,
            Fields::Session(fields),
            None,
            Some(GivenJson {
                json,
                hash: Some(hash),
            }),
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
    pub fn metadata_json_shared(&self) -> Arc<String> {
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
mod tests;
