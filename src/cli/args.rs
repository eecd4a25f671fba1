//! The command line as typed: clap derive definitions, one item per command and flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// strata: a content-addressed object store with bitemporal history.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The store directory itself (holding store.redb); default: the nearest .strata/ here or above.
    #[arg(long, global = true, env = "STRATA_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,

    /// Run the engine in this process instead of sending the command to the store's daemon
    /// (which is started when none runs); waits for a store another process holds.
    #[arg(
        long,
        global = true,
        env = "STRATA_NO_DAEMON",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub no_daemon: bool,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an empty store (default ./.strata); on an existing one, change nothing and say so.
    Init(InitArgs),
    /// The store's default mounts, given to new sessions.
    #[command(subcommand)]
    Mount(MountCommand),
    /// Index trees: record every new, changed and deleted file.
    Index(IndexArgs),
    /// Files in the store: size, versions, last change, state, path (relative when under the
    /// current directory).
    Ls(LsArgs),
    /// One object's envelope.
    Show(ShowArgs),
    /// One object's content, raw.
    Cat(CatArgs),
    /// One object's versions.
    History(HistoryArgs),
    /// The transaction log.
    Log(LogArgs),
    /// Unified diff between two versions of an object.
    Diff(DiffArgs),
    /// Verify the store; exit 1 with one line per problem.
    Fsck(FsckArgs),
    /// Copy the store, as one consistent snapshot, into a new store in DIR while others keep
    /// using it, and verify the copy (through the daemon when one runs).
    Backup(BackupArgs),
    /// Copy the store into a new store of either backend (a PostgreSQL URL, or a directory for
    /// redb) by replaying its log record for record, with its settings and mounts; the copy's
    /// chain head is the original's, and the copy is verified.
    Migrate(MigrateArgs),
    /// Erase an entity and its whole history.
    Evict(EvictArgs),
    /// Drop contents and documents that no version references; zero the store file's free
    /// pages after them, and finish a scrub an evict or a gc left owed (`scrub.pending`).
    Gc(JsonArgs),
    /// Entities, versions, transactions, bytes, and bytes put per byte stored.
    Stats(JsonArgs),
    /// Agent sessions: create, read, discover, activate, render, resume, fork.
    #[command(subcommand)]
    Session(super::session::SessionCommand),
    /// Serve the store to many clients over its Unix socket (strata.sock), until stopped.
    ///
    /// A message over 64 MiB is refused; STRATA_MAX_MESSAGE_BYTES lowers that limit (for tests
    /// of it). An auto-started daemon exits after STRATA_IDLE_TIMEOUT seconds without clients.
    Serve(ServeArgs),
    /// Stop the store's daemon (it finishes what is in flight first).
    Stop,
    /// The store's daemon: pid, uptime, clients, requests, last transaction, queued writes, and
    /// the file watcher's counters.
    Status(JsonArgs),
    /// An MCP server over stdio; `--docs-path DIR` makes it a drop-in for docs-mcp.
    Mcp(McpArgs),
    /// Watch directories: the daemon (started when none runs) keeps the store equal to them as
    /// files change, and every later daemon of the store watches them again. Without a
    /// directory, lists the watched roots.
    Watch(WatchArgs),
    /// Stop watching directories (`strata watch` lists them).
    Unwatch(WatchArgs),
    /// The writes agents made: one entry per call of a writing tool, oldest first, with its
    /// session, caller, files and their hashes before and after.
    Audit(AuditArgs),
}

/// `strata audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this session's writes.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only writes recorded after this transaction.
    #[arg(long, value_name = "TX", value_parser = tx_number)]
    pub since: Option<u64>,
    /// At most this many entries.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// One JSON object per line (the export format).
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata watch` and `strata unwatch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The directories.
    #[arg(value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Print JSON instead of aligned text.
    #[arg(long)]
    pub json: bool,
}

/// `strata serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Exit after this many seconds without a client (default: run until stopped).
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<u64>,
    /// Watch these directories too (added to the watched roots kept in the settings, which the
    /// daemon watches in any case).
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub watch: Vec<PathBuf>,
}

/// `strata mcp`: its arguments are read as docs-mcp reads its own, so they are taken raw.
#[derive(Debug, Args)]
#[command(
    after_help = "Docs mode: --docs-path DIR / -d DIR (repeatable), --max-headers N, \
                  --max-toc-depth N; environment DOCS_PATH (comma-separated), MAX_HEADERS, \
                  MAX_TOC_DEPTH; the command line wins over the environment, which wins over \
                  the defaults (./docs, 25, 3). Other arguments are ignored. Without \
                  --docs-path or DOCS_PATH the server lists no tools yet."
)]
pub struct McpArgs {
    /// docs-mcp's options (see below); anything else is ignored, as docs-mcp ignores it.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

/// `strata init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Keep the store in PostgreSQL (`postgres://user@host:port/db?schema=NAME`) instead of a
    /// redb file; the directory records where it lives. A store already there is joined.
    #[arg(long, value_name = "URL")]
    pub backend: Option<String>,
    /// A default mount, `AGENT_PREFIX=CANONICAL_PREFIX[:ro][:ci]`; repeatable.
    #[arg(long = "mount", value_name = "SPEC")]
    pub mounts: Vec<String>,
}

