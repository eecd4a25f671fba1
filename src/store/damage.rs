//! The damage marker: a small text file beside `store.redb` (`store.damaged`, 0600) saying that
//! the store failed a check and why. It is readable when the store file is not, survives the
//! process that found the damage, and makes every later handle refuse writes until `strata fsck
//! --repair` (or a clean `strata fsck`) removes it. Reads still answer what verifies.

use std::path::Path;

use super::private;
use super::time::Timestamp;
use crate::error::{Error, Result};

/// The command that repairs a damaged store that the storage engine can still open.
pub const REPAIR: &str = "strata fsck --repair";

/// The command that copies what verifies out of a store the storage engine cannot open.
pub const SALVAGE: &str = "strata fsck --salvage NEW_DIR";

/// Finding kinds that are damage to the log itself. The log is the source of truth: a repair
/// that rebuilt the query tables from it would drop what they still hold, so these findings
/// point at salvage.
pub const LOG_DAMAGE: &[&str] = &[
    "log",
    "log_gap",
    "chain",
    "header_unreadable",
    "op_unreadable",
    "op_digest",
    "op_orphan",
    "op_missing",
];

/// The command that repairs a finding of `kind`: salvage for damage to the log, else repair.
pub fn repair_for(kind: &str) -> &'static str {
    if LOG_DAMAGE.contains(&kind) {
        SALVAGE
    } else {
        REPAIR
    }
}

/// The marker's file name inside the store directory.
pub const DAMAGE_FILE: &str = "store.damaged";

/// What the marker of the store in `dir` says (its first line: what was found, when), or
/// `None` when the store is not marked.
pub fn reason(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(DAMAGE_FILE)).ok()?;
    Some(
        text.lines()
            .next()
            .unwrap_or("the store failed a check")
            .to_string(),
    )
}

/// Marks the store in `dir` damaged: `summary` (one line) and `details` (one line each).
/// Best effort: a marker that cannot be written leaves the handle's own refusal in force.
pub fn mark(dir: &Path, summary: &str, details: &[String]) {
    let mut text = format!(
        "{} (found {}); writes are refused until `strata fsck --repair` repairs it\n",
        one_line(summary),
        Timestamp::now()
    );
    for line in details.iter().take(50) {
        text.push_str(&one_line(line));
        text.push('\n');
    }
    if details.len() > 50 {
        text.push_str(&format!(
            "… and {} more; `strata fsck` lists them all\n",
            details.len() - 50
        ));
    }
    let _ = private::write_file(&dir.join(DAMAGE_FILE), text.as_bytes());
}

/// Removes the marker of the store in `dir` (the store verified).
///
/// # Errors
/// [`Error::Io`] when it exists and cannot be removed.
pub fn clear(dir: &Path) -> Result<()> {
    match std::fs::remove_file(dir.join(DAMAGE_FILE)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(
            format!("removing {}", dir.join(DAMAGE_FILE).display()),
            e,
        )),
    }
}

/// `text` on one line, control characters shown as `?`.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The error a write meets on a store marked damaged for `reason`.
pub fn refusal(reason: &str) -> Error {
    Error::corrupt(format!(
        "the store is marked damaged ({reason}), so writes are refused; run `strata fsck` to see \
         what is affected and `strata fsck --repair` to repair it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_private_one_line_per_finding_and_cleared() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert_eq!(reason(tmp.path()), None);
        mark(
            tmp.path(),
            "fsck found 2 problems",
            &["a\nforged".to_string(), "b".to_string()],
        );
        let text = std::fs::read_to_string(tmp.path().join(DAMAGE_FILE))
            .map_err(|e| Error::io("read", e))?;
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("a?forged"), "{text}");
        let first = reason(tmp.path()).unwrap_or_default();
        assert!(first.starts_with("fsck found 2 problems"), "{first}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(tmp.path().join(DAMAGE_FILE))
            .map_err(|e| Error::io("stat", e))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        clear(tmp.path())?;
        clear(tmp.path())?;
        assert_eq!(reason(tmp.path()), None);
        Ok(())
    }
}
