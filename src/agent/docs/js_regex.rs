//! `compile_js_regex`: a search pattern written for JavaScript's `new RegExp(pattern, "is")`,
//! translated for the linear-time `regex` crate, and `regex_source`, the pattern as JavaScript's
//! `regex.source` shows it.
//!
//! Uses nothing else in the module.
//!
//! The translation keeps JavaScript's meaning where the syntaxes differ: `\d`, `\w`, `\b` are
//! ASCII and `\s` is JavaScript's whitespace set; a `{` that does not start a quantifier, and a
//! lone `]` or `}`, are literals; `[]` matches nothing and `[^]` anything; `\1` without groups is
//! an octal escape, `\p` is the letter `p`, `\cJ` a control character, `\uXXXX` a code unit. The
//! constructs JavaScript rejects and the crate would accept (`(?i)`, `a**`, `^*`) are rejected.
//! Look-around and backreferences need backtracking, so they are refused with a message that says
//! why: an agent's pattern must never be able to hang the server.
//!
//! Known differences: inside a class, case-insensitive matching also takes `ſ` for `s` and the
//! Kelvin sign for `k` (JavaScript does not); patterns match characters, where JavaScript's
//! non-Unicode mode sees UTF-16 code units (`.` is one code unit there).

use regex::{Regex, RegexBuilder};

/// JavaScript's `\s` as a class body.
const JS_SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
/// A class that matches nothing.
const NOTHING: &str = r"[^\x00-\x{10FFFF}]";
/// A class that matches any character.
const ANYTHING: &str = r"[\x00-\x{10FFFF}]";
/// Why look-around and backreferences are refused.
const LINEAR_TIME: &str = "strata's regular expression engine runs in linear time (so that no \
    pattern can hang the server) and does not support look-around ((?=, (?!, (?<=, (?<!) or \
    backreferences (\\1, \\k<name>)";

/// Compiles `pattern` (already trimmed) with JavaScript's flags `is`: case-insensitive, `.`
/// matching line breaks.
///
/// # Errors
/// The reason JavaScript or the linear-time engine rejects the pattern, in words.
pub fn compile_js_regex(pattern: &str) -> Result<Regex, String> {
    let translated = translate(pattern)?;
    RegexBuilder::new(&translated)
        .case_insensitive(true)
        .dot_matches_new_line(true)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            let last = text.lines().last().unwrap_or(&text);
            last.strip_prefix("error: ").unwrap_or(last).to_owned()
        })
}

