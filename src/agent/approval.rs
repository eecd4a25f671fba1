//! Approval of writes (seed 001's `require_approval`): `delete_file` and `rename_file` need a
//! person's approval by default. The agent's call answers `APPROVAL_REQUIRED` with a token and
//! writes nothing; only a person redeems the token, through the engine request `agent.approve`
//! (which no MCP tool exposes), within [`APPROVAL_TTL`]; the call then runs as the agent made it,
//! so it applies only if the file still has the hash the agent quoted. A token is used once.
//!
//! Pending approvals live with the live session (the agent layer's cache): a daemon keeps them
//! while it runs; a session reloaded (a restart) has none, and the agent asks again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::tools::{DELETE_FILE, RENAME_FILE};
use crate::error::{Error, Result};
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

/// The tools that need a person's approval (seed 001's `require_approval` defaults).
pub const REQUIRE_APPROVAL: [&str; 2] = [DELETE_FILE, RENAME_FILE];

/// One call waiting for a person.
struct Pending {
    tool: String,
    args: Map<String, Value>,
    made: Instant,
}

/// The pending approvals of a live session, by token.
#[derive(Default)]
struct Approvals(HashMap<String, Pending>);

/// Whether `tool` needs a person's approval.
pub fn needs_approval(tool: &str) -> bool {
    REQUIRE_APPROVAL.contains(&tool)
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
