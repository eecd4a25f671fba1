//! `FrontMatter`: the `title`, `description` and `keywords` of a Markdown file's YAML front
//! matter, and the body the sections are parsed from.
//!
//! Uses `js`.
//!
//! The block is found as docs-mcp finds it, with the pattern
//! `^---\s*\n([\s\S]*?)\n---\s*\n([\s\S]*)$` (JavaScript semantics, backtracking included). The
//! YAML is read by a small parser of the subset front matter uses, in place of js-yaml:
//! - a top-level block mapping of `key: value` lines (plain, single- or double-quoted keys);
//!   `#` comments; blank lines;
//! - values: plain scalars (continued on more-indented lines), single- and double-quoted scalars
//!   (escapes, several lines), literal `|` and folded `>` blocks (chomping `-`/`+`, an indentation
//!   digit), flow sequences `[a, "b", 3]`, block sequences (`- a` lines, indented or not);
//! - scalars resolve as YAML 1.2's core schema does: `null`/`~`/empty, `true`/`false`, integers,
//!   floats; anything else is a string.
//!
//! Nested mappings, flow mappings, anchors, aliases and tags are skipped: their key counts as
//! absent. A document that is not a mapping (a lone scalar or a list) gives no fields, as with
//! js-yaml where `metadata.title` is then undefined. What js-yaml rejects and this parser can
//! tell (a duplicated key, an unterminated quote or flow sequence, text after a closing quote, `: `
//! inside a plain value, a top-level line that is not an entry) is a parse error, and then, as in
//! the original, there are no fields and the body is the whole file, front matter included.

use serde_json::{Number, Value};

use super::js::is_js_whitespace;

/// The front-matter fields the docs tools show, each as the JSON value js-yaml would give.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrontMatter {
    /// The `title` value, if present.
    pub title: Option<Value>,
    /// The `description` value, if present.
    pub description: Option<Value>,
    /// The `keywords` value, if present.
    pub keywords: Option<Value>,
}

/// Splits a file's text into its front matter and the body its sections come from.
pub fn split_front_matter(text: &str) -> (FrontMatter, &str) {
    let Some((yaml, body)) = match_front_matter(text) else {
        return (FrontMatter::default(), text);
    };
    match parse_yaml(yaml) {
        Ok(fields) => {
            let field = |name: &str| {
                fields
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .and_then(|(_, v)| v.clone())
            };
            let front = FrontMatter {
                title: field("title"),
                description: field("description"),
                keywords: field("keywords"),
            };
            (front, body)
        }
        Err(YamlError) => (FrontMatter::default(), text),
    }
}

/// The two groups of `^---\s*\n([\s\S]*?)\n---\s*\n([\s\S]*)$`, found with JavaScript's
/// backtracking order: the opening `\s*` is greedy, the YAML group lazy.
fn match_front_matter(text: &str) -> Option<(&str, &str)> {
    if !text.starts_with("---") {
        return None;
    }
    // The opening `\s*\n` can end at any newline inside the whitespace run after `---`; greedy
    // means the last one is tried first.
    let run_end = whitespace_run_end(text, 3);
    let openings: Vec<usize> = text[3..run_end]
        .char_indices()
        .filter(|&(_, c)| c == '\n')
        .map(|(i, _)| 3 + i)
        .collect();
    for &newline in openings.iter().rev() {
        let yaml_start = newline + 1;
        // The lazy group ends at the first "\n---" whose `\s*\n` can match.
        let mut from = yaml_start;
        while let Some(offset) = text[from..].find("\n---") {
            let close = from + offset;
            let after = close + 4;
            let end = whitespace_run_end(text, after);
            if let Some(last) = text[after..end].rfind('\n') {
                return Some((&text[yaml_start..close], &text[after + last + 1..]));
            }
            from = close + 1;
        }
    }
    None
}

