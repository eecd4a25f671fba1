//! `FdTable`: a session's file descriptors (llmproc's `FileDescriptorManager`): creating them
//! from large tool output and user input, `read_fd`, the checks of `fd_to_file`, persistence.
//!
//! Uses `args`, `config`, `paging`, `xml`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::FdText;
use super::args::{self, FdToFileArgs, ReadArgs, ReadMode, WriteMode};
use super::config::{FdConfig, FdConfigError};
use super::paging::{Paged, Span};
use super::xml::{self, FdContent, FdExtraction, FdFileResult, FdResult};

/// The tools whose output is never wrapped (wrapping `read_fd`'s answer would recurse).
pub const FD_RELATED_TOOLS: [&str; 2] = ["read_fd", "fd_to_file"];

/// The preview of a paged user input holds at most this many characters and at most
/// `max_input_chars / 20` (originals.md's rule; llmproc's code passed only the second).
pub const USER_INPUT_PREVIEW_CHARS: usize = 150;

/// Where a descriptor's content came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FdSource {
    /// A tool's output (also a descriptor made by `extract_to_new_fd`, as in the original).
    ToolResult,
    /// A user message.
    UserInput,
}

impl FdSource {
    /// The source's name in `<fd_result source="…">` and in the persisted state.
    pub fn as_str(self) -> &'static str {
        match self {
            FdSource::ToolResult => "tool_result",
            FdSource::UserInput => "user_input",
        }
    }
}

/// What is known about one descriptor, for listings and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdInfo {
    /// Where the content came from.
    pub source: FdSource,
    /// The content's length in characters.
    pub chars: usize,
    /// The number of lines (a trailing newline adds none; empty content has 1).
    pub total_lines: usize,
    /// The number of pages, which together hold all of the content.
    pub total_pages: usize,
    /// The page size the descriptor was created with, in characters.
    pub page_size: usize,
}

/// Where `fd_to_file` writes: strata's writing tools implement it, so that this module stays
/// free of I/O and the write follows their rules (paths, approval, hashes).
pub trait FileSink {
    /// Whether a file exists at `path` (the path as the agent gave it).
    fn exists(&mut self, path: &str) -> bool;

    /// Writes `content` to `path` (creating missing parent directories, as the original does)
    /// or appends it, and returns the file's size in bytes afterwards.
    ///
    /// # Errors
    /// A message for the agent, inserted into `Error writing file descriptor {fd} to {path}: …`.
    fn write(&mut self, path: &str, content: &str, mode: WriteMode) -> Result<u64, String>;
}

/// One descriptor: immutable once made, so that a fork shares it.
#[derive(Debug)]
struct Descriptor {
    source: FdSource,
    paged: Paged,
}

/// A session's file descriptors `fd:1`, `fd:2`, … (ids never reused) and the settings for new ones.
///
/// `Clone` is a fork: both sides share the existing descriptors and each counter continues on
/// its own. Serde persists the counter and each descriptor's content, source and page size;
/// loading rebuilds the rest with the default [`FdConfig`], so call [`FdTable::set_config`] next.
#[derive(Clone, Debug)]
pub struct FdTable {
    config: FdConfig,
    fd_tools: BTreeSet<String>,
    next_id: u64,
    /// By id; the map's string order is the original's order of "Available FDs" (`fd:10` before
    /// `fd:2`, as Python's `sorted`).
    descriptors: BTreeMap<String, Arc<Descriptor>>,
}

