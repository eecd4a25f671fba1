//! `strata index`, with a progress bar on a terminal.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Result, bail};
use std::io::Write as _;

use strata::engine::IndexResponse;
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
            threads: args.threads.map(usize::from),
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
            // Opened to write at its first write: an unchanged tree writes and syncs nothing.
            let engine = self.engine_creating_as(strata::engine::Access::CreateDeferred)?;
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
            self.print_json(&summary)?;
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
        }
        report_skips(&summary, args.quiet, args.verbose)?;
        Ok(if summary.not_indexed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Reports on stderr what the scan did not index: each path the user named that was not indexed
/// (always), then the skips counted by kind (unless `quiet`), or one line per skip (`verbose`).
fn report_skips(summary: &IndexResponse, quiet: bool, verbose: bool) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    for named in &summary.not_indexed {
        writeln!(
            err,
            "strata: {} was not indexed: {}",
            output::path(&named.path),
            named.reason
        )?;
    }
    // Nothing more to say when the only skips were the named paths just reported.
    if quiet || summary.skipped == summary.not_indexed.len() as u64 {
        return Ok(());
    }
    if verbose {
        for skipped in &summary.skipped_files {
            writeln!(
                err,
                "skipped {}: {}",
                output::path(&skipped.path),
                skipped.reason
            )?;
        }
        let listed = summary.skipped_files.len() as u64;
        if summary.skipped > listed {
            writeln!(
                err,
                "… and {} more skipped (only the first {listed} are kept)",
                summary.skipped - listed
            )?;
        }
        return Ok(());
    }
    let counts: Vec<String> = summary
        .skipped_by_kind
        .iter()
        .map(|(kind, n)| kind.counted(*n))
        .collect();
    writeln!(
        err,
        "skipped {} {}: {} (--verbose lists them, -q hides this)",
        summary.skipped,
        if summary.skipped == 1 {
            "path"
        } else {
            "paths"
        },
        counts.join(", ")
    )
}
