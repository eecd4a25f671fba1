//! `apply_unified`: seed 001's `apply_patch{filepath, patch}`, a unified diff parsed strictly and
//! applied with its context checked exactly.
//!
//! Uses `conflict`, `request`, `text`.
//!
//! # The patch
//! Lines before the first `--- ` or `@@` are ignored (`diff --git`, `index …`, commentary). An
//! optional file header is `--- OLD` directly followed by `+++ NEW`; the names are kept but not
//! used, since the tool's `filepath` names the file. Then come hunks, `@@ -a,b +c,d @@` (a count
//! of 1 may be left out) followed by exactly `b` old and `d` new lines: ` ` context, `-` removed,
//! `+` added; a line that is entirely empty counts as an empty context line (editors strip the
//! space). `\ No newline at end of file` after a line says it has no line ending. Hunks must be in
//! file order and not overlap. After the last hunk only blank lines may follow; a second file
//! header is refused (one patch, one file). Every refusal names the patch line and the hunk.
//!
//! # Applying
//! No fuzz: each hunk applies at the old line its header gives (`a`, or after line `a` when
//! `b` is 0), and its context and removed lines must equal the file's lines there, endings
//! included. `+c` is not checked; the counts are. The first line that differs is a
//! `patch_mismatch` naming it.
//!
//! # Line endings
//! A patch line ends at `\n`; anything before it, a `\r` included, is the line's text, so a patch
//! made from a CRLF file carries its `\r`s and applies byte for byte. One exception, because an
//! agent rarely writes `\r`: a patch with no `\r` in any hunk line, applied to a file whose every
//! line ending is CRLF, is read as if each of its line endings were CRLF.

use std::fmt;

use super::conflict::{Conflict, LineMismatch};
use super::request::ErrorCode;
use super::text::{Line, split_lines, uses_crlf};

/// A parsed unified diff for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnifiedPatch {
    /// The name on the `--- ` line, when there is one.
    pub old_name: Option<String>,
    /// The name on the `+++ ` line, when there is one.
    pub new_name: Option<String>,
    /// The hunks, in file order.
    pub hunks: Vec<Hunk>,
}

/// One `@@ -a,b +c,d @@` hunk and its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// The 1-based line of the patch holding the hunk's header.
    pub header_line: usize,
    /// `a`: the first old line (or, when `old_len` is 0, the line after which it inserts).
    pub old_start: usize,
    /// `b`: the number of old (context and removed) lines.
    pub old_len: usize,
    /// `c`: the first new line, as written (not checked).
    pub new_start: usize,
    /// `d`: the number of new (context and added) lines.
    pub new_len: usize,
    /// The hunk's lines in order.
    pub lines: Vec<HunkLine>,
}

impl Hunk {
    /// The 0-based index of the first old line, or of the gap an insertion-only hunk fills.
    fn old_index(&self) -> usize {
        if self.old_len == 0 {
            self.old_start
        } else {
            self.old_start.saturating_sub(1)
        }
    }

    /// The header as the patch spells it, for messages.
    fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_len, self.new_start, self.new_len
        )
    }
}

/// Which side of the diff a hunk line belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// ` `: in both the old and the new file.
    Context,
    /// `-`: in the old file only.
    Removed,
    /// `+`: in the new file only.
    Added,
}

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkLine {
    /// Context, removed or added.
    pub kind: LineKind,
    /// The line's text without the tag and without its `\n` (a `\r` before it is kept).
    pub text: String,
    /// Whether the line ends with a newline (no `\ No newline at end of file` after it).
    pub newline: bool,
}

/// A patch that cannot be read, with where and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedPatch {
    /// The 1-based line of the patch where the problem is.
    pub line: usize,
    /// The 1-based hunk it is in or after, if any.
    pub hunk: Option<usize>,
    /// What is wrong, and what was expected.
    pub reason: String,
}

impl fmt::Display for MalformedPatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hunk {
            Some(hunk) => write!(
                f,
                "malformed patch at line {} (hunk {hunk}): {}",
                self.line, self.reason
            ),
            None => write!(f, "malformed patch at line {}: {}", self.line, self.reason),
        }
    }
}

impl std::error::Error for MalformedPatch {}

/// A hunk that does not apply to the file: nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchMismatch {
    /// The 1-based number of the hunk.
    pub hunk: usize,
    /// The first line of the file that differs from the hunk, when one does.
    pub mismatch: Option<LineMismatch>,
    /// What does not match, in words.
    pub reason: String,
    /// The file as the hunk expected it (the current text with the hunk's old lines in their
    /// place): the seen side of the conflict's diff.
    pub expected_text: String,
}

