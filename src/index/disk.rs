//! The one disk path: every touch of a file on this machine goes through here, for tree scans,
//! session reads, stub activation, resume and the watcher alike.
//!
//! Two stages, so that a scan can run the first on its worker threads: [`look`] (no store) stats
//! the file by the gone rule ([`presence`]), applies the deny rules once, lets the stat cache
//! vouch for an unchanged file, and otherwise opens, reads and hashes it until its stat holds
//! still; [`super::Indexer::plan_look`] (the store) turns what was seen into ops and the stat
//! cache change ([`StatChange`]), which [`record`] adds to a commit's [`StatUpdate`]. The
//! symlink rule for named paths lives in the resolver (`check_symlinks`), which gives the real
//! path to look at; tree walks never follow links.

use std::fs;
use std::io;
use std::path::Path;

use super::dirstat::DirStat;
use super::read::{Reading, read_with_hint};
use super::rules::DenyRules;
use crate::store::{FileStat, StatEntry, StatUpdate, Timestamp};

/// What is at a canonical path now, by the gone rule every caller shares.
#[derive(Debug)]
pub enum Presence {
    /// A regular file, with its stat.
    File(FileStat),
    /// Gone: something other than a regular file is there (a directory, a FIFO; a symlink when
    /// links are not followed), or a parent was reached through a symlink that the walk does not
    /// follow.
    NotAFile,
    /// Gone: nothing is there, or a parent is not a directory.
    Missing(io::Error),
    /// It cannot be told (permission denied, a name too long): a caller must not record a
    /// deletion, nor read.
    Unknown(io::Error),
}

impl Presence {
    /// Whether the file is gone, so that its entity gets a tombstone.
    pub fn is_gone(&self) -> bool {
        matches!(self, Presence::NotAFile | Presence::Missing(_))
    }
}

/// Stats `path` through `dirs` (which follows symlinks or not, as it was made) and says what is
/// there. Without following links, an existing file whose parent is now reached through a
/// symlink is [`Presence::NotAFile`] too: a directory replaced by a link is not walked, so its
/// files would otherwise stay live for ever, never refreshed.
pub fn presence(dirs: &mut DirStat, path: &str) -> Presence {
    match dirs.stat(path) {
        Ok((true, stat)) => {
            if !dirs.follows_symlinks() && parent_is_linked(Path::new(path)) {
                Presence::NotAFile
            } else {
                Presence::File(stat)
            }
        }
        Ok((false, _)) => Presence::NotAFile,
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Presence::Missing(err)
        }
        Err(err) => Presence::Unknown(err),
    }
}

/// [`presence`] of each of `paths`, in their order: stated on up to four threads, each path in
/// sorted order so that the files of one directory are stated through one handle on it (a
/// session's resume stats every file it holds).
pub fn presence_all(paths: &[&str], follow_symlinks: bool) -> Vec<Presence> {
    /// Paths per thread at least (a thread costs about what 100 stats do).
    const PER_THREAD: usize = 1024;
    let mut order: Vec<usize> = (0..paths.len()).collect();
    if !grouped_by_dir(paths) {
        order.sort_unstable_by_key(|&i| paths.get(i).copied().unwrap_or_default());
    }
    // The core count is asked of the system once per process (`store::cores`).
    let threads = crate::store::cores()
        .min(4)
        .min(paths.len().div_ceil(PER_THREAD))
        .max(1);
    let stat_part = |part: &[usize]| -> Vec<(usize, Presence)> {
        let mut dirs = DirStat::new(follow_symlinks);
        let mut found = Vec::with_capacity(part.len());
        for &i in part {
            if let Some(path) = paths.get(i) {
                found.push((i, presence(&mut dirs, path)));
            }
        }
        found
    };
    let mut out: Vec<Option<Presence>> = Vec::with_capacity(paths.len());
    out.resize_with(paths.len(), || None);
    let mut place = |found: Vec<(usize, Presence)>| {
        for (i, presence) in found {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(presence);
            }
        }
    };
    if threads == 1 {
        place(stat_part(&order));
    } else {
        std::thread::scope(|scope| {
            let mut chunks = order.chunks(order.len().div_ceil(threads));
            // The last part runs on this thread, which would only wait.
            let own = chunks.next_back();
            let parts: Vec<_> = chunks
                .map(|part| scope.spawn(move || stat_part(part)))
                .collect();
            if let Some(own) = own {
                place(stat_part(own));
            }
            // Each part is placed as it ends, no vector of all the answers in between.
            for part in parts {
                place(part.join().unwrap_or_default());
            }
        });
    }
    out.into_iter()
        .map(|p| {
            p.unwrap_or_else(|| {
                Presence::Unknown(io::Error::other("the stat of this path did not run"))
            })
        })
        .collect()
}

