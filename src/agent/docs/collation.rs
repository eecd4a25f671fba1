//! `compare_filenames`: the order docs-mcp gives files within a directory, which is JavaScript's
//! `a.localeCompare(b)` (ICU's root collation), not byte order.
//!
//! Uses nothing else in the module.
//!
//! ICU compares in levels: first the base characters of the whole strings (case and accents
//! ignored; whitespace, then punctuation and symbols, then digits, then letters), then accents,
//! then case (lowercase first). So `a_b.md < a-b.md < alpha.md`, `api-reference.md < README.md <
//! user-guide.md` and `b.md < B.md`. ASCII follows ICU's root order exactly; Latin-1 letters
//! sort with their base letter and accent (`ß` and `æ` just after `ss` and `ae`). Other characters are an
//! approximation: non-ASCII symbols sort after ASCII punctuation, other letters after `z` by code
//! point. Strings equal at every level fall back to code point order, so the order is total.

use std::cmp::Ordering;

/// ASCII punctuation and symbols in ICU root order, after the whitespace characters.
const PUNCTUATION: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
/// ASCII whitespace in ICU root order.
const WHITESPACE: &str = "\t\n\u{0B}\u{0C}\r ";

const PUNCTUATION_BASE: u32 = 0x10;
const OTHER_SYMBOL_BASE: u32 = 0x100;
const DIGIT_BASE: u32 = 0x20_0000;
const OTHER_NUMBER_BASE: u32 = 0x20_0100;
const LETTER_BASE: u32 = 0x40_0000;
const THORN: u32 = LETTER_BASE + 26;
const OTHER_LETTER_BASE: u32 = 0x50_0000;

/// Accent marks, in ICU's secondary order; a plain letter's own secondary weight is 0.
const ACUTE: u8 = 1;
const GRAVE: u8 = 2;
const CIRCUMFLEX: u8 = 3;
const RING: u8 = 4;
const DIAERESIS: u8 = 5;
const TILDE: u8 = 6;
const CEDILLA: u8 = 7;
const STROKE: u8 = 8;
/// What sets `æ` apart from `ae` and `ß` from `ss`: ICU gives it a secondary weight after every
/// accent, between the two letters.
const LIGATURE: u8 = 100;

/// Case (tertiary) weights: lowercase first.
const LOWER: u8 = 0;
const UPPER: u8 = 1;
const LIGATURE_LOWER: u8 = 2;
const LIGATURE_UPPER: u8 = 3;

/// The three levels of collation weights of a string, as ICU compares them: all base weights,
/// then all accent weights, then all case weights.
#[derive(Default)]
struct Keys {
    primary: Vec<u32>,
    secondary: Vec<u8>,
    tertiary: Vec<u8>,
}

impl Keys {
    fn of(s: &str) -> Self {
        let mut keys = Self::default();
        for c in s.chars() {
            keys.push_char(c);
        }
        keys
    }

    /// A character with a base weight.
    fn push(&mut self, primary: u32, case: u8) {
        self.primary.push(primary);
        self.secondary.push(0);
        self.tertiary.push(case);
    }

    /// A mark with no base weight (an accent), as after a decomposed letter.
    fn push_mark(&mut self, secondary: u8) {
        self.secondary.push(secondary);
        self.tertiary.push(LOWER);
    }

    fn push_char(&mut self, c: char) {
        let case = if c.is_uppercase() { UPPER } else { LOWER };
        if c.is_ascii() {
            if let Some(i) = WHITESPACE.find(c) {
                self.push(1 + position(i), LOWER);
            } else if let Some(i) = PUNCTUATION.find(c) {
                self.push(PUNCTUATION_BASE + position(i), LOWER);
            } else if let Some(d) = c.to_digit(10) {
                self.push(DIGIT_BASE + d, LOWER);
            } else if c.is_ascii_alphabetic() {
                self.push(letter(c), case);
            }
            // Other ASCII (control characters) is ignorable, as in ICU.
            return;
        }
        match latin1_letter(c) {
            Some(Latin1::Accented(base, accent)) => {
                self.push(letter(base), case);
                self.push_mark(accent);
            }
            Some(Latin1::Ligature(first, second)) => {
                let case = if case == UPPER {
                    LIGATURE_UPPER
                } else {
                    LIGATURE_LOWER
                };
                self.push(letter(first), case);
                self.secondary.push(LIGATURE);
                self.tertiary.push(case);
                self.push(letter(second), case);
            }
            Some(Latin1::Thorn) => self.push(THORN, case),
            None if c.is_alphabetic() => {
                let lower = c.to_lowercase().next().unwrap_or(c);
                self.push(OTHER_LETTER_BASE + u32::from(lower), case);
            }
            None if c.is_numeric() => self.push(OTHER_NUMBER_BASE + u32::from(c), LOWER),
            None if !c.is_control() => self.push(OTHER_SYMBOL_BASE + u32::from(c), LOWER),
            None => {}
        }
    }
}

/// The sort key of `name` in [`compare_filenames`]' order (equal keys compare equal there), to
/// sort many names computing each key once.
pub fn collation_key(name: &str) -> (Vec<u32>, Vec<u8>, Vec<u8>) {
    let keys = Keys::of(name);
    (keys.primary, keys.secondary, keys.tertiary)
}

/// Compares two file names the way JavaScript's `localeCompare` does (ICU root collation): case
/// and accents matter only when the strings are otherwise equal, lowercase first.
pub fn compare_filenames(a: &str, b: &str) -> Ordering {
    let (ka, kb) = (Keys::of(a), Keys::of(b));
    ka.primary
        .cmp(&kb.primary)
        .then_with(|| ka.secondary.cmp(&kb.secondary))
        .then_with(|| ka.tertiary.cmp(&kb.tertiary))
        .then_with(|| a.cmp(b))
}

