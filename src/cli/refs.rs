//! Turning a `REF` argument into an entity id: a path, an entity id, or an id prefix.

use std::path::Path;

use anyhow::{Result, bail};
use strata::resolve::{absolute_path, machine_filesystem_id};
use strata::store::Store;

/// The shortest id prefix accepted.
pub const MIN_PREFIX: usize = 8;

/// Resolves `reference` against `store`: a path (relative to `cwd`) known to the store or present
/// on disk wins; then an exact entity id; then `id:PREFIX` or a hex prefix of at least 8 characters,
/// which must be unambiguous.
///
/// # Errors
/// When nothing matches, or a prefix matches several entities (listing them).
pub fn resolve_ref(store: &Store, cwd: &Path, reference: &str) -> Result<String> {
    if let Some(prefix) = reference.strip_prefix("id:") {
        return by_id(store, prefix, reference);
    }
    let filesystem_id = machine_filesystem_id();
    if let Some(path) = host_path(reference, cwd) {
        if let Some(id) = store.entity_at_path(&filesystem_id, &path)? {
            return Ok(id);
        }
        if Path::new(&path).exists() {
            bail!(
                "{reference} ({path}) is not in the store; run `strata index {reference}` to add it"
            );
        }
    }
    if store.entity_exists(reference)? {
        return Ok(reference.to_string());
    }
    by_id(store, reference, reference)
}

/// The canonical host path `reference` names, if it reads as a path.
fn host_path(reference: &str, cwd: &Path) -> Option<String> {
    let absolute = absolute_path(reference, cwd).ok()?;
    // An existing file is named by its real path (symlinks resolved), as scans record it.
    match std::fs::canonicalize(&absolute) {
        Ok(real) => real.to_str().map(str::to_string),
        Err(_) => Some(absolute),
    }
}

/// Resolves an exact id or an id prefix.
fn by_id(store: &Store, prefix: &str, reference: &str) -> Result<String> {
    if store.entity_exists(prefix)? {
        return Ok(prefix.to_string());
    }
    let is_hex = prefix.bytes().all(|b| b.is_ascii_hexdigit());
    if prefix.len() < MIN_PREFIX || !is_hex {
        bail!(
            "{reference:?} names no path in the store and no entity; give a path, a full id, or an id \
             prefix of at least {MIN_PREFIX} hex characters (see `strata ls`)"
        );
    }
    let matches = store.ids_with_prefix(&prefix.to_ascii_lowercase(), 11)?;
    match matches.as_slice() {
        [] => bail!("no entity id starts with {prefix}; see `strata ls`"),
        [one] => Ok(one.clone()),
        many => {
            let shown: Vec<String> = many.iter().take(10).map(|id| format!("  {id}")).collect();
            bail!(
                "id prefix {prefix} is ambiguous; it matches:\n{}{}\ngive more characters",
                shown.join("\n"),
                if many.len() > 10 { "\n  …" } else { "" }
            )
        }
    }
}
