//! The validator: the original's NUnit cases, one test per message, first failure wins, and the
//! order and overlap checks it forgot.

use serde_json::{Value, json};

use super::super::{
    Batch, ErrorCode, Failure, FileEdit, LineChange, LineOp, WritePatchRequest, WritePatchResponse,
    parse_request, validate,
};

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Reads and validates `args` as the engine does.
fn check(args: &Value) -> Result<Batch, Failure> {
    let request = parse_request(Some(args))?;
    validate(request.as_ref())
}

/// The validation message for `args`; panics if it passes.
fn message(args: &Value) -> String {
    let failure = check(args).expect_err("validation should fail");
    assert_eq!(failure.error_code, ErrorCode::ValidationFailed, "{failure}");
    failure.error_message
}

fn insert(after_line: i64, lines: &[&str]) -> Value {
    json!({"operation": "insert", "afterLine": after_line, "newLines": lines})
}

fn replace(start: i64, end: i64, lines: &[&str]) -> Value {
    json!({"operation": "replace", "startLine": start, "endLine": end, "newLines": lines})
}

fn delete(start: i64, end: i64) -> Value {
    json!({"operation": "delete", "startLine": start, "endLine": end})
}

fn file(doc_path: &str, changes: Vec<Value>) -> Value {
    json!({"docPath": doc_path, "originalSha256": SHA, "changes": changes})
}

fn batch(files: Vec<Value>) -> Value {
    json!({"files": files})
}

fn one_change(change: Value) -> Value {
    batch(vec![file("src/a.cs", vec![change])])
}

// The original's NUnit tests (WorkspaceWritePatchValidatorTests and the batch factory's).

#[test]
fn validate_returns_error_when_args_null() {
    assert_eq!(message(&Value::Null), "Arguments payload was null.");
    assert_eq!(
        validate(None).unwrap_err().error_message,
        "Arguments payload was null."
    );
}

#[test]
fn validate_returns_error_when_no_files() {
    let expected = "At least one file patch must be provided in files[].";
    assert_eq!(message(&json!({})), expected);
    assert_eq!(message(&json!({"files": null})), expected);
    assert_eq!(message(&json!({"files": []})), expected);
}

#[test]
fn validate_returns_error_on_duplicate_doc_paths() {
    let args = batch(vec![
        file("src/A.cs", vec![insert(0, &["x"])]),
        file("src/b.cs", vec![insert(0, &["x"])]),
        file(" src/a.cs ", vec![insert(0, &["x"])]),
        file("src/b.cs", vec![insert(0, &["x"])]),
        file("src/a.cs", vec![insert(0, &["x"])]),
    ]);
    assert_eq!(
        message(&args),
        "Each docPath may appear at most once per batch. Duplicates: src/a.cs, src/b.cs"
    );
}

#[test]
fn validate_succeeds_for_minimal_valid_insert_change() {
    let batch = check(&one_change(insert(0, &["using System;"]))).unwrap();
    assert_eq!(
        batch,
        Batch {
            files: vec![FileEdit {
                doc_path: "src/a.cs".into(),
                original_sha256: SHA.into(),
                changes: vec![LineChange {
                    number: 1,
                    key: None,
                    op: LineOp::Insert {
                        after_line: 0,
                        new_lines: vec!["using System;".into()],
                    },
                }],
            }],
        }
    );
}

#[test]
fn validate_returns_error_for_replace_missing_new_lines() {
    let expected = "REPLACE changes for file 'src/a.cs' must include at least one new line in \
                    newLines.";
    assert_eq!(message(&one_change(replace(1, 2, &[]))), expected);
    let no_field = json!({"operation": "replace", "startLine": 1, "endLine": 2});
    assert_eq!(message(&one_change(no_field)), expected);
}

