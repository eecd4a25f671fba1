#!/usr/bin/env python3
"""Writes schema/vectors.json: canonical-JSON and hash vectors for strata.

An independent implementation: RFC 8785 from PyPI's `rfc8785` package and SHA-256 from
`hashlib`. It never calls strata; the envelope hashes follow DESIGN.md "Objects and hashes"
(seed 003 §1-§2) re-implemented here. Run by hand (CI only checks, never regenerates):

    pip install rfc8785==0.1.4
    python3 tools/gen_vectors.py > schema/vectors.json
"""

import hashlib
import importlib.metadata
import json
import os
import sys

import rfc8785

MAX_SAFE = 2**53


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def to_jcs_domain(value):
    """Python's json keeps integers exact; JCS reads every number as a double. The `rfc8785`
    package refuses integers from 2^53 on, while strata (and JavaScript) accept ±2^53 itself,
    which a double holds exactly: hand those two to the package as floats."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return float(value) if abs(value) == MAX_SAFE else value
    if isinstance(value, list):
        return [to_jcs_domain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jcs_domain(v) for k, v in value.items()}
    raise TypeError(value)


def jcs(value) -> str:
    return rfc8785.dumps(to_jcs_domain(value)).decode("utf-8")


def sha256_json(value) -> str:
    return sha256_hex(jcs(value).encode("utf-8"))


# --- (a) JSON text -> canonical text -> sha256 -------------------------------------------------

JSON_CASES = [
    ("seed: identity of file abc123 /tmp/test.md",
     '{"type":"file","source":{"type":"filesystem","filesystemId":"abc123","path":"/tmp/test.md"}}',
     "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"),
    ("seed: identity of toolcall:tc-12345",
     '{"type":"toolcall","xt/id":"toolcall:tc-12345"}',
     "8b5463dc976342ae202d19a93d6dc1bd05d3aefec8417cf67e8a929aa1667605"),
    ("seed: empty object (metadata of a system prompt)", "{}",
     "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
    ("seed: file metadata, keys given out of order", '{"file_type":"md","char_count":11}', None),
    ("empty array", "[]", None),
    ("literals", "[null,true,false]", None),
    ("top-level null", "null", None),
    ("empty string", '""', None),
    ("whitespace in the input is dropped", '{ "b" : [ 1 , 2 ] ,\n\t"a" : "x" }', None),
    ("non-ASCII strings stay raw UTF-8",
     '{"fr":"h\\u00e9llo w\\u00f6rld","ja":"\\u65e5\\u672c\\u8a9e","ru":"\\u043f\\u0440\\u0438\\u0432\\u0435\\u0442"}',
     None),
    ("astral-plane characters (surrogate pairs in the input) stay raw UTF-8",
     '"\\ud83d\\ude00 \\ud834\\udd1e \\ud800\\udc00"', None),
    ("control characters: short escapes and \\u00XX, DEL raw",
     '"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u001f\\u007f"', None),
    ("quote, backslash and solidus", '"a\\"b\\\\c\\/d"', None),
    ("U+2028 and U+2029 are not escaped", '"\\u2028\\u2029"', None),
    ("keys sort by UTF-16 code units, not code points: U+1F600 before U+E000",
     '{"\\ue000":1,"\\ud83d\\ude00":2}', None),
    ("RFC 8785 section 3.2.3 sorting example",
     '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",'
     '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
     None),
    ("RFC 8785 section 3.2.2 example",
     '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],'
     '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
     None),
    ("keys: empty, case, prefixes", '{"b":1,"aa":2,"a":3,"B":4,"":5,"A":6}', None),
    ("number 1.0 becomes 1", "1.0", None),
    ("number 1e21 takes exponent form", "1e21", None),
    ("number 1e15 is written in full", "1e15", None),
    ("number 1e-7 takes exponent form", "1e-7", None),
    ("number 1e-6 is written in full", "1e-6", None),
    ("number -0.0 becomes 0", "-0.0", None),
    ("number -0 becomes 0", "-0", None),
    ("smallest subnormal 5e-324", "5e-324", None),
    ("largest double", "1.7976931348623157e308", None),
    ("2^53 is accepted", "9007199254740992", None),
    ("-2^53 is accepted", "-9007199254740992", None),
    ("2^53-1", "9007199254740991", None),
    ("shortest round-trip form of 0.1+0.2", "0.30000000000000004", None),
    ("negative exponents and fractions", "[-1.5e-10,0.5,-0.25,100,1E2,12.340]", None),
    ("array order is kept", "[3,1,2,[\"b\",\"a\"]]", None),
    ("nested arrays", "[[[]],[[1,[2,[3,[]]]]],{}]", None),
    ("nested objects are sorted at every depth",
     '{"z":{"y":{"x":[{"b":1,"a":2}],"w":null},"a":[]},"m":{"c":{},"b":[{"d":1,"c":2}]}}', None),
    ("object hash input with null file and content hashes (a stub)",
     '{"file_hash":null,"content_hash":null,'
     '"metadata_hash":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}', None),
    ("toolcall metadata without the optional fields",
     '{"tool":"read_file","args":{"path":"/a.md","limit":10},"status":"ok","chat_ref":"chat:s1"}', None),
    ("toolcall metadata with args_display and file_refs",
     '{"tool":"read_file","args":{"path":"/a.md","limit":10},"args_display":"read /a.md",'
     '"status":"ok","chat_ref":"chat:s1","file_refs":["f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"]}',
     None),
]

# --- (b) raw bytes -> sha256 --------------------------------------------------------------------

BYTES_CASES = [
    ("seed: hello world", {"utf8": "hello world"},
     "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"),
    ("empty input", {"hex": ""}, None),
    ("abc (FIPS 180-2)", {"utf8": "abc"}, None),
    ("the bytes of {} equal the JSON case", {"utf8": "{}"},
     "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
    ("non-UTF-8 bytes", {"hex": "ff00fe"}, None),
    ("non-ASCII text is hashed as UTF-8", {"utf8": "h\u00e9llo \U0001F600\n"}, None),
    ("CRLF line endings are bytes like any other", {"utf8": "a\r\nb\r\n"}, None),
    ("UTF-8 byte-order mark", {"hex": "efbbbf6869"}, None),
    ("every byte value once", {"hex": bytes(range(256)).hex()}, None),
]

# --- (c) input -> expected error ---------------------------------------------------------------

ERROR_CASES = [
    ("2^53+1 at the top", "9007199254740993", "$"),
    ("-2^53-1 at the top", "-9007199254740993", "$"),
    ("2^53+1 in toolcall args", '{"args":{"n":9007199254740993}}', "$.args.n"),
    ("u64::MAX inside an array", "[1,[2,18446744073709551615]]", "$[1][1]"),
    ("a double written 1e18 canonicalises to the integer 1000000000000000000", '{"size":1e18}',
     "$.size"),
    ("the double 1e20 canonicalises to 100000000000000000000", "1e20", "$"),
    ("the double 2^53+2 canonicalises to an integer beyond 2^53", "[9007199254740994.0]", "$[0]"),
]


def refused(value) -> bool:
    """Whether canonical JSON must refuse `value`: the package refuses it (an integer beyond
    2^53), or its canonical text, read back, is such an integer (a double like 1e18 that JCS
    writes as 1000000000000000000), so the text would not be canonical JSON of anything."""
    try:
        text = rfc8785.dumps(to_jcs_domain(value))
    except rfc8785.IntegerDomainError:
        return True
    try:
        rfc8785.dumps(to_jcs_domain(json.loads(text)))
    except rfc8785.IntegerDomainError:
        return True
    return False

# An envelope (without hashes) whose toolcall args hold 2^53+1: building the object must fail.
ERROR_OBJECTS = [
    ("toolcall whose args hold 2^53+1",
     {"xt/id": "toolcall:big", "type": "toolcall", "source": None, "content": "ok",
      "tool": "seek", "args": {"offset": 9007199254740993, "path": "/a"}, "status": "ok",
      "chat_ref": "chat:s1"},
     "$.args.offset"),
    ("toolcall whose args hold -2^53-1 deep inside",
     {"xt/id": "toolcall:neg", "type": "toolcall", "source": None, "content": "",
      "tool": "t", "args": {"a": [{"b": -9007199254740993}]}, "status": "fail",
      "chat_ref": "chat:s1"},
     "$.args.a[0].b"),
]

# --- whole objects --------------------------------------------------------------------------

FIELD_NAMES = {
    "file": ["file_type", "char_count"],
    "toolcall": ["tool", "args", "args_display", "status", "chat_ref", "file_refs"],
    "chat": ["turns", "session_ref", "turn_count", "toolcall_refs"],
    "system_prompt": [],
    "session_config": [],
    "session": ["session_id", "chat_ref", "system_prompt_ref", "session_index",
                "metadata_pool", "active_set", "pinned_set"],
}


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def file_type_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    ext = os.path.splitext(name)[1][1:]
    return ext.lower() if ext else "text"


def transcript(turns) -> str:
    return "\n\n".join(f"{t['role']}: {t['content']}" for t in turns)


def envelope(object_type, xt_id, source, file_hash, content, fields, content_omitted=None):
    """The envelope strata prints, every hash computed here, plus the canonical hash inputs."""
    if source is not None:
        identity_input = {"type": object_type, "source": source}
        identity = sha256_json(identity_input)
        xt_id = identity
    else:
        identity_input = {"type": object_type, "xt/id": xt_id}
        identity = sha256_json(identity_input)
    metadata = {k: fields[k] for k in FIELD_NAMES[object_type] if k in fields}
    assert set(fields) == set(metadata), fields
    content_hash = None if content is None else sha256_hex(content.encode("utf-8"))
    metadata_hash = sha256_json(metadata)
    composite = {"file_hash": file_hash, "content_hash": content_hash,
                 "metadata_hash": metadata_hash}
    env = {"xt/id": xt_id, "type": object_type, "source": source, "identity_hash": identity,
           "file_hash": file_hash, "content_hash": content_hash,
           "metadata_hash": metadata_hash, "object_hash": sha256_json(composite),
           "content": content}
    env.update(metadata)
    if content_omitted is not None:
        env["content_omitted"] = content_omitted
    canonical = {"identity": jcs(identity_input), "metadata": jcs(metadata),
                 "object": jcs(composite)}
    return env, canonical


def fs(path, fsid="abc123"):
    return {"type": "filesystem", "filesystemId": fsid, "path": path}


def text_file(path, text, fsid="abc123"):
    return envelope("file", None, fs(path, fsid), sha256_hex(text.encode("utf-8")), text,
                    {"file_type": file_type_of(path), "char_count": utf16_len(text)})


def omitted_file(path, data, reason):
    return envelope("file", None, fs(path), None if data is None else sha256_hex(data), None,
                    {"file_type": file_type_of(path), "char_count": 0}, reason)


def chat(sid, turns):
    refs = [r for t in turns for r in t.get("toolcall_refs", [])]
    return envelope("chat", f"chat:{sid}", None, None, transcript(turns),
                    {"turns": turns, "session_ref": f"session:{sid}",
                     "turn_count": len(turns), "toolcall_refs": refs})


def session(sid, index, pool, active, pinned):
    return envelope("session", f"session:{sid}", None, None, None,
                    {"session_id": sid, "chat_ref": f"chat:{sid}",
                     "system_prompt_ref": f"system_prompt:{sid}", "session_index": index,
                     "metadata_pool": pool, "active_set": active, "pinned_set": pinned})


F1 = "f3f787d0f406f44809f3dae04c581df45534db3d6a92d5d8e435b6529d0f75f3"
SID = "01J9ZQ4T5XKD8E2M3N4P5Q6R7S"
BINARY = bytes([0xFF, 0x00, 0xFE, 0x89, 0x50, 0x4E, 0x47])

OBJECT_CASES = [
    ("seed file: abc123 /tmp/test.md holding hello world",
     text_file("/tmp/test.md", "hello world"), {"bytes_utf8": "hello world"}),
    ("file with non-ASCII and astral content, upper-case extension",
     text_file("/home/ana/Notes.MD", "h\u00e9llo \U0001F600 \u65e5\u672c\n"),
     {"bytes_utf8": "h\u00e9llo \U0001F600 \u65e5\u672c\n"}),
    ("file without extension, control characters in content",
     text_file("/src/Makefile", "all:\n\techo \x1b[1mhi\x1b[0m\r\n", fsid="fs-2"),
     {"bytes_utf8": "all:\n\techo \x1b[1mhi\x1b[0m\r\n"}),
    ("empty file: content is the empty string, not null",
     text_file("/tmp/.gitignore", ""), {"bytes_utf8": ""}),
    ("file stub: known by path only", omitted_file("/src/lib.rs", None, None), {}),
    ("binary file: content null, file_hash over the bytes",
     omitted_file("/img/logo.PNG", BINARY, "binary"), {"bytes_hex": BINARY.hex()}),
    ("file over the content limit",
     omitted_file("/var/log/big.log", b"x" * 4096, "too_large"), {}),
    ("denied file: no hash of its bytes", omitted_file("/home/ana/.env", None, "denied"), {}),
    ("seed toolcall id, optional fields absent",
     envelope("toolcall", "toolcall:tc-12345", None, None, "hello world",
              {"tool": "read_file", "args": {"path": "/tmp/test.md"}, "status": "ok",
               "chat_ref": f"chat:{SID}"}), {}),
    ("toolcall with args_display and file_refs present",
     envelope("toolcall", "toolcall:tc-2", None, None, "wrote 3 lines",
              {"tool": "write_file",
               "args": {"path": "/tmp/test.md", "lines": ["a", "b", "c"], "append": False,
                        "mode": 420, "ratio": 0.5, "meta": None},
               "args_display": "write /tmp/test.md (3 lines)", "status": "ok",
               "chat_ref": f"chat:{SID}", "file_refs": [F1]}), {}),
    ("failed toolcall with an empty file_refs list and an empty output",
     envelope("toolcall", "call_\u00e9\U0001F600", None, None, "",
              {"tool": "grep", "args": {}, "status": "fail", "chat_ref": f"chat:{SID}",
               "file_refs": []}), {}),
    ("toolcall with args_display only",
     envelope("toolcall", "toolcall:tc-3", None, None, "error: no such file\n",
              {"tool": "cat", "args": {"\ue000": 1, "\U0001F600": 2, "n": 9007199254740992},
               "args_display": "cat \u2028", "status": "fail", "chat_ref": f"chat:{SID}"}), {}),
    ("chat: turns with and without toolcall_refs",
     chat(SID, [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "read /tmp/test.md"},
                {"role": "assistant", "content": "reading it",
                 "toolcall_refs": ["toolcall:tc-12345", "toolcall:tc-2"]},
                {"role": "tool", "content": "hello world"},
                {"role": "assistant", "content": "it says h\u00e9llo \U0001F600",
                 "toolcall_refs": ["toolcall:tc-3"]}]), {}),
    ("chat with no turns", chat("s-empty", []), {}),
    ("system prompt",
     envelope("system_prompt", f"system_prompt:{SID}", None, None,
              "You are a careful agent.\nAnswer in \u65e5\u672c\u8a9e when asked.", {}), {}),
    ("session configuration (strata's sixth type: no metadata fields, content is the record)",
     envelope("session_config", f"session_config:{SID}", None, None,
              '{"default_filesystem_id":"abc123","format":1,"mounts":[]}', {}), {}),
    ("session with populated sets",
     session(SID, [F1, "toolcall:tc-12345", "toolcall:tc-2"], [F1, "toolcall:tc-2"],
             ["toolcall:tc-2", F1], [F1]), {}),
    ("new session with empty sets", session("s-empty", [], [], [], []), {}),
]


def build():
    cases = []
    for name, text, expected in JSON_CASES:
        value = json.loads(text)
        assert not refused(value), name
        canonical = jcs(value)
        digest = sha256_hex(canonical.encode("utf-8"))
        if expected is not None:
            assert digest == expected, (name, digest)
        cases.append({"name": name, "kind": "json", "input": text, "canonical": canonical,
                      "sha256": digest})
    for name, data, expected in BYTES_CASES:
        raw = bytes.fromhex(data["hex"]) if "hex" in data else data["utf8"].encode("utf-8")
        digest = sha256_hex(raw)
        if expected is not None:
            assert digest == expected, (name, digest)
        case = {"name": name, "kind": "bytes"}
        case.update({("input_hex" if k == "hex" else "input_utf8"): v for k, v in data.items()})
        case["sha256"] = digest
        cases.append(case)
    for name, text, at in ERROR_CASES:
        assert refused(json.loads(text)), name
        cases.append({"name": name, "kind": "error", "input": text,
                      "error": "integer beyond +-2^53", "at": at})
    for name, env, at in ERROR_OBJECTS:
        assert refused(env), name
        cases.append({"name": name, "kind": "object_error", "envelope": env,
                      "error": "integer beyond +-2^53", "at": at})
    for name, (env, canonical), extra in OBJECT_CASES:
        case = {"name": name, "kind": "object", "envelope": env, "canonical": canonical}
        case.update(extra)
        cases.append(case)
    # The seed's published values, checked again where they appear inside objects.
    assert OBJECT_CASES[0][1][0]["identity_hash"] == JSON_CASES[0][2]
    assert OBJECT_CASES[0][1][0]["file_hash"] == BYTES_CASES[0][2]
    assert OBJECT_CASES[8][1][0]["identity_hash"] == JSON_CASES[1][2]
    assert OBJECT_CASES[14][1][0]["metadata_hash"] == JSON_CASES[2][2]
    # originals.md abbreviates this one as 9770db46...6347; the full digest ends in ...06d347
    # (coreutils sha256sum agrees), so the note's last four characters are a slip.
    assert cases[3]["sha256"].startswith("9770db46")
    return cases


COMMENT = (
    "Test vectors for strata's canonical JSON (RFC 8785, JCS) and SHA-256 object hashes. "
    "Every expected value was produced by an implementation independent of strata: "
    f"Python {sys.version.split()[0]} with the PyPI package rfc8785 "
    f"{importlib.metadata.version('rfc8785')} for canonical JSON and hashlib for SHA-256, "
    "by running `pip install rfc8785==0.1.4; python3 tools/gen_vectors.py > schema/vectors.json` "
    "(the script re-implements the five hashes of DESIGN.md 'Objects and hashes' and never calls strata). "
    "All hashes are SHA-256 as 64 lowercase hex characters; all text is UTF-8. Kinds: "
    "'json': `input` is JSON text (kept as text so that number spellings like 1.0 or 1E30 survive); "
    "`canonical` is its RFC 8785 form and `sha256` the hash of that form's UTF-8 bytes. "
    "'bytes': the raw input is `input_hex` (hex) or `input_utf8` (a string, hashed as UTF-8); `sha256` is its hash. "
    "'error': `input` is JSON text holding an integer beyond +-2^53, or a double that JCS writes as one "
    "(1e18 -> 1000000000000000000); canonicalising it must fail (a double cannot hold such an integer, so its hash "
    "would not be the hash of the stored value, and the canonical text of such a double would not be accepted "
    "back) with a message naming the place `at` (a JSON path). The script checks each with the package: it "
    "refuses the input, or refuses the input's canonical text read back. strata accepts +-2^53 itself, which a double holds exactly; the rfc8785 "
    "package stops at 2^53-1, so the script hands +-2^53 to it as a float. "
    "'object_error': `envelope` is an envelope without its hashes whose hashed field holds such an integer; "
    "building the object must fail naming `at`. "
    "'object': `envelope` is exactly what strata prints for the object (`strata show --json`, Object::to_json): "
    "identity_hash = H(JCS({type, source})) for files (xt/id is that hash) or H(JCS({type, 'xt/id'})); "
    "file_hash = H(raw bytes) (files only, null for stubs and denied files); content_hash = H(content) or null; "
    "metadata_hash = H(JCS(the type's metadata fields, absent optional fields omitted)); "
    "object_hash = H(JCS({file_hash, content_hash, metadata_hash})). `canonical` gives the three JCS texts "
    "hashed for identity, metadata and object; `bytes_utf8`/`bytes_hex`, when present, are the file's raw bytes. "
    "char_count counts UTF-16 code units; file_type is the lowercase extension of the last path segment or 'text'; "
    "a chat's content is its turns as 'role: content' blocks joined by a blank line; content_omitted is outside every hash."
)


def main():
    out = {"_comment": COMMENT, "cases": build()}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
