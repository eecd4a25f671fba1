//! `FilesystemResolver`: turns the paths an agent sees into canonical paths on a named filesystem
//! through mount mappings, and back.
//!
//! A leaf: uses no other strata module but `error`.
//!
//! A resolver is its mounts plus the caller's default filesystem id (DESIGN.md, "Filesystem
//! sources"). [`FilesystemResolver::resolve`] normalises an agent path, picks the mount with the
//! longest agent prefix that covers it in whole path segments (`/work` does not capture
//! `/workspace`), and swaps that prefix for the mount's canonical prefix; a path no mount covers is
//! on the caller's default filesystem and keeps its spelling. [`FilesystemResolver::reverse_resolve`]
//! goes the other way, for display. A path is watchable, and strata can open it, when it lies on
//! this machine's filesystem id ([`machine_filesystem_id`]).
//!
//! Every path is checked before it is used: it must be non-empty, absolute, UTF-8 and free of NUL
//! bytes, and a `..` may not climb out of the mount (or above `/`) it starts in. Those are rejected
//! with [`Error::InvalidPath`] saying why. [`FilesystemResolver::check_symlinks`] follows symlinks on
//! disk and refuses a path that leaves its mount through one; [`FilesystemResolver::resolve_for_write`]
//! refuses writes through a read-only mount with [`Error::PermissionDenied`].
//!
//! A case-insensitive mount lowercases the part of the identity path below its canonical prefix
//! (seed 002's lowercase docPath), so `/work/README.md` and `/work/readme.md` are one entity, and
//! keeps the spelling the agent gave in [`ResolvedPath::open_path`]. Agent prefixes themselves are
//! always matched exactly.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::error::{Error, Result};

/// The most symlinks followed while checking one path, as Linux's own limit for a lookup.
const MAX_SYMLINK_HOPS: usize = 40;

/// How a mount is written on the command line, quoted by every parse error of [`MountMapping`].
const MOUNT_SPEC_USAGE: &str =
    "write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro";

/// One mount: agent paths under `agent_prefix` are the files under `canonical_prefix` on the
/// filesystem `filesystem_id`.
///
/// Stored in the store's TOML settings and with each session, so it (de)serialises with serde;
/// the CLI writes it as `AGENT=CANONICAL[:ro][:ci][:fs=ID]` ([`FromStr`], [`fmt::Display`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountMapping {
    /// The absolute path prefix the agent sees, e.g. `/workspace`.
    pub agent_prefix: String,
    /// The absolute path prefix on the filesystem that holds the files, e.g. `/home/me/project`.
    pub canonical_prefix: String,
    /// The filesystem holding the canonical paths; `None` means this machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_id: Option<String>,
    /// Whether names below the prefix are compared without case (the identity path is lowercased).
    #[serde(default, skip_serializing_if = "is_false")]
    pub case_insensitive: bool,
    /// Whether writes through this mount are refused.
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
}

/// serde's `skip_serializing_if` for flags that default to false.
fn is_false(flag: &bool) -> bool {
    !*flag
}

impl MountMapping {
    /// A writable, case-sensitive mount of `canonical_prefix` on this machine at `agent_prefix`.
    pub fn new(agent_prefix: impl Into<String>, canonical_prefix: impl Into<String>) -> Self {
        MountMapping {
            agent_prefix: agent_prefix.into(),
            canonical_prefix: canonical_prefix.into(),
            filesystem_id: None,
            case_insensitive: false,
            read_only: false,
        }
    }

    /// The same mount with its canonical paths on the filesystem `filesystem_id`.
    pub fn on_filesystem(mut self, filesystem_id: impl Into<String>) -> Self {
        self.filesystem_id = Some(filesystem_id.into());
        self
    }

    /// The same mount, marked case-insensitive.
    pub fn as_case_insensitive(mut self) -> Self {
        self.case_insensitive = true;
        self
    }

