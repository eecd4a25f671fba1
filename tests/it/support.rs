//! What every test module shares: [`TestResult`], whose error names the line of the `?` that
//! failed (as a panicking `unwrap` would), [`error_of`] for what must fail, and [`env_count`]
//! for the knobs that scale slow tests.

use std::fmt::{Debug, Display};
use std::panic::Location;

/// What a test returns: `?` on any error (or on `option.ok_or("why")`) fails the test there.
pub type TestResult<T = ()> = Result<T, Failure>;

/// A failed test step: where its `?` is and what the error said. It is deliberately not an
/// `Error` itself, so that every `Display` type converts into it.
pub struct Failure {
    at: &'static Location<'static>,
    what: String,
}

impl<E: Display + Debug> From<E> for Failure {
    #[track_caller]
    fn from(error: E) -> Self {
        let (display, debug) = (error.to_string(), format!("{error:?}"));
        let what = if debug.trim_matches('"') == display {
            display
        } else {
            format!("{display}\n{debug}")
        };
        Failure {
            at: Location::caller(),
            what,
        }
    }
}

impl Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.what)
    }
}

/// The error of `result`, which must have failed: for tests of what is refused.
///
/// # Errors
/// When `result` is a success (the failure shows its value).
#[track_caller]
pub fn error_of<T: Debug, E>(result: Result<T, E>) -> TestResult<E> {
    match result {
        Ok(value) => Err(Failure {
            at: Location::caller(),
            what: format!("expected an error, got Ok({value:?})"),
        }),
        Err(e) => Ok(e),
    }
}

/// The count a test runs with: environment variable `var` when it is set (a positive number),
/// else `default`.
///
/// # Errors
/// When `var` is set to something else (zero would make the test pass without testing).
pub fn env_count(var: &str, default: u32) -> TestResult<u32> {
    match std::env::var(var) {
        Ok(text) => match text.parse() {
            Ok(0) | Err(_) => Err(format!("{var}={text:?}: give a count of at least 1").into()),
            Ok(n) => Ok(n),
        },
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => Err(format!("{var}: {e}").into()),
    }
}