/// Whether the paths of each directory stand together in `paths` (as a tree walk, or a session
/// that read a tree in order, lists them): the stats then reach each directory's handle in one
/// run without sorting the paths (a sort of 10 000 paths was ~0.2 ms before any stat began).
fn grouped_by_dir(paths: &[&str]) -> bool {
    let dir = |path: &'_ str| -> usize { path.rfind('/').unwrap_or(0) };
    let mut seen: rustc_hash::FxHashSet<&str> = rustc_hash::FxHashSet::default();
    let mut last: Option<&str> = None;
    for path in paths {
        let parent = path.get(..dir(path)).unwrap_or_default();
        if last != Some(parent) {
            if !seen.insert(parent) {
                return false;
            }
            last = Some(parent);
        }
    }
    true
}

/// Whether the parent of canonical `path` is reached through a symlink now.
fn parent_is_linked(path: &Path) -> bool {
    path.parent()
        .is_some_and(|parent| fs::canonicalize(parent).is_ok_and(|real| real.as_path() != parent))
}

/// What one look at a file found.
#[derive(Debug)]
pub enum Look {
    /// The file is gone ([`Presence::is_gone`]).
    Gone(Presence),
    /// It cannot be told whether it is there, or it could not be read: keep its last version.
    Unreadable(io::Error),
    /// A deny rule matches: nothing of it was read.
    Denied,
    /// The stat cache vouches for it: not read.
    Vouched(FileStat),
    /// Read and hashed.
    Read {
        /// What was read.
        reading: Reading,
        /// The stat it was read under.
        stat: FileStat,
        /// Whether the stat was the same after the read as before it: only then may the stat
        /// cache vouch for these bytes later.
        stable: bool,
    },
}

/// What [`look`] needs besides the path: the deny rules, the content limit, and the stat cache
/// entry of the path, if there is one (`None`: read it whatever its stat).
#[derive(Clone, Copy, Debug)]
pub struct LookRules<'a> {
    /// Matching files are never read.
    pub deny: &'a DenyRules,
    /// Files larger than this keep no bytes.
    pub max_content_bytes: u64,
    /// The path's stat cache entry.
    pub cached: Option<&'a StatEntry>,
}

/// Looks at the file at canonical `path`, opened at `open` (its real path, or its on-disk
/// spelling), already stat'ed as `presence`.
pub fn look(path: &str, open: &Path, presence: Presence, rules: LookRules<'_>) -> Look {
    let stat = match presence {
        Presence::File(stat) => stat,
        Presence::Unknown(err) => return Look::Unreadable(err),
        gone => return Look::Gone(gone),
    };
    if rules.deny.is_denied(path) {
        return Look::Denied;
    }
    if rules.cached.is_some_and(|entry| entry.vouches_for(&stat)) {
        return Look::Vouched(stat);
    }
    let settled = read_settled(open, stat, |open, size| {
        fs::File::open(open).and_then(|file| read_with_hint(file, rules.max_content_bytes, size))
    });
    match settled {
        Ok((reading, stat, stable)) => Look::Read {
            reading,
            stat,
            stable,
        },
        Err(err) => Look::Unreadable(err),
    }
}

/// Reads made of a file that keeps changing before its read is taken as it is.
const READ_ATTEMPTS: usize = 3;

/// Reads the file at `path` with `read` (given the expected size) until its stat is the same
/// after a read as before it, at most [`READ_ATTEMPTS`] times: a file written while it was read
/// would otherwise be stored as bytes that never existed together and then trusted by the stat
/// cache. Returns the last reading, the stat it was taken under, and whether it settled.
fn read_settled(
    path: &Path,
    mut stat: FileStat,
    mut read: impl FnMut(&Path, u64) -> io::Result<Reading>,
) -> io::Result<(Reading, FileStat, bool)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let reading = read(path, stat.size)?;
        let after = FileStat::of(&fs::symlink_metadata(path)?);
        if after == stat {
            return Ok((reading, stat, true));
        }
        if attempt >= READ_ATTEMPTS {
            return Ok((reading, after, false));
        }
        stat = after;
    }
}

/// The stat cache change a look calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatChange {
    /// Record the entry: the bytes were read under a stat that held still.
    Put(StatEntry),
    /// Drop the path's entry: gone, or read while it changed (the next look reads it again).
    Remove,
    /// Leave it as it is.
    Keep,
}

impl StatChange {
    /// The change after `look`, begun at `look_start` (the racy-clean rule's reference).
    pub fn of(look: &Look, look_start: Timestamp) -> Self {
        match look {
            Look::Read {
                reading,
                stat,
                stable: true,
            } => StatChange::Put(StatEntry::recorded(*stat, reading.file_hash, look_start)),
            Look::Read { stable: false, .. } | Look::Gone(_) => StatChange::Remove,
            Look::Unreadable(_) | Look::Denied | Look::Vouched(_) => StatChange::Keep,
        }
    }
}

