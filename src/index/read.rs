//! Reading a file once: stream its bytes through SHA-256, keep them only up to the content limit,
//! and tell text from binary.

use std::io::{self, Read};

use crate::hash::{Hash, Sha256Stream, sha256};

/// The default content limit: files larger than this keep no bytes (16 MiB).
pub const DEFAULT_MAX_CONTENT_BYTES: u64 = 16 * 1024 * 1024;

/// The size of one read from a file.
const CHUNK: usize = 64 * 1024;

/// What a file's bytes turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// UTF-8 text without NUL bytes: it becomes the object's content.
    Text(String),
    /// Bytes that are not UTF-8 text (or hold a NUL byte, as git decides): kept as a blob.
    Binary(Vec<u8>),
    /// More bytes than the content limit: only the hash and size are kept.
    TooLarge,
}

/// One file read to the end: its hash, its size, and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    /// SHA-256 of every byte read. Whoever makes a `Reading` computes it from those bytes: the
    /// store keeps a binary body's compressed bytes under it without hashing them again.
    pub file_hash: Hash,
    /// The number of bytes read.
    pub size: u64,
    /// The bytes, as text or binary, unless over the limit.
    pub body: Body,
}

/// Reads `reader` to the end, hashing every byte once and holding at most `max_content_bytes` of
/// them in memory.
///
/// # Errors
/// Whatever error the reader returns.
pub fn read_stream(reader: impl Read, max_content_bytes: u64) -> io::Result<Reading> {
    read_with_hint(reader, max_content_bytes, 0)
}

/// [`read_stream`] with the expected size (from a stat), so the buffer is allocated once.
///
/// # Errors
/// Whatever error the reader returns.
pub fn read_with_hint(
    mut reader: impl Read,
    max_content_bytes: u64,
    size_hint: u64,
) -> io::Result<Reading> {
    let capacity =
        usize::try_from(size_hint.min(max_content_bytes).saturating_add(1)).unwrap_or(CHUNK);
    let mut kept = Vec::with_capacity(capacity);
    (&mut reader)
        .take(max_content_bytes.saturating_add(1))
        .read_to_end(&mut kept)?;
    if kept.len() as u64 <= max_content_bytes {
        return Ok(Reading {
            file_hash: sha256(&kept),
            size: kept.len() as u64,
            body: classify(kept),
        });
    }
    // Over the limit: hash what was read, drop it, and stream the rest through the hash.
    let mut hasher = Sha256Stream::new();
    hasher.update(&kept);
    let mut size = kept.len() as u64;
    drop(kept);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&chunk[..n]);
        size += n as u64;
    }
    Ok(Reading {
        file_hash: hasher.finish(),
        size,
        body: Body::TooLarge,
    })
}

/// Text when the bytes are UTF-8 and hold no NUL byte, binary otherwise.
pub fn classify(bytes: Vec<u8>) -> Body {
    if bytes.contains(&0) {
        return Body::Binary(bytes);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Body::Text(text),
        Err(err) => Body::Binary(err.into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_binary_and_too_large() -> io::Result<()> {
        let text = read_stream(&b"hello world"[..], 100)?;
        assert_eq!(text.body, Body::Text("hello world".into()));
        assert_eq!(text.file_hash, sha256(b"hello world"));
        assert_eq!(text.size, 11);

        let binary = read_stream(&[0xffu8, 0xfe, 0x00][..], 100)?;
        assert_eq!(binary.body, Body::Binary(vec![0xff, 0xfe, 0x00]));

        let nul = read_stream(&b"a\0b"[..], 100)?;
        assert!(matches!(nul.body, Body::Binary(_)));

        let big = vec![b'x'; 3 * CHUNK + 7];
        let large = read_stream(&big[..], 2 * CHUNK as u64)?;
        assert_eq!(large.body, Body::TooLarge);
        assert_eq!(large.size, big.len() as u64);
        assert_eq!(large.file_hash, sha256(&big));

        let exact = read_stream(&big[..], big.len() as u64)?;
        assert!(matches!(exact.body, Body::Text(_)));
        Ok(())
    }

    #[test]
    fn empty_file_is_empty_text() -> io::Result<()> {
        let empty = read_stream(&b""[..], 100)?;
        assert_eq!(empty.body, Body::Text(String::new()));
        assert_eq!(empty.file_hash, sha256(b""));
        Ok(())
    }
}
