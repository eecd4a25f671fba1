//! Deny rules: globs naming files whose bytes strata never stores (secrets). They match
//! case-insensitively: `.ENV`, `ID_RSA` and `Secret.PEM` are the same secrets as their lowercase
//! forms (and the same files on a case-insensitive filesystem).

use std::sync::{Arc, OnceLock};

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

/// The last set [`DenyRules::with_defaults`] built, by its extra globs: every session's load
/// builds one (compiling the default list took ~0.4 ms, a twentieth of a resume's load), and
/// the loads of one process mostly ask the same; a clone shares the compiled matchers.
static LAST_WITH_DEFAULTS: std::sync::Mutex<Option<(Vec<String>, DenyRules)>> =
    std::sync::Mutex::new(None);

/// A set of deny globs. A glob without a `/` matches a file name anywhere; one with a `/`
/// matches the whole canonical path. Case is ignored, in the globs and in the names.
#[derive(Clone, Debug)]
pub struct DenyRules {
    by_name: Arc<GlobGroup>,
    by_path: Arc<GlobGroup>,
    globs: Vec<String>,
}

/// Globs matched against one kind of text (file names, or whole paths), compiled only when a
/// text needs them: compiling the default list's regexes took ~0.4 ms of every command that
/// loads the rules, and a scan of an unchanged tree meets one or two names that pass the
/// literal prefilter, if any.
#[derive(Debug)]
struct GlobGroup {
    globs: Vec<Glob>,
    /// A literal of each glob (in the same order), one of which every ASCII text they match
    /// contains: only the globs whose literal an ASCII text contains run on it (a scan asks
    /// about every file, and a case-insensitive glob is a regex search).
    literals: Option<Literals>,
    /// Each glob's matcher, compiled the first time its literal is met (`None` when its regex
    /// does not build).
    each: Vec<OnceLock<Option<GlobSet>>>,
    /// All of them as one set, for the texts the literals cannot screen (non-ASCII ones, or
    /// any when a glob has no literal); `None` when the set does not build.
    all: OnceLock<Option<GlobSet>>,
}

impl GlobGroup {
    fn new(globs: Vec<Glob>, literals: Option<Literals>) -> Self {
        GlobGroup {
            each: globs.iter().map(|_| OnceLock::new()).collect(),
            globs,
            literals,
            all: OnceLock::new(),
        }
    }

    /// Whether a glob matches `text`.
    fn is_match(&self, text: &str) -> bool {
        if self.globs.is_empty() {
            return false;
        }
        if let Some(literals) = &self.literals
            && text.is_ascii()
        {
            // Most texts contain no literal: the plain search (with its prefilter) says so
            // faster than the overlapping one that finds which globs to run.
            if !literals.0.is_match(text) {
                return false;
            }
            if let Ok(mut hits) = literals.0.try_find_overlapping_iter(text) {
                return hits.any(|hit| {
                    let n = hit.pattern().as_usize();
                    self.each
                        .get(n)
                        .zip(self.globs.get(n))
                        .is_some_and(|(each, glob)| {
                            // `Glob::compile_matcher` panics on a regex that does not build
                            // (parsing the glob does not build it): one that does not build
                            // denies, as the whole set does below.
                            each.get_or_init(|| {
                                GlobSetBuilder::new().add(glob.clone()).build().ok()
                            })
                            .as_ref()
                            .is_none_or(|one| one.is_match(text))
                        })
                });
            }
        }
        let all = self.all.get_or_init(|| {
            let mut set = GlobSetBuilder::new();
            for glob in &self.globs {
                set.add(glob.clone());
            }
            set.build().ok()
        });
        // A set too large to build denies everything rather than let a secret through.
        all.as_ref().is_none_or(|set| set.is_match(text))
    }
}

/// Required literals of a glob set, matched ignoring ASCII case.
#[derive(Clone, Debug)]
struct Literals(aho_corasick::AhoCorasick);

impl Literals {
    /// The longest literal run of each glob (outside `[…]` and `{…}`, which every match contains
    /// as it is written, up to case); `None` when a glob has no literal of at least two
    /// characters or one is not ASCII (a non-ASCII letter may fold to an ASCII one).
    fn of(globs: &[&str]) -> Option<Self> {
        let mut literals = Vec::new();
        for glob in globs {
            let literal = longest_literal(glob);
            if literal.len() < 2 || !literal.is_ascii() {
                return None;
            }
            literals.push(literal);
        }
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&literals)
            .ok()
            .map(Literals)
    }
}

