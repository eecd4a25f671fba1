//! `Session`: an agent runtime's context (seed 003 §5), persisted at every commit, resumable and
//! forkable at any of them.
//!
//! Uses `store`, `index`, `resolve`, `object`, `hash`.
//!
//! A session holds four sets of content object ids ([`Sets`]: index ⊇ pool ⊇ active, pool ⊇
//! pinned), its chat, its system prompt, its resolver (mounts and default filesystem id, kept in
//! the store as the `session_config:{sid}` object) and a metadata cache of every indexed object.
//! Mutations change the session in memory and queue new objects; [`Session::commit`] writes them
//! and the session document as ONE store transaction ([`Origin::Session`]), so the session's
//! history is its commits.
//!
//! # Layout
//! - `sets`: the ordered sets and their invariants. `cache`: the metadata cache.
//! - `files`: agent paths, reads through the index's one disk path, discovery, the watcher hook.
//! - `activate`: activate, deactivate, pin, unpin. `chat`: turns, tool calls, auto-collapse.
//! - `commit`: the session document, the queue of ops, the commit. `render`: the context block.
//! - `resume`: reconciliation against disk. `ulid`: ids. `write`: the agent's writes, all or
//!   nothing per batch, recorded through the one disk path.
//! - `chat_text`: the chat's JSON and transcript kept between commits.
//! - `ids`: the file id table ([`FileIds`]). `descriptors`: the persisted descriptors
//!   ([`Descriptors`]) and the agent layer's cache.
//! - `pushed`: the runtime's unsaved copies of files ([`PushedCopy`], seed 002's client copy
//!   precedence): what reads return and writes are checked against while they stand.

mod activate;
mod cache;
mod chat;
mod chat_text;
mod commit;
mod descriptors;
mod files;
mod ids;
mod pushed;
mod render;
mod resume;
mod sets;
mod ulid;
mod write;

use std::collections::{HashMap, HashSet};

use rustc_hash::FxHashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use cache::{FileState, Meta};
pub use descriptors::{DescriptorEntry, DescriptorOrigin, DescriptorSettings, Descriptors};
pub use ids::FileIds;
pub use pushed::{Pushed, PushedCopy};
pub use render::{ACTIVE_CONTENT, END_CONTENT, RenderOptions, fresh_nonce};
pub use resume::{Reconciled, ResumeReport};
pub use sets::{OrderedSet, Sets};
#[cfg(test)]
pub(crate) use write::FAIL_SWAP_AT;
pub use write::{DiskText, FileWrite, Stale};

use cache::{deleted_meta, meta_of, meta_of_stored};

use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::index::{
    Action, DirStat, Indexer, Look, Planned, Presence, Settings, StatChange, look, presence,
    read_stream, record,
};
use crate::object::{
    ChatTurns, Fields, FilesystemSource, Object, ObjectType, Role, SessionFields, SessionJsonParts,
    Source, ToolStatus, ToolcallFields, Turn, session_json_of_parts,
};
use crate::resolve::{FilesystemResolver, MountMapping, machine_filesystem_id};
use crate::store::{
    HistoryQuery, MetaView, Op, Order, Origin, StatUpdate, Store, Timestamp, TxId, TxReceipt,
    Version,
};

/// The format of the `session_config:{sid}` object's JSON.
pub const CONFIG_FORMAT: u32 = 1;

/// Keep the tool calls of this many most recent turns active (auto-collapse).
pub const RECENT_TURNS: usize = 3;
/// Of the current turn, keep at most this many tool calls active (auto-collapse).
pub const RECENT_TOOLCALLS_PER_TURN: usize = 5;

/// What a new session is made from.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// The session id; a ULID when `None`.
    pub session_id: Option<String>,
    /// The session's mounts (the store's default mounts, or the runtime's).
    pub mounts: Vec<MountMapping>,
    /// The filesystem of paths no mount maps; this machine's when `None`.
    pub default_filesystem_id: Option<String>,
    /// The system prompt (may be empty).
    pub system_prompt: String,
    /// File descriptors (seed 004) with these settings; none when `None`.
    pub descriptors: Option<DescriptorSettings>,
}

/// Where a forked session came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkOrigin {
    /// The parent session id.
    pub session_id: String,
    /// The parent's commit the fork starts from.
    pub tx_id: u64,
}

