//! Review of the session's reading paths: symlinks that leave a mount, kept JSON after loads,
//! forks and failed commits.

use std::fs;
use std::path::PathBuf;

use strata::Error;
use strata::index::Settings;
use strata::resolve::MountMapping;
use strata::session::{Session, SessionOptions};
use strata::store::Store;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A canonical temporary root holding a mount directory `work/` and a file outside it.
fn mounted_tree() -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    fs::create_dir(root.join("work"))?;
    fs::write(root.join("secret.txt"), "outside the mount")?;
    Ok((tmp, root))
}

fn mounted_options(root: &std::path::Path) -> SessionOptions {
    SessionOptions {
        mounts: vec![MountMapping::new(
            "/work",
            root.join("work").to_string_lossy().into_owned(),
        )],
        ..SessionOptions::default()
    }
}

/// A file of a mount replaced by a symlink out of the mount is refused by `read`; resume must
/// not read through that link either (it would store the outside file's bytes as the file's).
#[test]
fn resume_does_not_follow_a_symlink_out_of_the_mount() -> TestResult {
    let (_tmp, root) = mounted_tree()?;
    fs::write(root.join("work/a.md"), "inside")?;
    let store = Store::in_memory()?;
    let sid = {
        let mut s = Session::create(&store, &Settings::default(), mounted_options(&root))?;
        s.read("/work/a.md")?;
        s.commit()?;
        s.id().to_string()
    };
    fs::remove_file(root.join("work/a.md"))?;
    std::os::unix::fs::symlink(root.join("secret.txt"), root.join("work/a.md"))?;
    {
        let mut s = Session::load(&store, &Settings::default(), &sid)?;
        let refused = s.read("/work/a.md");
        assert!(
            matches!(refused, Err(Error::InvalidPath { .. })),
            "{refused:?}"
        );
    }
    let (s, _report) = Session::resume(&store, &Settings::default(), &sid)?;
    let id = s.sets().index().ids()[0].clone();
    let version = store.get(&id)?.ok_or("no version")?;
    let content = version
        .object
        .as_ref()
        .and_then(|o| o.content().map(str::to_string));
    assert_ne!(
        content.as_deref(),
        Some("outside the mount"),
        "resume read through the link"
    );
    Ok(())
}

/// Stub activation reads the source like `read` does: not through a link out of the mount.
#[test]
fn stub_activation_does_not_follow_a_symlink_out_of_the_mount() -> TestResult {
    let (_tmp, root) = mounted_tree()?;
    fs::write(root.join("work/b.md"), "inside")?;
    let store = Store::in_memory()?;
    let mut s = Session::create(&store, &Settings::default(), mounted_options(&root))?;
    let id = s.discover(&["/work/b.md"])?[0].id.clone();
    fs::remove_file(root.join("work/b.md"))?;
    std::os::unix::fs::symlink(root.join("secret.txt"), root.join("work/b.md"))?;
    let activated = s.activate(&id);
    assert!(activated.is_err(), "{activated:?}");
    s.commit()?;
    let content = store
        .get(&id)?
        .and_then(|v| v.object.and_then(|o| o.content().map(str::to_string)));
    assert_ne!(content.as_deref(), Some("outside the mount"));
    Ok(())
}

/// Resume agrees with the indexer on what is gone: a file whose directory became a file, and a
/// file that became a directory, are missing on a reachable filesystem, so they get tombstones.
#[test]
fn resume_tombstones_a_file_whose_directory_or_itself_is_replaced() -> TestResult {
    let (_tmp, root) = mounted_tree()?;
    fs::create_dir(root.join("work/d"))?;
    fs::write(root.join("work/d/a.md"), "in a directory")?;
    fs::write(root.join("work/b.md"), "a file")?;
    let store = Store::in_memory()?;
    let sid = {
        let mut s = Session::create(&store, &Settings::default(), mounted_options(&root))?;
        s.read("/work/d/a.md")?;
        s.read("/work/b.md")?;
        s.commit()?;
        s.id().to_string()
    };
    fs::remove_dir_all(root.join("work/d"))?;
    fs::write(root.join("work/d"), "now a file")?;
    fs::remove_file(root.join("work/b.md"))?;
    fs::create_dir(root.join("work/b.md"))?;
    let (_s, report) = Session::resume(&store, &Settings::default(), &sid)?;
    let actions: Vec<(String, strata::index::Action)> = report
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.action))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("/work/d/a.md".to_string(), strata::index::Action::Deleted),
            ("/work/b.md".to_string(), strata::index::Action::Deleted),
        ],
        "{report:?}"
    );
    Ok(())
}
