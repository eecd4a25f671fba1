//! Directory listings kept between scans, as git's untracked cache keeps them: a directory whose
//! stamp (device, inode, mtime, ctime) is the one a scan saw has the entries that scan listed, so
//! the next scan takes them from here instead of reading the directory again (`getdents`: about
//! a tenth of an unchanged re-index's CPU). Every file is still stated by name, and the ignore
//! files named in a listing are read again, so only the list of names is taken on trust.
//!
//! The cache is a file in the store directory ([`LISTINGS_FILE`]), not a table of the store: it
//! describes the disk, not the store, and each listing is checked against the directory's own
//! stamp when it is used, so no writer of the store (an older strata included) can make it
//! wrong. A listing is kept only when the directory's mtime and ctime are older than the start
//! of the scan that read it, less a second (the racy rule of the stat cache, with the coarse
//! clock's lag covered), only on filesystems whose directory times are known to change with
//! every entry added, removed or renamed, and never for an encrypted directory (fscrypt lists
//! other names once the key is added or removed, under the same stamp). A damaged or unreadable
//! file is an empty cache.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashMap;
use rustix::fd::AsFd;
use rustix::fs::{AtFlags, FileType, Statx, StatxAttributes, StatxFlags};

use crate::store::Timestamp;

/// The cache's file in the store directory.
pub const LISTINGS_FILE: &str = "dirs.cache";

/// The first bytes of the file: what it is and the version of its layout.
const MAGIC: &[u8; 16] = b"strata-dirs-v1\n\0";

/// Filesystems whose directory mtime and ctime change whenever an entry is added, removed or
/// renamed (`statfs` magic numbers): ext2/3/4, XFS, Btrfs, tmpfs, F2FS. On any other (network
/// and FUSE filesystems among them) every directory is listed.
const TRUSTED_FILESYSTEMS: [i64; 5] = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0xF2F5_2010];

/// What identifies one state of a directory: its device and inode, and its change times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStamp {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
}

impl DirStamp {
    /// The stamp of a directory stated as `st`.
    pub fn of(st: &Statx) -> Self {
        let ns = |t: rustix::fs::StatxTimestamp| {
            t.tv_sec
                .saturating_mul(1_000_000_000)
                .saturating_add(i64::from(t.tv_nsec))
        };
        DirStamp {
            dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
            inode: st.stx_ino,
            mtime_ns: ns(st.stx_mtime),
            ctime_ns: ns(st.stx_ctime),
        }
    }
}

/// The directory open as `fd`, stated for [`Listings::lookup`] (`statx`: what `fstat` says, and
/// whether the directory is encrypted).
///
/// # Errors
/// The `statx` error (`NOSYS` before Linux 4.11).
pub fn stat_dir<Fd: AsFd>(fd: Fd) -> rustix::io::Result<Statx> {
    rustix::fs::statx(fd, c"", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS)
}

/// One directory's entries as a scan listed them (`.` and `..` left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The directory's stamp, taken before it was listed.
    pub stamp: DirStamp,
    /// The names, each NUL-terminated.
    pub names: Vec<u8>,
    /// The type of each name, in order, as [`type_code`] writes it.
    pub types: Vec<u8>,
}

impl Listing {
    /// A listing stamped `stamp` of `names` (each NUL-terminated) of types `types`.
    pub fn new(stamp: DirStamp, names: Vec<u8>, types: impl Iterator<Item = FileType>) -> Self {
        Listing {
            stamp,
            names,
            types: types.map(type_code).collect(),
        }
    }

    /// The listing as a view.
    fn view(&self) -> View<'_> {
        View {
            stamp: self.stamp,
            names: &self.names,
            types: &self.types,
        }
    }
}

/// A listing, borrowed: from the loaded file or from a [`Listing`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View<'a> {
    /// The directory's stamp, taken before it was listed.
    pub stamp: DirStamp,
    /// The names, each NUL-terminated.
    pub names: &'a [u8],
    /// The type code of each name, in order.
    types: &'a [u8],
}

impl<'a> View<'a> {
    /// The entries: each name (NUL-terminated) with its type.
    pub fn entries(self) -> impl Iterator<Item = (&'a [u8], FileType)> {
        self.names
            .split_inclusive(|&b| b == 0)
            .zip(self.types)
            .map(|(name, &code)| (name, code_type(code).unwrap_or(FileType::Unknown)))
    }
}