    /// The same mount, marked read-only.
    pub fn as_read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The mount with both prefixes normalised and the filesystem id filled in with `machine_id`
    /// when it was `None`.
    fn normalized(&self, machine_id: &str) -> Result<MountMapping> {
        let field = |name: &str, value: &str| {
            normalize_inner(value).map_err(|reason| {
                Error::invalid_input(format!("mount {self}: {name} {value:?}: {reason}"))
            })
        };
        let filesystem_id = match &self.filesystem_id {
            None => machine_id.to_owned(),
            Some(id) if id.trim().is_empty() => {
                return Err(Error::invalid_input(format!(
                    "mount {self}: the filesystem id is empty; leave it out to mean this machine"
                )));
            }
            Some(id) => id.clone(),
        };
        Ok(MountMapping {
            agent_prefix: field("agent prefix", &self.agent_prefix)?,
            canonical_prefix: field("canonical prefix", &self.canonical_prefix)?,
            filesystem_id: Some(filesystem_id),
            case_insensitive: self.case_insensitive,
            read_only: self.read_only,
        })
    }
}

impl fmt::Display for MountMapping {
    /// Writes the CLI form `AGENT=CANONICAL[:ro][:ci][:fs=ID]` that [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.agent_prefix, self.canonical_prefix)?;
        if self.read_only {
            f.write_str(":ro")?;
        }
        if self.case_insensitive {
            f.write_str(":ci")?;
        }
        if let Some(id) = &self.filesystem_id {
            write!(f, ":fs={id}")?;
        }
        Ok(())
    }
}

impl FromStr for MountMapping {
    type Err = Error;

    /// Parses `AGENT=CANONICAL[:ro][:rw][:ci][:fs=ID]`, options in any order after the canonical
    /// prefix. A trailing `:word` without a `/` is read as an option, so a canonical prefix cannot
    /// end in one.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming what is wrong: no `=`, an empty or relative prefix, an
    /// unknown option, both `ro` and `rw`, or an empty `fs=`.
    fn from_str(spec: &str) -> Result<Self> {
        let bad = |what: String| {
            Error::invalid_input(format!("mount {spec:?}: {what}; {MOUNT_SPEC_USAGE}"))
        };
        let Some((agent, mut canonical)) = spec.split_once('=') else {
            return Err(bad(
                "there is no `=` between the agent and canonical prefixes".into(),
            ));
        };
        let (mut read_only, mut read_write, mut case_insensitive) = (false, false, false);
        let mut filesystem_id = None;
        while let Some((head, option)) = canonical.rsplit_once(':') {
            if option.contains('/') {
                break; // a colon inside the canonical path, not an option
            }
            match option {
                "ro" => read_only = true,
                "rw" => read_write = true,
                "ci" => case_insensitive = true,
                _ => match option.strip_prefix("fs=") {
                    Some("") => return Err(bad("`fs=` needs a filesystem id".into())),
                    Some(id) if filesystem_id.is_none() => filesystem_id = Some(id.to_owned()),
                    Some(_) => return Err(bad("`fs=` is given twice".into())),
                    None => {
                        return Err(bad(format!(
                            "unknown option {option:?} (known: ro, rw, ci, fs=ID)"
                        )));
                    }
                },
            }
            canonical = head;
        }
        if read_only && read_write {
            return Err(bad("it is marked both `ro` and `rw`".into()));
        }
        let prefix = |name: &str, value: &str| {
            normalize_inner(value).map_err(|reason| bad(format!("{name} {value:?}: {reason}")))
        };
        Ok(MountMapping {
            agent_prefix: prefix("agent prefix", agent)?,
            canonical_prefix: prefix("canonical prefix", canonical)?,
            filesystem_id,
            case_insensitive,
            read_only,
        })
    }
}

/// Where an agent path leads: the filesystem and canonical path that name its entity, and the
/// path to open it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPath {
    /// The agent path as given, normalised (no `.`, `..`, doubled or trailing slashes).
    pub agent_path: String,
    /// The filesystem holding the file: the mount's, or the resolver's default when no mount maps it.
    pub filesystem_id: String,
    /// The identity path: the canonical path, lowercased below the prefix on a case-insensitive mount.
    pub canonical_path: String,
    /// The canonical path with the spelling the agent gave, for opening and display.
    pub open_path: String,
    /// Index into [`FilesystemResolver::mounts`] of the mount that mapped the path, `None` if none did.
    pub mount: Option<usize>,
    /// Whether the mount that mapped the path is read-only.
    pub read_only: bool,
    /// Whether the canonical path lies on this machine's filesystem, so strata can read and watch it.
    pub watchable: bool,
}