#[test]
fn validate_returns_error_when_delete_has_invalid_line_range() {
    let expected = "REPLACE or DELETE changes for file 'src/a.cs' must specify valid startLine and \
                    endLine (1-based, start <= end).";
    assert_eq!(message(&one_change(delete(5, 4))), expected);
    assert_eq!(message(&one_change(delete(0, 4))), expected);
    assert_eq!(message(&one_change(delete(-1, 4))), expected);
    let no_end = json!({"operation": "delete", "startLine": 3});
    assert_eq!(message(&one_change(no_end)), expected);
}

#[test]
fn build_batch_maps_fields() {
    // The original's BuildBatch_AssignsIds_AndMapsFields, less the GUIDs strata does not make.
    let args = json!({
        "batchLabel": "Rename", "batchKey": "b1",
        "files": [{
            "fileKey": "f1", "docPath": "src/a.cs", "originalSha256": SHA.to_uppercase(),
            "fileLabel": "A",
            "changes": [
                {"changeKey": "c1", "operation": " Replace ", "description": "rename",
                 "startLine": 2, "endLine": 3, "expectedOriginalLines": ["old2", "old3"],
                 "newLines": ["new2"]},
                {"changeKey": "c2", "operation": "DELETE", "startLine": 5, "endLine": 5},
            ]
        }]
    });
    let batch = check(&args).unwrap();
    let file = &batch.files[0];
    assert_eq!(file.original_sha256, SHA, "trimmed and lowercased");
    assert_eq!(
        file.changes,
        vec![
            LineChange {
                number: 1,
                key: Some("c1".into()),
                op: LineOp::Replace {
                    start_line: 2,
                    end_line: 3,
                    expected: Some(vec!["old2".into(), "old3".into()]),
                    new_lines: vec!["new2".into()],
                },
            },
            LineChange {
                number: 2,
                key: Some("c2".into()),
                op: LineOp::Delete {
                    start_line: 5,
                    end_line: 5,
                    expected: None,
                },
            },
        ]
    );
}

#[test]
fn build_response_maps_labels_and_changes() {
    // The original's BuildResponse_MapsIds_Labels_AndChanges: the response echoes every field.
    let args = json!({
        "batchLabel": "Rename", "batchKey": "b1",
        "files": [{"fileKey": "f1", "docPath": "src/a.cs", "originalSha256": SHA,
                   "fileLabel": "A", "changes": [
                       {"changeKey": "c1", "operation": "insert", "description": "header",
                        "afterLine": 0, "newLines": ["// header"]}]}]
    });
    let request: WritePatchRequest = parse_request(Some(&args)).unwrap().unwrap();
    let failed = WritePatchResponse::failed(
        Some(&request),
        Failure::new(ErrorCode::StoreError, "disk full"),
    );
    let json = serde_json::to_value(&failed).unwrap();
    assert_eq!(json["success"], false);
    assert_eq!(json["errorCode"], "STORE_ERROR");
    assert_eq!(json["errorMessage"], "disk full");
    assert_eq!(json["batchLabel"], "Rename");
    assert_eq!(json["batchKey"], "b1");
    let file = &json["files"][0];
    assert_eq!(file["fileKey"], "f1");
    assert_eq!(file["fileLabel"], "A");
    assert_eq!(file["docPath"], "src/a.cs");
    assert_eq!(file["originalSha256"], SHA);
    assert_eq!(file["changes"][0]["changeKey"], "c1");
    assert_eq!(file["changes"][0]["description"], "header");
    assert_eq!(file["changes"][0]["afterLine"], 0);
    assert_eq!(file["changes"][0]["newLines"], json!(["// header"]));
    assert!(file.get("newSha256").is_none());

    let none = serde_json::to_value(WritePatchResponse::failed(
        None,
        Failure::validation("Arguments payload was null."),
    ))
    .unwrap();
    assert_eq!(none["files"], json!([]));
    assert!(none.get("batchLabel").is_none());
}

// One test per remaining message of the original.

