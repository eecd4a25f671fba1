//! The store directory's privacy: the directory is 0700 and every file strata makes in it 0600,
//! whatever the umask, so that other users read neither its contents nor its names.
//!
//! Uses `error`. Every file strata creates in a store directory is made through this module: the
//! mode is given at creation (no moment when the file is looser than it ends), then set exactly,
//! since a umask only removes bits (under `umask 0277` a file made 0600 would end up 0400, which
//! its owner could not rewrite). A store made by an older strata, with looser modes, is tightened
//! when it is opened, but only by its owner: root opening another user's store changes nothing.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// The mode of a store directory: its owner reads, writes and enters it; nobody else.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file strata makes in a store directory: its owner reads and writes it.
pub const FILE_MODE: u32 = 0o600;

/// The permission bits other users get: what [`tighten`] takes away.
const OTHERS: u32 = 0o077;

/// Creates the store directory `dir` with mode 0700 (missing parents are made as the umask
/// says), or tightens it when it exists already (see [`tighten_store`]).
///
/// # Errors
/// [`Error::Io`] naming the directory when it cannot be made or its mode cannot be set.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| {
            Error::io(
                format!(
                    "creating {} to hold the store (choose another place with --store DIR)",
                    parent.display()
                ),
                e,
            )
        })?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => set_mode(dir, DIR_MODE),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => tighten_store(dir),
        Err(e) => Err(Error::io(
            format!(
                "creating store directory {} (choose another place with --store DIR)",
                dir.display()
            ),
            e,
        )),
    }
}

/// Tightens the existing store directory `dir` (see [`tighten`]) and, when the directory itself
/// was loose (a store made by an older strata), every file in it.
///
/// # Errors
/// [`Error::Io`] naming the directory or file that cannot be inspected or made private.
pub(crate) fn tighten_store(dir: &Path) -> Result<()> {
    if !tighten(dir)? {
        return Ok(());
    }
    let listing = |e| Error::io(format!("listing store directory {}", dir.display()), e);
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            tighten(&entry.path())?;
        }
    }
    Ok(())
}

/// Takes the group's and others' permission bits off `path` (a store directory or a file in
/// it) when the current user owns it and it has any, and says whether it did; leaves it as it
/// is otherwise (another user's store, opened by root, keeps its modes).
///
/// # Errors
/// [`Error::Io`] naming the path when it cannot be inspected or its mode cannot be set.
pub(crate) fn tighten(path: &Path) -> Result<bool> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("reading the mode of {}", path.display()), e))?;
    let mode = meta.mode() & 0o7777;
    if mode & OTHERS == 0 || meta.uid() != rustix::process::geteuid().as_raw() {
        return Ok(false);
    }
    set_mode(path, mode & !OTHERS)?;
    Ok(true)
}

/// Sets the mode of `path` exactly (no umask applies to chmod).
fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, Permissions::from_mode(mode)).map_err(|e| {
        Error::io(
            format!(
                "making {} private (mode {mode:o}); it must belong to the user running strata",
                path.display()
            ),
            e,
        )
    })
}

/// Opens `path` for writing, empty, with mode 0600: created so, and set so when it existed (a
/// file left by an older strata).
///
/// # Errors
/// [`Error::Io`] naming the file when it cannot be opened or its mode cannot be set.
pub(crate) fn create_file(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .map_err(|e| {
            Error::io(
                format!(
                    "making {} private (mode 600); it must belong to the user running strata",
                    path.display()
                ),
                e,
            )
        })?;
    Ok(file)
}

/// Creates the empty file `path` with mode 0600 when it does not exist, for a program that
/// creates it on its own otherwise with the umask's mode (redb's `create`). An existing file
/// is left as it is.
///
/// # Errors
/// [`Error::Io`] naming the file when it cannot be created or its mode cannot be set.
pub(crate) fn create_empty(path: &Path) -> Result<()> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
    {
        Ok(file) => file
            .set_permissions(Permissions::from_mode(FILE_MODE))
            .map_err(|e| Error::io(format!("making {} private (mode 600)", path.display()), e)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(format!("creating {}", path.display()), e)),
    }
}

/// Opens `path` for appending, with mode 0600 (created so, and set so when it existed): the
/// daemon's log.
///
/// # Errors
/// [`Error::Io`] naming the file when it cannot be opened or its mode cannot be set.
pub(crate) fn append_file(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .map_err(|e| Error::io(format!("making {} private (mode 600)", path.display()), e))?;
    Ok(file)
}

/// Writes `bytes` as the whole of `path`, with mode 0600 (see [`create_file`]).
///
/// # Errors
/// [`Error::Io`] naming the file when it cannot be written.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    create_file(path)?
        .write_all(bytes)
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> Result<u32> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io("metadata", e))?;
        Ok(meta.mode() & 0o7777)
    }

    #[test]
    fn made_private_and_loose_ones_tightened() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = tmp.path().join("a/store");
        create_dir(&dir)?;
        assert_eq!(mode(&dir)?, DIR_MODE);
        let file = dir.join("f");
        write_file(&file, b"x")?;
        assert_eq!(mode(&file)?, FILE_MODE);
        set_mode(&file, 0o644)?;
        write_file(&file, b"y")?;
        assert_eq!(mode(&file)?, FILE_MODE, "a rewritten file is made private");
        set_mode(&file, 0o644)?;
        set_mode(&dir, 0o2755)?;
        create_dir(&dir)?;
        assert_eq!(mode(&dir)?, 0o2700, "owner and special bits stay");
        assert_eq!(
            mode(&file)?,
            FILE_MODE,
            "the files of a loose directory are tightened"
        );
        set_mode(&dir, 0o500)?;
        assert!(!tighten(&dir)?);
        assert_eq!(mode(&dir)?, 0o500, "a private directory is left as it is");
        set_mode(&dir, DIR_MODE)?;
        let empty = dir.join("e");
        create_empty(&empty)?;
        assert_eq!(mode(&empty)?, FILE_MODE);
        Ok(())
    }
}
