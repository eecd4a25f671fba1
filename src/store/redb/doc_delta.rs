//! Delta documents: a new document of a session or a chat is stored as edits against the
//! entity's previous document, so a commit costs the size of its change, not of the session.
//!
//! A delta is kept in [`DocRec::fields`] as `\u{1}` followed by JSON `{"b": base object hash,
//! "d": depth, "e": [[start, removed, [tokens…]]…]}`, where tokens are the canonical fields JSON
//! split at commas (ids in a set, members of an object). Canonical JSON never starts with
//! `\u{1}`, so full and delta documents cannot be confused. Reading resolves the chain back to a
//! full document. `d` numbers the documents of a chain (0 for the full one at its start), and
//! delta `n` is based on document `n & (n - 1)` (Subversion's skip-deltas): a read applies at
//! most log2(n) + 1 deltas, and a delta holds the changes of on average log2(n) / 2 commits, so
//! no commit ever stores the whole document again. The object hash, the log and every API see
//! full fields only. A base is always an earlier version of the same entity, so it lives as
//! long as the deltas on it (only eviction of the whole entity removes either).

use serde::{Deserialize, Serialize};
#[cfg(test)]
use similar::capture_diff_slices;
use similar::{Algorithm, DiffOp, capture_diff};

use crate::error::{Error, Result};

/// The first character of a delta document's fields.
pub(crate) const MARK: char = '\u{1}';
/// The longest chain of deltas a read follows: a skip-delta chain of `u32` numbers has at most
/// 32 (chains written before skip-deltas were linear and at most 64 long).
pub(crate) const MAX_CHAIN: usize = 64;

#[derive(Serialize, Deserialize)]
pub(crate) struct Delta {
    /// The base document's object hash (hex).
    pub(crate) b: String,
    /// This delta's number in its chain: the full document at its start is 0, and delta `d`
    /// is based on document `d & (d - 1)`.
    pub(crate) d: u32,
    /// Edits in ascending order.
    pub(crate) e: Vec<Edit>,
}

/// A delta's base and number, read without its edits.
#[derive(Deserialize)]
pub(crate) struct Head {
    pub(crate) b: String,
    pub(crate) d: u32,
}

/// One edit of a token list: (first base token, tokens removed, tokens inserted).
pub(crate) type Edit = (usize, usize, Vec<String>);

pub(crate) fn tokens(fields: &str) -> Vec<&str> {
    fields.split(',').collect()
}

pub(crate) fn parse(fields: &str) -> Result<Delta> {
    serde_json::from_str(&fields[MARK.len_utf8()..])
        .map_err(|e| Error::corrupt(format!("delta document does not parse: {e}")))
}

pub(crate) fn parse_head(fields: &str) -> Result<Head> {
    serde_json::from_str(&fields[MARK.len_utf8()..])
        .map_err(|e| Error::corrupt(format!("delta document does not parse: {e}")))
}

pub(crate) fn is_delta(fields: &str) -> bool {
    fields.starts_with(MARK)
}

pub(crate) fn hash_of(hex_hash: &str) -> Result<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_hash, &mut out)
        .map_err(|e| Error::corrupt(format!("delta base {hex_hash}: {e}")))?;
    Ok(out)
}

pub(crate) fn base_hash(delta: &Delta) -> Result<[u8; 32]> {
    hash_of(&delta.b)
}

pub(crate) fn apply<'a>(old: Vec<&'a str>, delta: &'a Delta) -> Result<Vec<&'a str>> {
    let mut out: Vec<&str> = Vec::with_capacity(old.len());
    let mut at = 0;
    for (start, removed, inserted) in &delta.e {
        if *start < at || start + removed > old.len() {
            return Err(Error::corrupt(format!(
                "delta on {} edits tokens {start}+{removed} of {}",
                delta.b,
                old.len()
            )));
        }
        out.extend(&old[at..*start]);
        out.extend(inserted.iter().map(String::as_str));
        at = start + removed;
    }
    out.extend(&old[at..]);
    Ok(out)
}

