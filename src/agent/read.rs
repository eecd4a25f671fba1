//! The reading tools of seed 001: `list_files`, `read_file`, `read_lines`, `get_excerpt`.
//!
//! Reads go through the session (the file is indexed, joins the index, the pool and the active
//! set), and every read of content returns `sha256`, the SHA-256 of the whole file as read and
//! stored: the hash a later write quotes. `read_file` and `read_lines` give the bytes as they
//! are; `get_excerpt` redacts credentials (it is a preview, never a patch base).

use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Map, Value, json};

use super::args::Args;
use super::files::{Found, Walker, ensure_listed, number, resolve};
use super::redact::redact;
use super::tools::{ToolOutput, header_and_body, json_lines};
use crate::error::{Error, Result};
use crate::object::{ContentOmitted, Object};
use crate::session::Session;

/// The default of `get_excerpt`'s `max_lines` (seed 001).
pub const EXCERPT_LINES: usize = 80;

/// Characters per token in the estimates (seed 001: `len/4`).
pub const CHARS_PER_TOKEN: usize = 4;

/// A token estimate of `text`: its characters divided by four.
pub fn tokens(text: &str) -> usize {
    text.chars().count() / CHARS_PER_TOKEN
}

/// A file read through the session for a tool: its id, names, entity id and text.
pub(crate) struct ReadText {
    pub file_id: String,
    pub filename: String,
    pub entity: String,
    pub sha256: String,
    pub text: String,
}

/// Reads `filepath` through the session as text: a runtime's unsaved copy of it when one
/// stands (with the copy's hash), else the file as read.
///
/// # Errors
/// As [`resolve`] and [`Session::read_object`]; [`Error::PermissionDenied`] for a file a deny
/// rule keeps unread; [`Error::InvalidInput`] for a binary file or one over the content limit.
pub(crate) fn read_text(session: &mut Session, filepath: &str) -> Result<ReadText> {
    let mut file = resolve(session, filepath)?;
    let (touched, object) = session.read_object(&file.agent_path)?;
    file.number(session)?;
    let Some(object) = object else {
        return Err(Error::PermissionDenied {
            reason: format!(
                "{} ({}) matches a deny rule (secrets are never read); it joined the session as a denied stub",
                file.filename,
                file.file_id()
            ),
        });
    };
    let sha256 = object.file_hash().map(|h| h.to_hex()).unwrap_or_default();
    // A runtime's unsaved copy stands for the file until it is saved or withdrawn (seed 002).
    let (sha256, text) = match session.standing_copy(&file.agent_path, Some(&sha256)) {
        Some(copy) => (copy.sha256, copy.text),
        None => {
            let text = text_of(&object, &file.filename, &file.file_id())?;
            (sha256, text)
        }
    };
    Ok(ReadText {
        file_id: file.file_id(),
        filename: file.filename,
        entity: touched.id,
        sha256,
        text,
    })
}

fn text_of(object: &Object, filename: &str, file_id: &str) -> Result<String> {
    match (object.content(), object.content_omitted()) {
        (Some(text), _) => Ok(text.to_string()),
        (None, Some(ContentOmitted::TooLarge)) => Err(Error::invalid_input(format!(
            "{filename} ({file_id}) is over the store's content limit, so it has no text to give; \
             raise max_content_bytes in the store's settings to read it"
        ))),
        (None, _) => Err(Error::invalid_input(format!(
            "{filename} ({file_id}) is binary (not UTF-8 text), so it has no text to give"
        ))),
    }
}

/// The number of lines of `text`: a final line without a line break counts, a trailing line
/// break adds none, an empty text has none.
pub(crate) fn line_count(text: &str) -> usize {
    text.split_inclusive('\n').count()
}

