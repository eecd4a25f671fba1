//! `MarkdownDocument`: a file's body split into lines and ATX sections with docs-mcp's numeric
//! section ids (`1`, `1/2`, `0/1`, `1/0/1`).
//!
//! Uses `js`.
//!
//! A header is a line matching `^(#{1,6})\s+(.+)$` (JavaScript semantics; code fences are not
//! tracked, as in the original). Six counters number them: a header of level `n` increments
//! counter `n` and zeroes the deeper ones, and its id is counters `1..=n` joined with `/`. A
//! section spans from its header line to the line before the next header of the same or a
//! shallower level. Line endings are normalised (`\r\n` and `\r` become `\n`) before parsing.

use std::collections::HashMap;

use super::js::{is_js_line_terminator, is_js_whitespace, js_trim, utf16_len};

/// One section of a document, with its place in the file's lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// The numeric id, e.g. `1/0/2`.
    pub id: String,
    /// The header text, trimmed.
    pub title: String,
    /// The header level, 1 to 6.
    pub level: u8,
    /// The index of the header line.
    pub start: usize,
    /// The index of the section's last line (its subsections included).
    pub end: usize,
    /// The length of the section's text in UTF-16 code units, header line included.
    pub character_count: usize,
    /// How many sections have this one as their parent id (direct children only).
    pub subsection_count: usize,
}

/// A Markdown body parsed into sections.
#[derive(Clone, Debug)]
pub struct MarkdownDocument {
    /// The body's lines as the original slices them for `read_sections` and `search`: split at
    /// `\n`, so a CRLF file's lines keep their `\r` (a lone `\r` also breaks a line here).
    lines: Vec<String>,
    /// The sections in document order.
    sections: Vec<SectionInfo>,
    /// Section id to index in `sections`.
    by_id: HashMap<String, usize>,
}

impl MarkdownDocument {
    /// Parses a body (the text after any front matter).
    pub fn parse(body: &str) -> Self {
        let lines = split_lines(body);
        let normalized: Vec<&str> = lines
            .iter()
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        let mut sections: Vec<SectionInfo> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut counters = [0usize; 6];
        for (i, line) in normalized.iter().enumerate() {
            let Some((level, title)) = match_header(line) else {
                continue;
            };
            let depth = usize::from(level);
            counters[depth - 1] += 1;
            counters[depth..].fill(0);
            let id = counters[..depth]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("/");
            while let Some(&top) = open.last() {
                if sections[top].level < level {
                    break;
                }
                sections[top].end = i - 1;
                open.pop();
            }
            open.push(sections.len());
            sections.push(SectionInfo {
                id,
                title,
                level,
                start: i,
                end: i,
                character_count: 0,
                subsection_count: 0,
            });
        }
        let last = normalized.len().saturating_sub(1);
        for top in open {
            sections[top].end = last;
        }
        let mut by_id = HashMap::with_capacity(sections.len());
        for (index, s) in sections.iter().enumerate() {
            by_id.insert(s.id.clone(), index);
        }
        let mut children: HashMap<String, usize> = HashMap::new();
        for s in &sections {
            if let Some(parent) = parent_id(&s.id) {
                *children.entry(parent.to_owned()).or_default() += 1;
            }
        }
        // `character_count` is the UTF-16 length of the section's lines joined with `\n`: the
        // lines' lengths (prefix sums, so each line is measured once) plus one per line break.
        let mut before = Vec::with_capacity(normalized.len() + 1);
        before.push(0usize);
        for line in &normalized {
            before.push(before[before.len() - 1] + utf16_len(line));
        }
        for s in &mut sections {
            s.character_count = before[s.end + 1] - before[s.start] + (s.end - s.start);
            s.subsection_count = children.get(&s.id).copied().unwrap_or(0);
        }
        Self {
            lines,
            sections,
            by_id,
        }
    }

    /// The sections in document order.
    pub fn sections(&self) -> &[SectionInfo] {
        &self.sections
    }

    /// The section with this id, if any.
    pub fn section(&self, id: &str) -> Option<&SectionInfo> {
        self.by_id.get(id).map(|&i| &self.sections[i])
    }

    /// The lines `start..=end` joined with `\n`, as the original returns a section's content.
    pub fn text(&self, start: usize, end: usize) -> String {
        self.lines[start..=end].join("\n")
    }

    /// The section's own text: its lines without those of its direct children (a child at a
    /// skipped level, such as `1/0/1` under `1`, is not direct and stays in).
    pub fn own_text(&self, section: &SectionInfo) -> String {
        let prefix = format!("{}/", section.id);
        let depth = section.id.split('/').count() + 1;
        let mut children: Vec<&SectionInfo> = self
            .sections
            .iter()
            .filter(|s| s.id.starts_with(&prefix) && s.id.split('/').count() == depth)
            .collect();
        children.sort_by_key(|s| s.start);
        let mut kept: Vec<&str> = Vec::new();
        let mut position = section.start;
        for child in children {
            if child.start > position {
                kept.extend(self.lines[position..child.start].iter().map(String::as_str));
            }
            position = child.end + 1;
        }
        if position <= section.end {
            kept.extend(
                self.lines[position..=section.end]
                    .iter()
                    .map(String::as_str),
            );
        }
        kept.join("\n")
    }
}

