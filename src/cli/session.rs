//! `strata session …`: the session API as scriptable commands. Each mutating command loads the
//! session, applies one change and writes it as one commit; each has `--json`.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use strata::index::Settings;
use strata::object::{Role, ToolStatus};
use strata::resolve::absolute_path;
use strata::session::{RenderOptions, Session, SessionOptions, ToolcallInput, Touched};
use strata::store::{Store, TxId};

use super::{Ctx, output, parse_mounts};

/// `strata session …`.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Create a session (one commit) and print its id.
    New(NewArgs),
    /// List the sessions.
    Ls(JsonFlag),
    /// A session's document, configuration and chat.
    Show(ShowArgs),
    /// The agent reads files: index them, add to index, pool and active set.
    Read(PathsArgs),
    /// Files seen in ls/grep output: stubs, added to index and pool.
    Discover(PathsArgs),
    /// Activate an object (reads a stub from its source).
    Activate(ObjArgs),
    /// Deactivate an object (it stays in the pool).
    Deactivate(ObjArgs),
    /// Pin an object of the pool (protects it from auto-collapse).
    Pin(ObjArgs),
    /// Unpin an object.
    Unpin(ObjArgs),
    /// Record a tool call; it joins the latest turn and is activated.
    Toolcall(ToolcallArgs),
    /// Append a turn to the chat.
    Turn(TurnArgs),
    /// Print the context block.
    Render(RenderArgs),
    /// Reconcile the session's files with disk (one commit) and print what changed.
    Resume(IdArgs),
    /// Start a new session from a commit of this one.
    Fork(ForkArgs),
    /// The session's commits.
    History(IdArgs),
}

impl SessionCommand {
    /// Whether the command only reads the store (it can open it read-only).
    fn only_reads(&self) -> bool {
        matches!(
            self,
            SessionCommand::Ls(_)
                | SessionCommand::Show(_)
                | SessionCommand::Render(_)
                | SessionCommand::History(_)
        )
    }
}

/// `--json`.
#[derive(Debug, Args, Clone, Copy)]
pub struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `session new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The session id (default: a new ULID).
    #[arg(long)]
    pub id: Option<String>,
    /// A file holding the system prompt.
    #[arg(long, value_name = "FILE")]
    pub system_prompt: Option<std::path::PathBuf>,
    /// A mount `AGENT=CANONICAL[:ro][:ci][:fs=ID]`, added to the store's default mounts; repeatable.
    #[arg(long = "mount", value_name = "SPEC")]
    pub mounts: Vec<String>,
    /// The filesystem id of paths no mount maps (default: this machine's).
    #[arg(long, value_name = "ID")]
    pub default_filesystem: Option<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// A session id.
#[derive(Debug, Args)]
pub struct IdArgs {
    /// The session id `session new` printed.
    pub id: String,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session id.
    pub id: String,
    /// Show the commit at or before this transaction.
    #[arg(long, value_name = "TX")]
    pub as_of_tx: Option<u64>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// A session and paths.
#[derive(Debug, Args)]
pub struct PathsArgs {
    /// The session id.
    pub id: String,
    /// Paths as the agent sees them (relative ones are taken from the current directory).
    #[arg(required = true)]
    pub paths: Vec<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// A session and an object id.
#[derive(Debug, Args)]
pub struct ObjArgs {
    /// The session id.
    pub id: String,
    /// The object id (a file's id or a tool call id).
    pub object: String,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session toolcall`.
