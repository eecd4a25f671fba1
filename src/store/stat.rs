//! The stat cache's entries: what the indexer saw of each file when it last read it, so that a
//! scan can trust an unchanged file without reading it (git's index plays this part for
//! `git status`).

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use crate::hash::Hash;

/// The stat fields that prove a file unchanged when they are all equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub inode: u64,
}

impl FileStat {
    /// The stat fields of `meta`.
    pub fn of(meta: &Metadata) -> Self {
        FileStat {
            size: meta.len(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
            ctime_ns: meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec(),
            inode: meta.ino(),
        }
    }
}

/// One stat cache entry: the stat seen, the hash of the bytes read then, and when that scan began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatEntry {
    /// The stat seen when the file was last read.
    pub stat: FileStat,
    /// The `file_hash` of what was read.
    pub file_hash: Hash,
    /// Start of the scan that recorded the entry, nanoseconds since the epoch.
    pub scan_start_ns: i64,
}

impl StatEntry {
    /// The entry of a file whose bytes hashed to `file_hash`, read by a scan that started at
    /// `scan_start`. The start is floored to the whole second: file times come from the kernel's
    /// coarse clock (a tick, or a second on some filesystems), which lags the precise clock, so a
    /// write made just after the scan started can carry an mtime just before it; git compares
    /// with a file time for the same reason.
    pub fn recorded(stat: FileStat, file_hash: Hash, scan_start: super::time::Timestamp) -> Self {
        let start_ns = scan_start.as_micros().saturating_mul(1000);
        StatEntry {
            stat,
            file_hash,
            scan_start_ns: start_ns - start_ns.rem_euclid(1_000_000_000),
        }
    }

    /// Whether this entry proves a file with stat `now` unchanged: every stat field equal, and
    /// (git's racy-clean rule) the file's mtime older than the start of the recording scan, so a
    /// write in the same clock tick as that scan's read cannot hide.
    pub fn vouches_for(&self, now: &FileStat) -> bool {
        self.stat == *now && self.stat.mtime_ns < self.scan_start_ns
    }
}

/// Stat cache changes on one filesystem, written with a transaction's ops.
#[derive(Clone, Debug, Default)]
pub struct StatUpdate {
    /// The filesystem the paths are on.
    pub filesystem_id: String,
    /// Entries to write, by canonical path.
    pub puts: Vec<(String, StatEntry)>,
    /// Canonical paths whose entries go.
    pub removes: Vec<String>,
}

impl StatUpdate {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.removes.is_empty()
    }
}