#[test]
fn every_file_needs_a_doc_path() {
    let expected = "Each file patch must include a non-empty docPath.";
    let no_path = json!({"originalSha256": SHA, "changes": [insert(0, &["x"])]});
    assert_eq!(message(&batch(vec![no_path])), expected);
    assert_eq!(
        message(&batch(vec![file("  ", vec![insert(0, &["x"])])])),
        expected
    );
}

#[test]
fn every_file_needs_an_original_sha256() {
    let expected = "File 'src/a.cs' is missing originalSha256.";
    let no_sha = json!({"docPath": "src/a.cs", "changes": [insert(0, &["x"])]});
    assert_eq!(message(&batch(vec![no_sha])), expected);
    let blank = json!({"docPath": "src/a.cs", "originalSha256": " ", "changes": []});
    assert_eq!(message(&batch(vec![blank])), expected);
}

#[test]
fn the_original_sha256_must_be_64_hex_characters() {
    let expected = "File 'src/a.cs' originalSha256 must be a 64-character SHA256 hex string.";
    for sha in [&SHA[..63], "abc", &format!("{}g", &SHA[..63])] {
        let args = json!({"docPath": "src/a.cs", "originalSha256": sha,
                          "changes": [insert(0, &["x"])]});
        assert_eq!(message(&batch(vec![args])), expected, "{sha}");
    }
}

#[test]
fn every_file_needs_a_change() {
    let expected = "File 'src/a.cs' must contain at least one change.";
    assert_eq!(message(&batch(vec![file("src/a.cs", vec![])])), expected);
    let no_changes = json!({"docPath": "src/a.cs", "originalSha256": SHA});
    assert_eq!(message(&batch(vec![no_changes])), expected);
}

#[test]
fn every_change_needs_an_operation() {
    let expected = "File 'src/a.cs' has a change with missing operation.";
    assert_eq!(message(&one_change(json!({"afterLine": 0}))), expected);
    assert_eq!(message(&one_change(json!({"operation": " "}))), expected);
}

#[test]
fn unknown_operations_are_named_trimmed_and_lowercased() {
    assert_eq!(
        message(&one_change(json!({"operation": " Append "}))),
        "File 'src/a.cs' has a change with unsupported operation 'append'."
    );
}

#[test]
fn an_insert_needs_a_non_negative_after_line() {
    let expected = "INSERT changes for file 'src/a.cs' must specify a non-negative afterLine (0 \
                    for top-of-file).";
    assert_eq!(message(&one_change(insert(-1, &["x"]))), expected);
    let missing = json!({"operation": "insert", "newLines": ["x"]});
    assert_eq!(message(&one_change(missing)), expected);
}

#[test]
fn an_insert_needs_new_lines() {
    let expected = "INSERT changes for file 'src/a.cs' must include at least one new line in \
                    newLines.";
    assert_eq!(message(&one_change(insert(3, &[]))), expected);
    let missing = json!({"operation": "insert", "afterLine": 3});
    assert_eq!(message(&one_change(missing)), expected);
}

#[test]
fn a_replace_needs_a_valid_range() {
    let expected = "REPLACE or DELETE changes for file 'src/a.cs' must specify valid startLine and \
                    endLine (1-based, start <= end).";
    assert_eq!(message(&one_change(replace(3, 2, &["x"]))), expected);
    let missing = json!({"operation": "replace", "endLine": 2, "newLines": ["x"]});
    assert_eq!(message(&one_change(missing)), expected);
}

#[test]
fn delete_ignores_new_lines_and_a_missing_expected_original_lines_passes() {
    // As the original: `newLines` on a delete is not checked; `expectedOriginalLines` is optional.
    let args = one_change(json!({"operation": "delete", "startLine": 1, "endLine": 1,
                                 "newLines": ["ignored"]}));
    assert!(check(&args).is_ok());
}

// Reading the arguments.

