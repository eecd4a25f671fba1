//! The original's XML texts, byte for byte: `<fd_result>`, `<fd_content>`, `<fd_extraction>`,
//! `<fd_file_result>`, `<fd_error>` and the user-input reference.
//!
//! Uses no sibling module.
//!
//! Like the original, nothing is escaped: contents, previews and paths are inserted as they are.

/// The `<fd_result>` that replaces a large tool output: page 1 as a preview.
pub(super) struct FdResult<'a> {
    pub fd: &'a str,
    pub pages: usize,
    pub truncated: bool,
    pub end_line: usize,
    pub total_lines: usize,
    pub source: &'a str,
    pub max_direct_output_chars: usize,
    pub preview: &'a str,
}

impl FdResult<'_> {
    pub(super) fn render(&self) -> String {
        format!(
            "<fd_result fd=\"{}\" pages=\"{}\" truncated=\"{}\" lines=\"1-{}\" total_lines=\"{}\" source=\"{}\">\n  <message>Output exceeds {} characters. Use read_fd to read more pages.</message>\n  <preview>\n  {}\n  </preview>\n</fd_result>",
            self.fd,
            self.pages,
            self.truncated,
            self.end_line,
            self.total_lines,
            self.source,
            self.max_direct_output_chars,
            self.preview,
        )
    }
}

/// An `<fd_content>` answer to `read_fd`; optional attributes are left out when `None`.
pub(super) struct FdContent<'a> {
    pub fd: &'a str,
    /// `all`, or the page number for a single page; absent for lines, characters and page ranges.
    pub page: Option<String>,
    pub pages: usize,
    pub continued: bool,
    pub truncated: bool,
    pub lines: (usize, usize),
    pub total_lines: usize,
    pub mode: &'a str,
    pub start: Option<i64>,
    pub count: Option<i64>,
    pub body: &'a str,
}

impl FdContent<'_> {
    pub(super) fn render(&self) -> String {
        let page = self
            .page
            .as_ref()
            .map(|page| format!(" page=\"{page}\""))
            .unwrap_or_default();
        let start = self
            .start
            .map(|start| format!(" start=\"{start}\""))
            .unwrap_or_default();
        let count = self
            .count
            .map(|count| format!(" count=\"{count}\""))
            .unwrap_or_default();
        format!(
            "<fd_content fd=\"{}\"{page} pages=\"{}\" continued=\"{}\" truncated=\"{}\" lines=\"{}-{}\" total_lines=\"{}\" mode=\"{}\"{start}{count}>\n{}\n</fd_content>",
            self.fd,
            self.pages,
            self.continued,
            self.truncated,
            self.lines.0,
            self.lines.1,
            self.total_lines,
            self.mode,
            self.body,
        )
    }
}

/// The `<fd_extraction>` answer when `extract_to_new_fd` made a new descriptor.
pub(super) struct FdExtraction<'a> {
    pub source_fd: &'a str,
    pub new_fd: &'a str,
    /// The `mode` argument as given (also with `read_all`).
    pub mode: &'a str,
    pub content_size: usize,
    /// `None` for `read_all` (then `position="all"`), else the requested `start` and `count`.
    pub range: Option<(i64, i64)>,
}

impl FdExtraction<'_> {
    pub(super) fn render(&self) -> String {
        let position = match self.range {
            None => " position=\"all\"".to_owned(),
            Some((start, count)) if self.mode == "page" => {
                format!(" start=\"{start}\" count=\"{count}\" page=\"{start}\"")
            }
            Some((start, count)) => format!(" start=\"{start}\" count=\"{count}\""),
        };
        format!(
            "<fd_extraction source_fd=\"{}\" new_fd=\"{}\" mode=\"{}\" content_size=\"{}\"{position}>\n  <message>Content from {} has been extracted to {}</message>\n</fd_extraction>",
            self.source_fd, self.new_fd, self.mode, self.content_size, self.source_fd, self.new_fd,
        )
    }
}

/// The `<fd_file_result>` answer to a successful `fd_to_file`.
pub(super) struct FdFileResult<'a> {
    pub fd: &'a str,
    pub file_path: &'a str,
    /// `write` or `append`.
    pub mode: &'a str,
    pub char_count: usize,
    pub size_bytes: u64,
    pub create: bool,
    pub exist_ok: bool,
}

impl FdFileResult<'_> {
    pub(super) fn render(&self) -> String {
        let done = if self.mode == "append" {
            "appended"
        } else {
            "written"
        };
        format!(
            "<fd_file_result fd=\"{}\" file_path=\"{}\" mode=\"{}\" char_count=\"{}\" size_bytes=\"{}\" success=\"true\" create=\"{}\" exist_ok=\"{}\">\n  <message>File descriptor {} content ({} chars) successfully {done} to {}</message>\n</fd_file_result>",
            self.fd,
            self.file_path,
            self.mode,
            self.char_count,
            self.size_bytes,
            self.create,
            self.exist_ok,
            self.fd,
            self.char_count,
            self.file_path,
        )
    }
}

/// An `<fd_error>`: `kind` is the original's type (`not_found`, `invalid_page`, …).
pub(super) fn fd_error(kind: &str, fd: &str, message: &str) -> String {
    format!("<fd_error type=\"{kind}\" fd=\"{fd}\">\n  <message>{message}</message>\n</fd_error>")
}

/// The message that replaces a large user input, with the upstream `<fd:fd:1` tag fixed to
/// `<fd:1` (upstream prefixed `fd:` to an id that already has it).
pub(super) fn user_input_reference(fd: &str, preview: &str, size: usize) -> String {
    format!(
        "<{fd} preview=\"{preview}\" type=\"user_input\" size=\"{size}\">\nThis large user input has been stored in file descriptor {fd}. Use read_fd(fd=\"{fd}\") to access the content."
    )
}
