//! The layering check of `.ci/layering` (DESIGN.md's module table) on this tree and on copies
//! of it with deliberately bad imports: each way of writing an upward import is caught.

use std::path::{Path, PathBuf};
use std::process::Command;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs the check on `src`; `None` when python3 is not installed (then the test says so).
fn layering(src: &Path) -> Result<Option<(bool, String)>, Box<dyn std::error::Error>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/layering");
    let output = match Command::new("python3").arg(script).arg(src).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(Some((
        output.status.success(),
        String::from_utf8(output.stdout)?,
    )))
}

/// Copies `src/` into a temp dir.
fn copy_of_src() -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(tmp.path())
        .status()?;
    assert!(status.success());
    let copy = tmp.path().join("src");
    Ok((tmp, copy))
}

#[test]
fn the_tree_passes_and_every_spelling_of_an_upward_import_fails() -> TestResult {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let Some((ok, out)) = layering(&src)? else {
        eprintln!("skipped: python3 is not installed, the layering check cannot run");
        return Ok(());
    };
    assert!(ok, "the tree itself breaks the layering:\n{out}");
    let cases = [
        (
            "store/ops.rs",
            "use crate::session::Session;",
            "store must not import session",
        ),
        (
            "store/ops.rs",
            "use crate::{hash::Hash, engine::Engine};",
            "store must not import engine",
        ),
        (
            "object/types.rs",
            "use crate::Store;",
            "object must not import store",
        ),
        (
            "index/read.rs",
            "fn f() { let _ = crate::engine::Engine::in_memory(); }",
            "index must not import engine",
        ),
        (
            "store/codec.rs",
            "use super::super::session;",
            "store must not import session",
        ),
        (
            "hash.rs",
            "use crate::object::Object;",
            "hash must not import object",
        ),
        (
            "resolve.rs",
            "use crate::{\n    store::Store,\n};",
            "resolve must not import store",
        ),
    ];
    for (file, line, expected) in cases {
        let (_tmp, copy) = copy_of_src()?;
        let path = copy.join(file);
        let mut text = std::fs::read_to_string(&path)?;
        text.push('\n');
        text.push_str(line);
        text.push('\n');
        std::fs::write(&path, text)?;
        let Some((ok, out)) = layering(&copy)? else {
            return Ok(());
        };
        assert!(!ok, "{line:?} in {file} passed the check");
        assert!(out.contains(expected), "{line:?} in {file}: {out}");
    }
    Ok(())
}
