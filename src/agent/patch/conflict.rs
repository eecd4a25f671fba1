//! `Conflict`: why a write changed nothing, with the current hash and the diff shown to the agent.
//!
//! Uses `hash`.
//!
//! The three kinds are seed 001's. Every conflict carries the SHA-256 of what is there now (the
//! base to quote on a retry) and a unified diff, 3 lines of context, from what the agent saw to
//! what is there now ([`conflict_diff`]). Field names are snake_case, as seed 001's results.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::hash::sha256_hex;

/// The lines of context around each change in a conflict's diff.
pub const CONFLICT_CONTEXT_LINES: usize = 3;

/// The kind of a conflict (seed 001).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictKind {
    /// The file changed since the agent read it: the quoted SHA-256 is not the current one.
    StaleBuffer,
    /// Another party's pushed unsaved copy covers the file.
    OverlappingEdits,
    /// The patch's context or `expectedOriginalLines` differ from the file.
    PatchMismatch,
}

impl fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConflictKind::StaleBuffer => "stale_buffer",
            ConflictKind::OverlappingEdits => "overlapping_edits",
            ConflictKind::PatchMismatch => "patch_mismatch",
        })
    }
}

/// The first line where what a patch expects differs from the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineMismatch {
    /// The 1-based number of the line in the current file.
    pub line: usize,
    /// What the patch expects there; `None` when it expects the end of the file.
    pub expected: Option<String>,
    /// What the file has there; `None` when the file ends before it.
    pub actual: Option<String>,
}

impl fmt::Display for LineMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: expected ", self.line)?;
        match &self.expected {
            Some(text) => write!(f, "{text:?}")?,
            None => f.write_str("the end of the file")?,
        }
        f.write_str(", found ")?;
        match &self.actual {
            Some(text) => write!(f, "{text:?}"),
            None => f.write_str("the end of the file"),
        }
    }
}

/// A write that changed nothing, and what the agent needs to retry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// Which kind of conflict it is.
    pub kind: ConflictKind,
    /// The SHA-256 of what is there now: the base for a retry.
    pub current_sha256: String,
    /// For `patch_mismatch`, the first line that differs, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<LineMismatch>,
    /// A unified diff from what the agent saw to what is there now; empty when unknown or equal.
    pub diff: String,
}

impl Conflict {
    /// The file changed since the agent read `seen` (`None` when that version is not known).
    pub fn stale_buffer(seen: Option<&str>, current: &str, name: &str) -> Self {
        Self::between(ConflictKind::StaleBuffer, seen, current, name)
    }

    /// Another party's pushed copy, `current`, covers the file the agent read as `seen`.
    pub fn overlapping_edits(seen: Option<&str>, current: &str, name: &str) -> Self {
        Self::between(ConflictKind::OverlappingEdits, seen, current, name)
    }

    /// The patch expected the file to read `expected` but it reads `current`, first differing at
    /// `mismatch` (`None` when no single line is to blame, as for an insertion past the end).
    pub fn patch_mismatch(
        mismatch: Option<LineMismatch>,
        expected: &str,
        current: &str,
        name: &str,
    ) -> Self {
        Self {
            mismatch,
            ..Self::between(ConflictKind::PatchMismatch, Some(expected), current, name)
        }
    }

    fn between(kind: ConflictKind, seen: Option<&str>, current: &str, name: &str) -> Self {
        Self {
            kind,
            current_sha256: sha256_hex(current.as_bytes()),
            mismatch: None,
            diff: seen.map_or_else(String::new, |seen| conflict_diff(seen, current, name)),
        }
    }
}

/// A unified diff (3 lines of context) from `seen`, what the agent saw, to `current`, what is there
/// now, headed `--- {name} (seen)` and `+++ {name} (current)`; empty when they are equal.
pub fn conflict_diff(seen: &str, current: &str, name: &str) -> String {
    // Only the window that differs (with its context) is diffed: tokenising two whole large
    // files cost more than the change (a one-line patch of a 10 000-line file). Where a change
    // could sit in several places (a line inserted into a run of equal lines) the window may
    // place it elsewhere than a diff of the whole texts would; either takes `seen` to `current`.
    let (skipped, seen, current) = changed_window(seen, current, CONFLICT_CONTEXT_LINES);
    let diff = similar::TextDiff::from_lines(seen, current)
        .unified_diff()
        .context_radius(CONFLICT_CONTEXT_LINES)
        .header(&format!("{name} (seen)"), &format!("{name} (current)"))
        .to_string();
    if skipped == 0 {
        return diff;
    }
    diff.split_inclusive('\n')
        .map(|line| match line.strip_prefix("@@ -") {
            Some(header) => shift_header(header, skipped).unwrap_or_else(|| line.to_string()),
            None => line.to_string(),
        })
        .collect()
}

