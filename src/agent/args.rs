//! `Args`: a tool's JSON arguments, read strictly: an unknown name, a wrong type or a missing
//! required argument is an [`Error::InvalidInput`] saying which and what was expected.
//!
//! `null` means "not given"; integers may come as whole floats (`2.0`), as some clients send.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The arguments of one call, checked against the names the tool takes.
pub(crate) struct Args<'a> {
    tool: &'a str,
    object: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// `args` for `tool`, which takes the arguments `names`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a name the tool does not take.
    pub(crate) fn new(tool: &'a str, args: &'a Map<String, Value>, names: &[&str]) -> Result<Self> {
        if let Some(unknown) = args.keys().find(|k| !names.contains(&k.as_str())) {
            return Err(Error::invalid_input(format!(
                "{tool} takes no argument '{unknown}' (it takes: {})",
                names.join(", ")
            )));
        }
        Ok(Args { tool, object: args })
    }

    fn given(&self, name: &str) -> Option<&'a Value> {
        self.object.get(name).filter(|v| !v.is_null())
    }

    fn wrong(&self, name: &str, expected: &str, value: &Value) -> Error {
        let mut shown = value.to_string();
        if shown.chars().count() > 40 {
            shown = format!("{}…", shown.chars().take(40).collect::<String>());
        }
        Error::invalid_input(format!(
            "{}: argument '{name}' must be {expected}, got {shown}",
            self.tool
        ))
    }

    /// A string argument, if given.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is not a string.
    pub(crate) fn string(&self, name: &str) -> Result<Option<&'a str>> {
        self.given(name)
            .map(|v| v.as_str().ok_or_else(|| self.wrong(name, "a string", v)))
            .transpose()
    }

    /// A required string argument.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is missing or not a string.
    pub(crate) fn required_string(&self, name: &str) -> Result<&'a str> {
        self.string(name)?.ok_or_else(|| {
            Error::invalid_input(format!("{}: the argument '{name}' is required", self.tool))
        })
    }

    /// A boolean argument, if given.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is not a boolean.
    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>> {
        self.given(name)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| self.wrong(name, "true or false", v))
            })
            .transpose()
    }

    /// An integer argument, if given.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is not a whole number.
    pub(crate) fn integer(&self, name: &str) -> Result<Option<i64>> {
        self.given(name)
            .map(|v| {
                v.as_i64()
                    .or_else(|| whole(v.as_f64()?))
                    .ok_or_else(|| self.wrong(name, "a whole number", v))
            })
            .transpose()
    }

    /// A required integer argument.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is missing or not a whole number.
    pub(crate) fn required_integer(&self, name: &str) -> Result<i64> {
        self.integer(name)?.ok_or_else(|| {
            Error::invalid_input(format!("{}: the argument '{name}' is required", self.tool))
        })
    }

    /// A positive count argument (at least 1), `default` when not given.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is not a whole number of at least 1.
    pub(crate) fn count(&self, name: &str, default: usize) -> Result<usize> {
        match self.integer(name)? {
            None => Ok(default),
            Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Some(n) => Err(Error::invalid_input(format!(
                "{}: argument '{name}' must be at least 1, got {n}",
                self.tool
            ))),
        }
    }

    /// A value given either as a whole number or as a string (a version number or `current`).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is neither.
    pub(crate) fn number_or_string(&self, name: &str) -> Result<Option<String>> {
        self.given(name)
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(_) => v
                    .as_i64()
                    .or_else(|| whole(v.as_f64()?))
                    .map(|n| n.to_string())
                    .ok_or_else(|| self.wrong(name, "a version number or \"current\"", v)),
                _ => Err(self.wrong(name, "a version number or \"current\"", v)),
            })
            .transpose()
    }
}

/// `x` as an `i64` when it is a whole number in range.
fn whole(x: f64) -> Option<i64> {
    // 2^63 is exactly representable; the range is [-2^63, 2^63).
    let bound = 9_223_372_036_854_775_808.0;
    (x.fract() == 0.0 && x >= -bound && x < bound).then_some(x as i64)
}