/// The byte index where the run of JavaScript whitespace starting at `from` ends.
fn whitespace_run_end(text: &str, from: usize) -> usize {
    text[from..]
        .char_indices()
        .find(|&(_, c)| !is_js_whitespace(c))
        .map_or(text.len(), |(i, _)| from + i)
}

/// YAML the subset parser can tell js-yaml would reject.
#[derive(Debug)]
struct YamlError;

/// One source line: its indentation (spaces) and the text after it.
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

impl Line<'_> {
    fn is_blank_or_comment(&self) -> bool {
        let t = self.text.trim_end();
        t.is_empty() || t.starts_with('#')
    }
}

/// The top-level entries of the document, each with its value (`None` for values the subset
/// skips); empty when the document is not a mapping.
fn parse_yaml(yaml: &str) -> Result<Vec<(String, Option<Value>)>, YamlError> {
    // A final newline ends the last line; it does not start an empty one.
    let yaml = yaml.strip_suffix('\n').unwrap_or(yaml);
    let lines: Vec<Line<'_>> = yaml
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            let text = l.trim_start_matches(' ');
            Line {
                indent: l.len() - text.len(),
                text,
            }
        })
        .collect();
    let Some(first) = lines.iter().position(|l| !l.is_blank_or_comment()) else {
        return Ok(Vec::new());
    };
    if split_key(lines[first].text).is_none() {
        // A scalar or sequence document: no fields.
        return Ok(Vec::new());
    }
    let indent = lines[first].indent;
    let mut entries: Vec<(String, Option<Value>)> = Vec::new();
    let mut i = first;
    while i < lines.len() {
        let line = lines[i];
        if line.is_blank_or_comment() {
            i += 1;
            continue;
        }
        if line.indent != indent {
            return Err(YamlError);
        }
        let (key, rest) = split_key(line.text).ok_or(YamlError)?;
        if entries.iter().any(|(k, _)| *k == key) {
            return Err(YamlError);
        }
        let (value, next) = parse_value(&lines, i, indent, rest)?;
        entries.push((key, value));
        i = next;
    }
    Ok(entries)
}

/// Splits `key: rest` (or `key:` at the end of the line); `None` when the line is not an entry.
fn split_key(text: &str) -> Option<(String, &str)> {
    let first = text.chars().next()?;
    if first == '"' || first == '\'' {
        let (key, after) = quoted_single_line(text)?;
        let after = after.trim_start_matches([' ', '\t']);
        let rest = after.strip_prefix(':')?;
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            return None;
        }
        return Some((key, rest));
    }
    if ",[]{}#&*!|>%@`".contains(first) {
        return None;
    }
    if matches!(first, '-' | '?' | ':')
        && text[1..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
    {
        return None;
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || matches!(bytes[i + 1], b' ' | b'\t')) {
            let key = text[..i].trim_end();
            if key.is_empty() || key.contains(" #") {
                return None;
            }
            return Some((key.to_owned(), &text[i + 1..]));
        }
        if bytes[i] == b'#' && i > 0 && matches!(bytes[i - 1], b' ' | b'\t') {
            return None;
        }
        i += 1;
    }
    None
}

