//! What every test module shares: [`TestResult`], whose error names the line of the `?` that
//! failed (as a panicking `unwrap` would), and [`error_of`] for
//! what must fail.

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
