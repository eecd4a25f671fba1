//! `strata mcp`: builds the MCP server for the mode its arguments and environment ask for, and
//! serves it on stdin and stdout.
//!
//! Uses `server` and `engine`. Docs mode (`--docs-path` or `DOCS_PATH`) reads the arguments as
//! docs-mcp does and needs no store. Otherwise the server is in session mode: the agent tools of
//! one session of the store (`--store DIR` or the CLI's way of finding it; created when there is
//! none), `--session ID` (resumed, or created with that id) or a new session whose mounts are
//! `--mount SPEC…`, else the store's default mounts, else the project directory (the store's
//! parent) mounted at its own path; `--no-descriptors` gives a new session none. Requests go to
//! the store's daemon (started when none answers), or with `--no-daemon` (or when no daemon can
//! start) to an engine in this process. Logs go to stderr (`STRATA_LOG`: error, warn, info,
//! debug or trace; default warn).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use strata::engine::{
    Access, Engine, MountLsRequest, SessionNewRequest, SessionShowRequest, store_exists,
};
use strata::resolve::MountMapping;
use strata::server::client::{Client, DEFAULT_IDLE_SECONDS};
use strata::server::mcp::{Backend, McpServer, run_stdio};
use tracing::Level;

use super::Invocation;
use super::admin::parse_mounts;
use super::args::McpArgs;
use super::locate::STORE_DIR_NAME;

/// Session mode's own flags.
#[derive(Debug, Default, PartialEq, Eq)]
struct SessionFlags {
    store: Option<PathBuf>,
    session: Option<String>,
    mounts: Vec<String>,
    no_descriptors: bool,
    no_daemon: bool,
}

/// Reads session mode's flags (`--flag VALUE` or `--flag=VALUE`); anything else is an error
/// naming it, since session mode is strata's own and has no original to follow.
fn session_flags(args: &[String]) -> Result<SessionFlags> {
    let mut flags = SessionFlags::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |flag: &str| -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => rest
                    .next()
                    .cloned()
                    .with_context(|| format!("{flag} needs a value")),
            }
        };
        match name {
            "--store" => flags.store = Some(PathBuf::from(value("--store")?)),
            "--session" => flags.session = Some(value("--session")?),
            "--mount" => flags.mounts.push(value("--mount")?),
            "--no-descriptors" if inline.is_none() => flags.no_descriptors = true,
            "--no-daemon" if inline.is_none() => flags.no_daemon = true,
            other => bail!(
                "strata mcp: unknown argument {other:?}; session mode takes --store DIR, \
                 --session ID, --mount SPEC, --no-descriptors, --no-daemon (docs mode takes \
                 --docs-path DIR)"
            ),
        }
    }
    Ok(flags)
}

impl Invocation<'_> {
    /// `strata mcp [ARGS…]`: serves until stdin ends.
    pub(super) fn mcp(&mut self, args: McpArgs) -> Result<ExitCode> {
        init_logging();
        let env = |name: &str| std::env::var(name).ok();
        let server = if McpServer::docs_requested(&args.args, env) {
            McpServer::from_args_and_env(&args.args, env)?
        } else {
            self.session_server(session_flags(&args.args)?)?
        };
        run_stdio(server).context("serving MCP on stdio")?;
        Ok(ExitCode::SUCCESS)
    }

    /// The session mode server: the store (created when missing), the backend, the session.
    fn session_server(&self, flags: SessionFlags) -> Result<McpServer> {
        let dir = match &flags.store {
            Some(dir) => self.cwd.join(dir),
            None => self.dir().to_path_buf(),
        };
        let mounts = parse_mounts(&flags.mounts)?;
        if !store_exists(&dir) {
            drop(
                super::daemon::open_waiting(&dir, Access::Create)
                    .with_context(|| format!("creating store {}", dir.display()))?,
            );
            tracing::warn!("created a new strata store in {}", dir.display());
        }
        let backend = self.backend(&dir, flags.no_daemon || self.no_daemon)?;
        let session = match flags.session {
            Some(id) if session_exists(&backend, &id)? => id,
            requested => {
                let mounts =
                    if !mounts.is_empty() || !backend.call(MountLsRequest {})?.mounts.is_empty() {
                        mounts
                    } else {
                        let root = project_root(&dir, &self.cwd);
                        let root = root
                            .to_str()
                            .context("the project directory is not UTF-8")?;
                        vec![MountMapping::new(root, root)]
                    };
                let created = backend.call(SessionNewRequest {
                    id: requested,
                    mounts,
                    descriptors: flags.no_descriptors.then_some(false),
                    ..SessionNewRequest::default()
                })?;
                created.session_id
            }
        };
        tracing::info!(session, store = %dir.display(), "session mode");
        Ok(McpServer::session(backend, &session)?)
    }

    /// The store's daemon (started when none answers), or an engine here with `no_daemon` or when
    /// no daemon can start.
    fn backend(&self, dir: &Path, no_daemon: bool) -> Result<Backend> {
        if !no_daemon {
            let idle = std::env::var("STRATA_IDLE_TIMEOUT")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(DEFAULT_IDLE_SECONDS);
            if let Ok(client) = Client::connect_or_start(dir, idle) {
                return Ok(Backend::Daemon(Arc::new(Mutex::new(client))));
            }
        }
        let engine: Engine = super::daemon::open_waiting(dir, Access::ReadWrite)
            .with_context(|| format!("opening store {}", dir.display()))?;
        Ok(Backend::Engine(Arc::new(engine)))
    }
}

/// Whether session `id` exists in the store.
fn session_exists(backend: &Backend, id: &str) -> Result<bool> {
    match backend.call(SessionShowRequest {
        id: id.to_string(),
        as_of_tx: None,
    }) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == "not_found" => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The project a store belongs to: the parent of a `.strata` directory, else the current one.
fn project_root(store: &Path, cwd: &Path) -> PathBuf {
    match store.parent() {
        Some(parent) if store.file_name().is_some_and(|n| n == STORE_DIR_NAME) => {
            parent.to_path_buf()
        }
        _ => cwd.to_path_buf(),
    }
}

/// Sends tracing's events to stderr, at the level `STRATA_LOG` names (default warn).
fn init_logging() {
    let level = std::env::var("STRATA_LOG")
        .ok()
        .and_then(|l| l.parse::<Level>().ok())
        .unwrap_or(Level::WARN);
    // A subscriber set before (there is none in the binary) would be kept.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_ansi(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_flags_are_read_in_both_forms_and_others_refused() -> Result<()> {
        let args: Vec<String> = [
            "--store",
            "s",
            "--session=x",
            "--mount",
            "/w=/tmp",
            "--no-daemon",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let flags = session_flags(&args)?;
        assert_eq!(flags.store, Some(PathBuf::from("s")));
        assert_eq!(flags.session.as_deref(), Some("x"));
        assert_eq!(flags.mounts, ["/w=/tmp"]);
        assert!(flags.no_daemon && !flags.no_descriptors);
        assert!(session_flags(&["--max-headers".to_string(), "3".to_string()]).is_err());
        assert!(session_flags(&["--session".to_string()]).is_err());
        Ok(())
    }
}