/// The per-session state outside the seed's hashed session fields, stored as the content (JSON)
/// of the `session_config:{sid}` object (type `session_config`) so that resume resolves the same
/// paths and reads the same descriptors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// The format of this JSON (1).
    pub format: u32,
    /// The mounts, normalised, each with its filesystem id filled in.
    pub mounts: Vec<MountMapping>,
    /// The filesystem of paths no mount maps.
    pub default_filesystem_id: String,
    /// The parent, for a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// File descriptors: settings and table; absent when the session has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptors: Option<Descriptors>,
    /// Who made the session's tool calls (an MCP client's name), as runs of calls: outside
    /// every hash of the tool calls themselves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<CallerSpan>,
    /// The unsaved copies a runtime pushed, by agent path (seed 002's Active File List): while
    /// one stands, reads return it and the agent's writes are checked against it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pushed: std::collections::BTreeMap<String, PushedCopy>,
}

/// A run of tool calls made by one caller: from tool call `from` on, until the next span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallerSpan {
    /// The caller's name (the MCP client's `clientInfo.name`).
    pub caller: String,
    /// The first tool call it made in this run.
    pub from: String,
}

/// A tool call to record: the runtime's id (or none), what ran and what it returned.
#[derive(Clone, Debug)]
pub struct ToolcallInput {
    /// The runtime's id, used as given; `toolcall:{ULID}` when `None`.
    pub id: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The arguments.
    pub args: Map<String, Value>,
    /// A short human rendering of the arguments.
    pub args_display: Option<String>,
    /// ok or fail.
    pub status: ToolStatus,
    /// Ids of the files the call touched.
    pub file_refs: Option<Vec<String>>,
    /// The output (or the error text for a failure).
    pub output: String,
}

/// What a read or a discovery did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Touched {
    /// The file's entity id.
    pub id: String,
    /// The path as the agent sees it.
    pub path: String,
    /// What indexing did (created, updated, unchanged, deleted).
    pub action: Action,
}

/// One commit of a session: a version of its session object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Commit {
    /// The transaction.
    pub tx_id: u64,
    /// Its time.
    pub tx_time: String,
    /// The session document's object hash then.
    pub object_hash: Option<String>,
}

/// An agent runtime's session over one store.
#[derive(Debug)]
pub struct Session {
    store: Store,
    indexer: Indexer,
    /// What the agents' writing tools may do without a person (the settings' file_access).
    write_policy: crate::index::WritePolicy,
    /// The agent tool whose call is running, for the write policy's decisions.
    writing_tool: Option<String>,
    /// Who makes the running call (an MCP client's name): a copy it pushed itself is no other
    /// party's.
    writing_caller: Option<String>,
    resolver: FilesystemResolver,
    config: SessionConfig,
    /// The type the configuration record is stored with: `session_config`, or `system_prompt`
    /// for a session created before that type existed (an entity keeps its type).
    config_type: ObjectType,
    /// The file id table (`session_files:{sid}`).
    file_ids: FileIds,
    /// The store's ignore globs, which agent listings honour.
    ignore: Vec<String>,
    /// What the agent layer derived from this session (dropped on reload).
    agent_cache: descriptors::AgentCache,
    session_id: String,
    sets: Sets,
    turns: ChatTurns,
    /// The chat's JSON and transcript up to its last turn, kept between commits.
    chat_text: chat_text::ChatText,
    /// Tool calls of the index no turn referenced when auto-collapse last looked, in index
    /// order, and how much of the index (which only grows) it has looked at.
    unreferenced: (Vec<String>, usize),
    /// Every tool call id a turn names, built on first need and kept up to date as turns and
    /// refs are added (turns are only ever replaced on a fresh session).
    referenced: Option<rustc_hash::FxHashSet<String>>,
    /// Hashes each commit's session document from where it first differs from the last one.
    document_hasher: crate::hash::PrefixSha256,
    system_prompt: String,
    cache: cache::MetaCache,
    /// The on-disk spelling of files whose identity path differs from it (case-insensitive
    /// mounts lowercase the identity path): the path to open them by.
    spellings: HashMap<String, String>,
    /// Ops waiting for the next commit, at most one per entity.
    pending: Vec<Op>,
    pending_at: HashMap<String, usize>,
    /// Stat cache changes of the files read since the last commit, written with it.
    stat: StatUpdate,
    chat_dirty: bool,
    prompt_dirty: bool,
    config_dirty: bool,
    /// The session object hash of the last commit (`None` before the first).
    committed: Option<Hash>,
    /// The sets' revision at the last commit (or load): unchanged sets need no rehash.
    committed_revision: Option<u64>,
    /// The chat object hash of the last commit (`None` before the first).
    committed_chat: Option<Hash>,
    last_tx: Option<TxId>,
    /// `Some(tx)` for a read-only view of the commit at `tx`.
    view: Option<TxId>,
}