impl FdTable {
    /// An empty table: the next descriptor is `fd:1`.
    ///
    /// # Errors
    /// [`FdConfigError`] when a size in `config` is 0.
    pub fn new(config: FdConfig) -> Result<Self, FdConfigError> {
        config.validate()?;
        Ok(FdTable {
            config,
            fd_tools: FD_RELATED_TOOLS
                .iter()
                .map(|&tool| tool.to_owned())
                .collect(),
            next_id: 1,
            descriptors: BTreeMap::new(),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &FdConfig {
        &self.config
    }

    /// Replaces the settings; existing descriptors keep their page size.
    ///
    /// # Errors
    /// [`FdConfigError`] when a size in `config` is 0; the settings are then unchanged.
    pub fn set_config(&mut self, config: FdConfig) -> Result<(), FdConfigError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Whether `tool_name` belongs to the descriptor system, whose output is never wrapped.
    pub fn is_fd_related_tool(&self, tool_name: &str) -> bool {
        self.fd_tools.contains(tool_name)
    }

    /// Adds a tool to the descriptor system, so that its output is never wrapped (not persisted).
    pub fn register_fd_tool(&mut self, tool_name: impl Into<String>) {
        self.fd_tools.insert(tool_name.into());
    }

    /// The number of the next descriptor (`fd:{next_id}`).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The number of descriptors.
    pub fn len(&self) -> usize {
        self.descriptors.len()
    }

    /// Whether the table holds no descriptor.
    pub fn is_empty(&self) -> bool {
        self.descriptors.is_empty()
    }

    /// The descriptors' ids, in the order the not-found error lists them.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.descriptors.keys().map(String::as_str)
    }

    /// The content of descriptor `fd`, if it exists.
    pub fn content(&self, fd: &str) -> Option<&str> {
        self.descriptors.get(fd).map(|d| d.paged.content())
    }

    /// What is known about descriptor `fd`, if it exists.
    pub fn info(&self, fd: &str) -> Option<FdInfo> {
        self.descriptors.get(fd).map(|d| FdInfo {
            source: d.source,
            chars: d.paged.chars(),
            total_lines: d.paged.total_lines(),
            total_pages: d.paged.total_pages(),
            page_size: d.paged.page_size(),
        })
    }

    /// Stores `content` as a new descriptor with the configured page size and returns its id.
    pub fn create_fd(&mut self, content: impl Into<String>, source: FdSource) -> String {
        let id = format!("fd:{}", self.next_id);
        // 2^64 creations cannot happen, and a loaded counter is checked to be below u64::MAX.
        self.next_id = self.next_id.saturating_add(1);
        let paged = Paged::new(content.into(), self.config.default_page_size);
        self.descriptors
            .insert(id.clone(), Arc::new(Descriptor { source, paged }));
        id
    }

    /// The original's `<fd_result>` for descriptor `fd`: page 1 as a preview, the page and
    /// line counts, and ` source="…"` after `total_lines` as llmproc's later formatter writes it.
    pub fn fd_result(&self, fd: &str) -> Option<String> {
        let descriptor = self.descriptors.get(fd)?;
        let paged = &descriptor.paged;
        let (preview, span) = paged.page(1)?;
        let result = FdResult {
            fd,
            pages: paged.total_pages(),
            truncated: span.truncated,
            end_line: span.end_line,
            total_lines: paged.total_lines(),
            source: descriptor.source.as_str(),
            max_direct_output_chars: self.config.max_direct_output_chars,
            preview,
        };
        Some(result.render())
    }

    /// Replaces a large tool output by a descriptor: when enabled, the tool is not FD-related and
    /// the output is longer than `max_direct_output_chars` characters, returns the `<fd_result>`
    /// to give the agent instead; otherwise `None` (pass the output on unchanged).
    pub fn wrap_tool_output(&mut self, tool_name: &str, content: &str) -> Option<String> {
        if !self.config.enabled
            || self.is_fd_related_tool(tool_name)
            || !longer_than(content, self.config.max_direct_output_chars)
        {
            return None;
        }
        let fd = self.create_fd(content, FdSource::ToolResult);
        self.fd_result(&fd)
    }

    /// Replaces a large user message by a descriptor: when enabled, `page_user_input` is on and
    /// the input is longer than `max_input_chars` characters, returns the message to give the
    /// agent instead; otherwise `None`.
    ///
    /// The message is the original's, `<fd:1 preview="…" type="user_input" size="N">` and a
    /// line saying how to read it, with upstream's bug fixed: it wrote `<fd:fd:1`. The preview is
    /// the first `min(150, max_input_chars / 20)` characters, stripped of white space as Python's
    /// `strip()`, then `...`.
    pub fn wrap_user_input(&mut self, input: &str) -> Option<String> {
        let limit = self.config.max_input_chars;
        if !self.config.enabled || !self.config.page_user_input || !longer_than(input, limit) {
            return None;
        }
        let fd = self.create_fd(input, FdSource::UserInput);
        let preview_chars = USER_INPUT_PREVIEW_CHARS.min(limit / 20);
        let head = input
            .char_indices()
            .nth(preview_chars)
            .map_or(input, |(end, _)| input.get(..end).unwrap_or(input));
        let size = input.chars().count();
        let mut preview = head.trim_matches(python_space).to_owned();
        if size > preview_chars {
            preview.push_str("...");
        }
        Some(xml::user_input_reference(&fd, &preview, size))
    }

    /// `read_fd` with its arguments as the agent sent them (a JSON object).
    ///
    /// Arguments that do not parse give `Error reading file descriptor: {why}` (plain text, as
    /// the original's exception path); the rest is [`FdTable::read_fd`], after the original's
    /// first two checks: an unknown descriptor, then an invalid `mode`.
    pub fn call_read_fd(&mut self, args: &Value) -> FdText {
        let raw = match args::parse_read(args) {
            Ok(raw) => raw,
            Err(why) => return FdText::error(format!("Error reading file descriptor: {why}")),
        };
        if !self.descriptors.contains_key(&raw.args.fd) {
            return self.not_found(&raw.args.fd);
        }
        let Some(mode) = ReadMode::parse(&raw.mode) else {
            let message = format!(
                "Invalid mode: {}. Valid options are 'page', 'line', or 'char'.",
                raw.mode
            );
            return FdText::error(xml::fd_error("invalid_parameter", &raw.args.fd, &message));
        };
        self.read_fd(&ReadArgs { mode, ..raw.args })
    }

    /// `read_fd` (RFC007): the content asked for as `<fd_content>`, or with `extract_to_new_fd`
    /// (and a non-empty result) a new descriptor holding it and an `<fd_extraction>`.
    ///
    /// Checks in the original's order, each an `<fd_error>`: unknown descriptor (`not_found`),
    /// then `read_all` wins over everything else, then the range of `start` for the mode
    /// (`invalid_range` for lines and characters, `invalid_page` for pages). A `count` below 1
    /// reads nothing in line and char mode and one page in page mode.
    pub fn read_fd(&mut self, args: &ReadArgs) -> FdText {
        let fd = args.fd.as_str();
        let Some(descriptor) = self.descriptors.get(fd).map(Arc::clone) else {
            return self.not_found(fd);
        };
        let paged = &descriptor.paged;
        let (start, count) = (i128::from(args.start), i128::from(args.count));
        let total_lines = paged.total_lines();
        let mut tag = FdContent {
            fd,
            page: None,
            pages: paged.total_pages(),
            continued: false,
            truncated: false,
            lines: (1, total_lines),
            total_lines,
            mode: args.mode.as_str(),
            start: Some(args.start),
            count: Some(args.count),
            body: "",
        };
        if args.read_all {
            tag.page = Some("all".to_owned());
            tag.mode = "all";
            (tag.start, tag.count) = (None, None);
            tag.body = paged.content();
        } else {
            match args.mode {
                ReadMode::Line => {
                    if start < 1 || start > wide(total_lines) {
                        let message =
                            format!("Invalid line start position. Valid range: 1-{total_lines}");
                        return FdText::error(xml::fd_error("invalid_range", fd, &message));
                    }
                    let last = (start + count - 1).clamp(start - 1, wide(total_lines));
                    tag.body = paged.lines(narrow(start), narrow(last));
                    tag.lines = (narrow(start), narrow(last));
                    tag.count = Some(narrow_i64(last - start + 1));
                }
                ReadMode::Char => {
                    let chars = paged.chars();
                    if start < 0 || start >= wide(chars) {
                        let last = wide(chars) - 1;
                        let message =
                            format!("Invalid character start position. Valid range: 0-{last}");
                        return FdText::error(xml::fd_error("invalid_range", fd, &message));
                    }
                    let end = (start + count.max(0)).min(wide(chars));
                    let (body, first_line, last_line) =
                        paged.chars_range(narrow(start), narrow(end));
                    tag.body = body;
                    tag.lines = (first_line, last_line);
                    tag.count = Some(narrow_i64(end - start));
                }
                ReadMode::Page => {
                    let pages = wide(paged.total_pages());
                    if start < 1 || start > pages {
                        let message = format!("Invalid page number. Valid range: 1-{pages}");
                        return FdText::error(xml::fd_error("invalid_page", fd, &message));
                    }
                    let (body, span) = if count > 1 {
                        let last = (start + count - 1).min(pages);
                        paged.pages(narrow(start), narrow(last))
                    } else {
                        tag.page = Some(args.start.to_string());
                        tag.count = Some(1);
                        paged.page(narrow(start))
                    }
                    .unwrap_or(("", Span::default()));
                    tag.body = body;
                    tag.lines = (span.start_line, span.end_line);
                    tag.continued = span.continued;
                    tag.truncated = span.truncated;
                }
            }
        }
        if args.extract_to_new_fd && !tag.body.is_empty() {
            let new_fd = self.create_fd(tag.body, FdSource::ToolResult);
            let extraction = FdExtraction {
                source_fd: fd,
                new_fd: &new_fd,
                mode: args.mode.as_str(),
                content_size: tag.body.chars().count(),
                range: (!args.read_all).then_some((args.start, args.count)),
            };
            return FdText::ok(extraction.render());
        }
        FdText::ok(tag.render())
    }

    /// `fd_to_file` with its arguments as the agent sent them (a JSON object).
    ///
    /// Arguments that do not parse give `Error writing file descriptor to file: {why}` (plain
    /// text, as the original's exception path); the rest is [`FdTable::fd_to_file`], after the
    /// original's first two checks: an unknown descriptor, then an invalid `mode`.
    pub fn call_fd_to_file(&self, args: &Value, sink: &mut impl FileSink) -> FdText {
        let raw = match args::parse_to_file(args) {
            Ok(raw) => raw,
            Err(why) => {
                return FdText::error(format!("Error writing file descriptor to file: {why}"));
            }
        };
        if !self.descriptors.contains_key(&raw.args.fd) {
            return self.not_found(&raw.args.fd);
        }
        let Some(mode) = WriteMode::parse(&raw.mode) else {
            let message = format!(
                "Invalid mode: {}. Valid options are 'write' or 'append'.",
                raw.mode
            );
            return FdText::error(xml::fd_error("invalid_parameter", &raw.args.fd, &message));
        };
        self.fd_to_file(&FdToFileArgs { mode, ..raw.args }, sink)
    }

    /// `fd_to_file` (RFC007): the original's checks and texts, with the write done by `sink`.
    ///
    /// Checks in order, each an `<fd_error>`: unknown descriptor (`not_found`), an existing file
    /// without `exist_ok` (`file_exists`), a missing file without `create` (`file_not_found`), a
    /// failed write (`write_error`). Success is an `<fd_file_result>`.
    pub fn fd_to_file(&self, args: &FdToFileArgs, sink: &mut impl FileSink) -> FdText {
        let fd = args.fd.as_str();
        let Some(descriptor) = self.descriptors.get(fd) else {
            return self.not_found(fd);
        };
        let path = args.file_path.as_str();
        let exists = sink.exists(path);
        if exists && !args.exist_ok {
            let message = format!("File {path} already exists and exist_ok=False");
            return FdText::error(xml::fd_error("file_exists", fd, &message));
        }
        if !exists && !args.create {
            let message = format!("File {path} doesn't exist and create=False");
            return FdText::error(xml::fd_error("file_not_found", fd, &message));
        }
        let content = descriptor.paged.content();
        match sink.write(path, content, args.mode) {
            Ok(size_bytes) => FdText::ok(
                FdFileResult {
                    fd,
                    file_path: path,
                    mode: args.mode.as_str(),
                    char_count: descriptor.paged.chars(),
                    size_bytes,
                    create: args.create,
                    exist_ok: args.exist_ok,
                }
                .render(),
            ),
            Err(why) => {
                let message = format!("Error writing file descriptor {fd} to {path}: {why}");
                FdText::error(xml::fd_error("write_error", fd, &message))
            }
        }
    }

    fn not_found(&self, fd: &str) -> FdText {
        let ids: Vec<&str> = self.ids().collect();
        let available = if ids.is_empty() {
            "none".to_owned()
        } else {
            ids.join(", ")
        };
        let message = format!("File descriptor {fd} not found. Available FDs: {available}");
        FdText::error(xml::fd_error("not_found", fd, &message))
    }
}

/// Whether `text` has more than `limit` characters (counted only when the bytes say it may).
fn longer_than(text: &str, limit: usize) -> bool {
    text.len() > limit && text.chars().count() > limit
}

/// White space as Python's `str.strip()` sees it: Unicode `White_Space` plus the separators
/// U+001C to U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A count as a signed number for range checks against agent-given positions.
fn wide(n: usize) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// A position already checked to lie within the content, back as an index.
fn narrow(n: i128) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// A count already bounded by the content's length, as the `count` attribute.
fn narrow_i64(n: i128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The persisted form, borrowed for writing.
#[derive(Serialize)]
struct StateOut<'a> {
    next_id: u64,
    descriptors: BTreeMap<&'a str, StoredOut<'a>>,
}

#[derive(Serialize)]
struct StoredOut<'a> {
    source: FdSource,
    page_size: usize,
    content: &'a str,
}

/// The persisted form, owned for reading.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateIn {
    next_id: u64,
    descriptors: BTreeMap<String, StoredIn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredIn {
    source: FdSource,
    page_size: usize,
    content: String,
}

impl Serialize for FdTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let descriptors = self
            .descriptors
            .iter()
            .map(|(id, d)| {
                let stored = StoredOut {
                    source: d.source,
                    page_size: d.paged.page_size(),
                    content: d.paged.content(),
                };
                (id.as_str(), stored)
            })
            .collect();
        StateOut {
            next_id: self.next_id,
            descriptors,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FdTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let state = StateIn::deserialize(deserializer)?;
        let entries = state
            .descriptors
            .into_iter()
            .map(|(id, stored)| (id, stored.source, stored.page_size, stored.content));
        FdTable::restore(FdConfig::default(), state.next_id, entries).map_err(D::Error::custom)
    }
}

