//! Getting a store's data out: `backup` (a verified copy of the live store, one consistent
//! snapshot while writers go on), `migrate` (a copy into a new store of either backend, redb or
//! PostgreSQL, made by replaying the log record for record) and salvage (a new store from what a damaged one still
//! verifies, with an exact account of what was lost; it needs no open store, so it is
//! [`Engine::salvage`], not a request).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::admin::{ChainHead, FsckFinding};
use super::request::Apply;
use super::{Engine, Error, Result};
use crate::object::{FilesystemSource, Object};
use crate::resolve::machine_filesystem_id;
use crate::store::{PgOpen, Store};

/// `dir` made absolute against `cwd` (a front end's current directory); a relative `dir`
/// without one is refused (the daemon's own directory means nothing to the caller).
fn absolute(dir: &str, cwd: Option<&str>) -> Result<PathBuf> {
    let path = Path::new(dir);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    match cwd {
        Some(cwd) => Ok(Path::new(cwd).join(path)),
        None => Err(Error::invalid_input(format!(
            "{dir:?} is relative and no current directory came with it; give an absolute path"
        ))),
    }
}

fn head(head: Option<(crate::store::TxId, [u8; 32])>) -> Option<ChainHead> {
    head.map(|(tx, chain)| ChainHead {
        tx_id: tx.0,
        chain: hex::encode(chain),
    })
}

/// `backup`: copy the store, as one read transaction sees it, into a new store in `dir`, and
/// verify the copy.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// The directory of the copy: new, or empty.
    pub dir: String,
    /// The directory a relative `dir` is taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// What `backup` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackupResponse {
    /// The copy's directory.
    pub dir: String,
    /// The copy's chain head: the store as of this transaction (`None`: empty).
    pub head: Option<ChainHead>,
    /// The size of the copy's store file in bytes.
    pub bytes: u64,
    /// What fsck found in the copy (none: the copy verifies).
    pub findings: Vec<FsckFinding>,
}

impl Apply for BackupRequest {
    type Response = BackupResponse;

    /// # Errors
    /// [`Error::InvalidInput`] when `dir` holds a store, is the store's own directory or is
    /// relative without `cwd`; storage and I/O errors.
    fn apply(self, engine: &Engine) -> Result<BackupResponse> {
        let dir = absolute(&self.dir, self.cwd.as_deref())?;
        let report = engine.store.backup(&dir)?;
        Ok(BackupResponse {
            dir: dir.display().to_string(),
            head: head(report.head),
            bytes: report.bytes,
            findings: report.findings.into_iter().map(FsckFinding::from).collect(),
        })
    }
}

/// `migrate`: copy the store into a new store of either backend by replaying its log: every
/// record with its own tx id, time, origin, run, digests and chain value (evicted bodies stay
/// evicted), the documents and contents its puts name, and the settings and mounts. The
/// copy's chain head is the original's.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// Where the copy goes: `postgres://user@host:port/db?schema=NAME` (a schema with no store,
    /// or an empty one), or a directory for a new redb store (new, or empty).
    pub to: String,
    /// For a PostgreSQL target: the new store directory that points at it, where the copy's
    /// settings and mounts live (new, or empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The directory relative paths are taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// What `migrate` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MigrateResponse {
    /// Where the copy lives: the PostgreSQL URL (without a password) or the redb store's
    /// directory.
    pub to: String,
    /// The copy's store directory.
    pub dir: String,
    /// The copy's chain head, the original's when the copy began (`None`: empty).
    pub head: Option<ChainHead>,
    /// Log records copied.
    pub transactions: u64,
    /// Op bodies copied.
    pub ops: u64,
    /// Evicted op bodies copied as what they are (digests only).
    pub evicted_ops: u64,
    /// Stat cache entries copied, so that the copy's next index reads no unchanged file
    /// (none when the original committed while it was copied).
    #[serde(default)]
    pub stat_entries: u64,
    /// What fsck found in the copy (none: the copy verifies).
    pub findings: Vec<FsckFinding>,
}