fn session_entity(sid: &str) -> String {
    format!("session:{sid}")
}

fn config_entity(sid: &str) -> String {
    format!("session_config:{sid}")
}

fn files_entity(sid: &str) -> String {
    format!("session_files:{sid}")
}

/// Checks a session id given by a runtime: 1 to 128 characters of `A-Z a-z 0-9 - _ .`.
fn check_session_id(sid: &str) -> Result<()> {
    let ok = !sid.is_empty()
        && sid.len() <= 128
        && sid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "session id {sid:?} is not usable; give 1 to 128 characters of A-Z, a-z, 0-9, '-', '_' or '.'"
        )))
    }
}

fn unknown_session(sid: &str) -> Error {
    Error::not_found(format!(
        "session {sid}; list the sessions with `strata session ls`"
    ))
}

impl Session {
    /// Creates a session and writes its first commit (session, chat, system prompt, config).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unusable id or mounts; [`Error::Conflict`] when a session
    /// with this id exists; store errors.
    pub fn create(store: &Store, settings: &Settings, options: SessionOptions) -> Result<Self> {
        let sid = match options.session_id {
            Some(sid) => sid,
            None => ulid::new_ulid(),
        };
        check_session_id(&sid)?;
        if store.entity_exists(&session_entity(&sid))? {
            return Err(Error::Conflict {
                entity: session_entity(&sid),
                expected: "a new session id".into(),
                actual: "an existing session; resume it instead".into(),
            });
        }
        let default_fs = options
            .default_filesystem_id
            .unwrap_or_else(machine_filesystem_id);
        let resolver = FilesystemResolver::new(options.mounts, default_fs)?;
        let config = SessionConfig {
            format: CONFIG_FORMAT,
            mounts: resolver.mounts().to_vec(),
            default_filesystem_id: resolver.default_filesystem_id().to_string(),
            forked_from: None,
            descriptors: options.descriptors.map(Descriptors::new),
            callers: Vec::new(),
            pushed: Default::default(),
        };
        let mut session = Session::blank(store, settings, sid, resolver, config)?;
        session.system_prompt = options.system_prompt;
        session.commit()?;
        Ok(session)
    }

    fn blank(
        store: &Store,
        settings: &Settings,
        session_id: String,
        resolver: FilesystemResolver,
        config: SessionConfig,
    ) -> Result<Self> {
        Ok(Session {
            store: store.clone(),
            indexer: Indexer::new(store, settings)?,
            write_policy: crate::index::WritePolicy::new(&settings.file_access.permissions)?,
            writing_tool: None,
            writing_caller: None,
            resolver,
            config,
            config_type: ObjectType::SessionConfig,
            file_ids: FileIds::default(),
            ignore: settings.ignore.clone(),
            agent_cache: descriptors::AgentCache::default(),
            session_id,
            sets: Sets::default(),
            turns: ChatTurns::default(),
            chat_text: chat_text::ChatText::default(),
            unreferenced: (Vec::new(), 0),
            referenced: None,
            document_hasher: crate::hash::PrefixSha256::default(),
            system_prompt: String::new(),
            cache: cache::MetaCache::default(),
            spellings: HashMap::new(),
            pending: Vec::new(),
            pending_at: HashMap::new(),
            stat: StatUpdate {
                filesystem_id: machine_filesystem_id(),
                puts: Vec::new(),
                removes: Vec::new(),
            },
            chat_dirty: true,
            prompt_dirty: true,
            config_dirty: true,
            committed: None,
            committed_revision: None,
            committed_chat: None,
            last_tx: None,
            view: None,
        })
    }

    /// Opens the latest commit of session `sid` without reconciling it against disk (see
    /// [`Session::resume`] for that).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown session; [`Error::Corrupt`] when its documents are
    /// inconsistent; store errors.
    pub fn load(store: &Store, settings: &Settings, sid: &str) -> Result<Self> {
        Session::load_at(store, settings, sid, None, false)
    }

