//! Review of the session's reading paths: symlinks that leave a mount, kept JSON after loads,
//! forks and failed commits.

use std::fs;
use std::path::PathBuf;

use strata::Error;
use strata::Settings;
use strata::Store;
use strata::resolve::MountMapping;
use strata::{Session, SessionOptions};

use crate::support::TestResult;

/// A canonical temporary root holding a mount directory `work/` and a file outside it.
fn mounted_tree() -> TestResult<(tempfile::TempDir, PathBuf)> {
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
    let actions: Vec<(String, strata::Action)> = report
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.action))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("/work/d/a.md".to_string(), strata::Action::Deleted),
            ("/work/b.md".to_string(), strata::Action::Deleted),
        ],
        "{report:?}"
    );
    Ok(())
}

fn call(id: &str) -> strata::ToolcallInput {
    strata::ToolcallInput {
        id: Some(id.to_string()),
        tool: "t".into(),
        args: serde_json::Map::new(),
        args_display: None,
        status: strata::object::ToolStatus::Ok,
        file_refs: None,
        output: format!("out {id}"),
    }
}

/// The stored session document is the canonical JSON of the session's fields (its hash is
/// `Object::session` of them) after every commit.
fn assert_stored_is_fresh(store: &Store, s: &Session) -> TestResult {
    let stored = store
        .get(&format!("session:{}", s.id()))?
        .and_then(|v| v.object)
        .ok_or("no session document")?;
    let fresh = s.document()?;
    assert_eq!(stored.object_hash(), fresh.object_hash(), "{}", s.id());
    assert_eq!(
        stored.metadata_json(),
        strata::hash::canonical_json(&fresh.fields().to_json())?,
    );
    Ok(())
}

/// Tool call ids the runtime chooses hold quotes, backslashes, non-ASCII (controls are
/// refused): the kept
/// JSON of each set stays the canonical JSON through collapse, (re)activation, pins, a load
/// seeded from the stored document, a fork at an old commit, and a commit lost to a second
/// writer.
#[test]
fn kept_set_json_is_canonical_after_loads_forks_and_conflicts() -> TestResult {
    let store = Store::in_memory()?;
    let settings = Settings::default();
    let mut s = Session::create(&store, &settings, SessionOptions::default())?;
    let ids = [
        "q\"uote",
        "back\\slash",
        "tab-like\\t",
        "q2\\\"",
        "é€😀",
        "\u{2028}\u{2029}",
        "],\"chat_ref\":[",
        "plain",
    ];
    s.append_turn(strata::object::Role::User, "go".into(), vec![])?;
    for id in &ids[..4] {
        s.record_toolcall(call(id))?;
    }
    s.pin(ids[1])?;
    let early = s.commit()?.ok_or("no commit")?.tx_id;
    assert_stored_is_fresh(&store, &s)?;
    for (n, id) in ids[4..].iter().enumerate() {
        s.append_turn(strata::object::Role::Assistant, format!("turn {n}"), vec![])?;
        s.record_toolcall(call(id))?;
        s.record_toolcall(call(&format!("{id}#{n}")))?;
    }
    s.deactivate(ids[6])?;
    s.activate(ids[0])?;
    s.unpin(ids[1])?;
    s.pin(ids[2])?;
    s.commit()?;
    assert_stored_is_fresh(&store, &s)?;

    let mut loaded = Session::load(&store, &settings, s.id())?;
    loaded.activate(ids[6])?;
    loaded.deactivate(ids[0])?;
    loaded.commit()?;
    assert_stored_is_fresh(&store, &loaded)?;

    let mut fork = Session::fork(&store, &settings, s.id(), Some(early), None)?;
    assert_stored_is_fresh(&store, &fork)?;
    fork.activate(ids[1])?;
    fork.unpin(ids[1])?;
    fork.commit()?;
    assert_stored_is_fresh(&store, &fork)?;

    // `s` lost the race to `loaded`: its commit is a conflict and nothing of it is written.
    s.pin(ids[4])?;
    let lost = s.commit();
    assert!(matches!(lost, Err(Error::Conflict { .. })), "{lost:?}");
    assert_stored_is_fresh(&store, &loaded)?;
    let mut again = Session::load(&store, &settings, s.id())?;
    again.pin(ids[4])?;
    again.commit()?;
    assert_stored_is_fresh(&store, &again)?;
    Ok(())
}