/// Refuses a directory that cannot take a new store: one that holds a store, a file, or a
/// directory with anything in it.
fn check_new_dir(dir: &Path, own: Option<&Path>) -> Result<()> {
    let same = own.is_some_and(|own| {
        matches!(
            (std::fs::canonicalize(own), std::fs::canonicalize(dir)),
            (Ok(a), Ok(b)) if a == b
        )
    });
    if same || crate::store::exists(dir) {
        return Err(Error::invalid_input(format!(
            "{} already holds a strata store; a copy goes into a new directory",
            dir.display()
        )));
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::invalid_input(format!(
                    "{} is not empty; give a new or empty directory for the copy",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::invalid_input(format!(
            "{} cannot take the copy ({e}); give a new or empty directory",
            dir.display()
        ))),
    }
}

impl Apply for MigrateRequest {
    type Response = MigrateResponse;

    /// # Errors
    /// [`Error::InvalidInput`] for a target that holds a store (a directory with a store or
    /// anything else in it, a PostgreSQL schema whose log is not empty), a URL that is not
    /// PostgreSQL's, a PostgreSQL target without `dir` (or a directory target with one), or a
    /// relative path without `cwd`: nothing is made then. Storage errors; a copy that fails
    /// half way is removed (a PostgreSQL one is left, and the error says how to drop it).
    fn apply(self, engine: &Engine) -> Result<MigrateResponse> {
        let postgres = self.to.contains("://");
        let location = if postgres {
            Some(crate::store::PgLocation::parse(&self.to)?)
        } else {
            None
        };
        let dir = match (&location, &self.dir) {
            (Some(_), Some(dir)) => absolute(dir, self.cwd.as_deref())?,
            (Some(location), None) => {
                return Err(Error::invalid_input(format!(
                    "a copy into PostgreSQL needs a store directory that points at it, where its                      settings and mounts live: give --dir NEW_DIR with --to {}",
                    location.redacted()
                )));
            }
            (None, Some(_)) => {
                return Err(Error::invalid_input(
                    "--dir is for a PostgreSQL target; a copy into redb goes into the --to                      directory itself",
                ));
            }
            (None, None) => absolute(&self.to, self.cwd.as_deref())?,
        };
        check_new_dir(&dir, engine.dir())?;
        let target = match &location {
            Some(location) => {
                match Store::postgres(location.clone(), None, PgOpen::Open) {
                    Ok(existing) => {
                        if let Some((tx, _)) = existing.chain_head()? {
                            return Err(Error::invalid_input(format!(
                                "{} already holds a strata store with {} transactions; a copy                                  goes into a new schema (?schema=NAME)",
                                location.redacted(),
                                tx.0
                            )));
                        }
                    }
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
                Store::create_postgres(&dir, location.clone())?
            }
            None => Store::create(&dir)?,
        };
        let report = match crate::store::migrate(engine.store(), &target) {
            Ok(report) => report,
            Err(e) => {
                drop(target);
                // Best effort: what this request made goes again.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(match &location {
                    Some(location) => Error::storage(
                        "copying the store",
                        format!(
                            "{}; the partial copy stays in schema {} of {}: drop it (DROP                              SCHEMA {} CASCADE) before trying again",
                            e.full_message(),
                            location.schema(),
                            location.redacted(),
                            location.schema()
                        ),
                    ),
                    None => e,
                });
            }
        };
        if let Some(own) = engine.dir() {
            let settings = own.join(crate::index::SETTINGS_FILE);
            if settings.exists() {
                let text = std::fs::read(&settings)
                    .map_err(|e| Error::io(format!("reading {}", settings.display()), e))?;
                crate::store::private::write_file(&dir.join(crate::index::SETTINGS_FILE), &text)?;
            }
        }
        let findings = target.fsck()?;
        Ok(MigrateResponse {
            to: location.map_or_else(|| dir.display().to_string(), |l| l.redacted()),
            dir: dir.display().to_string(),
            head: head(report.head),
            transactions: report.transactions,
            ops: report.ops,
            evicted_ops: report.evicted_ops,
            stat_entries: report.stat_entries,
            findings: findings.into_iter().map(FsckFinding::from).collect(),
        })
    }
}

