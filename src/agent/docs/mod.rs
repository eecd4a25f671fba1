//! `DocsLibrary`: the pure core of docs mode (`strata mcp --docs-path DIR`), a drop-in for the
//! TypeScript MCP server docs-mcp (seed 000): the same flags and environment, the same five
//! tools, file order and ids, result shapes and error texts.
//!
//! Uses nothing outside this module; the MCP adapter only passes raw tool arguments to
//! [`DocsLibrary::call_tool`] and returns [`ToolText::text`] as the result's one text content,
//! with no error flag (as the original).
//!
//! # Layout
//! - `config`: [`DocsConfig`] from arguments, environment and defaults.
//! - `files`: discovery, the file order, ids and sizes ([`DocFile`]); `collation`: the ICU-like
//!   file-name order.
//! - `front_matter`: the YAML front matter subset; `markdown`: sections and their ids.
//! - `toc`: what a table of contents shows; `search`: what a search matches; `js_regex`:
//!   JavaScript patterns on the linear-time `regex` crate.
//! - `results`: the typed results; `errors`: [`DocsError`] and its texts; `tools`: tool
//!   definitions, server info and argument checking; `js`: JavaScript-compatible primitives.
//!
//! # Where strata departs from docs-mcp
//! - A well-formed but unknown file id gives `FILE_ID_NOT_FOUND`, where the original gives its
//!   generic parse (or search) error.
//! - Look-around and backreferences in a search pattern give `INVALID_REGEX` saying that the
//!   engine runs in linear time. Other invalid patterns give `INVALID_REGEX` too, with the
//!   reason in V8's words where strata checks it itself ("Nothing to repeat", "Invalid group")
//!   and in the `regex` crate's words otherwise ("unclosed group").
//! - Files are discovered once per library, where each of the original's tools discovers them at
//!   its first call.
//! - Front matter that is empty or only comments counts as `{}` (the original's listing fails
//!   with `FILE_SYSTEM_ERROR`); see `front_matter` for the YAML subset.
//! - A lone `\r` ends a line everywhere (the original's `read_sections` and `search` slice the
//!   unnormalised text, so they misplace sections in such files). CRLF files come out as in the
//!   original, each content line keeping its `\r`.
//! - `SECTION_NOT_FOUND` is given whatever the file name or ids contain (the original falls back
//!   to its parse error when either contains `": "`).

mod collation;
mod config;
mod errors;
mod files;
mod front_matter;
mod js;
mod js_regex;
mod markdown;
mod results;
mod search;
mod toc;
mod tools;

#[cfg(test)]
mod tests;

use std::fs;

use serde::Serialize;
use serde_json::Value;

pub use collation::{collation_key, compare_filenames};
pub use config::{DEFAULT_DOCS_PATH, DEFAULT_MAX_HEADERS, DEFAULT_MAX_TOC_DEPTH, DocsConfig};
pub use errors::DocsError;
pub use files::{DocFile, format_file_size, is_valid_file_id};
pub use front_matter::FrontMatter;
pub use results::{
    FileEntry, FileMatches, ReadSections, SearchResults, Section, SectionContent, TableOfContents,
};
pub use toc::HIDDEN_SUBSECTIONS_INSTRUCTIONS;
pub use tools::{
    LIST_DOCUMENTATION_FILES, READ_SECTIONS, SEARCH, SECTION_TABLE_OF_CONTENTS, SERVER_NAME,
    SERVER_VERSION, TABLE_OF_CONTENTS, TOOL_NAMES, server_info, tool_definitions,
};

use files::discover_files;
use front_matter::split_front_matter;
use js::js_trim;
use markdown::{MarkdownDocument, SectionInfo, content_title, is_valid_section_id};
use search::Query;
use toc::{direct_children, instructions_for, limit_headers, with_conditional_counts};

/// The text content of a tool result: the result's compact JSON, or the error text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolText {
    /// Exactly what the original puts in `content[0].text`.
    pub text: String,
}

impl ToolText {
    /// The text for a typed result: its compact JSON, or the error's text.
    pub fn from_result<T: Serialize>(result: Result<T, DocsError>) -> Self {
        Self::from_text_result(
            result.and_then(|value| {
                serde_json::to_string(&value).map_err(|_| DocsError::InternalError)
            }),
        )
    }

    fn from_text_result(result: Result<String, DocsError>) -> Self {
        Self {
            text: result.unwrap_or_else(|e| e.to_string()),
        }
    }
}

/// The documentation files of one configuration, discovered once, with the five tools over them.
#[derive(Clone, Debug)]
pub struct DocsLibrary {
    config: DocsConfig,
    files: Vec<DocFile>,
}

impl DocsLibrary {
    /// Discovers the files of `config`'s directories and numbers them; a missing directory gives
    /// no files. Ids stay as assigned for the library's life, whatever happens on disk.
    pub fn open(config: DocsConfig) -> Self {
        let files = discover_files(&config.documentation_paths);
        Self { config, files }
    }

    /// The configuration the library was opened with.
    pub fn config(&self) -> &DocsConfig {
        &self.config
    }

