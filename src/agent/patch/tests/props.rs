//! Property tests: a diff made by `similar` from A to B turns A into B; random ordered, disjoint
//! line changes give the model's result and are refused once unsorted.

use proptest::prelude::*;
use serde_json::{Value, json};
use similar::{ChangeTag, TextDiff};

use super::super::text::{split_lines, uses_crlf};
use super::super::{
    Batch, Failure, apply_file, apply_unified, parse_request, parse_unified, sha256_hex, validate,
};

/// A line's text: often one of a few (so that texts share lines), sometimes anything without a
/// line break.
fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["a", "b", "c", "", "  d", "é"]).prop_map(String::from),
        1 => "[^\r\n]{0,5}",
    ]
}

/// A text of lines ending in LF or CRLF (mixed), maybe with a last line without a newline. A lone
/// `\r` is left out: `similar` ends a line there, strata's line model does not (module docs of
/// `text`), so a diff of such a text is not one strata reads the same way.
fn text() -> impl Strategy<Value = String> {
    let line = (content(), prop::sample::select(vec!["\n", "\r\n"]));
    (
        prop::collection::vec(line, 0..12),
        prop::option::of(content()),
    )
        .prop_map(|(lines, last)| {
            let mut text: String = lines.into_iter().map(|(c, e)| c + e).collect();
            text.push_str(&last.unwrap_or_default());
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_similar_diff_from_a_to_b_turns_a_into_b(a in text(), b in text(), radius in 0usize..5) {
        let diff = TextDiff::from_lines(&a, &b);
        let patch = diff.unified_diff().context_radius(radius).header("a", "b").to_string();
        if a == b {
            prop_assert_eq!(&patch, "");
            prop_assert!(parse_unified(&patch).is_err());
            return Ok(());
        }
        let parsed = parse_unified(&patch).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cr_free = parsed.hunks.iter().flat_map(|h| &h.lines).all(|l| !l.text.contains('\r'));
        if radius == 0 && cr_free && uses_crlf(&split_lines(&a)) {
            // A context-free patch without `\r` on a CRLF file is read as CRLF, by design
            // (`unified` module docs); with any context the patch carries the file's `\r`.
            return Ok(());
        }
        let applied = apply_unified(&a, &patch).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&applied.text, &b, "patch:\n{}", patch);
        let changed = diff.iter_all_changes().filter(|c| c.tag() != ChangeTag::Equal).count();
        prop_assert_eq!(applied.lines_changed, changed);
    }
}

/// A file for the line-operation property: its lines, ending, and whether it ends with one.
#[derive(Clone, Debug)]
struct File {
    lines: Vec<String>,
    crlf: bool,
    final_newline: bool,
}

impl File {
    fn ending(&self) -> &'static str {
        if self.crlf { "\r\n" } else { "\n" }
    }

    fn text(&self) -> String {
        self.render(&self.lines, self.final_newline)
    }

    fn render(&self, lines: &[String], final_newline: bool) -> String {
        let mut text = lines.join(self.ending());
        match lines.last() {
            Some(last) if final_newline || last.is_empty() => text.push_str(self.ending()),
            _ => {}
        }
        text
    }
}

fn file() -> impl Strategy<Value = File> {
    (
        prop::collection::vec(content(), 0..10),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut lines, crlf, final_newline)| {
            // An empty last line without a newline is no line at all.
            if let (false, Some(last)) = (final_newline, lines.last_mut())
                && last.is_empty()
            {
                last.push('z');
            }
            File {
                lines,
                crlf,
                final_newline,
            }
        })
}