impl FdTable {
    /// Rebuilds a table from its persisted parts: the settings, the counter and each
    /// descriptor's id, source, page size and content (what serde persists; a caller that keeps
    /// the contents elsewhere, such as a session that refers to stored tool outputs, passes them
    /// here).
    ///
    /// # Errors
    /// A message naming what is inconsistent: a size in `config` that is 0, a counter out of
    /// range, an id that is not `fd:N` below the counter, a page size of 0.
    pub fn restore(
        config: FdConfig,
        next_id: u64,
        entries: impl IntoIterator<Item = (String, FdSource, usize, String)>,
    ) -> Result<Self, String> {
        if next_id == 0 || next_id == u64::MAX {
            return Err(format!("next_id {next_id} is out of range (1 to 2^64 - 2)"));
        }
        let mut table = FdTable::new(config).map_err(|e| e.to_string())?;
        table.next_id = next_id;
        for (id, source, page_size, content) in entries {
            let number = id
                .strip_prefix("fd:")
                .filter(|n| !n.starts_with('0'))
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| format!("descriptor id {id:?} is not fd:N"))?;
            if number >= next_id {
                return Err(format!("descriptor {id} is not below next_id {next_id}"));
            }
            if page_size == 0 {
                return Err(format!("descriptor {id} has page_size 0"));
            }
            let paged = Paged::new(content, page_size);
            table
                .descriptors
                .insert(id, Arc::new(Descriptor { source, paged }));
        }
        Ok(table)
    }
}
