//! `strata serve`: the daemon. It holds the store, serves the engine as JSON-RPC 2.0 over the
//! Unix socket `strata.sock` in the store directory (one JSON message per line), and answers
//! many clients at once: reads run beside writes, and writes that arrive together share one
//! commit (the store's group commit).
//!
//! Trust: the socket is 0600 inside a 0700 directory, and a peer whose uid is not the daemon's
//! is refused (`SO_PEERCRED`). A message over [`MAX_MESSAGE_BYTES`] is refused and skipped;
//! a client that disconnects mid-request costs nothing (the request still finishes, its answer
//! is dropped). SIGINT, SIGTERM and the `stop` method finish what is in flight, answer it,
//! remove the socket and exit. An auto-started daemon exits after an idle time without clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

use super::protocol::{
    Handshake, MAX_MESSAGE_BYTES, PROTOCOL_VERSION, SOCKET_FILE, Status, code, error_object,
    notification, protocol_error, response,
};
use crate::engine::{Access, Engine, Request, WatchAddRequest};
use crate::error::{Error, Result};
use crate::store::Timestamp;
use crate::watch::{WatchOptions, Watcher};

/// The daemon's file watcher, once a root is watched.
type WatcherSlot = Arc<std::sync::Mutex<Option<Watcher>>>;

/// How a daemon runs.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// Exit after this long without a client (and nothing in flight); `None`: run until stopped.
    pub idle_timeout: Option<Duration>,
    /// The largest message read.
    pub max_message_bytes: usize,
    /// Directories to add to the watched roots (kept in the settings) before serving.
    pub watch: Vec<String>,
    /// The directory relative `watch` paths are taken from.
    pub cwd: Option<String>,
    /// How the file watcher runs.
    pub watch_options: WatchOptions,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            idle_timeout: None,
            max_message_bytes: MAX_MESSAGE_BYTES,
            watch: Vec::new(),
            cwd: None,
            watch_options: WatchOptions::default(),
        }
    }
}

/// The socket of the store in `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_FILE)
}

/// What every connection shares.
struct Shared {
    engine: Arc<Engine>,
    options: DaemonOptions,
    started: Instant,
    started_at: Timestamp,
    uid: u32,
    clients: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicU64,
    /// Messages read whose answer is not written yet: what a stopping daemon waits for.
    unanswered: AtomicU64,
    /// Milliseconds since `started` of the last activity (a connection, a message, an answer).
    last_activity: AtomicU64,
    /// Set when the daemon stops: the listener and every connection stop reading.
    stopping: watch::Sender<bool>,
    /// The file watcher.
    watcher: WatcherSlot,
}

impl Shared {
    fn touch(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity.store(now, Ordering::Relaxed);
    }

    fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// One answer written (or given up: its client is gone, or it needs none).
    fn answered(&self) {
        self.unanswered.fetch_sub(1, Ordering::SeqCst);
        self.touch();
    }

    fn status(&self) -> Result<Status> {
        let store = self.engine.store();
        Ok(Status {
            pid: std::process::id(),
            started: self.started_at.to_rfc3339(),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            clients: self.clients.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            last_tx: last_durable_tx(store)?,
            queued_writes: store.queued_writes() as u64,
            store: self
                .engine
                .dir()
                .map_or_else(|| ":memory:".into(), |d| d.display().to_string()),
            idle_timeout_seconds: self.options.idle_timeout.map(|d| d.as_secs()),
            watch: self
                .watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
                .map(Watcher::status),
        })
    }
}

/// The newest transaction of `store` a crash now would keep, for `status`
/// ([`crate::store::Store::durable_head`]).
fn last_durable_tx(store: &crate::store::Store) -> Result<Option<u64>> {
    Ok(store.durable_head()?.map(|tx| tx.0))
}

