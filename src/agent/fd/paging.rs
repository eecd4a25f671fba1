//! `Paged`: one descriptor's content with its line index and page table, and the slices
//! `read_fd` returns (pages, lines, characters) with their metadata.
//!
//! Uses no sibling module.
//!
//! Positions are counted in characters (Unicode scalar values, as Python's `len`), so a slice
//! never splits a character; each line start and page start also keeps its byte offset.
//!
//! **Line index** (as the original): line 1 starts at 0 and every `\n` that is not the last
//! character starts a new line, so a trailing newline adds no line and empty content has 1 line.
//!
//! **Pages** (DESIGN.md's deliberate fix): a page that does not reach the end of the content
//! ends at the last line start that fits in `page_size` characters; when none fits (the line is
//! longer than a page) it ends after exactly `page_size` characters. Every character is on
//! exactly one page and the pages, concatenated, give back the content. The original cut pages
//! every `page_size` characters and counted fewer pages than it cut, so its tail was unreachable.

/// A position in the content, in characters and in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    /// Characters before this position.
    ch: usize,
    /// Bytes before this position (a char boundary of the content).
    byte: usize,
}

/// Where a page or range lies in lines, and whether it cuts a line (the original's metadata).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Span {
    /// The 1-based line holding the first character.
    pub start_line: usize,
    /// The 1-based line holding the last character.
    pub end_line: usize,
    /// Whether the first character is not the start of its line.
    pub continued: bool,
    /// Whether the last character is not the end of its line.
    pub truncated: bool,
}

/// One descriptor's content with the data derived from it (rebuilt whenever it is loaded).
#[derive(Debug)]
pub(super) struct Paged {
    content: String,
    page_size: usize,
    /// The number of characters in `content`.
    chars: usize,
    /// The start of every line; `lines[0]` is the start of the content.
    lines: Vec<Pos>,
    /// The start of every page; `pages[0]` is the start of the content.
    pages: Vec<Pos>,
}

impl Paged {
    /// Indexes `content` into lines and pages of at most `page_size` characters (clamped to 1).
    pub(super) fn new(content: String, page_size: usize) -> Self {
        let page_size = page_size.max(1);
        let (lines, chars) = index_lines(&content);
        let pages = page_starts(&content, &lines, chars, page_size);
        Paged {
            content,
            page_size,
            chars,
            lines,
            pages,
        }
    }

    /// The whole content.
    pub(super) fn content(&self) -> &str {
        &self.content
    }

    /// The page size this descriptor was created with, in characters.
    pub(super) fn page_size(&self) -> usize {
        self.page_size
    }

    /// The length of the content in characters.
    pub(super) fn chars(&self) -> usize {
        self.chars
    }

    /// The number of lines (at least 1).
    pub(super) fn total_lines(&self) -> usize {
        self.lines.len()
    }

    /// The number of pages (at least 1; empty content has one empty page).
    pub(super) fn total_pages(&self) -> usize {
        self.pages.len()
    }

    /// Page `page` (1-based, at most [`Self::total_pages`]) and its metadata; `None` out of range.
    pub(super) fn page(&self, page: usize) -> Option<(&str, Span)> {
        let start = *self.pages.get(page.checked_sub(1)?)?;
        let end = self.pages.get(page).copied().unwrap_or_else(|| self.end());
        Some((self.slice(start, end), self.span(start, end)))
    }

    /// Pages `first..=last` (1-based, in range) joined, with the first page's `start_line` and
    /// `continued` and the last page's `end_line` and `truncated`.
    pub(super) fn pages(&self, first: usize, last: usize) -> Option<(&str, Span)> {
        let (_, head) = self.page(first)?;
        let (_, tail) = self.page(last)?;
        let start = *self.pages.get(first - 1)?;
        let end = self.pages.get(last).copied().unwrap_or_else(|| self.end());
        let span = Span {
            start_line: head.start_line,
            end_line: tail.end_line,
            continued: head.continued,
            truncated: tail.truncated,
        };
        Some((self.slice(start, end), span))
    }

