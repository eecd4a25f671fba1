//! Search semantics: which sections of a document match a query.
//!
//! Uses `errors`, `js`, `js_regex`, `markdown`, `toc`, `results`.
//!
//! The query is trimmed and compiled with JavaScript's flags `is` (case-insensitive, `.` matching
//! line breaks). A section matches when the pattern matches its title or its own text: its lines,
//! header included, without the lines of its direct subsections. `subsection_count` is then
//! shown for a match only when some of its direct subsections did not match.

use regex::Regex;

use super::errors::DocsError;
use super::js::js_trim;
use super::js_regex::{compile_js_regex, regex_source};
use super::markdown::{MarkdownDocument, SectionInfo};
use super::results::Section;
use super::toc::with_conditional_counts;

/// A compiled search query.
#[derive(Clone, Debug)]
pub struct Query {
    regex: Regex,
    source: String,
}

impl Query {
    /// Trims and compiles `query` (which the caller has checked is not blank).
    ///
    /// # Errors
    /// [`DocsError::InvalidRegex`] when JavaScript would reject the pattern, or when it needs
    /// look-around or backreferences, which the linear-time engine refuses.
    pub fn compile(query: &str) -> Result<Self, DocsError> {
        let pattern = js_trim(query);
        let source = regex_source(pattern);
        let regex = compile_js_regex(pattern).map_err(|reason| DocsError::InvalidRegex {
            message: format!("Invalid regular expression: /{source}/is: {reason}"),
        })?;
        Ok(Self { regex, source })
    }

    /// The pattern as JavaScript's `regex.source` shows it, the `query` field of the result.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The sections of `doc` that match, in document order, with conditional subsection counts.
    pub fn matching_sections(&self, doc: &MarkdownDocument) -> Vec<Section> {
        let matched: Vec<&SectionInfo> = doc
            .sections()
            .iter()
            .filter(|s| self.regex.is_match(&s.title) || self.regex.is_match(&doc.own_text(s)))
            .collect();
        with_conditional_counts(&matched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(query: &str, text: &str) -> Vec<(String, Option<usize>)> {
        let q = Query::compile(query).expect("compiles");
        q.matching_sections(&MarkdownDocument::parse(text))
            .into_iter()
            .map(|s| (s.id, s.subsection_count))
            .collect()
    }

    #[test]
    fn matches_title_or_own_text_not_childrens() {
        let text = "# Intro\nhello\n## Setup\ninstall steps\n## Usage\nrun it\n# Other\nnothing";
        assert_eq!(ids("install", text), [("1/1".to_owned(), None)]);
        assert_eq!(ids("usage", text), [("1/2".to_owned(), None)]);
        assert_eq!(ids("hello", text), [("1".to_owned(), Some(2))]);
        // Parent and both children match: the count is dropped.
        assert_eq!(
            ids("e", "# Parent e\n## Child one\n## Child e"),
            [
                ("1".to_owned(), None),
                ("1/1".to_owned(), None),
                ("1/2".to_owned(), None)
            ]
        );
        // A skipped-level subsection is no direct child: its text counts for the parent.
        assert_eq!(
            ids("deep", "# Top\n### Deep text"),
            [("1".to_owned(), None), ("1/0/1".to_owned(), None)]
        );
    }

    #[test]
    fn multiline_patterns_cross_lines_within_a_section() {
        let text = "# A\nfoo\nbar\n# B\nfoo";
        assert_eq!(ids("foo.*bar", text), [("1".to_owned(), None)]);
        assert!(ids("foo.*bar", "# A\nfoo\n# B\nbar").is_empty());
    }

    #[test]
    fn query_is_trimmed_and_its_source_escaped() {
        let q = Query::compile("  a/b  ").expect("compiles");
        assert_eq!(q.source(), r"a\/b");
    }

    #[test]
    fn invalid_patterns_say_why() {
        let e = Query::compile("(unclosed")
            .expect_err("invalid")
            .to_string();
        assert!(
            e.starts_with(
                "Invalid regular expression pattern: Invalid regular expression: /(unclosed/is: "
            ),
            "{e}"
        );
        assert!(
            e.ends_with(". Please check your regex syntax and try again."),
            "{e}"
        );
        let e = Query::compile("foo(?=bar)")
            .expect_err("look-ahead")
            .to_string();
        assert!(e.contains("linear time"), "{e}");
    }
}
