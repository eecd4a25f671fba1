//! `Cli`: the `strata` command line, a front end of the engine: each command parses its
//! arguments, builds an engine request, and prints the typed response.
//!
//! Uses `engine` (and the types its responses carry). Paths on the command line are host paths
//! (no mounts; this machine's filesystem id); relative ones travel with the current directory.
//! Human output is aligned text on stdout; `--json` prints the response as JSON; errors go to
//! stderr.
//!
//! # Layout
//! - `args`: the clap definitions. `locate`: finding the store as git finds `.git`.
//! - `objects`: ls, show, cat, history, diff. `admin`: init, mount, log, fsck (salvage too), backup, evict, gc,
//!   stats.
//! - `index`: index with its progress bar. `session`: the session commands.
//! - `watch`: watch, unwatch. `daemon`: serve, stop, status, and how a command reaches the engine: through the store's
//!   daemon (started when none runs), or in this process with `--no-daemon`.
//! - `output`: tables, sizes, short hashes.

mod admin;
mod args;
mod daemon;
mod index;
mod locate;
mod mcp;
mod objects;
mod output;
mod session;
mod watch;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use strata::engine::{Access, Apply, Engine, store_exists};

pub use args::Cli;
use args::Command;
use locate::{Located, locate};

/// Runs one command; the exit code is 0 on success and 1 when `fsck` finds problems.
///
/// # Errors
/// Any failure, with context saying what was being done.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let located = locate(cli.store.as_deref(), &cwd);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let invocation = Invocation {
        cwd,
        located,
        out: &mut out,
        no_daemon: cli.no_daemon,
        client: std::cell::RefCell::new(None),
    };
    invocation.dispatch(cli.command)
}

/// Why a store could not be created at `dir`: the error of its nearest existing ancestor's
/// write check (`None`: it can be).
fn uncreatable(dir: &Path) -> Option<std::io::Error> {
    let existing = dir.ancestors().find(|a| a.exists())?;
    rustix::fs::access(existing, rustix::fs::Access::WRITE_OK)
        .err()
        .map(std::io::Error::from)
}

/// What every command needs: where it runs, where the store is, where output goes.
struct Invocation<'a> {
    cwd: PathBuf,
    located: Located,
    out: &'a mut dyn Write,
    /// Run the engine in this process (`--no-daemon`).
    no_daemon: bool,
    /// The connection to the store's daemon, once made.
    client: std::cell::RefCell<Option<strata::server::client::Client>>,
}

