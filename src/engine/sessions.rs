//! The session API: create, list, show, read, discover, set operations, tool calls, turns,
//! render, resume, fork, history. Each mutating request is one commit of the session.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::request::Apply;
use super::{Engine, Error, Result, lock};
use crate::object::{Role, ToolStatus, Turn};
use crate::resolve::MountMapping;
use crate::session::{
    Commit, DescriptorSettings, RenderOptions, ResumeReport, Session, SessionConfig,
    SessionOptions, ToolcallInput, Touched,
};

/// The commit a session request wrote: the session and its transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Committed {
    /// The session id.
    pub session_id: String,
    /// The commit's transaction; `None` when nothing changed.
    pub tx_id: Option<u64>,
}

/// `session.new`: create a session (its first commit).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionNewRequest {
    /// The session id (default: a new ULID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub system_prompt: String,
    /// Mounts added to the store's default mounts.
    #[serde(default)]
    pub mounts: Vec<MountMapping>,
    /// The filesystem id of paths no mount maps (default: this machine's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_filesystem: Option<String>,
    /// File descriptors (seed 004) for the session's tools: on unless `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptors: Option<bool>,
    /// Descriptor settings other than the store's (`settings.toml`'s `[file_descriptor]`, by
    /// default 8000, 4000, 8000, user input not paged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_settings: Option<DescriptorSettings>,
}

impl Apply for SessionNewRequest {
    type Response = Committed;

    /// # Errors
    /// [`Error::InvalidInput`] for an unusable id or mounts; [`Error::Conflict`] when a session
    /// with this id exists.
    fn apply(self, engine: &Engine) -> Result<Committed> {
        let settings = engine.settings();
        let mut mounts = settings.mounts.clone();
        mounts.extend(self.mounts);
        let options = SessionOptions {
            session_id: self.id,
            mounts,
            default_filesystem_id: self.default_filesystem,
            system_prompt: self.system_prompt,
            descriptors: match self.descriptors {
                Some(false) => None,
                _ => match self.descriptor_settings {
                    Some(given) => {
                        crate::agent::descriptors::check_settings(&given)?;
                        Some(given)
                    }
                    None => {
                        let stored = settings.file_descriptor.clone();
                        crate::agent::descriptors::check_settings(&stored).map_err(|e| {
                            Error::invalid_input(format!(
                                "{e} ([file_descriptor] in the store's settings.toml; fix it there)"
                            ))
                        })?;
                        Some(stored)
                    }
                },
            },
        };
        let session = Session::create(&engine.store, &settings, options)?;
        let committed = Committed {
            session_id: session.id().to_string(),
            tx_id: session.last_commit().map(|t| t.0),
        };
        engine.keep_session(session);
        engine.publish(&committed.tx_id.into_iter().collect::<Vec<_>>());
        Ok(committed)
    }
}

/// `session.ls`: every session's id.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionLsRequest {}

impl Apply for SessionLsRequest {
    type Response = Vec<String>;

    fn apply(self, engine: &Engine) -> Result<Vec<String>> {
        Session::list(&engine.store)
    }
}

impl Engine {
    /// Runs `read` on session `sid`: its commit at or before `as_of_tx` (a read-only view), or
    /// the live session.
    fn read_session<T>(
        &self,
        sid: &str,
        as_of_tx: Option<u64>,
        read: impl FnOnce(&Session) -> Result<T>,
    ) -> Result<T> {
        match as_of_tx {
            Some(tx) => {
                let tx = self.check_tx("--as-of-tx", tx)?;
                read(&Session::view_at(&self.store, &self.settings(), sid, tx)?)
            }
            None => {
                let slot = self.live_session(sid)?;
                let session = lock(&slot);
                read(&session)
            }
        }
    }
}

/// `session.show`: a session's document, configuration and chat.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionShowRequest {
    /// The session id.
    pub id: String,
    /// Show the commit at or before this transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_tx: Option<u64>,
}

/// What `session.show` answers: the session envelope's fields, with its configuration, turns
/// and commit beside them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionShown {
    /// The session envelope (`schema/objects/session.schema.json`), its fields at the top level.
    #[serde(flatten)]
    pub document: Map<String, Value>,
    /// Mounts, default filesystem id, fork origin.
    pub config: SessionConfig,
    /// The chat's turns.
    pub turns: Vec<Turn>,
    /// The commit shown.
    pub tx_id: Option<u64>,
}