/// Parses the value of the entry on line `at` (whose text after the colon is `rest`), reading
/// continuation lines; returns the value and the index of the next unread line.
fn parse_value(
    lines: &[Line<'_>],
    at: usize,
    indent: usize,
    rest: &str,
) -> Result<(Option<Value>, usize), YamlError> {
    let inline = strip_comment(rest).trim();
    // Lines belonging to this entry: more indented than the key, or blank.
    let mut end = at + 1;
    while end < lines.len() && (lines[end].indent > indent || lines[end].text.trim().is_empty()) {
        end += 1;
    }
    // Trailing blank lines belong to a block scalar only.
    let with_blanks = &lines[at + 1..end];
    while end > at + 1 && lines[end - 1].text.trim().is_empty() {
        end -= 1;
    }
    let body = &lines[at + 1..end];
    let Some(first) = inline.chars().next() else {
        return parse_nested(lines, at + 1, end, indent);
    };
    let value = match first {
        '"' | '\'' => {
            let joined = join_lines(rest.trim_start(), body);
            let (text, after) = quoted_multi_line(&joined)?;
            if !strip_comment(after).trim().is_empty() {
                return Err(YamlError);
            }
            Some(Value::String(text))
        }
        '|' | '>' => Some(Value::String(block_scalar(inline, with_blanks, indent)?)),
        '[' => {
            let joined = join_lines(rest.trim_start(), body);
            flow_sequence(&joined)?
        }
        '{' | '&' | '*' | '!' => {
            if first == '{' && !inline.ends_with('}') && body.is_empty() {
                return Err(YamlError);
            }
            None
        }
        _ => {
            let mut text = inline.to_owned();
            for line in body.iter().filter(|l| !l.is_blank_or_comment()) {
                text.push(' ');
                text.push_str(strip_comment(line.text).trim());
            }
            if text.contains(": ") || text.ends_with(':') {
                return Err(YamlError);
            }
            Some(resolve_plain(&text))
        }
    };
    Ok((value, end))
}

/// The value of an entry whose text after the colon is empty: a block sequence, a nested block
/// (skipped), or null.
fn parse_nested(
    lines: &[Line<'_>],
    from: usize,
    end: usize,
    indent: usize,
) -> Result<(Option<Value>, usize), YamlError> {
    let mut first = from;
    while first < end && lines[first].is_blank_or_comment() {
        first += 1;
    }
    // A sequence may sit at the key's own indentation.
    let seq_indent = if first < end {
        lines[first].indent
    } else if from < lines.len() && lines[from].indent == indent && is_item(lines[from].text) {
        first = from;
        indent
    } else {
        return Ok((Some(Value::Null), end));
    };
    if !is_item(lines[first].text) {
        // A nested mapping or a multi-line plain scalar: skipped.
        return Ok((None, end));
    }
    let mut items = Vec::new();
    let mut supported = true;
    let mut i = first;
    while i < lines.len() {
        let line = lines[i];
        if line.is_blank_or_comment() {
            i += 1;
            continue;
        }
        if line.indent < seq_indent || (line.indent == seq_indent && !is_item(line.text)) {
            break;
        }
        if line.indent > seq_indent {
            // Continuation of the previous item: only plain scalars are supported here.
            supported = false;
            i += 1;
            continue;
        }
        let item = line.text.strip_prefix('-').unwrap_or("").trim_start();
        let item = strip_comment(item).trim();
        match item.chars().next() {
            None => items.push(Value::Null),
            Some('"' | '\'') => {
                let (text, after) = quoted_single_line(item).ok_or(YamlError)?;
                if !after.trim().is_empty() {
                    return Err(YamlError);
                }
                items.push(Value::String(text));
            }
            Some('[') => match flow_sequence(item)? {
                Some(v) => items.push(v),
                None => supported = false,
            },
            Some('{' | '&' | '*' | '!' | '|' | '>' | '-') => supported = false,
            Some(_) => {
                if split_key(item).is_some() {
                    supported = false;
                } else {
                    items.push(resolve_plain(item));
                }
            }
        }
        i += 1;
    }
    let next = i.max(end);
    Ok((supported.then_some(Value::Array(items)), next))
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ") || text.starts_with("-\t")
}

/// The text of a value that may continue on the following lines, joined with newlines.
fn join_lines(first: &str, body: &[Line<'_>]) -> String {
    let mut s = first.to_owned();
    for line in body {
        s.push('\n');
        s.push_str(line.text);
    }
    s
}

/// Removes a ` #` comment from a plain value.
fn strip_comment(text: &str) -> &str {
    if text.starts_with('#') {
        return "";
    }
    match text.find(" #").or_else(|| text.find("\t#")) {
        Some(i) => &text[..i],
        None => text,
    }
}

/// A quoted scalar that must close on its line: the value and the text after the quote.
fn quoted_single_line(text: &str) -> Option<(String, &str)> {
    quoted_multi_line(text).ok()
}

/// A single- or double-quoted scalar, possibly over several lines (folded as YAML does): the
/// value and the text after the closing quote.
fn quoted_multi_line(text: &str) -> Result<(String, &str), YamlError> {
    let mut chars = text.char_indices();
    let Some((_, quote)) = chars.next() else {
        return Err(YamlError);
    };
    let mut out = String::new();
    let mut pending_newlines = 0usize;
    let mut chars = chars.peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            // Fold: trailing spaces of this line and leading spaces of the next go.
            let trimmed = out.trim_end_matches([' ', '\t']).len();
            out.truncate(trimmed);
            pending_newlines += 1;
            while let Some(&(_, n)) = chars.peek() {
                if n == ' ' || n == '\t' {
                    chars.next();
                } else if n == '\n' {
                    pending_newlines += 1;
                    chars.next();
                } else {
                    break;
                }
            }
            continue;
        }
        if pending_newlines > 0 {
            if pending_newlines == 1 {
                out.push(' ');
            } else {
                out.extend(std::iter::repeat_n('\n', pending_newlines - 1));
            }
            pending_newlines = 0;
        }
        if c == quote {
            if quote == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') {
                chars.next();
                out.push('\'');
                continue;
            }
            return Ok((out, &text[i + c.len_utf8()..]));
        }
        if quote == '"' && c == '\\' {
            let Some((_, e)) = chars.next() else {
                return Err(YamlError);
            };
            match e {
                '0' => out.push('\0'),
                'a' => out.push('\u{07}'),
                'b' => out.push('\u{08}'),
                't' | '\t' => out.push('\t'),
                'n' => out.push('\n'),
                'v' => out.push('\u{0B}'),
                'f' => out.push('\u{0C}'),
                'r' => out.push('\r'),
                'e' => out.push('\u{1B}'),
                ' ' => out.push(' '),
                '"' => out.push('"'),
                '/' => out.push('/'),
                '\\' => out.push('\\'),
                'N' => out.push('\u{85}'),
                '_' => out.push('\u{A0}'),
                'L' => out.push('\u{2028}'),
                'P' => out.push('\u{2029}'),
                'x' | 'u' | 'U' => {
                    let len = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let mut code = 0u32;
                    for _ in 0..len {
                        let d = chars
                            .next()
                            .and_then(|(_, h)| h.to_digit(16))
                            .ok_or(YamlError)?;
                        code = code * 16 + d;
                    }
                    out.push(char::from_u32(code).ok_or(YamlError)?);
                }
                '\n' => {
                    // An escaped line break joins the lines without a space.
                    while chars.peek().is_some_and(|&(_, n)| n == ' ' || n == '\t') {
                        chars.next();
                    }
                }
                _ => return Err(YamlError),
            }
            continue;
        }
        out.push(c);
    }
    Err(YamlError)
}