    /// Lines `first..=last` (1-based, `first <= total_lines`, `last` at most `total_lines`),
    /// each with its line break; empty when `last < first`.
    pub(super) fn lines(&self, first: usize, last: usize) -> &str {
        let Some(start) = first
            .checked_sub(1)
            .and_then(|i| self.lines.get(i))
            .copied()
        else {
            return "";
        };
        if last < first {
            return "";
        }
        let end = self.lines.get(last).copied().unwrap_or_else(|| self.end());
        self.slice(start, end)
    }

    /// The characters `start..end` (clamped to the content) and the lines holding them: the
    /// line of the first character to the line of the last one (of `start` when empty).
    pub(super) fn chars_range(&self, start: usize, end: usize) -> (&str, usize, usize) {
        let start = start.min(self.chars);
        let end = end.clamp(start, self.chars);
        let from = self.pos_of(start);
        let to = self.walk(from, end - start);
        let first_line = self.line_of(start);
        let last_line = self.line_of(end.saturating_sub(1).max(start));
        (self.slice(from, to), first_line, last_line)
    }

    /// The position just past the last character.
    fn end(&self) -> Pos {
        Pos {
            ch: self.chars,
            byte: self.content.len(),
        }
    }

    fn slice(&self, start: Pos, end: Pos) -> &str {
        self.content.get(start.byte..end.byte).unwrap_or_default()
    }

    /// The 1-based line holding character `ch` (the last line for the end of the content).
    fn line_of(&self, ch: usize) -> usize {
        self.lines.partition_point(|line| line.ch <= ch).max(1)
    }

    /// The position of character `ch`, walking from the start of its line.
    fn pos_of(&self, ch: usize) -> Pos {
        let line = self
            .lines
            .get(self.line_of(ch) - 1)
            .copied()
            .unwrap_or(Pos { ch: 0, byte: 0 });
        self.walk(line, ch.saturating_sub(line.ch))
    }

    /// The position `n` characters after `from` (the end of the content at most).
    fn walk(&self, from: Pos, n: usize) -> Pos {
        if self.chars == self.content.len() {
            let ch = (from.ch + n).min(self.chars);
            return Pos { ch, byte: ch };
        }
        let rest = self.content.get(from.byte..).unwrap_or_default();
        match rest.char_indices().nth(n) {
            Some((offset, _)) => Pos {
                ch: from.ch + n,
                byte: from.byte + offset,
            },
            None => self.end(),
        }
    }

    /// The original's metadata for the characters `start..end`.
    fn span(&self, start: Pos, end: Pos) -> Span {
        let total = self.total_lines();
        if start.ch >= self.chars {
            return Span {
                start_line: total,
                end_line: total,
                continued: false,
                truncated: false,
            };
        }
        let start_line = self.line_of(start.ch);
        // The number of line starts before `end`: the line of the last character.
        let end_line = self.lines.partition_point(|line| line.ch < end.ch);
        let next_line_start = self.lines.get(end_line).map_or(self.chars, |line| line.ch);
        Span {
            start_line,
            end_line,
            continued: self
                .lines
                .get(start_line - 1)
                .is_some_and(|line| line.ch != start.ch),
            truncated: end.ch < next_line_start,
        }
    }
}

/// The start of every line and the number of characters, in one pass.
fn index_lines(content: &str) -> (Vec<Pos>, usize) {
    let mut lines = vec![Pos { ch: 0, byte: 0 }];
    let mut chars = 0;
    for (byte, c) in content.char_indices() {
        chars += 1;
        if c == '\n' && byte + 1 < content.len() {
            lines.push(Pos {
                ch: chars,
                byte: byte + 1,
            });
        }
    }
    (lines, chars)
}

