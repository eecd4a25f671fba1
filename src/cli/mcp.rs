//! `strata mcp`: builds the MCP server for the mode its arguments and environment ask for, and
//! serves it on stdin and stdout.
//!
//! Uses `server`. Docs mode (`--docs-path` or
//! `DOCS_PATH`) reads the arguments as docs-mcp does and needs no store; without it the server
//! lists no tools yet. Logs go to stderr (`STRATA_LOG`: error, warn, info, debug or trace;
//! default warn).

use std::process::ExitCode;

use anyhow::{Context, Result};
use strata::server::mcp::{McpServer, run_stdio};
use tracing::Level;

use super::Invocation;
use super::args::McpArgs;

impl Invocation<'_> {
    /// `strata mcp [ARGS…]`: serves until stdin ends.
    pub(super) fn mcp(&mut self, args: McpArgs) -> Result<ExitCode> {
        init_logging();
        let server = McpServer::from_args_and_env(&args.args, |name| std::env::var(name).ok())?;
        run_stdio(server).context("serving MCP on stdio")?;
        Ok(ExitCode::SUCCESS)
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
