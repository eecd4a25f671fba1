//! The store as a whole: `init`, `log`, `fsck`, `gc`, `evict`, `stats`, and the default mounts.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::request::Apply;
use super::{Engine, Error, Result, SettingsStamp};
use crate::index::Settings;
use crate::resolve::{FilesystemResolver, MountMapping, machine_filesystem_id};
use crate::store::{Origin, Store, TxId, TxRecord};

/// Refuses a mount set that cannot make a resolver (duplicate prefixes, relative paths).
fn check_mounts(mounts: &[MountMapping]) -> Result<()> {
    FilesystemResolver::new(mounts.to_vec(), machine_filesystem_id()).map(|_| ())
}

/// What `init` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InitResponse {
    /// The store's directory.
    pub dir: String,
    /// Whether the store existed already (nothing was changed), as `git init` reinitialises.
    #[serde(default)]
    pub existed: bool,
}

/// Creates an empty store in `dir` with default `mounts`. A store that exists already is left
/// as it is, when the mounts given are among its default mounts.
pub(super) fn init(
    dir: &Path,
    mounts: Vec<MountMapping>,
    backend: Option<&str>,
) -> Result<InitResponse> {
    check_mounts(&mounts)?;
    let location = backend.map(crate::store::PgLocation::parse).transpose()?;
    if crate::store::exists(dir) {
        let pointed = crate::store::backend_of(dir)?;
        if location.is_some() && pointed != location {
            return Err(Error::invalid_input(format!(
                "{} already holds a strata store that lives elsewhere; give another directory",
                dir.display()
            )));
        }
        let existing = Settings::load(dir)?.mounts;
        if let Some(new) = mounts.iter().find(|m| !existing.contains(m)) {
            return Err(Error::invalid_input(format!(
                "{} already holds a strata store, without the mount {new}; add it with `strata \
                 mount add '{new}'`",
                dir.display()
            )));
        }
        return Ok(InitResponse {
            dir: dir.display().to_string(),
            existed: true,
        });
    }
    match location {
        Some(location) => drop(Store::create_postgres(dir, location)?),
        None => drop(Store::create(dir)?),
    }
    let settings = Settings {
        mounts,
        ..Settings::default()
    };
    settings.save(dir)?;
    Ok(InitResponse {
        dir: dir.display().to_string(),
        existed: false,
    })
}

/// The chain's head: the latest transaction and the chain value after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChainHead {
    /// The latest transaction.
    pub tx_id: u64,
    /// The chain value after it, hex.
    pub chain: String,
}

impl Engine {
    fn chain_head(&self) -> Result<Option<ChainHead>> {
        Ok(self.store.chain_head()?.map(|(tx, chain)| ChainHead {
            tx_id: tx.0,
            chain: hex::encode(chain),
        }))
    }
}

/// `log`: the transaction log.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRequest {
    /// Only transactions after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many transactions: the newest, or the first after `since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// One op of a log record: its digest always, its body unless its entity was evicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogOp {
    /// BLAKE3 of the op's canonical JSON, hex.
    pub digest: String,
    /// The op as the JSON that was hashed (`schema/tx_record.schema.json`); `None` once
    /// evicted.
    pub body: Option<Value>,
}

impl LogOp {
    /// The op's kind (`put`, `delete`, `evict`, `match`), when the body is kept.
    pub fn kind(&self) -> Option<&str> {
        self.body.as_ref()?.get("op")?.as_str()
    }
}

/// One transaction of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogRecord {
    /// The transaction's number.
    pub tx_id: u64,
    /// When the store committed it (RFC 3339).
    pub tx_time: String,
    /// Who wrote it.
    pub origin: String,
    /// The index run it belongs to (the run's first transaction), absent outside runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    /// Its ops in order.
    pub ops: Vec<LogOp>,
    /// The chain value after this record, hex.
    pub chain: String,
}

impl From<&TxRecord> for LogRecord {
    fn from(record: &TxRecord) -> Self {
        LogRecord {
            tx_id: record.tx_id.0,
            tx_time: record.tx_time.to_rfc3339(),
            origin: record.origin.as_str().to_string(),
            run: record.run.map(|run| run.0),
            ops: record
                .ops
                .iter()
                .map(|op| LogOp {
                    digest: hex::encode(op.digest),
                    body: op.body.clone(),
                })
                .collect(),
            chain: hex::encode(record.chain),
        }
    }
}

