//! `DocsConfig`: the documentation directories and the table-of-contents limits, from command-line
//! arguments, environment variables and defaults, with docs-mcp's precedence (CLI > env >
//! defaults).
//!
//! Uses `js`.
//!
//! - CLI: `--docs-path DIR` / `-d DIR` (repeatable; always takes the next argument),
//!   `--max-headers N`, `--max-toc-depth N` (the next argument is taken only when it parses as
//!   an integer greater than zero; otherwise it is read as an argument of its own). Anything else
//!   is ignored.
//! - Environment: `DOCS_PATH` (comma-separated, trimmed, empty parts dropped), `MAX_HEADERS`,
//!   `MAX_TOC_DEPTH` (ignored unless greater than zero).
//! - Defaults: `./docs`, 25 headers, depth 3.
//!
//! The paths of the source that wins are then trimmed and blank ones dropped; when none remain the
//! path is `./docs`, even if a lower-priority source had some.

use super::js::{js_trim, parse_positive_int};

/// The default documentation directory.
pub const DEFAULT_DOCS_PATH: &str = "./docs";
/// The default `maxHeaders`: how many sections a table of contents shows at most.
pub const DEFAULT_MAX_HEADERS: usize = 25;
/// The default `maxTocDepth`: the deepest header level `table_of_contents` shows.
pub const DEFAULT_MAX_TOC_DEPTH: usize = 3;

/// The configuration of docs mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocsConfig {
    /// The documentation directories, in priority order (they decide the file ids).
    pub documentation_paths: Vec<String>,
    /// The most sections a table of contents shows (level 1 and phase 1 may exceed it).
    pub max_headers: usize,
    /// The deepest header level `table_of_contents` shows.
    pub max_toc_depth: usize,
}

impl Default for DocsConfig {
    fn default() -> Self {
        Self {
            documentation_paths: vec![DEFAULT_DOCS_PATH.to_owned()],
            max_headers: DEFAULT_MAX_HEADERS,
            max_toc_depth: DEFAULT_MAX_TOC_DEPTH,
        }
    }
}

