//! The JSON Schemas of `schema/rpc/`: generated from the engine's types (a committed file that
//! drifts fails, `STRATA_BLESS=1` rewrites them), two per method, and valid for what a real engine
//! and the real binary print.
//!
//! Where the CLI's `--json` prints part of a response, the part is checked against the matching
//! subschema: `show` prints `object` (an envelope of `schema/objects/`), `history` prints
//! `versions`, `fsck` prints `findings`, `mount ls` prints `mounts`. `cat`, `diff`, `evict`,
//! `mount add` and `mount rm` print no JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use jsonschema::Validator;
use serde_json::{Map, Value, json};
use strata::engine::{
    Access, AgentApproveRequest, AgentCallRequest, AgentEntrypointsRequest, AgentPushRequest,
    AgentToolsRequest, AgentWithdrawRequest, Apply, AsOf, BackupRequest, CatRequest, DiffRequest,
    Engine, EvictRequest, FsckRequest, GcRequest, HistoryRequest, IndexRequest, LogRequest,
    LogRunRequest, LsRequest, MigrateRequest, MountAddRequest, MountLsRequest, MountRmRequest,
    RPC_SCHEMA_DIR, Request, SessionDiscoverRequest, SessionForkRequest, SessionHistoryRequest,
    SessionLsRequest, SessionNewRequest, SessionReadRequest, SessionRenderRequest,
    SessionResumeRequest, SessionSetRequest, SessionShowRequest, SessionToolcallRequest,
    SessionTurnRequest, SetOp, ShowRequest, StatsRequest, WatchAddRequest, WatchLsRequest,
    WatchRmRequest, rpc_schemas,
};
use strata::object::ToolStatus;
use strata::resolve::MountMapping;

type Error = Box<dyn std::error::Error>;
type TestResult<T = ()> = Result<T, Error>;

/// The command that rewrites `schema/rpc/`, as the failure messages give it.
const BLESS: &str = "STRATA_BLESS=1 cargo test --test it rpc_schema";

fn rpc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(RPC_SCHEMA_DIR)
}

/// A file's text as committed: pretty JSON and a final newline.
fn file_text(value: &Value) -> TestResult<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// Whether this run rewrites `schema/rpc/` (`STRATA_BLESS=1`).
fn blessing() -> bool {
    std::env::var_os("STRATA_BLESS").is_some_and(|v| v == "1")
}

/// The files [`rpc_schemas`] generates, by name, as they are committed.
fn generated_files() -> TestResult<BTreeMap<String, String>> {
    rpc_schemas()
        .iter()
        .map(|(name, value)| Ok((name.clone(), file_text(value)?)))
        .collect()
}

/// The schema files the other tests check against: those committed, or while blessing those
/// about to be (the files are being rewritten meanwhile).
fn schema_files() -> TestResult<BTreeMap<String, String>> {
    if blessing() {
        generated_files()
    } else {
        committed_files()
    }
}

/// The `.json` files of `schema/rpc/` by name (none when the directory is missing).
fn committed_files() -> TestResult<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let Ok(entries) = fs::read_dir(rpc_dir()) else {
        return Ok(files);
    };
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".json") {
            files.insert(name.to_string(), fs::read_to_string(&path)?);
        }
    }
    Ok(files)
}

/// Where two texts first differ: the line number and both lines.
fn first_difference(committed: &str, generated: &str) -> String {
    let mut committed_lines = committed.lines();
    let mut generated_lines = generated.lines();
    for line in 1.. {
        match (committed_lines.next(), generated_lines.next()) {
            (None, None) => break,
            (c, g) if c == g => {}
            (c, g) => {
                return format!(
                    "line {line}: committed {:?}, generated {:?}",
                    c.unwrap_or("<end>"),
                    g.unwrap_or("<end>")
                );
            }
        }
    }
    "whitespace at the end".into()
}

