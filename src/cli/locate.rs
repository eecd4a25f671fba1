//! Finding the store directory, as git finds `.git`.

use std::path::{Path, PathBuf};

/// The name of a store directory.
pub const STORE_DIR_NAME: &str = ".strata";

/// Where a command's store is, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Named by `--store` or `STRATA_STORE` (it may not exist yet).
    Given(PathBuf),
    /// The nearest existing `.strata/` in `cwd` or above.
    Found(PathBuf),
    /// None found: the default place to create one (`cwd/.strata`).
    Missing(PathBuf),
}

impl Located {
    /// The store directory.
    pub fn dir(&self) -> &Path {
        match self {
            Located::Given(p) | Located::Found(p) | Located::Missing(p) => p,
        }
    }
}

/// Finds the store: `given` if any (relative to `cwd`), else the nearest `.strata/` from `cwd` up.
pub fn locate(given: Option<&Path>, cwd: &Path) -> Located {
    if let Some(dir) = given {
        return Located::Given(cwd.join(dir));
    }
    let mut here = Some(cwd);
    while let Some(dir) = here {
        let candidate = dir.join(STORE_DIR_NAME);
        if candidate.is_dir() {
            return Located::Found(candidate);
        }
        here = dir.parent();
    }
    Located::Missing(cwd.join(STORE_DIR_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_store_above_wins() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let root = tmp.path();
        std::fs::create_dir_all(root.join("a/b/c"))?;
        assert_eq!(
            locate(None, &root.join("a/b/c")),
            Located::Missing(root.join("a/b/c/.strata"))
        );
        std::fs::create_dir(root.join("a/.strata"))?;
        assert_eq!(
            locate(None, &root.join("a/b/c")),
            Located::Found(root.join("a/.strata"))
        );
        std::fs::create_dir(root.join("a/b/.strata"))?;
        assert_eq!(
            locate(None, &root.join("a/b/c")),
            Located::Found(root.join("a/b/.strata"))
        );
        assert_eq!(
            locate(Some(Path::new("elsewhere")), &root.join("a")),
            Located::Given(root.join("a/elsewhere"))
        );
        Ok(())
    }
}