fn position(byte_index: usize) -> u32 {
    u32::try_from(byte_index).unwrap_or(u32::MAX)
}

fn letter(c: char) -> u32 {
    LETTER_BASE + (u32::from(c.to_ascii_lowercase()) - u32::from('a'))
}

/// How ICU sorts a Latin-1 letter.
enum Latin1 {
    /// A base letter and an accent.
    Accented(char, u8),
    /// Two letters with a ligature mark between them (`æ`, `ß`).
    Ligature(char, char),
    /// `þ`, its own letter after `z`.
    Thorn,
}

fn latin1_letter(c: char) -> Option<Latin1> {
    use Latin1::{Accented, Ligature, Thorn};
    let lower = c.to_lowercase().next().unwrap_or(c);
    Some(match lower {
        'á' => Accented('a', ACUTE),
        'à' => Accented('a', GRAVE),
        'â' => Accented('a', CIRCUMFLEX),
        'å' => Accented('a', RING),
        'ä' => Accented('a', DIAERESIS),
        'ã' => Accented('a', TILDE),
        'æ' => Ligature('a', 'e'),
        'ç' => Accented('c', CEDILLA),
        'é' => Accented('e', ACUTE),
        'è' => Accented('e', GRAVE),
        'ê' => Accented('e', CIRCUMFLEX),
        'ë' => Accented('e', DIAERESIS),
        'í' => Accented('i', ACUTE),
        'ì' => Accented('i', GRAVE),
        'î' => Accented('i', CIRCUMFLEX),
        'ï' => Accented('i', DIAERESIS),
        'ð' => Accented('d', STROKE),
        'ñ' => Accented('n', TILDE),
        'ó' => Accented('o', ACUTE),
        'ò' => Accented('o', GRAVE),
        'ô' => Accented('o', CIRCUMFLEX),
        'ö' => Accented('o', DIAERESIS),
        'õ' => Accented('o', TILDE),
        'ø' => Accented('o', STROKE),
        'ú' => Accented('u', ACUTE),
        'ù' => Accented('u', GRAVE),
        'û' => Accented('u', CIRCUMFLEX),
        'ü' => Accented('u', DIAERESIS),
        'ý' => Accented('y', ACUTE),
        'ÿ' => Accented('y', DIAERESIS),
        'ß' => Ligature('s', 's'),
        'þ' => Thorn,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(names: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        v.sort_by(|a, b| compare_filenames(a, b));
        v
    }

    #[test]
    fn matches_the_examples_of_originals_md() {
        assert_eq!(
            sorted(&["alpha.md", "a-b.md", "a_b.md"]),
            ["a_b.md", "a-b.md", "alpha.md"]
        );
        assert_eq!(
            sorted(&["user-guide.md", "README.md", "api-reference.md"]),
            ["api-reference.md", "README.md", "user-guide.md"]
        );
        assert_eq!(sorted(&["B.md", "b.md"]), ["b.md", "B.md"]);
    }

    #[test]
    fn case_breaks_ties_only_after_the_whole_string() {
        assert_eq!(sorted(&["aC.md", "Ab.md"]), ["Ab.md", "aC.md"]);
        assert_eq!(sorted(&["Ab.md", "aB.md"]), ["aB.md", "Ab.md"]);
    }

    #[test]
    fn punctuation_digits_letters_and_paths() {
        assert_eq!(
            sorted(&["guide/intro.md", "guide.md", "guide-old.md", "guide2.md"]),
            ["guide-old.md", "guide.md", "guide/intro.md", "guide2.md"]
        );
        assert_eq!(
            sorted(&["file2.md", "file10.md"]),
            ["file10.md", "file2.md"]
        );
        assert_eq!(
            sorted(&["b.md", "a b.md", "ab.md"]),
            ["a b.md", "ab.md", "b.md"]
        );
    }

    #[test]
    fn accents_sort_with_their_base_letter() {
        assert_eq!(
            sorted(&["f.md", "ébauche.md", "eb.md", "ec.md"]),
            ["eb.md", "ébauche.md", "ec.md", "f.md"]
        );
        assert_eq!(
            sorted(&["résumé.md", "resume.md"]),
            ["resume.md", "résumé.md"]
        );
    }

    proptest! {
        #[test]
        fn is_a_total_order(a in "[a-zA-Z0-9 _./éÉß-]{0,8}", b in "[a-zA-Z0-9 _./éÉß-]{0,8}", c in "[a-zA-Z0-9 _./éÉß-]{0,8}") {
            prop_assert_eq!(compare_filenames(&a, &b), compare_filenames(&b, &a).reverse());
            prop_assert_eq!(compare_filenames(&a, &b) == Ordering::Equal, a == b);
            let mut v = [a.clone(), b.clone(), c.clone()];
            v.sort_by(|x, y| compare_filenames(x, y));
            prop_assert_ne!(compare_filenames(&v[0], &v[1]), Ordering::Greater);
            prop_assert_ne!(compare_filenames(&v[1], &v[2]), Ordering::Greater);
            prop_assert_ne!(compare_filenames(&v[0], &v[2]), Ordering::Greater);
        }

        #[test]
        fn ignores_case_before_anything_else(a in "[a-zA-Z]{1,6}", b in "[a-zA-Z]{1,6}") {
            let (la, lb) = (a.to_lowercase(), b.to_lowercase());
            if la != lb {
                prop_assert_eq!(compare_filenames(&a, &b), la.cmp(&lb));
            }
        }
    }
}
