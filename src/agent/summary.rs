//! `summarize_file`: a deterministic outline of a file (no model), within a token budget.
//!
//! The summary is a line giving the file's size, then up to ten of its first non-blank lines
//! (at most a quarter of the budget), then its outline: Markdown headings, or the lines that
//! define something in common languages (`fn`, `struct`, `class`, `def`, `function`,
//! `interface`, …), each with its line number, until the budget (`max_tokens × 4` characters)
//! runs out; a last line says how many were left out. Lines are cut to 160 characters and
//! credentials are redacted. A summary carries no hash: it is never a base to patch from.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::args::Args;
use super::read::{CHARS_PER_TOKEN, line_count, read_text, tokens};
use super::redact::redact;
use super::tools::{ToolOutput, header_and_body};
use crate::error::Result;

/// The default of `max_tokens`: seed 001's cap on entrypoint excerpts.
pub const SUMMARY_TOKENS: usize = 500;

/// Lines longer than this many characters are cut in a summary.
const LINE_CHARS: usize = 160;

/// At most this many leading lines.
const LEADING_LINES: usize = 10;

/// A line that defines something, in the languages agents mostly read.
static DEFINITION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:(?:pub(?:\([^)]*\))?|export|default|async|unsafe|static|public|private|protected|abstract|final|extern|const|inline|virtual|override)\s+)*(?:fn|struct|enum|trait|impl|mod|union|macro_rules!|type|def|class|interface|function|func|module|namespace|object|record|package)\b",
    )
    .ok()
});

/// A Markdown heading.
static HEADING: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^#{1,6}\s+\S").ok());

/// Whether the outline of a file of type `file_type` is made of its headings.
fn is_markdown(filename: &str) -> bool {
    let lower = filename.to_lowercase();
    [".md", ".markdown", ".mdx", ".rst", ".txt"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

fn cut(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The outline of `text` (named `filename`) within `budget` characters.
pub fn outline(filename: &str, text: &str, budget: usize) -> String {
    let total_lines = line_count(text);
    let mut out = format!(
        "{filename}: {total_lines} lines, {} characters (~{} tokens)\n",
        text.chars().count(),
        tokens(text)
    );
    let leading_budget = budget / 4;
    let mut leading = String::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(LEADING_LINES)
    {
        let line = format!("  {}\n", cut(line));
        if leading.chars().count() + line.chars().count() > leading_budget {
            break;
        }
        leading.push_str(&line);
    }
    if !leading.is_empty() {
        out.push_str("begins:\n");
        out.push_str(&leading);
    }
    let pattern = if is_markdown(filename) {
        &HEADING
    } else {
        &DEFINITION
    };
    let entries: Vec<String> = match pattern.as_ref() {
        Some(pattern) => text
            .lines()
            .enumerate()
            .filter(|(_, line)| pattern.is_match(line))
            .map(|(i, line)| format!("  {}: {}\n", i + 1, cut(line.trim_end())))
            .collect(),
        None => Vec::new(),
    };
    if !entries.is_empty() {
        out.push_str("outline:\n");
    }
    let mut used = out.chars().count();
    let mut shown = 0;
    for entry in &entries {
        let width = entry.chars().count();
        if used + width > budget {
            break;
        }
        out.push_str(entry);
        used += width;
        shown += 1;
    }
    if shown < entries.len() {
        out.push_str(&format!(
            "  … {} more (raise max_tokens, or read_lines)\n",
            entries.len() - shown
        ));
    }
    redact(&out).0
}

/// `summarize_file(filepath, max_tokens = 500)`: a JSON header line (fileId, filename, lines,
/// tokens of the file and of the summary; no hash) and the outline.
pub(crate) fn summarize_file(
    session: &mut crate::session::Session,
    args: &Map<String, Value>,
) -> Result<ToolOutput> {
    let args = Args::new("summarize_file", args, &["filepath", "max_tokens"])?;
    let filepath = args.required_string("filepath")?;
    let max_tokens = args.count("max_tokens", SUMMARY_TOKENS)?;
    let file = read_text(session, filepath)?;
    let summary = outline(
        &file.filename,
        &file.text,
        max_tokens.saturating_mul(CHARS_PER_TOKEN),
    );
    let header = json!({
        "fileId": file.file_id,
        "filename": file.filename,
        "lines": line_count(&file.text),
        "tokens": tokens(&file.text),
        "summary_tokens": tokens(&summary),
    });
    Ok(ToolOutput::new(header_and_body(&header, &summary)).touching(file.entity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_outlined_by_definitions_within_the_budget() {
        let text = "//! A module.\nuse x;\n\npub struct A;\nimpl A {\n    pub fn new() -> Self { A }\n}\nfn helper() {}\nlet api_key = \"secretvalue1\";\n";
        let out = outline("src/a.rs", text, 2000);
        assert!(out.starts_with("src/a.rs: 9 lines"), "{out}");
        assert!(out.contains("outline:\n  4: pub struct A;\n  5: impl A {\n  6:     pub fn new() -> Self { A }\n  8: fn helper() {}\n"), "{out}");
        assert!(
            out.contains("[REDACTED]") && !out.contains("secretvalue1"),
            "{out}"
        );
        assert_eq!(out, outline("src/a.rs", text, 2000), "deterministic");
        let small = outline("src/a.rs", text, 120);
        assert!(small.chars().count() <= 200, "{small}");
        assert!(small.contains("more (raise max_tokens"), "{small}");
    }

    #[test]
    fn markdown_is_outlined_by_headings() {
        let text = "# Title\nintro\n## Part\ntext\n```\n#!/bin/sh\n```\n";
        let out = outline("README.md", text, 2000);
        assert!(
            out.contains("outline:\n  1: # Title\n  3: ## Part\n"),
            "{out}"
        );
        assert!(!out.contains("6: #!"), "{out}");
    }
}
