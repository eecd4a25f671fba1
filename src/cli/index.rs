//! `strata index`, with a progress bar on a terminal.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Result, bail};
use strata::engine::{IndexRequest, store_exists};

use super::args::IndexArgs;
use super::{Invocation, output};

impl Invocation<'_> {
    pub(super) fn index(&mut self, args: IndexArgs) -> Result<ExitCode> {
        let roots: Vec<std::path::PathBuf> = if args.paths.is_empty() {
            vec![self.cwd.clone()]
        } else {
            args.paths.iter().map(|p| self.cwd.join(p)).collect()
        };
        if !store_exists(self.dir()) {
            // A new store knows no files, so a missing root is an error: say so before creating it.
            if let Some(missing) = roots
                .iter()
                .find(|root| std::fs::symlink_metadata(root).is_err())
            {
                bail!("cannot index {}: it does not exist", missing.display());
            }
        }
        let request = IndexRequest {
            paths: roots
                .iter()
                .map(|r| strata::resolve::utf8_path(r).map(str::to_string))
                .collect::<strata::Result<_>>()?,
            cwd: self.cwd(),
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
        let summary = if store_exists(self.dir()) && self.uses_daemon()? {
            self.call(request)?
        } else {
            let engine = self.engine_creating()?;
            request.apply_with_progress(&engine, &mut |progress| {
                if let Some(bar) = &bar
                    && progress.files - last_tick >= 64
                {
                    last_tick = progress.files;
                    bar.set_position(progress.files);
                    bar.set_message(format!("{} read", output::bytes(progress.bytes_read)));
                }
            })?
        };
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if args.json {
            writeln!(self.out, "{}", serde_json::to_string(&summary)?)?;
            return Ok(ExitCode::SUCCESS);
        }
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
        Ok(ExitCode::SUCCESS)
    }
}