/// What JavaScript's `regex.source` gives for `pattern`: `/` outside a class escaped as `\/`,
/// line terminators written as escapes, `(?:)` for an empty pattern.
pub fn regex_source(pattern: &str) -> String {
    if pattern.is_empty() {
        return "(?:)".to_owned();
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => match chars.get(i + 1) {
                // The backslash goes; the terminator after it is escaped on the next turn.
                Some('\n' | '\r' | '\u{2028}' | '\u{2029}') => {}
                Some(&next) => {
                    out.push('\\');
                    out.push(next);
                    i += 1;
                }
                None => out.push('\\'),
            },
            '/' if !in_class => out.push_str("\\/"),
            '[' => {
                in_class = true;
                out.push(c);
            }
            ']' => {
                in_class = false;
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// Rewrites a JavaScript (non-Unicode mode) pattern in the `regex` crate's syntax.
fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let (groups, named) = count_groups(&chars);
    let mut t = Translator {
        chars: &chars,
        i: 0,
        out: String::with_capacity(pattern.len() * 2),
        groups,
        named,
    };
    t.pattern()?;
    Ok(t.out)
}

/// The number of capturing groups and whether any is named (which decides what `\1` and `\k`
/// mean).
fn count_groups(chars: &[char]) -> (usize, bool) {
    let (mut groups, mut named) = (0, false);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' => in_class = true,
            ']' => in_class = false,
            '(' if !in_class => {
                if chars.get(i + 1) != Some(&'?') {
                    groups += 1;
                } else if chars.get(i + 2) == Some(&'<')
                    && !matches!(chars.get(i + 3), Some('=' | '!'))
                {
                    groups += 1;
                    named = true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    (groups, named)
}

struct Translator<'a> {
    chars: &'a [char],
    i: usize,
    out: String,
    groups: usize,
    named: bool,
}

impl Translator<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    fn pattern(&mut self) -> Result<(), String> {
        let mut can_repeat = false;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '\\' => can_repeat = self.escape()?,
                '(' => {
                    self.group_open()?;
                    can_repeat = false;
                }
                ')' => {
                    self.out.push(')');
                    can_repeat = true;
                }
                '[' => {
                    self.class()?;
                    can_repeat = true;
                }
                '*' | '+' | '?' => {
                    if !can_repeat {
                        return Err("Nothing to repeat".to_owned());
                    }
                    self.out.push(c);
                    self.lazy();
                    can_repeat = false;
                }
                '{' => {
                    if let Some(len) = self.braces_quantifier() {
                        if !can_repeat {
                            return Err("Nothing to repeat".to_owned());
                        }
                        self.out.push('{');
                        self.out.extend(&self.chars[self.i..self.i + len]);
                        self.i += len;
                        self.lazy();
                        can_repeat = false;
                    } else {
                        self.out.push_str("\\{");
                        can_repeat = true;
                    }
                }
                '|' | '^' | '$' => {
                    self.out.push(c);
                    can_repeat = false;
                }
                '.' => {
                    self.out.push('.');
                    can_repeat = true;
                }
                _ => {
                    self.literal(Some(c));
                    can_repeat = true;
                }
            }
        }
        Ok(())
    }

    fn lazy(&mut self) {
        if self.peek(0) == Some('?') {
            self.out.push('?');
            self.i += 1;
        }
    }

    /// The length of `n}`, `n,}` or `n,m}` after a `{`, if that is what follows.
    fn braces_quantifier(&self) -> Option<usize> {
        let rest = &self.chars[self.i..];
        let digits = |from: usize| {
            rest[from..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
        };
        let n = digits(0);
        if n == 0 {
            return None;
        }
        match rest.get(n) {
            Some('}') => Some(n + 1),
            Some(',') => {
                let m = digits(n + 1);
                (rest.get(n + 1 + m) == Some(&'}')).then_some(n + 2 + m)
            }
            _ => None,
        }
    }

    fn group_open(&mut self) -> Result<(), String> {
        if self.peek(0) != Some('?') {
            self.out.push('(');
            return Ok(());
        }
        match (self.peek(1), self.peek(2)) {
            (Some(':'), _) => {
                self.i += 2;
                self.out.push_str("(?:");
                Ok(())
            }
            (Some('=' | '!'), _) | (Some('<'), Some('=' | '!')) => {
                Err(format!("look-around is not supported: {LINEAR_TIME}"))
            }
            (Some('<'), _) => {
                let start = self.i + 2;
                let len = self.chars[start..]
                    .iter()
                    .position(|&c| c == '>')
                    .ok_or("Invalid capture group name")?;
                let name: String = self.chars[start..start + len].iter().collect();
                let valid = name.chars().enumerate().all(|(k, c)| {
                    c == '_' || c == '$' || c.is_alphabetic() || (k > 0 && c.is_numeric())
                });
                if name.is_empty() || !valid {
                    return Err("Invalid capture group name".to_owned());
                }
                self.i = start + len + 1;
                self.out.push_str("(?P<");
                self.out.push_str(&name);
                self.out.push('>');
                Ok(())
            }
            _ => Err("Invalid group".to_owned()),
        }
    }

    /// Translates the escape after a `\` outside a class; returns whether a quantifier may follow.
    fn escape(&mut self) -> Result<bool, String> {
        let Some(e) = self.peek(0) else {
            return Err("\\ at end of pattern".to_owned());
        };
        self.i += 1;
        match e {
            'd' => self.out.push_str("[0-9]"),
            'D' => self.out.push_str("[^0-9]"),
            'w' => self.out.push_str("(?-i:[0-9A-Za-z_])"),
            'W' => self.out.push_str("(?-i:[^0-9A-Za-z_])"),
            's' => self.out.push_str(&format!("[{JS_SPACE}]")),
            'S' => self.out.push_str(&format!("[^{JS_SPACE}]")),
            'b' => {
                self.out.push_str("(?-u:\\b)");
                return Ok(false);
            }
            'B' => {
                self.out.push_str("(?-u:\\B)");
                return Ok(false);
            }
            '1'..='9' => {
                let digits: String = std::iter::once(e)
                    .chain(
                        self.chars[self.i..]
                            .iter()
                            .copied()
                            .take_while(char::is_ascii_digit),
                    )
                    .collect();
                let n: usize = digits.parse().unwrap_or(usize::MAX);
                if n <= self.groups {
                    return Err(format!("backreferences are not supported: {LINEAR_TIME}"));
                }
                self.i -= 1;
                let c = self.legacy_octal();
                self.literal(Some(c));
            }
            '0' => {
                self.i -= 1;
                let c = self.legacy_octal();
                self.literal(Some(c));
            }
            'k' if self.named => {
                return Err(format!("backreferences are not supported: {LINEAR_TIME}"));
            }
            _ => {
                let c = self.character_escape(e, false);
                self.literal(c);
            }
        }
        Ok(true)
    }

    /// Reads a legacy octal escape (or `\8`, `\9`) starting at the digit under the cursor.
    fn legacy_octal(&mut self) -> char {
        let first = self.peek(0).unwrap_or('0');
        self.i += 1;
        if !('0'..='7').contains(&first) {
            return first;
        }
        let mut value = first.to_digit(8).unwrap_or(0);
        let max_len = if first <= '3' { 3 } else { 2 };
        for _ in 1..max_len {
            match self.peek(0).and_then(|c| c.to_digit(8)) {
                Some(d) => {
                    value = value * 8 + d;
                    self.i += 1;
                }
                None => break,
            }
        }
        char::from_u32(value).unwrap_or('\0')
    }

    /// The character an escape stands for (`e` is after the backslash, already consumed);
    /// identity escapes give the character itself, and `None` is a lone surrogate, which nothing
    /// in a Rust string can match.
    fn character_escape(&mut self, e: char, in_class: bool) -> Option<char> {
        Some(match e {
            't' => '\t',
            'n' => '\n',
            'v' => '\u{0B}',
            'f' => '\u{0C}',
            'r' => '\r',
            'c' => match self.peek(0) {
                Some(l)
                    if l.is_ascii_alphabetic()
                        || (in_class && (l.is_ascii_digit() || l == '_')) =>
                {
                    self.i += 1;
                    char::from_u32(u32::from(l) % 32).unwrap_or(l)
                }
                _ => {
                    // `\c` not before a control letter is a backslash; the `c` is read next.
                    self.i -= 1;
                    '\\'
                }
            },
            'x' => self.hex(2).unwrap_or('x'),
            'u' => return self.unicode_escape().unwrap_or(Some('u')),
            _ => e,
        })
    }

    fn hex(&mut self, len: usize) -> Option<char> {
        let code = self.hex_value(len)?;
        self.i += len;
        char::from_u32(code)
    }

    fn hex_value(&self, len: usize) -> Option<u32> {
        let digits = self.chars.get(self.i..self.i + len)?;
        digits
            .iter()
            .try_fold(0u32, |acc, c| c.to_digit(16).map(|d| acc * 16 + d))
    }

    /// `\uXXXX`, joining a surrogate pair written as two escapes: `None` when no four hex
    /// digits follow, `Some(None)` for a lone surrogate.
    fn unicode_escape(&mut self) -> Option<Option<char>> {
        let unit = self.hex_value(4)?;
        self.i += 4;
        if (0xD800..0xDC00).contains(&unit)
            && self.peek(0) == Some('\\')
            && self.peek(1) == Some('u')
        {
            self.i += 2;
            if let Some(low) = self.hex_value(4).filter(|l| (0xDC00..0xE000).contains(l)) {
                self.i += 4;
                return Some(char::from_u32(
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00),
                ));
            }
            self.i -= 2;
        }
        Some(char::from_u32(unit))
    }

    /// Writes a literal character (`None`: something that matches nothing). `s` and `k` are
    /// written as explicit pairs: Unicode case folding would also match `ſ` and the Kelvin sign,
    /// which JavaScript's case-insensitive mode does not.
    fn literal(&mut self, c: Option<char>) {
        match c {
            Some('s' | 'S') => self.out.push_str("(?-i:[sS])"),
            Some('k' | 'K') => self.out.push_str("(?-i:[kK])"),
            Some(c) => self
                .out
                .push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            None => self.out.push_str(NOTHING),
        }
    }

    /// Translates a character class; the `[` is consumed.
    fn class(&mut self) -> Result<(), String> {
        let negated = self.peek(0) == Some('^');
        if negated {
            self.i += 1;
        }
        if self.peek(0) == Some(']') {
            self.i += 1;
            self.out.push_str(if negated { ANYTHING } else { NOTHING });
            return Ok(());
        }
        self.out.push_str(if negated { "[^" } else { "[" });
        let mut last = Last::Start;
        loop {
            let Some(c) = self.peek(0) else {
                return Err("Unterminated character class".to_owned());
            };
            self.i += 1;
            match c {
                ']' => {
                    self.out.push(']');
                    return Ok(());
                }
                '-' => {
                    let next_is_class = self.peek(0) == Some('\\')
                        && matches!(self.peek(1), Some('d' | 'D' | 'w' | 'W' | 's' | 'S'));
                    if last == Last::Char && self.peek(0) != Some(']') && !next_is_class {
                        self.out.push('-');
                        last = Last::Dash;
                    } else {
                        self.out.push_str("\\-");
                        last = if last == Last::Dash {
                            Last::RangeEnd
                        } else {
                            Last::Char
                        };
                    }
                }
                '\\' => {
                    let Some(e) = self.peek(0) else {
                        return Err("\\ at end of pattern".to_owned());
                    };
                    self.i += 1;
                    let nested = match e {
                        'd' => Some("[0-9]".to_owned()),
                        'D' => Some("[^0-9]".to_owned()),
                        'w' => Some("[0-9A-Za-z_]".to_owned()),
                        'W' => Some("[^0-9A-Za-z_]".to_owned()),
                        's' => Some(format!("[{JS_SPACE}]")),
                        'S' => Some(format!("[^{JS_SPACE}]")),
                        _ => None,
                    };
                    if let Some(nested) = nested {
                        if last == Last::Dash {
                            // `a-\d` is `a`, `-` and digits in JavaScript; the dash was written
                            // as a range operator, so fix it.
                            self.out.pop();
                            self.out.push_str("\\-");
                        }
                        self.out.push_str(&nested);
                        last = Last::Class;
                        continue;
                    }
                    let ch = match e {
                        'b' => Some('\u{08}'),
                        '0'..='9' => {
                            self.i -= 1;
                            Some(self.legacy_octal())
                        }
                        _ => self.character_escape(e, true),
                    };
                    self.class_char(ch, &mut last);
                }
                _ => self.class_char(Some(c), &mut last),
            }
        }
    }

    /// Writes one character of a class, escaped where the crate's class syntax needs it.
    fn class_char(&mut self, c: Option<char>, last: &mut Last) {
        let Some(c) = c else {
            self.out.push_str(NOTHING);
            *last = Last::Class;
            return;
        };
        if matches!(c, '\\' | '[' | ']' | '^' | '-' | '&' | '~') {
            self.out.push('\\');
        }
        self.out.push(c);
        *last = if *last == Last::Dash {
            Last::RangeEnd
        } else {
            Last::Char
        };
    }
}

