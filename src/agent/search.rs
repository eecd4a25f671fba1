//! `search`: a regular expression over the session's files (or one of them), on the `regex`
//! crate, whose matching time is linear in the input: an agent's pattern cannot hang the server.
//!
//! The files are walked and searched on all cores, from disk, as `rg` does, with the listing's
//! excludes and ignore rules; files a deny rule matches are never opened, binary files (a NUL
//! byte in their first 8 KiB) are skipped. Results come in file id order, at most `max_results`
//! matching lines, each cut to 300 characters and with credentials redacted; they carry no
//! hash, since a snippet is never a base to patch from. The files with results join the session
//! as discovered (index and pool, as seed 003 says of grep), not as read.

use std::io::Read;
use std::sync::{Mutex, PoisonError};

use regex::bytes::{Regex, RegexBuilder};
use serde_json::{Map, Value, json};

use super::args::Args;
use super::files::{Found, Walker, ensure_listed, number, resolve};
use super::read::Pattern;
use super::redact::redact;
use super::tools::{ToolOutput, json_lines};
use crate::error::{Error, Result};
use crate::session::Session;

/// The default of `max_results`.
pub const DEFAULT_RESULTS: usize = 100;
/// The largest `max_results`.
pub const MAX_RESULTS: usize = 1000;
/// A matching line longer than this many characters is cut.
pub const SNIPPET_CHARS: usize = 300;
/// Files larger than this are not searched.
pub const MAX_SEARCHED_BYTES: u64 = 64 * 1024 * 1024;

/// One matching line.
#[derive(Clone, Debug)]
struct Hit {
    line: usize,
    text: String,
}

/// The matches of one file: its first lines that match (at most `max_results`) and their count.
#[derive(Debug)]
struct FileHits {
    found: Found,
    hits: Vec<Hit>,
    total: usize,
}

/// Compiles `query` for the search, with a clear word on what the engine does not support.
fn compile(query: &str, case_insensitive: bool) -> Result<Regex> {
    RegexBuilder::new(query)
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .size_limit(16 * 1024 * 1024)
        .build()
        .map_err(|e| {
            Error::invalid_input(format!(
                "search: the query is not a valid regular expression: {e} (the engine runs in linear \
                 time, so look-around and backreferences are not supported)"
            ))
        })
}

/// Searches `bytes` for `regex`: the lines with a match, at most `limit` kept, and how many
/// there are.
fn search_bytes(regex: &Regex, bytes: &[u8], limit: usize) -> (Vec<Hit>, usize) {
    let mut hits = Vec::new();
    let mut total = 0;
    let mut line = 1;
    let mut counted_to = 0;
    let mut at = 0;
    while at <= bytes.len() {
        let Some(found) = regex.find_at(bytes, at) else {
            break;
        };
        let start = memchr::memrchr(b'\n', &bytes[..found.start()]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[found.start()..])
            .map_or(bytes.len(), |i| found.start() + i);
        line += memchr::memchr_iter(b'\n', &bytes[counted_to..start]).count();
        counted_to = start;
        total += 1;
        if hits.len() < limit {
            let raw = String::from_utf8_lossy(&bytes[start..end]);
            let raw = raw.trim_end_matches('\r');
            let text = match raw.char_indices().nth(SNIPPET_CHARS) {
                Some((cut, _)) => format!("{}…", &raw[..cut]),
                None => raw.to_string(),
            };
            hits.push(Hit { line, text });
        }
        // The next match starts on the next line: one result per line.
        at = end + 1;
    }
    (hits, total)
}

/// Reads the file at `path` unless it is too large or binary.
fn searchable(path: &std::path::Path, size: u64) -> Option<Vec<u8>> {
    if size > MAX_SEARCHED_BYTES {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut bytes).ok()?;
    let head = &bytes[..bytes.len().min(8192)];
    (!head.contains(&0)).then_some(bytes)
}

