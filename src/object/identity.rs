//! Identity and derived values: identity hashes, the object hash of three hashes, `file_type`,
//! UTF-16 lengths, the chat transcript.

use serde_json::json;

use super::types::*;
use crate::error::{Error, Result};
use crate::hash::{Hash, sha256_json};

/// `identity_hash` of a sourced object: H(JCS({type, source})).
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn sourced_identity(object_type: ObjectType, source: &Source) -> Result<Hash> {
    if let Some(hash) = sourced_identity_fast(object_type, source) {
        return Ok(hash);
    }
    sha256_json(&json!({ "type": object_type, "source": source }))
}

/// [`sourced_identity`] without building a JSON value: the canonical text written directly
/// (keys in JCS order), for the common case of names that need no escaping (no `"`, `\` or
/// control character); `None` otherwise, and the general path canonicalises. Every scanned file
/// computes its identity, and the general path was a tenth of a full index's CPU.
fn sourced_identity_fast(object_type: ObjectType, source: &Source) -> Option<Hash> {
    let Source::Filesystem(fs) = source;
    let plain = |s: &str| !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
    if !plain(&fs.filesystem_id) || !plain(&fs.path) {
        return None;
    }
    let type_name = object_type.as_str();
    if !plain(type_name) {
        return None;
    }
    let mut text = String::with_capacity(fs.filesystem_id.len() + fs.path.len() + 80);
    text.push_str("{\"source\":{\"filesystemId\":\"");
    text.push_str(&fs.filesystem_id);
    text.push_str("\",\"path\":\"");
    text.push_str(&fs.path);
    text.push_str("\",\"type\":\"filesystem\"},\"type\":\"");
    text.push_str(type_name);
    text.push_str("\"}");
    Some(crate::hash::sha256(text.as_bytes()))
}

/// `identity_hash` of an object without a source: H(JCS({type, "xt/id": id})).
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn assigned_identity(object_type: ObjectType, id: &str) -> Result<Hash> {
    sha256_json(&json!({ "type": object_type, "xt/id": id }))
}

/// `object_hash`: H(JCS({file_hash, content_hash, metadata_hash})), nulls written as `null`.
///
/// The canonical text is written directly: its keys in JCS order and hex strings, which need no
/// escaping (canonicalising through `serde_json` was a fifth of a session's resume, which checks
/// every document it reads).
///
/// # Errors
/// Never in practice; the signature keeps canonicalisation errors visible.
pub fn composite_hash(
    file_hash: Option<&Hash>,
    content_hash: Option<&Hash>,
    metadata_hash: &Hash,
) -> Result<Hash> {
    use sha2::Digest;
    // The JSON text fed to the hash in pieces (no string is built: every read checks a
    // document's object hash this way).
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"{");
    {
        let mut buf = [0u8; 64];
        let mut field = |name: &str, hash: Option<&Hash>, last: bool| {
            hasher.update(b"\"");
            hasher.update(name.as_bytes());
            hasher.update(b"\":");
            match hash {
                Some(hash) => {
                    hasher.update(b"\"");
                    hasher.update(crate::hash::hex_into(&hash.0, &mut buf).as_bytes());
                    hasher.update(b"\"");
                }
                None => hasher.update(b"null"),
            }
            hasher.update(if last { b"}" } else { b"," });
        };
        field("content_hash", content_hash, false);
        field("file_hash", file_hash, false);
        field("metadata_hash", Some(metadata_hash), true);
    }
    Ok(Hash(hasher.finalize().into()))
}

/// A file's `file_type`: the lowercase extension of the last path segment without the dot, or
/// `text` when it has none (`.gitignore` and `file.` have none).
pub fn file_type_of(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    match std::path::Path::new(name).extension() {
        Some(ext) if !ext.is_empty() => ext.to_string_lossy().to_lowercase(),
        _ => "text".to_string(),
    }
}