/// Mount mappings plus the caller's default filesystem id: resolves agent paths to canonical
/// paths and back.
#[derive(Clone, Debug)]
pub struct FilesystemResolver {
    /// The mounts in the order given, normalised, each with its filesystem id filled in.
    mounts: Vec<MountMapping>,
    /// Indices into `mounts`, longest agent prefix first.
    by_agent_prefix: Vec<usize>,
    /// Indices into `mounts`, longest canonical prefix first.
    by_canonical_prefix: Vec<usize>,
    /// The filesystem of paths no mount maps.
    default_filesystem_id: String,
    /// This machine's filesystem id: paths on it are watchable.
    machine_id: String,
}

impl FilesystemResolver {
    /// A resolver for `mounts`, with unmapped paths on `default_filesystem_id`; mounts without a
    /// filesystem id, and watchability, use this machine's id ([`machine_filesystem_id`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a prefix is empty, relative, not normalisable or contains NUL,
    /// a filesystem id is empty, or two mounts share an agent prefix.
    pub fn new(
        mounts: Vec<MountMapping>,
        default_filesystem_id: impl Into<String>,
    ) -> Result<Self> {
        Self::with_machine_id(mounts, default_filesystem_id, machine_filesystem_id())
    }

    /// Like [`FilesystemResolver::new`], with `machine_id` standing for this machine's filesystem id
    /// (for a daemon acting for another host, and for tests).
    ///
    /// # Errors
    /// As [`FilesystemResolver::new`], and when `machine_id` is empty.
    pub fn with_machine_id(
        mounts: Vec<MountMapping>,
        default_filesystem_id: impl Into<String>,
        machine_id: impl Into<String>,
    ) -> Result<Self> {
        let default_filesystem_id = default_filesystem_id.into();
        let machine_id = machine_id.into();
        if default_filesystem_id.trim().is_empty() {
            return Err(Error::invalid_input(
                "the default filesystem id is empty; pass this machine's (machine_filesystem_id) or the runtime's",
            ));
        }
        if machine_id.trim().is_empty() {
            return Err(Error::invalid_input(
                "this machine's filesystem id is empty",
            ));
        }
        let mounts = mounts
            .iter()
            .map(|mount| mount.normalized(&machine_id))
            .collect::<Result<Vec<_>>>()?;
        for (i, mount) in mounts.iter().enumerate() {
            if let Some(other) = mounts[..i]
                .iter()
                .find(|m| m.agent_prefix == mount.agent_prefix)
            {
                return Err(Error::invalid_input(format!(
                    "mounts {other} and {mount} share the agent prefix {}; keep one",
                    mount.agent_prefix
                )));
            }
        }
        let by_length = |prefix: fn(&MountMapping) -> &str| {
            let mut order: Vec<usize> = (0..mounts.len()).collect();
            order.sort_by_key(|&i| std::cmp::Reverse(segment_count(prefix(&mounts[i]))));
            order
        };
        let by_agent_prefix = by_length(|m| &m.agent_prefix);
        let by_canonical_prefix = by_length(|m| &m.canonical_prefix);
        Ok(FilesystemResolver {
            mounts,
            by_agent_prefix,
            by_canonical_prefix,
            default_filesystem_id,
            machine_id,
        })
    }

    /// The resolver for host paths (the CLI's own arguments): no mounts, this machine's id.
    pub fn host() -> Self {
        let id = machine_filesystem_id();
        FilesystemResolver {
            mounts: Vec::new(),
            by_agent_prefix: Vec::new(),
            by_canonical_prefix: Vec::new(),
            default_filesystem_id: id.clone(),
            machine_id: id,
        }
    }

    /// The mounts in the order given, normalised, each with its filesystem id filled in (so they
    /// resolve the same way when stored and loaded on another machine).
    pub fn mounts(&self) -> &[MountMapping] {
        &self.mounts
    }

    /// The filesystem of paths no mount maps.
    pub fn default_filesystem_id(&self) -> &str {
        &self.default_filesystem_id
    }

    /// The filesystem id this resolver treats as this machine's (watchable, openable).
    pub fn machine_id(&self) -> &str {
        &self.machine_id
    }

