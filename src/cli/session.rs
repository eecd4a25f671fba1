//! `strata session …`: the session API as scriptable commands. Each mutating command loads the
//! session, applies one change and writes it as one commit; each has `--json`.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use strata::engine::{
    AgentApproveRequest, AgentPushRequest, AgentPushed, AgentWithdrawRequest, Body, Engine,
    SessionDiscoverRequest, SessionForkRequest, SessionHistoryRequest, SessionLsRequest,
    SessionNewRequest, SessionReadRequest, SessionRenderRequest, SessionResumeRequest,
    SessionSetRequest, SessionShowRequest, SessionToolcallRequest, SessionTurnRequest, SetOp,
    TouchedFiles,
};
use strata::object::ToolStatus;
use strata::resolve::absolute_path;

use super::admin::parse_mounts;
use super::{Invocation, output};

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
    /// Approve a write the agent's call was held for (`delete_file`, `rename_file`), by the
    /// token the agent was given; it runs only if the file still has the hash the agent quoted.
    Approve(ApproveArgs),
    /// Push the runtime's unsaved copy of a file: the agent's reads return it and its writes
    /// over it are refused until the file is saved with that content or the copy is withdrawn.
    Push(PushArgs),
    /// Withdraw a pushed copy: the agent sees the file on disk again.
    Withdraw(WithdrawArgs),
}

/// `session push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The session id.
    pub id: String,
    /// The file as the agent's tools name it: an id (f3), a path relative to a mount, or an
    /// absolute agent path.
    pub filepath: String,
    /// The copy: a file, or - for stdin (UTF-8 text).
    #[arg(long, value_name = "FILE|-")]
    pub content: String,
    /// Who pushes (a runtime's name); the agent's calls under the same name build on the copy.
    #[arg(long)]
    pub caller: Option<String>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session withdraw`.
#[derive(Debug, Args)]
pub struct WithdrawArgs {
    /// The session id.
    pub id: String,
    /// The file, as for `session push`.
    pub filepath: String,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// `session approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The session whose agent asked.
    pub id: String,
    /// The token of the held call (`approve-…`), valid once, for an hour.
    pub token: String,
    #[command(flatten)]
    pub json: JsonFlag,
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
    /// No file descriptors for the session's tools (large outputs are then given whole).
    #[arg(long)]
    pub no_descriptors: bool,
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

