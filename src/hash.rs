//! `Hash`: SHA-256 digests, RFC 8785 canonical JSON, and the BLAKE3 helpers of the transaction log.
//!
//! A leaf: uses no other strata module but `error`.
//!
//! Canonical JSON is JCS (RFC 8785): keys sorted by UTF-16 code units, no whitespace, ECMAScript
//! number and string forms. For every value strata accepts it equals the seed's `stableStringify`
//! (sorted keys plus `JSON.stringify`). JCS turns every number into an IEEE double, so an integer
//! beyond ±2^53 would be hashed as a different value than the one stored; such integers are
//! rejected with [`Error::InvalidInput`] instead, and so are doubles that JCS would write as such
//! an integer (1e18), so that canonical text read back is always accepted again.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use sha2::Digest as _;

use crate::error::{Error, Result};

/// The largest integer magnitude that survives a round trip through an IEEE double (2^53).
pub const MAX_SAFE_INTEGER: u64 = 1 << 53;

/// A SHA-256 digest, shown as 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The raw 32 bytes of the digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The digest as 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }
}

/// `bytes` as lowercase hex (what `hex::encode` gives, without its per-character iterator,
/// which showed in profiles of reads that spell thousands of ids).
pub fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends `bytes` to `out` as lowercase hex.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    // 32 bytes at a time into a buffer, pushed as one string: a character at a time showed in
    // profiles of reads (every object hash a read checks is spelled this way).
    let mut buf = [0u8; 64];
    for chunk in bytes.chunks(32) {
        let hex = hex_into(chunk, &mut buf);
        out.push_str(hex);
    }
}

/// `bytes` (at most 32) as lowercase hex in `buf`.
pub(crate) fn hex_into<'b>(bytes: &[u8], buf: &'b mut [u8; 64]) -> &'b str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let n = bytes.len().min(32);
    for (i, &byte) in bytes[..n].iter().enumerate() {
        buf[2 * i] = DIGITS[usize::from(byte >> 4)];
        buf[2 * i + 1] = DIGITS[usize::from(byte & 0x0f)];
    }
    // Only hex digits were written: always UTF-8.
    std::str::from_utf8(&buf[..2 * n]).unwrap_or_default()
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({})", self.to_hex())
    }
}

impl FromStr for Hash {
    type Err = Error;

    /// Parses 64 lowercase hex characters; uppercase is refused so that one digest has one spelling.
    fn from_str(text: &str) -> Result<Self> {
        let valid = text.len() == 64
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(Error::invalid_input(format!(
                "{text:?} is not a SHA-256 hash: expected 64 lowercase hex characters"
            )));
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes)
            .map_err(|e| Error::invalid_input(format!("{text:?} is not a SHA-256 hash: {e}")))?;
        Ok(Hash(bytes))
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Hash {
    Hash(sha2::Sha256::digest(bytes).into())
}

/// SHA-256 of the canonical JSON of `value`.
///
/// # Errors
/// [`Error::InvalidInput`] when `value` holds an integer beyond ±2^53.
pub fn sha256_json(value: &Value) -> Result<Hash> {
    Ok(sha256(canonical_json(value)?.as_bytes()))
}

/// A SHA-256 computed over bytes fed in pieces, for hashing a file while it streams.
#[derive(Clone, Default)]
pub struct Sha256Stream(sha2::Sha256);

impl Sha256Stream {
    /// Starts an empty digest.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds more bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Ends the stream and returns the digest.
    pub fn finish(self) -> Hash {
        Hash(self.0.finalize().into())
    }
}

/// SHA-256 of a text that changes from one call to the next mostly near its end (a session's
/// document: appended ids, a cut at the end of a set): it keeps the digest's state at every
/// [`PREFIX_STEP`] bytes of the last text and resumes from the last one before the first
/// changed byte. Any text gives its exact SHA-256; only the time depends on the last one.
#[derive(Clone, Default)]
pub(crate) struct PrefixSha256 {
    last: Option<std::sync::Arc<String>>,
    /// `states[k]`: the digest's state after the first `(k + 1) * PREFIX_STEP` bytes of `last`.
    states: Vec<sha2::Sha256>,
}

/// How far apart [`PrefixSha256`] keeps states (a multiple of SHA-256's 64-byte block, so each
/// state holds no buffered bytes).
pub(crate) const PREFIX_STEP: usize = 64 * 1024;

impl fmt::Debug for PrefixSha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrefixSha256")
            .field("last_len", &self.last.as_ref().map(|t| t.len()))
            .field("states", &self.states.len())
            .finish()
    }
}