/// The key a token starts, when it starts one: `"name":` after any `{` or `[` (names of ASCII
/// lowercase letters, digits and `_`, as the metadata fields have).
fn key_of(token: &str) -> Option<&str> {
    let bytes = token.as_bytes();
    let open = bytes
        .iter()
        .take_while(|b| matches!(b, b'{' | b'['))
        .count();
    if bytes.get(open) != Some(&b'"') {
        return None;
    }
    let start = open + 1;
    let len = bytes[start..]
        .iter()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || **b == b'_')
        .count();
    let end = start + len;
    (len > 0 && bytes.get(end..end + 2) == Some(b"\":".as_slice()))
        .then(|| token.get(start..end))
        .flatten()
}

/// Where the tokens that start a key are (byte offsets), with the keys. Only a token holding
/// `":` can start one, so a substring search finds the candidates without splitting the
/// document into tokens (a 10 000-file session document has ~30 000).
fn sections(text: &str) -> Vec<(usize, &str)> {
    let mut out: Vec<(usize, &str)> = Vec::new();
    let bytes = text.as_bytes();
    for at in memchr::memmem::find_iter(bytes, b"\":") {
        let start = memchr::memrchr(b',', &bytes[..at]).map_or(0, |c| c + 1);
        if out.last().is_some_and(|(s, _)| *s == start) {
            continue;
        }
        if let Some(key) = key_of(&text[start..at + 2]) {
            out.push((start, key));
        }
    }
    out
}

/// The number of commas in `bytes` (tokens − 1 of a token list).
fn commas(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b',', bytes).count()
}

/// The length of the common prefix of `a` and `b`, compared a block at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    // Large blocks first (a set of 10 000 ids is 670 KB, mostly equal), then small ones.
    for block in [16_384, 128] {
        while i + block <= n && a[i..i + block] == b[i..i + block] {
            i += block;
        }
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The length of the common suffix of `a` and `b`, compared a block at a time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (la, lb) = (a.len(), b.len());
    let mut i = 0;
    for block in [16_384, 128] {
        while i + block <= n && a[la - i - block..la - i] == b[lb - i - block..lb - i] {
            i += block;
        }
    }
    while i < n && a[la - i - 1] == b[lb - i - 1] {
        i += 1;
    }
    i
}

/// The edits that turn the token list of `old` into that of `new` (tokens: the text split at
/// commas): (index in `old`'s tokens, tokens removed there, tokens inserted there), in order.
///
/// When both start their keys in the same sequence (a session document: the same seven sets),
/// each key's span is diffed on its own, and an unchanged span is skipped by one comparison of
/// its bytes: a commit that appends to three sets then costs about one pass over the document
/// (byte comparisons and comma counts), not a split of it into tokens. When one has keys past
/// the other's last (a chat with a turn appended: each turn's keys are keys here), the last
/// span of the shorter is paired with the rest of the longer, so the turns before are still
/// skipped span by span rather than diffed token by token. Any split gives a correct delta;
/// this one only makes it cheap.
pub(crate) fn edits_of(old: &str, new: &str) -> Vec<Edit> {
    if let Some(edits) = byte_edits(old, new) {
        return edits;
    }
    let (a, b) = (sections(old), sections(new));
    let k = a.len().min(b.len());
    let same_keys = a[..k].iter().zip(&b[..k]).all(|(x, y)| x.1 == y.1);
    let (a, b) = (&a[..k], &b[..k]);
    let mut edits = Vec::new();
    if !same_keys || a.is_empty() {
        span_edits(old, 0, new, &mut edits);
        return edits;
    }
    // Span k runs from its key's token (the first from byte 0) to the comma before the next.
    let bounds = |s: &[(usize, &str)], len: usize| -> Vec<(usize, usize)> {
        let mut starts = vec![0];
        starts.extend(s.iter().map(|(i, _)| *i).filter(|i| *i > 0));
        let mut spans: Vec<(usize, usize)> = starts.windows(2).map(|w| (w[0], w[1] - 1)).collect();
        spans.extend(starts.last().map(|s| (*s, len)));
        spans
    };
    let (ob, nb) = (bounds(a, old.len()), bounds(b, new.len()));
    if ob.len() != nb.len() {
        span_edits(old, 0, new, &mut edits);
        return edits;
    }
    // The index of the first token of the old span being looked at.
    let (mut token, mut counted_to) = (0, 0);
    for (&(os, oe), &(ns, ne)) in ob.iter().zip(&nb) {
        let (o, n) = (&old[os..oe], &new[ns..ne]);
        if o == n {
            continue;
        }
        token += commas(&old.as_bytes()[counted_to..os]);
        counted_to = os;
        span_edits(o, token, n, &mut edits);
    }
    edits
}

