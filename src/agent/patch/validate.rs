//! `validate`: seed 002's validator, its messages and order, plus the order and overlap checks the
//! original forgot; it turns a request into a [`Batch`] of typed changes.
//!
//! Uses `request`, `hash`.
//!
//! The first failure wins. The original's checks run first, in its order, over the whole batch:
//! the arguments, `files[]`, duplicate docPaths, then each file (docPath, originalSha256, changes)
//! and each of its changes (operation, then the operation's fields). Only when the batch passes
//! them all does a second pass run, file by file and change by change: line breaks inside a
//! `newLines` entry, an `expectedOriginalLines` whose length is not the range's, then the order
//! and overlap of the file's changes. So any request the original
//! rejects is rejected here with the original's message, and the added checks only catch what it
//! let through.
//!
//! # Order and overlap
//! Each change covers a span of the original file: `replace` and `delete` their lines
//! `startLine..=endLine`; `insert` its anchor line `afterLine` (0, the top, for `afterLine: 0`) and
//! the gap below it. Changes must be listed top to bottom with disjoint spans, so:
//! - two ranges sharing a line overlap (`3-5` and `5-6`); adjacent ranges do not (`3-4`, `5-6`);
//! - an insert whose anchor line is replaced or deleted overlaps that change (`replace 3-5` and
//!   `insert after 5`: which side of the new text would it go?), while an insert just above a range
//!   does not (`insert after 2`, then `replace 3-5`);
//! - two inserts after the same line overlap (one insert with all the lines says it plainly);
//! - a change listed after one whose span lies below it is out of order.
//!
//! A pair that both overlaps and is out of order is reported as overlapping.

use super::hash::check_sha256_hex;
use super::request::{Change, Failure, FilePatch, WritePatchRequest};

/// A request that passed validation: its files and their typed changes, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The files to change, in request order, each docPath once.
    pub files: Vec<FileEdit>,
}

/// One file's validated changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEdit {
    /// The docPath as the request gave it.
    pub doc_path: String,
    /// The SHA-256 the changes are based on, trimmed and lowercased.
    pub original_sha256: String,
    /// The changes, top to bottom, not overlapping.
    pub changes: Vec<LineChange>,
}

/// One validated change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineChange {
    /// The change's 1-based position in its file's `changes[]`, used in messages.
    pub number: usize,
    /// The change's `changeKey`, used in messages.
    pub key: Option<String>,
    /// What the change does.
    pub op: LineOp,
}

/// What one change does, in line numbers of the file as the agent read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineOp {
    /// Writes `new_lines` after line `after_line` (0: at the top).
    Insert {
        /// The line after which the new lines go.
        after_line: usize,
        /// The lines to write (at least one).
        new_lines: Vec<String>,
    },
    /// Writes `new_lines` in place of lines `start_line..=end_line`.
    Replace {
        /// The first line replaced (1-based).
        start_line: usize,
        /// The last line replaced (inclusive).
        end_line: usize,
        /// The lines the range must hold now, when given.
        expected: Option<Vec<String>>,
        /// The lines to write (at least one).
        new_lines: Vec<String>,
    },
    /// Removes lines `start_line..=end_line`.
    Delete {
        /// The first line removed (1-based).
        start_line: usize,
        /// The last line removed (inclusive).
        end_line: usize,
        /// The lines the range must hold now, when given.
        expected: Option<Vec<String>>,
    },
}

impl LineOp {
    /// The operation's name as the original's messages spell it.
    pub fn name(&self) -> &'static str {
        match self {
            LineOp::Insert { .. } => "INSERT",
            LineOp::Replace { .. } => "REPLACE",
            LineOp::Delete { .. } => "DELETE",
        }
    }

    /// The number of lines a `replace` or `delete` covers; `None` for an `insert`.
    pub fn range_len(&self) -> Option<usize> {
        match self {
            LineOp::Insert { .. } => None,
            LineOp::Replace {
                start_line,
                end_line,
                ..
            }
            | LineOp::Delete {
                start_line,
                end_line,
                ..
            } => Some(end_line.saturating_add(1).saturating_sub(*start_line)),
        }
    }

    /// The span the change covers on a line grid where line `n` is `2n` and the gap below it
    /// `2n + 1` (module docs): two changes overlap when their spans intersect.
    fn span(&self) -> (u128, u128) {
        let grid = |line: usize| 2 * line as u128;
        match self {
            LineOp::Insert { after_line, .. } => (grid(*after_line), grid(*after_line) + 1),
            LineOp::Replace {
                start_line,
                end_line,
                ..
            }
            | LineOp::Delete {
                start_line,
                end_line,
                ..
            } => (grid(*start_line), grid(*end_line)),
        }
    }

    /// What the change does to which lines, for messages: `INSERT after line 4`,
    /// `DELETE lines 3-5`.
    fn describe(&self) -> String {
        match self {
            LineOp::Insert { after_line, .. } => format!("INSERT after line {after_line}"),
            LineOp::Replace {
                start_line,
                end_line,
                ..
            }
            | LineOp::Delete {
                start_line,
                end_line,
                ..
            } if start_line == end_line => format!("{} line {start_line}", self.name()),
            LineOp::Replace {
                start_line,
                end_line,
                ..
            }
            | LineOp::Delete {
                start_line,
                end_line,
                ..
            } => format!("{} lines {start_line}-{end_line}", self.name()),
        }
    }
}