/// What `log` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogResponse {
    /// The records, oldest first.
    pub records: Vec<LogRecord>,
    /// The chain's head (`None` in an empty store).
    pub head: Option<ChainHead>,
}

impl Apply for LogRequest {
    type Response = LogResponse;

    /// # Errors
    /// [`Error::Corrupt`] when a record does not decode.
    fn apply(self, engine: &Engine) -> Result<LogResponse> {
        let head = engine.chain_head()?;
        let latest = head.as_ref().map_or(0, |h| h.tx_id);
        if let Some(since) = self.since
            && since > latest
        {
            // As --as-of-tx: a transaction the store does not have is an error, not an empty log.
            return Err(Error::invalid_input(format!(
                "--since {since}: the store has transactions 1 to {latest}"
            )));
        }
        // Without `since`, `limit` keeps the newest transactions, as `git log -n` does.
        let since = match (self.since, self.limit) {
            (Some(since), _) => Some(TxId(since)),
            (None, Some(limit)) => {
                let last = head.as_ref().map_or(0, |h| h.tx_id);
                Some(TxId(last.saturating_sub(limit as u64)))
            }
            (None, None) => None,
        };
        let records = engine.store.log(since, self.limit.unwrap_or(usize::MAX))?;
        Ok(LogResponse {
            records: records.iter().map(LogRecord::from).collect(),
            head,
        })
    }
}

/// `log.run`: the index run that reading as of transaction `tx` would see only part of.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRunRequest {
    /// The transaction a read is made as of (`--as-of-tx`).
    pub tx: u64,
}

/// What `log.run` answers: the run that `tx` falls inside of, when there is one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogRun {
    /// The run that began at or before `tx` and wrote transactions after it; `None` when
    /// reading as of `tx` sees every run whole.
    pub partial: Option<PartialRun>,
}

/// An index run that a read as of some transaction sees only the start of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartialRun {
    /// The run's first transaction (its id).
    pub run: u64,
    /// The run's last transaction found.
    pub last: u64,
    /// How many of the run's transactions are at or before the transaction asked about.
    pub seen: u64,
    /// How many transactions the run wrote.
    pub transactions: u64,
    /// What to tell a reader, one line.
    pub note: String,
}

/// How far back from the asked transaction `log.run` looks for a run that spans it, and how
/// many transactions ahead it reads at a time for the run's later ones: the transactions of a
/// run follow each other, with at most a few other writers' in between.
const RUN_WINDOW: u64 = 256;

impl Apply for LogRunRequest {
    type Response = LogRun;

    /// # Errors
    /// [`Error::InvalidInput`] for a transaction the store does not have;
    /// [`Error::Corrupt`] when a header does not decode.
    fn apply(self, engine: &Engine) -> Result<LogRun> {
        let latest = engine.store.chain_head()?.map_or(0, |(tx, _)| tx.0);
        if self.tx == 0 || self.tx > latest {
            return Err(Error::invalid_input(format!(
                "--as-of-tx {}: the store has transactions 1 to {latest}",
                self.tx
            )));
        }
        let from = self.tx.saturating_sub(RUN_WINDOW);
        let before = engine
            .store
            .tx_runs(Some(TxId(from)), (self.tx - from) as usize)?;
        // The latest run started at or before `tx`; if a later transaction is of the same run,
        // `tx` is inside it.
        let Some(run) = before.iter().rev().find_map(|(_, run)| *run) else {
            return Ok(LogRun { partial: None });
        };
        let mut last = None;
        let mut cursor = self.tx;
        loop {
            let window = engine
                .store
                .tx_runs(Some(TxId(cursor)), RUN_WINDOW as usize)?;
            let Some(&(end, _)) = window.last() else {
                break;
            };
            let found = window
                .iter()
                .filter(|(_, r)| *r == Some(run))
                .map(|(tx, _)| tx.0)
                .max();
            match found {
                Some(tx) => last = Some(tx),
                None => break,
            }
            cursor = end.0;
        }
        let Some(last) = last else {
            return Ok(LogRun { partial: None });
        };
        let count = |to: u64| -> Result<u64> {
            Ok(engine
                .store
                // A run id comes from a stored header: damage must not make it underflow.
                .tx_runs(
                    Some(TxId(run.0.saturating_sub(1))),
                    (to + 1).saturating_sub(run.0) as usize,
                )?
                .iter()
                .filter(|(_, r)| *r == Some(run))
                .count() as u64)
        };
        let seen = count(self.tx)?;
        let transactions = count(last)?;
        Ok(LogRun {
            partial: Some(PartialRun {
                run: run.0,
                last,
                seen,
                transactions,
                note: format!(
                    "transaction {} is inside index run {} ({seen} of its {transactions} \
                     transactions, {}–{last}): this read sees the files of that run only in \
                     part; --as-of-tx {last} sees the whole run",
                    self.tx, run.0, run.0
                ),
            }),
        })
    }
}