/// Where a kept listing lies in the loaded file.
#[derive(Clone, Debug)]
struct Kept {
    stamp: DirStamp,
    names: std::ops::Range<usize>,
    types: std::ops::Range<usize>,
}

/// A scan's directory listings: those the earlier scans kept, and what this scan saw.
#[derive(Debug, Default)]
pub struct Listings {
    /// The kept listings, by directory path, as places in [`Self::loaded`].
    old: FxHashMap<Vec<u8>, Kept>,
    /// The file's bytes as loaded.
    loaded: Vec<u8>,
    /// Whether they were not a whole, undamaged file (it is then written again).
    damaged: bool,
    /// Directories whose mtime or ctime is not older than this are not kept.
    racy_from_ns: i64,
    /// Whether each device met holds a trusted filesystem.
    devices: Mutex<FxHashMap<u64, bool>>,
    /// The directories this scan read: a new listing, or `None` when the kept one held.
    seen: Mutex<Vec<(Vec<u8>, Option<Listing>)>>,
}

/// What a walker does with one directory.
pub enum Lookup<'a> {
    /// The kept listing holds.
    Kept(View<'a>),
    /// List it, and keep the listing (stamped so) if it can be.
    List(Option<DirStamp>),
}

impl Listings {
    /// The listings kept in `store_dir`, for a scan that started at `scan_start` (empty when the
    /// file is missing, unreadable or damaged).
    pub fn load(store_dir: &Path, scan_start: Timestamp) -> Self {
        let start_ns = scan_start.as_micros().saturating_mul(1000);
        // Saturating: a clock set before 1678 must not overflow (it then keeps nothing).
        let racy_from_ns = start_ns
            .saturating_sub(start_ns.rem_euclid(1_000_000_000))
            .saturating_sub(1_000_000_000);
        let loaded = std::fs::read(store_dir.join(LISTINGS_FILE)).unwrap_or_default();
        let old = decode(&loaded);
        Listings {
            damaged: old.is_none() && !loaded.is_empty(),
            old: old.unwrap_or_default(),
            loaded,
            racy_from_ns,
            ..Listings::default()
        }
    }

    /// The listing kept at `kept`.
    fn view(&self, kept: &Kept) -> View<'_> {
        View {
            stamp: kept.stamp,
            names: self.loaded.get(kept.names.clone()).unwrap_or_default(),
            types: self.loaded.get(kept.types.clone()).unwrap_or_default(),
        }
    }

    /// Whether the directory open as `fd`, stated as `st`, is on a trusted filesystem.
    #[allow(
        clippy::useless_conversion,
        clippy::unnecessary_fallible_conversions,
        reason = "the statfs field types differ by platform"
    )]
    fn trusted<Fd: AsFd>(&self, fd: Fd, st: &Statx) -> bool {
        let dev = rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor);
        let mut devices = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        *devices.entry(dev).or_insert_with(|| {
            rustix::fs::fstatfs(fd).is_ok_and(|fs| {
                i64::try_from(fs.f_type).is_ok_and(|t| TRUSTED_FILESYSTEMS.contains(&t))
            })
        })
    }

    /// What to do with the directory at `path`, open as `fd` and stated as `st` (by
    /// [`stat_dir`]).
    pub fn lookup<Fd: AsFd>(&self, path: &[u8], fd: Fd, st: &Statx) -> Lookup<'_> {
        // An encrypted directory (fscrypt) lists other names once its key is added or removed,
        // and its stamp stays: its names are never kept.
        if st.stx_attributes.contains(StatxAttributes::ENCRYPTED) || !self.trusted(fd, st) {
            return Lookup::List(None);
        }
        let stamp = DirStamp::of(st);
        if let Some(kept) = self.old.get(path)
            && kept.stamp == stamp
        {
            return Lookup::Kept(self.view(kept));
        }
        let settled = stamp.mtime_ns < self.racy_from_ns && stamp.ctime_ns < self.racy_from_ns;
        Lookup::List(settled.then_some(stamp))
    }

    /// Adds what one walker saw: each directory read, with its new listing or `None` when the
    /// kept one held.
    pub fn add_seen(&self, seen: &mut Vec<(Vec<u8>, Option<Listing>)>) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(seen);
    }

    /// How many directories' listings earlier scans kept.
    pub fn kept_len(&self) -> usize {
        self.old.len()
    }

    /// Writes the listings kept from now on into `store_dir` when they differ from those loaded:
    /// the kept ones outside `roots` (the directories walked), and those this scan saw. A failure
    /// is left unreported (the next scan lists what it cannot find here).
    pub fn save(&self, store_dir: &Path, roots: &[PathBuf]) {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let under_roots = |path: &[u8]| {
            roots.iter().any(|root| {
                let root = root.as_os_str().as_bytes();
                path.strip_prefix(root)
                    .is_some_and(|rest| rest.is_empty() || rest[0] == b'/' || root.ends_with(b"/"))
            })
        };
        // Unchanged when every directory seen kept its listing and every kept listing under
        // the roots was seen (the usual re-index of a settled tree: nothing to encode).
        if !self.damaged && seen.iter().all(|(_, listing)| listing.is_none()) {
            let seen_paths: rustc_hash::FxHashSet<&[u8]> =
                seen.iter().map(|(path, _)| path.as_slice()).collect();
            let under = self.old.keys().filter(|path| under_roots(path)).count();
            if under == seen_paths.len() {
                return;
            }
        }
        let mut keep: std::collections::BTreeMap<&[u8], View<'_>> = self
            .old
            .iter()
            .filter(|(path, _)| !under_roots(path))
            .map(|(path, kept)| (path.as_slice(), self.view(kept)))
            .collect();
        for (path, listing) in seen.iter() {
            let view = match listing {
                Some(listing) => Some(listing.view()),
                None => self.old.get(path).map(|kept| self.view(kept)),
            };
            if let Some(view) = view {
                keep.insert(path.as_slice(), view);
            }
        }
        if keep.is_empty() && self.loaded.is_empty() {
            return;
        }
        let bytes = encode(&keep);
        if bytes != self.loaded {
            let _ = write_atomically(store_dir, LISTINGS_FILE, &bytes);
        }
    }
}

