//! `apply_batch`: seed 002's validated line changes applied to the files' current text, bottom-up,
//! all or nothing.
//!
//! Uses `validate`, `request`, `conflict`, `hash`, `text`.
//!
//! Each file is checked whole before anything is applied: its SHA-256 must be the quoted
//! `originalSha256`, then change by change, top to bottom, its lines must lie within the file and
//! its `expectedOriginalLines`, when given, must equal the range's lines exactly (whitespace too;
//! line endings are not part of a line). The first failure wins and no file's text is returned.
//! Then the changes are applied from the bottom up, so every change's line numbers are those of
//! the file as the agent read it.
//!
//! # Line endings
//! Lines keep their own endings. New lines get the file's ending: CRLF when every line ending in
//! the file is CRLF, LF otherwise (LF, mixed, empty, or a single line without a newline). The
//! result ends with a newline exactly when the file did; an empty file counts as ending with one.
//! So a change at the end of a file without a final newline leaves the new last line without one,
//! and a line that was last and is no longer gets the file's ending. One exception keeps the
//! result's lines the ones asked for: an empty last line keeps a newline (without one it would be
//! no line at all).

use std::fmt;

use super::conflict::{Conflict, LineMismatch};
use super::hash::{same_sha256, sha256_hex};
use super::request::{ErrorCode, Failure};
use super::text::{Line, join, split_lines, style_of};
use super::validate::{Batch, FileEdit, LineChange, LineOp, check_added_rules, range_failure};

/// One file's new text after its changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedFile {
    /// The file's whole new text.
    pub text: String,
    /// The SHA-256 of the new text.
    pub sha256: String,
    /// Lines removed plus lines written.
    pub lines_changed: usize,
}

/// A change whose `expectedOriginalLines` differ from the file's lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeMismatch {
    /// The file.
    pub doc_path: String,
    /// The change, as [`LineChange::label`] names it.
    pub change: String,
    /// The first line that differs.
    pub mismatch: LineMismatch,
    /// The file as the change expected it: the current text with the range holding the
    /// `expectedOriginalLines` (the seen side of the conflict's diff).
    pub expected_text: String,
}

/// Why a file's changes were not applied; nothing was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyError {
    /// The file's SHA-256 is not the quoted one: it changed since the agent read it.
    Stale {
        /// The file.
        doc_path: String,
        /// The quoted `originalSha256`.
        expected: String,
        /// The SHA-256 of the file now.
        actual: String,
    },
    /// A change does not fit the file (a line past its end); the message says which and why.
    Invalid {
        /// The file.
        doc_path: String,
        /// The message for the agent, in the validator's style.
        message: String,
    },
    /// A change's `expectedOriginalLines` differ from the file's lines.
    Mismatch(Box<ChangeMismatch>),
    /// The caller gave no current text for this file (fewer texts than files).
    NoText {
        /// The file.
        doc_path: String,
    },
}

impl ApplyError {
    /// The file the error is about.
    pub fn doc_path(&self) -> &str {
        match self {
            ApplyError::Stale { doc_path, .. }
            | ApplyError::Invalid { doc_path, .. }
            | ApplyError::NoText { doc_path } => doc_path,
            ApplyError::Mismatch(m) => &m.doc_path,
        }
    }