/// Serves the store in `dir` until stopped: takes the store (refusing when a daemon already
/// serves it, naming that one), replaces a stale socket, binds the socket (0600), answers
/// clients, and on shutdown removes the socket and closes the store.
///
/// # Errors
/// [`Error::StoreLocked`] when another process holds the store (a daemon, named by its lock
/// file); [`Error::Io`] when the socket cannot be made; the engine's open errors.
pub fn serve(dir: &Path, options: DaemonOptions) -> Result<()> {
    // The store first: whoever holds it owns the socket, so two daemons starting at once can
    // never remove each other's socket.
    let engine = Arc::new(Engine::open(dir, Access::ReadWrite)?);
    // A scrub of the free pages an evict or a gc left owed (a SIGKILL, a full disk) is
    // finished before clients come: nothing else would until the next gc.
    if let Err(err) = engine.finish_owed_scrub() {
        tracing::error!(error = %err, "finishing the owed scrub of the store file's free pages");
    }
    // A store other processes write (PostgreSQL): their commits reach the subscribers too.
    let follower = engine.follow_other_writers()?;
    if !options.watch.is_empty() {
        engine.call(WatchAddRequest {
            paths: options.watch.clone(),
            cwd: options.cwd.clone(),
        })?;
    }
    let watcher = start_watcher(&engine, &options.watch_options)?;
    let path = socket_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Error::io(
                format!("removing the stale socket {}", path.display()),
                e,
            ));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the daemon's runtime", e))?;
    let outcome = runtime.block_on(async {
        let listener = bind(&path)?;
        let signals = shutdown_signals();
        run(
            listener,
            Arc::clone(&engine),
            options,
            Arc::clone(&watcher),
            &path,
            signals,
        )
        .await
    });
    // The watcher stops (its window in progress committed) before the store closes.
    let stopped = watcher
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    drop(stopped);
    // Whatever happened, the socket goes: a later client must not find a dead one.
    let _ = std::fs::remove_file(&path);
    // What was in flight is answered by now; a task still running (a subscription's
    // forwarder between two looks) must not hold up the exit.
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(follower);
    drop(engine);
    outcome
}

/// Starts the file watcher now when the settings name roots to watch, else when `watch.add`
/// first names one (a daemon without roots keeps no watcher thread awake).
///
/// # Errors
/// [`Error::Io`] when the platform's watcher cannot be made.
fn start_watcher(engine: &Arc<Engine>, options: &WatchOptions) -> Result<WatcherSlot> {
    let slot: WatcherSlot = Arc::new(std::sync::Mutex::new(None));
    if !engine.settings().watch.is_empty() {
        *slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Watcher::start(Arc::clone(engine), options.clone())?);
        return Ok(slot);
    }
    let changes = engine.watch_roots_changes();
    let weak = Arc::downgrade(engine);
    let later = Arc::clone(&slot);
    let options = options.clone();
    std::thread::Builder::new()
        .name("strata-watch-start".into())
        .spawn(move || {
            // Ends when the engine goes (its sender with it) or once the watcher runs.
            while let Ok(roots) = changes.recv() {
                if roots.is_empty() {
                    continue;
                }
                let Some(engine) = weak.upgrade() else { break };
                match Watcher::start(engine, options) {
                    Ok(watcher) => {
                        *later
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(watcher);
                    }
                    Err(err) => tracing::error!(error = %err, "starting the file watcher"),
                }
                break;
            }
        })
        .map_err(|e| Error::io("starting the watcher", e))?;
    Ok(slot)
}

