//! The daemon from the command line: `serve`, `stop`, `status`, and how every other command
//! reaches the engine. By default a command sends its request to the store's daemon, starting
//! one (it exits after an idle time) when none answers, as Watchman's CLI does; with
//! `--no-daemon` (or `STRATA_NO_DAEMON=1`) it runs the engine in this process, waiting while
//! another process holds the store. The output is the same either way.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use strata::engine::{Access, Engine};
use strata::server::client::{Client, DEFAULT_IDLE_SECONDS};
use strata::server::rpc::{DaemonOptions, serve, socket_path};

use super::args::{JsonArgs, ServeArgs};
use super::{Invocation, output};

/// How long an in-process command waits for a store another process holds, unless
/// `STRATA_LOCK_TIMEOUT` (seconds) says otherwise.
const LOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// How long `serve` waits for a store held by a process that is not an answering daemon.
const SERVE_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Fails, naming it, when a daemon answers on the store's socket.
fn refuse_if_served(dir: &Path) -> Result<()> {
    if let Some(mut running) = Client::connect(dir)? {
        let status = running.status()?;
        anyhow::bail!(
            "a daemon already serves {} (pid {}, started {}); stop it with `strata stop`",
            dir.display(),
            status.pid,
            status.started
        );
    }
    Ok(())
}