    /// A read-only view of session `sid` as its commit at or before transaction `tx` left it; every
    /// object is read as the store knew it at `tx`. To continue from there, [`Session::fork`].
    ///
    /// # Errors
    /// [`Error::NotFound`] when the session is unknown or did not exist yet at `tx`.
    pub fn view_at(store: &Store, settings: &Settings, sid: &str, tx: TxId) -> Result<Self> {
        let mut session = Session::load_at(store, settings, sid, Some(tx), false)?;
        session.view = Some(tx);
        Ok(session)
    }

    /// Loads session `sid` at `at` (latest when `None`). The latest is read through the session's
    /// metadata snapshot; with `refresh` (a resume) a missing or stale one is written anew.
    pub(super) fn load_at(
        store: &Store,
        settings: &Settings,
        sid: &str,
        at: Option<TxId>,
        refresh: bool,
    ) -> Result<Self> {
        let read = |id: &str| -> Result<Option<Version>> {
            match store.as_of(id, None, at) {
                Err(Error::NotFound { .. }) => Ok(None),
                other => other,
            }
        };
        // The session and chat documents are read as stored metadata: their fields are all a
        // session needs, and the stored object hash is what the next commit's match compares.
        // The latest session document is read through its snapshot, as the files' metadata is.
        let stored = match at {
            None => store.metadata_latest_with_json(&session_entity(sid), refresh)?,
            Some(_) => store.metadata_with_json(&session_entity(sid), at)?,
        };
        let (version, stored_json) = stored.ok_or_else(|| match at {
            Some(tx) => Error::not_found(format!(
                "session {sid} at tx {} (it did not exist yet); see `strata session history {sid}`",
                tx.0
            )),
            None => unknown_session(sid),
        })?;
        let Some(document) = version.document else {
            return Err(Error::not_found(format!("session {sid} (it was deleted)")));
        };
        let Fields::Session(fields) = document.fields else {
            return Err(Error::corrupt(format!(
                "session:{sid} is a {}, not a session",
                version.object_type
            )));
        };
        let session_hash = version.info.object_hash;
        let stored_config = read(&config_entity(sid))?.and_then(|v| v.object);
        let config_type = stored_config
            .as_ref()
            .map_or(ObjectType::SessionConfig, Object::object_type);
        let config: SessionConfig = match stored_config {
            Some(config) => serde_json::from_str(config.content().unwrap_or(""))
                .map_err(|e| Error::corrupt(format!("session_config:{sid} does not parse: {e}")))?,
            None => SessionConfig {
                format: CONFIG_FORMAT,
                mounts: Vec::new(),
                default_filesystem_id: machine_filesystem_id(),
                forked_from: None,
                descriptors: None,
                callers: Vec::new(),
                pushed: Default::default(),
            },
        };
        let file_ids = match read(&files_entity(sid))?.and_then(|v| v.object) {
            Some(table) => FileIds::parse(table.content().unwrap_or(""))
                .map_err(|e| Error::corrupt(format!("{}: {e}", files_entity(sid))))?,
            None => FileIds::default(),
        };
        let resolver =
            FilesystemResolver::new(config.mounts.clone(), config.default_filesystem_id.clone())?;
        let chat = store
            .metadata(&fields.chat_ref, at)?
            .filter(|c| !c.is_tombstone());
        let committed_chat = chat.as_ref().and_then(|c| c.info.object_hash);
        let turns = match chat.and_then(|c| c.document) {
            Some(chat) => match chat.fields {
                Fields::Chat(c) => c.turns,
                _ => return Err(Error::corrupt(format!("{} is not a chat", fields.chat_ref))),
            },
            None => ChatTurns::default(),
        };
        let system_prompt = read(&fields.system_prompt_ref)?
            .and_then(|v| v.object)
            .and_then(|o| o.content().map(str::to_string))
            .unwrap_or_default();
        let mut session = Session::blank(store, settings, sid.to_string(), resolver, config)?;
        session.config_type = config_type;
        session.file_ids = file_ids;
        session.sets = Sets::restore(
            fields.session_index,
            fields.metadata_pool,
            fields.active_set,
            fields.pinned_set,
        )?;
        if let Some(json) = stored_json {
            session.sets.seed_json(std::sync::Arc::new(json));
        }
        session.turns = turns;
        session.system_prompt = system_prompt;
        session.chat_dirty = false;
        session.prompt_dirty = false;
        session.config_dirty = false;
        session.committed = session_hash;
        session.committed_revision = Some(session.sets.revision());
        session.committed_chat = committed_chat;
        session.last_tx = Some(version.info.tx_id);
        session.rebuild_cache(at, refresh)?;
        Ok(session)
    }