/// The length of `text` in UTF-16 code units, as JavaScript's `string.length` counts it.
pub fn utf16_len(text: &str) -> u64 {
    // One UTF-16 unit per character, two for a character beyond the BMP: count the bytes that
    // start a character, plus the lead bytes of 4-byte sequences (0xF0 and up). A plain byte loop
    // that the compiler vectorises; the char loop took 6% of a tree scan. ASCII text (most
    // source files) is one unit per byte, and `is_ascii` checks a word at a time.
    if text.is_ascii() {
        return text.len() as u64;
    }
    // Blocks of 127 bytes count into one byte each (a byte adds at most 2: 254 fits), so the
    // compiler adds 32 bytes a step instead of widening each to a u64: 6 times faster on the
    // real tree's non-ASCII texts (13 MB: 16.5 → 2.8 ms), 3 % of a full index's CPU before.
    text.as_bytes()
        .chunks(127)
        .map(|block| {
            u64::from(block.iter().fold(0u8, |n, &b| {
                n + u8::from((b & 0xC0) != 0x80) + u8::from(b >= 0xF0)
            }))
        })
        .sum()
}

/// The chat transcript: one `role: content` block per turn, blank-line separated.
pub fn transcript(turns: &[Turn]) -> String {
    let blocks: Vec<String> = turns
        .iter()
        .map(|turn| format!("{}: {}", turn.role.as_str(), turn.content))
        .collect();
    blocks.join("\n\n")
}

/// Whether `text` is the [`transcript`] of `turns`, compared in place (no copy of the chat).
pub(super) fn is_transcript(turns: &[Turn], text: &str) -> bool {
    let mut rest = text;
    for (i, turn) in turns.iter().enumerate() {
        if i > 0 {
            let Some(after) = rest.strip_prefix("\n\n") else {
                return false;
            };
            rest = after;
        }
        let Some(after) = rest
            .strip_prefix(turn.role.as_str())
            .and_then(|r| r.strip_prefix(": "))
            .and_then(|r| r.strip_prefix(turn.content.as_str()))
        else {
            return false;
        };
        rest = after;
    }
    rest.is_empty()
}

/// Checks that an assigned id is usable: not empty, no control characters, at most 1024 bytes.
pub(super) fn check_assigned_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_input(
            "object id is empty; give a non-empty id",
        ));
    }
    if id.len() > 1024 {
        return Err(Error::invalid_input(format!(
            "object id is {} bytes long; ids are at most 1024 bytes",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "object id {id:?} contains a control character"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod fast_identity_tests {
    use super::*;

    /// The directly written object hash is the canonicalised one, with and without each hash.
    #[test]
    fn the_composite_hash_is_the_canonical_one() -> Result<()> {
        let a = crate::hash::sha256(b"a");
        let b = crate::hash::sha256(b"b");
        let m = crate::hash::sha256(b"metadata");
        for (file, content) in [
            (None, None),
            (Some(&a), None),
            (None, Some(&b)),
            (Some(&a), Some(&b)),
        ] {
            let general = sha256_json(&json!({
                "file_hash": file,
                "content_hash": content,
                "metadata_hash": &m,
            }))?;
            assert_eq!(composite_hash(file, content, &m)?, general);
        }
        Ok(())
    }

    /// The directly written canonical text gives the hash the general canonicalisation gives,
    /// for plain, non-ASCII and escaped names alike (the last take the general path).
    #[test]
    fn the_fast_identity_is_the_canonical_one() -> Result<()> {
        for path in [
            "/a/b.rs",
            "/",
            "/ünïcødé/日本語 ファイル.txt",
            "/with space/and\u{7f}del",
            "/emoji/😀\u{2028}.md",
            "/quote\"d",
            "/back\\slash",
            "/tab\tnew\nline",
        ] {
            for object_type in [ObjectType::File, ObjectType::SessionConfig] {
                let source = Source::Filesystem(FilesystemSource {
                    filesystem_id: "f00d".into(),
                    path: path.into(),
                });
                let general = sha256_json(&json!({ "type": object_type, "source": &source }))?;
                assert_eq!(sourced_identity(object_type, &source)?, general, "{path:?}");
                let plain = !path.contains(['"', '\\', '\t', '\n']);
                assert_eq!(
                    sourced_identity_fast(object_type, &source).is_some(),
                    plain,
                    "{path:?}"
                );
            }
        }
        Ok(())
    }
}