#[test]
fn reading_the_arguments_reports_missing_and_mistyped_ones() {
    let missing = parse_request(None).unwrap_err();
    assert_eq!(missing.error_code, ErrorCode::MissingArguments);
    let not_object = parse_request(Some(&json!([1]))).unwrap_err();
    assert_eq!(not_object.error_code, ErrorCode::DeserializationError);
    let mistyped = parse_request(Some(&one_change(json!({"operation": "insert",
                                                         "afterLine": "3"}))))
    .unwrap_err();
    assert_eq!(mistyped.error_code, ErrorCode::DeserializationError);
    assert!(
        mistyped
            .error_message
            .contains("invalid type: string \"3\""),
        "{mistyped}"
    );
    // Unknown fields are ignored, nulls are missing values.
    let lenient = json!({"files": [{"docPath": "a", "originalSha256": SHA, "extra": 1,
                                    "fileLabel": null, "changes": [insert(0, &["x"])]}]});
    assert!(check(&lenient).is_ok());
}

// First failure wins.

#[test]
fn the_first_failure_wins_in_the_originals_order() {
    // Duplicates are found before a later file's missing docPath or sha.
    let args = batch(vec![
        file("a", vec![insert(0, &["x"])]),
        json!({"docPath": "b"}),
        file("A", vec![insert(0, &["x"])]),
    ]);
    assert_eq!(
        message(&args),
        "Each docPath may appear at most once per batch. Duplicates: a"
    );
    // Within a file: docPath, then sha, then changes.
    assert_eq!(
        message(&batch(vec![json!({"docPath": "a", "originalSha256": "x"})])),
        "File 'a' originalSha256 must be a 64-character SHA256 hex string."
    );
    // Files in order: the first file's failure hides the second's.
    let args = batch(vec![
        file("a", vec![insert(-1, &["x"])]),
        json!({"docPath": "b"}),
    ]);
    assert!(message(&args).starts_with("INSERT changes for file 'a'"));
    // Changes in order; within a change, the range before newLines.
    let args = one_change(json!({"operation": "replace", "startLine": 0}));
    assert!(message(&args).starts_with("REPLACE or DELETE"));
    let args = batch(vec![file(
        "a",
        vec![replace(1, 1, &[]), json!({"operation": "move"})],
    )]);
    assert!(message(&args).starts_with("REPLACE changes for file 'a'"));
}

#[test]
fn the_added_checks_run_only_after_the_originals_pass() {
    // File 'a' overlaps, file 'b' lacks a sha: the original's message for 'b' wins.
    let args = batch(vec![
        file("a", vec![delete(1, 3), delete(2, 2)]),
        json!({"docPath": "b", "changes": [insert(0, &["x"])]}),
    ]);
    assert_eq!(message(&args), "File 'b' is missing originalSha256.");
    // A line break in newLines, then a later change's unsupported operation: the original wins.
    let args = one_change(insert(0, &["a\nb"]));
    let args = batch(vec![
        args["files"][0].clone(),
        file("b", vec![json!({"operation": "move"})]),
    ]);
    assert_eq!(
        message(&args),
        "File 'b' has a change with unsupported operation 'move'."
    );
}

// The added checks: line breaks, expectedOriginalLines length, order, overlap.

#[test]
fn new_lines_entries_must_not_hold_line_breaks() {
    assert_eq!(
        message(&one_change(insert(0, &["a", "b\r\nc"]))),
        "INSERT changes for file 'src/a.cs' must give one line per newLines entry, without line \
         breaks: change 1 (INSERT after line 0) has one in entry 2."
    );
    let change = json!({"changeKey": "k", "operation": "replace", "startLine": 2, "endLine": 2,
                        "newLines": ["x\r"]});
    assert_eq!(
        message(&one_change(change)),
        "REPLACE changes for file 'src/a.cs' must give one line per newLines entry, without line \
         breaks: change 1 'k' (REPLACE line 2) has one in entry 1."
    );
}

