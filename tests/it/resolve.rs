//! The mount resolver through the public API: seed 003's resolver cases, a table of rejected paths
//! with their exact messages, real symlinks in temp dirs, serde and CLI forms, and properties.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::path::Path;

use proptest::prelude::*;
use strata::resolve::{self, ResolvedPath};
use strata::{Error, FilesystemResolver, MountMapping, Result};

/// The seed's typical sandbox: two bind mounts on the host, everything else in the container.
fn sandbox() -> Result<FilesystemResolver> {
    FilesystemResolver::with_machine_id(
        vec![
            MountMapping::new("/workspace", "/home/abaris/.openclaw/workspaces/dev")
                .on_filesystem("host-machine-xyz"),
            MountMapping::new("/shared", "/mnt/shared-drive")
                .on_filesystem("host-machine-xyz")
                .as_read_only(),
        ],
        "container-overlay-abc",
        "host-machine-xyz",
    )
}

/// A resolver whose mounts all live on `host`, the machine, with unmapped paths on `container`.
fn resolver(mounts: &[(&str, &str)]) -> Result<FilesystemResolver> {
    let mounts = mounts
        .iter()
        .map(|(agent, canonical)| MountMapping::new(*agent, *canonical).on_filesystem("host"))
        .collect();
    FilesystemResolver::with_machine_id(mounts, "container", "host")
}

#[test]
fn longest_prefix_match_against_mount_mappings() -> Result<()> {
    let resolved = sandbox()?.resolve("/workspace/src/main.ts")?;
    assert_eq!(
        resolved,
        ResolvedPath {
            agent_path: "/workspace/src/main.ts".into(),
            filesystem_id: "host-machine-xyz".into(),
            canonical_path: "/home/abaris/.openclaw/workspaces/dev/src/main.ts".into(),
            open_path: "/home/abaris/.openclaw/workspaces/dev/src/main.ts".into(),
            mount: Some(0),
            read_only: false,
            watchable: true,
        }
    );
    Ok(())
}

#[test]
fn no_match_keeps_path_on_default_filesystem() -> Result<()> {
    let resolved = sandbox()?.resolve("/tmp/scratch.txt")?;
    assert_eq!(resolved.filesystem_id, "container-overlay-abc");
    assert_eq!(resolved.canonical_path, "/tmp/scratch.txt");
    assert_eq!(resolved.mount, None);
    assert!(!resolved.watchable);
    Ok(())
}

#[test]
fn nested_exact_and_multiple_mounts() -> Result<()> {
    let r = sandbox()?;
    assert_eq!(
        r.resolve("/workspace/src/components/Button/index.tsx")?
            .canonical_path,
        "/home/abaris/.openclaw/workspaces/dev/src/components/Button/index.tsx"
    );
    let exact = r.resolve("/workspace")?;
    assert_eq!(
        exact.canonical_path,
        "/home/abaris/.openclaw/workspaces/dev"
    );
    assert_eq!(exact.mount, Some(0));
    let shared = r.resolve("/shared/data.json")?;
    assert_eq!(shared.canonical_path, "/mnt/shared-drive/data.json");
    assert_eq!((shared.mount, shared.read_only), (Some(1), true));
    assert_eq!(r.resolve("/tmp/file.txt")?.canonical_path, "/tmp/file.txt");
    Ok(())
}

#[test]
fn longer_prefix_wins() -> Result<()> {
    // Given in both orders: the order of the mounts must not matter.
    for mounts in [
        [
            ("/workspace", "/general/workspace"),
            ("/workspace/special", "/special/location"),
        ],
        [
            ("/workspace/special", "/special/location"),
            ("/workspace", "/general/workspace"),
        ],
    ] {
        let r = resolver(&mounts)?;
        assert_eq!(
            r.resolve("/workspace/special/file.ts")?.canonical_path,
            "/special/location/file.ts"
        );
        assert_eq!(
            r.resolve("/workspace/specialist/f")?.canonical_path,
            "/general/workspace/specialist/f"
        );
        assert_eq!(
            r.resolve("/workspace/file.ts")?.canonical_path,
            "/general/workspace/file.ts"
        );
    }
    Ok(())
}

