//! What every test module shares: [`TestResult`], whose error names the line of the `?` that
//! failed (as a panicking `unwrap` would), [`error_of`] for what must fail, and [`env_count`]
//! for the knobs that scale slow tests, and [`strata_at`] to run the binary on a store as a
//! user would.

use std::fmt::{Debug, Display};
use std::panic::Location;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Bytes that do not compress: an xorshift stream from `seed`.
pub fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// `strata --store STORE args…` run in `cwd` with no stdin, whatever the test run's
/// environment says: `STRATA_STORE`, `STRATA_NO_DAEMON` and `STRATA_MAX_MESSAGE_BYTES` are
/// removed, so the command reaches the store's daemon as a user's would.
pub fn strata_at(store: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
    command
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(cwd)
        .env_remove("STRATA_STORE")
        .env_remove("STRATA_NO_DAEMON")
        .env_remove("STRATA_MAX_MESSAGE_BYTES")
        .stdin(Stdio::null());
    command
}

/// Asserts that `out`, an `strata evict` run on a store whose damage stands in the way, was
/// refused and that its refusal names `strata fsck --repair`, the way on.
#[track_caller]
pub fn assert_evict_refused_naming_repair(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot be evicted") && stderr.contains("strata fsck --repair"),
        "the refusal does not name the repair: {stderr}"
    );
}

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

/// What a [`RawClient`] call failed with: its own text, so that it converts into a
/// [`TestResult`] failure and into a boxed error alike.
#[derive(Debug)]
pub struct RawError(pub String);

impl Display for RawError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RawError {}

impl RawError {
    fn of(e: impl Display) -> Self {
        RawError(e.to_string())
    }
}

/// A JSON-RPC client on the daemon's raw socket, one message per line (every read times out
/// rather than hang). Notifications that arrive while a call waits for its answer are kept for
/// [`RawClient::recv`].
pub struct RawClient {
    writer: std::os::unix::net::UnixStream,
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    next_id: u64,
    notifications: std::collections::VecDeque<serde_json::Value>,
}

impl RawClient {
    /// Connects to the socket at `socket`; each read waits at most `timeout`.
    pub fn connect(
        socket: &std::path::Path,
        timeout: std::time::Duration,
    ) -> Result<RawClient, RawError> {
        let stream = std::os::unix::net::UnixStream::connect(socket).map_err(RawError::of)?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(RawError::of)?;
        Ok(RawClient {
            reader: std::io::BufReader::new(stream.try_clone().map_err(RawError::of)?),
            writer: stream,
            next_id: 1,
            notifications: std::collections::VecDeque::new(),
        })
    }

    /// Sends `line` and its newline as they are.
    pub fn send(&mut self, line: &str) -> Result<(), RawError> {
        use std::io::Write;
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .map_err(RawError::of)
    }

    /// The next message: a kept notification first, else the next line from the daemon.
    pub fn recv(&mut self) -> Result<serde_json::Value, RawError> {
        if let Some(message) = self.notifications.pop_front() {
            return Ok(message);
        }
        self.read_message()
    }

    fn read_message(&mut self) -> Result<serde_json::Value, RawError> {
        use std::io::BufRead;
        let mut line = String::new();
        if self.reader.read_line(&mut line).map_err(RawError::of)? == 0 {
            return Err(RawError("the daemon closed the connection".into()));
        }
        serde_json::from_str(&line).map_err(RawError::of)
    }

    /// Sends a request and returns the whole response message (an error response included).
    pub fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, RawError> {
        let id = self.next_id;
        self.next_id += 1;
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request.to_string())?;
        loop {
            let message = self.read_message()?;
            match message.get("id") {
                None => self.notifications.push_back(message),
                Some(got) if *got == serde_json::json!(id) => return Ok(message),
                Some(_) => {
                    return Err(RawError(format!(
                        "the answer to request {id} ({method}) came with another id: {message}"
                    )));
                }
            }
        }
    }

    /// A request that must succeed: its result.
    pub fn result(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, RawError> {
        let response = self.call(method, params)?;
        match response.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(RawError(format!("{method} failed: {response}"))),
        }
    }
}
