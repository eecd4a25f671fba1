//! Credential redaction for summaries, excerpts and search snippets (seed 001: "redact known
//! credential patterns in summaries"); never applied to `read_file` or `read_lines`, whose bytes
//! must stay exact for the hash a write quotes.
//!
//! Redacted: the value of an assignment to a credential-like name (`api_key = "…"`,
//! `password: …`, `SECRET_TOKEN=…`, case-insensitive, seed 001's `api_key|password|secret|token`
//! widened to common spellings), well-known token shapes (AWS access key ids, GitHub, Slack and
//! OpenAI-style keys, JWTs) and the body of PEM private keys. Each becomes `[REDACTED]`.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a credential.
pub const REDACTED: &str = "[REDACTED]";

/// `name = value` and `name: value` with a credential-like name; group 1 keeps the name and
/// separator (and an opening quote), group 2 is the value.
static ASSIGNMENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)((?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|password|passwd|pwd|secret|token|credentials?)["']?\s*(?:=|:)\s*["']?)([^\s"',;]{4,})"#,
    )
    .ok()
});

/// Tokens recognisable by their shape alone.
static SHAPES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
    )
    .ok()
});

/// `text` with its credentials replaced by [`REDACTED`], and how many were.
pub fn redact(text: &str) -> (String, usize) {
    let mut count = 0;
    let mut out = String::with_capacity(text.len());
    let mut in_key = false;
    for line in text.split_inclusive('\n') {
        if line.contains("-----BEGIN") && line.contains("PRIVATE KEY-----") {
            in_key = true;
            out.push_str(line);
            continue;
        }
        if in_key {
            if line.contains("-----END") {
                in_key = false;
                out.push_str(line);
            } else {
                count += 1;
                out.push_str(REDACTED);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            continue;
        }
        out.push_str(&redact_line(line, &mut count));
    }
    (out, count)
}

fn redact_line(line: &str, count: &mut usize) -> String {
    let mut line = line.to_string();
    if let Some(assignment) = ASSIGNMENT.as_ref()
        && assignment.is_match(&line)
    {
        line = assignment
            .replace_all(&line, |caps: &regex::Captures<'_>| {
                let value = caps.get(2).map_or("", |m| m.as_str());
                if value == REDACTED {
                    return caps[0].to_string();
                }
                *count += 1;
                format!("{}{REDACTED}", &caps[1])
            })
            .into_owned();
    }
    if let Some(shapes) = SHAPES.as_ref()
        && shapes.is_match(&line)
    {
        line = shapes
            .replace_all(&line, |_: &regex::Captures<'_>| {
                *count += 1;
                REDACTED
            })
            .into_owned();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted_and_counted() {
        let text = "api_key = \"abcd1234efgh\"\nPASSWORD: hunter22\nname = \"fine\"\ntoken=xyz\n";
        let (out, n) = redact(text);
        assert_eq!(
            out,
            "api_key = \"[REDACTED]\"\nPASSWORD: [REDACTED]\nname = \"fine\"\ntoken=xyz\n"
        );
        assert_eq!(n, 2, "a value under 4 characters is left (token=xyz)");
        let (out, n) =
            redact("key AKIAABCDEFGHIJKLMNOP and ghp_abcdefghijklmnopqrstuvwxyz0123456789\n");
        assert_eq!(out, "key [REDACTED] and [REDACTED]\n");
        assert_eq!(n, 2);
        let pem =
            "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabcd\n-----END RSA PRIVATE KEY-----\nb";
        let (out, n) = redact(pem);
        assert_eq!(
            out,
            "a\n-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n[REDACTED]\n-----END RSA PRIVATE KEY-----\nb"
        );
        assert_eq!(n, 2);
        assert_eq!(redact("plain text\n"), ("plain text\n".to_string(), 0));
    }
}