/// `fsck`: verify the store, optionally rebuilding its query tables first.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsckRequest {
    /// Rebuild the query tables from the transaction log and the content tables first (not
    /// when the log itself is damaged: the response's `rebuilt` says so).
    #[serde(default)]
    pub rebuild: bool,
    /// Repair: re-read damaged contents from the files that still hold them (when a file's
    /// bytes hash to the recorded hash), then rebuild the query tables (unless the log itself
    /// is damaged); what still fails is reported as findings.
    #[serde(default)]
    pub repair: bool,
}

/// One problem fsck found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FsckFinding {
    /// What kind of problem (`blob_hash`, `doc_missing`, `chain`, `versions`, …).
    pub kind: String,
    /// What it is about (a hash, an entity, a tx, a table).
    pub subject: String,
    /// What is wrong.
    pub detail: String,
    /// The entity it affects, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// The path of that entity, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The transaction (version or log record) it affects, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<u64>,
    /// The command that repairs it.
    pub repair: String,
}

impl From<crate::store::Finding> for FsckFinding {
    fn from(f: crate::store::Finding) -> Self {
        FsckFinding {
            kind: f.kind.to_string(),
            subject: f.subject,
            detail: f.detail,
            entity: f.entity,
            path: f.path,
            tx: f.tx,
            repair: f.repair.to_string(),
        }
    }
}

/// What `fsck` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FsckResponse {
    /// Whether the query tables were rebuilt first (never from a damaged log: its findings
    /// then name salvage).
    pub rebuilt: bool,
    /// The contents a repair re-read from disk (their hashes, hex), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<String>,
    /// Every problem found (none: the store verifies).
    pub findings: Vec<FsckFinding>,
    /// The chain's head (`None` in an empty store).
    pub head: Option<ChainHead>,
}

impl Apply for FsckRequest {
    type Response = FsckResponse;

    /// # Errors
    /// Storage errors (problems in the data are findings, not errors).
    fn apply(self, engine: &Engine) -> Result<FsckResponse> {
        let mut restored = Vec::new();
        let mut rebuilt = false;
        if self.rebuild || self.repair {
            let before = engine.store.fsck()?;
            if self.repair {
                let contents = recoverable_contents(&before);
                restored = contents.iter().map(|(hash, _)| hex::encode(hash)).collect();
                if !contents.is_empty() {
                    engine.store.restore_contents(contents)?;
                }
            }
            // The log is the source of truth: rebuilt from a damaged log, the query tables would
            // lose what they still hold. Its findings then point at salvage instead.
            let log_damaged = before
                .iter()
                .any(|f| crate::store::damage::LOG_DAMAGE.contains(&f.kind));
            if !log_damaged {
                engine.store.fsck_rebuild()?;
                rebuilt = true;
            }
        }
        let mut findings: Vec<FsckFinding> = engine
            .store
            .fsck()?
            .into_iter()
            .map(FsckFinding::from)
            .collect();
        // On a damaged store the head may not read: that is one more finding, not an error.
        let head = match engine.chain_head() {
            Ok(head) => head,
            Err(e @ Error::Corrupt { .. }) => {
                if findings.is_empty() {
                    findings.push(FsckFinding {
                        kind: "chain".into(),
                        subject: "the chain's head".into(),
                        detail: e.to_string(),
                        entity: None,
                        path: None,
                        tx: None,
                        repair: crate::store::damage::REPAIR.into(),
                    });
                }
                None
            }
            Err(e) => return Err(e),
        };
        Ok(FsckResponse {
            rebuilt,
            restored,
            findings,
            head,
        })
    }
}

