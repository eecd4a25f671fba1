//! The `strata` command: parse the arguments, run the command, map errors to exit codes.
//!
//! Exit codes: 0 success; 1 `fsck` found problems, or `index` could not index a path it was
//! given; 2 an error (printed to stderr).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, returning freed memory after a second (`.cargo/config.toml`): under the index's
/// threads glibc's arenas kept what they freed, and a full index peaked ~80 MiB higher.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The error and its causes on one line, `outer: inner`, leaving out a cause whose text the
/// line already holds (an error that quotes its source would otherwise say it twice).
fn message(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            let broken_pipe = err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            #[expect(clippy::print_stderr, reason = "the binary reports its error")]
            {
                eprintln!("strata: {}", message(&err));
                let corrupt = err.chain().any(|cause| {
                    cause
                        .downcast_ref::<strata::Error>()
                        .is_some_and(|e| e.kind() == "corrupt")
                });
                if corrupt {
                    eprintln!(
                        "strata: the store failed a check; `strata fsck` lists every problem, \
                         `strata fsck --repair` repairs what can be repaired"
                    );
                }
            }
            ExitCode::from(2)
        }
    }
}