impl PrefixSha256 {
    /// The SHA-256 of `text`, which becomes the text the next call resumes from.
    pub(crate) fn hash(&mut self, text: &std::sync::Arc<String>) -> Hash {
        let bytes = text.as_bytes();
        let same = self
            .last
            .as_ref()
            .map_or(0, |last| common_prefix_len(last.as_bytes(), bytes));
        self.states.truncate(same / PREFIX_STEP);
        let mut digest = self.states.last().cloned().unwrap_or_default();
        let mut at = self.states.len() * PREFIX_STEP;
        while let Some(step) = bytes.get(at..at + PREFIX_STEP) {
            digest.update(step);
            self.states.push(digest.clone());
            at += PREFIX_STEP;
        }
        digest.update(bytes.get(at..).unwrap_or_default());
        self.last = Some(std::sync::Arc::clone(text));
        Hash(digest.finalize().into())
    }
}

/// How many leading bytes `a` and `b` share (compared 4 KiB at a time, then byte by byte).
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 4096;
    let mut at = 0;
    for (x, y) in a.chunks(CHUNK).zip(b.chunks(CHUNK)) {
        if x == y {
            at += x.len();
            if x.len() < CHUNK {
                return at;
            }
        } else {
            return at + x.iter().zip(y).take_while(|(p, q)| p == q).count();
        }
    }
    at
}

/// The RFC 8785 canonical JSON text of `value`.
///
/// # Errors
/// [`Error::InvalidInput`] when `value` holds an integer beyond ±2^53, naming where it is.
pub fn canonical_json(value: &Value) -> Result<String> {
    check_safe_integers(value, &mut String::from("$"))?;
    serde_jcs::to_string(value)
        .map_err(|e| Error::invalid_input(format!("value cannot be canonicalised: {e}")))
}