    /// Resolves an agent path: normalises it, maps it through the mount with the longest agent
    /// prefix covering it in whole segments, or leaves it on the default filesystem.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when the path is empty, relative, contains NUL, or a `..` climbs out
    /// of the mount it is in (or above `/`).
    pub fn resolve(&self, agent_path: &str) -> Result<ResolvedPath> {
        check_text(agent_path).map_err(|reason| Error::invalid_path(agent_path, reason))?;
        let mut segments: Vec<&str> = Vec::new();
        for segment in agent_path.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    let before = self.mount_index(&join_segments(&segments));
                    if segments.pop().is_none() {
                        return Err(Error::invalid_path(agent_path, ABOVE_ROOT));
                    }
                    if let Some(i) = before
                        && self.mount_index(&join_segments(&segments)) != Some(i)
                    {
                        return Err(Error::invalid_path(
                            agent_path,
                            format!(
                                "`..` leaves the mount {}; name the target without climbing out of the mount",
                                self.mounts[i].agent_prefix
                            ),
                        ));
                    }
                }
                name => segments.push(name),
            }
        }
        let agent = join_segments(&segments);
        let Some((index, suffix)) = self.mount_for(&agent) else {
            return Ok(ResolvedPath {
                filesystem_id: self.default_filesystem_id.clone(),
                canonical_path: agent.clone(),
                open_path: agent.clone(),
                mount: None,
                read_only: false,
                watchable: self.default_filesystem_id == self.machine_id,
                agent_path: agent,
            });
        };
        let mount = &self.mounts[index];
        let open_path = join_prefix(&mount.canonical_prefix, suffix);
        let canonical_path = if mount.case_insensitive {
            join_prefix(&mount.canonical_prefix, &suffix.to_lowercase())
        } else {
            open_path.clone()
        };
        let filesystem_id = self.filesystem_of(mount).to_owned();
        Ok(ResolvedPath {
            watchable: filesystem_id == self.machine_id,
            filesystem_id,
            canonical_path,
            open_path,
            mount: Some(index),
            read_only: mount.read_only,
            agent_path: agent,
        })
    }

    /// Resolves an agent path that is about to be written.
    ///
    /// # Errors
    /// As [`FilesystemResolver::resolve`], and [`Error::PermissionDenied`] when the path lies on a
    /// read-only mount.
    pub fn resolve_for_write(&self, agent_path: &str) -> Result<ResolvedPath> {
        let resolved = self.resolve(agent_path)?;
        if let Some(index) = resolved.mount.filter(|_| resolved.read_only) {
            return Err(Error::PermissionDenied {
                reason: format!(
                    "{} is on the read-only mount {}; writes through it are refused (mount it without :ro to allow them)",
                    resolved.agent_path, self.mounts[index]
                ),
            });
        }
        Ok(resolved)
    }

    /// The path an agent would use for `canonical_path` on `filesystem_id`: the mount with the
    /// longest canonical prefix covering it whose agent path resolves back to it; otherwise the
    /// canonical path itself (normalised when it can be).
    pub fn reverse_resolve(&self, filesystem_id: &str, canonical_path: &str) -> String {
        let Ok(canonical) = normalize_inner(canonical_path) else {
            return canonical_path.to_owned();
        };
        for &index in &self.by_canonical_prefix {
            let mount = &self.mounts[index];
            if self.filesystem_of(mount) != filesystem_id {
                continue;
            }
            let Some(suffix) =
                strip_mount_prefix(&canonical, &mount.canonical_prefix, mount.case_insensitive)
            else {
                continue;
            };
            let agent = join_prefix(&mount.agent_prefix, suffix);
            // A longer agent prefix may shadow this one; then the agent cannot reach the path this way.
            if self.mount_index(&agent) == Some(index) {
                return agent;
            }
        }
        canonical
    }

    /// Whether `agent_path` resolves to this machine's filesystem (so it can be read and watched);
    /// false for a path that does not resolve.
    pub fn is_watchable(&self, agent_path: &str) -> bool {
        self.resolve(agent_path)
            .is_ok_and(|resolved| resolved.watchable)
    }

    /// Resolves `agent_path` and checks it on disk with [`FilesystemResolver::check_symlinks`]:
    /// the real path to open.
    ///
    /// # Errors
    /// As [`FilesystemResolver::resolve`] and [`FilesystemResolver::check_symlinks`].
    pub fn open_path_checked(&self, agent_path: &str) -> Result<PathBuf> {
        self.check_symlinks(&self.resolve(agent_path)?)
    }

    /// Follows every symlink on the way to `resolved.open_path` (its missing tail taken as
    /// written) and returns the real path, after checking that it stays under the real path of
    /// its mount's canonical prefix (a path no mount maps may lead anywhere on this machine).
    /// The check is made when called: a link changed afterwards is not seen.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when the path is not on this machine's filesystem, a symlink leads
    /// out of the mount, or symlinks loop; [`Error::Io`] when a directory cannot be inspected.
    pub fn check_symlinks(&self, resolved: &ResolvedPath) -> Result<PathBuf> {
        let agent = &resolved.agent_path;
        if !resolved.watchable {
            return Err(Error::invalid_path(
                agent.as_str(),
                format!(
                    "it lies on filesystem {}, not on this machine's ({}); strata cannot open it, the runtime must supply its contents",
                    short_id(&resolved.filesystem_id),
                    short_id(&self.machine_id)
                ),
            ));
        }
        let real = real_path(Path::new(&resolved.open_path))
            .map_err(|failure| failure.into_error(agent))?;
        if resolved.mount.is_none() {
            check_named_link(agent.as_str(), Path::new(&resolved.open_path), &real)?;
        }
        if let Some(index) = resolved.mount {
            let mount = &self.mounts[index];
            let root = real_path(Path::new(&mount.canonical_prefix))
                .map_err(|failure| failure.into_error(&mount.canonical_prefix))?;
            if !real.starts_with(&root) {
                return Err(Error::invalid_path(
                    agent.as_str(),
                    format!(
                        "a symlink leads to {}, outside its mount {} ({}); strata does not follow symlinks out of a mount",
                        real.display(),
                        mount.agent_prefix,
                        root.display()
                    ),
                ));
            }
        }
        Ok(real)
    }

    /// The filesystem id of a normalised mount (always filled in by `normalized`).
    fn filesystem_of<'a>(&'a self, mount: &'a MountMapping) -> &'a str {
        mount.filesystem_id.as_deref().unwrap_or(&self.machine_id)
    }

    /// The index of the mount that maps the normalised agent path `agent`, if any.
    fn mount_index(&self, agent: &str) -> Option<usize> {
        self.mount_for(agent).map(|(index, _)| index)
    }

    /// The mount with the longest agent prefix covering the normalised path `agent`, and the rest
    /// of the path below that prefix (empty, or starting with `/`).
    fn mount_for<'a>(&self, agent: &'a str) -> Option<(usize, &'a str)> {
        self.by_agent_prefix.iter().find_map(|&index| {
            strip_mount_prefix(agent, &self.mounts[index].agent_prefix, false)
                .map(|rest| (index, rest))
        })
    }
}