/// The damaged contents of `findings` that a file on disk still holds: (hash, the file's
/// bytes), read only when they hash to the recorded hash (content addressing makes that safe).
fn recoverable_contents(findings: &[crate::store::Finding]) -> Vec<([u8; 32], Vec<u8>)> {
    let mut out: Vec<([u8; 32], Vec<u8>)> = Vec::new();
    for f in findings {
        if !matches!(f.kind, "blob_hash" | "blob_unreadable" | "blob_missing") {
            continue;
        }
        let (Some(path), Ok(bytes)) = (&f.path, hex::decode(&f.subject)) else {
            continue;
        };
        let Ok(hash) = <[u8; 32]>::try_from(bytes.as_slice()) else {
            continue;
        };
        if out.iter().any(|(h, _)| *h == hash) {
            continue;
        }
        // The recorded path, never through a symlink (the symlink rule of indexing).
        let path = Path::new(path);
        let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
        if let (true, Ok(bytes)) = (is_file, std::fs::read(path))
            && crate::hash::sha256(&bytes).0 == hash
        {
            out.push((hash, bytes));
        }
    }
    out
}

/// `gc`: drop contents and documents that no version references.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcRequest {}

/// What `gc` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcResponse {
    /// Documents no version referenced.
    pub documents_removed: u64,
    /// Contents no document referenced.
    pub blobs_removed: u64,
    /// Bytes of records removed.
    pub bytes_freed: u64,
    /// Reference counts that were wrong and were fixed.
    pub counts_fixed: u64,
    /// Damaged version rows and documents gc met (none: the store's documents all read): what
    /// they may use was kept, and nothing was removed when a row's document is unknown.
    /// `strata fsck --repair` repairs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<FsckFinding>,
    /// Set when zeroing the store file's free pages after gc failed: gc committed, and erased
    /// bytes may still be in free pages until `strata gc` runs again; says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrub_pending: Option<String>,
}

impl Apply for GcRequest {
    type Response = GcResponse;

    /// # Errors
    /// Storage errors.
    fn apply(self, engine: &Engine) -> Result<GcResponse> {
        let report = engine.store.gc()?;
        Ok(GcResponse {
            documents_removed: report.documents_removed,
            blobs_removed: report.blobs_removed,
            bytes_freed: report.bytes_freed,
            counts_fixed: report.counts_fixed,
            damaged: report.damaged.into_iter().map(FsckFinding::from).collect(),
            scrub_pending: report.scrub_pending,
        })
    }
}

/// `evict`: erase an entity and its whole history.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvictRequest {
    /// A path, an entity id, or an id prefix.
    pub reference: String,
    /// The caller's working directory, for a relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Confirms it: eviction erases every version and cannot be undone.
    #[serde(default)]
    pub confirm: bool,
}

/// What `evict` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvictResponse {
    /// The evicted entity.
    pub id: String,
    /// How many versions were erased.
    pub versions: u64,
    /// The eviction's transaction.
    pub tx_id: u64,
    /// Set when zeroing the store file's free pages after the eviction failed: the eviction
    /// committed, and its bytes may still be in free pages until `strata gc` finishes that
    /// scrub; says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrub_pending: Option<String>,
}

impl Apply for EvictRequest {
    type Response = EvictResponse;

    /// # Errors
    /// [`Error::InvalidInput`] without `confirm`; [`Error::NotFound`] for a reference that names
    /// nothing.
    fn apply(self, engine: &Engine) -> Result<EvictResponse> {
        let id = engine.resolve_ref(self.cwd.as_deref(), &self.reference)?;
        if !self.confirm {
            return Err(Error::invalid_input(format!(
                "evict erases every version of {id} and its contents for good; add --yes to do it"
            )));
        }
        // Counted without reading documents: a damaged one does not stop its entity's eviction.
        // A version row that does not decode stops it as the store's evict would, naming the
        // repair.
        let versions = engine.store.history_len(&id).map_err(|e| match e {
            Error::Corrupt { what } => Error::corrupt(format!(
                "{id} cannot be evicted: {what}; run `strata fsck --repair`, then evict it again"
            )),
            e => e,
        })?;
        let receipt = engine.store.evict(&id, Origin::Cli)?;
        // The session is gone from the store: it must not stay live either.
        if let Some(sid) = id.strip_prefix("session:") {
            engine.forget_session(sid);
        }
        engine.publish(&[receipt.tx_id.0]);
        // The erased bytes leave the store file's free pages too: a failure there does not undo
        // the eviction, and the answer says so.
        let scrub_pending = engine.store.finish_erasure().err().map(|e| {
            format!(
                "the evict of {id} committed as tx {} (it is erased from every table), but \
                 zeroing the store file's free pages after it failed, so its bytes may still be \
                 in them; `strata gc` finishes that scrub: {}",
                receipt.tx_id.0,
                e.full_message()
            )
        });
        Ok(EvictResponse {
            id,
            versions,
            tx_id: receipt.tx_id.0,
            scrub_pending,
        })
    }
}