/// Writes `bytes` as the cache file `name` of `store_dir`: a private temporary file, named for
/// this process and this write (a daemon may run scans at once), renamed over it; temporary
/// files of the same name that crashed writes left are swept.
pub(super) fn write_atomically(store_dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = store_dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, store_dir.join(name)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    } else {
        sweep_leftovers(store_dir, name);
    }
    written
}

/// How old a temporary cache file must be to be taken for one a crashed write left (a write
/// takes milliseconds).
const LEFTOVER_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the temporary files of cache file `name` in `store_dir` that writes killed midway
/// left behind.
fn sweep_leftovers(store_dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(store_dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let ours = name
            .to_str()
            .is_some_and(|name| name.starts_with(&prefix) && name.ends_with(".tmp"));
        let old = || {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > LEFTOVER_AGE)
        };
        if ours && old() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The one-byte code of a file type in the file.
fn type_code(file_type: FileType) -> u8 {
    match file_type {
        FileType::RegularFile => 1,
        FileType::Directory => 2,
        FileType::Symlink => 3,
        FileType::Fifo => 4,
        FileType::Socket => 5,
        FileType::CharacterDevice => 6,
        FileType::BlockDevice => 7,
        _ => 0,
    }
}

/// The file type of a code of [`type_code`].
fn code_type(code: u8) -> Option<FileType> {
    Some(match code {
        0 => FileType::Unknown,
        1 => FileType::RegularFile,
        2 => FileType::Directory,
        3 => FileType::Symlink,
        4 => FileType::Fifo,
        5 => FileType::Socket,
        6 => FileType::CharacterDevice,
        7 => FileType::BlockDevice,
        _ => return None,
    })
}

/// The file's bytes: [`MAGIC`], the BLAKE3 digest of the body, then the body: the count of
/// directories and each one's path, stamp, names and types (integers little-endian).
fn encode(listings: &std::collections::BTreeMap<&[u8], View<'_>>) -> Vec<u8> {
    let mut body = Vec::new();
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    body.extend_from_slice(&len(listings.len()));
    for (path, listing) in listings {
        body.extend_from_slice(&len(path.len()));
        body.extend_from_slice(path);
        let DirStamp {
            dev,
            inode,
            mtime_ns,
            ctime_ns,
        } = listing.stamp;
        body.extend_from_slice(&dev.to_le_bytes());
        body.extend_from_slice(&inode.to_le_bytes());
        body.extend_from_slice(&mtime_ns.to_le_bytes());
        body.extend_from_slice(&ctime_ns.to_le_bytes());
        body.extend_from_slice(&len(listing.types.len()));
        body.extend_from_slice(&len(listing.names.len()));
        body.extend_from_slice(listing.names);
        body.extend_from_slice(listing.types);
    }
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(blake3::hash(&body).as_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads `n` bytes off the front of `input`.
pub(super) fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if input.len() < n {
        return None;
    }
    let (head, tail) = input.split_at(n);
    *input = tail;
    Some(head)
}

/// Reads a little-endian `u32` as a length.
pub(super) fn take_len(input: &mut &[u8]) -> Option<usize> {
    let bytes: [u8; 4] = take(input, 4)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(bytes)).ok()
}

/// Reads 8 little-endian bytes.
pub(super) fn take_8(input: &mut &[u8]) -> Option<[u8; 8]> {
    take(input, 8)?.try_into().ok()
}

/// The listings of the file's bytes, as places in them; `None` when they are not a whole,
/// undamaged file.
fn decode(bytes: &[u8]) -> Option<FxHashMap<Vec<u8>, Kept>> {
    let mut input = bytes;
    if take(&mut input, MAGIC.len())? != MAGIC {
        return None;
    }
    let digest = take(&mut input, 32)?;
    if blake3::hash(input).as_bytes() != digest {
        return None;
    }
    let at = |input: &[u8]| bytes.len() - input.len();
    let count = take_len(&mut input)?;
    let mut out = FxHashMap::with_capacity_and_hasher(count.min(1 << 20), Default::default());
    for _ in 0..count {
        let path_len = take_len(&mut input)?;
        let path = take(&mut input, path_len)?.to_vec();
        let stamp = DirStamp {
            dev: u64::from_le_bytes(take_8(&mut input)?),
            inode: u64::from_le_bytes(take_8(&mut input)?),
            mtime_ns: i64::from_le_bytes(take_8(&mut input)?),
            ctime_ns: i64::from_le_bytes(take_8(&mut input)?),
        };
        let entries = take_len(&mut input)?;
        let names_len = take_len(&mut input)?;
        let names_at = at(input);
        let names = take(&mut input, names_len)?;
        // Every name is non-empty and NUL-terminated, one per type, and names an entry of the
        // directory itself (no `/`, no `.` or `..`: the walk opens and states them in it).
        if memchr::memchr(b'/', names).is_some() {
            return None;
        }
        let mut count = 0;
        let mut start = 0;
        for end in memchr::memchr_iter(0, names) {
            if matches!(names.get(start..end), None | Some(b"" | b"." | b"..")) {
                return None;
            }
            count += 1;
            start = end + 1;
        }
        if start != names.len() || count != entries {
            return None;
        }
        let types_at = at(input);
        if take(&mut input, entries)?
            .iter()
            .any(|&code| code_type(code).is_none())
        {
            return None;
        }
        out.insert(
            path,
            Kept {
                stamp,
                names: names_at..names_at + names_len,
                types: types_at..types_at + entries,
            },
        );
    }
    input.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(names: &[&str]) -> Listing {
        let mut bytes = Vec::new();
        for name in names {
            bytes.extend_from_slice(name.as_bytes());
            bytes.push(0);
        }
        Listing {
            stamp: DirStamp {
                dev: 1,
                inode: 2,
                mtime_ns: -3,
                ctime_ns: 4,
            },
            names: bytes,
            types: (0..names.len())
                .map(|n| u8::try_from(n % 8).unwrap_or(0))
                .collect(),
        }
    }

    #[test]
    fn the_file_reads_back_and_any_damage_makes_it_empty() {
        let (a, b, empty) = (listing(&["x", "yy", "z"]), listing(&["é"]), listing(&[]));
        let map: std::collections::BTreeMap<&[u8], View<'_>> = [
            (&b"/a"[..], a.view()),
            (&b"/a/b"[..], b.view()),
            (&b"/c"[..], empty.view()),
        ]
        .into_iter()
        .collect();
        let bytes = encode(&map);
        let listings = Listings {
            old: decode(&bytes).unwrap_or_default(),
            loaded: bytes.clone(),
            ..Listings::default()
        };
        assert_eq!(listings.old.len(), 3);
        for (path, listing) in [(&b"/a"[..], &a), (b"/a/b", &b), (b"/c", &empty)] {
            let kept = listings.old.get(path).map(|kept| listings.view(kept));
            assert_eq!(kept, Some(listing.view()));
        }
        let a_entries: Vec<(&[u8], FileType)> = a.view().entries().collect();
        assert_eq!(
            a_entries,
            [
                (&b"x\0"[..], FileType::Unknown),
                (b"yy\0", FileType::RegularFile),
                (b"z\0", FileType::Directory)
            ]
        );
        // Any byte changed, or the file cut short or grown, and nothing of it is used.
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_none(), "byte {at}");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode(&[bytes.as_slice(), b"x"].concat()).is_none());
        assert!(decode(b"").is_none());
        // A name that is not an entry of the directory (a file made by hand, its digest
        // right): the walk would leave the directory by it.
        for bad in [&["x", ".."][..], &["."], &["../../etc"], &["a/b"]] {
            let bad = listing(bad);
            let map: std::collections::BTreeMap<&[u8], View<'_>> =
                [(&b"/a"[..], bad.view())].into_iter().collect();
            assert!(decode(&encode(&map)).is_none(), "{:?}", bad.names);
        }
    }

    #[test]
    fn a_directory_changed_since_it_was_listed_or_too_recently_is_listed_again()
    -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir)?;
        let fd = rustix::fs::open(
            &dir,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )?;
        let st = stat_dir(&fd)?;
        let path = dir.as_os_str().as_bytes();
        // Just made: too recent to keep.
        let listings = Listings::load(tmp.path(), Timestamp::now());
        if !listings.trusted(&fd, &st) {
            // Not a filesystem whose directory times are trusted: nothing is ever kept.
            assert!(matches!(
                listings.lookup(path, &fd, &st),
                Lookup::List(None)
            ));
            return Ok(());
        }
        assert!(matches!(
            listings.lookup(path, &fd, &st),
            Lookup::List(None)
        ));
        // Seen by a scan two seconds later: kept, saved, and used by the next scan.
        let later = Timestamp::saturating_from_micros(Timestamp::now().as_micros() + 2_000_000);
        let listings = Listings::load(tmp.path(), later);
        let Lookup::List(Some(stamp)) = listings.lookup(path, &fd, &st) else {
            panic!("a settled directory is to be kept");
        };
        let mut seen = vec![(
            path.to_vec(),
            Some(Listing::new(stamp, Vec::new(), std::iter::empty())),
        )];
        listings.add_seen(&mut seen);
        listings.save(tmp.path(), std::slice::from_ref(&dir));
        let listings = Listings::load(tmp.path(), later);
        assert!(matches!(listings.lookup(path, &fd, &st), Lookup::Kept(l) if l.names.is_empty()));
        // The same directory encrypted (fscrypt): its names change with its key, not its stamp,
        // so a kept listing is not used and a new one not kept.
        let mut encrypted = st;
        encrypted.stx_attributes |= StatxAttributes::ENCRYPTED;
        assert!(matches!(
            listings.lookup(path, &fd, &encrypted),
            Lookup::List(None)
        ));
        // A file added: the stamp differs, the directory is listed again.
        std::fs::write(dir.join("new"), b"x")?;
        let st = stat_dir(&fd)?;
        assert!(matches!(listings.lookup(path, &fd, &st), Lookup::List(_)));
        // A scan of the root that no longer sees the directory drops its listing.
        listings.save(tmp.path(), &[tmp.path().to_path_buf()]);
        let listings = Listings::load(tmp.path(), later);
        assert!(listings.old.is_empty());
        Ok(())
    }

    /// A write sweeps the temporary files that writes killed midway left (older than an hour),
    /// and leaves a fresh one (another process's write under way) alone.
    #[test]
    fn a_write_sweeps_old_leftover_temporary_files() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let (old, fresh) = (
            tmp.path().join(format!(".{LISTINGS_FILE}.999999-0.tmp")),
            tmp.path().join(format!(".{LISTINGS_FILE}.999999-1.tmp")),
        );
        std::fs::write(&old, b"partial")?;
        std::fs::write(&fresh, b"partial")?;
        std::fs::File::options()
            .write(true)
            .open(&old)?
            .set_modified(std::time::SystemTime::now() - 2 * LEFTOVER_AGE)?;
        write_atomically(tmp.path(), LISTINGS_FILE, b"bytes")?;
        assert!(!old.exists() && fresh.exists());
        assert_eq!(std::fs::read(tmp.path().join(LISTINGS_FILE))?, b"bytes");
        Ok(())
    }
}
