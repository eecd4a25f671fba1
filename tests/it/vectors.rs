//! Every case of `schema/vectors.json` recomputed with strata and compared: canonical JSON, raw
//! SHA-256, refused integers, and whole envelopes built through the public `Object` API.
//!
//! The expected values come from an independent implementation (Python `rfc8785` plus hashlib,
//! `tools/gen_vectors.py`); CI never regenerates them.

use serde_json::{Map, Value, json};
use strata::hash::{Hash, Sha256Stream, canonical_json, sha256, sha256_json};
use strata::object::{ContentOmitted, Fields, assigned_identity, sourced_identity};
use strata::{Error, FilesystemSource, Object, ObjectType, Source};

use crate::support::TestResult;

/// The cases of `schema/vectors.json`.
fn cases() -> TestResult<Vec<Value>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/vectors.json");
    let text = std::fs::read_to_string(path)?;
    let file: Value = serde_json::from_str(&text)?;
    Ok(file["cases"].as_array().ok_or("no cases")?.clone())
}

fn of_kind(kind: &str) -> TestResult<Vec<Value>> {
    Ok(cases()?.into_iter().filter(|c| c["kind"] == kind).collect())
}

fn str_of<'a>(case: &'a Value, key: &str) -> TestResult<&'a str> {
    Ok(case[key]
        .as_str()
        .ok_or_else(|| format!("case {} has no string {key}", case["name"]))?)
}

fn hash_at(value: &Value, key: &str) -> TestResult<Option<Hash>> {
    match &value[key] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.parse()?)),
        other => Err(format!("{key} is {other}").into()),
    }
}

/// Panics listing every failed case at once, so one run shows all disagreements.
fn report(failures: Vec<String>, checked: usize) {
    assert!(checked > 0, "no cases checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} vectors disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_file_is_complete_and_says_how_it_was_made() -> TestResult {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/vectors.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let comment = file["_comment"].as_str().ok_or("no _comment")?;
    for needed in ["rfc8785", "hashlib", "tools/gen_vectors.py"] {
        assert!(
            comment.contains(needed),
            "_comment does not mention {needed}"
        );
    }
    let all = cases()?;
    assert!(all.len() >= 40, "only {} vectors", all.len());
    for kind in ["json", "bytes", "error", "object_error", "object"] {
        assert!(all.iter().any(|c| c["kind"] == kind), "no {kind} case");
    }
    let text = serde_json::to_string(&all)?;
    for seed in [
        "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3",
        "8b5463dc976342ae202d19a93d6dc1bd05d3aefec8417cf67e8a929aa1667605",
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
        "9770db46d7d67a6f5b03861e75609ef1627bb4e4f762b32c002acde64906d347",
    ] {
        assert!(text.contains(seed), "seed value {seed} missing");
    }
    let mut names = all
        .iter()
        .map(|c| str_of(c, "name"))
        .collect::<TestResult<Vec<&str>>>()?;
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "case names are not unique");
    Ok(())
}

#[test]
fn json_cases_canonicalise_and_hash_as_expected() -> TestResult {
    let cases = of_kind("json")?;
    let mut failures = Vec::new();
    for case in &cases {
        let name = str_of(case, "name")?;
        let input: Value = serde_json::from_str(str_of(case, "input")?)?;
        let expected_text = str_of(case, "canonical")?;
        let expected_hash: Hash = str_of(case, "sha256")?.parse()?;
        match canonical_json(&input) {
            Ok(text) if text == expected_text => {}
            Ok(text) => failures.push(format!(
                "{name}: canonical {text:?}, want {expected_text:?}"
            )),
            Err(e) => failures.push(format!("{name}: refused: {e}")),
        }
        match sha256_json(&input) {
            Ok(h) if h == expected_hash => {}
            Ok(h) => failures.push(format!("{name}: sha256 {h}, want {expected_hash}")),
            Err(e) => failures.push(format!("{name}: refused: {e}")),
        }
        if sha256(expected_text.as_bytes()) != expected_hash {
            failures.push(format!(
                "{name}: the vector's own text does not hash to its sha256"
            ));
        }
    }
    report(failures, cases.len());
    Ok(())
}

#[test]
fn bytes_cases_hash_as_expected_whole_and_streamed() -> TestResult {
    let cases = of_kind("bytes")?;
    let mut failures = Vec::new();
    for case in &cases {
        let name = str_of(case, "name")?;
        let bytes = match (case.get("input_hex"), case.get("input_utf8")) {
            (Some(Value::String(h)), None) => hex::decode(h)?,
            (None, Some(Value::String(t))) => t.as_bytes().to_vec(),
            _ => panic!("{name}: needs exactly one of input_hex, input_utf8"),
        };
        let expected: Hash = str_of(case, "sha256")?.parse()?;
        if sha256(&bytes) != expected {
            failures.push(format!("{name}: {} want {expected}", sha256(&bytes)));
        }
        let mut stream = Sha256Stream::new();
        for piece in bytes.chunks(3) {
            stream.update(piece);
        }
        if stream.finish() != expected {
            failures.push(format!("{name}: streamed in 3-byte pieces disagrees"));
        }
    }
    report(failures, cases.len());
    Ok(())
}

