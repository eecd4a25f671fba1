//! `list_documentation_files` and multi-directory discovery (ListDocumentationFiles and
//! MultiDirectory suites).

use serde_json::{Value, json};

use super::super::{DocsConfig, DocsLibrary};
use super::{Fixture, call, call_json, path_string};

fn filenames(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .expect("array")
        .iter()
        .map(|f| {
            (
                f["fileId"].as_str().expect("fileId").to_owned(),
                f["filename"].as_str().expect("filename").to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn lists_the_exact_text_with_front_matter_fields() {
    let api = "---\ntitle: API Reference\ndescription: Complete API documentation\nkeywords: [api, reference]\n---\n# API Reference\n";
    let readme = "# Readme\n";
    let guide = "---\ntitle: \"\"\ndescription: \"\"\nkeywords: []\n---\n# Guide\n";
    let fx = Fixture::new();
    fx.file("api-reference.md", api)
        .file("README.md", readme)
        .file("user-guide.md", guide);
    let lib = fx.library();
    let root = fx.root();
    let expected = format!(
        "[{{\"fileId\":\"f1\",\"filename\":\"api-reference.md\",\"title\":\"API Reference\",\"description\":\"Complete API documentation\",\"keywords\":[\"api\",\"reference\"],\"size\":\"{}b\",\"sourceDirectory\":\"{root}\"}},\
         {{\"fileId\":\"f2\",\"filename\":\"README.md\",\"title\":\"README\",\"size\":\"{}b\",\"sourceDirectory\":\"{root}\"}},\
         {{\"fileId\":\"f3\",\"filename\":\"user-guide.md\",\"title\":\"user-guide\",\"size\":\"{}b\",\"sourceDirectory\":\"{root}\"}}]",
        api.len(),
        readme.len(),
        guide.len()
    );
    assert_eq!(call(&lib, "list_documentation_files", json!({})), expected);
    assert_eq!(lib.list_documentation_files().text, expected);
}

#[test]
fn ids_are_sequential_from_f1_and_stable_across_calls_and_restarts() {
    let fx = Fixture::new();
    fx.file("doc1.md", "# One\n")
        .file("doc2.md", "# Two\n")
        .file("doc3.md", "# Three\n");
    let lib = fx.library();
    let first = call(&lib, "list_documentation_files", json!({}));
    let again = call(&lib, "list_documentation_files", json!({}));
    assert_eq!(first, again);
    let restarted = fx.library();
    assert_eq!(
        first,
        call(&restarted, "list_documentation_files", json!({}))
    );
    assert_eq!(
        filenames(&serde_json::from_str(&first).expect("json")),
        pairs(&[("f1", "doc1.md"), ("f2", "doc2.md"), ("f3", "doc3.md")])
    );
    // The id names the same file for every tool, before and after a restart.
    for l in [&lib, &restarted] {
        let toc = call_json(l, "table_of_contents", json!({"fileId": "f2"}));
        assert_eq!(toc["filename"], "doc2.md");
        assert_eq!(toc["sections"][0]["title"], "Two");
    }
}

#[test]
fn ids_do_not_change_while_the_library_lives() {
    let fx = Fixture::new();
    fx.file("b.md", "# B\n");
    let lib = fx.library();
    fx.file("a.md", "# A\n");
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(filenames(&list), pairs(&[("f1", "b.md")]));
    // A restart numbers the new file in.
    let list = call_json(&fx.library(), "list_documentation_files", json!({}));
    assert_eq!(filenames(&list), pairs(&[("f1", "a.md"), ("f2", "b.md")]));
}

#[test]
fn a_missing_directory_gives_an_empty_list() {
    let fx = Fixture::new();
    let missing = path_string(&fx.path("does-not-exist"));
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(
        &["--docs-path", &missing],
        |_| None,
    ));
    assert_eq!(call(&lib, "list_documentation_files", json!({})), "[]");
    assert_eq!(
        call(&lib, "search", json!({"query": "anything"})),
        r#"{"query":"anything","results":[]}"#
    );
}

#[test]
fn files_sort_within_a_directory_as_icu_does() {
    let fx = Fixture::new();
    for name in [
        "user-guide.md",
        "README.md",
        "api-reference.md",
        "alpha.md",
        "a-b.md",
        "a_b.md",
        "B.md",
        "b.md",
        "guides/setup.md",
        "guide.md",
    ] {
        fx.file(name, "# x\n");
    }
    let list = call_json(&fx.library(), "list_documentation_files", json!({}));
    let names: Vec<String> = filenames(&list).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names,
        [
            "a_b.md",
            "a-b.md",
            "alpha.md",
            "api-reference.md",
            "b.md",
            "B.md",
            "guide.md",
            "guides/setup.md",
            "README.md",
            "user-guide.md",
        ]
    );
    // Titles fall back to the base name without directories.
    assert_eq!(list[7]["title"], "setup");
}

#[test]
fn same_named_files_in_two_directories_get_distinct_ids() {
    let fx = Fixture::new();
    fx.file("primary/README.md", "# Primary readme\n")
        .file("primary/config.md", "# Primary config\n")
        .file("secondary/README.md", "# Secondary readme\n")
        .file("secondary/config.md", "# Secondary config\n")
        .file("secondary/unique.md", "# Unique\n");
    let (primary, secondary) = (
        path_string(&fx.path("primary")),
        path_string(&fx.path("secondary")),
    );
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(
        &["-d", &primary, "-d", &secondary],
        |_| None,
    ));
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(
        filenames(&list),
        pairs(&[
            ("f1", "config.md"),
            ("f2", "README.md"),
            ("f3", "config.md"),
            ("f4", "README.md"),
            ("f5", "unique.md"),
        ])
    );
    assert_eq!(list[1]["sourceDirectory"], primary.as_str());
    assert_eq!(list[3]["sourceDirectory"], secondary.as_str());
    let title = |id: &str| {
        call_json(&lib, "table_of_contents", json!({"fileId": id}))["sections"][0]["title"].clone()
    };
    assert_eq!(title("f2"), "Primary readme");
    assert_eq!(title("f4"), "Secondary readme");
}

#[test]
fn empty_directories_and_environment_paths() {
    let fx = Fixture::new();
    fx.file("docs2/content.md", "# Content\n");
    std::fs::create_dir_all(fx.path("docs1")).expect("mkdir");
    let env_paths = format!(
        "{} , {}",
        path_string(&fx.path("docs1")),
        path_string(&fx.path("docs2"))
    );
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(&[] as &[&str], |name| {
        (name == "DOCS_PATH").then(|| env_paths.clone())
    }));
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(filenames(&list), pairs(&[("f1", "content.md")]));
}