#[test]
fn expected_original_lines_must_cover_the_range() {
    let change = json!({"operation": "delete", "startLine": 2, "endLine": 4,
                        "expectedOriginalLines": ["a", "b"]});
    assert_eq!(
        message(&one_change(change)),
        "REPLACE or DELETE changes for file 'src/a.cs' must give one expectedOriginalLines entry \
         per line of the range: change 1 (DELETE lines 2-4) gives 2."
    );
}

/// The message for one file's `changes`, or `None` when they pass.
fn order(changes: Vec<Value>) -> Option<String> {
    check(&batch(vec![file("f", changes)]))
        .err()
        .map(|f| f.error_message)
}

#[test]
fn changes_out_of_order_are_refused() {
    assert_eq!(
        order(vec![insert(8, &["x"]), replace(3, 4, &["y"])]).as_deref(),
        Some(
            "Changes for file 'f' must be ordered top to bottom: change 2 (REPLACE lines 3-4) \
             comes after change 1 (INSERT after line 8)."
        )
    );
    assert!(
        order(vec![delete(5, 5), delete(4, 4)])
            .unwrap()
            .contains("change 2 (DELETE line 4) comes after change 1 (DELETE line 5)")
    );
    assert!(
        order(vec![insert(3, &["x"]), insert(2, &["y"])])
            .unwrap()
            .contains("must be ordered")
    );
    // An insert just above a range, listed after it.
    assert!(
        order(vec![replace(3, 5, &["x"]), insert(2, &["y"])])
            .unwrap()
            .contains("must be ordered")
    );
}

#[test]
fn overlapping_changes_are_refused() {
    let keyed = |mut change: Value, key: &str| {
        change["changeKey"] = json!(key);
        change
    };
    // Two ranges sharing a line.
    assert_eq!(
        order(vec![
            keyed(replace(3, 5, &["x"]), "first"),
            keyed(delete(5, 6), "second")
        ])
        .as_deref(),
        Some(
            "Changes for file 'f' must not overlap: change 2 'second' (DELETE lines 5-6) \
             overlaps change 1 'first' (REPLACE lines 3-5)."
        )
    );
    // A range inside another, listed after it (overlap wins over order).
    assert!(
        order(vec![delete(2, 8), delete(3, 4)])
            .unwrap()
            .contains("must not overlap")
    );
    // An insert inside a replaced or deleted range, its anchor being the range's first or last
    // line, or the range listed after the insert.
    for changes in [
        vec![replace(3, 5, &["x"]), insert(4, &["y"])],
        vec![replace(3, 5, &["x"]), insert(5, &["y"])],
        vec![delete(3, 5), insert(3, &["y"])],
        vec![insert(3, &["y"]), delete(3, 5)],
        vec![insert(4, &["y"]), replace(3, 5, &["x"])],
    ] {
        let text = order(changes.clone()).unwrap_or_default();
        assert!(text.contains("must not overlap"), "{changes:?}: {text}");
    }
    // Two inserts after the same line.
    assert_eq!(
        order(vec![insert(2, &["x"]), insert(2, &["y"])]).as_deref(),
        Some(
            "Changes for file 'f' must not overlap: change 2 (INSERT after line 2) overlaps \
             change 1 (INSERT after line 2)."
        )
    );
}

#[test]
fn ordered_disjoint_changes_pass() {
    for changes in [
        vec![replace(1, 2, &["x"]), delete(3, 4)],
        vec![insert(0, &["x"]), replace(1, 1, &["y"])],
        vec![insert(2, &["x"]), replace(3, 5, &["y"])],
        vec![replace(3, 5, &["y"]), insert(6, &["x"])],
        vec![
            insert(2, &["x"]),
            insert(3, &["y"]),
            delete(4, 4),
            insert(5, &["z"]),
        ],
    ] {
        assert_eq!(order(changes.clone()), None, "{changes:?}");
    }
}

#[test]
fn order_is_checked_per_file() {
    let args = batch(vec![
        file("a", vec![delete(5, 5)]),
        file("b", vec![delete(1, 1)]),
    ]);
    assert!(check(&args).is_ok());
}
