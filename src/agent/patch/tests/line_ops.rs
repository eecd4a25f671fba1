//! Applying line operations: each operation, bottom-up order, line endings, range and content
//! checks, stale hashes, and all or nothing per batch.

use serde_json::{Value, json};

use super::super::{
    AppliedFile, ApplyError, Batch, BatchError, ConflictKind, Current, ErrorCode,
    WritePatchResponse, apply_batch, apply_file, parse_request, sha256_hex, validate,
};

/// A validated one-file batch of `changes` based on `text`.
fn batch_for(text: &str, changes: Vec<Value>) -> Batch {
    batch_of(&[("f.txt", text, changes)])
}

fn batch_of(files: &[(&str, &str, Vec<Value>)]) -> Batch {
    let files: Vec<Value> = files
        .iter()
        .map(|(path, text, changes)| {
            json!({"docPath": path, "originalSha256": sha256_hex(text.as_bytes()),
                   "changes": changes})
        })
        .collect();
    let request = parse_request(Some(&json!({ "files": files }))).unwrap();
    validate(request.as_ref()).unwrap()
}

/// Applies `changes` to `text` and returns the new text.
fn apply(text: &str, changes: Vec<Value>) -> String {
    let batch = batch_for(text, changes);
    apply_file(&batch.files[0], text).unwrap().text
}

/// Applies `changes` to `text` and returns the error.
fn refuse(text: &str, changes: Vec<Value>) -> ApplyError {
    let batch = batch_for(text, changes);
    apply_file(&batch.files[0], text).unwrap_err()
}

fn insert(after_line: i64, lines: &[&str]) -> Value {
    json!({"operation": "insert", "afterLine": after_line, "newLines": lines})
}

fn replace(start: i64, end: i64, expected: &[&str], lines: &[&str]) -> Value {
    json!({"operation": "replace", "startLine": start, "endLine": end,
           "expectedOriginalLines": expected, "newLines": lines})
}

fn delete(start: i64, end: i64, expected: &[&str]) -> Value {
    json!({"operation": "delete", "startLine": start, "endLine": end,
           "expectedOriginalLines": expected})
}

const ABC: &str = "a\nb\nc\n";

#[test]
fn insert_at_the_top_with_after_line_0() {
    assert_eq!(apply(ABC, vec![insert(0, &["x", "y"])]), "x\ny\na\nb\nc\n");
}

#[test]
fn insert_at_the_end_after_the_last_line() {
    assert_eq!(apply(ABC, vec![insert(3, &["x"])]), "a\nb\nc\nx\n");
    assert_eq!(apply("", vec![insert(0, &["x"])]), "x\n");
}

#[test]
fn replace_a_range_with_more_or_fewer_lines() {
    assert_eq!(
        apply(ABC, vec![replace(2, 2, &["b"], &["B1", "B2"])]),
        "a\nB1\nB2\nc\n"
    );
    assert_eq!(
        apply(ABC, vec![replace(1, 3, &["a", "b", "c"], &["all"])]),
        "all\n"
    );
}

#[test]
fn delete_a_range_or_everything() {
    assert_eq!(apply(ABC, vec![delete(2, 3, &["b", "c"])]), "a\n");
    assert_eq!(apply(ABC, vec![delete(1, 3, &["a", "b", "c"])]), "");
}

#[test]
fn several_changes_apply_bottom_up_in_the_original_numbering() {
    let text = "1\n2\n3\n4\n5\n6\n7\n8\n";
    let changes = vec![
        insert(0, &["top"]),
        replace(2, 3, &["2", "3"], &["two-three"]),
        delete(5, 5, &["5"]),
        insert(6, &["after six"]),
        replace(8, 8, &["8"], &["eight", "EIGHT"]),
    ];
    let batch = batch_for(text, changes);
    let applied = apply_file(&batch.files[0], text).unwrap();
    assert_eq!(
        applied.text,
        "top\n1\ntwo-three\n4\n6\nafter six\n7\neight\nEIGHT\n"
    );
    // 1 inserted + (2 removed + 1 written) + 1 removed + 1 inserted + (1 removed + 2 written).
    assert_eq!(applied.lines_changed, 9);
    assert_eq!(applied.sha256, sha256_hex(applied.text.as_bytes()));
}

