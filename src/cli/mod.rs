//! `Cli`: the `strata` command line, one function per command over the library.
//!
//! Uses everything. Paths on the command line are host paths (no mounts; this machine's
//! filesystem id). Human output is aligned text on stdout; `--json` prints stable JSON; errors go
//! to stderr.

mod args;
mod inspect;
mod locate;
mod output;
mod refs;
mod session;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;
use strata::index::{Indexer, ScanOptions, Settings, scan};
use strata::resolve::MountMapping;
use strata::store::{Origin, Store, Timestamp, TxId};

pub use args::Cli;
use args::{
    AsOfArgs, Command, EvictArgs, FsckArgs, IndexArgs, InitArgs, JsonArgs, LogArgs, MountCommand,
};
use locate::{Located, locate};

/// Runs one command; the exit code is 0 on success and 1 when `fsck` finds problems.
///
/// # Errors
/// Any failure, with context saying what was being done.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let located = locate(cli.store.as_deref(), &cwd);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let ctx = Ctx {
        cwd,
        located,
        out: &mut out,
    };
    ctx.dispatch(cli.command)
}

/// What every command needs: where it runs, where the store is, where output goes.
struct Ctx<'a> {
    cwd: PathBuf,
    located: Located,
    out: &'a mut dyn Write,
}

