//! Unit tests of objects and their hashes.

use super::*;

fn source(path: &str) -> FilesystemSource {
    FilesystemSource {
        filesystem_id: "abc123".into(),
        path: path.into(),
    }
}

#[test]
fn file_identity_matches_the_seed() -> Result<()> {
    let file = Object::file_text(source("/tmp/test.md"), "hello world".into())?;
    assert_eq!(
        file.id(),
        "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"
    );
    assert_eq!(
        file.file_hash().map(Hash::to_hex).as_deref(),
        Some("b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9")
    );
    assert_eq!(file.file_hash(), file.content_hash());
    assert_eq!(
        file.metadata_hash(),
        &sha256(br#"{"char_count":11,"file_type":"md"}"#)
    );
    Ok(())
}

#[test]
fn toolcall_identity_matches_the_seed() -> Result<()> {
    assert_eq!(
        assigned_identity(ObjectType::Toolcall, "toolcall:tc-12345")?.to_hex(),
        "8b5463dc976342ae202d19a93d6dc1bd05d3aefec8417cf67e8a929aa1667605"
    );
    Ok(())
}

#[test]
fn system_prompt_metadata_is_the_empty_object() -> Result<()> {
    let prompt = Object::system_prompt("s1", "be brief".into())?;
    assert_eq!(
        prompt.metadata_hash().to_hex(),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    Ok(())
}

#[test]
fn file_type_and_char_count_follow_javascript() {
    assert_eq!(file_type_of("/a/b/README.MD"), "md");
    assert_eq!(file_type_of("/a/b/Makefile"), "text");
    assert_eq!(file_type_of("/a/.gitignore"), "text");
    assert_eq!(file_type_of("/a/file."), "text");
    assert_eq!(file_type_of("/a.d/file"), "text");
    assert_eq!(file_type_of("/a/x.tar.gz"), "gz");
    assert_eq!(utf16_len("héllo"), 5);
    assert_eq!(utf16_len("😀"), 2);
    // Longer than one counting block (127 bytes), with characters across block boundaries,
    // and a text of 4-byte characters only (two units each).
    let long = "é😀a€".repeat(200);
    let expected: u64 = long.chars().map(|c| c.len_utf16() as u64).sum();
    assert_eq!(utf16_len(&long), expected);
    let emoji = "😀".repeat(127);
    assert_eq!(utf16_len(&emoji), 254);
}

#[test]
fn stubs_and_binaries_have_null_content() -> Result<()> {
    let stub = Object::file_stub(source("/x/y.rs"))?;
    assert!(stub.is_stub());
    assert_eq!(stub.content_hash(), None);
    let binary = Object::file_bytes(source("/x/y.bin"), vec![0xff, 0x00, 0xfe])?;
    assert_eq!(binary.content(), None);
    assert_eq!(binary.content_omitted(), Some(ContentOmitted::Binary));
    assert_eq!(binary.file_hash(), Some(&sha256(&[0xff, 0x00, 0xfe])));
    assert!(!binary.is_stub());
    // UTF-8 holding a NUL byte is binary, as the indexer (and git) decide: the same bytes
    // make the same object whichever way they arrive.
    let nul = Object::file_bytes(source("/x/z.dat"), b"a\0b".to_vec())?;
    assert_eq!(nul.content(), None);
    assert_eq!(nul.content_omitted(), Some(ContentOmitted::Binary));
    Ok(())
}

#[test]
fn envelopes_round_trip_and_tampering_is_caught() -> Result<()> {
    let fields = ToolcallFields {
        tool: "read_file".into(),
        args: serde_json::from_value(json!({"path": "/a"}))
            .map_err(|e| Error::invalid_input(e.to_string()))?,
        args_display: None,
        status: ToolStatus::Ok,
        chat_ref: "chat:s1".into(),
        file_refs: Some(vec!["abc".into()]),
    };
    let call = Object::toolcall("toolcall:1", fields, "output".into())?;
    let json = call.to_json();
    assert!(json.get("args_display").is_none());
    assert_eq!(Object::from_json(&json)?, call);
    let mut tampered = json.clone();
    tampered["status"] = json!("fail");
    let err = Object::from_json(&tampered).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("metadata_hash"), "{err}");
    Ok(())
}

#[test]
fn chat_derives_refs_and_transcript() -> Result<()> {
    let turns = vec![
        Turn {
            role: Role::User,
            content: "hi".into(),
            toolcall_refs: None,
        },
        Turn {
            role: Role::Assistant,
            content: "reading".into(),
            toolcall_refs: Some(vec!["t1".into(), "t2".into()]),
        },
    ];
    let chat = Object::chat("s1", turns)?;
    assert_eq!(chat.id(), "chat:s1");
    assert_eq!(chat.content(), Some("user: hi\n\nassistant: reading"));
    match chat.fields() {
        Fields::Chat(f) => {
            assert_eq!(f.toolcall_refs, vec!["t1", "t2"]);
            assert_eq!(f.turn_count, 2);
            assert_eq!(f.session_ref, "session:s1");
        }
        other => panic!("not a chat: {other:?}"),
    }
    assert_eq!(Object::from_json(&chat.to_json())?, chat);
    Ok(())
}

#[test]
fn inconsistent_parts_are_refused() {
    let fields = Fields::File(FileFields {
        file_type: "md".into(),
        char_count: 3,
    });
    let fs = Source::Filesystem(source("/a.md"));
    assert!(
        Object::from_parts(
            None,
            Some(fs.clone()),
            None,
            Some("ab".into()),
            fields.clone(),
            None
        )
        .is_err()
    );
    assert!(Object::from_parts(None, None, None, None, fields, None).is_err());
    assert!(
        Object::from_parts(
            Some("x"),
            Some(fs),
            None,
            Some("p".into()),
            Fields::SystemPrompt,
            None
        )
        .is_err()
    );
}

proptest::proptest! {
    #[test]
    fn utf16_len_counts_utf16_units(text in "\\PC*") {
        let expected: u64 = text.chars().map(|c| c.len_utf16() as u64).sum();
        proptest::prop_assert_eq!(utf16_len(&text), expected);
    }
}

fn session_fields(ids: Vec<String>, sid: String) -> SessionFields {
    let n = ids.len();
    SessionFields {
        chat_ref: format!("chat:{sid}"),
        system_prompt_ref: format!("system_prompt:{sid}"),
        session_id: sid,
        session_index: ids.clone().into(),
        metadata_pool: ids[n / 3..].to_vec().into(),
        active_set: ids
            .iter()
            .rev()
            .take(n / 2)
            .cloned()
            .collect::<Vec<_>>()
            .into(),
        pinned_set: ids.iter().step_by(3).cloned().collect::<Vec<_>>().into(),
    }
}

fn jcs_of(fields: &Fields) -> Result<String> {
    crate::hash::canonical_json(&fields.to_json())
}

#[test]
fn session_canonical_json_is_jcs_on_escapes_and_non_ascii() -> Result<()> {
    let mut ids: Vec<String> = (0u32..0x80)
        .filter_map(char::from_u32)
        .map(|c| format!("a{c}b"))
        .collect();
    ids.extend(
        [
            "",
            "\"",
            "\\",
            "\u{7f}",
            "\u{80}",
            "é",
            "\u{2028}",
            "\u{2029}",
            "\u{feff}",
            "😀",
            "\u{10ffff}",
            "\u{0}\u{1f}",
            "x\"y\\z\n\t",
            "日本語",
            "\u{1d11e}",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    for sid in ["s", "a\u{1}\"é😀"] {
        let fields = Fields::Session(session_fields(ids.clone(), sid.to_string()));
        assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
    }
    let empty = Fields::Session(session_fields(Vec::new(), String::new()));
    assert_eq!(empty.canonical_json()?, jcs_of(&empty)?);
    Ok(())
}

/// A file's fields written directly are the JCS of their JSON value: escapes, non-ASCII,
/// and counts up to the largest safe integer (a larger one is refused, as JCS refuses it).
#[test]
fn file_canonical_json_is_jcs() -> Result<()> {
    let types = [
        "py",
        "text",
        "",
        "\"",
        "\\",
        "\u{0}\u{1f}\u{7f}",
        "é😀",
        "\u{2028}x",
        "a\"b\\c\n",
    ];
    let safe = crate::hash::MAX_SAFE_INTEGER;
    for file_type in types {
        for char_count in [0, 1, 9, 10, 12_345, u64::from(u32::MAX), safe - 1, safe] {
            let fields = Fields::File(crate::object::FileFields {
                file_type: file_type.to_string(),
                char_count,
            });
            assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
        }
    }
    let unsafe_count = Fields::File(crate::object::FileFields {
        file_type: "py".into(),
        char_count: safe + 1,
    });
    assert!(unsafe_count.canonical_json().is_err());
    assert!(jcs_of(&unsafe_count).is_err());
    Ok(())
}

proptest::proptest! {
    #[test]
    fn file_canonical_json_matches_jcs(
        file_type in proptest::prelude::any::<String>(),
        char_count in 0..=crate::hash::MAX_SAFE_INTEGER,
    ) {
        let fields = Fields::File(crate::object::FileFields { file_type, char_count });
        proptest::prop_assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
    }

    #[test]
    fn session_canonical_json_matches_jcs(
        ids in proptest::collection::vec(proptest::prelude::any::<String>(), 0..40),
        sid in proptest::prelude::any::<String>(),
    ) {
        let fields = Fields::Session(session_fields(ids, sid));
        proptest::prop_assert_eq!(fields.canonical_json()?, jcs_of(&fields)?);
    }
}