/// The start of every page: each page ends at the last line start within `page_size`
/// characters, or after `page_size` characters when no line start fits.
fn page_starts(content: &str, lines: &[Pos], chars: usize, page_size: usize) -> Vec<Pos> {
    let ascii = chars == content.len();
    let mut pages = vec![Pos { ch: 0, byte: 0 }];
    let mut start = Pos { ch: 0, byte: 0 };
    while chars - start.ch > page_size {
        let limit = start.ch + page_size;
        let fits = lines.partition_point(|line| line.ch <= limit);
        let end = match fits.checked_sub(1).and_then(|i| lines.get(i)) {
            Some(line) if line.ch > start.ch => *line,
            _ if ascii => Pos {
                ch: limit,
                byte: limit,
            },
            _ => {
                let rest = content.get(start.byte..).unwrap_or_default();
                let offset = rest
                    .char_indices()
                    .nth(page_size)
                    .map_or(rest.len(), |(i, _)| i);
                Pos {
                    ch: limit,
                    byte: start.byte + offset,
                }
            }
        };
        pages.push(end);
        start = end;
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_pages(paged: &Paged) -> Vec<&str> {
        (1..=paged.total_pages())
            .map(|p| paged.page(p).unwrap().0)
            .collect()
    }

    /// The lines as an independent reading of the rule: split after each `\n`, at least one.
    fn reference_lines(content: &str) -> Vec<&str> {
        let lines: Vec<&str> = content.split_inclusive('\n').collect();
        if lines.is_empty() { vec![""] } else { lines }
    }

    #[test]
    fn line_index_follows_the_original() {
        assert_eq!(Paged::new(String::new(), 10).total_lines(), 1);
        assert_eq!(Paged::new("a".into(), 10).total_lines(), 1);
        assert_eq!(Paged::new("a\n".into(), 10).total_lines(), 1);
        assert_eq!(Paged::new("a\nb".into(), 10).total_lines(), 2);
        assert_eq!(Paged::new("a\n\n".into(), 10).total_lines(), 2);
        assert_eq!(Paged::new("\n".into(), 10).total_lines(), 1);
        assert_eq!(Paged::new("\n\n".into(), 10).total_lines(), 2);
    }

    #[test]
    fn empty_content_has_one_empty_page() {
        let paged = Paged::new(String::new(), 4);
        assert_eq!(paged.total_pages(), 1);
        let (body, span) = paged.page(1).unwrap();
        assert_eq!(body, "");
        assert_eq!((span.start_line, span.end_line), (1, 1));
        assert!(!span.continued && !span.truncated);
        assert!(paged.page(0).is_none() && paged.page(2).is_none());
    }

    #[test]
    fn pages_end_at_line_breaks_and_split_long_lines() {
        // Lines of 4, 12 and 3 characters; pages of at most 6.
        let paged = Paged::new("abc\n0123456789A\nxy".into(), 6);
        assert_eq!(all_pages(&paged), ["abc\n", "012345", "6789A\n", "xy"]);
        let spans: Vec<Span> = (1..=4).map(|p| paged.page(p).unwrap().1).collect();
        let flags: Vec<(usize, usize, bool, bool)> = spans
            .iter()
            .map(|s| (s.start_line, s.end_line, s.continued, s.truncated))
            .collect();
        assert_eq!(
            flags,
            [
                (1, 1, false, false),
                (2, 2, false, true),
                (2, 2, true, false),
                (3, 3, false, false)
            ]
        );
        let (joined, span) = paged.pages(2, 3).unwrap();
        assert_eq!(joined, "0123456789A\n");
        assert_eq!(
            (
                span.start_line,
                span.end_line,
                span.continued,
                span.truncated
            ),
            (2, 2, false, false)
        );
    }

    #[test]
    fn a_long_first_line_is_continued_on_its_second_page() {
        // The original required start_line > 1 for `continued`, so it said false here.
        let paged = Paged::new("x".repeat(10), 4);
        assert_eq!(all_pages(&paged), ["xxxx", "xxxx", "xx"]);
        let (_, span) = paged.page(2).unwrap();
        assert!(span.continued && span.truncated);
    }

    #[test]
    fn multibyte_characters_are_counted_and_never_split() {
        let paged = Paged::new("héllo wörld\n日本語のテキスト".into(), 4);
        assert_eq!(paged.chars(), 20);
        assert_eq!(
            all_pages(&paged),
            ["héll", "o wö", "rld\n", "日本語の", "テキスト"]
        );
        assert_eq!(paged.chars_range(1, 4).0, "éll");
        assert_eq!(paged.chars_range(14, 17).0, "語のテ");
        assert_eq!(paged.chars_range(18, 99).0, "スト");
        assert_eq!(paged.lines(2, 2), "日本語のテキスト");
    }

    #[test]
    fn char_ranges_name_the_lines_of_their_first_and_last_characters() {
        let paged = Paged::new("ab\ncd\nef".into(), 100);
        assert_eq!(paged.chars_range(0, 3), ("ab\n", 1, 1));
        assert_eq!(paged.chars_range(0, 4), ("ab\nc", 1, 2));
        assert_eq!(paged.chars_range(4, 4), ("", 2, 2));
        assert_eq!(paged.chars_range(5, 8), ("\nef", 2, 3));
    }

    fn content_strategy() -> impl Strategy<Value = String> {
        // Few distinct characters so that line breaks and multibyte characters are frequent.
        proptest::collection::vec(prop_oneof!["a", "b", "\n", "é", "語", " "], 0..120)
            .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn pages_cover_the_content_and_respect_the_rules(
            content in content_strategy(),
            page_size in 1usize..12,
        ) {
            let paged = Paged::new(content.clone(), page_size);
            let pages = all_pages(&paged);
            prop_assert_eq!(pages.concat(), content.clone());
            let mut start = 0;
            for (i, page) in pages.iter().enumerate() {
                let len = page.chars().count();
                prop_assert!(len <= page_size, "page {} has {} chars", i + 1, len);
                let last = i + 1 == pages.len();
                prop_assert!(last || len > 0);
                if !last {
                    if page.ends_with('\n') {
                        // Maximal: no line break between the page's end and its limit.
                        let beyond: String = content
                            .chars()
                            .skip(start + len)
                            .take(page_size - len)
                            .collect();
                        prop_assert!(
                            !beyond.contains('\n'),
                            "page {} stops before a line break that fits", i + 1
                        );
                    } else {
                        prop_assert_eq!(len, page_size);
                        prop_assert!(!page.contains('\n'));
                    }
                }
                // Metadata: the lines of the first and last characters, and the cut flags.
                let (_, span) = paged.page(i + 1).unwrap();
                if len > 0 {
                    prop_assert_eq!(span.start_line, paged.line_of(start));
                    prop_assert_eq!(span.end_line, paged.line_of(start + len - 1));
                    let before: Vec<char> = content.chars().take(start).collect();
                    prop_assert_eq!(span.continued, before.last().is_some_and(|c| *c != '\n'));
                    let after = content.chars().nth(start + len);
                    prop_assert_eq!(
                        span.truncated,
                        after.is_some() && !page.ends_with('\n')
                    );
                }
                start += len;
            }
        }

        #[test]
        fn line_and_char_slices_agree_with_the_content(
            content in content_strategy(),
            a in 0usize..130,
            b in 0usize..130,
        ) {
            let paged = Paged::new(content.clone(), 7);
            let lines = reference_lines(&content);
            prop_assert_eq!(paged.total_lines(), lines.len());
            let first = a % lines.len() + 1;
            let last = (first + b % 5).min(lines.len());
            prop_assert_eq!(paged.lines(first, last), lines[first - 1..last].concat());
            let start = a.min(paged.chars());
            let expected: String = content.chars().skip(start).take(b).collect();
            prop_assert_eq!(paged.chars_range(start, start + b).0, expected);
        }
    }
}
