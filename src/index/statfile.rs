//! The stat cache kept beside the store in one piece, as git keeps its index in one file: a scan
//! reads one file instead of the `stat_cache` table's B-tree (several hundred pages decoded on
//! an unchanged re-index) and the `paths` table's listing of the stored paths (a second B-tree
//! pass, whose only use on an unchanged tree is to learn which stored paths have an entry).
//!
//! The file ([`STAT_FILE`]) is a copy of what those two tables answered for a scan's roots, and
//! never decides anything on its own:
//! - it names the state of the store's file it was read at: redb's file header, whose commit
//!   slots carry the last transaction id and the root checksums (every commit, an older
//!   strata's included, writes a new one), read while the scan's handle only read the file;
//! - a scan takes it only when its handle only reads the file too (no process can write while a
//!   read-only handle is open, and a handle that writes may hold commits the file does not have
//!   yet) and the header is byte for byte the one it names, and only for the same filesystem
//!   and the same roots; otherwise the tables are read;
//! - it carries a BLAKE3 digest of its bytes: a damaged or truncated file is no file;
//! - it is written only by a scan that wrote nothing (its handle still reads only, with the
//!   header it read at the start), from the entries it read from the tables, so that it holds
//!   exactly what they held.
//!
//! Each entry keeps every field the table row has, so the racy rule
//! ([`crate::store::StatEntry::vouches_for`]) is applied to the same values. The entries lie
//! in runs of one directory, in the order the walk that wrote the file met them (its listing's
//! order), so the next walk finds each file's entry as the next one of its directory
//! ([`super::scancache`]). An entry is marked checked when that walk found the file vouched for
//! and not denied; the key names the deny rules, so a later scan under the same rules skips
//! them for a file the entry vouches for (a path's answer under the same rules is the same).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::listings::{take, take_len};
use super::scancache::ScanCache;

/// The file in the store directory.
pub const STAT_FILE: &str = "stat.cache";

/// The first bytes of the file: what it is and the version of its layout (v2: entries in runs
/// of one directory, in the walk's order, names relative to their directory, and the deny rules
/// in the key).
const MAGIC: &[u8; 16] = b"strata-stat-v2\n\0";

/// What a scan takes from the file: the stat cache entries under its roots (each marked stored
/// when the store lists its path), and the stored paths without an entry, less those the run
/// that wrote the file found gone and deleted before (tombstoned in the store's state the file
/// names: a scan of that state has nothing to do for such a path unless its walk meets it,
/// and then it is a new file to it; they were stated and looked up in the store every run).
pub struct Kept {
    /// The entries.
    pub cache: ScanCache,
    /// The paths the store lists under the roots that have no entry.
    pub uncached: Vec<String>,
}

/// What names the tables' answers the file holds: the store file's state, the filesystem, the
/// scan's roots and its deny rules.
pub struct Key<'a> {
    /// [`crate::store::Backend::read_only_state`] when the entries were read.
    pub state: &'a [u8],
    /// The filesystem of the roots.
    pub filesystem_id: &'a str,
    /// The scan's canonical roots, in its order.
    pub roots: &'a [PathBuf],
    /// The scan's deny globs, in order: an entry marked checked was found not denied by them.
    pub deny: &'a [String],
}

/// The entries kept in `store_dir` for `key`; `None` when the file is missing, damaged, or
/// kept for another state of the store, another filesystem, other roots or other deny rules.
pub fn load(store_dir: &Path, key: &Key<'_>) -> Option<Kept> {
    use std::io::Read;
    let mut file = std::fs::File::open(store_dir.join(STAT_FILE)).ok()?;
    // Its head first: a file kept for another state of the store (after any write) is not read
    // further, however large the tree it describes.
    let wanted = key_bytes(key);
    let head_len = MAGIC.len() + 32 + wanted.len();
    let size = file
        .metadata()
        .ok()
        .and_then(|m| usize::try_from(m.len()).ok())?;
    let mut bytes = Vec::with_capacity(size.max(head_len));
    bytes.resize(head_len, 0);
    file.read_exact(&mut bytes).ok()?;
    if bytes.get(..MAGIC.len())? != MAGIC || bytes.get(MAGIC.len() + 32..)? != wanted {
        return None;
    }
    file.read_to_end(&mut bytes).ok()?;
    decode(bytes, &wanted)
}