/// Builds ordered, disjoint changes (at least one) over `file` from `choices`, and the lines they
/// should give.
fn changes(file: &File, choices: &[u8]) -> (Vec<Value>, Vec<String>) {
    let mut choices = choices.iter().copied().cycle();
    let mut next = move || choices.next().unwrap_or(0);
    let n = file.lines.len();
    let (mut changes, mut result) = (Vec::new(), Vec::new());
    let mut gap_free = true; // whether an insert may anchor on the line just passed
    let mut line = 0; // lines 1..=line are done
    loop {
        if gap_free && next() % 3 == 0 {
            let new: Vec<String> = (0..=next() % 2)
                .map(|i| format!("new {line}.{i}"))
                .collect();
            changes.push(json!({"operation": "insert", "afterLine": line, "newLines": new}));
            result.extend(new);
        }
        if line == n {
            break;
        }
        let len = 1 + usize::from(next()) % (n - line).min(3);
        let range = &file.lines[line..line + len];
        let (start, end) = (line + 1, line + len);
        match next() % 4 {
            0 => {
                changes.push(
                    json!({"operation": "delete", "startLine": start, "endLine": end,
                                    "expectedOriginalLines": range}),
                );
                gap_free = false;
            }
            1 => {
                let new: Vec<String> = (0..=next() % 2).map(|i| format!("r {start}.{i}")).collect();
                changes.push(
                    json!({"operation": "replace", "startLine": start, "endLine": end,
                                    "expectedOriginalLines": range, "newLines": new}),
                );
                result.extend(new);
                gap_free = false;
            }
            _ => {
                result.extend(range.iter().cloned());
                gap_free = true;
            }
        }
        line = end;
    }
    if changes.is_empty() {
        changes.push(json!({"operation": "insert", "afterLine": 0, "newLines": ["only"]}));
        result.insert(0, "only".to_owned());
    }
    (changes, result)
}

/// Validates one file's `changes` based on `text`.
fn batch(text: &str, changes: &[Value]) -> Result<Batch, Failure> {
    let args = json!({"files": [{"docPath": "f", "originalSha256": sha256_hex(text.as_bytes()),
                                 "changes": changes}]});
    let request = parse_request(Some(&args))?;
    validate(request.as_ref())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ordered_disjoint_changes_give_the_models_result_and_unsorted_ones_are_refused(
        file in file(),
        choices in prop::collection::vec(any::<u8>(), 1..40),
        swap in (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
    ) {
        let text = file.text();
        let (changes, lines) = changes(&file, &choices);
        // The line-ending rule: new lines take CRLF only when every ending is CRLF; the final
        // newline stays as it was (an empty file counts as having one).
        let model = File {
            crlf: file.crlf && text.contains('\n'),
            ..file.clone()
        };
        let expected = model.render(&lines, file.final_newline || file.lines.is_empty());

        let sorted = batch(&text, &changes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let applied = apply_file(&sorted.files[0], &text)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&applied.text, &expected);

        // The same changes one at a time, bottom first, each on the previous result. Only for
        // files ending with a newline, and while no step empties the file: without a final
        // newline a step can leave an empty last line, which gains one, and an empty file has
        // lost its CRLF and its lack of a final newline, which the whole batch keeps.
        if file.final_newline || file.lines.is_empty() {
            let mut step = text.clone();
            let mut emptied = false;
            for change in changes.iter().rev() {
                emptied |= step.is_empty() && !text.is_empty();
                let one = batch(&step, std::slice::from_ref(change))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                step = apply_file(&one.files[0], &step)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .text;
            }
            if !emptied {
                prop_assert_eq!(&step, &expected);
            }
        }

        // Any two swapped: refused as out of order (they never overlap).
        if changes.len() < 2 {
            return Ok(());
        }
        let i = swap.0.index(changes.len());
        let j = (i + 1 + swap.1.index(changes.len() - 1)) % changes.len();
        let mut unsorted = changes.clone();
        unsorted.swap(i, j);
        let failure = batch(&text, &unsorted).err();
        let ordered = "must be ordered top to bottom";
        prop_assert!(
            failure.as_ref().is_some_and(|f| f.error_message.contains(ordered)),
            "{:?}", failure
        );
    }
}
