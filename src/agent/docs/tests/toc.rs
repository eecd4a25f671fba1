//! `table_of_contents` and `section_table_of_contents` (TableOfContents,
//! SectionTableOfContents and ConfigurationIntegration suites).

use serde_json::{Value, json};

use super::super::{DocsConfig, DocsLibrary, HIDDEN_SUBSECTIONS_INSTRUCTIONS};
use super::{Fixture, call, call_json, ids};

/// One level-1 section per entry of `children`, with that many level-2 sections; level-1
/// section `i` carries `padding[i]` extra lines.
fn outline(children: &[usize], padding: &[usize]) -> String {
    let mut s = String::new();
    for (i, &n) in children.iter().enumerate() {
        s.push_str(&format!("# Top {i}\n"));
        for _ in 0..padding.get(i).copied().unwrap_or(0) {
            s.push_str("padding padding padding\n");
        }
        for j in 0..n {
            s.push_str(&format!("## Sub {i}.{j}\ntext\n"));
        }
    }
    // No trailing newline, so that equal outlines give equal character counts.
    s.trim_end().to_owned()
}

fn toc(lib: &DocsLibrary, file_id: &str) -> Value {
    call_json(lib, "table_of_contents", json!({"fileId": file_id}))
}

fn levels(sections: &Value) -> Vec<u64> {
    sections
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["level"].as_u64().expect("level"))
        .collect()
}

#[test]
fn the_exact_text_of_a_table_of_contents() {
    let fx = Fixture::new();
    fx.file("doc.md", "# A\nx\n## B\ny\n### C\nz\n#### D\nw");
    let expected = r#"{"fileId":"f1","filename":"doc.md","sections":[{"id":"1","title":"A","level":1,"character_count":29},{"id":"1/1","title":"B","level":2,"character_count":23},{"id":"1/1/1","title":"C","level":3,"character_count":16,"subsection_count":1}],"instructions":"To explore deeper subsections under a specific subsection that are not currently shown (the \"subsection_count\" is > 0), use the section_table_of_contents tool with the section IDs of interest."}"#;
    let lib = fx.library();
    assert_eq!(
        call(&lib, "table_of_contents", json!({"fileId": "f1"})),
        expected
    );
    assert_eq!(lib.table_of_contents("f1").text, expected);
}

#[test]
fn simple_headers_are_all_shown_without_counts_or_instructions() {
    let fx = Fixture::new();
    fx.file(
        "simple-headers.md",
        "# Simple Headers\n\n## Introduction\n\n### Getting Started\n\n## Main Features\n\n### Feature One\n\n### Feature Two\n\n## Conclusion\n\n### Final Thoughts\n",
    );
    let t = toc(&fx.library(), "f1");
    assert_eq!(levels(&t["sections"]), [1, 2, 3, 2, 3, 3, 2, 3]);
    assert_eq!(t["sections"][0]["title"], "Simple Headers");
    assert!(t.get("instructions").is_none());
    assert!(
        t["sections"]
            .as_array()
            .expect("array")
            .iter()
            .all(|s| s.get("subsection_count").is_none())
    );
}

#[test]
fn front_matter_and_files_without_headers() {
    let fx = Fixture::new();
    fx.file(
        "with-front-matter.md",
        "---\ntitle: Doc\n# a YAML comment, not a header\n---\n# Document with Front Matter\n## Part\n",
    )
    .file("no-headers.md", "Just text.\nNo headers.\n")
    .file("single-header.md", "# Single Header Document\n");
    let lib = fx.library();
    let t = toc(&lib, "f3");
    assert_eq!(ids(&t["sections"]), ["1", "1/1"]);
    assert_eq!(t["sections"][0]["title"], "Document with Front Matter");
    assert_eq!(
        t["sections"][0]["character_count"],
        "# Document with Front Matter\n## Part\n".len()
    );
    assert_eq!(
        call(&lib, "table_of_contents", json!({"fileId": "f1"})),
        r#"{"fileId":"f1","filename":"no-headers.md","sections":[]}"#
    );
    assert_eq!(ids(&toc(&lib, "f2")["sections"]), ["1"]);
}

