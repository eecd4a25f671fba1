//! Unified diffs: parsing, exact application, line endings, and malformed patches.

use super::super::{
    ConflictKind, ErrorCode, LineKind, UnifiedError, apply_unified, parse_unified, sha256_hex,
};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

/// The malformed-patch message for `patch`.
fn malformed(patch: &str) -> String {
    match apply_unified(TEN, patch) {
        Err(UnifiedError::Malformed(e)) => e.to_string(),
        other => panic!("expected a malformed patch, got {other:?}"),
    }
}

#[test]
fn a_multi_hunk_patch_applies_and_counts_its_changed_lines() {
    let patch = "\
--- a/ten.txt
+++ b/ten.txt
@@ -1,3 +1,3 @@
-1
+one
 2
 3
@@ -7,4 +7,5 @@ section text
 7
 8
+8.5
 9
-10
+ten
";
    let applied = apply_unified(TEN, patch).unwrap();
    assert_eq!(applied.text, "one\n2\n3\n4\n5\n6\n7\n8\n8.5\n9\nten\n");
    assert_eq!(applied.lines_changed, 5);
    let parsed = parse_unified(patch).unwrap();
    assert_eq!(parsed.old_name.as_deref(), Some("a/ten.txt"));
    assert_eq!(parsed.new_name.as_deref(), Some("b/ten.txt"));
    assert_eq!(parsed.hunks.len(), 2);
    assert_eq!(parsed.hunks[1].header_line, 8);
    assert_eq!(parsed.hunks[1].lines[2].kind, LineKind::Added);
}

#[test]
fn additions_at_the_end_of_the_file() {
    let patch = "@@ -9,2 +9,4 @@\n 9\n 10\n+11\n+12\n";
    assert_eq!(
        apply_unified(TEN, patch).unwrap().text,
        format!("{TEN}11\n12\n")
    );
    // Insertion-only hunks: after the last line, at the top, into an empty file.
    assert_eq!(
        apply_unified(TEN, "@@ -10,0 +11 @@\n+11\n").unwrap().text,
        format!("{TEN}11\n")
    );
    assert_eq!(
        apply_unified(TEN, "@@ -0,0 +1 @@\n+0\n").unwrap().text,
        format!("0\n{TEN}")
    );
    assert_eq!(
        apply_unified("", "@@ -0,0 +1,2 @@\n+a\n+b\n").unwrap().text,
        "a\nb\n"
    );
}

#[test]
fn the_no_newline_marker_on_either_side() {
    // Adding a final newline.
    let patch = "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n";
    assert_eq!(apply_unified("a\nb", patch).unwrap().text, "a\nb\n");
    // Removing it.
    let patch = "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n";
    assert_eq!(apply_unified("a\nb\n", patch).unwrap().text, "a\nb");
    // A context line without newline on both sides.
    let patch = "@@ -1,2 +1,3 @@\n+z\n a\n b\n\\ No newline at end of file\n";
    assert_eq!(apply_unified("a\nb", patch).unwrap().text, "z\na\nb");
    // The marker is checked: the file does end with a newline.
    let patch = "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n";
    let error = apply_unified("a\nb\n", patch).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"hunk 1 does not apply: line 2: expected "b", found "b\n""#
    );
    // A patch that ends the file where the file goes on.
    let patch = "@@ -1 +1 @@\n-a\n+x\n\\ No newline at end of file\n";
    let error = apply_unified("a\nb\n", patch).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"hunk 1 does not apply: line 2: expected the end of the file, found "b""#
    );
}

