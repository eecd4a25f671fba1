//! Tool listing, argument checking and the same errors from every tool (ToolIntegration,
//! CLIConfiguration and ConfigurationIntegration suites).

use serde_json::{Value, json};

use super::super::{DocsConfig, DocsLibrary, TOOL_NAMES, server_info, tool_definitions};
use super::{Fixture, call, call_json};

const FILE_TOOLS: [&str; 4] = [
    "table_of_contents",
    "read_sections",
    "section_table_of_contents",
    "search",
];

/// Arguments for `tool` naming `file_id`, with whatever else the tool needs.
fn args_for(tool: &str, file_id: &str) -> Value {
    match tool {
        "search" => json!({"query": "x", "fileId": file_id}),
        "table_of_contents" => json!({"fileId": file_id}),
        _ => json!({"fileId": file_id, "section_ids": ["1"]}),
    }
}

/// A one-file library; keep the fixture alive while using it.
fn library() -> (Fixture, DocsLibrary) {
    let fx = Fixture::new();
    fx.file("test.md", "# Test\n## Part\n");
    let lib = fx.library();
    (fx, lib)
}

#[test]
fn exactly_five_tools_with_their_names_and_schemas() {
    let tools = tool_definitions();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "list_documentation_files",
            "table_of_contents",
            "read_sections",
            "section_table_of_contents",
            "search"
        ]
    );
    assert_eq!(names, TOOL_NAMES);
    for tool in &tools {
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
    assert_eq!(
        tools[0]["inputSchema"],
        json!({"type": "object", "properties": {}, "required": []})
    );
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["fileId"]));
    assert_eq!(
        tools[2]["inputSchema"]["required"],
        json!(["fileId", "section_ids"])
    );
    assert_eq!(
        tools[3]["inputSchema"]["properties"]["section_ids"]["minItems"],
        1
    );
    assert_eq!(tools[4]["inputSchema"]["required"], json!(["query"]));
    assert!(
        tools[1]["description"]
            .as_str()
            .is_some_and(|d| d.ends_with("(default: 3 for ### headers)."))
    );
    assert_eq!(
        server_info(),
        json!({"name": "documentation-server", "version": "1.0.0"})
    );
}

#[test]
fn malformed_file_ids_give_invalid_file_id_from_every_tool() {
    let (_fx, lib) = library();
    for id in ["invalid", "f", "f-1", "file1", "f0", "F1", "f1.5"] {
        let expected = format!(
            "The file ID '{id}' is invalid. File IDs must be in the format 'f' followed by a number (e.g., 'f1', 'f2'). Use the list_documentation_files tool to see all valid file IDs."
        );
        for tool in FILE_TOOLS {
            assert_eq!(
                call(&lib, tool, args_for(tool, id)),
                expected,
                "{tool} {id}"
            );
        }
    }
}

#[test]
fn unknown_well_formed_ids_give_file_id_not_found_from_every_tool() {
    let (_fx, lib) = library();
    for id in ["f2", "f999", "f01"] {
        let expected = format!(
            "The file ID '{id}' was not found. Use the list_documentation_files tool to see all available files and their IDs."
        );
        for tool in FILE_TOOLS {
            assert_eq!(
                call(&lib, tool, args_for(tool, id)),
                expected,
                "{tool} {id}"
            );
        }
    }
}

#[test]
fn missing_section_ids_give_the_same_text_from_both_tools() {
    let (_fx, lib) = library();
    for tool in ["read_sections", "section_table_of_contents"] {
        let text = call(
            &lib,
            tool,
            json!({"fileId": "f1", "section_ids": ["999/999/999"]}),
        );
        assert_eq!(
            text,
            "The sections [999/999/999] were not found in 'test.md'. Use the table_of_contents tool to see all available section IDs in this file."
        );
    }
}

