//! `Error`: the one error type of the strata library, with variants a caller can act on.
//!
//! Uses no other module.

use std::path::PathBuf;

/// The result type of every fallible strata function.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in strata, split by what the caller can do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The thing asked for does not exist (an entity, a version, a content, a session).
    #[error("not found: {what}")]
    NotFound {
        /// What was looked for, in words a user recognises (`entity 3f2a…`, `tx 12`).
        what: String,
    },

    /// A precondition on the current state failed (optimistic concurrency, an id owned by someone else).
    #[error("conflict on {entity}: expected {expected}, found {actual}")]
    Conflict {
        /// The entity whose state disagreed.
        entity: String,
        /// What the caller expected (an object hash, or `absent`).
        expected: String,
        /// What the store holds now (an object hash, or `absent`).
        actual: String,
    },

    /// A path was rejected; `reason` says why and what would be accepted.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as the caller gave it (lossily converted when it was not UTF-8).
        path: String,
        /// Why it was rejected.
        reason: String,
    },

    /// A value given by the caller is malformed or out of range; `reason` says what and what to do.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What was wrong with the input.
        reason: String,
    },

    /// The operation is refused by configuration (a read-only mount, a deny rule).
    #[error("permission denied: {reason}")]
    PermissionDenied {
        /// Which rule refused it.
        reason: String,
    },

    /// Stored data failed a check (a hash that does not match its bytes, a dangling reference).
    #[error("corrupt store: {what}")]
    Corrupt {
        /// What failed verification.
        what: String,
    },

    /// Another process holds the store; `holder` describes it as its lock file records it.
    #[error("store {path} is locked by another process ({holder}); stop it or use its daemon")]
    StoreLocked {
        /// The store file that could not be opened.
        path: PathBuf,
        /// The holder as the lock file records it (pid, program, start time), or `unknown`.
        holder: String,
    },

    /// The store file was written by another format version of strata.
    #[error(
        "store {path} has format version {found}, this strata reads version {supported}; open it with the strata that wrote it, or index into a new store (--store DIR)"
    )]
    FormatVersion {
        /// The store file.
        path: PathBuf,
        /// The version found in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },

    /// An I/O operation failed; `context` says what strata was doing (the cause is its source).
    #[error("{context}")]
    Io {
        /// What was being done, e.g. `reading /tmp/a.txt`.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The storage engine failed in a way that is not one of the cases above; `context` says
    /// what strata was doing, the engine's own error is the source.
    #[error("storage engine: {context}")]
    Storage {
        /// What was being done.
        context: String,
        /// The storage engine's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An error the daemon answered a request with: its kind (as [`Error::kind`] names them),
    /// its message, and the messages of its causes.
    #[error("{message}")]
    Remote {
        /// The kind of the daemon's error (`not_found`, `corrupt`, …).
        kind: String,
        /// The daemon's error message.
        message: String,
        /// Its causes' messages, outermost first.
        #[source]
        cause: Option<Box<RemoteCause>>,
    },

    /// Something strata holds true did not hold (a bug, not bad input or a damaged store): the
    /// operation stopped before changing anything it could not finish.
    #[error("internal error: {what}; please report it")]
    Invariant {
        /// What did not hold.
        what: String,
    },
}

/// One cause of an [`Error::Remote`], as text, with the next one as its source.
#[derive(Debug)]
pub struct RemoteCause {
    text: String,
    next: Option<Box<RemoteCause>>,
}

impl RemoteCause {
    /// The chain of `causes`, outermost first (`None` when there is none).
    pub fn chain(causes: Vec<String>) -> Option<Box<RemoteCause>> {
        causes.into_iter().rev().fold(None, |next, text| {
            Some(Box::new(RemoteCause { text, next }))
        })
    }
}

impl std::fmt::Display for RemoteCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for RemoteCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.next
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    /// What kind of error this is, in one word a program can match (the JSON-RPC error's
    /// `data.kind`): `not_found`, `conflict`, `invalid_path`, `invalid_input`,
    /// `permission_denied`, `corrupt`, `store_locked`, `format_version`, `io`, `storage`,
    /// `invariant`, or a remote error's own kind.
    pub fn kind(&self) -> &str {
        match self {
            Error::NotFound { .. } => "not_found",
            Error::Conflict { .. } => "conflict",
            Error::InvalidPath { .. } => "invalid_path",
            Error::InvalidInput { .. } => "invalid_input",
            Error::PermissionDenied { .. } => "permission_denied",
            Error::Corrupt { .. } => "corrupt",
            Error::StoreLocked { .. } => "store_locked",
            Error::FormatVersion { .. } => "format_version",
            Error::Io { .. } => "io",
            Error::Storage { .. } => "storage",
            Error::Remote { kind, .. } => kind,
            Error::Invariant { .. } => "invariant",
        }
    }

    /// The messages of this error's causes, outermost first.
    pub fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut cause = std::error::Error::source(self);
        while let Some(err) = cause {
            out.push(err.to_string());
            cause = err.source();
        }
        out
    }

    /// Builds an [`Error::Io`] from an I/O error and a description of what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Builds an [`Error::InvalidInput`] with the given reason.
    pub fn invalid_input(reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            reason: reason.into(),
        }
    }

    /// Builds an [`Error::InvalidPath`] for `path` with the given reason.
    pub fn invalid_path(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidPath {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// Builds an [`Error::NotFound`] naming what was looked for.
    pub fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound { what: what.into() }
    }

    /// Builds an [`Error::Storage`] from a storage engine's error and what was being done.
    pub fn storage(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Storage {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Builds an [`Error::Invariant`] saying what did not hold.
    pub fn invariant(what: impl Into<String>) -> Self {
        Error::Invariant { what: what.into() }
    }

    /// The whole message: this error's text and each of its causes, joined by `: `, as a front
    /// end without an error chain (JSON-RPC, MCP) shows it.
    pub fn full_message(&self) -> String {
        let mut text = self.to_string();
        for cause in self.causes() {
            text.push_str(": ");
            text.push_str(&cause);
        }
        text
    }

    /// Builds an [`Error::Corrupt`] naming what failed verification.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt { what: what.into() }
    }

    /// This error with `done` (what had already happened when it came, e.g. that an eviction
    /// committed before the scrub after it failed) put before its message; an I/O, storage or
    /// corruption error keeps its kind, any other becomes the source of a storage error.
    #[must_use]
    pub fn after(self, done: &str) -> Self {
        match self {
            Error::Io { context, source } => Error::Io {
                context: format!("{done}: {context}"),
                source,
            },
            Error::Storage { context, source } => Error::Storage {
                context: format!("{done}: {context}"),
                source,
            },
            Error::Corrupt { what } => Error::Corrupt {
                what: format!("{done}: {what}"),
            },
            other => Error::storage(done, other),
        }
    }
}