#[test]
fn default_max_headers_is_25_and_phase_two_fills_by_size() {
    // 3 + 30 headers: the level-1 sections are taken, then whole groups of 10 children by
    // parent size (Top 0, then Top 2), until the next group would pass 25.
    let fx = Fixture::new();
    fx.file("many.md", &outline(&[10, 10, 10], &[5, 0, 2]));
    let t = toc(&fx.library(), "f1");
    let shown = ids(&t["sections"]);
    assert_eq!(shown.len(), 23);
    let mut expected = vec!["1".to_owned()];
    expected.extend((1..=10).map(|j| format!("1/{j}")));
    expected.push("2".to_owned());
    expected.push("3".to_owned());
    expected.extend((1..=10).map(|j| format!("3/{j}")));
    assert_eq!(shown, expected);
    assert_eq!(t["sections"][11]["subsection_count"], 10);
    assert!(t["sections"][0].get("subsection_count").is_none());
    assert_eq!(t["instructions"], HIDDEN_SUBSECTIONS_INSTRUCTIONS);
}

#[test]
fn level_one_is_kept_even_over_the_limit() {
    let fx = Fixture::new();
    let text: String = (1..=30).map(|i| format!("# Top {i}\n## Sub\n")).collect();
    fx.file("many-top-level.md", &text);
    let t = toc(&fx.library_with(&["--max-headers", "10"]), "f1");
    assert_eq!(levels(&t["sections"]), vec![1; 30]);
}

#[test]
fn max_headers_from_the_environment_and_the_command_line() {
    let fx = Fixture::new();
    fx.file("test-file.md", &outline(&[3, 3, 3, 3], &[]));
    let args = ["--docs-path".to_owned(), fx.root()];
    let env = DocsLibrary::open(DocsConfig::from_args_and_env(&args, |name| {
        (name == "MAX_HEADERS").then(|| "8".to_owned())
    }));
    // 4 level-1 sections, then one group of 3 children fits in 8.
    assert_eq!(
        ids(&toc(&env, "f1")["sections"]),
        ["1", "1/1", "1/2", "1/3", "2", "3", "4"]
    );
    assert_eq!(
        toc(&fx.library(), "f1")["sections"]
            .as_array()
            .map(Vec::len),
        Some(16)
    );
    let cli = fx.library_with(&["--max-headers", "4"]);
    assert_eq!(ids(&toc(&cli, "f1")["sections"]), ["1", "2", "3", "4"]);
}

#[test]
fn max_toc_depth_from_the_command_line_and_the_environment() {
    let fx = Fixture::new();
    fx.file(
        "deep.md",
        "# L1\n## L2\n### L3\n#### L4\n##### L5\n###### L6\n",
    );
    let shallow = fx.library_with(&["--max-toc-depth", "2"]);
    let t = toc(&shallow, "f1");
    assert_eq!(levels(&t["sections"]), [1, 2]);
    assert_eq!(t["sections"][1]["subsection_count"], 1);
    let args = ["--docs-path".to_owned(), fx.root()];
    let env = DocsLibrary::open(DocsConfig::from_args_and_env(&args, |name| {
        (name == "MAX_TOC_DEPTH").then(|| "4".to_owned())
    }));
    assert_eq!(levels(&toc(&env, "f1")["sections"]), [1, 2, 3, 4]);
    assert_eq!(levels(&toc(&fx.library(), "f1")["sections"]), [1, 2, 3]);
    let all = fx.library_with(&["--max-toc-depth", "6"]);
    assert_eq!(levels(&toc(&all, "f1")["sections"]), [1, 2, 3, 4, 5, 6]);
    assert!(toc(&all, "f1").get("instructions").is_none());
}

#[test]
fn phase_one_shows_the_next_level_past_the_limit() {
    let fx = Fixture::new();
    fx.file("a-one.md", &outline(&[40], &[]))
        .file("b-two.md", &outline(&[20, 20], &[]))
        .file("c-two-level1-only.md", "# One\n# Two\n")
        .file("d-three.md", &outline(&[7, 7, 6], &[]));
    let lib = fx.library();
    let one = toc(&lib, "f1");
    assert_eq!(one["sections"].as_array().map(Vec::len), Some(41));
    assert!(one["sections"][0].get("subsection_count").is_none());
    assert!(one.get("instructions").is_none());
    assert_eq!(
        toc(&lib, "f2")["sections"].as_array().map(Vec::len),
        Some(42)
    );
    assert_eq!(ids(&toc(&lib, "f3")["sections"]), ["1", "2"]);
    // Phase 1 does not start when the base already shows 3 or more.
    assert_eq!(
        toc(&lib, "f4")["sections"].as_array().map(Vec::len),
        Some(23)
    );
}