impl Invocation<'_> {
    fn dispatch(mut self, command: Command) -> Result<ExitCode> {
        if let Some(tx) = command.as_of_tx() {
            self.note_partial_run(tx);
        }
        match command {
            Command::Init(args) => self.init(args),
            Command::Mount(command) => self.mount(command),
            Command::Index(args) => self.index(args),
            Command::Ls(args) => self.ls(args),
            Command::Show(args) => self.show(args),
            Command::Cat(args) => self.cat(args),
            Command::History(args) => self.history(args),
            Command::Diff(args) => self.diff(args),
            Command::Log(args) => self.log(args),
            Command::Fsck(args) => self.fsck(args),
            Command::Backup(args) => self.backup(args),
            Command::Migrate(args) => self.migrate(args),
            Command::Evict(args) => self.evict(args),
            Command::Gc(args) => self.gc(args),
            Command::Stats(args) => self.stats(args),
            Command::Session(command) => self.session(command),
            Command::Serve(args) => self.serve(args),
            Command::Stop => self.stop(),
            Command::Status(args) => self.status(args),
            Command::Mcp(args) => self.mcp(args),
            Command::Watch(args) => self.watch(args),
            Command::Unwatch(args) => self.unwatch(args),
            Command::Audit(args) => self.audit(args),
        }
    }

    /// Says on stderr when reading as of transaction `tx` sees an index run only in part. Says
    /// nothing when the question cannot be answered: the command itself reports why.
    fn note_partial_run(&self, tx: u64) {
        if let Ok(strata::engine::LogRun {
            partial: Some(partial),
        }) = self.call(strata::engine::LogRunRequest { tx })
        {
            let mut err = std::io::stderr();
            // A note that cannot be written is not worth failing the command for.
            let _ = writeln!(err, "strata: note: {}", partial.note);
        }
    }

    /// The store directory.
    fn dir(&self) -> &Path {
        self.located.dir()
    }

    /// The current directory as the engine takes it (relative paths travel with it).
    fn cwd(&self) -> Option<String> {
        self.cwd.to_str().map(str::to_string)
    }

    /// Fails, saying how to make one, when there is no store where the command looks.
    fn check_exists(&self) -> Result<()> {
        if let Located::Missing(dir) = &self.located {
            if let Some(err) = uncreatable(dir) {
                bail!(
                    "no strata store in {} or any directory above it, and none can be created \
                     here ({err}); pass --store DIR with a store, or run where you can write",
                    self.cwd.display()
                );
            }
            bail!(
                "no strata store in {} or any directory above it; run `strata init` to create one \
                 here, or pass --store DIR",
                self.cwd.display()
            );
        }
        let dir = self.dir();
        if !store_exists(dir) {
            self.check_given()?;
            if let Some(err) = uncreatable(dir) {
                bail!(
                    "{} holds no strata store, and none can be created there ({err}); pass \
                     --store DIR with a store you can read",
                    dir.display()
                );
            }
            bail!(
                "{} holds no strata store; run `strata init --store {}` to create one",
                dir.display(),
                dir.display()
            );
        }
        Ok(())
    }

    /// Fails when the store directory named by `--store` or `STRATA_STORE` cannot be one: a
    /// file, or a project directory whose store is its `.strata/` (the hint names that).
    fn check_given(&self) -> Result<()> {
        let Located::Given(dir) = &self.located else {
            return Ok(());
        };
        let inner = dir.join(locate::STORE_DIR_NAME);
        if store_exists(&inner) {
            bail!(
                "{} is not a store directory but holds one in {}: pass --store {} (or set \
                 STRATA_STORE to it)",
                dir.display(),
                locate::STORE_DIR_NAME,
                inner.display()
            );
        }
        if dir.exists() && !dir.is_dir() {
            bail!(
                "--store (or STRATA_STORE) {} is a file; it names a store directory (a `{}` \
                 directory, or one `strata init --store DIR` creates)",
                dir.display(),
                locate::STORE_DIR_NAME
            );
        }
        Ok(())
    }

    /// An engine in this process over the store, which must exist, opened as `access` says
    /// (waiting while another process holds it).
    fn engine(&self, access: Access) -> Result<Engine> {
        self.check_exists()?;
        let dir = self.dir();
        daemon::open_waiting(dir, access)
            .with_context(|| format!("opening store {}", dir.display()))
    }

    /// An engine over the store, creating it (and saying so on stderr) when there is none.
    fn engine_creating(&self) -> Result<Engine> {
        self.engine_creating_as(Access::Create)
    }

    /// [`Invocation::engine_creating`], opening an existing store as `access` says
    /// ([`Access::Create`] or [`Access::CreateDeferred`]).
    fn engine_creating_as(&self, access: Access) -> Result<Engine> {
        self.check_given()?;
        let dir = self.dir();
        let verb = if store_exists(dir) {
            "opening"
        } else {
            "creating"
        };
        let engine = daemon::open_waiting(dir, access)
            .with_context(|| format!("{verb} store {}", dir.display()))?;
        if engine.created() {
            let mut err = std::io::stderr();
            writeln!(err, "created a new strata store in {}", dir.display())?;
        }
        Ok(engine)
    }

    /// Answers `request` over the existing store: through its daemon, or (`--no-daemon`, or
    /// when no daemon can be started) in this process, opened read-only unless the request
    /// writes. Both give the same response.
    fn call<R: Apply + strata::engine::Writes>(&self, request: R) -> Result<R::Response> {
        self.check_exists()?;
        if self.uses_daemon()? {
            let mut client = self.client.borrow_mut();
            if let Some(client) = client.as_mut() {
                return Ok(client.call(request)?);
            }
        }
        let access = if request.writes() {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        Ok(self.engine(access)?.call(request)?)
    }

    /// Prints `value` as pretty JSON with its keys sorted.
    fn print_json(&mut self, value: &impl Serialize) -> Result<()> {
        let value = serde_json::to_value(value)?;
        writeln!(self.out, "{}", serde_json::to_string_pretty(&value)?)?;
        Ok(())
    }
}