    /// The result's `errorCode`: `CONFLICT` for a stale hash or a mismatch.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApplyError::Stale { .. } | ApplyError::Mismatch(_) => ErrorCode::Conflict,
            ApplyError::Invalid { .. } => ErrorCode::ValidationFailed,
            ApplyError::NoText { .. } => ErrorCode::UnexpectedError,
        }
    }

    /// The error as a result's code and message.
    pub fn failure(&self) -> Failure {
        Failure::new(self.code(), self.to_string())
    }

    /// The conflict to return with a `CONFLICT`, given the file's `current` text and, for a stale
    /// hash, the text the agent saw when it is still known; `None` for other errors.
    pub fn conflict(&self, current: &str, seen: Option<&str>) -> Option<Conflict> {
        match self {
            ApplyError::Stale { doc_path, .. } => {
                Some(Conflict::stale_buffer(seen, current, doc_path))
            }
            ApplyError::Mismatch(m) => Some(Conflict::patch_mismatch(
                Some(m.mismatch.clone()),
                &m.expected_text,
                current,
                &m.doc_path,
            )),
            ApplyError::Invalid { .. } | ApplyError::NoText { .. } => None,
        }
    }
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::Stale {
                doc_path,
                expected,
                actual,
            } => write!(
                f,
                "File '{doc_path}' has changed since it was read: originalSha256 is {expected} \
                 but the file's SHA-256 is now {actual}. Read it again and make the changes on \
                 what it holds now."
            ),
            ApplyError::Invalid { message, .. } => f.write_str(message),
            ApplyError::Mismatch(m) => write!(
                f,
                "File '{}' does not hold the expectedOriginalLines of {}: {}.",
                m.doc_path, m.change, m.mismatch
            ),
            ApplyError::NoText { doc_path } => {
                write!(f, "No current text was given for file '{doc_path}'.")
            }
        }
    }
}

impl std::error::Error for ApplyError {}

/// A batch's failure: which file (0-based, in request order) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// The index of the failing file in the batch.
    pub file: usize,
    /// Why it failed.
    pub error: ApplyError,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for BatchError {}

/// A file's current text and the SHA-256 (hex) of its bytes, as the read that took it
/// computed it (so the text is not hashed twice).
#[derive(Clone, Copy, Debug)]
pub struct Current<'a> {
    /// The text.
    pub text: &'a str,
    /// Its SHA-256, lowercase hex.
    pub sha256: &'a str,
}

/// Applies every file of `batch` to its current text (`current[i]` for `batch.files[i]`): all
/// the new texts, or the first failure and none.
///
/// # Errors
/// The first file that fails, with its [`ApplyError`].
pub fn apply_batch(batch: &Batch, current: &[Current<'_>]) -> Result<Vec<AppliedFile>, BatchError> {
    batch
        .files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let now = current.get(i).ok_or_else(|| ApplyError::NoText {
                doc_path: file.doc_path.clone(),
            });
            now.and_then(|now| apply_file_over(file, *now))
                .map_err(|error| BatchError { file: i, error })
        })
        .collect()
}

/// Applies one file's changes to its current `text`, after checking its hash and lines.
///
/// # Errors
/// [`ApplyError::Stale`], [`ApplyError::Invalid`] or [`ApplyError::Mismatch`], for the first
/// failing check in the order of the module docs.
pub fn apply_file(file: &FileEdit, text: &str) -> Result<AppliedFile, ApplyError> {
    let sha256 = sha256_hex(text.as_bytes());
    apply_file_over(
        file,
        Current {
            text,
            sha256: &sha256,
        },
    )
}

/// [`apply_file`] given the text's hash.
fn apply_file_over(file: &FileEdit, current: Current<'_>) -> Result<AppliedFile, ApplyError> {
    let Current { text, sha256 } = current;
    if !same_sha256(&file.original_sha256, sha256) {
        return Err(ApplyError::Stale {
            doc_path: file.doc_path.clone(),
            expected: file.original_sha256.clone(),
            actual: sha256.to_owned(),
        });
    }
    // Validation ran these already; they are cheap, and they keep a hand-made `FileEdit` from
    // reaching the splices unsorted.
    check_added_rules(file).map_err(|failure| ApplyError::Invalid {
        doc_path: file.doc_path.clone(),
        message: failure.error_message,
    })?;
    let lines = split_lines(text);
    for change in &file.changes {
        check_change(&file.doc_path, change, &lines)?;
    }
    let (text, lines_changed) = apply_checked(&file.changes, lines);
    Ok(AppliedFile {
        sha256: sha256_hex(text.as_bytes()),
        text,
        lines_changed,
    })
}