impl PatchMismatch {
    /// The `patch_mismatch` conflict for the file `name` whose text is `current`.
    pub fn conflict(&self, current: &str, name: &str) -> Conflict {
        Conflict::patch_mismatch(self.mismatch.clone(), &self.expected_text, current, name)
    }
}

impl fmt::Display for PatchMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hunk {} does not apply: {}", self.hunk, self.reason)
    }
}

impl std::error::Error for PatchMismatch {}

/// Why `apply_patch` changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnifiedError {
    /// The patch cannot be read.
    Malformed(MalformedPatch),
    /// A hunk does not match the file.
    Mismatch(PatchMismatch),
}

impl UnifiedError {
    /// The result's error code: `VALIDATION_FAILED` for a malformed patch, `CONFLICT` otherwise.
    pub fn code(&self) -> ErrorCode {
        match self {
            UnifiedError::Malformed(_) => ErrorCode::ValidationFailed,
            UnifiedError::Mismatch(_) => ErrorCode::Conflict,
        }
    }
}

impl UnifiedError {
    /// The `patch_mismatch` conflict for a mismatch, given the file's name and `current` text;
    /// `None` for a malformed patch.
    pub fn conflict(&self, current: &str, name: &str) -> Option<Conflict> {
        match self {
            UnifiedError::Malformed(_) => None,
            UnifiedError::Mismatch(e) => Some(e.conflict(current, name)),
        }
    }
}

impl fmt::Display for UnifiedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnifiedError::Malformed(e) => e.fmt(f),
            UnifiedError::Mismatch(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for UnifiedError {}

impl From<MalformedPatch> for UnifiedError {
    fn from(e: MalformedPatch) -> Self {
        UnifiedError::Malformed(e)
    }
}

impl From<PatchMismatch> for UnifiedError {
    fn from(e: PatchMismatch) -> Self {
        UnifiedError::Mismatch(e)
    }
}

/// A file's new text after a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The whole new text.
    pub text: String,
    /// The number of `+` and `-` lines in the patch.
    pub lines_changed: usize,
}

/// Parses `patch` and applies it to `text`, the file's current content.
///
/// # Errors
/// [`UnifiedError::Malformed`] when the patch cannot be read, [`UnifiedError::Mismatch`] when a
/// hunk does not match the file.
pub fn apply_unified(text: &str, patch: &str) -> Result<Applied, UnifiedError> {
    Ok(parse_unified(patch)?.apply(text)?)
}

/// Parses a unified diff for one file (module docs).
///
/// # Errors
/// [`MalformedPatch`] naming the patch line, the hunk and what is wrong.
pub fn parse_unified(patch: &str) -> Result<UnifiedPatch, MalformedPatch> {
    let lines: Vec<&str> = patch
        .split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .collect();
    let mut parser = Parser {
        lines: &lines,
        at: 0,
        hunks: Vec::new(),
        old_end: None,
        new_end: None,
    };
    let (old_name, new_name) = parser.parse()?;
    Ok(UnifiedPatch {
        old_name,
        new_name,
        hunks: parser.hunks,
    })
}

/// A header line without a trailing `\r` (a patch saved with CRLF).
fn head(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// The name on a `--- ` or `+++ ` line: up to a tab (a timestamp may follow), trimmed.
fn file_name(rest: &str) -> String {
    rest.split('\t').next().unwrap_or(rest).trim().to_owned()
}

struct Parser<'p> {
    lines: &'p [&'p str],
    /// The 0-based index of the next line to read.
    at: usize,
    hunks: Vec<Hunk>,
    /// The patch line that ended the old file (a removed or context line without newline).
    old_end: Option<usize>,
    /// The patch line that ended the new file.
    new_end: Option<usize>,
}

