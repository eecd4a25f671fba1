//! The typed results of the five docs tools. Serialised with `serde_json::to_string` they are
//! exactly the original's text (compact `JSON.stringify`, keys in its order, empty optional
//! fields left out), and they are what a JSON Schema of the results is made from.
//!
//! Uses nothing else in the module.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One entry of `list_documentation_files` (the tool's result is a bare array of these).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The session-stable file id, `f1`, `f2`, ….
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The path relative to its documentation directory, with `/` separators.
    pub filename: String,
    /// The front-matter `title` when it is truthy in JavaScript's sense, else the file name
    /// without directories and `.md`; a string unless the YAML gave another scalar.
    pub title: Value,
    /// The front-matter `description`, left out when absent, null, empty or `[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
    /// The front-matter `keywords`, left out when absent, falsy or `[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Value>,
    /// The file's size: `512b` under 1 KiB, else KiB with one decimal (`1.3kb`).
    pub size: String,
    /// The documentation directory the file was found in, as configured.
    #[serde(rename = "sourceDirectory")]
    pub source_directory: String,
}

/// A section as the table-of-contents and search results show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// The numeric section id, e.g. `1/2`.
    pub id: String,
    /// The header text.
    pub title: String,
    /// The header level, 1 to 6.
    pub level: u8,
    /// The section's length in UTF-16 code units, subsections included.
    pub character_count: usize,
    /// The number of direct subsections, present only when some of them are not shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsection_count: Option<usize>,
}

/// The result of `table_of_contents` and `section_table_of_contents`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableOfContents {
    /// The file id asked for.
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The file's name relative to its documentation directory.
    pub filename: String,
    /// The selected sections.
    pub sections: Vec<Section>,
    /// How to see hidden subsections, present when some section has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// One section's text in a `read_sections` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionContent {
    /// The header text (the section id when no header line is found).
    pub title: String,
    /// The section's lines, header included, joined with `\n`.
    pub content: String,
}

/// The result of `read_sections`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSections {
    /// The file id asked for.
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The file's name relative to its documentation directory.
    pub filename: String,
    /// The sections read, shallowest ids first, without subsections already inside another.
    pub sections: Vec<SectionContent>,
}

/// The matches of a search in one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMatches {
    /// The file's id.
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The file's name relative to its documentation directory.
    pub filename: String,
    /// The sections whose title or own text (without direct subsections) matches.
    pub matches: Vec<Section>,
}

/// The result of `search`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResults {
    /// The pattern as JavaScript's `regex.source` shows it (trimmed, `/` escaped as `\/`).
    pub query: String,
    /// One entry per file with matches (always one entry for a single-file search).
    pub results: Vec<FileMatches>,
    /// How to see hidden subsections, present when some match has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}