/// The longest run of literal characters of `glob` outside `[…]` and `{…}` (an escape ends a run).
fn longest_literal(glob: &str) -> String {
    let mut best = String::new();
    let mut run = String::new();
    let mut depth = 0usize;
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth = depth.saturating_sub(1),
            '\\' => {
                chars.next();
            }
            '*' | '?' => {}
            c if depth == 0 => {
                run.push(c);
                continue;
            }
            _ => {}
        }
        if run.len() > best.len() {
            best = std::mem::take(&mut run);
        }
        run.clear();
    }
    if run.len() > best.len() {
        best = run;
    }
    best
}

impl DenyRules {
    /// Parses `globs` (their regexes are compiled when a file first needs them).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a glob that does not parse.
    pub fn new<S: AsRef<str>>(globs: &[S]) -> Result<Self> {
        let (mut by_name, mut by_path) = (Vec::new(), Vec::new());
        let (mut names, mut paths) = (Vec::new(), Vec::new());
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
                by_path.push(compiled(glob)?);
                paths.push(glob);
            } else {
                by_name.push(compiled(glob)?);
                names.push(glob);
            }
        }
        Ok(DenyRules {
            by_name: Arc::new(GlobGroup::new(by_name, Literals::of(&names))),
            by_path: Arc::new(GlobGroup::new(by_path, Literals::of(&paths))),
            globs: globs.iter().map(|g| g.as_ref().to_string()).collect(),
        })
    }

    /// The default secrets list plus `extra` globs.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming an extra glob that does not parse.
    pub fn with_defaults<S: AsRef<str>>(extra: &[S]) -> Result<Self> {
        let extra: Vec<String> = extra.iter().map(|g| g.as_ref().to_string()).collect();
        if let Ok(last) = LAST_WITH_DEFAULTS.lock()
            && let Some((globs, rules)) = last.as_ref()
            && *globs == extra
        {
            return Ok(rules.clone());
        }
        let mut globs: Vec<String> = DEFAULT_DENY_GLOBS.iter().map(|g| g.to_string()).collect();
        globs.extend(extra.iter().cloned());
        let rules = DenyRules::new(&globs)?;
        // The defaults are known to build; a store's own globs are few, and one whose regex does
        // not build would deny every name holding its literal: refuse it here, by name.
        let group = |glob: &str| {
            if glob.contains('/') {
                &rules.by_path
            } else {
                &rules.by_name
            }
        };
        for glob in &extra {
            let group = group(glob);
            let parsed = group.globs.iter().find(|g| g.glob() == glob);
            if let Some(parsed) = parsed
                && let Err(e) = GlobSetBuilder::new().add(parsed.clone()).build()
            {
                let shown: String = glob.chars().take(60).collect();
                let more = if shown.len() < glob.len() { "…" } else { "" };
                return Err(Error::invalid_input(format!(
                    "deny glob \"{shown}{more}\" ({} bytes) parses but cannot be compiled into a \
                     matcher ({e}): simplify it (fewer nested alternatives or classes) in the \
                     store's settings.toml",
                    glob.len()
                )));
            }
        }
        if let Ok(mut last) = LAST_WITH_DEFAULTS.lock() {
            *last = Some((extra, rules.clone()));
        }
        Ok(rules)
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

    /// The set kept from the last build answers as a fresh one, and only for the same extras.
    #[test]
    fn a_kept_set_is_the_one_its_globs_build() -> Result<()> {
        for extra in [
            vec![],
            vec!["*.key".to_string()],
            vec![],
            vec!["/x/**".to_string()],
        ] {
            for _ in 0..2 {
                let kept = DenyRules::with_defaults(&extra)?;
                let mut globs: Vec<String> =
                    DEFAULT_DENY_GLOBS.iter().map(|g| g.to_string()).collect();
                globs.extend(extra.iter().cloned());
                assert_eq!(kept.globs(), globs.as_slice());
                let fresh = DenyRules::new(&globs)?;
                for path in [
                    "/a/.env",
                    "/a/b.key",
                    "/x/y/z.txt",
                    "/a/main.rs",
                    "/a/id_rsa",
                ] {
                    assert_eq!(kept.is_denied(path), fresh.is_denied(path), "{path}");
                }
            }
        }
        Ok(())
    }

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
    fn the_literal_prefilter_agrees_with_the_globs() -> Result<()> {
        assert_eq!(longest_literal("**/.aws/credentials"), "/.aws/credentials");
        assert_eq!(longest_literal("id_rsa*"), "id_rsa");
        assert_eq!(longest_literal("{ab,cd}.[ch]pp"), "pp");
        assert_eq!(longest_literal("x\\*yz"), "yz");
        let extra = ["**/Private/*.TXT", "*.to{k,ken}", "sec?et", "[sS]ecret.*"];
        let with = DenyRules::with_defaults(&extra)?;
        let unscreened = |group: &GlobGroup| Arc::new(GlobGroup::new(group.globs.clone(), None));
        let without = DenyRules {
            by_name: unscreened(&with.by_name),
            by_path: unscreened(&with.by_path),
            globs: with.globs.clone(),
        };
        assert!(with.by_name.literals.is_some() && with.by_path.literals.is_some());
        let names = [
            "main.rs",
            ".env",
            ".ENV.local",
            "prod.Env",
            "a.PEM",
            "key",
            "x.key.bak",
            "ID_RSA.pub",
            "id-rsa",
            "credentials.json",
            "Credentials.JSON",
            "c.tok",
            "C.TOKEN",
            "c.tkn",
            "secret",
            "sec.et",
            "SECRET.md",
            "Secret.md",
            "notes.txt",
            "ſecret.env",
            ".ENVRC",
            ".envrc.md",
            "mod.rs",
            "\u{212a}ey.key",
            "ki\u{17f}.pem",
        ];
        let dirs = [
            "/p",
            "/home/u/.ssh",
            "/home/u/.SSH",
            "/home/u/.aws",
            "/home/u/.AWS",
            "/p/private",
            "/p/PRIVATE",
            "/p/priv",
            "/home/u/.\u{17f}sh",
            "/home/u/.ſſh",
        ];
        for dir in dirs {
            for name in names {
                let path = format!("{dir}/{name}");
                assert_eq!(with.is_denied(&path), without.is_denied(&path), "{path}");
            }
        }
        assert!(with.is_denied("/home/u/.aws/Credentials"));
        // A glob without a literal turns the prefilter off for its kind.
        let any = DenyRules::new(&["*", "**/*"])?;
        assert!(any.by_name.literals.is_none() && any.by_path.literals.is_none());
        assert!(any.is_denied("/p/anything"));
        Ok(())
    }

    /// A glob that parses but whose regex does not build (alternations nested past the regex
    /// parser's limit) denies what it may match, through its literal or through the whole set,
    /// instead of panicking on the first name that holds its literal (`compile_matcher`).
    #[test]
    fn a_glob_whose_regex_does_not_build_denies_instead_of_panicking() -> Result<()> {
        let nested = format!("secret{}x{}", "{a,".repeat(300), "}".repeat(300));
        let rules = DenyRules::new(&[nested.as_str()])?;
        assert!(rules.by_name.literals.is_some());
        assert!(rules.is_denied("/p/secretx"));
        assert!(rules.is_denied("/p/secrété"), "non-ASCII: the whole set");
        assert!(!rules.is_denied("/p/main.rs"));
        Ok(())
    }

    /// A store's own glob whose regex does not build is refused when the rules load, by name,
    /// rather than accepted to deny every name that holds its literal.
    #[test]
    fn an_extra_glob_whose_regex_does_not_build_is_refused_at_load() {
        let nested = format!("secret{}x{}", "{a,".repeat(300), "}".repeat(300));
        let err = DenyRules::with_defaults(&[nested.as_str()])
            .map(|_| ())
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("cannot be compiled") && text.contains("simplify"),
            "{text}"
        );
        assert!(DenyRules::with_defaults(&["*.key", "deep/**/x.txt"]).is_ok());
    }

    #[test]
    fn bad_glob_is_named() {
        let err = DenyRules::new(&["a[b"]).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("a[b"), "{err}");
    }
}