/// `stats`: counts and sizes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatsRequest {}

/// What `stats` answers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatsResponse {
    /// Entities (live or tombstoned, not evicted).
    pub entities: u64,
    /// Version rows.
    pub versions: u64,
    /// Transactions.
    pub transactions: u64,
    /// Distinct contents.
    pub blobs: u64,
    /// Distinct documents.
    pub documents: u64,
    /// Bytes of content and document records stored.
    pub stored_bytes: u64,
    /// Bytes of content given to puts, before deduplication.
    pub put_bytes: u64,
    /// Size of the store file on disk.
    pub file_bytes: u64,
    /// Bytes put per byte stored: deduplication and compression together.
    pub dedup_ratio: f64,
}

impl Apply for StatsRequest {
    type Response = StatsResponse;

    /// # Errors
    /// Storage errors.
    fn apply(self, engine: &Engine) -> Result<StatsResponse> {
        let stats = engine.store.stats()?;
        Ok(StatsResponse {
            entities: stats.entities,
            versions: stats.versions,
            transactions: stats.transactions,
            blobs: stats.blobs,
            documents: stats.documents,
            stored_bytes: stats.stored_bytes,
            put_bytes: stats.put_bytes,
            file_bytes: stats.file_bytes,
            dedup_ratio: stats.dedup_ratio(),
        })
    }
}

/// `mount.ls`: the store's default mounts, given to new sessions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountLsRequest {}

/// What `mount.ls` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MountsResponse {
    /// The default mounts, in order.
    pub mounts: Vec<MountMapping>,
}

impl Apply for MountLsRequest {
    type Response = MountsResponse;

    fn apply(self, engine: &Engine) -> Result<MountsResponse> {
        Ok(MountsResponse {
            mounts: engine.settings().mounts,
        })
    }
}

/// `mount.add`: add a default mount.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountAddRequest {
    /// The mount to add.
    pub mount: MountMapping,
}

/// `mount.rm`: remove the default mount with an agent prefix.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountRmRequest {
    /// The agent prefix of the mount to remove.
    pub agent_prefix: String,
}

/// What `mount.add` and `mount.rm` answer: the mount added or removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MountChanged {
    /// The mount.
    pub mount: MountMapping,
}

impl Engine {
    /// Changes the settings with `change` and saves them (kept in memory only without a store
    /// directory); a failed change or save leaves them as they were.
    pub(super) fn change_settings<T>(
        &self,
        change: impl FnOnce(&mut Settings) -> Result<T>,
    ) -> Result<T> {
        // What a person wrote into the file since it was read is kept: the change applies to
        // the file as it is now.
        self.reload_settings()?;
        let mut stamp = self
            .settings_stamp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut settings = self
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = settings.clone();
        let value = change(&mut next)?;
        if let Some(dir) = &self.dir {
            next.save(dir)?;
            *stamp = SettingsStamp::of(dir);
        }
        *settings = next;
        Ok(value)
    }
}

impl Apply for MountAddRequest {
    type Response = MountChanged;

    /// # Errors
    /// [`Error::InvalidInput`] when a mount has that agent prefix already or the mounts would
    /// not make a resolver.
    fn apply(self, engine: &Engine) -> Result<MountChanged> {
        let mount = self.mount;
        engine.change_settings(|settings| {
            if settings
                .mounts
                .iter()
                .any(|m| m.agent_prefix == mount.agent_prefix)
            {
                return Err(Error::invalid_input(format!(
                    "a mount for {} exists already; remove it first with `strata mount rm {}`",
                    mount.agent_prefix, mount.agent_prefix
                )));
            }
            settings.mounts.push(mount.clone());
            check_mounts(&settings.mounts)
        })?;
        Ok(MountChanged { mount })
    }
}

impl Apply for MountRmRequest {
    type Response = MountChanged;

    /// # Errors
    /// [`Error::NotFound`] when no mount has that agent prefix.
    fn apply(self, engine: &Engine) -> Result<MountChanged> {
        let mount = engine.change_settings(|settings| {
            let at = settings
                .mounts
                .iter()
                .position(|m| m.agent_prefix == self.agent_prefix)
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "a mount with agent prefix {}; see `strata mount ls`",
                        self.agent_prefix
                    ))
                })?;
            Ok(settings.mounts.remove(at))
        })?;
        Ok(MountChanged { mount })
    }
}