#[test]
fn a_context_mismatch_names_the_first_differing_line() {
    let patch = "@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n";
    let current = TEN.replace("6\n", "six\n");
    let error = apply_unified(&current, patch).unwrap_err();
    assert_eq!(error.code(), ErrorCode::Conflict);
    assert_eq!(
        error.to_string(),
        r#"hunk 1 does not apply: line 6: expected "6", found "six""#
    );
    let conflict = error.conflict(&current, "ten.txt").unwrap();
    assert_eq!(conflict.kind, ConflictKind::PatchMismatch);
    assert_eq!(conflict.current_sha256, sha256_hex(current.as_bytes()));
    assert_eq!(conflict.mismatch.as_ref().unwrap().line, 6);
    // The diff goes from the file as the patch expected it to the file as it is.
    assert!(conflict.diff.contains("-6\n+six\n"), "{}", conflict.diff);
    // No fuzz: the right lines one line off do not apply.
    let shifted = format!("0\n{TEN}");
    let error = apply_unified(&shifted, patch).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"line 4: expected "4", found "3""#),
        "{error}"
    );
    // A hunk past the end of the file.
    let error = apply_unified("1\n2\n", patch).unwrap_err();
    assert_eq!(
        error.to_string(),
        "hunk 1 does not apply: its header @@ -4,3 +4,3 @@ starts at line 4 but the file has 2 \
         lines"
    );
    assert_eq!(error.conflict("1\n2\n", "x").unwrap().mismatch, None);
    let error = apply_unified("1\n2\n", "@@ -5,0 +6 @@\n+x\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "hunk 1 does not apply: its header @@ -5,0 +6,1 @@ inserts after line 5 but the file has \
         2 lines"
    );
    let error = apply_unified("1\n2\n", "@@ -2,2 +2 @@\n 2\n-3\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"hunk 1 does not apply: line 3: expected "3", found the end of the file"#
    );
}

#[test]
fn crlf_files_take_crlf_patches_byte_for_byte_and_lf_patches_as_crlf() {
    let crlf = "a\r\nb\r\nc\r\n";
    let exact = "@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n";
    assert_eq!(apply_unified(crlf, exact).unwrap().text, "a\r\nB\r\nc\r\n");
    // Written without \r, as an agent does: read as CRLF.
    let lf = "@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n";
    assert_eq!(
        apply_unified(crlf, lf).unwrap().text,
        "a\r\nB\r\nB2\r\nc\r\n"
    );
    // A mixed file is compared exactly: the endings are named when they are all that differs.
    let error = apply_unified("a\r\nb\nc\r\n", lf).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"hunk 1 does not apply: line 1: expected "a\n", found "a\r\n""#
    );
    // A CRLF patch on an LF file does not apply either.
    let error = apply_unified("a\nb\nc\n", exact).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"expected "a\r\n", found "a\n""#)
    );
}

#[test]
fn empty_context_lines_and_trailing_blank_lines_are_accepted() {
    let text = "a\n\nb\n";
    let patch = "@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n\n\n";
    assert_eq!(apply_unified(text, patch).unwrap().text, "a\n\nB\n");
}

#[test]
fn preamble_lines_are_skipped() {
    let patch =
        "diff --git a/x b/x\nindex 1234..5678 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+one\n";
    assert!(
        apply_unified(TEN, patch)
            .unwrap()
            .text
            .starts_with("one\n2\n")
    );
}

#[test]
fn malformed_headers_are_refused_with_where_and_what() {
    assert_eq!(
        malformed("--- a/x\n@@ -1 +1 @@\n-1\n+one\n"),
        "malformed patch at line 2: expected a '+++ ' line after the '--- ' line 1"
    );
    assert_eq!(
        malformed("@@ -1 +1 @@\n-1\n+one\n@@ -x,2 +3 @@\n"),
        "malformed patch at line 4 (hunk 2): hunk header \"@@ -x,2 +3 @@\" is not of the form \
         '@@ -start,count +start,count @@'"
    );
    assert_eq!(
        malformed("@@ -1,1 +1,1\n-1\n+one\n"),
        "malformed patch at line 1 (hunk 1): hunk header \"@@ -1,1 +1,1\" is not of the form \
         '@@ -start,count +start,count @@'"
    );
    assert_eq!(
        malformed("@@ -0,2 +1,2 @@\n-1\n-2\n+a\n+b\n"),
        "malformed patch at line 1 (hunk 1): the old side starts at line 0 but has 2 lines; \
         lines are numbered from 1 (0 only for an empty side)"
    );
    assert_eq!(
        malformed("+++ b/x\n@@ -1 +1 @@\n-1\n+one\n"),
        "malformed patch at line 1: a '+++ ' line without a '--- ' line before it"
    );
    assert_eq!(
        malformed("--- a/x\n+++ b/x\nhello\n"),
        "malformed patch at line 3: expected a hunk header like '@@ -12,7 +12,8 @@' after the \
         file header, found \"hello\""
    );
    assert!(malformed("just some words\n").contains("the patch has no hunks"));
    assert!(malformed("").contains("the patch has no hunks"));
}

