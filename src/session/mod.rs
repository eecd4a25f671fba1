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
//! - `sets`: the ordered sets and their invariants. `render`: the context block.
//! - `resume`: reconciliation against disk. `ulid`: ids.

mod render;
mod resume;
mod sets;
mod ulid;

use std::collections::{HashMap, HashSet};

use rustc_hash::FxHashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use render::{ACTIVE_CONTENT, RenderOptions};
pub use resume::{Reconciled, ResumeReport};
pub use sets::{OrderedSet, Sets};

use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::index::{
    Action, DirStat, Indexer, Look, Planned, Presence, Settings, StatChange, look, presence,
    read_stream, record,
};
use crate::object::{
    ContentOmitted, Fields, FilesystemSource, Object, ObjectType, Role, SessionFields,
    SessionJsonParts, Source, ToolStatus, ToolcallFields, Turn, file_type_of,
    session_json_of_parts,
};
use crate::resolve::{FilesystemResolver, MountMapping, machine_filesystem_id};
use crate::store::{
    HistoryQuery, ObjectMeta, Op, Order, Origin, StatUpdate, Store, Timestamp, TxId, TxReceipt,
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
/// of the `session_config:{sid}` object so that resume resolves the same paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// [`CONFIG_FORMAT`].
    pub format: u32,
    /// The mounts, normalised, each with its filesystem id filled in.
    pub mounts: Vec<MountMapping>,
    /// The filesystem of paths no mount maps.
    pub default_filesystem_id: String,
    /// The parent, for a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

/// What a file in the session is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// Read: its content is known.
    Read,
    /// A stub: known by path only, shown `[unread]`.
    Stub,
    /// Denied by the deny rules: never read.
    Denied,
    /// Binary: no text content.
    Binary,
    /// Over the content limit.
    TooLarge,
    /// Deleted: its entity is a tombstone now, shown `[deleted]`.
    Deleted,
}

/// One entry of the metadata cache: what a metadata line needs, without the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meta {
    /// A file.
    File {
        /// Its source (filesystem id and canonical path).
        source: FilesystemSource,
        /// The path the agent sees (reverse-resolved through the session's mounts).
        path: String,
        /// `file_type`.
        file_type: String,
        /// `char_count` (0 for stubs and deleted files).
        char_count: u64,
        /// `file_hash` of the current version.
        file_hash: Option<Hash>,
        /// Read, stub, deleted…
        state: FileState,
    },
    /// A tool call.
    Toolcall {
        /// The tool's name.
        tool: String,
        /// ok or fail.
        status: ToolStatus,
    },
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
    resolver: FilesystemResolver,
    config: SessionConfig,
    session_id: String,
    sets: Sets,
    turns: Vec<Turn>,
    system_prompt: String,
    cache: FxHashMap<String, Meta>,
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

/// The metadata cache entry of a current object (`None` for infrastructure objects).
fn meta_of(resolver: &FilesystemResolver, object: &Object) -> Option<Meta> {
    match object.fields() {
        Fields::File(f) => Some(file_meta(
            resolver,
            object.source()?.as_filesystem().clone(),
            f,
            object.file_hash().copied(),
            object.content_omitted(),
        )),
        Fields::Toolcall(f) => Some(Meta::Toolcall {
            tool: f.tool.clone(),
            status: f.status,
        }),
        _ => None,
    }
}

/// The metadata cache entry of a version read with [`Store::metadata_many`] (no content read).
fn meta_of_stored(resolver: &FilesystemResolver, stored: &ObjectMeta) -> Option<Meta> {
    let Some(doc) = &stored.document else {
        return stored
            .source
            .as_ref()
            .map(|s| deleted_meta(resolver, s.as_filesystem().clone()));
    };
    match &doc.fields {
        Fields::File(f) => Some(file_meta(
            resolver,
            stored.source.as_ref()?.as_filesystem().clone(),
            f,
            doc.file_hash,
            stored.info.content_omitted,
        )),
        Fields::Toolcall(f) => Some(Meta::Toolcall {
            tool: f.tool.clone(),
            status: f.status,
        }),
        _ => None,
    }
}

