//! A scan's copy of the stat cache, kept per directory as git's index is sorted: the walker meets
//! a directory's files in the order of its (kept) listing, and the stat file lays each
//! directory's entries out in that order, so a file the cache vouches for costs a comparison of
//! its name with the next entry of its directory, read sequentially, instead of a hash of its
//! whole path and a probe that missed the CPU cache on nearly every file.
//!
//! The entries lie one after another in one buffer (the stat file as loaded, or the records the
//! table's rows were turned into), each as its name and its fields ([`RECORD_FIELDS`] bytes);
//! the cache holds where each lies and in which directory, and a mark per entry. A map by whole
//! path is built only when a path is asked for by name ([`ScanCache::get`]: a file the walk did
//! not meet in order, a read file, the deletion check), not on an unchanged re-index.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::hash::Hash;
use crate::store::{FileStat, StatEntry};

/// Bytes of a record's fields after its name: size, mtime, ctime, inode, file hash, scan start
/// (integers little-endian) and the flags byte.
pub const RECORD_FIELDS: usize = 8 * 4 + 32 + 8 + 1;

/// Flag: the store lists the path among its files.
pub const STORED: u8 = 1;
/// Flag: the scan that wrote the stat file found the file vouched for and not denied by the deny
/// rules its key names (a later scan under the same rules need not ask them again).
pub const CHECKED: u8 = 2;
/// Flag (in memory only): the scan met the file.
const MET: u8 = 4;
/// Flag (in memory only): this scan found the file vouched for and not denied.
const VOUCHED: u8 = 8;
/// The flags a stat file may carry.
pub const FILE_FLAGS: u8 = STORED | CHECKED;

/// The stat cache entries of a scan's roots, by directory and name, each with marks set as the
/// scan meets the file: the walk marks the files the cache vouches for and sends only their
/// count, and the deletion check asks the marks (no path of its own for an unchanged file).
#[derive(Debug, Default)]
pub struct ScanCache {
    /// The records (and the directories' paths).
    arena: Vec<u8>,
    /// The directories' paths (without their last `/`), as places in the arena.
    dirs: Vec<std::ops::Range<usize>>,
    /// The directory of each path hash ([`hash_bytes`] of the directory's path).
    dir_ids: rustc_hash::FxHashMap<u64, u32>,
    /// Directories whose path hash an earlier directory has (almost never any).
    dir_collided: Vec<u32>,
    /// Each entry: where its record starts, and its directory.
    entries: Vec<Entry>,
    /// Each entry's flags.
    flags: Vec<AtomicU8>,
    /// The entries grouped by directory (built when the walk first asks).
    grouped: OnceLock<Grouped>,
    /// The entries by directory and name (built when a path is first asked for by name).
    by_name: OnceLock<ByName>,
}

/// Where one entry lies.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The offset of its record (the name's length) in the arena.
    at: u32,
    /// Its directory.
    dir: u32,
}

/// The entries in directory order.
#[derive(Debug, Default)]
struct Grouped {
    /// The entries, each directory's together, in the order they were added.
    order: Vec<u32>,
    /// Each directory's run in `order`: its start (the run ends where the next one starts).
    starts: Vec<u32>,
    /// Each entry's place in `order`.
    place: Vec<u32>,
}

/// The entries by directory and name.
#[derive(Debug, Default)]
struct ByName {
    /// The entry of each key ([`name_key`]).
    by_key: rustc_hash::FxHashMap<u64, u32>,
    /// Entries whose key an earlier entry has (almost never any).
    collided: Vec<u32>,
}

/// The FxHash of some bytes.
fn hash_bytes(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher as _;
    rustc_hash::FxBuildHasher.hash_one(bytes)
}

/// The key of a name in a directory.
fn name_key(dir: u32, name: &[u8]) -> u64 {
    hash_bytes(name) ^ u64::from(dir).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A path split at its last `/`: its directory and its name.
pub fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(at) => (&path[..at], &path[at + 1..]),
        None => (&[], path),
    }
}