/// Binds the socket at `path` with mode 0600.
fn bind(path: &Path) -> Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let listener = UnixListener::bind(path)
        .map_err(|e| Error::io(format!("binding the socket {}", path.display()), e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(format!("making the socket {} private", path.display()), e))?;
    Ok(listener)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signals() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without signal handling the daemon still stops on `stop` and on idleness.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// Answers clients on `listener` until `shutdown` resolves, `stop` is asked, the idle time
/// passes, or the socket at `socket` disappears (its store directory was removed); then waits
/// for what is in flight.
///
/// # Errors
/// Never after it starts listening (failed connections are logged and dropped).
pub async fn run(
    listener: UnixListener,
    engine: Arc<Engine>,
    options: DaemonOptions,
    watcher: WatcherSlot,
    socket: &Path,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let shared = Arc::new(Shared {
        engine,
        options,
        started: Instant::now(),
        started_at: Timestamp::now(),
        uid: rustix::process::geteuid().as_raw(),
        clients: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        unanswered: AtomicU64::new(0),
        last_activity: AtomicU64::new(0),
        stopping: watch::Sender::new(false),
        watcher,
    });
    tracing::info!(pid = std::process::id(), socket = %socket.display(), "serving");
    tokio::pin!(shutdown);
    let mut stopping = shared.stopping.subscribe();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // Commits made under load skip redb's quick-repair record; once they stop, a checkpoint
    // makes reopening after a crash quick again (and lazy commits durable).
    let mut sync_tick = tokio::time::interval(Duration::from_millis(50));
    sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.touch();
                    tokio::spawn(connection(stream, Arc::clone(&shared)));
                }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            },
            () = &mut shutdown => break,
            _ = stopping.wait_for(|stop| *stop) => break,
            _ = tick.tick() => {
                if idle(&shared) || !socket.exists() {
                    break;
                }
            }
            _ = sync_tick.tick() => {
                if shared.engine.store().sync_due() {
                    let engine = Arc::clone(&shared.engine);
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = engine.store().sync() {
                            tracing::warn!(error = %e, "the checkpoint after commits failed");
                        }
                    });
                }
            }
        }
    }
    tracing::info!("stopping: finishing what is in flight");
    // No connection reads another message; the requests read so far finish and are answered
    // (bounded: a stuck client cannot hold us).
    shared.stop();
    let deadline = Instant::now() + Duration::from_secs(30);
    while shared.unanswered.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Whether the daemon has been idle for its idle time (no client, nothing in flight). A daemon
/// watching roots is never idle: keeping the store current is its work.
fn idle(shared: &Shared) -> bool {
    let Some(timeout) = shared.options.idle_timeout else {
        return false;
    };
    if !shared.engine.settings().watch.is_empty() {
        return false;
    }
    let last = Duration::from_millis(shared.last_activity.load(Ordering::Relaxed));
    shared.clients.load(Ordering::Relaxed) == 0
        && shared.unanswered.load(Ordering::SeqCst) == 0
        && shared.started.elapsed().saturating_sub(last) >= timeout
}

