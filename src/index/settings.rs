//! The store's settings: default mounts, the content limit, extra deny and ignore globs, the
//! watched roots, kept as
//! `settings.toml` in the store directory.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::read::DEFAULT_MAX_CONTENT_BYTES;
use super::rules::DenyRules;
use crate::error::{Error, Result};
use crate::resolve::MountMapping;
use crate::store::private;

/// The settings file's name inside the store directory.
pub const SETTINGS_FILE: &str = "settings.toml";

/// What a store directory configures, overridable by flags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default mounts given to new sessions.
    #[serde(default)]
    pub mounts: Vec<MountMapping>,
    /// Files larger than this many bytes keep no content (default 16 MiB).
    #[serde(default = "default_max_content_bytes")]
    pub max_content_bytes: u64,
    /// Deny globs added to the built-in secrets list.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Ignore globs (gitignore syntax) added to the trees' own `.gitignore` rules.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// The roots the daemon watches (canonical directories), kept so a restarted or
    /// auto-started daemon watches them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<String>,
}

fn default_max_content_bytes() -> u64 {
    DEFAULT_MAX_CONTENT_BYTES
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mounts: Vec::new(),
            max_content_bytes: DEFAULT_MAX_CONTENT_BYTES,
            deny: Vec::new(),
            ignore: Vec::new(),
            watch: Vec::new(),
        }
    }
}

impl Settings {
    /// Reads `settings.toml` from `store_dir`; defaults when the file does not exist.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, [`Error::InvalidInput`] when it does not parse
    /// (naming the file and the problem).
    pub fn load(store_dir: &Path) -> Result<Self> {
        let path = store_dir.join(SETTINGS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Settings::default());
            }
            Err(err) => return Err(Error::io(format!("reading {}", path.display()), err)),
        };
        let settings: Settings = toml::from_str(&text).map_err(|e| {
            Error::invalid_input(format!("{}: {e}; fix or delete the file", path.display()))
        })?;
        settings.deny_rules()?;
        Ok(settings)
    }

    /// Writes `settings.toml` into `store_dir`, atomically (write a temporary file, then rename),
    /// with mode 0600 whatever the umask.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    pub fn save(&self, store_dir: &Path) -> Result<()> {
        let path = store_dir.join(SETTINGS_FILE);
        let text = toml::to_string_pretty(self).map_err(|e| {
            Error::invalid_input(format!("settings cannot be written as TOML: {e}"))
        })?;
        let temporary = store_dir.join(format!("{SETTINGS_FILE}.tmp"));
        private::write_file(&temporary, text.as_bytes())?;
        std::fs::rename(&temporary, &path)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    /// The deny rules: the built-in secrets list plus this store's extra globs.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a glob that does not parse.
    pub fn deny_rules(&self) -> Result<DenyRules> {
        DenyRules::with_defaults(&self.deny)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_defaults() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert_eq!(Settings::load(dir.path())?, Settings::default());
        let settings = Settings {
            mounts: vec![MountMapping::new("/work", "/home/me/project").as_read_only()],
            max_content_bytes: 1024,
            deny: vec!["*.secret".into()],
            ignore: vec!["target/".into()],
            watch: vec!["/home/me/project".into()],
        };
        settings.save(dir.path())?;
        assert_eq!(Settings::load(dir.path())?, settings);
        Ok(())
    }

    #[test]
    fn bad_file_is_named() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            "max_content_bytes = \"lots\"",
        )
        .map_err(|e| Error::io("write", e))?;
        let err = Settings::load(dir.path()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains(SETTINGS_FILE), "{err}");
        Ok(())
    }
}