    /// Rebuilds the metadata cache of every indexed object as the store knew it at `at`, from
    /// the stored metadata alone (no content is read, no object rebuilt); the latest through the
    /// session's metadata snapshot (written anew with `refresh` when it is missing or stale).
    fn rebuild_cache(&mut self, at: Option<TxId>, refresh: bool) -> Result<()> {
        let ids: Vec<&str> = self.sets.index().ids().iter().map(String::as_str).collect();
        let mut spellings = HashMap::new();
        if at.is_none() {
            // The latest, through the snapshot: files are kept lean (their texts in one buffer,
            // nothing converted per file until the cache is first used as a map).
            let mut lean = cache::Lean::new(ids.len(), self.resolver.clone());
            let resolver = &self.resolver;
            self.store.metadata_latest_each(
                &session_entity(&self.session_id),
                &ids,
                refresh,
                &mut |n, view| {
                    let Some(id) = ids.get(n) else {
                        return Ok(());
                    };
                    match view {
                        MetaView::File(file) => {
                            if let Some(spelling) = file.spelling {
                                spellings.insert(id.to_string(), spelling.to_string());
                            }
                            lean.push_file(n, id, &file);
                        }
                        MetaView::Whole(mut stored) => {
                            if let Some(spelling) = stored.info.spelling.take() {
                                spellings.insert(id.to_string(), spelling);
                            }
                            if let Some(meta) = meta_of_stored(resolver, *stored) {
                                lean.push_meta(id.to_string(), meta);
                            }
                        }
                    }
                    Ok(())
                },
            )?;
            self.cache = cache::MetaCache::of_lean(lean);
            self.spellings = spellings;
            return Ok(());
        }
        let stored = self.store.metadata_many(&ids, at)?;
        let mut cache = FxHashMap::with_capacity_and_hasher(ids.len(), Default::default());
        for (id, stored) in ids.iter().zip(stored) {
            let Some(mut stored) = stored else { continue };
            // The version's entity is the id asked: its string becomes the key, not a copy.
            let key = match std::mem::take(&mut stored.info.entity) {
                entity if entity == *id => entity,
                _ => id.to_string(),
            };
            if let Some(spelling) = stored.info.spelling.take() {
                spellings.insert(key.clone(), spelling);
            }
            if let Some(meta) = meta_of_stored(&self.resolver, stored) {
                cache.insert(key, meta);
            }
        }
        self.cache = cache::MetaCache::of_map(cache);
        self.spellings = spellings;
        Ok(())
    }

    /// Forks session `sid` at its commit at or before `at` (latest when `None`) into a new session
    /// that starts with those sets, chat, system prompt and mounts, and writes its first commit.
    /// Parent and child then evolve independently.
    ///
    /// # Errors
    /// As [`Session::view_at`] and [`Session::create`].
    pub fn fork(
        store: &Store,
        settings: &Settings,
        sid: &str,
        at: Option<TxId>,
        new_id: Option<String>,
    ) -> Result<Self> {
        let parent = Session::load_at(store, settings, sid, at, false)?;
        let child_id = new_id.unwrap_or_else(ulid::new_ulid);
        check_session_id(&child_id)?;
        if store.entity_exists(&session_entity(&child_id))? {
            return Err(Error::Conflict {
                entity: session_entity(&child_id),
                expected: "a new session id".into(),
                actual: "an existing session".into(),
            });
        }
        let mut config = parent.config.clone();
        config.forked_from = Some(ForkOrigin {
            session_id: sid.to_string(),
            tx_id: parent.last_tx.map_or(0, |t| t.0),
        });
        let mut child = Session::blank(store, settings, child_id, parent.resolver.clone(), config)?;
        child.sets = parent.sets.clone();
        child.turns = parent.turns.clone();
        child.system_prompt = parent.system_prompt.clone();
        child.cache = parent.cache.clone();
        child.file_ids = parent.file_ids.clone();
        child.file_ids.mark_unstored();
        child.commit()?;
        Ok(child)
    }

