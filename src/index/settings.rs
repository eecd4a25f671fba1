//! The store's settings: default mounts, the content limit, extra deny and ignore globs, the
//! watched roots, the writing tools' permissions and new sessions' descriptor settings, kept as
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
    /// What the agents' writing tools may do without a person (seed 001's
    /// `[file_access.permissions]`).
    #[serde(default, skip_serializing_if = "FileAccess::is_default")]
    pub file_access: FileAccess,
    /// The descriptor settings new sessions get (llmproc's `[file_descriptor]` section without
    /// `enabled`), unless a session's request gives its own.
    #[serde(
        default,
        skip_serializing_if = "DescriptorSettings::is_default",
        deserialize_with = "with_defaults"
    )]
    pub file_descriptor: DescriptorSettings,
}

/// The descriptor settings of a session (seed 004; llmproc's `[file_descriptor]` section
/// without `enabled`: a session has descriptors unless it was made without). In `settings.toml`
/// a field left out takes its default; a request gives all four.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescriptorSettings {
    /// Tool output longer than this many characters becomes a descriptor (default 8000).
    pub max_direct_output_chars: usize,
    /// The page size of new descriptors, in characters (default 4000).
    pub default_page_size: usize,
    /// User input longer than this many characters is paged when `page_user_input` (default 8000).
    pub max_input_chars: usize,
    /// Whether a user turn longer than `max_input_chars` becomes a descriptor (default false: a
    /// runtime opts in).
    pub page_user_input: bool,
}

impl Default for DescriptorSettings {
    fn default() -> Self {
        DescriptorSettings {
            max_direct_output_chars: 8000,
            default_page_size: 4000,
            max_input_chars: 8000,
            page_user_input: false,
        }
    }
}

impl DescriptorSettings {
    fn is_default(&self) -> bool {
        *self == DescriptorSettings::default()
    }
}

/// Reads a table of `settings.toml` over `T`'s defaults: the keys given replace the defaults'
/// (an unknown key is still refused), so a partial table is enough.
fn with_defaults<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Serialize + serde::de::DeserializeOwned,
{
    use serde::de::Error as _;
    let given = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
    let mut value = serde_json::to_value(T::default()).map_err(D::Error::custom)?;
    if let Some(fields) = value.as_object_mut() {
        fields.extend(given);
    }
    serde_json::from_value(value).map_err(D::Error::custom)
}

/// The `[file_access]` table of the settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAccess {
    /// How writes are approved, by glob and by tool.
    #[serde(default)]
    pub permissions: WritePermissions,
}

impl FileAccess {
    fn is_default(&self) -> bool {
        *self == FileAccess::default()
    }
}

/// An approval mode: run without asking, hold for a person's approval, or refuse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Run without asking.
    #[default]
    Auto,
    /// Answer "approval required" with a token a person redeems.
    Manual,
    /// Refuse.
    Deny,
}

/// Seed 001's write permissions: globs (gitignore syntax, case-insensitive, matched against the
/// path inside its mount) and tools. Precedence: a deny pattern refuses; a tool in
/// `require_approval` is held for a person; a path matching an auto-approve pattern runs; any
/// other write gets `mode`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WritePermissions {
    /// The mode of a write that no pattern and no tool rule decides.
    #[serde(default)]
    pub mode: ApprovalMode,
    /// Writes to these paths run without approval (unless the tool requires it).
    #[serde(default)]
    pub auto_approve_write_patterns: Vec<String>,
    /// Writes to these paths are refused.
    #[serde(default = "default_auto_deny")]
    pub auto_deny_patterns: Vec<String>,
    /// These tools always need a person's approval.
    #[serde(default = "default_require_approval")]
    pub require_approval: Vec<String>,
}

fn default_auto_deny() -> Vec<String> {
    [".env", "secrets/**/*", "credentials.json"]
        .map(String::from)
        .to_vec()
}

fn default_require_approval() -> Vec<String> {
    ["delete_file", "rename_file"].map(String::from).to_vec()
}

impl Default for WritePermissions {
    fn default() -> Self {
        WritePermissions {
            mode: ApprovalMode::Auto,
            auto_approve_write_patterns: Vec::new(),
            auto_deny_patterns: default_auto_deny(),
            require_approval: default_require_approval(),
        }
    }
}

/// [`WritePermissions`] with its globs compiled.
#[derive(Clone, Debug)]
pub struct WritePolicy {
    permissions: WritePermissions,
    auto_approve: ignore::gitignore::Gitignore,
    auto_deny: ignore::gitignore::Gitignore,
}

impl WritePolicy {
    /// Compiles `permissions`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a glob that does not parse.
    pub fn new(permissions: &WritePermissions) -> Result<Self> {
        let compile = |globs: &[String], key: &str| {
            let mut builder = ignore::gitignore::GitignoreBuilder::new("");
            builder
                .case_insensitive(true)
                .map_err(|e| Error::invalid_input(format!("file_access.permissions: {e}")))?;
            for glob in globs {
                builder.add_line(None, glob).map_err(|e| {
                    Error::invalid_input(format!(
                        "file_access.permissions.{key}: glob {glob:?}: {e}; fix it in settings.toml"
                    ))
                })?;
            }
            builder
                .build()
                .map_err(|e| Error::invalid_input(format!("file_access.permissions.{key}: {e}")))
        };
        Ok(WritePolicy {
            auto_approve: compile(
                &permissions.auto_approve_write_patterns,
                "auto_approve_write_patterns",
            )?,
            auto_deny: compile(&permissions.auto_deny_patterns, "auto_deny_patterns")?,
            permissions: permissions.clone(),
        })
    }