impl SessionShown {
    /// The session id.
    pub fn session_id(&self) -> &str {
        self.document
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The sizes of the index, the pool, the active and the pinned set.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let len = |key: &str| {
            self.document
                .get(key)
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        };
        (
            len("session_index"),
            len("metadata_pool"),
            len("active_set"),
            len("pinned_set"),
        )
    }
}

impl Apply for SessionShowRequest {
    type Response = SessionShown;

    /// # Errors
    /// [`Error::NotFound`] for an unknown session (or one that did not exist yet then).
    fn apply(self, engine: &Engine) -> Result<SessionShown> {
        engine.read_session(&self.id, self.as_of_tx, |session| {
            let Value::Object(document) = session.document()?.to_json() else {
                return Err(Error::corrupt("a session envelope that is not an object"));
            };
            Ok(SessionShown {
                document,
                config: session.config().clone(),
                turns: session.turns().to_vec(),
                tx_id: session.last_commit().map(|t| t.0),
            })
        })
    }
}

/// What `session.read` and `session.discover` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TouchedFiles {
    /// What happened to each file, in the order given.
    pub touched: Vec<Touched>,
    /// The session id.
    pub session_id: String,
    /// The commit; `None` when nothing changed.
    pub tx_id: Option<u64>,
}

/// `session.read`: the agent reads files (indexed, then in the index, pool and active set).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionReadRequest {
    /// The session id.
    pub id: String,
    /// Absolute paths as the agent sees them.
    pub paths: Vec<String>,
}

impl Apply for SessionReadRequest {
    type Response = TouchedFiles;

    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve or leaves its mount;
    /// [`Error::Io`] when a file cannot be read. Nothing is committed then.
    fn apply(self, engine: &Engine) -> Result<TouchedFiles> {
        let (touched, tx_id) = engine.with_session(&self.id, |session| {
            self.paths.iter().map(|path| session.read(path)).collect()
        })?;
        Ok(TouchedFiles {
            touched,
            session_id: self.id,
            tx_id,
        })
    }
}

/// `session.discover`: files seen in ls/grep output become stubs in the index and the pool.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionDiscoverRequest {
    /// The session id.
    pub id: String,
    /// Absolute paths as the agent sees them.
    pub paths: Vec<String>,
}

impl Apply for SessionDiscoverRequest {
    type Response = TouchedFiles;

    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve; nothing is committed then.
    fn apply(self, engine: &Engine) -> Result<TouchedFiles> {
        let (touched, tx_id) = engine.with_session(&self.id, |session| {
            let paths: Vec<&str> = self.paths.iter().map(String::as_str).collect();
            session.discover(&paths)
        })?;
        Ok(TouchedFiles {
            touched,
            session_id: self.id,
            tx_id,
        })
    }
}

/// A change to a session's sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SetOp {
    /// Activate an object (reads a stub from its source).
    Activate,
    /// Deactivate an object (it stays in the pool).
    Deactivate,
    /// Pin an object of the pool (protects it from auto-collapse).
    Pin,
    /// Unpin an object.
    Unpin,
}

impl SetOp {
    /// The operation's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SetOp::Activate => "activate",
            SetOp::Deactivate => "deactivate",
            SetOp::Pin => "pin",
            SetOp::Unpin => "unpin",
        }
    }
}

/// `session.set`: activate, deactivate, pin or unpin an object.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSetRequest {
    /// The session id.
    pub id: String,
    /// The object id (a file's id or a tool call id).
    pub object: String,
    /// What to do.
    pub op: SetOp,
}

/// What `session.set` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetDone {
    /// The object.
    pub object: String,
    /// What was done.
    pub op: SetOp,
    /// The session id.
    pub session_id: String,
    /// The commit; `None` when nothing changed.
    pub tx_id: Option<u64>,
}

impl Apply for SessionSetRequest {
    type Response = SetDone;