/// Appends an entry's record (see [`RECORD_FIELDS`]) to `out`.
pub fn put_record(out: &mut Vec<u8>, name: &[u8], entry: &StatEntry, flags: u8) {
    out.extend_from_slice(&u32::try_from(name.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(name);
    let FileStat {
        size,
        mtime_ns,
        ctime_ns,
        inode,
    } = entry.stat;
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&mtime_ns.to_le_bytes());
    out.extend_from_slice(&ctime_ns.to_le_bytes());
    out.extend_from_slice(&inode.to_le_bytes());
    out.extend_from_slice(&entry.file_hash.0);
    out.extend_from_slice(&entry.scan_start_ns.to_le_bytes());
    out.push(flags);
}

/// Reads 8 bytes at `at` of `bytes` (zeros past the end: records are checked when added).
fn le8(bytes: &[u8], at: usize) -> [u8; 8] {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .unwrap_or_default()
}

/// The place of one directory's entries while the walk goes through them in order (the
/// default one is at no directory: it finds nothing).
#[derive(Clone, Copy, Debug)]
pub struct Cursor {
    /// The directory (`u32::MAX`: none the cache holds).
    dir: u32,
    /// The next place in the directory's run.
    next: u32,
    /// Where the run ends.
    end: u32,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            dir: u32::MAX,
            next: 0,
            end: 0,
        }
    }
}

/// One entry of a [`ScanCache`].
#[derive(Clone, Copy, Debug)]
pub struct Cached<'a> {
    cache: &'a ScanCache,
    at: u32,
}

impl Cached<'_> {
    /// The stat cache entry.
    pub fn entry(self) -> StatEntry {
        self.cache.entry_of(self.at)
    }

    /// Marks the file met; true the first time.
    pub fn mark(self) -> bool {
        self.cache.set_flag(self.at, MET) & MET == 0
    }

    /// Whether the file was met.
    pub fn is_marked(self) -> bool {
        self.cache.flag(self.at) & MET != 0
    }

    /// Marks the path as one the store lists among its files.
    pub fn mark_stored(self) {
        self.cache.set_flag(self.at, STORED);
    }

    /// Marks the file vouched for and not denied by this scan.
    pub fn mark_vouched(self) {
        self.cache.set_flag(self.at, VOUCHED);
    }

    /// Whether the stat file this entry came from found it not denied under the scan's deny
    /// rules (its key names them).
    pub fn checked(self) -> bool {
        self.cache.flag(self.at) & CHECKED != 0
    }

    /// Its place in the cache, for [`ScanCache::walk_order`].
    pub fn index(self) -> u32 {
        self.at
    }
}

impl ScanCache {
    /// An empty cache with room for `entries`.
    pub fn with_capacity(entries: usize) -> Self {
        ScanCache {
            entries: Vec::with_capacity(entries),
            flags: Vec::with_capacity(entries),
            arena: Vec::with_capacity(entries.saturating_mul(RECORD_FIELDS + 24)),
            ..ScanCache::default()
        }
    }