/// `strata mount …`.
#[derive(Debug, Subcommand)]
pub enum MountCommand {
    /// Add a default mount, `AGENT_PREFIX=CANONICAL_PREFIX[:ro][:ci]`.
    Add {
        /// The mount spec.
        spec: String,
    },
    /// List the default mounts.
    Ls(JsonArgs),
    /// Remove the default mount with this agent prefix.
    Rm {
        /// The agent prefix of the mount to remove.
        agent_prefix: String,
    },
}

/// `strata index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// The trees or files to index (default: the current directory).
    pub paths: Vec<PathBuf>,
    /// Print no progress bar and no count of skipped paths.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// List every skipped path (symlinks, FIFOs, unreadable files…) on stderr, with its reason.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Worker threads that read, hash and compress (default: one per core; the planner and the
    /// writer are two more).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
}

/// A transaction id as typed: a whole number from 1 (`strata log` lists them).
fn tx_id(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) | Err(_) => Err(format!(
            "{text:?} is not a transaction id; ids are whole numbers from 1 (`strata log` lists them)"
        )),
        Ok(tx) => Ok(tx),
    }
}

/// A transaction number that may be 0 (`log --since 0`: from the start).
fn tx_number(text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| {
        format!("{text:?} is not a transaction id; ids are whole numbers (`strata log` lists them)")
    })
}

impl Command {
    /// The transaction a reading command reads as of (`--as-of-tx`), when it names one.
    pub fn as_of_tx(&self) -> Option<u64> {
        match self {
            Command::Ls(LsArgs { as_of, .. })
            | Command::Show(ShowArgs { as_of, .. })
            | Command::Cat(CatArgs { as_of, .. }) => as_of.known.as_of_tx,
            Command::History(args) => args.known.as_of_tx,
            _ => None,
        }
    }
}

/// Which version of an object to read: by valid time and by what the store knew when.
#[derive(Debug, Args, Clone, Default)]
pub struct AsOfArgs {
    /// The valid time to read at (RFC 3339; finer than microseconds is truncated); default now.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub valid_at: Option<String>,
    #[command(flatten)]
    pub known: KnownArgs,
}

/// As the store knew it: after a transaction, or at a transaction time.
#[derive(Debug, Args, Clone, Default)]
pub struct KnownArgs {
    /// Read as the store knew it after this transaction.
    #[arg(
        long,
        value_name = "TX",
        conflicts_with = "tx_time",
        allow_negative_numbers = true,
        value_parser = tx_id
    )]
    pub as_of_tx: Option<u64>,
    /// Read as the store knew it at this time (RFC 3339).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub tx_time: Option<String>,
}

/// A flag to print JSON.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct JsonArgs {
    /// Print JSON instead of aligned text.
    #[arg(long)]
    pub json: bool,
}

/// `strata ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only paths under this prefix (a path, resolved from the current directory).
    pub prefix: Option<PathBuf>,
    /// Include deleted files.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub as_of: AsOfArgs,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A path, an entity id, or an id prefix of at least 8 hex characters (`id:PREFIX` forces ids).
    pub reference: String,
    #[command(flatten)]
    pub as_of: AsOfArgs,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    #[command(flatten)]
    pub as_of: AsOfArgs,
}

/// `strata history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// Include corrections (versions later superseded at the same valid time).
    #[arg(long)]
    pub corrections: bool,
    /// Order by transaction time instead of valid time.
    #[arg(long)]
    pub by_tx: bool,
    /// History lists every valid time: refused with a hint, and not listed in --help.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true, hide = true)]
    pub valid_at: Option<String>,
    #[command(flatten)]
    pub known: KnownArgs,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only transactions after this one.
    #[arg(long, value_name = "TX", allow_negative_numbers = true, value_parser = tx_number)]
    pub since: Option<u64>,
    /// At most this many transactions: the newest, or the first after --since.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub limit: Option<usize>,
    /// One row per transaction (the consecutive transactions of an index run are one row by
    /// default).
    #[arg(long)]
    pub each: bool,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// The older version, as a transaction id (default: the version before TO).
    #[arg(allow_negative_numbers = true, value_parser = tx_id)]
    pub from: Option<u64>,
    /// The newer version, as a transaction id (default: the current one).
    #[arg(allow_negative_numbers = true, value_parser = tx_id)]
    pub to: Option<u64>,
}

/// `strata fsck`.
#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Rebuild the query tables from the transaction log and the content tables.
    #[arg(long)]
    pub rebuild: bool,
    /// Repair a damaged store: re-read damaged contents from the files that still hold them,
    /// rebuild the query tables, and report what could not be recovered.
    #[arg(long, conflicts_with = "rebuild")]
    pub repair: bool,
    /// Copy everything that still verifies into a new store in NEW_DIR (for a store the storage
    /// engine cannot open, or one repair cannot fix) and say exactly what was lost; the damaged
    /// store is only read. Stop its daemon first (`strata stop`).
    #[arg(long, value_name = "NEW_DIR", conflicts_with_all = ["rebuild", "repair"])]
    pub salvage: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The directory of the copy (new, or empty).
    pub dir: PathBuf,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Where the copy goes: postgres://user@host:port/db?schema=NAME (no store there, or an
    /// empty one), or a new or empty directory for a redb store.
    #[arg(long, value_name = "URL|DIR")]
    pub to: String,
    /// With a PostgreSQL URL: the new store directory that points at the copy (its settings
    /// and mounts live there).
    #[arg(long, value_name = "NEW_DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `strata evict`.
#[derive(Debug, Args)]
pub struct EvictArgs {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// Confirm: eviction erases every version and cannot be undone.
    #[arg(long)]
    pub yes: bool,
}