    /// # Errors
    /// The original's texts: `Object not found`, `Object not in session`, `Object not active`,
    /// `Object not in metadata pool`, `Object not pinned`, `Source inaccessible`.
    fn apply(self, engine: &Engine) -> Result<SetDone> {
        let object = self.object;
        let ((), tx_id) = engine.with_session(&self.id, |session| match self.op {
            SetOp::Activate => session.activate(&object),
            SetOp::Deactivate => session.deactivate(&object),
            SetOp::Pin => session.pin(&object),
            SetOp::Unpin => session.unpin(&object),
        })?;
        Ok(SetDone {
            object,
            op: self.op,
            session_id: self.id,
            tx_id,
        })
    }
}

/// `session.toolcall`: record a tool call; it joins the latest turn and is activated.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionToolcallRequest {
    /// The session id.
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments.
    pub args: Map<String, Value>,
    /// A short rendering of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_display: Option<String>,
    /// The tool call id (default: `toolcall:ULID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// ok or fail.
    pub status: ToolStatus,
    /// Ids of the files the call touched.
    #[serde(default)]
    pub file_refs: Vec<String>,
    /// The output (or the error text of a failure).
    pub output: String,
}

/// What `session.toolcall` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolcallRecorded {
    /// The tool call's id.
    pub id: String,
    /// The session id.
    pub session_id: String,
    /// The commit.
    pub tx_id: Option<u64>,
}

impl Apply for SessionToolcallRequest {
    type Response = ToolcallRecorded;

    /// # Errors
    /// [`Error::InvalidInput`] when the chat has no turn yet; [`Error::Conflict`] when the id
    /// belongs to another session's chat or another type.
    fn apply(self, engine: &Engine) -> Result<ToolcallRecorded> {
        // A file ref must name a file the store has: its id, an id prefix or its path.
        let file_refs = self
            .file_refs
            .iter()
            .map(|reference| {
                let refuse = || {
                    Error::invalid_input(format!(
                        "file ref {reference:?} names no file in the store; give a file's entity \
                         id, an id prefix or its absolute path (`strata ls --json` lists ids)"
                    ))
                };
                let id = engine.resolve_ref(None, reference).map_err(|_| refuse())?;
                match engine.store.entity(&id)?.object_type {
                    crate::object::ObjectType::File => Ok(id),
                    _ => Err(refuse()),
                }
            })
            .collect::<Result<Vec<String>>>()?;
        let input = ToolcallInput {
            id: self.call_id,
            tool: self.tool,
            args: self.args,
            args_display: self.args_display,
            status: self.status,
            file_refs: (!file_refs.is_empty()).then_some(file_refs),
            output: self.output,
        };
        let (id, tx_id) =
            engine.with_session(&self.id, |session| session.record_toolcall(input))?;
        Ok(ToolcallRecorded {
            id,
            session_id: self.id,
            tx_id,
        })
    }
}

/// `session.turn`: append a turn to the chat.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionTurnRequest {
    /// The session id.
    pub id: String,
    /// system, user, assistant or tool.
    pub role: String,
    /// The turn's text.
    pub content: String,
    /// Tool calls made during the turn (recorded, not yet in a turn).
    #[serde(default)]
    pub toolcall_refs: Vec<String>,
}

/// What `session.turn` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnAppended {
    /// The chat's turn count now.
    pub turn_count: usize,
    /// The session id.
    pub session_id: String,
    /// The commit.
    pub tx_id: Option<u64>,
    /// When the turn was a user input the session pages (seed 004's `page_user_input`, longer
    /// than `max_input_chars`): the descriptor holding it and the message the turn holds instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paged: Option<PagedInput>,
}

/// A user input kept in a descriptor: the turn holds `message`, the model reads the input with
/// `read_fd`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PagedInput {
    /// The descriptor (`fd:N`, source `user_input`).
    pub fd: String,
    /// The reference the turn holds and the model is given instead of the input
    /// (`<fd:N preview="…" type="user_input" size="…">` and how to read it).
    pub message: String,
}

impl Apply for SessionTurnRequest {
    type Response = TurnAppended;

    /// A user turn longer than `max_input_chars` becomes a descriptor when the session pages
    /// user input: the turn holds the reference, the descriptor the input, in the same commit.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unknown role or a ref that is not an unreferenced tool
    /// call of this session.
    fn apply(self, engine: &Engine) -> Result<TurnAppended> {
        let role: Role = self.role.parse()?;
        let ((turn_count, paged), tx_id) = engine.with_session(&self.id, |session| {
            let paged = match role {
                Role::User => crate::agent::descriptors::page_user_input(session, &self.content)?,
                _ => None,
            };
            let content = paged
                .as_ref()
                .map_or(self.content, |(_, message)| message.clone());
            let count = session.append_turn(role, content, self.toolcall_refs)?;
            Ok((count, paged))
        })?;
        Ok(TurnAppended {
            turn_count,
            session_id: self.id,
            tx_id,
            paged: paged.map(|(fd, message)| PagedInput { fd, message }),
        })
    }
}