#[test]
fn missing_and_mistyped_arguments() {
    let (_fx, lib) = library();
    let file_id_required = "The fileId parameter is required. Use the list_documentation_files tool to see available files and their IDs.";
    let section_ids_required = "The section_ids parameter must be an array of section identifiers. Use the table_of_contents tool first to get valid section IDs.";
    for tool in [
        "table_of_contents",
        "read_sections",
        "section_table_of_contents",
    ] {
        assert_eq!(call(&lib, tool, json!({})), file_id_required, "{tool}");
        assert_eq!(
            call(&lib, tool, json!({"fileId": "  "})),
            file_id_required,
            "{tool}"
        );
        assert_eq!(
            call(&lib, tool, json!({"fileId": 1})),
            file_id_required,
            "{tool}"
        );
        assert_eq!(call(&lib, tool, Value::Null), file_id_required, "{tool}");
    }
    for tool in ["read_sections", "section_table_of_contents"] {
        for ids in [json!(null), json!("1"), json!([1]), json!(["1", 2])] {
            let args = json!({"fileId": "f1", "section_ids": ids});
            assert_eq!(call(&lib, tool, args), section_ids_required, "{tool}");
        }
        assert_eq!(
            call(&lib, tool, json!({"fileId": "f1"})),
            section_ids_required
        );
        // The file id is checked first.
        assert!(
            call(&lib, tool, json!({"fileId": "bad"})).starts_with("The file ID 'bad' is invalid.")
        );
    }
    assert_eq!(
        call(
            &lib,
            "section_table_of_contents",
            json!({"fileId": "f1", "section_ids": []})
        ),
        section_ids_required
    );
    // An empty list is a valid read, even of an unknown section set.
    assert!(
        call(
            &lib,
            "read_sections",
            json!({"fileId": "f1", "section_ids": []})
        )
        .ends_with("\"sections\":[]}")
    );
    // list_documentation_files takes no arguments and ignores any.
    assert_eq!(
        call(&lib, "list_documentation_files", json!({"fileId": 3})),
        call(&lib, "list_documentation_files", Value::Null)
    );
}

#[test]
fn unknown_tools() {
    let (_fx, lib) = library();
    assert_eq!(
        call(&lib, "read_file", json!({})),
        "The tool 'read_file' is not recognized. Use the tools/list command to see all available tools."
    );
}

#[test]
fn a_complete_discovery_workflow() {
    let fx = Fixture::new();
    fx.file(
        "api-docs.md",
        "---\ntitle: API Docs\n---\n# API\n## Authentication\nUse tokens.\n## Endpoints\n### GET /users\nList users.\n",
    );
    let lib = fx.library_with(&["--max-toc-depth", "2"]);
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(list[0]["title"], "API Docs");
    let file_id = list[0]["fileId"].as_str().expect("fileId").to_owned();
    let toc = call_json(&lib, "table_of_contents", json!({"fileId": file_id}));
    assert_eq!(toc["sections"][2]["title"], "Endpoints");
    assert_eq!(toc["sections"][2]["subsection_count"], 1);
    let sub = call_json(
        &lib,
        "section_table_of_contents",
        json!({"fileId": file_id, "section_ids": ["1/2"]}),
    );
    assert_eq!(sub["sections"][0]["title"], "GET /users");
    let read = call_json(
        &lib,
        "read_sections",
        json!({"fileId": file_id, "section_ids": [sub["sections"][0]["id"]]}),
    );
    assert_eq!(
        read["sections"][0]["content"],
        "### GET /users\nList users.\n"
    );
    let found = call_json(&lib, "search", json!({"query": "users", "fileId": file_id}));
    assert_eq!(found["results"][0]["matches"][0]["id"], "1/2/1");
}

#[test]
fn configuration_from_the_command_line_and_environment_drives_the_tools() {
    let fx = Fixture::new();
    fx.file("cli/simple.md", "# CLI\n## Two\n### Three\n")
        .file("env/other.md", "# ENV\n");
    let cli = fx.path("cli").to_string_lossy().into_owned();
    let env_path = fx.path("env").to_string_lossy().into_owned();
    let env = |name: &str| match name {
        "DOCS_PATH" => Some(env_path.clone()),
        "MAX_TOC_DEPTH" => Some("1".to_owned()),
        _ => None,
    };
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(&["--docs-path", &cli], env));
    let list = call_json(&lib, "list_documentation_files", json!({}));
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["filename"], "simple.md");
    let toc = call_json(&lib, "table_of_contents", json!({"fileId": "f1"}));
    assert_eq!(toc["sections"].as_array().map(Vec::len), Some(1));
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(
        &["--docs-path", &cli, "--max-toc-depth", "not-a-number"],
        env,
    ));
    assert_eq!(lib.config().max_toc_depth, 1);
    let lib = DocsLibrary::open(DocsConfig::from_args_and_env(&[] as &[&str], env));
    assert_eq!(
        call_json(&lib, "list_documentation_files", json!({}))[0]["filename"],
        "other.md"
    );
}