#[test]
fn a_crlf_file_stays_crlf() {
    let text = "a\r\nb\r\nc\r\n";
    assert_eq!(
        apply(
            text,
            vec![insert(0, &["top"]), replace(2, 2, &["b"], &["B", "B2"])]
        ),
        "top\r\na\r\nB\r\nB2\r\nc\r\n"
    );
    assert_eq!(
        apply(text, vec![insert(3, &["end"])]),
        "a\r\nb\r\nc\r\nend\r\n"
    );
    // Mixed endings count as LF for new lines; existing lines keep theirs.
    assert_eq!(
        apply("a\r\nb\nc\r\n", vec![insert(1, &["x"])]),
        "a\r\nx\nb\nc\r\n"
    );
}

#[test]
fn a_file_without_a_final_newline_keeps_not_having_one() {
    let text = "a\nb\nc";
    assert_eq!(apply(text, vec![insert(3, &["d"])]), "a\nb\nc\nd");
    assert_eq!(
        apply(text, vec![replace(3, 3, &["c"], &["C1", "C2"])]),
        "a\nb\nC1\nC2"
    );
    assert_eq!(apply(text, vec![delete(3, 3, &["c"])]), "a\nb");
    assert_eq!(apply(text, vec![insert(0, &["top"])]), "top\na\nb\nc");
    assert_eq!(apply("a\r\nb", vec![insert(2, &["c"])]), "a\r\nb\r\nc");
    assert_eq!(apply("one", vec![insert(1, &["two"])]), "one\ntwo");
    // An empty last line keeps a newline, or it would be no line at all.
    assert_eq!(apply(text, vec![replace(3, 3, &["c"], &[""])]), "a\nb\n\n");
}

#[test]
fn a_range_past_the_end_is_a_clear_error() {
    let error = refuse(ABC, vec![replace(3, 4, &["c", "d"], &["x"])]);
    assert_eq!(error.code(), ErrorCode::ValidationFailed);
    assert_eq!(
        error.to_string(),
        "REPLACE or DELETE changes for file 'f.txt' must specify lines within the file: change 1 \
         (REPLACE lines 3-4) is past its end (the file has 3 lines)."
    );
    let error = refuse(ABC, vec![insert(4, &["x"])]);
    assert_eq!(
        error.to_string(),
        "INSERT changes for file 'f.txt' must specify an afterLine within the file: change 1 \
         (INSERT after line 4) is past its end (the file has 3 lines)."
    );
    assert!(error.conflict(ABC, None).is_none());
    let huge = refuse(ABC, vec![insert(i64::MAX, &["x"])]);
    assert!(matches!(huge, ApplyError::Invalid { .. }));
    assert!(matches!(
        refuse(
            "",
            vec![json!({"operation": "delete", "startLine": 1, "endLine": 1})]
        ),
        ApplyError::Invalid { .. }
    ));
}

#[test]
fn expected_original_lines_must_match_exactly() {
    let text = "fn a() {\n    one();\n    two();\n}\n";
    let changes = vec![replace(
        2,
        3,
        &["    one();", "    too();"],
        &["    three();"],
    )];
    let error = refuse(text, changes);
    assert_eq!(error.code(), ErrorCode::Conflict);
    assert_eq!(
        error.to_string(),
        "File 'f.txt' does not hold the expectedOriginalLines of change 1 (REPLACE lines 2-3): \
         line 3: expected \"    too();\", found \"    two();\"."
    );
    let conflict = error.conflict(text, None).unwrap();
    assert_eq!(conflict.kind, ConflictKind::PatchMismatch);
    assert_eq!(conflict.current_sha256, sha256_hex(text.as_bytes()));
    let mismatch = conflict.mismatch.unwrap();
    assert_eq!(mismatch.line, 3);
    assert_eq!(mismatch.expected.as_deref(), Some("    too();"));
    assert_eq!(mismatch.actual.as_deref(), Some("    two();"));
    assert!(
        conflict.diff.contains("-    too();\n+    two();\n"),
        "{}",
        conflict.diff
    );
    // Whitespace counts; line endings are not part of a line.
    assert!(matches!(
        refuse(ABC, vec![delete(1, 1, &["a "])]),
        ApplyError::Mismatch(_)
    ));
    assert_eq!(apply("a\r\nb\r\n", vec![delete(1, 1, &["a"])]), "b\r\n");
    // The first failing change wins, top to bottom.
    let error = refuse(
        ABC,
        vec![delete(1, 1, &["x"]), replace(5, 5, &["y"], &["z"])],
    );
    assert!(
        error.to_string().contains("line 1: expected \"x\""),
        "{error}"
    );
}