/// The parts of `a` and `b` that differ, with `context` lines they share on each side: the
/// number of lines skipped at the start, and the two windows.
fn changed_window<'a>(a: &'a str, b: &'a str, context: usize) -> (usize, &'a str, &'a str) {
    let lines_a: Vec<&str> = a.split_inclusive('\n').collect();
    let lines_b: Vec<&str> = b.split_inclusive('\n').collect();
    let shortest = lines_a.len().min(lines_b.len());
    let prefix = (0..shortest)
        .take_while(|&i| lines_a[i] == lines_b[i])
        .count();
    let suffix = (0..shortest - prefix)
        .take_while(|&i| lines_a[lines_a.len() - 1 - i] == lines_b[lines_b.len() - 1 - i])
        .count();
    let skip = prefix.saturating_sub(context);
    let cut = suffix.saturating_sub(context);
    let window = |text: &'a str, lines: &[&str]| {
        let start: usize = lines[..skip].iter().map(|l| l.len()).sum();
        let tail: usize = lines[lines.len() - cut..].iter().map(|l| l.len()).sum();
        &text[start..text.len() - tail]
    };
    (skip, window(a, &lines_a), window(b, &lines_b))
}

/// A hunk header (after its `@@ -`) with both ranges moved `by` lines down.
fn shift_header(header: &str, by: usize) -> Option<String> {
    let (ranges, rest) = header.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let shift = |range: &str| -> Option<String> {
        let (start, len) = match range.split_once(',') {
            Some((start, len)) => (start, Some(len)),
            None => (range, None),
        };
        let start = start.parse::<usize>().ok()? + by;
        Some(match len {
            Some(len) => format!("{start},{len}"),
            None => start.to_string(),
        })
    };
    Some(format!("@@ -{} +{} @@{rest}", shift(old)?, shift(new)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_goes_from_seen_to_current_with_three_lines_of_context() {
        let seen = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let current = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            conflict_diff(seen, current, "src/a.rs"),
            "--- src/a.rs (seen)\n+++ src/a.rs (current)\n\
             @@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
        assert_eq!(conflict_diff(seen, seen, "src/a.rs"), "");
    }

    proptest::proptest! {
        /// The windowed diff takes what the agent saw to what is there, line numbers included
        /// (checked by applying it with the unified-diff form's own parser).
        #[test]
        fn the_windowed_diff_applies_to_what_was_seen(
            base in proptest::collection::vec(0u8..7, 0..60),
            edits in proptest::collection::vec((0usize..64, 0u8..7), 0..4),
            final_newline in proptest::bool::ANY,
        ) {
            let line = |n: &u8| match n {
                6 => String::new(),
                n => format!("line {n}"),
            };
            let text = |lines: &[u8]| {
                let mut text = lines.iter().map(line).collect::<Vec<_>>().join("\n");
                if final_newline && !lines.is_empty() {
                    text.push('\n');
                }
                text
            };
            let mut changed = base.clone();
            for (at, n) in &edits {
                let at = at % (changed.len() + 1);
                match n % 3 {
                    0 if at < changed.len() => {
                        changed.remove(at);
                    }
                    1 if at < changed.len() => changed[at] = *n,
                    _ => changed.insert(at, *n),
                }
            }
            let (seen, current) = (text(&base), text(&changed));
            let diff = conflict_diff(&seen, &current, "f");
            if seen == current {
                proptest::prop_assert_eq!(diff, "");
            } else {
                let applied = crate::agent::patch::apply_unified(&seen, &diff);
                proptest::prop_assert_eq!(
                    applied.map(|a| a.text).map_err(|e| e.to_string()),
                    Ok(current.clone()),
                    "{}", diff
                );
            }
        }
    }

    #[test]
    fn conflicts_carry_the_current_hash_and_serialise_in_snake_case() {
        let conflict = Conflict::stale_buffer(Some("a\n"), "b\n", "f.txt");
        assert_eq!(conflict.kind, ConflictKind::StaleBuffer);
        assert_eq!(conflict.current_sha256, sha256_hex(b"b\n"));
        assert!(conflict.diff.contains("-a\n+b\n"), "{}", conflict.diff);
        let json = serde_json::to_value(&conflict).unwrap();
        assert_eq!(json["kind"], "stale_buffer");
        assert_eq!(json["current_sha256"], sha256_hex(b"b\n"));
        assert!(json.get("mismatch").is_none());

        let unknown = Conflict::overlapping_edits(None, "b\n", "f.txt");
        assert_eq!(unknown.kind.to_string(), "overlapping_edits");
        assert_eq!(unknown.diff, "");

        let mismatch = LineMismatch {
            line: 2,
            expected: Some("x".into()),
            actual: Some("y".into()),
        };
        let conflict =
            Conflict::patch_mismatch(Some(mismatch.clone()), "a\nx\n", "a\ny\n", "f.txt");
        assert_eq!(conflict.mismatch, Some(mismatch));
        let json = serde_json::to_value(&conflict).unwrap();
        assert_eq!(json["kind"], "patch_mismatch");
        assert_eq!(json["mismatch"]["line"], 2);
    }

    #[test]
    fn a_mismatch_names_the_line_and_both_texts() {
        let m = |expected: Option<&str>, actual: Option<&str>| {
            LineMismatch {
                line: 7,
                expected: expected.map(Into::into),
                actual: actual.map(Into::into),
            }
            .to_string()
        };
        assert_eq!(
            m(Some("foo"), Some("\tbar")),
            r#"line 7: expected "foo", found "\tbar""#
        );
        assert_eq!(
            m(Some("foo"), None),
            r#"line 7: expected "foo", found the end of the file"#
        );
        assert_eq!(
            m(None, Some("x")),
            r#"line 7: expected the end of the file, found "x""#
        );
    }
}