/// A one-level flow sequence of scalars; `Ok(None)` when it holds something the subset skips.
fn flow_sequence(text: &str) -> Result<Option<Value>, YamlError> {
    let inner = text.strip_prefix('[').ok_or(YamlError)?;
    let mut items = Vec::new();
    let mut rest = inner.trim_start_matches(is_flow_space);
    loop {
        if let Some(after) = rest.strip_prefix(']') {
            if !strip_comment(after).trim().is_empty() {
                return Err(YamlError);
            }
            return Ok(Some(Value::Array(items)));
        }
        let first = rest.chars().next().ok_or(YamlError)?;
        let after_item = match first {
            '"' | '\'' => {
                let (value, after) = quoted_multi_line(rest)?;
                items.push(Value::String(value));
                after
            }
            '[' | '{' | '&' | '*' | '!' => return skip_flow(rest).map(|()| None),
            _ => {
                let end = rest.find([',', ']']).ok_or(YamlError)?;
                let item = rest[..end].trim_matches(is_flow_space);
                let item = item
                    .split('\n')
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ");
                if item.contains(": ") || item.ends_with(':') {
                    return Ok(None);
                }
                items.push(resolve_plain(&item));
                &rest[end..]
            }
        };
        let after_item = after_item.trim_start_matches(is_flow_space);
        rest = match after_item.strip_prefix(',') {
            Some(r) => r.trim_start_matches(is_flow_space),
            None if after_item.starts_with(']') => after_item,
            None => return Err(YamlError),
        };
    }
}

