//! llmproc's descriptor tests, ported (`tests/test_file_descriptor.py`, `test_enhanced_fd_api.py`,
//! `test_fd_to_file_tool.py`, `test_file_descriptor_integration.py`), plus persistence, the JSON
//! arguments and the fixes. Cases whose upstream assertions depended on pages cut by characters
//! say how they were adapted.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn table(page_size: usize) -> FdTable {
    FdTable::new(FdConfig {
        enabled: true,
        default_page_size: page_size,
        ..FdConfig::default()
    })
    .unwrap()
}

fn read(table: &mut FdTable, args: Value) -> FdText {
    let answer = table.call_read_fd(&args);
    assert!(!answer.is_error, "{args} failed: {}", answer.text);
    answer
}

/// The body of an `<fd_content>` answer: after the tag's `>\n`, before `\n</fd_content>`.
fn body(text: &str) -> &str {
    let start = text.find(">\n").unwrap() + 2;
    text[start..].strip_suffix("\n</fd_content>").unwrap()
}

/// The first line of an answer (its opening tag).
fn head(text: &str) -> &str {
    text.lines().next().unwrap()
}

/// An attribute of the opening tag.
fn attr<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let needle = format!(" {name}=\"");
    let tag = head(text);
    let start = tag.find(&needle)? + needle.len();
    tag[start..].split('"').next()
}

fn error(kind: &str, fd: &str, message: &str) -> FdText {
    FdText::error(format!(
        "<fd_error type=\"{kind}\" fd=\"{fd}\">\n  <message>{message}</message>\n</fd_error>"
    ))
}