    /// The discovered files, in id order.
    pub fn files(&self) -> &[DocFile] {
        &self.files
    }

    /// The file with this id, if any (`f01` names no file: ids are compared as text).
    pub fn file(&self, file_id: &str) -> Option<&DocFile> {
        let position: usize = file_id.strip_prefix('f')?.parse().ok()?;
        self.files
            .get(position.checked_sub(1)?)
            .filter(|f| f.file_id == file_id)
    }

    /// `list_documentation_files`: every file with its id and metadata, as the original's text.
    pub fn list_documentation_files(&self) -> ToolText {
        ToolText::from_result(Ok(self.list_documentation_files_result()))
    }

    /// `table_of_contents(fileId)` as the original's text.
    pub fn table_of_contents(&self, file_id: &str) -> ToolText {
        ToolText::from_result(self.table_of_contents_result(file_id))
    }

    /// `read_sections(fileId, section_ids)` as the original's text.
    pub fn read_sections(&self, file_id: &str, section_ids: &[String]) -> ToolText {
        ToolText::from_result(self.read_sections_result(file_id, section_ids))
    }

    /// `section_table_of_contents(fileId, section_ids)` as the original's text.
    pub fn section_table_of_contents(&self, file_id: &str, section_ids: &[String]) -> ToolText {
        ToolText::from_result(self.section_table_of_contents_result(file_id, section_ids))
    }

    /// `search(query, fileId?)` as the original's text.
    pub fn search(&self, query: &str, file_id: Option<&str>) -> ToolText {
        ToolText::from_result(self.search_result(query, file_id))
    }

    /// The typed result of `list_documentation_files`.
    pub fn list_documentation_files_result(&self) -> Vec<FileEntry> {
        self.files.iter().map(file_entry).collect()
    }

    /// The typed result of `table_of_contents`: the file's sections down to `max_toc_depth`,
    /// limited to `max_headers`.
    ///
    /// # Errors
    /// `FILE_ID_REQUIRED`, `INVALID_FILE_ID`, `FILE_ID_NOT_FOUND`, or `PARSE_ERROR` when the file
    /// cannot be read.
    pub fn table_of_contents_result(&self, file_id: &str) -> Result<TableOfContents, DocsError> {
        let file = self.lookup(file_id)?;
        let doc = read_document(file).ok_or(DocsError::ParseError)?;
        let candidates: Vec<&SectionInfo> = doc
            .sections()
            .iter()
            .filter(|s| usize::from(s.level) <= self.config.max_toc_depth)
            .collect();
        let sections =
            with_conditional_counts(&limit_headers(&candidates, self.config.max_headers));
        Ok(TableOfContents {
            file_id: file.file_id.clone(),
            filename: file.filename.clone(),
            instructions: instructions_for(&sections),
            sections,
        })
    }

    /// The typed result of `read_sections`: the requested sections' text, shallowest ids first,
    /// each subsection of an already returned section left out.
    ///
    /// # Errors
    /// The file-id errors, `SECTION_NOT_FOUND` when any id is malformed or absent, `PARSE_ERROR`
    /// when the file cannot be read.
    pub fn read_sections_result(
        &self,
        file_id: &str,
        section_ids: &[String],
    ) -> Result<ReadSections, DocsError> {
        let file = self.lookup(file_id)?;
        let mut result = ReadSections {
            file_id: file.file_id.clone(),
            filename: file.filename.clone(),
            sections: Vec::new(),
        };
        if section_ids.is_empty() {
            return Ok(result);
        }
        let doc = self.checked_document(file, section_ids)?;
        let mut by_depth: Vec<&String> = section_ids.iter().collect();
        by_depth.sort_by_key(|id| id.split('/').count());
        let mut accepted: Vec<&SectionInfo> = Vec::new();
        for id in by_depth {
            let Some(section) = doc.section(id) else {
                continue;
            };
            let inside = accepted.iter().any(|a| {
                section.start >= a.start
                    && section.end <= a.end
                    && id.starts_with(&format!("{}/", a.id))
            });
            if !inside {
                accepted.push(section);
            }
        }
        result.sections = accepted
            .into_iter()
            .map(|s| {
                let content = doc.text(s.start, s.end);
                SectionContent {
                    title: content_title(&content).unwrap_or_else(|| s.id.clone()),
                    content,
                }
            })
            .collect();
        Ok(result)
    }

    /// The typed result of `section_table_of_contents`: the direct subsections of the requested
    /// sections, grouped by requested parent, limited to `max_headers` (the depth limit does not
    /// apply).
    ///
    /// # Errors
    /// The file-id errors, `SECTION_IDS_REQUIRED` for no ids, `SECTION_NOT_FOUND`,
    /// `PARSE_ERROR`.
    pub fn section_table_of_contents_result(
        &self,
        file_id: &str,
        section_ids: &[String],
    ) -> Result<TableOfContents, DocsError> {
        check_file_id(file_id)?;
        if section_ids.is_empty() {
            return Err(DocsError::SectionIdsRequired);
        }
        let file = self.lookup(file_id)?;
        let doc = self.checked_document(file, section_ids)?;
        let children = direct_children(doc.sections(), section_ids);
        let sections = with_conditional_counts(&limit_headers(&children, self.config.max_headers));
        Ok(TableOfContents {
            file_id: file.file_id.clone(),
            filename: file.filename.clone(),
            instructions: instructions_for(&sections),
            sections,
        })
    }