    /// A cache over `arena`, which holds records (see [`put_record`]) and directory paths:
    /// `fill` is given the arena and an adder, to which it gives each directory (its path's
    /// place in the arena) and then that directory's records (each one's place, its name's
    /// length first); the adder returns false when a place is not a whole record with a UTF-8
    /// name and known flags, or a directory's path is not UTF-8. `None` when `fill` returns
    /// false.
    pub fn from_arena(
        arena: Vec<u8>,
        entries: usize,
        fill: impl FnOnce(&[u8], &mut Adder<'_>) -> bool,
    ) -> Option<Self> {
        let mut cache = ScanCache {
            entries: Vec::with_capacity(entries),
            flags: Vec::with_capacity(entries),
            ..ScanCache::default()
        };
        // The cache's own arena stays empty while it is filled over `arena`.
        let filled = fill(
            &arena,
            &mut Adder {
                arena: &arena,
                cache: &mut cache,
                dir: None,
            },
        );
        filled.then(|| ScanCache { arena, ..cache })
    }

    /// The directory of path `dir` (without its last `/`).
    fn dir_id(&self, dir: &[u8]) -> Option<u32> {
        find_dir(
            &self.arena,
            &self.dirs,
            &self.dir_ids,
            &self.dir_collided,
            dir,
        )
    }

    /// Adds the entry of canonical `path` (unmarked), or replaces the one it has.
    pub fn insert(&mut self, path: &str, entry: StatEntry) {
        let (dir, name) = split(path.as_bytes());
        if let Some(cached) = self.get(path) {
            let at = cached.at;
            let Some(&Entry { at: record, .. }) = self.entries.get(at as usize) else {
                return;
            };
            // The same name: a record of the same length, written over.
            let record = record as usize;
            let mut bytes = Vec::with_capacity(4 + name.len() + RECORD_FIELDS);
            let flags = self.flag(at) & STORED;
            put_record(&mut bytes, name, &entry, flags);
            if let Some(slot) = self.arena.get_mut(record..record + bytes.len()) {
                slot.copy_from_slice(&bytes);
            }
            if let Some(f) = self.flags.get(at as usize) {
                f.store(0, Ordering::Relaxed);
            }
            return;
        }
        let dir_id = match self.dir_id(dir) {
            Some(id) => id,
            None => {
                let start = self.arena.len();
                self.arena.extend_from_slice(dir);
                let Ok(id) = u32::try_from(self.dirs.len()) else {
                    return;
                };
                self.dirs.push(start..self.arena.len());
                match self.dir_ids.entry(hash_bytes(dir)) {
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(id);
                    }
                    std::collections::hash_map::Entry::Occupied(_) => self.dir_collided.push(id),
                }
                id
            }
        };
        let (Ok(at), Ok(record)) = (
            u32::try_from(self.entries.len()),
            u32::try_from(self.arena.len()),
        ) else {
            return;
        };
        put_record(&mut self.arena, name, &entry, 0);
        self.entries.push(Entry {
            at: record,
            dir: dir_id,
        });
        self.flags.push(AtomicU8::new(0));
        self.grouped = OnceLock::new();
        if let Some(by_name) = self.by_name.get_mut() {
            add_name(by_name, name_key(dir_id, name), at);
        }
    }

    /// The name of entry `at`.
    fn name_of(&self, at: u32) -> &[u8] {
        let Some(&Entry { at: record, .. }) = self.entries.get(at as usize) else {
            return &[];
        };
        let record = record as usize;
        let len = u32::from_le_bytes(
            self.arena
                .get(record..record + 4)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_default(),
        ) as usize;
        self.arena
            .get(record + 4..record + 4 + len)
            .unwrap_or_default()
    }

    /// The directory path of entry `at`.
    fn dir_of(&self, at: u32) -> &[u8] {
        self.entries
            .get(at as usize)
            .and_then(|e| self.dirs.get(e.dir as usize))
            .and_then(|range| self.arena.get(range.clone()))
            .unwrap_or_default()
    }

    /// The whole path of entry `at`.
    fn path_of(&self, at: u32) -> String {
        let (dir, name) = (self.dir_of(at), self.name_of(at));
        let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
        path.extend_from_slice(dir);
        path.push(b'/');
        path.extend_from_slice(name);
        // Names and directories are checked UTF-8 when added.
        String::from_utf8(path).unwrap_or_default()
    }

    /// The stat cache entry of entry `at`.
    fn entry_of(&self, at: u32) -> StatEntry {
        let name_len = self.name_of(at).len();
        let record = self.entries.get(at as usize).map_or(0, |e| e.at as usize);
        let f = record + 4 + name_len;
        let bytes = &self.arena;
        let mut file_hash = [0; 32];
        if let Some(hash) = bytes.get(f + 32..f + 64) {
            file_hash.copy_from_slice(hash);
        }
        StatEntry {
            stat: FileStat {
                size: u64::from_le_bytes(le8(bytes, f)),
                mtime_ns: i64::from_le_bytes(le8(bytes, f + 8)),
                ctime_ns: i64::from_le_bytes(le8(bytes, f + 16)),
                inode: u64::from_le_bytes(le8(bytes, f + 24)),
            },
            file_hash: Hash(file_hash),
            scan_start_ns: i64::from_le_bytes(le8(bytes, f + 64)),
        }
    }

    /// The flags of entry `at`.
    fn flag(&self, at: u32) -> u8 {
        self.flags
            .get(at as usize)
            .map_or(0, |f| f.load(Ordering::Relaxed))
    }

