//! The `strata` command.

use std::process::ExitCode;

fn main() -> ExitCode {
    // The command line arrives with the CLI issue; until then the binary only names itself.
    #[allow(clippy::print_stdout)]
    {
        println!("strata {}", env!("CARGO_PKG_VERSION"));
    }
    ExitCode::SUCCESS
}