/// What the previous item of a class was, so that `-` keeps its JavaScript meaning.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Nothing yet.
    Start,
    /// A character that may start a range.
    Char,
    /// A `-` written as a range operator.
    Dash,
    /// The end of a range.
    RangeEnd,
    /// A class escape such as `\d`, which cannot be a range end point.
    Class,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        compile_js_regex(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
            .is_match(text)
    }

    fn error(pattern: &str) -> String {
        compile_js_regex(pattern).err().unwrap_or_default()
    }

    #[test]
    fn flags_are_case_insensitive_and_dot_all() {
        assert!(matches("hello", "Say HELLO"));
        assert!(matches("foo.*bar", "foo\nthen\nbar"));
        assert!(!matches("^bar", "foo\nbar"));
        assert!(!matches("foo$", "foo\nbar"));
    }

    #[test]
    fn classes_keep_their_javascript_meaning() {
        assert!(!matches(r"^\d$", "٣"));
        assert!(matches(r"^\w+$", "abc_09"));
        assert!(matches("S", "s"));
        assert!(!matches("s", "ſ"));
        assert!(!matches("k", "\u{212A}"));
        assert!(!matches(r"^\w$", "é"));
        assert!(!matches(r"^\w$", "ſ"));
        assert!(matches(r"^\s$", "\u{FEFF}"));
        assert!(!matches(r"^\s$", "\u{85}"));
        assert!(matches(r"\bword\b", "a word here"));
        // ASCII word boundaries: é is not a word character.
        assert!(!matches(r"\bé", "é"));
    }

    #[test]
    fn literal_braces_and_brackets() {
        assert!(matches("a{", "a{"));
        assert!(matches("{foo}", "x{FOO}"));
        assert!(matches("a{2}", "aa"));
        assert!(matches("a{2,}b", "aaab"));
        assert!(matches("x]", "x]"));
        assert!(matches("[[]", "["));
        assert!(matches("[a-]", "-"));
        assert!(matches("[!--]", "-"));
        assert!(matches(r"[\d-z]", "-"));
        assert!(matches("[&&~]", "&"));
        assert!(!matches("[]", "anything"));
        assert!(matches("a[^]b", "a\nb"));
    }

    #[test]
    fn annex_b_escapes() {
        assert!(matches(r"\p{L}", "p{L}"));
        assert!(matches(r"\1", "\u{1}"));
        assert!(matches(r"\101", "A"));
        assert!(matches(r"\8", "8"));
        assert!(matches(r"\cJ", "\n"));
        assert!(matches(r"\c", "\\c"));
        assert!(matches(r"\u00e9", "É"));
        assert!(matches(r"\uD83D\uDE00", "😀"));
        assert!(!matches(r"\uD83D", "x"));
        assert!(matches(r"\x41", "a"));
        assert!(matches(r"\/", "/"));
        assert!(matches(r"(?<year>\d{4})", "2024"));
    }

    #[test]
    fn look_around_and_backreferences_are_refused_with_the_reason() {
        for p in [
            "foo(?=bar)",
            "(?!x)",
            "(?<=a)b",
            "(?<!a)b",
            r"(a)\1",
            r"(?<n>a)\k<n>",
        ] {
            let e = error(p);
            assert!(e.contains("linear time"), "{p}: {e}");
        }
    }

    #[test]
    fn javascript_syntax_errors_stay_errors() {
        for p in [
            "(", "a)", "[a", "*a", "a**", "^*", "(?i)a", "\\", "a{2}{3}", "(?<1a>x)",
        ] {
            assert!(compile_js_regex(p).is_err(), "{p}");
        }
        assert_eq!(error("*"), "Nothing to repeat");
        assert_eq!(error("(?i)x"), "Invalid group");
    }

    #[test]
    fn source_escapes_like_v8() {
        assert_eq!(regex_source("a/b"), r"a\/b");
        assert_eq!(regex_source(r"a\/b"), r"a\/b");
        assert_eq!(regex_source("[/]"), "[/]");
        assert_eq!(regex_source(r"[\]/]/"), r"[\]/]\/");
        assert_eq!(regex_source("a\nb"), r"a\nb");
        assert_eq!(regex_source("a\\\nb"), r"a\nb");
        assert_eq!(regex_source(""), "(?:)");
    }

    proptest::proptest! {
        #[test]
        fn translation_never_panics(p in r"[\\()\[\]{}*+?^$|.a-c0-9dwsbkux:<>=!/-]{0,16}") {
            let _ = compile_js_regex(&p);
            let _ = regex_source(&p);
        }
    }
}