/// Splits at `\n`, after turning each `\r` not followed by `\n` into `\n`, so that the lines are
/// those of the normalised text, a CRLF line keeping its `\r`.
fn split_lines(body: &str) -> Vec<String> {
    if !body.contains('\r') {
        return body.split('\n').map(str::to_owned).collect();
    }
    let mut fixed = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() != Some(&'\n') {
            fixed.push('\n');
        } else {
            fixed.push(c);
        }
    }
    fixed.split('\n').map(str::to_owned).collect()
}

/// The parent of a section id (`1/2/3` gives `1/2`); `None` for a top-level id.
pub fn parent_id(id: &str) -> Option<&str> {
    id.rfind('/').map(|i| &id[..i])
}

/// Whether `id` has the form the original accepts, `^(\d+)(\/\d+)*$` with ASCII digits.
pub fn is_valid_section_id(id: &str) -> bool {
    id.split('/')
        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Matches one normalised line against `^(#{1,6})\s+(.+)$` with JavaScript's `\s` and `.`;
/// gives the level and the trimmed title.
fn match_header(line: &str) -> Option<(u8, String)> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    let run_end = rest
        .char_indices()
        .find(|&(_, c)| !is_js_whitespace(c))
        .map_or(rest.len(), |(i, _)| i);
    if run_end == 0 {
        return None;
    }
    let tail = &rest[run_end..];
    let matches = if tail.is_empty() {
        // `(.+)` takes back the last whitespace character, unless it is a line terminator, and
        // `\s+` still needs one before it.
        let run: Vec<char> = rest.chars().collect();
        run.len() >= 2 && run.last().is_some_and(|&c| !is_js_line_terminator(c))
    } else {
        !tail.chars().any(is_js_line_terminator)
    };
    let level = u8::try_from(hashes).ok()?;
    matches.then(|| (level, js_trim(rest).to_owned()))
}