/// A stored session document whose sets repeat an id (written by another tool: `Object::session`
/// accepts it) loads as the deduplicated sets; the next commit's document must still be the
/// canonical JSON of the sets it holds, not the stored text with the duplicate kept.
#[test]
fn a_stored_document_with_a_repeated_id_loads_and_commits_canonically() -> TestResult {
    let store = Store::in_memory()?;
    let settings = Settings::default();
    let mut s = Session::create(&store, &settings, SessionOptions::default())?;
    s.append_turn(strata::object::Role::User, "go".into(), vec![])?;
    let id = s.record_toolcall(call("tc-1"))?;
    s.commit()?;
    let sid = s.id().to_string();
    let mut fields = match s.document()?.fields() {
        strata::object::Fields::Session(f) => f.clone(),
        other => return Err(format!("not a session: {other:?}").into()),
    };
    std::sync::Arc::make_mut(&mut fields.active_set).push(id.clone());
    std::sync::Arc::make_mut(&mut fields.metadata_pool).push(id.clone());
    store.transact(
        vec![strata::Op::put(strata::object::Object::session(fields)?)],
        strata::Origin::Session,
    )?;
    let mut loaded = Session::load(&store, &settings, &sid)?;
    assert_eq!(loaded.sets().active().ids(), std::slice::from_ref(&id));
    loaded.record_toolcall(call("tc-2"))?;
    loaded.commit()?;
    assert_stored_is_fresh(&store, &loaded)?;
    Ok(())
}

/// Runs the real binary on `store`; its stdout, or an error with its stderr.
fn strata_out(store: &std::path::Path, args: &[&str]) -> TestResult<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("STRATA_STORE")
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "strata {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The reading commands open the store read-only and resolve skip-delta session documents and
/// suffix-record transcripts at every old commit as the library rendered them then.
#[test]
fn reading_commands_show_every_old_commit_of_a_delta_stored_session() -> TestResult {
    let dir = tempfile::tempdir()?;
    let settings = Settings::default();
    let mut expected: Vec<(u64, String, String)> = Vec::new();
    let sid = {
        let store = Store::create(dir.path())?;
        let mut s = Session::create(&store, &settings, SessionOptions::default())?;
        s.append_turn(strata::object::Role::User, "x".repeat(3000), vec![])?;
        for n in 0..40 {
            s.record_toolcall(call(&format!("seed-{n}")))?;
        }
        for n in 0..24 {
            if n > 0 {
                s.append_turn(strata::object::Role::Assistant, format!("turn {n}"), vec![])?;
                s.record_toolcall(call(&format!("call-{n}")))?;
            }
            let tx = s.commit()?.ok_or("no commit")?.tx_id.0;
            let render = s.render(&strata::RenderOptions::default())?;
            let chat = store
                .get(&format!("chat:{}", s.id()))?
                .and_then(|v| v.object)
                .and_then(|o| o.content().map(str::to_string))
                .ok_or("no chat")?;
            expected.push((tx, render, chat));
        }
        s.id().to_string()
    };
    let history: serde_json::Value = serde_json::from_str(&strata_out(
        dir.path(),
        &["session", "history", &sid, "--json"],
    )?)?;
    assert_eq!(
        history["commits"].as_array().map(Vec::len),
        Some(expected.len() + 1),
        "create and the 24 commits"
    );
    for (tx, render, chat) in &expected {
        let tx = tx.to_string();
        let rendered: serde_json::Value = serde_json::from_str(&strata_out(
            dir.path(),
            &["session", "render", &sid, "--as-of-tx", &tx, "--json"],
        )?)?;
        assert_eq!(
            rendered["text"].as_str().map(without_nonce),
            Some(without_nonce(render)),
            "tx {tx}"
        );
        let cat = strata_out(
            dir.path(),
            &["cat", &format!("chat:{sid}"), "--as-of-tx", &tx],
        )?;
        assert_eq!(
            cat.trim_end_matches('\n'),
            chat.trim_end_matches('\n'),
            "tx {tx}"
        );
        strata_out(dir.path(), &["session", "show", &sid, "--as-of-tx", &tx])?;
        strata_out(
            dir.path(),
            &["show", &format!("session:{sid}"), "--as-of-tx", &tx],
        )?;
    }
    let chat_history: serde_json::Value = serde_json::from_str(&strata_out(
        dir.path(),
        &["history", &format!("chat:{sid}"), "--json"],
    )?)?;
    let versions = chat_history
        .as_array()
        .or_else(|| chat_history["versions"].as_array())
        .map(Vec::len);
    assert_eq!(
        versions,
        Some(expected.len() + 1),
        "the empty chat and 24: {chat_history}"
    );
    let ls = strata_out(dir.path(), &["session", "ls"])?;
    assert!(ls.contains(&sid), "{ls}");
    Ok(())
}

/// `text` with every render nonce (`nonce=` and 16 hex digits) replaced by `nonce=N`: each
/// render makes a fresh one.
fn without_nonce(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("nonce=") {
        let (head, tail) = rest.split_at(at + "nonce=".len());
        out.push_str(head);
        let hex = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        out.push('N');
        rest = &tail[hex..];
    }
    out.push_str(rest);
    out
}