    /// Sets `flag` on entry `at`; the flags before.
    fn set_flag(&self, at: u32, flag: u8) -> u8 {
        self.flags
            .get(at as usize)
            .map_or(0, |f| f.fetch_or(flag, Ordering::Relaxed))
    }

    /// The entries grouped by directory.
    fn grouped(&self) -> &Grouped {
        self.grouped.get_or_init(|| {
            let mut starts = vec![0u32; self.dirs.len() + 1];
            for e in &self.entries {
                if let Some(n) = starts.get_mut(e.dir as usize + 1) {
                    *n += 1;
                }
            }
            for d in 1..starts.len() {
                starts[d] += starts[d - 1];
            }
            let mut fill = starts.clone();
            let mut order = vec![0u32; self.entries.len()];
            let mut place = vec![0u32; self.entries.len()];
            for (at, e) in self.entries.iter().enumerate() {
                if let Some(next) = fill.get_mut(e.dir as usize) {
                    let p = *next as usize;
                    *next += 1;
                    if let (Some(o), Some(pl), Ok(at)) =
                        (order.get_mut(p), place.get_mut(at), u32::try_from(at))
                    {
                        *o = at;
                        *pl = u32::try_from(p).unwrap_or(u32::MAX);
                    }
                }
            }
            Grouped {
                order,
                starts,
                place,
            }
        })
    }

    /// The entries by directory and name.
    fn by_name(&self) -> &ByName {
        self.by_name.get_or_init(|| {
            let mut by_name = ByName {
                by_key: rustc_hash::FxHashMap::with_capacity_and_hasher(
                    self.entries.len(),
                    Default::default(),
                ),
                collided: Vec::new(),
            };
            for (at, e) in self.entries.iter().enumerate() {
                let Ok(at) = u32::try_from(at) else { break };
                add_name(&mut by_name, name_key(e.dir, self.name_of(at)), at);
            }
            by_name
        })
    }

    /// The entry named `name` in directory `dir`, found by name.
    fn find_named(&self, dir: u32, name: &[u8]) -> Option<u32> {
        let by_name = self.by_name();
        let is = |at: u32| {
            self.entries.get(at as usize).is_some_and(|e| e.dir == dir) && self.name_of(at) == name
        };
        if let Some(&at) = by_name.by_key.get(&name_key(dir, name))
            && is(at)
        {
            return Some(at);
        }
        // The last one added wins, as a map's insert does.
        by_name.collided.iter().rev().copied().find(|&at| is(at))
    }