    /// Every session in the store, by id.
    ///
    /// # Errors
    /// Store errors.
    pub fn list(store: &Store) -> Result<Vec<String>> {
        Ok(store
            .ids_with_prefix("session:", usize::MAX)?
            .into_iter()
            .filter_map(|id| id.strip_prefix("session:").map(str::to_string))
            .collect())
    }

    /// The commits of session `sid`, oldest first.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown session.
    pub fn history(store: &Store, sid: &str) -> Result<Vec<Commit>> {
        let query = HistoryQuery {
            order: Order::TxAsc,
            ..HistoryQuery::default()
        };
        let versions = match store.history(&session_entity(sid), query) {
            Err(Error::NotFound { .. }) => return Err(unknown_session(sid)),
            other => other?,
        };
        Ok(versions
            .into_iter()
            .map(|v| Commit {
                tx_id: v.tx_id.0,
                tx_time: v.tx_time.to_rfc3339(),
                object_hash: v.object_hash.map(|h| h.to_hex()),
            })
            .collect())
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.session_id
    }

    /// The sets.
    pub fn sets(&self) -> &Sets {
        &self.sets
    }

    /// The chat's turns.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// What the agents' writing tools may do without a person (the settings' file_access).
    pub fn write_policy(&self) -> &crate::index::WritePolicy {
        &self.write_policy
    }

    /// Names the agent tool whose call runs now (`None` after it): its writes are refused where
    /// the write policy denies that tool the file.
    pub fn set_writing_tool(&mut self, tool: Option<&str>) {
        self.writing_tool = tool.map(str::to_string);
    }

    /// Names who makes the running call (`None` after it, or when unknown): its writes over a
    /// copy it pushed itself are based on that copy; over anyone else's they are refused.
    pub fn set_writing_caller(&mut self, caller: Option<&str>) {
        self.writing_caller = caller.map(str::to_string);
    }

    /// Who makes the running call, when known.
    pub fn writing_caller(&self) -> Option<&str> {
        self.writing_caller.as_deref()
    }

    /// The path of `resolved` inside its mount (the agent path without the mount's prefix; the
    /// whole agent path when no mount maps it).
    pub(crate) fn mount_relative<'a>(&self, resolved: &'a crate::resolve::ResolvedPath) -> &'a str {
        resolved
            .mount
            .and_then(|i| self.resolver.mounts().get(i))
            .and_then(|m| resolved.agent_path.strip_prefix(m.agent_prefix.as_str()))
            .unwrap_or(&resolved.agent_path)
            .trim_start_matches('/')
    }

    /// The session's resolver.
    pub fn resolver(&self) -> &FilesystemResolver {
        &self.resolver
    }

    /// The stored configuration (mounts, default filesystem id, fork origin).
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The file id table.
    pub fn file_ids(&self) -> &FileIds {
        &self.file_ids
    }

    /// The file id table, to number files (written with the next commit when it changed).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn file_ids_mut(&mut self) -> Result<&mut FileIds> {
        self.writable()?;
        Ok(&mut self.file_ids)
    }

    /// The store's ignore globs (gitignore syntax), which agent listings honour.
    pub fn ignore_globs(&self) -> &[String] {
        &self.ignore
    }

    /// The deny rules: files they match are never read.
    pub fn deny_rules(&self) -> &crate::index::DenyRules {
        self.indexer.deny_rules()
    }

    /// The store the session lives in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A new tool call id, `toolcall:{ULID}`.
    pub fn new_toolcall_id() -> String {
        format!("toolcall:{}", ulid::new_ulid())
    }

    /// The store's directory (`None` for a store in memory), which listings skip.
    pub fn store_dir(&self) -> Option<&std::path::Path> {
        self.store.dir()
    }

    /// The metadata cache entry of `id`, for an indexed content object.
    pub fn meta(&self, id: &str) -> Option<&Meta> {
        self.cache.get(id)
    }

    /// The transaction of the last commit (the viewed one for a view).
    pub fn last_commit(&self) -> Option<TxId> {
        self.last_tx
    }

    /// `Some(tx)` when this is a read-only view of the commit at `tx`.
    pub fn viewed_at(&self) -> Option<TxId> {
        self.view
    }
}