/// The most change points [`byte_edits`] follows before it leaves the documents to the
/// sectioned diff.
const BYTE_CHANGES: usize = 16;

/// How many tokens on each side of a change point [`byte_edits`] tries as its extent.
const BYTE_REACH: usize = 4;

/// How many equal bytes after a change point's extent make [`byte_edits`] take it (fewer when a
/// document ends sooner).
const BYTE_RESYNC: usize = 24;

/// Where the tokens of `text` from `at` (a token's start) begin, up to `reach` tokens on: entry
/// `k` is the start of token `k` counted from `at`, and `None` once the text has no more tokens.
fn token_starts(text: &[u8], at: usize, reach: usize) -> Vec<Option<usize>> {
    let mut starts = vec![Some(at)];
    let mut from = at;
    for _ in 0..reach {
        match memchr::memchr(b',', &text[from..]) {
            Some(c) => {
                from += c + 1;
                starts.push(Some(from));
            }
            None => {
                starts.push(None);
                break;
            }
        }
    }
    starts
}

/// The edits of a document changed in a few places, found on its bytes alone: the common byte
/// prefix is skipped (back to a token's start), the change there is the fewest old tokens
/// removed and new ones inserted (up to [`BYTE_REACH`] each, or the rest of the one document
/// when the other ends within that reach) after which both go on with [`BYTE_RESYNC`] equal
/// bytes, and so on to the end. No split of the documents into tokens or sections, so a chat
/// commit costs a few comparisons of its bytes. `None` past [`BYTE_CHANGES`] change points or
/// when no extent resynchronises: the sectioned diff then runs. Skipped bytes are equal and cut
/// at token starts, so any extents chosen give a correct delta.
fn byte_edits(old: &str, new: &str) -> Option<Vec<Edit>> {
    let (ob, nb) = (old.as_bytes(), new.as_bytes());
    let (mut o, mut n) = (0usize, 0usize);
    // The index of the old token that starts at `counted` (`o` at a loop's start).
    let (mut token, mut counted) = (0usize, 0usize);
    let mut edits = Vec::new();
    loop {
        let p = common_prefix(&ob[o..], &nb[n..]);
        if o + p == ob.len() && n + p == nb.len() {
            return Some(edits);
        }
        if edits.len() >= BYTE_CHANGES {
            return None;
        }
        // Back to the start of the token the difference is in (equal on both sides).
        let back = memchr::memrchr(b',', &ob[o..o + p]).map_or(0, |c| c + 1);
        let (o2, n2) = (o + back, n + back);
        token += commas(&ob[counted..o2]);
        let (os, ns) = (
            token_starts(ob, o2, BYTE_REACH),
            token_starts(nb, n2, BYTE_REACH),
        );
        let resyncs = |i: usize, j: usize| -> bool {
            match (os[i], ns[j]) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    let need = BYTE_RESYNC.min(ob.len() - a).min(nb.len() - b);
                    (need > 0 || (a == ob.len() && b == nb.len()))
                        && ob[a..a + need] == nb[b..b + need]
                }
                _ => false,
            }
        };
        let mut extent = None;
        'search: for sum in 1..=(os.len() - 1 + ns.len() - 1) {
            for i in sum.saturating_sub(ns.len() - 1)..=sum.min(os.len() - 1) {
                if resyncs(i, sum - i) {
                    extent = Some((i, sum - i));
                    break 'search;
                }
            }
        }
        // One document ends within reach: the rest of the other replaces it.
        let extent = extent.or_else(|| {
            let old_end = os.iter().position(Option::is_none);
            let new_end = ns.iter().position(Option::is_none);
            match (old_end, new_end) {
                (Some(i), _) => Some((i, usize::MAX)),
                (_, Some(j)) => Some((usize::MAX, j)),
                _ => None,
            }
        })?;
        let rest = |text: &str, from: usize| -> Vec<String> {
            text[from..].split(',').map(str::to_string).collect()
        };
        let (removed, inserted, next_o, next_n) = match extent {
            (i, usize::MAX) => (i, rest(new, n2), ob.len(), nb.len()),
            (usize::MAX, j) => {
                let removed = commas(&ob[o2..]) + 1;
                let inserted = nb[n2..]
                    .split(|b| *b == b',')
                    .take(j)
                    .map(|t| String::from_utf8_lossy(t).into_owned())
                    .collect();
                (removed, inserted, ob.len(), nb.len())
            }
            (i, j) => {
                let inserted = new[n2..].split(',').take(j).map(str::to_string).collect();
                (
                    i,
                    inserted,
                    os[i].unwrap_or(ob.len()),
                    ns[j].unwrap_or(nb.len()),
                )
            }
        };
        edits.push((token, removed, inserted));
        if extent.0 == usize::MAX || extent.1 == usize::MAX {
            return Some(edits);
        }
        token += removed;
        (o, n, counted) = (next_o, next_n, next_o);
        if os[extent.0].is_none() && ns[extent.1].is_none() {
            return Some(edits);
        }
    }
}

