//! Deny rules: globs naming files whose bytes strata never stores (secrets). They match
//! case-insensitively: `.ENV`, `ID_RSA` and `Secret.PEM` are the same secrets as their lowercase
//! forms (and the same files on a case-insensitive filesystem).

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{Error, Result};

/// The secrets denied by default: environment files, keys, certificates' private parts, tokens.
pub const DEFAULT_DENY_GLOBS: &[&str] = &[
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    ".git-credentials",
    "**/.aws/credentials",
    "**/.ssh/*",
];

/// A compiled set of deny globs. A glob without a `/` matches a file name anywhere; one with a
/// `/` matches the whole canonical path. Case is ignored, in the globs and in the names.
#[derive(Clone, Debug)]
pub struct DenyRules {
    by_name: GlobSet,
    by_path: GlobSet,
    globs: Vec<String>,
}

impl DenyRules {
    /// Compiles `globs`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a glob that does not parse.
    pub fn new<S: AsRef<str>>(globs: &[S]) -> Result<Self> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for glob in globs {
            let glob = glob.as_ref();
            let compiled = |pattern: &str| -> Result<Glob> {
                GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .case_insensitive(true)
                    .build()
                    .map_err(|e| Error::invalid_input(format!("deny glob {glob:?}: {e}")))
            };
            if glob.contains('/') {
                by_path.add(compiled(glob)?);
            } else {
                by_name.add(compiled(glob)?);
            }
        }
        let build = |builder: GlobSetBuilder| {
            builder
                .build()
                .map_err(|e| Error::invalid_input(format!("deny globs: {e}")))
        };
        Ok(DenyRules {
            by_name: build(by_name)?,
            by_path: build(by_path)?,
            globs: globs.iter().map(|g| g.as_ref().to_string()).collect(),
        })
    }

    /// The default secrets list plus `extra` globs.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming an extra glob that does not parse.
    pub fn with_defaults<S: AsRef<str>>(extra: &[S]) -> Result<Self> {
        let mut globs: Vec<String> = DEFAULT_DENY_GLOBS.iter().map(|g| g.to_string()).collect();
        globs.extend(extra.iter().map(|g| g.as_ref().to_string()));
        DenyRules::new(&globs)
    }

    /// Whether the file at canonical `path` is denied.
    pub fn is_denied(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        self.by_name.is_match(name) || self.by_path.is_match(path)
    }

    /// The globs this set was built from.
    pub fn globs(&self) -> &[String] {
        &self.globs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_denied_anywhere() -> Result<()> {
        let rules = DenyRules::with_defaults::<&str>(&[])?;
        for path in [
            "/p/.env",
            "/p/.env.local",
            "/p/deep/server.pem",
            "/home/u/.ssh/id_ed25519",
            "/home/u/.ssh/id_rsa.pub",
            "/home/u/.ssh/config",
            "/home/u/.aws/credentials",
        ] {
            assert!(rules.is_denied(path), "{path} should be denied");
        }
        for path in [
            "/p/src/main.rs",
            "/p/environment.md",
            "/p/keys.rs",
            "/p/.envrc.md",
        ] {
            assert!(!rules.is_denied(path), "{path} should be allowed");
        }
        Ok(())
    }

    #[test]
    fn every_case_variant_is_denied() -> Result<()> {
        let rules = DenyRules::with_defaults(&["**/Private/*.TXT"])?;
        for path in [
            "/p/prod.env",
            "/p/PROD.ENV",
            "/p/Staging.Env",
            "/p/.ENV",
            "/p/.Env",
            "/p/.ENV.LOCAL",
            "/p/.EnvRC",
            "/p/ID_RSA",
            "/p/Id_Ed25519.PUB",
            "/p/Secret.PEM",
            "/p/SERVER.KEY",
            "/p/Credentials.JSON",
            "/p/.NETRC",
            "/home/u/.SSH/config",
            "/home/u/.Aws/CREDENTIALS",
            "/p/private/notes.txt",
            "/p/PRIVATE/Notes.Txt",
        ] {
            assert!(rules.is_denied(path), "{path} should be denied");
        }
        for path in [
            "/p/ENVIRONMENT.md",
            "/p/Keys.RS",
            "/p/.EnvRC.md",
            "/p/envs.txt",
        ] {
            assert!(!rules.is_denied(path), "{path} should be allowed");
        }
        Ok(())
    }

    #[test]
    fn bad_glob_is_named() {
        let err = DenyRules::new(&["a[b"]).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("a[b"), "{err}");
    }
}