impl Invocation<'_> {
    /// An agent path from the command line: absolute as given, relative from the current directory.
    fn agent_path(&self, path: &str) -> Result<String> {
        if path.starts_with('/') {
            Ok(path.to_string())
        } else {
            Ok(absolute_path(path, &self.cwd)?)
        }
    }

    /// Reports a commit: its JSON, or `committed tx N` / `nothing changed`.
    fn committed(
        &mut self,
        json: bool,
        tx: Option<u64>,
        report: &impl serde::Serialize,
    ) -> Result<ExitCode> {
        if json {
            self.print_json(report)?;
        } else {
            match tx {
                Some(tx) => writeln!(self.out, "committed tx {tx}")?,
                None => writeln!(self.out, "nothing changed")?,
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    /// Prints a push or a withdrawal (`{verb} fN path sha256`, and whether the copy stands),
    /// then its commit.
    fn pushed(&mut self, json: bool, verb: &str, pushed: &AgentPushed) -> Result<ExitCode> {
        if !json {
            let file = &pushed.file;
            let state = if file.standing {
                "stands"
            } else {
                "does not stand"
            };
            writeln!(
                self.out,
                "{verb} {} {} {} (the copy {state})",
                file.file_id, file.path, file.sha256
            )?;
        }
        self.committed(json, pushed.tx_id, pushed)
    }

    /// Prints what a read or discovery did, then its commit.
    fn touched(&mut self, files: &TouchedFiles, json: bool) -> Result<ExitCode> {
        if !json {
            for t in &files.touched {
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
        self.committed(json, files.tx_id, files)
    }

    /// The session `given` names: an id, or a prefix of exactly one session's id (as entity ids
    /// take prefixes). Anything else is passed on as given, for the engine to refuse.
    fn session_id(&self, given: String) -> Result<String> {
        let ids = self.call(SessionLsRequest {})?;
        if ids.contains(&given) {
            return Ok(given);
        }
        let matches: Vec<&String> = ids.iter().filter(|id| id.starts_with(&given)).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Ok(given),
            many => {
                let shown: Vec<String> = many.iter().take(10).map(|id| format!("  {id}")).collect();
                bail!(
                    "session id prefix {given} is ambiguous; it matches:\n{}\ngive more characters",
                    shown.join("\n")
                )
            }
        }
    }

    fn set_op(&mut self, args: ObjArgs, op: SetOp) -> Result<ExitCode> {
        let done = self.call(SessionSetRequest {
            id: self.session_id(args.id)?,
            object: args.object,
            op,
        })?;
        self.committed(args.json.json, done.tx_id, &done)
    }

    pub(super) fn session(&mut self, command: SessionCommand) -> Result<ExitCode> {
        match command {
            SessionCommand::New(args) => {
                // `new` may create the store: check its arguments first, so a refused one leaves
                // nothing behind.
                let mounts = parse_mounts(&args.mounts)?;
                let system_prompt = match &args.system_prompt {
                    Some(path) => std::fs::read_to_string(self.cwd.join(path))
                        .with_context(|| format!("reading the system prompt {}", path.display()))?,
                    None => String::new(),
                };
                let request = SessionNewRequest {
                    id: args.id,
                    system_prompt,
                    mounts,
                    default_filesystem: args.default_filesystem,
                    descriptors: args.no_descriptors.then_some(false),
                    descriptor_settings: None,
                };
                if !strata::engine::store_exists(self.dir()) {
                    // No store yet: try the session on a scratch store, so that a refused id or
                    // filesystem id does not leave a new empty store behind.
                    Engine::in_memory()?.call(SessionNewRequest {
                        system_prompt: String::new(),
                        ..request.clone()
                    })?;
                }
                let created = if strata::engine::store_exists(self.dir()) {
                    self.call(request)?
                } else {
                    self.engine_creating()?.call(request)?
                };
                if args.json.json {
                    self.print_json(&created)?;
                } else {
                    writeln!(self.out, "{}", created.session_id)?;
                }
            }
            SessionCommand::Ls(JsonFlag { json }) => {
                let ids = self.call(SessionLsRequest {})?;
                if json {
                    self.print_json(&ids)?;
                } else {
                    for id in ids {
                        writeln!(self.out, "{id}")?;
                    }
                }
            }
            SessionCommand::Show(args) => {
                let shown = self.call(SessionShowRequest {
                    id: self.session_id(args.id)?,
                    as_of_tx: args.as_of_tx,
                })?;
                if args.json.json {
                    self.print_json(&shown)?;
                } else {
                    let (index, pool, active, pinned) = shown.counts();
                    writeln!(self.out, "session {}", shown.session_id())?;
                    writeln!(self.out, "commit tx {}", shown.tx_id.unwrap_or(0))?;
                    writeln!(
                        self.out,
                        "index {index}, pool {pool}, active {active}, pinned {pinned}, turns {}",
                        shown.turns.len()
                    )?;
                    for mount in &shown.config.mounts {
                        writeln!(self.out, "mount {mount}")?;
                    }
                }
            }
            SessionCommand::Read(args) => {
                let paths = args
                    .paths
                    .iter()
                    .map(|p| self.agent_path(p))
                    .collect::<Result<Vec<_>>>()?;
                let files = self.call(SessionReadRequest {
                    id: self.session_id(args.id)?,
                    paths,
                })?;
                return self.touched(&files, args.json.json);
            }
            SessionCommand::Discover(args) => {
                let paths = args
                    .paths
                    .iter()
                    .map(|p| self.agent_path(p))
                    .collect::<Result<Vec<_>>>()?;
                let files = self.call(SessionDiscoverRequest {
                    id: self.session_id(args.id)?,
                    paths,
                })?;
                return self.touched(&files, args.json.json);
            }
            SessionCommand::Activate(args) => return self.set_op(args, SetOp::Activate),
            SessionCommand::Deactivate(args) => return self.set_op(args, SetOp::Deactivate),
            SessionCommand::Pin(args) => return self.set_op(args, SetOp::Pin),
            SessionCommand::Unpin(args) => return self.set_op(args, SetOp::Unpin),
            SessionCommand::Toolcall(args) => {
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
                let recorded = self.call(SessionToolcallRequest {
                    id: self.session_id(args.id)?,
                    tool: args.tool,
                    args: call_args,
                    args_display: args.args_display,
                    call_id: args.call_id,
                    status,
                    // A path on disk travels absolute (the engine has no current directory).
                    file_refs: args
                        .file_refs
                        .into_iter()
                        .map(|r| {
                            let path = self.cwd.join(&r);
                            if !r.is_empty() && path.exists() {
                                path.display().to_string()
                            } else {
                                r
                            }
                        })
                        .collect(),
                    output: output_text,
                })?;
                if !args.json.json {
                    writeln!(self.out, "{}", recorded.id)?;
                }
                return self.committed(args.json.json, recorded.tx_id, &recorded);
            }
            SessionCommand::Turn(args) => {
                let content = if args.content == "-" {
                    text_arg("-", "the turn")?
                } else {
                    args.content
                };
                let appended = self.call(SessionTurnRequest {
                    id: self.session_id(args.id)?,
                    role: args.role,
                    content,
                    toolcall_refs: args.toolcall_refs,
                })?;
                return self.committed(args.json.json, appended.tx_id, &appended);
            }
            SessionCommand::Render(args) => {
                let rendered = self.call(SessionRenderRequest {
                    id: self.session_id(args.id)?,
                    budget: args.budget,
                    as_of_tx: args.as_of_tx,
                })?;
                if args.json.json {
                    self.print_json(&rendered)?;
                } else {
                    writeln!(self.out, "{}", rendered.text)?;
                }
            }
            SessionCommand::Resume(args) => {
                let report = self.call(SessionResumeRequest {
                    id: self.session_id(args.id)?,
                })?;
                if args.json.json {
                    self.print_json(&report)?;
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
                let forked = self.call(SessionForkRequest {
                    id: self.session_id(args.id)?,
                    as_of_tx: args.as_of_tx,
                    new_id: args.new_id,
                })?;
                if args.json.json {
                    self.print_json(&forked)?;
                } else {
                    writeln!(self.out, "{}", forked.session_id)?;
                }
            }
            SessionCommand::Approve(args) => {
                let called = self.call(AgentApproveRequest {
                    session: self.session_id(args.id)?,
                    token: args.token,
                    caller: Some("strata session approve".into()),
                })?;
                if args.json.json {
                    self.print_json(&called)?;
                } else {
                    writeln!(self.out, "{}", called.answer.text)?;
                }
                if called.answer.is_error {
                    return Ok(ExitCode::FAILURE);
                }
            }
            SessionCommand::Push(args) => {
                let bytes = if args.content == "-" {
                    let mut bytes = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut bytes)
                        .context("reading the copy from stdin")?;
                    bytes
                } else {
                    std::fs::read(&args.content)
                        .with_context(|| format!("reading the copy from {}", args.content))?
                };
                let (text, base64) = match Body::of(bytes) {
                    Body::Text { text } => (Some(text), None),
                    Body::Base64 { base64 } => (None, Some(base64)),
                };
                let pushed = self.call(AgentPushRequest {
                    session: self.session_id(args.id)?,
                    filepath: args.filepath,
                    text,
                    base64,
                    caller: args.caller,
                })?;
                return self.pushed(args.json.json, "pushed", &pushed);
            }
            SessionCommand::Withdraw(args) => {
                let withdrawn = self.call(AgentWithdrawRequest {
                    session: self.session_id(args.id)?,
                    filepath: args.filepath,
                })?;
                return self.pushed(args.json.json, "withdrew", &withdrawn);
            }
            SessionCommand::History(args) => {
                let history = self.call(SessionHistoryRequest {
                    id: self.session_id(args.id)?,
                })?;
                if args.json.json {
                    self.print_json(&history)?;
                } else {
                    let rows: Vec<Vec<String>> = history
                        .commits
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
}