fn is_flow_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n')
}

/// Checks that a nested flow collection closes, without keeping it.
fn skip_flow(text: &str) -> Result<(), YamlError> {
    let mut depth = 0i32;
    for c in text.chars() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    if depth <= 0 { Ok(()) } else { Err(YamlError) }
}

/// A literal (`|`) or folded (`>`) block scalar with its header and its more-indented lines.
fn block_scalar(header: &str, body: &[Line<'_>], parent: usize) -> Result<String, YamlError> {
    let folded = header.starts_with('>');
    let mut chomp = ' ';
    let mut explicit = None;
    for c in header[1..].chars() {
        match c {
            '-' | '+' => chomp = c,
            '1'..='9' => explicit = c.to_digit(10).map(|d| parent + d as usize),
            ' ' | '\t' => break,
            _ => return Err(YamlError),
        }
    }
    let indent = explicit
        .or_else(|| {
            body.iter()
                .find(|l| !l.text.trim().is_empty())
                .map(|l| l.indent)
        })
        .unwrap_or(parent + 1);
    let raw: Vec<String> = body
        .iter()
        .map(|l| {
            let full = " ".repeat(l.indent) + l.text;
            full.get(indent..).unwrap_or("").to_owned()
        })
        .collect();
    let mut text = String::new();
    let mut empty_run = 0usize;
    let mut at_start = true;
    let mut previous_more_indented = false;
    for line in &raw {
        if line.trim().is_empty() {
            empty_run += 1;
            continue;
        }
        let more_indented = line.starts_with([' ', '\t']);
        // Folding turns the break between two normal lines into a space (blank lines stay).
        let folds = folded && !more_indented && !previous_more_indented;
        let breaks = if at_start || folds {
            empty_run
        } else {
            empty_run + 1
        };
        if !at_start && breaks == 0 {
            text.push(' ');
        }
        text.extend(std::iter::repeat_n('\n', breaks));
        text.push_str(line);
        at_start = false;
        previous_more_indented = more_indented;
        empty_run = 0;
    }
    match chomp {
        '-' => {}
        '+' if !at_start => text.extend(std::iter::repeat_n('\n', empty_run + 1)),
        '+' => text.extend(std::iter::repeat_n('\n', empty_run)),
        _ if !at_start => text.push('\n'),
        _ => {}
    }
    Ok(text)
}

/// A plain scalar resolved by YAML 1.2's core schema: null, booleans, integers, floats, strings.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let negative = text.starts_with('-');
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if let Some(n) = resolve_int(unsigned) {
        let n = if negative { -n } else { n };
        if let Some(v) = js_number(n) {
            return v;
        }
    }
    // js-yaml reads a sign only before a digit: "-.5" is a string.
    let signed_dot = unsigned.len() != text.len() && unsigned.starts_with('.');
    let underscores_ok = !text.ends_with('_') && !unsigned.starts_with('_');
    if underscores_ok
        && !signed_dot
        && is_float(&unsigned.replace('_', ""))
        && let Ok(f) = text.replace('_', "").parse::<f64>()
    {
        return js_number(f).unwrap_or_else(|| Value::String(text.to_owned()));
    }
    Value::String(text.to_owned())
}