/// The reason given for a `..` at `/`.
const ABOVE_ROOT: &str = "`..` climbs above the root /; remove it";

/// Normalises an absolute path: no `.`, `..`, doubled or trailing slashes.
///
/// # Errors
/// [`Error::InvalidPath`] when the path is empty, relative, contains NUL or a `..` climbs above `/`.
pub fn normalize_path(path: &str) -> Result<String> {
    normalize_inner(path).map_err(|reason| Error::invalid_path(path, reason))
}

/// Normalises an absolute host path given as a [`Path`] (or anything that is one, such as an
/// `OsStr`), refusing one that is not UTF-8.
///
/// # Errors
/// As [`normalize_path`], and [`Error::InvalidPath`] when the path is not UTF-8.
pub fn normalize_os_path(path: impl AsRef<Path>) -> Result<String> {
    normalize_path(utf8_path(path.as_ref())?)
}

/// The path as UTF-8 text.
///
/// # Errors
/// [`Error::InvalidPath`] when the path is not valid UTF-8.
pub fn utf8_path(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| {
        Error::invalid_path(
            path.to_string_lossy(),
            "path is not valid UTF-8; strata keeps UTF-8 paths only, rename the file",
        )
    })
}

/// Makes a host path absolute against the current directory `cwd` and normalises it, without
/// touching the filesystem (so `..` is taken lexically, even after a symlinked directory).
///
/// # Errors
/// [`Error::InvalidPath`] when `path` is empty, contains NUL, is not UTF-8, or climbs above `/`,
/// or when it is relative and `cwd` is not an absolute UTF-8 path.
pub fn absolute_path(path: impl AsRef<Path>, cwd: impl AsRef<Path>) -> Result<String> {
    let path = utf8_path(path.as_ref())?;
    if path.is_empty() || path.starts_with('/') {
        return normalize_path(path);
    }
    if path.contains('\0') {
        return Err(Error::invalid_path(path, NUL_BYTE));
    }
    let cwd = utf8_path(cwd.as_ref())?;
    if !cwd.starts_with('/') {
        return Err(Error::invalid_path(
            cwd,
            "the current directory must be absolute to make a relative path absolute",
        ));
    }
    let joined = format!("{cwd}/{path}");
    normalize_inner(&joined).map_err(|reason| Error::invalid_path(path, reason))
}