#[derive(Debug, Args)]
pub struct ToolcallArgs {
    /// The session id.
    pub id: String,
    /// The tool's name.
    #[arg(long)]
    pub tool: String,
    /// The arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    pub args: String,
    /// A short rendering of the arguments.
    #[arg(long)]
    pub args_display: Option<String>,
    /// The tool call id (default: toolcall:ULID).
    #[arg(long = "id", value_name = "ID")]
    pub call_id: Option<String>,
    /// ok or fail.
    #[arg(long, default_value = "ok", value_parser = ["ok", "fail"])]
    pub status: String,
    /// A file id the call touched; repeatable.
    #[arg(long = "file-ref", value_name = "REF")]
    pub file_refs: Vec<String>,
    /// The file holding the output, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub output: String,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session turn`.
#[derive(Debug, Args)]
pub struct TurnArgs {
    /// The session id.
    pub id: String,
    /// system, user, assistant or tool.
    #[arg(long)]
    pub role: String,
    /// The text, or - for stdin.
    #[arg(long, value_name = "TEXT|-")]
    pub content: String,
    /// A tool call made during the turn; repeatable.
    #[arg(long = "toolcall-ref", value_name = "ID")]
    pub toolcall_refs: Vec<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The session id.
    pub id: String,
    /// At most this many characters (UTF-16 units) of active content.
    #[arg(long, value_name = "CHARS")]
    pub budget: Option<u64>,
    /// Render the commit at or before this transaction.
    #[arg(long, value_name = "TX")]
    pub as_of_tx: Option<u64>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session to fork.
    pub id: String,
    /// Fork the commit at or before this transaction (default: the latest).
    #[arg(long, value_name = "TX")]
    pub as_of_tx: Option<u64>,
    /// The new session's id (default: a new ULID).
    #[arg(long = "new-id")]
    pub new_id: Option<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// Reads `-` (stdin) or a file.
fn text_arg(value: &str, what: &str) -> Result<String> {
    if value == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("reading {what} from stdin"))?;
        Ok(text)
    } else {
        std::fs::read_to_string(value).with_context(|| format!("reading {what} from {value}"))
    }
}

fn check_tx(store: &Store, tx: u64) -> Result<TxId> {
    let latest = store.chain_head()?.map_or(0, |(tx, _)| tx.0);
    if tx == 0 || tx > latest {
        bail!("--as-of-tx {tx}: the store has transactions 1 to {latest}");
    }
    Ok(TxId(tx))
}