/// `search(query, filepath?, pattern?, case_insensitive = false, max_results = 100)`.
pub(crate) fn search(session: &mut Session, args: &Map<String, Value>) -> Result<ToolOutput> {
    let args = Args::new(
        "search",
        args,
        &[
            "query",
            "filepath",
            "pattern",
            "case_insensitive",
            "max_results",
        ],
    )?;
    let query = args.required_string("query")?;
    if query.is_empty() {
        return Err(Error::invalid_input(
            "search: the query is empty; give a regular expression",
        ));
    }
    let case_insensitive = args.boolean("case_insensitive")?.unwrap_or(false);
    let max_results = args.count("max_results", DEFAULT_RESULTS)?;
    if max_results > MAX_RESULTS {
        return Err(Error::invalid_input(format!(
            "search: max_results is at most {MAX_RESULTS}, got {max_results}"
        )));
    }
    let pattern = args.string("pattern")?.map(Pattern::new).transpose()?;
    let regex = compile(query, case_insensitive)?;
    ensure_listed(session)?;
    if let Some(filepath) = args.string("filepath")? {
        return one_file(session, &regex, query, filepath, max_results);
    }
    let deny = session.deny_rules().clone();
    let walker = Walker::of(session)?;
    let results = Mutex::new(Vec::new());
    walker.run(|| {
        let (results, regex, deny, pattern) = (&results, &regex, &deny, &pattern);
        move |found: Found, entry: &ignore::DirEntry| {
            if pattern.as_ref().is_some_and(|p| !p.matches(&found.rel)) {
                return;
            }
            if found.abs.to_str().is_none_or(|p| deny.is_denied(p)) {
                return;
            }
            let size = entry.metadata().map_or(0, |m| m.len());
            let Some(bytes) = searchable(&found.abs, size) else {
                return;
            };
            if !regex.is_match(&bytes) {
                return;
            }
            let (hits, total) = search_bytes(regex, &bytes, max_results);
            results
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(FileHits { found, hits, total });
        }
    });
    let mut files: Vec<FileHits> = results.into_inner().unwrap_or_else(PoisonError::into_inner);
    let found: Vec<Found> = files.iter().map(|f| f.found.clone()).collect();
    let ids = number(session, &walker, &found)?;
    let mut order: Vec<(u64, usize)> = ids.iter().copied().zip(0..).collect();
    order.sort_unstable();
    let total: usize = files.iter().map(|f| f.total).sum();
    let mut left = max_results;
    let mut entries = Vec::new();
    let mut discover = Vec::new();
    for (n, i) in order {
        if left == 0 {
            break;
        }
        let file = &mut files[i];
        file.hits.truncate(left);
        left -= file.hits.len();
        discover.push(walker.agent_path(&file.found));
        entries.push(entry(&format!("f{n}"), &file.found.rel, &file.hits));
    }
    let shown = max_results - left;
    let paths: Vec<&str> = discover.iter().map(String::as_str).collect();
    let touched = session.discover(&paths)?;
    let header = json!({
        "query": query,
        "matches": total,
        "shown": shown,
        "truncated": shown < total,
    });
    let mut output = ToolOutput::new(json_lines(&header, "results", &entries));
    for t in touched {
        output = output.touching(t.id);
    }
    Ok(output)
}

/// One file's result entry: its id, its name and its matching lines, credentials redacted.
fn entry(file_id: &str, filename: &str, hits: &[Hit]) -> Value {
    let matches: Vec<Value> = hits
        .iter()
        .map(|h| json!({"line": h.line, "text": redact(&h.text).0}))
        .collect();
    json!({"fileId": file_id, "filename": filename, "matches": matches})
}

/// `search` in the one file `filepath` names: its entry even without a match.
fn one_file(
    session: &mut Session,
    regex: &Regex,
    query: &str,
    filepath: &str,
    limit: usize,
) -> Result<ToolOutput> {
    let mut file = resolve(session, filepath)?;
    let resolved = session.resolver().resolve(&file.agent_path)?;
    if session.deny_rules().is_denied(&resolved.canonical_path) {
        return Err(Error::PermissionDenied {
            reason: format!(
                "{} matches a deny rule (secrets are never read)",
                file.filename
            ),
        });
    }
    let real = session.resolver().check_symlinks(&resolved)?;
    let size = std::fs::metadata(&real)
        .map_err(|e| Error::io(format!("reading {}", file.filename), e))?
        .len();
    let (hits, total) = match searchable(&real, size) {
        Some(bytes) => search_bytes(regex, &bytes, limit),
        None => (Vec::new(), 0),
    };
    file.number(session)?;
    let touched = session.discover(&[file.agent_path.as_str()])?;
    let header = json!({
        "query": query,
        "matches": total,
        "shown": hits.len(),
        "truncated": hits.len() < total,
    });
    let entries = [entry(&file.file_id(), &file.filename, &hits)];
    let mut output = ToolOutput::new(json_lines(&header, "results", &entries));
    for t in touched {
        output = output.touching(t.id);
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_counted_once_each() -> Result<()> {
        let regex = compile("b+", false)?;
        let (hits, total) = search_bytes(&regex, b"a\nbb bb\nc\nb", 10);
        assert_eq!(total, 2);
        assert_eq!(
            hits.iter()
                .map(|h| (h.line, h.text.as_str()))
                .collect::<Vec<_>>(),
            [(2, "bb bb"), (4, "b")]
        );
        let (hits, total) = search_bytes(&regex, b"b\nb\nb\n", 2);
        assert_eq!((hits.len(), total), (2, 3));
        let anchored = compile("^x$", false)?;
        let (hits, _) = search_bytes(&anchored, b"a\nx\r\nx", 10);
        assert_eq!(hits.iter().map(|h| h.line).collect::<Vec<_>>(), [3]);
        Ok(())
    }

    #[test]
    fn look_around_is_refused_with_the_reason() {
        let err = compile("a(?=b)", false).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("linear"), "{err}");
    }
}
