//! `WritePatchRequest`: seed 002's `workspace_write_patch` arguments, field for field, and the
//! original's error codes.
//!
//! A leaf of `patch`.
//!
//! Every field is optional when read, so that a missing or `null` field reaches the validator,
//! which reports it with the original's message; only a value of the wrong JSON type (a string
//! where a number belongs) is a `DESERIALIZATION_ERROR`. Unknown fields are ignored. Errors are
//! data ([`Failure`]), never a panic.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The arguments of `workspace_write_patch`: one batch of line changes over one or more files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WritePatchRequest {
    /// A label for people reading the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_label: Option<String>,
    /// The caller's own key for the batch, echoed back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_key: Option<String>,
    /// The files to change, each at most once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<FilePatch>>,
}

/// The changes to one file, based on the version whose SHA-256 is `originalSha256`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FilePatch {
    /// The caller's own key for this file, echoed back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_key: Option<String>,
    /// The file's path as the agent knows it (seed 002's opaque key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc_path: Option<String>,
    /// The SHA-256 of the whole file as a reading tool returned it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_sha256: Option<String>,
    /// A label for people reading the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_label: Option<String>,
    /// The changes, ordered top to bottom, not overlapping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<Change>>,
}

/// One line change as the agent wrote it: `insert`, `replace` or `delete`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Change {
    /// The caller's own key for this change, echoed back and used in messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_key: Option<String>,
    /// `insert`, `replace` or `delete` (trimmed, any case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// What the change is for, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For `insert`: the line after which the new lines go; 0 is the top of the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_line: Option<i64>,
    /// For `replace` and `delete`: the first line of the range (1-based, inclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<i64>,
    /// For `replace` and `delete`: the last line of the range (1-based, inclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<i64>,
    /// For `replace` and `delete`: the lines the range holds now, checked exactly when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_original_lines: Option<Vec<String>>,
    /// For `insert` and `replace`: the lines to write, one element per line, without line breaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_lines: Option<Vec<String>>,
}

/// The original's error codes, carried in a result's `errorCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The request was cancelled before it changed anything (set by the engine).
    Cancelled,
    /// The tool was called without arguments.
    MissingArguments,
    /// The arguments are not the request's shape (a value of the wrong JSON type).
    DeserializationError,
    /// The request breaks a rule; the message says which (the validator's messages).
    ValidationFailed,
    /// The file changed or does not match the patch; the result's `conflict` says how.
    Conflict,
    /// Reading or writing the store or the file failed (set by the engine).
    StoreError,
    /// Anything else; a bug.
    UnexpectedError,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::MissingArguments => "MISSING_ARGUMENTS",
            ErrorCode::DeserializationError => "DESERIALIZATION_ERROR",
            ErrorCode::ValidationFailed => "VALIDATION_FAILED",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::StoreError => "STORE_ERROR",
            ErrorCode::UnexpectedError => "UNEXPECTED_ERROR",
        })
    }
}

/// A failed request as data: the code and the message for the agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// What kind of failure it is.
    pub error_code: ErrorCode,
    /// What went wrong, for the agent.
    pub error_message: String,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error_code: code,
            error_message: message.into(),
        }
    }

    /// A `VALIDATION_FAILED` failure with `message`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationFailed, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.error_code, self.error_message)
    }
}

impl std::error::Error for Failure {}

/// Reads `workspace_write_patch` arguments; `Ok(None)` for a JSON `null`, which the validator
/// rejects with the original's message.
///
/// # Errors
/// `MISSING_ARGUMENTS` when `args` is `None`; `DESERIALIZATION_ERROR` when it is not an object or
/// a field has the wrong JSON type.
pub fn parse_request(args: Option<&Value>) -> Result<Option<WritePatchRequest>, Failure> {
    let Some(args) = args else {
        return Err(Failure::new(
            ErrorCode::MissingArguments,
            "apply_patch needs arguments: \
             {files:[{docPath, originalSha256, changes:[…]}]}.",
        ));
    };
    if args.is_null() {
        return Ok(None);
    }
    if !args.is_object() {
        return Err(Failure::new(
            ErrorCode::DeserializationError,
            "Could not read the arguments: expected a JSON object.",
        ));
    }
    WritePatchRequest::deserialize(args).map(Some).map_err(|e| {
        Failure::new(
            ErrorCode::DeserializationError,
            format!("Could not read the arguments: {e}."),
        )
    })
}
