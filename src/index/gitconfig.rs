//! Git's global excludes file (`core.excludesFile`), found as git finds it: the system config,
//! then `$XDG_CONFIG_HOME/git/config` and `~/.gitconfig` (or `$GIT_CONFIG_GLOBAL` alone), the
//! last value winning, `[include] path = …` files read where they are included, and
//! `$XDG_CONFIG_HOME/git/ignore` when no config sets it.
//!
//! The `ignore` crate's own search takes the first line matching `excludesfile = …` in each file
//! (in any section, the first value rather than the last) and never follows `include.path`, so
//! a setting kept in an included file (a common way to share dotfiles) was not honoured and
//! strata indexed files git ignores. Conditional includes (`[includeIf "gitdir:…"]`) depend on
//! the repository and are not followed; a repository's own `.git/config` is not read either
//! (git's `core.excludesFile` there is rare; `.git/info/exclude` is read by the walks).

use std::path::{Path, PathBuf};

/// How deep includes may nest, as git allows.
const MAX_INCLUDE_DEPTH: usize = 10;

/// What locates git's config files: the environment variables and directories git reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConfigEnv {
    /// The home directory (`~`): `$HOME`, none when unset.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` when set and not empty.
    pub xdg_config_home: Option<PathBuf>,
    /// `$GIT_CONFIG_GLOBAL` when set: the only global config file then (none when empty).
    pub global: Option<PathBuf>,
    /// `$GIT_CONFIG_SYSTEM` when set (else `/etc/gitconfig`; none when empty).
    pub system: Option<PathBuf>,
    /// Whether `$GIT_CONFIG_NOSYSTEM` says not to read the system config.
    pub no_system: bool,
}

impl ConfigEnv {
    /// This process's environment.
    pub fn current() -> ConfigEnv {
        ConfigEnv::from_vars(|name| std::env::var_os(name))
    }

    /// The environment whose variables `var` gives.
    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> ConfigEnv {
        ConfigEnv {
            // `$HOME` as git reads it: unset, no home (not the password file's, as
            // `std::env::home_dir` falls back to); empty, `~/.gitconfig` is `/.gitconfig`.
            home: var("HOME").map(|home| match home.is_empty() {
                true => PathBuf::from("/"),
                false => PathBuf::from(home),
            }),
            xdg_config_home: var("XDG_CONFIG_HOME")
                .filter(|value| !value.is_empty())
                .map(PathBuf::from),
            // Set but empty, these name a file git cannot read: no global (or system) config
            // at all, not the default files.
            global: var("GIT_CONFIG_GLOBAL").map(PathBuf::from),
            system: var("GIT_CONFIG_SYSTEM").map(PathBuf::from),
            no_system: var("GIT_CONFIG_NOSYSTEM").is_some_and(|v| truthy(&v)),
        }
    }

    /// `$XDG_CONFIG_HOME`, or `~/.config`.
    fn config_dir(&self) -> Option<PathBuf> {
        self.xdg_config_home
            .clone()
            .or_else(|| self.home.as_ref().map(|home| home.join(".config")))
    }

    /// The config files git reads for a global setting, in the order it reads them (a later
    /// value overrides an earlier one).
    fn files(&self) -> Vec<PathBuf> {
        let mut files = Vec::with_capacity(3);
        if !self.no_system {
            files.push(
                self.system
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("/etc/gitconfig")),
            );
        }
        match &self.global {
            Some(global) => files.push(global.clone()),
            None => {
                files.extend(self.config_dir().map(|dir| dir.join("git/config")));
                files.extend(self.home.as_ref().map(|home| home.join(".gitconfig")));
            }
        }
        files
    }

    /// `path` with a leading `~/` (or a lone `~`) replaced by the home directory.
    fn expand_home(&self, path: &str) -> PathBuf {
        match (path.strip_prefix('~'), &self.home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                home.join(os_path(rest.trim_start_matches('/')))
            }
            _ => os_path(path),
        }
    }
}

