//! `ReadArgs` and `FdToFileArgs`: the tools' arguments, typed, and read from the raw JSON an
//! MCP adapter passes on.
//!
//! Uses no sibling module.
//!
//! JSON rules (the original took Python keyword arguments, so these are strata's): the arguments
//! are an object; `null` means "not given" (the default); booleans must be JSON booleans and
//! numbers integers (`2.0` is accepted); an unknown name is an error rather than silently ignored
//! (an agent sending the seed's old `page=2` would otherwise read page 1). A `mode` that is a
//! string but not a valid mode is kept, because the original reports it after the not-found check.

use serde_json::{Map, Value};

/// How `read_fd` positions `start` and `count`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadMode {
    /// `start` is a page number (1-based), `count` a number of pages.
    #[default]
    Page,
    /// `start` is a line number (1-based), `count` a number of lines.
    Line,
    /// `start` is a character offset (0-based), `count` a number of characters.
    Char,
}

impl ReadMode {
    /// The mode's name in the tool's arguments and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadMode::Page => "page",
            ReadMode::Line => "line",
            ReadMode::Char => "char",
        }
    }

    /// The mode named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "page" => Some(ReadMode::Page),
            "line" => Some(ReadMode::Line),
            "char" => Some(ReadMode::Char),
            _ => None,
        }
    }
}

/// The arguments of `read_fd` (RFC007): what to read from which descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadArgs {
    /// The descriptor to read, e.g. `fd:1`.
    pub fd: String,
    /// Read the whole content; takes precedence over `mode`, `start` and `count`.
    pub read_all: bool,
    /// Put what was read into a new descriptor and answer with its id instead of the content.
    pub extract_to_new_fd: bool,
    /// How `start` and `count` are counted.
    pub mode: ReadMode,
    /// The first page or line (1-based) or character (0-based); default 1.
    pub start: i64,
    /// How many pages, lines or characters; default 1.
    pub count: i64,
}

impl ReadArgs {
    /// Page 1 of `fd`, the original's defaults.
    pub fn new(fd: impl Into<String>) -> Self {
        ReadArgs {
            fd: fd.into(),
            read_all: false,
            extract_to_new_fd: false,
            mode: ReadMode::Page,
            start: 1,
            count: 1,
        }
    }
}

/// Whether `fd_to_file` replaces the file's content or adds to its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Create or overwrite the file (`w`).
    #[default]
    Write,
    /// Add to the end of the file, creating it if needed (`a`).
    Append,
}

impl WriteMode {
    /// The mode's name in the tool's arguments and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::Write => "write",
            WriteMode::Append => "append",
        }
    }

    /// The mode named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "write" => Some(WriteMode::Write),
            "append" => Some(WriteMode::Append),
            _ => None,
        }
    }
}

/// The arguments of `fd_to_file` (RFC007): which descriptor goes to which file, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdToFileArgs {
    /// The descriptor to export, e.g. `fd:1`.
    pub fd: String,
    /// The file to write, as the agent gave it.
    pub file_path: String,
    /// Overwrite or append.
    pub mode: WriteMode,
    /// Whether a missing file may be created (default `true`).
    pub create: bool,
    /// Whether an existing file may be written (default `true`).
    pub exist_ok: bool,
}

impl FdToFileArgs {
    /// Write `fd` to `file_path` with the original's defaults (write, create, exist_ok).
    pub fn new(fd: impl Into<String>, file_path: impl Into<String>) -> Self {
        FdToFileArgs {
            fd: fd.into(),
            file_path: file_path.into(),
            mode: WriteMode::Write,
            create: true,
            exist_ok: true,
        }
    }
}

/// `read_fd` arguments whose `mode` string is not yet checked.
pub(super) struct RawRead {
    pub args: ReadArgs,
    pub mode: String,
}

/// `fd_to_file` arguments whose `mode` string is not yet checked.
pub(super) struct RawToFile {
    pub args: FdToFileArgs,
    pub mode: String,
}

const READ_NAMES: &[&str] = &[
    "fd",
    "read_all",
    "extract_to_new_fd",
    "mode",
    "start",
    "count",
];
const TO_FILE_NAMES: &[&str] = &["fd", "file_path", "mode", "create", "exist_ok"];

/// Reads `read_fd`'s arguments; the error says what is wrong in words an agent can act on.
pub(super) fn parse_read(value: &Value) -> Result<RawRead, String> {
    let object = object(value, READ_NAMES)?;
    let mut args = ReadArgs::new(required_string(object, "fd")?);
    args.read_all = boolean(object, "read_all")?.unwrap_or(false);
    args.extract_to_new_fd = boolean(object, "extract_to_new_fd")?.unwrap_or(false);
    args.start = integer(object, "start")?.unwrap_or(1);
    args.count = integer(object, "count")?.unwrap_or(1);
    let mode = string(object, "mode")?.unwrap_or("page").to_owned();
    Ok(RawRead { args, mode })
}