/// Checks that `change` fits `lines` and that its `expectedOriginalLines` are there.
fn check_change(doc_path: &str, change: &LineChange, lines: &[Line<'_>]) -> Result<(), ApplyError> {
    let invalid = |message: String| ApplyError::Invalid {
        doc_path: doc_path.to_owned(),
        message,
    };
    let count = lines.len();
    let (start, end, expected) = match &change.op {
        LineOp::Insert { after_line, .. } => {
            if *after_line > count {
                return Err(invalid(format!(
                    "INSERT changes for file '{doc_path}' must specify an afterLine within the \
                     file: {} is past its end (the file has {count} lines).",
                    change.label()
                )));
            }
            return Ok(());
        }
        LineOp::Replace {
            start_line,
            end_line,
            expected,
            ..
        }
        | LineOp::Delete {
            start_line,
            end_line,
            expected,
        } => (*start_line, *end_line, expected),
    };
    if start < 1 || end < start {
        return Err(invalid(range_failure(doc_path).error_message));
    }
    if end > count {
        return Err(invalid(format!(
            "REPLACE or DELETE changes for file '{doc_path}' must specify lines within the file: \
             {} is past its end (the file has {count} lines).",
            change.label()
        )));
    }
    let Some(expected) = expected else {
        return Ok(());
    };
    let range = lines.get(start - 1..end).unwrap_or_default();
    let first_difference = (0..range.len().max(expected.len()))
        .find(|&i| range.get(i).map(|line| line.content) != expected.get(i).map(String::as_str));
    let Some(i) = first_difference else {
        return Ok(());
    };
    // The file as the change expected it: the range's lines hold the expected text, each keeping
    // its own ending, so that the conflict's diff shows only what differs.
    let mut expected_lines: Vec<Line<'_>> = lines.to_vec();
    for (slot, text) in expected_lines.iter_mut().skip(start - 1).zip(expected) {
        slot.content = text;
    }
    Err(ApplyError::Mismatch(Box::new(ChangeMismatch {
        doc_path: doc_path.to_owned(),
        change: change.label(),
        mismatch: LineMismatch {
            line: start + i,
            expected: expected.get(i).cloned(),
            actual: range.get(i).map(|line| line.content.to_owned()),
        },
        expected_text: join(&expected_lines),
    })))
}

/// Applies checked, ordered, disjoint `changes` to `lines` from the bottom up; returns the text and
/// the lines changed. Line endings follow the module docs.
fn apply_checked<'a>(changes: &'a [LineChange], lines: Vec<Line<'a>>) -> (String, usize) {
    let style = style_of(&lines);
    let final_newline = lines.last().is_none_or(|line| !line.ending.is_empty());
    let new = |new_lines: &'a [String]| {
        new_lines.iter().map(move |content| Line {
            content,
            ending: style,
        })
    };
    let mut out = lines;
    let mut lines_changed = 0;
    for change in changes.iter().rev() {
        match &change.op {
            LineOp::Insert {
                after_line,
                new_lines,
            } => {
                out.splice(*after_line..*after_line, new(new_lines));
                lines_changed += new_lines.len();
            }
            LineOp::Replace {
                start_line,
                end_line,
                new_lines,
                ..
            } => {
                out.splice(start_line - 1..*end_line, new(new_lines));
                lines_changed += end_line - start_line + 1 + new_lines.len();
            }
            LineOp::Delete {
                start_line,
                end_line,
                ..
            } => {
                out.splice(start_line - 1..*end_line, []);
                lines_changed += end_line - start_line + 1;
            }
        }
    }
    let last = out.len().saturating_sub(1);
    for (i, line) in out.iter_mut().enumerate() {
        if i < last && line.ending.is_empty() {
            line.ending = style;
        } else if i == last {
            line.ending = match (final_newline || line.content.is_empty(), line.ending) {
                (false, _) => "",
                (true, "") => style,
                (true, ending) => ending,
            };
        }
    }
    (join(&out), lines_changed)
}