/// A path for human output: as it is, or, when it holds a control character (a newline, a tab),
/// quoted with escapes as a JSON string, so that one path stays one line (git quotes such paths
/// too). JSON output keeps paths exactly.
pub fn quoted(path: &str) -> std::borrow::Cow<'_, str> {
    if path.chars().any(char::is_control) {
        std::borrow::Cow::Owned(serde_json::Value::String(path.to_string()).to_string())
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// This machine's filesystem id: SHA-256 hex of the trimmed `/etc/machine-id`, else of the
/// trimmed host name (`/proc/sys/kernel/hostname`, `/etc/hostname`, `$HOSTNAME`), else of
/// `localhost`. Computed once per process.
pub fn machine_filesystem_id() -> String {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let hostname = || {
            read("/proc/sys/kernel/hostname")
                .or_else(|| read("/etc/hostname"))
                .or_else(|| std::env::var("HOSTNAME").ok())
        };
        filesystem_id_from(read("/etc/machine-id"), hostname)
    })
    .clone()
}

/// The id derived from a machine-id text, else from a host name (only looked up when needed):
/// the first one that is not blank after trimming, hashed; `localhost` when neither is.
fn filesystem_id_from(
    machine_id: Option<String>,
    hostname: impl FnOnce() -> Option<String>,
) -> String {
    let usable = |text: Option<String>| text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let name = usable(machine_id)
        .or_else(|| usable(hostname()))
        .unwrap_or_else(|| "localhost".to_owned());
    hex::encode(sha2::Sha256::digest(name.as_bytes()))
}

/// The reason given for a NUL byte.
const NUL_BYTE: &str = "path contains a NUL byte; remove it";

/// Checks what every path must be: non-empty, absolute, without NUL. Returns the reason otherwise.
fn check_text(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("path is empty; give an absolute path such as /work/notes.md".into());
    }
    if path.contains('\0') {
        return Err(NUL_BYTE.into());
    }
    if !path.starts_with('/') {
        return Err("path is relative; give an absolute path starting with /".into());
    }
    Ok(())
}

/// [`normalize_path`] returning only the reason on failure.
fn normalize_inner(path: &str) -> Result<String, String> {
    check_text(path)?;
    // Already normal (no empty, `.` or `..` segment): itself, without splitting and joining
    // (a resume reverse-resolves every file's canonical path, which is normal).
    if path == "/" || path[1..].split('/').all(|s| !matches!(s, "" | "." | "..")) {
        return Ok(path.to_owned());
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(ABOVE_ROOT.into());
                }
            }
            name => segments.push(name),
        }
    }
    Ok(join_segments(&segments))
}

/// `/` followed by the segments joined with `/`.
fn join_segments(segments: &[&str]) -> String {
    let mut path =
        String::with_capacity(segments.iter().map(|s| s.len() + 1).sum::<usize>().max(1));
    for segment in segments {
        path.push('/');
        path.push_str(segment);
    }
    if path.is_empty() {
        path.push('/');
    }
    path
}

/// How many segments a normalised path has (`/` has none).
fn segment_count(path: &str) -> usize {
    path.split('/')
        .filter(|segment| !segment.is_empty())
        .count()
}