#[test]
fn command_line_directories_replace_the_environments() {
    let fx = Fixture::new();
    fx.file("cli-docs1/cli-first.md", "# First\n")
        .file("cli-docs2/cli-second.md", "# Second\n")
        .file("env-docs/env-doc.md", "# Env\n");
    let env = path_string(&fx.path("env-docs"));
    let (one, two) = (
        path_string(&fx.path("cli-docs1")),
        path_string(&fx.path("cli-docs2")),
    );
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(
        &["--docs-path", &one, "--docs-path", &two],
        |name| (name == "DOCS_PATH").then(|| env.clone()),
    ));
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(
        filenames(&list),
        pairs(&[("f1", "cli-first.md"), ("f2", "cli-second.md")])
    );
}

#[test]
fn a_directory_configured_twice_is_listed_as_the_original_lists_it() {
    let fx = Fixture::new();
    fx.file("a.md", "# A\n").file("b.md", "# B\n");
    let root = fx.root();
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(
        &["-d", &root, "-d", &root],
        |_| None,
    ));
    let names: Vec<String> = filenames(&call_json(&lib, "list_documentation_files", json!({})))
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    // Both searches land in one group, which each of the two places then lists.
    assert_eq!(
        names,
        [
            "a.md", "a.md", "b.md", "b.md", "a.md", "a.md", "b.md", "b.md"
        ]
    );
}

#[test]
fn sizes_use_javascript_rounding() {
    let fx = Fixture::new();
    for (name, len) in [
        ("a0.md", 0usize),
        ("a1.md", 512),
        ("a2.md", 1024),
        ("a3.md", 1280),
        ("a4.md", 1536),
        ("a5.md", 1_048_576),
    ] {
        fx.file(name, &"x".repeat(len));
    }
    let list = call_json(&fx.library(), "list_documentation_files", json!({}));
    let sizes: Vec<&str> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|f| f["size"].as_str().expect("size"))
        .collect();
    assert_eq!(sizes, ["0b", "512b", "1.0kb", "1.3kb", "1.5kb", "1024.0kb"]);
}

#[test]
fn title_and_metadata_fallbacks() {
    let fx = Fixture::new();
    fx.file(
        "n1.md",
        "---\ntitle: 42\ndescription: false\nkeywords: a, b\n---\n",
    )
    .file("n2.md", "---\ntitle: 0\nkeywords: 0\n---\n")
    .file("n3.md", "---\ntitle: [x]\ndescription: null\n---\n")
    .file("n4.md", "---\ntitle: broken: yaml\n---\n# Body\n")
    .file("n5.md", "---\n# only a comment\n\n---\n# Body\n");
    let list = call_json(&fx.library(), "list_documentation_files", json!({}));
    let strip = |v: &Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().expect("object");
        for k in ["fileId", "size", "sourceDirectory"] {
            o.remove(k);
        }
        v
    };
    assert_eq!(
        strip(&list[0]),
        json!({"filename": "n1.md", "title": 42, "description": false, "keywords": "a, b"})
    );
    assert_eq!(strip(&list[1]), json!({"filename": "n2.md", "title": "n2"}));
    assert_eq!(
        strip(&list[2]),
        json!({"filename": "n3.md", "title": ["x"]})
    );
    assert_eq!(strip(&list[3]), json!({"filename": "n4.md", "title": "n4"}));
    assert_eq!(strip(&list[4]), json!({"filename": "n5.md", "title": "n5"}));
}