    /// The mode of `tool` writing `path` (relative to its mount, `/`-separated), and the rule
    /// that decided it.
    pub fn decide(&self, tool: &str, path: &str) -> (ApprovalMode, String) {
        let path = path.trim_start_matches('/');
        let matched = |rules: &ignore::gitignore::Gitignore| {
            rules.matched_path_or_any_parents(path, false).is_ignore()
        };
        if matched(&self.auto_deny) {
            return (
                ApprovalMode::Deny,
                format!("{path} matches file_access.permissions.auto_deny_patterns"),
            );
        }
        if self.permissions.require_approval.iter().any(|t| t == tool) {
            return (
                ApprovalMode::Manual,
                format!("{tool} is in file_access.permissions.require_approval"),
            );
        }
        if matched(&self.auto_approve) {
            return (
                ApprovalMode::Auto,
                format!("{path} matches file_access.permissions.auto_approve_write_patterns"),
            );
        }
        (
            self.permissions.mode,
            "file_access.permissions.mode".to_string(),
        )
    }
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
            file_access: FileAccess::default(),
            file_descriptor: DescriptorSettings::default(),
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
        WritePolicy::new(&settings.file_access.permissions)?;
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
    fn write_permissions_deny_then_tools_then_auto_globs_then_the_mode() -> Result<()> {
        let defaults = WritePolicy::new(&WritePermissions::default())?;
        assert_eq!(
            defaults.decide("write_file", "src/a.rs").0,
            ApprovalMode::Auto
        );
        assert_eq!(
            defaults.decide("delete_file", "src/a.rs").0,
            ApprovalMode::Manual
        );
        assert_eq!(
            defaults.decide("write_file", "deep/.env").0,
            ApprovalMode::Deny
        );
        assert_eq!(
            defaults.decide("write_file", "/Secrets/k/v.pem").0,
            ApprovalMode::Deny
        );
        assert_eq!(
            defaults.decide("delete_file", "credentials.json").0,
            ApprovalMode::Deny
        );
        let policy = WritePolicy::new(&WritePermissions {
            mode: ApprovalMode::Deny,
            auto_approve_write_patterns: vec!["docs/**".into(), "*.MD".into()],
            auto_deny_patterns: vec!["docs/private/**".into()],
            require_approval: vec!["rename_file".into()],
        })?;
        assert_eq!(
            policy.decide("write_file", "docs/a/b.txt").0,
            ApprovalMode::Auto
        );
        assert_eq!(
            policy.decide("write_file", "x/readme.md").0,
            ApprovalMode::Auto
        );
        let (mode, why) = policy.decide("write_file", "docs/private/p.txt");
        assert_eq!(mode, ApprovalMode::Deny);
        assert!(why.contains("auto_deny_patterns"), "{why}");
        assert_eq!(
            policy.decide("rename_file", "docs/a.txt").0,
            ApprovalMode::Manual
        );
        assert_eq!(
            policy.decide("write_file", "src/main.rs").0,
            ApprovalMode::Deny
        );
        let bad = WritePermissions {
            auto_deny_patterns: vec!["files/[z-a]".into()],
            ..WritePermissions::default()
        };
        assert!(WritePolicy::new(&bad).is_err());
        Ok(())
    }

    #[test]
    fn file_access_round_trips_and_stays_out_of_a_default_file() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        Settings::default().save(dir.path())?;
        let text = std::fs::read_to_string(dir.path().join(SETTINGS_FILE))
            .map_err(|e| Error::io("read", e))?;
        assert!(!text.contains("file_access"), "{text}");
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            "[file_access.permissions]\nmode = \"manual\"\n",
        )
        .map_err(|e| Error::io("write", e))?;
        let loaded = Settings::load(dir.path())?;
        assert_eq!(loaded.file_access.permissions.mode, ApprovalMode::Manual);
        assert_eq!(
            loaded.file_access.permissions.require_approval,
            ["delete_file", "rename_file"],
            "defaults fill what the file does not say"
        );
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            "[file_access.permissions]\nmode = \"sometimes\"\n",
        )
        .map_err(|e| Error::io("write", e))?;
        assert!(Settings::load(dir.path()).is_err());
        Ok(())
    }

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
            file_access: FileAccess {
                permissions: WritePermissions {
                    mode: ApprovalMode::Manual,
                    auto_approve_write_patterns: vec!["docs/**".into()],
                    ..WritePermissions::default()
                },
            },
            file_descriptor: DescriptorSettings {
                page_user_input: true,
                max_input_chars: 100,
                ..DescriptorSettings::default()
            },
        };
        settings.save(dir.path())?;
        assert_eq!(Settings::load(dir.path())?, settings);
        Ok(())
    }

    /// A partial `[file_descriptor]` table keeps the other fields' defaults; an unknown key is
    /// refused with the file named.
    #[test]
    fn a_partial_file_descriptor_table_keeps_the_defaults() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let file = dir.path().join(SETTINGS_FILE);
        std::fs::write(&file, "[file_descriptor]\npage_user_input = true\n")
            .map_err(|e| Error::io("write", e))?;
        let loaded = Settings::load(dir.path())?.file_descriptor;
        assert_eq!(
            loaded,
            DescriptorSettings {
                page_user_input: true,
                ..DescriptorSettings::default()
            }
        );
        std::fs::write(&file, "[file_descriptor]\npage_input = true\n")
            .map_err(|e| Error::io("write", e))?;
        let err = Settings::load(dir.path()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("page_input"), "{err}");
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