/// Reads `fd_to_file`'s arguments; the error says what is wrong in words an agent can act on.
pub(super) fn parse_to_file(value: &Value) -> Result<RawToFile, String> {
    let object = object(value, TO_FILE_NAMES)?;
    let mut args = FdToFileArgs::new(
        required_string(object, "fd")?,
        required_string(object, "file_path")?,
    );
    args.create = boolean(object, "create")?.unwrap_or(true);
    args.exist_ok = boolean(object, "exist_ok")?.unwrap_or(true);
    let mode = string(object, "mode")?.unwrap_or("write").to_owned();
    Ok(RawToFile { args, mode })
}

fn object<'a>(value: &'a Value, names: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("arguments must be a JSON object, got {}", kind(value)))?;
    if let Some(unknown) = object.keys().find(|key| !names.contains(&key.as_str())) {
        return Err(format!(
            "unexpected argument '{unknown}' (valid: {})",
            names.join(", ")
        ));
    }
    Ok(object)
}

/// The value of `name`, `None` when absent or `null`.
fn given<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).filter(|value| !value.is_null())
}

fn required_string(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    string(object, name)?
        .map(str::to_owned)
        .ok_or_else(|| format!("missing required argument '{name}'"))
}

fn string<'a>(object: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, String> {
    given(object, name)
        .map(|value| {
            value
                .as_str()
                .ok_or_else(|| format!("argument '{name}' must be a string, got {}", kind(value)))
        })
        .transpose()
}

fn boolean(object: &Map<String, Value>, name: &str) -> Result<Option<bool>, String> {
    given(object, name)
        .map(|value| {
            value
                .as_bool()
                .ok_or_else(|| format!("argument '{name}' must be a boolean, got {}", kind(value)))
        })
        .transpose()
}

fn integer(object: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    given(object, name)
        .map(|value| {
            value
                .as_i64()
                .or_else(|| integral(value.as_f64()?))
                .ok_or_else(|| format!("argument '{name}' must be an integer, got {}", kind(value)))
        })
        .transpose()
}

/// `x` as an `i64` when it is a whole number in range (`2.0` from some clients); the cast is
/// exact because both are checked first.
fn integral(x: f64) -> Option<i64> {
    // 2^63 is exactly representable; the range is [-2^63, 2^63).
    let bound = 9_223_372_036_854_775_808.0;
    (x.fract() == 0.0 && x >= -bound && x < bound).then_some(x as i64)
}

/// How a JSON value is described in an error: its type, and the value when short.
fn kind(value: &Value) -> String {
    let name = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = value.to_string();
    if text.chars().count() <= 40 && !matches!(value, Value::Null) {
        format!("{name} ({text})")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_nulls_and_whole_floats() {
        let raw = parse_read(&json!({"fd": "fd:1", "start": null, "count": 3.0})).unwrap();
        assert_eq!(
            raw.args,
            ReadArgs {
                count: 3,
                ..ReadArgs::new("fd:1")
            }
        );
        assert_eq!(raw.mode, "page");
        let raw =
            parse_to_file(&json!({"fd": "fd:2", "file_path": "/tmp/x", "create": false})).unwrap();
        assert_eq!(
            raw.args,
            FdToFileArgs {
                create: false,
                ..FdToFileArgs::new("fd:2", "/tmp/x")
            }
        );
        assert_eq!(raw.mode, "write");
    }

    #[test]
    fn wrong_shapes_are_named() {
        let cases = [
            (
                json!([1]),
                "arguments must be a JSON object, got an array ([1])",
            ),
            (json!({}), "missing required argument 'fd'"),
            (
                json!({"fd": 1}),
                "argument 'fd' must be a string, got a number (1)",
            ),
            (
                json!({"fd": "fd:1", "page": 2}),
                "unexpected argument 'page' (valid: fd, read_all, extract_to_new_fd, mode, start, count)",
            ),
            (
                json!({"fd": "fd:1", "read_all": "true"}),
                "argument 'read_all' must be a boolean, got a string (\"true\")",
            ),
            (
                json!({"fd": "fd:1", "start": 1.5}),
                "argument 'start' must be an integer, got a number (1.5)",
            ),
            (
                json!({"fd": "fd:1", "count": 1e300}),
                "argument 'count' must be an integer, got a number (1e+300)",
            ),
            (
                json!({"fd": "fd:1", "mode": 3}),
                "argument 'mode' must be a string, got a number (3)",
            ),
        ];
        for (value, message) in cases {
            assert_eq!(
                parse_read(&value).err().as_deref(),
                Some(message),
                "{value}"
            );
        }
        assert_eq!(
            parse_to_file(&json!({"fd": "fd:1"})).err().as_deref(),
            Some("missing required argument 'file_path'")
        );
    }

    #[test]
    fn modes_round_trip() {
        for mode in [ReadMode::Page, ReadMode::Line, ReadMode::Char] {
            assert_eq!(ReadMode::parse(mode.as_str()), Some(mode));
        }
        for mode in [WriteMode::Write, WriteMode::Append] {
            assert_eq!(WriteMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(ReadMode::parse("all"), None);
        assert_eq!(WriteMode::parse("Write"), None);
    }
}
