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

use super::*;
use std::sync::{Arc, Mutex};

use redb::ReadableTable;
use serde::{Deserialize, Serialize};
#[cfg(test)]
use similar::capture_diff_slices;
use similar::{Algorithm, DiffOp, capture_diff};

use super::WriteTables;
use super::blobs::read_doc_raw;
use super::codec::{self, DocRec, VersionRec};
use crate::error::{Error, Result};

/// The first character of a delta document's fields.
const MARK: char = '\u{1}';
/// The longest chain of deltas a read follows: a skip-delta chain of `u32` numbers has at most
/// 32 (chains written before skip-deltas were linear and at most 64 long).
const MAX_CHAIN: usize = 64;

#[derive(Serialize, Deserialize)]
struct Delta {
    /// The base document's object hash (hex).
    b: String,
    /// This delta's number in its chain: the full document at its start is 0, and delta `d`
    /// is based on document `d & (d - 1)`.
    d: u32,
    /// Edits in ascending order.
    e: Vec<Edit>,
}

/// A delta at least 1/`REBASE_FRACTION` of its full document is not stored: the full document
/// is, and starts a new chain. Without it (and [`BIG_CHANGE`]) a large early change (10 000
/// files read in a session's first commits) comes back in every delta on the chain's start, at
/// every power of two (measured: 2 MB at commits 32, 64 and 128 of a 10 000-file session, a
/// mean of 55 KB a commit; with this rule alone 427 KB each time, a mean of 18.5 KB). A growing
/// document is then stored whole about each time it has grown by a third since its last full
/// copy: a constant number of copies per doubling, amortised O(change).
const REBASE_FRACTION: usize = 4;

/// A document whose length differs from its previous version's by 1/`BIG_CHANGE` of it or more
/// is stored whole, starting a new chain that holds the change in its base.
const BIG_CHANGE: usize = 8;

/// A delta's base and number, read without its edits.
#[derive(Deserialize)]
struct Head {
    b: String,
    d: u32,
}

/// One edit of a token list: (first base token, tokens removed, tokens inserted).
type Edit = (usize, usize, Vec<String>);

fn tokens(fields: &str) -> Vec<&str> {
    fields.split(',').collect()
}

fn parse(fields: &str) -> Result<Delta> {
    serde_json::from_str(&fields[MARK.len_utf8()..])
        .map_err(|e| Error::corrupt(format!("delta document does not parse: {e}")))
}

fn parse_head(fields: &str) -> Result<Head> {
    serde_json::from_str(&fields[MARK.len_utf8()..])
        .map_err(|e| Error::corrupt(format!("delta document does not parse: {e}")))
}

fn is_delta(fields: &str) -> bool {
    fields.starts_with(MARK)
}

fn hash_of(hex_hash: &str) -> Result<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_hash, &mut out)
        .map_err(|e| Error::corrupt(format!("delta base {hex_hash}: {e}")))?;
    Ok(out)
}

fn base_hash(delta: &Delta) -> Result<[u8; 32]> {
    hash_of(&delta.b)
}

