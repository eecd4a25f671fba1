//! `read_sections` (ReadSections suite), line endings and front matter included.

use serde_json::{Value, json};

use super::super::DocsLibrary;
use super::{Fixture, call, call_json};

fn read(lib: &DocsLibrary, file_id: &str, ids: &[&str]) -> String {
    call(
        lib,
        "read_sections",
        json!({"fileId": file_id, "section_ids": ids}),
    )
}

fn titles_and_contents(lib: &DocsLibrary, file_id: &str, ids: &[&str]) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&read(lib, file_id, ids)).expect("json");
    v["sections"]
        .as_array()
        .expect("array")
        .iter()
        .map(|s| {
            (
                s["title"].as_str().expect("title").to_owned(),
                s["content"].as_str().expect("content").to_owned(),
            )
        })
        .collect()
}

fn titles(lib: &DocsLibrary, ids: &[&str]) -> Vec<String> {
    titles_and_contents(lib, "f1", ids)
        .into_iter()
        .map(|(t, _)| t)
        .collect()
}

fn guide() -> Fixture {
    let fx = Fixture::new();
    fx.file("guide.md", "# Intro\nHello\n## Setup\nSteps\n# Usage\nRun");
    fx
}

#[test]
fn the_exact_text_of_a_read() {
    let fx = guide();
    let lib = fx.library();
    let expected = r##"{"fileId":"f1","filename":"guide.md","sections":[{"title":"Intro","content":"# Intro\nHello\n## Setup\nSteps"}]}"##;
    assert_eq!(read(&lib, "f1", &["1"]), expected);
    assert_eq!(lib.read_sections("f1", &["1".to_owned()]).text, expected);
    assert_eq!(
        read(&lib, "f1", &[]),
        r#"{"fileId":"f1","filename":"guide.md","sections":[]}"#
    );
}

#[test]
fn parents_swallow_their_subsections_and_shallow_ids_come_first() {
    let fx = guide();
    let lib = fx.library();
    assert_eq!(titles(&lib, &["1", "1/1"]), ["Intro"]);
    assert_eq!(titles(&lib, &["1/1", "1"]), ["Intro"]);
    assert_eq!(titles(&lib, &["1/1", "2"]), ["Usage", "Setup"]);
    assert_eq!(titles(&lib, &["2", "1"]), ["Usage", "Intro"]);
    // The original does not de-duplicate an id asked for twice.
    assert_eq!(titles(&lib, &["1", "1"]), ["Intro", "Intro"]);
}

#[test]
fn malformed_and_missing_ids() {
    let fx = guide();
    let lib = fx.library();
    let not_found = |list: &str| {
        format!(
            "The sections [{list}] were not found in 'guide.md'. Use the table_of_contents tool to see all available section IDs in this file."
        )
    };
    assert_eq!(
        read(&lib, "f1", &["abc", "1", "1.1", "3"]),
        not_found("abc, 1.1")
    );
    assert_eq!(
        read(&lib, "f1", &["1", "3", "999/999/999"]),
        not_found("3, 999/999/999")
    );
    assert!(read(&lib, "f1", &["999/999/999"]).contains("999/999/999"));
}

#[test]
fn crlf_lines_keep_their_carriage_returns_as_in_the_original() {
    let fx = Fixture::new();
    fx.file("crlf.md", "# A\r\ntext\r\n## B\r\nmore\r\n");
    let lib = fx.library();
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1"]),
        [("A".to_owned(), "# A\r\ntext\r\n## B\r\nmore\r\n".to_owned())]
    );
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1/1"]),
        [("B".to_owned(), "## B\r\nmore\r\n".to_owned())]
    );
    let toc = call_json(&lib, "table_of_contents", json!({"fileId": "f1"}));
    assert_eq!(
        toc["sections"][0]["character_count"],
        "# A\ntext\n## B\nmore\n".len()
    );
}

#[test]
fn lone_carriage_returns_and_mixed_endings_end_lines() {
    let fx = Fixture::new();
    fx.file("a-cr.md", "# A\rtext\r## B\rmore")
        .file("b-mixed.md", "# A\ntext\r\n## B\rmore");
    let lib = fx.library();
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1", "1/1"]),
        [("A".to_owned(), "# A\ntext\n## B\nmore".to_owned())]
    );
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1/1"]),
        [("B".to_owned(), "## B\nmore".to_owned())]
    );
    assert_eq!(
        titles_and_contents(&lib, "f2", &["1"]),
        [("A".to_owned(), "# A\ntext\r\n## B\nmore".to_owned())]
    );
    for id in ["f1", "f2"] {
        let toc = call_json(&lib, "table_of_contents", json!({"fileId": id}));
        assert_eq!(
            toc["sections"][0]["character_count"],
            "# A\ntext\n## B\nmore".len()
        );
        assert_eq!(toc["sections"][1]["title"], "B");
    }
}

#[test]
fn front_matter_is_not_part_of_any_section() {
    let fx = Fixture::new();
    fx.file("fm.md", "---\ntitle: T\n---\n# Real\nbody\n");
    let lib = fx.library();
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1"]),
        [("Real".to_owned(), "# Real\nbody\n".to_owned())]
    );
}

#[test]
fn a_blank_header_takes_its_title_as_the_original_does() {
    let fx = Fixture::new();
    fx.file("blank.md", "#  \nNext line\n# B");
    let lib = fx.library();
    let toc = call_json(&lib, "table_of_contents", json!({"fileId": "f1"}));
    assert_eq!(toc["sections"][0]["title"], "");
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1"]),
        [("Next line".to_owned(), "#  \nNext line".to_owned())]
    );
}

#[test]
fn files_with_the_same_section_names() {
    let fx = Fixture::new();
    fx.file("api-docs.md", "# Overview\nAPI overview\n")
        .file("guide.md", "# Overview\nGuide overview\n");
    let lib = fx.library();
    assert_eq!(
        titles_and_contents(&lib, "f1", &["1"])[0].1,
        "# Overview\nAPI overview\n"
    );
    assert_eq!(
        titles_and_contents(&lib, "f2", &["1"])[0].1,
        "# Overview\nGuide overview\n"
    );
}

#[test]
fn a_file_gone_after_discovery_is_a_parse_error() {
    let fx = guide();
    let lib = fx.library();
    std::fs::remove_file(fx.path("guide.md")).expect("remove");
    let parse_error = "An error occurred while parsing the markdown file. The file may be corrupted or in an unsupported format.";
    assert_eq!(read(&lib, "f1", &["1"]), parse_error);
    assert_eq!(
        call(&lib, "table_of_contents", json!({"fileId": "f1"})),
        parse_error
    );
    // No ids to read: the original answers without opening the file.
    assert_eq!(
        read(&lib, "f1", &[]),
        r#"{"fileId":"f1","filename":"guide.md","sections":[]}"#
    );
}
