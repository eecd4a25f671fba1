//! The agent tools over a live session: `agent.call` runs one tool (and commits what it did,
//! the recorded tool call included, as one commit of the session), `agent.tools` lists the tools
//! a session offers, `agent.entrypoints` the excerpts a runtime shows the model when a session
//! starts.
//!
//! One request for every tool rather than one per tool: the tools are a table (`agent::tools`)
//! whose arguments are checked by the tool itself against the schemas of `schema/tools/`, and
//! every call takes the same path (dispatch, descriptor wrapping, recording, commit) whatever
//! the front end (the MCP server, the daemon's clients, Rust). Per-tool requests would repeat
//! those schemas in `schema/rpc/` and the path in as many types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::request::Apply;
use super::{Engine, Result, lock};
use crate::agent::Entrypoint;
use crate::agent::tools::{self, ToolAnswer};

/// `agent.call`: run tool `tool` with `args` on session `session`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentCallRequest {
    /// The session id.
    pub session: String,
    /// The tool (`list_files`, `read_file`, `read_lines`, `get_excerpt`, `search`,
    /// `summarize_file`, `get_file_history`, `get_file_diff`, `read_fd`).
    pub tool: String,
    /// Its arguments, as its schema in `schema/tools/` describes them.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Who calls (an MCP client's name), kept with the session outside every hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// What `agent.call` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentCalled {
    /// The session id.
    pub session_id: String,
    /// The tool's answer: its text (or a descriptor's `<fd_result>`, or the error), whether it
    /// failed, and the id of the recorded tool call.
    #[serde(flatten)]
    pub answer: ToolAnswer,
    /// The commit that recorded the call.
    pub tx_id: Option<u64>,
}

impl Apply for AgentCallRequest {
    type Response = AgentCalled;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session; [`crate::Error::InvalidInput`] for a
    /// tool the session does not offer. A tool's own failure (bad arguments, a missing file) is
    /// an answer with `is_error`, recorded and committed.
    fn apply(self, engine: &Engine) -> Result<AgentCalled> {
        // A read-only tool's record is answered before its commit is durable; every write is
        // durable before it is answered.
        let durable = !tools::is_read_only(&self.tool);
        let (answer, tx_id) = engine.with_session_as(&self.session, durable, |session| {
            tools::call(session, &self.tool, self.args, self.caller.as_deref())
        })?;
        Ok(AgentCalled {
            session_id: self.session,
            answer,
            tx_id,
        })
    }
}

/// `agent.tools`: the tools a session offers, as MCP lists them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentToolsRequest {
    /// The session id.
    pub session: String,
}

/// What `agent.tools` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentTools {
    /// The session id.
    pub session_id: String,
    /// Each tool's `name`, `description` and `inputSchema`, in order.
    pub tools: Vec<Value>,
    /// Instructions for the model when the session has descriptors (the
    /// `<file_descriptor_instructions>` its system prompt gets).
    pub instructions: Option<String>,
}

impl Apply for AgentToolsRequest {
    type Response = AgentTools;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session.
    fn apply(self, engine: &Engine) -> Result<AgentTools> {
        let slot = engine.live_session(&self.session)?;
        let session = lock(&slot);
        Ok(AgentTools {
            tools: tools::tool_definitions(&session),
            instructions: crate::agent::descriptors::prompt_addition(&session),
            session_id: self.session.clone(),
        })
    }
}

/// `agent.entrypoints`: the excerpts of the entrypoint files (AGENTS.md, the README, the
/// manifests) in the top directory of each of a session's mounts, for a runtime to put before
/// the model when the session starts (seed 001, "Startup").
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentEntrypointsRequest {
    /// The session id.
    pub session: String,
}

/// What `agent.entrypoints` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentEntrypoints {
    /// The session id.
    pub session_id: String,
    /// Each entrypoint's id, name, hash and leading lines, in the order they are offered.
    pub entrypoints: Vec<Entrypoint>,
    /// The commit that joined the files read to the session (none when nothing changed).
    pub tx_id: Option<u64>,
}

impl Apply for AgentEntrypointsRequest {
    type Response = AgentEntrypoints;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session; the session's errors.
    fn apply(self, engine: &Engine) -> Result<AgentEntrypoints> {
        let (entrypoints, tx_id) = engine.with_session(&self.session, crate::agent::entrypoints)?;
        Ok(AgentEntrypoints {
            session_id: self.session,
            entrypoints,
            tx_id,
        })
    }
}

