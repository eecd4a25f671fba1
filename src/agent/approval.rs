//! Approval of writes (seed 001's permissions): the settings' `[file_access.permissions]`
//! decide per path and per tool whether a write runs (`auto`), waits for a person (`manual`) or
//! is refused (`deny`); by default `delete_file` and `rename_file` need a person's approval and
//! `.env`, `secrets/**/*` and `credentials.json` are refused. A held call answers
//! `APPROVAL_REQUIRED` with a token and writes nothing; only a person redeems the token, through
//! the engine request `agent.approve` (which no MCP tool exposes), within [`APPROVAL_TTL`]; the
//! call then runs as the agent made it, so it applies only if the file still has the hash the
//! agent quoted. A token is used once.
//!
//! Pending approvals live with the live session (the agent layer's cache): a daemon keeps them
//! while it runs; a session reloaded (a restart) has none, and the agent asks again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::tools::FD_TO_FILE;
use crate::error::{Error, Result};
use crate::index::ApprovalMode;
use crate::session::Session;

/// How long a token can be redeemed by default (seed 001 sets none; one hour).
pub const APPROVAL_TTL: Duration = Duration::from_secs(3600);

/// The environment variable that sets another lifetime for tokens, in seconds (tests).
pub const APPROVAL_TTL_VAR: &str = "STRATA_APPROVAL_TTL_SECS";

/// The lifetime of tokens: [`APPROVAL_TTL`] unless [`APPROVAL_TTL_VAR`] says otherwise.
pub fn approval_ttl() -> Duration {
    std::env::var(APPROVAL_TTL_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(APPROVAL_TTL, Duration::from_secs)
}

/// One call waiting for a person.
struct Pending {
    tool: String,
    args: Map<String, Value>,
    made: Instant,
}

/// The pending approvals of a live session, by token.
#[derive(Default)]
struct Approvals(HashMap<String, Pending>);

/// The path arguments of the writing tools: what their permission is decided on.
const PATH_ARGS: [&str; 3] = ["filepath", "new_filepath", "file_path"];

/// What the settings' `[file_access.permissions]` decide for the call `tool(args)`: the
/// strictest mode of the paths it writes (each relative to its mount), with the rule that
/// decided it. A reading tool, and a path that does not resolve (the tool itself then says
/// why), decide nothing.
pub(crate) fn decide(
    session: &mut Session,
    tool: &str,
    args: &Map<String, Value>,
) -> (ApprovalMode, Option<String>) {
    if !super::tools::WRITING_TOOLS.contains(&tool) && tool != FD_TO_FILE {
        return (ApprovalMode::Auto, None);
    }
    let mut paths: Vec<String> = PATH_ARGS
        .iter()
        .filter_map(|key| args.get(*key)?.as_str().map(str::to_string))
        .collect();
    if let Some(files) = args.get("files").and_then(Value::as_array) {
        paths.extend(
            files
                .iter()
                .filter_map(|f| f.get("docPath")?.as_str().map(str::to_string)),
        );
    }
    let rank = |mode: ApprovalMode| match mode {
        ApprovalMode::Auto => 0,
        ApprovalMode::Manual => 1,
        ApprovalMode::Deny => 2,
    };
    let mut decided = (ApprovalMode::Auto, None);
    for path in paths {
        let Ok(file) = super::files::resolve(session, &path) else {
            continue;
        };
        let (mode, why) = session.write_policy().decide(tool, &file.filename);
        if rank(mode) > rank(decided.0) || decided.1.is_none() {
            decided = (mode, Some(why));
        }
    }
    decided
}

/// Keeps the call `tool(args)` until a person approves it and answers the agent with the
/// token: `{"success": false, "errorCode": "APPROVAL_REQUIRED", "errorMessage", "approval"}`.
pub(crate) fn hold(session: &mut Session, tool: &str, args: &Map<String, Value>) -> String {
    let token = Session::new_toolcall_id().replace("toolcall:", "approve-");
    let ttl = approval_ttl();
    if session.agent_cache::<Approvals>().is_none() {
        session.set_agent_cache(Approvals::default());
    }
    if let Some(approvals) = session.agent_cache::<Approvals>() {
        approvals
            .0
            .retain(|_, pending| pending.made.elapsed() < ttl);
        approvals.0.insert(
            token.clone(),
            Pending {
                tool: tool.to_string(),
                args: args.clone(),
                made: Instant::now(),
            },
        );
    }
    json!({
        "success": false,
        "errorCode": "APPROVAL_REQUIRED",
        "errorMessage": format!(
            "{tool} needs a person's approval; nothing was changed. Ask the user to approve token {token} (valid for {} seconds); it applies only if the file has not changed since.", ttl.as_secs()
        ),
        "approval": {"token": token, "expires_in_seconds": ttl.as_secs()},
    })
    .to_string()
}

/// Takes the call held under `token`: the tool and its arguments.
///
/// # Errors
/// [`Error::NotFound`] for a token this session never gave, one already used, or one from
/// before the session was reloaded; [`Error::InvalidInput`] for an expired one.
pub(crate) fn take(session: &mut Session, token: &str) -> Result<(String, Map<String, Value>)> {
    let pending = session
        .agent_cache::<Approvals>()
        .and_then(|approvals| approvals.0.remove(token))
        .ok_or_else(|| {
            Error::not_found(format!(
                "approval token {token} in session {} (unknown, already used, or given before the session was reloaded); the agent must ask again",
                session.id()
            ))
        })?;
    let ttl = approval_ttl();
    if pending.made.elapsed() >= ttl {
        return Err(Error::invalid_input(format!(
            "approval token {token} expired (tokens are valid for {} seconds); the agent must ask again",
            ttl.as_secs()
        )));
    }
    Ok((pending.tool, pending.args))
}