/// `session.render`: the context block.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRenderRequest {
    /// The session id.
    pub id: String,
    /// At most this many characters (UTF-16 units) of active content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// Render the commit at or before this transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_tx: Option<u64>,
}

/// What `session.render` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionRendered {
    /// The session id.
    pub session_id: String,
    /// The commit rendered.
    pub tx_id: Option<u64>,
    /// The context block.
    pub text: String,
}

impl Apply for SessionRenderRequest {
    type Response = SessionRendered;

    /// # Errors
    /// [`Error::NotFound`] for an unknown session; store errors reading active contents.
    fn apply(self, engine: &Engine) -> Result<SessionRendered> {
        engine.read_session(&self.id, self.as_of_tx, |session| {
            Ok(SessionRendered {
                session_id: session.id().to_string(),
                tx_id: session.last_commit().map(|t| t.0),
                text: session.render(&RenderOptions {
                    budget: self.budget,
                    nonce: None,
                    prompt_addition: crate::agent::descriptors::prompt_addition(session),
                })?,
            })
        })
    }
}

/// `session.resume`: reconcile the session's files with disk (one commit).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionResumeRequest {
    /// The session id.
    pub id: String,
}

impl Apply for SessionResumeRequest {
    type Response = ResumeReport;

    /// # Errors
    /// [`Error::NotFound`] for an unknown session; store errors from the commit.
    fn apply(self, engine: &Engine) -> Result<ResumeReport> {
        // Resume reconciles what the store holds: a live session is reloaded first.
        engine.forget_session(&self.id);
        let slot = engine.live_session(&self.id)?;
        let mut session = lock(&slot);
        let report = session.reconcile();
        drop(session);
        match &report {
            Ok(report) => engine.publish(&report.tx_id.into_iter().collect::<Vec<_>>()),
            Err(_) => engine.forget_session(&self.id),
        }
        report
    }
}

/// `session.fork`: a new session from a commit of this one.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionForkRequest {
    /// The session to fork.
    pub id: String,
    /// Fork the commit at or before this transaction (default: the latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_tx: Option<u64>,
    /// The new session's id (default: a new ULID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_id: Option<String>,
}

/// What `session.fork` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Forked {
    /// The new session's id.
    pub session_id: String,
    /// Its first commit.
    pub tx_id: Option<u64>,
    /// The parent and the commit it was forked from.
    pub forked_from: Option<crate::session::ForkOrigin>,
}

impl Apply for SessionForkRequest {
    type Response = Forked;

    /// # Errors
    /// [`Error::NotFound`] for an unknown session; [`Error::Conflict`] when the new id exists.
    fn apply(self, engine: &Engine) -> Result<Forked> {
        let at = self
            .as_of_tx
            .map(|tx| engine.check_tx("--as-of-tx", tx))
            .transpose()?;
        let child = Session::fork(&engine.store, &engine.settings(), &self.id, at, self.new_id)?;
        let forked = Forked {
            session_id: child.id().to_string(),
            tx_id: child.last_commit().map(|t| t.0),
            forked_from: child.config().forked_from.clone(),
        };
        engine.keep_session(child);
        engine.publish(&forked.tx_id.into_iter().collect::<Vec<_>>());
        Ok(forked)
    }
}

/// `session.history`: the session's commits.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionHistoryRequest {
    /// The session id.
    pub id: String,
}

/// What `session.history` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionCommits {
    /// The session id.
    pub session_id: String,
    /// Its commits, oldest first.
    pub commits: Vec<Commit>,
}

impl Apply for SessionHistoryRequest {
    type Response = SessionCommits;

    /// # Errors
    /// [`Error::NotFound`] for an unknown session.
    fn apply(self, engine: &Engine) -> Result<SessionCommits> {
        Ok(SessionCommits {
            commits: Session::history(&engine.store, &self.id)?,
            session_id: self.id,
        })
    }
}
