//! `sha256_hex`: the SHA-256 a write must quote, and the check of a quoted one.
//!
//! The hash is over the whole file's bytes, exactly what strata's reading tools return
//! (`read_file`, also truncated, `read_lines`, `get_excerpt`). It is not the original's
//! `ContentHashHelper` hash, which normalises line endings and truncates lines: two files that
//! differ only in their line endings must not share a base.

use std::fmt;

use sha2::Digest as _;

/// The number of hex characters of a SHA-256.
pub const SHA256_HEX_LEN: usize = 64;

/// The SHA-256 of `bytes` as 64 lowercase hex characters.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Why a quoted hash is not a SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidHash {
    /// It does not have 64 characters.
    WrongLength {
        /// How many characters it has.
        len: usize,
    },
    /// It has a character that is not a hex digit.
    NotHex {
        /// The 1-based position of the first such character.
        position: usize,
        /// That character.
        found: char,
    },
}

impl fmt::Display for InvalidHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidHash::WrongLength { len } => write!(
                f,
                "not a SHA-256: expected {SHA256_HEX_LEN} hex characters, got {len}; quote the \
                 sha256 a reading tool returned"
            ),
            InvalidHash::NotHex { position, found } => write!(
                f,
                "not a SHA-256: character {position} is {found:?}, not a hex digit (0-9, a-f); \
                 quote the sha256 a reading tool returned"
            ),
        }
    }
}

impl std::error::Error for InvalidHash {}

/// Checks that `text` is 64 hex characters (either case), the form of a SHA-256.
///
/// # Errors
/// [`InvalidHash`] saying what is wrong: the length, or the first character that is not hex.
pub fn check_sha256_hex(text: &str) -> Result<(), InvalidHash> {
    let len = text.chars().count();
    if len != SHA256_HEX_LEN {
        return Err(InvalidHash::WrongLength { len });
    }
    match text
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_hexdigit())
    {
        Some((index, found)) => Err(InvalidHash::NotHex {
            position: index + 1,
            found,
        }),
        None => Ok(()),
    }
}

/// Whether the quoted hash `quoted` names the same digest as `actual` (hex compared ignoring case).
pub fn same_sha256(quoted: &str, actual: &str) -> bool {
    quoted.trim().eq_ignore_ascii_case(actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_the_whole_bytes() {
        // Ported from the original's hash tool test `…ReturnsHash_OnSuccess`: a known digest.
        assert_eq!(
            sha256_hex(b"hello world"),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // Unlike the original's normalised hash, line endings count.
        assert_ne!(sha256_hex(b"a\n"), sha256_hex(b"a\r\n"));
        assert_ne!(sha256_hex(b"abc"), sha256_hex(b"abc\n"));
    }

    #[test]
    fn a_quoted_hash_must_be_64_hex_characters() {
        let good = sha256_hex(b"x");
        assert_eq!(check_sha256_hex(&good), Ok(()));
        assert_eq!(check_sha256_hex(&good.to_uppercase()), Ok(()));
        assert_eq!(
            check_sha256_hex("abc"),
            Err(InvalidHash::WrongLength { len: 3 })
        );
        let bad = format!("{}g", &good[..63]);
        let error = check_sha256_hex(&bad).unwrap_err();
        assert_eq!(
            error,
            InvalidHash::NotHex {
                position: 64,
                found: 'g'
            }
        );
        assert!(error.to_string().contains("character 64 is 'g'"), "{error}");
        assert!(
            InvalidHash::WrongLength { len: 3 }
                .to_string()
                .contains("expected 64 hex characters, got 3")
        );
        assert!(same_sha256(&good.to_uppercase(), &good));
        assert!(!same_sha256(&sha256_hex(b"y"), &good));
    }
}
