//! The five tools as an MCP server lists and calls them: their names, descriptions and input
//! schemas as docs-mcp declares them, the server's name and version, and
//! [`DocsLibrary::call_tool`], which validates raw arguments in the original's order.
//!
//! Uses `config`, `errors`, `files`, `js`, and the library in `mod.rs`.

use serde_json::{Value, json};

use super::config::DEFAULT_MAX_TOC_DEPTH;
use super::errors::DocsError;
use super::files::is_valid_file_id;
use super::js::js_trim;
use super::{DocsLibrary, ToolText};

/// The server name docs-mcp gives in `initialize`.
pub const SERVER_NAME: &str = "documentation-server";
/// The server version docs-mcp gives in `initialize`.
pub const SERVER_VERSION: &str = "1.0.0";

/// `list_documentation_files`: every file with its id and metadata.
pub const LIST_DOCUMENTATION_FILES: &str = "list_documentation_files";
/// `table_of_contents`: a file's sections, within the configured limits.
pub const TABLE_OF_CONTENTS: &str = "table_of_contents";
/// `read_sections`: the text of some sections of a file.
pub const READ_SECTIONS: &str = "read_sections";
/// `section_table_of_contents`: the direct subsections of some sections.
pub const SECTION_TABLE_OF_CONTENTS: &str = "section_table_of_contents";
/// `search`: sections matching a regular expression, in one file or all.
pub const SEARCH: &str = "search";

/// The five tool names, in the order `tools/list` gives them.
pub const TOOL_NAMES: [&str; 5] = [
    LIST_DOCUMENTATION_FILES,
    TABLE_OF_CONTENTS,
    READ_SECTIONS,
    SECTION_TABLE_OF_CONTENTS,
    SEARCH,
];

const FILE_ID_DESCRIPTION: &str =
    "The file ID (e.g., 'f1', 'f2') returned by the list_documentation_files tool.";

/// The `serverInfo` of the `initialize` result: `{"name":"documentation-server","version":"1.0.0"}`.
pub fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "version": SERVER_VERSION })
}

/// The tools as `tools/list` gives them, in order: each `{name, description, inputSchema}` with
/// docs-mcp's texts.
pub fn tool_definitions() -> Vec<Value> {
    let hashes = "#".repeat(DEFAULT_MAX_TOC_DEPTH);
    vec![
        json!({
            "name": LIST_DOCUMENTATION_FILES,
            "description": "Lists all available documentation files with their file IDs and metadata. Each file is assigned a unique file ID (e.g., f1, f2, f3) that you must use when calling other tools. Use table_of_contents tool with the file ID to see the structure of a specific file, and then the read_sections tool to read specific parts.",
            "inputSchema": { "type": "object", "properties": {}, "required": [] },
        }),
        json!({
            "name": TABLE_OF_CONTENTS,
            "description": format!("Provides a structured table of contents for a documentation file with numeric section IDs (e.g., \"1/2/3\"). Use the list_documentation_files tool to get file IDs. ALWAYS use this tool first before resorting to the 'search' tool. After using this tool, use the read_sections tool with the section IDs to read specific sections. The depth of headers returned is controlled by the server's max-toc-depth setting (default: {DEFAULT_MAX_TOC_DEPTH} for {hashes} headers)."),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "fileId": { "type": "string", "description": FILE_ID_DESCRIPTION },
                },
                "required": ["fileId"],
            },
        }),
        json!({
            "name": READ_SECTIONS,
            "description": "Reads specific sections from a markdown file using numeric section IDs (e.g., \"1/2/3\" where each number represents the position of a header at each level). Sections include therir subsections, e.g. reading section \"1\" includes \"1/1\", \"1/2\", etc.Use the table_of_contents tool to see available sections and their IDs.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "fileId": { "type": "string", "description": FILE_ID_DESCRIPTION },
                    "section_ids": {
                        "type": "array",
                        "items": { "type": "string" },
                        "description": "Array of numeric section identifiers to read (e.g., [\"1/1\", \"1/2\"])",
                    },
                },
                "required": ["fileId", "section_ids"],
            },
        }),
        json!({
            "name": SECTION_TABLE_OF_CONTENTS,
            "description": "Provides a structured table of contents for the subsections within specified parent sections. Unlike table_of_contents which starts from the file root, this tool returns only the direct children of the specified section IDs. Use the table_of_contents tool to see available sections and their IDs. The --max-headers option is respected for the results. Note: The --max-toc-depth option is NOT applied to this tool (all subsection levels are returned).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "fileId": { "type": "string", "description": FILE_ID_DESCRIPTION },
                    "section_ids": {
                        "type": "array",
                        "items": { "type": "string" },
                        "description": "Non-empty array of numeric section identifiers to get subsections for (e.g., [\"1\", \"1/2\"])",
                        "minItems": 1,
                    },
                },
                "required": ["fileId", "section_ids"],
            },
        }),
        json!({
            "name": SEARCH,
            "description": "Use this tool ONLY AS A FALLBACK if you cannot find the information you need by using 'table_of_contents' tool. Search for text matches using regular expressions in documentation files. Use list_documentation_files to see available files before using this tool. Multiline-matching, case is ignored.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "The regular expression pattern to search for (case-insensitive, multiline-matching). Examples: \"foo.*bar\" matches across line breaks, \"\\b[A-Z][a-z]+\\b\" matches capitalized words.",
                    },
                    "fileId": {
                        "type": "string",
                        "description": "Optional file ID (e.g., 'f1', 'f2') to search in. If not provided, searches all files. Use the list_documentation_files tool to see available file IDs.",
                    },
                },
                "required": ["query"],
            },
        }),
    ]
}

