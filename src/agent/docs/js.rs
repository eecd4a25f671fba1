//! JavaScript-compatible primitives: what `String.prototype.trim`, `\s`, `.length`,
//! `Number.prototype.toFixed(1)` and `parseInt(s, 10)` do, so that strata's output equals the
//! original's byte for byte.
//!
//! Uses nothing else in the module.

/// Whether `c` is in JavaScript's `\s` class (and what `trim` removes): ECMAScript's WhiteSpace and
/// LineTerminator, which adds U+FEFF and leaves out U+0085, unlike Rust's `char::is_whitespace`.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// Whether `c` ends a line for JavaScript's regular expressions (`.` never matches it, and `^`/`$`
/// match beside it in multiline mode).
pub fn is_js_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// `s.trim()` as JavaScript does it.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// `s.length` in JavaScript: the number of UTF-16 code units.
pub fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    s.chars().map(char::len_utf16).sum()
}

/// `(bytes / 1024).toFixed(1)`: JavaScript rounds the exact quotient half up (1 280 B gives "1.3"),
/// where Rust's `{:.1}` rounds half to even ("1.2").
pub fn kib_to_fixed_1(bytes: u64) -> String {
    // bytes / 1024 is exact in a double, so the tenths are round_half_up(bytes * 10 / 1024).
    let tenths = (u128::from(bytes) * 10 + 512) / 1024;
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// `parseInt(s, 10)` narrowed to what the configuration needs: `Some(n)` when JavaScript's result
/// is a number greater than zero (saturating at `usize::MAX`), `None` when it is `NaN`, zero or
/// negative. Like JavaScript it skips leading whitespace, takes an optional sign and then the
/// longest run of ASCII digits, ignoring whatever follows (`"12abc"` is 12, `"1e3"` is 1).
pub fn parse_positive_int(s: &str) -> Option<usize> {
    let s = s.trim_start_matches(is_js_whitespace);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let digits = &digits[..end];
    if digits.is_empty() || negative || digits.bytes().all(|b| b == b'0') {
        return None;
    }
    Some(digits.bytes().fold(0usize, |n, b| {
        n.saturating_mul(10).saturating_add(usize::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_fixed_rounds_half_up_like_javascript() {
        assert_eq!(kib_to_fixed_1(1024), "1.0");
        assert_eq!(kib_to_fixed_1(1280), "1.3");
        assert_eq!(kib_to_fixed_1(1536), "1.5");
        assert_eq!(kib_to_fixed_1(1048576), "1024.0");
        assert_eq!(kib_to_fixed_1(1075), "1.0"); // 1.0498...
        assert_eq!(kib_to_fixed_1(1076), "1.1"); // 1.0508...
        assert_eq!(kib_to_fixed_1(u64::MAX), "18014398509481984.0");
    }

    #[test]
    fn utf16_length_counts_surrogate_pairs_twice() {
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("😀"), 2);
    }

    #[test]
    fn trim_uses_the_javascript_whitespace_set() {
        assert_eq!(js_trim("\u{FEFF} a \u{2028}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
    }

    #[test]
    fn parse_int_follows_javascript() {
        assert_eq!(parse_positive_int("25"), Some(25));
        assert_eq!(parse_positive_int("  7"), Some(7));
        assert_eq!(parse_positive_int("+5"), Some(5));
        assert_eq!(parse_positive_int("12abc"), Some(12));
        assert_eq!(parse_positive_int("1e3"), Some(1));
        assert_eq!(parse_positive_int("0x10"), None);
        assert_eq!(parse_positive_int("0"), None);
        assert_eq!(parse_positive_int("-3"), None);
        assert_eq!(parse_positive_int("abc"), None);
        assert_eq!(parse_positive_int(""), None);
        assert_eq!(
            parse_positive_int("99999999999999999999999"),
            Some(usize::MAX)
        );
    }
}
