//! `FdTable`: file descriptors for large content (seed 004, llmproc's RFC001/RFC003/RFC007),
//! as plain functions over a table that a session persists and a fork copies.
//!
//! Uses only its own submodules, and no I/O: `fd_to_file` hands the write to a [`FileSink`]. The
//! session keeps the persisted form ([`super::descriptors`] converts); this module is the pure
//! core.
//!
//! Tool output longer than `max_direct_output_chars` becomes a descriptor `fd:N` and the agent
//! gets the original's `<fd_result>` with page 1 as a preview ([`FdTable::wrap_tool_output`]);
//! large user input likewise ([`FdTable::wrap_user_input`]). The agent reads descriptors by
//! page, line or character with `read_fd` ([`FdTable::call_read_fd`]) and exports them with
//! `fd_to_file` ([`FdTable::call_fd_to_file`]). Texts, checks and their order follow the original
//! (`reference/originals.md`, "Seed 004", at RFC007), with these differences:
//! - pages are really line-aware and cover all of the content (DESIGN.md's deliberate fix);
//! - `continued` is also set on the later pages of a long first line (upstream required line > 1);
//! - char mode's `lines` ends at the line of the slice's last character (upstream named the next
//!   line when the slice ended with `\n`);
//! - the user-input tag is `<fd:1`, not upstream's `<fd:fd:1`;
//! - `<fd_result>` always carries ` source="…"`, as llmproc's later formatter writes it;
//! - JSON arguments are checked (types, unknown names) before anything else.
//!
//! # Layout
//! - `manager`: [`FdTable`], its descriptors, the tools, persistence.
//! - `paging`: line index, page table, slices and their metadata.
//! - `args`: the tools' arguments, typed and read from JSON.
//! - `config`: [`FdConfig`]. `xml`: the answer texts.

mod args;
mod config;
mod manager;
mod paging;
mod xml;

#[cfg(test)]
mod tests;

use serde::Serialize;

pub use args::{FdToFileArgs, ReadArgs, ReadMode, WriteMode};
pub use config::{FdConfig, FdConfigError};
pub use manager::{
    FD_RELATED_TOOLS, FdInfo, FdSource, FdTable, FileSink, USER_INPUT_PREVIEW_CHARS,
};

/// A tool's answer: the text for the agent and whether the call failed (MCP's `isError`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FdText {
    /// The answer, usually one of the original's XML forms.
    pub text: String,
    /// Whether this is an error (`<fd_error>` or an argument error).
    pub is_error: bool,
}

impl FdText {
    /// A successful answer.
    pub fn ok(text: String) -> Self {
        FdText {
            text,
            is_error: false,
        }
    }

    /// A failed answer.
    pub fn error(text: String) -> Self {
        FdText {
            text,
            is_error: true,
        }
    }
}

/// The block appended to the system prompt when descriptors are on: llmproc's text at RFC007
/// (commit bce7317), verbatim.
pub const FILE_DESCRIPTOR_INSTRUCTIONS: &str = r#"<file_descriptor_instructions>
This system includes a file descriptor feature for handling large content:

1. Large outputs are stored in file descriptors (fd:12345)
2. Use read_fd to access content in pages or all at once
3. Use fd_to_file to export content to disk files

Key commands:
- read_fd(fd="fd:12345", start=2) - Read page 2
- read_fd(fd="fd:12345", read_all=True) - Read entire content
- read_fd(fd="fd:12345", start=2, extract_to_new_fd=True) - Extract page 2 to a new FD
- read_fd(fd="fd:12345", mode="line", start=10, count=5) - Read lines 10-14
- read_fd(fd="fd:12345", mode="char", start=100, count=200) - Read 200 characters
- read_fd(fd="fd:12345", mode="page", start=2, count=3) - Read pages 2, 3, and 4 combined
- fd_to_file(fd="fd:12345", file_path="/path/to/output.txt") - Save to file
- fd_to_file(fd="fd:12345", file_path="/path/to/output.txt", mode="append") - Append to file
- fd_to_file(fd="fd:12345", file_path="/path/to/output.txt", exist_ok=False) - Create new file only
- fd_to_file(fd="fd:12345", file_path="/path/to/output.txt", create=False) - Update existing file only

Tips:
- Use the start parameter to specify page number, line number, or character position
- Check "truncated" and "continued" attributes for content continuation
- When analyzing large content, consider reading all pages first
- Use extract_to_new_fd=True when you need to extract specific content
- Use mode="line" to read specific lines of content
- Use mode="char" to read specific character ranges
- Use mode="page" with count>1 to read multiple pages at once
- Use mode="append" when adding to existing files
- Use exist_ok=False to avoid overwriting existing files
- Use create=False when you want to update only existing files
</file_descriptor_instructions>"#;

/// The block appended after [`FILE_DESCRIPTOR_INSTRUCTIONS`] when user input is paged:
/// llmproc's later `USER_INPUT_INSTRUCTIONS`, verbatim (its `<fd:12345` shows the tag form this
/// module writes).
pub const USER_INPUT_INSTRUCTIONS: &str = r#"<fd_user_input_instructions>
This system handles large user inputs through file descriptors:

- Large messages are automatically converted to file descriptors
- You'll see a preview: <fd:12345 preview="..." type="user_input" size="10000">
- To read the content: read_fd(fd="fd:1", read_all=true)
- For large inputs:
  * Read sections: read_fd(fd="fd:1", mode="line", start=10, count=5)
  * Extract parts: read_fd(fd="fd:1", extract_to_new_fd=true)
</fd_user_input_instructions>"#;