#[test]
fn committed_rpc_schemas_match_the_types() -> TestResult {
    let generated = generated_files()?;
    let committed = committed_files()?;
    if blessing() {
        let dir = rpc_dir();
        fs::create_dir_all(&dir)?;
        for (name, text) in &generated {
            if committed.get(name) != Some(text) {
                // Written aside, then renamed: tests reading the schemas meanwhile see whole files.
                let aside = dir.join(format!(".{name}.tmp"));
                fs::write(&aside, text)?;
                fs::rename(&aside, dir.join(name))?;
            }
        }
        for name in committed.keys().filter(|n| !generated.contains_key(*n)) {
            fs::remove_file(dir.join(name))?;
        }
        return Ok(());
    }
    let mut drift = Vec::new();
    for (name, text) in &generated {
        match committed.get(name) {
            None => drift.push(format!("{name}: missing")),
            Some(old) if old != text => drift.push(format!(
                "{name}: differs from the types ({})",
                first_difference(old, text)
            )),
            Some(_) => {}
        }
    }
    for name in committed.keys().filter(|n| !generated.contains_key(*n)) {
        drift.push(format!("{name}: no method generates it any more"));
    }
    assert!(
        drift.is_empty(),
        "{RPC_SCHEMA_DIR}/ has drifted from the engine's request and response types:\n  {}\n\
         Run `{BLESS}` to rewrite {RPC_SCHEMA_DIR}/ from the types, then review and commit the diff.",
        drift.join("\n  ")
    );
    Ok(())
}

#[test]
fn every_method_has_its_two_schema_files() -> TestResult {
    let committed = schema_files()?;
    let mut missing = Vec::new();
    for method in Request::METHODS {
        for role in ["params", "result"] {
            let name = format!("{method}.{role}.json");
            match committed.get(&name) {
                None => missing.push(name),
                Some(text) => {
                    let schema: Value = serde_json::from_str(text)?;
                    if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
                        return Err(format!("{name} is not a 2020-12 schema: {e}").into());
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "methods without their schema files in {RPC_SCHEMA_DIR}/: {missing:?}; run `{BLESS}`"
    );
    let index: Value = serde_json::from_str(committed.get("index.json").ok_or("no index.json")?)?;
    let listed: Vec<&str> = index["methods"]
        .as_array()
        .ok_or("index.json has no methods")?
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        listed,
        Request::METHODS,
        "index.json lists other methods; run `{BLESS}`"
    );
    Ok(())
}

/// The envelope schemas of `schema/objects/` by their `$id`, which result schemas refer to.
fn object_schemas() -> TestResult<Vec<(String, Value)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/objects");
    let mut schemas = Vec::new();
    for entry in fs::read_dir(dir)? {
        let schema: Value = serde_json::from_str(&fs::read_to_string(entry?.path())?)?;
        let id = schema["$id"]
            .as_str()
            .ok_or("an object schema without $id")?;
        schemas.push((id.to_string(), schema));
    }
    Ok(schemas)
}

/// Compiles `schema` (2020-12) with the envelope schemas `objects` in its registry.
fn compile(schema: &Value, objects: &[(String, Value)]) -> TestResult<Validator> {
    let registry = jsonschema::Registry::new()
        .extend(objects.iter().map(|(id, s)| (id.as_str(), s)))?
        .prepare()?;
    Ok(jsonschema::draft202012::options()
        .with_registry(&registry)
        .build(schema)?)
}

/// The committed schemas, compiled.
struct Schemas {
    raw: BTreeMap<String, Value>,
    validators: BTreeMap<String, Validator>,
    objects: Vec<(String, Value)>,
}

impl Schemas {
    fn load() -> TestResult<Self> {
        let objects = object_schemas()?;
        let mut raw = BTreeMap::new();
        let mut validators = BTreeMap::new();
        for (name, text) in schema_files()? {
            if name == "index.json" {
                continue;
            }
            let schema: Value = serde_json::from_str(&text)?;
            let validator =
                compile(&schema, &objects).map_err(|e| format!("{name} does not compile: {e}"))?;
            validators.insert(name.clone(), validator);
            raw.insert(name, schema);
        }
        Ok(Schemas {
            raw,
            validators,
            objects,
        })
    }

    /// Checks `instance` against schema file `name`.
    fn check(&self, name: &str, instance: &Value) -> TestResult {
        let validator = self
            .validators
            .get(name)
            .ok_or_else(|| format!("no {name} in {RPC_SCHEMA_DIR}/; run `{BLESS}`"))?;
        errors(validator, name, instance)
    }

    /// Checks `instance` against the subschema at `pointer` of schema file `name` (the part of a
    /// response the CLI prints), with the file's `$defs` beside it.
    fn check_part(&self, name: &str, pointer: &str, instance: &Value) -> TestResult {
        let root = self.raw.get(name).ok_or_else(|| format!("no {name}"))?;
        let mut part = root
            .pointer(pointer)
            .ok_or_else(|| format!("{name} has no {pointer}"))?
            .clone();
        if let (Value::Object(part), Some(defs)) = (&mut part, root.get("$defs")) {
            part.insert("$defs".into(), defs.clone());
        }
        let validator = compile(&part, &self.objects)?;
        errors(&validator, &format!("{name}#{pointer}"), instance)
    }
}

fn errors(validator: &Validator, name: &str, instance: &Value) -> TestResult {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{instance:#} is invalid for {name}: {errors:#?}").into())
    }
}

/// Writes a file and dates its mtime an hour back, so the racy-clean rule does not apply.
fn write(path: &Path, bytes: &[u8]) -> TestResult {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, bytes)?;
    let past = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(path)?
        .set_modified(past)?;
    Ok(())
}

