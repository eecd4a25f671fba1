//! `FileIds`: a session's file ids `f1`, `f2`, … (seed 000), stored with the session as the
//! `session_files:{sid}` record and never renumbered.
//!
//! Id `fN` is the N-th agent path the table learned. The agent layer numbers a session's files
//! when it first lists them (mounts in config order, then relative paths compared without case);
//! a file met later gets the next number, and a deleted file keeps its id, which is never given
//! to another path. The stored text is a header line, then one JSON string per line (line N
//! after the header is `fN`'s path), so new ids only append to it and the store keeps each
//! version as a suffix of the one before.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

/// The first line of the stored table; its presence also records that the session listed its
/// files once.
pub const FILE_IDS_HEADER: &str = "strata file ids v1";

/// A session's file id table.
#[derive(Clone, Debug, Default)]
pub struct FileIds {
    /// Agent paths by id: `paths[n - 1]` is `fN`.
    paths: Vec<String>,
    by_path: FxHashMap<String, u64>,
    /// Whether the session's files were listed once (the first listing numbers them all).
    listed: bool,
    /// The stored text of the first `written` ids (header included).
    text: String,
    written: usize,
    /// Whether the table changed since it was stored.
    dirty: bool,
}

impl FileIds {
    /// The table stored as `text` (what [`FileIds::text`] gave).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the text is not a stored table.
    pub(crate) fn parse(text: &str) -> Result<Self> {
        let mut lines = text.lines();
        if lines.next() != Some(FILE_IDS_HEADER) {
            return Err(Error::corrupt(
                "a session's file id table lacks its header line",
            ));
        }
        let mut ids = FileIds {
            listed: true,
            ..FileIds::default()
        };
        for (n, line) in lines.enumerate() {
            let path: String = serde_json::from_str(line).map_err(|e| {
                Error::corrupt(format!("line {} of a session's file id table: {e}", n + 2))
            })?;
            ids.insert(path);
        }
        ids.text = text.to_string();
        ids.written = ids.paths.len();
        ids.dirty = false;
        Ok(ids)
    }

    fn insert(&mut self, path: String) -> u64 {
        let n = self.paths.len() as u64 + 1;
        self.by_path.insert(path.clone(), n);
        self.paths.push(path);
        self.dirty = true;
        n
    }

    /// The id number of `path`, if it has one.
    pub fn id_of(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// The agent path of id number `n`, if it was given.
    pub fn path_of(&self, n: u64) -> Option<&str> {
        let index = usize::try_from(n.checked_sub(1)?).ok()?;
        self.paths.get(index).map(String::as_str)
    }

    /// The id number of `path`, giving it the next one when it has none.
    pub fn number(&mut self, path: &str) -> u64 {
        match self.id_of(path) {
            Some(n) => n,
            None => self.insert(path.to_string()),
        }
    }

    /// Marks the table as listed once (the first listing numbered its files).
    pub fn mark_listed(&mut self) {
        if !self.listed {
            self.listed = true;
            self.dirty = true;
        }
    }

    /// Whether the session's files were listed once.
    pub fn is_listed(&self) -> bool {
        self.listed
    }

    /// The number of ids given.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether no id was given.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Whether the table changed since it was stored (or loaded).
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Marks the table as stored.
    pub(crate) fn mark_stored(&mut self) {
        self.dirty = false;
    }

    /// Marks the table as not stored (a fork writes it under its own id).
    pub(crate) fn mark_unstored(&mut self) {
        self.dirty = self.listed;
    }

    /// The stored form: the header, then one JSON string per line. Only the ids given since the
    /// last call are written out.
    pub(crate) fn text(&mut self) -> &str {
        if self.text.is_empty() {
            self.text.push_str(FILE_IDS_HEADER);
            self.text.push('\n');
        }
        for path in &self.paths[self.written..] {
            // A JSON string never holds a raw line break.
            self.text
                .push_str(&serde_json::Value::String(path.clone()).to_string());
            self.text.push('\n');
        }
        self.written = self.paths.len();
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_given_once_and_round_trip() -> Result<()> {
        let mut ids = FileIds::default();
        assert!(!ids.is_listed());
        assert_eq!(ids.number("/w/a.md"), 1);
        assert_eq!(ids.number("/w/line\nbreak"), 2);
        assert_eq!(ids.number("/w/a.md"), 1);
        ids.mark_listed();
        let text = ids.text().to_string();
        assert_eq!(
            text,
            "strata file ids v1\n\"/w/a.md\"\n\"/w/line\\nbreak\"\n"
        );
        let mut back = FileIds::parse(&text)?;
        assert!(back.is_listed() && !back.is_dirty());
        assert_eq!(back.path_of(2), Some("/w/line\nbreak"));
        assert_eq!(back.path_of(0), None);
        assert_eq!(back.path_of(3), None);
        assert_eq!(back.number("/w/b.md"), 3);
        assert!(back.is_dirty());
        assert!(back.text().starts_with(&text), "ids only append");
        assert!(FileIds::parse("nonsense").is_err());
        Ok(())
    }
}