/// An unsigned YAML 1.2 integer as js-yaml reads it (`0x1A`, `0o17`, `0b101`, decimal; `_`
/// allowed between digits), as a double like JavaScript's numbers.
fn resolve_int(s: &str) -> Option<f64> {
    let (radix, digits) = match s.get(..2) {
        Some("0x") => (16, &s[2..]),
        Some("0o") => (8, &s[2..]),
        Some("0b") => (2, &s[2..]),
        _ => (10, s),
    };
    let first = digits.chars().next()?;
    if (radix == 10 && !first.is_ascii_digit()) || digits.ends_with('_') {
        return None;
    }
    let mut value = 0f64;
    let mut any = false;
    for c in digits.chars().filter(|&c| c != '_') {
        value = value * f64::from(radix) + f64::from(c.to_digit(radix)?);
        any = true;
    }
    any.then_some(value)
}

fn is_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next();
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits(int) && digits(f) && !(int.is_empty() && f.is_empty()),
        None => !int.is_empty() && digits(int),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok && (frac.is_some() || exponent.is_some())
}

/// A float as JSON.stringify would print it: integral values without a fraction.
fn js_number(f: f64) -> Option<Value> {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        // Integral and well inside the i64 range, so the cast is exact.
        return Some(Value::Number((f as i64).into()));
    }
    Number::from_f64(f).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn front(text: &str) -> FrontMatter {
        split_front_matter(text).0
    }

    #[test]
    fn finds_the_block_and_the_body() {
        let (f, body) =
            split_front_matter("---\ntitle: Test Document\ndescription: A test\n---\n# Main\n");
        assert_eq!(f.title, Some(json!("Test Document")));
        assert_eq!(f.description, Some(json!("A test")));
        assert_eq!(body, "# Main\n");
    }

    #[test]
    fn no_front_matter_keeps_the_whole_text() {
        let text = "# Main Content\n\nNo front matter here.";
        assert_eq!(split_front_matter(text), (FrontMatter::default(), text));
        // "---\n---\n# Content" has no "\n---" after the opening newline.
        let text = "---\n---\n# Content";
        assert_eq!(split_front_matter(text).1, text);
    }

    #[test]
    fn backtracks_like_javascript() {
        // Blank lines after the opening dashes; the closing `\s*\n` eats blank lines too.
        let (f, body) = split_front_matter("---\n\ntitle: x\n---\n\n\n# H");
        assert_eq!(f.title, Some(json!("x")));
        assert_eq!(body, "# H");
        // An empty block needs a blank line.
        assert_eq!(split_front_matter("---\n\n---\n# H").1, "# H");
        // The closing line needs a newline after it.
        assert_eq!(
            split_front_matter("---\ntitle: x\n---").1,
            "---\ntitle: x\n---"
        );
        // CRLF files.
        let (f, body) = split_front_matter("---\r\ntitle: x\r\n---\r\n# H\r\n");
        assert_eq!(f.title, Some(json!("x")));
        assert_eq!(body, "# H\r\n");
    }

    #[test]
    fn a_parse_error_keeps_the_whole_text() {
        let text = "---\ninvalid: yaml: content:\n---\n# Content";
        assert_eq!(split_front_matter(text), (FrontMatter::default(), text));
        let text = "---\ntitle: a\ntitle: b\n---\n# C";
        assert_eq!(split_front_matter(text).1, text);
        let text = "---\ntitle: \"open\n---\n# C";
        assert_eq!(split_front_matter(text).1, text);
        let text = "---\ntitle: a\nnot an entry\n---\n# C";
        assert_eq!(split_front_matter(text).1, text);
    }

    #[test]
    fn scalars_and_quotes() {
        assert_eq!(
            front("---\ntitle: 'It''s'\n---\n").title,
            Some(json!("It's"))
        );
        assert_eq!(
            front("---\ntitle: \"Tab\\there \\u00e9\"\n---\n").title,
            Some(json!("Tab\there é"))
        );
        assert_eq!(front("---\ntitle: 42\n---\n").title, Some(json!(42)));
        assert_eq!(front("---\ntitle: 1.50\n---\n").title, Some(json!(1.5)));
        assert_eq!(front("---\ntitle: 2.0\n---\n").title, Some(json!(2)));
        assert_eq!(front("---\ntitle: true\n---\n").title, Some(json!(true)));
        assert_eq!(front("---\ntitle: 0x1A\n---\n").title, Some(json!(26)));
        assert_eq!(front("---\ntitle: -0o17\n---\n").title, Some(json!(-15)));
        assert_eq!(front("---\ntitle: 1_000\n---\n").title, Some(json!(1000)));
        assert_eq!(front("---\ntitle: 007\n---\n").title, Some(json!(7)));
        assert_eq!(front("---\ntitle: 1_\n---\n").title, Some(json!("1_")));
        assert_eq!(front("---\ntitle: ~\n---\n").title, Some(json!(null)));
        assert_eq!(front("---\ntitle:\n---\n").title, Some(json!(null)));
        assert_eq!(front("---\ntitle: A # note\n---\n").title, Some(json!("A")));
        assert_eq!(front("---\ntitle: C#\n---\n").title, Some(json!("C#")));
        assert_eq!(
            front("---\ntitle: http://x.y/z\n---\n").title,
            Some(json!("http://x.y/z"))
        );
        assert_eq!(
            front("---\ndescription: one\n  two\n  three\n---\n").description,
            Some(json!("one two three"))
        );
        assert_eq!(
            front("---\ndescription: \"one\n  two\"\n---\n").description,
            Some(json!("one two"))
        );
        assert_eq!(front("---\n\"title\": x\n---\n").title, Some(json!("x")));
    }

    #[test]
    fn block_scalars() {
        assert_eq!(
            front("---\ndescription: |\n  line one\n  line two\ntitle: t\n---\n").description,
            Some(json!("line one\nline two\n"))
        );
        assert_eq!(
            front("---\ndescription: >-\n  folded\n  text\n\n  para\n---\n").description,
            Some(json!("folded text\npara"))
        );
        assert_eq!(
            front("---\ndescription: |+\n  keep\n\n\n---\n").description,
            Some(json!("keep\n\n"))
        );
    }

    #[test]
    fn sequences() {
        assert_eq!(
            front("---\nkeywords: [test, \"document\", 3]\n---\n").keywords,
            Some(json!(["test", "document", 3]))
        );
        assert_eq!(
            front("---\nkeywords:\n  - a\n  - 'b c'\n---\n").keywords,
            Some(json!(["a", "b c"]))
        );
        assert_eq!(
            front("---\nkeywords:\n- a\n- b\ntitle: T\n---\n"),
            FrontMatter {
                title: Some(json!("T")),
                description: None,
                keywords: Some(json!(["a", "b"]))
            }
        );
        assert_eq!(front("---\nkeywords: []\n---\n").keywords, Some(json!([])));
        assert_eq!(
            front("---\nkeywords: a, b\n---\n").keywords,
            Some(json!("a, b"))
        );
    }

    #[test]
    fn skipped_constructs_count_as_absent() {
        let f = front("---\ntitle:\n  nested: map\ndescription: {a: 1}\nkeywords: *alias\n---\n");
        assert_eq!(f, FrontMatter::default());
        assert_eq!(front("---\njust a scalar\n---\n"), FrontMatter::default());
        assert_eq!(front("---\n- a list\n---\n"), FrontMatter::default());
        let f = front("---\nauthor:\n  name: x\ntitle: T\n---\n");
        assert_eq!(f.title, Some(json!("T")));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "(---\n)?([a-z\"':#\\[\\]{}|> \n-]{0,40})(\n---\n)?[# a-z\n]{0,10}") {
            let _ = split_front_matter(&text);
        }
    }
}
