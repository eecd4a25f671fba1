//! The store as a whole: `init`, `mount`, `log`, `fsck`, `evict`, `gc`, `stats`.

use std::process::ExitCode;

use anyhow::{Context, Result};
use strata::engine::{
    AgentAuditRequest, BackupRequest, Engine, EvictRequest, FsckFinding, FsckRequest, GcRequest,
    LogRequest, MigrateRequest, MountAddRequest, MountLsRequest, MountRmRequest, SalvageRequest,
    StatsRequest,
};
use strata::resolve::MountMapping;

use super::args::{
    AuditArgs, BackupArgs, EvictArgs, FsckArgs, InitArgs, JsonArgs, LogArgs, MigrateArgs,
    MountCommand,
};
use super::locate::{self, Located};
use super::{Invocation, output};

/// Parses mount specs `AGENT=CANONICAL[:ro][:ci][:fs=ID]`.
pub(super) fn parse_mounts(specs: &[String]) -> Result<Vec<MountMapping>> {
    specs
        .iter()
        .map(|spec| {
            spec.parse::<MountMapping>()
                .with_context(|| format!("mount {spec:?}"))
        })
        .collect()
}

impl Invocation<'_> {
    pub(super) fn init(&mut self, args: InitArgs) -> Result<ExitCode> {
        let dir = match &self.located {
            Located::Given(dir) => dir.clone(),
            // `init` makes a store here even when one exists further up, as `git init` does.
            Located::Found(_) | Located::Missing(_) => self.cwd.join(locate::STORE_DIR_NAME),
        };
        self.check_given()?;
        let mounts = parse_mounts(&args.mounts)?;
        let created = match &args.backend {
            Some(url) => Engine::init_backend(&dir, mounts, url)?,
            None => Engine::init(&dir, mounts)?,
        };
        if created.existed {
            // As `git init` in a repository: nothing changes, and that is not an error.
            writeln!(
                self.out,
                "reinitialised existing strata store in {} (nothing changed)",
                created.dir
            )?;
        } else {
            writeln!(
                self.out,
                "initialised an empty strata store in {}",
                created.dir
            )?;
        }
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn mount(&mut self, command: MountCommand) -> Result<ExitCode> {
        // Mounts live in the settings file beside the store: the store itself is only read.
        match command {
            MountCommand::Add { spec } => {
                let mount = parse_mounts(std::slice::from_ref(&spec))?.remove(0);
                let added = self.call(MountAddRequest { mount })?;
                writeln!(self.out, "added mount {}", added.mount)?;
            }
            MountCommand::Rm { agent_prefix } => {
                let removed = self.call(MountRmRequest { agent_prefix })?;
                writeln!(self.out, "removed mount {}", removed.mount.agent_prefix)?;
            }
            MountCommand::Ls(JsonArgs { json }) => {
                let mounts = self.call(MountLsRequest {})?.mounts;
                if json {
                    writeln!(self.out, "{}", serde_json::to_string_pretty(&mounts)?)?;
                } else {
                    let rows: Vec<Vec<String>> = mounts
                        .iter()
                        .map(|m| {
                            let mut flags = Vec::new();
                            if m.read_only {
                                flags.push("read-only");
                            }
                            if m.case_insensitive {
                                flags.push("case-insensitive");
                            }
                            vec![
                                m.agent_prefix.clone(),
                                m.canonical_prefix.clone(),
                                m.filesystem_id
                                    .as_deref()
                                    .map_or("this machine".into(), output::short),
                                flags.join(","),
                            ]
                        })
                        .collect();
                    output::table(
                        self.out,
                        &["AGENT", "CANONICAL", "FILESYSTEM", "FLAGS"],
                        &rows,
                    )?;
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn log(&mut self, args: LogArgs) -> Result<ExitCode> {
        let log = self.call(LogRequest {
            since: args.since,
            limit: args.limit,
        })?;
        if args.json.json {
            self.print_json(&log)?;
            return Ok(ExitCode::SUCCESS);
        }
        // The consecutive transactions of one index run are one row (`--each` lists each).
        let mut groups: Vec<&[strata::engine::LogRecord]> = Vec::new();
        let mut rest = log.records.as_slice();
        while let Some(first) = rest.first() {
            let len = match first.run {
                Some(run) if !args.each => rest.iter().take_while(|r| r.run == Some(run)).count(),
                _ => 1,
            };
            let (group, tail) = rest.split_at(len);
            groups.push(group);
            rest = tail;
        }
        let rows: Vec<Vec<String>> = groups
            .iter()
            .filter_map(|group| Some((group.first()?, group.last()?, group)))
            .map(|(first, last, group)| {
                let mut kinds: Vec<(&str, usize)> = Vec::new();
                for op in group.iter().flat_map(|record| &record.ops) {
                    let kind = op.kind().unwrap_or("evicted");
                    match kinds.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, n)) => *n += 1,
                        None => kinds.push((kind, 1)),
                    }
                }
                let ops: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
                let (tx, origin) = match first.run {
                    Some(run) if group.len() > 1 => (
                        format!("{}-{}", first.tx_id, last.tx_id),
                        format!("{} run {run} ({} txs)", first.origin, group.len()),
                    ),
                    // A run of one transaction is as plain as any other; a part of a run that
                    // other writers' transactions split names its run.
                    Some(run) if run != first.tx_id => (
                        first.tx_id.to_string(),
                        format!("{} run {run}", first.origin),
                    ),
                    Some(_) | None => (first.tx_id.to_string(), first.origin.clone()),
                };
                vec![
                    tx,
                    first.tx_time.clone(),
                    origin,
                    ops.join(", "),
                    output::short(&last.chain),
                ]
            })
            .collect();
        output::table(
            self.out,
            &["TX", "TX TIME", "ORIGIN", "OPS", "CHAIN"],
            &rows,
        )?;
        if let Some(head) = log.head {
            writeln!(
                self.out,
                "chain head after tx {}: {}",
                head.tx_id, head.chain
            )?;
        }
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn fsck(&mut self, args: FsckArgs) -> Result<ExitCode> {
        if let Some(new_dir) = &args.salvage {
            return self.salvage(new_dir, args.json.json);
        }
        let report = self.call(FsckRequest {
            rebuild: args.rebuild,
            repair: args.repair,
        })?;
        let code = if report.findings.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        };
        // A reader that stops early (`fsck | head`) must not turn findings into success.
        let asked_rebuild = args.rebuild || args.repair;
        match self.print_fsck(&report, asked_rebuild, args.json.json) {
            Err(e) if is_broken_pipe(&e) => Ok(code),
            Err(e) => Err(e),
            Ok(()) => Ok(code),
        }
    }

    fn print_fsck(
        &mut self,
        report: &strata::engine::FsckResponse,
        asked_rebuild: bool,
        json: bool,
    ) -> Result<()> {
        if json {
            return self.print_json(&report.findings);
        }
        if report.rebuilt {
            writeln!(
                self.out,
                "rebuilt entities, versions and paths from the log"
            )?;
        } else if asked_rebuild {
            writeln!(
                self.out,
                "not rebuilt: the log itself is damaged, and tables rebuilt from it would lose \
                 what they still hold; `strata fsck --salvage NEW_DIR` copies what verifies into \
                 a new store"
            )?;
        }
        for hash in &report.restored {
            writeln!(
                self.out,
                "restored content {hash} from the file that holds it"
            )?;
        }
        if report.findings.is_empty() {
            match &report.head {
                Some(head) => writeln!(
                    self.out,
                    "ok: contents, documents, versions and the chain verify (head after tx {}: {})",
                    head.tx_id, head.chain
                )?,
                None => writeln!(self.out, "ok: the store is empty")?,
            }
            return Ok(());
        }
        for finding in &report.findings {
            let mut line = format!("{}: {}: {}", finding.kind, finding.subject, finding.detail);
            match (&finding.path, &finding.entity) {
                (Some(path), _) => line.push_str(&format!("; affects {}", output::path(path))),
                (None, Some(entity)) => line.push_str(&format!("; affects {entity}")),
                (None, None) => {}
            }
            if let Some(tx) = finding.tx {
                line.push_str(&format!(" (tx {tx})"));
            }
            writeln!(self.out, "{line}")?;
        }
        let repairs: std::collections::BTreeSet<&str> =
            report.findings.iter().map(|f| f.repair.as_str()).collect();
        let repairs: Vec<&str> = repairs.into_iter().collect();
        writeln!(
            self.out,
            "{} problems; repair with `{}`",
            report.findings.len(),
            repairs.join("` or `")
        )?;
        Ok(())
    }

    /// `fsck --salvage NEW_DIR`: in this process (the damaged store may not open, so no
    /// daemon can hold it); exit 1 when anything was lost.
    fn salvage(&mut self, new_dir: &std::path::Path, json: bool) -> Result<ExitCode> {
        self.check_exists()?;
        let dir = self.dir().to_path_buf();
        let report = Engine::salvage(
            &dir,
            SalvageRequest {
                new_dir: new_dir.display().to_string(),
                cwd: self.cwd(),
            },
        )
        .with_context(|| format!("salvaging store {}", dir.display()))?;
        let code = if report.lost_anything() || !report.findings.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        };
        let printed = if json {
            self.print_json(&report)
        } else {
            self.print_salvage(&report)
        };
        match printed {
            Err(e) if is_broken_pipe(&e) => Ok(code),
            Err(e) => Err(e),
            Ok(()) => Ok(code),
        }
    }

    fn print_salvage(&mut self, report: &strata::engine::SalvageResponse) -> Result<()> {
        if let Some((len, read)) = report.padded {
            writeln!(
                self.out,
                "the store file was truncated ({len} bytes): read it padded to the {read} bytes                  its header records"
            )?;
        }
        for hash in &report.restored {
            writeln!(
                self.out,
                "restored content {hash} from the file that holds it"
            )?;
        }
        for loss in &report.losses {
            let mut line = format!("lost {}: {}", loss.kind, loss.detail);
            match (&loss.path, &loss.entity) {
                (Some(path), _) => line.push_str(&format!("; affects {}", output::path(path))),
                (None, Some(entity)) => line.push_str(&format!("; affects {entity}")),
                (None, None) => {}
            }
            writeln!(self.out, "{line}")?;
        }
        for lost in &report.entities_lost {
            match &lost.path {
                Some(path) => writeln!(
                    self.out,
                    "lost entity {} ({})",
                    lost.entity,
                    output::path(path)
                )?,
                None => writeln!(self.out, "lost entity {}", lost.entity)?,
            }
        }
        let head = report.head.as_ref().map_or_else(
            || "empty".to_string(),
            |h| format!("head after tx {}: {}", h.tx_id, h.chain),
        );
        writeln!(
            self.out,
            "salvaged into {}: {} transactions, {} ops, {} entities, {} contents ({head})",
            report.dir, report.txs, report.ops, report.entities, report.contents
        )?;
        if report.lost_anything() {
            writeln!(
                self.out,
                "lost: {} transactions, {} ops, {} entities, {} contents",
                report.txs_lost.len(),
                report.ops_lost,
                report.entities_lost.len(),
                report.contents_lost.len()
            )?;
        } else {
            writeln!(self.out, "nothing was lost")?;
        }
        for finding in &report.findings {
            writeln!(
                self.out,
                "the new store fails a check: {}: {}: {}",
                finding.kind, finding.subject, finding.detail
            )?;
        }
        Ok(())
    }

    /// Says what fsck found in a copy (backup, migrate), or that it verifies.
    fn print_copy_findings(&mut self, findings: &[FsckFinding]) -> Result<()> {
        for finding in findings {
            writeln!(
                self.out,
                "the copy fails a check: {}: {}: {}",
                finding.kind, finding.subject, finding.detail
            )?;
        }
        if findings.is_empty() {
            writeln!(self.out, "the copy verifies")?;
        }
        Ok(())
    }

    pub(super) fn migrate(&mut self, args: MigrateArgs) -> Result<ExitCode> {
        let report = self.call(MigrateRequest {
            to: args.to,
            dir: args.dir.map(|dir| dir.display().to_string()),
            cwd: self.cwd(),
        })?;
        if args.json.json {
            self.print_json(&report)?;
        } else {
            match &report.head {
                Some(head) => writeln!(
                    self.out,
                    "copied {} transactions ({} ops, {} evicted) and {} stat cache entries into \
                     {}; chain head tx {} {}, the original's",
                    report.transactions,
                    report.ops,
                    report.evicted_ops,
                    report.stat_entries,
                    report.to,
                    head.tx_id,
                    head.chain
                )?,
                None => writeln!(self.out, "copied the empty store into {}", report.to)?,
            }
            if report.dir != report.to {
                writeln!(self.out, "its store directory: {}", report.dir)?;
            }
            self.print_copy_findings(&report.findings)?;
        }
        Ok(copy_exit(&report.findings))
    }

    pub(super) fn backup(&mut self, args: BackupArgs) -> Result<ExitCode> {
        let report = self.call(BackupRequest {
            dir: args.dir.display().to_string(),
            cwd: self.cwd(),
        })?;
        if args.json.json {
            self.print_json(&report)?;
        } else {
            match &report.head {
                Some(head) => writeln!(
                    self.out,
                    "backed up the store as of tx {} (chain {}) into {} ({})",
                    head.tx_id,
                    head.chain,
                    report.dir,
                    output::bytes(report.bytes)
                )?,
                None => writeln!(self.out, "backed up the empty store into {}", report.dir)?,
            }
            self.print_copy_findings(&report.findings)?;
        }
        Ok(copy_exit(&report.findings))
    }

    pub(super) fn evict(&mut self, args: EvictArgs) -> Result<ExitCode> {
        let evicted = self.call(EvictRequest {
            reference: args.reference,
            cwd: self.cwd(),
            confirm: args.yes,
        })?;
        writeln!(
            self.out,
            "evicted {}: {} versions erased (tx {})",
            evicted.id, evicted.versions, evicted.tx_id
        )?;
        // The evict committed: a scrub left owed is a warning, not a failure.
        if let Some(note) = &evicted.scrub_pending {
            use std::io::Write as _;
            writeln!(std::io::stderr(), "strata: warning: {note}")?;
        }
        Ok(ExitCode::SUCCESS)
    }

    pub(super) fn gc(&mut self, args: JsonArgs) -> Result<ExitCode> {
        let report = self.call(GcRequest {})?;
        if args.json {
            self.print_json(&report)?;
        } else {
            writeln!(
                self.out,
                "removed {} documents and {} contents ({} freed); fixed {} reference counts",
                report.documents_removed,
                report.blobs_removed,
                output::bytes(report.bytes_freed),
                report.counts_fixed
            )?;
        }
        // gc committed: a scrub left owed is a warning, not a failure.
        if let Some(note) = &report.scrub_pending {
            use std::io::Write as _;
            writeln!(std::io::stderr(), "strata: warning: {note}")?;
        }
        if report.damaged.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        // Damage gc met: it kept what the damaged records may use; the exit says not all is
        // well (as `ls` over damaged files), and stderr says what to run.
        use std::io::Write as _;
        let mut err = std::io::stderr();
        for finding in &report.damaged {
            let affects = finding.path.as_deref().or(finding.entity.as_deref());
            writeln!(
                err,
                "strata: gc met damage: {}: {}: {}{}",
                finding.kind,
                finding.subject,
                finding.detail,
                affects.map_or(String::new(), |a| format!("; affects {a}"))
            )?;
        }
        writeln!(
            err,
            "strata: gc kept what {} damaged records may use; `strata fsck` says what is \
             affected and `{}` repairs what can be repaired",
            report.damaged.len(),
            report
                .damaged
                .first()
                .map_or("strata fsck --repair", |f| f.repair.as_str())
        )?;
        Ok(ExitCode::from(2))
    }

    pub(super) fn stats(&mut self, args: JsonArgs) -> Result<ExitCode> {
        let stats = self.call(StatsRequest {})?;
        if args.json {
            self.print_json(&stats)?;
        } else {
            let rows = vec![
                vec!["entities".into(), stats.entities.to_string()],
                vec!["versions".into(), stats.versions.to_string()],
                vec!["transactions".into(), stats.transactions.to_string()],
                vec!["contents".into(), stats.blobs.to_string()],
                vec!["documents".into(), stats.documents.to_string()],
                vec!["bytes put".into(), output::bytes(stats.put_bytes)],
                vec!["bytes stored".into(), output::bytes(stats.stored_bytes)],
                vec!["store file".into(), output::bytes(stats.file_bytes)],
                vec![
                    "put/stored (dedup and compression)".into(),
                    format!("{:.2}", stats.dedup_ratio),
                ],
            ];
            output::table(self.out, &["WHAT", "COUNT"], &rows)?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

impl Invocation<'_> {
    pub(super) fn audit(&mut self, args: AuditArgs) -> Result<ExitCode> {
        let audit = self.call(AgentAuditRequest {
            session: args.session,
            since: args.since,
            limit: args.limit,
        })?;
        if args.json.json {
            self.print_json(&audit)?;
            return Ok(ExitCode::SUCCESS);
        }
        if args.jsonl {
            for entry in &audit.entries {
                writeln!(self.out, "{}", serde_json::to_string(entry)?)?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        let hash = |h: &Option<String>| h.as_deref().map_or("-".to_string(), output::short);
        let rows: Vec<Vec<String>> = audit
            .entries
            .iter()
            .flat_map(|entry| {
                let outcome = match (&entry.error_code, entry.success) {
                    (_, true) => "ok".to_string(),
                    (Some(code), false) => code.to_lowercase(),
                    (None, false) => "failed".to_string(),
                };
                let head = [
                    entry.tx_id.to_string(),
                    entry.tx_time.clone(),
                    entry.session.clone(),
                    entry.caller.clone().unwrap_or_else(|| "-".into()),
                    entry.tool.clone(),
                    outcome,
                ];
                let files: Vec<Vec<String>> = if entry.files.is_empty() {
                    vec![vec!["-".to_string(), "-".into(), "-".into()]]
                } else {
                    entry
                        .files
                        .iter()
                        .map(|f| {
                            vec![
                                hash(&f.previous_sha256),
                                hash(&f.sha256),
                                output::path(&f.filename),
                            ]
                        })
                        .collect()
                };
                files
                    .into_iter()
                    .map(move |file| head.iter().cloned().chain(file).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            })
            .collect();
        output::table(
            self.out,
            &[
                "TX", "TX TIME", "SESSION", "CALLER", "TOOL", "RESULT", "BEFORE", "AFTER", "FILE",
            ],
            &rows,
        )?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Whether `e` is a write to a reader that went away.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A copy's exit code: 0 when it verifies, 1 when fsck found anything in it.
fn copy_exit(findings: &[FsckFinding]) -> ExitCode {
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