/// Appends the edits that turn the tokens of `o` (the first being token `base` of the old
/// document) into those of `new`. The common byte prefix and suffix, cut back to whole tokens,
/// are skipped first; the tokens between go to [`span_diff`].
fn span_edits(o: &str, base: usize, n: &str, edits: &mut Vec<Edit>) {
    let (ob, nb) = (o.as_bytes(), n.as_bytes());
    let prefix = common_prefix(ob, nb);
    // Tokens ended by a comma inside the common prefix are equal.
    let (skipped, start) = match memchr::memrchr(b',', &ob[..prefix]) {
        Some(c) => (commas(&ob[..c + 1]), c + 1),
        None => (0, 0),
    };
    // Tokens after a comma inside the common suffix (of what follows `start`) are equal; each
    // side keeps at least one token, since the suffix holds fewer commas than either rest.
    let suffix = common_suffix(&ob[start..], &nb[start..]);
    let (o_end, n_end) = match memchr::memchr(b',', &ob[ob.len() - suffix..]) {
        Some(c) => (o.len() - suffix + c, n.len() - suffix + c),
        None => (o.len(), n.len()),
    };
    let old_tokens = tokens(&o[start..o_end]);
    let new_tokens = tokens(&n[start..n_end]);
    let offset = base + skipped;
    for op in span_diff(
        &old_tokens,
        0..old_tokens.len(),
        &new_tokens,
        0..new_tokens.len(),
    ) {
        let owned = |from: usize, len: usize| -> Vec<String> {
            new_tokens[from..from + len]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        edits.push(match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index, old_len, ..
            } => (offset + old_index, old_len, Vec::new()),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (offset + old_index, 0, owned(new_index, new_len)),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (offset + old_index, old_len, owned(new_index, new_len)),
        });
    }
}