    /// The entry of canonical `path`.
    pub fn get(&self, path: &str) -> Option<Cached<'_>> {
        let (dir, name) = split(path.as_bytes());
        let dir = self.dir_id(dir)?;
        let at = self.find_named(dir, name)?;
        Some(Cached { cache: self, at })
    }

    /// A cursor at the first entry of directory `dir` (its path without the last `/`).
    pub fn cursor(&self, dir: &[u8]) -> Cursor {
        let Some(id) = self.dir_id(dir) else {
            return Cursor::default();
        };
        let grouped = self.grouped();
        let start = grouped.starts.get(id as usize).copied().unwrap_or(0);
        let end = grouped.starts.get(id as usize + 1).copied().unwrap_or(0);
        Cursor {
            dir: id,
            next: start,
            end,
        }
    }

    /// The entry of file `name` in the cursor's directory: the cursor's next entry when it has
    /// that name (the walk meets a directory's files in the order the stat file keeps them),
    /// else the entry found by name, after which the cursor moves.
    pub fn next_in(&self, cursor: &mut Cursor, name: &[u8]) -> Option<Cached<'_>> {
        if cursor.dir == u32::MAX {
            return None;
        }
        let grouped = self.grouped();
        if cursor.next < cursor.end
            && let Some(&at) = grouped.order.get(cursor.next as usize)
            && self.name_of(at) == name
        {
            cursor.next += 1;
            return Some(Cached { cache: self, at });
        }
        let at = self.find_named(cursor.dir, name)?;
        if let Some(&place) = grouped.place.get(at as usize) {
            cursor.next = place + 1;
        }
        Some(Cached { cache: self, at })
    }

    /// The paths marked stored and not met, in no order.
    pub fn stored_unmet(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.entries.len())
            .filter_map(|at| u32::try_from(at).ok())
            .filter(|&at| {
                let flags = self.flag(at);
                flags & STORED != 0 && flags & MET == 0
            })
            .map(|at| self.path_of(at))
    }

    /// Every entry: its path, the entry, and whether it is marked stored.
    #[cfg(test)]
    pub fn entries(&self) -> impl Iterator<Item = (String, StatEntry, bool)> + '_ {
        (0..self.entries.len())
            .filter_map(|at| u32::try_from(at).ok())
            .map(|at| {
                (
                    self.path_of(at),
                    self.entry_of(at),
                    self.flag(at) & STORED != 0,
                )
            })
    }

    /// The entries in the order `met` gives (the walk's order; each entry once), then the
    /// others, each directory's together: the order a stat file keeps them in.
    pub fn walk_order(&self, met: &[u32]) -> Vec<u32> {
        let mut taken = vec![false; self.entries.len()];
        let mut out = Vec::with_capacity(self.entries.len());
        for &at in met {
            if let Some(t) = taken.get_mut(at as usize)
                && !*t
            {
                *t = true;
                out.push(at);
            }
        }
        for &at in &self.grouped().order {
            if taken.get(at as usize) == Some(&false) {
                out.push(at);
            }
        }
        out
    }

    /// Writes the entries in `order` as the stat file keeps them: runs of one directory's
    /// entries, each run its directory's path (its length first) and count, then the records;
    /// the flags written are [`STORED`] and, for a file this scan vouched for, [`CHECKED`].
    /// Returns the count of runs.
    pub fn encode_runs(&self, order: &[u32], out: &mut Vec<u8>) -> usize {
        let mut runs = 0;
        let mut i = 0;
        while i < order.len() {
            let dir = self.entries.get(order[i] as usize).map_or(0, |e| e.dir);
            let mut j = i;
            while j < order.len() && self.entries.get(order[j] as usize).map(|e| e.dir) == Some(dir)
            {
                j += 1;
            }
            let path = self
                .dirs
                .get(dir as usize)
                .and_then(|r| self.arena.get(r.clone()))
                .unwrap_or_default();
            out.extend_from_slice(&u32::try_from(path.len()).unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(path);
            out.extend_from_slice(&u32::try_from(j - i).unwrap_or(u32::MAX).to_le_bytes());
            for &at in &order[i..j] {
                let flags = self.flag(at);
                let mut kept = flags & STORED;
                if flags & VOUCHED != 0 {
                    kept |= CHECKED;
                }
                put_record(out, self.name_of(at), &self.entry_of(at), kept);
            }
            runs += 1;
            i = j;
        }
        runs
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Adds entry `at` under `key`.
fn add_name(by_name: &mut ByName, key: u64, at: u32) {
    match by_name.by_key.entry(key) {
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(at);
        }
        std::collections::hash_map::Entry::Occupied(_) => by_name.collided.push(at),
    }
}

/// The directory of path `dir` among `dirs`.
fn find_dir(
    arena: &[u8],
    dirs: &[std::ops::Range<usize>],
    dir_ids: &rustc_hash::FxHashMap<u64, u32>,
    collided: &[u32],
    dir: &[u8],
) -> Option<u32> {
    let is = |id: u32| {
        dirs.get(id as usize)
            .and_then(|r| arena.get(r.clone()))
            .is_some_and(|path| path == dir)
    };
    if let Some(&id) = dir_ids.get(&hash_bytes(dir))
        && is(id)
    {
        return Some(id);
    }
    collided.iter().copied().find(|&id| is(id))
}

/// Adds directories and records to a cache being built over an arena.
pub struct Adder<'a> {
    arena: &'a [u8],
    cache: &'a mut ScanCache,
    /// The directory records are added to.
    dir: Option<u32>,
}