#[test]
fn a_stale_hash_is_a_stale_buffer_conflict() {
    let batch = batch_for(ABC, vec![insert(0, &["x"])]);
    let now = "a\nB\nc\n";
    let error = apply_file(&batch.files[0], now).unwrap_err();
    assert_eq!(error.code(), ErrorCode::Conflict);
    assert!(matches!(error, ApplyError::Stale { .. }));
    assert!(
        error.to_string().contains(&format!(
            "the file's SHA-256 is now {}",
            sha256_hex(now.as_bytes())
        )),
        "{error}"
    );
    let conflict = error.conflict(now, Some(ABC)).unwrap();
    assert_eq!(conflict.kind, ConflictKind::StaleBuffer);
    assert_eq!(conflict.current_sha256, sha256_hex(now.as_bytes()));
    assert!(conflict.diff.contains("-b\n+B\n"), "{}", conflict.diff);
    assert!(
        conflict
            .diff
            .starts_with("--- f.txt (seen)\n+++ f.txt (current)\n")
    );
    // Only the line endings changed: still stale, the hash is of the bytes.
    assert!(matches!(
        apply_file(&batch.files[0], "a\r\nb\r\nc\r\n"),
        Err(ApplyError::Stale { .. })
    ));
}

#[test]
fn a_batch_is_all_or_nothing() {
    let (a, b) = ("a\n", "b\n");
    let batch = batch_of(&[
        ("a.txt", a, vec![insert(1, &["a2"])]),
        ("b.txt", b, vec![delete(1, 1, &["not b"])]),
    ]);
    let error = apply_texts(&batch, &[a, b]).unwrap_err();
    assert_eq!(error.file, 1);
    assert_eq!(error.error.doc_path(), "b.txt");
    assert!(matches!(error.error, ApplyError::Mismatch(_)));

    let batch = batch_of(&[
        ("a.txt", a, vec![insert(1, &["a2"])]),
        ("b.txt", b, vec![delete(1, 1, &["b"])]),
    ]);
    let written = apply_texts(&batch, &[a, b]).unwrap();
    assert_eq!(
        written,
        vec![
            AppliedFile {
                text: "a\na2\n".into(),
                sha256: sha256_hex(b"a\na2\n"),
                lines_changed: 1
            },
            AppliedFile {
                text: String::new(),
                sha256: sha256_hex(b""),
                lines_changed: 1
            },
        ]
    );
    let missing = apply_texts(&batch, &[a]).unwrap_err();
    assert_eq!(missing.error.code(), ErrorCode::UnexpectedError);
    assert_eq!(missing.file, 1);
}

#[test]
fn the_response_carries_the_new_hashes_or_the_conflict() {
    let args = json!({"batchKey": "k", "files": [{"docPath": "f.txt",
        "originalSha256": sha256_hex(ABC.as_bytes()), "changes": [insert(0, &["x"])]}]});
    let request = parse_request(Some(&args)).unwrap().unwrap();
    let batch = validate(Some(&request)).unwrap();
    let written = apply_texts(&batch, &[ABC]).unwrap();
    let json = serde_json::to_value(WritePatchResponse::applied(&request, &written)).unwrap();
    assert_eq!(json["success"], true);
    assert_eq!(json["errorCode"], Value::Null);
    assert_eq!(json["batchKey"], "k");
    assert_eq!(json["files"][0]["newSha256"], sha256_hex(b"x\na\nb\nc\n"));
    assert_eq!(json["files"][0]["linesChanged"], 1);

    let error = apply_texts(&batch, &["changed\n"]).unwrap_err();
    let conflict = error.error.conflict("changed\n", Some(ABC)).unwrap();
    let response = WritePatchResponse::conflict(&request, error.to_string(), conflict);
    let json = serde_json::to_value(&response).unwrap();
    assert_eq!(json["success"], false);
    assert_eq!(json["errorCode"], "CONFLICT");
    assert_eq!(json["conflict"]["kind"], "stale_buffer");
    assert_eq!(json["conflict"]["current_sha256"], sha256_hex(b"changed\n"));
    assert!(json["files"][0].get("newSha256").is_none());
}

/// [`apply_batch`] over `texts`, hashed here as a read would hash them.
fn apply_texts(batch: &Batch, texts: &[&str]) -> Result<Vec<AppliedFile>, BatchError> {
    let hashes: Vec<String> = texts.iter().map(|t| sha256_hex(t.as_bytes())).collect();
    let current: Vec<Current<'_>> = texts
        .iter()
        .zip(&hashes)
        .map(|(text, sha256)| Current { text, sha256 })
        .collect();
    apply_batch(batch, &current)
}