/// The metadata cache entry of a live file version: its fields, its hash (`None` for a stub) and
/// why its content is null, if it is.
fn file_meta(
    resolver: &FilesystemResolver,
    source: FilesystemSource,
    fields: &crate::object::FileFields,
    file_hash: Option<crate::hash::Hash>,
    content_omitted: Option<ContentOmitted>,
) -> Meta {
    let state = match content_omitted {
        Some(ContentOmitted::Denied) => FileState::Denied,
        Some(ContentOmitted::Binary) => FileState::Binary,
        Some(ContentOmitted::TooLarge) => FileState::TooLarge,
        None if file_hash.is_none() => FileState::Stub,
        None => FileState::Read,
    };
    Meta::File {
        path: resolver.reverse_resolve(&source.filesystem_id, &source.path),
        source,
        file_type: fields.file_type.clone(),
        char_count: fields.char_count,
        file_hash,
        state,
    }
}

/// The metadata cache entry of a deleted file.
fn deleted_meta(resolver: &FilesystemResolver, source: FilesystemSource) -> Meta {
    Meta::File {
        path: resolver.reverse_resolve(&source.filesystem_id, &source.path),
        file_type: file_type_of(&source.path),
        char_count: 0,
        file_hash: None,
        state: FileState::Deleted,
        source,
    }
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
            resolver,
            config,
            session_id,
            sets: Sets::default(),
            turns: Vec::new(),
            system_prompt: String::new(),
            cache: FxHashMap::default(),
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
        Session::load_at(store, settings, sid, None)
    }

    /// A read-only view of session `sid` as its commit at or before transaction `tx` left it; every
    /// object is read as the store knew it at `tx`. To continue from there, [`Session::fork`].
    ///
    /// # Errors
    /// [`Error::NotFound`] when the session is unknown or did not exist yet at `tx`.
    pub fn view_at(store: &Store, settings: &Settings, sid: &str, tx: TxId) -> Result<Self> {
        let mut session = Session::load_at(store, settings, sid, Some(tx))?;
        session.view = Some(tx);
        Ok(session)
    }

    fn load_at(store: &Store, settings: &Settings, sid: &str, at: Option<TxId>) -> Result<Self> {
        let read = |id: &str| -> Result<Option<Version>> {
            match store.as_of(id, None, at) {
                Err(Error::NotFound { .. }) => Ok(None),
                other => other,
            }
        };
        // The session and chat documents are read as stored metadata: their fields are all a
        // session needs, and the stored object hash is what the next commit's match compares.
        let (version, stored_json) = store
            .metadata_with_json(&session_entity(sid), at)?
            .ok_or_else(|| match at {
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
        let config: SessionConfig = match read(&config_entity(sid))?.and_then(|v| v.object) {
            Some(config) => serde_json::from_str(config.content().unwrap_or(""))
                .map_err(|e| Error::corrupt(format!("session_config:{sid} does not parse: {e}")))?,
            None => SessionConfig {
                format: CONFIG_FORMAT,
                mounts: Vec::new(),
                default_filesystem_id: machine_filesystem_id(),
                forked_from: None,
            },
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
            None => Vec::new(),
        };
        let system_prompt = read(&fields.system_prompt_ref)?
            .and_then(|v| v.object)
            .and_then(|o| o.content().map(str::to_string))
            .unwrap_or_default();
        let mut session = Session::blank(store, settings, sid.to_string(), resolver, config)?;
        session.sets = Sets::restore(
            fields.session_index,
            fields.metadata_pool,
            fields.active_set,
            fields.pinned_set,
        )?;
        if let Some(json) = &stored_json {
            session.sets.seed_json(json);
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
        session.rebuild_cache(at)?;
        Ok(session)
    }

    /// Rebuilds the metadata cache of every indexed object as the store knew it at `at`, from
    /// the stored metadata alone (no content is read, no object rebuilt).
    fn rebuild_cache(&mut self, at: Option<TxId>) -> Result<()> {
        let ids: Vec<&str> = self.sets.index().ids().iter().map(String::as_str).collect();
        let stored = self.store.metadata_many(&ids, at)?;
        let mut cache = FxHashMap::with_capacity_and_hasher(ids.len(), Default::default());
        let mut spellings = HashMap::new();
        for (id, stored) in ids.iter().zip(stored) {
            let Some(stored) = stored else { continue };
            if let Some(spelling) = &stored.info.spelling {
                spellings.insert(id.to_string(), spelling.clone());
            }
            if let Some(meta) = meta_of_stored(&self.resolver, &stored) {
                cache.insert(id.to_string(), meta);
            }
        }
        self.cache = cache;
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
        let parent = Session::load_at(store, settings, sid, at)?;
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

    /// The session's resolver.
    pub fn resolver(&self) -> &FilesystemResolver {
        &self.resolver
    }

    /// The stored configuration (mounts, default filesystem id, fork origin).
    pub fn config(&self) -> &SessionConfig {
        &self.config
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

    /// The session document as it would be committed now.
    ///
    /// # Errors
    /// Never in practice (hashing the fields).
    pub fn document(&self) -> Result<Object> {
        Object::session(self.fields())
    }

    fn fields(&self) -> SessionFields {
        SessionFields {
            session_id: self.session_id.clone(),
            chat_ref: format!("chat:{}", self.session_id),
            system_prompt_ref: format!("system_prompt:{}", self.session_id),
            session_index: self.sets.index().ids().to_vec(),
            metadata_pool: self.sets.pool().ids().to_vec(),
            active_set: self.sets.active().ids().to_vec(),
            pinned_set: self.sets.pinned().ids().to_vec(),
        }
    }

    /// [`Session::document`] with its JSON from the sets' kept texts (only what was appended
    /// since the last commit is written): what [`Session::commit`] writes.
    fn document_kept(&mut self) -> Result<Object> {
        let fields = self.fields();
        let [index, pool, active, pinned] = self.sets.json_inners();
        let json = session_json_of_parts(&SessionJsonParts {
            session_id: &fields.session_id,
            chat_ref: &fields.chat_ref,
            system_prompt_ref: &fields.system_prompt_ref,
            session_index: index,
            metadata_pool: pool,
            active_set: active,
            pinned_set: pinned,
        });
        Object::session_with_json(fields, json)
    }

    fn writable(&self) -> Result<()> {
        match self.view {
            Some(tx) => Err(Error::invalid_input(format!(
                "session {} is a read-only view of tx {}; fork it to continue from there",
                self.session_id, tx.0
            ))),
            None => Ok(()),
        }
    }

    /// Queues `planned`'s ops (replacing any earlier op on the same entity) and refreshes the
    /// cache; an unchanged plan drops a queued op, since the store already holds the truth.
    fn apply_planned(&mut self, planned: &Planned, source: &FilesystemSource) {
        match planned.ops.first() {
            None => {
                self.unqueue(&planned.id);
            }
            Some(op) => {
                self.queue(op.clone());
                let meta = match op {
                    Op::Put(put) => meta_of(&self.resolver, &put.object),
                    _ => Some(deleted_meta(&self.resolver, source.clone())),
                };
                if let Some(meta) = meta {
                    self.cache.insert(planned.id.clone(), meta);
                }
            }
        }
    }

    fn queue(&mut self, op: Op) {
        let id = op.entity().to_string();
        match self.pending_at.get(&id) {
            Some(&at) => self.pending[at] = op,
            None => {
                self.pending_at.insert(id, self.pending.len());
                self.pending.push(op);
            }
        }
    }

    fn unqueue(&mut self, id: &str) {
        if let Some(at) = self.pending_at.remove(id) {
            self.pending.remove(at);
            for slot in self.pending_at.values_mut() {
                if *slot > at {
                    *slot -= 1;
                }
            }
        }
    }

    /// The object queued for `id`, if a put is waiting for the next commit.
    fn queued_object(&self, id: &str) -> Option<&Object> {
        match self.pending.get(*self.pending_at.get(id)?)? {
            Op::Put(put) => Some(&put.object),
            _ => None,
        }
    }

    /// Makes sure the cache knows `id` (after an unchanged plan on an entity not yet cached).
    fn ensure_cached(&mut self, id: &str) -> Result<()> {
        if self.cache.contains_key(id) {
            return Ok(());
        }
        if let Some(version) = self.store.get_if_known(id)? {
            let meta = match version.object {
                Some(object) => meta_of(&self.resolver, &object),
                None => match self.store.entity(id)?.source {
                    Some(Source::Filesystem(source)) => Some(deleted_meta(&self.resolver, source)),
                    None => None,
                },
            };
            if let Some(meta) = meta {
                self.cache.insert(id.to_string(), meta);
            }
        }
        Ok(())
    }

    /// Looks at the file of `source` at `real` (its real path on this machine) through the one
    /// disk path: the gone rule, the deny rules, the read and hash. Returns what was seen and
    /// its stat cache change.
    fn look_at(&self, source: &FilesystemSource, real: &std::path::Path) -> (Look, StatChange) {
        let start = Timestamp::now();
        let presence = match real.to_str() {
            Some(path) => presence(&mut DirStat::new(true), path),
            None => Presence::Unknown(std::io::Error::other("the path is not UTF-8")),
        };
        let look = look(&source.path, real, presence, self.indexer.look_rules(None));
        let change = StatChange::of(&look, start);
        (look, change)
    }

    /// Plans what [`Session::look_at`] saw and queues its stat cache change for the next commit.
    fn plan_look(
        &mut self,
        source: FilesystemSource,
        look: Look,
        change: StatChange,
    ) -> Result<Planned> {
        let on_machine = source.filesystem_id == self.resolver.machine_id();
        let path = source.path.clone();
        let planned = self.indexer.plan_look(source, look)?;
        if on_machine {
            record(&mut self.stat, &path, change);
        }
        Ok(planned)
    }

    /// Plans a full index of `source` from the file at `real` on this machine: a file the agent
    /// names must be there and be a regular file.
    ///
    /// # Errors
    /// [`Error::Io`] when it is missing or cannot be read; [`Error::InvalidPath`] when it is not
    /// a regular file.
    fn index_from_disk(
        &mut self,
        source: FilesystemSource,
        real: &std::path::Path,
    ) -> Result<Planned> {
        let (look, change) = self.look_at(&source, real);
        let shown = real.display().to_string();
        match look {
            Look::Gone(Presence::Missing(err)) => Err(Error::io(format!("opening {shown}"), err)),
            Look::Gone(_) => Err(Error::invalid_path(
                shown,
                "it is not a regular file; read files, discover directories' files one by one",
            )),
            Look::Unreadable(err) => Err(Error::io(format!("reading {shown}"), err)),
            look => self.plan_look(source, look, change),
        }
    }

    /// Remembers the on-disk spelling of a file whose identity path differs from the path it
    /// was opened by (a case-insensitive mount), on its put too, so that resume opens it by it.
    fn record_spelling(&mut self, planned: &mut Planned, resolved: &crate::resolve::ResolvedPath) {
        if resolved.open_path == resolved.canonical_path {
            self.spellings.remove(&planned.id);
            return;
        }
        if let Some(Op::Put(put)) = planned.ops.first_mut() {
            put.spelling = Some(resolved.open_path.clone());
        }
        self.spellings
            .insert(planned.id.clone(), resolved.open_path.clone());
    }

    /// Carries a recorded spelling `open` over to the new version `planned` puts.
    fn keep_spelling(planned: &mut Planned, open: &str, canonical: &str) {
        if open != canonical
            && let Some(Op::Put(put)) = planned.ops.first_mut()
        {
            put.spelling = Some(open.to_string());
        }
    }

    /// The path to open file `id` (identity path `canonical`) by: its recorded on-disk
    /// spelling, or the identity path itself.
    fn open_path<'a>(&'a self, id: &str, canonical: &'a str) -> &'a str {
        self.spellings.get(id).map_or(canonical, String::as_str)
    }

    /// The real path to read file `id` from on this machine, checked as [`Session::read`] checks
    /// an agent's path: symlinks are followed, but not out of the file's mount (a file replaced
    /// by a link to a secret outside the mount must not be read into the session by a resume,
    /// a stub activation or the watcher).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when a link leads out of the mount or the path does not resolve.
    fn checked_open_path(&self, id: &str, source: &FilesystemSource) -> Result<std::path::PathBuf> {
        let agent = self
            .resolver
            .reverse_resolve(&source.filesystem_id, &source.path);
        let mut resolved = self.resolver.resolve(&agent)?;
        resolved.open_path = self.open_path(id, &source.path).to_string();
        self.resolver.check_symlinks(&resolved)
    }

    fn source_of(
        &self,
        agent_path: &str,
    ) -> Result<(FilesystemSource, crate::resolve::ResolvedPath)> {
        let resolved = self.resolver.resolve(agent_path)?;
        Ok((
            FilesystemSource {
                filesystem_id: resolved.filesystem_id.clone(),
                path: resolved.canonical_path.clone(),
            },
            resolved,
        ))
    }

    /// The agent reads a file: it is indexed (created, updated or unchanged) and joins the index,
    /// the pool and the active set (as the most recently activated).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve, lies on a filesystem strata cannot
    /// read (use [`Session::read_supplied`]), or leaves its mount; [`Error::Io`] when the file
    /// cannot be read.
    pub fn read(&mut self, agent_path: &str) -> Result<Touched> {
        self.writable()?;
        let (source, resolved) = self.source_of(agent_path)?;
        let real = self.resolver.check_symlinks(&resolved)?;
        let mut planned = self.index_from_disk(source.clone(), &real)?;
        self.record_spelling(&mut planned, &resolved);
        self.after_read(planned, &source)
    }

    /// The agent reads a file whose bytes the runtime supplies (a path on the runtime's own
    /// filesystem, which strata cannot open): as [`Session::read`], undated by any mtime.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve.
    pub fn read_supplied(&mut self, agent_path: &str, bytes: &[u8]) -> Result<Touched> {
        self.writable()?;
        let (source, _) = self.source_of(agent_path)?;
        let reading = read_stream(bytes, self.indexer.max_content_bytes())
            .map_err(|e| Error::io(format!("reading the bytes given for {agent_path}"), e))?;
        let planned = self.indexer.plan_reading(source.clone(), reading, None)?;
        self.after_read(planned, &source)
    }

    fn after_read(&mut self, planned: Planned, source: &FilesystemSource) -> Result<Touched> {
        self.apply_planned(&planned, source);
        self.ensure_cached(&planned.id)?;
        self.sets.add_active(&planned.id);
        Ok(Touched {
            path: self
                .resolver
                .reverse_resolve(&source.filesystem_id, &source.path),
            id: planned.id,
            action: planned.action,
        })
    }

    /// Files seen by `ls`, `grep` or `find` output: each becomes a stub unless it exists, and
    /// joins the index and the pool (not the active set).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that does not resolve (nothing changes then).
    pub fn discover(&mut self, agent_paths: &[&str]) -> Result<Vec<Touched>> {
        self.writable()?;
        let sources = agent_paths
            .iter()
            .map(|p| self.source_of(p))
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(sources.len());
        for (source, resolved) in sources {
            let path = self
                .resolver
                .reverse_resolve(&source.filesystem_id, &source.path);
            let mut planned = self.indexer.discover_file(source.clone())?;
            self.record_spelling(&mut planned, &resolved);
            let action = if self.pending_at.contains_key(&planned.id) {
                Action::Unchanged
            } else {
                self.apply_planned(&planned, &source);
                self.ensure_cached(&planned.id)?;
                planned.action
            };
            self.sets.add_to_pool(&planned.id);
            out.push(Touched {
                id: planned.id,
                path,
                action,
            });
        }
        Ok(out)
    }

    /// Records a tool call: a toolcall object of this session's chat, added to index, pool and
    /// active set, its id appended to the latest turn's `toolcall_refs`; then auto-collapse runs.
    /// Recording an id this session recorded before makes a new version of it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the chat has no turn yet or the call is malformed;
    /// [`Error::Conflict`] when the id belongs to another session's chat or to another type.
    pub fn record_toolcall(&mut self, input: ToolcallInput) -> Result<String> {
        self.writable()?;
        if self.turns.is_empty() {
            return Err(Error::invalid_input(
                "the chat has no turn yet; append the turn that makes the call first",
            ));
        }
        let id = input
            .id
            .unwrap_or_else(|| format!("toolcall:{}", ulid::new_ulid()));
        let chat_ref = format!("chat:{}", self.session_id);
        if !self.pending_at.contains_key(&id)
            && let Some(version) = self.store.get_if_known(&id)?
        {
            let info = self.store.entity(&id)?;
            if info.object_type != ObjectType::Toolcall {
                return Err(Error::Conflict {
                    entity: id,
                    expected: "a tool call id".into(),
                    actual: format!("a {} with this id", info.object_type),
                });
            }
            let owner = version.object.and_then(|o| match o.fields() {
                Fields::Toolcall(f) => Some(f.chat_ref.clone()),
                _ => None,
            });
            if owner.as_deref() != Some(chat_ref.as_str()) {
                return Err(Error::Conflict {
                    entity: id,
                    expected: format!("a tool call of {chat_ref}"),
                    actual: format!(
                        "a tool call of {}; tool call ids are global, give a new one",
                        owner.unwrap_or_else(|| "a deleted chat".into())
                    ),
                });
            }
        }
        let object = Object::toolcall(
            &id,
            ToolcallFields {
                tool: input.tool,
                args: input.args,
                args_display: input.args_display,
                status: input.status,
                chat_ref,
                file_refs: input.file_refs,
            },
            input.output,
        )?;
        if let Some(meta) = meta_of(&self.resolver, &object) {
            self.cache.insert(id.clone(), meta);
        }
        self.queue(Op::put(object));
        self.sets.add_active(&id);
        let already = self
            .turns
            .iter()
            .any(|t| t.toolcall_refs.iter().flatten().any(|r| *r == id));
        if !already && let Some(turn) = self.turns.last_mut() {
            turn.toolcall_refs
                .get_or_insert_with(Vec::new)
                .push(id.clone());
            self.chat_dirty = true;
        }
        self.collapse();
        Ok(id)
    }

    /// Appends a turn to the chat; `toolcall_refs` name tool calls this session recorded and no
    /// turn references yet. Then auto-collapse runs. Returns the new turn count.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a ref that is not an unreferenced tool call of this session.
    pub fn append_turn(
        &mut self,
        role: Role,
        content: String,
        toolcall_refs: Vec<String>,
    ) -> Result<usize> {
        self.writable()?;
        let referenced: HashSet<&String> = self
            .turns
            .iter()
            .flat_map(|t| t.toolcall_refs.iter().flatten())
            .collect();
        for (i, r) in toolcall_refs.iter().enumerate() {
            if !matches!(self.cache.get(r), Some(Meta::Toolcall { .. })) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is not a tool call of this session; record it first"
                )));
            }
            if referenced.contains(r) || toolcall_refs[..i].contains(r) {
                return Err(Error::invalid_input(format!(
                    "toolcall_ref {r} is already referenced by a turn; a tool call joins one turn"
                )));
            }
        }
        self.turns.push(Turn {
            role,
            content,
            toolcall_refs: (!toolcall_refs.is_empty()).then_some(toolcall_refs),
        });
        self.chat_dirty = true;
        self.collapse();
        Ok(self.turns.len())
    }

    /// Replaces the system prompt.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn set_system_prompt(&mut self, prompt: String) -> Result<()> {
        self.writable()?;
        if prompt != self.system_prompt {
            self.system_prompt = prompt;
            self.prompt_dirty = true;
        }
        Ok(())
    }

    /// Auto-collapse: deactivate tool calls outside the last [`RECENT_TURNS`] turns, and all but
    /// the last [`RECENT_TOOLCALLS_PER_TURN`] of the current turn; never files, never pinned ones.
    fn collapse(&mut self) {
        let Some((current, earlier)) = self.turns.split_last() else {
            return;
        };
        let mut keep: HashSet<&str> = HashSet::new();
        let from = earlier.len().saturating_sub(RECENT_TURNS - 1);
        for turn in &earlier[from..] {
            keep.extend(turn.toolcall_refs.iter().flatten().map(String::as_str));
        }
        let refs = current.toolcall_refs.as_deref().unwrap_or_default();
        let skip = refs.len().saturating_sub(RECENT_TOOLCALLS_PER_TURN);
        keep.extend(refs[skip..].iter().map(String::as_str));
        let drop: Vec<String> = self
            .sets
            .active()
            .ids()
            .iter()
            .filter(|id| matches!(self.cache.get(*id), Some(Meta::Toolcall { .. })))
            .filter(|id| !keep.contains(id.as_str()) && !self.sets.pinned().contains(id))
            .cloned()
            .collect();
        for id in drop {
            self.sets.remove_active(&id);
        }
    }

    /// Activates `id`: promotes it from the index to the pool when needed, reads a stub (or a
    /// deleted file) from its source, and makes it the most recently activated.
    ///
    /// # Errors
    /// The original's texts: `Object not found`, `Cannot activate {type}: infrastructure objects
    /// cannot be activated`, `Object not in session`, `Source inaccessible - cannot upgrade stub`
    /// (then nothing changes: a stub in the pool stays there, shown `[unread]`; one only in the
    /// index stays out of the pool).
    pub fn activate(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.index().contains(id) {
            return Err(self.not_in_session(id)?);
        }
        // The source is read before any set changes: a failed activation leaves the session
        // exactly as it was (an object only in the index stays out of the pool).
        if let Some(Meta::File { source, state, .. }) = self.cache.get(id).cloned()
            && matches!(
                state,
                FileState::Stub | FileState::Deleted | FileState::Denied
            )
        {
            self.upgrade(&source).map_err(|e| {
                Error::invalid_input(format!(
                    "Source inaccessible - cannot upgrade stub {id} ({e})"
                ))
            })?;
        }
        self.sets.add_to_pool(id);
        self.sets.add_active(id);
        Ok(())
    }

    /// Reads a stub's source from disk; an error when it cannot be read or stays a stub, and then
    /// nothing is queued (not even the stat cache entry of the read).
    fn upgrade(&mut self, source: &FilesystemSource) -> Result<()> {
        let (puts, removes) = (self.stat.puts.len(), self.stat.removes.len());
        let result = self.try_upgrade(source);
        if result.is_err() {
            self.stat.puts.truncate(puts);
            self.stat.removes.truncate(removes);
        }
        result
    }

    fn try_upgrade(&mut self, source: &FilesystemSource) -> Result<()> {
        if source.filesystem_id != self.resolver.machine_id() {
            return Err(Error::invalid_path(
                source.path.as_str(),
                "it lies on a filesystem strata cannot read; the runtime must supply its bytes",
            ));
        }
        let id =
            crate::object::sourced_identity(ObjectType::File, &Source::Filesystem(source.clone()))?
                .to_hex();
        let open = self.open_path(&id, &source.path).to_string();
        let real = self.checked_open_path(&id, source)?;
        let mut planned = self.index_from_disk(source.clone(), &real)?;
        Self::keep_spelling(&mut planned, &open, &source.path);
        if let Some(Op::Put(put)) = planned.ops.first()
            && put.object.is_stub()
        {
            return Err(Error::PermissionDenied {
                reason: format!("{} is denied by the deny rules", source.path),
            });
        }
        if planned.ops.is_empty()
            && matches!(
                self.cache.get(&planned.id),
                Some(Meta::File {
                    state: FileState::Denied | FileState::Stub,
                    ..
                })
            )
        {
            return Err(Error::PermissionDenied {
                reason: format!("{} is denied by the deny rules", source.path),
            });
        }
        self.apply_planned(&planned, source);
        Ok(())
    }

    /// The error for an id outside the session index, in the original's words.
    fn not_in_session(&self, id: &str) -> Result<Error> {
        if self.queued_object(id).is_none() && !self.store.entity_exists(id)? {
            return Ok(Error::not_found(format!("Object not found: {id}")));
        }
        let object_type = self.store.entity(id)?.object_type;
        if !object_type.is_content() {
            return Ok(Error::invalid_input(format!(
                "Cannot activate {object_type}: infrastructure objects cannot be activated"
            )));
        }
        Ok(Error::invalid_input(format!(
            "Object not in session: {id}; read or discover it first"
        )))
    }

    /// Deactivates `id`; it stays in the pool.
    ///
    /// # Errors
    /// `Object not active` when it is not active.
    pub fn deactivate(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.remove_active(id) {
            return Err(Error::invalid_input(format!("Object not active: {id}")));
        }
        Ok(())
    }

    /// Pins `id` (protects it from auto-collapse; does not activate it).
    ///
    /// # Errors
    /// `Object not in metadata pool` when it is not in the pool.
    pub fn pin(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.pool().contains(id) {
            return Err(Error::invalid_input(format!(
                "Object not in metadata pool: {id}"
            )));
        }
        self.sets.pin(id);
        Ok(())
    }

    /// Unpins `id`.
    ///
    /// # Errors
    /// `Object not pinned` when it is not pinned.
    pub fn unpin(&mut self, id: &str) -> Result<()> {
        self.writable()?;
        if !self.sets.unpin(id) {
            return Err(Error::invalid_input(format!("Object not pinned: {id}")));
        }
        Ok(())
    }

    /// The watcher's hook for a change of the file at `canonical_path` on this machine: re-index
    /// it (or record its deletion) and refresh the metadata cache; the sets never change. Files
    /// outside the session index are ignored (`None`).
    ///
    /// # Errors
    /// [`Error::Io`] when the file exists but cannot be read; [`Error::InvalidPath`] when a
    /// symlink now leads out of its mount.
    pub fn file_changed(&mut self, canonical_path: &str) -> Result<Option<Action>> {
        self.writable()?;
        let source = FilesystemSource {
            filesystem_id: self.resolver.machine_id().to_string(),
            path: canonical_path.to_string(),
        };
        let id =
            crate::object::sourced_identity(ObjectType::File, &Source::Filesystem(source.clone()))?
                .to_hex();
        if !self.sets.index().contains(&id) {
            return Ok(None);
        }
        // Gone by the one disk path's rule (a file that became a directory is gone too);
        // otherwise read as `read` would, not following a link out of the file's mount.
        let gone = presence(&mut DirStat::new(true), canonical_path);
        let planned = if gone.is_gone() {
            let look = Look::Gone(gone);
            let change = StatChange::of(&look, Timestamp::now());
            self.plan_look(source.clone(), look, change)?
        } else {
            let real = self.checked_open_path(&id, &source)?;
            let (look, change) = self.look_at(&source, &real);
            if let Look::Unreadable(err) = look {
                return Err(Error::io(format!("reading {}", real.display()), err));
            }
            self.plan_look(source.clone(), look, change)?
        };
        self.apply_planned(&planned, &source);
        Ok(Some(planned.action))
    }

    /// The canonical paths on this machine the watcher should watch: the session's files.
    pub fn watched_paths(&self) -> Vec<String> {
        self.sets
            .index()
            .ids()
            .iter()
            .filter_map(|id| match self.cache.get(id) {
                Some(Meta::File { source, .. })
                    if source.filesystem_id == self.resolver.machine_id() =>
                {
                    Some(source.path.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Whether anything waits for [`Session::commit`].
    ///
    /// # Errors
    /// Never in practice (hashing the session document).
    pub fn has_changes(&self) -> Result<bool> {
        Ok(!self.pending.is_empty()
            || self.chat_dirty
            || self.prompt_dirty
            || self.config_dirty
            || self.sets_changed()?)
    }

    /// Whether the session document differs from the last commit's. Hashes the document only
    /// when the sets changed since (the revision counter moved).
    fn sets_changed(&self) -> Result<bool> {
        if self.committed.is_some() && self.committed_revision == Some(self.sets.revision()) {
            return Ok(false);
        }
        Ok(self.committed != Some(*self.document()?.object_hash()))
    }

    /// Writes everything new (indexed files, tool calls, chat, system prompt) and the session
    /// document as one transaction; `None` when nothing changed (stat cache entries may still be
    /// written). Fails with [`Error::Conflict`] when another writer committed this session since
    /// it was loaded.
    ///
    /// # Errors
    /// Store errors; on error nothing is written and the session keeps its uncommitted changes.
    pub fn commit(&mut self) -> Result<Option<TxReceipt>> {
        self.writable()?;
        // The session document is built (and hashed) once: only when the sets moved since the
        // last commit, and then it is both the change test and the document written.
        let sets_moved =
            self.committed.is_none() || self.committed_revision != Some(self.sets.revision());
        let document = if sets_moved {
            Some(self.document_kept()?)
        } else {
            None
        };
        let changed = !self.pending.is_empty()
            || self.chat_dirty
            || self.prompt_dirty
            || self.config_dirty
            || document
                .as_ref()
                .is_some_and(|d| self.committed != Some(*d.object_hash()));
        if !changed {
            if !self.stat.is_empty() {
                self.store
                    .transact_with_stat(Vec::new(), Origin::Session, self.stat.clone())?;
                self.stat.puts.clear();
                self.stat.removes.clear();
            }
            return Ok(None);
        }
        let session = match document {
            Some(document) => document,
            None => self.document_kept()?,
        };
        let mut ops = self.pending.clone();
        let mut chat_hash = self.committed_chat;
        if self.chat_dirty {
            let chat = Object::chat(&self.session_id, self.turns.clone())?;
            chat_hash = Some(*chat.object_hash());
            // Optimistic concurrency on the chat too: two writers appending turns conflict.
            ops.push(Op::Match {
                entity: format!("chat:{}", self.session_id),
                expected: self.committed_chat,
            });
            ops.push(Op::put(chat));
        }
        if self.prompt_dirty {
            ops.push(Op::put(Object::system_prompt(
                &self.session_id,
                self.system_prompt.clone(),
            )?));
        }
        if self.config_dirty {
            let json = serde_json::to_value(&self.config)
                .map_err(|e| Error::invalid_input(format!("session config: {e}")))?;
            ops.push(Op::put(Object::from_parts(
                Some(&config_entity(&self.session_id)),
                None,
                None,
                Some(crate::hash::canonical_json(&json)?),
                Fields::SystemPrompt,
                None,
            )?));
        }
        let hash = *session.object_hash();
        ops.push(Op::Match {
            entity: session_entity(&self.session_id),
            expected: self.committed,
        });
        ops.push(Op::put(session));
        let revision = self.sets.revision();
        // The stat cache entries are taken only now: an error above leaves them queued, and a
        // failed transaction gives them back.
        let stat = StatUpdate {
            filesystem_id: self.stat.filesystem_id.clone(),
            puts: std::mem::take(&mut self.stat.puts),
            removes: std::mem::take(&mut self.stat.removes),
        };
        let receipt = match self
            .store
            .transact_with_stat(ops, Origin::Session, stat.clone())
        {
            Ok(Some(receipt)) => receipt,
            Ok(None) => {
                self.stat = stat;
                return Err(Error::invariant("a session commit wrote no transaction"));
            }
            Err(e) => {
                self.stat = stat;
                return Err(e);
            }
        };
        self.pending.clear();
        self.pending_at.clear();
        self.chat_dirty = false;
        self.prompt_dirty = false;
        self.config_dirty = false;
        self.committed = Some(hash);
        self.committed_revision = Some(revision);
        self.committed_chat = chat_hash;
        self.last_tx = Some(receipt.tx_id);
        Ok(Some(receipt))
    }
}