impl DocsLibrary {
    /// Calls the tool `name` with the raw `arguments` of a `tools/call` request and returns the
    /// text of its result, checking the arguments in the original's order (an unknown name gives
    /// `UNKNOWN_TOOL`, a missing `fileId` `FILE_ID_REQUIRED`, and so on).
    pub fn call_tool(&self, name: &str, args: &Value) -> ToolText {
        ToolText::from_text_result(self.dispatch(name, args))
    }

    fn dispatch(&self, name: &str, args: &Value) -> Result<String, DocsError> {
        match name {
            LIST_DOCUMENTATION_FILES => Ok(self.list_documentation_files().text),
            TABLE_OF_CONTENTS => {
                let file_id = file_id_argument(args)?;
                Ok(self.table_of_contents(file_id).text)
            }
            READ_SECTIONS => {
                let file_id = file_id_argument(args)?;
                let ids = section_ids_argument(args).ok_or(DocsError::SectionIdsRequired)?;
                Ok(self.read_sections(file_id, &ids).text)
            }
            SECTION_TABLE_OF_CONTENTS => {
                let file_id = file_id_argument(args)?;
                let ids = section_ids_argument(args)
                    .filter(|ids| !ids.is_empty())
                    .ok_or(DocsError::SectionIdsRequired)?;
                Ok(self.section_table_of_contents(file_id, &ids).text)
            }
            SEARCH => {
                let query = match args.get("query") {
                    Some(Value::String(q)) if !js_trim(q).is_empty() => q.as_str(),
                    _ => return Err(DocsError::InvalidParameter { name: "query" }),
                };
                let file_id = match args.get("fileId") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(id)) if !js_trim(id).is_empty() => Some(id.as_str()),
                    Some(_) => return Err(DocsError::InvalidParameter { name: "fileId" }),
                };
                Ok(self.search(query, file_id).text)
            }
            _ => Err(DocsError::UnknownTool {
                name: name.to_owned(),
            }),
        }
    }
}

/// `fileId` as a non-blank string in the right format.
fn file_id_argument(args: &Value) -> Result<&str, DocsError> {
    match args.get("fileId") {
        Some(Value::String(id)) if !js_trim(id).is_empty() => {
            if is_valid_file_id(id) {
                Ok(id)
            } else {
                Err(DocsError::InvalidFileId {
                    file_id: id.clone(),
                })
            }
        }
        _ => Err(DocsError::FileIdRequired),
    }
}

/// `section_ids` when it is an array of strings.
fn section_ids_argument(args: &Value) -> Option<Vec<String>> {
    args.get("section_ids")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}
