//! `strata watch` and `strata unwatch`: the watched roots, kept in the store's settings and
//! watched by the store's daemon.

use std::process::ExitCode;

use anyhow::Result;
use strata::engine::{WatchAddRequest, WatchLsRequest, WatchRmRequest, WatchRoots};

use super::Invocation;
use super::args::WatchArgs;

impl Invocation<'_> {
    /// The paths of `args` as the engine takes them.
    fn watch_paths(&self, args: &WatchArgs) -> Result<Vec<String>> {
        Ok(args
            .paths
            .iter()
            .map(|p| strata::resolve::utf8_path(p).map(str::to_string))
            .collect::<strata::Result<_>>()?)
    }

    pub(super) fn watch(&mut self, args: WatchArgs) -> Result<ExitCode> {
        let roots = if args.paths.is_empty() {
            self.call(WatchLsRequest {})?
        } else {
            self.call(WatchAddRequest {
                paths: self.watch_paths(&args)?,
                cwd: self.cwd(),
            })?
        };
        self.print_roots(&roots, args.json, "watching")
    }

    pub(super) fn unwatch(&mut self, args: WatchArgs) -> Result<ExitCode> {
        let roots = self.call(WatchRmRequest {
            paths: self.watch_paths(&args)?,
            cwd: self.cwd(),
        })?;
        self.print_roots(&roots, args.json, "stopped watching")
    }

    fn print_roots(&mut self, roots: &WatchRoots, json: bool, verb: &str) -> Result<ExitCode> {
        if json {
            self.print_json(roots)?;
            return Ok(ExitCode::SUCCESS);
        }
        for root in &roots.changed {
            writeln!(self.out, "{verb} {root}")?;
        }
        if roots.changed.is_empty() {
            if roots.roots.is_empty() {
                writeln!(
                    self.out,
                    "no directory is watched; `strata watch DIR` adds one"
                )?;
            } else {
                for root in &roots.roots {
                    writeln!(self.out, "{root}")?;
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