fn apply<'a>(old: Vec<&'a str>, delta: &'a Delta) -> Result<Vec<&'a str>> {
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
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The length of the common suffix of `a` and `b`, compared a block at a time.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let (la, lb) = (a.len(), b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[la - i - BLOCK..la - i] == b[lb - i - BLOCK..lb - i] {
        i += BLOCK;
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
/// (byte comparisons and comma counts), not a split of it into tokens. Any split gives a
/// correct delta; this one only makes it cheap.
fn edits_of(old: &str, new: &str) -> Vec<Edit> {
    let (a, b) = (sections(old), sections(new));
    let same_keys = a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.1 == y.1);
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
    let (ob, nb) = (bounds(&a, old.len()), bounds(&b, new.len()));
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

/// `rec` with its fields resolved to the full canonical JSON when it is a delta.
///
/// # Errors
/// [`Error::Corrupt`] when a base is missing or a delta does not apply.
pub(crate) fn resolved(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    mut rec: DocRec,
) -> Result<DocRec> {
    if !is_delta(&rec.fields) {
        return Ok(rec);
    }
    let mut chain = vec![parse(&rec.fields)?];
    let full = loop {
        let base = base_hash(
            chain
                .last()
                .ok_or_else(|| Error::corrupt("empty delta chain"))?,
        )?;
        let (base_rec, _) = read_doc_raw(index, data, &base)?.ok_or_else(|| {
            Error::corrupt(format!("delta base {} is missing", hex::encode(base)))
        })?;
        if !is_delta(&base_rec.fields) {
            break base_rec.fields;
        }
        if chain.len() > MAX_CHAIN {
            return Err(Error::corrupt("delta chain longer than its depth limit"));
        }
        chain.push(parse(&base_rec.fields)?);
    };
    // Applied on token lists, joined once: a chain costs one pass per delta over pointers.
    let mut current = tokens(&full);
    for delta in chain.iter().rev() {
        current = apply(current, delta)?;
    }
    rec.fields = current.join(",");
    Ok(rec)
}

/// The fields to store for a new document whose full fields are `fields`, the next of the chain
/// whose latest document is `previous`: a delta against document `n & (n - 1)` of that chain
/// (found walking back from `previous`) when that is shorter, else `fields`.
///
/// # Errors
/// [`Error::Corrupt`] when the chain does not read or a base does not resolve.
pub(crate) fn encode(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    previous: &[u8; 32],
    cache: Option<&BaseCache>,
    fields: &str,
) -> Result<String> {
    // A big change (an eighth of the document or more) starts a new chain with the full
    // document, so that it is not repeated in every delta on the old chain's start.
    let grew = cache
        .and_then(|c| c.get(previous))
        .is_some_and(|prev| fields.len().abs_diff(prev.len()) * BIG_CHANGE >= fields.len());
    if grew {
        return Ok(fields.to_string());
    }
    let Some((base, number)) = skip_base(index, data, previous)? else {
        return Ok(fields.to_string());
    };
    let base_fields: Arc<str> = match cache.and_then(|c| c.get(&base)) {
        Some(full) => full,
        None => {
            let (raw, _) = read_doc_raw(index, data, &base)?.ok_or_else(|| {
                Error::corrupt(format!("delta base {} is missing", hex::encode(base)))
            })?;
            let full: Arc<str> = resolved(index, data, raw)?.fields.into();
            if let Some(cache) = cache {
                cache.put(base, Arc::clone(&full));
            }
            full
        }
    };
    let edits = edits_of(&base_fields, fields);
    let delta = Delta {
        b: hex::encode(base),
        d: number,
        e: edits,
    };
    let text = serde_json::to_string(&delta).map_err(|e| Error::storage("encoding a delta", e))?;
    let encoded = format!("{MARK}{text}");
    Ok(if encoded.len() < fields.len() / REBASE_FRACTION {
        encoded
    } else {
        fields.to_string()
    })
}

/// The base of the next delta after document `previous` and that delta's number: number
/// `n = previous + 1` is based on document `n & (n - 1)`, which is always on the chain of
/// `previous` (it clears the lowest set bit of `n`; the chain of `n - 1` clears its set bits one
/// by one). `None` when `previous` is not stored, its chain is as long as a `u32` counts, or the
/// chain skips the number (a store written by another rule): then a full document is stored.
fn skip_base(
    index: &impl ReadableTable<[u8; 32], (u64, u64, bool)>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    previous: &[u8; 32],
) -> Result<Option<([u8; 32], u32)>> {
    let number_of = |hash: &[u8; 32]| -> Result<Option<(u32, Option<[u8; 32]>)>> {
        let Some((raw, _)) = read_doc_raw(index, data, hash)? else {
            return Ok(None);
        };
        if !is_delta(&raw.fields) {
            return Ok(Some((0, None)));
        }
        let head = parse_head(&raw.fields)?;
        Ok(Some((head.d, Some(hash_of(&head.b)?))))
    };
    let Some((mut at_number, mut base)) = number_of(previous)? else {
        return Ok(None);
    };
    let Some(number) = at_number.checked_add(1) else {
        return Ok(None);
    };
    let target = number & (number - 1);
    let mut at = *previous;
    while at_number > target {
        let Some(next) = base else {
            return Ok(None);
        };
        let Some((n, b)) = number_of(&next)? else {
            return Err(Error::corrupt(format!(
                "delta base {} is missing",
                hex::encode(next)
            )));
        };
        if n >= at_number {
            return Err(Error::corrupt(format!(
                "delta chain of {} does not descend",
                hex::encode(previous)
            )));
        }
        (at, at_number, base) = (next, n, b);
    }
    Ok((at_number == target).then_some((at, number)))
}

/// Rewrites with its full fields every delta document that is based directly on one of
/// `erased` (documents an eviction is about to remove) and is not itself among them: a document
/// is shared by object hash, so another entity's version (a fork's chat written by a raw put)
/// can use a delta whose base only the evicted entity's versions referenced, and its own later
/// deltas can be based on that entity's documents. Deltas are written after their bases, so
/// only documents from the first erased record on are read. Returns the bytes added.
///
/// # Errors
/// [`Error::Corrupt`] when a document does not decode or a delta does not resolve.
pub(crate) fn keep_dependents_whole(
    docs: &mut super::blobs::DocTables<'_>,
    erased: &std::collections::HashMap<[u8; 32], u64>,
) -> Result<u64> {
    let Some(first) = erased.values().min().copied() else {
        return Ok(0);
    };
    let erased_seqs: std::collections::HashSet<u64> = erased.values().copied().collect();
    let mut rewrite = Vec::new();
    for entry in docs.data.range(first..).db()? {
        let (key, value) = entry.db()?;
        let seq = key.value();
        if erased_seqs.contains(&seq) {
            continue;
        }
        let rec: DocRec = codec::decode(value.value(), &format!("document record {seq}"))?;
        if is_delta(&rec.fields) && erased.contains_key(&hash_of(&parse_head(&rec.fields)?.b)?) {
            rewrite.push((seq, rec));
        }
    }
    // Resolve every one before writing any: a chain may run through another rewritten one.
    let mut whole = Vec::with_capacity(rewrite.len());
    for (seq, rec) in rewrite {
        let old = codec::encode(&rec)?.len() as u64;
        let rec = resolved(&docs.index, &docs.data, rec)?;
        whole.push((seq, old, codec::encode(&rec)?));
    }
    let mut added = 0;
    for (seq, old, record) in whole {
        docs.data.insert(seq, record.as_slice()).db()?;
        added += (record.len() as u64).saturating_sub(old);
    }
    Ok(added)
}

/// The full fields of the latest session and chat documents this store handle wrote, by object
/// hash, so that the next delta on one does not rebuild it from its chain. An object hash fixes
/// its fields (it hashes them), so an entry is never wrong, even for a document whose
/// transaction failed; the depth of a base is always read from the store.
#[derive(Debug, Default)]
pub(crate) struct BaseCache(Mutex<Vec<([u8; 32], Arc<str>)>>);

/// How many documents [`BaseCache`] keeps, least recently used out first: the last few of a
/// chain are the bases of the next deltas (a few sessions written by one handle at once).
const CACHED_BASES: usize = 12;

impl BaseCache {
    /// The fields of document `hash` when cached; a hit becomes the most recent entry, so the
    /// bases that skip-deltas come back to stay.
    fn get(&self, hash: &[u8; 32]) -> Option<Arc<str>> {
        let mut entries = self.0.lock().ok()?;
        let at = entries.iter().position(|(h, _)| h == hash)?;
        let entry = entries.remove(at);
        let fields = Arc::clone(&entry.1);
        entries.push(entry);
        Some(fields)
    }

    /// Remembers the full `fields` of document `hash` as the most recent entry.
    pub(crate) fn put(&self, hash: [u8; 32], fields: Arc<str>) {
        // A poisoned lock only loses the cache: deltas then rebuild their base from the store.
        if let Ok(mut entries) = self.0.lock() {
            entries.retain(|(h, _)| *h != hash);
            if entries.len() >= CACHED_BASES {
                entries.remove(0);
            }
            entries.push((hash, fields));
        }
    }
}

impl WriteTables<'_> {
    /// The object hash of the latest version (greatest valid time, then tx) of entity `eid`, the
    /// base of its next delta document; `None` when it has none or it is a tombstone.
    pub(super) fn delta_base(&self, eid: u64) -> Result<Option<[u8; 32]>> {
        let Some((vt, tx)) = self.latest_row(eid)? else {
            return Ok(None);
        };
        match self.versions.get((eid, vt, tx)).db()? {
            Some(v) => Ok(codec::decode::<VersionRec>(v.value(), "version record")?.object_hash),
            None => Ok(None),
        }
    }
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