/// Checks that `result` is an `InvalidInput` naming the place `at` and the ±2^53 limit.
fn expect_refusal<T>(name: &str, result: strata::Result<T>, at: &str, failures: &mut Vec<String>) {
    match result {
        Ok(_) => failures.push(format!("{name}: accepted, want an error at {at}")),
        Err(Error::InvalidInput { reason }) => {
            if !reason.contains(&format!(" {at} ")) || !reason.contains("2^53") {
                failures.push(format!(
                    "{name}: error {reason:?} does not name {at} and 2^53"
                ));
            }
        }
        Err(other) => failures.push(format!("{name}: wrong kind of error: {other:?}")),
    }
}

#[test]
fn error_cases_are_refused_naming_the_place() -> TestResult {
    let cases = of_kind("error")?;
    let mut failures = Vec::new();
    for case in &cases {
        let name = str_of(case, "name")?;
        let input: Value = serde_json::from_str(str_of(case, "input")?)?;
        let at = str_of(case, "at")?;
        expect_refusal(name, canonical_json(&input), at, &mut failures);
        expect_refusal(name, sha256_json(&input), at, &mut failures);
    }
    report(failures, cases.len());
    Ok(())
}

/// The parts of an envelope: id, source, file hash, content, fields, content_omitted.
struct Parts {
    id: String,
    source: Option<Source>,
    file_hash: Option<Hash>,
    content: Option<String>,
    fields: Fields,
    content_omitted: Option<ContentOmitted>,
}

/// Splits an envelope (with or without its hashes) into the parts `Object::from_parts` takes.
fn parts(envelope: &Value) -> TestResult<Parts> {
    let object_type: ObjectType = envelope["type"].as_str().ok_or("no type")?.parse()?;
    let mut fields = Map::new();
    for name in Fields::names(object_type) {
        if let Some(v) = envelope.get(*name) {
            fields.insert((*name).to_string(), v.clone());
        }
    }
    Ok(Parts {
        id: str_of(envelope, "xt/id")?.to_string(),
        source: serde_json::from_value(envelope["source"].clone())?,
        file_hash: hash_at(envelope, "file_hash")?,
        content: envelope["content"].as_str().map(str::to_string),
        fields: Fields::from_json(object_type, Value::Object(fields))?,
        content_omitted: serde_json::from_value(
            envelope
                .get("content_omitted")
                .cloned()
                .unwrap_or(Value::Null),
        )?,
    })
}

fn from_parts(p: Parts) -> strata::Result<Object> {
    Object::from_parts(
        Some(&p.id),
        p.source,
        p.file_hash,
        p.content,
        p.fields,
        p.content_omitted,
    )
}

#[test]
fn object_error_cases_are_refused_naming_the_place() -> TestResult {
    let cases = of_kind("object_error")?;
    let mut failures = Vec::new();
    for case in &cases {
        let name = str_of(case, "name")?;
        let at = str_of(case, "at")?;
        let envelope = &case["envelope"];
        let p = parts(envelope)?;
        // Through the tool call constructor, as a runtime records one.
        if let Fields::Toolcall(fields) = p.fields.clone() {
            let output = p.content.clone().ok_or("a toolcall without content")?;
            expect_refusal(
                name,
                Object::toolcall(&p.id, fields, output),
                at,
                &mut failures,
            );
        }
        expect_refusal(name, from_parts(p), at, &mut failures);
        // And through parsing, whatever hashes an envelope claims.
        let mut claimed = envelope.clone();
        for key in [
            "identity_hash",
            "content_hash",
            "metadata_hash",
            "object_hash",
        ] {
            claimed[key] = json!("0".repeat(64));
        }
        if Object::from_json(&claimed).is_ok() {
            failures.push(format!("{name}: Object::from_json accepted it"));
        }
    }
    report(failures, cases.len());
    Ok(())
}