/// Salvage: copy what still verifies of a damaged store into a new store in `new_dir`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SalvageRequest {
    /// The directory of the new store: new, or empty.
    pub new_dir: String,
    /// The directory a relative `new_dir` is taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// One thing salvage could not carry into the new store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SalvageLoss {
    /// What was lost: `tx` (a whole log record), `op` (one op of a transaction), `document`,
    /// `content`, `table` (a table read only in part).
    pub kind: String,
    /// The transaction, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<u64>,
    /// The entity it affects, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// The path of that entity, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What was wrong.
    pub detail: String,
}

/// An entity the damaged store held that the new store lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LostEntity {
    /// Its id.
    pub entity: String,
    /// Its path (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// What salvage answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SalvageResponse {
    /// The new store's directory.
    pub dir: String,
    /// When the damaged file was truncated: its length, and the length it was read at (padded
    /// with zeros to what its header records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padded: Option<(u64, u64)>,
    /// Transactions in the new store (the old ids; lost ones are empty records).
    pub txs: u64,
    /// Ops carried over.
    pub ops: u64,
    /// Entities in the new store.
    pub entities: u64,
    /// Contents in the new store.
    pub contents: u64,
    /// Contents and documents made again from the files that still hold them (hashes, hex).
    pub restored: Vec<String>,
    /// Transactions whose log record was lost.
    pub txs_lost: Vec<u64>,
    /// Ops lost from transactions whose record survived.
    pub ops_lost: u64,
    /// Entities the damaged store held that the new one lacks.
    pub entities_lost: Vec<LostEntity>,
    /// Contents lost (hashes, hex).
    pub contents_lost: Vec<String>,
    /// Every loss, in log order.
    pub losses: Vec<SalvageLoss>,
    /// The new store's chain head.
    pub head: Option<ChainHead>,
    /// What fsck finds in the new store (none: it verifies).
    pub findings: Vec<FsckFinding>,
}

impl SalvageResponse {
    /// Whether anything was lost.
    pub fn lost_anything(&self) -> bool {
        !self.losses.is_empty() || !self.entities_lost.is_empty()
    }
}

/// The object the file at `path` makes now, as `index` would make it (and its kept bytes), or
/// its denied stub; `None` when it is not a regular file (never through a symlink) or unreadable.
fn rebuild_file(path: &str, max_content_bytes: u64) -> Option<(Object, Option<Vec<u8>>)> {
    let source = FilesystemSource {
        filesystem_id: machine_filesystem_id(),
        path: path.to_string(),
    };
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file()) {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let reading = crate::index::read_stream(file, max_content_bytes).ok()?;
    let prepared = crate::index::Prepared::new(source, reading).ok()?;
    Some(prepared.into_object_and_bytes())
}

impl Engine {
    /// Salvages the store in `dir`, which the storage engine may be unable to open, into a new
    /// store: every transaction, op, document and content that still verifies (contents the
    /// store lost are read again from files that still hash to them), and what was lost.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the new directory holds a store or is `dir`;
    /// [`Error::StoreLocked`] when a process holds the damaged store; [`Error::Corrupt`] when
    /// not even its header reads.
    pub fn salvage(dir: impl AsRef<Path>, request: SalvageRequest) -> Result<SalvageResponse> {
        let new_dir = absolute(&request.new_dir, request.cwd.as_deref())?;
        let dir = dir.as_ref();
        let settings = crate::index::Settings::load(dir).unwrap_or_default();
        let rebuild = |path: &str| rebuild_file(path, settings.max_content_bytes);
        let report = crate::store::salvage(dir, &new_dir, &rebuild)?;
        Ok(SalvageResponse {
            dir: new_dir.display().to_string(),
            padded: report.padded,
            txs: report.txs,
            ops: report.ops,
            entities: report.entities,
            contents: report.contents,
            restored: report.restored,
            txs_lost: report.txs_lost,
            ops_lost: report.ops_lost,
            entities_lost: report
                .entities_lost
                .into_iter()
                .map(|(entity, path)| LostEntity { entity, path })
                .collect(),
            contents_lost: report.contents_lost,
            losses: report
                .losses
                .into_iter()
                .map(|l| SalvageLoss {
                    kind: l.kind.to_string(),
                    tx: l.tx,
                    entity: l.entity,
                    path: l.path,
                    detail: l.detail,
                })
                .collect(),
            head: head(report.head),
            findings: report.findings.into_iter().map(FsckFinding::from).collect(),
        })
    }
}