/// A small tree beside a store directory, both in a tempdir.
struct Tree {
    _tmp: tempfile::TempDir,
    tree: PathBuf,
    store: PathBuf,
}

impl Tree {
    fn new() -> TestResult<Self> {
        let tmp = tempfile::tempdir()?;
        let root = fs::canonicalize(tmp.path())?;
        let tree = root.join("tree");
        write(&tree.join("a.txt"), b"alpha\n")?;
        write(&tree.join("src/lib.rs"), b"pub fn one() -> u32 { 1 }\n")?;
        write(&tree.join("img.bin"), &[0, 0x9f, 0x92, 0x96, 0xff, 0])?;
        write(&tree.join(".env"), b"SECRET=hunter2\n")?;
        Ok(Tree {
            _tmp: tmp,
            tree,
            store: root.join("store"),
        })
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tree.join(relative)
    }

    fn cwd(&self) -> Option<String> {
        Some(self.tree.display().to_string())
    }
}

/// An engine whose every call is checked: the serialized request's params against
/// `<method>.params.json`, the response against `<method>.result.json`, both round trips.
struct Checked {
    engine: Engine,
    schemas: Schemas,
    seen: BTreeSet<&'static str>,
}

impl Checked {
    fn call<R: Apply + Clone>(&mut self, request: R) -> TestResult<R::Response> {
        let wire = serde_json::to_value(Into::<Request>::into(request.clone()))?;
        let method = Into::<Request>::into(request.clone()).method();
        assert_eq!(wire["method"], method, "{wire}");
        let params = wire
            .get("params")
            .ok_or_else(|| format!("{wire}: no params"))?;
        self.schemas
            .check(&format!("{method}.params.json"), params)?;
        let back: Request = serde_json::from_value(wire.clone())?;
        assert_eq!(
            serde_json::to_value(back)?,
            wire,
            "{method}: params round trip"
        );

        let response = self
            .engine
            .call(request)
            .map_err(|e| format!("{method} {params}: {e}"))?;
        let result = serde_json::to_value(&response)?;
        self.schemas
            .check(&format!("{method}.result.json"), &result)?;
        let back: R::Response = serde_json::from_value(result.clone())?;
        assert_eq!(
            serde_json::to_value(back)?,
            result,
            "{method}: result round trip"
        );
        self.seen.insert(method);
        Ok(response)
    }
}

