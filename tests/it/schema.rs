//! The JSON Schemas of `schema/objects/` against the envelopes strata prints: every example
//! built with strata's constructors is valid for its own type's schema and no other, every
//! schema property is printed by some example, and broken envelopes are rejected.

use std::collections::{BTreeMap, BTreeSet};

use jsonschema::Validator;
use serde_json::{Map, Value, json};
use strata::object::{ContentOmitted, Role, SessionFields, ToolStatus, ToolcallFields, Turn};
use strata::{FilesystemSource, Object, ObjectType, hash::sha256};

use crate::support::TestResult;

fn schema_text(object_type: ObjectType) -> TestResult<Value> {
    let path = format!(
        "{}/schema/objects/{object_type}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    Ok(serde_json::from_str(&std::fs::read_to_string(&path)?)?)
}

/// The compiled schema of every type.
fn validators() -> TestResult<BTreeMap<ObjectType, Validator>> {
    ObjectType::ALL
        .into_iter()
        .map(|t| {
            let schema = schema_text(t)?;
            jsonschema::draft202012::meta::validate(&schema)
                .map_err(|e| format!("{t} schema is not a valid 2020-12 schema: {e}"))?;
            Ok((t, jsonschema::draft202012::new(&schema)?))
        })
        .collect()
}

fn fs(path: &str) -> FilesystemSource {
    FilesystemSource {
        filesystem_id: "abc123".into(),
        path: path.into(),
    }
}

fn args(value: Value) -> TestResult<Map<String, Value>> {
    Ok(serde_json::from_value(value)?)
}

fn toolcall(
    id: &str,
    args_display: Option<&str>,
    file_refs: Option<Vec<String>>,
) -> TestResult<Object> {
    let fields = ToolcallFields {
        tool: "read_file".into(),
        args: args(json!({"path": "/tmp/a.md", "limit": 10, "nested": [1.5, null, {"k": true}]}))?,
        args_display: args_display.map(str::to_string),
        status: if file_refs.is_some() {
            ToolStatus::Ok
        } else {
            ToolStatus::Fail
        },
        chat_ref: "chat:s1".into(),
        file_refs,
    };
    Ok(Object::toolcall(id, fields, "output\n".into())?)
}

fn turn(role: Role, content: &str, refs: Option<&[&str]>) -> Turn {
    Turn {
        role,
        content: content.into(),
        toolcall_refs: refs.map(|r| r.iter().map(|s| s.to_string()).collect()),
    }
}

/// Envelopes of all five types, optional fields present and absent, content omitted or not.
fn examples() -> TestResult<Vec<(&'static str, Object)>> {
    let text = Object::file_text(fs("/tmp/test.md"), "hello wörld 😀".into())?;
    let file_id = text.id().to_string();
    Ok(vec![
        ("text file", text),
        (
            "empty file",
            Object::file_text(fs("/tmp/Makefile"), String::new())?,
        ),
        ("stub", Object::file_stub(fs("/src/lib.rs"))?),
        (
            "binary file",
            Object::file_bytes(fs("/img/a.png"), vec![0xff, 0, 0xfe])?,
        ),
        (
            "too large file",
            Object::file_omitted(
                fs("/var/big.log"),
                Some(sha256(b"big")),
                ContentOmitted::TooLarge,
            )?,
        ),
        (
            "denied file",
            Object::file_omitted(fs("/home/a/.env"), None, ContentOmitted::Denied)?,
        ),
        (
            "toolcall with optional fields",
            toolcall(
                "toolcall:1",
                Some("read /tmp/a.md"),
                Some(vec![file_id.clone()]),
            )?,
        ),
        (
            "toolcall without optional fields",
            toolcall("call_42", None, None)?,
        ),
        (
            "toolcall with args_display only",
            toolcall("toolcall:3", Some(""), None)?,
        ),
        (
            "chat",
            Object::chat(
                "s1",
                vec![
                    turn(Role::System, "be brief", None),
                    turn(Role::User, "read it", None),
                    turn(Role::Assistant, "reading", Some(&["toolcall:1", "call_42"])),
                    turn(Role::Tool, "output", Some(&[])),
                ],
            )?,
        ),
        ("empty chat", Object::chat("s2", vec![])?),
        (
            "system prompt",
            Object::system_prompt("s1", "You are careful.".into())?,
        ),
        (
            "session configuration",
            Object::session_config("session_config:s1", "{\"format\":1}".into())?,
        ),
        (
            "session file ids",
            Object::session_config("session_files:s1", "strata file ids v1\n".into())?,
        ),
        (
            "session",
            Object::session(SessionFields {
                session_id: "s1".into(),
                chat_ref: "chat:s1".into(),
                system_prompt_ref: "system_prompt:s1".into(),
                session_index: vec![file_id.clone(), "toolcall:1".into()].into(),
                metadata_pool: vec![file_id.clone(), "toolcall:1".into()].into(),
                active_set: vec![file_id.clone()].into(),
                pinned_set: vec![file_id].into(),
            })?,
        ),
        (
            "empty session",
            Object::session(SessionFields {
                session_id: "s2".into(),
                chat_ref: "chat:s2".into(),
                system_prompt_ref: "system_prompt:s2".into(),
                session_index: Default::default(),
                metadata_pool: Default::default(),
                active_set: Default::default(),
                pinned_set: Default::default(),
            })?,
        ),
    ])
}

fn errors(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_example_is_valid_for_its_own_schema_only() -> TestResult {
    let validators = validators()?;
    let mut seen_types = BTreeSet::new();
    for (name, object) in examples()? {
        let envelope = object.to_json();
        seen_types.insert(object.object_type());
        for (t, validator) in &validators {
            let errs = errors(validator, &envelope);
            if *t == object.object_type() {
                assert!(
                    errs.is_empty(),
                    "{name} is invalid for the {t} schema: {errs:#?}"
                );
            } else {
                assert!(!errs.is_empty(), "{name} is also valid for the {t} schema");
            }
        }
    }
    assert_eq!(seen_types.len(), ObjectType::ALL.len());
    Ok(())
}

#[test]
fn every_vector_envelope_is_valid() -> TestResult {
    let validators = validators()?;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/vectors.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let mut checked = 0;
    for case in file["cases"].as_array().ok_or("no cases")? {
        if case["kind"] != "object" {
            continue;
        }
        let envelope = &case["envelope"];
        let t: ObjectType = envelope["type"].as_str().ok_or("no type")?.parse()?;
        let errs = errors(&validators[&t], envelope);
        assert!(errs.is_empty(), "{}: {errs:#?}", case["name"]);
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} object vectors");
    Ok(())
}

/// A schema lists no field that strata never prints: each property appears in some example.
#[test]
fn every_schema_property_is_printed_by_some_example() -> TestResult {
    let mut printed: BTreeMap<ObjectType, BTreeSet<String>> = BTreeMap::new();
    for (_, object) in examples()? {
        let keys = object
            .to_json()
            .as_object()
            .ok_or("an envelope that is not an object")?
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        printed
            .entry(object.object_type())
            .or_default()
            .extend(keys);
    }
    for t in ObjectType::ALL {
        let schema = schema_text(t)?;
        let properties: BTreeSet<String> = schema["properties"]
            .as_object()
            .ok_or("no properties")?
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            properties, printed[&t],
            "{t}: schema properties vs printed keys"
        );
        let required = schema["required"]
            .as_array()
            .ok_or("no required")?
            .iter()
            .map(|v| {
                Ok(v.as_str()
                    .ok_or("a required that is not a string")?
                    .to_string())
            })
            .collect::<TestResult<BTreeSet<String>>>()?;
        let optional: Vec<&String> = properties.difference(&required).collect();
        let expected: &[&str] = match t {
            ObjectType::File => &["content_omitted"],
            ObjectType::Toolcall => &["args_display", "file_refs"],
            _ => &[],
        };
        assert_eq!(optional, expected, "{t}: optional properties");
    }
    Ok(())
}

/// One way of breaking a valid envelope, and whether strata's own parser must refuse it too.
struct Breakage {
    what: &'static str,
    example: &'static str,
    change: fn(&mut Map<String, Value>),
}

fn breakages() -> Vec<Breakage> {
    vec![
        Breakage {
            what: "upper-case hash",
            example: "text file",
            change: |m| {
                // Without a hash to change, the envelope stays valid and the test fails.
                if let Some(h) = m["object_hash"].as_str().map(str::to_uppercase) {
                    m.insert("object_hash".into(), json!(h));
                }
            },
        },
        Breakage {
            what: "short hash",
            example: "chat",
            change: |m| {
                m.insert("metadata_hash".into(), json!("abc123"));
            },
        },
        Breakage {
            what: "hash that is a number",
            example: "session",
            change: |m| {
                m.insert("identity_hash".into(), json!(12));
            },
        },
        Breakage {
            what: "null object_hash",
            example: "system prompt",
            change: |m| {
                m.insert("object_hash".into(), Value::Null);
            },
        },
        Breakage {
            what: "missing metadata_hash",
            example: "toolcall without optional fields",
            change: |m| {
                m.remove("metadata_hash");
            },
        },
        Breakage {
            what: "missing char_count",
            example: "text file",
            change: |m| {
                m.remove("char_count");
            },
        },
        Breakage {
            what: "missing source",
            example: "stub",
            change: |m| {
                m.remove("source");
            },
        },
        Breakage {
            what: "missing turns",
            example: "chat",
            change: |m| {
                m.remove("turns");
            },
        },
        Breakage {
            what: "missing pinned_set",
            example: "session",
            change: |m| {
                m.remove("pinned_set");
            },
        },
        Breakage {
            what: "extra field",
            example: "toolcall with optional fields",
            change: |m| {
                m.insert("extra".into(), json!(1));
            },
        },
        Breakage {
            what: "another type's field",
            example: "system prompt",
            change: |m| {
                m.insert("file_type".into(), json!("md"));
            },
        },
        Breakage {
            what: "content_omitted on a toolcall",
            example: "toolcall with args_display only",
            change: |m| {
                m.insert("content_omitted".into(), json!("binary"));
            },
        },
        Breakage {
            what: "unknown content_omitted",
            example: "binary file",
            change: |m| {
                m.insert("content_omitted".into(), json!("secret"));
            },
        },
        Breakage {
            what: "content_omitted beside content",
            example: "text file",
            change: |m| {
                m.insert("content_omitted".into(), json!("too_large"));
            },
        },
        Breakage {
            what: "denied file with a file_hash",
            example: "denied file",
            change: |m| {
                m.insert("file_hash".into(), json!("0".repeat(64)));
            },
        },
        Breakage {
            what: "null content with a content_hash",
            example: "stub",
            change: |m| {
                m.insert("content_hash".into(), json!("0".repeat(64)));
            },
        },
        Breakage {
            what: "file type null",
            example: "text file",
            change: |m| {
                m.insert("file_type".into(), Value::Null);
            },
        },
        Breakage {
            what: "relative source path",
            example: "stub",
            change: |m| {
                m["source"]["path"] = json!("src/lib.rs");
            },
        },
        Breakage {
            what: "source with an extra key",
            example: "text file",
            change: |m| {
                m["source"]["host"] = json!("x");
            },
        },
        Breakage {
            what: "source on a toolcall",
            example: "toolcall with optional fields",
            change: |m| {
                m.insert(
                    "source".into(),
                    json!({"type": "filesystem", "filesystemId": "a", "path": "/a"}),
                );
            },
        },
        Breakage {
            what: "unknown status",
            example: "toolcall with optional fields",
            change: |m| {
                m.insert("status".into(), json!("maybe"));
            },
        },
        Breakage {
            what: "args not an object",
            example: "toolcall without optional fields",
            change: |m| {
                m.insert("args".into(), json!([1, 2]));
            },
        },
        Breakage {
            what: "file_refs not an array",
            example: "toolcall with optional fields",
            change: |m| {
                m.insert("file_refs".into(), json!("abc"));
            },
        },
        Breakage {
            what: "null args_display",
            example: "toolcall without optional fields",
            change: |m| {
                m.insert("args_display".into(), Value::Null);
            },
        },
        Breakage {
            what: "unknown role",
            example: "chat",
            change: |m| {
                m["turns"][0]["role"] = json!("narrator");
            },
        },
        Breakage {
            what: "turn with an extra key",
            example: "chat",
            change: |m| {
                m["turns"][1]["time"] = json!(3);
            },
        },
        Breakage {
            what: "negative turn_count",
            example: "empty chat",
            change: |m| {
                m.insert("turn_count".into(), json!(-1));
            },
        },
        Breakage {
            what: "chat id without its prefix",
            example: "chat",
            change: |m| {
                m.insert("xt/id".into(), json!("s1"));
            },
        },
        Breakage {
            what: "session with content",
            example: "session",
            change: |m| {
                m.insert("content".into(), json!("x"));
            },
        },
        Breakage {
            what: "system prompt metadata_hash other than H({})",
            example: "system prompt",
            change: |m| {
                m.insert("metadata_hash".into(), json!("0".repeat(64)));
            },
        },
        Breakage {
            what: "wrong type",
            example: "session",
            change: |m| {
                m.insert("type".into(), json!("sessions"));
            },
        },
    ]
}

#[test]
fn broken_envelopes_are_rejected_by_the_schema_and_by_strata() -> TestResult {
    let validators = validators()?;
    let examples: BTreeMap<&str, Object> = examples()?.into_iter().collect();
    let mut parser_accepts = Vec::new();
    for b in breakages() {
        let object = &examples[b.example];
        let Value::Object(mut map) = object.to_json() else {
            unreachable!()
        };
        (b.change)(&mut map);
        let broken = Value::Object(map);
        assert!(
            !validators[&object.object_type()].is_valid(&broken),
            "{}: the {} schema accepts {broken}",
            b.what,
            object.object_type()
        );
        if strata::Object::from_json(&broken).is_ok() {
            parser_accepts.push(b.what);
        }
    }
    // The parser is as strict as the schema except where it reads a null optional field as
    // absent (the envelope it then prints omits it, and its hashes are those of the absent field).
    assert_eq!(parser_accepts, ["null args_display"]);
    Ok(())
}