impl Parser<'_> {
    fn error(&self, line: usize, reason: impl Into<String>) -> MalformedPatch {
        MalformedPatch {
            line,
            hunk: (!self.hunks.is_empty()).then_some(self.hunks.len()),
            reason: reason.into(),
        }
    }

    fn parse(&mut self) -> Result<(Option<String>, Option<String>), MalformedPatch> {
        let mut names = (None, None);
        while let Some(&line) = self.lines.get(self.at) {
            let number = self.at + 1;
            let header = head(line);
            if header.starts_with("@@") {
                let hunk = self.hunk()?;
                self.push(hunk)?;
            } else if let Some(old) = header.strip_prefix("--- ") {
                if !self.hunks.is_empty() || names.0.is_some() {
                    return Err(self.error(
                        number,
                        "a second file header ('--- '): apply_patch takes a patch for one file; \
                         send one call per file",
                    ));
                }
                let new = self.lines.get(number).map(|l| head(l));
                let Some(new) = new.and_then(|l| l.strip_prefix("+++ ")) else {
                    return Err(self.error(
                        number + 1,
                        format!("expected a '+++ ' line after the '--- ' line {number}"),
                    ));
                };
                names = (Some(file_name(old)), Some(file_name(new)));
                self.at += 2;
                match self.lines.get(self.at).map(|l| head(l)) {
                    Some(next) if next.starts_with("@@") => {}
                    next => {
                        return Err(self.error(
                            self.at + 1,
                            format!(
                                "expected a hunk header like '@@ -12,7 +12,8 @@' after the file \
                                 header, found {}",
                                next.map_or_else(
                                    || "the end of the patch".into(),
                                    |l| { format!("{l:?}") }
                                )
                            ),
                        ));
                    }
                }
            } else if header.starts_with("diff ") && !self.hunks.is_empty() {
                return Err(self.error(
                    number,
                    "a second file ('diff …'): apply_patch takes a patch for one file; send one \
                     call per file",
                ));
            } else if header.starts_with("+++ ") {
                return Err(self.error(number, "a '+++ ' line without a '--- ' line before it"));
            } else if self.hunks.is_empty() {
                self.at += 1; // preamble
            } else if self.lines[self.at..].iter().all(|l| l.trim().is_empty()) {
                break;
            } else {
                let last = self.hunks.last().map(Hunk::header).unwrap_or_default();
                return Err(self.error(
                    number,
                    format!(
                        "{line:?} follows the hunk but is not part of it: the header {last} \
                         counts fewer lines; fix the header's counts or remove the line"
                    ),
                ));
            }
        }
        if self.hunks.is_empty() {
            return Err(MalformedPatch {
                line: self.lines.len().max(1),
                hunk: None,
                reason: "the patch has no hunks: expected a header like '@@ -12,7 +12,8 @@' \
                         followed by lines starting with ' ', '-' or '+'"
                    .into(),
            });
        }
        Ok(names)
    }

    /// Adds a parsed hunk after checking that it starts after the previous one ends.
    fn push(&mut self, hunk: Hunk) -> Result<(), MalformedPatch> {
        if let Some(previous) = self.hunks.last() {
            let previous_end = previous.old_index().saturating_add(previous.old_len);
            if hunk.old_index() < previous_end {
                return Err(MalformedPatch {
                    line: hunk.header_line,
                    hunk: Some(self.hunks.len() + 1),
                    reason: format!(
                        "hunk {} ({}) starts before hunk {} ({}) ends: hunks must be in file \
                         order and must not overlap",
                        self.hunks.len() + 1,
                        hunk.header(),
                        self.hunks.len(),
                        previous.header()
                    ),
                });
            }
        }
        self.hunks.push(hunk);
        Ok(())
    }

    /// Reads the hunk whose header is at `self.at`, and its lines.
    fn hunk(&mut self) -> Result<Hunk, MalformedPatch> {
        let number = self.hunks.len() + 1;
        let header_line = self.at + 1;
        let header = head(self.lines.get(self.at).copied().unwrap_or_default());
        let error = |line: usize, reason: String| MalformedPatch {
            line,
            hunk: Some(number),
            reason,
        };
        let (old_start, old_len, new_start, new_len) = parse_header(header).ok_or_else(|| {
            error(
                header_line,
                format!(
                    "hunk header {header:?} is not of the form '@@ -start,count +start,count @@'"
                ),
            )
        })?;
        for (side, start, len) in [("old", old_start, old_len), ("new", new_start, new_len)] {
            if start == 0 && len > 0 {
                return Err(error(
                    header_line,
                    format!(
                        "the {side} side starts at line 0 but has {len} lines; lines are \
                         numbered from 1 (0 only for an empty side)"
                    ),
                ));
            }
        }
        let mut hunk = Hunk {
            header_line,
            old_start,
            old_len,
            new_start,
            new_len,
            lines: Vec::new(),
        };
        let (mut old_left, mut new_left) = (old_len, new_len);
        self.at += 1;
        loop {
            let at = self.at + 1;
            let line = self.lines.get(self.at).copied();
            if old_left == 0 && new_left == 0 && !line.is_some_and(|l| l.starts_with('\\')) {
                return Ok(hunk);
            }
            let short = |found: &str| {
                format!(
                    "the hunk ends at {found} but its header {} promises {old_left} more old and \
                     {new_left} more new lines; fix the counts or add the lines",
                    hunk.header()
                )
            };
            let Some(line) = line else {
                return Err(error(at, short("the end of the patch")));
            };
            let (kind, text) = match line.as_bytes().first() {
                None => (LineKind::Context, ""),
                Some(b' ') => (LineKind::Context, &line[1..]),
                Some(b'-') => (LineKind::Removed, &line[1..]),
                Some(b'+') => (LineKind::Added, &line[1..]),
                Some(b'\\') => {
                    self.no_newline(&mut hunk, at, number)?;
                    self.at += 1;
                    continue;
                }
                Some(b'@') if line.starts_with("@@") => {
                    return Err(error(
                        at,
                        short(&format!("line {at}, the next hunk header,")),
                    ));
                }
                Some(_) => {
                    return Err(error(
                        at,
                        format!(
                            "{line:?} is not a hunk line: each line of a hunk starts with ' ' \
                             (context), '-' (removed), '+' (added) or '\\' (no newline)"
                        ),
                    ));
                }
            };
            let (uses_old, uses_new) = match kind {
                LineKind::Context => (true, true),
                LineKind::Removed => (true, false),
                LineKind::Added => (false, true),
            };
            if (uses_old && old_left == 0) || (uses_new && new_left == 0) {
                let side = if uses_old && old_left == 0 {
                    "old"
                } else {
                    "new"
                };
                return Err(error(
                    at,
                    format!(
                        "the hunk has more {side} lines than its header {} says; fix the counts",
                        hunk.header()
                    ),
                ));
            }
            for (used, end, side) in [
                (uses_old, self.old_end, "old"),
                (uses_new, self.new_end, "new"),
            ] {
                if let (true, Some(end)) = (used, end) {
                    return Err(error(
                        at,
                        format!(
                            "a line after the {side} file's last line (line {end} is marked \
                             '\\ No newline at end of file')"
                        ),
                    ));
                }
            }
            old_left -= usize::from(uses_old);
            new_left -= usize::from(uses_new);
            hunk.lines.push(HunkLine {
                kind,
                text: text.to_owned(),
                newline: true,
            });
            self.at += 1;
        }
    }

    /// Applies a `\ No newline at end of file` line at `at` to the hunk's last line.
    fn no_newline(
        &mut self,
        hunk: &mut Hunk,
        at: usize,
        number: usize,
    ) -> Result<(), MalformedPatch> {
        let last = match hunk.lines.last_mut() {
            Some(last) if last.newline => last,
            found => {
                let reason = if found.is_some() {
                    "a second '\\ No newline at end of file' for the same line"
                } else {
                    "'\\ No newline at end of file' must follow a context, removed or added line"
                };
                return Err(MalformedPatch {
                    line: at,
                    hunk: Some(number),
                    reason: reason.into(),
                });
            }
        };
        last.newline = false;
        let previous = at - 1;
        match last.kind {
            LineKind::Context => {
                self.old_end = Some(previous);
                self.new_end = Some(previous);
            }
            LineKind::Removed => self.old_end = Some(previous),
            LineKind::Added => self.new_end = Some(previous),
        }
        Ok(())
    }
}