/// `list_files(pattern = "**/*", include_metadata = false)`: the session's files, by id.
pub(crate) fn list_files(session: &mut Session, args: &Map<String, Value>) -> Result<ToolOutput> {
    let args = Args::new("list_files", args, &["pattern", "include_metadata"])?;
    let pattern = args.string("pattern")?.unwrap_or("**/*");
    let metadata = args.boolean("include_metadata")?.unwrap_or(false);
    let matcher = Pattern::new(pattern)?;
    ensure_listed(session)?;
    let walker = Walker::of(session)?;
    let found: Vec<Found> = walker
        .all()
        .into_iter()
        .filter(|f| matcher.matches(&f.rel))
        .collect();
    let ids = number(session, &walker, &found)?;
    let mut rows: Vec<(u64, &Found)> = ids.into_iter().zip(&found).collect();
    rows.sort_by_key(|(n, _)| *n);
    let deny = session.deny_rules().clone();
    let entries: Vec<Value> = rows
        .iter()
        .map(|(n, f)| {
            let mut entry = json!({
                "fileId": format!("f{n}"),
                "filename": f.rel,
                "path": walker.agent_path(f),
            });
            if metadata {
                add_metadata(&mut entry, f, &deny);
            }
            entry
        })
        .collect();
    let header = json!({"pattern": pattern, "count": entries.len()});
    Ok(ToolOutput::new(json_lines(&header, "files", &entries)))
}

fn add_metadata(entry: &mut Value, found: &Found, deny: &crate::index::DenyRules) {
    let Value::Object(map) = entry else { return };
    if let Ok(meta) = std::fs::symlink_metadata(&found.abs) {
        map.insert("size".into(), json!(meta.len()));
        if let Ok(modified) = meta.modified()
            && let Ok(since) = modified.duration_since(std::time::UNIX_EPOCH)
        {
            let micros = i64::try_from(since.as_micros()).unwrap_or(i64::MAX);
            let time = crate::store::Timestamp::saturating_from_micros(micros);
            map.insert("modified".into(), json!(time.to_rfc3339()));
        }
    }
    map.insert(
        "file_type".into(),
        json!(crate::object::file_type_of(&found.rel)),
    );
    if let Some(path) = found.abs.to_str()
        && deny.is_denied(path)
    {
        map.insert("denied".into(), json!(true));
    }
}

/// A glob over paths below a mount: with a `/` it matches the whole relative path (`*` stays
/// within a directory, `**` crosses them); without one it matches the file's name at any depth,
/// as a `.gitignore` line does.
pub(crate) struct Pattern {
    matcher: GlobMatcher,
    by_name: bool,
}

impl Pattern {
    /// The pattern `glob`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it does not parse.
    pub(crate) fn new(glob: &str) -> Result<Self> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| Error::invalid_input(format!("pattern {glob:?}: {e}")))?
            .compile_matcher();
        Ok(Pattern {
            matcher,
            by_name: !glob.contains('/'),
        })
    }

    /// Whether the file at `rel` (below its mount) matches.
    pub(crate) fn matches(&self, rel: &str) -> bool {
        if self.matcher.is_match(rel) {
            return true;
        }
        self.by_name && self.matcher.is_match(rel.rsplit('/').next().unwrap_or(rel))
    }
}

/// `read_file(filepath, max_tokens?)`: the whole file (or its first `max_tokens × 4`
/// characters, cut at a line break when there is one) after a JSON header line.
pub(crate) fn read_file(session: &mut Session, args: &Map<String, Value>) -> Result<ToolOutput> {
    let args = Args::new("read_file", args, &["filepath", "max_tokens"])?;
    let filepath = args.required_string("filepath")?;
    let max_tokens = args.integer("max_tokens")?;
    if let Some(n) = max_tokens.filter(|n| *n < 1) {
        return Err(Error::invalid_input(format!(
            "read_file: max_tokens must be at least 1, got {n}"
        )));
    }
    let file = read_text(session, filepath)?;
    let total_tokens = tokens(&file.text);
    let limit = max_tokens
        .and_then(|n| usize::try_from(n).ok())
        .map(|n| n.saturating_mul(CHARS_PER_TOKEN));
    let (shown, truncated) = match limit {
        Some(limit) if file.text.chars().count() > limit => {
            let end = file
                .text
                .char_indices()
                .nth(limit)
                .map_or(file.text.len(), |(i, _)| i);
            let cut = &file.text[..end];
            let cut = match cut.rfind('\n') {
                Some(i) if i > 0 => &cut[..=i],
                _ => cut,
            };
            (cut, true)
        }
        _ => (file.text.as_str(), false),
    };
    let mut header = json!({
        "fileId": file.file_id,
        "filename": file.filename,
        "sha256": file.sha256,
        "lines": line_count(&file.text),
        "tokens": total_tokens,
    });
    if truncated {
        header["truncated"] = json!(true);
        header["shown_lines"] = json!(line_count(shown));
        header["note"] =
            json!("cut at max_tokens; read_lines reads the rest (sha256 is the whole file's)");
    }
    Ok(ToolOutput::new(header_and_body(&header, shown)).touching(file.entity))
}

