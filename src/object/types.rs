//! The kinds of object and the small types their fields are made of: [`ObjectType`], [`Source`],
//! [`ContentOmitted`], [`ToolStatus`], [`Role`], [`Turn`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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
    /// A session's own records outside seed 003's session fields: its configuration (mounts,
    /// descriptors) and its file id table. Not one of the seed's five types; see
    /// `docs/agent-tools.md`.
    SessionConfig,
}

impl ObjectType {
    /// Every type, in a fixed order.
    pub const ALL: [ObjectType; 6] = [
        ObjectType::File,
        ObjectType::Toolcall,
        ObjectType::Chat,
        ObjectType::SystemPrompt,
        ObjectType::Session,
        ObjectType::SessionConfig,
    ];

    /// The type's name as JSON spells it (`file`, `toolcall`, `chat`, `system_prompt`, `session`,
    /// `session_config`).
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectType::File => "file",
            ObjectType::Toolcall => "toolcall",
            ObjectType::Chat => "chat",
            ObjectType::SystemPrompt => "system_prompt",
            ObjectType::Session => "session",
            ObjectType::SessionConfig => "session_config",
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
                    "unknown object type {text:?}: expected file, toolcall, chat, system_prompt, session or session_config"
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