impl LineChange {
    /// The change named for messages: `change 2 'fix-import' (REPLACE lines 3-4)`.
    pub fn label(&self) -> String {
        match &self.key {
            Some(key) if !key.trim().is_empty() => {
                format!("change {} '{key}' ({})", self.number, self.op.describe())
            }
            _ => format!("change {} ({})", self.number, self.op.describe()),
        }
    }
}

/// Validates a `workspace_write_patch` request (`None` for a JSON `null`) into a [`Batch`].
///
/// # Errors
/// A `VALIDATION_FAILED` [`Failure`] with the first failing check's message (module docs).
pub fn validate(request: Option<&WritePatchRequest>) -> Result<Batch, Failure> {
    let Some(request) = request else {
        return Err(Failure::validation("Arguments payload was null."));
    };
    let files = match request.files.as_deref() {
        Some(files) if !files.is_empty() => files,
        _ => {
            return Err(Failure::validation(
                "At least one file patch must be provided in files[].",
            ));
        }
    };
    check_duplicates(files)?;
    let files = files
        .iter()
        .map(validate_file)
        .collect::<Result<Vec<_>, _>>()?;
    for file in &files {
        check_added_rules(file)?;
    }
    Ok(Batch { files })
}

/// The checks the original lacks, for one file whose fields passed the original's checks.
pub(super) fn check_added_rules(file: &FileEdit) -> Result<(), Failure> {
    check_lines(file)?;
    check_order(file)
}

/// The original's duplicate check: docPaths compared trimmed and lowercased; blank ones are left
/// to the per-file check. Lists each duplicate once, in order of first appearance.
fn check_duplicates(files: &[FilePatch]) -> Result<(), Failure> {
    let keys: Vec<String> = files
        .iter()
        .filter_map(|f| f.doc_path.as_deref())
        .map(|p| p.trim().to_lowercase())
        .filter(|p| !p.is_empty())
        .collect();
    let mut duplicates: Vec<&str> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if keys[..i].contains(key) && !duplicates.contains(&key.as_str()) {
            duplicates.push(key);
        }
    }
    if duplicates.is_empty() {
        Ok(())
    } else {
        Err(Failure::validation(format!(
            "Each docPath may appear at most once per batch. Duplicates: {}",
            duplicates.join(", ")
        )))
    }
}

fn validate_file(file: &FilePatch) -> Result<FileEdit, Failure> {
    let doc_path = match file.doc_path.as_deref() {
        Some(p) if !p.trim().is_empty() => p,
        _ => {
            return Err(Failure::validation(
                "Each file patch must include a non-empty docPath.",
            ));
        }
    };
    let sha = match file.original_sha256.as_deref() {
        Some(sha) if !sha.trim().is_empty() => sha.trim(),
        _ => {
            return Err(Failure::validation(format!(
                "File '{doc_path}' is missing originalSha256."
            )));
        }
    };
    if check_sha256_hex(sha).is_err() {
        return Err(Failure::validation(format!(
            "File '{doc_path}' originalSha256 must be a 64-character SHA256 hex string."
        )));
    }
    let changes = match file.changes.as_deref() {
        Some(changes) if !changes.is_empty() => changes,
        _ => {
            return Err(Failure::validation(format!(
                "File '{doc_path}' must contain at least one change."
            )));
        }
    };
    let changes = changes
        .iter()
        .enumerate()
        .map(|(i, change)| validate_change(doc_path, i + 1, change))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FileEdit {
        doc_path: doc_path.to_owned(),
        original_sha256: sha.to_ascii_lowercase(),
        changes,
    })
}