/// Writes the entries of `cache` (in the walk's order `met`, then the others) and the stored
/// paths `uncached` as those of `key` into `store_dir` (a private temporary file renamed over
/// the old one). A failure is left unreported: the next scan reads the tables.
pub fn save(store_dir: &Path, key: &Key<'_>, cache: &ScanCache, met: &[u32], uncached: &[String]) {
    let bytes = encode(key, cache, met, uncached);
    let _ = super::listings::write_atomically(store_dir, STAT_FILE, &bytes);
}

/// Appends a length as 4 little-endian bytes.
fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

/// Appends `bytes` after their length.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// The key's bytes: the state, the filesystem, the roots and the deny globs, each after its
/// length (the lists after their counts).
fn key_bytes(key: &Key<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, key.state);
    put_bytes(&mut out, key.filesystem_id.as_bytes());
    put_len(&mut out, key.roots.len());
    for root in key.roots {
        put_bytes(&mut out, root.as_os_str().as_bytes());
    }
    put_len(&mut out, key.deny.len());
    for glob in key.deny {
        put_bytes(&mut out, glob.as_bytes());
    }
    out
}

/// The file's bytes: [`MAGIC`], the BLAKE3 digest of the body, then the body: the key's bytes,
/// the count of entries and of runs, the runs ([`ScanCache::encode_runs`]), then the count of
/// uncached stored paths and each one (integers little-endian).
fn encode(key: &Key<'_>, cache: &ScanCache, met: &[u32], uncached: &[String]) -> Vec<u8> {
    let mut body = key_bytes(key);
    let order = cache.walk_order(met);
    put_len(&mut body, order.len());
    let runs_at = body.len();
    put_len(&mut body, 0);
    let runs = cache.encode_runs(&order, &mut body);
    if let Some(slot) = body.get_mut(runs_at..runs_at + 4) {
        slot.copy_from_slice(&u32::try_from(runs).unwrap_or(u32::MAX).to_le_bytes());
    }
    put_len(&mut body, uncached.len());
    for path in uncached {
        put_bytes(&mut body, path.as_bytes());
    }
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(blake3::hash(&body).as_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads a length and that many bytes as UTF-8.
fn take_str<'a>(input: &mut &'a [u8]) -> Option<&'a str> {
    let n = take_len(input)?;
    std::str::from_utf8(take(input, n)?).ok()
}

/// The entries of the file's bytes when they are a whole, undamaged file kept for the key whose
/// bytes are `wanted`: the records are left in place, the bytes becoming the cache's arena.
fn decode(bytes: Vec<u8>, wanted: &[u8]) -> Option<Kept> {
    {
        let mut input = bytes.as_slice();
        if take(&mut input, MAGIC.len())? != MAGIC {
            return None;
        }
        let digest = take(&mut input, 32)?;
        // The key first: a file kept for another state is not worth its digest.
        if !input.starts_with(wanted) || blake3::hash(input).as_bytes() != digest {
            return None;
        }
    }
    let body_at = MAGIC.len() + 32 + wanted.len();
    let count = {
        let mut body = bytes.get(body_at..)?;
        let count = take_len(&mut body)?;
        // Each entry takes at least 4 + 1 + the fields' bytes: a count the body cannot hold is
        // damage (and must not size the cache).
        (count <= body.len() / (5 + super::scancache::RECORD_FIELDS)).then_some(count)?
    };
    let mut uncached = Vec::new();
    let cache = ScanCache::from_arena(bytes, count, |bytes, adder| {
        runs(bytes, body_at, count, &mut uncached, adder).is_some()
    })?;
    Some(Kept { cache, uncached })
}

/// Reads the runs of the body at `body_at` of `bytes` into `adder` (`count` entries in all),
/// and the uncached paths into `uncached`; `None` when they are not whole.
fn runs(
    bytes: &[u8],
    body_at: usize,
    count: usize,
    uncached: &mut Vec<String>,
    adder: &mut super::scancache::Adder<'_>,
) -> Option<()> {
    let mut at = body_at.checked_add(4)?;
    let mut input = bytes.get(at..)?;
    let runs = take_len(&mut input)?;
    at += 4;
    let mut added = 0usize;
    for _ in 0..runs {
        let mut input = bytes.get(at..)?;
        let dir_len = take_len(&mut input)?;
        take(&mut input, dir_len)?;
        let n = take_len(&mut input)?;
        if !adder.dir(at + 4..at + 4 + dir_len) {
            return None;
        }
        at += 4 + dir_len + 4;
        added = added.checked_add(n)?;
        if added > count {
            return None;
        }
        for _ in 0..n {
            at = adder.record(at)?;
        }
    }
    if added != count {
        return None;
    }
    let mut body = bytes.get(at..)?;
    let n = take_len(&mut body)?;
    if n > body.len() / 4 {
        return None;
    }
    uncached.reserve(n);
    for _ in 0..n {
        uncached.push(take_str(&mut body)?.to_string());
    }
    body.is_empty().then_some(())
}

