//! `McpServer`: the MCP server of `strata mcp`, over stdio, on rmcp (the official Rust SDK).
//!
//! Uses `agent` (docs mode), `engine` (session mode), the daemon's client and `error`. Nothing
//! but protocol reaches stdout: [`run_stdio`] writes newline-delimited JSON-RPC
//! to a duplicate of file descriptor 1 (so no lock on Rust's `Stdout`, which a caller may hold,
//! can block it) and tracing logs go to stderr.
//!
//! # Modes
//! - Docs mode ([`McpServer::docs`]) is a drop-in for docs-mcp: its five tools with the original's
//!   names, descriptions and input schemas, its `serverInfo` (`documentation-server` 1.0.0), and
//!   each `tools/call` answered with the original's text as the result's one text content, errors
//!   included, without an `isError` flag.
//! - Session mode ([`McpServer::session`]), without `--docs-path`: the agent tools of one session
//!   of a store (`agent.tools`, `agent.call`), sent to the store's daemon or to an engine in this
//!   process ([`Backend`]). Each call is recorded in the session with the client's name from
//!   `initialize`; a tool's failure is a result with `isError`, a tool the session does not
//!   offer a JSON-RPC error. `initialize` gives the session id and, when the session has
//!   descriptors, the `<file_descriptor_instructions>` as the server's instructions.
//! - [`McpServer::without_tools`] answers `initialize` and lists no tools (for embedding).
//!
//! # Why rmcp, and where it differs from the original's TypeScript SDK
//! rmcp keeps every behaviour a client can observe: it answers `initialize` at once and serves
//! requests that arrive before `notifications/initialized` (as the TypeScript SDK does, with no
//! gate), negotiates the protocol version (the client's when supported, else its newest with an
//! `initialize`), and also speaks the handshake-free revision 2026-07-28 that current clients
//! start with, which a hand-written loop would have to follow release by release. Two
//! differences remain, neither visible to a client that parses JSON: the keys of each tool's
//! `inputSchema` come out in sorted order (`properties`, `required`, `type`; serde_json's map,
//! where the original keeps insertion order), and a request sent before any `initialize` gets a
//! JSON-RPC error where the TypeScript server would answer it.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::agent::docs::{DocsConfig, DocsLibrary, server_info, tool_definitions};
use crate::engine::{AgentCallRequest, AgentToolsRequest, Apply, Engine};
use crate::error::{Error, Result};
use crate::server::client::Client;

/// The name strata gives in `initialize` outside docs mode.
pub const SERVER_NAME: &str = "strata";

/// An MCP server: what `initialize` says and which tools it lists and calls, by mode.
#[derive(Clone, Debug)]
pub struct McpServer {
    mode: Mode,
    implementation: Implementation,
    tools: Arc<[Tool]>,
    /// What `initialize` says about using the server (session mode).
    instructions: Option<String>,
}

/// What answers `tools/call`.
#[derive(Clone, Debug)]
enum Mode {
    /// docs-mcp's five tools over one library.
    Docs(Arc<DocsLibrary>),
    /// The agent tools of one session.
    Session {
        /// Where requests go.
        backend: Backend,
        /// The session id.
        session: String,
    },
    /// No tools.
    Empty,
}

/// Where session mode sends its engine requests: an engine in this process, or the store's
/// daemon over its socket (one connection, one request at a time).
#[derive(Clone, Debug)]
pub enum Backend {
    /// An engine in this process (it holds the store).
    Engine(Arc<Engine>),
    /// The store's daemon.
    Daemon(Arc<std::sync::Mutex<Client>>),
}

impl Backend {
    /// Answers `request` here or through the daemon.
    ///
    /// # Errors
    /// The request's errors (as [`Error::Remote`] through the daemon); [`Error::Io`] when the
    /// daemon went away.
    pub fn call<R: Apply>(&self, request: R) -> Result<R::Response> {
        match self {
            Backend::Engine(engine) => engine.call(request),
            Backend::Daemon(client) => client
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .call(request),
        }
    }
}