/// The rest of the normalised `path` below the normalised `prefix` when the prefix covers it in
/// whole segments (compared without case when `fold_case`): empty, or starting with `/`.
fn strip_mount_prefix<'a>(path: &'a str, prefix: &str, fold_case: bool) -> Option<&'a str> {
    let mut rest = path;
    for wanted in prefix.split('/').filter(|segment| !segment.is_empty()) {
        let after = rest.strip_prefix('/')?;
        let (head, tail) = after.split_at(after.find('/').unwrap_or(after.len()));
        let same = if fold_case {
            head.to_lowercase() == wanted.to_lowercase()
        } else {
            head == wanted
        };
        if !same {
            return None;
        }
        rest = tail;
    }
    Some(if rest == "/" { "" } else { rest })
}

/// The normalised `prefix` followed by `suffix` (empty, or starting with `/`), without a double slash.
fn join_prefix(prefix: &str, suffix: &str) -> String {
    if suffix.is_empty() {
        prefix.to_owned()
    } else if prefix == "/" {
        suffix.to_owned()
    } else {
        format!("{prefix}{suffix}")
    }
}

/// The first 12 characters of a filesystem id, enough to tell ids apart in a message.
fn short_id(id: &str) -> &str {
    id.char_indices().nth(12).map_or(id, |(end, _)| &id[..end])
}

/// Why [`real_path`] failed, turned into an [`Error`] by the caller who knows which path to name.
enum RealPathFailure {
    /// Symlinks looped or chained more than [`MAX_SYMLINK_HOPS`] deep.
    Loop,
    /// Inspecting this path failed.
    Io(PathBuf, io::Error),
}

impl RealPathFailure {
    /// The error for `path`, the path the caller was checking.
    fn into_error(self, path: &str) -> Error {
        match self {
            RealPathFailure::Loop => Error::invalid_path(
                path,
                format!(
                    "more than {MAX_SYMLINK_HOPS} symlinks on the way (a loop?); fix the links"
                ),
            ),
            RealPathFailure::Io(at, source) => Error::io(
                format!("checking symlinks of {path} at {}", at.display()),
                source,
            ),
        }
    }
}

/// The path with every symlink on the way followed, like `realpath`, except that a part that does
/// not exist (yet) is kept as written; a dangling symlink is followed to where it points.
/// The symlink rule for a path named outside any mount (`named`, absolute, shown as `shown`):
/// its real path `real` must lie inside the real directory that holds it, so a link named
/// explicitly is followed within its directory and never out of it (to `/etc/passwd`, say).
///
/// # Errors
/// [`Error::InvalidPath`] when a symlink leads out of that directory.
pub fn check_named_link(shown: &str, named: &Path, real: &Path) -> Result<()> {
    let Some(parent) = named.parent() else {
        return Ok(());
    };
    let Ok(root) = real_path(parent) else {
        return Ok(());
    };
    if real.starts_with(&root) {
        return Ok(());
    }
    Err(Error::invalid_path(
        shown,
        format!(
            "a symlink leads to {}, outside {} which holds it; strata does not follow a named \
             symlink out of its directory: name the real path, or mount it",
            real.display(),
            root.display()
        ),
    ))
}