#[test]
fn phase_two_stops_at_the_exact_limit_all_or_nothing() {
    // 4 + 20 = 24 headers fit; the level-3 groups are 2 (under the larger section) and 1.
    let mut text = outline(&[5, 5, 5, 3], &[]);
    text.push_str("\n## Big\nlots of text in this section\nand more\n### Child a\n### Child b\n## Small\n### Only child\n");
    let fx = Fixture::new();
    fx.file("exact.md", &text);
    let t = toc(&fx.library(), "f1");
    let shown = ids(&t["sections"]);
    assert_eq!(shown.len(), 25, "{shown:?}");
    assert!(shown.contains(&"4/5/1".to_owned()));
    assert!(!shown.contains(&"4/4/1".to_owned()));
    let big = t["sections"]
        .as_array()
        .expect("array")
        .iter()
        .find(|s| s["id"] == "4/4")
        .expect("Big");
    assert_eq!(big["subsection_count"], 2);
}

fn section_toc(lib: &DocsLibrary, section_ids: &[&str]) -> String {
    call(
        lib,
        "section_table_of_contents",
        json!({"fileId": "f1", "section_ids": section_ids}),
    )
}

#[test]
fn section_table_of_contents_gives_direct_children() {
    let fx = Fixture::new();
    fx.file(
        "s.md",
        "# A\n## A1\n### A1a\n#### A1a-i\n## A2\n# B\n## B1\n",
    );
    let lib = fx.library_with(&["--max-toc-depth", "2"]);
    let parse = |text: String| serde_json::from_str::<Value>(&text).expect("json");
    let t = parse(section_toc(&lib, &["1"]));
    assert_eq!(ids(&t["sections"]), ["1/1", "1/2"]);
    assert_eq!(t["sections"][0]["subsection_count"], 1);
    assert_eq!(t["instructions"], HIDDEN_SUBSECTIONS_INSTRUCTIONS);
    // Grouped by requested parent, each child once.
    assert_eq!(
        ids(&parse(section_toc(&lib, &["2", "1"]))["sections"]),
        ["2/1", "1/1", "1/2"]
    );
    assert_eq!(
        ids(&parse(section_toc(&lib, &["1", "1"]))["sections"]),
        ["1/1", "1/2"]
    );
    // The depth limit does not apply.
    let deep = parse(section_toc(&lib, &["1/1/1"]));
    assert_eq!(ids(&deep["sections"]), ["1/1/1/1"]);
    assert_eq!(deep["sections"][0]["level"], 4);
    assert_eq!(
        section_toc(&lib, &["2/1"]),
        r#"{"fileId":"f1","filename":"s.md","sections":[]}"#
    );
}

#[test]
fn section_table_of_contents_applies_max_headers() {
    let fx = Fixture::new();
    fx.file(
        "n.md",
        "# Root\n## C1\n### G1\n### G2\n### G3\n### G4\n## C2\n## C3\n",
    );
    let parse = |text: String| serde_json::from_str::<Value>(&text).expect("json");
    let five = fx.library_with(&["--max-headers", "5"]);
    // Level 2 (3) fits, level 3 would make 7; C1's group of 4 does not fit in 5.
    let t = parse(section_toc(&five, &["1", "1/1"]));
    assert_eq!(ids(&t["sections"]), ["1/1", "1/2", "1/3"]);
    assert_eq!(t["sections"][0]["subsection_count"], 4);
    let seven = fx.library_with(&["--max-headers", "7"]);
    let t = parse(section_toc(&seven, &["1", "1/1"]));
    assert_eq!(
        ids(&t["sections"]),
        ["1/1", "1/2", "1/3", "1/1/1", "1/1/2", "1/1/3", "1/1/4"]
    );
    assert!(t.get("instructions").is_none());
    // Fewer than 3 candidates and none fits: nothing is shown, as in the original.
    fx.file("n.md", "# Root\n## C1\n## C2\n");
    let one = fx.library_with(&["--max-headers", "1"]);
    assert_eq!(
        section_toc(&one, &["1"]),
        r#"{"fileId":"f1","filename":"n.md","sections":[]}"#
    );
}

#[test]
fn section_table_of_contents_errors() {
    let fx = Fixture::new();
    fx.file("s.md", "# A\n## A1\n");
    let lib = fx.library();
    let not_found = |list: &str| {
        format!(
            "The sections [{list}] were not found in 's.md'. Use the table_of_contents tool to see all available section IDs in this file."
        )
    };
    assert_eq!(section_toc(&lib, &["x", "1.2", "9"]), not_found("x, 1.2"));
    assert_eq!(
        section_toc(&lib, &["9", "1", "999/999/999"]),
        not_found("9, 999/999/999")
    );
    let required = "The section_ids parameter must be an array of section identifiers. Use the table_of_contents tool first to get valid section IDs.";
    assert_eq!(section_toc(&lib, &[]), required);
    assert_eq!(lib.section_table_of_contents("f1", &[]).text, required);
}
