//! Client copy precedence (seed 002's Active File List): a runtime pushes its unsaved copy of a
//! file into the session. While the copy stands, the agent's reads return it and its writes are
//! checked against it ([`Session::write_files`]); it is cleared when the file on disk has the
//! copy's hash (the user saved it), which the session notices whenever it looks at the file, or
//! when the runtime withdraws it. The copies are kept in the session configuration, so a
//! reloaded session and a fork hold them too.

use super::*;

/// An unsaved copy of a file, pushed by a runtime.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushedCopy {
    /// The SHA-256 (hex) of the copy's bytes: the hash reads return while it stands.
    pub sha256: String,
    /// The copy (UTF-8 text).
    pub text: String,
    /// The SHA-256 of the file on disk when the copy was pushed: what the copy was made over.
    pub base_sha256: String,
    /// Who pushed it (a runtime's name); a copy without a name is always another party's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

impl PushedCopy {
    /// The copy as a file's text, as reads and conflicts show it.
    pub fn as_disk_text(&self) -> DiskText {
        DiskText {
            sha256: self.sha256.clone(),
            text: Some(self.text.clone()),
        }
    }

    /// Whether `caller` (the running call's caller) pushed this copy itself.
    pub fn pushed_by(&self, caller: Option<&str>) -> bool {
        self.by.is_some() && self.by.as_deref() == caller
    }
}

/// What a push did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// The copy stands (replacing the one pushed before, if any).
    Kept(PushedCopy),
    /// The copy equals the file on disk: nothing is unsaved, so nothing stands (and an earlier
    /// copy of the file was cleared).
    SameAsDisk(PushedCopy),
}

impl Session {
    /// The unsaved copies that stand, by agent path (as last looked at: a copy the user has
    /// saved since goes at the session's next look at the file).
    pub fn pushed_copies(&self) -> &std::collections::BTreeMap<String, PushedCopy> {
        &self.config.pushed
    }

    /// Keeps `bytes` as the runtime's unsaved copy of the file at `agent_path` (pushed by `by`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for bytes that are not UTF-8 text (or hold a NUL byte) or are
    /// over the content limit, and on a read-only view; [`Error::InvalidPath`] for a path in a
    /// read-only mount, through a symlink out of its mount, or where no file is;
    /// [`Error::PermissionDenied`] for a file a deny rule covers. Nothing changes then.
    pub fn push_copy(
        &mut self,
        agent_path: &str,
        bytes: Vec<u8>,
        by: Option<String>,
    ) -> Result<Pushed> {
        self.writable()?;
        let limit = self.indexer.max_content_bytes();
        if bytes.len() as u64 > limit {
            return Err(Error::invalid_input(format!(
                "the pushed copy of {agent_path} ({} bytes) is over the store's content limit \
                 ({limit} bytes); push smaller files or raise max_content_bytes in the store's settings",
                bytes.len()
            )));
        }
        let sha256 = crate::hash::sha256(&bytes).to_hex();
        let text = match String::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') => text,
            Ok(_) => {
                return Err(Error::invalid_input(format!(
                    "the pushed copy of {agent_path} holds a NUL byte, so it is not text; push \
                     text files only"
                )));
            }
            Err(e) => {
                return Err(Error::invalid_input(format!(
                    "the pushed copy of {agent_path} is not UTF-8 text (invalid byte at offset \
                     {}); push the editor's text encoded as UTF-8",
                    e.utf8_error().valid_up_to()
                )));
            }
        };
        let (_, resolved) = self.source_of(agent_path)?;
        if resolved.read_only {
            return Err(Error::invalid_path(
                agent_path,
                "it lies in a read-only mount, which the agent never writes; push copies of \
                 files in writable mounts",
            ));
        }
        let Some(disk) = self.disk_file(agent_path)? else {
            return Err(Error::invalid_path(
                agent_path,
                "no file is there; a pushed copy stands for a file's unsaved edits, so save a \
                 new file once before pushing it",
            ));
        };
        let copy = PushedCopy {
            sha256,
            text,
            base_sha256: disk.sha256.clone(),
            by,
        };
        if copy.sha256 == disk.sha256 {
            self.drop_copy(agent_path);
            return Ok(Pushed::SameAsDisk(copy));
        }
        self.config
            .pushed
            .insert(agent_path.to_string(), copy.clone());
        self.config_dirty = true;
        Ok(Pushed::Kept(copy))
    }

    /// Withdraws the runtime's copy of the file at `agent_path`: reads and writes see the disk
    /// again. Returns the copy withdrawn.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no copy of that file stands (never pushed, withdrawn, or saved);
    /// [`Error::InvalidInput`] on a read-only view.
    pub fn withdraw_copy(&mut self, agent_path: &str) -> Result<PushedCopy> {
        self.writable()?;
        let Some(copy) = self.config.pushed.remove(agent_path) else {
            return Err(Error::not_found(format!(
                "a pushed copy of {agent_path} in session {} (none was pushed, or it was \
                 withdrawn or saved); `strata session show` lists the copies that stand",
                self.session_id
            )));
        };
        self.config_dirty = true;
        Ok(copy)
    }

    /// The copy of the file at `agent_path` that stands, given the SHA-256 of the file on disk
    /// now (`None`: no file): a copy the disk now equals was saved and is cleared.
    pub fn standing_copy(
        &mut self,
        agent_path: &str,
        disk_sha256: Option<&str>,
    ) -> Option<PushedCopy> {
        let copy = self.config.pushed.get(agent_path)?;
        if disk_sha256 == Some(copy.sha256.as_str()) && self.view.is_none() {
            self.drop_copy(agent_path);
            return None;
        }
        Some(copy.clone())
    }

    /// Forgets the copy of `agent_path`, if one stands (saved, or superseded by a write).
    pub(super) fn drop_copy(&mut self, agent_path: &str) {
        if self.config.pushed.remove(agent_path).is_some() {
            self.config_dirty = true;
        }
    }
}
