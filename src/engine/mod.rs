//! `Engine`: the one thing front ends call. It owns the store (through the [`crate::store::Backend`] seam), the
//! live sessions and the store's settings, and answers typed requests with typed responses.
//!
//! Uses `agent`, `session`, `index`, `store`, `resolve`, `object`, `hash`.
//!
//! Every operation a front end can ask for is a [`Request`] (serde: `{"method", "params"}`, the
//! shape of a JSON-RPC 2.0 call) answered by a [`Response`]; a Rust caller may also call one
//! request type directly with [`Engine::call`] and get its own response type. Each group of
//! requests lives in its own file with its `apply`: `objects` (ls, show, cat, history, diff),
//! `admin` (log, fsck, gc, evict, stats, mounts), `rescue` (backup, salvage), `index` (tree scans), `sessions` (the session
//! API), `agent` (the agent tools over a session). The CLI, the daemon and the MCP server only translate: none touches the store or builds
//! a response itself.
//!
//! A session lives in the engine between requests (owned, shared by id); a request on it locks
//! it, applies one change and commits it as one transaction. A request that fails drops the live
//! session, so its next request starts again from what the store holds: a rejected write leaves
//! nothing behind, in the store or in memory. After each commit the engine publishes a
//! [`CommitEvent`] to its subscribers ([`Engine::subscribe`]).

mod admin;
mod agent;
mod follow;
mod index;
mod objects;
mod request;
mod rescue;
mod schema;
mod sessions;
mod watch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use serde::Serialize;

pub use admin::{
    ChainHead, EvictRequest, EvictResponse, FsckFinding, FsckRequest, FsckResponse, GcRequest,
    GcResponse, InitResponse, LogOp, LogRecord, LogRequest, LogResponse, LogRun, LogRunRequest,
    MountAddRequest, MountChanged, MountLsRequest, MountRmRequest, MountsResponse, PartialRun,
    StatsRequest, StatsResponse,
};
pub use agent::{
    AgentApproveRequest, AgentAudit, AgentAuditRequest, AgentCallRequest, AgentCalled,
    AgentEntrypoints, AgentEntrypointsRequest, AgentPushRequest, AgentPushed, AgentTools,
    AgentToolsRequest, AgentWithdrawRequest,
};
pub use follow::Follower;
pub use index::{IndexRequest, IndexResponse};
pub use objects::{
    AsOf, Body, CatRequest, CatResponse, DiffRequest, DiffResponse, HistoryRequest,
    HistoryResponse, HistoryRow, LsRequest, LsRow, MIN_PREFIX, ShowRequest, ShowResponse,
};
pub use request::{Apply, Request, Response, Writes};
pub use rescue::{
    BackupRequest, BackupResponse, LostEntity, MigrateRequest, MigrateResponse, SalvageLoss,
    SalvageRequest, SalvageResponse,
};
pub use schema::{RPC_SCHEMA_DIR, rpc_schemas};
pub use sessions::{
    Committed, Forked, PagedInput, SessionDiscoverRequest, SessionForkRequest,
    SessionHistoryRequest, SessionLsRequest, SessionNewRequest, SessionReadRequest,
    SessionRenderRequest, SessionRendered, SessionResumeRequest, SessionSetRequest,
    SessionShowRequest, SessionShown, SessionToolcallRequest, SessionTurnRequest, SetDone, SetOp,
    ToolcallRecorded, TouchedFiles, TurnAppended,
};
pub use watch::{WatchAddRequest, WatchIndex, WatchLsRequest, WatchRmRequest, WatchRoots};

use crate::error::{Error, Result};
use crate::index::Settings;
use crate::session::Session;
use crate::store::{Store, TxId};

/// Whether directory `dir` holds a store.
pub fn store_exists(dir: &Path) -> bool {
    crate::store::exists(dir)
}

/// How a store is opened for an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads only: no write to the file, nothing to sync (every reading command).
    ReadOnly,
    /// Reads and writes an existing store.
    ReadWrite,
    /// Reads and writes, creating the store when there is none.
    Create,
    /// As [`Access::Create`], but an existing store is opened to write only at its first write
    /// ([`Store::open_deferred`]): for a command that often writes nothing (a re-index of an
    /// unchanged tree), which then syncs nothing.
    CreateDeferred,
}