#[test]
fn hunk_bodies_must_match_their_counts() {
    assert_eq!(
        malformed("@@ -1,3 +1,3 @@\n 1\n-2\n+two\n"),
        "malformed patch at line 5 (hunk 1): the hunk ends at the end of the patch but its \
         header @@ -1,3 +1,3 @@ promises 1 more old and 1 more new lines; fix the counts or add \
         the lines"
    );
    assert!(
        malformed("@@ -1,2 +1,2 @@\n 1\n@@ -5 +5 @@\n-5\n+five\n").starts_with(
            "malformed patch at line 3 (hunk 1): the hunk ends at line 3, the next hunk header,"
        )
    );
    assert_eq!(
        malformed("@@ -1 +1 @@\n-1\n-2\n+one\n"),
        "malformed patch at line 3 (hunk 1): the hunk has more old lines than its header \
         @@ -1,1 +1,1 @@ says; fix the counts"
    );
    assert_eq!(
        malformed("@@ -1 +1 @@\n-1\n+one\n 2\n"),
        "malformed patch at line 4 (hunk 1): \" 2\" follows the hunk but is not part of it: the \
         header @@ -1,1 +1,1 @@ counts fewer lines; fix the header's counts or remove the line"
    );
    assert_eq!(
        malformed("@@ -1,2 +1,2 @@\n 1\n*2\n"),
        "malformed patch at line 3 (hunk 1): \"*2\" is not a hunk line: each line of a hunk \
         starts with ' ' (context), '-' (removed), '+' (added) or '\\' (no newline)"
    );
}

#[test]
fn hunks_must_be_in_order_for_one_file_with_sane_markers() {
    assert_eq!(
        malformed("@@ -5 +5 @@\n-5\n+five\n@@ -2 +2 @@\n-2\n+two\n"),
        "malformed patch at line 4 (hunk 2): hunk 2 (@@ -2,1 +2,1 @@) starts before hunk 1 \
         (@@ -5,1 +5,1 @@) ends: hunks must be in file order and must not overlap"
    );
    assert!(
        malformed("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+one\n--- a/y\n+++ b/y\n")
            .contains("line 6 (hunk 1): a second file header")
    );
    assert!(
        malformed("@@ -1 +1 @@\n-1\n+one\ndiff --git a/y b/y\n")
            .contains("line 4 (hunk 1): a second file ('diff …')")
    );
    assert_eq!(
        malformed("@@ -1 +1 @@\n\\ No newline at end of file\n-1\n+one\n"),
        "malformed patch at line 2 (hunk 1): '\\ No newline at end of file' must follow a \
         context, removed or added line"
    );
    assert!(
        malformed("@@ -1 +1 @@\n-1\n\\ No newline at end of file\n\\ No newline\n+one\n")
            .contains("line 4 (hunk 1): a second '\\ No newline at end of file'")
    );
    assert_eq!(
        malformed("@@ -1,2 +1,2 @@\n-1\n\\ No newline at end of file\n 2\n+x\n"),
        "malformed patch at line 4 (hunk 1): a line after the old file's last line (line 2 is \
         marked '\\ No newline at end of file')"
    );
}

#[test]
fn a_patch_saved_with_crlf_headers_still_parses() {
    let patch = "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-1\n+one\n";
    assert!(apply_unified(TEN, patch).unwrap().text.starts_with("one\n"));
}

#[test]
fn huge_line_numbers_are_errors_not_panics() {
    let max = usize::MAX;
    assert!(malformed("@@ -99999999999999999999999 +1 @@\n+x\n").contains("hunk header"));
    let error = apply_unified(TEN, &format!("@@ -{max},0 +1 @@\n+x\n")).unwrap_err();
    assert_eq!(error.code(), ErrorCode::Conflict);
    let two = format!("@@ -{max},0 +1 @@\n+x\n@@ -3,0 +1 @@\n+y\n");
    assert!(malformed(&two).contains("starts before hunk 1"));
}