/// Reads `@@ -a[,b] +c[,d] @@[ section]` into `(a, b, c, d)`.
fn parse_header(header: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = header.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, rest) = rest.split_once(" @@")?;
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let range = |text: &str| -> Option<(usize, usize)> {
        let number = |t: &str| {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        match text.split_once(',') {
            Some((start, len)) => Some((number(start)?, number(len)?)),
            None => Some((number(text)?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d))
}

impl UnifiedPatch {
    /// The number of `+` and `-` lines: seed 001's `lines_changed`.
    pub fn lines_changed(&self) -> usize {
        self.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.kind != LineKind::Context)
            .count()
    }

    /// Whether any hunk line holds a `\r` (module docs, line endings).
    fn has_cr(&self) -> bool {
        self.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .any(|l| l.text.contains('\r'))
    }

    /// Applies the patch to `text`, the file's current content (module docs).
    ///
    /// # Errors
    /// [`PatchMismatch`] for the first hunk that does not match, naming the first differing line.
    pub fn apply(&self, text: &str) -> Result<Applied, PatchMismatch> {
        let file = split_lines(text);
        let newline = if !self.has_cr() && uses_crlf(&file) {
            "\r\n"
        } else {
            "\n"
        };
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        // The patch line that ended the new file, once a line without newline was written.
        let mut ended = false;
        for (i, hunk) in self.hunks.iter().enumerate() {
            let number = i + 1;
            let index = hunk.old_index();
            let fail = |mismatch: Option<LineMismatch>, reason: String| PatchMismatch {
                hunk: number,
                mismatch,
                reason,
                expected_text: expected_text(&file, hunk, newline),
            };
            if index > file.len() {
                let reason = if hunk.old_len == 0 {
                    format!("inserts after line {}", hunk.old_start)
                } else {
                    format!("starts at line {}", hunk.old_start)
                };
                let reason = format!(
                    "its header {} {reason} but the file has {} lines",
                    hunk.header(),
                    file.len()
                );
                return Err(fail(None, reason));
            }
            let gap = file.get(cursor..index).unwrap_or_default();
            if let (true, Some(line)) = (ended, gap.first()) {
                let mismatch = end_expected(cursor + 1, line);
                return Err(fail(Some(mismatch.clone()), mismatch.to_string()));
            }
            gap.iter().for_each(|line| line.push_to(&mut out));
            let mut at = index;
            for line in &hunk.lines {
                let ending = if line.newline { newline } else { "" };
                if line.kind == LineKind::Added {
                    out.push_str(&line.text);
                    out.push_str(ending);
                    ended |= !line.newline;
                    continue;
                }
                let actual = file.get(at);
                let same = |a: &Line<'_>| {
                    let patch = line.text.bytes().chain(ending.bytes());
                    patch.eq(a.content.bytes().chain(a.ending.bytes()))
                };
                if !actual.is_some_and(same) {
                    let mismatch = differ(at + 1, &line.text, ending, actual);
                    return Err(fail(Some(mismatch.clone()), mismatch.to_string()));
                }
                if let (LineKind::Context, Some(actual)) = (line.kind, actual) {
                    actual.push_to(&mut out);
                    ended |= !line.newline;
                }
                at += 1;
            }
            cursor = at;
        }
        let rest = file.get(cursor..).unwrap_or_default();
        if let (true, Some(line)) = (ended, rest.first()) {
            let mismatch = end_expected(cursor + 1, line);
            let reason = mismatch.to_string();
            return Err(PatchMismatch {
                hunk: self.hunks.len(),
                mismatch: Some(mismatch),
                reason,
                expected_text: self
                    .hunks
                    .last()
                    .map(|h| expected_text(&file, h, newline))
                    .unwrap_or_default(),
            });
        }
        rest.iter().for_each(|line| line.push_to(&mut out));
        Ok(Applied {
            text: out,
            lines_changed: self.lines_changed(),
        })
    }
}