#[test]
fn similar_prefixes_handled_correctly() -> Result<()> {
    let r = resolver(&[
        ("/workspace", "/home/user/workspace"),
        ("/workspace-other", "/home/other/workspace"),
    ])?;
    assert_eq!(
        r.resolve("/workspace/file.ts")?.canonical_path,
        "/home/user/workspace/file.ts"
    );
    assert_eq!(
        r.resolve("/workspace-other/file.ts")?.canonical_path,
        "/home/other/workspace/file.ts"
    );
    // `/work` must not capture `/workspace`.
    let r = resolver(&[("/work", "/data/work")])?;
    let workspace = r.resolve("/workspace/a")?;
    assert_eq!(
        (workspace.canonical_path.as_str(), workspace.mount),
        ("/workspace/a", None)
    );
    assert_eq!(
        r.reverse_resolve("host", "/data/workspace/a"),
        "/data/workspace/a"
    );
    Ok(())
}

#[test]
fn handles_root_mount() -> Result<()> {
    let r = resolver(&[("/", "/host/root")])?;
    assert_eq!(
        r.resolve("/any/path")?.canonical_path,
        "/host/root/any/path"
    );
    assert_eq!(r.resolve("/")?.canonical_path, "/host/root");
    assert_eq!(
        r.reverse_resolve("host", "/host/root/any/path"),
        "/any/path"
    );
    assert_eq!(r.reverse_resolve("host", "/host/root"), "/");
    // A canonical root: no double slash either way.
    let r = resolver(&[("/sandbox", "/")])?;
    assert_eq!(
        r.resolve("/sandbox/etc/hosts")?.canonical_path,
        "/etc/hosts"
    );
    assert_eq!(r.resolve("/sandbox")?.canonical_path, "/");
    assert_eq!(
        r.reverse_resolve("host", "/etc/hosts"),
        "/sandbox/etc/hosts"
    );
    Ok(())
}

#[test]
fn handles_trailing_and_double_slashes() -> Result<()> {
    let r = resolver(&[("/workspace/", "/home/user/dev/")])?;
    for path in [
        "/workspace/file.ts",
        "/workspace//file.ts",
        "//workspace/./file.ts/",
        "/workspace/x/../file.ts",
    ] {
        assert_eq!(
            r.resolve(path)?.canonical_path,
            "/home/user/dev/file.ts",
            "{path}"
        );
        assert_eq!(r.resolve(path)?.agent_path, "/workspace/file.ts", "{path}");
    }
    assert_eq!(r.mounts()[0].agent_prefix, "/workspace");
    assert_eq!(r.mounts()[0].canonical_prefix, "/home/user/dev");
    Ok(())
}

#[test]
fn reverse_translation() -> Result<()> {
    let r = resolver(&[("/workspace", "/home/user/project")])?;
    // No match, or a match on another filesystem: the canonical path, normalised.
    #[rustfmt::skip]
    let table = [
        ("host", "/home/user/project/src/index.ts", "/workspace/src/index.ts"),
        ("host", "/home/user/project", "/workspace"),
        ("host", "/other/location/file.txt", "/other/location/file.txt"),
        ("elsewhere", "/home/user/project/a", "/home/user/project/a"),
        ("host", "/home/user//project/./a/", "/workspace/a"),
        ("host", "not absolute", "not absolute"),
    ];
    for (filesystem, canonical, agent) in table {
        assert_eq!(
            r.reverse_resolve(filesystem, canonical),
            agent,
            "{filesystem} {canonical}"
        );
    }
    Ok(())
}

#[test]
fn reverse_resolve_skips_shadowed_mounts_and_prefers_longest_canonical() -> Result<()> {
    // `/w/sub` shadows `/data/sub` reached through `/w`: no agent path leads there.
    let r = resolver(&[("/w", "/data"), ("/w/sub", "/other")])?;
    assert_eq!(r.reverse_resolve("host", "/data/sub/f"), "/data/sub/f");
    assert_eq!(r.reverse_resolve("host", "/data/x/f"), "/w/x/f");
    assert_eq!(r.reverse_resolve("host", "/other/f"), "/w/sub/f");
    // Overlapping canonical prefixes: the longer one names the path.
    let r = resolver(&[("/a", "/data"), ("/b", "/data/deep")])?;
    assert_eq!(r.reverse_resolve("host", "/data/deep/f"), "/b/f");
    assert_eq!(r.reverse_resolve("host", "/data/f"), "/a/f");
    Ok(())
}