/// Refuses integers that an IEEE double cannot hold exactly; `at` is a JSON path for the message.
fn check_safe_integers(value: &Value, at: &mut String) -> Result<()> {
    match value {
        Value::Number(number) => {
            let unsafe_integer = match (number.as_u64(), number.as_i64(), number.as_f64()) {
                (Some(n), _, _) => n > MAX_SAFE_INTEGER,
                (None, Some(n), _) => n.unsigned_abs() > MAX_SAFE_INTEGER,
                // A double that JCS writes as a plain integer beyond ±2^53 (integral and below
                // 1e21, e.g. 1e18 -> "1000000000000000000"): its canonical text, read back, is
                // such an integer, so refusing it keeps canonical text re-readable (a fixed point).
                (None, None, Some(x)) => {
                    x.fract() == 0.0 && x.abs() > MAX_SAFE_INTEGER as f64 && x.abs() < 1e21
                }
                (None, None, None) => false,
            };
            if unsafe_integer {
                return Err(Error::invalid_input(format!(
                    "number {number} at {at} is an integer beyond ±2^53, which canonical JSON \
                     cannot hold exactly; store it as a string"
                )));
            }
            Ok(())
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("[{index}]"));
                check_safe_integers(item, at)?;
                at.truncate(len);
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = at.len();
                at.push('.');
                at.push_str(key);
                check_safe_integers(item, at)?;
                at.truncate(len);
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

/// BLAKE3 of `bytes`: the internal hash of the transaction log.
pub fn blake3(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

/// BLAKE3 over several byte strings fed one after another, as `previous chain ‖ record`.
pub fn blake3_concat(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    for part in parts {
        hasher.update(part);
    }
    *hasher.finalize().as_bytes()
}

/// Appends `text` as a JCS string: quoted, `"` and `\\` escaped, U+0008/0009/000A/000C/000D as
/// `\b \t \n \f \r`, other controls below U+0020 as `\u00xx` (lowercase hex), the rest
/// literal (RFC 8785 §3.2.2.2, ECMAScript's `JSON.stringify`).
pub fn push_jcs_string(out: &mut String, text: &str) {
    out.push('"');
    let mut from = 0;
    for (i, b) in text.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x09 => "\\t",
            0x0a => "\\n",
            0x0c => "\\f",
            0x0d => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        from = i + 1;
    }
    out.push_str(&text[from..]);
    out.push('"');
}

/// The length in bytes of `text` as a JCS string (what [`push_jcs_string`] appends).
pub fn jcs_string_len(text: &str) -> usize {
    // Most ids need no escape: one pass that the compiler can vectorise (no early exit) decides.
    let plain = text.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20 && b != b'"' && b != b'\\')
    });
    if plain {
        return text.len() + 2;
    }
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The inside of the JCS array of `items` (the strings joined by commas, no brackets).
pub fn jcs_list_inner(items: &[String]) -> String {
    let mut out = String::with_capacity(items.iter().map(|s| s.len() + 3).sum());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_jcs_string(&mut out, item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Every text of a sequence of edits (appends, cuts, a changed byte anywhere, across
        /// and on the kept states' boundaries) gets its exact SHA-256.
        #[test]
        fn prefix_sha256_is_sha256_of_each_text(
            start in 0usize..300_000,
            edits in proptest::collection::vec((0u8..3, 0usize..300_000, 0usize..70_000), 1..6),
        ) {
            let mut text: Vec<u8> = (0..start).map(|i| b'a' + (i % 23) as u8).collect();
            let mut hasher = PrefixSha256::default();
            for (kind, at, len) in edits {
                let at = at.min(text.len());
                match kind {
                    0 => text.extend((0..len).map(|i| b'A' + (i % 19) as u8)),
                    1 => text.truncate(at),
                    _ => {
                        let at = (at / PREFIX_STEP) * PREFIX_STEP + len % 3;
                        if let Some(byte) = text.get_mut(at) {
                            *byte = b'#';
                        }
                    }
                }
                let shared = std::sync::Arc::new(String::from_utf8_lossy(&text).into_owned());
                proptest::prop_assert_eq!(hasher.hash(&shared), sha256(shared.as_bytes()));
            }
        }
    }

    #[test]
    fn common_prefix_len_counts_shared_bytes() {
        let a = vec![7u8; 10_000];
        let mut b = a.clone();
        assert_eq!(common_prefix_len(&a, &b), 10_000);
        b[9_000] = 1;
        assert_eq!(common_prefix_len(&a, &b), 9_000);
        assert_eq!(common_prefix_len(&a[..4096], &a), 4096);
        assert_eq!(common_prefix_len(&a[..5000], &a), 5000);
        assert_eq!(common_prefix_len(&[], &a), 0);
    }

    #[test]
    fn hex_spells_every_byte_as_the_hex_crate_does() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(to_hex(&all), hex::encode(&all));
        assert_eq!(to_hex(&[]), "");
        let mut out = String::from("x:");
        push_hex(&mut out, &[0x00, 0x0f, 0xf0, 0xff]);
        assert_eq!(out, "x:000ff0ff");
    }

    #[test]
    fn seed_vectors() -> Result<()> {
        assert_eq!(
            sha256(b"hello world").to_hex(),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(
            sha256_json(&json!({}))?.to_hex(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        let source = json!({"type": "file", "source": {"type": "filesystem", "filesystemId": "abc123", "path": "/tmp/test.md"}});
        assert_eq!(
            canonical_json(&source)?,
            r#"{"source":{"filesystemId":"abc123","path":"/tmp/test.md","type":"filesystem"},"type":"file"}"#
        );
        assert_eq!(
            sha256_json(&source)?.to_hex(),
            "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"
        );
        Ok(())
    }

    #[test]
    fn numbers_take_ecmascript_form() -> Result<()> {
        let value: Value = serde_json::from_str("[1.0, 1e21, 1e-7, -0.0, 5e-324, 100, 0.5]")
            .map_err(|e| Error::invalid_input(e.to_string()))?;
        assert_eq!(canonical_json(&value)?, "[1,1e+21,1e-7,0,5e-324,100,0.5]");
        Ok(())
    }

    #[test]
    fn unsafe_integers_are_refused_with_their_place() {
        let value = json!({"args": {"n": 9_007_199_254_740_993_u64}});
        let err = canonical_json(&value).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("$.args.n"), "{err}");
        assert!(canonical_json(&json!(9_007_199_254_740_992_u64)).is_ok());
        assert!(canonical_json(&json!(-9_007_199_254_740_993_i64)).is_err());
        // Doubles whose canonical text is such an integer are refused too; 1e21 is written 1e+21.
        assert!(canonical_json(&json!(1e18)).is_err());
        assert!(canonical_json(&json!(-9_007_199_254_740_994.0_f64)).is_err());
        assert!(canonical_json(&json!(9_007_199_254_740_992.0_f64)).is_ok());
        assert!(canonical_json(&json!(1e21)).is_ok());
        assert!(canonical_json(&json!(1.5e17)).is_err());
        assert!(canonical_json(&json!(0.5)).is_ok());
    }

    #[test]
    fn hash_parses_only_its_own_spelling() {
        let hex = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
        assert_eq!(
            hex.parse::<Hash>().map(|h| h.to_hex()).ok(),
            Some(hex.to_string())
        );
        assert!(hex.to_uppercase().parse::<Hash>().is_err());
        assert!(hex[1..].parse::<Hash>().is_err());
    }

    #[test]
    fn stream_equals_one_shot() {
        let mut stream = Sha256Stream::new();
        stream.update(b"hello ");
        stream.update(b"world");
        assert_eq!(stream.finish(), sha256(b"hello world"));
    }
}