/// `read_lines(filepath, start, end)`: lines `start` to `end` (1-based, inclusive; `end` past the
/// last line stops there), exactly as in the file, after a JSON header line.
pub(crate) fn read_lines(session: &mut Session, args: &Map<String, Value>) -> Result<ToolOutput> {
    let args = Args::new("read_lines", args, &["filepath", "start", "end"])?;
    let filepath = args.required_string("filepath")?;
    let start = args.required_integer("start")?;
    let end = args.required_integer("end")?;
    if start < 1 {
        return Err(Error::invalid_input(format!(
            "read_lines: start must be at least 1 (lines are numbered from 1), got {start}"
        )));
    }
    if end < start {
        return Err(Error::invalid_input(format!(
            "read_lines: end ({end}) is before start ({start}); end is inclusive"
        )));
    }
    let file = read_text(session, filepath)?;
    let total = line_count(&file.text);
    let first = usize::try_from(start).unwrap_or(usize::MAX);
    if first > total.max(1) || (total == 0 && first > 1) {
        return Err(Error::invalid_input(format!(
            "read_lines: start {start} is past the end of {} ({} has {total} lines)",
            file.filename, file.file_id
        )));
    }
    let last = usize::try_from(end)
        .unwrap_or(usize::MAX)
        .min(total.max(first));
    let body: String = file
        .text
        .split_inclusive('\n')
        .skip(first - 1)
        .take(last + 1 - first)
        .collect();
    let shown_last = if total == 0 { 0 } else { last };
    let header = json!({
        "fileId": file.file_id,
        "filename": file.filename,
        "sha256": file.sha256,
        "start": start,
        "end": shown_last,
        "total_lines": total,
    });
    Ok(ToolOutput::new(header_and_body(&header, &body)).touching(file.entity))
}

/// `get_excerpt(filepath, max_lines = 80)`: the first lines, credentials redacted, after a JSON
/// header line.
pub(crate) fn get_excerpt(session: &mut Session, args: &Map<String, Value>) -> Result<ToolOutput> {
    let args = Args::new("get_excerpt", args, &["filepath", "max_lines"])?;
    let filepath = args.required_string("filepath")?;
    let max_lines = args.count("max_lines", EXCERPT_LINES)?;
    let file = read_text(session, filepath)?;
    let total = line_count(&file.text);
    let head: String = file.text.split_inclusive('\n').take(max_lines).collect();
    let (shown, redacted) = redact(&head);
    let mut header = json!({
        "fileId": file.file_id,
        "filename": file.filename,
        "sha256": file.sha256,
        "lines": total.min(max_lines),
        "total_lines": total,
        "truncated": total > max_lines,
    });
    if redacted > 0 {
        header["redacted"] = json!(redacted);
    }
    Ok(ToolOutput::new(header_and_body(&header, &shown)).touching(file.entity))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_paths_or_names() -> Result<()> {
        let all = Pattern::new("**/*")?;
        assert!(all.matches("a.rs") && all.matches("src/a/b.rs"));
        let rs = Pattern::new("*.rs")?;
        assert!(rs.matches("a.rs") && rs.matches("src/deep/b.rs") && !rs.matches("b.py"));
        let src = Pattern::new("src/*.rs")?;
        assert!(src.matches("src/a.rs") && !src.matches("src/x/a.rs") && !src.matches("a.rs"));
        assert!(Pattern::new("a[").is_err());
        Ok(())
    }

    #[test]
    fn lines_and_tokens_are_counted_as_documented() {
        assert_eq!(line_count(""), 0);
        assert_eq!(line_count("a"), 1);
        assert_eq!(line_count("a\n"), 1);
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(tokens("abcdefgh"), 2);
        assert_eq!(tokens("abc"), 0);
    }
}