#[test]
fn watchability() -> Result<()> {
    let r = resolver(&[("/workspace", "/home/user/dev")])?;
    assert!(r.is_watchable("/workspace/main.ts"));
    assert!(!r.is_watchable("/tmp/scratch.txt"));
    assert!(!r.is_watchable("relative/path"));
    // A mount on another machine is not watchable either.
    let r = FilesystemResolver::with_machine_id(
        vec![
            MountMapping::new("/remote", "/srv").on_filesystem("other-machine"),
            MountMapping::new("/local", "/home/me"),
        ],
        "host",
        "host",
    )?;
    assert!(!r.is_watchable("/remote/a"));
    assert!(r.is_watchable("/local/a"));
    assert!(
        r.is_watchable("/tmp/a"),
        "the default filesystem is this machine's"
    );
    // A mount without a filesystem id is on this machine, and `mounts()` says so.
    assert_eq!(r.mounts()[1].filesystem_id.as_deref(), Some("host"));
    assert_eq!(r.resolve("/local/a")?.filesystem_id, "host");
    Ok(())
}

#[test]
fn passthrough_resolver() -> Result<()> {
    let r = FilesystemResolver::host();
    let id = resolve::machine_filesystem_id();
    assert_eq!(
        (r.default_filesystem_id(), r.machine_id()),
        (id.as_str(), id.as_str())
    );
    assert!(r.mounts().is_empty());
    let resolved = r.resolve("/home/user/project/main.ts")?;
    assert_eq!(resolved.canonical_path, "/home/user/project/main.ts");
    assert_eq!(resolved.filesystem_id, id);
    assert!(resolved.watchable, "on the host every path is watchable");
    assert_eq!(
        r.reverse_resolve(&id, &resolved.canonical_path),
        "/home/user/project/main.ts"
    );
    Ok(())
}

#[test]
fn machine_filesystem_id_is_sha256_of_machine_id() {
    let id = resolve::machine_filesystem_id();
    assert_eq!(id.len(), 64);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    if let Ok(text) = std::fs::read_to_string("/etc/machine-id")
        && !text.trim().is_empty()
    {
        assert_eq!(id, strata::hash::sha256(text.trim().as_bytes()).to_hex());
    }
}

#[test]
fn case_insensitive_mount() -> Result<()> {
    let r = FilesystemResolver::with_machine_id(
        vec![MountMapping::new("/Docs", "/Volumes/Shared Docs").as_case_insensitive()],
        "host",
        "host",
    )?;
    let resolved = r.resolve("/Docs/Guides/ReadMe.MD")?;
    assert_eq!(
        resolved.canonical_path,
        "/Volumes/Shared Docs/guides/readme.md"
    );
    assert_eq!(resolved.open_path, "/Volumes/Shared Docs/Guides/ReadMe.MD");
    assert_eq!(
        r.resolve("/Docs/guides/README.md")?.canonical_path,
        resolved.canonical_path
    );
    // Non-ASCII letters fold too.
    assert_eq!(
        r.resolve("/Docs/ÉTÉ.txt")?.canonical_path,
        "/Volumes/Shared Docs/été.txt"
    );
    // The agent prefix itself is matched exactly.
    assert_eq!(r.resolve("/docs/a")?.mount, None);
    // Reverse: the canonical prefix is matched without case, the rest keeps its spelling.
    assert_eq!(
        r.reverse_resolve("host", "/volumes/shared docs/Guides/ReadMe.MD"),
        "/Docs/Guides/ReadMe.MD"
    );
    assert_eq!(
        r.reverse_resolve("host", &resolved.canonical_path),
        "/Docs/guides/readme.md"
    );
    Ok(())
}

#[test]
fn read_only_mount_refuses_writes() -> Result<()> {
    let r = sandbox()?;
    assert!(r.resolve("/shared/data.json")?.read_only);
    assert_eq!(
        r.resolve_for_write("/workspace/a.txt")?.canonical_path,
        "/home/abaris/.openclaw/workspaces/dev/a.txt"
    );
    assert!(!r.resolve_for_write("/tmp/a.txt")?.read_only);
    let err = r
        .resolve_for_write("/shared//data.json")
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some(
            "permission denied: /shared/data.json is on the read-only mount \
             /shared=/mnt/shared-drive:ro:fs=host-machine-xyz; writes through it are refused \
             (mount it without :ro to allow them)"
        )
    );
    assert!(matches!(
        r.resolve_for_write("/shared"),
        Err(Error::PermissionDenied { .. })
    ));
    Ok(())
}