fn hundred_lines() -> String {
    (1..=100)
        .map(|i| format!("Line {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

const MIXED_SHORT: &str = "Short line\nA much longer line that should span across multiple characters\nAnother line\nFinal line";

/// Files in memory; `fail` makes every write fail with that message.
#[derive(Default)]
struct MemorySink {
    files: BTreeMap<String, String>,
    fail: Option<String>,
}

impl FileSink for MemorySink {
    fn exists(&mut self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    fn write(&mut self, path: &str, content: &str, mode: WriteMode) -> Result<u64, String> {
        if let Some(why) = &self.fail {
            return Err(why.clone());
        }
        let file = self.files.entry(path.to_owned()).or_default();
        if mode == WriteMode::Write {
            file.clear();
        }
        file.push_str(content);
        Ok(file.len() as u64)
    }
}

// Upstream 1 and 2: sequential ids, the preview, the counter.
#[test]
fn create_fd_gives_sequential_ids_and_a_preview() {
    let mut table = table(4000);
    let ids: Vec<String> = (1..=3)
        .map(|i| table.create_fd(format!("Content {i}"), FdSource::ToolResult))
        .collect();
    assert_eq!(ids, ["fd:1", "fd:2", "fd:3"]);
    assert_eq!(table.next_id(), 4);
    assert_eq!(table.ids().collect::<Vec<_>>(), ["fd:1", "fd:2", "fd:3"]);
    assert_eq!(
        table.fd_result("fd:1").unwrap(),
        "<fd_result fd=\"fd:1\" pages=\"1\" truncated=\"false\" lines=\"1-1\" total_lines=\"1\" source=\"tool_result\">\n  <message>Output exceeds 8000 characters. Use read_fd to read more pages.</message>\n  <preview>\n  Content 1\n  </preview>\n</fd_result>"
    );
    assert_eq!(table.fd_result("fd:4"), None);
}

// Upstream 3: 100 lines at page size 100, page 1 and read_all.
#[test]
fn pages_and_read_all_of_a_hundred_lines() {
    let content = hundred_lines();
    let mut table = table(100);
    let fd = table.create_fd(content.clone(), FdSource::ToolResult);
    let page1 = read(&mut table, json!({"fd": fd, "mode": "page", "start": 1}));
    assert_eq!(
        head(&page1.text),
        "<fd_content fd=\"fd:1\" page=\"1\" pages=\"9\" continued=\"false\" truncated=\"false\" lines=\"1-13\" total_lines=\"100\" mode=\"page\" start=\"1\" count=\"1\">"
    );
    assert!(body(&page1.text).starts_with("Line 1\n") && body(&page1.text).ends_with("Line 13\n"));
    let page2 = read(&mut table, json!({"fd": fd, "start": 2}));
    assert!(page2.text.starts_with("<fd_content fd=\"fd:1\" page=\"2\""));
    assert_eq!(attr(&page2.text, "lines"), Some("14-25"));
    let all = read(&mut table, json!({"fd": fd, "read_all": true}));
    assert_eq!(
        head(&all.text),
        "<fd_content fd=\"fd:1\" page=\"all\" pages=\"9\" continued=\"false\" truncated=\"false\" lines=\"1-100\" total_lines=\"100\" mode=\"all\">"
    );
    assert_eq!(body(&all.text), content);
}

// Upstream 4, adapted: upstream cut page 1 at character 30 (truncated) and page 2 continued it.
// Line-aware pages end page 1 after "Short line\n", so the cut lines are on pages 2 to 4.
#[test]
fn a_line_longer_than_a_page_is_split_and_flagged() {
    let mut table = table(30);
    let fd = table.create_fd(MIXED_SHORT, FdSource::ToolResult);
    let expected = [
        ("Short line\n", "1-1", "false", "false"),
        ("A much longer line that should", "2-2", "false", "true"),
        (" span across multiple characte", "2-2", "true", "true"),
        ("rs\nAnother line\nFinal line", "2-4", "true", "false"),
    ];
    for (page, (text, lines, continued, truncated)) in (1..).zip(expected) {
        let answer = read(&mut table, json!({"fd": fd, "start": page}));
        assert_eq!(body(&answer.text), text, "page {page}");
        assert_eq!(attr(&answer.text, "lines"), Some(lines), "page {page}");
        assert_eq!(
            attr(&answer.text, "continued"),
            Some(continued),
            "page {page}"
        );
        assert_eq!(
            attr(&answer.text, "truncated"),
            Some(truncated),
            "page {page}"
        );
    }
    assert!(table.fd_result(&fd).unwrap().starts_with(
        "<fd_result fd=\"fd:1\" pages=\"4\" truncated=\"false\" lines=\"1-1\" total_lines=\"4\""
    ));
}

// Upstream 5 and every error text of read_fd, in the original's order.
#[test]
fn read_fd_errors_have_the_original_texts_and_order() {
    let mut table = table(4000);
    assert_eq!(
        table.call_read_fd(&json!({"fd": "fd:999"})),
        error(
            "not_found",
            "fd:999",
            "File descriptor fd:999 not found. Available FDs: none"
        )
    );
    let fd = table.create_fd("0123456789\nabc\nxyz\n", FdSource::ToolResult);
    table.create_fd("second", FdSource::ToolResult);
    assert_eq!(
        table.call_read_fd(&json!({"fd": "fd:999", "mode": "bogus"})),
        error(
            "not_found",
            "fd:999",
            "File descriptor fd:999 not found. Available FDs: fd:1, fd:2"
        )
    );
    let bad_mode = error(
        "invalid_parameter",
        "fd:1",
        "Invalid mode: lines. Valid options are 'page', 'line', or 'char'.",
    );
    assert_eq!(
        table.call_read_fd(&json!({"fd": fd, "mode": "lines"})),
        bad_mode
    );
    assert_eq!(
        table.call_read_fd(&json!({"fd": fd, "mode": "lines", "read_all": true})),
        bad_mode
    );
    // read_all wins over a start that would be out of range.
    read(
        &mut table,
        json!({"fd": fd, "read_all": true, "start": 999}),
    );
    let bad_page = error(
        "invalid_page",
        "fd:1",
        "Invalid page number. Valid range: 1-1",
    );
    for start in [0, 2, 999, -1] {
        assert_eq!(
            table.call_read_fd(&json!({"fd": fd, "start": start})),
            bad_page
        );
    }
    let bad_line = error(
        "invalid_range",
        "fd:1",
        "Invalid line start position. Valid range: 1-3",
    );
    for start in [0, 4] {
        let args = json!({"fd": fd, "mode": "line", "start": start});
        assert_eq!(table.call_read_fd(&args), bad_line);
    }
    let bad_char = error(
        "invalid_range",
        "fd:1",
        "Invalid character start position. Valid range: 0-18",
    );
    for start in [-1, 19] {
        let args = json!({"fd": fd, "mode": "char", "start": start});
        assert_eq!(table.call_read_fd(&args), bad_char);
    }
    let empty = table.create_fd("", FdSource::ToolResult);
    assert_eq!(
        table.call_read_fd(&json!({"fd": empty, "mode": "char", "start": 0})),
        error(
            "invalid_range",
            "fd:3",
            "Invalid character start position. Valid range: 0--1"
        )
    );
    // Argument errors come before everything, as the original's exception path.
    assert_eq!(
        table.call_read_fd(&json!({"fd": "fd:999", "page": 2})),
        FdText::error(
            "Error reading file descriptor: unexpected argument 'page' (valid: fd, read_all, extract_to_new_fd, mode, start, count)"
                .to_owned()
        )
    );
}

#[test]
fn available_fds_are_listed_in_string_order_as_pythons_sorted() {
    let mut table = table(4000);
    for i in 1..=11 {
        table.create_fd(format!("c{i}"), FdSource::ToolResult);
    }
    let answer = table.call_read_fd(&json!({"fd": "fd:12"}));
    assert!(answer.text.contains(
        "Available FDs: fd:1, fd:10, fd:11, fd:2, fd:3, fd:4, fd:5, fd:6, fd:7, fd:8, fd:9</message>"
    ));
}

// Upstream 6: the FD-related tools.
#[test]
fn fd_related_tools_can_be_registered() {
    let mut table = table(4000);
    assert!(table.is_fd_related_tool("read_fd"));
    assert!(table.is_fd_related_tool("fd_to_file"));
    assert!(!table.is_fd_related_tool("calculator"));
    table.register_fd_tool("custom_fd_tool");
    assert!(table.is_fd_related_tool("custom_fd_tool"));
}

// Upstream 7, and the fix: upstream counted 5 pages for these 504 characters and left the last
// 4 unreachable; here the 9 pages hold everything (each 101-character line takes two pages).
#[test]
fn the_page_count_covers_all_of_the_content() {
    let mut table = table(100);
    let small = table.create_fd("Small content", FdSource::ToolResult);
    assert_eq!(table.info(&small).unwrap().total_pages, 1);
    let content = vec!["X".repeat(100); 5].join("\n");
    let large = table.create_fd(content.clone(), FdSource::ToolResult);
    let info = table.info(&large).unwrap();
    assert_eq!(info.total_pages, 9);
    let all_pages = read(&mut table, json!({"fd": large, "start": 1, "count": 9}));
    assert_eq!(body(&all_pages.text), content);
    let last = read(&mut table, json!({"fd": large, "start": 9}));
    assert_eq!(body(&last.text), "X".repeat(100));
}

// Upstream 8: a fork keeps the ids and contents, then each side creates its own fd:3.
#[test]
fn a_fork_inherits_descriptors_and_then_diverges() {
    let mut parent = table(100);
    parent.create_fd(
        "This is content for the first file descriptor",
        FdSource::ToolResult,
    );
    parent.create_fd("second ".repeat(60), FdSource::ToolResult);
    let mut child = parent.clone();
    assert_eq!(child.content("fd:1"), parent.content("fd:1"));
    assert_eq!(child.content("fd:2"), parent.content("fd:2"));
    assert_eq!(
        parent.create_fd(
            "This is content created after the fork",
            FdSource::ToolResult
        ),
        "fd:3"
    );
    assert_eq!(child.content("fd:3"), None);
    assert_eq!(
        child.create_fd("This is content created in the fork", FdSource::ToolResult),
        "fd:3"
    );
    assert_eq!(
        child.content("fd:3"),
        Some("This is content created in the fork")
    );
    assert_eq!(
        parent.content("fd:3"),
        Some("This is content created after the fork")
    );
    assert_eq!((parent.next_id(), child.next_id()), (4, 4));
    let page = json!({"fd": "fd:2", "start": 2});
    assert_eq!(parent.call_read_fd(&page), child.call_read_fd(&page));
}

// Upstream 9: 50 padded lines at page size 100.
#[test]
fn pages_stay_within_the_page_size() {
    let content = (0..50)
        .map(|i| format!("This is line {i}{}", " ".repeat(20)))
        .collect::<Vec<_>>()
        .join("\n");
    let mut table = table(100);
    let fd = table.create_fd(content.clone(), FdSource::ToolResult);
    assert!(table.info(&fd).unwrap().total_pages > 1);
    let page1 = read(&mut table, json!({"fd": fd, "mode": "page", "start": 1}));
    assert!(!body(&page1.text).is_empty());
    assert!(body(&page1.text).chars().count() <= 100);
    let all = read(&mut table, json!({"fd": fd, "read_all": true}));
    assert_eq!(body(&all.text).len(), content.len());
}

// Upstream 10, adapted: upstream required each page to start on the line the previous one
// ended on, true only when pages cut lines. A line-aware page starts on that line when it
// continues it, and on the next line otherwise.
#[test]
fn mixed_line_lengths_page_continuously() {
    let content = "Short line\n\
        A very long line that should span across multiple characters and force pagination in the middle\n\
        Another short line\n\
        A second very long line that continues well beyond the page size limit and forces pagination again\n\
        Final short line";
    let mut table = table(50);
    let fd = table.create_fd(content, FdSource::ToolResult);
    let pages = table.info(&fd).unwrap().total_pages;
    let mut joined = String::new();
    let mut previous_end: Option<usize> = None;
    for page in 1..=pages {
        let answer = read(&mut table, json!({"fd": fd, "start": page}));
        joined.push_str(body(&answer.text));
        let lines = attr(&answer.text, "lines").unwrap();
        let (first, last) = lines.split_once('-').unwrap();
        let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
        if let Some(end) = previous_end {
            let continued = attr(&answer.text, "continued") == Some("true");
            assert_eq!(first, if continued { end } else { end + 1 }, "page {page}");
        }
        previous_end = Some(last);
    }
    assert_eq!(previous_end, Some(5));
    assert_eq!(joined, content);
    let all = read(&mut table, json!({"fd": fd, "read_all": true}));
    assert_eq!(attr(&all.text, "lines"), Some("1-5"));
    assert_eq!(body(&all.text), content);
}

// Upstream 11: line mode.
#[test]
fn line_mode_reads_only_the_lines_asked_for() {
    let content = (1..=20)
        .map(|i| format!("Line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut table = table(4000);
    let fd = table.create_fd(content, FdSource::ToolResult);
    let answer = read(
        &mut table,
        json!({"fd": fd, "mode": "line", "start": 5, "count": 3}),
    );
    assert_eq!(
        answer.text,
        "<fd_content fd=\"fd:1\" pages=\"1\" continued=\"false\" truncated=\"false\" lines=\"5-7\" total_lines=\"20\" mode=\"line\" start=\"5\" count=\"3\">\nLine 5\nLine 6\nLine 7\n\n</fd_content>"
    );
    let tail = read(
        &mut table,
        json!({"fd": fd, "mode": "line", "start": 19, "count": 5}),
    );
    assert_eq!(body(&tail.text), "Line 19\nLine 20");
    assert_eq!(attr(&tail.text, "lines"), Some("19-20"));
    assert_eq!(attr(&tail.text, "count"), Some("2"));
    let none = read(
        &mut table,
        json!({"fd": fd, "mode": "line", "start": 5, "count": 0}),
    );
    assert_eq!(body(&none.text), "");
    assert_eq!(attr(&none.text, "lines"), Some("5-4"));
    assert_eq!(attr(&none.text, "count"), Some("0"));
}

// Upstream 12: char mode.
#[test]
fn char_mode_reads_exact_characters() {
    let content = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".repeat(4);
    let mut table = table(4000);
    let fd = table.create_fd(content, FdSource::ToolResult);
    let answer = read(
        &mut table,
        json!({"fd": fd, "mode": "char", "start": 10, "count": 15}),
    );
    assert_eq!(
        answer.text,
        "<fd_content fd=\"fd:1\" pages=\"1\" continued=\"false\" truncated=\"false\" lines=\"1-1\" total_lines=\"1\" mode=\"char\" start=\"10\" count=\"15\">\nKLMNOPQRSTUVWXY\n</fd_content>"
    );
    let tail = read(
        &mut table,
        json!({"fd": fd, "mode": "char", "start": 100, "count": 50}),
    );
    assert_eq!(body(&tail.text), "WXYZ");
    assert_eq!(attr(&tail.text, "count"), Some("4"));
    let multiline = table.create_fd("ab\ncd\nef", FdSource::ToolResult);
    let answer = read(
        &mut table,
        json!({"fd": multiline, "mode": "char", "start": 1, "count": 3}),
    );
    assert_eq!(body(&answer.text), "b\nc");
    assert_eq!(attr(&answer.text, "lines"), Some("1-2"));
}

#[test]
fn characters_are_unicode_scalar_values() {
    let mut table = FdTable::new(FdConfig {
        enabled: true,
        max_direct_output_chars: 10,
        default_page_size: 4,
        ..FdConfig::default()
    })
    .unwrap();
    // Ten characters in twenty bytes are not longer than 10.
    assert_eq!(table.wrap_tool_output("t", &"é".repeat(10)), None);
    let wrapped = table
        .wrap_tool_output("t", "日本語のテキストです。")
        .unwrap();
    assert!(wrapped.contains("<preview>\n  日本語の\n  </preview>"));
    let answer = read(
        &mut table,
        json!({"fd": "fd:1", "mode": "char", "start": 2, "count": 3}),
    );
    assert_eq!(body(&answer.text), "語のテ");
    let page = read(&mut table, json!({"fd": "fd:1", "start": 3}));
    assert_eq!(body(&page.text), "です。");
}

// Upstream 13: extracting a line range into a new descriptor.
#[test]
fn line_mode_extraction_holds_only_the_section() {
    let content =
        "# Title\n\n## Section 1\nOne\n\n## Section 2\nTwo a\nTwo b\n\n## Section 3\nThree\n";
    let mut table = table(4000);
    let fd = table.create_fd(content, FdSource::ToolResult);
    let args = json!({"fd": fd, "mode": "line", "start": 6, "count": 3, "extract_to_new_fd": true});
    assert_eq!(
        table.call_read_fd(&args),
        FdText::ok(
            "<fd_extraction source_fd=\"fd:1\" new_fd=\"fd:2\" mode=\"line\" content_size=\"25\" start=\"6\" count=\"3\">\n  <message>Content from fd:1 has been extracted to fd:2</message>\n</fd_extraction>"
                .to_owned()
        )
    );
    assert_eq!(table.content("fd:2"), Some("## Section 2\nTwo a\nTwo b\n"));
}

// Upstream 14: extracting a page, and everything.
#[test]
fn page_and_read_all_extraction_make_new_descriptors() {
    let content = hundred_lines();
    let mut table = table(100);
    let fd = table.create_fd(content.clone(), FdSource::ToolResult);
    let page2 = read(&mut table, json!({"fd": fd, "start": 2}));
    let extraction = read(
        &mut table,
        json!({"fd": fd, "start": 2, "extract_to_new_fd": true}),
    );
    assert_eq!(
        head(&extraction.text),
        "<fd_extraction source_fd=\"fd:1\" new_fd=\"fd:2\" mode=\"page\" content_size=\"96\" start=\"2\" count=\"1\" page=\"2\">"
    );
    let copy = read(&mut table, json!({"fd": "fd:2", "read_all": true}));
    assert_eq!(body(&copy.text), body(&page2.text));
    assert_eq!(table.info("fd:2").unwrap().source, FdSource::ToolResult);
    let everything = read(
        &mut table,
        json!({"fd": fd, "read_all": true, "extract_to_new_fd": true}),
    );
    assert_eq!(
        head(&everything.text),
        "<fd_extraction source_fd=\"fd:1\" new_fd=\"fd:3\" mode=\"page\" content_size=\"791\" position=\"all\">"
    );
    assert_eq!(table.content("fd:3"), Some(content.as_str()));
    // Nothing to extract: an ordinary answer and no new descriptor.
    let empty = table.create_fd("", FdSource::ToolResult);
    let answer = read(&mut table, json!({"fd": empty, "extract_to_new_fd": true}));
    assert!(
        answer
            .text
            .starts_with("<fd_content fd=\"fd:4\" page=\"1\"")
    );
    assert_eq!(attr(&answer.text, "lines"), Some("1-1"));
    assert_eq!(table.next_id(), 5);
}

#[test]
fn a_page_range_joins_pages_without_a_page_attribute() {
    let mut table = table(30);
    let fd = table.create_fd(MIXED_SHORT, FdSource::ToolResult);
    let answer = read(&mut table, json!({"fd": fd, "start": 2, "count": 2}));
    assert_eq!(
        head(&answer.text),
        "<fd_content fd=\"fd:1\" pages=\"4\" continued=\"false\" truncated=\"true\" lines=\"2-2\" total_lines=\"4\" mode=\"page\" start=\"2\" count=\"2\">"
    );
    assert_eq!(
        body(&answer.text),
        "A much longer line that should span across multiple characte"
    );
    let rest = read(&mut table, json!({"fd": fd, "start": 3, "count": 10}));
    assert_eq!(attr(&rest.text, "count"), Some("10"));
    assert_eq!(attr(&rest.text, "lines"), Some("2-4"));
    assert_eq!(attr(&rest.text, "continued"), Some("true"));
    assert_eq!(attr(&rest.text, "truncated"), Some("false"));
    // A count below 2 is one page, reported as count="1".
    let one = read(&mut table, json!({"fd": fd, "start": 2, "count": 0}));
    assert_eq!(attr(&one.text, "page"), Some("2"));
    assert_eq!(attr(&one.text, "count"), Some("1"));
}

// Upstream 15: write, then append.
#[test]
fn fd_to_file_writes_then_appends() {
    let mut table = table(4000);
    let fd = table.create_fd(
        "This is test content for fd_to_file modes",
        FdSource::ToolResult,
    );
    let mut sink = MemorySink::default();
    let written = table.call_fd_to_file(&json!({"fd": fd, "file_path": "/tmp/out.txt"}), &mut sink);
    assert_eq!(
        written,
        FdText::ok(
            "<fd_file_result fd=\"fd:1\" file_path=\"/tmp/out.txt\" mode=\"write\" char_count=\"41\" size_bytes=\"41\" success=\"true\" create=\"true\" exist_ok=\"true\">\n  <message>File descriptor fd:1 content (41 chars) successfully written to /tmp/out.txt</message>\n</fd_file_result>"
                .to_owned()
        )
    );
    let args = json!({"fd": fd, "file_path": "/tmp/out.txt", "mode": "append"});
    let appended = table.call_fd_to_file(&args, &mut sink);
    assert!(!appended.is_error);
    assert_eq!(attr(&appended.text, "mode"), Some("append"));
    assert_eq!(attr(&appended.text, "size_bytes"), Some("82"));
    assert!(
        appended
            .text
            .contains("(41 chars) successfully appended to /tmp/out.txt")
    );
    assert_eq!(
        sink.files["/tmp/out.txt"],
        "This is test content for fd_to_file modes".repeat(2)
    );
}

// Upstream 16: the create / exist_ok matrix, and the other fd_to_file errors.
#[test]
fn fd_to_file_follows_create_and_exist_ok() {
    let mut table = table(4000);
    let fd = table.create_fd("abc", FdSource::ToolResult);
    let mut sink = MemorySink::default();
    let call = |args: Value, sink: &mut MemorySink| table.call_fd_to_file(&args, sink);
    let first = call(json!({"fd": fd, "file_path": "/f"}), &mut sink);
    assert!(head(&first.text).ends_with("success=\"true\" create=\"true\" exist_ok=\"true\">"));
    assert_eq!(
        call(
            json!({"fd": fd, "file_path": "/f", "exist_ok": false}),
            &mut sink
        ),
        error(
            "file_exists",
            "fd:1",
            "File /f already exists and exist_ok=False"
        )
    );
    assert_eq!(
        call(
            json!({"fd": fd, "file_path": "/g", "create": false}),
            &mut sink
        ),
        error(
            "file_not_found",
            "fd:1",
            "File /g doesn't exist and create=False"
        )
    );
    let update = call(
        json!({"fd": fd, "file_path": "/f", "create": false}),
        &mut sink,
    );
    assert!(head(&update.text).ends_with("create=\"false\" exist_ok=\"true\">"));
    let fresh = call(
        json!({"fd": fd, "file_path": "/h", "exist_ok": false}),
        &mut sink,
    );
    assert!(head(&fresh.text).ends_with("create=\"true\" exist_ok=\"false\">"));
    assert_eq!(
        call(
            json!({"fd": fd, "file_path": "/g", "mode": "append", "create": false}),
            &mut sink
        ),
        error(
            "file_not_found",
            "fd:1",
            "File /g doesn't exist and create=False"
        )
    );
    let append = json!({"fd": fd, "file_path": "/f", "mode": "append", "create": false});
    assert!(!call(append, &mut sink).is_error);
    let new_by_append = json!({"fd": fd, "file_path": "/i", "mode": "append", "exist_ok": false});
    assert!(!call(new_by_append, &mut sink).is_error);
    let files: Vec<(&str, &str)> = sink
        .files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    assert_eq!(files, [("/f", "abcabc"), ("/h", "abc"), ("/i", "abc")]);

    assert_eq!(
        call(
            json!({"fd": fd, "file_path": "/f", "mode": "overwrite"}),
            &mut sink
        ),
        error(
            "invalid_parameter",
            "fd:1",
            "Invalid mode: overwrite. Valid options are 'write' or 'append'."
        )
    );
    let mut failing = MemorySink {
        fail: Some("Permission denied (os error 13)".to_owned()),
        ..MemorySink::default()
    };
    let path = "/nonexistent/directory/file.txt";
    assert_eq!(
        call(json!({"fd": fd, "file_path": path}), &mut failing),
        error(
            "write_error",
            "fd:1",
            "Error writing file descriptor fd:1 to /nonexistent/directory/file.txt: Permission denied (os error 13)"
        )
    );
}

// Upstream 17: an unknown descriptor, and arguments that do not parse.
#[test]
fn fd_to_file_reports_unknown_descriptors_and_bad_arguments() {
    let table = table(4000);
    let mut sink = MemorySink::default();
    let answer = table.call_fd_to_file(&json!({"fd": "fd:7", "file_path": "/x"}), &mut sink);
    assert_eq!(
        answer,
        error(
            "not_found",
            "fd:7",
            "File descriptor fd:7 not found. Available FDs: none"
        )
    );
    assert_eq!(
        table.call_fd_to_file(&json!({"fd": "fd:7"}), &mut sink),
        FdText::error(
            "Error writing file descriptor to file: missing required argument 'file_path'"
                .to_owned()
        )
    );
    let typed = table.fd_to_file(&FdToFileArgs::new("fd:7", "/x"), &mut sink);
    assert!(typed.is_error && typed.text.contains("not found"));
    assert!(sink.files.is_empty());
}

// Upstream 18: wrapping only above the threshold, never FD tools' output, only when enabled.
#[test]
fn tool_output_is_wrapped_only_when_longer_than_the_threshold() {
    let config = FdConfig {
        enabled: true,
        max_direct_output_chars: 10,
        ..FdConfig::default()
    };
    let mut table = FdTable::new(config.clone()).unwrap();
    let long = "This is a large content that exceeds the threshold";
    assert_eq!(
        table.wrap_tool_output("test_tool", long).unwrap(),
        "<fd_result fd=\"fd:1\" pages=\"1\" truncated=\"false\" lines=\"1-1\" total_lines=\"1\" source=\"tool_result\">\n  <message>Output exceeds 10 characters. Use read_fd to read more pages.</message>\n  <preview>\n  This is a large content that exceeds the threshold\n  </preview>\n</fd_result>"
    );
    assert_eq!(table.content("fd:1"), Some(long));
    assert_eq!(table.wrap_tool_output("test_tool", "0123456789"), None);
    assert_eq!(table.wrap_tool_output("read_fd", long), None);
    assert_eq!(table.wrap_tool_output("fd_to_file", long), None);
    table.register_fd_tool("fd_search");
    assert_eq!(table.wrap_tool_output("fd_search", long), None);
    assert_eq!(table.next_id(), 2);
    let mut off = FdTable::new(FdConfig {
        enabled: false,
        ..config
    })
    .unwrap();
    assert_eq!(off.wrap_tool_output("test_tool", long), None);
    assert!(off.is_empty());
}

#[test]
fn large_user_input_becomes_a_descriptor_with_the_tag_fixed() {
    let config = FdConfig {
        enabled: true,
        max_input_chars: 100,
        ..FdConfig::default()
    };
    let mut table = FdTable::new(config.clone()).unwrap();
    let input = format!("   abcdefgh{}", "x".repeat(200));
    // The preview is min(150, 100 / 20) = 5 characters, "   ab", stripped.
    assert_eq!(
        table.wrap_user_input(&input).unwrap(),
        "<fd:1 preview=\"ab...\" type=\"user_input\" size=\"211\">\nThis large user input has been stored in file descriptor fd:1. Use read_fd(fd=\"fd:1\") to access the content."
    );
    assert_eq!(table.content("fd:1"), Some(input.as_str()));
    assert_eq!(table.info("fd:1").unwrap().source, FdSource::UserInput);
    assert!(
        table
            .fd_result("fd:1")
            .unwrap()
            .contains(" source=\"user_input\">")
    );
    assert_eq!(table.wrap_user_input(&"y".repeat(100)), None);

    let mut defaults = table_with(FdConfig {
        enabled: true,
        ..FdConfig::default()
    });
    let input = format!("{}\u{1f}", "z".repeat(9000));
    let message = defaults.wrap_user_input(&input).unwrap();
    assert!(message.starts_with(&format!("<fd:1 preview=\"{}...\" ", "z".repeat(150))));
    let mut no_paging = table_with(FdConfig {
        page_user_input: false,
        ..config.clone()
    });
    assert_eq!(no_paging.wrap_user_input(&input), None);
    let mut disabled = table_with(FdConfig {
        enabled: false,
        ..config
    });
    assert_eq!(disabled.wrap_user_input(&input), None);
}

fn table_with(config: FdConfig) -> FdTable {
    FdTable::new(config).unwrap()
}

#[test]
fn python_strip_removes_the_information_separators_too() {
    let mut table = table_with(FdConfig {
        enabled: true,
        max_input_chars: 100,
        ..FdConfig::default()
    });
    let input = format!("\u{1c}\u{a0}a b{}", "x".repeat(200));
    let message = table.wrap_user_input(&input).unwrap();
    assert!(message.starts_with("<fd:1 preview=\"a b...\""), "{message}");
}

#[test]
fn the_table_persists_what_it_needs_and_rebuilds_the_rest() {
    let mut table = table(30);
    table.create_fd(MIXED_SHORT, FdSource::ToolResult);
    table
        .set_config(FdConfig {
            enabled: true,
            default_page_size: 10,
            ..FdConfig::default()
        })
        .unwrap();
    table.create_fd("tiny", FdSource::UserInput);
    table.create_fd("0123456789abcdefghij\nklm", FdSource::ToolResult);
    let json = serde_json::to_value(&table).unwrap();
    assert_eq!(
        json,
        json!({
            "next_id": 4,
            "descriptors": {
                "fd:1": {"source": "tool_result", "page_size": 30, "content": MIXED_SHORT},
                "fd:2": {"source": "user_input", "page_size": 10, "content": "tiny"},
                "fd:3": {"source": "tool_result", "page_size": 10, "content": "0123456789abcdefghij\nklm"},
            }
        })
    );
    let mut resumed: FdTable = serde_json::from_value(json).unwrap();
    assert_eq!(resumed.config(), &FdConfig::default());
    resumed.set_config(table.config().clone()).unwrap();
    for fd in ["fd:1", "fd:2", "fd:3"] {
        assert_eq!(resumed.info(fd), table.info(fd));
        for start in 1..=3 {
            let args = json!({"fd": fd, "start": start});
            assert_eq!(resumed.call_read_fd(&args), table.call_read_fd(&args));
        }
    }
    let old = read(&mut resumed, json!({"fd": "fd:3", "start": 2}));
    assert_eq!(body(&old.text), "abcdefghij");
    assert_eq!(
        resumed.create_fd("after resume", FdSource::ToolResult),
        "fd:4"
    );
}

#[test]
fn an_inconsistent_persisted_state_is_refused() {
    let bad = [
        (
            json!({"next_id": 0, "descriptors": {}}),
            "next_id 0 is out of range",
        ),
        (
            json!({"next_id": 2, "descriptors": {"fd:2": {"source": "tool_result", "page_size": 5, "content": ""}}}),
            "descriptor fd:2 is not below next_id 2",
        ),
        (
            json!({"next_id": 2, "descriptors": {"ref:x": {"source": "tool_result", "page_size": 5, "content": ""}}}),
            "descriptor id \"ref:x\" is not fd:N",
        ),
        (
            json!({"next_id": 5, "descriptors": {"fd:01": {"source": "tool_result", "page_size": 5, "content": ""}}}),
            "descriptor id \"fd:01\" is not fd:N",
        ),
        (
            json!({"next_id": 5, "descriptors": {"fd:1": {"source": "tool_result", "page_size": 0, "content": ""}}}),
            "descriptor fd:1 has page_size 0",
        ),
        (
            json!({"next_id": 5, "descriptors": {"fd:1": {"source": "stdin", "page_size": 5, "content": ""}}}),
            "unknown variant `stdin`",
        ),
        (
            json!({"next_id": 5, "descriptors": {}, "config": {}}),
            "unknown field `config`",
        ),
    ];
    for (state, message) in bad {
        let err = serde_json::from_value::<FdTable>(state.clone()).unwrap_err();
        assert!(err.to_string().contains(message), "{state}: {err}");
    }
}

#[test]
fn a_zero_size_setting_is_refused() {
    let zero = FdConfig {
        max_input_chars: 0,
        ..FdConfig::default()
    };
    assert_eq!(
        FdTable::new(zero.clone()).unwrap_err(),
        FdConfigError::NotPositive {
            setting: "max_input_chars"
        }
    );
    let mut table = table(10);
    assert!(table.set_config(zero).is_err());
    assert_eq!(table.config().default_page_size, 10);
}

#[test]
fn typed_reads_match_json_reads() {
    let mut table = table(30);
    let fd = table.create_fd(MIXED_SHORT, FdSource::ToolResult);
    let typed = table.read_fd(&ReadArgs {
        mode: ReadMode::Line,
        start: 2,
        count: 2,
        ..ReadArgs::new(fd.clone())
    });
    let raw = table.call_read_fd(&json!({"fd": fd, "mode": "line", "start": 2, "count": 2}));
    assert_eq!(typed, raw);
    assert_eq!(
        body(&typed.text),
        "A much longer line that should span across multiple characters\nAnother line\n"
    );
}

proptest! {
    #[test]
    fn read_fd_pages_lines_and_chars_give_back_the_content(
        parts in proptest::collection::vec(prop_oneof!["ab", "\n", "é", "語", "xyz "], 0..60),
        page_size in 1usize..15,
        start in 0i64..200,
        count in 0i64..20,
    ) {
        let content = parts.concat();
        let mut table = table(page_size);
        let fd = table.create_fd(content.clone(), FdSource::ToolResult);
        let info = table.info(&fd).unwrap();
        let mut joined = String::new();
        for page in 1..=info.total_pages {
            let answer = read(&mut table, json!({"fd": fd, "start": page}));
            prop_assert!(body(&answer.text).chars().count() <= page_size);
            joined.push_str(body(&answer.text));
        }
        prop_assert_eq!(&joined, &content);
        let all = read(&mut table, json!({"fd": fd, "start": 1, "count": info.total_pages.max(2)}));
        prop_assert_eq!(body(&all.text), content.as_str());

        let chars: Vec<char> = content.chars().collect();
        let char_args = json!({"fd": fd, "mode": "char", "start": start, "count": count});
        let answer = table.call_read_fd(&char_args);
        if (start as usize) < chars.len() {
            let expected: String = chars.iter().skip(start as usize).take(count as usize).collect();
            prop_assert_eq!(body(&answer.text), expected.as_str());
        } else {
            prop_assert!(answer.is_error);
        }

        let lines: Vec<&str> = if content.is_empty() {
            vec![""]
        } else {
            content.split_inclusive('\n').collect()
        };
        let line_args = json!({"fd": fd, "mode": "line", "start": start, "count": count});
        let answer = table.call_read_fd(&line_args);
        if start >= 1 && (start as usize) <= lines.len() {
            let first = start as usize - 1;
            let last = (first + count as usize).min(lines.len());
            prop_assert_eq!(body(&answer.text), lines[first..last].concat());
        } else {
            prop_assert!(answer.is_error);
        }
    }
}