impl DocsConfig {
    /// Builds the configuration from `args` (the arguments after the command name, as
    /// `process.argv.slice(2)` gives them to the original) and `env` (a variable lookup, such as
    /// `|name| std::env::var(name).ok()`).
    pub fn from_args_and_env<S, E>(args: &[S], env: E) -> Self
    where
        S: AsRef<str>,
        E: Fn(&str) -> Option<String>,
    {
        let mut config = Self::default();
        let mut paths: Vec<String> = config.documentation_paths.clone();

        if let Some(value) = env("DOCS_PATH") {
            paths = value
                .split(',')
                .map(|p| js_trim(p).to_owned())
                .filter(|p| !p.is_empty())
                .collect();
        }
        if let Some(n) = env("MAX_HEADERS").as_deref().and_then(parse_positive_int) {
            config.max_headers = n;
        }
        if let Some(n) = env("MAX_TOC_DEPTH").as_deref().and_then(parse_positive_int) {
            config.max_toc_depth = n;
        }

        let cli = CommandLine::parse(args);
        if let Some(cli_paths) = cli.docs_paths {
            paths = cli_paths;
        }
        if let Some(n) = cli.max_headers {
            config.max_headers = n;
        }
        if let Some(n) = cli.max_toc_depth {
            config.max_toc_depth = n;
        }

        paths = paths
            .iter()
            .map(|p| js_trim(p).to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        if paths.is_empty() {
            paths.push(DEFAULT_DOCS_PATH.to_owned());
        }
        config.documentation_paths = paths;
        config
    }

    /// The configuration when docs mode is asked for, else `None`: it is asked for when the
    /// command line names a directory (`--docs-path DIR` or `-d DIR`) or `DOCS_PATH` is set.
    pub fn requested<S, E>(args: &[S], env: E) -> Option<Self>
    where
        S: AsRef<str>,
        E: Fn(&str) -> Option<String>,
    {
        let asked = CommandLine::parse(args).docs_paths.is_some() || env("DOCS_PATH").is_some();
        asked.then(|| Self::from_args_and_env(args, env))
    }
}

/// What the command line sets.
#[derive(Default)]
struct CommandLine {
    docs_paths: Option<Vec<String>>,
    max_headers: Option<usize>,
    max_toc_depth: Option<usize>,
}

impl CommandLine {
    fn parse<S: AsRef<str>>(args: &[S]) -> Self {
        let mut cli = Self::default();
        let mut i = 0;
        while i < args.len() {
            let next = args.get(i + 1).map(AsRef::as_ref);
            match args[i].as_ref() {
                "--docs-path" | "-d" => {
                    if let Some(path) = next {
                        cli.docs_paths
                            .get_or_insert_with(Vec::new)
                            .push(path.to_owned());
                        i += 1;
                    }
                }
                "--max-headers" => {
                    if let Some(n) = next.and_then(parse_positive_int) {
                        cli.max_headers = Some(n);
                        i += 1;
                    }
                }
                "--max-toc-depth" => {
                    if let Some(n) = next.and_then(parse_positive_int) {
                        cli.max_toc_depth = Some(n);
                        i += 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        cli
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(args: &[&str], env: &[(&str, &str)]) -> DocsConfig {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        DocsConfig::from_args_and_env(args, |name| env.get(name).cloned())
    }

    #[test]
    fn defaults() {
        assert_eq!(config(&[], &[]), DocsConfig::default());
        assert_eq!(
            DocsConfig::default(),
            DocsConfig {
                documentation_paths: vec!["./docs".into()],
                max_headers: 25,
                max_toc_depth: 3
            }
        );
    }

    #[test]
    fn cli_beats_env_beats_defaults() {
        let env = [
            ("DOCS_PATH", "/env/a, /env/b ,,"),
            ("MAX_HEADERS", "8"),
            ("MAX_TOC_DEPTH", "2"),
        ];
        let c = config(&[], &env);
        assert_eq!(c.documentation_paths, ["/env/a", "/env/b"]);
        assert_eq!((c.max_headers, c.max_toc_depth), (8, 2));
        let c = config(
            &[
                "--docs-path",
                "/cli/a",
                "-d",
                "/cli/b",
                "--max-headers",
                "12",
                "--max-toc-depth",
                "5",
            ],
            &env,
        );
        assert_eq!(c.documentation_paths, ["/cli/a", "/cli/b"]);
        assert_eq!((c.max_headers, c.max_toc_depth), (12, 5));
        // Only what the CLI sets overrides the environment.
        let c = config(&["--max-headers", "40"], &env);
        assert_eq!(c.documentation_paths, ["/env/a", "/env/b"]);
        assert_eq!((c.max_headers, c.max_toc_depth), (40, 2));
    }

    #[test]
    fn invalid_numbers_are_ignored() {
        let c = config(
            &["--max-headers", "0", "--max-toc-depth", "abc"],
            &[("MAX_HEADERS", "-3")],
        );
        assert_eq!((c.max_headers, c.max_toc_depth), (25, 3));
        let c = config(&["--max-toc-depth", "-1"], &[("MAX_TOC_DEPTH", "4")]);
        assert_eq!(c.max_toc_depth, 4);
        // parseInt semantics.
        let c = config(&["--max-headers", "7abc"], &[]);
        assert_eq!(c.max_headers, 7);
        // An invalid value is read again as an argument of its own.
        let c = config(&["--max-headers", "-d", "/x"], &[]);
        assert_eq!(
            (c.max_headers, c.documentation_paths.as_slice()),
            (25, ["/x".to_owned()].as_slice())
        );
    }

    #[test]
    fn unknown_arguments_are_ignored() {
        let c = config(
            &["--verbose", "-d", "/docs", "extra", "--pretty-print"],
            &[],
        );
        assert_eq!(c.documentation_paths, ["/docs"]);
        // A flag without its value is ignored too.
        assert_eq!(config(&["-d"], &[]), DocsConfig::default());
    }

    #[test]
    fn docs_mode_is_requested_by_a_path_on_the_command_line_or_docs_path() {
        let requested = |args: &[&str], env: &[(&str, &str)]| {
            let env: HashMap<String, String> = env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            DocsConfig::requested(args, |name| env.get(name).cloned())
        };
        assert_eq!(requested(&[], &[]), None);
        assert_eq!(
            requested(&["--max-headers", "4", "-d"], &[("MAX_HEADERS", "3")]),
            None
        );
        let c = requested(&["-d", "/a", "--max-headers", "4"], &[]).expect("docs mode");
        assert_eq!(
            (c.documentation_paths.as_slice(), c.max_headers),
            (["/a".to_owned()].as_slice(), 4)
        );
        let c = requested(&["--docs-path", "/b"], &[]).expect("docs mode");
        assert_eq!(c.documentation_paths, ["/b"]);
        let c = requested(&[], &[("DOCS_PATH", "/e1,/e2")]).expect("docs mode");
        assert_eq!(c.documentation_paths, ["/e1", "/e2"]);
        // A blank DOCS_PATH still asks for docs mode, over the default directory.
        let c = requested(&[], &[("DOCS_PATH", "")]).expect("docs mode");
        assert_eq!(c.documentation_paths, ["./docs"]);
    }

    #[test]
    fn blank_paths_fall_back_to_the_default() {
        assert_eq!(
            config(&[], &[("DOCS_PATH", " , ")]).documentation_paths,
            ["./docs"]
        );
        assert_eq!(
            config(&[], &[("DOCS_PATH", "")]).documentation_paths,
            ["./docs"]
        );
        // Blank CLI paths still win over the environment, then fall back to the default.
        let c = config(&["-d", "  "], &[("DOCS_PATH", "/env")]);
        assert_eq!(c.documentation_paths, ["./docs"]);
        let c = config(&["-d", " /a ", "-d", ""], &[]);
        assert_eq!(c.documentation_paths, ["/a"]);
    }
}