/// The message of `result`'s error, or a note that it succeeded.
fn message<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Ok(value) => format!("unexpectedly accepted: {value:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn rejected_paths_table() -> Result<()> {
    let r = resolver(&[
        ("/work", "/data/work"),
        ("/work/sub", "/data/sub"),
        ("/", "/host/root"),
    ])?;
    let plain = resolver(&[("/work", "/data/work")])?;
    #[rustfmt::skip]
    let table: &[(&FilesystemResolver, &str, &str)] = &[
        (&r, "", r#"invalid path "": path is empty; give an absolute path such as /work/notes.md"#),
        (&r, "work/a.txt", r#"invalid path "work/a.txt": path is relative; give an absolute path starting with /"#),
        (&r, "./a.txt", r#"invalid path "./a.txt": path is relative; give an absolute path starting with /"#),
        (&r, "~/a.txt", r#"invalid path "~/a.txt": path is relative; give an absolute path starting with /"#),
        (&r, "/work/a\0b", r#"invalid path "/work/a\0b": path contains a NUL byte; remove it"#),
        (&r, "\0", r#"invalid path "\0": path contains a NUL byte; remove it"#),
        (&r, "/..", r#"invalid path "/..": `..` climbs above the root /; remove it"#),
        (&plain, "/..", r#"invalid path "/..": `..` climbs above the root /; remove it"#),
        (&plain, "/tmp/../../etc", r#"invalid path "/tmp/../../etc": `..` climbs above the root /; remove it"#),
        (&r, "/work/../etc/passwd", r#"invalid path "/work/../etc/passwd": `..` leaves the mount /work; name the target without climbing out of the mount"#),
        (&r, "/work/a/../../etc", r#"invalid path "/work/a/../../etc": `..` leaves the mount /work; name the target without climbing out of the mount"#),
        (&r, "/work/sub/../x", r#"invalid path "/work/sub/../x": `..` leaves the mount /work/sub; name the target without climbing out of the mount"#),
        (&plain, "/work/./../workspace", r#"invalid path "/work/./../workspace": `..` leaves the mount /work; name the target without climbing out of the mount"#),
    ];
    for (resolver, path, want) in table {
        assert_eq!(message(resolver.resolve(path)), *want, "resolve({path:?})");
    }
    // `..` that stays inside its mount, or outside every mount, is fine.
    assert_eq!(r.resolve("/work/a/../b")?.canonical_path, "/data/work/b");
    assert_eq!(plain.resolve("/tmp/a/../b")?.canonical_path, "/tmp/b");

    let non_utf8 = OsStr::from_bytes(b"/work/caf\xe9.txt");
    #[rustfmt::skip]
    let free: &[(Result<String>, &str)] = &[
        (resolve::normalize_os_path(non_utf8), "invalid path \"/work/caf\u{fffd}.txt\": path is not valid UTF-8; strata keeps UTF-8 paths only, rename the file"),
        (resolve::normalize_path("/a/../.."), r#"invalid path "/a/../..": `..` climbs above the root /; remove it"#),
        (resolve::normalize_path("a/b"), r#"invalid path "a/b": path is relative; give an absolute path starting with /"#),
        (resolve::absolute_path(non_utf8, "/"), "invalid path \"/work/caf\u{fffd}.txt\": path is not valid UTF-8; strata keeps UTF-8 paths only, rename the file"),
        (resolve::absolute_path("a.txt", OsStr::from_bytes(b"/h\xff")), "invalid path \"/h\u{fffd}\": path is not valid UTF-8; strata keeps UTF-8 paths only, rename the file"),
        (resolve::absolute_path("", "/home"), r#"invalid path "": path is empty; give an absolute path such as /work/notes.md"#),
        (resolve::absolute_path("a\0", "/home"), r#"invalid path "a\0": path contains a NUL byte; remove it"#),
        (resolve::absolute_path("../../..", "/home/me"), r#"invalid path "../../..": `..` climbs above the root /; remove it"#),
        (resolve::absolute_path("a.txt", "home"), r#"invalid path "home": the current directory must be absolute to make a relative path absolute"#),
    ];
    for (result, want) in free {
        let got = match result {
            Ok(value) => format!("unexpectedly accepted: {value}"),
            Err(err) => err.to_string(),
        };
        assert_eq!(got, *want);
    }
    assert!(matches!(
        resolve::normalize_path(""),
        Err(Error::InvalidPath { .. })
    ));
    Ok(())
}

#[test]
fn rejected_mounts_table() {
    #[rustfmt::skip]
    let specs: &[(&str, &str)] = &[
        ("/work", r#"invalid input: mount "/work": there is no `=` between the agent and canonical prefixes; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("work=/data", r#"invalid input: mount "work=/data": agent prefix "work": path is relative; give an absolute path starting with /; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=", r#"invalid input: mount "/work=": canonical prefix "": path is empty; give an absolute path such as /work/notes.md; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=/data:rx", r#"invalid input: mount "/work=/data:rx": unknown option "rx" (known: ro, rw, ci, fs=ID); write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=/data:ro:rw", r#"invalid input: mount "/work=/data:ro:rw": it is marked both `ro` and `rw`; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=/data:fs=", r#"invalid input: mount "/work=/data:fs=": `fs=` needs a filesystem id; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=/data:fs=a:fs=b", r#"invalid input: mount "/work=/data:fs=a:fs=b": `fs=` is given twice; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
        ("/work=/../x", r#"invalid input: mount "/work=/../x": canonical prefix "/../x": `..` climbs above the root /; remove it; write a mount as AGENT=CANONICAL[:ro][:ci][:fs=ID], e.g. /work=/home/me/project:ro"#),
    ];
    for (spec, want) in specs {
        assert_eq!(message(spec.parse::<MountMapping>()), *want, "{spec}");
    }
    #[rustfmt::skip]
    let configs: &[(Vec<MountMapping>, &str, &str)] = &[
        (vec![MountMapping::new("/w", "/a"), MountMapping::new("/w/", "/b")], "d",
         "invalid input: mounts /w=/a:fs=m and /w=/b:fs=m share the agent prefix /w; keep one"),
        (vec![MountMapping::new("w", "/a")], "d",
         r#"invalid input: mount w=/a: agent prefix "w": path is relative; give an absolute path starting with /"#),
        (vec![MountMapping::new("/w", "/a").on_filesystem(" ")], "d",
         "invalid input: mount /w=/a:fs= : the filesystem id is empty; leave it out to mean this machine"),
        (vec![], "",
         "invalid input: the default filesystem id is empty; pass this machine's (machine_filesystem_id) or the runtime's"),
    ];
    for (mounts, default, want) in configs {
        assert_eq!(
            message(FilesystemResolver::with_machine_id(
                mounts.clone(),
                *default,
                "m"
            )),
            *want
        );
    }
}

#[test]
fn mount_serde_and_cli_forms() -> Result<()> {
    let mount = MountMapping::new("/work", "/home/me/p").as_read_only();
    let json = serde_json::to_string(&mount).map_err(|e| Error::invalid_input(e.to_string()))?;
    assert_eq!(
        json,
        r#"{"agent_prefix":"/work","canonical_prefix":"/home/me/p","read_only":true}"#
    );
    let back: MountMapping =
        serde_json::from_str(&json).map_err(|e| Error::invalid_input(e.to_string()))?;
    assert_eq!(back, mount);
    let full = r#"{"agent_prefix":"/w","canonical_prefix":"/c","filesystem_id":"f","case_insensitive":true,"read_only":false}"#;
    let parsed: MountMapping =
        serde_json::from_str(full).map_err(|e| Error::invalid_input(e.to_string()))?;
    assert_eq!(
        parsed,
        MountMapping::new("/w", "/c")
            .on_filesystem("f")
            .as_case_insensitive()
    );
    assert_eq!(parsed.to_string(), "/w=/c:ci:fs=f");
    let typo = serde_json::from_str::<MountMapping>(
        r#"{"agent_prefix":"/w","canonical_prefix":"/c","readonly":true}"#,
    );
    assert!(typo.is_err_and(|e| e.to_string().contains("unknown field `readonly`")));
    assert_eq!(
        "/w=/c:ro".parse::<MountMapping>()?,
        MountMapping::new("/w", "/c").as_read_only()
    );
    Ok(())
}

#[test]
fn absolute_paths_against_a_current_directory() -> Result<()> {
    for (path, cwd, want) in [
        ("./README.md", "/home/me/proj", "/home/me/proj/README.md"),
        ("README.md", "/home/me/proj/", "/home/me/proj/README.md"),
        ("../other/a.rs", "/home/me/proj", "/home/me/other/a.rs"),
        (".", "/home/me", "/home/me"),
        ("/etc//hosts/", "relative-cwd-is-not-used", "/etc/hosts"),
        ("a//b/./c/", "/", "/a/b/c"),
    ] {
        assert_eq!(resolve::absolute_path(path, cwd)?, want, "{path} in {cwd}");
    }
    // It does not touch the filesystem: a path that does not exist is fine.
    assert_eq!(
        resolve::absolute_path("no/such/file", "/nonexistent")?,
        "/nonexistent/no/such/file"
    );
    Ok(())
}

/// A temp dir holding a mounted project and a secret directory beside it, with symlinks.
struct SymlinkTree {
    dir: tempfile::TempDir,
    resolver: FilesystemResolver,
}

impl SymlinkTree {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("making a temp dir", e))?;
        let root = dir.path();
        let io = |what: &str, result: std::io::Result<()>| result.map_err(|e| Error::io(what, e));
        io("mkdir", std::fs::create_dir_all(root.join("proj/sub")))?;
        io("mkdir", std::fs::create_dir_all(root.join("secret")))?;
        io("write", std::fs::write(root.join("proj/sub/ok.txt"), "ok"))?;
        io(
            "write",
            std::fs::write(root.join("secret/key.pem"), "secret"),
        )?;
        io("link", symlink("sub", root.join("proj/inside")))?;
        io("link", symlink("sub/ok.txt", root.join("proj/file_link")))?;
        io("link", symlink("../secret", root.join("proj/out")))?;
        io(
            "link",
            symlink(root.join("secret/key.pem"), root.join("proj/abs_out")),
        )?;
        io(
            "link",
            symlink("../secret/new.txt", root.join("proj/dangling_out")),
        )?;
        io(
            "link",
            symlink("sub/new.txt", root.join("proj/dangling_in")),
        )?;
        io("link", symlink("loop_b", root.join("proj/loop_a")))?;
        io("link", symlink("loop_a", root.join("proj/loop_b")))?;
        io("link", symlink("proj", root.join("proj_link")))?;
        let root = resolve::utf8_path(root)?.to_owned();
        let resolver = FilesystemResolver::new(
            vec![
                MountMapping::new("/work", format!("{root}/proj")),
                MountMapping::new("/via_link", format!("{root}/proj_link")),
            ],
            resolve::machine_filesystem_id(),
        )?;
        Ok(SymlinkTree { dir, resolver })
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

#[test]
fn symlinks_inside_a_mount_are_followed() -> Result<()> {
    let tree = SymlinkTree::new()?;
    let r = &tree.resolver;
    let ok = tree.root().join("proj/sub/ok.txt");
    assert_eq!(r.open_path_checked("/work/sub/ok.txt")?, ok);
    assert_eq!(r.open_path_checked("/work/inside/ok.txt")?, ok);
    assert_eq!(r.open_path_checked("/work/file_link")?, ok);
    // A file about to be created, through a dangling link or not, is checked by where it would be.
    assert_eq!(
        r.open_path_checked("/work/dangling_in")?,
        tree.root().join("proj/sub/new.txt")
    );
    assert_eq!(
        r.open_path_checked("/work/new/dir/f.txt")?,
        tree.root().join("proj/new/dir/f.txt")
    );
    // The canonical prefix itself may be a symlink.
    assert_eq!(r.open_path_checked("/via_link/inside/ok.txt")?, ok);
    assert_eq!(
        std::fs::read_to_string(r.open_path_checked("/work/inside/ok.txt")?)
            .ok()
            .as_deref(),
        Some("ok")
    );
    Ok(())
}

#[test]
fn symlinks_out_of_a_mount_are_rejected() -> Result<()> {
    let tree = SymlinkTree::new()?;
    let root = tree.root().display().to_string();
    let out = |agent: &str, target: &str| {
        format!(
            "invalid path \"{agent}\": a symlink leads to {root}/{target}, outside its mount /work ({root}/proj); \
             strata does not follow symlinks out of a mount"
        )
    };
    #[rustfmt::skip]
    let table = [
        ("/work/out/key.pem", out("/work/out/key.pem", "secret/key.pem")),
        ("/work/out", out("/work/out", "secret")),
        ("/work/out/not-yet.txt", out("/work/out/not-yet.txt", "secret/not-yet.txt")),
        ("/work/abs_out", out("/work/abs_out", "secret/key.pem")),
        ("/work/dangling_out", out("/work/dangling_out", "secret/new.txt")),
        ("/work/loop_a", r#"invalid path "/work/loop_a": more than 40 symlinks on the way (a loop?); fix the links"#.to_owned()),
    ];
    for (agent, want) in &table {
        assert_eq!(
            message(tree.resolver.open_path_checked(agent)),
            *want,
            "{agent}"
        );
    }
    Ok(())
}

#[test]
fn paths_on_another_filesystem_cannot_be_opened() -> Result<()> {
    let r = sandbox()?;
    let resolved = r.resolve("/tmp/scratch.txt")?;
    assert_eq!(
        message(r.check_symlinks(&resolved)),
        "invalid path \"/tmp/scratch.txt\": it lies on filesystem container-ov, not on this machine's \
         (host-machine); strata cannot open it, the runtime must supply its contents"
    );
    Ok(())
}

// ---- properties ----

/// Path segments, with the troublesome ones over-represented.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("...".to_owned()),
        Just("a".to_owned()),
        Just("A".to_owned()),
        Just("sub".to_owned()),
        Just("Été".to_owned()),
        "[a-zA-Z0-9 ._-]{1,6}",
    ]
}

fn joined(segments: &[String]) -> String {
    format!("/{}", segments.join("/"))
}

/// A mount set over a small vocabulary, so that prefixes nest, collide in canonical space and
/// share filesystems with the default (agent paths under `/c` then alias canonical ones).
fn mounts() -> impl Strategy<Value = Vec<MountMapping>> {
    // Mostly one or two segments; a root prefix now and then (it captures every path).
    let prefix = prop_oneof![
        1 => Just(Vec::new()),
        7 => prop::collection::vec(prop::sample::select(vec!["w", "sub", "Data"]), 1..3),
    ]
    .prop_map(|segments| format!("/{}", segments.join("/")));
    let mount = (
        prefix.clone(),
        prefix,
        prop::sample::select(vec!["m", "m", "d", "other"]),
        any::<bool>(),
    )
        .prop_map(|(agent, canonical, fs, ci)| {
            let mount = MountMapping::new(agent, format!("/c{}", canonical.trim_end_matches('/')))
                .on_filesystem(fs);
            if ci {
                mount.as_case_insensitive()
            } else {
                mount
            }
        });
    prop::collection::vec(mount, 0..5).prop_map(|mut mounts| {
        // Keep the first mount for each agent prefix: duplicates are rejected by design.
        let mut seen = std::collections::HashSet::new();
        mounts.retain(|m| seen.insert(m.agent_prefix.clone()));
        mounts
    })
}

fn agent_path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::sample::select(vec!["w", "sub", "Data", "c"]).prop_map(str::to_owned),
            1 => segment(),
        ],
        0..7,
    )
    .prop_map(|segments| joined(&segments))
}

proptest! {
    #[test]
    fn normalisation_is_idempotent_and_clean(segments in prop::collection::vec(segment(), 0..8)) {
        let path = joined(&segments);
        if let Ok(normal) = resolve::normalize_path(&path) {
            prop_assert_eq!(resolve::normalize_path(&normal).ok(), Some(normal.clone()));
            prop_assert!(normal.starts_with('/'));
            prop_assert!(normal == "/" || !normal.ends_with('/'));
            prop_assert!(!normal.contains("//"));
            prop_assert!(normal.split('/').skip(1).all(|s| s != "." && s != ".." && !s.is_empty()) || normal == "/");
        } else {
            // Only a `..` above the root is refused for a path built this way.
            let mut depth = 0i32;
            let mut above = false;
            for s in &segments {
                match s.as_str() {
                    "" | "." => {}
                    ".." => { depth -= 1; above |= depth < 0; depth = depth.max(0); }
                    _ => depth += 1,
                }
            }
            prop_assert!(above);
        }
    }

    #[test]
    fn resolution_never_leaves_its_mount(mounts in mounts(), tail in prop::collection::vec(segment(), 0..6), pick in any::<prop::sample::Index>()) {
        prop_assume!(!mounts.is_empty());
        let r = FilesystemResolver::with_machine_id(mounts, "d", "m").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let start = pick.index(r.mounts().len());
        let start_prefix = r.mounts()[start].agent_prefix.clone();
        let path = format!("{}/{}", start_prefix.trim_end_matches('/'), tail.join("/"));
        let Ok(resolved) = r.resolve(&path) else { return Ok(()) };
        // Normalisation is idempotent here too.
        prop_assert_eq!(r.resolve(&resolved.agent_path).ok(), Some(resolved.clone()));
        // It stays under the mount it started in (possibly in a mount nested inside it).
        let start_mount = &r.mounts()[start];
        prop_assert!(under(&resolved.agent_path, &start_mount.agent_prefix), "{} left {}", resolved.agent_path, start_prefix);
        let index = resolved.mount.ok_or_else(|| TestCaseError::fail("a mounted path resolved to no mount"))?;
        let mount = &r.mounts()[index];
        prop_assert!(under(&mount.agent_prefix, &start_mount.agent_prefix));
        prop_assert!(under(&resolved.open_path, &mount.canonical_prefix));
        prop_assert!(under(&resolved.canonical_path, &mount.canonical_prefix));
        prop_assert_eq!(resolve::normalize_path(&resolved.canonical_path).ok(), Some(resolved.canonical_path.clone()));
    }

    #[test]
    fn resolve_after_reverse_resolve_is_the_identity(mounts in mounts(), path in agent_path()) {
        let r = FilesystemResolver::with_machine_id(mounts, "d", "m").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let Ok(resolved) = r.resolve(&path) else { return Ok(()) };
        let agent = r.reverse_resolve(&resolved.filesystem_id, &resolved.canonical_path);
        let again = r.resolve(&agent).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&again.filesystem_id, &resolved.filesystem_id);
        let ci = again.mount.is_some_and(|i| r.mounts()[i].case_insensitive);
        if ci {
            prop_assert_eq!(again.canonical_path.to_lowercase(), resolved.canonical_path.to_lowercase());
        } else {
            prop_assert_eq!(&again.canonical_path, &resolved.canonical_path);
        }
    }

    #[test]
    fn reverse_resolve_names_an_agent_path_that_resolves_back(
        mounts in mounts(),
        fs in prop::sample::select(vec!["m", "d", "other"]),
        tail in prop::collection::vec(prop::sample::select(vec!["w", "sub", "Data", "data", "f"]), 0..5),
    ) {
        // Any canonical path, in the image of resolve or not: a translation reverse_resolve
        // offers must resolve back to it; otherwise it answers with the canonical path itself.
        let r = FilesystemResolver::with_machine_id(mounts, "d", "m").map_err(|e| TestCaseError::fail(e.to_string()))?;
        let canonical = format!("/c/{}", tail.join("/"));
        let canonical = resolve::normalize_path(&canonical).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let agent = r.reverse_resolve(fs, &canonical);
        if agent != canonical {
            let again = r.resolve(&agent).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again.filesystem_id.as_str(), fs);
            let index = again.mount.ok_or_else(|| TestCaseError::fail("a translated path maps through no mount"))?;
            if r.mounts()[index].case_insensitive {
                prop_assert_eq!(again.canonical_path.to_lowercase(), canonical.to_lowercase());
            } else {
                prop_assert_eq!(&again.canonical_path, &canonical);
            }
        }
    }

    #[test]
    fn reverse_resolve_gives_back_the_agent_path_without_aliases(ci in any::<bool>(), tail in prop::collection::vec(segment(), 0..5)) {
        // Disjoint canonical prefixes, nested agent prefixes: every mounted path has one agent name.
        let mount = |agent: &str, canonical: &str| {
            let m = MountMapping::new(agent, canonical);
            if ci { m.as_case_insensitive() } else { m }
        };
        let r = FilesystemResolver::with_machine_id(
            vec![mount("/w", "/srv/w"), mount("/w/sub", "/srv/sub"), mount("/", "/srv/root")],
            "d",
            "m",
        ).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for start in ["/w", "/w/sub", "/x"] {
            let path = format!("{start}/{}", tail.join("/"));
            let Ok(resolved) = r.resolve(&path) else { continue };
            let back = r.reverse_resolve(&resolved.filesystem_id, &resolved.canonical_path);
            if ci {
                prop_assert_eq!(back.to_lowercase(), resolved.agent_path.to_lowercase());
            } else {
                prop_assert_eq!(&back, &resolved.agent_path);
            }
            prop_assert_eq!(r.reverse_resolve(&resolved.filesystem_id, &resolved.open_path), resolved.agent_path);
        }
    }

    #[test]
    fn mount_specs_round_trip(mounts in mounts()) {
        for mount in mounts {
            let text = mount.to_string();
            prop_assert_eq!(text.parse::<MountMapping>().ok(), Some(mount));
        }
    }
}

/// Whether the normalised `path` lies under the normalised `prefix` in whole segments.
fn under(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}