/// Adds `change` of canonical `path` to `update`, the stat cache changes of one commit.
pub fn record(update: &mut StatUpdate, path: &str, change: StatChange) {
    match change {
        StatChange::Put(entry) => update.puts.push((path.to_string(), entry)),
        StatChange::Remove => update.removes.push(path.to_string()),
        StatChange::Keep => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::read::read_stream;
    use std::io::Write as _;

    /// Enough paths for several threads, unsorted and over several directories, with files,
    /// missing paths and directories: each answer is the one [`presence`] gives alone.
    #[test]
    fn paths_are_grouped_when_each_directory_stands_together() {
        assert!(grouped_by_dir(&["/a/x", "/a/y", "/b/x", "/c", "/d"]));
        assert!(grouped_by_dir(&[]));
        assert!(!grouped_by_dir(&["/a/x", "/b/x", "/a/y"]));
        assert!(!grouped_by_dir(&["/a", "/b/x", "/c"]));
    }

    #[test]
    fn presence_all_answers_each_path_in_its_order() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path().to_str().ok_or(io::ErrorKind::InvalidData)?;
        let mut paths = Vec::new();
        for d in 0..5 {
            fs::create_dir(tmp.path().join(format!("d{d}")))?;
            for f in 0..500 {
                let path = format!("{root}/d{d}/f{f}");
                if f % 7 != 0 {
                    fs::write(&path, format!("{d} {f}"))?;
                }
                paths.push(path);
            }
            paths.push(format!("{root}/d{d}"));
        }
        paths.reverse();
        let asked: Vec<&str> = paths.iter().map(String::as_str).collect();
        // Interleaved directories (sorted first), then each directory's files together (not).
        let files: Vec<&str> = asked.iter().copied().filter(|p| p.contains("/f")).collect();
        assert!(!grouped_by_dir(&asked) && grouped_by_dir(&files));
        for asked in [asked, files] {
            let all = presence_all(&asked, true);
            assert_eq!(all.len(), asked.len());
            let mut dirs = DirStat::new(true);
            for (path, found) in asked.iter().zip(&all) {
                match (found, presence(&mut dirs, path)) {
                    (Presence::File(a), Presence::File(b)) => assert_eq!(*a, b, "{path}"),
                    (Presence::NotAFile, Presence::NotAFile)
                    | (Presence::Missing(_), Presence::Missing(_)) => {}
                    (a, b) => panic!("{path}: {a:?} against {b:?}"),
                }
            }
        }
        Ok(())
    }

    fn stat_of(path: &Path) -> io::Result<FileStat> {
        Ok(FileStat::of(&fs::symlink_metadata(path)?))
    }

    #[test]
    fn a_file_written_during_its_read_is_read_again() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("f.txt");
        fs::write(&path, b"first")?;
        let mut calls = 0;
        let (reading, stat, stable) = read_settled(&path, stat_of(&path)?, |path, _| {
            calls += 1;
            let reading = read_stream(fs::File::open(path)?, 1024)?;
            if calls == 1 {
                // A writer appends while the first read is under way.
                fs::OpenOptions::new()
                    .append(true)
                    .open(path)?
                    .write_all(b" and more")?;
            }
            Ok(reading)
        })?;
        assert_eq!(calls, 2);
        assert!(stable);
        assert_eq!(
            reading.body,
            super::super::Body::Text("first and more".into())
        );
        assert_eq!(stat, stat_of(&path)?);
        Ok(())
    }

    #[test]
    fn a_file_that_keeps_changing_is_not_vouched_for() -> io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("f.txt");
        fs::write(&path, b"x")?;
        let mut calls = 0;
        let (_, _, stable) = read_settled(&path, stat_of(&path)?, |path, _| {
            calls += 1;
            let reading = read_stream(fs::File::open(path)?, 1024)?;
            fs::OpenOptions::new()
                .append(true)
                .open(path)?
                .write_all(b"x")?;
            Ok(reading)
        })?;
        assert_eq!(calls, READ_ATTEMPTS);
        assert!(!stable, "an unsettled read must not enter the stat cache");
        Ok(())
    }

    #[test]
    fn only_a_missing_file_counts_as_gone() -> io::Result<()> {
        let gone = |path: &Path| {
            presence(&mut DirStat::new(false), path.to_str().unwrap_or_default()).is_gone()
        };
        let tmp = tempfile::tempdir()?;
        // Canonical, as stored paths are: a link above it would make every file gone.
        let root = fs::canonicalize(tmp.path())?;
        let file = root.join("f");
        fs::write(&file, b"x")?;
        assert!(!gone(&file));
        assert!(gone(&root.join("missing")));
        assert!(gone(&file.join("below-a-file")), "a parent that is a file");
        fs::remove_file(&file)?;
        fs::create_dir(&file)?;
        assert!(gone(&file), "a directory where the file was");
        fs::remove_dir(&file)?;
        std::os::unix::fs::symlink(&root, &file)?;
        assert!(gone(&file), "a symlink where the file was");
        fs::remove_file(&file)?;
        let moved = root.join("moved");
        fs::create_dir(&moved)?;
        fs::write(moved.join("inner"), "x")?;
        std::os::unix::fs::symlink(&moved, &file)?;
        assert!(
            gone(&file.join("inner")),
            "a file whose directory is a symlink now"
        );
        assert!(!gone(&moved.join("inner")));
        // A path too long to stat is an error other than NotFound: not a deletion.
        let long = root.join("x".repeat(5000));
        assert!(!gone(&long));
        Ok(())
    }
}
