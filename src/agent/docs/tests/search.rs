//! `search` (Search suite): what matches, which files are listed, the query's source, errors.

use serde_json::{Value, json};

use super::super::{DocsLibrary, HIDDEN_SUBSECTIONS_INSTRUCTIONS};
use super::{Fixture, call, call_json, ids};

fn fixture() -> Fixture {
    let fx = Fixture::new();
    fx.file(
        "api.md",
        "# API\nThe endpoints.\n## Auth\nUse a token.\n## Errors\nCodes and messages.\n",
    )
    .file(
        "guide.md",
        "# Guide\nStart here.\n## Install\nRun the installer.\n",
    )
    .file("notes.md", "# Notes\nNothing relevant.\n");
    fx
}

fn search(lib: &DocsLibrary, args: Value) -> String {
    call(lib, "search", args)
}

#[test]
fn the_exact_text_of_an_all_files_search() {
    let fx = fixture();
    let lib = fx.library();
    let expected = format!(
        r#"{{"query":"token","results":[{{"fileId":"f1","filename":"api.md","matches":[{{"id":"1/1","title":"Auth","level":2,"character_count":{}}}]}}]}}"#,
        "## Auth\nUse a token.".len()
    );
    assert_eq!(search(&lib, json!({"query": "token"})), expected);
    assert_eq!(lib.search("token", None).text, expected);
}

#[test]
fn only_files_with_matches_are_listed_in_id_order() {
    let fx = fixture();
    let lib = fx.library();
    let r = call_json(&lib, "search", json!({"query": "the"}));
    let files: Vec<&str> = r["results"]
        .as_array()
        .expect("array")
        .iter()
        .map(|f| f["fileId"].as_str().expect("fileId"))
        .collect();
    assert_eq!(files, ["f1", "f2"]);
    assert_eq!(ids(&r["results"][0]["matches"]), ["1"]);
    assert_eq!(ids(&r["results"][1]["matches"]), ["1/1"]);
    // "1" of api.md matched and its two children did not.
    assert_eq!(r["results"][0]["matches"][0]["subsection_count"], 2);
    assert_eq!(r["instructions"], HIDDEN_SUBSECTIONS_INSTRUCTIONS);
}

#[test]
fn a_single_file_search_always_returns_its_entry() {
    let fx = fixture();
    let lib = fx.library();
    assert_eq!(
        search(&lib, json!({"query": "zzz", "fileId": "f3"})),
        r#"{"query":"zzz","results":[{"fileId":"f3","filename":"notes.md","matches":[]}]}"#
    );
    let r = call_json(&lib, "search", json!({"query": "install", "fileId": "f2"}));
    assert_eq!(ids(&r["results"][0]["matches"]), ["1/1"]);
    assert!(r.get("instructions").is_none());
    // A null fileId searches every file.
    let r = call_json(&lib, "search", json!({"query": "install", "fileId": null}));
    assert_eq!(r["results"].as_array().map(Vec::len), Some(1));
}

#[test]
fn titles_and_own_text_match_case_insensitively_across_lines() {
    let fx = fixture();
    let lib = fx.library();
    let r = call_json(&lib, "search", json!({"query": "ERRORS"}));
    assert_eq!(ids(&r["results"][0]["matches"]), ["1/2"]);
    let r = call_json(
        &lib,
        "search",
        json!({"query": "token.*codes", "fileId": "f1"}),
    );
    // The pattern spans two sections, so neither section's own text matches it.
    assert_eq!(ids(&r["results"][0]["matches"]), Vec::<String>::new());
    let r = call_json(
        &lib,
        "search",
        json!({"query": "endpoints\\.\\n##", "fileId": "f1"}),
    );
    assert_eq!(ids(&r["results"][0]["matches"]), Vec::<String>::new());
    let r = call_json(
        &lib,
        "search",
        json!({"query": "api.the endpoints", "fileId": "f1"}),
    );
    assert_eq!(ids(&r["results"][0]["matches"]), ["1"]);
}

#[test]
fn the_query_is_trimmed_and_shown_as_regex_source() {
    let fx = Fixture::new();
    fx.file("paths.md", "# Paths\nsee src/lib.rs\n");
    let lib = fx.library();
    let r = call_json(&lib, "search", json!({"query": "  src/lib  "}));
    assert_eq!(r["query"], r"src\/lib");
    assert_eq!(ids(&r["results"][0]["matches"]), ["1"]);
    assert!(search(&lib, json!({"query": "src/lib"})).starts_with(r#"{"query":"src\\/lib","#));
}

#[test]
fn invalid_and_linear_time_refused_patterns() {
    let fx = fixture();
    let lib = fx.library();
    let text = search(&lib, json!({"query": "(unclosed"}));
    assert!(
        text.starts_with(
            "Invalid regular expression pattern: Invalid regular expression: /(unclosed/is: "
        ),
        "{text}"
    );
    assert!(
        text.ends_with(". Please check your regex syntax and try again."),
        "{text}"
    );
    for pattern in ["token(?=\\.)", "(?<!a)token", "(t)oken\\1"] {
        let text = search(&lib, json!({"query": pattern}));
        assert!(
            text.starts_with("Invalid regular expression pattern: "),
            "{text}"
        );
        assert!(text.contains("linear time"), "{text}");
    }
    // The pattern is checked before the file id is looked up.
    assert!(
        search(&lib, json!({"query": "(", "fileId": "f99"}))
            .starts_with("Invalid regular expression pattern")
    );
}

#[test]
fn parameter_errors() {
    let fx = fixture();
    let lib = fx.library();
    let query_required =
        "The 'query' parameter is required and cannot be empty. Please provide a valid value.";
    assert_eq!(search(&lib, json!({})), query_required);
    assert_eq!(search(&lib, json!({"query": "   "})), query_required);
    assert_eq!(search(&lib, json!({"query": 5})), query_required);
    assert_eq!(lib.search(" ", None).text, query_required);
    let file_id_required =
        "The 'fileId' parameter is required and cannot be empty. Please provide a valid value.";
    assert_eq!(
        search(&lib, json!({"query": "x", "fileId": ""})),
        file_id_required
    );
    assert_eq!(
        search(&lib, json!({"query": "x", "fileId": 3})),
        file_id_required
    );
    assert_eq!(
        search(&lib, json!({"query": "x", "fileId": "f99"})),
        "The file ID 'f99' was not found. Use the list_documentation_files tool to see all available files and their IDs."
    );
}

#[test]
fn a_file_gone_after_discovery_is_a_search_error() {
    let fx = fixture();
    let lib = fx.library();
    std::fs::remove_file(fx.path("notes.md")).expect("remove");
    let search_error = "An error occurred while searching documentation files. Please check that the file exists using the list_documentation_files tool.";
    assert_eq!(search(&lib, json!({"query": "x"})), search_error);
    assert_eq!(
        search(&lib, json!({"query": "x", "fileId": "f3"})),
        search_error
    );
    assert!(search(&lib, json!({"query": "x", "fileId": "f1"})).starts_with("{"));
}