impl Ctx<'_> {
    fn print_json(&mut self, value: &Value) -> Result<()> {
        writeln!(self.out, "{}", serde_json::to_string_pretty(value)?)?;
        Ok(())
    }

    /// An agent path from the command line: absolute as given, relative from the current directory.
    fn agent_path(&self, path: &str) -> Result<String> {
        if path.starts_with('/') {
            Ok(path.to_string())
        } else {
            Ok(absolute_path(path, &self.cwd)?)
        }
    }

    /// Commits `session` and reports the transaction.
    fn finish(
        &mut self,
        session: &mut Session<'_>,
        json: bool,
        mut report: Value,
    ) -> Result<ExitCode> {
        let receipt = session.commit()?;
        let tx = receipt.map(|r| r.tx_id.0);
        if json {
            if let Value::Object(map) = &mut report {
                map.insert("session_id".into(), json!(session.id()));
                map.insert("tx_id".into(), json!(tx));
            }
            self.print_json(&report)?;
        } else {
            match tx {
                Some(tx) => writeln!(self.out, "committed tx {tx}")?,
                None => writeln!(self.out, "nothing changed")?,
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    fn print_touched(&mut self, touched: &[Touched], json: bool) -> Result<()> {
        if !json {
            for t in touched {
                let action = serde_json::to_value(t.action)?;
                writeln!(
                    self.out,
                    "{} {} {}",
                    action.as_str().unwrap_or("?"),
                    output::short(&t.id),
                    t.path
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn session(&mut self, command: SessionCommand) -> Result<ExitCode> {
        let writing = matches!(command, SessionCommand::New(_));
        // `new` may create the store: check its arguments first, so a refused one leaves nothing.
        let new_parts = match &command {
            SessionCommand::New(args) => {
                let mounts = parse_mounts(&args.mounts)?;
                let system_prompt = match &args.system_prompt {
                    Some(path) => std::fs::read_to_string(self.cwd.join(path))
                        .with_context(|| format!("reading the system prompt {}", path.display()))?,
                    None => String::new(),
                };
                if !self.dir().join(strata::store::DB_FILE).exists() {
                    // No store yet: try the session on a scratch store, so that a refused id or
                    // filesystem id does not leave a new empty store behind.
                    let options = SessionOptions {
                        session_id: args.id.clone(),
                        mounts: mounts.clone(),
                        default_filesystem_id: args.default_filesystem.clone(),
                        system_prompt: String::new(),
                    };
                    Session::create(&Store::in_memory()?, &Settings::default(), options)?;
                }
                Some((mounts, system_prompt))
            }
            _ => None,
        };
        let store = if writing {
            self.open_or_create()?
        } else if command.only_reads() {
            self.open_reading()?
        } else {
            self.open_existing()?
        };
        let settings = Settings::load(self.dir())?;
        match command {
            SessionCommand::New(args) => {
                let (extra_mounts, system_prompt) = new_parts.unwrap_or_default();
                let mut mounts = settings.mounts.clone();
                mounts.extend(extra_mounts);
                let options = SessionOptions {
                    session_id: args.id,
                    mounts,
                    default_filesystem_id: args.default_filesystem,
                    system_prompt,
                };
                let session = Session::create(&store, &settings, options)?;
                if args.json.json {
                    let tx = session.last_commit().map(|t| t.0);
                    self.print_json(&json!({"session_id": session.id(), "tx_id": tx}))?;
                } else {
                    writeln!(self.out, "{}", session.id())?;
                }
            }
            SessionCommand::Ls(JsonFlag { json }) => {
                let ids = Session::list(&store)?;
                if json {
                    self.print_json(&json!(ids))?;
                } else {
                    for id in ids {
                        writeln!(self.out, "{id}")?;
                    }
                }
            }
            SessionCommand::Show(args) => {
                let session = match args.as_of_tx {
                    Some(tx) => {
                        Session::view_at(&store, &settings, &args.id, check_tx(&store, tx)?)?
                    }
                    None => Session::load(&store, &settings, &args.id)?,
                };
                let mut doc = session.document()?.to_json();
                if let Value::Object(map) = &mut doc {
                    map.insert("config".into(), serde_json::to_value(session.config())?);
                    map.insert("turns".into(), serde_json::to_value(session.turns())?);
                    map.insert("tx_id".into(), json!(session.last_commit().map(|t| t.0)));
                }
                if args.json.json {
                    self.print_json(&doc)?;
                } else {
                    let sets = session.sets();
                    writeln!(self.out, "session {}", session.id())?;
                    writeln!(
                        self.out,
                        "commit tx {}",
                        session.last_commit().map_or(0, |t| t.0)
                    )?;
                    writeln!(
                        self.out,
                        "index {}, pool {}, active {}, pinned {}, turns {}",
                        sets.index().len(),
                        sets.pool().len(),
                        sets.active().len(),
                        sets.pinned().len(),
                        session.turns().len()
                    )?;
                    for mount in &session.config().mounts {
                        writeln!(self.out, "mount {mount}")?;
                    }
                }
            }
            SessionCommand::Read(args) => {
                let mut session = Session::load(&store, &settings, &args.id)?;
                let mut touched = Vec::new();
                for path in &args.paths {
                    let agent = self.agent_path(path)?;
                    touched.push(session.read(&agent)?);
                }
                self.print_touched(&touched, args.json.json)?;
                return self.finish(&mut session, args.json.json, json!({"touched": touched}));
            }
            SessionCommand::Discover(args) => {
                let mut session = Session::load(&store, &settings, &args.id)?;
                let paths = args
                    .paths
                    .iter()
                    .map(|p| self.agent_path(p))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
                let touched = session.discover(&refs)?;
                self.print_touched(&touched, args.json.json)?;
                return self.finish(&mut session, args.json.json, json!({"touched": touched}));
            }
            SessionCommand::Activate(args) => {
                return self.set_op(&store, &settings, args, "activate");
            }
            SessionCommand::Deactivate(args) => {
                return self.set_op(&store, &settings, args, "deactivate");
            }
            SessionCommand::Pin(args) => return self.set_op(&store, &settings, args, "pin"),
            SessionCommand::Unpin(args) => return self.set_op(&store, &settings, args, "unpin"),
            SessionCommand::Toolcall(args) => {
                let mut session = Session::load(&store, &settings, &args.id)?;
                let parsed: Value = serde_json::from_str(&args.args)
                    .with_context(|| format!("--args {:?} is not JSON", args.args))?;
                let Value::Object(call_args) = parsed else {
                    bail!("--args must be a JSON object, like '{{\"path\":\"a.md\"}}'");
                };
                let status = if args.status == "fail" {
                    ToolStatus::Fail
                } else {
                    ToolStatus::Ok
                };
                let output_text = text_arg(&args.output, "the tool output")?;
                let id = session.record_toolcall(ToolcallInput {
                    id: args.call_id,
                    tool: args.tool,
                    args: call_args,
                    args_display: args.args_display,
                    status,
                    file_refs: (!args.file_refs.is_empty()).then_some(args.file_refs),
                    output: output_text,
                })?;
                if !args.json.json {
                    writeln!(self.out, "{id}")?;
                }
                return self.finish(&mut session, args.json.json, json!({"id": id}));
            }
            SessionCommand::Turn(args) => {
                let mut session = Session::load(&store, &settings, &args.id)?;
                let role: Role = args.role.parse()?;
                let content = if args.content == "-" {
                    text_arg("-", "the turn")?
                } else {
                    args.content
                };
                let count = session.append_turn(role, content, args.toolcall_refs)?;
                return self.finish(&mut session, args.json.json, json!({"turn_count": count}));
            }
            SessionCommand::Render(args) => {
                let session = match args.as_of_tx {
                    Some(tx) => {
                        Session::view_at(&store, &settings, &args.id, check_tx(&store, tx)?)?
                    }
                    None => Session::load(&store, &settings, &args.id)?,
                };
                let text = session.render(&RenderOptions {
                    budget: args.budget,
                })?;
                if args.json.json {
                    let tx = session.last_commit().map(|t| t.0);
                    self.print_json(
                        &json!({"session_id": session.id(), "tx_id": tx, "text": text}),
                    )?;
                } else {
                    writeln!(self.out, "{text}")?;
                }
            }
            SessionCommand::Resume(args) => {
                let (_, report) = Session::resume(&store, &settings, &args.id)?;
                if args.json.json {
                    self.print_json(&serde_json::to_value(&report)?)?;
                } else {
                    writeln!(
                        self.out,
                        "checked {} files: {} vouched by the stat cache, {} read, {} unreachable, {} unreadable",
                        report.checked,
                        report.vouched,
                        report.read,
                        report.unreachable,
                        report.unreadable
                    )?;
                    for change in &report.changes {
                        let action = serde_json::to_value(change.action)?;
                        writeln!(
                            self.out,
                            "{} {}",
                            action.as_str().unwrap_or("?"),
                            change.path
                        )?;
                    }
                    match report.tx_id {
                        Some(tx) => writeln!(self.out, "committed tx {tx}")?,
                        None => writeln!(self.out, "nothing changed")?,
                    }
                }
            }
            SessionCommand::Fork(args) => {
                let at = args.as_of_tx.map(|tx| check_tx(&store, tx)).transpose()?;
                let child = Session::fork(&store, &settings, &args.id, at, args.new_id)?;
                if args.json.json {
                    let tx = child.last_commit().map(|t| t.0);
                    self.print_json(&json!({"session_id": child.id(), "tx_id": tx, "forked_from": child.config().forked_from}))?;
                } else {
                    writeln!(self.out, "{}", child.id())?;
                }
            }
            SessionCommand::History(args) => {
                let commits = Session::history(&store, &args.id)?;
                if args.json.json {
                    self.print_json(&json!({"session_id": args.id, "commits": commits}))?;
                } else {
                    let rows: Vec<Vec<String>> = commits
                        .iter()
                        .map(|c| {
                            vec![
                                c.tx_id.to_string(),
                                c.tx_time.clone(),
                                c.object_hash.as_deref().map_or("-".into(), output::short),
                            ]
                        })
                        .collect();
                    output::table(self.out, &["TX", "TX TIME", "SESSION DOC"], &rows)?;
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    fn set_op(
        &mut self,
        store: &Store,
        settings: &Settings,
        args: ObjArgs,
        op: &str,
    ) -> Result<ExitCode> {
        let mut session = Session::load(store, settings, &args.id)?;
        match op {
            "activate" => session.activate(&args.object)?,
            "deactivate" => session.deactivate(&args.object)?,
            "pin" => session.pin(&args.object)?,
            _ => session.unpin(&args.object)?,
        }
        self.finish(
            &mut session,
            args.json.json,
            json!({"object": args.object, "op": op}),
        )
    }
}