/// The mismatch at `line` between what the patch expects (`text` ending in `ending`) and `actual`.
/// Line endings are shown only when they are all that differs.
fn differ(line: usize, text: &str, ending: &str, actual: Option<&Line<'_>>) -> LineMismatch {
    let bare = |text: &str| text.trim_end_matches('\r').to_owned();
    let endings_differ = actual.is_some_and(|a| bare(text) == bare(a.content));
    let show = |content: &str, ending: &str| {
        if endings_differ {
            format!("{content}{ending}")
        } else {
            content.to_owned()
        }
    };
    LineMismatch {
        line,
        expected: Some(show(text, ending)),
        actual: actual.map(|a| show(a.content, a.ending)),
    }
}

/// The mismatch of a file that goes on at `line` where the patch ended it (no newline).
fn end_expected(line: usize, actual: &Line<'_>) -> LineMismatch {
    LineMismatch {
        line,
        expected: None,
        actual: Some(actual.content.to_owned()),
    }
}

/// The file as `hunk` expects it: its lines in the hunk's range replaced by the hunk's old lines.
fn expected_text(file: &[Line<'_>], hunk: &Hunk, newline: &str) -> String {
    let start = hunk.old_index().min(file.len());
    let end = hunk
        .old_index()
        .saturating_add(hunk.old_len)
        .min(file.len());
    let mut out = String::new();
    for line in file.get(..start).unwrap_or_default() {
        line.push_to(&mut out);
    }
    for line in hunk.lines.iter().filter(|l| l.kind != LineKind::Added) {
        out.push_str(&line.text);
        if line.newline {
            out.push_str(newline);
        }
    }
    for line in file.get(end..).unwrap_or_default() {
        line.push_to(&mut out);
    }
    out
}
