//! The daemon's wire protocol: JSON-RPC 2.0, one JSON message per line, over the store's Unix
//! socket. The engine's methods (`show`, `session.read`, … with the params and results of
//! `schema/rpc/`) plus the daemon's own: `handshake`, `status`, `stop`, `subscribe` (every commit as a `commit`
//! notification; with `paths` or `sessions`, one `change` notification per file changed under
//! those path prefixes or held by those sessions).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::Error;

/// The protocol version the daemon speaks; a client of another major version is refused.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The socket's file name inside the store directory.
pub const SOCKET_FILE: &str = "strata.sock";

/// The daemon's log file name inside the store directory (auto-started daemons log there).
pub const LOG_FILE: &str = "daemon.log";

/// The largest message the daemon reads (64 MiB); a longer line is refused.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// JSON-RPC's standard error codes, and the daemon's own (-32000 to -32099) by error kind.
pub mod code {
    /// The message is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The message is JSON but not a JSON-RPC request (or too large).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method, or a value is out of range.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The daemon broke one of its own invariants.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The thing asked for does not exist.
    pub const NOT_FOUND: i64 = -32001;
    /// A precondition on the current state failed.
    pub const CONFLICT: i64 = -32002;
    /// A path was rejected.
    pub const INVALID_PATH: i64 = -32003;
    /// Refused by configuration, or the peer is another user.
    pub const PERMISSION_DENIED: i64 = -32004;
    /// Stored data failed a check.
    pub const CORRUPT: i64 = -32005;
    /// The store is held by another process.
    pub const STORE_LOCKED: i64 = -32006;
    /// The store has another format version.
    pub const FORMAT_VERSION: i64 = -32007;
    /// An I/O or storage engine failure.
    pub const IO: i64 = -32008;
    /// The client speaks another major protocol version.
    pub const PROTOCOL_VERSION: i64 = -32009;
}

/// The JSON-RPC error code of an engine error.
pub fn error_code(err: &Error) -> i64 {
    match err.kind() {
        "not_found" => code::NOT_FOUND,
        "conflict" => code::CONFLICT,
        "invalid_path" => code::INVALID_PATH,
        "invalid_input" => code::INVALID_PARAMS,
        "permission_denied" => code::PERMISSION_DENIED,
        "corrupt" => code::CORRUPT,
        "store_locked" => code::STORE_LOCKED,
        "format_version" => code::FORMAT_VERSION,
        "io" | "storage" => code::IO,
        _ => code::INTERNAL_ERROR,
    }
}

/// The `error` member of a response to `err`: its code, its message, and `data` with its kind
/// and its causes' messages (a client rebuilds the same error text from them).
pub fn error_object(err: &Error) -> Value {
    json!({
        "code": error_code(err),
        "message": err.to_string(),
        "data": {"kind": err.kind(), "causes": err.causes()},
    })
}

/// An `error` member for a protocol-level problem (no engine error behind it).
pub fn protocol_error(code: i64, kind: &str, message: impl Into<String>) -> Value {
    json!({
        "code": code,
        "message": message.into(),
        "data": {"kind": kind, "causes": []},
    })
}

/// A response line: `result` or `error` for request `id`.
pub fn response(id: &Value, outcome: Result<Value, Value>) -> String {
    let message = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    message.to_string()
}

/// A notification line (no id): `method` with `params`.
pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// The error of a response, as the engine error it was: its kind and texts kept, so a front
/// end prints what it would have printed in-process.
pub fn remote_error(error: &Value) -> Error {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let data = error.get("data");
    let kind = data
        .and_then(|d| d.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("remote")
        .to_string();
    let causes = data
        .and_then(|d| d.get("causes"))
        .and_then(Value::as_array)
        .map(|causes| {
            causes
                .iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Error::Remote {
        kind,
        message: text(error.get("message")),
        cause: crate::error::RemoteCause::chain(causes),
    }
}

/// What `handshake` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Handshake {
    /// The protocol version the daemon speaks.
    pub protocol: String,
    /// The daemon's program and version, e.g. `strata 0.1.0`.
    pub server: String,
    /// The daemon's process id.
    pub pid: u32,
}

/// What `status` answers: the daemon's state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Status {
    /// The daemon's process id.
    pub pid: u32,
    /// When it started (RFC 3339).
    pub started: String,
    /// Seconds since it started.
    pub uptime_seconds: f64,
    /// Clients connected now.
    pub clients: u64,
    /// Requests answered since it started.
    pub requests: u64,
    /// Requests being answered now.
    pub in_flight: u64,
    /// The store's latest durable transaction: lazy commits are made durable first, and one
    /// that cannot be (a store marked damaged, a full disk) is not named.
    pub last_tx: Option<u64>,
    /// Writes waiting for a commit now.
    pub queued_writes: u64,
    /// The store directory.
    pub store: String,
    /// Seconds without a client after which it exits (`None`: it runs until stopped).
    pub idle_timeout_seconds: Option<u64>,
    /// The file watcher's counters (`None`: no root is watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<crate::watch::WatchStatus>,
}