/// What one committed transaction changed, published to the engine's subscribers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CommitEvent {
    /// The transaction.
    pub tx_id: u64,
    /// Who wrote it (`indexer`, `session`, `cli`, …).
    pub origin: String,
    /// The entities it wrote, in op order.
    pub entities: Vec<String>,
    /// The canonical paths of the files among them.
    pub paths: Vec<String>,
    /// The sessions it committed.
    pub sessions: Vec<String>,
    /// What happened to each file among its entities.
    pub changes: Vec<FileChange>,
}

/// What one transaction did to one file: what a subscriber by path is told.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FileChange {
    /// The file's canonical path.
    pub path: String,
    /// Its entity id.
    pub entity: String,
    /// The transaction.
    pub tx: u64,
    /// `created` (no live version before), `updated` or `deleted`.
    pub kind: String,
}

/// What identifies one state of `settings.toml`: its inode, size and modification time
/// (`None` when there is no file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SettingsStamp {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl SettingsStamp {
    /// The stamp of the settings file in store directory `dir`, `None` when there is none.
    fn of(dir: &Path) -> Option<SettingsStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir.join(crate::index::SETTINGS_FILE)).ok()?;
        Some(SettingsStamp {
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// The engine over one store: what every front end calls.
#[derive(Debug)]
pub struct Engine {
    store: Store,
    dir: Option<PathBuf>,
    settings: RwLock<Settings>,
    /// What `settings.toml` looked like when the settings were last read or written: a file
    /// that looks different is read again (a person edited it while the daemon ran).
    settings_stamp: Mutex<Option<SettingsStamp>>,
    /// Live sessions by id, each locked by the request working on it.
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    /// Where commit events go; a closed receiver is dropped at the next send.
    subscribers: Mutex<Vec<Sender<CommitEvent>>>,
    /// What was published while following other processes' commits (`None`: not following).
    followed: Mutex<Option<follow::Followed>>,
    /// Where the watched roots go after each change of them.
    watch_listeners: Mutex<Vec<Sender<Vec<String>>>>,
    /// What answers `index` on watched roots (the daemon's watcher).
    watch_hook: Mutex<watch::WatchHook>,
    created: bool,
}

/// Locks a mutex whose holder panicked as if it had not: every value the engine guards is left
/// consistent between statements (a session that failed mid-request is dropped anyway).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// An engine over the store in directory `dir`, opened as `access` says, with the settings
    /// of `dir/settings.toml`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no store and `access` does not create one;
    /// [`Error::StoreLocked`] when another process holds it; [`Error::FormatVersion`];
    /// [`Error::InvalidInput`] when the settings do not parse.
    pub fn open(dir: impl AsRef<Path>, access: Access) -> Result<Self> {
        let dir = dir.as_ref();
        let exists = store_exists(dir);
        let settings = Settings::load(dir)?;
        let store = match access {
            Access::ReadOnly => Store::open_read_only(dir)?,
            Access::ReadWrite => Store::open(dir)?,
            Access::Create if exists => Store::open(dir)?,
            Access::CreateDeferred if exists => Store::open_deferred(dir)?,
            Access::Create | Access::CreateDeferred => Store::create(dir)?,
        };
        let mut engine = Engine::with_store(store, settings);
        engine.settings_stamp = Mutex::new(SettingsStamp::of(dir));
        engine.dir = Some(dir.to_path_buf());
        engine.created = matches!(access, Access::Create | Access::CreateDeferred) && !exists;
        Ok(engine)
    }

    /// An engine over a new store in memory with default settings: nothing on disk (for tests,
    /// and to try a request before a store exists).
    ///
    /// # Errors
    /// [`Error::Storage`] when the storage engine fails.
    pub fn in_memory() -> Result<Self> {
        Ok(Engine::with_store(Store::in_memory()?, Settings::default()))
    }

    /// An engine over `store` with `settings` (an in-memory store, a second backend).
    pub fn with_store(store: Store, settings: Settings) -> Self {
        Engine {
            dir: store.dir().map(Path::to_path_buf),
            store,
            settings: RwLock::new(settings),
            settings_stamp: Mutex::new(None),
            sessions: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(Vec::new()),
            followed: Mutex::new(None),
            watch_listeners: Mutex::new(Vec::new()),
            watch_hook: Mutex::new(watch::WatchHook::default()),
            created: false,
        }
    }

    /// Creates an empty store in `dir` with `mounts` as its default mounts.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `dir` already holds a store or the mounts cannot make a
    /// resolver; [`Error::Io`] when the directory cannot be made.
    pub fn init(
        dir: impl AsRef<Path>,
        mounts: Vec<crate::resolve::MountMapping>,
    ) -> Result<InitResponse> {
        admin::init(dir.as_ref(), mounts, None)
    }

    /// [`Engine::init`] with the store in PostgreSQL at `backend` (`postgres://…?schema=NAME`):
    /// the directory records where it lives; a store already there is joined, not replaced.
    ///
    /// # Errors
    /// As [`Engine::init`]; [`Error::InvalidInput`] for a URL that is not PostgreSQL's;
    /// [`Error::Storage`] when the database cannot be reached.
    pub fn init_backend(
        dir: impl AsRef<Path>,
        mounts: Vec<crate::resolve::MountMapping>,
        backend: &str,
    ) -> Result<InitResponse> {
        admin::init(dir.as_ref(), mounts, Some(backend))
    }

    /// Whether opening this engine created its store.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The store this engine owns.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store directory (`None` in memory).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// A copy of the store's settings, read again first when `settings.toml` changed since they
    /// were read (a file that no longer parses keeps the settings as they were, and says why in
    /// the log).
    pub fn settings(&self) -> Settings {
        if let Err(err) = self.reload_settings() {
            tracing::warn!("{err}; the settings read before stay in force");
        }
        self.settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads `settings.toml` again when it changed since it was last read or written; whether it
    /// did.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the file no longer parses; [`Error::Io`] when it cannot be
    /// read. The settings in force stay as they were.
    pub fn reload_settings(&self) -> Result<bool> {
        let Some(dir) = &self.dir else {
            return Ok(false);
        };
        let mut stamp = lock(&self.settings_stamp);
        let now = SettingsStamp::of(dir);
        if now == *stamp {
            return Ok(false);
        }
        let loaded = Settings::load(dir);
        // Said once per change of the file, not at every request.
        *stamp = now;
        let loaded = loaded?;
        *self
            .settings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = loaded;
        Ok(true)
    }

    /// Finishes a scrub of the store file's free pages that an evict or a gc left owed (its
    /// `scrub.pending` note: the scrub failed or was killed): a daemon does it as it starts.
    /// Nothing when none is owed, or on a backend whose freed space is its server's business.
    ///
    /// # Errors
    /// Storage errors: the scrub stays owed, for the next gc.
    pub fn finish_owed_scrub(&self) -> Result<()> {
        self.store.finish_erasure()
    }

    /// Answers `request` with its own response type.
    ///
    /// # Errors
    /// The request's errors; see each request type.
    pub fn call<R: Apply>(&self, request: R) -> Result<R::Response> {
        let answer = request.apply(self);
        self.settle_index_batches();
        answer
    }

    /// Answers any request.
    ///
    /// # Errors
    /// The request's errors; see each request type.
    pub fn handle(&self, request: Request) -> Result<Response> {
        let answer = request.apply_any(self);
        self.settle_index_batches();
        answer
    }

    /// Makes the lazily committed batches of an index running beside this request durable
    /// before the request is answered: the answer may show their rows or tx ids, which a crash
    /// would otherwise lose (and a later commit would number again). Best effort: a failed
    /// sync is logged, and the index's own closing sync reports it.
    fn settle_index_batches(&self) {
        if self.store.has_lazy_index_batches()
            && let Err(err) = self.store.sync()
        {
            tracing::warn!(error = %err, "making an index's batches durable before an answer");
        }
    }

    /// A receiver of the [`CommitEvent`] of every transaction this engine commits from now on.
    pub fn subscribe(&self) -> Receiver<CommitEvent> {
        let (sender, receiver) = channel();
        lock(&self.subscribers).push(sender);
        receiver
    }

    /// Publishes what transactions `txs` changed to the subscribers, if there are any.
    fn publish(&self, txs: &[u64]) {
        // While following other writers, a commit the follower published already (its
        // notification came first) is not published again, and the follower skips the others.
        let txs: Vec<u64> = match lock(&self.followed).as_mut() {
            Some(followed) => txs
                .iter()
                .copied()
                .filter(|&tx| tx > followed.seen && followed.own.insert(tx))
                .collect(),
            None => txs.to_vec(),
        };
        if lock(&self.subscribers).is_empty() || txs.is_empty() {
            return;
        }
        for tx in txs {
            // Best effort: an event that cannot be read back is not sent (the log has it).
            let Ok(event) = self.commit_event(tx) else {
                continue;
            };
            lock(&self.subscribers).retain(|s| s.send(event.clone()).is_ok());
        }
    }

    /// The event of transaction `tx`, read back from the log.
    fn commit_event(&self, tx: u64) -> Result<CommitEvent> {
        let record = self
            .store
            .log(Some(TxId(tx.saturating_sub(1))), 1)?
            .into_iter()
            .next()
            .ok_or_else(|| Error::not_found(format!("tx {tx}")))?;
        Ok(self.event_of(&record))
    }

    /// The event of the transaction of log record `record`.
    fn event_of(&self, record: &crate::store::TxRecord) -> CommitEvent {
        let tx = record.tx_id.0;
        let mut event = CommitEvent {
            tx_id: tx,
            origin: record.origin.as_str().to_string(),
            entities: Vec::new(),
            paths: Vec::new(),
            sessions: Vec::new(),
            changes: Vec::new(),
        };
        for op in &record.ops {
            let Some(entity) = op.entity() else { continue };
            if op.kind() == Some("match") || event.entities.iter().any(|e| e == entity) {
                continue;
            }
            event.entities.push(entity.to_string());
            if let Some(sid) = entity.strip_prefix("session:") {
                event.sessions.push(sid.to_string());
            } else if let Ok(info) = self.store.entity(entity)
                && let Some(source) = info.source
            {
                let path = source.as_filesystem().path.clone();
                let kind = if op.kind() == Some("delete") {
                    "deleted"
                } else if self
                    .store
                    .version_info(entity, None, Some(TxId(tx.saturating_sub(1))))
                    .ok()
                    .flatten()
                    .is_some_and(|before| !before.is_tombstone())
                {
                    "updated"
                } else {
                    "created"
                };
                event.changes.push(FileChange {
                    path: path.clone(),
                    entity: entity.to_string(),
                    tx,
                    kind: kind.into(),
                });
                event.paths.push(path);
            }
        }
        event
    }

    /// The live session `sid`, loaded from the store when no request holds it yet.
    fn live_session(&self, sid: &str) -> Result<Arc<Mutex<Session>>> {
        if let Some(session) = lock(&self.sessions).get(sid) {
            return Ok(Arc::clone(session));
        }
        let loaded = Session::load(&self.store, &self.settings(), sid)?;
        let mut sessions = lock(&self.sessions);
        // Another request may have loaded it meanwhile: theirs wins, it may hold a commit.
        let session = sessions
            .entry(sid.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(loaded)));
        Ok(Arc::clone(session))
    }

    /// Keeps `session` live under its id (a session just created or forked).
    fn keep_session(&self, session: Session) {
        let sid = session.id().to_string();
        lock(&self.sessions).insert(sid, Arc::new(Mutex::new(session)));
    }

    /// Forgets the live session `sid`: its next request loads it from the store again.
    fn forget_session(&self, sid: &str) {
        lock(&self.sessions).remove(sid);
    }

    /// Forgets the live session `sid` unless it committed transaction `tx` (or a later one)
    /// itself: a commit of this engine whose notification came before its answer (the
    /// request holds the session until its commit is answered, so this waits for that).
    fn forget_session_before(&self, sid: &str, tx: u64) {
        let live = lock(&self.sessions).get(sid).cloned();
        if let Some(session) = live
            && lock(&session)
                .last_commit()
                .is_some_and(|last| last.0 >= tx)
        {
            return;
        }
        self.forget_session(sid);
    }

    /// Runs `change` on live session `sid` and commits it as one transaction. On any error the
    /// live session is dropped, so nothing of the failed request stays in memory.
    fn with_session<T>(
        &self,
        sid: &str,
        change: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<(T, Option<u64>)> {
        self.with_session_as(sid, true, change)
    }

    /// [`Engine::with_session`], committing lazily ([`Session::commit_lazily`]) unless
    /// `durable`.
    fn with_session_as<T>(
        &self,
        sid: &str,
        durable: bool,
        change: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<(T, Option<u64>)> {
        let slot = self.live_session(sid)?;
        let mut session = lock(&slot);
        let result = change(&mut session).and_then(|value| {
            let receipt = if durable {
                session.commit()?
            } else {
                session.commit_lazily()?
            };
            Ok((value, receipt.map(|r| r.tx_id.0)))
        });
        drop(session);
        match &result {
            Ok((_, tx)) => self.publish(&tx.iter().copied().collect::<Vec<_>>()),
            Err(_) => self.forget_session(sid),
        }
        result
    }

    /// Checks that `tx` names a transaction of the store, in the words of the flag `flag`.
    fn check_tx(&self, flag: &str, tx: u64) -> Result<TxId> {
        let latest = self.store.chain_head()?.map_or(0, |(tx, _)| tx.0);
        if tx == 0 || tx > latest {
            return Err(Error::invalid_input(format!(
                "{flag} {tx}: the store has transactions 1 to {latest}"
            )));
        }
        Ok(TxId(tx))
    }
}

impl Drop for Engine {
    /// Makes lazy commits durable before the store closes (closing would too; this says so).
    fn drop(&mut self) {
        self.store.sync().ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscriber_hears_each_commit_once_with_its_session() -> Result<()> {
        let engine = Engine::with_store(Store::in_memory()?, Settings::default());
        let events = engine.subscribe();
        let created = engine.call(SessionNewRequest {
            id: Some("s1".into()),
            ..SessionNewRequest::default()
        })?;
        let turn = engine.call(SessionTurnRequest {
            id: "s1".into(),
            role: "user".into(),
            content: "hello".into(),
            toolcall_refs: Vec::new(),
        })?;
        let first = events
            .try_recv()
            .map_err(|e| Error::invariant(e.to_string()))?;
        assert_eq!(Some(first.tx_id), created.tx_id);
        let second = events
            .try_recv()
            .map_err(|e| Error::invariant(e.to_string()))?;
        assert_eq!(Some(second.tx_id), turn.tx_id);
        assert_eq!(second.sessions, vec!["s1".to_string()]);
        assert!(
            second.entities.contains(&"chat:s1".to_string()),
            "{second:?}"
        );
        assert!(events.try_recv().is_err(), "one event per commit");
        Ok(())
    }

    /// A read-only agent tool's record is answered before it is durable; a call that numbers
    /// files or writes is durable, and makes the earlier records durable with it.
    #[test]
    fn read_only_tool_records_are_lazy_and_writes_are_durable() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store_dir = tmp.path().join("store");
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(&tree).map_err(|e| Error::io("mkdir", e))?;
        std::fs::write(tree.join("a.txt"), "one\ntwo\n").map_err(|e| Error::io("write", e))?;
        let engine = Engine::open(&store_dir, Access::Create)?;
        engine.call(SessionNewRequest {
            id: Some("s1".into()),
            mounts: vec![crate::resolve::MountMapping::new(
                "/work",
                tree.to_str().unwrap_or_default(),
            )],
            ..SessionNewRequest::default()
        })?;
        let call = |tool: &str, args: serde_json::Value| -> Result<AgentCalled> {
            engine.call(AgentCallRequest {
                session: "s1".into(),
                tool: tool.into(),
                args: match args {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                },
                caller: None,
            })
        };
        // The first listing numbers the files: durable.
        let listed = call("list_files", serde_json::json!({"pattern": "**"}))?;
        assert!(!listed.answer.is_error, "{}", listed.answer.text);
        assert!(!engine.store().has_lazy_commits());
        let read = call(
            "read_lines",
            serde_json::json!({"filepath": "/work/a.txt", "start": 1, "end": 2}),
        )?;
        assert!(!read.answer.is_error, "{}", read.answer.text);
        assert!(read.tx_id.is_some());
        assert!(
            engine.store().has_lazy_commits(),
            "a read's record is not synced before its answer"
        );
        let written = call(
            "write_file",
            serde_json::json!({"filepath": "/work/b.txt", "content": "new\n"}),
        )?;
        assert!(!written.answer.is_error, "{}", written.answer.text);
        assert!(
            !engine.store().has_lazy_commits(),
            "a write is durable, and the read before it with it"
        );
        assert!(written.tx_id > read.tx_id);
        Ok(())
    }

    /// An index's batches are committed lazily, and visible meanwhile: a request answered
    /// during the index (here `log`, naming the newest tx id) makes them durable before its
    /// answer, so that a crash right after it (a copy of the open store's file) still holds what
    /// the answer named, and no later commit can give that tx id other content.
    #[test]
    fn an_answer_given_during_an_index_names_only_durable_transactions() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let store_dir = tmp.path().join("store");
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(&tree).map_err(|e| Error::io("mkdir", e))?;
        // 1 MiB files: the scan's batches (8 MiB) hold a few each, so it makes several.
        for i in 0..40u8 {
            let bytes: Vec<u8> = (0..1 << 20)
                .map(|n: u32| (n.wrapping_mul(2_654_435_761) >> 13) as u8 ^ i)
                .collect();
            std::fs::write(tree.join(format!("f{i:02}.bin")), bytes)
                .map_err(|e| Error::io("write", e))?;
        }
        let engine = Engine::open(&store_dir, Access::Create)?;
        let copy = tmp.path().join("crashed");
        std::fs::create_dir_all(&copy).map_err(|e| Error::io("mkdir", e))?;
        let mut answered: Option<u64> = None;
        let mut probe = |_: crate::index::ScanProgress| {
            if answered.is_some() || !engine.store().has_lazy_commits() {
                return;
            }
            // Another client's read while the index runs, then a crash.
            if let Ok(log) = engine.call(LogRequest {
                limit: Some(1),
                ..LogRequest::default()
            }) {
                answered = log.head.map(|head| head.tx_id);
                let _ = std::fs::copy(
                    store_dir.join(crate::store::DB_FILE),
                    copy.join(crate::store::DB_FILE),
                );
            }
        };
        let summary = IndexRequest {
            paths: vec![tree.display().to_string()],
            cwd: None,
            threads: Some(2),
        }
        .apply_with_progress(&engine, &mut probe)?;
        assert!(summary.tx_ids.len() > 1, "{:?}", summary.tx_ids);
        let answered = answered.ok_or_else(|| Error::invariant("no lazy batch was seen"))?;
        drop(engine);
        let crashed = Store::open(&copy)?;
        let head = crashed.chain_head()?.map_or(0, |(tx, _)| tx.0);
        assert!(
            head >= answered,
            "a client was told of tx {answered}; a crash then left the store at tx {head}"
        );
        Ok(())
    }

    #[test]
    fn a_failed_request_leaves_nothing_in_the_live_session() -> Result<()> {
        let engine = Engine::with_store(Store::in_memory()?, Settings::default());
        engine.call(SessionNewRequest {
            id: Some("s1".into()),
            ..SessionNewRequest::default()
        })?;
        // The first path reads fine in memory, the second fails: nothing may be committed later.
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let file = tmp.path().join("a.txt");
        std::fs::write(&file, "a\n").map_err(|e| Error::io("write", e))?;
        let refused = engine.call(SessionReadRequest {
            id: "s1".into(),
            paths: vec![
                file.display().to_string(),
                tmp.path().join("missing").display().to_string(),
            ],
        });
        assert!(refused.is_err());
        let turn = engine.call(SessionTurnRequest {
            id: "s1".into(),
            role: "user".into(),
            content: "next".into(),
            toolcall_refs: Vec::new(),
        })?;
        assert!(turn.tx_id.is_some());
        let shown = engine.call(SessionShowRequest {
            id: "s1".into(),
            as_of_tx: None,
        })?;
        assert_eq!(
            shown.counts().0,
            0,
            "the failed read left nothing: {shown:?}"
        );
        Ok(())
    }
}