fn real_path(path: &Path) -> Result<PathBuf, RealPathFailure> {
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut real = PathBuf::from("/");
    let mut exists = true;
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            real.pop();
            continue;
        }
        let candidate = real.join(&name);
        if exists {
            match std::fs::symlink_metadata(&candidate) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(RealPathFailure::Loop);
                    }
                    let target = std::fs::read_link(&candidate)
                        .map_err(|e| RealPathFailure::Io(candidate.clone(), e))?;
                    if target.is_absolute() {
                        real = PathBuf::from("/");
                    }
                    pending.extend(target.components().rev().filter_map(|c| match c {
                        Component::Normal(name) => Some(name.to_owned()),
                        Component::ParentDir => Some("..".into()),
                        _ => None,
                    }));
                    continue;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) =>
                {
                    exists = false;
                }
                Err(e) => return Err(RealPathFailure::Io(candidate, e)),
            }
        }
        real = candidate;
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The fast path for normal paths gives what splitting and joining gives.
        #[test]
        fn normalizing_equals_joining_the_segments(path in "/([a.]{0,3}/?){0,5}") {
            let mut segments: Vec<&str> = Vec::new();
            let mut above = false;
            for segment in path.split('/') {
                match segment {
                    "" | "." => {}
                    ".." => above |= segments.pop().is_none(),
                    name => segments.push(name),
                }
            }
            let joined = if above { Err(ABOVE_ROOT.to_string()) } else { Ok(join_segments(&segments)) };
            proptest::prop_assert_eq!(normalize_inner(&path), joined);
        }
    }

    #[test]
    fn normalizes() -> Result<()> {
        for (input, want) in [
            ("/", "/"),
            ("//", "/"),
            ("/a/b/", "/a/b"),
            ("//a//b//", "/a/b"),
            ("/a/./b/.", "/a/b"),
            ("/a/b/../c", "/a/c"),
            ("/a/..", "/"),
            ("/a/b/c/../../d", "/a/d"),
            ("/é/日本/🦀", "/é/日本/🦀"),
            ("/a\\b", "/a\\b"),
            ("/...", "/..."),
        ] {
            assert_eq!(normalize_path(input)?, want, "{input}");
        }
        Ok(())
    }

    #[test]
    fn strips_whole_segments_only() {
        assert_eq!(strip_mount_prefix("/work/a", "/work", false), Some("/a"));
        assert_eq!(strip_mount_prefix("/work", "/work", false), Some(""));
        assert_eq!(strip_mount_prefix("/workspace/a", "/work", false), None);
        assert_eq!(strip_mount_prefix("/wor", "/work", false), None);
        assert_eq!(strip_mount_prefix("/a/b", "/", false), Some("/a/b"));
        assert_eq!(strip_mount_prefix("/", "/", false), Some(""));
        assert_eq!(strip_mount_prefix("/WORK/a", "/work", false), None);
        assert_eq!(strip_mount_prefix("/WORK/a", "/work", true), Some("/a"));
        // The Kelvin sign lowercases to a one-byte `k`: segments are compared, not byte lengths.
        assert_eq!(strip_mount_prefix("/\u{212A}/x", "/k", true), Some("/x"));
    }

    #[test]
    fn joins_without_double_slash() {
        assert_eq!(join_prefix("/", "/a"), "/a");
        assert_eq!(join_prefix("/", ""), "/");
        assert_eq!(join_prefix("/host", ""), "/host");
        assert_eq!(join_prefix("/host", "/a"), "/host/a");
        assert_eq!(join_segments(&[]), "/");
        assert_eq!(join_segments(&["a", "b"]), "/a/b");
    }

    #[test]
    fn filesystem_id_prefers_machine_id_then_hostname() {
        let sha = |text: &str| hex::encode(sha2::Sha256::digest(text.as_bytes()));
        assert_eq!(
            filesystem_id_from(Some("abc\n".into()), || panic!("hostname read needlessly")),
            sha("abc")
        );
        assert_eq!(
            filesystem_id_from(Some("  \n".into()), || Some(" box\n".into())),
            sha("box")
        );
        assert_eq!(filesystem_id_from(None, || Some("box".into())), sha("box"));
        assert_eq!(filesystem_id_from(None, || None), sha("localhost"));
        assert_eq!(sha("abc").len(), 64);
    }

    #[test]
    fn short_id_keeps_twelve_chars() {
        assert_eq!(short_id("0123456789abcdef"), "0123456789ab");
        assert_eq!(short_id("abc"), "abc");
    }

    #[test]
    fn parses_mount_specs() -> Result<()> {
        let mount: MountMapping = "/work=/home/me/p:ro:ci:fs=abc".parse()?;
        assert_eq!(
            mount,
            MountMapping::new("/work", "/home/me/p")
                .as_read_only()
                .as_case_insensitive()
                .on_filesystem("abc")
        );
        assert_eq!(mount.to_string().parse::<MountMapping>()?, mount);
        // Options in any order; rw is accepted and changes nothing; prefixes are normalised.
        let mount: MountMapping = "/work/=//data/./x:fs=f1:rw".parse()?;
        assert_eq!(
            mount,
            MountMapping::new("/work", "/data/x").on_filesystem("f1")
        );
        // A colon inside the canonical path is part of it.
        let mount: MountMapping = "/w=/mnt/c:/stuff".parse()?;
        assert_eq!(mount.canonical_prefix, "/mnt/c:/stuff");
        Ok(())
    }
}