impl Ctx<'_> {
    fn dispatch(mut self, command: Command) -> Result<ExitCode> {
        match command {
            Command::Init(args) => self.init(args),
            Command::Mount(command) => self.mount(command),
            Command::Index(args) => self.index(args),
            Command::Ls(args) => inspect::ls(&self.open_reading()?, &mut self, args),
            Command::Show(args) => inspect::show(&self.open_reading()?, &mut self, args),
            Command::Cat(args) => inspect::cat(&self.open_reading()?, &mut self, args),
            Command::History(args) => inspect::history(&self.open_reading()?, &mut self, args),
            Command::Diff(args) => inspect::diff(&self.open_reading()?, &mut self, args),
            Command::Log(args) => self.log(args),
            Command::Fsck(args) => self.fsck(args),
            Command::Evict(args) => self.evict(args),
            Command::Gc(args) => self.gc(args),
            Command::Stats(args) => self.stats(args),
            Command::Session(command) => self.session(command),
        }
    }

    /// The store directory.
    fn dir(&self) -> &Path {
        self.located.dir()
    }

    /// Opens the store, which must exist, for reading only (no file write, no fsync).
    fn open_reading(&self) -> Result<Store> {
        self.check_exists()?;
        let dir = self.dir();
        Store::open_read_only(dir).with_context(|| format!("opening store {}", dir.display()))
    }

    /// Opens the store, which must exist, for reading and writing.
    fn open_existing(&self) -> Result<Store> {
        self.check_exists()?;
        let dir = self.dir();
        Store::open(dir).with_context(|| format!("opening store {}", dir.display()))
    }

    /// Fails, saying how to make one, when there is no store where the command looks.
    fn check_exists(&self) -> Result<()> {
        if let Located::Missing(_) = self.located {
            bail!(
                "no strata store in {} or any directory above it; run `strata init` to create one \
                 here, or pass --store DIR",
                self.cwd.display()
            );
        }
        let dir = self.dir();
        if !dir.join(strata::store::DB_FILE).exists() {
            bail!(
                "{} holds no strata store; run `strata init --store {}` to create one",
                dir.display(),
                dir.display()
            );
        }
        Ok(())
    }

    /// Opens the store, creating it (and saying so on stderr) when there is none.
    fn open_or_create(&self) -> Result<Store> {
        let dir = self.dir();
        if dir.join(strata::store::DB_FILE).exists() {
            return Store::open(dir).with_context(|| format!("opening store {}", dir.display()));
        }
        let store =
            Store::create(dir).with_context(|| format!("creating store {}", dir.display()))?;
        let mut err = std::io::stderr();
        writeln!(err, "created a new strata store in {}", dir.display())?;
        Ok(store)
    }

    fn init(&mut self, args: InitArgs) -> Result<ExitCode> {
        let dir = match &self.located {
            Located::Given(dir) => dir.clone(),
            // `init` makes a store here even when one exists further up, as `git init` does.
            Located::Found(_) | Located::Missing(_) => self.cwd.join(locate::STORE_DIR_NAME),
        };
        if dir.join(strata::store::DB_FILE).exists() {
            bail!(
                "{} already holds a strata store; nothing to do",
                dir.display()
            );
        }
        let mounts = parse_mounts(&args.mounts)?;
        Store::create(&dir).with_context(|| format!("creating store {}", dir.display()))?;
        let settings = Settings {
            mounts,
            ..Settings::default()
        };
        settings.save(&dir)?;
        writeln!(
            self.out,
            "initialised an empty strata store in {}",
            dir.display()
        )?;
        Ok(ExitCode::SUCCESS)
    }

    fn mount(&mut self, command: MountCommand) -> Result<ExitCode> {
        self.check_exists()?;
        let dir = self.dir().to_path_buf();
        let mut settings = Settings::load(&dir)?;
        match command {
            MountCommand::Add { spec } => {
                let mount = parse_mounts(std::slice::from_ref(&spec))?.remove(0);
                if settings
                    .mounts
                    .iter()
                    .any(|m| m.agent_prefix == mount.agent_prefix)
                {
                    bail!(
                        "a mount for {} exists already; remove it first with `strata mount rm {}`",
                        mount.agent_prefix,
                        mount.agent_prefix
                    );
                }
                settings.mounts.push(mount.clone());
                check_mounts(&settings.mounts)?;
                settings.save(&dir)?;
                writeln!(self.out, "added mount {mount}")?;
            }
            MountCommand::Rm { agent_prefix } => {
                let before = settings.mounts.len();
                settings.mounts.retain(|m| m.agent_prefix != agent_prefix);
                if settings.mounts.len() == before {
                    bail!("no mount has agent prefix {agent_prefix}; see `strata mount ls`");
                }
                settings.save(&dir)?;
                writeln!(self.out, "removed mount {agent_prefix}")?;
            }
            MountCommand::Ls(JsonArgs { json }) => {
                if json {
                    writeln!(
                        self.out,
                        "{}",
                        serde_json::to_string_pretty(&settings.mounts)?
                    )?;
                } else {
                    let rows: Vec<Vec<String>> = settings
                        .mounts
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

    fn index(&mut self, args: IndexArgs) -> Result<ExitCode> {
        let roots: Vec<PathBuf> = if args.paths.is_empty() {
            vec![self.cwd.clone()]
        } else {
            args.paths.iter().map(|p| self.cwd.join(p)).collect()
        };
        if !self.dir().join(strata::store::DB_FILE).exists() {
            // A new store knows no files, so a missing root is an error: say so before creating it.
            if let Some(missing) = roots
                .iter()
                .find(|root| std::fs::symlink_metadata(root).is_err())
            {
                bail!("cannot index {}: it does not exist", missing.display());
            }
        }
        let store = self.open_or_create()?;
        let dir = self.dir().to_path_buf();
        let settings = Settings::load(&dir)?;
        let indexer = Indexer::new(&store, &settings)?;
        let options = ScanOptions {
            skip_dirs: vec![std::fs::canonicalize(&dir).unwrap_or(dir.clone())],
            ignore: settings.ignore.clone(),
            ..ScanOptions::default()
        };
        let bar = (!args.quiet && !args.json && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {elapsed} {pos} files, {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        });
        let mut last_tick = 0u64;
        let summary = scan(&indexer, &roots, &options, &mut |progress| {
            if let Some(bar) = &bar
                && progress.files - last_tick >= 64
            {
                last_tick = progress.files;
                bar.set_position(progress.files);
                bar.set_message(format!("{} read", output::bytes(progress.bytes_read)));
            }
        })?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if args.json {
            writeln!(self.out, "{}", serde_json::to_string(&summary)?)?;
        } else {
            writeln!(
                self.out,
                "indexed {} files in {:.2}s: {} created, {} updated, {} unchanged, {} deleted, \
                 {} skipped, {} denied; {} read",
                summary.files,
                summary.seconds,
                summary.created,
                summary.updated,
                summary.unchanged,
                summary.deleted,
                summary.skipped,
                summary.denied,
                output::bytes(summary.bytes_read),
            )?;
            if let (Some(first), Some(last)) = (summary.tx_ids.first(), summary.tx_ids.last()) {
                if first == last {
                    writeln!(self.out, "transaction {first}")?;
                } else {
                    writeln!(self.out, "transactions {first}–{last}")?;
                }
            }
            for skipped in &summary.skipped_files {
                writeln!(
                    self.out,
                    "skipped {}: {}",
                    output::path(&skipped.path),
                    skipped.reason
                )?;
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    fn log(&mut self, args: LogArgs) -> Result<ExitCode> {
        let store = self.open_reading()?;
        let head = store.chain_head()?;
        // Without --since, --limit keeps the newest transactions, as `git log -n` does.
        let since = match (args.since, args.limit) {
            (Some(since), _) => Some(TxId(since)),
            (None, Some(limit)) => {
                let last = head.map_or(0, |(tx, _)| tx.0);
                Some(TxId(last.saturating_sub(limit as u64)))
            }
            (None, None) => None,
        };
        let records = store.log(since, args.limit.unwrap_or(usize::MAX))?;
        if args.json.json {
            let records: Vec<_> = records.iter().map(|r| r.to_json()).collect();
            let head = head.map(|(tx, chain)| json!({"tx_id": tx.0, "chain": hex(&chain)}));
            writeln!(
                self.out,
                "{}",
                serde_json::to_string_pretty(&json!({"records": records, "head": head}))?
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|record| {
                let mut kinds: Vec<(String, usize)> = Vec::new();
                for op in &record.ops {
                    let kind = op.kind().unwrap_or("evicted").to_string();
                    match kinds.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, n)) => *n += 1,
                        None => kinds.push((kind, 1)),
                    }
                }
                let ops: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
                vec![
                    record.tx_id.0.to_string(),
                    record.tx_time.to_rfc3339(),
                    record.origin.as_str().to_string(),
                    ops.join(", "),
                    output::short(&hex(&record.chain)),
                ]
            })
            .collect();
        output::table(
            self.out,
            &["TX", "TX TIME", "ORIGIN", "OPS", "CHAIN"],
            &rows,
        )?;
        if let Some((tx, chain)) = head {
            writeln!(self.out, "chain head after tx {}: {}", tx.0, hex(&chain))?;
        }
        Ok(ExitCode::SUCCESS)
    }

    fn fsck(&mut self, args: FsckArgs) -> Result<ExitCode> {
        let store = if args.rebuild {
            self.open_existing()?
        } else {
            self.open_reading()?
        };
        if args.rebuild {
            store.fsck_rebuild()?;
            if !args.json.json {
                writeln!(
                    self.out,
                    "rebuilt entities, versions and paths from the log"
                )?;
            }
        }
        let findings = store.fsck()?;
        if args.json.json {
            let list: Vec<_> = findings
                .iter()
                .map(|f| json!({"kind": f.kind, "subject": f.subject, "detail": f.detail}))
                .collect();
            writeln!(self.out, "{}", serde_json::to_string_pretty(&list)?)?;
        } else if findings.is_empty() {
            let head = store.chain_head()?;
            match head {
                Some((tx, chain)) => writeln!(
                    self.out,
                    "ok: contents, documents, versions and the chain verify (head after tx {}: {})",
                    tx.0,
                    hex(&chain)
                )?,
                None => writeln!(self.out, "ok: the store is empty")?,
            }
        } else {
            for finding in &findings {
                writeln!(
                    self.out,
                    "{}: {}: {}",
                    finding.kind, finding.subject, finding.detail
                )?;
            }
        }
        Ok(if findings.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }

    fn evict(&mut self, args: EvictArgs) -> Result<ExitCode> {
        let store = self.open_existing()?;
        let id = refs::resolve_ref(&store, &self.cwd, &args.reference)?;
        if !args.yes {
            bail!(
                "evict erases every version of {id} and its contents for good; add --yes to do it"
            );
        }
        let versions = store
            .history(&id, strata::store::HistoryQuery::default())?
            .len();
        let receipt = store.evict(&id, Origin::Cli)?;
        writeln!(
            self.out,
            "evicted {id}: {versions} versions erased (tx {})",
            receipt.tx_id.0
        )?;
        Ok(ExitCode::SUCCESS)
    }

    fn gc(&mut self, args: JsonArgs) -> Result<ExitCode> {
        let store = self.open_existing()?;
        let report = store.gc()?;
        if args.json {
            writeln!(
                self.out,
                "{}",
                json!({
                    "documents_removed": report.documents_removed,
                    "blobs_removed": report.blobs_removed,
                    "bytes_freed": report.bytes_freed,
                    "counts_fixed": report.counts_fixed,
                })
            )?;
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
        Ok(ExitCode::SUCCESS)
    }

    fn stats(&mut self, args: JsonArgs) -> Result<ExitCode> {
        let store = self.open_reading()?;
        let stats = store.stats()?;
        if args.json {
            writeln!(
                self.out,
                "{}",
                serde_json::to_string_pretty(&json!({
                    "entities": stats.entities,
                    "versions": stats.versions,
                    "transactions": stats.transactions,
                    "blobs": stats.blobs,
                    "documents": stats.documents,
                    "stored_bytes": stats.stored_bytes,
                    "put_bytes": stats.put_bytes,
                    "file_bytes": stats.file_bytes,
                    "dedup_ratio": stats.dedup_ratio(),
                }))?
            )?;
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
                vec!["dedup ratio".into(), format!("{:.2}", stats.dedup_ratio())],
            ];
            output::table(self.out, &["WHAT", "COUNT"], &rows)?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Parses mount specs and checks that they make a valid resolver together.
fn parse_mounts(specs: &[String]) -> Result<Vec<MountMapping>> {
    let mounts = specs
        .iter()
        .map(|spec| {
            spec.parse::<MountMapping>()
                .with_context(|| format!("mount {spec:?}"))
        })
        .collect::<Result<Vec<_>>>()?;
    check_mounts(&mounts)?;
    Ok(mounts)
}

/// Refuses a mount set that cannot make a resolver (duplicate prefixes, relative paths).
fn check_mounts(mounts: &[MountMapping]) -> Result<()> {
    strata::resolve::FilesystemResolver::new(
        mounts.to_vec(),
        strata::resolve::machine_filesystem_id(),
    )?;
    Ok(())
}

/// Lowercase hex of 32 bytes.
fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The valid time and transaction a reading command reads at.
fn as_of(store: &Store, args: &AsOfArgs) -> Result<(Option<Timestamp>, Option<TxId>)> {
    let valid = args
        .valid_at
        .as_deref()
        .map(|t| {
            t.parse::<Timestamp>()
                .with_context(|| format!("--valid-at {t}"))
        })
        .transpose()?;
    let tx = match (args.as_of_tx, args.tx_time.as_deref()) {
        (Some(tx), _) => {
            let latest = store.chain_head()?.map_or(0, |(tx, _)| tx.0);
            if tx == 0 || tx > latest {
                bail!("--as-of-tx {tx}: the store has transactions 1 to {latest}");
            }
            Some(TxId(tx))
        }
        (None, Some(time)) => {
            let time: Timestamp = time.parse().with_context(|| format!("--tx-time {time}"))?;
            match store.tx_at_time(time)? {
                Some(tx) => Some(tx),
                None => bail!("--tx-time {time}: the store knew nothing yet at that time"),
            }
        }
        (None, None) => None,
    };
    Ok((valid, tx))
}