#[cfg(test)]
mod tests {
    use super::super::scancache::tests::entry;
    use super::*;
    use crate::store::StatEntry;

    fn sample() -> ScanCache {
        let mut cache = ScanCache::with_capacity(2);
        cache.insert("/t/a", entry(1));
        cache.insert("/t/b \u{e9}", entry(2));
        if let Some(a) = cache.get("/t/a") {
            a.mark_stored();
        }
        cache
    }

    /// The key of state `header-1` of filesystem `fs` for `roots`.
    fn key_of(roots: &[PathBuf]) -> Key<'_> {
        Key {
            state: b"header-1",
            filesystem_id: "fs",
            roots,
            deny: &[],
        }
    }

    fn sorted(cache: &ScanCache) -> Vec<(String, StatEntry, bool)> {
        let mut out: Vec<_> = cache.entries().collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn a_file_answers_only_for_its_own_state_filesystem_and_roots() {
        let roots = [PathBuf::from("/t")];
        let key = key_of(&roots);
        let bytes = encode(&key, &sample(), &[1], &["/t/gone".to_string()]);
        let kept = decode(bytes.clone(), &key_bytes(&key));
        assert!(kept.as_ref().is_some_and(|k| k.uncached == ["/t/gone"]));
        assert_eq!(
            kept.as_ref().map(|k| sorted(&k.cache)),
            Some(sorted(&sample()))
        );
        let other_roots = [PathBuf::from("/t"), PathBuf::from("/u")];
        let other_deny = ["*.secret".to_string()];
        for other in [
            Key {
                state: b"header-2",
                ..key
            },
            Key {
                filesystem_id: "fs2",
                ..key
            },
            Key {
                roots: &other_roots,
                ..key
            },
            Key {
                deny: &other_deny,
                ..key
            },
        ] {
            assert!(decode(bytes.clone(), &key_bytes(&other)).is_none());
        }
    }

    #[test]
    fn a_path_added_again_replaces_its_entry() {
        assert_eq!(sample().len(), 2);
        let mut cache = sample();
        cache.insert("/t/a", entry(3));
        cache.insert("/t/c", entry(4));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("/t/a").map(|c| c.entry()), Some(entry(3)));
        assert_eq!(cache.get("/t/b é").map(|c| c.entry()), Some(entry(2)));
        assert_eq!(cache.get("/t/c").map(|c| c.entry()), Some(entry(4)));
        assert!(cache.get("/t/b").is_none());
    }

    #[test]
    fn any_damaged_or_truncated_file_is_no_file() {
        let roots = [PathBuf::from("/t")];
        let key = key_of(&roots);
        let bytes = encode(&key, &sample(), &[], &[]);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(
                decode(damaged, &key_bytes(&key)).is_none(),
                "byte {at} flipped"
            );
            assert!(
                decode(bytes[..at].to_vec(), &key_bytes(&key)).is_none(),
                "cut at {at}"
            );
        }
    }

    /// `load` reads a file's head before the rest: a file kept for another key (or shorter
    /// than the head) is no file, and one kept for this key is read whole, damage included.
    #[test]
    fn load_checks_the_head_then_reads_the_whole_file() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let roots = [PathBuf::from("/t")];
        let key = key_of(&roots);
        assert!(load(dir.path(), &key).is_none(), "no file");
        save(dir.path(), &key, &sample(), &[], &["/t/gone".to_string()]);
        let kept = load(dir.path(), &key);
        assert_eq!(
            kept.as_ref().map(|k| sorted(&k.cache)),
            Some(sorted(&sample()))
        );
        let other = Key {
            state: b"header-2",
            ..key
        };
        assert!(load(dir.path(), &other).is_none());
        let path = dir.path().join(STAT_FILE);
        let bytes = std::fs::read(&path)?;
        for cut in [10, MAGIC.len() + 32 + 3, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut])?;
            assert!(load(dir.path(), &key).is_none(), "cut at {cut}");
        }
        let mut damaged = bytes.clone();
        if let Some(last) = damaged.last_mut() {
            *last ^= 1;
        }
        std::fs::write(&path, &damaged)?;
        assert!(load(dir.path(), &key).is_none(), "last byte flipped");
        Ok(())
    }
}
