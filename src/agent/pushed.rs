//! Client copy precedence (seed 002) for the runtime: pushing its unsaved copy of a file into a
//! session and withdrawing it, with the file named as the tools name it (an id, a path relative
//! to a mount, or an absolute agent path). The session keeps the copies
//! ([`crate::PushedCopy`]); reads return a copy that stands and the agent's writes are
//! checked against it (`agent::write`).

use serde::{Deserialize, Serialize};

use super::files::{FileRef, resolve};
use crate::error::Result;
use crate::session::{Pushed, Session};

/// A file's pushed copy as the runtime is told about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PushedFile {
    /// The file's id in the session (`fN`).
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The path below its mount.
    pub filename: String,
    /// The agent path.
    pub path: String,
    /// The SHA-256 of the copy: what reads return while it stands.
    pub sha256: String,
    /// Whether the copy stands now (false when it equals the file on disk, or was withdrawn).
    pub standing: bool,
}

/// Keeps `bytes` as the runtime's unsaved copy of `filepath` in `session`, pushed by `by`; a copy
/// equal to the file on disk does not stand (and clears an earlier one).
///
/// # Errors
/// As the path's resolution (outside the mounts, an unknown id) and
/// [`Session::push_copy`] (not UTF-8 text, over the content limit, a read-only mount, a denied
/// file, no file there).
pub fn push(
    session: &mut Session,
    filepath: &str,
    bytes: Vec<u8>,
    by: Option<String>,
) -> Result<PushedFile> {
    let file = resolve(session, filepath)?;
    let (copy, standing) = match session.push_copy(&file.agent_path, bytes, by)? {
        Pushed::Kept(copy) => (copy, true),
        Pushed::SameAsDisk(copy) => (copy, false),
    };
    answer(session, file, copy.sha256, standing)
}

/// Withdraws the runtime's copy of `filepath`; answers with the withdrawn copy's hash.
///
/// # Errors
/// As the path's resolution; [`crate::Error::NotFound`] when no copy of the file stands.
pub fn withdraw(session: &mut Session, filepath: &str) -> Result<PushedFile> {
    let file = resolve(session, filepath)?;
    let copy = session.withdraw_copy(&file.agent_path)?;
    answer(session, file, copy.sha256, false)
}

/// The answer about `file` (given its id now if it had none).
fn answer(
    session: &mut Session,
    mut file: FileRef,
    sha256: String,
    standing: bool,
) -> Result<PushedFile> {
    file.number(session)?;
    Ok(PushedFile {
        file_id: file.file_id(),
        filename: file.filename,
        path: file.agent_path,
        sha256,
        standing,
    })
}