/// A number of seconds from the environment variable `name`, if it is set and valid.
fn seconds_from_env(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// Opens an engine over the store in `dir`; while another process holds the store, waits (up to
/// `STRATA_LOCK_TIMEOUT` seconds, default 60), saying so on stderr after a second and naming the
/// holder.
///
/// # Errors
/// The open's error; [`strata::Error::StoreLocked`] when the wait runs out.
pub(super) fn open_waiting(dir: &Path, access: Access) -> strata::Result<Engine> {
    let timeout = seconds_from_env("STRATA_LOCK_TIMEOUT").map_or(LOCK_TIMEOUT, Duration::from_secs);
    let started = Instant::now();
    let mut said = false;
    loop {
        match Engine::open(dir, access) {
            Err(strata::Error::StoreLocked { holder, .. }) if started.elapsed() < timeout => {
                if !said && started.elapsed() >= Duration::from_secs(1) {
                    said = true;
                    let mut err = std::io::stderr();
                    let _ = writeln!(
                        err,
                        "strata: waiting for the store {}, held by {holder} (up to {} s; \
                         STRATA_LOCK_TIMEOUT changes that)",
                        dir.display(),
                        timeout.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

impl Invocation<'_> {
    /// Whether this command goes through the daemon: not with `--no-daemon`; otherwise when a
    /// daemon answers or one can be started (else the engine runs here).
    pub(super) fn uses_daemon(&self) -> Result<bool> {
        if self.no_daemon {
            return Ok(false);
        }
        let mut client = self.client.borrow_mut();
        if client.is_some() {
            return Ok(true);
        }
        let idle = seconds_from_env("STRATA_IDLE_TIMEOUT").unwrap_or(DEFAULT_IDLE_SECONDS);
        match Client::connect_or_start(self.dir(), idle) {
            Ok(connected) => {
                *client = Some(connected);
                Ok(true)
            }
            // No daemon could start (the store is held by a process of its own, say): the
            // engine runs here, and waits for the store like --no-daemon does.
            Err(_) => Ok(false),
        }
    }

    pub(super) fn serve(&mut self, args: ServeArgs) -> Result<ExitCode> {
        self.check_exists()?;
        let dir = self.dir().to_path_buf();
        refuse_if_served(&dir)?;
        // The daemon logs to stderr, which an auto-started daemon points at its log file.
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
        let mut options = DaemonOptions {
            idle_timeout: args.idle_timeout.map(Duration::from_secs),
            watch: args
                .watch
                .iter()
                .map(|p| strata::resolve::utf8_path(p).map(str::to_string))
                .collect::<strata::Result<_>>()?,
            cwd: self.cwd(),
            watch_options: strata::watch::WatchOptions::from_env(),
            ..DaemonOptions::default()
        };
        // A smaller message limit, for tests of the limit (a larger one is not allowed).
        if let Some(limit) = std::env::var("STRATA_MAX_MESSAGE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            options.max_message_bytes = limit.min(options.max_message_bytes);
        }
        // A store held without a daemon answering is a daemon on its way out (its socket
        // goes before its store is closed) or a command in its own process: wait a little for
        // it, refusing as soon as another daemon answers (two started at once).
        let deadline = Instant::now() + SERVE_LOCK_WAIT;
        loop {
            match serve(&dir, options.clone()) {
                Err(strata::Error::StoreLocked { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                    refuse_if_served(&dir)?;
                }
                outcome => {
                    outcome.with_context(|| format!("serving {}", dir.display()))?;
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
    }

    pub(super) fn stop(&mut self) -> Result<ExitCode> {
        self.check_exists()?;
        let dir = self.dir().to_path_buf();
        let Some(mut client) = Client::connect(&dir)? else {
            writeln!(self.out, "no daemon serves {}", dir.display())?;
            return Ok(ExitCode::SUCCESS);
        };
        let pid = client.status()?.pid;
        client.stop()?;
        // Stopped when its socket is gone and its store closed: the next command (or
        // daemon) may take the store.
        let deadline = Instant::now() + Duration::from_secs(60);
        while socket_path(&dir).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        while matches!(
            Engine::open(&dir, Access::ReadOnly),
            Err(strata::Error::StoreLocked { .. })
        ) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        writeln!(
            self.out,
            "stopped the daemon of {} (pid {pid})",
            dir.display()
        )?;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn status(&mut self, args: JsonArgs) -> Result<ExitCode> {
        self.check_exists()?;
        let dir = self.dir().to_path_buf();
        let status = match Client::connect(&dir)? {
            Some(mut client) => Some(client.status()?),
            None => None,
        };
        if args.json {
            self.print_json(&status)?;
            return Ok(ExitCode::SUCCESS);
        }
        let Some(status) = status else {
            writeln!(self.out, "no daemon serves {}", dir.display())?;
            return Ok(ExitCode::SUCCESS);
        };
        let rows = vec![
            vec!["store".into(), status.store.clone()],
            vec!["pid".into(), status.pid.to_string()],
            vec!["started".into(), status.started.clone()],
            vec!["uptime".into(), format!("{:.0} s", status.uptime_seconds)],
            vec!["clients".into(), status.clients.to_string()],
            vec!["requests".into(), status.requests.to_string()],
            vec!["in flight".into(), status.in_flight.to_string()],
            vec![
                "last tx".into(),
                status.last_tx.map_or("-".into(), |tx| tx.to_string()),
            ],
            vec!["queued writes".into(), status.queued_writes.to_string()],
            vec![
                "idle timeout".into(),
                status
                    .idle_timeout_seconds
                    .map_or("none (runs until stopped)".into(), |s| format!("{s} s")),
            ],
        ];
        let mut rows = rows;
        if let Some(watch) = &status.watch {
            let count = |n: u64| n.to_string();
            rows.extend([
                vec!["watched roots".into(), watch.roots.join(", ")],
                vec![
                    "watcher".into(),
                    if watch.ready {
                        "ready".into()
                    } else {
                        "reconciling at start".into()
                    },
                ],
                vec!["watches".into(), count(watch.watches)],
                vec!["unwatched dirs".into(), count(watch.unwatched_dirs)],
                vec!["events".into(), count(watch.events)],
                vec!["queue depth".into(), count(watch.queue_depth)],
                vec![
                    "last watcher commit".into(),
                    match (&watch.last_commit_tx, &watch.last_commit) {
                        (Some(tx), Some(at)) => format!("tx {tx} at {at}"),
                        _ => "-".into(),
                    },
                ],
                vec!["watcher errors".into(), count(watch.errors)],
            ]);
            if let Some(error) = &watch.last_error {
                rows.push(vec!["last watcher error".into(), error.clone()]);
            }
        }
        output::table(self.out, &["WHAT", "VALUE"], &rows)?;
        Ok(ExitCode::SUCCESS)
    }
}