    /// The typed result of `search`: the sections matching `query` in the file `file_id`, or in
    /// every file (listing only files with matches).
    ///
    /// # Errors
    /// `INVALID_PARAMETER` for a blank query or a blank `fileId`, `INVALID_FILE_ID`,
    /// `INVALID_REGEX`, `FILE_ID_NOT_FOUND`, `SEARCH_ERROR` when a file cannot be read.
    pub fn search_result(
        &self,
        query: &str,
        file_id: Option<&str>,
    ) -> Result<SearchResults, DocsError> {
        if js_trim(query).is_empty() {
            return Err(DocsError::InvalidParameter { name: "query" });
        }
        if let Some(id) = file_id {
            if js_trim(id).is_empty() {
                return Err(DocsError::InvalidParameter { name: "fileId" });
            }
            check_file_id(id)?;
        }
        let query = Query::compile(query)?;
        let mut results = Vec::new();
        match file_id {
            Some(id) => {
                let file = self.lookup(id)?;
                let doc = read_document(file).ok_or(DocsError::SearchError)?;
                results.push(FileMatches {
                    file_id: file.file_id.clone(),
                    filename: file.filename.clone(),
                    matches: query.matching_sections(&doc),
                });
            }
            None => {
                for file in &self.files {
                    let doc = read_document(file).ok_or(DocsError::SearchError)?;
                    let matches = query.matching_sections(&doc);
                    if !matches.is_empty() {
                        results.push(FileMatches {
                            file_id: file.file_id.clone(),
                            filename: file.filename.clone(),
                            matches,
                        });
                    }
                }
            }
        }
        let all: Vec<Section> = results.iter().flat_map(|r| r.matches.clone()).collect();
        Ok(SearchResults {
            query: query.source().to_owned(),
            instructions: instructions_for(&all),
            results,
        })
    }

    /// Checks a file id's form and finds its file.
    fn lookup(&self, file_id: &str) -> Result<&DocFile, DocsError> {
        check_file_id(file_id)?;
        self.file(file_id).ok_or_else(|| DocsError::FileIdNotFound {
            file_id: file_id.to_owned(),
        })
    }

    /// Reads the file after checking the ids' form, then checks that every id exists.
    fn checked_document(
        &self,
        file: &DocFile,
        section_ids: &[String],
    ) -> Result<MarkdownDocument, DocsError> {
        let not_found = |missing: Vec<String>| DocsError::SectionNotFound {
            missing,
            filename: file.filename.clone(),
        };
        let malformed: Vec<String> = section_ids
            .iter()
            .filter(|id| !is_valid_section_id(id))
            .cloned()
            .collect();
        if !malformed.is_empty() {
            return Err(not_found(malformed));
        }
        let doc = read_document(file).ok_or(DocsError::ParseError)?;
        let missing: Vec<String> = section_ids
            .iter()
            .filter(|id| doc.section(id).is_none())
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(not_found(missing));
        }
        Ok(doc)
    }
}

/// `FILE_ID_REQUIRED` for a blank id, `INVALID_FILE_ID` for a malformed one.
fn check_file_id(file_id: &str) -> Result<(), DocsError> {
    if js_trim(file_id).is_empty() {
        return Err(DocsError::FileIdRequired);
    }
    if !is_valid_file_id(file_id) {
        return Err(DocsError::InvalidFileId {
            file_id: file_id.to_owned(),
        });
    }
    Ok(())
}

/// Reads a file now (its sections are always parsed from its current text).
fn read_document(file: &DocFile) -> Option<MarkdownDocument> {
    let text = utf8_lossy(fs::read(&file.path).ok()?);
    let (_, body) = split_front_matter(&text);
    Some(MarkdownDocument::parse(body))
}

/// The bytes as text, invalid UTF-8 replaced with U+FFFD as Node's decoder does; the check of
/// valid text (the common case) is the standard library's fast one.
fn utf8_lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A listing entry, with the original's fallbacks and omissions.
fn file_entry(file: &DocFile) -> FileEntry {
    let front = &file.front_matter;
    let title = front
        .title
        .clone()
        .filter(js_truthy)
        .unwrap_or_else(|| Value::String(file.basename().to_owned()));
    let description = front.description.clone().filter(|v| !is_empty_field(v));
    let keywords = front
        .keywords
        .clone()
        .filter(|v| js_truthy(v) && !is_empty_field(v));
    FileEntry {
        file_id: file.file_id.clone(),
        filename: file.filename.clone(),
        title,
        description,
        keywords,
        size: file.size_text(),
        source_directory: file.source_directory.clone(),
    }
}

/// JavaScript truthiness of a JSON value.
fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// What the original's response filter drops from `description` and `keywords`.
fn is_empty_field(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}
