//! The line model both patch forms share: a text is a list of lines, each with its own ending.
//!
//! A line ends at `\n`; a `\r` just before that `\n` belongs to the ending (CRLF), and a `\r`
//! anywhere else is an ordinary character. The last line may have no ending (the file does not end
//! with a newline). An empty text has no lines, and a final newline adds none: `"a\n"` is one line,
//! as in seed 004's line index.

/// One line of a text: what it says and how it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Line<'a> {
    /// The line without its ending.
    pub(super) content: &'a str,
    /// `"\n"`, `"\r\n"`, or `""` for a last line without a newline.
    pub(super) ending: &'a str,
}

impl Line<'_> {
    /// The line with its ending, as it stands in the text.
    pub(super) fn push_to(&self, out: &mut String) {
        out.push_str(self.content);
        out.push_str(self.ending);
    }
}

/// Splits `text` into its lines (see the module docs).
pub(super) fn split_lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .map(|piece| {
            if let Some(content) = piece.strip_suffix("\r\n") {
                Line {
                    content,
                    ending: "\r\n",
                }
            } else if let Some(content) = piece.strip_suffix('\n') {
                Line {
                    content,
                    ending: "\n",
                }
            } else {
                Line {
                    content: piece,
                    ending: "",
                }
            }
        })
        .collect()
}

/// Whether `lines` end in CRLF: at least one line has an ending and every ending is `\r\n`.
///
/// An empty text, a text of one line without a newline, and a text mixing LF and CRLF all count
/// as LF.
pub(super) fn uses_crlf(lines: &[Line<'_>]) -> bool {
    let mut endings = lines
        .iter()
        .map(|line| line.ending)
        .filter(|e| !e.is_empty());
    endings.next() == Some("\r\n") && endings.all(|e| e == "\r\n")
}

/// The ending new lines get in a text made of `lines`: CRLF when [`uses_crlf`], LF otherwise.
pub(super) fn style_of(lines: &[Line<'_>]) -> &'static str {
    if uses_crlf(lines) { "\r\n" } else { "\n" }
}

/// Joins lines back into a text.
pub(super) fn join(lines: &[Line<'_>]) -> String {
    let mut out = String::with_capacity(lines.iter().map(|l| l.content.len() + 2).sum());
    for line in lines {
        line.push_to(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endings(text: &str) -> Vec<(&str, &str)> {
        split_lines(text)
            .iter()
            .map(|l| (l.content, l.ending))
            .collect()
    }

    #[test]
    fn lines_end_at_lf_and_keep_crlf_and_lone_cr() {
        assert_eq!(endings(""), vec![]);
        assert_eq!(endings("a"), vec![("a", "")]);
        assert_eq!(endings("a\n"), vec![("a", "\n")]);
        assert_eq!(endings("a\r\nb"), vec![("a", "\r\n"), ("b", "")]);
        assert_eq!(endings("a\rb\n\n"), vec![("a\rb", "\n"), ("", "\n")]);
        assert_eq!(endings("x\r"), vec![("x\r", "")]);
        for text in ["", "a", "a\n", "a\r\nb", "a\rb\n\n", "\r\n\r\n"] {
            assert_eq!(join(&split_lines(text)), text);
        }
    }

    #[test]
    fn crlf_only_when_every_ending_is_crlf() {
        let crlf = |t: &str| uses_crlf(&split_lines(t));
        assert!(crlf("a\r\nb\r\n"));
        assert!(crlf("a\r\nb"));
        assert!(!crlf("a\r\nb\n"));
        assert!(!crlf("a\nb\r\n"));
        assert!(!crlf("a"));
        assert!(!crlf(""));
        assert_eq!(style_of(&split_lines("a\r\n")), "\r\n");
        assert_eq!(style_of(&split_lines("a\n")), "\n");
    }
}