impl McpServer {
    /// Docs mode over `library`: docs-mcp's server info and its five tools.
    ///
    /// # Errors
    /// [`Error::Invariant`] if a tool definition or the server info does not fit MCP's types
    /// (a bug: they are constants).
    pub fn docs(library: DocsLibrary) -> Result<Self> {
        let invariant = |what: &str, e: serde_json::Error| Error::Invariant {
            what: format!("docs mode's {what} is not valid MCP: {e}"),
        };
        let tools = tool_definitions()
            .into_iter()
            .map(serde_json::from_value::<Tool>)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| invariant("tool list", e))?;
        let implementation = serde_json::from_value::<Implementation>(server_info())
            .map_err(|e| invariant("server info", e))?;
        Ok(Self {
            mode: Mode::Docs(Arc::new(library)),
            implementation,
            tools: tools.into(),
            instructions: None,
        })
    }

    /// Whether `args` and `env` ask for docs mode (`--docs-path` or `DOCS_PATH`, read as docs-mcp
    /// reads them).
    pub fn docs_requested<S, E>(args: &[S], env: E) -> bool
    where
        S: AsRef<str>,
        E: Fn(&str) -> Option<String>,
    {
        DocsConfig::requested(args, env).is_some()
    }

    /// The server that `strata mcp ARGS…` asks for: docs mode when `args` (read as docs-mcp reads
    /// its own) name a directory or `env` has `DOCS_PATH`, else [`McpServer::without_tools`].
    ///
    /// # Errors
    /// As [`McpServer::docs`].
    pub fn from_args_and_env<S, E>(args: &[S], env: E) -> Result<Self>
    where
        S: AsRef<str>,
        E: Fn(&str) -> Option<String>,
    {
        match DocsConfig::requested(args, env) {
            Some(config) => {
                let library = DocsLibrary::open(config);
                tracing::info!(
                    files = library.files().len(),
                    paths = ?library.config().documentation_paths,
                    "docs mode"
                );
                Self::docs(library)
            }
            None => Ok(Self::without_tools()),
        }
    }

    /// Session mode: the agent tools of session `session`, answered by `backend`.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown session; the backend's errors.
    pub fn session(backend: Backend, session: &str) -> Result<Self> {
        let listed = backend.call(AgentToolsRequest {
            session: session.to_string(),
        })?;
        let tools = listed
            .tools
            .into_iter()
            .map(serde_json::from_value::<Tool>)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Invariant {
                what: format!("a session tool's definition is not valid MCP: {e}"),
            })?;
        let mut instructions = format!(
            "These tools read the files of strata session {session}: list_files gives file ids \
             (f1, f2, …) that every tool takes as filepath; reads return sha256, the hash a later \
             write quotes."
        );
        if let Some(fd) = listed.instructions {
            instructions.push_str("\n\n");
            instructions.push_str(&fd);
        }
        Ok(Self {
            mode: Mode::Session {
                backend,
                session: session.to_string(),
            },
            implementation: Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")),
            tools: tools.into(),
            instructions: Some(instructions),
        })
    }

    /// The session mode's session id, if this server is in session mode.
    pub fn session_id(&self) -> Option<&str> {
        match &self.mode {
            Mode::Session { session, .. } => Some(session),
            _ => None,
        }
    }

    /// A server that answers `initialize` as `strata` and lists no tools.
    pub fn without_tools() -> Self {
        Self {
            mode: Mode::Empty,
            implementation: Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")),
            tools: Arc::from(Vec::new()),
            instructions: None,
        }
    }

    /// The tools `tools/list` gives, in order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The `serverInfo` that `initialize` gives.
    pub fn implementation(&self) -> &Implementation {
        &self.implementation
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = self.implementation.clone();
        config.instructions = self.instructions.clone();
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.into_owned();
        let library = match &self.mode {
            Mode::Docs(library) => Arc::clone(library),
            Mode::Session { backend, session } => {
                let caller = context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone());
                let call = AgentCallRequest {
                    session: session.clone(),
                    tool: name,
                    args: request.arguments.unwrap_or_default(),
                    caller,
                };
                return session_call(backend.clone(), call).await;
            }
            Mode::Empty => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool: {name} (this server lists no tools without --docs-path)"
                    ),
                    None,
                ));
            }
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        // The tools read files and run regexes: off the protocol's thread, and a panic in one
        // becomes an error answer instead of ending the server.
        let text = tokio::task::spawn_blocking(move || library.call_tool(&name, &arguments).text)
            .await
            .map_err(|e| {
                tracing::error!("a docs tool failed: {e}");
                ErrorData::internal_error("internal error: the tool failed; please report it", None)
            })?;
        let mut result = CallToolResult::default();
        result.content = vec![ContentBlock::text(text)];
        Ok(result.into())
    }
}

/// Runs one session tool call off the protocol's thread: the tool's answer (its failure with
/// `isError`), or a JSON-RPC error for a tool the session does not offer.
async fn session_call(
    backend: Backend,
    call: AgentCallRequest,
) -> std::result::Result<CallToolResponse, ErrorData> {
    let answered = tokio::task::spawn_blocking(move || backend.call(call))
        .await
        .map_err(|e| {
            tracing::error!("a session tool failed: {e}");
            ErrorData::internal_error("internal error: the tool failed; please report it", None)
        })?;
    let (text, is_error) = match answered {
        Ok(called) => (called.answer.text, called.answer.is_error),
        Err(e) if e.kind() == "invalid_input" => {
            return Err(ErrorData::invalid_params(e.to_string(), None));
        }
        Err(e) => {
            tracing::warn!("a session tool call failed: {e}");
            (crate::agent::tools::error_text(&e), true)
        }
    };
    let result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    Ok(result.into())
}

/// Serves MCP on `reader` and `writer` (newline-delimited JSON-RPC) until the client closes its
/// end; a client that leaves before `initialize` is not an error.
///
/// # Errors
/// [`Error::Io`] when the transport fails during the handshake or the service's task fails.
pub async fn serve<R, W>(server: McpServer, reader: R, writer: W) -> Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = match server.serve((reader, writer)).await {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => {
            return Err(Error::io(
                "starting the MCP session",
                io::Error::other(e.to_string()),
            ));
        }
    };
    running
        .waiting()
        .await
        .map_err(|e| Error::io("serving MCP", io::Error::other(e.to_string())))?;
    Ok(())
}

/// Serves MCP on this process's stdin and stdout on a single-threaded tokio runtime (tool calls
/// run on its blocking pool) until stdin ends.
///
/// # Errors
/// [`Error::Io`] when the runtime cannot start, stdout cannot be duplicated, or [`serve`] fails.
pub fn run_stdio(server: McpServer) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the MCP server's runtime", e))?;
    let result = runtime.block_on(async {
        let stdout = io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("duplicating stdout for the MCP protocol", e))?;
        let writer = tokio::fs::File::from_std(std::fs::File::from(stdout));
        serve(server, tokio::io::stdin(), writer).await
    });
    // A read of stdin still pending (the server stopped for another reason) cannot be cancelled;
    // do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}