/// The path whose bytes are the chars of `value`, text [`entries`] read one char per byte: a
/// path in any encoding (git's values are bytes) comes back as it was written.
fn os_path(value: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = value.chars().filter_map(|c| u8::try_from(c).ok()).collect();
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

/// `text` without its leading blanks (space, tab, CR, LF: git's `isspace`).
fn trim_blanks(text: &str) -> &str {
    text.trim_start_matches([' ', '\t', '\r', '\n'])
}

/// Whether an environment value is one git reads as true.
fn truthy(value: &std::ffi::OsStr) -> bool {
    let value = value.to_string_lossy().to_ascii_lowercase();
    !matches!(value.as_str(), "" | "0" | "false" | "no" | "off")
}

/// The global excludes file git would read in environment `env`: `Some` path (which may not
/// exist), or `None` when `core.excludesFile` is set empty (git then reads none). Unreadable
/// config files are skipped, as git skips missing ones.
pub(crate) fn excludes_file(env: &ConfigEnv) -> Option<PathBuf> {
    let mut found: Option<String> = None;
    for file in env.files() {
        read_config(env, &file, 0, &mut found);
    }
    match found {
        Some(value) if value.is_empty() => None,
        Some(value) => Some(env.expand_home(&value)),
        None => env.config_dir().map(|dir| dir.join("git/ignore")),
    }
}

/// Reads the config file `path` (included at `depth`), setting `found` to each
/// `core.excludesFile` value it meets and reading each `include.path` where it stands.
fn read_config(env: &ConfigEnv, path: &Path, depth: usize, found: &mut Option<String>) {
    if depth > MAX_INCLUDE_DEPTH {
        return;
    }
    let Ok(text) = std::fs::read(path) else {
        return;
    };
    for entry in entries(&text) {
        match (entry.section.as_str(), entry.key.as_str()) {
            ("core", "excludesfile") => *found = Some(entry.value),
            ("include", "path") if !entry.value.is_empty() => {
                let mut included = env.expand_home(&entry.value);
                if included.is_relative() {
                    let dir = path.parent().unwrap_or(Path::new("."));
                    included = dir.join(included);
                }
                read_config(env, &included, depth + 1, found);
            }
            _ => {}
        }
    }
}

/// One `key = value` of a config file: its section (lowercase, with `.subsection` as written
/// for `[section "subsection"]`), its key (lowercase) and its value (unquoted, unescaped).
#[derive(Debug, PartialEq)]
struct Entry {
    section: String,
    key: String,
    value: String,
}

/// The entries of config text `text`, in order. A line that does not parse is skipped (git
/// refuses the whole file; strata then reads what it can rather than nothing).
fn entries(text: &[u8]) -> Vec<Entry> {
    // Git skips a UTF-8 byte order mark at the start of a file.
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    // One char per byte: the syntax is ASCII, and a value's other bytes (a path in any
    // encoding, not necessarily UTF-8) come back unchanged through `os_path`.
    let text: String = text.iter().map(|&byte| char::from(byte)).collect();
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut rest = trim_blanks(line);
        if rest.starts_with('[') {
            let Some((header, after)) = parse_header(rest) else {
                section.clear();
                continue;
            };
            section = header;
            rest = trim_blanks(after);
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let key = rest[..name_end].to_ascii_lowercase();
        if key.is_empty() || !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let after = trim_blanks(&rest[name_end..]);
        let value = if let Some(raw) = after.strip_prefix('=') {
            // A value may continue on the next lines after a backslash at a line's end (the
            // end of the file too): the backslash and newline are kept for `parse_value`.
            let mut raw = raw.to_string();
            while continues(&raw) {
                raw.push('\n');
                match lines.next() {
                    Some(next) => raw.push_str(next),
                    None => break,
                }
            }
            match parse_value(&raw) {
                Some(value) => value,
                None => continue,
            }
        } else if after.is_empty() || after.starts_with('#') || after.starts_with(';') {
            // A key alone is a boolean true.
            "true".to_string()
        } else {
            continue;
        };
        if !section.is_empty() {
            out.push(Entry {
                section: section.clone(),
                key,
                value,
            });
        }
    }
    out
}

/// Whether value text `raw` ends in a backslash that continues it on the next line: one that
/// escapes nothing and stands outside a comment (`a\\\` continues, `a\\` and `a # b\` do not).
fn continues(raw: &str) -> bool {
    let mut quoted = false;
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => return false,
            '\\' if chars.next().is_none() => return true,
            _ => {}
        }
    }
    false
}

