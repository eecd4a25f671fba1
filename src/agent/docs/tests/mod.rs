//! End-to-end tests of the docs tools over fixture trees made in temporary directories, ported
//! from docs-mcp's suites (ListDocumentationFiles, MultiDirectory, TableOfContents,
//! SectionTableOfContents, ReadSections, Search, ToolIntegration, CLIConfiguration,
//! ConfigurationIntegration). Each test drives the tools through `call_tool` with raw JSON
//! arguments, as the MCP adapter will, and checks the exact text.

mod list;
mod read;
mod search;
mod toc;
mod tools;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::{DocsConfig, DocsLibrary};

/// A temporary documentation tree.
pub struct Fixture {
    dir: TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Writes `contents` at `relative` (creating directories).
    pub fn file(&self, relative: &str, contents: &str) -> &Self {
        let path = self.dir.path().join(relative);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, contents).expect("write");
        self
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn root(&self) -> String {
        path_string(self.dir.path())
    }

    /// A library over the whole tree with the default limits.
    pub fn library(&self) -> DocsLibrary {
        self.library_with(&[])
    }

    /// A library over the whole tree with extra command-line arguments.
    pub fn library_with(&self, extra: &[&str]) -> DocsLibrary {
        let mut args = vec!["--docs-path".to_owned(), self.root()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        DocsLibrary::open(DocsConfig::from_args_and_env(&args, |_| None))
    }
}

pub fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Calls a tool with JSON arguments and returns the text.
pub fn call(lib: &DocsLibrary, tool: &str, args: Value) -> String {
    lib.call_tool(tool, &args).text
}

/// Calls a tool and parses its JSON result.
pub fn call_json(lib: &DocsLibrary, tool: &str, args: Value) -> Value {
    let text = call(lib, tool, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The `id`s of a JSON array of sections.
pub fn ids(sections: &Value) -> Vec<String> {
    sections
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect()
}