/// The title `read_sections` reports: the original runs `/^#{1,6}\s+(.+)$/m` over the section's
/// content and trims the group (`\s+` may cross a line break when the header text is blank).
pub fn content_title(content: &str) -> Option<String> {
    let starts = std::iter::once(0).chain(
        content
            .char_indices()
            .filter(|&(_, c)| is_js_line_terminator(c))
            .map(|(i, c)| i + c.len_utf8()),
    );
    for start in starts {
        let line = &content[start..];
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let after = &line[hashes..];
        let run: Vec<(usize, char)> = after
            .char_indices()
            .take_while(|&(_, c)| is_js_whitespace(c))
            .collect();
        if run.is_empty() {
            continue;
        }
        let run_end = run.last().map_or(0, |&(i, c)| i + c.len_utf8());
        // Greedy `\s+`, then backtrack until `(.+)` can start on a non-terminator.
        let mut candidates: Vec<usize> = vec![run_end];
        candidates.extend(run.iter().skip(1).rev().map(|&(i, _)| i));
        for j in candidates {
            let group = &after[j..];
            let end = group
                .char_indices()
                .find(|&(_, c)| is_js_line_terminator(c))
                .map_or(group.len(), |(i, _)| i);
            if end > 0 {
                return Some(js_trim(&group[..end]).to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(text: &str) -> Vec<String> {
        MarkdownDocument::parse(text)
            .sections()
            .iter()
            .map(|s| s.id.clone())
            .collect()
    }

    #[test]
    fn numeric_ids_follow_the_counters() {
        assert_eq!(ids("# Title 1"), ["1"]);
        assert_eq!(ids("# A\n# B\n# C"), ["1", "2", "3"]);
        assert_eq!(ids("## Orphan"), ["0/1"]);
        assert_eq!(ids("### Deep"), ["0/0/1"]);
        assert_eq!(ids("# L1\n### L3\n## L2"), ["1", "1/0/1", "1/1"]);
        assert_eq!(ids("# L1\n##### L5\n## L2"), ["1", "1/0/0/0/1", "1/1"]);
        assert_eq!(
            ids("# L1\n## L2\n# L1b\n### L3\n# L1c\n## L2b"),
            ["1", "1/1", "2", "2/0/1", "3", "3/1"]
        );
        assert_eq!(
            ids("# R\n## A\n### B\n#### C\n##### D\n###### E\n## F\n### G"),
            [
                "1",
                "1/1",
                "1/1/1",
                "1/1/1/1",
                "1/1/1/1/1",
                "1/1/1/1/1/1",
                "1/2",
                "1/2/1"
            ]
        );
    }

    #[test]
    fn header_pattern_is_the_originals() {
        let d = MarkdownDocument::parse(
            "#    Title with spaces\n##   Another\n####### seven\n#no space\n# \n#  \n# a\u{2028}b\n```\n# in fence\n```",
        );
        let titles: Vec<&str> = d.sections().iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["Title with spaces", "Another", "", "in fence"]);
    }

    #[test]
    fn spans_counts_and_subsections() {
        let text = "# Parent\nContent here.\n\n## Child 1\nMore.\n\n## Child 2\nEven more.\n\n### Grand\nDeep.";
        let d = MarkdownDocument::parse(text);
        let s = d.sections();
        assert_eq!((s[0].start, s[0].end), (0, 10));
        assert_eq!((s[1].start, s[1].end), (3, 5));
        assert_eq!((s[2].start, s[2].end), (6, 10));
        assert_eq!(s[0].character_count, text.len());
        assert_eq!(s[1].character_count, "## Child 1\nMore.\n".len());
        assert_eq!(
            s.iter().map(|s| s.subsection_count).collect::<Vec<_>>(),
            [2, 0, 1, 0]
        );
        // A level-3 header under a level-1 one is no direct child.
        let d = MarkdownDocument::parse("# L1\nx\n### L3\ny\n#### L4");
        assert_eq!(d.sections()[0].subsection_count, 0);
        assert_eq!(d.sections()[1].subsection_count, 1);
    }

    #[test]
    fn line_endings_are_normalised() {
        for text in [
            "# A\r\ntext\r\n## B\r\nmore",
            "# A\rtext\r## B\rmore",
            "# A\ntext\r\n## B\rmore",
        ] {
            let d = MarkdownDocument::parse(text);
            let s = d.sections();
            assert_eq!(ids(text), ["1", "1/1"]);
            assert_eq!(s[0].title, "A");
            assert_eq!(s[1].title, "B");
            assert_eq!(s[0].character_count, "# A\ntext\n## B\nmore".len());
            assert_eq!(s[1].character_count, "## B\nmore".len());
        }
        // CRLF lines keep their `\r` in the content, as the original's `split('\n')` leaves it.
        let d = MarkdownDocument::parse("# A\r\ntext\r\n");
        assert_eq!(d.text(0, 2), "# A\r\ntext\r\n");
    }

    #[test]
    fn character_count_is_utf16() {
        let d = MarkdownDocument::parse("# é😀");
        assert_eq!(d.sections()[0].character_count, 5);
    }

    #[test]
    fn own_text_leaves_out_direct_children() {
        let d = MarkdownDocument::parse("# A\na\n## B\nb\n### C\nc\n## D\nd\n# E");
        let s = d.sections();
        assert_eq!(d.own_text(&s[0]), "# A\na");
        assert_eq!(d.own_text(&s[1]), "## B\nb");
        let d = MarkdownDocument::parse("# A\na\n### C\nc");
        assert_eq!(d.own_text(&d.sections()[0]), "# A\na\n### C\nc");
    }

    #[test]
    fn content_title_is_the_first_header_line() {
        assert_eq!(content_title("# Title\ntext").as_deref(), Some("Title"));
        assert_eq!(content_title("## Title\r\ntext").as_deref(), Some("Title"));
        // A blank header takes the next line's text, as the multiline pattern does.
        assert_eq!(
            content_title("#  \nNext line\n").as_deref(),
            Some("Next line")
        );
        assert_eq!(content_title("plain"), None);
    }

    #[test]
    fn section_id_format() {
        assert!(is_valid_section_id("1"));
        assert!(is_valid_section_id("0/1/20"));
        for bad in ["", "1/", "/1", "1//2", "a", "1.2", "1/x", "١"] {
            assert!(!is_valid_section_id(bad), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn ids_are_unique_and_spans_nest(
            lines in proptest::collection::vec(
                prop_oneof!["#{1,7} [a-z]{1,3}", "[a-z ]{0,5}", Just(String::new())],
                0..40,
            ),
            ending in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        ) {
            let text = lines.join(ending);
            let d = MarkdownDocument::parse(&text);
            let s = d.sections();
            let mut seen = std::collections::HashSet::new();
            for (i, sec) in s.iter().enumerate() {
                prop_assert!(seen.insert(sec.id.clone()), "duplicate id {}", sec.id);
                prop_assert_eq!(sec.id.split('/').count(), usize::from(sec.level));
                prop_assert!(sec.start <= sec.end);
                prop_assert!(is_valid_section_id(&sec.id));
                let mut direct = 0;
                for other in &s[i + 1..] {
                    if other.level <= sec.level {
                        prop_assert!(other.start > sec.end);
                        break;
                    }
                    // Every deeper section up to the next sibling lies inside this span.
                    prop_assert!(other.start <= sec.end && other.end <= sec.end);
                    let prefix = format!("{}/", sec.id);
                    prop_assert!(other.id.starts_with(&prefix), "{} under {}", other.id, sec.id);
                    if parent_id(&other.id) == Some(sec.id.as_str()) {
                        direct += 1;
                    }
                }
                prop_assert_eq!(sec.subsection_count, direct);
                prop_assert!(d.section(&sec.id).is_some());
            }
        }
    }
}