#[test]
fn a_real_engine_run_is_valid_for_the_schemas() -> TestResult {
    let t = Tree::new()?;
    let tree = t.tree.display().to_string();
    let mut e = Checked {
        engine: Engine::open(&t.store, Access::Create)?,
        schemas: Schemas::load()?,
        seen: BTreeSet::new(),
    };

    // An empty store: no head, nothing to verify.
    e.call(StatsRequest {})?;
    let log = e.call(LogRequest::default())?;
    assert!(log.head.is_none());
    e.call(FsckRequest::default())?;

    // Index, edit, re-index a relative path, delete.
    let first = e.call(IndexRequest {
        paths: vec![tree.clone()],
        cwd: None,
        threads: None,
    })?;
    assert!(first.denied >= 1, "{first:?}");
    write(&t.path("src/lib.rs"), b"pub fn one() -> u32 { 2 }\n")?;
    e.call(IndexRequest {
        paths: vec!["src".into()],
        cwd: t.cwd(),
        threads: None,
    })?;
    fs::remove_file(t.path("a.txt"))?;
    e.call(IndexRequest {
        paths: vec![tree.clone()],
        cwd: None,
        threads: None,
    })?;

    // The objects and their history.
    let rows = e.call(LsRequest {
        all: true,
        ..LsRequest::default()
    })?;
    let states: BTreeSet<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(
        states,
        BTreeSet::from(["binary", "deleted", "denied", "text"]),
        "{rows:?}"
    );
    e.call(LsRequest {
        prefix: Some("src".into()),
        cwd: t.cwd(),
        ..LsRequest::default()
    })?;
    let backup = e.call(BackupRequest {
        dir: "backup".into(),
        cwd: Some(t.store.with_extension("copies").display().to_string()),
    })?;
    assert!(backup.findings.is_empty(), "{backup:?}");
    let migrated = e.call(MigrateRequest {
        to: "migrated".into(),
        dir: None,
        cwd: Some(t.store.with_extension("copies").display().to_string()),
    })?;
    assert!(
        migrated.findings.is_empty() && migrated.head == backup.head,
        "{migrated:?}"
    );
    for reference in ["src/lib.rs", "img.bin", ".env"] {
        e.call(ShowRequest {
            reference: reference.into(),
            cwd: t.cwd(),
            as_of: AsOf::default(),
        })?;
    }
    e.call(ShowRequest {
        reference: "a.txt".into(),
        cwd: t.cwd(),
        as_of: AsOf {
            as_of_tx: Some(1),
            ..AsOf::default()
        },
    })?;
    let text = e.call(CatRequest {
        reference: "src/lib.rs".into(),
        cwd: t.cwd(),
        as_of: AsOf::default(),
    })?;
    assert!(serde_json::to_value(&text)?.get("text").is_some());
    let bytes = e.call(CatRequest {
        reference: "img.bin".into(),
        cwd: t.cwd(),
        as_of: AsOf::default(),
    })?;
    assert!(serde_json::to_value(&bytes)?.get("base64").is_some());
    for by_tx in [false, true] {
        e.call(HistoryRequest {
            reference: "a.txt".into(),
            cwd: t.cwd(),
            corrections: by_tx,
            by_tx,
            as_of: AsOf::default(),
        })?;
    }
    e.call(DiffRequest {
        reference: "src/lib.rs".into(),
        cwd: t.cwd(),
        ..DiffRequest::default()
    })?;
    e.call(DiffRequest {
        reference: "a.txt".into(),
        cwd: t.cwd(),
        from: Some(1),
        to: Some(3),
    })?;

    // Mounts: the settings beside the store.
    e.call(MountAddRequest {
        mount: MountMapping::new("/workspace", tree.clone()),
    })?;
    e.call(MountAddRequest {
        mount: MountMapping {
            read_only: true,
            case_insensitive: true,
            ..MountMapping::new("/docs", t.path("docs").display().to_string())
        },
    })?;
    e.call(MountLsRequest {})?;
    e.call(MountRmRequest {
        agent_prefix: "/docs".into(),
    })?;

    // Every session request.
    let created = e.call(SessionNewRequest {
        id: Some("s1".into()),
        system_prompt: "Be brief.".into(),
        ..SessionNewRequest::default()
    })?;
    e.call(SessionLsRequest {})?;
    let read = e.call(SessionReadRequest {
        id: "s1".into(),
        paths: vec!["/workspace/src/lib.rs".into()],
    })?;
    let lib_id = read.touched[0].id.clone();
    write(&t.path("docs/guide.md"), b"# Guide\n")?;
    let found = e.call(SessionDiscoverRequest {
        id: "s1".into(),
        paths: vec!["/workspace/docs/guide.md".into()],
    })?;
    let guide_id = found.touched[0].id.clone();
    for op in [SetOp::Activate, SetOp::Pin, SetOp::Unpin, SetOp::Deactivate] {
        e.call(SessionSetRequest {
            id: "s1".into(),
            object: guide_id.clone(),
            op,
        })?;
    }
    e.call(SessionTurnRequest {
        id: "s1".into(),
        role: "user".into(),
        content: "Read lib.rs.".into(),
        toolcall_refs: Vec::new(),
    })?;
    e.call(SessionToolcallRequest {
        id: "s1".into(),
        tool: "read_file".into(),
        args: Map::from_iter([("path".into(), json!("/workspace/src/lib.rs"))]),
        args_display: Some("src/lib.rs".into()),
        call_id: Some("call_1".into()),
        status: ToolStatus::Ok,
        file_refs: vec![lib_id],
        output: "pub fn one() -> u32 { 2 }\n".into(),
    })?;
    e.call(SessionToolcallRequest {
        id: "s1".into(),
        tool: "grep".into(),
        args: Map::new(),
        args_display: None,
        call_id: None,
        status: ToolStatus::Fail,
        file_refs: Vec::new(),
        output: "no pattern".into(),
    })?;
    e.call(SessionTurnRequest {
        id: "s1".into(),
        role: "assistant".into(),
        content: "It returns 2.".into(),
        toolcall_refs: Vec::new(),
    })?;
    e.call(SessionRenderRequest {
        id: "s1".into(),
        budget: Some(1000),
        as_of_tx: None,
    })?;
    e.call(SessionRenderRequest {
        id: "s1".into(),
        budget: None,
        as_of_tx: created.tx_id,
    })?;
    write(
        &t.path("src/lib.rs"),
        b"pub fn one() -> u32 { 3 } // three\n",
    )?;
    let resumed = e.call(SessionResumeRequest { id: "s1".into() })?;
    assert!(!resumed.changes.is_empty(), "{resumed:?}");
    let forked = e.call(SessionForkRequest {
        id: "s1".into(),
        as_of_tx: None,
        new_id: Some("s2".into()),
    })?;
    assert!(forked.forked_from.is_some());
    e.call(SessionShowRequest {
        id: "s2".into(),
        as_of_tx: None,
    })?;
    e.call(SessionShowRequest {
        id: "s1".into(),
        as_of_tx: created.tx_id,
    })?;
    e.call(SessionHistoryRequest { id: "s1".into() })?;

    // The agent tools: a read (with its hash), a failure, the listing.
    e.call(AgentToolsRequest {
        session: "s1".into(),
    })?;
    e.call(AgentEntrypointsRequest {
        session: "s1".into(),
    })?;
    for (tool, args) in [
        ("list_files", json!({})),
        (
            "read_lines",
            json!({"filepath": "src/lib.rs", "start": 1, "end": 1}),
        ),
        ("read_file", json!({"filepath": "f999"})),
    ] {
        e.call(AgentCallRequest {
            session: "s1".into(),
            tool: tool.into(),
            args: args.as_object().cloned().unwrap_or_default(),
            caller: Some("rpc-schema".into()),
        })?;
    }
    // A write, and a deletion held for approval, then approved.
    e.call(AgentCallRequest {
        session: "s1".into(),
        tool: "write_file".into(),
        args: json!({"filepath": "made.txt", "content": "made\n"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        caller: None,
    })?;
    let sha = strata::hash::sha256(b"made\n").to_hex();
    let held = e.call(AgentCallRequest {
        session: "s1".into(),
        tool: "delete_file".into(),
        args: json!({"filepath": "made.txt", "expected_sha256": sha})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        caller: None,
    })?;
    let held: Value = serde_json::from_str(&held.answer.text)?;
    let token = held["approval"]["token"]
        .as_str()
        .ok_or("token")?
        .to_owned();
    let approved = e.call(AgentApproveRequest {
        session: "s1".into(),
        token,
        caller: Some("a person".into()),
    })?;
    assert!(!approved.answer.is_error, "{approved:?}");
    // A runtime's unsaved copy, pushed and withdrawn.
    let pushed = e.call(AgentPushRequest {
        session: "s1".into(),
        filepath: "src/lib.rs".into(),
        text: Some("pub fn one() -> u32 { 3 }\n".into()),
        base64: None,
        caller: Some("editor".into()),
    })?;
    assert!(pushed.file.standing, "{pushed:?}");
    e.call(AgentWithdrawRequest {
        session: "s1".into(),
        filepath: "src/lib.rs".into(),
    })?;

    // Evict a file and a session; the log keeps their ops' digests without bodies.
    e.call(EvictRequest {
        reference: "a.txt".into(),
        cwd: t.cwd(),
        confirm: true,
    })?;
    e.call(EvictRequest {
        reference: "session:s2".into(),
        cwd: None,
        confirm: true,
    })?;
    let log = e.call(LogRequest::default())?;
    assert!(
        log.records
            .iter()
            .flat_map(|r| &r.ops)
            .any(|op| op.body.is_none())
    );
    e.call(LogRequest {
        since: Some(2),
        limit: Some(3),
    })?;
    e.call(LogRunRequest { tx: 1 })?;
    e.call(strata::engine::AgentAuditRequest::default())?;
    e.call(GcRequest {})?;
    let fsck = e.call(FsckRequest {
        rebuild: true,
        repair: false,
    })?;
    assert!(fsck.findings.is_empty(), "{fsck:?}");
    e.call(StatsRequest {})?;

    // The watched roots (kept in the settings; no daemon watches them here).
    let added = e.call(WatchAddRequest {
        paths: vec![tree.clone()],
        cwd: None,
    })?;
    assert_eq!(added.changed.len(), 1, "{added:?}");
    e.call(WatchLsRequest {})?;
    e.call(WatchRmRequest {
        paths: vec![tree.clone()],
        cwd: None,
    })?;

    let missed: Vec<&str> = Request::METHODS
        .iter()
        .copied()
        .filter(|m| !e.seen.contains(m))
        .collect();
    assert!(
        missed.is_empty(),
        "methods this run never called: {missed:?}"
    );
    Ok(())
}

/// The result schemas are not vacuous: a response missing a field it always has is refused.
#[test]
fn a_result_without_a_required_field_is_refused() -> TestResult {
    let schemas = Schemas::load()?;
    let evicted = json!({"id": "x", "versions": 1, "tx_id": 4});
    schemas.check("evict.result.json", &evicted)?;
    for key in ["id", "versions", "tx_id"] {
        let mut broken = evicted.clone();
        broken.as_object_mut().ok_or("object")?.remove(key);
        assert!(
            schemas.check("evict.result.json", &broken).is_err(),
            "{key}"
        );
    }
    let params = json!({"reference": "a.txt", "confirm": true, "typo": 1});
    assert!(schemas.check("evict.params.json", &params).is_err());
    let not_an_envelope = json!({"xt/id": "x", "type": "file"});
    assert!(
        schemas
            .check_part("show.result.json", "/properties/object", &not_an_envelope)
            .is_err()
    );
    Ok(())
}

/// Runs the binary on `t`'s store in its tree; the command must succeed; its stdout as JSON.
fn strata_json(t: &Tree, args: &[&str]) -> TestResult<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--store")
        .arg(&t.store)
        .args(args)
        .current_dir(&t.tree)
        .env_remove("STRATA_STORE")
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "strata {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    if !args.contains(&"--json") {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("strata {args:?}: stdout is not JSON: {e}").into())
}

#[test]
fn cli_json_is_valid_for_the_result_schemas() -> TestResult {
    let t = Tree::new()?;
    let schemas = Schemas::load()?;
    let tree = t.tree.display().to_string();
    let whole = |method: &str, args: &[&str]| -> TestResult {
        let printed = strata_json(&t, args)?;
        schemas
            .check(&format!("{method}.result.json"), &printed)
            .map_err(|e| format!("strata {args:?}: {e}").into())
    };
    let part = |method: &str, pointer: &str, args: &[&str]| -> TestResult<Value> {
        let printed = strata_json(&t, args)?;
        schemas
            .check_part(&format!("{method}.result.json"), pointer, &printed)
            .map_err(|e| format!("strata {args:?}: {e}"))?;
        Ok(printed)
    };

    whole("index", &["index", "--json", "--quiet"])?;
    write(&t.path("src/lib.rs"), b"pub fn one() -> u32 { 2 }\n")?;
    whole("index", &["index", "--json", "--quiet"])?;
    whole("ls", &["ls", "--all", "--json"])?;
    // `object` refers to the envelope schemas of schema/objects/: the envelope must match one.
    for reference in ["src/lib.rs", "img.bin", ".env"] {
        part("show", "/properties/object", &["show", reference, "--json"])?;
    }
    part(
        "history",
        "/properties/versions",
        &["history", "src/lib.rs", "--json"],
    )?;
    whole("log", &["log", "--json"])?;
    part("fsck", "/properties/findings", &["fsck", "--json"])?;
    whole("gc", &["gc", "--json"])?;
    whole("stats", &["stats", "--json"])?;
    strata_json(&t, &["mount", "add", &format!("/workspace={tree}")])?;
    part("mount.ls", "/properties/mounts", &["mount", "ls", "--json"])?;

    whole("session.new", &["session", "new", "--id", "s1", "--json"])?;
    whole("session.ls", &["session", "ls", "--json"])?;
    let read = strata_json(
        &t,
        &["session", "read", "s1", "/workspace/src/lib.rs", "--json"],
    )?;
    schemas.check("session.read.result.json", &read)?;
    let lib_id = read["touched"][0]["id"]
        .as_str()
        .ok_or("no id")?
        .to_string();
    write(&t.path("docs/guide.md"), b"# Guide\n")?;
    whole(
        "session.discover",
        &[
            "session",
            "discover",
            "s1",
            "/workspace/docs/guide.md",
            "--json",
        ],
    )?;
    for op in ["activate", "pin", "unpin", "deactivate"] {
        whole("session.set", &["session", op, "s1", &lib_id, "--json"])?;
    }
    whole(
        "session.turn",
        &[
            "session",
            "turn",
            "s1",
            "--role",
            "user",
            "--content",
            "Read it.",
            "--json",
        ],
    )?;
    let output = t.tree.join("../output.txt");
    fs::write(&output, "pub fn one() -> u32 { 2 }\n")?;
    whole(
        "session.toolcall",
        &[
            "session",
            "toolcall",
            "s1",
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"/workspace/src/lib.rs"}"#,
            "--file-ref",
            &lib_id,
            "--output",
            &output.display().to_string(),
            "--json",
        ],
    )?;
    whole("session.render", &["session", "render", "s1", "--json"])?;
    write(
        &t.path("src/lib.rs"),
        b"pub fn one() -> u32 { 3 } // three\n",
    )?;
    whole("session.resume", &["session", "resume", "s1", "--json"])?;
    whole(
        "session.fork",
        &["session", "fork", "s1", "--new-id", "s2", "--json"],
    )?;
    whole("session.show", &["session", "show", "s2", "--json"])?;
    whole("session.history", &["session", "history", "s1", "--json"])?;
    Ok(())
}
