//! The daemon's client, for the CLI and Rust callers: connect to a store's socket (starting a
//! daemon when none answers, as Watchman's CLI does), send engine requests, read typed
//! responses. Blocking, standard library only: a CLI command needs no runtime.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::protocol::{Handshake, LOG_FILE, PROTOCOL_VERSION, Status, remote_error};
use super::rpc::socket_path;
use crate::engine::{Apply, Request};
use crate::error::{Error, Result};

/// The default idle time of an auto-started daemon (5 minutes); `STRATA_IDLE_TIMEOUT` (seconds)
/// overrides it.
pub const DEFAULT_IDLE_SECONDS: u64 = 300;

/// How long a client waits for a daemon it started to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client still looks for a daemon after the one it started exited (another, started
/// at the same time, may be the one that serves).
const EXITED_GRACE: Duration = Duration::from_millis(300);

/// A connection to a store's daemon.
#[derive(Debug)]
pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl Client {
    /// Connects to the daemon serving the store in `dir`; `None` when no daemon answers there
    /// (no socket, or a stale one).
    ///
    /// # Errors
    /// [`Error::Io`] when the socket exists and answers but cannot be used.
    pub fn connect(dir: &Path) -> Result<Option<Client>> {
        let path = socket_path(dir);
        let stream = match UnixStream::connect(&path) {
            Ok(stream) => stream,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(Error::io(format!("connecting to {}", path.display()), e)),
        };
        let reader = stream
            .try_clone()
            .map_err(|e| Error::io(format!("connecting to {}", path.display()), e))?;
        Ok(Some(Client {
            writer: stream,
            reader: BufReader::new(reader),
            next_id: 1,
        }))
    }

    /// Connects to the daemon of the store in `dir`, starting one (detached, logging to
    /// `daemon.log` in the store directory, exiting after `idle_seconds` without clients) when
    /// none answers.
    ///
    /// # Errors
    /// [`Error::Io`] when the daemon cannot be started or does not answer in time (its log
    /// says why).
    pub fn connect_or_start(dir: &Path, idle_seconds: u64) -> Result<Client> {
        // A daemon that has just died can still accept for a moment (its last threads hold the
        // socket while they exit) and then drop the connection: that is no daemon, so the
        // handshake proves the connection, and a lost one is looked at again a few times.
        let mut attempt = 0;
        loop {
            let mut client = Client::connect_or_start_once(dir, idle_seconds)?;
            match client.handshake("strata-cli") {
                Ok(_) => return Ok(client),
                Err(Error::Io { .. }) if attempt < 4 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(50 * attempt));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt of [`Client::connect_or_start`], without the handshake.
    fn connect_or_start_once(dir: &Path, idle_seconds: u64) -> Result<Client> {
        if let Some(client) = Client::connect(dir)? {
            return Ok(client);
        }
        let mut daemon = start_daemon(dir, idle_seconds)?;
        let mut deadline = Instant::now() + START_TIMEOUT;
        let mut exited = None;
        loop {
            if let Some(client) = Client::connect(dir)? {
                return Ok(client);
            }
            // The daemon started here gave up (the store is held by a process of its own, or it
            // failed): no use waiting out the start timeout. Another daemon started at the same
            // time may be answering, so a last moment is left for it.
            if exited.is_none()
                && let Ok(Some(status)) = daemon.try_wait()
            {
                exited = Some(status);
                deadline = deadline.min(Instant::now() + EXITED_GRACE);
            }
            if let Some(status) = exited
                && Instant::now() >= deadline
            {
                return Err(Error::io(
                    format!(
                        "starting a daemon for {}: it exited ({status}) before it answered; see {}",
                        dir.display(),
                        dir.join(LOG_FILE).display()
                    ),
                    std::io::Error::from(std::io::ErrorKind::NotConnected),
                ));
            }
            if Instant::now() >= deadline {
                return Err(Error::io(
                    format!(
                        "starting a daemon for {}: it did not answer within {} s; see {}",
                        dir.display(),
                        START_TIMEOUT.as_secs(),
                        dir.join(LOG_FILE).display()
                    ),
                    std::io::Error::from(std::io::ErrorKind::TimedOut),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `method` with `params` and reads its result.
    ///
    /// # Errors
    /// The daemon's error as [`Error::Remote`] (its kind and texts kept); [`Error::Io`] with
    /// "connection lost" when the daemon goes away.
    pub fn call_raw(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let lost = |e: std::io::Error| {
            Error::io(
                "connection lost: the daemon went away before it answered; run the command again",
                e,
            )
        };
        writeln!(self.writer, "{line}").map_err(lost)?;
        loop {
            let mut text = String::new();
            let read = self.reader.read_line(&mut text).map_err(lost)?;
            if read == 0 {
                return Err(lost(std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                )));
            }
            let message: Value = serde_json::from_str(&text).map_err(|e| {
                Error::invalid_input(format!(
                    "the daemon answered something that is not JSON: {e}"
                ))
            })?;
            // Notifications (a subscription's commits) are not this call's answer.
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(remote_error(error));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// Sends a typed engine request and reads its typed response.
    ///
    /// # Errors
    /// As [`Client::call_raw`]; [`Error::InvalidInput`] when the response does not fit the
    /// request's response type (a daemon of another version).
    pub fn call<R: Apply>(&mut self, request: R) -> Result<R::Response> {
        let request: Request = request.into();
        let method = request.method();
        let mut message = serde_json::to_value(&request)
            .map_err(|e| Error::invariant(format!("a request does not serialise: {e}")))?;
        let params = message
            .get_mut("params")
            .map(Value::take)
            .unwrap_or_else(|| json!({}));
        let result = self.call_raw(method, params)?;
        serde_json::from_value(result).map_err(|e| {
            Error::invalid_input(format!(
                "the daemon's answer to {method} does not fit this strata ({e}); stop the daemon \
                 (`strata stop`) so that this version starts its own"
            ))
        })
    }

    /// Exchanges versions with the daemon.
    ///
    /// # Errors
    /// A protocol error when the daemon speaks another major version.
    pub fn handshake(&mut self, client: &str) -> Result<Handshake> {
        let result = self.call_raw(
            "handshake",
            json!({"protocol": PROTOCOL_VERSION, "client": client}),
        )?;
        serde_json::from_value(result)
            .map_err(|e| Error::invalid_input(format!("the daemon's handshake: {e}")))
    }

    /// The daemon's state.
    ///
    /// # Errors
    /// As [`Client::call_raw`].
    pub fn status(&mut self) -> Result<Status> {
        let result = self.call_raw("status", json!({}))?;
        serde_json::from_value(result)
            .map_err(|e| Error::invalid_input(format!("the daemon's status: {e}")))
    }

    /// Asks the daemon to stop (it finishes what is in flight first).
    ///
    /// # Errors
    /// As [`Client::call_raw`].
    pub fn stop(&mut self) -> Result<()> {
        self.call_raw("stop", json!({})).map(|_| ())
    }
}

/// Starts a daemon for the store in `dir`: this program's `serve`, detached from the caller's
/// terminal and process group, logging to `daemon.log`.
fn start_daemon(dir: &Path, idle_seconds: u64) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let program: PathBuf = std::env::current_exe()
        .map_err(|e| Error::io("finding this program to start a daemon", e))?;
    let log = crate::store::private::append_file(&dir.join(LOG_FILE))?;
    Command::new(program)
        .arg("--store")
        .arg(dir)
        .arg("serve")
        .arg("--idle-timeout")
        .arg(idle_seconds.to_string())
        .env_remove("STRATA_NO_DAEMON")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io(format!("starting a daemon for {}", dir.display()), e))
}