/// The diff of `old[o]` and `new[n]`: their common prefix and suffix are skipped in one pass;
/// a pure insertion or deletion (an append to a set) is then one op, anything else goes to Myers
/// on the middle only (its cost grows with the span times the number of changes).
fn span_diff(
    old: &[&str],
    o: std::ops::Range<usize>,
    new: &[&str],
    n: std::ops::Range<usize>,
) -> Vec<DiffOp> {
    let prefix = old[o.clone()]
        .iter()
        .zip(&new[n.clone()])
        .take_while(|(a, b)| a == b)
        .count();
    let (o, n) = (o.start + prefix..o.end, n.start + prefix..n.end);
    let suffix = old[o.clone()]
        .iter()
        .rev()
        .zip(new[n.clone()].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (o, n) = (o.start..o.end - suffix, n.start..n.end - suffix);
    if o.is_empty() && n.is_empty() {
        return Vec::new();
    }
    if o.len() > 1 && !n.is_empty() || n.len() > 1 && !o.is_empty() {
        if o.len() + n.len() >= GREEDY_FROM
            && let Some(ops) = few_changes(old, o.clone(), new, n.clone())
        {
            return ops;
        }
        // Ranges over the whole slices: the ops carry absolute indices.
        return capture_diff(Algorithm::Myers, old, o, new, n);
    }
    vec![match (o.len(), n.len()) {
        (0, new_len) => DiffOp::Insert {
            old_index: o.start,
            new_index: n.start,
            new_len,
        },
        (old_len, 0) => DiffOp::Delete {
            old_index: o.start,
            old_len,
            new_index: n.start,
        },
        (old_len, new_len) => DiffOp::Replace {
            old_index: o.start,
            old_len,
            new_index: n.start,
            new_len,
        },
    }]
}

/// Spans of at least this many tokens (old and new together) try [`few_changes`] before Myers.
const GREEDY_FROM: usize = 64;

/// The most change points [`few_changes`] handles before it leaves the span to Myers.
const GREEDY_CHANGES: usize = 16;

/// The ops of a span changed in a few places (a chat: a tool call ref appended mid-document,
/// the turn count, a turn at the end), found in one pass without Myers' hashing of every
/// token: equal tokens are skipped; at a difference, a run of new tokens before the old token
/// is an insertion, a run of old tokens before the new one a deletion, anything else a
/// one-token replacement. `None` when there are more than [`GREEDY_CHANGES`] change points, or
/// the ops remove or insert more than a little beyond the difference of the lengths (repeated
/// tokens misled it): Myers then finds the smallest edit. Any ops that rebuild `new` are a
/// correct delta; these only have to be small.
fn few_changes(
    old: &[&str],
    o: std::ops::Range<usize>,
    new: &[&str],
    n: std::ops::Range<usize>,
) -> Option<Vec<DiffOp>> {
    let (mut i, mut j) = (o.start, n.start);
    let mut ops = Vec::new();
    let mut changed = 0usize;
    while i < o.end && j < n.end {
        if old[i] == new[j] {
            i += 1;
            j += 1;
            continue;
        }
        if ops.len() >= GREEDY_CHANGES {
            return None;
        }
        if let Some(k) = new[j + 1..n.end].iter().position(|t| *t == old[i]) {
            ops.push(DiffOp::Insert {
                old_index: i,
                new_index: j,
                new_len: k + 1,
            });
            changed += k + 1;
            j += k + 1;
        } else if let Some(k) = old[i + 1..o.end].iter().position(|t| *t == new[j]) {
            ops.push(DiffOp::Delete {
                old_index: i,
                old_len: k + 1,
                new_index: j,
            });
            changed += k + 1;
            i += k + 1;
        } else {
            ops.push(DiffOp::Replace {
                old_index: i,
                old_len: 1,
                new_index: j,
                new_len: 1,
            });
            changed += 2;
            i += 1;
            j += 1;
        }
    }
    if j < n.end {
        ops.push(DiffOp::Insert {
            old_index: i,
            new_index: j,
            new_len: n.end - j,
        });
        changed += n.end - j;
    } else if i < o.end {
        ops.push(DiffOp::Delete {
            old_index: i,
            old_len: o.end - i,
            new_index: j,
        });
        changed += o.end - i;
    }
    (changed <= o.len().abs_diff(n.len()) + 4 * GREEDY_CHANGES).then_some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `sectioned_diff`'s ops to `base` and checks it gives `new`.
    fn round_trip(base: &str, new: &str) -> Result<()> {
        let old = tokens(base);
        let e = edits_of(base, new);
        let delta = Delta {
            b: "00".repeat(32),
            d: 1,
            e,
        };
        assert_eq!(apply(old, &delta)?.join(","), new);
        Ok(())
    }

    /// The block-wise common prefix and suffix equal a byte-by-byte count, wherever the first
    /// difference falls (inside or at the edge of a large or a small block).
    #[test]
    fn common_prefix_and_suffix_count_bytes() {
        let a: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let naive_prefix = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let naive_suffix = |a: &[u8], b: &[u8]| {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .take_while(|(x, y)| x == y)
                .count()
        };
        for at in [0, 1, 127, 128, 16_383, 16_384, 16_500, 32_768, 49_999] {
            let mut b = a.clone();
            b[at] ^= 0xff;
            assert_eq!(common_prefix(&a, &b), naive_prefix(&a, &b), "{at}");
            assert_eq!(common_suffix(&a, &b), naive_suffix(&a, &b), "{at}");
            let longer = [b.as_slice(), b"tail"].concat();
            assert_eq!(
                common_prefix(&a, &longer),
                naive_prefix(&a, &longer),
                "{at}"
            );
            assert_eq!(
                common_suffix(&longer[4..], &a),
                naive_suffix(&longer[4..], &a),
                "{at}"
            );
        }
        assert_eq!(common_prefix(&a, &a), a.len());
        assert_eq!(common_suffix(&a, &a), a.len());
    }

    #[test]
    fn sectioned_diffs_round_trip() -> Result<()> {
        let base = r#"{"active_set":["a","b"],"chat_ref":"c","pinned_set":[],"x":["a","b","c"]}"#;
        for new in [
            r#"{"active_set":["b","a","d"],"chat_ref":"c","pinned_set":["a"],"x":["a","b","c","d"]}"#,
            r#"{"active_set":[],"chat_ref":"c","pinned_set":[],"x":[]}"#,
            r#"{"active_set":["a","b"],"chat_ref":"c","pinned_set":[],"x":["a","b","c"]}"#,
            r#"{"active_set":["a"],"y":"c","pinned_set":[],"x":["a",":\"z\":","c"]}"#,
            r#"{"active_set":["a"],"chat_ref":"c","pinned_set":[],"x":["a","b","c"],"z":1}"#,
            r#"{"x":["\"chat_ref\":","b"]}"#,
        ] {
            round_trip(base, new)?;
            round_trip(new, base)?;
        }
        let ids = |r: std::ops::Range<u32>| -> String {
            r.map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(",")
        };
        let long = format!(r#"{{"a":[{}],"b":[{}]}}"#, ids(0..1000), ids(5..900));
        let changed = format!(
            r#"{{"a":["x",{},"y",{}],"b":[{}]}}"#,
            ids(1..500),
            ids(501..1200),
            ids(0..5)
        );
        round_trip(&long, &changed)?;
        round_trip(&changed, &long)?;
        // A chat with a turn appended: the new document has keys past the old one's last.
        let turn = |n: u32| {
            format!(
                r#"{{"content":"t{n}","role":"user","toolcall_refs":[{}]}}"#,
                ids(n..n + 3)
            )
        };
        let chat = |turns: u32| {
            let all: Vec<String> = (0..turns).map(turn).collect();
            format!(
                r#"{{"session_ref":"s","toolcall_refs":[{}],"turn_count":{turns},"turns":[{}]}}"#,
                ids(0..turns * 3),
                all.join(",")
            )
        };
        round_trip(&chat(40), &chat(41))?;
        round_trip(&chat(41), &chat(40))?;
        round_trip(&chat(0), &chat(2))?;
        // Three edits: the refs appended, the count replaced, the turn appended.
        assert_eq!(edits_of(&chat(40), &chat(41)).len(), 3);
        assert_eq!(key_of(r#"{"active_set":["a""#), Some("active_set"));
        assert_eq!(key_of(r#""a""#), None);
        Ok(())
    }

    proptest::proptest! {
        /// Documents of random tokens (keys, ids with commas, quotes and non-ASCII text, empty
        /// tokens), the new one a random edit of the old: the edits always rebuild it.
        #[test]
        fn edits_of_random_documents_round_trip(
            old in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("{\"a\":[\"x\"".to_string()),
                    proptest::strategy::Just("\"b\":[".to_string()),
                    proptest::strategy::Just("\"c\":\"é\"]".to_string()),
                    "[a-c\",\\\\é]{0,4}",
                ],
                0..30,
            ),
            changes in proptest::collection::vec((0usize..40, 0usize..3, "[a-c\",é]{0,3}"), 0..5),
        ) {
            let mut new = old.clone();
            for (at, removed, token) in changes {
                let at = at.min(new.len());
                let removed = removed.min(new.len() - at);
                new.splice(at..at + removed, [token]);
            }
            let (base, next) = (old.join(","), new.join(","));
            let delta = Delta { b: "00".repeat(32), d: 1, e: edits_of(&base, &next) };
            proptest::prop_assert_eq!(apply(tokens(&base), &delta)?.join(","), next);
        }
    }

    proptest::proptest! {
        /// Long documents of few distinct tokens (repeats mislead a one-pass diff), the new one
        /// changed in a few places: whichever diff runs, the edits rebuild it.
        #[test]
        fn edits_of_long_documents_with_repeated_tokens_round_trip(
            old in proptest::collection::vec("[ab]{1,2}", 40..300),
            changes in proptest::collection::vec((0usize..300, 0usize..4, 0usize..40), 0..20),
        ) {
            let mut new = old.clone();
            for (at, removed, inserted) in changes {
                let at = at.min(new.len());
                let removed = removed.min(new.len() - at);
                let tokens: Vec<String> = (0..inserted).map(|k| format!("{}", k % 3)).collect();
                new.splice(at..at + removed, tokens);
            }
            let (base, next) = (old.join(","), new.join(","));
            let delta = Delta { b: "00".repeat(32), d: 1, e: edits_of(&base, &next) };
            proptest::prop_assert_eq!(apply(tokens(&base), &delta)?.join(","), next);
        }
    }

    /// A chat's commit (a tool call ref appended to the refs, the turn count, a turn appended)
    /// on a chat of 300 turns: a few small edits, found without Myers.
    #[test]
    fn a_chat_commit_is_a_few_small_edits() -> Result<()> {
        let chat = |turns: usize, refs: usize| -> String {
            let refs: Vec<String> = (0..refs).map(|r| format!("\"toolcall:{r}\"")).collect();
            let turns: Vec<String> = (0..turns)
                .map(|t| format!(r#"{{"content":"step {t}, done","role":"assistant"}}"#))
                .collect();
            format!(
                r#"{{"session_ref":"session:s","toolcall_refs":[{}],"turn_count":{},"turns":[{}]}}"#,
                refs.join(","),
                turns.len(),
                turns.join(",")
            )
        };
        let (old, new) = (chat(300, 150), chat(301, 151));
        let (o, n) = (tokens(&old), tokens(&new));
        assert!(few_changes(&o, 0..o.len(), &n, 0..n.len()).is_some());
        // Found on the bytes alone, without sections or tokens.
        assert!(byte_edits(&old, &new).is_some_and(|e| e.len() <= 3));
        let edits = edits_of(&old, &new);
        assert!(edits.len() <= 4, "{edits:?}");
        let inserted: usize = edits.iter().map(|(_, _, i)| i.len()).sum();
        assert!(inserted <= 6, "{edits:?}");
        round_trip(&old, &new)?;
        round_trip(&new, &old)?;
        Ok(())
    }

    #[test]
    fn edits_round_trip() -> Result<()> {
        let base = r#"{"a":["x","y","z"],"b":["p"],"c":1}"#;
        let new = r#"{"a":["x","z","w"],"b":["p","q"],"c":2}"#;
        let old = tokens(base);
        let next = tokens(new);
        let mut e = Vec::new();
        for op in capture_diff_slices(Algorithm::Myers, &old, &next) {
            if let DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } = op
            {
                e.push((
                    old_index,
                    old_len,
                    next[new_index..new_index + new_len]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                ));
            } else if let DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } = op
            {
                e.push((
                    old_index,
                    0,
                    next[new_index..new_index + new_len]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                ));
            } else if let DiffOp::Delete {
                old_index, old_len, ..
            } = op
            {
                e.push((old_index, old_len, Vec::new()));
            }
        }
        let delta = Delta {
            b: "00".repeat(32),
            d: 1,
            e,
        };
        assert_eq!(apply(tokens(base), &delta)?.join(","), new);
        Ok(())
    }
}