/// The section of header line `line` (`[core]`, `[include]`, `[includeIf "gitdir:~/w/"]`,
/// `[section.sub]`) and what follows the `]`; `None` when it does not parse.
fn parse_header(line: &str) -> Option<(String, &str)> {
    let inner = line.strip_prefix('[')?;
    let name_end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(inner.len());
    let name = inner[..name_end].to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    let rest = &inner[name_end..];
    if let Some(after) = rest.strip_prefix(']') {
        return Some((name, after));
    }
    // `[section "subsection"]`: the subsection is case-sensitive, with `\"` and `\\` escapes.
    let quoted = trim_blanks(rest).strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let after = quoted[i + 1..].strip_prefix(']')?;
                return Some((format!("{name}.{sub}"), after));
            }
            c => sub.push(c),
        }
    }
    None
}

/// The value of raw text `raw` (after the `=`): surrounding blanks dropped, double quotes
/// removed (blanks and comment characters inside them kept), `\n`, `\t`, `\b`, `\"` and `\\`
/// unescaped, a `#` or `;` outside quotes ending it. `None` for an unknown escape or an
/// unclosed quote, which git refuses.
fn parse_value(raw: &str) -> Option<String> {
    let mut value = String::new();
    let mut quoted = false;
    // Blanks outside quotes are kept only when something follows them.
    let mut pending_blanks = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                value.push_str(&pending_blanks);
                pending_blanks.clear();
                quoted = !quoted;
            }
            '#' | ';' if !quoted => break,
            ' ' | '\t' | '\r' if !quoted => {
                if !value.is_empty() {
                    pending_blanks.push(c);
                }
            }
            '\\' => {
                value.push_str(&pending_blanks);
                pending_blanks.clear();
                value.push(match chars.next()? {
                    // A continuation: the blanks before it are kept, the line break is not.
                    '\n' => continue,
                    'n' => '\n',
                    't' => '\t',
                    'b' => '\u{8}',
                    c @ ('"' | '\\') => c,
                    _ => return None,
                });
            }
            c => {
                value.push_str(&pending_blanks);
                pending_blanks.clear();
                value.push(c);
            }
        }
    }
    (!quoted).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment with its home in `home` and nothing else set.
    fn env_at(home: &Path) -> ConfigEnv {
        ConfigEnv {
            home: Some(home.to_path_buf()),
            xdg_config_home: None,
            global: None,
            system: Some(home.join("no-system-config")),
            no_system: false,
        }
    }

    fn put(path: &Path, text: &str) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)
    }

    #[test]
    fn values_are_unquoted_unescaped_and_end_at_a_comment() {
        let cases = [
            ("x", Some("x")),
            ("  ~/a b  ", Some("~/a b")),
            (" \"~/a b \" ", Some("~/a b ")),
            ("/x # note", Some("/x")),
            ("\"/x # kept\"", Some("/x # kept")),
            ("/x ; note", Some("/x")),
            (r#"a\"b\\c"#, Some("a\"b\\c")),
            (r"a\qb", None),
            ("\"open", None),
            ("", Some("")),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_value(raw).as_deref(), want, "{raw:?}");
        }
    }

    #[test]
    fn entries_know_their_sections_and_keys_in_any_case() {
        let text = "# comment\n[Core]\n\tExcludesFile = /a\n[core \"Sub\"]\nexcludesfile = /b\n\
                    [include] path = inc\n[section.Sub]\nflag\n[broken\nexcludesfile = /c\n";
        let got: Vec<(String, String, String)> = entries(text.as_bytes())
            .into_iter()
            .map(|e| (e.section, e.key, e.value))
            .collect();
        let want = [
            ("core", "excludesfile", "/a"),
            ("core.Sub", "excludesfile", "/b"),
            ("include", "path", "inc"),
            ("section.sub", "flag", "true"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_value_continues_after_a_trailing_backslash() {
        let got = entries(b"[core]\nexcludesfile = /a\\\nb\n");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].value, "/ab");
    }

    /// Git's answers (`git config --get core.excludesFile`, git 2.47): a backslash in a comment
    /// does not continue the line, and an escaped backslash before a continuation is kept.
    #[test]
    fn a_backslash_continues_only_outside_comments_and_escapes() {
        let value = |text: &str| -> Vec<String> {
            entries(text.as_bytes())
                .into_iter()
                .filter(|e| e.key == "excludesfile")
                .map(|e| e.value)
                .collect()
        };
        assert_eq!(
            value("[core]\n\teditor = vim # my editor \\\n\texcludesFile = ~/gi\n"),
            ["~/gi"]
        );
        assert_eq!(value("[core]\n\texcludesFile = ~/g\\\\\\\nx\n"), ["~/g\\x"]);
        assert_eq!(value("[core]\nexcludesFile = \"a;\\\nb\"\n"), ["a;b"]);
        // Blanks before a continuation are kept, even when nothing follows; a CR is a blank.
        assert_eq!(value("[core]\nexcludesFile = a \\\n# c\n"), ["a "]);
        assert_eq!(value("[core]\nexcludesFile = \r\r\n"), [""]);
    }

    /// Git's answers (git 2.47): a UTF-8 byte order mark before the first section is skipped
    /// (CRLF lines too), and a path's bytes are kept as written, UTF-8 or not.
    #[test]
    fn a_byte_order_mark_is_skipped_and_paths_keep_their_bytes() -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir()?;
        let home = tmp.path();
        let env = env_at(home);
        std::fs::write(
            home.join(".gitconfig"),
            b"\xef\xbb\xbf[core]\r\n\texcludesFile = ~/bom\r\n",
        )?;
        assert_eq!(excludes_file(&env), Some(home.join("bom")));
        let latin = std::ffi::OsStr::from_bytes(b"d\xe9");
        std::fs::create_dir_all(home.join(latin))?;
        std::fs::write(home.join(".gitconfig"), b"[include]\npath = d\xe9/inc\n")?;
        std::fs::write(
            home.join(latin).join("inc"),
            b"[core]\nexcludesFile = ~/d\xe9/ignore\n",
        )?;
        assert_eq!(excludes_file(&env), Some(home.join(latin).join("ignore")));
        Ok(())
    }

    /// Generated config text read as `git config --file F --type=path --get core.excludesFile`
    /// reads it: the same last value (`~` expanded), or none. Texts git refuses (strata reads
    /// what it can there; git also refuses a key without a value) and machines without git
    /// are skipped.
    #[test]
    fn generated_configs_give_gits_value() -> std::io::Result<()> {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        use std::process::Command;
        const HEADERS: &[&str] = &[
            "[core]",
            "[Core]",
            " [core] ",
            "[core \"x\"]",
            "[core.x]",
            "[include]",
            "[user]",
            "\u{feff}[core]",
            "",
        ];
        const KEYS: &[&str] = &[
            "excludesFile",
            "EXCLUDESFILE",
            "\texcludesfile",
            "other",
            "",
        ];
        const EQ: &[&str] = &[" = ", "=", "\t=\t", " ", ""];
        const PARTS: &[&str] = &[
            "a", " ", "\t", "\"", "\\\\", "\\n", "\\t", "\\\"", "#c", ";c", "b c", "\\", "\\\n",
            "\u{e9}", "~/x", "\r",
        ];
        const ENDS: &[&str] = &["\n", "\r\n", "\\\n"];
        let tmp = tempfile::tempdir()?;
        let env = env_at(tmp.path());
        let file = tmp.path().join("config");
        let git = |file: &Path| {
            Command::new("git")
                .args(["config", "--file"])
                .arg(file)
                .args(["--type=path", "--get", "core.excludesFile"])
                .env("HOME", tmp.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
        };
        std::fs::write(&file, "")?;
        if git(&file).is_err() {
            return Ok(());
        }
        let line = (
            prop::sample::select(HEADERS),
            prop::sample::select(KEYS),
            prop::sample::select(EQ),
            prop::collection::vec(prop::sample::select(PARTS), 0..6),
            prop::sample::select(ENDS),
        )
            .prop_map(|(h, k, e, v, end)| format!("{h}\n{k}{e}{}{end}", v.concat()));
        let mut runner = TestRunner::new(Config {
            cases: 300,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&prop::collection::vec(line, 1..4), |lines| {
            let text = lines.concat();
            std::fs::write(&file, &text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let output = git(&file).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want = match output.status.code() {
                Some(0) => output.stdout.strip_suffix(b"\n").map(<[u8]>::to_vec),
                Some(1) => None,
                _ => return Ok(()),
            };
            let got = entries(text.as_bytes())
                .into_iter()
                .rev()
                .find(|e| e.section == "core" && e.key == "excludesfile")
                .map(|e| {
                    use std::os::unix::ffi::OsStrExt;
                    env.expand_home(&e.value).as_os_str().as_bytes().to_vec()
                });
            prop_assert_eq!(got, want, "{:?}", text);
            Ok(())
        });
        result.map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// The environment as git reads it: `$HOME` unset is no home (git reads no `~/.gitconfig`),
    /// empty is `/`; `$GIT_CONFIG_GLOBAL` or `$GIT_CONFIG_SYSTEM` set empty names no file (git
    /// reads no global or system config then), `$XDG_CONFIG_HOME` empty is unset.
    #[test]
    fn the_environment_is_read_as_git_reads_it() {
        let env = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            ConfigEnv::from_vars(move |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
            })
        };
        assert_eq!(env(&[]).files(), [PathBuf::from("/etc/gitconfig")]);
        assert_eq!(env(&[]).config_dir(), None);
        let empty_home = env(&[("HOME", ""), ("XDG_CONFIG_HOME", "")]);
        assert_eq!(
            empty_home.files(),
            ["/etc/gitconfig", "/.config/git/config", "/.gitconfig"].map(PathBuf::from)
        );
        let empty_global = env(&[
            ("HOME", "/h"),
            ("GIT_CONFIG_GLOBAL", ""),
            ("GIT_CONFIG_SYSTEM", ""),
        ]);
        assert_eq!(empty_global.files(), ["", ""].map(PathBuf::from));
        assert_eq!(
            excludes_file(&empty_global),
            Some(PathBuf::from("/h/.config/git/ignore"))
        );
    }

    /// The last value wins across files and includes; an include is read where it stands,
    /// relative to the including file; `~` is the home directory.
    #[test]
    fn the_excludes_file_is_found_as_git_finds_it() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let home = tmp.path();
        let env = env_at(home);
        // Nothing set: the XDG default.
        assert_eq!(excludes_file(&env), Some(home.join(".config/git/ignore")));
        // In an included file only (what the `ignore` crate missed).
        put(
            &home.join(".gitconfig"),
            "[include]\n\tpath = dots/git.inc\n",
        )?;
        put(
            &home.join("dots/git.inc"),
            "[core]\n\texcludesFile = ~/dots/ignore\n",
        )?;
        assert_eq!(excludes_file(&env), Some(home.join("dots/ignore")));
        // A later value in the including file overrides the included one.
        put(
            &home.join(".gitconfig"),
            "[include]\n\tpath = dots/git.inc\n[core]\n\texcludesFile = /later\n",
        )?;
        assert_eq!(excludes_file(&env), Some(PathBuf::from("/later")));
        // ~/.gitconfig is read after the XDG config, and overrides it.
        put(
            &home.join(".config/git/config"),
            "[core]\nexcludesfile = /xdg\n",
        )?;
        assert_eq!(excludes_file(&env), Some(PathBuf::from("/later")));
        std::fs::remove_file(home.join(".gitconfig"))?;
        assert_eq!(excludes_file(&env), Some(PathBuf::from("/xdg")));
        // `$GIT_CONFIG_GLOBAL` replaces both; the system config comes first and is overridden.
        put(&home.join("sys"), "[core]\nexcludesfile = /sys\n")?;
        put(&home.join("glob"), "[user]\nname = x\n")?;
        let env = ConfigEnv {
            global: Some(home.join("glob")),
            system: Some(home.join("sys")),
            ..env_at(home)
        };
        assert_eq!(excludes_file(&env), Some(PathBuf::from("/sys")));
        let quiet = ConfigEnv {
            no_system: true,
            ..env.clone()
        };
        assert_eq!(excludes_file(&quiet), Some(home.join(".config/git/ignore")));
        // Set empty: no excludes file at all, not the default.
        put(&home.join("glob"), "[core]\nexcludesfile =\n")?;
        assert_eq!(excludes_file(&env), None);
        Ok(())
    }

    /// Conditional includes are not followed, an include cycle ends, a missing include is
    /// skipped, and a key outside `[core]` is not the setting.
    #[test]
    fn includes_that_git_would_not_read_here_are_not_read() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let home = tmp.path();
        let env = env_at(home);
        put(
            &home.join(".gitconfig"),
            "[includeIf \"gitdir:~/work/\"]\n\tpath = work.inc\n[include]\n\tpath = self\n\
             \tpath = missing.inc\n[other]\nexcludesfile = /other\n",
        )?;
        put(&home.join("work.inc"), "[core]\nexcludesfile = /work\n")?;
        put(&home.join("self"), "[include]\npath = ~/.gitconfig\n")?;
        assert_eq!(excludes_file(&env), Some(home.join(".config/git/ignore")));
        Ok(())
    }
}