fn validate_change(doc_path: &str, number: usize, change: &Change) -> Result<LineChange, Failure> {
    let operation = match change.operation.as_deref() {
        Some(op) if !op.trim().is_empty() => op.trim().to_lowercase(),
        _ => {
            return Err(Failure::validation(format!(
                "File '{doc_path}' has a change with missing operation."
            )));
        }
    };
    let line = |n: Option<i64>| n.and_then(|n| usize::try_from(n).ok());
    let new_lines = change.new_lines.clone().unwrap_or_default();
    let op = match operation.as_str() {
        "insert" => {
            let Some(after_line) = line(change.after_line) else {
                return Err(Failure::validation(format!(
                    "INSERT changes for file '{doc_path}' must specify a non-negative afterLine \
                     (0 for top-of-file)."
                )));
            };
            if new_lines.is_empty() {
                return Err(Failure::validation(format!(
                    "INSERT changes for file '{doc_path}' must include at least one new line in \
                     newLines."
                )));
            }
            LineOp::Insert {
                after_line,
                new_lines,
            }
        }
        "replace" | "delete" => {
            let (Some(start_line), Some(end_line)) =
                (line(change.start_line), line(change.end_line))
            else {
                return Err(range_failure(doc_path));
            };
            if start_line < 1 || end_line < start_line {
                return Err(range_failure(doc_path));
            }
            let expected = change.expected_original_lines.clone();
            if operation == "delete" {
                LineOp::Delete {
                    start_line,
                    end_line,
                    expected,
                }
            } else if new_lines.is_empty() {
                return Err(Failure::validation(format!(
                    "REPLACE changes for file '{doc_path}' must include at least one new line in \
                     newLines."
                )));
            } else {
                LineOp::Replace {
                    start_line,
                    end_line,
                    expected,
                    new_lines,
                }
            }
        }
        _ => {
            return Err(Failure::validation(format!(
                "File '{doc_path}' has a change with unsupported operation '{operation}'."
            )));
        }
    };
    Ok(LineChange {
        number,
        key: change.change_key.clone(),
        op,
    })
}

/// The original's message for a `replace` or `delete` without a valid range.
pub(super) fn range_failure(doc_path: &str) -> Failure {
    Failure::validation(format!(
        "REPLACE or DELETE changes for file '{doc_path}' must specify valid startLine and endLine \
         (1-based, start <= end)."
    ))
}

/// Added: a `newLines` entry holding `\n` or `\r` would write more lines than the change says,
/// in the wrong line ending; an `expectedOriginalLines` of another length than its range can never
/// match it.
fn check_lines(file: &FileEdit) -> Result<(), Failure> {
    for change in &file.changes {
        let (new_lines, expected) = match &change.op {
            LineOp::Insert { new_lines, .. } => (new_lines.as_slice(), None),
            LineOp::Replace {
                new_lines,
                expected,
                ..
            } => (new_lines.as_slice(), expected.as_ref()),
            LineOp::Delete { expected, .. } => (&[][..], expected.as_ref()),
        };
        if let Some(i) = new_lines.iter().position(|l| l.contains(['\n', '\r'])) {
            return Err(Failure::validation(format!(
                "{} changes for file '{}' must give one line per newLines entry, without line \
                 breaks: {} has one in entry {}.",
                change.op.name(),
                file.doc_path,
                change.label(),
                i + 1
            )));
        }
        if let (Some(expected), Some(range)) = (expected, change.op.range_len())
            && expected.len() != range
        {
            return Err(Failure::validation(format!(
                "REPLACE or DELETE changes for file '{}' must give one expectedOriginalLines \
                 entry per line of the range: {} gives {}.",
                file.doc_path,
                change.label(),
                expected.len()
            )));
        }
    }
    Ok(())
}

/// Added: the DDR's rule that changes are ordered top to bottom and do not overlap (module docs).
fn check_order(file: &FileEdit) -> Result<(), Failure> {
    for pair in file.changes.windows(2) {
        let [before, after] = pair else { continue };
        let (lo_before, hi_before) = before.op.span();
        let (lo_after, hi_after) = after.op.span();
        if lo_after > hi_before {
            continue;
        }
        // Here the later change starts at or above the end of the earlier one.
        let message = if lo_before <= hi_after {
            format!(
                "Changes for file '{}' must not overlap: {} overlaps {}.",
                file.doc_path,
                after.label(),
                before.label()
            )
        } else {
            format!(
                "Changes for file '{}' must be ordered top to bottom: {} comes after {}.",
                file.doc_path,
                after.label(),
                before.label()
            )
        };
        return Err(Failure::validation(message));
    }
    Ok(())
}