impl Adder<'_> {
    /// Starts directory `path` (its place in the arena; one met before is taken again): the
    /// records added next are its. False when the path is not UTF-8.
    pub fn dir(&mut self, path: std::ops::Range<usize>) -> bool {
        let Some(bytes) = self.arena.get(path.clone()) else {
            return false;
        };
        if std::str::from_utf8(bytes).is_err() {
            return false;
        }
        let parts = &mut *self.cache;
        if let Some(id) = find_dir(
            self.arena,
            &parts.dirs,
            &parts.dir_ids,
            &parts.dir_collided,
            bytes,
        ) {
            self.dir = Some(id);
            return true;
        }
        let Ok(id) = u32::try_from(parts.dirs.len()) else {
            return false;
        };
        parts.dirs.push(path);
        match parts.dir_ids.entry(hash_bytes(bytes)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(id);
            }
            std::collections::hash_map::Entry::Occupied(_) => parts.dir_collided.push(id),
        }
        self.dir = Some(id);
        true
    }

    /// Adds the record at `at` (its name's length first) to the current directory; returns
    /// where it ends, or `None` when it is not a whole record with a UTF-8 name and known
    /// flags, or no directory was started.
    pub fn record(&mut self, at: usize) -> Option<usize> {
        let dir = self.dir?;
        let len = u32::from_le_bytes(self.arena.get(at..at + 4)?.try_into().ok()?) as usize;
        let name_end = at.checked_add(4)?.checked_add(len)?;
        let name = self.arena.get(at + 4..name_end)?;
        let end = name_end.checked_add(RECORD_FIELDS)?;
        let flags = *self.arena.get(end.checked_sub(1)?)?;
        if end > self.arena.len()
            || flags & !FILE_FLAGS != 0
            || name.is_empty()
            || name.contains(&b'/')
            || std::str::from_utf8(name).is_err()
        {
            return None;
        }
        self.cache.entries.push(Entry {
            at: u32::try_from(at).ok()?,
            dir,
        });
        self.cache.flags.push(AtomicU8::new(flags));
        Some(end)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A distinct entry for each `n`.
    pub(in crate::index) fn entry(n: u8) -> StatEntry {
        StatEntry {
            stat: FileStat {
                size: u64::from(n),
                mtime_ns: -1_000 * i64::from(n),
                ctime_ns: 2_000,
                inode: 77,
            },
            file_hash: Hash([n; 32]),
            scan_start_ns: 1_700_000_000_000_000_000,
        }
    }

    #[test]
    fn a_cursor_finds_names_in_order_and_out_of_it() {
        let mut cache = ScanCache::with_capacity(8);
        for (n, path) in ["/t/a/x", "/t/b", "/t/a/y", "/t/a/z", "/t/c"]
            .iter()
            .enumerate()
        {
            cache.insert(path, entry(u8::try_from(n).unwrap_or_default()));
        }
        let mut cursor = cache.cursor(b"/t/a");
        // In order.
        assert_eq!(
            cache.next_in(&mut cursor, b"x").map(|c| c.entry()),
            Some(entry(0))
        );
        // One gone (y): z is found by name and the cursor moves past it.
        assert_eq!(
            cache.next_in(&mut cursor, b"z").map(|c| c.entry()),
            Some(entry(3))
        );
        assert!(cache.next_in(&mut cursor, b"new").is_none());
        // Out of order again: y, behind the cursor.
        assert_eq!(
            cache.next_in(&mut cursor, b"y").map(|c| c.entry()),
            Some(entry(2))
        );
        // Another directory's name is not this one's.
        assert!(cache.next_in(&mut cursor, b"b").is_none());
        let mut none = cache.cursor(b"/nowhere");
        assert!(cache.next_in(&mut none, b"x").is_none());
        // The default cursor is at no directory (not the first one's).
        assert!(cache.next_in(&mut Cursor::default(), b"x").is_none());
        assert_eq!(cache.get("/t/c").map(|c| c.entry()), Some(entry(4)));
        assert!(cache.get("/t/a").is_none());
    }

    #[test]
    fn the_walk_order_puts_met_entries_first_each_once() {
        let mut cache = ScanCache::with_capacity(4);
        for path in ["/t/a", "/t/b", "/u/c", "/t/d"] {
            cache.insert(path, entry(1));
        }
        assert_eq!(cache.walk_order(&[3, 1, 3]), vec![3, 1, 0, 2]);
    }
}