/// Counts a connected client while it lives.
struct ClientGuard(Arc<Shared>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// Serves one client: reads its messages, answers each (concurrently), writes the answers and
/// notifications through one writer task.
async fn connection(stream: UnixStream, shared: Arc<Shared>) {
    shared.clients.fetch_add(1, Ordering::Relaxed);
    let _guard = ClientGuard(Arc::clone(&shared));
    let peer = stream.peer_cred().map(|cred| cred.uid());
    let (read, mut write) = stream.into_split();
    if peer.as_ref().ok() != Some(&shared.uid) {
        let who = peer.map_or_else(|e| format!("unknown ({e})"), |uid| uid.to_string());
        tracing::warn!(peer = %who, "refused a client of another user");
        let line = response(
            &Value::Null,
            Err(protocol_error(
                code::PERMISSION_DENIED,
                "permission_denied",
                format!(
                    "this daemon serves only its own user (uid {}); you are uid {who}",
                    shared.uid
                ),
            )),
        );
        let _ = write.write_all(format!("{line}\n").as_bytes()).await;
        let _ = write.shutdown().await;
        // Read (and drop) what it sends for a moment before closing: closing on unread bytes
        // would make its write fail (EPIPE) before it reads why it was refused.
        let mut sink = tokio::io::sink();
        let mut read = read.take(64 * 1024);
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::io::copy(&mut read, &mut sink),
        )
        .await;
        return;
    }
    let (out, mut outgoing) = mpsc::channel::<Outgoing>(256);
    let written = Arc::clone(&shared);
    let writer = tokio::spawn(async move {
        // Every answer is taken off the queue and counted, even once the client is gone.
        let mut gone = false;
        while let Some(outgoing) = outgoing.recv().await {
            let (line, answer) = match outgoing {
                Outgoing::Answer(line) => (line, true),
                Outgoing::Notification(line) => (line, false),
            };
            if !gone {
                gone = write
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .is_err();
            }
            if answer {
                written.answered();
            }
        }
    });
    let mut reader = BufReader::new(read);
    let limit = shared.options.max_message_bytes;
    let mut stopping = shared.stopping.subscribe();
    loop {
        let message = tokio::select! {
            biased;
            _ = stopping.wait_for(|stop| *stop) => break,
            message = read_message(&mut reader, limit) => message,
        };
        match message {
            Ok(Some(Message::Line(line))) => {
                shared.touch();
                shared.unanswered.fetch_add(1, Ordering::SeqCst);
                let shared = Arc::clone(&shared);
                let out = out.clone();
                tokio::spawn(async move {
                    let answered = match answer(&line, &shared, &out).await {
                        Some(answer) => out.send(Outgoing::Answer(answer)).await.is_ok(),
                        None => false,
                    };
                    if !answered {
                        shared.answered();
                    }
                });
            }
            Ok(Some(Message::TooLarge)) => {
                let error = protocol_error(
                    code::INVALID_REQUEST,
                    "invalid_request",
                    format!("the message is over {limit} bytes; send smaller messages"),
                );
                shared.unanswered.fetch_add(1, Ordering::SeqCst);
                if out
                    .send(Outgoing::Answer(response(&Value::Null, Err(error))))
                    .await
                    .is_err()
                {
                    shared.answered();
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
    drop(out);
    let _ = writer.await;
}

/// A line to a client.
enum Outgoing {
    /// The answer to a message read (counted in `unanswered` until written).
    Answer(String),
    /// A notification (a subscription's commit).
    Notification(String),
}

/// One message read from a client.
enum Message {
    /// A line (without its newline).
    Line(String),
    /// A line over the limit, skipped.
    TooLarge,
}

/// Reads the next line of at most `limit` bytes; `None` at the end of the stream (a half-sent
/// last line is dropped).
async fn read_message(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    limit: usize,
) -> std::io::Result<Option<Message>> {
    let mut line = Vec::new();
    let mut too_large = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(None);
        }
        let (taken, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        if !too_large {
            let end = if done { taken - 1 } else { taken };
            line.extend_from_slice(&buffer[..end]);
            if line.len() > limit {
                too_large = true;
                line = Vec::new();
            }
        }
        reader.consume(taken);
        if done {
            if too_large {
                return Ok(Some(Message::TooLarge));
            }
            return Ok(Some(Message::Line(
                String::from_utf8_lossy(&line).into_owned(),
            )));
        }
    }
}

/// Answers one message; `None` for a notification (no id), which gets no answer.
async fn answer(line: &str, shared: &Arc<Shared>, out: &mpsc::Sender<Outgoing>) -> Option<String> {
    let message: Value = match serde_json::from_str(line) {
        Ok(message) => message,
        Err(e) => {
            let error = protocol_error(
                code::PARSE_ERROR,
                "parse_error",
                format!("the message is not JSON ({e}); send one JSON-RPC 2.0 object per line"),
            );
            return Some(response(&Value::Null, Err(error)));
        }
    };
    let Value::Object(fields) = &message else {
        let error = protocol_error(
            code::INVALID_REQUEST,
            "invalid_request",
            "the message is not a JSON object; send {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": …}",
        );
        return Some(response(&Value::Null, Err(error)));
    };
    let id = fields.get("id").cloned();
    let reply =
        |outcome: std::result::Result<Value, Value>| id.as_ref().map(|id| response(id, outcome));
    if fields.get("jsonrpc") != Some(&json!("2.0")) {
        let error = protocol_error(
            code::INVALID_REQUEST,
            "invalid_request",
            "\"jsonrpc\" must be \"2.0\"",
        );
        return Some(response(id.as_ref().unwrap_or(&Value::Null), Err(error)));
    }
    let Some(method) = fields.get("method").and_then(Value::as_str) else {
        return Some(response(
            id.as_ref().unwrap_or(&Value::Null),
            Err(protocol_error(
                code::INVALID_REQUEST,
                "invalid_request",
                "the request has no \"method\" string",
            )),
        ));
    };
    let params = match fields.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => {
            return reply(Err(protocol_error(
                code::INVALID_PARAMS,
                "invalid_params",
                "\"params\" must be an object of named parameters",
            )));
        }
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let outcome = match method {
        "handshake" => handshake(&params),
        // Off the async threads: it may wait for a commit to make lazy ones durable.
        "status" => {
            let shared = Arc::clone(shared);
            match tokio::task::spawn_blocking(move || shared.status()).await {
                Ok(status) => status.map(|s| json!(s)).map_err(|e| error_object(&e)),
                Err(e) => Err(error_object(&Error::invariant(format!(
                    "the status request stopped in the middle ({e})"
                )))),
            }
        }
        "stop" => {
            shared.stop();
            Ok(json!({"stopping": true}))
        }
        "subscribe" => subscribe(shared, out, &params).map(|()| json!({"subscribed": true})),
        _ => call_engine(method, params, shared).await,
    };
    reply(outcome)
}

/// `handshake`: the protocol and server versions; another major protocol version is refused.
fn handshake(params: &Value) -> std::result::Result<Value, Value> {
    if let Some(theirs) = params.get("protocol").and_then(Value::as_str) {
        let major = |v: &str| v.split('.').next().unwrap_or_default().to_string();
        if major(theirs) != major(PROTOCOL_VERSION) {
            return Err(protocol_error(
                code::PROTOCOL_VERSION,
                "protocol_version",
                format!(
                    "this daemon speaks protocol {PROTOCOL_VERSION}, the client {theirs}; use a \
                     client of major version {}",
                    major(PROTOCOL_VERSION)
                ),
            ));
        }
    }
    Ok(json!(Handshake {
        protocol: PROTOCOL_VERSION.into(),
        server: format!("strata {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
    }))
}

/// `subscribe`: every commit from now on reaches this client as a `commit` notification; with
/// `paths` (path prefixes) or `sessions` (session ids), each file change of a commit under one of
/// those prefixes or held by one of those sessions reaches it as a `change` notification
/// (`path`, `entity`, `tx`, `kind`) instead.
/// The forwarder holds the connection's queue weakly and looks every second whether the
/// connection is gone, so that it ends with it: it neither keeps a closed connection (and its
/// client count) alive nor holds up the daemon's exit.
fn subscribe(
    shared: &Arc<Shared>,
    out: &mpsc::Sender<Outgoing>,
    params: &Value,
) -> std::result::Result<(), Value> {
    use std::sync::mpsc::RecvTimeoutError;
    let list = |name: &str| -> std::result::Result<Vec<String>, Value> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or(()),
            Some(_) => Err(()),
        }
        .map_err(|()| {
            protocol_error(
                code::INVALID_PARAMS,
                "invalid_params",
                format!("subscribe: \"{name}\" must be an array of strings"),
            )
        })
    };
    // Prefixes are canonical paths; one that exists is canonicalised, as the watcher's are.
    let paths: Vec<String> = list("paths")?
        .into_iter()
        .map(|p| {
            std::fs::canonicalize(&p)
                .ok()
                .and_then(|c| c.to_str().map(str::to_string))
                .unwrap_or(p)
        })
        .collect();
    let sessions = list("sessions")?;
    let filtered = !paths.is_empty() || !sessions.is_empty();
    let engine = Arc::clone(&shared.engine);
    let events = shared.engine.subscribe();
    let out = out.downgrade();
    tokio::task::spawn_blocking(move || {
        loop {
            match events.recv_timeout(Duration::from_secs(1)) {
                Ok(event) => {
                    let lines = if filtered {
                        changes_wanted(&engine, &event, &paths, &sessions)
                            .into_iter()
                            .map(|change| notification("change", json!(change)))
                            .collect()
                    } else {
                        vec![notification("commit", json!(event))]
                    };
                    let Some(out) = out.upgrade() else { break };
                    if lines
                        .into_iter()
                        .any(|line| out.blocking_send(Outgoing::Notification(line)).is_err())
                    {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) if out.upgrade().is_some() => {}
                Err(_) => break,
            }
        }
    });
    Ok(())
}

/// The file changes of `event` under one of `paths` (prefixes, whole segments) or held by one
/// of `sessions`.
fn changes_wanted(
    engine: &Engine,
    event: &crate::engine::CommitEvent,
    paths: &[String],
    sessions: &[String],
) -> Vec<crate::engine::FileChange> {
    let entities: Vec<String> = event.changes.iter().map(|c| c.entity.clone()).collect();
    let held: Vec<Vec<bool>> = sessions
        .iter()
        .filter_map(|sid| engine.session_holds(sid, &entities).ok())
        .collect();
    event
        .changes
        .iter()
        .enumerate()
        .filter(|(at, change)| {
            paths.iter().any(|prefix| {
                change.path == *prefix
                    || change
                        .path
                        .strip_prefix(prefix.trim_end_matches('/'))
                        .is_some_and(|rest| rest.starts_with('/'))
            }) || held.iter().any(|h| h.get(*at).copied().unwrap_or(false))
        })
        .map(|(_, change)| change.clone())
        .collect()
}

/// Answers an engine method on a blocking thread.
async fn call_engine(
    method: &str,
    params: Value,
    shared: &Arc<Shared>,
) -> std::result::Result<Value, Value> {
    if !Request::METHODS.contains(&method) {
        return Err(protocol_error(
            code::METHOD_NOT_FOUND,
            "method_not_found",
            format!(
                "no method {method:?}; the methods are {} and handshake, status, stop, subscribe",
                Request::METHODS.join(", ")
            ),
        ));
    }
    let request: Request = serde_json::from_value(json!({"method": method, "params": params}))
        .map_err(|e| {
            protocol_error(
                code::INVALID_PARAMS,
                "invalid_params",
                format!("the params of {method} do not fit it: {e} (see schema/rpc/{method}.params.json)"),
            )
        })?;
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let engine = Arc::clone(&shared.engine);
    let handled = tokio::task::spawn_blocking(move || engine.handle(request)).await;
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    match handled {
        Ok(Ok(response)) => serde_json::to_value(response).map_err(|e| {
            error_object(&Error::invariant(format!(
                "a response does not serialise: {e}"
            )))
        }),
        Ok(Err(e)) => Err(error_object(&e)),
        Err(e) => Err(error_object(&Error::invariant(format!(
            "the request stopped in the middle ({e})"
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;
    use crate::store::{Op, Origin, StatUpdate, Store};

    /// Writes one file at `path` to `store`, lazily or not: its tx id.
    fn put(store: &Store, path: &str, lazily: bool) -> Result<u64> {
        let object = Object::text_at(path)?;
        let stat = StatUpdate {
            filesystem_id: "fs".into(),
            puts: Vec::new(),
            removes: Vec::new(),
        };
        let receipt = if lazily {
            store.transact_with_stat_lazily(vec![Op::put(object)], Origin::Cli, stat)?
        } else {
            store.transact_with_stat(vec![Op::put(object)], Origin::Cli, stat)?
        };
        receipt
            .map(|r| r.tx_id.0)
            .ok_or_else(|| Error::invariant("no receipt"))
    }

    /// `status`'s `last_tx` names only a transaction a crash now would keep: lazy commits are
    /// made durable first (a copy of the open store's file, as a crash leaves it, holds the
    /// one named), and when they cannot be (a store marked damaged writes nothing more) it
    /// names the last one before them. Failed before: it named the newest lazy commit, which
    /// stayed not durable.
    #[test]
    fn status_names_only_durable_transactions() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = tmp.path().join("s.strata");
        let store = Store::open_or_create(&dir)?;
        put(&store, "/a", false)?;
        let lazy = put(&store, "/b", true)?;
        assert!(store.has_lazy_commits());
        assert_eq!(last_durable_tx(&store)?, Some(lazy));
        assert!(!store.has_lazy_commits(), "the tx named is durable");
        let copy = tmp.path().join("crashed");
        std::fs::create_dir_all(&copy).map_err(|e| Error::io("mkdir", e))?;
        std::fs::copy(
            dir.join(crate::store::DB_FILE),
            copy.join(crate::store::DB_FILE),
        )
        .map_err(|e| Error::io("copy", e))?;
        let crashed = Store::open(&copy)?;
        assert_eq!(crashed.chain_head()?.map(|(tx, _)| tx.0), Some(lazy));
        drop(crashed);
        // A lazy commit that cannot be made durable is not named.
        let before = lazy;
        let unsynced = put(&store, "/c", true)?;
        store.note_damage_for_test("a page failed its checksum");
        assert_eq!(last_durable_tx(&store)?, Some(before), "not tx {unsynced}");
        Ok(())
    }
}