/// Builds `envelope`'s object through the constructor a caller would use for it.
fn through_constructor(case: &Value, p: Parts) -> TestResult<Vec<Object>> {
    let sid = |prefix: &str| {
        p.id.strip_prefix(prefix)
            .map(str::to_string)
            .ok_or_else(|| format!("{} does not start with {prefix}", p.id))
    };
    let content = p.content.ok_or("no content");
    Ok(match p.fields {
        Fields::File(_) => {
            let Some(Source::Filesystem(fs)) = p.source else {
                panic!("file without a filesystem source")
            };
            let fs: FilesystemSource = fs;
            let mut built = Vec::new();
            if let Some(text) = case["bytes_utf8"].as_str() {
                built.push(Object::file_text(fs.clone(), text.to_string())?);
                built.push(Object::file_bytes(fs.clone(), text.as_bytes().to_vec())?);
            } else if let Some(h) = case["bytes_hex"].as_str() {
                built.push(Object::file_bytes(fs.clone(), hex::decode(h)?)?);
            }
            match p.content_omitted {
                Some(reason) => built.push(Object::file_omitted(fs, p.file_hash, reason)?),
                None if p.file_hash.is_none() => built.push(Object::file_stub(fs)?),
                None => {}
            }
            built
        }
        Fields::Toolcall(fields) => vec![Object::toolcall(&p.id, fields, content?)?],
        Fields::Chat(fields) => vec![Object::chat(
            &sid("chat:")?,
            std::sync::Arc::unwrap_or_clone(fields.turns),
        )?],
        Fields::SystemPrompt => vec![Object::system_prompt(&sid("system_prompt:")?, content?)?],
        Fields::Session(fields) => vec![Object::session(fields)?],
        Fields::SessionConfig => vec![Object::session_config(&p.id, content?)?],
    })
}

#[test]
fn object_cases_build_to_the_expected_envelopes() -> TestResult {
    let cases = of_kind("object")?;
    let mut failures = Vec::new();
    let mut types_seen = std::collections::BTreeSet::new();
    for case in &cases {
        let name = str_of(case, "name")?;
        let envelope = &case["envelope"];
        let object = match from_parts(parts(envelope)?) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{name}: from_parts refused it: {e}"));
                continue;
            }
        };
        types_seen.insert(object.object_type());
        let hashes = [
            ("identity_hash", Some(*object.identity_hash())),
            ("file_hash", object.file_hash().copied()),
            ("content_hash", object.content_hash().copied()),
            ("metadata_hash", Some(*object.metadata_hash())),
            ("object_hash", Some(*object.object_hash())),
        ];
        for (key, got) in hashes {
            if got != hash_at(envelope, key)? {
                failures.push(format!("{name}: {key} {got:?}, want {}", envelope[key]));
            }
        }
        // The canonical hash inputs, and the helpers that hash them.
        let canonical = &case["canonical"];
        let metadata_text = canonical_json(&object.fields().to_json())?;
        if metadata_text != str_of(canonical, "metadata")? {
            failures.push(format!("{name}: metadata text {metadata_text:?}"));
        }
        let identity = match object.source() {
            Some(source) => sourced_identity(object.object_type(), source)?,
            None => assigned_identity(object.object_type(), object.id())?,
        };
        for (key, hash) in [
            ("identity", identity),
            ("metadata", *object.metadata_hash()),
            ("object", *object.object_hash()),
        ] {
            if sha256(str_of(canonical, key)?.as_bytes()) != hash {
                failures.push(format!(
                    "{name}: canonical {key} text does not hash to {hash}"
                ));
            }
        }
        // The envelope strata prints is exactly the vector's, key for key.
        if object.to_json() != *envelope {
            failures.push(format!(
                "{name}: to_json differs:\n  got  {}\n  want {envelope}",
                object.to_json()
            ));
        }
        match Object::from_json(envelope) {
            Ok(parsed) if parsed == object => {}
            Ok(_) => failures.push(format!("{name}: from_json gives a different object")),
            Err(e) => failures.push(format!("{name}: from_json refused it: {e}")),
        }
        match through_constructor(case, parts(envelope)?) {
            Ok(built) if built.is_empty() => {
                failures.push(format!("{name}: no constructor path checked"));
            }
            Ok(built) => {
                for other in built {
                    if other.to_json() != *envelope {
                        failures.push(format!(
                            "{name}: constructor gives {}, want {envelope}",
                            other.to_json()
                        ));
                    }
                }
            }
            Err(e) => failures.push(format!("{name}: constructor refused it: {e:?}")),
        }
    }
    assert_eq!(types_seen.len(), ObjectType::ALL.len(), "{types_seen:?}");
    report(failures, cases.len());
    Ok(())
}

#[test]
fn a_vector_envelope_with_any_hash_changed_is_refused() -> TestResult {
    for case in of_kind("object")? {
        let envelope = &case["envelope"];
        for key in [
            "identity_hash",
            "content_hash",
            "metadata_hash",
            "object_hash",
        ] {
            let Some(Value::String(h)) = envelope.get(key) else {
                continue;
            };
            let mut tampered = envelope.clone();
            let flipped = if h.starts_with('0') { "1" } else { "0" };
            tampered[key] = json!(format!("{flipped}{}", &h[1..]));
            let Err(err) = Object::from_json(&tampered) else {
                panic!("{}: a changed {key} was accepted", case["name"]);
            };
            assert!(err.to_string().contains(key), "{}: {err}", case["name"]);
        }
    }
    Ok(())
}