/// `agent.approve`: a person approves the write the agent's call was held for (seed 001's
/// `require_approval`: `delete_file`, `rename_file`), by the token the agent was given. The call
/// runs as the agent made it (so only if the file still has the quoted hash), is recorded and
/// committed as `agent.call`'s. No MCP tool exposes this request: the agent cannot approve itself.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentApproveRequest {
    /// The session id.
    pub session: String,
    /// The token of the held call (`approve-…`), valid once, for one hour.
    pub token: String,
    /// Who approves, kept with the session outside every hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

impl Apply for AgentApproveRequest {
    type Response = AgentCalled;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session, or a token unknown or used;
    /// [`crate::Error::InvalidInput`] for an expired token.
    fn apply(self, engine: &Engine) -> Result<AgentCalled> {
        let (answer, tx_id) = engine.with_session(&self.session, |session| {
            tools::approve(session, &self.token, self.caller.as_deref())
        })?;
        Ok(AgentCalled {
            session_id: self.session,
            answer,
            tx_id,
        })
    }
}

/// `agent.audit`: the writes agents made (every call of a writing tool), oldest first.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentAuditRequest {
    /// Only this session's writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only writes recorded after this transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many entries (default all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// What `agent.audit` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentAudit {
    /// One entry per call of a writing tool, oldest first.
    pub entries: Vec<crate::agent::AuditEntry>,
}

impl Apply for AgentAuditRequest {
    type Response = AgentAudit;

    /// # Errors
    /// [`crate::Error::Corrupt`] when the log or a recorded call fails its checks.
    fn apply(self, engine: &Engine) -> Result<AgentAudit> {
        Ok(AgentAudit {
            entries: crate::agent::audit(
                engine.store(),
                self.session.as_deref(),
                self.since.map(crate::store::TxId),
                self.limit.unwrap_or(usize::MAX),
            )?,
        })
    }
}

/// `agent.push`: a runtime pushes its unsaved copy of a file into session `session` (seed 002's
/// client copy precedence). While the copy stands the agent's reads return it, and the agent's
/// writes over it are refused (`overlapping_edits`) unless `caller` is the agent's own caller,
/// whose writes build on it. It goes when the file on disk gets the copy's hash (the user saved
/// it) or with `agent.withdraw`. Give the copy as `text`, or as `base64` for bytes that may not
/// be UTF-8 (they must be: anything else is refused). No MCP tool exposes this request: the
/// agent cannot push.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentPushRequest {
    /// The session id.
    pub session: String,
    /// The file, as the tools name it: an id (`f3`), a path relative to a mount, or an
    /// absolute agent path.
    pub filepath: String,
    /// The copy, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The copy's bytes in standard base64 (instead of `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// Who pushes (a runtime's name), kept with the copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// What `agent.push` and `agent.withdraw` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentPushed {
    /// The session id.
    pub session_id: String,
    /// The file and the copy's hash; whether it stands now.
    #[serde(flatten)]
    pub file: crate::agent::PushedFile,
    /// The commit (none when nothing changed).
    pub tx_id: Option<u64>,
}

impl Apply for AgentPushRequest {
    type Response = AgentPushed;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session; [`crate::Error::InvalidInput`] for
    /// both or neither of `text` and `base64`, base64 that does not decode, bytes that are not
    /// UTF-8 text or over the content limit; [`crate::Error::InvalidPath`] for a path outside
    /// the mounts, in a read-only mount or where no file is; [`crate::Error::PermissionDenied`]
    /// for a denied file. Nothing changes then.
    fn apply(self, engine: &Engine) -> Result<AgentPushed> {
        let bytes = match (self.text, self.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(base64)) => super::objects::Body::Base64 { base64 }.bytes()?,
            _ => {
                return Err(crate::Error::invalid_input(
                    "give the pushed copy as exactly one of text and base64",
                ));
            }
        };
        let (file, tx_id) = engine.with_session(&self.session, |session| {
            crate::agent::push(session, &self.filepath, bytes, self.caller)
        })?;
        Ok(AgentPushed {
            session_id: self.session,
            file,
            tx_id,
        })
    }
}

/// `agent.withdraw`: the runtime withdraws its pushed copy of a file (the user discarded the
/// edits): reads and writes see the file on disk again.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentWithdrawRequest {
    /// The session id.
    pub session: String,
    /// The file, as the tools name it.
    pub filepath: String,
}

impl Apply for AgentWithdrawRequest {
    type Response = AgentPushed;

    /// # Errors
    /// [`crate::Error::NotFound`] for an unknown session, or when no copy of the file stands
    /// (never pushed, withdrawn, or saved); the path's errors as for `agent.push`.
    fn apply(self, engine: &Engine) -> Result<AgentPushed> {
        let (file, tx_id) = engine.with_session(&self.session, |session| {
            crate::agent::withdraw(session, &self.filepath)
        })?;
        Ok(AgentPushed {
            session_id: self.session,
            file,
            tx_id,
        })
    }
}
